/* The emulated NCCL loads and calls an NCCL profiler plugin as NCCL 2.28.9 does
 * (emu/nccl/profiler.c): jobs of forked ranks run with NCCL_PROFILER_PLUGIN naming the probe
 * plugin (profiler_plugin_probe.c), which logs every callback to a file; each test reads the
 * file back and checks the events, their threads, parents and times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "abi/nccl_profiler_abi.h"
#include "test_emu_nccl_util.h"

/* ---- the probe's log, read back ---- */

typedef struct ev {
    char kind[8];               /* init start state stop fini caller */
    int pid;
    long tid;
    unsigned long long h, parent, group, ctx, hash;
    int type, rank, nranks, nch, st, peer, root, captured;
    unsigned long long seq, ptimer, count, ns;
    char func[32], dtype[32];
} ev;

typedef struct evlog {
    ev *e;
    int n;
} evlog;

static const char *field(const char *line, const char *key)
{
    char k[40];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(line, k);
    return p ? p + strlen(k) : NULL;
}

static unsigned long long num(const char *line, const char *key, int base)
{
    const char *p = field(line, key);
    return p ? strtoull(p, NULL, base) : 0;
}

static void word(const char *line, const char *key, char *out, size_t n)
{
    const char *p = field(line, key);
    size_t i = 0;
    while (p && p[i] && p[i] != ' ' && p[i] != '\n' && i + 1 < n) {
        out[i] = p[i];
        i++;
    }
    out[i] = '\0';
}

static evlog read_log(const char *path)
{
    evlog L = {NULL, 0};
    FILE *f = fopen(path, "r");
    if (!f)
        return L;
    char line[1200];
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        if (L.n == cap) {
            cap = cap ? cap * 2 : 256;
            L.e = realloc(L.e, (size_t)cap * sizeof *L.e);
        }
        ev *e = &L.e[L.n++];
        memset(e, 0, sizeof *e);
        sscanf(line, "%7s %d %ld", e->kind, &e->pid, &e->tid);
        e->h = num(line, "h", 16);
        e->parent = num(line, "parent", 16);
        e->group = num(line, "group", 16);
        e->ctx = num(line, "ctx", 16);
        e->hash = num(line, "hash", 16);
        e->type = (int)num(line, "type", 10);
        e->rank = (int)num(line, "rank", 10);
        e->nranks = (int)num(line, "nranks", 10);
        e->nch = (int)num(line, "nch", 10);
        e->st = (int)num(line, "st", 10);
        e->peer = (int)num(line, "peer", 10);
        e->root = (int)num(line, "root", 10);
        e->captured = (int)num(line, "captured", 10);
        e->seq = num(line, "seq", 10);
        e->ptimer = num(line, "ptimer", 10);
        e->count = num(line, "count", 10);
        e->ns = num(line, "ns", 10);
        word(line, "func", e->func, sizeof e->func);
        word(line, "dtype", e->dtype, sizeof e->dtype);
    }
    fclose(f);
    return L;
}

static int count(const evlog *L, int pid, const char *kind, int type)
{
    int n = 0;
    for (int i = 0; i < L->n; i++)
        n += L->e[i].pid == pid && !strcmp(L->e[i].kind, kind) && (type < 0 || L->e[i].type == type);
    return n;
}

static const ev *find_start(const evlog *L, int pid, unsigned long long h)
{
    for (int i = 0; i < L->n; i++)
        if (L->e[i].pid == pid && !strcmp(L->e[i].kind, "start") && L->e[i].h == h)
            return &L->e[i];
    return NULL;
}

static int index_of(const evlog *L, int pid, const char *kind, unsigned long long h)
{
    for (int i = 0; i < L->n; i++)
        if (L->e[i].pid == pid && !strcmp(L->e[i].kind, kind) && L->e[i].h == h)
            return i;
    return -1;
}

static int pids_of(const evlog *L, int *pids, int max)
{
    int n = 0;
    for (int i = 0; i < L->n; i++) {
        if (strcmp(L->e[i].kind, "init"))
            continue;
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= pids[j] == L->e[i].pid;
        if (!seen && n < max)
            pids[n++] = L->e[i].pid;
    }
    return n;
}

/* ---- jobs ---- */

static char log_path[256], env_plugin[512], env_log[300], prof_dir[400];

/* The probes are in <build>/tests/emu/prof; this program is <build>/bin/<name>. */
static void find_prof_dir(void)
{
    char exe[300];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf(prof_dir, sizeof prof_dir, "%s/tests/emu/prof", exe);
}

static void setup_paths(const char *plugin)
{
    snprintf(log_path, sizeof log_path, "/tmp/cpprobe-%d.log", (int)getpid());
    unlink(log_path);
    snprintf(env_log, sizeof env_log, "CPPROBE_LOG=%s", log_path);
    if (plugin[0] == '/' || !strcmp(plugin, "none") || !strcmp(plugin, "probe"))
        snprintf(env_plugin, sizeof env_plugin, "NCCL_PROFILER_PLUGIN=%s", plugin);
    else
        snprintf(env_plugin, sizeof env_plugin, "NCCL_PROFILER_PLUGIN=%s/%s", prof_dir, plugin);
}

/* The calling thread names itself in the log, so the test can tell it from the others. */
static void say_caller(int rank)
{
    char line[200];
    int n = snprintf(line, sizeof line, "caller %d %ld rank=%d\n", (int)getpid(),
                     (long)syscall(SYS_gettid), rank);
    FILE *f = fopen(log_path, "a");
    if (f) {
        fwrite(line, 1, (size_t)n, f);
        fclose(f);
    }
}

static unsigned long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* A workload: three AllReduces of growing size, an AllGather, a count-0 AllReduce, a
 * grouped Send/Recv ring, an AlltoAll, then destroy. Rank 0 notes the wall time just
 * before its first call (before_ns) in the log. */
static int workload(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(rank, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, nranks, *id, rank));
    say_caller(rank);
    size_t n = 1 << 20;
    /* host memory is device memory in the emulation */
    float *a = calloc(n * (size_t)nranks, 4), *b = calloc(n * (size_t)nranks, 4);
    TN_CHECK(a && b, "out of memory");
    char line[100];
    snprintf(line, sizeof line, "before %d 0 ns=%llu\n", (int)getpid(), realtime_ns());
    FILE *f = fopen(log_path, "a");
    if (f) {
        fputs(line, f);
        fclose(f);
    }
    size_t sizes[3] = {256, 64 << 10, n};
    for (int i = 0; i < 3; i++)
        TN_NCCL(ncclAllReduce(a, b, sizes[i], ncclFloat32, ncclSum, comm, s));
    TN_NCCL(ncclAllGather(a, b, 1000, ncclFloat32, comm, s));
    TN_NCCL(ncclAllReduce(a, b, 0, ncclFloat32, ncclSum, comm, s));
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclSend(a, 100, ncclInt32, (rank + 1) % nranks, comm, s));
    TN_NCCL(ncclRecv(b, 100, ncclInt32, (rank + nranks - 1) % nranks, comm, s));
    TN_NCCL(ncclGroupEnd());
    TN_NCCL(ncclAlltoAll(a, b, 10, ncclFloat32, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommDestroy(comm));
    free(a);
    free(b);
    return 0;
}

static int run(const char *plugin, const char *extra, int nranks, tn_rank_fn fn)
{
    setup_paths(plugin);
    const char *env[] = {env_plugin, env_log, extra, NULL};
    return tn_job(env, nranks, fn, NULL, 60);
}

static long caller_tid(const evlog *L, int pid)
{
    for (int i = 0; i < L->n; i++)
        if (L->e[i].pid == pid && !strcmp(L->e[i].kind, "caller"))
            return L->e[i].tid;
    return -1;
}

static unsigned long long before_ns(const evlog *L, int pid)
{
    for (int i = 0; i < L->n; i++)
        if (L->e[i].pid == pid && !strcmp(L->e[i].kind, "before"))
            return L->e[i].ns;
    return 0;
}

/* Every KernelCh start under `task` (a Coll/P2p handle): nch of them, each with its
 * KernelChStop state and stop after it, on one thread other than the caller's, stop pTimer
 * >= start pTimer; none for a p2p task to its own rank, whose pair NCCL gives no proxy op
 * (enqueue.cc addP2pToPlan), though its event says nch 1. Returns the smallest start pTimer
 * (~0 for none). */
static unsigned long long check_channels(const evlog *L, int pid, const ev *task, long caller,
                                         long *proxy_tid)
{
    int seen = 0;
    unsigned long long first = ~0ull;
    for (int i = 0; i < L->n; i++) {
        const ev *k = &L->e[i];
        if (k->pid != pid || strcmp(k->kind, "start") || k->type != ncclProfileKernelCh ||
            k->parent != task->h)
            continue;
        seen++;
        assert_true(k->tid != caller);
        if (*proxy_tid < 0)
            *proxy_tid = k->tid;
        assert_int_equal(k->tid, *proxy_tid);   /* one proxy thread */
        int si = index_of(L, pid, "state", k->h), pi = index_of(L, pid, "stop", k->h);
        assert_true(si > i && pi > si);
        assert_int_equal(L->e[si].st, ncclProfilerKernelChStop);
        assert_true(L->e[si].ptimer >= k->ptimer);
        assert_int_equal(L->e[si].tid, *proxy_tid);
        if (k->ptimer < first)
            first = k->ptimer;
    }
    int self = task->type == ncclProfileP2p && task->peer == task->rank;
    assert_true(task->nch >= 1);
    assert_int_equal(seen, self ? 0 : task->nch);
    return first;
}

/* NCCL's proxy sees its kernels' channels in time order: each KernelCh start and stop pTimer
 * of a process is no earlier than the one called back before it (one stream, one comm). */
static void assert_kernel_times_in_order(const evlog *L, int pid)
{
    unsigned long long prev = 0;
    for (int i = 0; i < L->n; i++) {
        const ev *e = &L->e[i];
        unsigned long long t;
        if (e->pid != pid)
            continue;
        if (!strcmp(e->kind, "start") && e->type == ncclProfileKernelCh)
            t = e->ptimer;
        else if (!strcmp(e->kind, "state") && e->st == ncclProfilerKernelChStop)
            t = e->ptimer;
        else
            continue;
        if (t < prev)
            fail_msg("pid %d: a kernel channel's time %llu called back after %llu", pid, t,
                     prev);
        prev = t;
    }
}

static void v5_job_reports_api_task_and_kernel_events(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probe.so", NULL, 2, workload), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    unsigned long long hash = 0;
    int ranks_seen = 0;
    for (int i = 0; i < L.n; i++)
        if (!strcmp(L.e[i].kind, "init")) {
            assert_int_equal(L.e[i].nranks, 2);
            ranks_seen |= 1 << L.e[i].rank;
            if (!hash)
                hash = L.e[i].hash;
            assert_true(L.e[i].hash == hash);   /* commHash equal across ranks */
        }
    assert_int_equal(ranks_seen, 3);
    for (int p = 0; p < 2; p++) {
        int pid = pids[p];
        long caller = caller_tid(&L, pid), proxy = -1;
        assert_true(caller > 0);
        /* 3 AllReduce + 1 AllGather: the count-0 call makes none */
        assert_int_equal(count(&L, pid, "start", ncclProfileCollApi), 4);
        assert_int_equal(count(&L, pid, "start", ncclProfileColl), 4);
        /* Send + Recv, and AlltoAll as 2n p2p tasks */
        assert_int_equal(count(&L, pid, "start", ncclProfileP2pApi), 2 + 4);
        assert_int_equal(count(&L, pid, "start", ncclProfileP2p), 2 + 4);
        assert_int_equal(count(&L, pid, "fini", -1), 1);
        unsigned long long ar_seq = 0, before = before_ns(&L, pid);
        assert_true(before > 0);
        for (int i = 0; i < L.n; i++) {
            const ev *e = &L.e[i];
            if (e->pid != pid || strcmp(e->kind, "start"))
                continue;
            if (e->type == ncclProfileCollApi || e->type == ncclProfileP2pApi ||
                e->type == ncclProfileGroupApi) {
                assert_int_equal(e->tid, caller);
                assert_true(index_of(&L, pid, "stop", e->h) > i);
            }
            if (e->type == ncclProfileColl) {
                const ev *api = find_start(&L, pid, e->parent);
                assert_non_null(api);
                assert_int_equal(api->type, ncclProfileCollApi);
                assert_string_equal(api->func, e->func);
                const ev *grp = find_start(&L, pid, e->group);
                assert_non_null(grp);
                assert_int_equal(grp->type, ncclProfileGroup);
                if (!strcmp(e->func, "AllReduce")) {
                    assert_true(e->seq == ar_seq);
                    ar_seq++;
                } else {
                    assert_string_equal(e->func, "AllGather");
                    assert_true(e->seq == 0);
                    assert_string_equal(e->dtype, "ncclInt8");   /* bytes, as NCCL counts */
                    assert_true(e->count == 4000);
                }
                assert_true(e->nch >= 1);
                /* the kernel starts after the call, in globaltimer terms (1 ms: the two
                 * clocks were read apart) */
                assert_true(check_channels(&L, pid, e, caller, &proxy) + 1000000 >= before);
            }
            if (e->type == ncclProfileP2p) {
                const ev *api = find_start(&L, pid, e->parent);
                assert_non_null(api);
                assert_int_equal(api->type, ncclProfileP2pApi);
                assert_string_equal(api->func, e->func);
                check_channels(&L, pid, e, caller, &proxy);
            }
        }
        assert_true(ar_seq == 3);
        assert_kernel_times_in_order(&L, pid);
        /* finalize comes last */
        int fi = -1;
        for (int i = 0; i < L.n; i++)
            if (L.e[i].pid == pid && !strcmp(L.e[i].kind, "fini"))
                fi = i;
        for (int i = fi + 1; i < L.n; i++)
            assert_true(L.e[i].pid != pid);
    }
    free(L.e);
    unlink(log_path);
}

/* A v4 plugin: no API or KernelLaunch events (NCCL's v4 adapter drops them), a Coll's
 * parent is its Group event, kernel channels as with v5. */
static void v4_plugin_gets_no_api_events_and_group_parents(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probev4.so", NULL, 2, workload), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    for (int p = 0; p < 2; p++) {
        int pid = pids[p];
        long caller = caller_tid(&L, pid), proxy = -1;
        for (int t = ncclProfileGroupApi; t <= ncclProfileKernelLaunch; t <<= 1)
            assert_int_equal(count(&L, pid, "start", t), 0);
        assert_int_equal(count(&L, pid, "start", ncclProfileColl), 4);
        assert_int_equal(count(&L, pid, "start", ncclProfileP2p), 6);
        for (int i = 0; i < L.n; i++) {
            const ev *e = &L.e[i];
            if (e->pid != pid || strcmp(e->kind, "start") ||
                (e->type != ncclProfileColl && e->type != ncclProfileP2p))
                continue;
            const ev *g = find_start(&L, pid, e->parent);
            assert_non_null(g);
            assert_int_equal(g->type, ncclProfileGroup);
            if (e->type == ncclProfileColl)
                check_channels(&L, pid, e, caller, &proxy);
        }
        assert_int_equal(count(&L, pid, "fini", -1), 1);
    }
    free(L.e);
    unlink(log_path);
}

/* A plugin whose init fails: the job runs as without one, no events, no finalize. */
static void failing_init_leaves_the_job_alone(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probefail.so", NULL, 2, workload), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(count(&L, pids[p], "start", -1), 0);
        assert_int_equal(count(&L, pids[p], "fini", -1), 0);
    }
    free(L.e);
    unlink(log_path);
}

/* NCCL's name rules: a bare name becomes libnccl-profiler-<name>.so (found on
 * LD_LIBRARY_PATH); "none" loads nothing; a missing file or a library without the symbol
 * leaves the job running without a profiler. */
static void plugin_names_follow_nccl_rules(void **state)
{
    (void)state;
    assert_int_equal(run("probe", NULL, 2, workload), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    free(L.e);
    const char *without[] = {"none", "libnccl-profiler-missing.so", "libnccl-profiler-nosym.so"};
    for (size_t i = 0; i < sizeof without / sizeof *without; i++) {
        assert_int_equal(run(without[i], NULL, 2, workload), 0);
        L = read_log(log_path);
        if (pids_of(&L, pids, 4) != 0)
            fail_msg("%s: a plugin was loaded", without[i]);
        for (int k = 0; k < L.n; k++)
            assert_true(!strcmp(L.e[k].kind, "caller") || !strcmp(L.e[k].kind, "before"));
        free(L.e);
    }
    unlink(log_path);
}

/* A one-rank communicator runs collectives as ncclLaunchOneRank: no API or task events. */
static int one_rank(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(rank, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, nranks, *id, rank));
    static float a[1024];
    TN_NCCL(ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, comm, s));
    TN_NCCL(ncclBroadcast(a, a, 100, ncclFloat32, 0, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void one_rank_comm_gets_no_task_events(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probe.so", NULL, 1, one_rank), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 1);
    assert_int_equal(count(&L, pids[0], "start", -1), 0);
    assert_int_equal(count(&L, pids[0], "fini", -1), 1);
    free(L.e);
    unlink(log_path);
}

/* COLLPROF_EMU_DELAY: the late rank's kernel channels start later by about the delay. */
static void delayed_rank_starts_its_kernel_late(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probe.so", "COLLPROF_EMU_DELAY=1:300", 2, workload),
                     0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    unsigned long long first[2] = {0, 0};
    int rank_of[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < L.n; i++)
            if (L.e[i].pid == pids[p] && !strcmp(L.e[i].kind, "init"))
                rank_of[p] = L.e[i].rank;
        for (int i = 0; i < L.n && !first[p]; i++) {
            const ev *e = &L.e[i];
            if (e->pid == pids[p] && !strcmp(e->kind, "start") && e->type == ncclProfileKernelCh)
                first[p] = e->ptimer;   /* the first AllReduce's first channel */
        }
        assert_true(first[p] > 0);
    }
    unsigned long long late = rank_of[0] == 1 ? first[0] : first[1];
    unsigned long long early = rank_of[0] == 1 ? first[1] : first[0];
    assert_true(late > early + 250000000ull);
    free(L.e);
    unlink(log_path);
}

/* Captured work: API events with graphCaptured = 1, no task or kernel events (NCCL's come at
 * each graph launch, which the emulation never makes), and no seqNumber used up. A hung rank
 * (COLLPROF_EMU_HANG, released by ncclCommAbort) gets no KernelCh start for that op. */
static int captured_then_hung(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(rank, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, nranks, *id, rank));
    say_caller(rank);
    static float a[4096], b[4096];
    CUgraph g;
    TN_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    TN_NCCL(ncclAllReduce(a, b, 100, ncclFloat32, ncclSum, comm, s));
    TN_CU(cuStreamEndCapture(s, &g));
    TN_NCCL(ncclAllReduce(a, b, 100, ncclFloat32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    /* the third AllReduce issued (the captured one counts) hangs on rank 1 */
    TN_NCCL(ncclAllReduce(a, b, 100, ncclFloat32, ncclSum, comm, s));
    tn_sleep_ms(300);
    TN_NCCL(ncclCommAbort(comm));
    return 0;
}

static void captured_and_hung_ops_get_no_kernel_events(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probe.so", "COLLPROF_EMU_HANG=1:2", 2,
                         captured_then_hung), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    for (int p = 0; p < 2; p++) {
        int pid = pids[p], rank = -1, captured = 0, api = 0;
        for (int i = 0; i < L.n; i++) {
            const ev *e = &L.e[i];
            if (e->pid != pid)
                continue;
            if (!strcmp(e->kind, "init"))
                rank = e->rank;
            if (!strcmp(e->kind, "start") && e->type == ncclProfileCollApi) {
                api++;
                captured += e->captured;
                assert_int_equal(e->captured, api == 1);
            }
            if (!strcmp(e->kind, "start") && e->type == ncclProfileColl)
                assert_true(e->seq < 2);   /* the captured one used none */
        }
        assert_int_equal(api, 3);
        assert_int_equal(captured, 1);
        assert_int_equal(count(&L, pid, "start", ncclProfileColl), 2);
        /* rank 1 never began its hung AllReduce: one op's channels only; rank 0 began both
         * (the second gave up at the abort) */
        int kch = count(&L, pid, "start", ncclProfileKernelCh);
        int coll_ch = 1;   /* 400 bytes: one channel */
        assert_int_equal(kch, rank == 1 ? coll_ch : 2 * coll_ch);
        assert_int_equal(count(&L, pid, "fini", -1), 1);
    }
    free(L.e);
    unlink(log_path);
}

/* A rank's sends to itself: a pair in place (one buffer), then one out of place; then the
 * self pairs NCCL makes of an AlltoAll in place and out of place and of a Gather in place at
 * its root (rank 0). */
static int self_pairs(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(rank, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, nranks, *id, rank));
    say_caller(rank);
    static int32_t a[100], b[100];
    for (int i = 0; i < 100; i++)
        a[i] = rank * 1000 + i;
    TN_CHECK(tn_self_pair(a, a, 100, rank, comm, s) == 0, "in place");
    TN_CHECK(tn_self_pair(a, b, 100, rank, comm, s) == 0, "out of place");
    TN_CU(cuStreamSynchronize(s));
    for (int i = 0; i < 100; i++)
        TN_CHECK(a[i] == rank * 1000 + i && b[i] == a[i], "a send to itself lost its data");
    static int32_t c[200], d[200];
    TN_NCCL(ncclAlltoAll(c, c, 100, ncclInt32, comm, s));
    TN_NCCL(ncclAlltoAll(c, d, 100, ncclInt32, comm, s));
    TN_CU(cuStreamSynchronize(s)); /* the host writes c next */
    for (int i = 0; i < 100; i++)
        c[rank * 100 + i] = rank * 1000 + i;
    TN_NCCL(ncclGather(c + rank * 100, c, 100, ncclInt32, 0, comm, s));
    TN_CU(cuStreamSynchronize(s));
    for (int i = 0; rank == 0 && i < 200; i++)
        TN_CHECK(c[i] == (i / 100) * 1000 + i % 100, "a Gather in place lost its data");
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

/* NCCL drops a send to itself in place with its receive (src/enqueue.cc: "Skip send to self
 * in-place"): the API events only, no task, no kernel; out of place, a task but no channel
 * (no proxy op for a self pair). An AlltoAll's and a Gather's self pairs are such tasks too:
 * in place, their other tasks only; out of place, channels of their other tasks only. */
static void a_send_to_itself_in_place_makes_no_task(void **state)
{
    (void)state;
    assert_int_equal(run("libnccl-profiler-probe.so", NULL, 2, self_pairs), 0);
    evlog L = read_log(log_path);
    int pids[4];
    assert_int_equal(pids_of(&L, pids, 4), 2);
    for (int p = 0; p < 2; p++) {
        int pid = pids[p];
        long caller = caller_tid(&L, pid), proxy = -1;
        int rank = -1;
        for (int i = 0; i < L.n; i++)
            if (L.e[i].pid == pid && !strcmp(L.e[i].kind, "init"))
                rank = L.e[i].rank;
        /* Send/Recv 4 + 2; AlltoAll in place 4 + 2, out of place 4 + 4; the Gather: its send,
         * and at the root the receives of both ranks, the self pair dropped */
        assert_int_equal(count(&L, pid, "start", ncclProfileP2pApi), rank == 0 ? 15 : 13);
        assert_int_equal(count(&L, pid, "start", ncclProfileP2p), 2 + 2 + 4 + 1);
        int channels = 0;
        for (int i = 0; i < L.n; i++) {
            const ev *e = &L.e[i];
            if (e->pid == pid && !strcmp(e->kind, "start") && e->type == ncclProfileP2p) {
                check_channels(&L, pid, e, caller, &proxy);
                if (e->peer != e->rank)
                    channels += e->nch;
            }
        }
        assert_int_equal(count(&L, pid, "start", ncclProfileKernelCh), channels);
        assert_true(channels >= 2); /* the AlltoAlls' and the Gather's tasks to the peer */
    }
    free(L.e);
    unlink(log_path);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* the dynamic loader reads LD_LIBRARY_PATH at start only: a bare plugin name is found
     * on it, so this program starts again with the probes' directory there */
    find_prof_dir();
    const char *ld = getenv("LD_LIBRARY_PATH");
    if (!ld || !strstr(ld, prof_dir)) {
        char v[1200];
        snprintf(v, sizeof v, "%s%s%s", prof_dir, ld && *ld ? ":" : "", ld ? ld : "");
        setenv("LD_LIBRARY_PATH", v, 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "cannot restart with LD_LIBRARY_PATH: the bare-name case will fail\n");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(v5_job_reports_api_task_and_kernel_events),
        cmocka_unit_test(v4_plugin_gets_no_api_events_and_group_parents),
        cmocka_unit_test(failing_init_leaves_the_job_alone),
        cmocka_unit_test(plugin_names_follow_nccl_rules),
        cmocka_unit_test(one_rank_comm_gets_no_task_events),
        cmocka_unit_test(delayed_rank_starts_its_kernel_late),
        cmocka_unit_test(captured_and_hung_ops_get_no_kernel_events),
        cmocka_unit_test(a_send_to_itself_in_place_makes_no_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
