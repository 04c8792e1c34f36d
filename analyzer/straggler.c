/* PLACEHOLDER (replaced by the straggler helper). */
#include <string.h>
#include <stdlib.h>

#include "analyzer/analyzer.h"

int cpa_stragglers_compute(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                           cpa_stragglers *out, char *err, size_t errlen)
{
    (void)m; (void)mt; (void)c; (void)err; (void)errlen;
    memset(out, 0, sizeof *out);
    return 0;
}

void cpa_stragglers_free(cpa_stragglers *s)
{
    free(s->rows);
    free(s->op_late_rank_idx);
    free(s->op_late_us);
    memset(s, 0, sizeof *s);
}
