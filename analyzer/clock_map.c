/* analyzer/clock_map.c: the clock map read: a rank's local time on the job's time line, its
 * host times (the domain's anchors and offset) and its GPU times (the rank's GPU segments on
 * top), below the stages that build the map (clock.c, clock_gpu.c) and everything after
 * them that converts. */
#include <stdlib.h>

#include "analyzer/clock_internal.h"

/* Inlined into each of the three below, so that a single conversion (n and gpu_from known)
 * costs no loop or test it does not need: the analysis makes millions of them. */
static inline __attribute__((always_inline)) void
convert(const cpa_model *m, const cpa_clock *c, size_t rank_idx, const uint64_t *local,
        uint64_t *job, size_t n, size_t gpu_from)
{
    const struct cpa_clock_map *map = c->map;
    /* offsets fixed (and for GPU times the segments too): the same sums, their roundings
     * made once */
    if (map && map->offset_ns && (gpu_from >= n || map->gpu_final)) {
        uint32_t d = c->rank_domain[rank_idx];
        int64_t off = map->offset_ns[d];
        if (off != CPA_CLK_NOT_CONST) {
            const cpa_dmap *dm = &map->d[d];
            const cpa_anchor *an = map->anchors + dm->first;
            const cpa_gseg *g = NULL;
            size_t gn = 0;
            if (gpu_from < n) {
                g = map->gsegs + map->g_first[rank_idx];
                gn = map->g_first[rank_idx + 1] - map->g_first[rank_idx];
            }
            _Atomic uint32_t *fa = &map->finger[rank_idx].a, *fg = &map->finger[rank_idx].g;
            for (size_t i = 0; i < n; i++)
                job[i] = cpa_clk_fixed_job(an, dm->n, fa, off, g, gn, fg, local[i], i >= gpu_from);
            return;
        }
    }
    int aligned = map && c->rank_domain;
    const cpa_dmap *dm = NULL;
    const cpa_clock_domain *dom = NULL;
    const cpa_anchor *an = NULL;
    int64_t header = 0; /* not aligned (yet): the rank's own header anchor */
    if (aligned) {
        uint32_t d = c->rank_domain[rank_idx];
        dm = &map->d[d];
        dom = &c->domains[d];
        an = map->anchors + dm->first;
    } else if (m->ranks[rank_idx].nclocks) {
        cpa_clk_sample_anchor(&m->ranks[rank_idx].clocks[0], &header);
    }
    _Atomic uint32_t scratch = 0, gscratch = 0; /* no fingers: a search each */
    _Atomic uint32_t *fa = map && map->finger ? &map->finger[rank_idx].a : &scratch;
    _Atomic uint32_t *fg = map && map->finger ? &map->finger[rank_idx].g : &gscratch;
    const cpa_gseg *g = NULL;
    size_t gn = 0;
    if (gpu_from < n && map && map->g_first && map->gsegs) {
        size_t first = map->g_first[rank_idx];
        gn = map->g_first[rank_idx + 1] - first;
        g = map->gsegs + first;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t t = local[i];
        uint64_t j = aligned ? cpa_clk_job(t, cpa_clk_anchor_at(an, dm->n, t, fa),
                                           cpa_clk_corr_at(dom, dm, t))
                             : cpa_clk_job(t, header, 0);
        if (i >= gpu_from && gn)
            j = cpa_clk_job(j, 0, g[cpa_clk_segment(g, sizeof *g, gn, t, fg)].corr);
        job[i] = j;
    }
}

void cpa_clock_job_ns_n(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                        const uint64_t *local, uint64_t *job, size_t n, size_t gpu_from)
{
    convert(m, c, rank_idx, local, job, n, gpu_from);
}

uint64_t cpa_clock_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                          uint64_t local_ns)
{
    uint64_t j;
    convert(m, c, rank_idx, &local_ns, &j, 1, 1);
    return j;
}

uint64_t cpa_clock_gpu_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                              uint64_t local_ns)
{
    uint64_t j;
    convert(m, c, rank_idx, &local_ns, &j, 1, 0);
    return j;
}

cpa_clk_fast *cpa_clk_fast_make(const cpa_model *m, const cpa_clock *c, int gpu)
{
    const struct cpa_clock_map *map = c->map;
    if (!map || !map->offset_ns || (gpu && !map->gpu_final))
        return NULL;
    cpa_clk_fast *x = malloc((m->nranks ? m->nranks : 1) * sizeof *x);
    if (!x)
        return NULL;
    for (size_t r = 0; r < m->nranks; r++) {
        uint32_t d = c->rank_domain[r];
        const cpa_dmap *dm = &map->d[d];
        x[r] = (cpa_clk_fast){.an = map->anchors + dm->first,
                              .off = map->offset_ns[d],
                              .nan = (uint32_t)dm->n,
                              .fa = atomic_load_explicit(&map->finger[r].a, memory_order_relaxed),
                              .fg = atomic_load_explicit(&map->finger[r].g, memory_order_relaxed)};
        if (gpu) {
            x[r].g = map->gsegs + map->g_first[r];
            x[r].ng = (uint32_t)(map->g_first[r + 1] - map->g_first[r]);
        }
    }
    return x;
}

void cpa_clock_arrivals_job(const cpa_model *m, const cpa_clock *c, cpa_part *parts, size_t n)
{
    cpa_clk_fast *x = cpa_clk_fast_make(m, c, 1);
    for (size_t i = 0; i < n; i++) {
        cpa_part *p = &parts[i];
        if (p->rank_idx >= m->nranks)
            continue;
        cpa_clk_fast *f = x ? &x[p->rank_idx] : NULL;
        if (f && f->off != CPA_CLK_NOT_CONST)
            p->arrival_ns = cpa_clk_fast_job(f, p->arrival_ns, p->gpu_timed);
        else
            p->arrival_ns = p->gpu_timed ? cpa_clock_gpu_job_ns(m, c, p->rank_idx, p->arrival_ns)
                                         : cpa_clock_job_ns(m, c, p->rank_idx, p->arrival_ns);
    }
    free(x);
}

int cpa_clk_fix(const cpa_model *m, cpa_clock *c, int gpu_final)
{
    struct cpa_clock_map *map = c->map;
    cpa_clk_unfix(c);
    if (!map || !c->rank_domain || !map->finger)
        return 0; /* nothing to fix: conversions keep their general path */
    if (gpu_final && (!map->g_first || !map->gsegs))
        gpu_final = 0;
    int64_t *off = malloc((c->ndomains ? c->ndomains : 1) * sizeof *off);
    if (!off)
        return -1;
    /* cpa_clk_job's correction, rounded as it rounds it */
    for (size_t d = 0; d < c->ndomains; d++)
        off[d] = c->domains[d].drift == 0 ? cpa_round_i64(c->domains[d].offset_ns)
                                          : CPA_CLK_NOT_CONST;
    if (gpu_final)
        for (size_t i = 0; i < map->g_first[m->nranks]; i++)
            map->gsegs[i].corr_ns = cpa_round_i64(map->gsegs[i].corr);
    map->offset_ns = off;
    map->gpu_final = gpu_final;
    return 0;
}

void cpa_clk_unfix(cpa_clock *c)
{
    if (!c->map)
        return;
    free(c->map->offset_ns);
    c->map->offset_ns = NULL;
    c->map->gpu_final = 0;
}
