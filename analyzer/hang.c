/* PLACEHOLDER (replaced by the hang helper). */
#include <string.h>
#include <stdlib.h>

#include "analyzer/analyzer.h"

const char *cpa_hang_verdict_name(int v)
{
    switch (v) {
    case CPA_HANG_RANK_NOT_JOINED: return "RANK_NOT_JOINED";
    case CPA_HANG_STUCK_IN_NCCL: return "STUCK_IN_NCCL";
    case CPA_HANG_RANK_EXITED: return "RANK_EXITED";
    default: return "?";
    }
}

int cpa_hangs_find(const cpa_model *m, const cpa_matched *mt, cpa_hangs *out, char *err,
                   size_t errlen)
{
    (void)m; (void)mt; (void)err; (void)errlen;
    memset(out, 0, sizeof *out);
    return 0;
}

void cpa_hangs_free(cpa_hangs *h)
{
    for (size_t i = 0; i < h->nrows; i++) {
        free(h->rows[i].missing_ranks);
        free(h->rows[i].waiting_ranks);
    }
    free(h->rows);
    memset(h, 0, sizeof *h);
}
