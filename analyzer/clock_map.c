/* analyzer/clock_map.c: the clock map read: a rank's local time on the job's time line, its
 * host times (the domain's anchors and offset) and its GPU times (the rank's GPU segments on
 * top), below the stages that build the map (clock.c, clock_gpu.c) and everything after
 * them that converts. */
#include "analyzer/clock_internal.h"

uint64_t cpa_clock_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                          uint64_t local_ns)
{
    const cpa_rank *r = &m->ranks[rank_idx];
    if (!c->map || !c->rank_domain) { /* not aligned (yet): the rank's own header anchor */
        int64_t a = 0;
        if (r->nclocks)
            cpa_clk_sample_anchor(&r->clocks[0], &a);
        return cpa_clk_job(local_ns, a, 0);
    }
    uint32_t d = c->rank_domain[rank_idx];
    const cpa_dmap *dm = &c->map->d[d];
    _Atomic uint32_t scratch = 0;
    _Atomic uint32_t *finger = c->map->finger ? &c->map->finger[rank_idx].a : &scratch;
    return cpa_clk_job(local_ns,
                       cpa_clk_anchor_at(c->map->anchors + dm->first, dm->n, local_ns, finger),
                       cpa_clk_corr_at(&c->domains[d], dm, local_ns));
}

uint64_t cpa_clock_gpu_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                              uint64_t local_ns)
{
    uint64_t j = cpa_clock_job_ns(m, c, rank_idx, local_ns);
    if (!c->map || !c->map->g_first || !c->map->gsegs)
        return j;
    size_t first = c->map->g_first[rank_idx], n = c->map->g_first[rank_idx + 1] - first;
    if (!n)
        return j;
    const cpa_gseg *g = c->map->gsegs + first;
    if (!c->map->finger)
        return cpa_clk_job(j, 0, cpa_clk_seg_at(g, n, local_ns));
    return cpa_clk_job(j, 0, g[cpa_clk_segment(g, sizeof *g, n, local_ns,
                                                &c->map->finger[rank_idx].g)].corr);
}

void cpa_clock_job_ns_n(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                        const uint64_t *local, uint64_t *job, size_t n, size_t gpu_from)
{
    if (!c->map || !c->rank_domain) { /* not aligned: no GPU segments either */
        for (size_t i = 0; i < n; i++)
            job[i] = cpa_clock_job_ns(m, c, rank_idx, local[i]);
        return;
    }
    uint32_t d = c->rank_domain[rank_idx];
    const cpa_dmap *dm = &c->map->d[d];
    const cpa_clock_domain *dom = &c->domains[d];
    const cpa_anchor *an = c->map->anchors + dm->first;
    _Atomic uint32_t scratch = 0, gscratch = 0; /* no fingers: a search each, as without */
    _Atomic uint32_t *fa = c->map->finger ? &c->map->finger[rank_idx].a : &scratch;
    _Atomic uint32_t *fg = c->map->finger ? &c->map->finger[rank_idx].g : &gscratch;
    const cpa_gseg *g = NULL;
    size_t gn = 0;
    if (gpu_from < n && c->map->g_first && c->map->gsegs) {
        size_t first = c->map->g_first[rank_idx];
        gn = c->map->g_first[rank_idx + 1] - first;
        g = c->map->gsegs + first;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t t = local[i];
        uint64_t j = cpa_clk_job(t, cpa_clk_anchor_at(an, dm->n, t, fa),
                                 cpa_clk_corr_at(dom, dm, t));
        if (i >= gpu_from && gn) /* cpa_clk_segment's answer is cpa_clk_seg_at's */
            j = cpa_clk_job(j, 0, g[cpa_clk_segment(g, sizeof *g, gn, t, fg)].corr);
        job[i] = j;
    }
}
