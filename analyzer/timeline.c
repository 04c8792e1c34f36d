/* analyzer/timeline.c: the job timeline every output reads. After clock alignment each call
 * has its arrival and span on the job time line (GPU times through the GPU frames, host
 * times through the host clocks), each operation its latest arrival and its first and last
 * ranks to arrive, and each call its wait: computed here once, so the report, the exporters
 * and the screens never recompute (and never disagree on) a rank's wait. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

uint64_t cpa_call_arrival_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c)
{
    if (c->gpu_timed)
        return cpa_clock_gpu_job_ns(a->model, &a->clock, rank_idx, c->gpu_start_ns);
    return cpa_clock_job_ns(a->model, &a->clock, rank_idx, c->enter_ns);
}

void cpa_call_times_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c,
                           uint64_t *start, uint64_t *end, uint64_t *enter, int *unfinished)
{
    const cpa_model *m = a->model;
    const cpa_rank *r = &m->ranks[rank_idx];
    *unfinished = 0;
    uint64_t local[3], job[3];
    if (c->gpu_timed) {
        local[0] = c->enter_ns;
        local[1] = c->gpu_start_ns;
        local[2] = c->gpu_end_ns;
        if (enter) {
            cpa_clock_job_ns_n(m, &a->clock, rank_idx, local, job, 3, 1);
            *enter = job[0];
        } else {
            cpa_clock_job_ns_n(m, &a->clock, rank_idx, local + 1, job + 1, 2, 0);
        }
    } else {
        uint64_t last = c->enter_ns + cpa_call_host_ns(c);
        if ((c->flags & CP_CALL_TIMED) && !c->done) {
            *unfinished = 1;
            if (r->last_ns > last)
                last = r->last_ns;
        }
        local[1] = c->enter_ns;
        local[2] = last;
        cpa_clock_job_ns_n(m, &a->clock, rank_idx, local + 1, job + 1, 2, 2);
        if (enter)
            *enter = job[1];
    }
    *start = job[1];
    *end = job[2] < job[1] ? job[1] : job[2];
}

void cpa_call_span_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c,
                          uint64_t *start, uint64_t *end, int *unfinished)
{
    cpa_call_times_job_ns(a, rank_idx, c, start, end, NULL, unfinished);
}

double cpa_job_ns_us(const cpa_analysis *a, uint64_t job_ns)
{
    return job_ns >= a->start_ns ? (double)(job_ns - a->start_ns) / 1e3
                                 : -(double)(a->start_ns - job_ns) / 1e3;
}

double cpa_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns)
{
    return cpa_job_ns_us(a, cpa_clock_job_ns(a->model, &a->clock, rank_idx, local_ns));
}

double cpa_gpu_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns)
{
    return cpa_job_ns_us(a, cpa_clock_gpu_job_ns(a->model, &a->clock, rank_idx, local_ns));
}

void cpa_arrivals_job(const cpa_model *m, cpa_matched *mt, const cpa_clock *c)
{
    if (mt->arrivals_job)
        return;
    cpa_clock_arrivals_job(m, c, mt->parts, mt->nparts);
    mt->arrivals_job = 1;
}

int cpa_timeline_build(const cpa_analysis *a, cpa_timeline *t)
{
    const cpa_model *m = a->model;
    const cpa_matched *mt = &a->matched;
    memset(t, 0, sizeof *t);
    size_t nops = mt->nops ? mt->nops : 1;
    t->latest_ns = calloc(nops, sizeof *t->latest_ns);
    t->first_part = calloc(nops, sizeof *t->first_part);
    t->last_part = calloc(nops, sizeof *t->last_part);
    if (!t->latest_ns || !t->first_part || !t->last_part) {
        cpa_timeline_free(t);
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *p = &mt->parts[o->first_part + k];
            /* the part's arrival is its call's (gpu start or entry): no call is read */
            uint64_t at = cpa_part_arrival_job_ns(m, mt, &a->clock, p);
            if (at < lo) {
                lo = at;
                t->first_part[i] = k;
            }
            if (at >= hi) {
                hi = at;
                t->last_part[i] = k;
            }
        }
        t->latest_ns[i] = hi;
    }
    return 0;
}

void cpa_timeline_free(cpa_timeline *t)
{
    free(t->latest_ns);
    free(t->first_part);
    free(t->last_part);
    memset(t, 0, sizeof *t);
}

int32_t cpa_op_late_rank_idx(const cpa_analysis *a, size_t op_idx)
{
    if (!a->stragglers.op_late_rank_idx || op_idx >= a->matched.nops)
        return -1;
    int32_t r = a->stragglers.op_late_rank_idx[op_idx];
    return r >= 0 && (size_t)r < a->model->nranks ? r : -1;
}

double cpa_op_late_us(const cpa_analysis *a, size_t op_idx)
{
    if (!a->stragglers.op_late_us || op_idx >= a->matched.nops)
        return 0;
    return a->stragglers.op_late_us[op_idx];
}

int64_t cpa_call_wait_ns(const cpa_analysis *a, size_t ri, size_t ci)
{
    const cpa_timeline *tl = &a->timeline;
    uint32_t oi = cpa_call_op(a, ri, ci);
    if (oi == CPA_NO_OP || a->matched.ops[oi].nparts < 2)
        return -1;
    const cpa_call *c = &a->model->ranks[ri].calls[ci];
    uint64_t arrival = cpa_call_arrival_job_ns(a, ri, c), latest = tl->latest_ns[oi];
    if (c->gpu_timed) {
        uint64_t start, end;
        int unfinished;
        cpa_call_span_job_ns(a, ri, c, &start, &end, &unfinished);
        if (latest > end)
            latest = end;
    }
    return latest > arrival ? (int64_t)(latest - arrival) : 0;
}

uint32_t cpa_call_op(const cpa_analysis *a, size_t rank_idx, size_t call_idx)
{
    const cpa_matched *mt = &a->matched;
    if (!mt->call_op || rank_idx >= mt->nranks || rank_idx >= a->model->nranks ||
        call_idx >= a->model->ranks[rank_idx].ncalls)
        return CPA_NO_OP;
    return mt->call_op[rank_idx][call_idx];
}
