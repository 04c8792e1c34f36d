/* run: a job under the profiler — COLLPROF_* and LD_PRELOAD set, then the job itself.
 *
 * `collprof run` stays the job's parent so that it can say where the trace is once the job
 * ended; it forwards SIGINT and SIGTERM to the job (a terminal's Ctrl-C reaches both
 * anyway, a `kill` of collprof only reaches collprof) and exits with the job's status
 * (128 + the signal for a job killed by one, as a shell does). The trace directory is
 * fixed here, before the job starts, so that every rank a launcher starts under it writes
 * into the same one, and the message can name it.
 *
 * That message must be true: the trace files this job wrote (names that were not in D
 * before it started), else why there are none, as far as this process can tell: D or a file
 * in it cannot be made (and why), D was made (by a rank's first NCCL call) yet no rank got
 * its file, or the job made no NCCL call. The shim's own WARN line, above it, says more.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "launcher/launcher.h"
#include "common/settings.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"

static volatile sig_atomic_t g_child;

static void forward(int sig)
{
    if (g_child > 0)
        kill((pid_t)g_child, sig);
}



/* The default INTERFACES.md gives COLLPROF_DIR, decided once here for every rank. */
static void default_dir(char *out, size_t cap)
{
    const char *job = cp_launcher_job_id();
    if (job) {
        snprintf(out, cap, "collprof-%s", job);
        return;
    }
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(out, cap, "collprof-%s-%d", stamp, (int)getpid());
}

/* The trace files in dir (sorted paths, cp_trace_dir_free them); 0 when there is no dir. */
static int list_traces(const char *dir, char ***paths)
{
    char err[256];
    int n = cp_trace_dir_list(dir, paths, err, sizeof err);
    if (n < 0) {
        *paths = NULL;
        n = 0;
    }
    return n;
}

/* How many of after's paths are not in before (both sorted). */
static int count_new(char **before, int nb, char **after, int na)
{
    int n = 0;
    for (int i = 0, j = 0; i < na; i++) {
        while (j < nb && strcmp(before[j], after[i]) < 0)
            j++;
        n += j >= nb || strcmp(before[j], after[i]) != 0;
    }
    return n;
}

/* What stops a trace file from being made in dir, found without changing anything: the
 * errno that the shim's steps (mkdir -p dir, then dir/rank%05d-<host>-<pid>.cptrace) would
 * meet here, 0 when nothing does. The nearest existing ancestor decides: not a directory,
 * or not one this user may write into. */
static int trace_blocker(const char *dir)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    size_t name = strlen("/rank00000--") + strnlen(host, CP_HOSTNAME_BYTES - 1) +
                  strlen("4194304") + strlen(CP_TRACE_FILE_SUFFIX);
    if (strlen(dir) + name >= PATH_MAX)
        return ENAMETOOLONG;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    struct stat st;
    while (stat(path, &st) != 0) {
        if (errno != ENOENT)
            return errno;
        char *slash = strrchr(path, '/');
        if (!slash && strcmp(path, ".") == 0)
            return ENOENT; /* the working directory itself is gone */
        if (!slash)
            snprintf(path, sizeof path, ".");
        else
            slash[slash == path] = '\0';
    }
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return access(path, W_OK | X_OK) == 0 ? 0 : errno;
}

/* The closing line: where this job's trace is, or the truth about why there is none. */
static void say_where(const char *dir, int existed, char **before, int nb)
{
    char **after;
    int na = list_traces(dir, &after);
    int fresh = count_new(before, nb, after, na);
    cp_trace_dir_free(after, na);
    struct stat st;
    int exists = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (fresh > 0) {
        char *q = cli_shell_quote(dir);
        cli_note("trace in '%s'; see it with: collprof report %s", dir, q ? q : dir);
        free(q);
        return;
    }
    int e = trace_blocker(dir);
    if (!exists && e)
        cli_note("no trace: cannot create the trace directory '%s': %s", dir, strerror(e));
    else if (!exists)
        cli_note("the job made no NCCL call: no trace in '%s'", dir);
    else if (!existed) /* only a rank's first NCCL call makes it */
        cli_note("no trace in '%s': every rank that called NCCL failed to create its file "
                 "there%s%s", dir, e ? ": " : " (the collprof: WARN line above says why)",
                 e ? strerror(e) : "");
    else if (e)
        cli_note("no trace in '%s': a trace file cannot be created there: %s", dir, strerror(e));
    else
        cli_note("the job made no NCCL call: no new trace in '%s'", dir);
}

static int run_child(char **cmd)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return cli_error("run", CP_EXIT_CANNOT_RUN, "cannot start '%s': %s", cmd[0],
                         strerror(errno));
    if (pid == 0) {
        execvp(cmd[0], cmd);
        fprintf(stderr, "collprof: run: cannot run '%s': %s\n", cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    g_child = pid;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    g_child = 0;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int cmd_run(int argc, char **argv)
{
    const char *dir = NULL, *gpu_timing = NULL;
    static const char *const usage[] = { "run [--dir D] [--gpu-timing M] -- CMD...", NULL };
    const struct cli_option options[] = {
        CLI_STRING(0, "dir", &dir, "D", "trace directory, one file per rank (COLLPROF_DIR)"),
        CLI_STRING(0, "gpu-timing", &gpu_timing, "M",
                   "auto, plugin, events, cupti, off or sample:N (COLLPROF_GPU_TIMING)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "run",
        .usage = usage,
        .about = "Runs CMD (a launcher such as torchrun, mpirun or srun works) with\n"
                 "libcollprof.so preloaded, so that every rank traces its NCCL calls.",
        .options = options,
        .args = "CMD...",
        .min_args = 1,
        .max_args = -1,
        .flags = CLI_STOP_AT_ARG,
        .notes = "The other COLLPROF_* variables pass through from the environment\n"
                 "(see 'collprof --help'). The exit status is CMD's (128+N when a signal\n"
                 "N ended it).",
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    const char *why;
    if (gpu_timing && cp_settings_check("COLLPROF_GPU_TIMING", gpu_timing, &why) != 0)
        return cli_usage_error(&c, "--gpu-timing '%s' is not %s", gpu_timing, why);
    char shim[4096];
    if (cli_find_shim(shim, sizeof shim) != 0)
        return cli_error("run", CP_EXIT_CANNOT_RUN,
                         "cannot find libcollprof.so beside the collprof binary");

    char dir_buf[4096];
    const char *env_dir = getenv("COLLPROF_DIR");
    if (!dir && env_dir && *env_dir)
        dir = env_dir;
    if (!dir) {
        default_dir(dir_buf, sizeof dir_buf);
        dir = dir_buf;
    }
    /* the shim would ignore a longer one and trace into its default instead */
    if (strlen(dir) >= sizeof ((cp_settings *)0)->dir)
        return cli_usage_error(&c, "the trace directory is longer than %zu bytes",
                               sizeof ((cp_settings *)0)->dir - 1);
    setenv("COLLPROF_DIR", dir, 1);
    if (gpu_timing)
        setenv("COLLPROF_GPU_TIMING", gpu_timing, 1);
    /* Ours first, so our wrappers win; the job's own preloads stay. */
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(shim) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(len);
    if (!preload)
        return cli_error("run", CP_EXIT_CANNOT_RUN, "out of memory");
    if (old && *old)
        snprintf(preload, len, "%s %s", shim, old);
    else
        snprintf(preload, len, "%s", shim);
    setenv("LD_PRELOAD", preload, 1);
    free(preload);

    struct stat st;
    int existed = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    char **before;
    int nb = list_traces(dir, &before);
    int status = run_child(argv + 1);
    say_where(dir, existed, before, nb);
    cp_trace_dir_free(before, nb);
    return status;
}
