/* perfetto_piece: which calls a piece of the job keeps (issue 20): a window of job time, a
 * set of ranks, and a cap on events that keeps the job's end (the window's start moves
 * later until what starts in it fits). Then, per operation, the first and last arrivals
 * among its calls in the piece, which its flow arrows join. Each pass over the calls costs
 * a span lookup per call: one pass counts the calls kept and their events, which is all an
 * uncapped piece needs; a cap adds its histogram and a recount of the window it chose (the
 * header's count must be the written one, not a bin's estimate of it). */
#include <stdlib.h>

#include "exporters/exporters.h"
#include "exporters/perfetto_internal.h"

/* Bins of the job time line for the cap's histogram: the start moves in by a bin at most
 * 1/4096 of the window too far. */
#define CAP_BINS 4096

/* A call's measured slice, ns since the job's start. */
static void call_span_rel(const cpa_analysis *a, size_t ri, const cpa_call *c, int64_t *ts,
                          int64_t *te)
{
    uint64_t s, e;
    int unfinished;
    cpa_call_span_job_ns(a, ri, c, &s, &e, &unfinished);
    *ts = (int64_t)(s - a->start_ns);
    *te = (int64_t)(e - a->start_ns);
}

/* The events a call writes at most: its slice, and its wait in an operation of 2+ ranks. */
static unsigned call_cost(const cpa_analysis *a, size_t ri, size_t ci)
{
    uint32_t oi = cpa_call_op(a, ri, ci);
    return 1u + (oi != CPA_NO_OP && a->matched.ops[oi].nparts >= 2);
}

/* The calls in the piece as it stands, and what they cost in events. */
static void count(const pw *p, uint64_t *calls, uint64_t *cost)
{
    const cpa_model *m = p->a->model;
    *calls = *cost = 0;
    for (size_t ri = 0; ri < m->nranks; ri++)
        for (size_t ci = 0; cpx_pw_rank_in_piece(p, ri) && ci < m->ranks[ri].ncalls; ci++) {
            int64_t ts, te;
            call_span_rel(p->a, ri, &m->ranks[ri].calls[ci], &ts, &te);
            if (cpx_pw_in_piece(p, ri, ts, te)) {
                (*calls)++;
                *cost += call_cost(p->a, ri, ci);
            }
        }
}

/* Over max_events, the window's start moves later until the calls starting in it cost about
 * max_events (a histogram of starts over the window, counted from its end). */
static int apply_cap(pw *p, uint64_t max_events, uint64_t cost, int *capped)
{
    const cpa_analysis *a = p->a;
    const cpa_model *m = a->model;
    *capped = 0;
    int64_t lo = p->t0 > 0 ? p->t0 : 0;
    int64_t job_end = (int64_t)(a->duration_s * 1e9) + 1;
    int64_t hi = p->t1 < job_end ? p->t1 : job_end;
    if (cost <= max_events || hi <= lo)
        return 0;
    uint64_t *bins = calloc(CAP_BINS, sizeof *bins);
    if (!bins)
        return -1;
    double width = (double)(hi - lo) / CAP_BINS;
    for (size_t ri = 0; ri < m->nranks; ri++)
        for (size_t ci = 0; cpx_pw_rank_in_piece(p, ri) && ci < m->ranks[ri].ncalls; ci++) {
            int64_t ts, te;
            call_span_rel(a, ri, &m->ranks[ri].calls[ci], &ts, &te);
            if (!cpx_pw_in_piece(p, ri, ts, te))
                continue;
            double b = ts <= lo ? 0 : (double)(ts - lo) / width;
            size_t k = b >= CAP_BINS ? CAP_BINS - 1 : (size_t)b;
            bins[k] += call_cost(a, ri, ci);
        }
    /* from the end back, the earliest bin whose starts still fit (at least the last bin) */
    uint64_t sum = 0;
    size_t first = CAP_BINS - 1;
    for (size_t k = CAP_BINS; k-- > 0;) {
        if (sum + bins[k] > max_events && k < CAP_BINS - 1)
            break;
        sum += bins[k];
        first = k;
    }
    free(bins);
    /* the calls counted are those that start in the new window: so are the ones written
     * (one that started before and runs into it would add to the count) */
    p->t0 = lo + (int64_t)((double)first * width);
    p->start_in = 1;
    *capped = 1;
    return 0;
}

/* Per operation, the first and last arrivals among its parts in the piece (UINT32_MAX none). */
static int piece_flows(pw *p)
{
    const cpa_analysis *a = p->a;
    const cpa_model *m = a->model;
    const cpa_matched *mt = &a->matched;
    size_t n = mt->nops ? mt->nops : 1;
    p->kfirst = malloc(n * sizeof *p->kfirst);
    p->klast = malloc(n * sizeof *p->klast);
    if (!p->kfirst || !p->klast)
        return -1;
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        uint64_t lo = UINT64_MAX, hi = 0;
        p->kfirst[i] = p->klast[i] = UINT32_MAX;
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *pt = &mt->parts[o->first_part + k];
            if (pt->rank_idx >= m->nranks || pt->call_idx >= m->ranks[pt->rank_idx].ncalls)
                continue;
            const cpa_call *c = &m->ranks[pt->rank_idx].calls[pt->call_idx];
            int64_t ts, te;
            call_span_rel(a, pt->rank_idx, c, &ts, &te);
            if (!cpx_pw_in_piece(p, pt->rank_idx, ts, te))
                continue;
            uint64_t at = cpa_call_arrival_job_ns(a, pt->rank_idx, c);
            if (at < lo) {
                lo = at;
                p->kfirst[i] = k;
            }
            if (at >= hi) {
                hi = at;
                p->klast[i] = k;
            }
        }
    }
    return 0;
}

int cpx_pw_select(pw *p, uint64_t max_events, int whole, int *capped, uint64_t *kept)
{
    *capped = 0;
    if (whole && !max_events)
        return 0; /* *kept stays every call */
    uint64_t cost;
    count(p, kept, &cost);
    if (max_events && apply_cap(p, max_events, cost, capped) != 0)
        return -1;
    if (*capped)
        count(p, kept, &cost);
    else if (whole)
        return 0;
    return piece_flows(p);
}

uint64_t cpx_perfetto_piece_events(const cpa_analysis *a, const cpx_piece *piece)
{
    pw p = {.a = a, .t0 = INT64_MIN, .t1 = INT64_MAX};
    if (piece) {
        p.t0 = piece->t0_ns;
        p.t1 = piece->t1_ns;
        p.rank_keep = piece->rank_keep;
    }
    uint64_t calls, cost;
    count(&p, &calls, &cost);
    return cost;
}
