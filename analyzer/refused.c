/* analyzer/refused.c: the calls NCCL returned an error for, by result (analyzer.h). */
#include <stdio.h>
#include <string.h>

#include "analyzer/analyzer.h"

void cpa_call_args(char *buf, size_t len, const cpa_call *c)
{
    if (cp_op_is_p2p(c->op))
        snprintf(buf, len, "%s %s comm rank %d", cp_op_name(c->op),
                 c->op == CP_OP_SEND ? "to" : "from", (int)c->peer);
    else if (c->peer >= 0)
        snprintf(buf, len, "%s root %d", cp_op_name(c->op), (int)c->peer);
    else
        snprintf(buf, len, "%s", cp_op_name(c->op));
}

unsigned cpa_refused_slot(int8_t result)
{
    return result > 0 && result < CPA_NCCL_RESULTS ? (unsigned)result : 0;
}

void cpa_refused_find(const cpa_analysis *a, cpa_refused *out)
{
    const cpa_model *m = a->model;
    memset(out, 0, sizeof *out);
    uint64_t first_ns[CPA_NCCL_RESULTS];
    for (unsigned k = 0; k < CPA_NCCL_RESULTS; k++) {
        out->first_rank_idx[k] = -1;
        first_ns[k] = UINT64_MAX;
    }
    for (size_t ri = 0; ri < m->nranks; ri++) {
        const cpa_rank *r = &m->ranks[ri];
        uint64_t before = out->total;
        for (size_t ci = 0; r->nrefused && ci < r->ncalls; ci++) {
            const cpa_call *c = &r->calls[ci];
            if (!cpa_call_refused(c))
                continue;
            unsigned k = cpa_refused_slot(c->result);
            out->total++;
            out->by_result[k]++;
            uint64_t at = cpa_clock_job_ns(m, &a->clock, ri, c->enter_ns);
            if (at < first_ns[k]) {
                first_ns[k] = at;
                out->first_rank_idx[k] = (int32_t)ri;
                out->first_call[k] = (uint32_t)ci;
            }
        }
        if (out->total > before)
            out->nranks++;
    }
}
