/* Every collprof-sim pattern, 8 ranks on the emulation, under the shim: each rank's trace
 * holds exactly the calls collprof-sim counted, op by op; a collective's (comm id, seq)
 * names the same op, count, dtype and root on every rank of its comm; each Send pairs with
 * one Recv of the same count by (comm, sender, receiver, seq); every timed CALL has exactly
 * one DONE with start <= end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <time.h>

#include "abi/nccl_abi.h"
#include "shim_test_util.h"

#define RANKS 8
#define NOPS 10 /* CP_OP_ALLREDUCE .. CP_OP_RECV */

/* The count line's order, as collprof-sim prints it. */
static const char *const g_names[NOPS] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                          "Reduce", "AlltoAll", "Gather", "Scatter", "Send",
                                          "Recv"};
static const uint8_t g_ops[NOPS] = {CP_OP_ALLREDUCE, CP_OP_ALLGATHER, CP_OP_REDUCESCATTER,
                                    CP_OP_BROADCAST, CP_OP_REDUCE, CP_OP_ALLTOALL,
                                    CP_OP_GATHER, CP_OP_SCATTER, CP_OP_SEND, CP_OP_RECV};

typedef struct rank_trace {
    cp_file_header header;
    cp_rec_call *calls;
    size_t ncalls, cap;
    cp_rec_done *dones;
    size_t ndones, dcap;
    cp_rec_comm comms[64];
    size_t ncomms;
} rank_trace;

static int on_call(void *ctx, const cp_rec_call *r)
{
    rank_trace *t = ctx;
    if (t->ncalls == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->calls = realloc(t->calls, t->cap * sizeof *t->calls);
    }
    t->calls[t->ncalls++] = *r;
    return 0;
}
static int on_done(void *ctx, const cp_rec_done *r)
{
    rank_trace *t = ctx;
    if (t->ndones == t->dcap) {
        t->dcap = t->dcap ? 2 * t->dcap : 256;
        t->dones = realloc(t->dones, t->dcap * sizeof *t->dones);
    }
    t->dones[t->ndones++] = *r;
    return 0;
}
static int on_comm(void *ctx, const cp_rec_comm *r)
{
    rank_trace *t = ctx;
    assert_true(t->ncomms < 64);
    t->comms[t->ncomms++] = *r;
    return 0;
}

static const cp_rec_comm *comm_of(const rank_trace *t, uint32_t index)
{
    for (size_t i = 0; i < t->ncomms; i++)
        if (t->comms[i].comm_index == index)
            return &t->comms[i];
    return NULL;
}

/* One operation as all its ranks saw it: a collective (src = -1) or a Send/Recv pair. */
typedef struct op_entry {
    uint64_t comm_id, seq, count;
    int32_t src, dst, root, nranks;
    uint8_t op, dtype;
    int seen, sends, recvs;
} op_entry;

static op_entry *g_ops_seen;
static size_t g_nops, g_ops_cap;

static op_entry *find_or_add(uint64_t comm_id, uint64_t seq, int32_t src, int32_t dst)
{
    for (size_t i = 0; i < g_nops; i++) {
        op_entry *e = &g_ops_seen[i];
        if (e->comm_id == comm_id && e->seq == seq && e->src == src && e->dst == dst)
            return e;
    }
    if (g_nops == g_ops_cap) {
        g_ops_cap = g_ops_cap ? 2 * g_ops_cap : 1024;
        g_ops_seen = realloc(g_ops_seen, g_ops_cap * sizeof *g_ops_seen);
    }
    op_entry *e = &g_ops_seen[g_nops++];
    memset(e, 0, sizeof *e);
    e->comm_id = comm_id;
    e->seq = seq;
    e->src = src;
    e->dst = dst;
    return e;
}

static int is_rooted(uint8_t op)
{
    return op == CP_OP_BROADCAST || op == CP_OP_REDUCE || op == CP_OP_GATHER ||
           op == CP_OP_SCATTER;
}

/* collprof-sim's count line of `rank`, per op in g_names order. */
static void counted(const char *out, int rank, uint64_t want[NOPS])
{
    char key[32];
    snprintf(key, sizeof key, "rank %d: ", rank);
    const char *line = out;
    while ((line = strstr(line, key)) != NULL && line != out && line[-1] != '\n')
        line += strlen(key);
    assert_non_null(line);
    const char *eol = strchr(line, '\n');
    for (int k = 0; k < NOPS; k++) {
        char name[32];
        snprintf(name, sizeof name, " %s=", g_names[k]);
        const char *p = strstr(line, name);
        if (!p || (eol && p > eol)) { /* the first follows "(", not " " */
            snprintf(name, sizeof name, "(%s=", g_names[k]);
            p = strstr(line, name);
        }
        assert_non_null(p);
        assert_true(!eol || p < eol);
        want[k] = strtoull(p + strlen(name), NULL, 10);
    }
}

static void check_pattern(const char *pattern, int ranks, const char *steps)
{
    char sim[4200], lib_path[4300], dir_env[4300];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", st_build_dir());
    if (!st_exists(sim))
        skip();
    char *tmp = st_tmpdir();
    assert_non_null(tmp);
    snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s/emu", st_build_dir());
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s/t", tmp);
    char nranks[16];
    snprintf(nranks, sizeof nranks, "%d", ranks);
    const char *env[] = {dir_env, lib_path, NULL};
    const char *argv[] = {"--launch", nranks, "--pattern", pattern, "--steps", steps,
                          "--scale", "0.001", "--check", NULL};
    static job_result res;
    st_run_prog(&res, "collprof-sim", 1, env, argv);
    if (res.status != 0)
        fprintf(stderr, "%s: %#x\n%s%s", pattern, res.status, res.out, res.err);
    assert_int_equal(res.status, 0);
    assert_int_equal(st_count_lines(res.err, "collprof:"), 0);

    char **paths;
    int nf = st_list(dir_env + strlen("COLLPROF_DIR="), &paths);
    assert_int_equal(nf, ranks);
    g_nops = 0;
    size_t timed = 0, p2p = 0, colls = 0;
    for (int f = 0; f < nf; f++) {
        static rank_trace t;
        memset(&t, 0, sizeof t);
        int status;
        char err[256];
        cp_trace_reader *r = cp_trace_reader_open(paths[f], &status, err, sizeof err);
        assert_non_null(r);
        t.header = *cp_trace_reader_header(r);
        cp_trace_visitor v = {.ctx = &t, .on_call = on_call, .on_done = on_done,
                              .on_comm = on_comm};
        cp_walk_result wr;
        cp_trace_walk(r, &v, &wr);
        cp_trace_reader_close(r);
        assert_int_equal(wr.corrupt_chunks, 0);
        assert_int_equal(wr.lost_records, 0);
        int rank = t.header.rank;
        assert_true(rank >= 0 && rank < ranks);

        uint64_t want[NOPS], got[NOPS] = {0};
        counted(res.out, rank, want);
        for (size_t i = 0; i < t.ncalls; i++) {
            const cp_rec_call *c = &t.calls[i];
            int k = 0;
            while (k < NOPS && g_ops[k] != c->op)
                k++;
            if (k == NOPS)
                continue;
            got[k]++;
            assert_int_equal(c->result, 0);
            assert_true(c->dtype < ncclNumTypes);
            assert_true(c->count > 0 || c->op == CP_OP_ALLTOALL);
            const cp_rec_comm *cm = comm_of(&t, c->comm_index);
            assert_non_null(cm);
            if (c->op == CP_OP_SEND || c->op == CP_OP_RECV) {
                assert_true(c->peer >= 0 && c->peer < cm->nranks && c->peer != cm->rank);
                int send = c->op == CP_OP_SEND;
                op_entry *e = find_or_add(cm->comm_id, c->seq, send ? cm->rank : c->peer,
                                          send ? c->peer : cm->rank);
                if (e->sends + e->recvs)
                    assert_int_equal(e->count, c->count);
                e->count = c->count;
                e->sends += send;
                e->recvs += !send;
                p2p++;
            } else {
                if (is_rooted(c->op))
                    assert_true(c->peer >= 0 && c->peer < cm->nranks);
                else
                    assert_int_equal(c->peer, -1);
                op_entry *e = find_or_add(cm->comm_id, c->seq, -1, -1);
                if (e->seen) {
                    assert_int_equal(e->op, c->op);
                    assert_int_equal(e->count, c->count);
                    assert_int_equal(e->dtype, c->dtype);
                    assert_int_equal(e->root, c->peer);
                    assert_int_equal(e->nranks, cm->nranks);
                }
                e->op = c->op;
                e->count = c->count;
                e->dtype = c->dtype;
                e->root = c->peer;
                e->nranks = cm->nranks;
                e->seen++;
                colls++;
            }
            if (c->flags & CP_CALL_TIMED) {
                const cp_rec_done *d = NULL;
                for (size_t j = 0; j < t.ndones; j++) {
                    const cp_rec_done *x = &t.dones[j];
                    if (x->comm_index == c->comm_index && x->seq == c->seq &&
                        x->op == c->op && x->peer == c->peer) {
                        assert_null(d); /* exactly one */
                        d = x;
                    }
                }
                assert_non_null(d);
                /* GPU times even for a job far shorter than COLLPROF_FLUSH_MS that destroys
                 * its context at the end: they once came out as timing none. NCCL's plugin
                 * times a multi-rank comm's calls from its second on, events the rest. */
                if (d->timing != CP_TIMING_EVENTS)
                    assert_int_equal(d->timing, CP_TIMING_PLUGIN);
                assert_true(d->gpu_start_ns > 0 && d->gpu_start_ns <= d->gpu_end_ns);
                timed++;
            }
        }
        for (int k = 0; k < NOPS; k++) {
            if (got[k] != want[k])
                fprintf(stderr, "%s rank %d: %s traced %llu, counted %llu\n", pattern, rank,
                        g_names[k], (unsigned long long)got[k], (unsigned long long)want[k]);
            assert_int_equal(got[k], want[k]);
        }
        free(t.calls);
        free(t.dones);
    }
    for (size_t i = 0; i < g_nops; i++) {
        const op_entry *e = &g_ops_seen[i];
        if (e->src < 0) {
            /* every rank of the comm, and no more */
            assert_int_equal(e->seen, e->nranks);
        } else {
            assert_int_equal(e->sends, 1);
            assert_int_equal(e->recvs, 1);
        }
    }
    assert_true(colls + p2p > 0);
    assert_true(timed > 0); /* the emulated driver times on the GPU */
    cp_trace_dir_free(paths, nf);
    st_rmtree(tmp);
    free(tmp);
}

static void ddp(void **state) { (void)state; check_pattern("ddp", RANKS, "2"); }
static void fsdp(void **state) { (void)state; check_pattern("fsdp", RANKS, "2"); }
static void tp(void **state) { (void)state; check_pattern("tp", RANKS, "2"); }
static void pp(void **state) { (void)state; check_pattern("pp", RANKS, "2"); }
static void moe(void **state) { (void)state; check_pattern("moe", RANKS, "2"); }
static void mixed(void **state) { (void)state; check_pattern("mixed", RANKS, "2"); }

/* The trace file of `rank` in dir, or NULL (free it). */
static char *file_of_rank(const char *dir, int rank)
{
    char **paths, want[32], *found = NULL;
    int n = st_list(dir, &paths);
    snprintf(want, sizeof want, "rank%05d-", rank);
    for (int i = 0; i < n; i++)
        if (strstr(paths[i], want))
            found = strdup(paths[i]);
    if (n > 0)
        cp_trace_dir_free(paths, n);
    return found;
}

/* 0 when the file cannot be read yet (the shim creates it, then writes its header). */
static int try_read_rank(const char *path, rank_trace *t, cp_walk_result *wr, char *err,
                         size_t errlen)
{
    memset(t, 0, sizeof *t);
    int status;
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, errlen);
    if (!r)
        return 0;
    cp_trace_visitor v = {.ctx = t, .on_call = on_call, .on_done = on_done, .on_comm = on_comm};
    cp_trace_walk(r, &v, wr);
    cp_trace_reader_close(r);
    return 1;
}

static void read_rank(const char *path, rank_trace *t, cp_walk_result *wr)
{
    char err[256];
    if (!try_read_rank(path, t, wr, err, sizeof err))
        fail_msg("cannot read '%s': %s", path, err);
}

static const cp_rec_call *find_call(const rank_trace *t, uint8_t op, uint64_t seq)
{
    for (size_t i = 0; i < t->ncalls; i++)
        if (t->calls[i].op == op && t->calls[i].seq == seq)
            return &t->calls[i];
    return NULL;
}

/* COLLPROF_EMU_HANG=1:4: rank 1's stream never runs its collective seq 4 (the emulation
 * hangs on the GPU side: the host call returns, the rank blocks at its next sync). Once the
 * writer has flushed that CALL, rank 1 is SIGKILLed: its file must read back whole. */
static void sigkill_mid_collective_keeps_the_stuck_call(void **state)
{
    (void)state;
    char sim[4200], dir[4200];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", st_build_dir());
    if (!st_exists(sim))
        skip();
    char *tmp = st_tmpdir();
    assert_non_null(tmp);
    snprintf(dir, sizeof dir, "%s/t", tmp);
    fflush(NULL);
    pid_t leader = fork();
    if (leader == 0) {
        char lib[4200], preload[8400], emu[4200];
        snprintf(lib, sizeof lib, "%s/lib/libcollprof.so", st_build_dir());
#ifdef CP_TEST_ASAN_RUNTIME
        snprintf(preload, sizeof preload, "%s %s", CP_TEST_ASAN_RUNTIME, lib);
#else
        snprintf(preload, sizeof preload, "%s", lib);
#endif
        snprintf(emu, sizeof emu, "%s/emu", st_build_dir());
        setpgid(0, 0); /* the test ends every rank with one kill */
        setenv("LD_PRELOAD", preload, 1);
        setenv("LD_LIBRARY_PATH", emu, 1);
        setenv("COLLPROF_DIR", dir, 1);
        /* the killed ranks' live blocks stay behind: not in /dev/shm */
        setenv("COLLPROF_LIVE_DIR", tmp, 1);
        setenv("TMPDIR", tmp, 1); /* and the launcher's rendezvous directory, which the kill
                                   * leaves behind too */
        setenv("COLLPROF_FLUSH_MS", "50", 1);
        setenv("COLLPROF_EMU_HANG", "1:4", 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        execl(sim, sim, "--launch", "2", "--pattern", "ddp", "--steps", "3", "--scale", "0.001",
              "--timeout", "120", (char *)NULL);
        _exit(127);
    }
    assert_true(leader > 0);
    setpgid(leader, leader);
    /* Wait until rank 1's stuck CALL is on disk (the flush), then a little longer. */
    static rank_trace t1, t0;
    cp_walk_result wr;
    char *f1 = NULL;
    int seen = 0;
    for (int i = 0; i < 400 && !seen; i++) {
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        if (!f1)
            f1 = file_of_rank(dir, 1);
        char err[256];
        /* CI's sanitizer pass once polled the file between its creation and its header, and
         * failing there left the job running for its whole --timeout */
        if (f1 && try_read_rank(f1, &t1, &wr, err, sizeof err)) {
            seen = find_call(&t1, CP_OP_ALLREDUCE, 4) != NULL;
            free(t1.calls);
            free(t1.dones);
        }
    }
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    pid_t rank1 = 0;
    if (f1) {
        const char *dash = strrchr(f1, '-');
        rank1 = (pid_t)atoi(dash + 1);
    }
    int killed = rank1 > 0 && kill(rank1, SIGKILL) == 0;
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    kill(-leader, SIGKILL);
    int status;
    waitpid(leader, &status, 0);
    assert_true(seen);
    assert_true(killed);

    read_rank(f1, &t1, &wr);
    assert_int_equal(wr.corrupt_chunks, 0); /* a cut at the end at most */
    const cp_rec_call *stuck = find_call(&t1, CP_OP_ALLREDUCE, 4);
    assert_non_null(stuck);
    /* Its last CALL is the stuck collective, or the one the rank enqueued after it before
     * blocking; no DONE for either: the stream never got past seq 4. */
    assert_true(t1.ncalls > 0);
    const cp_rec_call *last = &t1.calls[t1.ncalls - 1];
    assert_int_equal(last->op, CP_OP_ALLREDUCE);
    assert_true(last->seq >= 4 && last->seq <= 5);
    for (size_t i = 0; i < t1.ndones; i++)
        assert_true(t1.dones[i].seq < 4);
    const cp_rec_comm *c1 = comm_of(&t1, stuck->comm_index);
    assert_non_null(c1);

    char *f0 = file_of_rank(dir, 0);
    assert_non_null(f0);
    read_rank(f0, &t0, &wr);
    assert_int_equal(wr.corrupt_chunks, 0);
    const cp_rec_call *peer = find_call(&t0, CP_OP_ALLREDUCE, 4);
    assert_non_null(peer);
    const cp_rec_comm *c0 = comm_of(&t0, peer->comm_index);
    assert_non_null(c0);
    assert_int_equal(c0->comm_id, c1->comm_id);
    assert_int_equal(peer->count, stuck->count);
    free(t0.calls);
    free(t0.dones);
    free(t1.calls);
    free(t1.dones);
    free(f0);
    free(f1);
    st_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ddp), cmocka_unit_test(fsdp), cmocka_unit_test(tp),
        cmocka_unit_test(pp),  cmocka_unit_test(moe),  cmocka_unit_test(mixed),
        cmocka_unit_test(sigkill_mid_collective_keeps_the_stuck_call),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(g_ops_seen);
    return rc;
}
