/* analyzer/clock_causal.c: step 3 of the GPU time lines (clock_gpu.c), the constant each
 * group of tied ranks is shifted by, and the domains' offsets checked by the same measure.
 *
 * Ties fix frames relative to each other only. A kernel never starts before it was
 * launched, and one launched onto an idle stream starts at once: so each group is shifted
 * until its tightest calls' GPU start meets their host entry (the CAUSAL_PER_MILLE-th
 * smallest start - entry, so that one glitch does not set it), on the host whose clock the
 * job time line follows (the group's first domain). Then, in the group that holds the
 * reference domain, the same measure checks the other domains' offsets, which their ties
 * took from their ranks' GPU ends and so from their GPU references: with all four ranks of
 * an emulated host off, a 5 ms offset came out 2.3 ms (or 6.8 ms). A rank's tightest
 * launches (the 5th percentile of its slack, so that a stretch its frames got wrong does not
 * decide) start at once on any host; so where more than half of a domain's ranks agree on
 * that slack, and so do the reference domain's, the difference is the domain's clock error,
 * and the host moves by it, its GPU times staying where the ends put them. With no agreement
 * in the reference domain, only a domain whose launches would start before they were made
 * is moved back. (The 1st percentile over a whole domain, tried first, moved offsets by tens
 * of ms after a step at the end of a trace went uncorrected.) Measured on 21 emulated
 * two-host runs: the 5 ms offset to within 1.3 us, against up to 1.8 ms from the ends alone.
 *
 * Each rank's slacks are taken right after its segments are made (cpa_clk_causal_rank),
 * while its calls are still in cache: a pass of their own over every call of 1024 ranks was
 * 0.03 s, and there were two.
 */
#include <math.h>
#include <stdlib.h>

#include "analyzer/clock_internal.h"

#define CAUSAL_PER_MILLE 1
#define DOMAIN_CAUSAL_PER_MILLE 50

struct cpa_clk_causal {
    const cpa_model *m;
    const cpa_clock *c;
    const uint32_t *comp; /* per rank: its group of tied ranks, UINT32_MAX none */
    uint32_t ncomp;
    uint32_t *refd;       /* per group: the first domain it holds */
    cpa_smallest *low;    /* per group: its slacks on that domain, the lowest of them */
    size_t *n;            /* per group: how many went in */
    double *own;          /* per rank of a group holding domain 0: its own percentile, before
                           * the shift; NAN none */
    double *perrank;      /* scratch of a value per rank */
};

/* Rank r's GPU-timed calls' slack (GPU start on the job time line minus host entry) into
 * out; returns how many. */
static size_t slacks(const cpa_clk_causal *cs, size_t r, double *out)
{
    const struct cpa_clock_map *map = cs->c->map;
    const cpa_rank *k = &cs->m->ranks[r];
    const cpa_gseg *s = map->gsegs + map->g_first[r];
    size_t ns = map->g_first[r + 1] - map->g_first[r], n = 0;
    for (size_t i = 0; i < k->ncalls; i++)
        if (k->calls[i].gpu_timed)
            out[n++] = (double)(int64_t)(k->calls[i].gpu_start_ns - k->calls[i].enter_ns) +
                       cpa_clk_seg_at(s, ns, k->calls[i].gpu_start_ns);
    return n;
}

/* Where more than half of v[0..n), n >= 2, agree within 2 x CPA_CLK_AGREE_NS: 1 and their
 * median in *at, else 0. Sorts v. */
static int agreed(double *v, size_t n, double *at)
{
    if (n < 2)
        return 0;
    cpa_sort_doubles(v, n);
    for (size_t a = 0, b = 0; a < n; a++) {
        while (b < n && v[b] - v[a] <= 2 * CPA_CLK_AGREE_NS)
            b++;
        if (2 * (b - a) > n) {
            *at = v[a + (b - a - 1) / 2];
            return 1;
        }
    }
    return 0;
}

void cpa_clk_causal_free(cpa_clk_causal *cs)
{
    if (!cs)
        return;
    for (uint32_t g = 0; cs->low && g < cs->ncomp; g++)
        cpa_smallest_free(&cs->low[g]);
    free(cs->refd);
    free(cs->low);
    free(cs->n);
    free(cs->own);
    free(cs->perrank);
    free(cs);
}

cpa_clk_causal *cpa_clk_causal_make(const cpa_model *m, const cpa_clock *c,
                                    const uint32_t *comp, uint32_t ncomp)
{
    size_t nr = m->nranks, *ncalls = NULL;
    cpa_clk_causal *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    *cs = (cpa_clk_causal){.m = m, .c = c, .comp = comp, .ncomp = ncomp};
    cs->refd = malloc((ncomp ? ncomp : 1) * sizeof *cs->refd);
    cs->low = calloc(ncomp ? ncomp : 1, sizeof *cs->low);
    cs->n = calloc(ncomp ? ncomp : 1, sizeof *cs->n);
    cs->own = malloc((nr ? nr : 1) * sizeof *cs->own);
    cs->perrank = malloc((nr ? nr : 1) * sizeof *cs->perrank);
    ncalls = calloc(ncomp ? ncomp : 1, sizeof *ncalls);
    if (!cs->refd || !cs->low || !cs->n || !cs->own || !cs->perrank || !ncalls)
        goto oom;
    for (uint32_t g = 0; g < ncomp; g++)
        cs->refd[g] = UINT32_MAX;
    for (size_t r = 0; r < nr; r++)
        if (comp[r] != UINT32_MAX && c->rank_domain[r] < cs->refd[comp[r]])
            cs->refd[comp[r]] = c->rank_domain[r];
    for (size_t r = 0; r < nr; r++)
        if (comp[r] != UINT32_MAX && c->rank_domain[r] == cs->refd[comp[r]])
            ncalls[comp[r]] += m->ranks[r].ncalls;
    for (uint32_t g = 0; g < ncomp; g++)
        if (cpa_smallest_init(&cs->low[g], ncalls[g] * CAUSAL_PER_MILLE / 1000 + 1))
            goto oom;
    free(ncalls);
    return cs;
oom:
    free(ncalls);
    cpa_clk_causal_free(cs);
    return NULL;
}

void cpa_clk_causal_rank(cpa_clk_causal *cs, uint32_t r, double *scratch)
{
    uint32_t g = cs->comp[r], d = cs->c->rank_domain[r];
    cs->own[r] = NAN;
    if (g == UINT32_MAX || (cs->refd[g] != 0 && d != cs->refd[g]))
        return;
    size_t m = slacks(cs, r, scratch);
    if (d == cs->refd[g]) {
        for (size_t i = 0; i < m; i++)
            cpa_smallest_add(&cs->low[g], scratch[i]);
        cs->n[g] += m;
    }
    if (cs->refd[g] == 0 && m)
        cs->own[r] = cpa_select(scratch, m, m * DOMAIN_CAUSAL_PER_MILLE / 1000);
}

/* The shift moves all of a group's slacks alike: the percentiles taken before it, it is
 * added to them. */
void cpa_clk_causal_shift(cpa_clk_causal *cs, cpa_clock *c)
{
    struct cpa_clock_map *map = c->map;
    size_t nr = cs->m->nranks;
    const uint32_t *comp = cs->comp;
    double *perrank = cs->perrank;
    for (uint32_t g = 0; g < cs->ncomp; g++) {
        if (!cs->n[g])
            continue;
        double shift = -cpa_smallest_get(&cs->low[g], cs->n[g] * CAUSAL_PER_MILLE / 1000);
        for (size_t r = 0; r < nr; r++)
            if (comp[r] == g)
                for (size_t i = map->g_first[r]; i < map->g_first[r + 1]; i++)
                    map->gsegs[i].corr += shift;
        if (cs->refd[g] != 0)
            continue;
        double ref = 0;
        int ref_ok = 0;
        for (uint32_t d = 0; d < c->ndomains; d++) {
            size_t nv = 0;
            for (size_t r = 0; r < nr; r++)
                if (comp[r] == g && c->rank_domain[r] == d && !isnan(cs->own[r]))
                    perrank[nv++] = cs->own[r] + shift;
            double late = 0;
            int ok = agreed(perrank, nv, &late);
            if (d == 0) {
                ref = late;
                ref_ok = ok;
                continue;
            }
            if (ok && ref_ok)
                late -= ref;
            else if (!ok || late >= 0)
                continue;
            c->domains[d].offset_ns += late;
            for (size_t r = 0; r < nr; r++)
                if (c->rank_domain[r] == d)
                    for (size_t i = map->g_first[r]; i < map->g_first[r + 1]; i++)
                        map->gsegs[i].corr -= late;
        }
    }
}
