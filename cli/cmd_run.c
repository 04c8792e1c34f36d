/* run: a job under the profiler — COLLPROF_* and LD_PRELOAD set, then the job itself.
 *
 * `collprof run` stays the job's parent so that it can say where the trace is once the job
 * ended, and exits with the job's status (128 + the signal for a job killed by one, as a
 * shell does), whatever it has to say about the trace.
 *
 * Signals. The job runs in run's process group, as a shell started it: a terminal's
 * signals (Ctrl-C, Ctrl-\, Ctrl-Z, a hangup: sent by the kernel to the foreground group,
 * si_code SI_KERNEL) reach the job directly and are not sent again; a signal sent to run by
 * a process (`kill PID`, a scheduler, a launcher: SI_USER, SI_QUEUE) is forwarded to the job
 * once: HUP INT QUIT ALRM TERM USR1 USR2 PWR WINCH CONT TSTP TTIN TTOU. run never dies of
 * one (it waits for the job and exits with its status). A job stopped by TSTP, TTIN or TTOU
 * stops run too, as `scp` does for its ssh (the shell sees the whole job stopped); resumed,
 * run sends CONT on to a job still stopped. What run cannot tell apart: a `kill -- -PGID`
 * from a user reaches the job directly and through run (twice), as with `timeout`.
 *
 * The trace directory D is fixed here, absolute, before the job starts, so that every rank
 * a launcher starts under it writes into the same one whatever directory it changes to, and
 * the message can name it. run makes D (and what is missing above it) when it is not there,
 * and holds it open while the job runs: at the end, a path that no longer leads to that
 * directory (device, inode; held, its inode cannot be reused) means D was removed or
 * renamed, and /proc/self/fd says where to, when it still exists. A D that run made stays
 * only if the job left a trace in it.
 *
 * That message must be true: the trace files this job wrote (names that were not in D
 * before it started), else why there are none, as far as this process can tell: D is no
 * longer the directory it was (removed or renamed while the job ran: its traces went with
 * it), D or a file in it cannot be made (and why), or the job made no NCCL call. The shim's
 * own WARN line, above it, says more.
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

#include "cli/cli.h"
#include "cli/options.h"
#include "launcher/launcher.h"
#include "common/settings.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"

static volatile sig_atomic_t g_child;

/* What run forwards: a terminal's, a scheduler's and a user's signals. */
static const int g_forwarded[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2,
                                  SIGPWR,  SIGWINCH, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU};
#define NFORWARDED (sizeof g_forwarded / sizeof g_forwarded[0])

static void forward(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    /* the kernel's (a terminal's, to the foreground group: the job has it already) */
    if (g_child > 0 && !(info && info->si_code == SI_KERNEL)) {
        int saved = errno;
        kill((pid_t)g_child, sig);
        errno = saved;
    }
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

/* D as it was when the job started. */
struct dir_state {
    int present;      /* D was a directory then (found or made) */
    int created;      /* run made D: it goes again when the job left no trace in it */
    size_t first_new; /* the length of the first component of D that run made */
    dev_t dev;
    ino_t ino;
    int fd;           /* D held open while the job runs: its inode cannot be reused, and
                       * /proc says where it went */
};

/* mkdir -p D, each directory made with `mode` (less the umask): 0, or -1 with errno. Notes
 * the first component it made, which with those below it goes again if unused. */
static int make_dirs(const char *dir, unsigned mode, struct dir_state *d)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, mode) == 0) {
            if (!d->created)
                d->first_new = i;
            d->created = 1;
        } else if (errno != EEXIST) {
            return -1;
        }
        path[i] = c;
    }
    return 0;
}

/* The directories run made, D up to the first it made, each only if empty. */
static void remove_made(const char *dir, const struct dir_state *d)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (size_t n = strlen(path); n >= d->first_new && n > 0;) {
        if (rmdir(path) != 0)
            return;
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            return;
        *slash = '\0';
        n = strlen(path);
    }
}

/* Fixes D before the job: found, or made as private as the shim would make it. */
static void prepare_dir(const char *dir, struct dir_state *d)
{
    memset(d, 0, sizeof *d);
    d->fd = -1;
    unsigned mode = 0600;
    const char *m = getenv("COLLPROF_FILE_MODE"), *why;
    if (m && *m && cp_settings_check("COLLPROF_FILE_MODE", m, &why) == 0)
        mode = (unsigned)strtoul(m, NULL, 8);
    mode |= (mode & 0444) >> 2; /* x wherever r, as the shim's cp_mkdir_p */
    struct stat st;
    if (stat(dir, &st) != 0 && make_dirs(dir, mode, d) != 0)
        return; /* the shim meets the same and says so; the closing line too */
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        d->present = 1;
        d->dev = st.st_dev;
        d->ino = st.st_ino;
        d->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
}

/* Where the directory held by fd is now: 1 and its path, or 0 (removed, or no /proc). */
static int now_at(int fd, char *out, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(link, out, cap - 1) : -1;
    if (n <= 0)
        return 0;
    out[n] = '\0';
    static const char gone[] = " (deleted)";
    size_t len = (size_t)n, g = sizeof gone - 1;
    return out[0] == '/' && !(len >= g && !strcmp(out + len - g, gone));
}

/* D is not the directory the job started with: where it went, when that can be known. */
static void say_moved(const char *dir, const struct dir_state *d, int exists)
{
    char where[PATH_MAX];
    char tail[PATH_MAX + 64] = "";
    if (exists)
        snprintf(tail, sizeof tail, " ('%s' is another directory now)", dir);
    if (now_at(d->fd, where, sizeof where)) {
        char **paths;
        int n = list_traces(where, &paths);
        cp_trace_dir_free(paths, n);
        char *q = cli_shell_quote(where);
        if (n > 0)
            cli_note("the trace directory '%s' was renamed while the job ran: it is now '%s'; "
                     "see it with: collprof report %s%s", dir, where, q ? q : where, tail);
        else
            cli_note("the trace directory '%s' was renamed while the job ran: it is now '%s', "
                     "with no trace in it%s", dir, where, tail);
        free(q);
    } else if (d->fd >= 0) {
        cli_note("the trace directory '%s' was removed while the job ran: whatever trace the "
                 "job wrote went with it%s", dir, tail);
    } else {
        cli_note("the trace directory '%s' was removed or renamed while the job ran: whatever "
                 "trace the job wrote went with it%s", dir, tail);
    }
}

/* The closing line: where this job's trace is, or the truth about why there is none. */
static void say_where(const char *dir, const struct dir_state *d, char **before, int nb)
{
    struct stat st;
    int exists = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (d->present && (!exists || st.st_dev != d->dev || st.st_ino != d->ino)) {
        say_moved(dir, d, exists);
        return;
    }
    char **after;
    int na = list_traces(dir, &after);
    int fresh = count_new(before, nb, after, na);
    cp_trace_dir_free(after, na);
    if (fresh > 0) {
        char *q = cli_shell_quote(dir);
        cli_note("trace in '%s'; see it with: collprof report %s", dir, q ? q : dir);
        free(q);
        return;
    }
    int e = trace_blocker(dir);
    if (d->created)
        remove_made(dir, d); /* a job that left no trace leaves no directory either */
    if (!d->present && !exists && e)
        cli_note("no trace: cannot create the trace directory '%s': %s", dir, strerror(e));
    else if (e)
        cli_note("no trace in '%s': a trace file cannot be created there: %s", dir, strerror(e));
    else if (d->present && !d->created)
        cli_note("the job made no NCCL call: no new trace in '%s'", dir);
    else
        cli_note("the job made no NCCL call: no trace in '%s'", dir);
}

/* Waits for the job, following it when it stops on a terminal's signal: run stops too (so
 * that the shell sees its job stopped), and once resumed sends CONT on if the job is still
 * stopped. The job's status. */
static int wait_job(pid_t pid)
{
    int status = 0, known = 0; /* known: status holds an event not yet acted on */
    for (;;) {
        if (!known) {
            pid_t w = waitpid(pid, &status, WUNTRACED);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return -1;
        }
        known = 0;
        if (!WIFSTOPPED(status))
            return status;
        int sig = WSTOPSIG(status);
        if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
            continue; /* SIGSTOP from someone: the job's business, run goes on waiting */
        kill(getpid(), SIGSTOP);
        /* resumed: a CONT to the whole group reached the job too; else it gets one now. The
         * job may have stopped again, or ended, meanwhile: that event is acted on next. */
        int st;
        pid_t c = waitpid(pid, &st, WNOHANG | WCONTINUED | WUNTRACED);
        if (c == 0)
            kill(pid, SIGCONT);
        else if (c == pid && !WIFCONTINUED(st)) {
            status = st;
            known = 1;
        }
    }
}

static int run_child(char **cmd)
{
    /* Blocked from before the fork until the handlers are in place: none is lost between,
     * and the child unblocks them before its exec. */
    sigset_t fwd, old_mask;
    sigemptyset(&fwd);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&fwd, g_forwarded[i]);
    sigprocmask(SIG_BLOCK, &fwd, &old_mask);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        return cli_error("run", CP_EXIT_CANNOT_RUN, "cannot start '%s': %s", cmd[0],
                         strerror(e));
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        execvp(cmd[0], cmd);
        fprintf(stderr, "collprof: run: cannot run '%s': %s\n", cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    g_child = pid;
    struct sigaction sa, old[NFORWARDED];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaction(g_forwarded[i], &sa, &old[i]);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    int status = wait_job(pid);
    sigprocmask(SIG_BLOCK, &fwd, NULL);
    g_child = 0;
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaction(g_forwarded[i], &old[i], NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (status < 0)
        return cli_error("run", CP_EXIT_CANNOT_RUN, "cannot wait for '%s': %s", cmd[0],
                         strerror(errno));
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* D made absolute against run's working directory: the ranks may change theirs. */
static int absolute_dir(const char *dir, char *out, size_t cap)
{
    if (dir[0] == '/')
        return (size_t)snprintf(out, cap, "%s", dir) < cap ? 0 : -1;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    return (size_t)snprintf(out, cap, "%s/%s", cwd, dir) < cap ? 0 : -1;
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
                 "(see 'collprof --help'). D is made absolute, and made if missing, before\n"
                 "CMD starts. HUP INT QUIT ALRM TERM USR1 USR2 PWR WINCH CONT TSTP TTIN\n"
                 "TTOU sent to collprof are forwarded to CMD (a terminal's reach it\n"
                 "directly). The exit status is always CMD's (128+N when a signal N ended\n"
                 "it), also when the closing line says that D was removed or renamed\n"
                 "while CMD ran (its trace went with it).",
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

    char dir_buf[4096], abs_dir[2 * PATH_MAX];
    const char *env_dir = getenv("COLLPROF_DIR");
    if (!dir && env_dir && *env_dir)
        dir = env_dir;
    if (!dir) {
        default_dir(dir_buf, sizeof dir_buf);
        dir = dir_buf;
    }
    if (absolute_dir(dir, abs_dir, sizeof abs_dir) != 0)
        return cli_error("run", CP_EXIT_CANNOT_RUN,
                         "cannot make the trace directory '%s' absolute: %s", dir,
                         strerror(errno ? errno : ENAMETOOLONG));
    dir = abs_dir;
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

    struct dir_state d;
    prepare_dir(dir, &d);
    char **before;
    int nb = list_traces(dir, &before);
    int status = run_child(argv + 1);
    say_where(dir, &d, before, nb);
    if (d.fd >= 0)
        close(d.fd);
    cp_trace_dir_free(before, nb);
    return status;
}
