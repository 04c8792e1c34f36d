/* PLACEHOLDER (replaced by the mismatch helper). */
#include <string.h>
#include <stdlib.h>

#include "analyzer/analyzer.h"

const char *cpa_field_name(int f)
{
    static const char *const names[] = {"op", "count", "dtype", "redop", "root", "peer"};
    return f >= 0 && f < 6 ? names[f] : "?";
}

int cpa_mismatches_find(const cpa_model *m, const cpa_matched *mt, cpa_mismatches *out,
                        char *err, size_t errlen)
{
    (void)m; (void)mt; (void)err; (void)errlen;
    memset(out, 0, sizeof *out);
    return 0;
}

void cpa_mismatches_free(cpa_mismatches *x)
{
    for (size_t i = 0; i < x->nrows; i++) {
        free(x->rows[i].values);
        free(x->rows[i].culprit_ranks);
    }
    free(x->rows);
    memset(x, 0, sizeof *x);
}
