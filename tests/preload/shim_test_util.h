/* shim_test_util: running shim_job under the shim and reading what it left.
 * Header-only so each test stays one program. */
#ifndef COLLPROF_SHIM_TEST_UTIL_H
#define COLLPROF_SHIM_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/trace_reader.h"
#include "tests/common/test_scratch.h"

extern char **environ;

typedef struct job_result {
    int status;      /* waitpid's */
    char out[65536]; /* stdout */
    char err[65536]; /* stderr */
} job_result;

static inline const char *st_build_dir(void)
{
    const char *b = getenv("COLLPROF_BUILD_DIR");
    return b && *b ? b : ".";
}

static inline void st_read_fd(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    lseek(fd, 0, SEEK_SET);
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
}

/* Runs bin/<prog> (or an absolute path) with argv, the caller's environment minus launcher
 * and COLLPROF_ variables, plus `env` (NULL-terminated "K=V"), with the shim preloaded when
 * `preload`.
 * COLLPROF_LIVE_DIR and TMPDIR default to this test process's scratch directory
 * (tests/common/test_scratch.h). */
static inline void st_run_prog(job_result *res, const char *prog, int preload,
                               const char *const *env, const char *const *argv)
{
    char job[4096], lib[4096], preload_var[8400];
    if (prog[0] == '/') /* an interpreter or tool outside the build */
        snprintf(job, sizeof job, "%s", prog);
    else
        snprintf(job, sizeof job, "%s/bin/%s", st_build_dir(), prog);
    snprintf(lib, sizeof lib, "%s/lib/libcollprof.so", st_build_dir());
#ifdef CP_TEST_ASAN_RUNTIME
    /* an ASan-built preload needs the ASan runtime loaded before it */
    snprintf(preload_var, sizeof preload_var, "LD_PRELOAD=%s %s", CP_TEST_ASAN_RUNTIME, lib);
#else
    snprintf(preload_var, sizeof preload_var, "LD_PRELOAD=%s", lib);
#endif
    const char *envp[512];
    size_t n = 0;
    static const char *const drop[] = {"COLLPROF_", "LD_PRELOAD=", "RANK=", "LOCAL_RANK=",
                                       "WORLD_SIZE=", "OMPI_", "PMI_", "SLURM_",
                                       "TORCHELASTIC_", "PBS_", "NCCL_PROFILER_PLUGIN=",
                                       "TMPDIR="};
    for (char **e = environ; *e && n < 400; e++) {
        int keep = 1;
        for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
            if (!strncmp(*e, drop[i], strlen(drop[i])))
                keep = 0;
        if (keep)
            envp[n++] = *e;
    }
    if (preload)
        envp[n++] = preload_var;
    int live_given = 0, tmp_given = 0;
    for (; env && *env && n < 510; env++) {
        live_given |= !strncmp(*env, "COLLPROF_LIVE_DIR=", 18);
        tmp_given |= !strncmp(*env, "TMPDIR=", 7);
        envp[n++] = *env;
    }
    if (!live_given && ts_live_dir_env()[0])
        envp[n++] = ts_live_dir_env();
    if (!tmp_given && ts_tmpdir_env()[0])
        envp[n++] = ts_tmpdir_env();
    envp[n] = NULL;
    const char *args[32] = {job};
    size_t a = 1;
    for (; argv && *argv && a < 31; argv++)
        args[a++] = *argv;
    args[a] = NULL;

    char tmpl_out[] = "/tmp/shim-out-XXXXXX", tmpl_err[] = "/tmp/shim-err-XXXXXX";
    /* close-on-exec: the job starts with stdin, stdout and stderr only, as from a shell */
    int fo = mkostemp(tmpl_out, O_CLOEXEC), fe = mkostemp(tmpl_err, O_CLOEXEC);
    unlink(tmpl_out);
    unlink(tmpl_err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        execve(job, (char *const *)args, (char *const *)envp);
        _exit(127);
    }
    waitpid(pid, &res->status, 0);
    st_read_fd(fo, res->out, sizeof res->out);
    st_read_fd(fe, res->err, sizeof res->err);
    close(fo);
    close(fe);
}

static inline void st_run(job_result *res, int preload, const char *const *env,
                          const char *const *argv)
{
    st_run_prog(res, "shim_job", preload, env, argv);
}

/* Everything one trace file holds, in file order. */
typedef struct trace_seen {
    cp_file_header header;
    cp_rec_call *calls;
    size_t ncalls, cap;
    cp_rec_comm comms[64];
    size_t ncomms;
    cp_rec_process process;
    int nprocess;
    cp_rec_end end;
    int nend;
    size_t ndones;
    cp_rec_done *dones;     /* the first 4096 */
    size_t nnccl_ops;
    size_t nsites;
    uint64_t lost_by_cause[CP_LOST_CAUSE_LAST + 1]; /* from LOST records; [0] unknown */
    cp_walk_result walk;
} trace_seen;

static int st_on_call(void *ctx, const cp_rec_call *rec)
{
    trace_seen *s = ctx;
    if (s->ncalls == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->calls = realloc(s->calls, s->cap * sizeof *s->calls);
    }
    s->calls[s->ncalls++] = *rec;
    return 0;
}
static int st_on_comm(void *ctx, const cp_rec_comm *rec)
{
    trace_seen *s = ctx;
    if (s->ncomms < 64)
        s->comms[s->ncomms++] = *rec;
    return 0;
}
static int st_on_process(void *ctx, const cp_rec_process *rec)
{
    trace_seen *s = ctx;
    s->process = *rec;
    s->nprocess++;
    return 0;
}
static int st_on_done(void *ctx, const cp_rec_done *rec)
{
    trace_seen *s = ctx;
    if (!s->dones)
        s->dones = calloc(4096, sizeof *s->dones);
    if (s->dones && s->ndones < 4096)
        s->dones[s->ndones] = *rec;
    s->ndones++;
    return 0;
}
static int st_on_nccl_op(void *ctx, const cp_rec_nccl_op *rec)
{
    (void)rec;
    ((trace_seen *)ctx)->nnccl_ops++;
    return 0;
}
static int st_on_site(void *ctx, const cp_rec_site *rec)
{
    (void)rec;
    ((trace_seen *)ctx)->nsites++;
    return 0;
}
static int st_on_lost(void *ctx, const cp_rec_lost *rec)
{
    trace_seen *s = ctx;
    /* a LOST record's count is the total of its cause since the last one */
    s->lost_by_cause[rec->cause <= CP_LOST_CAUSE_LAST ? rec->cause : 0] += rec->count;
    return 0;
}
static int st_on_end(void *ctx, const cp_rec_end *rec)
{
    trace_seen *s = ctx;
    s->end = *rec;
    s->nend++;
    return 0;
}

/* Reads one file; 0 or -1. */
static inline int st_read_trace(const char *path, trace_seen *s)
{
    memset(s, 0, sizeof *s);
    int status;
    char err[256];
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    s->header = *cp_trace_reader_header(r);
    cp_trace_visitor v = {.ctx = s, .on_call = st_on_call, .on_comm = st_on_comm,
                          .on_process = st_on_process, .on_end = st_on_end,
                          .on_done = st_on_done, .on_nccl_op = st_on_nccl_op,
                          .on_site = st_on_site, .on_lost = st_on_lost};
    cp_trace_walk(r, &v, &s->walk);
    cp_trace_reader_close(r);
    return 0;
}

static inline void st_free_trace(trace_seen *s)
{
    free(s->calls);
    free(s->dones);
    s->calls = NULL;
    s->dones = NULL;
}

/* The trace files in dir: count, and the paths (cp_trace_dir_free them). -1: no dir. */
static inline int st_list(const char *dir, char ***paths)
{
    char err[256];
    *paths = NULL;
    return cp_trace_dir_list(dir, paths, err, sizeof err);
}

static inline int st_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static inline char *st_tmpdir(void)
{
    char tmpl[] = "/tmp/collprof-shim-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static inline void st_rmtree(const char *dir)
{
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    (void)rc;
}

/* stderr without the shim's own lines: what the job itself wrote there. */
static inline void st_strip_collprof(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    while (*in) {
        const char *eol = strchr(in, '\n');
        size_t len = eol ? (size_t)(eol - in + 1) : strlen(in);
        if (strncmp(in, "collprof:", 9) != 0 && n + len < cap) {
            memcpy(out + n, in, len);
            n += len;
        }
        in += len;
    }
    out[n] = '\0';
}

static inline int st_count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ---- a job's own NCCL profiler plugin: tests/emu/profiler_plugin_probe.c ---- */
#include "abi/nccl_profiler_abi.h"

/* The probe's log (profiler_plugin_probe.c), summed up as one line: its version, callbacks
 * by kind and event type, and the parents it saw (a Coll's: its CollApi, or under v4 its
 * Group; a channel's: its Coll). Handles are the probe's own, so only parents it gave out
 * count. Over every process that wrote to the log. */
static inline void st_probe_summary(const char *log, char *out, size_t cap)
{
    enum { MAXH = 4096 };
    static unsigned long handle[MAXH];
    static int htype[MAXH], hpid[MAXH]; /* handles are per process: several write one log */
    size_t nh = 0;
    unsigned long count[16] = {0}, stops = 0, kch_stop = 0, coll_ok = 0, kch_ok = 0, init = 0,
                  fini = 0;
    int v = 0;
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char word[16];
        unsigned long h = 0, parent = 0;
        int type = 0, st = 0, pid = 0;
        if (sscanf(line, "%15s", word) != 1)
            continue;
        if (!strcmp(word, "init")) {
            init++;
            const char *p = strstr(line, " v=");
            v = p ? atoi(p + 3) : 0;
        } else if (!strcmp(word, "fini")) {
            fini++;
        } else if (!strcmp(word, "stop")) {
            stops++;
        } else if (!strcmp(word, "state") &&
                   sscanf(line, "%*s %*d %*d h=%lx st=%d", &h, &st) == 2) {
            kch_stop += st == ncclProfilerKernelChStop;
        } else if (!strcmp(word, "start") &&
                   sscanf(line, "%*s %d %*d h=%lx type=%d parent=%lx", &pid, &h, &type,
                          &parent) >= 3) {
            int k = 0;
            while ((1 << k) < type && k < 15)
                k++;
            count[k]++;
            int ptype = 0;
            for (size_t i = 0; i < nh; i++)
                if (handle[i] == parent && hpid[i] == pid && parent)
                    ptype = htype[i];
            if (type == ncclProfileColl &&
                ptype == (v >= 5 ? ncclProfileCollApi : ncclProfileGroup))
                coll_ok++;
            if (type == ncclProfileKernelCh && ptype == ncclProfileColl)
                kch_ok++;
            if (nh < MAXH) {
                handle[nh] = h;
                hpid[nh] = pid;
                htype[nh++] = type;
            }
        }
    }
    fclose(f);
    snprintf(out, cap,
             "v=%d init=%lu group_api=%lu coll_api=%lu group=%lu coll=%lu kernel_ch=%lu "
             "kernel_ch_stop=%lu stops=%lu coll_parent_ok=%lu kch_parent_ok=%lu finalize=%lu",
             v, init, count[8], count[9], count[0], count[1], count[6], kch_stop, stops, coll_ok,
             kch_ok, fini);
}

#endif
