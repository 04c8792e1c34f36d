/* analyzer/model.c: the model's memory (growth, warnings, free). Loading is in load.c. */
#include "analyzer/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cpa_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -1;
        n *= 2;
    }
    void *p = realloc(*arr, n * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = n;
    return 0;
}

const char *cpa_call_site(const cpa_rank *r, const cpa_call *c)
{
    return c->site_index < r->nsites ? r->sites[c->site_index] : NULL;
}

int cpa_model_warn(cpa_model *m, const char *fmt, ...)
{
    if (m->nwarnings >= CPA_MAX_WARNINGS) {
        m->dropped_warnings++;
        return 0;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cpa_grow((void **)&m->warnings, &m->cap_warnings, m->nwarnings + 1, sizeof(char *)))
        return -1;
    char *copy = strdup(line);
    if (!copy)
        return -1;
    m->warnings[m->nwarnings++] = copy;
    return 0;
}

void cpa_model_free(cpa_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nranks; i++) {
        free(m->ranks[i].path);
        free(m->ranks[i].comms);
        free(m->ranks[i].calls);
        free(m->ranks[i].nccl_seqs);
        free(m->ranks[i].clocks);
        free(m->ranks[i].streams);
        free(m->ranks[i].hangs);
        for (size_t k = 0; k < m->ranks[i].nsites; k++)
            free(m->ranks[i].sites[k]);
        free(m->ranks[i].sites);
    }
    free(m->ranks);
    for (size_t i = 0; i < m->nwarnings; i++)
        free(m->warnings[i]);
    free(m->warnings);
    free(m);
}
