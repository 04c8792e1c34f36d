/* test_emu_sim_util: runs build/bin/collprof-sim as a job would, on the emulation
 * (LD_LIBRARY_PATH=build/emu), and keeps what it said. Header-only so each test stays one
 * program. Every run has a deadline: a hung job is killed (its whole process group) and the
 * test fails saying so, instead of hanging ctest. */
#ifndef COLLPROF_TEST_EMU_SIM_UTIL_H
#define COLLPROF_TEST_EMU_SIM_UTIL_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "tests/common/test_scratch.h"

struct sim_proc {
    pid_t pid;
    FILE *out, *err;
    double started;
};

struct sim_result {
    int status;     /* exit code, 128 + signal, or -1 when it ran past its deadline */
    char *out, *err;
    double seconds;
};

static inline double sim_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline const char *sim_build_dir(void)
{
    const char *build = getenv("COLLPROF_BUILD_DIR");
    if (!build) {
        fprintf(stderr, "COLLPROF_BUILD_DIR is not set: run this test through ctest\n");
        abort();
    }
    return build;
}

/* What a job's environment must not leak into a test: identities, rendezvous, faults. */
static const char *const sim_scrubbed_env[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
    "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "COLLPROF_SIM_RENDEZVOUS", "COLLPROF_EMU_HOSTS", "COLLPROF_EMU_HOST_ID",
    "COLLPROF_EMU_HANG", "COLLPROF_EMU_DELAY", "COLLPROF_EMU_SLOW_LINK", "COLLPROF_EMU_TOPO",
    "COLLPROF_EMU_NET", "COLLPROF_EMU_CLOCK_OFFSET_US", "NCCL_DEBUG", NULL
};

/* Starts argv (NULL-terminated; argv[0] a path, or a name looked up in PATH: a launcher
 * such as mpirun or srun, or `collprof run`, whose job is collprof-sim) with env ("NAME=VALUE"
 * strings, NULL-terminated, may be NULL) on top of LD_LIBRARY_PATH=<build>/emu, in a process
 * group of its own. */
static inline void sim_start_cmd(struct sim_proc *p, const char *const *env,
                                 const char *const *argv)
{
    char emu[4096];
    snprintf(emu, sizeof emu, "%s/emu", sim_build_dir());
    p->out = tmpfile();
    p->err = tmpfile();
    if (!p->out || !p->err)
        abort();
    fflush(NULL);
    ts_scratch_dir(); /* made here, in the test process, which removes it at exit */
    p->started = sim_test_now();
    p->pid = fork();
    if (p->pid < 0)
        abort();
    if (p->pid == 0) {
        setpgid(0, 0); /* so that a deadline kills the launcher and its ranks together */
        dup2(fileno(p->out), STDOUT_FILENO);
        dup2(fileno(p->err), STDERR_FILENO);
        for (int i = 0; sim_scrubbed_env[i]; i++)
            unsetenv(sim_scrubbed_env[i]);
        setenv("LD_LIBRARY_PATH", emu, 1);
        if (ts_scratch[0])
            setenv("TMPDIR", ts_scratch, 1); /* the env below may set another */
        for (int i = 0; env && env[i]; i++) {
            char name[256];
            const char *eq = strchr(env[i], '=');
            if (!eq || (size_t)(eq - env[i]) >= sizeof name)
                _exit(125);
            memcpy(name, env[i], (size_t)(eq - env[i]));
            name[eq - env[i]] = '\0';
            setenv(name, eq + 1, 1);
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(p->pid, p->pid);
}

/* Starts collprof-sim with args (NULL-terminated, no argv[0]), as sim_start_cmd does. */
static inline void sim_start(struct sim_proc *p, const char *const *env, const char *const *args)
{
    char bin[4096];
    snprintf(bin, sizeof bin, "%s/bin/collprof-sim", sim_build_dir());
    const char *argv[64] = { bin };
    size_t n = 1;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    sim_start_cmd(p, env, argv);
}

static inline char *sim_slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static inline void sim_finish(struct sim_proc *p, struct sim_result *r, double timeout_s)
{
    int ws = 0;
    r->status = -1;
    for (;;) {
        pid_t got = waitpid(p->pid, &ws, WNOHANG);
        if (got == p->pid) {
            r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
        if (got < 0 && errno != EINTR)
            break;
        if (sim_test_now() - p->started > timeout_s) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, &ws, 0);
            fprintf(stderr, "collprof-sim ran past its %g s deadline and was killed\n",
                    timeout_s);
            break;
        }
        usleep(10000);
    }
    r->seconds = sim_test_now() - p->started;
    /* ranks left behind by a killed launcher would hold ports and shared memory */
    kill(-p->pid, SIGKILL);
    r->out = sim_slurp(p->out);
    r->err = sim_slurp(p->err);
}

static inline void sim_run(struct sim_result *r, const char *const *env, const char *const *args,
                           double timeout_s)
{
    struct sim_proc p;
    sim_start(&p, env, args);
    sim_finish(&p, r, timeout_s);
}

static inline void sim_result_free(struct sim_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static inline int sim_count_lines(const char *s, const char *containing)
{
    int n = 0;
    for (const char *line = s; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        if (len >= sizeof buf)
            len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (!containing || strstr(buf, containing))
            n++;
        line += len + (end ? 1 : 0);
    }
    return n;
}

/* Prints what a run said, for a failing assertion's context. */
static inline void sim_show(const char *what, const struct sim_result *r)
{
    fprintf(stderr, "--- %s: status %d after %.2f s\n--- stdout:\n%s--- stderr:\n%s---\n", what,
            r->status, r->seconds, r->out, r->err);
}

#endif
