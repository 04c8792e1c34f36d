/* analyzer/straggler.c: who arrives last at each collective, and whether it is always the
 * same rank. The rules are in analyzer.h's comment; here, why they are what they are.
 *
 * Arrival, not duration: a collective ends together everywhere, so the ranks that came early
 * show the long durations and the late one the short. Only arrivals name a straggler.
 * GPU starts go through cpa_clock_gpu_job_ns, which removes each rank's own GPU time
 * conversion error (a healthy rank looked 2-6 ms late in every collective without it).
 * An operation is judged only when its arrivals are alike: all GPU starts, or all host
 * entries. A GPU start comes after its host entry by the stream's backlog, so comparing one
 * rank's GPU start with another's host entry would call the first late for its own queue.
 * Captured calls (CUDA graphs) say nothing of when the graph ran, and are not judged.
 * The threshold is CPA_LATE_MIN_US within one clock domain, where there is no alignment
 * error, and max(CPA_LATE_MIN_US, 4 x clock error) for an operation spanning domains.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* Who is reported. Lateness alone does not make a straggler: on a loaded host any rank can
 * miss its slot for a few ms now and then (8 emulated ranks on 2 cores: 5-40 % of a healthy
 * job's collectives had a rank over 1 ms late, spread over the ranks, and a short burst put
 * one rank behind in 5 of 16), so a report rests on how often, not on one bad moment:
 *   persistent  a rank late in at least half of the judged collectives it took part in
 *               (and at least MIN_LATE_COUNT times): a slow GPU, a throttled host, a rank
 *               with more work, whatever the cause, is late nearly always;
 *   rotating    no such rank, but at least half of all judged collectives had a late rank,
 *               out of at least ROTATING_MIN_JUDGED (a 16-collective job under a CI load
 *               once had 8 late, 4 each on two ranks: a burst, not a pattern): then each
 *               rank late at least MIN_LATE_COUNT times and in MIN_LATE_SHARE of its
 *               collectives is listed, since lateness is the rule there, not chance.
 * Anything less (a healthy job's hiccups) reports no straggler. kind says which, and is
 * PERSISTENT only when the most often late rank also holds PERSISTENT_SHARE_OF_LATE of all
 * late collectives (two ranks sharing the lateness are a rotation between them). */
#define MIN_LATE_COUNT 3
#define MIN_LATE_SHARE 0.01
#define PERSISTENT_MIN_SHARE 0.5
#define ROTATING_MIN_LATE_FRACTION 0.5
#define ROTATING_MIN_JUDGED 30
#define PERSISTENT_SHARE_OF_LATE 0.6

static int cmp_row(const void *x, const void *y)
{
    const cpa_straggler *p = x, *q = y;
    if (p->late_us_total != q->late_us_total)
        return p->late_us_total > q->late_us_total ? -1 : 1;
    return p->rank < q->rank ? -1 : p->rank > q->rank;
}

const char *cpa_late_cause_name(int cause)
{
    switch (cause) {
    case CPA_CAUSE_HOST: return "host";
    case CPA_CAUSE_BACKLOG: return "gpu_backlog";
    case CPA_CAUSE_COLLECTIVE: return "in_collective";
    case CPA_CAUSE_MIXED: return "mixed";
    default: return "none";
    }
}

/* How far back a late rank's calls are searched for the NCCL operation its stream was in:
 * a group of send/recv to many peers is many calls on one stream. */
#define HELD_SEARCH 256

/* Why the late part k came late (enum cpa_late_cause in analyzer.h), its host lateness in
 * *host_us, and in *held the earlier call its stream was still in (COLLECTIVE). arr holds the
 * arrivals, late the lateness (ns) and ent is scratch of nparts. */
static int late_cause(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                      const cpa_op *o, int timed, const int64_t *arr, uint32_t k, double late,
                      int64_t *ent, double *host_us, const cpa_call **held)
{
    const cpa_part *p = &mt->parts[o->first_part];
    size_t n = 0;
    int64_t mine = 0;
    for (uint32_t j = 0; j < o->nparts; j++) {
        /* each part's call lies anywhere in the model: asked for a few parts ahead (each
           read was a cache miss, most of the stage's time on a 1024-rank job) */
        if (j + 8 < o->nparts)
            __builtin_prefetch(&m->ranks[p[j + 8].rank_idx].calls[p[j + 8].call_idx].enter_ns);
        const cpa_call *call = &m->ranks[p[j].rank_idx].calls[p[j].call_idx];
        int64_t e = (int64_t)cpa_clock_job_ns(m, c, p[j].rank_idx, call->enter_ns);
        if (j == k)
            mine = e;
        else
            ent[n++] = e;
    }
    /* the others' median entry: lower middle, as their arrivals' (judge); selected, not
     * sorted (a sort of every late operation's entries was a sixth of the stage) */
    int64_t med = cpa_select_i64(ent, n, (n - 1) / 2);
    *host_us = (double)(mine - med) / 1e3;
    *held = NULL;
    if (!timed)
        return CPA_CAUSE_HOST; /* its arrival is its entry */
    /* The stream's latest earlier NCCL operation and when it ended on the GPU. */
    const cpa_rank *r = &m->ranks[p[k].rank_idx];
    const cpa_call *me = &r->calls[p[k].call_idx], *prev = NULL;
    int64_t prev_end = INT64_MIN;
    for (size_t i = p[k].call_idx, seen = 0; i-- > 0 && seen < HELD_SEARCH; seen++) {
        const cpa_call *c2 = &r->calls[i];
        /* a member of my own group shares my span: not before me */
        if (c2->stream != me->stream || !c2->gpu_timed || c2->gpu_start_ns >= me->gpu_start_ns)
            continue;
        prev = c2;
        prev_end = (int64_t)cpa_clock_gpu_job_ns(m, c, p[k].rank_idx, c2->gpu_end_ns);
        break;
    }
    /* The GPU starts the collective once its host enqueued it and its stream is free. The
     * host is the cause when its stream was free by the time it enqueued (else the stream,
     * not the host, was the gate: a host that enqueues ahead may enter late against the
     * other hosts and still be early for its own stream) and it entered at least half the
     * lateness after the other hosts (their launch latency is theirs too: a loaded machine's
     * stream workers start every collective tens of ms after its entry). Else the earlier
     * NCCL operation that held the stream past half the lateness after the others' GPU
     * starts (arr[k] - late is their median); neither: other GPU work held it. */
    double half = (double)arr[k] - late / 2;
    if (mine >= prev_end && (double)(mine - med) >= late / 2)
        return CPA_CAUSE_HOST;
    if (prev && (double)prev_end >= half) {
        *held = prev;
        return CPA_CAUSE_COLLECTIVE;
    }
    return CPA_CAUSE_BACKLOG;
}

typedef struct acc {
    uint64_t judged;
    uint64_t late;
    double late_us;
    double wait_us;
    int32_t row;      /* index into rows, -1 none */
    uint64_t by_cause[CPA_CAUSES];
    const cpa_call *held; /* the last earlier NCCL call found holding its stream */
} acc;

/* Judges one operation: returns 1 and fills the late rank's part index and lateness when
 * it had one, 0 when not, -1 when it cannot be judged. arr is scratch of nparts + others. */
static int judge(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                 const cpa_op *o, double thr_span_us, int64_t *arr, double *others,
                 int64_t *ent, acc *a, uint32_t *late_part, double *late_us, int *cause,
                 double *host_us, const cpa_call **held)
{
    if (!o->complete || o->nparts < 2 || o->sender >= 0 || cp_op_is_p2p(o->op))
        return -1;
    const cpa_part *p = &mt->parts[o->first_part];
    /* one pass over the parts (most operations are a host's few, where a second pass was a
     * tenth of their cost), the arrivals taken before knowing they are wanted */
    unsigned timed = 0, captured = 0;
    uint32_t last = 0;
    int spans = 0;
    for (uint32_t k = 0; k < o->nparts; k++) {
        timed += p[k].gpu_timed;
        captured |= p[k].captured;
        arr[k] = (int64_t)cpa_part_arrival_job_ns(m, mt, c, &p[k]);
        if (arr[k] > arr[last])
            last = k;
        if (c->rank_domain && c->rank_domain[p[k].rank_idx] != c->rank_domain[p[0].rank_idx])
            spans = 1;
    }
    if (captured || (timed && timed != o->nparts)) /* all timed, or none */
        return -1;
    const double thr = spans ? thr_span_us : CPA_LATE_MIN_US;
    size_t n = 0, near = 0;
    for (uint32_t k = 0; k < o->nparts; k++) {
        a[p[k].rank_idx].judged++;
        a[p[k].rank_idx].wait_us += (double)(arr[last] - arr[k]) / 1e3;
        if (k != last) {
            others[n] = (double)(arr[last] - arr[k]);
            near += others[n++] / 1e3 <= thr;
        }
    }
    /* The latest minus the others' median: how far behind the crowd it came, not behind
     * the earliest (one early rank would make everyone else look late). When more than
     * half of the gaps are within the threshold, so is their median (x / 1e3 keeps order):
     * not late, known without the selection (most operations of a job; the selections
     * were a third of the stage). */
    if (near > (n - 1) / 2)
        return 0;
    double late = cpa_select(others, n, (n - 1) / 2) / 1e3;
    if (late <= thr)
        return 0;
    *late_part = last;
    *late_us = late;
    *cause = late_cause(m, mt, c, o, timed != 0, arr, last, late * 1e3, ent, host_us, held);
    return 1;
}

static int build_rows(const cpa_model *m, const cpa_matched *mt, acc *a, cpa_stragglers *out)
{
    size_t nrows = 0;
    int persistent = 0;
    for (size_t i = 0; i < m->nranks; i++)
        if (a[i].late >= MIN_LATE_COUNT &&
            (double)a[i].late >= PERSISTENT_MIN_SHARE * (double)a[i].judged)
            persistent = 1;
    int rotating = !persistent && out->judged >= ROTATING_MIN_JUDGED &&
                   (double)out->late >= ROTATING_MIN_LATE_FRACTION * (double)out->judged;
    for (size_t i = 0; i < m->nranks; i++) {
        a[i].row = -1;
        double share_min = persistent ? PERSISTENT_MIN_SHARE : MIN_LATE_SHARE;
        if ((persistent || rotating) && a[i].late >= MIN_LATE_COUNT &&
            (double)a[i].late >= share_min * (double)a[i].judged)
            a[i].row = (int32_t)nrows++;
    }
    if (!nrows)
        return 0;
    out->rows = calloc(nrows, sizeof *out->rows);
    double **vals = calloc(nrows, sizeof *vals), **hv = calloc(nrows, sizeof *hv),
           **gv = calloc(nrows, sizeof *gv);
    size_t *nv = calloc(nrows, sizeof *nv), *ng = calloc(nrows, sizeof *ng);
    int rc = -1;
    if (!out->rows || !vals || !hv || !gv || !nv || !ng)
        goto done;
    for (size_t i = 0; i < m->nranks; i++) {
        if (a[i].row < 0)
            continue;
        cpa_straggler *s = &out->rows[a[i].row];
        *s = (cpa_straggler){.rank_idx = (uint32_t)i, .rank = m->ranks[i].rank,
                             .late_count = a[i].late, .late_us_total = a[i].late_us,
                             .share = a[i].judged ? (double)a[i].late / (double)a[i].judged : 0,
                             .wait_us_total = a[i].wait_us, .held_nranks = -1};
        cpa_straggler *s2 = &out->rows[a[i].row];
        memcpy(s2->by_cause, a[i].by_cause, sizeof s2->by_cause);
        s2->cause = CPA_CAUSE_MIXED;
        for (int k = CPA_CAUSE_HOST; k < CPA_CAUSES; k++)
            if ((double)a[i].by_cause[k] >= CPA_CAUSE_MIN_SHARE * (double)a[i].late)
                s2->cause = k;
        if (a[i].held) { /* a call of rank i's own (late_cause) */
            s2->held_op = a[i].held->op;
            s2->held_nranks = cpa_call_nranks(&m->ranks[i], a[i].held);
            s2->held_comm_id = cpa_call_comm_id(&m->ranks[i], a[i].held);
        }
        size_t nl = a[i].late ? a[i].late : 1;
        if (!(vals[a[i].row] = malloc(nl * sizeof **vals)) ||
            !(hv[a[i].row] = malloc(nl * sizeof **hv)) ||
            !(gv[a[i].row] = malloc(nl * sizeof **gv)))
            goto done;
    }
    for (size_t i = 0; i < mt->nops; i++) {
        int32_t r = out->op_late_rank_idx[i];
        if (r < 0 || a[r].row < 0)
            continue;
        size_t row = (size_t)a[r].row;
        hv[row][nv[row]] = out->op_host_late_us[i];
        vals[row][nv[row]++] = out->op_late_us[i];
        if (mt->parts[mt->ops[i].first_part].gpu_timed)
            gv[row][ng[row]++] = out->op_late_us[i];
    }
    for (size_t k = 0; k < nrows; k++) {
        cpa_sort_doubles(vals[k], nv[k]);
        cpa_sort_doubles(hv[k], nv[k]);
        cpa_sort_doubles(gv[k], ng[k]);
        out->rows[k].late_us_p50 = vals[k][(nv[k] + 1) / 2 - 1]; /* nearest rank */
        out->rows[k].host_late_us_p50 = hv[k][(nv[k] + 1) / 2 - 1];
        out->rows[k].gpu_late_us_p50 = ng[k] ? gv[k][(ng[k] + 1) / 2 - 1] : NAN;
    }
    qsort(out->rows, nrows, sizeof *out->rows, cmp_row);
    out->nrows = nrows;
    rc = 0;
done:
    for (size_t k = 0; k < nrows; k++) {
        if (vals)
            free(vals[k]);
        if (hv)
            free(hv[k]);
        if (gv)
            free(gv[k]);
    }
    free(vals);
    free(hv);
    free(gv);
    free(nv);
    free(ng);
    return rc;
}

int cpa_stragglers_compute(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                           cpa_stragglers *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t maxp = 0;
    for (size_t i = 0; i < mt->nops; i++)
        if (mt->ops[i].nparts > maxp)
            maxp = mt->ops[i].nparts;
    out->op_late_rank_idx = malloc((mt->nops ? mt->nops : 1) * sizeof *out->op_late_rank_idx);
    out->op_late_us = calloc(mt->nops ? mt->nops : 1, sizeof *out->op_late_us);
    out->op_cause = calloc(mt->nops ? mt->nops : 1, sizeof *out->op_cause);
    out->op_host_late_us = calloc(mt->nops ? mt->nops : 1, sizeof *out->op_host_late_us);
    acc *a = calloc(m->nranks ? m->nranks : 1, sizeof *a);
    int64_t *arr = malloc((maxp ? maxp : 1) * sizeof *arr);
    int64_t *ent = malloc((maxp ? maxp : 1) * sizeof *ent);
    double *others = malloc((maxp ? maxp : 1) * sizeof *others);
    if (!out->op_late_rank_idx || !out->op_late_us || !out->op_cause || !out->op_host_late_us ||
        !a || !arr || !ent || !others)
        goto oom;
    out->threshold_us = fmax(CPA_LATE_MIN_US, 4 * c->error_us);
    for (size_t i = 0; i < mt->nops; i++) {
        out->op_late_rank_idx[i] = -1;
        uint32_t k;
        double late_us, host_us = 0;
        int cause = CPA_CAUSE_NONE;
        const cpa_call *held = NULL;
        int v = judge(m, mt, c, &mt->ops[i], out->threshold_us, arr, others, ent, a, &k,
                      &late_us, &cause, &host_us, &held);
        if (v < 0)
            continue;
        out->judged++;
        if (!v)
            continue;
        uint32_t r = mt->parts[mt->ops[i].first_part + k].rank_idx;
        out->late++;
        out->op_late_rank_idx[i] = (int32_t)r;
        out->op_late_us[i] = (float)late_us;
        out->op_cause[i] = (uint8_t)cause;
        out->op_host_late_us[i] = (float)host_us;
        a[r].late++;
        a[r].late_us += late_us;
        a[r].by_cause[cause]++;
        if (held)
            a[r].held = held;
    }
    if (build_rows(m, mt, a, out))
        goto oom;
    if (out->nrows) {
        const cpa_straggler *most = &out->rows[0];
        for (size_t k = 1; k < out->nrows; k++)
            if (out->rows[k].late_count > most->late_count)
                most = &out->rows[k];
        out->kind = most->share >= PERSISTENT_MIN_SHARE &&
                            (double)most->late_count >=
                                PERSISTENT_SHARE_OF_LATE * (double)out->late
                        ? CPA_STRAGGLER_PERSISTENT
                        : CPA_STRAGGLER_ROTATING;
    }
    free(a);
    free(arr);
    free(ent);
    free(others);
    return 0;
oom:
    free(a);
    free(arr);
    free(ent);
    free(others);
    cpa_stragglers_free(out);
    snprintf(err, errlen, "out of memory finding stragglers");
    return -1;
}

void cpa_stragglers_free(cpa_stragglers *s)
{
    free(s->rows);
    free(s->op_late_rank_idx);
    free(s->op_late_us);
    free(s->op_cause);
    free(s->op_host_late_us);
    memset(s, 0, sizeof *s);
}
