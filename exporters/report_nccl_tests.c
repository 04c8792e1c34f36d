/* report_nccl_tests: `collprof report --table nccl-tests`, the job's operations as
 * nccl-tests prints its own, so that a job's figures can be laid beside all_reduce_perf's.
 *
 * One block per (op, communicator size), rows by size, in nccl-tests' columns and number
 * formats: size (B), count (elements), type and redop by nccl-tests' names, root, time (us),
 * algbw and busbw (GB/s), and in place of its #wrong the operations the row holds. Time is
 * the mean over the row's operations, as nccl-tests averages its iterations; each
 * operation's time is the report's (the last arrival's GPU duration). nccl-tests runs each
 * size in and out of place; a job's calls are what they are, so there is one set of columns.
 * Lines that are not rows start with '#', as in nccl-tests, so the same scripts parse both.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"

/* nccl-tests' test_typenames, by ncclDataType_t */
static const char *type_name(unsigned dtype)
{
    static const char *const names[CP_DTYPE_COUNT] = {
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16", "f8e4m3", "f8e5m2"};
    return dtype < CP_DTYPE_COUNT ? names[dtype] : "?";
}

/* nccl-tests' test_opnames; "none" for an op that does not reduce */
static const char *redop_name(unsigned redop)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
    if (redop == CP_REDOP_NONE)
        return "none";
    return redop < sizeof names / sizeof names[0] ? names[redop] : "?";
}

/* nccl-tests' time column: fewer decimals as the time grows, always 7 wide */
static void fmt_time(char buf[32], double us)
{
    if (us >= 10000.0)
        snprintf(buf, 32, "%7.0f", us);
    else if (us >= 100.0)
        snprintf(buf, 32, "%7.1f", us);
    else
        snprintf(buf, 32, "%7.2f", us);
}

static void header(FILE *out, const cpa_stat *r)
{
    fprintf(out, "#\n# %s, %d rank%s\n", cpr_op_label(r->op, 1), (int)r->nranks,
            r->nranks == 1 ? "" : "s");
    fprintf(out, "#       size         count      type   redop    root     time   algbw   busbw"
                 "     #ops\n");
    fprintf(out, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n");
}

/* v in its column's width: as nccl-tests prints it when it fits (decimals after the point),
 * else in exponent form, as precise as the width allows: a figure no job reaches (a trace's
 * damaged size, a bandwidth over a near-zero time) must not push the row past its columns. */
static void fit(char buf[32], double v, int width, int decimals)
{
    if (snprintf(buf, 32, "%*.*f", width, decimals, v) <= width)
        return;
    for (int prec = width - 6; prec >= 0; prec--)
        if (snprintf(buf, 32, "%*.*e", width, prec, v) <= width)
            return;
    snprintf(buf, 32, "%*s", width, "inf");
}

static void row(FILE *out, const cpa_stat *r)
{
    char size[32], count[32], time[32], algbw[32], busbw[32], ops[32];
    unsigned esize = cp_dtype_size(r->dtype);
    fit(size, (double)r->size, 12, 0);
    if (esize)
        fit(count, (double)(r->size / esize), 12, 0);
    else
        snprintf(count, sizeof count, "%12s", "-");
    double us = r->ops ? r->time_us_total / (double)r->ops : 0;
    fmt_time(time, us);
    if (strlen(time) > 7)
        fit(time, us, 7, 0);
    fit(algbw, r->algbw_gbps, 6, 2);
    fit(busbw, r->busbw_gbps, 6, 2);
    fit(ops, (double)r->ops, 7, 0);
    fprintf(out, "%s  %s  %8s  %6s  %6d  %s  %s  %s  %s\n", size, count, type_name(r->dtype),
            redop_name(r->redop), r->root >= 0 ? (int)r->root : -1, time, algbw, busbw, ops);
}

/* What the rows rest on, in '#' lines: where the times come from, and what the trace lost. */
static void footer(FILE *out, const cpa_analysis *a, const cpa_stats *s)
{
    uint64_t plugin = 0, events = 0, host = 0, cupti = 0;
    for (size_t i = 0; i < s->nrows; i++) {
        plugin += s->rows[i].timed_plugin;
        events += s->rows[i].timed_events;
        host += s->rows[i].timed_host;
        cupti += s->rows[i].timed_cupti;
    }
    uint64_t all = plugin + events + host + cupti;
    fprintf(out, "#\n");
    if (all && cupti)
        fprintf(out, "# times: CUPTI %.0f%%, NCCL's profiler plugin %.0f%%, CUDA events %.0f%%, "
                     "host only %.0f%% of %" PRIu64 " operations\n",
                100.0 * (double)cupti / (double)all, 100.0 * (double)plugin / (double)all,
                100.0 * (double)events / (double)all, 100.0 * (double)host / (double)all, all);
    else if (all)
        fprintf(out, "# times: NCCL's profiler plugin %.0f%%, CUDA events %.0f%%, host only %.0f%%"
                     " of %" PRIu64 " operations\n",
                100.0 * (double)plugin / (double)all, 100.0 * (double)events / (double)all,
                100.0 * (double)host / (double)all, all);
    if (s->oversized)
        fprintf(out, "# %" PRIu64 " operations of no possible size left out\n", s->oversized);
    if (a->model->lost_records)
        /* one line, or two where a count no trace reaches would take it past 100 columns */
        fprintf(out, "# WARNING: %s%" PRIu64 " records lost while tracing:%s"
                     "operations may be missing from these rows\n",
                cpa_lost_at_least(a->model) ? "at least " : "", a->model->lost_records,
                a->model->lost_records < 10000000000ull ? " " : "\n# ");
}

int cpx_report_nccl_tests(FILE *out, const cpa_analysis *a, const char *title)
{
    cpa_stats s;
    char err[128];
    if (cpa_stats_compute(a->model, &a->matched, CPA_ROWS_NCCL_TESTS, &s, err, sizeof err)) {
        errno = ENOMEM;
        return -1;
    }
    if (title) {
        char t[256];
        cp_text_escape(t, sizeof t, title, strlen(title));
        fprintf(out, "# collprof report --table nccl-tests: %s\n", t);
    }
    fprintf(out, "# the job's operations in nccl-tests' columns; time: the mean over #ops "
                 "operations\n");
    if (!s.nrows)
        fprintf(out, "#\n# no operation with a known duration\n");
    for (size_t i = 0; i < s.nrows; i++) {
        const cpa_stat *r = &s.rows[i];
        if (i == 0 || r->op != s.rows[i - 1].op || r->nranks != s.rows[i - 1].nranks)
            header(out, r);
        row(out, r);
    }
    footer(out, a, &s);
    cpa_stats_free(&s);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
