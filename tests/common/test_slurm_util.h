/* test_slurm_util: a one-node Slurm of the test's own, so that a job can be started with the
 * real srun. Everything it writes (configuration, munge key and socket, state, spool, pid
 * and log files) is under one directory of the test; its daemons (munged, slurmctld, slurmd)
 * run in the foreground as children of the test, and ts_cluster_stop ends them and every
 * slurmstepd and task they left, by pid. Header-only; needs cmocka included before it (the
 * ports come from test_port_util.h).
 *
 * Authentication is munge with a fresh key of the test's: Slurm 22.05 still has auth/none,
 * but daemons that run jobs as root and believe any uid a client claims would let any local
 * user run commands as root while the test runs. */
#ifndef COLLPROF_TEST_SLURM_UTIL_H
#define COLLPROF_TEST_SLURM_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/test_port_util.h"

/* The job ids this cluster gives, from the first: a test can then tell which job wrote what. */
#define TS_FIRST_JOB_ID 7100

struct ts_cluster {
    char dir[PATH_MAX];  /* everything the cluster writes */
    char conf[PATH_MAX]; /* slurm.conf, also exported as SLURM_CONF */
    char host[256];      /* the node's name: this host's short name */
    pid_t munged, slurmctld, slurmd;
    int next_job_id;     /* the id the next job will get (the caller counts its jobs) */
    char why[1024];      /* after a failed start: why, one line */
};

/* snprintf that may cut (a log line in a reason); TS_PATH for a path, which must not be cut:
 * a path that long means a TMPDIR no test can use. */
static inline int ts_fmt(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int ts_fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
#define TS_PATH(buf, ...)                                                                 \
    do {                                                                                  \
        if (ts_fmt((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf)) {                \
            fprintf(stderr, "path too long: %s...\n", (buf));                             \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static inline double ts_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The path of program `name` in PATH, then /usr/sbin and /sbin (daemons live there, and a
 * non-login PATH may lack them); 0, or -1 when there is none. */
static inline int ts_which(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin", path && *path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        int n = snprintf(out, cap, "%s/%s", *d ? d : ".", name);
        if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

static inline void ts_why(struct ts_cluster *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void ts_why(struct ts_cluster *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    for (char *p = c->why; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

/* The last line of `path` holding `needle` (else its last line), for a one-line reason. */
static inline void ts_last_line(const char *path, const char *needle, char *out, size_t cap)
{
    ts_fmt(out, cap, "(nothing in %s)", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0])
            continue;
        if (strcasestr(line, needle)) {
            ts_fmt(out, cap, "%s", line);
            found = 1;
        } else if (!found) {
            ts_fmt(out, cap, "%s", line);
        }
    }
    fclose(f);
}

/* Starts argv[0] (a path) with stdout and stderr to `log`. The daemon is asked to run in the
 * foreground, so this pid is the daemon's; it gets SIGTERM when the test dies, whatever
 * kills the test, and none of what the test preloads into its jobs. */
static inline pid_t ts_daemon(const char *log, const char *const *argv)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    setsid();
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
        dup2(null, STDIN_FILENO);
    unsetenv("LD_PRELOAD");
    unsetenv("LD_LIBRARY_PATH");
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* 1 when `pid` (a child) has exited, and reaps it; its status in *status. */
static inline int ts_exited(pid_t pid, int *status)
{
    int ws = 0;
    if (pid <= 0 || waitpid(pid, &ws, WNOHANG) != pid)
        return 0;
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return 1;
}

/* Runs argv (a path first) to its end, at most timeout_s; its stdout in out. The exit
 * status, or -1 when it had to be killed. */
static inline int ts_capture(const char *const *argv, char *out, size_t cap, double timeout_s)
{
    FILE *f = tmpfile();
    if (!f)
        return -1;
    int fd = fileno(f);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = -1;
    double end = ts_now() + timeout_s;
    while (!ts_exited(pid, &status)) {
        if (ts_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            status = -1;
            break;
        }
        usleep(20000);
    }
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    fclose(f);
    return status;
}

/* Writes `text` to dir/name; 0 or -1. */
static inline int ts_write(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* Every child of this process, the daemons stopped (the test is the subreaper of what its daemons leave: each
 * slurmstepd and its tasks), killed by pid and reaped. */
static inline void ts_reap_children(void)
{
    for (int round = 0; round < 50; round++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        int left = 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char *end;
            long pid = strtol(e->d_name, &end, 10);
            if (*end || pid <= 0)
                continue;
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%ld/stat", pid);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
            int ppid = 0;
            if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == (int)getpid()) {
                kill((pid_t)pid, SIGKILL);
                left++;
            }
        }
        if (d)
            closedir(d);
        if (!left)
            return;
        usleep(50000);
    }
}

/* SIGTERM, and SIGKILL after 10 s: a daemon that shuts down cleanly deletes its pid file. */
static inline void ts_stop(pid_t *pid)
{
    if (*pid <= 0)
        return;
    int status, gone = 0;
    kill(*pid, SIGTERM);
    double end = ts_now() + 10;
    while (!(gone = ts_exited(*pid, &status)) && ts_now() < end)
        usleep(20000);
    if (!gone) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
}

/* Ends every daemon and every process they left. Safe after a failed or partial start. */
static inline void ts_cluster_stop(struct ts_cluster *c)
{
    ts_stop(&c->slurmd);
    ts_stop(&c->slurmctld);
    ts_stop(&c->munged);
    ts_reap_children(); /* slurmstepd outlives slurmd; so would its tasks */
    unsetenv("SLURM_CONF");
}

static inline int ts_mkdir(struct ts_cluster *c, const char *path, mode_t mode)
{
    if (mkdir(path, mode) != 0 || chmod(path, mode) != 0) {
        ts_why(c, "cannot make %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A daemon that ended during start-up: why, from its log. -1 when one did. */
static inline int ts_daemon_died(struct ts_cluster *c, pid_t *pid, const char *name,
                                 const char *log)
{
    int status;
    if (!ts_exited(*pid, &status))
        return 0;
    *pid = 0;
    char line[700];
    ts_last_line(log, "error", line, sizeof line);
    ts_why(c, "%s exited at start (status %d): %s", name, status, line);
    return -1;
}

/* Starts munged, slurmctld and slurmd under dir (an existing directory, made searchable by
 * all: munged refuses a socket others cannot reach) and waits until the node is idle; sets
 * SLURM_CONF for srun and sinfo. 0, or -1 with c->why (then ts_cluster_stop still applies).
 * Must run as root: slurmd starts each task as its job's user. */
static inline int ts_cluster_start(struct ts_cluster *c, const char *dir, double timeout_s)
{
    memset(c, 0, sizeof *c);
    c->next_job_id = TS_FIRST_JOB_ID;
    char munged[PATH_MAX], slurmctld[PATH_MAX], slurmd[PATH_MAX], sinfo[PATH_MAX];
    const char *const need[] = {"munged", "slurmctld", "slurmd", "sinfo", "srun"};
    char *const found[] = {munged, slurmctld, slurmd, sinfo, NULL};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        char spare[PATH_MAX];
        if (ts_which(need[i], found[i] ? found[i] : spare, PATH_MAX) != 0) {
            ts_why(c, "no %s in PATH, /usr/sbin or /sbin (Debian: slurm-wlm, munge)", need[i]);
            return -1;
        }
    }
    if (geteuid() != 0) {
        ts_why(c, "slurmd must run as root to start job steps, and this test runs as uid %d",
               (int)geteuid());
        return -1;
    }
    if (gethostname(c->host, sizeof c->host - 1) != 0 || !c->host[0]) {
        ts_why(c, "no hostname for the node: %s", strerror(errno));
        return -1;
    }
    c->host[strcspn(c->host, ".")] = '\0';
    /* orphaned slurmstepds and tasks come to the test, which can then end them by pid */
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    char m[PATH_MAX], sock[PATH_MAX], key[PATH_MAX];
    TS_PATH(c->dir, "%s/slurm", dir);
    TS_PATH(m, "%s/munge", c->dir);
    TS_PATH(sock, "%s/socket", m);
    TS_PATH(key, "%s/munge.key", m);
    if (strlen(sock) >= 100) { /* sockaddr_un holds 108 bytes with the NUL */
        ts_why(c, "the munge socket path '%s' is too long for a socket: set TMPDIR shorter",
               sock);
        return -1;
    }
    if (chmod(dir, 0755) != 0) {
        ts_why(c, "cannot chmod %s: %s", dir, strerror(errno));
        return -1;
    }
    if (ts_mkdir(c, c->dir, 0755) || ts_mkdir(c, m, 0755))
        return -1;
    unsigned char secret[1024];
    if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) {
        ts_why(c, "getrandom: %s", strerror(errno));
        return -1;
    }
    int fd = open(key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0 || write(fd, secret, sizeof secret) != (ssize_t)sizeof secret || close(fd)) {
        ts_why(c, "cannot write the munge key %s: %s", key, strerror(errno));
        return -1;
    }

    char arg_sock[PATH_MAX + 16], arg_key[PATH_MAX + 16], arg_log[PATH_MAX + 16],
        arg_pid[PATH_MAX + 16], arg_seed[PATH_MAX + 16], mlog[PATH_MAX];
    TS_PATH(arg_sock, "--socket=%s", sock);
    TS_PATH(arg_key, "--key-file=%s", key);
    TS_PATH(arg_log, "--log-file=%s/munged.log", m);
    TS_PATH(arg_pid, "--pid-file=%s/munged.pid", m);
    TS_PATH(arg_seed, "--seed-file=%s/munged.seed", m);
    TS_PATH(mlog, "%s/munged.out", m);
    const char *munged_argv[] = {munged, "--foreground", arg_sock, arg_key, arg_log,
                                 arg_pid, arg_seed, NULL};
    c->munged = ts_daemon(mlog, munged_argv);
    double end = ts_now() + timeout_s;
    struct stat st;
    while (stat(sock, &st) != 0) {
        if (ts_daemon_died(c, &c->munged, "munged", mlog))
            return -1;
        if (ts_now() > end) {
            ts_why(c, "munged made no socket %s in %g s", sock, timeout_s);
            return -1;
        }
        usleep(20000);
    }

    char sub[3][PATH_MAX];
    const char *const subdirs[] = {"state", "spool", "log"};
    for (int i = 0; i < 3; i++) {
        TS_PATH(sub[i], "%s/%s", c->dir, subdirs[i]);
        if (ts_mkdir(c, sub[i], 0755))
            return -1;
    }
    int ctld_port = tp_free_port(), slurmd_port = tp_free_port();
    while (slurmd_port == ctld_port)
        slurmd_port = tp_free_port();
    /* No cgroups, no accounting, no MPI plugin, and every file under c->dir: what a
     * container or a CI machine can run. CPUs=4 with config_overrides: four tasks whatever
     * the machine has. */
    char conf[8192];
    int len = ts_fmt(conf, sizeof conf,
             "ClusterName=collproftest\n"
             "SlurmctldHost=%s(127.0.0.1)\n"
             "SlurmctldPort=%d\n"
             "SlurmdPort=%d\n"
             "SlurmUser=root\n"
             "SlurmdUser=root\n"
             "AuthType=auth/munge\n"
             "CredType=cred/munge\n"
             "AuthInfo=socket=%s\n"
             "StateSaveLocation=%s\n"
             "SlurmdSpoolDir=%s\n"
             "SlurmctldPidFile=%s/slurmctld.pid\n"
             "SlurmdPidFile=%s/slurmd.pid\n"
             "SlurmctldLogFile=%s/slurmctld.log\n"
             "SlurmdLogFile=%s/slurmd.log\n"
             "SlurmctldSyslogDebug=quiet\n"
             "SlurmdSyslogDebug=quiet\n"
             "MailProg=/bin/true\n"
             "ProctrackType=proctrack/linuxproc\n"
             "TaskPlugin=task/none\n"
             "JobAcctGatherType=jobacct_gather/none\n"
             "AccountingStorageType=accounting_storage/none\n"
             "JobCompType=jobcomp/none\n"
             "MpiDefault=none\n"
             "SwitchType=switch/none\n"
             "ReturnToService=2\n"
             "FirstJobId=%d\n"
             "SlurmdParameters=config_overrides\n"
             "NodeName=%s NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n"
             "PartitionName=collprof Nodes=%s Default=YES MaxTime=INFINITE State=UP\n",
             c->host, ctld_port, slurmd_port, sock, sub[0], sub[1], c->dir, c->dir, sub[2],
             sub[2], TS_FIRST_JOB_ID, c->host, c->host);
    if (len < 0 || len >= (int)sizeof conf) {
        ts_why(c, "slurm.conf would be cut at %zu bytes", sizeof conf);
        return -1;
    }
    TS_PATH(c->conf, "%s/slurm.conf", c->dir);
    if (ts_write(c->conf, conf, 0644)) {
        ts_why(c, "cannot write %s: %s", c->conf, strerror(errno));
        return -1;
    }
    setenv("SLURM_CONF", c->conf, 1);

    /* in the foreground each daemon also logs on stderr, which holds what it said before
     * its log file was open too */
    char ctld_out[PATH_MAX + 16], slurmd_out[PATH_MAX + 16];
    TS_PATH(ctld_out, "%s/slurmctld.out", sub[2]);
    TS_PATH(slurmd_out, "%s/slurmd.out", sub[2]);
    /* -i: a fresh cluster, whatever a state file says */
    const char *ctld_argv[] = {slurmctld, "-D", "-i", "-f", c->conf, NULL};
    const char *slurmd_argv[] = {slurmd, "-D", "-f", c->conf, "-N", c->host, NULL};
    c->slurmctld = ts_daemon(ctld_out, ctld_argv);
    c->slurmd = ts_daemon(slurmd_out, slurmd_argv);

    const char *sinfo_argv[] = {sinfo, "-h", "-n", c->host, "-o", "%T", NULL};
    char state[256] = "";
    for (;;) {
        if (ts_daemon_died(c, &c->slurmctld, "slurmctld", ctld_out) ||
            ts_daemon_died(c, &c->slurmd, "slurmd", slurmd_out))
            return -1;
        if (ts_capture(sinfo_argv, state, sizeof state, 10) == 0) {
            state[strcspn(state, "\n")] = '\0';
            if (!strcmp(state, "idle"))
                return 0;
        }
        if (ts_now() > end) {
            char line[700];
            ts_last_line(slurmd_out, "error", line, sizeof line);
            ts_why(c, "node %s not idle after %g s (sinfo: '%s'); slurmd: %s", c->host,
                   timeout_s, state, line);
            return -1;
        }
        usleep(200000);
    }
}

#endif
