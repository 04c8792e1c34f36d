/* bench_analyzer: the analyzer on a job the size of a large one, against a plain read(2) of
 * the same files.
 *
 * Usage: bench_analyzer [RANKS [COLLECTIVES [RANKS_PER_HOST]]]   (default 1024 10000 8)
 *
 * Writes a synthetic job into a fresh directory under $TMPDIR (or /tmp), one file per rank
 * through trace/trace_writer, as the shim would: a PROCESS record, three communicators (the
 * world, one per host of RANKS_PER_HOST ranks, one across hosts per local rank), a SITE per
 * communicator, then COLLECTIVES calls in one schedule every rank follows (AllReduce of
 * gradient buckets across hosts, AllGather / ReduceScatter / small AllReduce within a host, a
 * tiny AllReduce on the world now and then), each CALL followed two calls later by its DONE
 * with GPU times, a CLOCK record every 1000 calls and an END. Hosts have their own monotonic
 * clocks and wall clocks up to 100 us apart; rank RANKS/3 + 5 reaches every collective 3 ms
 * after the others (a persistent straggler).
 *
 * Then, side by side, each in a child process so that its peak RSS is its own:
 *   plain read(2) of every file, on 1 thread and on the loader's threads;
 *   cpa_model_load on 1 thread and on its default threads (records/s, per core; the best
 *   of 3 rounds: the first process to fault in a gigabyte of memory on a VM is often slow);
 *   cpa_analyze, the whole analysis (seconds, per stage, peak RSS): the run of median CPU
 *   time of 3;
 *   the Perfetto export of the first run's analysis to /dev/null (events/s), when exporters/
 *   is built.
 * The directory is removed at the end. Last, the selection the analysis takes its medians
 * with (cpa_select) against sorting the same values (cpa_sort_doubles), per element, at an
 * operation's sizes and a pair's. Prints `<name>: <value> <unit>` lines; what the job and the
 * analysis found goes to stderr.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "trace/trace_writer.h"

#ifdef COLLPROF_BENCH_PERFETTO /* set by bench/analyzer.cmake when exporters/ is built */
#include "exporters/exporters.h"

static ssize_t count_bytes(void *cookie, const char *b, size_t n)
{
    (void)b;
    *(uint64_t *)cookie += n;
    return (ssize_t)n;
}
#endif

#define T_OPEN_NS 1700000000000000000ull /* true (wall) time the job's files open */
#define JITTER_NS 20000ull               /* ranks reach a collective within 20 us ... */
#define STRAGGLE_NS 3000000ull           /* ... but the straggler 3 ms later */
#define GAP_NS 50000ull                  /* compute between two collectives */
#define DONE_LAG 2                       /* a DONE is written two calls after its CALL */
#define CLOCK_EVERY 1000
#define LOAD_ROUNDS 3
#define ANALYZE_ROUNDS 3

enum { COMM_WORLD, COMM_HOST, COMM_CROSS, NCOMMS };

typedef struct sched {
    uint64_t t_ns;   /* true time the collective's ranks start to arrive */
    uint64_t dur_ns; /* on the GPU, once the last rank is there */
    uint64_t count;
    uint8_t op, dtype, comm;
} sched;

typedef struct job {
    int ranks, colls, per_host, hosts, straggler;
    sched *s;
    uint64_t end_ns;
    char dir[512];
} job;

static job g_job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void remove_dir(void)
{
    /* COLLPROF_BENCH_KEEP=1: the job stays, to profile `collprof report` on it */
    const char *keep = getenv("COLLPROF_BENCH_KEEP");
    if (keep && !strcmp(keep, "1") && g_job.dir[0]) {
        fprintf(stderr, "bench_analyzer: kept the job in '%s'\n", g_job.dir);
        return;
    }
    if (!g_job.dir[0])
        return;
    DIR *d = opendir(g_job.dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(g_job.dir);
    g_job.dir[0] = '\0';
}

/* Interrupted (Ctrl-C, timeout's SIGTERM): the gigabyte under /tmp goes too. Only
 * async-signal-safe calls: the files are rank%05d.cptrace, named here digit by digit. */
static void on_signal(int sig)
{
    static char path[600];
    size_t n = strlen(g_job.dir);
    if (n && n + 32 < sizeof path) {
        memcpy(path, g_job.dir, n);
        for (int r = 0; r < g_job.ranks; r++) {
            char *p = path + n;
            memcpy(p, "/rank", 5);
            p += 5;
            for (int d = 10000; d >= 1; d /= 10)
                *p++ = (char)('0' + r / d % 10);
            memcpy(p, CP_TRACE_FILE_SUFFIX, sizeof CP_TRACE_FILE_SUFFIX);
            unlink(path);
        }
        rmdir(g_job.dir);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void die(const char *fmt, const char *what)
{
    fprintf(stderr, "bench_analyzer: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n");
    remove_dir();
    exit(1);
}

/* ---- the job ---- */

/* One schedule every rank follows: the op mix and sizes of a data- plus tensor-parallel
 * training step, sizes powers of two so the report's buckets are full. */
static void make_schedule(job *j)
{
    j->s = calloc((size_t)j->colls, sizeof *j->s);
    if (!j->s)
        die("%s", "out of memory");
    uint64_t t = T_OPEN_NS + 1000000000ull;
    for (int k = 0; k < j->colls; k++) {
        sched *e = &j->s[k];
        uint64_t h = mix((uint64_t)k);
        unsigned u = (unsigned)(h % 100), z = (unsigned)((h >> 16) % 7);
        double n, bytes, factor, bw; /* bw: bytes per ns on the bus */
        if (u < 40) {        /* gradient buckets across hosts */
            e->comm = COMM_CROSS, e->op = CP_OP_ALLREDUCE, e->dtype = 9;
            e->count = (1ull << (20 + z)) / 2;
            n = j->hosts, bytes = (double)e->count * 2, factor = 2 * (n - 1) / n, bw = 20;
        } else if (u < 80) { /* tensor-parallel gather / scatter within a host */
            e->comm = COMM_HOST, e->op = u < 60 ? CP_OP_ALLGATHER : CP_OP_REDUCESCATTER;
            e->dtype = 9;
            e->count = (1ull << (18 + z % 6)) / 2;
            n = j->per_host, bytes = (double)e->count * 2 * n, factor = (n - 1) / n, bw = 150;
        } else if (u < 95) { /* small AllReduces within a host */
            e->comm = COMM_HOST, e->op = CP_OP_ALLREDUCE, e->dtype = 9;
            e->count = (1ull << (14 + z)) / 2;
            n = j->per_host, bytes = (double)e->count * 2, factor = 2 * (n - 1) / n, bw = 150;
        } else {             /* a loss or a metric over the world */
            e->comm = COMM_WORLD, e->op = CP_OP_ALLREDUCE, e->dtype = 7;
            e->count = 1ull << ((h >> 24) % 11);
            n = j->ranks, bytes = (double)e->count * 4, factor = 2 * (n - 1) / n, bw = 10;
        }
        if (n < 2)
            factor = 0;
        e->t_ns = t;
        e->dur_ns = 8000 + (uint64_t)(bytes * factor / bw);
        t += STRAGGLE_NS + JITTER_NS + e->dur_ns + GAP_NS;
    }
    j->end_ns = t;
}

static uint64_t host_mono(int host, uint64_t true_ns)
{
    return true_ns - T_OPEN_NS + 1000000000000ull + (uint64_t)host * 3700000000ull;
}

static uint64_t host_wall(int host, uint64_t true_ns)
{
    return true_ns + mix(0x5a5a0000ull + (uint64_t)host) % 200000 - 100000;
}

static int comm_has(const job *j, int comm, int r, int s)
{
    switch (comm) {
    case COMM_HOST:
        return r / j->per_host == s / j->per_host;
    case COMM_CROSS:
        return r % j->per_host == s % j->per_host;
    default:
        return 1;
    }
}

static void append(cp_trace_writer *w, const void *rec, const char *path)
{
    if (cp_trace_writer_append(w, rec))
        die("cannot write '%s'", path);
}

static void put_done(cp_trace_writer *w, const job *j, int r, int k, uint64_t seq,
                     const char *path)
{
    const sched *e = &j->s[k];
    int host = r / j->per_host;
    uint64_t h = mix(((uint64_t)r << 32) ^ (uint64_t)k);
    uint64_t arrive = e->t_ns + h % JITTER_NS + (r == j->straggler ? STRAGGLE_NS : 0);
    uint64_t end = e->t_ns + JITTER_NS + (comm_has(j, e->comm, r, j->straggler) ? STRAGGLE_NS : 0) +
                   e->dur_ns + (h >> 20) % 1000;
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = e->comm, .seq = seq,
                     .gpu_start_ns = host_mono(host, arrive),
                     .gpu_end_ns = host_mono(host, end), .peer = -1, .op = e->op,
                     .timing = CP_TIMING_EVENTS};
    append(w, &d, path);
}

/* Returns the records written. */
static uint64_t write_rank(const job *j, int r)
{
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/rank%05d%s", j->dir, r, CP_TRACE_FILE_SUFFIX);
    int host = r / j->per_host, local = r % j->per_host;
    char hostname[32];
    snprintf(hostname, sizeof hostname, "node%03d", host);
    cp_file_header fh;
    cp_file_header_init(&fh);
    fh.rank = r;
    fh.local_rank = local;
    fh.world_size = j->ranks;
    fh.pid = 10000 + (uint32_t)r;
    fh.flags = CP_FILE_GPU_TIMING;
    fh.nccl_version = 22304;
    fh.mono_anchor_ns = host_mono(host, T_OPEN_NS);
    fh.realtime_anchor_ns = host_wall(host, T_OPEN_NS);
    snprintf(fh.hostname, sizeof fh.hostname, "%s", hostname);
    snprintf(fh.job_id, sizeof fh.job_id, "bench");
    snprintf(fh.launcher, sizeof fh.launcher, "torchrun");
    cp_trace_writer *w = cp_trace_writer_open(path, &fh, 0, err, sizeof err);
    if (!w)
        die("%s", err);

    unsigned char buf[512];
    cp_rec_process p = {.rank = r, .local_rank = local, .world_size = j->ranks,
                        .nccl_version = 22304, .pid = 10000 + (uint32_t)r};
    size_t n = cp_rec_process_build(buf, sizeof buf, &p, hostname, "bench", "torchrun");
    if (!n)
        die("%s", "cannot build a PROCESS record");
    append(w, buf, path);
    const int nr[NCOMMS] = {j->ranks, j->per_host, j->hosts};
    const int me[NCOMMS] = {r, local, host};
    static const char *const frames[NCOMMS][3] = {
        {"log_metrics+0x4c (train.py)", "train_step+0x1a0 (train.py)", "main+0x88 (train.py)"},
        {"tp_linear_forward+0x30 (model.py)", "train_step+0x90 (train.py)", "main+0x88 (train.py)"},
        {"ddp_bucket_ready+0x64 (ddp.py)", "train_step+0x120 (train.py)", "main+0x88 (train.py)"},
    };
    for (int c = 0; c < NCOMMS; c++) {
        uint64_t id = c == COMM_WORLD ? 0x1000ull
                      : c == COMM_HOST ? 0x200000ull + (uint64_t)host
                                       : 0x300000ull + (uint64_t)local;
        cp_rec_comm rc = {.h = {CP_REC_COMM, sizeof rc}, .comm_index = (uint32_t)c,
                          .comm_id = id, .parent_id = c ? 0x1000ull : 0, .nranks = nr[c],
                          .rank = me[c], .cuda_dev = local,
                          .origin = c ? CP_COMM_SPLIT : CP_COMM_INIT_RANK};
        append(w, &rc, path);
        n = cp_rec_site_build(buf, sizeof buf, (uint32_t)c, 0x401000ull + (uint64_t)c * 64,
                              frames[c], 3);
        if (!n)
            die("%s", "cannot build a SITE record");
        append(w, buf, path);
    }

    uint64_t seq[NCOMMS] = {0}, done_seq[DONE_LAG + 1] = {0};
    for (int k = 0; k < j->colls; k++) {
        const sched *e = &j->s[k];
        uint64_t h = mix(((uint64_t)r << 32) ^ (uint64_t)k);
        uint64_t arrive = e->t_ns + h % JITTER_NS + (r == j->straggler ? STRAGGLE_NS : 0);
        if (k % CLOCK_EVERY == 0) {
            cp_rec_clock ck = {.h = {CP_REC_CLOCK, sizeof ck},
                               .mono_ns = host_mono(host, e->t_ns),
                               .realtime_ns = host_wall(host, e->t_ns)};
            append(w, &ck, path);
        }
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = e->op, .dtype = e->dtype,
                         .redop = e->op == CP_OP_ALLGATHER ? CP_REDOP_NONE : 0,
                         .flags = CP_CALL_TIMED, .comm_index = e->comm, .site_index = e->comm,
                         .seq = seq[e->comm], .count = e->count,
                         .stream = 0x7f3a00001000ull + (uint64_t)e->comm * 0x100,
                         .enter_ns = host_mono(host, arrive - 4000),
                         .host_ns = 2000 + (uint32_t)((h >> 40) % 6000), .peer = -1,
                         .thread = 1};
        append(w, &c, path);
        done_seq[k % (DONE_LAG + 1)] = seq[e->comm]++;
        if (k >= DONE_LAG)
            put_done(w, j, r, k - DONE_LAG, done_seq[(k - DONE_LAG) % (DONE_LAG + 1)], path);
    }
    for (int k = j->colls - DONE_LAG < 0 ? 0 : j->colls - DONE_LAG; k < j->colls; k++)
        put_done(w, j, r, k, done_seq[k % (DONE_LAG + 1)], path);
    cp_rec_end end = {.h = {CP_REC_END, sizeof end}, .exit_code = 0,
                      .at_ns = host_mono(host, j->end_ns)};
    append(w, &end, path);
    if (cp_trace_writer_flush(w))
        die("cannot write '%s'", path);
    uint64_t records = cp_trace_writer_records_written(w);
    if (cp_trace_writer_records_lost(w) || cp_trace_writer_close(w))
        die("cannot write '%s'", path);
    /* On disk before anything is timed, as a finished job's trace is: the kernel's
     * writeback must not run during the measurements. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fdatasync(fd) != 0)
        die("cannot sync '%s'", path);
    close(fd);
    return records;
}

/* ---- a pool of threads over the ranks (generation, plain read) ---- */

typedef struct pool {
    const job *j;
    atomic_int next;
    atomic_uint_fast64_t records;
    atomic_uint_fast64_t bytes;
    int read_only;
} pool;

static uint64_t read_rank(const job *j, int r)
{
    static _Thread_local unsigned char buf[1 << 20];
    char path[600];
    snprintf(path, sizeof path, "%s/rank%05d%s", j->dir, r, CP_TRACE_FILE_SUFFIX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("cannot open '%s'", path);
    uint64_t total = 0;
    ssize_t n;
    volatile unsigned char sink = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        sink ^= buf[n - 1];
        total += (uint64_t)n;
    }
    close(fd);
    (void)sink;
    return total;
}

static void *pool_main(void *arg)
{
    pool *p = arg;
    int r;
    while ((r = atomic_fetch_add(&p->next, 1)) < p->j->ranks) {
        if (p->read_only)
            atomic_fetch_add(&p->bytes, read_rank(p->j, r));
        else
            atomic_fetch_add(&p->records, write_rank(p->j, r));
    }
    return NULL;
}

static pool run_pool(const job *j, int threads, int read_only)
{
    pool p = {.j = j, .read_only = read_only};
    atomic_init(&p.next, 0);
    atomic_init(&p.records, 0);
    atomic_init(&p.bytes, 0);
    pthread_t t[64];
    if (threads > 64)
        threads = 64;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, pool_main, &p))
            die("%s", "cannot start a thread");
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return p;
}

/* ---- measurements, each in a child ---- */

#define MAX_STAGES 16

typedef struct result {
    int ok;
    double secs;
    double cpu_s;      /* user + system time of the process over the same span */
    double sys_s;      /* ... of which system time (analyses only) */
    long faults;       /* minor page faults over the same span (analyses only) */
    double export_s;   /* the Perfetto export of the analysis (JSON) */
    double proto_s;    /* ... and as Perfetto's protobuf */
    uint64_t proto_events, proto_bytes, json_bytes;
    uint64_t records;
    size_t nranks;
    uint64_t model_bytes;
    uint64_t events;
    int nstages;
    char stage[MAX_STAGES][24];
    double stage_s[MAX_STAGES];
    int32_t top_straggler;
    uint64_t late, judged, hangs, mismatches;
    double clock_error_us, threshold_us;
    int aligned;
    uint64_t warnings;
    char err[256];
} result;

static uint64_t model_bytes(const cpa_model *m)
{
    uint64_t b = sizeof *m + m->nranks * sizeof *m->ranks;
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        b += r->cap_calls * sizeof *r->calls + r->cap_comms * sizeof *r->comms +
             r->cap_clocks * sizeof *r->clocks + r->cap_streams * sizeof *r->streams +
             r->cap_hangs * sizeof *r->hangs + r->nsites * sizeof *r->sites +
             r->cap_nccl_seqs * sizeof *r->nccl_seqs + strlen(r->path) + 1;
        for (size_t k = 0; k < r->nsites; k++)
            b += r->sites[k] ? strlen(r->sites[k]) + 1 : 0;
    }
    return b;
}

/* The process' CPU time (user + system), its system part and its minor page faults so far,
 * from one getrusage so that all three cover the same span. */
typedef struct usage {
    double cpu_s, sys_s;
    long faults;
} usage;

static usage usage_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return (usage){(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + sys, sys,
                   ru.ru_minflt};
}

static double cpu_s(void)
{
    return usage_now().cpu_s;
}

static void child_load(const job *j, unsigned threads, result *res)
{
    cpa_model *m = NULL;
    double c0 = cpu_s(), t0 = now_s();
    if (cpa_model_load_threads(j->dir, threads, &m, res->err, sizeof res->err))
        return;
    res->secs = now_s() - t0;
    res->cpu_s = cpu_s() - c0;
    res->records = m->records;
    res->nranks = m->nranks;
    res->warnings = m->nwarnings;
    res->model_bytes = model_bytes(m);
    res->ok = 1;
    cpa_model_free(m);
}

typedef struct stage_clock {
    result *res;
    double t_last;
} stage_clock;

static void on_progress(void *ctx, const char *stage, double fraction)
{
    (void)fraction;
    stage_clock *sc = ctx;
    result *res = sc->res;
    double t = now_s();
    if (res->nstages > 0)
        res->stage_s[res->nstages - 1] = t - sc->t_last;
    sc->t_last = t;
    if (res->nstages < MAX_STAGES && strcmp(stage, "done") != 0)
        snprintf(res->stage[res->nstages++], sizeof res->stage[0], "%s", stage);
}

static void child_analyze(const job *j, int export, result *res)
{
    cpa_analysis a;
    stage_clock sc = {.res = res};
    cpa_keep_freed_memory(); /* as collprof report's and export's analysis */
    usage u0 = usage_now();
    double t0 = now_s();
    if (cpa_analyze(j->dir, &a, on_progress, &sc, res->err, sizeof res->err))
        return;
    res->secs = now_s() - t0;
    usage u1 = usage_now();
    res->cpu_s = u1.cpu_s - u0.cpu_s;
    res->sys_s = u1.sys_s - u0.sys_s;
    res->faults = u1.faults - u0.faults;
    res->records = a.model->records;
    res->nranks = a.model->nranks;
    res->warnings = a.model->nwarnings;
    res->top_straggler = a.stragglers.nrows ? a.stragglers.rows[0].rank : -1;
    res->late = a.stragglers.late;
    res->judged = a.stragglers.judged;
    res->hangs = a.hangs.nrows;
    res->mismatches = a.mismatches.total;
    res->threshold_us = a.stragglers.threshold_us;
    res->clock_error_us = a.clock.error_us;
    res->aligned = a.clock.aligned;
#ifdef COLLPROF_BENCH_PERFETTO
    if (!export) {
        res->ok = 1;
        cpa_analysis_free(&a);
        return;
    }
    /* The export of the finished analysis into a stream that only counts: the exporter's
     * own rate, not the disk's (the JSON of this job runs to gigabytes). */
    uint64_t bytes = 0;
    FILE *out = fopencookie(&bytes, "w", (cookie_io_functions_t){.write = count_bytes});
    if (!out) {
        snprintf(res->err, sizeof res->err, "cannot open a counting stream");
        cpa_analysis_free(&a);
        return;
    }
    /* stdio's own buffer, as a file's: the writers hand it a few hundred KB at a time, which
     * go straight through (a 1 MB buffer here copied every byte once more: a tenth of the
     * export's instructions, which `collprof export -o FILE` never spends) */
    double t1 = now_s();
    int rc = cpx_export_perfetto_events(out, &a, &res->events);
    res->export_s = now_s() - t1;
    res->json_bytes = bytes;
    /* the same, as protobuf, right after: side by side in one run */
    cpx_piece whole = {.t0_ns = INT64_MIN, .t1_ns = INT64_MAX, .proto = 1};
    cpx_piece_said said;
    bytes = 0;
    t1 = now_s();
    rc |= cpx_export_perfetto_piece(out, &a, &whole, &said);
    res->proto_s = now_s() - t1;
    res->proto_events = said.events;
    res->proto_bytes = bytes;
    fclose(out);
    if (rc) {
        snprintf(res->err, sizeof res->err, "the Perfetto export failed");
        cpa_analysis_free(&a);
        return;
    }
#else
    (void)export;
#endif
    res->ok = 1;
    cpa_analysis_free(&a);
}

enum { RUN_LOAD, RUN_ANALYZE, RUN_ANALYZE_EXPORT };

/* Runs one measurement in a child; *maxrss_kb is the child's peak resident set. */
static result measure(const job *j, int what, unsigned threads, long *maxrss_kb)
{
    int fds[2];
    if (pipe(fds))
        die("%s", "pipe failed");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("%s", "fork failed");
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* the parent cleans up */
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        close(fds[0]);
        result res;
        memset(&res, 0, sizeof res);
        if (what == RUN_LOAD)
            child_load(j, threads, &res);
        else
            child_analyze(j, what == RUN_ANALYZE_EXPORT, &res);
        const char *p = (const char *)&res;
        size_t left = sizeof res;
        while (left) {
            ssize_t n = write(fds[1], p, left);
            if (n <= 0)
                _exit(1);
            p += n;
            left -= (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    result res;
    memset(&res, 0, sizeof res);
    char *p = (char *)&res;
    size_t got = 0;
    ssize_t n;
    while (got < sizeof res && (n = read(fds[0], p + got, sizeof res - got)) > 0)
        got += (size_t)n;
    close(fds[0]);
    int ws = 0;
    struct rusage ru;
    if (wait4(pid, &ws, 0, &ru) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) || got != sizeof res)
        die("%s", what == RUN_LOAD ? "the load measurement died" : "the analysis died");
    if (!res.ok)
        die("%s", res.err);
    *maxrss_kb = ru.ru_maxrss;
    return res;
}

/* The median of n random doubles (whole ns of jitter, as an operation's ends), by selection
 * and by a sort, ns an element each, the same inputs: each value's copy is timed too. */
static void bench_select(void)
{
    static const size_t sizes[] = {8, 128, 1024, 50000};
    const size_t total = 4000000;
    double *src = malloc(total * sizeof *src), *w = malloc(50000 * sizeof *w);
    if (!src || !w)
        die("%s", "out of memory");
    uint64_t x = 7;
    for (size_t i = 0; i < total; i++)
        src[i] = (double)((x = mix(x)) % 100000) - 50000;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si], reps = total / n;
        double t[2], sum[2] = {0, 0};
        for (int how = 0; how < 2; how++) {
            double t0 = now_s();
            for (size_t r = 0; r < reps; r++) {
                memcpy(w, src + r * n, n * sizeof *w);
                if (how)
                    cpa_sort_doubles(w, n);
                sum[how] += how ? w[(n - 1) / 2] : cpa_select(w, n, (n - 1) / 2);
            }
            t[how] = (now_s() - t0) / (double)(reps * n) * 1e9;
        }
        if (sum[0] != sum[1])
            die("%s", "selection and sort disagree");
        printf("analyzer.select_%zu_ns_per_element: %.2f ns\n", n, t[0]);
        printf("analyzer.select_vs_sort_%zu_ratio: %.2f x\n", n, t[1] / t[0]);
    }
    free(src);
    free(w);
}

static int arg_int(int argc, char **argv, int i, int def, int lo, int hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: bench_analyzer [RANKS [COLLECTIVES [RANKS_PER_HOST]]]\n");
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    job *j = &g_job;
    j->ranks = arg_int(argc, argv, 1, 1024, 1, 65536);
    j->colls = arg_int(argc, argv, 2, 10000, 1, 10000000);
    j->per_host = arg_int(argc, argv, 3, 8, 1, 1024);
    if (j->per_host > j->ranks)
        j->per_host = j->ranks;
    j->hosts = (j->ranks + j->per_host - 1) / j->per_host;
    j->straggler = j->ranks / 3 + 5 < j->ranks ? j->ranks / 3 + 5 : j->ranks - 1;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int cpus = ncpu > 0 ? (int)ncpu : 1;

    const char *tmp = getenv("TMPDIR");
    snprintf(j->dir, sizeof j->dir, "%s/bench_analyzer_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(j->dir))
        die("cannot create a directory under '%s'", tmp && *tmp ? tmp : "/tmp");
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);

    make_schedule(j);
    double t0 = now_s();
    pool gen = run_pool(j, cpus, 0);
    double t_gen = now_s() - t0;
    const uint64_t records = atomic_load(&gen.records);
    fprintf(stderr, "bench_analyzer: %d ranks x %d collectives, %d ranks per host (%d hosts), "
            "straggler rank %d, %d CPUs, in '%s'\n", j->ranks, j->colls, j->per_host,
            j->hosts, j->straggler, cpus, j->dir);

    /* The loader picks min(CPUs, files, 8) threads: the plain read gets the same. */
    int threads = cpus < j->ranks ? cpus : j->ranks;
    if (threads > 8)
        threads = 8;
    double t_read1 = 1e9, t_readn = 1e9;
    uint64_t bytes = 0;
    for (int round = 0; round < 3; round++) {
        t0 = now_s();
        pool rd = run_pool(j, 1, 1);
        double t = now_s() - t0;
        t_read1 = t < t_read1 ? t : t_read1;
        bytes = atomic_load(&rd.bytes);
        t0 = now_s();
        run_pool(j, threads, 1);
        t = now_s() - t0;
        t_readn = t < t_readn ? t : t_readn;
    }

    /* Loads: the best of LOAD_ROUNDS, alternating, as the first process to fault in a
     * gigabyte of fresh memory on a VM can take twice as long as the next. */
    long rss_loadn = 0, rss_an = 0, rss;
    result l1 = {.secs = 1e9}, ln = {.secs = 1e9};
    for (int round = 0; round < LOAD_ROUNDS; round++) {
        result r = measure(j, RUN_LOAD, 1, &rss);
        if (r.secs < l1.secs)
            l1 = r;
        r = measure(j, RUN_LOAD, 0, &rss);
        if (r.secs < ln.secs)
            ln = r, rss_loadn = rss;
    }
    /* The analysis: the run of median CPU time of ANALYZE_ROUNDS, each figure that run's (a
     * VM's cost of mapping pages drifts by a tenth from one process to the next, and the
     * load's best-of would flatter), the export in the first run only. */
    result ar[ANALYZE_ROUNDS];
    long rss_ar[ANALYZE_ROUNDS];
    int order[ANALYZE_ROUNDS];
    for (int round = 0; round < ANALYZE_ROUNDS; round++) {
        ar[round] = measure(j, round ? RUN_ANALYZE : RUN_ANALYZE_EXPORT, 0, &rss_ar[round]);
        int at = round;
        for (; at > 0 && ar[order[at - 1]].cpu_s > ar[round].cpu_s; at--)
            order[at] = order[at - 1];
        order[at] = round;
    }
    int mid = order[ANALYZE_ROUNDS / 2];
    result an = ar[mid];
    rss_an = rss_ar[mid];
    an.events = ar[0].events;
    an.export_s = ar[0].export_s;
    an.json_bytes = ar[0].json_bytes;
    an.proto_events = ar[0].proto_events;
    an.proto_s = ar[0].proto_s;
    an.proto_bytes = ar[0].proto_bytes;
    if (l1.records != records || ln.records != records || an.records != records ||
        ln.nranks != (size_t)j->ranks) {
        fprintf(stderr, "bench_analyzer: loaded %llu / %llu / %llu records of %llu written\n",
                (unsigned long long)l1.records, (unsigned long long)ln.records,
                (unsigned long long)an.records, (unsigned long long)records);
        remove_dir();
        return 1;
    }
    remove_dir();

    const double rec = (double)records;
    printf("analyzer.job_ranks: %d ranks\n", j->ranks);
    printf("analyzer.job_collectives: %d collectives per rank\n", j->colls);
    printf("analyzer.trace_MB: %.0f MB\n", (double)bytes / 1e6);
    printf("analyzer.trace_records: %.2fe6 records\n", rec / 1e6);
    printf("analyzer.generate_s: %.2f s\n", t_gen);
    printf("analyzer.read_plain_1thread_GB_per_s: %.2f GB/s\n", (double)bytes / t_read1 / 1e9);
    printf("analyzer.read_plain_1thread_records_per_s: %.1fe6 records/s\n", rec / t_read1 / 1e6);
    printf("analyzer.read_plain_GB_per_s: %.2f GB/s\n", (double)bytes / t_readn / 1e9);
    printf("analyzer.read_plain_records_per_s: %.1fe6 records/s\n", rec / t_readn / 1e6);
    printf("analyzer.load_1thread_records_per_s: %.1fe6 records/s\n", rec / l1.secs / 1e6);
    printf("analyzer.load_threads: %d threads\n", threads);
    printf("analyzer.load_records_per_s: %.1fe6 records/s\n", rec / ln.secs / 1e6);
    printf("analyzer.load_records_per_s_per_core: %.1fe6 records/s\n",
           rec / ln.secs / threads / 1e6);
    /* The same per core from the CPU time the load used: what a core does when the
     * machine's other work takes some of the wall time. */
    printf("analyzer.load_records_per_cpu_s: %.1fe6 records/s\n", rec / ln.cpu_s / 1e6);
    printf("analyzer.load_1thread_records_per_cpu_s: %.1fe6 records/s\n", rec / l1.cpu_s / 1e6);
    printf("analyzer.load_GB_per_s: %.2f GB/s\n", (double)bytes / ln.secs / 1e9);
    printf("analyzer.load_vs_plain_read_ratio: %.2f x\n", t_readn / ln.secs);
    printf("analyzer.load_s: %.2f s\n", ln.secs);
    printf("analyzer.model_MB: %.0f MB\n", (double)ln.model_bytes / 1e6);
    printf("analyzer.load_peak_rss_MB: %.0f MB\n", (double)rss_loadn / 1024);
    printf("analyzer.analyze_s: %.2f s\n", an.secs);
    printf("analyzer.analyze_cpu_s: %.2f s\n", an.cpu_s);
    /* the kernel's part: mostly mapping the pages of fresh memory (model, parts, scratch),
     * which costs more under a hypervisor than on bare metal (docs/PERFORMANCE.md) */
    printf("analyzer.analyze_sys_s: %.2f s\n", an.sys_s);
    printf("analyzer.analyze_page_faults: %ld faults\n", an.faults);
    for (int i = 0; i < an.nstages; i++)
        printf("analyzer.analyze_stage_%s_s: %.2f s\n", an.stage[i], an.stage_s[i]);
    printf("analyzer.analyze_records_per_s: %.1fe6 records/s\n", rec / an.secs / 1e6);
    printf("analyzer.analyze_records_per_cpu_s: %.1fe6 records/s\n", rec / an.cpu_s / 1e6);
    /* the same less the kernel's time: what the analysis' own code does a CPU second */
    printf("analyzer.analyze_records_per_user_cpu_s: %.1fe6 records/s\n",
           rec / (an.cpu_s - an.sys_s) / 1e6);
    printf("analyzer.analyze_peak_rss_MB: %.0f MB\n", (double)rss_an / 1024);
#ifdef COLLPROF_BENCH_PERFETTO
    printf("analyzer.perfetto_events: %.2fe6 events\n", (double)an.events / 1e6);
    printf("analyzer.perfetto_export_s: %.2f s\n", an.export_s);
    printf("analyzer.perfetto_events_per_s: %.2fe6 events/s\n",
           (double)an.events / an.export_s / 1e6);
    printf("analyzer.perfetto_json_bytes_per_event: %.1f bytes\n",
           (double)an.json_bytes / (double)(an.events ? an.events : 1));
    printf("analyzer.perfetto_proto_s: %.2f s\n", an.proto_s);
    printf("analyzer.perfetto_proto_events_per_s: %.2fe6 events/s\n",
           (double)an.proto_events / an.proto_s / 1e6);
    printf("analyzer.perfetto_proto_bytes_per_event: %.1f bytes\n",
           (double)an.proto_bytes / (double)(an.proto_events ? an.proto_events : 1));
#else
    fprintf(stderr, "bench_analyzer: no Perfetto exporter in this build: no events/s figure\n");
#endif
    /* last: its big arrays, freed, raise malloc's mmap threshold, which a child would inherit
     * (the analysis' peak measured 40 MB higher) */
    bench_select();
    fprintf(stderr, "bench_analyzer: the analysis: %llu warnings; clocks %s, error %.1f us; "
            "top straggler rank %d (injected: %d), late in %llu of %llu collectives judged "
            "(threshold %.0f us); %llu hangs, %llu mismatches\n",
            (unsigned long long)an.warnings, an.aligned ? "aligned" : "not aligned",
            an.clock_error_us, (int)an.top_straggler, j->straggler,
            (unsigned long long)an.late, (unsigned long long)an.judged, an.threshold_us,
            (unsigned long long)an.hangs, (unsigned long long)an.mismatches);
    free(j->s);
    return 0;
}
