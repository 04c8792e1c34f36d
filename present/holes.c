/* present/holes.c: a trace's holes in the words every output uses (present.h). */
#include "present/present.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void cpr_holes_text(char *buf, size_t len, const cpa_analysis *a, long *first_rank,
                    double *first_s)
{
    const cpa_model *m = a->model;
    long fr = -1;
    double fs = NAN;
    if (len)
        buf[0] = '\0';
    if (first_rank)
        *first_rank = -1;
    if (first_s)
        *first_s = NAN;
    if (!cpa_model_has_holes(m) || !len)
        return;
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        if (!cpa_rank_has_holes(r) || !r->integrity.first_gap_ns)
            continue;
        double s = cpa_job_us(a, i, r->integrity.first_gap_ns) / 1e6;
        if (fr < 0 || s < fs) {
            fr = (long)i;
            fs = s;
        }
    }
    cpa_integrity_text(buf, len, &m->integrity, m->lost_records);
    size_t n = strlen(buf);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "; %zu of %zu rank%s", m->ranks_with_holes,
                              m->nranks, m->nranks == 1 ? "" : "s");
    if (fr >= 0 && n < len)
        snprintf(buf + n, len - n, ", the first at %+.3f s (rank %d)", fs,
                 (int)m->ranks[fr].rank);
    if (first_rank)
        *first_rank = fr;
    if (first_s)
        *first_s = fs;
}

const char *cpr_holes_caveat(const cpa_analysis *a)
{
    return cpa_model_has_holes(a->model)
               ? "(the trace has holes, see job: these figures may leave operations out)"
               : "";
}

void cpr_rotated_text(char *buf, size_t len, const cpa_analysis *a, double *kept_from_s)
{
    const cpa_model *m = a->model;
    long last = -1;
    double from = NAN;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        if (!r->rotated_records || !r->kept_from_ns)
            continue;
        double s = cpa_job_us(a, i, r->kept_from_ns) / 1e6;
        if (last < 0 || s > from) {
            last = (long)i;
            from = s;
        }
    }
    if (kept_from_s)
        *kept_from_s = from;
    if (!m->rotated_records || !len)
        return;
    size_t n = (size_t)snprintf(buf, len,
                                "the oldest %llu records of %zu rank%s were deleted to keep each "
                                "trace under COLLPROF_MAX_MB",
                                (unsigned long long)m->rotated_records, m->ranks_rotated,
                                m->ranks_rotated == 1 ? "" : "s");
    if (last >= 0 && n < len)
        snprintf(buf + n, len - n,
                 "; every rank's calls are here from %+.3f s (rank %d's oldest kept), the "
                 "figures leave out what came before",
                 from, (int)m->ranks[last].rank);
}
