/* analyzer/clock_map.c: the clock map read: a rank's local time on the job's time line, its
 * host times (the domain's anchors and offset) and its GPU times (the rank's GPU segments on
 * top), below the stages that build the map (clock.c, clock_gpu.c) and everything after
 * them that converts. */
#include "analyzer/clock_internal.h"

/* Inlined into each of the three below, so that a single conversion (n and gpu_from known)
 * costs no loop or test it does not need: the analysis makes millions of them. */
static inline __attribute__((always_inline)) void
convert(const cpa_model *m, const cpa_clock *c, size_t rank_idx, const uint64_t *local,
        uint64_t *job, size_t n, size_t gpu_from)
{
    const struct cpa_clock_map *map = c->map;
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
