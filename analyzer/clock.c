/* PLACEHOLDER (replaced by the clock helper): anchors only, one domain per hostname. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

int cpa_clock_align(const cpa_model *m, const cpa_matched *mt, cpa_clock *out, char *err,
                    size_t errlen)
{
    (void)mt;
    memset(out, 0, sizeof *out);
    out->domains = calloc(m->nranks ? m->nranks : 1, sizeof *out->domains);
    out->rank_domain = calloc(m->nranks ? m->nranks : 1, sizeof *out->rank_domain);
    if (!out->domains || !out->rank_domain) {
        cpa_clock_free(out);
        snprintf(err, errlen, "out of memory aligning clocks");
        return -1;
    }
    for (size_t i = 0; i < m->nranks; i++) {
        size_t d = 0;
        while (d < out->ndomains && strcmp(out->domains[d].hostname, m->ranks[i].hostname))
            d++;
        if (d == out->ndomains)
            memcpy(out->domains[out->ndomains++].hostname, m->ranks[i].hostname,
                   sizeof out->domains[0].hostname);
        out->rank_domain[i] = (uint32_t)d;
    }
    out->aligned = out->ndomains <= 1;
    return 0;
}

void cpa_clock_free(cpa_clock *c)
{
    free(c->domains);
    free(c->rank_domain);
    memset(c, 0, sizeof *c);
}

uint64_t cpa_clock_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                          uint64_t local_ns)
{
    const cpa_rank *r = &m->ranks[rank_idx];
    (void)c;
    if (!r->nclocks)
        return local_ns;
    return local_ns - r->clocks[0].mono_ns + r->clocks[0].realtime_ns;
}
