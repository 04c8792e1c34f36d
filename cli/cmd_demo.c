/* collprof demo: the main job on a machine with no GPU.
 *
 * Runs collprof-sim's "mixed" training pattern (data-parallel all-reduces, tensor-parallel
 * sub-communicators, reduce-scatters) with N ranks on the emulated 8xH100 node, under the
 * shim, with one rank's GPU made late before every collective (COLLPROF_EMU_DELAY), then
 * analyses the trace and prints the report. The straggler is injected, and the report is
 * checked for it: a demo that could not find its own straggler says so and exits 1, which is
 * what the tests of this command hold it to.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "trace/trace_reader.h"
#include "exporters/exporters.h"

extern char **environ;

#define DEMO_DELAY_MS 2
#define DEMO_STEPS "20"
#define DEMO_SCALE "0.02"
#define DEMO_GPUS_PER_HOST 8 /* the h100-nvlink-8 preset */

struct demo_paths {
    char sim[PATH_MAX], shim[PATH_MAX], emu[PATH_MAX];
};

static int find_paths(struct demo_paths *p)
{
    if (cli_find_sim(p->sim, sizeof p->sim))
        return cli_error("demo", CP_EXIT_CANNOT_RUN,
                         "cannot find collprof-sim beside the collprof binary");
    if (cli_find_shim(p->shim, sizeof p->shim))
        return cli_error("demo", CP_EXIT_CANNOT_RUN,
                         "cannot find libcollprof.so beside the collprof binary");
    if (cli_find_emu_dir(p->emu, sizeof p->emu))
        return cli_error("demo", CP_EXIT_CANNOT_RUN,
                         "cannot find the emulation (libnccl.so.2 in ../emu or "
                         "../lib/collprof/emu beside the collprof binary)");
    return 0;
}

/* A fresh folder for the trace: DIR made if absent, refused if it already holds traces (a
 * report would mix two jobs); else a temporary one the demo removes. */
static int make_dir(const char *keep, char *out, size_t cap)
{
    if (!keep) {
        const char *tmp = getenv("TMPDIR");
        snprintf(out, cap, "%s/collprof-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(out))
            return cli_error("demo", CP_EXIT_CANNOT_RUN, "cannot make a folder for the trace "
                             "in '%s': %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return 0;
    }
    if ((size_t)snprintf(out, cap, "%s", keep) >= cap)
        return cli_error("demo", CP_EXIT_USAGE, "--keep: path too long");
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return cli_error("demo", CP_EXIT_USAGE, "--keep '%s': %s", keep, strerror(errno));
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_error("demo", CP_EXIT_USAGE, "--keep '%s' is not a folder", keep);
    char **paths = NULL;
    char err[256];
    int n = cp_trace_dir_list(out, &paths, err, sizeof err);
    if (n < 0)
        return cli_error("demo", CP_EXIT_USAGE, "--keep: %s", err);
    cp_trace_dir_free(paths, n);
    if (n > 0)
        return cli_error("demo", CP_EXIT_USAGE, "--keep '%s' already holds %d trace files; "
                         "give an empty or new folder", keep, n);
    return 0;
}

static void remove_dir(const char *dir)
{
    char **paths = NULL;
    char err[256];
    int n = cp_trace_dir_list(dir, &paths, err, sizeof err);
    for (int i = 0; i < n; i++)
        unlink(paths[i]);
    if (n >= 0)
        cp_trace_dir_free(paths, n);
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/sim.log", dir);
    unlink(log);
    rmdir(dir);
}

/* The environment of the job: the caller's, less variables that would change what the
 * demo shows (other faults, another trace folder, another topology), plus the demo's. */
static char **job_env(const struct demo_paths *p, const char *dir, long ranks, int straggler,
                      char *store, size_t cap)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char **env = calloc(n + 8, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    const char *ld_path = getenv("LD_LIBRARY_PATH"), *preload = getenv("LD_PRELOAD");
    for (char **e = environ; *e; e++) {
        if (!strncmp(*e, "COLLPROF_EMU_", 13) || !strncmp(*e, "COLLPROF_DIR=", 13) ||
            !strncmp(*e, "LD_LIBRARY_PATH=", 16) || !strncmp(*e, "LD_PRELOAD=", 11) ||
            !strncmp(*e, "COLLPROF_GPU_TIMING=", 20))
            continue;
        env[k++] = *e;
    }
    size_t used = 0;
    int hosts = (int)((ranks + DEMO_GPUS_PER_HOST - 1) / DEMO_GPUS_PER_HOST);
    const char *const fmt[] = {"LD_LIBRARY_PATH=%s%s%s", "LD_PRELOAD=%s%s%s",
                               "COLLPROF_DIR=%s", "COLLPROF_EMU_TOPO=h100-nvlink-8",
                               "COLLPROF_EMU_DELAY=%d:%d", "COLLPROF_EMU_HOSTS=%d"};
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        int w;
        switch (i) {
        case 0: /* the emulation first: it must win over a real NCCL on the path */
            w = snprintf(store + used, cap - used, fmt[i], p->emu, ld_path && *ld_path ? ":" : "",
                         ld_path ? ld_path : "");
            break;
        case 1: /* after what the caller preloads (a sanitizer runtime must stay first) */
            w = snprintf(store + used, cap - used, fmt[i], preload && *preload ? preload : "",
                         preload && *preload ? " " : "", p->shim);
            break;
        case 2: w = snprintf(store + used, cap - used, fmt[i], dir); break;
        case 4: w = snprintf(store + used, cap - used, fmt[i], straggler, DEMO_DELAY_MS); break;
        case 5: w = snprintf(store + used, cap - used, fmt[i], hosts); break;
        default: w = snprintf(store + used, cap - used, "%s", fmt[i]); break;
        }
        if (w < 0 || (size_t)w >= cap - used) {
            free(env);
            return NULL;
        }
        env[k++] = store + used;
        used += (size_t)w + 1;
    }
    env[k] = NULL;
    return env;
}

static void progress(int tty, const char *what, double seconds)
{
    if (tty)
        fprintf(stderr, "\r\033[K%s %.1f s", what, seconds);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the job; 0 when it exited 0, else a status with its log's tail on stderr. */
static int run_job(struct demo_paths *p, const char *dir, long ranks, int straggler)
{
    static char store[3 * PATH_MAX + 512];
    char **env = job_env(p, dir, ranks, straggler, store, sizeof store);
    if (!env)
        return cli_error("demo", CP_EXIT_CANNOT_RUN, "out of memory");
    char nranks[16], log[PATH_MAX + 16];
    snprintf(nranks, sizeof nranks, "%ld", ranks);
    snprintf(log, sizeof log, "%s/sim.log", dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(env);
        return cli_error("demo", CP_EXIT_CANNOT_RUN, "cannot write '%s': %s", log,
                         strerror(errno));
    }
    const char *const argv[] = {p->sim, "--launch", nranks, "--pattern", "mixed", "--steps",
                                DEMO_STEPS, "--scale", DEMO_SCALE, "--timeout", "60", NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execve(p->sim, (char *const *)argv, env);
        _exit(127);
    }
    close(fd);
    free(env);
    if (pid < 0)
        return cli_error("demo", CP_EXIT_CANNOT_RUN, "fork: %s", strerror(errno));
    int tty = isatty(STDERR_FILENO), status = 0;
    double t0 = now_s();
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        progress(tty, "running the emulated job...", now_s() - t0);
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    if (tty)
        fprintf(stderr, "\r\033[K");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        fprintf(stderr, "  | %s", line);
    if (f)
        fclose(f);
    if (WIFSIGNALED(status))
        return cli_error("demo", CP_EXIT_CANNOT_RUN, "the emulated job died of signal %d",
                         WTERMSIG(status));
    return cli_error("demo", CP_EXIT_CANNOT_RUN, "the emulated job failed (exit %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void on_progress(void *ctx, const char *stage, double fraction)
{
    (void)fraction;
    if (*(int *)ctx)
        fprintf(stderr, "\r\033[Kanalysing: %s", stage);
}

int cmd_demo(int argc, char **argv)
{
    long ranks = 8;
    const char *keep = NULL;
    static const char *const usage[] = { "demo [--ranks N] [--keep DIR]", NULL };
    const struct cli_option options[] = {
        CLI_INT(0, "ranks", &ranks, "N", 2, 64, "ranks of the emulated job (default 8)"),
        CLI_STRING(0, "keep", &keep, "DIR", "keep the trace in DIR (default: removed at the end)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "demo",
        .usage = usage,
        .about = "Runs an emulated job (no GPU needed) with a straggler under the profiler,\n"
                 "then shows its report.",
        .options = options,
        .max_args = 0,
        .notes = "exit codes: 0 the report named the injected straggler, 1 it did not,\n"
                 "2 bad options, 3 the job could not run",
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    struct demo_paths p;
    char dir[PATH_MAX];
    if ((rc = find_paths(&p)) != 0 || (rc = make_dir(keep, dir, sizeof dir)) != 0)
        return rc;
    int straggler = ranks > 5 ? 5 : (int)ranks - 1;
    int hosts = (int)((ranks + DEMO_GPUS_PER_HOST - 1) / DEMO_GPUS_PER_HOST);
    printf("collprof demo: an emulated %ld-rank training job (%d x %s, emulated on the CPU: no "
           "GPU needed),\nrunning collprof-sim --pattern mixed under the profiler. Rank %d's "
           "GPU is made %d ms late\nbefore every collective (COLLPROF_EMU_DELAY=%d:%d): can "
           "collprof find it?\n\n", ranks, hosts,
           hosts > 1 ? "8xH100 NVLink nodes" : "8xH100 NVLink node", straggler,
           DEMO_DELAY_MS, straggler, DEMO_DELAY_MS);
    fflush(stdout);
    if ((rc = run_job(&p, dir, ranks, straggler)) != 0) {
        if (!keep)
            remove_dir(dir);
        return rc;
    }
    cpa_analysis a;
    char err[512];
    int tty = isatty(STDERR_FILENO);
    if (cpa_analyze(dir, &a, on_progress, &tty, err, sizeof err)) {
        if (tty)
            fprintf(stderr, "\r\033[K");
        if (!keep)
            remove_dir(dir);
        return cli_error("demo", CP_EXIT_CANNOT_RUN, "%s", err);
    }
    if (tty)
        fprintf(stderr, "\r\033[K");
    cpx_text_options o = {.top = 5, .color = cpx_want_color(STDOUT_FILENO),
                          .title = keep ? dir : "the demo job"};
    cpx_report_text(stdout, &a, &o);
    int found = a.stragglers.nrows > 0 && a.stragglers.rows[0].rank == straggler;
    if (found) {
        const cpa_straggler *r = &a.stragglers.rows[0];
        printf("\ncollprof named rank %d, the rank the demo made late: late in %llu of the "
               "collectives it joined, by %.2f ms at the median.\n", straggler,
               (unsigned long long)r->late_count, r->late_us_p50 / 1e3);
        /* the demo holds the GPU, not the host: the cause to find is the GPU backlog */
        if (r->cause == CPA_CAUSE_BACKLOG)
            printf("It also told why: its host entered NCCL on time and its GPU started late "
                   "(GPU backlog, %.0f%% of its late collectives).\n",
                   100.0 * (double)r->by_cause[CPA_CAUSE_BACKLOG] / (double)r->late_count);
        else
            printf("But it gave the cause as %s where the demo held the GPU (gpu_backlog): "
                   "on a loaded machine the host can be late too.\n",
                   cpa_late_cause_name(r->cause));
    } else
        printf("\ncollprof did NOT name rank %d, the rank the demo made late: this is a bug, "
               "please report it with the trace (collprof demo --keep DIR).\n", straggler);
    cpa_analysis_free(&a);
    if (keep) {
        char *q = cli_shell_quote(dir); /* the lines are for pasting */
        printf("\nNext, on this trace:\n  collprof view %s\n  collprof report --json %s\n"
               "  collprof export --perfetto -o demo.json %s   # open in ui.perfetto.dev\n",
               q ? q : dir, q ? q : dir, q ? q : dir);
        free(q);
    } else
        printf("\nThe trace was in a temporary folder, now removed. To keep it and explore:\n"
               "  collprof demo --keep DIR, then collprof view DIR, collprof report --json "
               "DIR,\n  collprof export --perfetto -o demo.json DIR\n");
    if (!keep)
        remove_dir(dir);
    return found ? CP_EXIT_OK : CP_EXIT_BAD_NEWS;
}
