/* collprof top: every profiled rank of this node, live. On a terminal, the ncurses screen
 * (tui/top_screen.c); with --once, --json or no terminal, one snapshot of the live model
 * (tui/live.h) on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "common/settings.h"
#include "tui/live.h"
#include "tui/top.h"

static const char top_notes[] =
    "Reads the stats blocks profiled processes publish (COLLPROF_LIVE_DIR, else /dev/shm):\n"
    "your own, every user's for root. A snapshot scans twice, min(SECS, 0.25) s apart, so\n"
    "its rates cover that interval. An empty node is not an error.\n"
    "\n"
    "A rank that exits stays listed, exited, for a few refreshes. A process killed with\n"
    "SIGKILL (or crashed) cannot remove its block: it is listed as died, and from 30 s\n"
    "after its death no longer listed but counted in a note. --clean removes the blocks\n"
    "of processes that are gone (yours; every user's for root), never a live one's.\n"
    "\n"
    "--prometheus FILE writes the node's figures as Prometheus text (collprof_live_*, a\n"
    "sample per process labelled job, rank, local_rank, host, pid) every SECS seconds until\n"
    "SIGINT or SIGTERM, for node_exporter's textfile collector: FILE is replaced whole each\n"
    "time (a temporary file beside it, renamed), so a scrape never reads half of it. With\n"
    "--once, one snapshot. docs/grafana/collprof-live.json is a dashboard over them.\n"
    "\n"
    "exit codes: 0 shown (or cleaned); 2 bad options; 3 the directory cannot be read";

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A scan that keeps the rates of the last interval; the empty state when the directory does
 * not exist (it holds no profiled process). 0, or the exit code of a one-line error. */
static int scan(const char *verb, const cp_settings *set, cpt_live *l)
{
    if (cpt_live_scan(l, set->live_dir, geteuid()) != 0 && errno != ENOENT) {
        int e = errno;
        return cli_error(verb, CP_EXIT_CANNOT_RUN, "cannot read '%s': %s", l->dir, strerror(e));
    }
    return 0;
}

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* FILE replaced whole: written beside it under a name the textfile collector skips (it reads
 * *.prom), then renamed. 0, or errno. */
static int write_prometheus(const char *path, const cpt_live *l)
{
    if (!strcmp(path, "-"))
        return cpt_snapshot_prometheus(stdout, l) == 0 ? 0 : EIO;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return e;
    }
    int e = cpt_snapshot_prometheus(f, l) == 0 ? 0 : (errno ? errno : EIO);
    if (fclose(f) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e)
        unlink(tmp);
    return e;
}

/* top --prometheus FILE: every delay_s until SIGINT/SIGTERM, or once. */
static int prometheus(const char *verb, const cp_settings *set, const char *path,
                      double delay_s, int once)
{
    cpt_live l = {0};
    l.hang_s = set->hang_s;
    /* SA_RESTART: a signal during a write must not fail it (EINTR); nanosleep returns
     * EINTR whatever the flag, which ends the wait */
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = scan(verb, set, &l);
    if (!rc && once && l.nranks > 0) { /* rates need two scans */
        sleep_s(delay_s < 0.25 ? delay_s : 0.25);
        rc = scan(verb, set, &l);
    }
    while (!rc) {
        int e = write_prometheus(path, &l);
        if (e) {
            rc = cli_error(verb, CP_EXIT_USAGE, "cannot write '%s': %s", path, strerror(e));
            break;
        }
        if (once)
            break;
        /* a signal ends the sleep: nanosleep returns EINTR and g_stop is set */
        struct timespec ts = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
        while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        if (g_stop)
            break;
        rc = scan(verb, set, &l);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    cpt_live_free(&l);
    return rc ? rc : CP_EXIT_OK;
}

static int snapshot(const char *verb, const cp_settings *set, double delay_s, int json)
{
    cpt_live l = {0};
    l.hang_s = set->hang_s; /* hung as the screen marks it: flagged, or in flight that long */
    int rc = scan(verb, set, &l);
    if (!rc && l.nranks > 0) {
        sleep_s(delay_s < 0.25 ? delay_s : 0.25);
        rc = scan(verb, set, &l);
    }
    if (rc) {
        cpt_live_free(&l);
        return rc;
    }
    /* a directory that does not exist holds no profiled process: the empty state */
    rc = json ? cpt_snapshot_json(stdout, &l) : cpt_snapshot_text(stdout, &l);
    cpt_live_free(&l);
    (void)rc; /* a failed stdout is the dispatcher's to report */
    return CP_EXIT_OK;
}

static int clean(const char *verb, const cp_settings *set)
{
    size_t kept;
    int removed = cpt_live_clean(set->live_dir, geteuid(), &kept);
    if (removed < 0 && errno == ENOENT)
        removed = 0; /* no directory: nothing was left behind */
    else if (removed < 0)
        return cli_error(verb, CP_EXIT_CANNOT_RUN, "cannot read the live directory: %s",
                         strerror(errno));
    printf("collprof top: removed %d block%s of processes that are gone; %zu of live "
           "processes kept\n", removed, removed == 1 ? "" : "s", kept);
    return CP_EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
    int once = 0, json = 0, do_clean = 0;
    double delay_s = 1.0;
    const char *prom = NULL;
    static const char *const usage[] = {"top [--once] [--json] [-d SECS]",
                                        "top --prometheus FILE [--once] [-d SECS]", "top --clean",
                                        NULL};
    const struct cli_option options[] = {
        CLI_BOOL(0, "once", &once, "print one snapshot and exit (no terminal needed)"),
        CLI_BOOL(0, "clean", &do_clean,
                 "remove the blocks of processes that are gone\n(SIGKILL leaves them), and exit"),
        CLI_BOOL(0, "json", &json, "the snapshot as JSON (implies --once)"),
        CLI_STRING(0, "prometheus", &prom, "FILE",
                   "write Prometheus text to FILE every SECS (- is stdout)"),
        CLI_DOUBLE('d', NULL, &delay_s, "SECS", 0.1, 86400, "refresh every SECS seconds (default 1)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "top",
        .usage = usage,
        .about = "Live view of every profiled rank on this node (COLLPROF_LIVE).",
        .options = options,
        .max_args = 0,
        .notes = top_notes,
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    if (do_clean && (once || json || prom))
        return cli_usage_error(&c, "--clean prints no snapshot: no --%s",
                               prom ? "prometheus" : once ? "once" : "json");
    if (prom && json)
        return cli_usage_error(&c, "--prometheus and --json are two formats: one at a time");
    cp_settings set;
    cp_settings_load(&set);
    if (do_clean)
        return clean(c.verb, &set);
    if (prom)
        return prometheus(c.verb, &set, prom, delay_s, once);
    if (once || json || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
        return snapshot(c.verb, &set, delay_s, json);
    return cpt_top_run(&set, geteuid(), delay_s);
}
