/* present/refused.c: the calls NCCL refused, in the words every output uses (present.h). */
#include "present/present.h"

#include <inttypes.h>
#include <stdio.h>

#include "abi/nccl_abi.h"

const char *cpr_result_id(unsigned slot)
{
    return slot ? cp_nccl_result_id((ncclResult_t)slot) : "an unknown result";
}

void cpr_refused_text(char *buf, size_t len, const cpa_analysis *a)
{
    const cpa_refused *x = &a->refused;
    if (!len)
        return;
    buf[0] = '\0';
    if (!x->total)
        return;
    size_t n = (size_t)snprintf(buf, len, "%" PRIu64 " call%s NCCL returned an error for, on %u "
                                "rank%s (they enqueued nothing):", x->total,
                                x->total == 1 ? "" : "s", x->nranks, x->nranks == 1 ? "" : "s");
    const char *sep = " ";
    for (unsigned k = 0; k < CPA_NCCL_RESULTS && n < len; k++) {
        if (!x->by_result[k])
            continue;
        char what[64] = "?";
        int32_t ri = x->first_rank_idx[k];
        const cpa_rank *r = ri >= 0 ? &a->model->ranks[ri] : NULL;
        if (r)
            cpa_call_args(what, sizeof what, &r->calls[x->first_call[k]]);
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64 " %s (first: rank %d, %s)", sep,
                              x->by_result[k], cpr_result_id(k), r ? (int)r->rank : -1, what);
        sep = ", ";
    }
}
