/* present/mismatch.c: a mismatch said one way, in the text report and in `view` (present.h). */
#include "present/present.h"

#include <inttypes.h>
#include <stdio.h>

void cpr_mismatch_value(char *buf, size_t len, int field, int64_t v)
{
    switch (field) {
    case CPA_FIELD_OP:
        snprintf(buf, len, "%s", v >= 0 && v <= 255 ? cp_op_name((unsigned)v) : "?");
        break;
    case CPA_FIELD_DTYPE:
        snprintf(buf, len, "%s", v >= 0 && v <= 255 ? cp_dtype_name((unsigned)v) : "?");
        break;
    case CPA_FIELD_REDOP:
        snprintf(buf, len, "%s", v >= 0 && v <= 255 ? cp_redop_name((unsigned)v) : "?");
        break;
    case CPA_FIELD_COUNT: /* a u64 kept in an int64_t (analyzer.h) */
        snprintf(buf, len, "%" PRIu64, (uint64_t)v);
        break;
    default:
        snprintf(buf, len, "%" PRId64, v);
    }
}

void cpr_mismatch_text(char *buf, size_t len, const cpa_mismatch *r)
{
    char comm[17], culprits[48];
    cpr_fmt_comm(comm, r->comm_id);
    cpr_fmt_ranks(culprits, sizeof culprits, r->culprit_ranks, r->nculprits);
    snprintf(buf, len, "%s differs at seq %" PRIu64 ", comm %s; culprit%s %s",
             cpa_field_name(r->field), r->seq, comm, r->nculprits == 1 ? "" : "s",
             r->nculprits ? culprits : "unknown");
}
