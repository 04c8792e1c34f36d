/* The verbs whose engines are still being written. Each already has its real option table,
 * so `collprof <verb> --help` documents it and bad options are refused as they will be;
 * once parsed, it says it is not built yet (exit 3). When a verb is built, its table and
 * function move to cli/cmd_<verb>.c. */
#include "cli/cli.h"
#include "cli/options.h"

static int parse_then_not_built(const struct cli_command *c, int argc, char **argv)
{
    int nargs;
    int rc = cli_parse(c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    return cli_not_built(c->verb);
}

int cmd_selftest(int argc, char **argv)
{
    int json = 0, quick = 0;
    const char *sizes = NULL, *ops = NULL;
    static const char *const usage[] = { "selftest [--json] [--quick] [--sizes A:B] [--ops LIST]",
                                         NULL };
    const struct cli_option options[] = {
        CLI_BOOL(0, "json", &json, "one JSON object (keys in INTERFACES.md) instead of text"),
        CLI_BOOL(0, "quick", &quick, "fewer sizes and iterations: a verdict in seconds"),
        CLI_STRING(0, "sizes", &sizes, "A:B", "sweep message sizes from A to B bytes"),
        CLI_STRING(0, "ops", &ops, "LIST", "only these collectives (comma-separated)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "selftest",
        .usage = usage,
        .about = "Checks this node: GPUs, links and NICs, then every collective's bandwidth\n"
                 "against what the links should give, and the transport NCCL picked.",
        .options = options,
        .max_args = 0,
        .notes = "exit codes: 0 PASS or WARN, 1 FAIL, 3 could not run (no GPU, NCCL, driver)",
    };
    return parse_then_not_built(&c, argc, argv);
}
