/* collprof report: what a job sent over NCCL, who was slow, what hung or disagreed.
 *
 * The analysis (analyzer/) and the formats (exporters/) do the work; this verb picks text
 * or JSON, and turns --fail-on into the exit status so a CI step can fail on a hang or a
 * mismatch. Damage in the trace is part of the answer, not an error: the report covers
 * what could be read and lists the warnings.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/analyze.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "exporters/exporters.h"
#include "trace/trace_format.h"

enum fail_on {
    FAIL_ON_HANG = 1u << 0,
    FAIL_ON_MISMATCH = 1u << 1,
};

static const char report_notes[] =
    "The text report fits one screen: the job, its clocks, the op table (by total time),\n"
    "the stragglers, hangs, mismatches and the trace's warnings; --top N rows each\n"
    "(default 10). --json prints every row unless --top is given; docs/REPORT.md\n"
    "lists its keys. Colour only on a terminal, never with\n"
    "NO_COLOR set.\n"
    "\n"
    "The op table has a row per op, communicator size (ranks) and exact message size S\n"
    "(nccl-tests' size: AllGather's S is the gathered buffer). --buckets rounds S down\n"
    "to powers of two, for jobs of many sizes. --table nccl-tests prints only the\n"
    "operations, in nccl-tests' columns (size, count, type, redop, root, time, algbw,\n"
    "busbw), to lay beside all_reduce_perf's output.\n"
    "\n"
    "A cut or corrupt trace file is not an error: the report covers what was readable and\n"
    "says what was lost (with --json, the warnings also go to stderr).\n"
    "\n"
    "exit codes: 0 report printed; 1 --fail-on found what it names; 2 bad options, or no\n"
    "readable trace in DIR; 3 out of memory";

/* "hang,mismatch" -> bits; 0 with a usage error printed for a word it does not know. */
static int parse_fail_on(const struct cli_command *c, const char *list, unsigned *mask)
{
    *mask = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 4 && strncmp(p, "hang", 4) == 0)
            *mask |= FAIL_ON_HANG;
        else if (n == 8 && strncmp(p, "mismatch", 8) == 0)
            *mask |= FAIL_ON_MISMATCH;
        else if (n == 0)
            ; /* "hang," or ",,": an empty item is harmless */
        else
            return cli_usage_error(c, "unknown item '%.*s' in --fail-on: wants hang, mismatch",
                                   (int)(n > 40 ? 40 : n), p);
        p += n;
        if (*p == ',')
            p++;
    }
    if (!*mask)
        return cli_usage_error(c, "--fail-on wants hang, mismatch or both");
    return CLI_GO_ON;
}

/* The shim's side logs in dir (a rank's `.log` beside its trace: the lines the job's stderr
 * could no longer take), said in one line when there are any. */
static void mention_side_logs(FILE *out, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t n = 0, slen = strlen(CP_SIDE_LOG_SUFFIX);
    char first[512] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= slen || strcmp(e->d_name + len - slen, CP_SIDE_LOG_SUFFIX) != 0)
            continue;
        char trace[4096 + 512];
        struct stat st;
        snprintf(trace, sizeof trace, "%s/%.*s%s", dir, (int)(len - slen), e->d_name,
                 CP_TRACE_FILE_SUFFIX);
        if (stat(trace, &st) != 0)
            continue; /* not a trace's */
        if (!n++)
            snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (n)
        fprintf(out, "collprof's own messages that the job's stderr could not take: %zu side "
                     "log%s in %s (%s%s)\n", n, n == 1 ? "" : "s", dir, first,
                n > 1 ? ", ..." : "");
}

int cmd_report(int argc, char **argv)
{
    int json = 0, buckets = 0;
    long top = 0;
    const char *fail_on = NULL, *table = NULL;
    static const char *const usage[] = {
        "report [--json] [--top N] [--fail-on LIST] DIR",
        "report --buckets [--top N] [--fail-on LIST] DIR",
        "report --table nccl-tests [--fail-on LIST] DIR", NULL };
    const struct cli_option options[] = {
        CLI_BOOL(0, "json", &json, "one JSON object (keys in docs/REPORT.md) instead of text"),
        CLI_INT(0, "top", &top, "N", 1, 1000000,
                "at most N rows per table, worst first\n(default 10; --json: every row)"),
        CLI_BOOL(0, "buckets", &buckets,
                 "op table rows by power-of-two size bucket,\nnot by exact size (text only)"),
        CLI_STRING(0, "table", &table, "nccl-tests",
                   "only the operations, as nccl-tests prints\nthem"),
        CLI_STRING(0, "fail-on", &fail_on, "LIST",
                   "exit 1 when the report finds any of LIST\n(comma-separated: hang, mismatch)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "report",
        .usage = usage,
        .about = "What the job sent over NCCL, who was slow, what hung or mismatched.",
        .options = options,
        .args = "DIR",
        .min_args = 1,
        .max_args = 1,
        .notes = report_notes,
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    unsigned mask = 0;
    if (fail_on && (rc = parse_fail_on(&c, fail_on, &mask)) != CLI_GO_ON)
        return rc;
    if (table && strcmp(table, "nccl-tests") != 0)
        return cli_usage_error(&c, "unknown --table '%.40s': wants nccl-tests", table);
    if (json && (buckets || table))
        return cli_usage_error(&c, "--%s is for text: --json's op rows are always by exact size "
                                   "and carry every column", buckets ? "buckets" : "table");
    if (table && (buckets || top))
        return cli_usage_error(&c, "--table nccl-tests prints every exact size: no --%s",
                               buckets ? "buckets" : "top");

    const char *dir = argv[1];
    cpa_analysis a;
    cpa_keep_freed_memory(); /* one analysis, then the process exits */
    rc = cli_analyze("report", dir, &a);
    if (rc != CLI_GO_ON)
        return rc;

    int out_rc;
    if (table) {
        out_rc = cpx_report_nccl_tests(stdout, &a, dir);
        cli_warn_trace(&a, 10);
    } else if (json) {
        out_rc = cpx_report_json(stdout, &a, (size_t)top);
        /* JSON has no room for prose a reader would see: the warnings go beside it. */
        cli_warn_trace(&a, 10);
    } else {
        cpx_text_options o = { .top = (size_t)top, .color = cpx_want_color(STDOUT_FILENO),
                               .title = dir,
                               .rows = buckets ? CPA_ROWS_BUCKETS : CPA_ROWS_EXACT };
        out_rc = cpx_report_text(stdout, &a, &o);
    }
    mention_side_logs(table || json ? stderr : stdout, dir);
    rc = CP_EXIT_OK;
    if (out_rc != 0 && !ferror(stdout))
        rc = cli_error("report", CP_EXIT_CANNOT_RUN, "out of memory writing the report");
    /* A failed stdout is the dispatcher's to report (or to ignore: a closed pipe). */
    else if (((mask & FAIL_ON_HANG) && a.hangs.nrows) ||
             ((mask & FAIL_ON_MISMATCH) && (a.mismatches.nrows || a.mismatches.total)))
        rc = CP_EXIT_BAD_NEWS;
    cpa_analysis_free(&a);
    return rc;
}
