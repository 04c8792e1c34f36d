/* analyzer/clock.c: every rank's CLOCK_MONOTONIC on one job time line.
 *
 * Three layers, each correcting what the one before cannot know:
 *  1. Domains. Ranks with one hostname read one CLOCK_MONOTONIC, so they are one domain and
 *     map alike; a rank whose file names no host is a domain of its own, since nothing says
 *     which clock it shares. The lowest rank's domain is the reference (domains[0]).
 *  2. Anchors. A domain's (realtime - mono) samples, from the headers and CLOCK records of all
 *     its ranks, merged: samples within CLUSTER_NS of each other become one, their median, so
 *     that one read preempted between its two clock reads is outvoted by its siblings'. Between
 *     two samples the anchor follows the straight line joining them, so a wall clock that NTP
 *     stepped or slewed during a long trace is followed instead of frozen at file creation.
 *  3. Refinement. Hosts' wall clocks agree only to NTP's precision, far coarser than the
 *     lateness we want to call. But a blocking collective (AllReduce, AllGather, ReduceScatter,
 *     AlltoAll) ends within microseconds on every rank: no rank can finish before the last
 *     one's data reached it. So the GPU ends of one such operation, put on the anchored time
 *     line, differ between domains by those domains' remaining offset. Each operation that
 *     spans domains gives one "tie" per domain it holds beyond its lowest: the difference of
 *     their median ends (the median: ranks of one domain share a clock, one odd rank must not
 *     move it; cpa_clk_consensus, better for clock_gpu.c, did worse here on the emulation).
 *     Host-only times are enqueue times, which do not end together, so an operation counts
 *     only when every rank's end is GPU-timed.
 *     Offsets and drift are solved from the ties in clock_solve.c.
 * Each rank's GPU times are then put right on top of this (clock_gpu.c: the shim converts
 * them with a reference event of each rank's own), and since ends alone cannot tell a host's
 * clock from its GPUs' conversion, each domain's offset is then checked against when its
 * launches start (clock_gpu.c, causal_shift).
 * error_us is the 90th percentile, over the operations that tie domains, of how far a
 * domain's median end still is from the first domain's, on the finished time line: the
 * spread a lateness across hosts must clear to be told from clock error. A domain with no tie
 * to the reference is left on its anchors, aligned = 0, and the error is at least
 * ANCHOR_ONLY_US.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/clock_internal.h"

#define CLUSTER_NS 100000000ull        /* 100 ms: NTP slews at most 500 ppm, i.e. 50 us here */
#define TIE_BUDGET 4096
/* Anchors alone: NTP keeps hosts on one LAN within about 0.1 to 1 ms of each other (PTP does
 * far better, but nothing in a trace says it is there). 1 ms is the figure we can defend
 * without evidence, so lateness across such a domain must exceed 4 ms to be called. */
#define ANCHOR_ONLY_US 1000.0

static int cmp_anchor(const void *x, const void *y)
{
    const cpa_anchor *p = x, *q = y;
    return (p->mono > q->mono) - (p->mono < q->mono);
}

/* ---- anchors ---- */

/* Merges the samples of domain d's ranks into clustered anchors at map->anchors + *used;
 * *dropped counts those with no usable anchor. */
static int build_anchors(const cpa_model *m, const cpa_clock *c, size_t d, cpa_anchor *dst,
                         size_t *n_out, uint64_t *dropped)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nranks; i++) {
        if (c->rank_domain[i] != d)
            continue;
        const cpa_rank *r = &m->ranks[i];
        for (size_t k = 0; k < r->nclocks; k++) {
            int64_t a;
            if (cpa_clk_sample_anchor(&r->clocks[k], &a))
                dst[n++] = (cpa_anchor){r->clocks[k].mono_ns, a, 0};
            else
                (*dropped)++;
        }
    }
    qsort(dst, n, sizeof *dst, cmp_anchor);
    int64_t *vals = malloc((n ? n : 1) * sizeof *vals);
    if (!vals)
        return -1;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && dst[j].mono - dst[i].mono < CLUSTER_NS)
            j++;
        for (size_t k = i; k < j; k++)
            vals[k - i] = dst[k].a;
        int64_t med = cpa_select_i64(vals, j - i, (j - i - 1) / 2);
        dst[out++] = (cpa_anchor){dst[i + (j - i - 1) / 2].mono, med, 0};
        i = j;
    }
    /* monos ascend strictly (clusters are CLUSTER_NS apart); anchors' differences fit */
    for (size_t i = 0; i + 1 < out; i++)
        dst[i].slope = (double)(dst[i + 1].a - dst[i].a) / (double)(dst[i + 1].mono - dst[i].mono);
    free(vals);
    *n_out = out;
    return 0;
}

/* ---- ties from the operations ---- */

int cpa_clk_blocking(unsigned op)
{
    return op == CP_OP_ALLREDUCE || op == CP_OP_ALLGATHER || op == CP_OP_REDUCESCATTER ||
           op == CP_OP_ALLTOALL;
}

uint8_t *cpa_clk_tying_ops(const cpa_matched *mt)
{
    uint8_t *ok = calloc(mt->nops ? mt->nops : 1, 1);
    for (size_t i = 0; ok && i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        if (!o->complete || o->nparts < 2 || o->sender >= 0 || !cpa_clk_blocking(o->op))
            continue;
        uint32_t k = 0;
        const cpa_part *p = &mt->parts[o->first_part];
        while (k < o->nparts && p[k].gpu_timed)
            k++;
        ok[i] = k == o->nparts;
    }
    return ok;
}

typedef struct tscratch {
    double *v;           /* an operation's ends, grouped by domain */
    uint32_t *dom;       /* each part's domain */
    uint32_t *touched;   /* the domains it holds */
    uint32_t *cnt, *at;  /* per domain */
    uint64_t *spans;     /* per domain: spanning operations it is in (beside the hub) */
    uint64_t *seen;      /* ... so far, and every stride-th of them makes a tie */
    uint64_t *stride;
    _Atomic uint32_t *finger; /* per domain: its anchor segment last found */
    uint32_t *ranks;     /* the ranks, part by part, of the operation dom, touched and cnt
                          * were found for: nranks of them, nt domains */
    uint32_t nranks, nt;
} tscratch;

/* The domains operation o holds, ascending, in x->touched; x->cnt counts parts per domain,
 * x->dom[k] is part k's. Returns how many. An operation with the ranks of the one before
 * (its communicator's next, nearly always) has its domains too: they are kept, not found
 * again part by part. */
static size_t op_domains(const cpa_matched *mt, const cpa_clock *c, const cpa_op *o,
                         tscratch *x)
{
    const cpa_part *p = &mt->parts[o->first_part];
    uint32_t same = o->nparts == x->nranks;
    for (uint32_t k = 0; same && k < o->nparts; k++)
        same = p[k].rank_idx == x->ranks[k];
    if (same)
        return x->nt;
    for (size_t i = 0; i < x->nt; i++)
        x->cnt[x->touched[i]] = 0;
    size_t nt = 0;
    for (uint32_t k = 0; k < o->nparts; k++) {
        x->ranks[k] = p[k].rank_idx;
        uint32_t d = x->dom[k] = c->rank_domain[p[k].rank_idx];
        if (!x->cnt[d]++)
            x->touched[nt++] = d;
    }
    for (size_t i = 1; i < nt; i++) /* few domains: insertion sort */
        for (size_t j = i; j > 0 && x->touched[j - 1] > x->touched[j]; j--) {
            uint32_t tmp = x->touched[j];
            x->touched[j] = x->touched[j - 1];
            x->touched[j - 1] = tmp;
        }
    x->nranks = o->nparts;
    x->nt = (uint32_t)nt;
    return nt;
}

/* The ties the first collection made, by operation: the second (final) makes the same ones
 * on the finished time line, visiting their operations only (every tying operation's
 * domains found again, to count its way to the same ones, was a fifth of the ties' cost). */
typedef struct tie_log {
    uint32_t *op, *nties; /* per operation that tied: its index (ascending), its ties */
    size_t nops, cap_ops;
    uint32_t *dom;        /* per tie, operation by operation: its domain b */
    size_t n, cap;
} tie_log;

static void tie_log_free(tie_log *g)
{
    free(g->op);
    free(g->nties);
    free(g->dom);
    memset(g, 0, sizeof *g);
}

/* Tie (operation oi, domain d) onto the log; -1 out of memory. */
static int tie_log_add(tie_log *g, size_t oi, uint32_t d)
{
    if (!g->nops || g->op[g->nops - 1] != oi) {
        size_t cap = g->cap_ops;
        if (cpa_grow((void **)&g->op, &g->cap_ops, g->nops + 1, sizeof *g->op) ||
            cpa_grow((void **)&g->nties, &cap, g->nops + 1, sizeof *g->nties))
            return -1;
        g->op[g->nops] = (uint32_t)oi;
        g->nties[g->nops++] = 0;
    }
    if (cpa_grow((void **)&g->dom, &g->cap, g->n + 1, sizeof *g->dom))
        return -1;
    g->dom[g->n++] = d;
    g->nties[g->nops - 1]++;
    return 0;
}

/* One operation's ties into *t (and each into rec, when not NULL). want[0..nwant), when not
 * NULL: the domains it tied before (rec's), made again as they are. Grouping by domain costs
 * O(parts), not a sort: the bench's 1024-rank operations made a sort per operation the
 * clocks' largest cost. */
static int op_ties(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c, int final,
                   size_t oi, tscratch *x, cpa_tie **t, size_t *n, size_t *cap, tie_log *rec,
                   const uint32_t *want, size_t nwant)
{
    const cpa_op *o = &mt->ops[oi];
    const cpa_part *p = &mt->parts[o->first_part];
    size_t nt = op_domains(mt, c, o, x);
    int rc = 0, keep = want != NULL;
    for (size_t i = 1; !want && i < nt; i++)
        keep |= x->seen[x->touched[i]]++ % x->stride[x->touched[i]] == 0;
    if (nt < 2 || !keep)
        goto out;
    /* converted only for an operation kept (a GPU conversion each of the others was 1.3 M
     * wasted on the 1024-rank job) */
    uint64_t base = final ? cpa_clock_gpu_job_ns(m, c, p[0].rank_idx, p[0].end_ns) : p[0].end_ns;
    uint32_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        x->at[x->touched[i]] = off;
        off += x->cnt[x->touched[i]];
    }
    for (uint32_t k = 0; k < o->nparts; k++) {
        uint64_t e = final ? cpa_clock_gpu_job_ns(m, c, p[k].rank_idx, p[k].end_ns) : p[k].end_ns;
        x->v[x->at[x->dom[k]]++] = (double)(int64_t)(e - base); /* exact: differences */
    }
    uint32_t hub = UINT32_MAX;
    uint64_t th = 0;
    int64_t jh = 0;
    for (size_t i = 0; i < nt; i++) {
        uint32_t d = x->touched[i], cn = x->cnt[d];
        double med = cpa_select(x->v + x->at[d] - cn, cn, (cn - 1) / 2);
        /* One of the ends, back from its double: in [0, INT64_MAX] as they all are. */
        int64_t back = cpa_clk_add((int64_t)(base > INT64_MAX ? INT64_MAX : base),
                                   cpa_round_i64(med));
        uint64_t te = back > 0 ? (uint64_t)back : 0;
        const cpa_dmap *dm = &c->map->d[d];
        /* Both job times in [0, INT64_MAX]: their difference fits. */
        int64_t je =
            (int64_t)(final ? te
                            : cpa_clk_job(te,
                                          cpa_clk_anchor_at(c->map->anchors + dm->first, dm->n,
                                                            te, &x->finger[d]),
                                          0));
        if (hub == UINT32_MAX) {
            hub = d;
            th = te;
            jh = je;
        } else if (want ? nwant && *want == d : (x->seen[d] - 1) % x->stride[d] == 0) {
            if (want) {
                want++;
                nwant--;
            }
            if (cpa_grow((void **)t, cap, *n + 1, sizeof **t)) {
                rc = -1;
                goto out;
            }
            (*t)[(*n)++] = (cpa_tie){hub, d, th, te, je - jh};
            if (rec && tie_log_add(rec, oi, d)) {
                rc = -1;
                goto out;
            }
        }
    }
out:
    return rc;
}

/* final 0: ends on the anchors alone, for solving; final 1: ends on the finished job time
 * line (GPU frames included), whose differences are what is left to measure. A domain is
 * tied to its operations' lowest domain in about TIE_BUDGET of them at most, every stride-th
 * in (comm, seq) order, so spread over the trace: medians of thousands are as good as of
 * millions (1024 ranks on 128 hosts made 4 million ties, and the solver's sorts took a second
 * and a half), spans (may be NULL) gets each domain's count of the operations that tie it,
 * kept or not. rec (may be NULL) logs the ties made; with replay instead, the ties replay
 * logged are made again, and only they. */
static int collect_ties(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                        const uint8_t *tying, int final, cpa_tie **out, size_t *nout,
                        uint64_t *spans, tie_log *rec, const tie_log *replay)
{
    size_t maxp = 1, n = 0, cap = 0, nd = c->ndomains;
    for (size_t i = 0; i < mt->nops; i++)
        maxp = mt->ops[i].nparts > maxp ? mt->ops[i].nparts : maxp;
    tscratch x = {.v = malloc(maxp * sizeof *x.v), .dom = malloc(maxp * sizeof *x.dom),
                  .touched = malloc(maxp * sizeof *x.touched),
                  .cnt = calloc(nd, sizeof *x.cnt), .at = malloc(nd * sizeof *x.at),
                  .spans = calloc(nd, sizeof *x.spans), .seen = calloc(nd, sizeof *x.seen),
                  .stride = malloc(nd * sizeof *x.stride),
                  .finger = calloc(nd, sizeof *x.finger),
                  .ranks = malloc(maxp * sizeof *x.ranks)};
    cpa_tie *t = NULL;
    int rc = -1;
    if (!x.v || !x.dom || !x.touched || !x.cnt || !x.at || !x.spans || !x.seen || !x.stride ||
        !x.finger || !x.ranks)
        goto out;
    for (size_t k = 0, at = 0; replay && k < replay->nops; at += replay->nties[k++])
        if (op_ties(m, mt, c, final, replay->op[k], &x, &t, &n, &cap, NULL, replay->dom + at,
                    replay->nties[k]))
            goto out;
    for (size_t i = 0; !replay && i < mt->nops; i++) {
        if (!tying[i])
            continue;
        size_t nt = op_domains(mt, c, &mt->ops[i], &x);
        for (size_t k = 0; k < nt; k++)
            x.spans[x.touched[k]] += nt > 1;
    }
    for (size_t d = 0; d < nd; d++) {
        x.stride[d] = x.spans[d] / TIE_BUDGET + 1;
        if (spans)
            spans[d] = x.spans[d];
    }
    for (size_t i = 0; !replay && i < mt->nops; i++)
        if (tying[i] && op_ties(m, mt, c, final, i, &x, &t, &n, &cap, rec, NULL, 0))
            goto out;
    if (rec && rec->n < rec->cap) { /* it stays through the GPU frames, at the peak */
        uint32_t *d = realloc(rec->dom, (rec->n ? rec->n : 1) * sizeof *d);
        if (d) {
            rec->dom = d;
            rec->cap = rec->n;
        }
    }
    rc = 0;
out:
    free(x.v);
    free(x.dom);
    free(x.touched);
    free(x.cnt);
    free(x.at);
    free(x.spans);
    free(x.seen);
    free(x.stride);
    free(x.finger);
    free(x.ranks);
    if (rc)
        free(t);
    *out = rc ? NULL : t;
    *nout = rc ? 0 : n;
    return rc;
}

/* What is left after everything: the spread of the domains' median ends on the finished
 * job time line (ties collected with final = 1), per domain and over the job. Measured there
 * rather than on the solver's own ties, because those also carry each rank's GPU reference
 * error, which clock_gpu.c removes afterwards: a domain of two ranks, one with a bad
 * reference, would otherwise report that rank's milliseconds as clock error. */
static int measure_error(cpa_clock *c, const cpa_tie *t, size_t nt)
{
    size_t nd = c->ndomains;
    size_t *first = calloc(nd + 1, sizeof *first), *fill = calloc(nd, sizeof *fill);
    double *y = malloc((nt ? 2 * nt : 1) * sizeof *y), *all = malloc((nt ? nt : 1) * sizeof *all);
    if (!first || !fill || !y || !all) {
        free(first);
        free(fill);
        free(y);
        free(all);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < nt; i++)
        if (c->domains[t[i].a].refined && c->domains[t[i].b].refined) {
            first[t[i].a + 1]++;
            first[t[i].b + 1]++;
        }
    for (size_t d = 0; d < nd; d++)
        first[d + 1] += first[d];
    for (size_t i = 0; i < nt; i++) {
        if (!c->domains[t[i].a].refined || !c->domains[t[i].b].refined)
            continue;
        double r = fabs((double)t[i].diff);
        y[first[t[i].a] + fill[t[i].a]++] = r;
        y[first[t[i].b] + fill[t[i].b]++] = r;
        all[n++] = r;
    }
    for (size_t d = 0; d < nd; d++)
        c->domains[d].error_ns = fill[d] ? cpa_clk_p90(y + first[d], fill[d]) : 0;
    c->error_us = n ? cpa_clk_p90(all, n) / 1e3 : 0;
    c->aligned = 1;
    for (size_t d = 0; d < nd; d++)
        if (!c->domains[d].refined)
            c->aligned = 0;
    if (!c->aligned && c->error_us < ANCHOR_ONLY_US)
        c->error_us = ANCHOR_ONLY_US;
    free(first);
    free(fill);
    free(y);
    free(all);
    return 0;
}

static int assign_domains(const cpa_model *m, cpa_clock *c)
{
    for (size_t i = 0; i < m->nranks; i++) {
        const char *h = m->ranks[i].hostname;
        size_t d = 0;
        if (h[0])
            while (d < c->ndomains && strcmp(c->domains[d].hostname, h))
                d++;
        else
            d = c->ndomains;
        if (d == c->ndomains)
            memcpy(c->domains[c->ndomains++].hostname, h, sizeof c->domains[0].hostname);
        c->rank_domain[i] = (uint32_t)d;
    }
    return 0;
}

int cpa_clock_align(const cpa_model *m, const cpa_matched *mt, cpa_clock *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t nr = m->nranks ? m->nranks : 1, nsamples = 0;
    for (size_t i = 0; i < m->nranks; i++)
        nsamples += m->ranks[i].nclocks;
    cpa_tie *t = NULL;
    size_t nt = 0;
    uint8_t *tying = NULL;
    uint64_t *spans = NULL;
    tie_log made = {0};
    out->domains = calloc(nr, sizeof *out->domains);
    out->rank_domain = calloc(nr, sizeof *out->rank_domain);
    out->map = calloc(1, sizeof *out->map);
    if (!out->domains || !out->rank_domain || !out->map)
        goto oom;
    out->map->d = calloc(nr, sizeof *out->map->d);
    out->map->anchors = malloc((nsamples + nr) * sizeof *out->map->anchors);
    out->map->finger = calloc(nr, sizeof *out->map->finger);
    if (!out->map->d || !out->map->anchors || !out->map->finger)
        goto oom;
    assign_domains(m, out);
    for (size_t i = 0; i < m->nranks; i++)
        out->rejected_samples = cpa_sat_add(out->rejected_samples, m->ranks[i].bad_clocks);
    size_t used = 0;
    for (size_t d = 0; d < out->ndomains; d++) {
        cpa_dmap *dm = &out->map->d[d];
        dm->first = used;
        if (build_anchors(m, out, d, out->map->anchors + used, &dm->n, &out->rejected_samples))
            goto oom;
        /* No usable anchor: assume it reads like the reference, the best guess there is. */
        if (!dm->n && d > 0 && out->map->d[0].n) {
            out->map->anchors[used] = out->map->anchors[out->map->d[0].first];
            out->map->anchors[used].slope = 0;
            dm->n = 1;
        }
        used += dm->n;
    }
    if (!(tying = cpa_clk_tying_ops(mt)))
        goto oom;
    if (!(spans = calloc(nr, sizeof *spans)))
        goto oom;
    if (out->ndomains > 1 &&
        (collect_ties(m, mt, out, tying, 0, &t, &nt, spans, &made, NULL) ||
         cpa_clk_solve(out, t, nt)))
        goto oom;
    free(t); /* solved: the GPU frames' arrays, at the analysis' peak of memory, come next */
    t = NULL;
    for (size_t d = 0; d < out->ndomains; d++)
        out->domains[d].samples = spans[d];
    if (out->ndomains == 1)
        out->domains[0].refined = 1;
    if (cpa_clk_fix(m, out, 0) || cpa_clk_gpu_frames(m, mt, tying, out) ||
        cpa_clk_fix(m, out, 1))
        goto oom;
    if (out->ndomains > 1 &&
        (collect_ties(m, mt, out, tying, 1, &t, &nt, NULL, NULL, &made) ||
         measure_error(out, t, nt)))
        goto oom;
    out->aligned = out->ndomains <= 1 || out->aligned;
    free(t);
    free(tying);
    free(spans);
    tie_log_free(&made);
    return 0;
oom:
    free(t);
    tie_log_free(&made);
    free(tying);
    free(spans);
    cpa_clock_free(out);
    snprintf(err, errlen, "out of memory aligning clocks");
    return -1;
}

void cpa_clock_free(cpa_clock *c)
{
    if (c->map) {
        free(c->map->anchors);
        free(c->map->d);
        free(c->map->gsegs);
        free(c->map->g_first);
        free(c->map->finger);
        free(c->map->offset_ns);
        free(c->map);
    }
    free(c->domains);
    free(c->rank_domain);
    memset(c, 0, sizeof *c);
}
