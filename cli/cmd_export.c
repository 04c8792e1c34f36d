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
#include <inttypes.h>
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

/* The Perfetto export's default cap: about 450 MB of JSON at the ~450 bytes an event takes
 * in an emulated job's export (sites included). Perfetto UI loads a JSON trace whole in the
 * browser's memory and its importer struggles far below the 19.7 M events of a 1024-rank job
 * (issue 20); where exactly it gives up was not measured here (no browser on this machine),
 * so the cap is set well below. --all lifts it. */
#define PERFETTO_MAX_EVENTS 1000000ull
/* Perfetto's own protobuf: what Perfetto UI opens well past the JSON importer's sizes. The
 * UI holds a trace in the browser's WebAssembly memory (4 GB at most); at the ~200 bytes an
 * event took in bench_analyzer's protobuf (docs/PERFORMANCE.md), 10 M events is about 2 GB of
 * file, and the default export of a job above the JSON's cap is a protobuf of up to this
 * many events. Where exactly the UI gives up was not measured (no browser here). */
#define PERFETTO_PROTO_MAX_EVENTS 10000000ull

static const char export_notes[] =
    "--perfetto  a Perfetto trace (open in ui.perfetto.dev): a process per rank, a thread\n"
    "            per stream, a slice per call with a nested wait, flow arrows across the\n"
    "            ranks of each operation, instants on hangs; Chrome's trace JSON up to\n"
    "            1,000,000 events, Perfetto's own protobuf above (--format json|proto:\n"
    "            either, whatever the size; the protobuf adds a busbw counter per stream)\n"
    "--csv       one row per collective or send/recv per rank, header row first\n"
    "--prometheus  text exposition format for node_exporter's textfile collector\n"
    "\n"
    "A big job is more than Perfetto UI opens: --perfetto keeps about 1,000,000 events of\n"
    "JSON or 10,000,000 of protobuf, the job's end (where a hang is), and says what it left\n"
    "out (stderr, and the JSON's otherData.piece or the protobuf's 'job' instant).\n"
    "--window T0:T1 (seconds since the job's start, either side may be left open) and\n"
    "--ranks LIST (0-3,8) cut another piece; --max-events N sets the cap, --all lifts it.\n"
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

static const cpx_piece *g_piece;
static cpx_piece_said g_said;

static int run_export(enum format f, FILE *out, const cpa_analysis *a)
{
    switch (f) {
    case PERFETTO: return cpx_export_perfetto_piece(out, a, g_piece, &g_said);
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

/* "T0:T1" in seconds, either side empty (open): 0, or -1 with why. */
static int parse_window(const char *s, int64_t *t0, int64_t *t1, char *why, size_t len)
{
    const char *colon = strchr(s, ':');
    if (!colon) {
        snprintf(why, len, "--window '%s' is not T0:T1 (seconds; either side may be empty)", s);
        return -1;
    }
    int64_t *out[2] = {t0, t1};
    const char *part[2] = {s, colon + 1};
    size_t plen[2] = {(size_t)(colon - s), strlen(colon + 1)};
    for (int i = 0; i < 2; i++) {
        *out[i] = i ? INT64_MAX : INT64_MIN;
        if (!plen[i])
            continue;
        char buf[64], *end;
        if (plen[i] >= sizeof buf)
            goto bad;
        memcpy(buf, part[i], plen[i]);
        buf[plen[i]] = '\0';
        errno = 0;
        double v = strtod(buf, &end);
        if (*end || errno || !(v > -9e9 && v < 9e9)) /* NaN and beyond 285 years fail */
            goto bad;
        *out[i] = (int64_t)(v * 1e9);
    }
    if (*t0 >= *t1) {
        snprintf(why, len, "--window '%s': T0 must come before T1", s);
        return -1;
    }
    return 0;
bad:
    snprintf(why, len, "--window '%s' is not T0:T1 (seconds; either side may be empty)", s);
    return -1;
}

/* "0-3,8" global ranks -> keep[] by model rank index: 0, or -1 with why. */
static int parse_ranks(const char *s, const cpa_model *m, uint8_t *keep, char *why, size_t len)
{
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || errno || lo < 0)
            goto bad;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || errno || hi < lo)
                goto bad;
            p = end;
        }
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
        size_t found = 0;
        for (size_t ri = 0; ri < m->nranks; ri++)
            if (m->ranks[ri].rank >= lo && m->ranks[ri].rank <= hi) {
                keep[ri] = 1;
                found++;
            }
        if (!found) {
            snprintf(why, len, "--ranks '%s': no rank %ld%s%ld in the trace", s, lo,
                     hi > lo ? "-" : "", hi > lo ? hi : lo);
            if (hi == lo) /* "no rank 9" */
                snprintf(why, len, "--ranks '%s': no rank %ld in the trace", s, lo);
            return -1;
        }
    }
    return 0;
bad:
    snprintf(why, len, "--ranks '%s' is not a list of ranks and ranges (0-3,8)", s);
    return -1;
}

int cmd_export(int argc, char **argv)
{
    int format = NONE, all = 0;
    long max_events = 0; /* 0: the chosen format's default */
    const char *output = NULL, *window = NULL, *ranks = NULL, *pformat = NULL;
    static const char *const usage[] = {
        "export --perfetto [--window T0:T1] [--ranks LIST] [--all] [-o FILE] DIR",
        "export --perfetto --format json|proto [...] DIR",
        "export --csv|--prometheus [-o FILE] DIR", NULL};
    const struct cli_option options[] = {
        CLI_SET_INT(0, "perfetto", &format, PERFETTO, "Perfetto / Chrome trace JSON"),
        CLI_SET_INT(0, "csv", &format, CSV, "CSV, one row per collective per rank"),
        CLI_SET_INT(0, "prometheus", &format, PROMETHEUS, "Prometheus text exposition"),
        CLI_STRING('o', NULL, &output, "FILE", "write to FILE instead of stdout (- is stdout)"),
        CLI_STRING(0, "format", &pformat, "json|proto",
                   "--perfetto: JSON or Perfetto's protobuf (default: by size)"),
        CLI_STRING(0, "window", &window, "T0:T1",
                   "--perfetto: only calls in this stretch (seconds since the job's start)"),
        CLI_STRING(0, "ranks", &ranks, "LIST", "--perfetto: only these ranks (0-3,8)"),
        CLI_INT(0, "max-events", &max_events, "N", 1, 1e15,
                "--perfetto: about N events at most, the job's end (default 1000000 of "
                "JSON, 10000000 of protobuf)"),
        CLI_BOOL(0, "all", &all, "--perfetto: every event, however many (no cap)"),
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
    int capped = max_events != 0;
    if (format != PERFETTO && (window || ranks || all || capped))
        return cli_usage_error(&c, "--window, --ranks, --max-events and --all cut a --perfetto "
                                   "export only");
    if (format != PERFETTO && pformat)
        return cli_usage_error(&c, "--format chooses a --perfetto export's format only");
    if (all && capped)
        return cli_usage_error(&c, "--all and --max-events contradict each other");
    if (pformat && strcmp(pformat, "json") != 0 && strcmp(pformat, "proto") != 0)
        return cli_usage_error(&c, "--format '%s' is neither json nor proto", pformat);
    cpx_piece piece = {.t0_ns = INT64_MIN, .t1_ns = INT64_MAX};
    char why[256];
    if (window && parse_window(window, &piece.t0_ns, &piece.t1_ns, why, sizeof why))
        return cli_usage_error(&c, "%s", why);

    cpa_analysis a;
    cpa_keep_freed_memory(); /* one analysis, then the process exits */
    rc = cli_analyze("export", argv[1], &a);
    if (rc != CLI_GO_ON)
        return rc;
    uint8_t *keep = NULL;
    if (ranks) {
        keep = calloc(a.model->nranks ? a.model->nranks : 1, 1);
        if (!keep) {
            cpa_analysis_free(&a);
            return cli_error("export", CP_EXIT_CANNOT_RUN, "out of memory");
        }
        if (parse_ranks(ranks, a.model, keep, why, sizeof why)) {
            free(keep);
            cpa_analysis_free(&a);
            return cli_usage_error(&c, "%s", why);
        }
        piece.rank_keep = keep;
    }
    /* JSON while Perfetto UI's JSON importer takes the whole piece, its protobuf above */
    if (format == PERFETTO) {
        piece.proto = pformat ? !strcmp(pformat, "proto")
                              : cpx_perfetto_piece_events(&a, &piece) > PERFETTO_MAX_EVENTS;
        if (!capped)
            max_events = (long)(piece.proto ? PERFETTO_PROTO_MAX_EVENTS : PERFETTO_MAX_EVENTS);
        piece.max_events = all ? 0 : (uint64_t)max_events;
    }
    g_piece = &piece;
    if (output && strcmp(output, "-") != 0) {
        rc = export_to_file((enum format)format, output, &a);
    } else {
        errno = 0;
        rc = CP_EXIT_OK;
        if (run_export((enum format)format, stdout, &a) != 0 && !ferror(stdout))
            rc = cli_error("export", CP_EXIT_CANNOT_RUN, "out of memory writing the export");
        /* A failed stdout is the dispatcher's to report (a closed pipe is not an error). */
    }
    uint64_t calls = g_said.calls + g_said.calls_left_out;
    if (rc == CP_EXIT_OK && format == PERFETTO && piece.proto && !pformat)
        fprintf(stderr, "collprof export: %" PRIu64 " events, past what Perfetto UI's JSON "
                        "importer takes: wrote Perfetto's protobuf (ui.perfetto.dev opens it; "
                        "--format json for JSON)\n", g_said.events);
    if (rc == CP_EXIT_OK && format == PERFETTO && g_said.capped)
        fprintf(stderr, "collprof export: the job is over the cap of %ld events%s: kept its end, "
                        "from +%.3f s of %.3f s (%" PRIu64 " of %" PRIu64 " calls left out); "
                        "--window T0:T1 and --ranks LIST cut another piece, --all writes "
                        "everything\n", max_events,
                capped ? "" : " (what Perfetto UI opens comfortably)",
                (double)g_said.t0_ns / 1e9, a.duration_s, g_said.calls_left_out, calls);
    else if (rc == CP_EXIT_OK && format == PERFETTO && g_said.calls_left_out)
        fprintf(stderr, "collprof export: %" PRIu64 " of %" PRIu64 " calls left out "
                        "(--window, --ranks)\n", g_said.calls_left_out, calls);
    if (rc == CP_EXIT_OK)
        cli_warn_trace(&a, 10);
    free(keep);
    g_piece = NULL;
    cpa_analysis_free(&a);
    return rc;
}
