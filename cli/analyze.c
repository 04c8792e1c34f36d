/* analyze: the analysis of a trace directory for the verbs that need one (analyze.h). */
#include "cli/analyze.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/progress.h"

int cli_analyze(const char *verb, const char *dir, cpa_analysis *a)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cli_error(verb, CP_EXIT_USAGE, "cannot read '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cli_error(verb, CP_EXIT_USAGE, "'%s' is not a directory (wants a job's trace "
                                              "directory)", dir);
    char err[512] = "";
    cli_progress *p = cli_progress_start(verb, dir);
    int rc = cpa_analyze(dir, a, cli_progress_update, p, err, sizeof err);
    cli_progress_stop(p);
    if (rc == 0)
        return CLI_GO_ON;
    /* Out of memory is the one failure that says nothing about the input. */
    if (strstr(err, "out of memory"))
        return cli_error(verb, CP_EXIT_CANNOT_RUN, "%s", err);
    return cli_error(verb, CP_EXIT_USAGE, "%s", err[0] ? err : "cannot analyse the trace");
}

void cli_warn_trace(const cpa_analysis *a, size_t max)
{
    const cpa_model *m = a->model;
    size_t shown = m->nwarnings < max ? m->nwarnings : max;
    for (size_t i = 0; i < shown; i++)
        cli_warn("%s", m->warnings[i]); /* cli_warn escapes what the files put in it */
    uint64_t more = m->nwarnings - shown + m->dropped_warnings;
    if (more)
        cli_warn("%" PRIu64 " more warning(s) about the trace (`collprof report --json` lists them)",
                 more);
}
