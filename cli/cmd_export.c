/* collprof export: a trace directory in another tool's format (Perfetto, CSV, Prometheus).
 *
 * To stdout by default. With -o FILE, a regular file or a new one, the output goes to a
 * temporary file beside FILE that is renamed over it once complete and synced, so a reader
 * (a Prometheus textfile collector scraping every few seconds, say) never sees half a
 * file, and a failure, or ^C, leaves FILE as it was. Anything else at FILE (a device, a
 * FIFO, a socket, a symbolic link) is opened and written through: a rename would put a
 * regular file in its place, and `-o /dev/null` as root would take /dev/null from
 * everything else on the machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/analyze.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "exporters/exporters.h"

enum format { NONE, PERFETTO, CSV, PROMETHEUS };

static const char export_notes[] =
    "--perfetto  Chrome/Perfetto trace JSON (open in ui.perfetto.dev): a process per rank,\n"
    "            a thread per stream, a slice per call with a nested wait, flow arrows\n"
    "            across the ranks of each operation, instants on hangs\n"
    "--csv       one row per collective or send/recv per rank, header row first\n"
    "--prometheus  text exposition format for node_exporter's textfile collector\n"
    "docs/REPORT.md lists every column, key and metric. The trace's warnings go to stderr.\n"
    "\n"
    "-o FILE replaces a regular FILE whole, once written; a device, FIFO or symbolic\n"
    "link at FILE is written through and stays what it is.\n"
    "\n"
    "exit codes: 0 written; 2 bad options, no readable trace in DIR, or FILE cannot be\n"
    "written (then a regular FILE is left as it was); 3 out of memory";

/* The temporary file to remove if a signal ends us mid-write. A signal handler may only
 * read it, so it is set once before the handlers are installed. */
static char pending_tmp[4096];

static void remove_tmp_and_die(int sig)
{
    if (pending_tmp[0])
        unlink(pending_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int run_export(enum format f, FILE *out, const cpa_analysis *a)
{
    switch (f) {
    case PERFETTO: return cpx_export_perfetto(out, a);
    case CSV: return cpx_export_csv(out, a);
    case PROMETHEUS: return cpx_export_prometheus(out, a);
    case NONE: break;
    }
    return -1;
}

/* The export onto fd, flushed, synced when it is a file (a device or a FIFO has nothing
 * to sync), closed: 0 or the errno of the first failure. */
static int write_export(enum format f, int fd, const cpa_analysis *a)
{
    int e = 0;
    struct stat st;
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    FILE *out = fdopen(fd, "w");
    if (!out) {
        e = errno;
        close(fd);
        return e;
    }
    errno = 0;
    if (run_export(f, out, a) != 0)
        e = errno ? errno : EIO;
    if (!e && (fflush(out) != 0 || (regular && fsync(fileno(out)) != 0)))
        e = errno;
    if (fclose(out) != 0 && !e)
        e = errno;
    return e;
}

static int export_error(const char *path, int e)
{
    if (e == ENOMEM)
        return cli_error("export", CP_EXIT_CANNOT_RUN, "out of memory writing '%s'", path);
    if (e)
        return cli_error("export", CP_EXIT_USAGE, "cannot write '%s': %s", path, strerror(e));
    return CP_EXIT_OK;
}

/* Through what is at path, in place: a symbolic link is followed (a dangling one makes its
 * target), a FIFO waits for its reader, a device takes the bytes. */
static int export_through(enum format f, const char *path, const cpa_analysis *a)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    return export_error(path, fd < 0 ? errno : write_export(f, fd, a));
}

static int export_to_file(enum format f, const char *path, const cpa_analysis *a)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return export_through(f, path, a);
    if (snprintf(pending_tmp, sizeof pending_tmp, "%s.XXXXXX", path) >= (int)sizeof pending_tmp)
        return cli_error("export", CP_EXIT_USAGE, "cannot write '%s': name too long", path);
    int fd = mkstemp(pending_tmp);
    if (fd < 0) {
        int e = errno;
        pending_tmp[0] = '\0';
        return cli_error("export", CP_EXIT_USAGE, "cannot write '%s': %s", path, strerror(e));
    }
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa = { .sa_handler = remove_tmp_and_die }, old[3];
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);

    /* mkstemp makes it 0600; the file should get what any new file gets here. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);

    int e = write_export(f, fd, a);
    if (!e && rename(pending_tmp, path) != 0)
        e = errno;
    if (e)
        unlink(pending_tmp);
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    pending_tmp[0] = '\0';
    return export_error(path, e);
}

int cmd_export(int argc, char **argv)
{
    int format = NONE;
    const char *output = NULL;
    static const char *const usage[] = { "export --perfetto|--csv|--prometheus [-o FILE] DIR",
                                         NULL };
    const struct cli_option options[] = {
        CLI_SET_INT(0, "perfetto", &format, PERFETTO, "Perfetto / Chrome trace JSON"),
        CLI_SET_INT(0, "csv", &format, CSV, "CSV, one row per collective per rank"),
        CLI_SET_INT(0, "prometheus", &format, PROMETHEUS, "Prometheus text exposition"),
        CLI_STRING('o', NULL, &output, "FILE", "write to FILE instead of stdout (- is stdout)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "export",
        .usage = usage,
        .about = "A trace directory in another tool's format; exactly one format is chosen.",
        .options = options,
        .args = "DIR",
        .min_args = 1,
        .max_args = 1,
        .notes = export_notes,
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    if (format == NONE)
        return cli_usage_error(&c, "wants one of --perfetto, --csv, --prometheus");

    cpa_analysis a;
    rc = cli_analyze("export", argv[1], &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (output && strcmp(output, "-") != 0) {
        rc = export_to_file((enum format)format, output, &a);
    } else {
        errno = 0;
        rc = CP_EXIT_OK;
        if (run_export((enum format)format, stdout, &a) != 0 && !ferror(stdout))
            rc = cli_error("export", CP_EXIT_CANNOT_RUN, "out of memory writing the export");
        /* A failed stdout is the dispatcher's to report (a closed pipe is not an error). */
    }
    if (rc == CP_EXIT_OK)
        cli_warn_trace(&a, 10);
    cpa_analysis_free(&a);
    return rc;
}
