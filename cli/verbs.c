/* verbs: the table of the `collprof` command's verbs (git.c's, perf.c's), read by the
 * dispatcher (main.c), by `--help` and by test_cli, which walks it. */
#include <string.h>

#include "cli/cli.h"

const struct cli_verb cli_verbs[] = {
    { "run", cmd_run, CLI_KEEP_SIGPIPE, "profile a job: sets COLLPROF_* and LD_PRELOAD, runs CMD" },
    { "report", cmd_report, 0, "text report of a trace directory (or --json)" },
    { "dump", cmd_dump, 0, "every record of a trace, one a line (like `perf script`)" },
    { "view", cmd_view, 0, "interactive view (TUI) over a trace" },
    { "top", cmd_top, 0, "live view of the profiled ranks on this node" },
    { "export", cmd_export, 0, "a trace as Perfetto JSON, CSV or Prometheus text" },
    { "selftest", cmd_selftest, 0, "checks this node: topology, every collective's bandwidth" },
    { "demo", cmd_demo, 0, "an emulated job with a straggler, then its report" },
};

const size_t cli_nverbs = sizeof cli_verbs / sizeof cli_verbs[0];

const struct cli_verb *cli_find_verb(const char *name)
{
    for (size_t i = 0; i < cli_nverbs; i++)
        if (strcmp(cli_verbs[i].name, name) == 0)
            return &cli_verbs[i];
    return NULL;
}
