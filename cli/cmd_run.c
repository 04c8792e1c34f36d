/* run: a job under the profiler — COLLPROF_* and LD_PRELOAD set, then the job itself.
 *
 * `collprof run` stays the job's parent so that it can say where the trace is once the job
 * ended; it forwards SIGINT and SIGTERM to the job (a terminal's Ctrl-C reaches both
 * anyway, a `kill` of collprof only reaches collprof) and exits with the job's status
 * (128 + the signal for a job killed by one, as a shell does). The trace directory is
 * fixed here, before the job starts, so that every rank a launcher starts under it writes
 * into the same one, and the message can name it.
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

static volatile sig_atomic_t g_child;

static void forward(int sig)
{
    if (g_child > 0)
        kill((pid_t)g_child, sig);
}

static int valid_gpu_timing(const char *m)
{
    if (!strcmp(m, "events") || !strcmp(m, "cupti") || !strcmp(m, "off"))
        return 1;
    if (strncmp(m, "sample:", 7) != 0 || !m[7])
        return 0;
    char *end;
    errno = 0;
    long n = strtol(m + 7, &end, 10);
    return !*end && errno == 0 && n >= 1 && n <= INT_MAX && m[7] != '-' && m[7] != '+';
}


/* The default INTERFACES.md gives COLLPROF_DIR, decided once here for every rank. */
static void default_dir(char *out, size_t cap)
{
    static const char *const job_vars[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID",
                                           "OMPI_MCA_ess_base_jobid"};
    for (size_t i = 0; i < sizeof job_vars / sizeof job_vars[0]; i++) {
        const char *v = getenv(job_vars[i]);
        if (v && *v) {
            snprintf(out, cap, "collprof-%s", v);
            return;
        }
    }
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(out, cap, "collprof-%s-%d", stamp, (int)getpid());
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
                   "events, cupti, off or sample:N (COLLPROF_GPU_TIMING)"),
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
    if (gpu_timing && !valid_gpu_timing(gpu_timing))
        return cli_usage_error(&c, "--gpu-timing '%s' is not one of events, cupti, off, "
                                   "sample:N", gpu_timing);
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

    int status = run_child(argv + 1);
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        fprintf(stderr, "collprof: trace in '%s'; see it with: collprof report %s\n", dir, dir);
    else
        fprintf(stderr, "collprof: the job made no NCCL call: no trace in '%s'\n", dir);
    return status;
}
