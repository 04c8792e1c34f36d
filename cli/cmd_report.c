/* collprof report: what a job sent over NCCL, who was slow, what hung or disagreed.
 *
 * The analysis (analyzer/) and the formats (exporters/) do the work; this verb picks text
 * or JSON, and turns --fail-on into the exit status so a CI step can fail on a hang or a
 * mismatch. Damage in the trace is part of the answer, not an error: the report covers
 * what could be read and lists the warnings.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/analyze.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "exporters/exporters.h"

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

int cmd_report(int argc, char **argv)
{
    int json = 0;
    long top = 0;
    const char *fail_on = NULL;
    static const char *const usage[] = { "report [--json] [--top N] [--fail-on LIST] DIR", NULL };
    const struct cli_option options[] = {
        CLI_BOOL(0, "json", &json, "one JSON object (keys in docs/REPORT.md) instead of text"),
        CLI_INT(0, "top", &top, "N", 1, 1000000,
                "at most N rows per table, worst first\n(default 10; --json: every row)"),
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

    const char *dir = argv[1];
    cpa_analysis a;
    rc = cli_analyze("report", dir, &a);
    if (rc != CLI_GO_ON)
        return rc;

    int out_rc;
    if (json) {
        out_rc = cpx_report_json(stdout, &a, (size_t)top);
        /* JSON has no room for prose a reader would see: the warnings go beside it. */
        cli_warn_trace(&a, 10);
    } else {
        cpx_text_options o = { .top = (size_t)top, .color = cpx_want_color(STDOUT_FILENO),
                               .title = dir };
        out_rc = cpx_report_text(stdout, &a, &o);
    }
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
