/* collprof view: the analysis of a trace directory in terminal screens (tui/view.h).
 *
 * The trace is read as `collprof report` reads it (cli_analyze), so bad input gives the
 * same one-line errors and exit 2. Without a terminal on both ends there is nothing to be
 * interactive with: the summary screen is printed once as text, so the verb stays
 * scriptable (and testable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/analyze.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "tui/view.h"
#include "tui/view_draw.h"

#define TEXT_WIDTH 80

static const char view_notes[] =
    "Screens: 1 summary (the job, the op table), 2 stragglers (each rank's lateness over\n"
    "the job), 3 hangs and mismatches (the field diff per rank, call sites), 4 timeline\n"
    "(rows = ranks, x = job time; +/- zoom, arrows scroll), 5 a collective's detail (Enter\n"
    "on a row: every rank's arrival, start, end, wait). Keys: q quit, arrows/PgUp/PgDn\n"
    "move, Enter detail, / filter, h help, Tab or 1-5 switch screens. NO_COLOR is honoured.\n"
    "\n"
    "When stdin or stdout is not a terminal, the summary screen is printed once as text.\n"
    "\n"
    "exit codes: 0 done; 2 bad options, or no readable trace in DIR; 3 no terminal could be\n"
    "set up, or out of memory";

static int print_summary(const cpa_analysis *a, const char *dir)
{
    cpv_data d;
    if (cpv_data_init(&d, a, dir) != 0)
        return cli_error("view", CP_EXIT_CANNOT_RUN, "out of memory");
    char *text = cpv_summary_text(&d, TEXT_WIDTH);
    cpv_data_free(&d);
    if (!text)
        return cli_error("view", CP_EXIT_CANNOT_RUN, "out of memory");
    fputs(text, stdout);
    free(text);
    return CP_EXIT_OK;
}

int cmd_view(int argc, char **argv)
{
    static const char *const usage[] = { "view DIR", NULL };
    const struct cli_option options[] = { CLI_END() };
    const struct cli_command c = {
        .verb = "view",
        .usage = usage,
        .about = "An interactive terminal view over a trace directory.",
        .options = options,
        .args = "DIR",
        .min_args = 1,
        .max_args = 1,
        .notes = view_notes,
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    const char *dir = argv[1];
    cpa_analysis a;
    rc = cli_analyze("view", dir, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        rc = print_summary(&a, dir);
    else if (cpt_view_run(&a, dir) != 0)
        rc = cli_error("view", CP_EXIT_CANNOT_RUN, "cannot run the terminal view (TERM=%s)",
                       getenv("TERM") ? getenv("TERM") : "unset");
    else
        rc = CP_EXIT_OK;
    cpa_analysis_free(&a);
    return rc;
}
