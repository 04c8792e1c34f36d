/* analyzer/clock_internal.h: what the clock's files share; nothing outside them includes it.
 * One way: clock.c (the stage: host clocks, ties, the map) calls clock_solve.c (the domains'
 * offsets and drift) and clock_gpu.c (each rank's GPU time line); all three read the map
 * through clock_map.c (conversions) and this header's inline lookups, and take their small
 * statistics from clock_stats.c. */
#ifndef COLLPROF_ANALYZER_CLOCK_INTERNAL_H
#define COLLPROF_ANALYZER_CLOCK_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzer/analyzer.h"

typedef struct cpa_anchor {
    uint64_t mono;
    int64_t a;               /* realtime - mono */
    double slope;            /* (next a - a) / (next mono - mono); 0 for the last: a
                              * multiplication a conversion where a division was its
                              * largest cost */
} cpa_anchor;

typedef struct cpa_dmap {
    size_t first, n;         /* a domain's anchors: cpa_clock_map.anchors[first .. first + n) */
    uint64_t lo, hi;         /* local times of its first and last tie: where drift holds */
} cpa_dmap;

/* From local time t on (until the next segment), a rank's GPU times are corr ns off the
 * job time line that cpa_clock_job_ns gives its host times. */
typedef struct cpa_gseg {
    uint64_t t;
    double corr;
    int64_t corr_ns;         /* cpa_round_i64(corr), once the map is final */
} cpa_gseg;

/* Per rank, the anchor segment and GPU segment its last conversion landed in. A rank's times
 * are converted mostly in order, however the ranks interleave (operation by operation
 * across ranks, as the timeline and the exporters go): the next lookup is nearly always in
 * the same segment or the next. A finger is only a guess, checked before use, so relaxed
 * atomics keep conversions from several threads defined. */
typedef struct cpa_finger {
    _Atomic uint32_t a, g;
} cpa_finger;

struct cpa_clock_map {
    cpa_anchor *anchors;
    cpa_dmap *d;             /* per domain */
    cpa_gseg *gsegs;
    size_t *g_first;         /* per rank, and one past: gsegs[g_first[r] .. g_first[r + 1]) */
    cpa_finger *finger;      /* per rank */
    /* While the domains' offsets hold still: each one rounded, or CPA_CLK_NOT_CONST where
     * a drift makes it vary (NULL: not now). Host conversions then take them as they are
     * instead of rounding again: the GPU frames' 20 M and, once the map is final
     * (gpu_final, with each GPU segment's corr_ns), every conversion after the stage. Only
     * clock_solve.c (before the first cpa_clk_fix) and the GPU frames' causal shift (which drops
     * them first) move an offset. */
    int64_t *offset_ns;
    int gpu_final;
};
#define CPA_CLK_NOT_CONST INT64_MIN

/* offset_ns from the domains as they are; gpu_final also rounds every GPU segment's
 * correction. 0, or -1 out of memory (conversions then round as they go, as before). */
int cpa_clk_fix(const cpa_model *m, cpa_clock *c, int gpu_final);
/* Before an offset moves. */
void cpa_clk_unfix(cpa_clock *c);

/* The segment of sorted keys k[0..n) (stride bytes apart) holding t from a guess at *finger:
 * the largest i with k[i] <= t, or 0 when none; *finger updated. */
static inline size_t cpa_clk_segment(const void *base, size_t stride, size_t n, uint64_t t,
                                     _Atomic uint32_t *finger)
{
#define CPA_KEY(i) (*(const uint64_t *)((const char *)base + (i) * stride))
    size_t lo = atomic_load_explicit(finger, memory_order_relaxed);
    if (lo < n && (lo == 0 || CPA_KEY(lo) <= t) && (lo + 1 >= n || t < CPA_KEY(lo + 1)))
        return lo;
    if (++lo < n && CPA_KEY(lo) <= t && (lo + 1 >= n || t < CPA_KEY(lo + 1))) {
        atomic_store_explicit(finger, (uint32_t)lo, memory_order_relaxed);
        return lo;
    }
    CP_LOWER_BOUND(lo, n, i, CPA_KEY(i) <= t);
    lo = lo ? lo - 1 : 0;
#undef CPA_KEY
    atomic_store_explicit(finger, (uint32_t)lo, memory_order_relaxed);
    return lo;
}

/* One operation's word on two domains: job_b - job_a of their median ends, anchors only. */
typedef struct cpa_tie {
    uint32_t a, b;
    uint64_t ta, tb;
    int64_t diff;
} cpa_tie;

/* The model of a domain's correction: offset + drift, the drift held past its ties. Inline:
 * every job time (cpa_clock_job_ns) goes through it. */
static inline double cpa_clk_corr_at(const cpa_clock_domain *dom, const cpa_dmap *dm,
                                     uint64_t t)
{
    if (dom->drift == 0)
        return dom->offset_ns;
    if (t < dm->lo)
        t = dm->lo;
    if (t > dm->hi)
        t = dm->hi;
    return dom->offset_ns + dom->drift * (double)(t - dom->drift_t0_ns);
}

/* a + b, saturating at the int64_t range: a forged time or offset must not overflow. */
static inline int64_t cpa_clk_add(int64_t a, int64_t b)
{
    int64_t s;
    if (__builtin_add_overflow(a, b, &s))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return s;
}

/* local + anchor + corr on the job time line, in [0, INT64_MAX] whatever the inputs: every
 * job time goes through here, so differences of two job times always fit an int64_t. */
static inline uint64_t cpa_clk_job(uint64_t local, int64_t anchor, double corr)
{
    int64_t j = cpa_clk_add(local > INT64_MAX ? INT64_MAX : (int64_t)local, anchor);
    j = cpa_clk_add(j, cpa_round_i64(corr));
    return j > 0 ? (uint64_t)j : 0;
}

/* A domain's anchor at t, from the guess at *finger (cpa_clk_segment): a rank's calls are
 * converted in time order, so most lookups land in the segment the one before found (a
 * binary search and a llround call for each of 10 M calls were a tenth of a 1024-rank job's
 * analysis). */
static inline int64_t cpa_clk_anchor_at(const cpa_anchor *an, size_t n, uint64_t t,
                                        _Atomic uint32_t *finger)
{
    if (!n)
        return 0;
    size_t f = atomic_load_explicit(finger, memory_order_relaxed);
    if (f + 1 < n && an[f].mono <= t && t < an[f + 1].mono) /* nearly always */
        return an[f].a + cpa_round_i64((double)(t - an[f].mono) * an[f].slope);
    if (t <= an[0].mono)
        return an[0].a;
    if (t >= an[n - 1].mono)
        return an[n - 1].a;
    size_t lo = cpa_clk_segment(an, sizeof *an, n, t, finger);
    return an[lo].a + cpa_round_i64((double)(t - an[lo].mono) * an[lo].slope);
}

/* Local time t on the job time line while the map is fixed (cpa_clk_fix): the domain's
 * anchors an[0..nan) and rounded offset off (not CPA_CLK_NOT_CONST), and with gpu the rank's
 * GPU segments g[0..ng) and their rounded corrections; fa and fg the fingers. */
static inline __attribute__((always_inline)) uint64_t
cpa_clk_fixed_job(const cpa_anchor *an, size_t nan, _Atomic uint32_t *fa, int64_t off,
                  const cpa_gseg *g, size_t ng, _Atomic uint32_t *fg, uint64_t t, int gpu)
{
    int64_t j = cpa_clk_add(t > INT64_MAX ? INT64_MAX : (int64_t)t,
                            cpa_clk_anchor_at(an, nan, t, fa));
    j = cpa_clk_add(j, off);
    if (j < 0)
        j = 0;
    if (gpu && ng) {
        j = cpa_clk_add(j, g[cpa_clk_segment(g, sizeof *g, ng, t, fg)].corr_ns);
        if (j < 0)
            j = 0;
    }
    return (uint64_t)j;
}

/* What a rank's conversions read while the map is fixed (cpa_clk_fix), side by side, for
 * passes that convert every part of every operation: a part's rank changes from one to the
 * next, and cpa_clock_job_ns' walk through the map's per-domain and per-rank arrays (and its
 * call) was most of its 84 instructions (123 for a GPU time). Same results to the ns. */
typedef struct cpa_clk_fast {
    const cpa_anchor *an;
    const cpa_gseg *g;       /* NULL: host times only, or none */
    int64_t off;             /* CPA_CLK_NOT_CONST: this rank converts the general way */
    uint32_t nan, ng;
    _Atomic uint32_t fa, fg; /* fingers, as cpa_finger's */
} cpa_clk_fast;

/* Per rank, from the map as fixed now (gpu: with its GPU segments, the map final); NULL out
 * of memory or when the map is not fixed (convert the general way). The caller frees. */
cpa_clk_fast *cpa_clk_fast_make(const cpa_model *m, const cpa_clock *c, int gpu);

/* cpa_clock_job_ns (gpu 0) or cpa_clock_gpu_job_ns (gpu 1, x made with gpu) of t, where
 * x->off != CPA_CLK_NOT_CONST. */
static inline uint64_t cpa_clk_fast_job(cpa_clk_fast *x, uint64_t t, int gpu)
{
    return cpa_clk_fixed_job(x->an, x->nan, &x->fa, x->off, x->g, x->ng, &x->fg, t, gpu);
}

/* A sample's anchor, realtime - mono; 0 when it has none. Both at most CPA_TIME_MAX (the
 * loader's bound, checked again for a model built elsewhere), so the difference fits, and
 * so does any difference of two anchors. */
static inline int cpa_clk_sample_anchor(const cpa_clock_sample *s, int64_t *a)
{
    if (!s->mono_ns || !s->realtime_ns || s->mono_ns > CPA_TIME_MAX ||
        s->realtime_ns > CPA_TIME_MAX)
        return 0;
    *a = (int64_t)s->realtime_ns - (int64_t)s->mono_ns;
    return 1;
}

/* The correction of the last GPU segment starting at or before t (the first when none does). */
static inline double cpa_clk_seg_at(const cpa_gseg *g, size_t n, uint64_t t)
{
    size_t lo;
    CP_LOWER_BOUND(lo, n, i, g[i].t <= t);
    return g[lo ? lo - 1 : 0].corr;
}

/* clock_stats.c: the small statistics the three stages share. */
/* Nearest rank: the ceil(0.9 n)-th smallest of v[0..n), n > 0, reordering v. */
double cpa_clk_p90(double *v, size_t n);
/* Where most of v[0..n) (ends of one operation, ns) agree within 2 x CPA_CLK_AGREE_NS, else
 * their median; reorders v. */
#define CPA_CLK_AGREE_NS 50000.0
double cpa_clk_consensus(double *v, size_t n);
/* Operations whose ends are simultaneous on every rank. */
int cpa_clk_blocking(unsigned op);
/* Per matched operation, 1 when its ends tie its ranks' clocks: complete, blocking, every
 * part GPU-timed. NULL out of memory; the caller frees. */
uint8_t *cpa_clk_tying_ops(const cpa_matched *mt);
/* clock_solve.c: each domain's offset_ns, drift, drift_t0_ns and refined, and the span of its
 * ties (map->d[].lo, hi), from the ties t[0..nt) (ends on the anchors alone). 0 or -1 (out of
 * memory). */
int cpa_clk_solve(cpa_clock *c, const cpa_tie *t, size_t nt);
/* clock_gpu.c: fills map->gsegs and map->g_first; the domains must be solved. 0 or -1 (out
 * of memory). */
int cpa_clk_gpu_frames(const cpa_model *m, const cpa_matched *mt, const uint8_t *tying,
                       cpa_clock *c);
/* clock_causal.c: the GPU frames' step 3. Made once the frames' groups are known (comp, per
 * rank, UINT32_MAX none; ncomp of them), handed each rank r once its GPU segments are in the
 * map (scratch of its calls), then the shift, which moves the segments and the domains'
 * offsets (the map unfixed). NULL out of memory. */
typedef struct cpa_clk_causal cpa_clk_causal;
cpa_clk_causal *cpa_clk_causal_make(const cpa_model *m, const cpa_clock *c,
                                    const uint32_t *comp, uint32_t ncomp);
void cpa_clk_causal_rank(cpa_clk_causal *cs, uint32_t r, double *scratch);
void cpa_clk_causal_shift(cpa_clk_causal *cs, cpa_clock *c);
void cpa_clk_causal_free(cpa_clk_causal *cs);

#endif
