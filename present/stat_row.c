/* present/stat_row.c: the op table's rows as the text report and `view` print them
 * (present.h). */
#include "present/present.h"

#include <inttypes.h>
#include <stdio.h>

void cpr_fmt_stat_header(char *buf, size_t len)
{
    snprintf(buf, len, CPR_STAT_HEADER_FMT, "op", "ranks", "size", "ops", "p50 us", "p99 us",
             "algbw GB/s", "busbw GB/s");
}

void cpr_fmt_stat_row(char *buf, size_t len, const cpa_stats *s, const cpa_stat *row)
{
    char size[32], ranks[16], exact[24];
    cpr_fmt_size(exact, sizeof exact, row->size);
    /* a bucket holds [size, 2 size) */
    snprintf(size, sizeof size, "%s%s", s->kind == CPA_ROWS_BUCKETS && row->size ? ">=" : "",
             exact);
    snprintf(ranks, sizeof ranks, "%d", (int)row->nranks);
    snprintf(buf, len, "%-13s %5s %12s %7" PRIu64 " %8.1f %8.1f %10.2f %10.2f",
             cpr_op_label(row->op, 1), ranks, size, row->ops, row->time_us_p50,
             row->time_us_p99, row->algbw_gbps, row->busbw_gbps);
}

double cpr_row_algo_proto(const cpa_stat *row, unsigned *algo, unsigned *proto)
{
    uint64_t total = 0, best = 0;
    *algo = *proto = 0;
    for (unsigned a = 0; a < CP_ALGO_COUNT; a++)
        for (unsigned p = 0; p < CP_PROTO_COUNT; p++) {
            uint32_t n = row->algo_proto[a][p];
            total += n;
            if (n > best) {
                best = n;
                *algo = a;
                *proto = p;
            }
        }
    return total ? (double)best / (double)total : 0;
}

void cpr_fmt_algo_proto(char *buf, size_t len, const cpa_stat *row)
{
    unsigned a, p;
    double share = cpr_row_algo_proto(row, &a, &p);
    if (share <= 0)
        snprintf(buf, len, "-");
    else if (share >= 1)
        snprintf(buf, len, "%s/%s", cp_algo_name(a), cp_proto_name(p));
    else
        snprintf(buf, len, "%s/%s %.0f%%", cp_algo_name(a), cp_proto_name(p), 100.0 * share);
}
