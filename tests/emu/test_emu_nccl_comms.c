/* Point-to-point and communicators: grouped send/receive rings (no deadlock, large messages
 * in bounded staging), all-pairs exchanges with a self message, ncclCommSplit (NOCOLOR
 * included), ncclCommShrink, ncclCommInitAll (threads of one process, several devices),
 * non-blocking initialization and collectives, and device-resident PreMulSum scalars. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/emu/test_emu_nccl_util.h"

static int ring_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    size_t count = *(const size_t *)arg;
    CUstream s;
    if (tn_device(me % 8, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    int32_t *out = malloc(count * 4), *in = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        out[i] = (int32_t)(me * 1000003 + i);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    /* every rank sends before it receives: only the group makes this complete */
    for (int round = 0; round < 2; round++) {
        TN_NCCL(ncclGroupStart());
        TN_NCCL(ncclSend(out, count, ncclInt32, next, comm, s));
        TN_NCCL(ncclRecv(in, count, ncclInt32, prev, comm, s));
        TN_NCCL(ncclGroupEnd());
        TN_CU(cuStreamSynchronize(s));
        for (size_t i = 0; i < count; i++)
            TN_CHECK(in[i] == (int32_t)(prev * 1000003 + i), "round %d in[%zu] = %d", round, i,
                     in[i]);
        memset(in, 0, count * 4);
    }
    free(out);
    free(in);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void grouped_ring_of_sends_and_receives_completes(void **state)
{
    (void)state;
    size_t small = 1000, large = 3 * 1000 * 1000 + 7;   /* 12 MB: many chunks */
    assert_int_equal(tn_run_ranks(8, ring_rank, &small, 60), 0);
    assert_int_equal(tn_run_ranks(3, ring_rank, &large, 60), 0);
}

static int all_pairs_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    enum { C = 5000 };
    double *out = malloc(sizeof(double) * C * (size_t)n), *in = malloc(sizeof(double) * C * (size_t)n);
    for (int p = 0; p < n; p++)
        for (int i = 0; i < C; i++)
            out[p * C + i] = me * 100 + p + i * 1e-3;
    /* every pair both ways, self included, receives posted first on odd ranks */
    TN_NCCL(ncclGroupStart());
    for (int k = 0; k < n; k++) {
        int p = (me + k) % n;
        if (me % 2) {
            TN_NCCL(ncclRecv(in + p * C, C, ncclFloat64, p, comm, s));
            TN_NCCL(ncclSend(out + p * C, C, ncclFloat64, p, comm, s));
        } else {
            TN_NCCL(ncclSend(out + p * C, C, ncclFloat64, p, comm, s));
            TN_NCCL(ncclRecv(in + p * C, C, ncclFloat64, p, comm, s));
        }
    }
    TN_NCCL(ncclGroupEnd());
    /* two messages to one peer arrive in order */
    int a = me * 2, b = me * 2 + 1, ra = -1, rb = -1;
    int peer = n - 1 - me;
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclSend(&a, 1, ncclInt32, peer, comm, s));
    TN_NCCL(ncclSend(&b, 1, ncclInt32, peer, comm, s));
    TN_NCCL(ncclRecv(&ra, 1, ncclInt32, peer, comm, s));
    TN_NCCL(ncclRecv(&rb, 1, ncclInt32, peer, comm, s));
    TN_NCCL(ncclGroupEnd());
    TN_CU(cuStreamSynchronize(s));
    for (int p = 0; p < n; p++)
        for (int i = 0; i < C; i++)
            TN_CHECK(in[p * C + i] == p * 100 + me + i * 1e-3, "from %d [%d] = %g", p, i,
                     in[p * C + i]);
    TN_CHECK(ra == peer * 2 && rb == peer * 2 + 1, "order: %d %d", ra, rb);
    free(out);
    free(in);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void all_pairs_exchange_with_self_and_ordering(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(4, all_pairs_rank, NULL, 60), 0);
}

static int ungrouped_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    /* both send first, ungrouped: a small send completes into the pair's buffer, as NCCL's
     * completes into its connection buffers, so this does not deadlock */
    int out[1000], in[1000], peer = 1 - me;
    for (int i = 0; i < 1000; i++)
        out[i] = me * 10000 + i;
    for (int round = 0; round < 3; round++) {
        TN_NCCL(ncclSend(out, 1000, ncclInt32, peer, comm, s));
        TN_NCCL(ncclRecv(in, 1000, ncclInt32, peer, comm, s));
        TN_CU(cuStreamSynchronize(s));
        for (int i = 0; i < 1000; i++)
            TN_CHECK(in[i] == peer * 10000 + i, "round %d in[%d] = %d", round, i, in[i]);
    }
    /* a zero-byte message still meets its receive */
    TN_NCCL(ncclSend(NULL, 0, ncclInt32, peer, comm, s));
    TN_NCCL(ncclRecv(NULL, 0, ncclInt32, peer, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void small_ungrouped_sends_complete_into_the_buffer(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, ungrouped_rank, NULL, 30), 0);
}

static int split_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm, half = NULL, sub = NULL;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    /* two colors, keys reversing the order; the last rank opts out */
    int color = me == n - 1 ? NCCL_SPLIT_NOCOLOR : me % 2;
    TN_NCCL(ncclCommSplit(comm, color, -me, &half, NULL));
    if (me == n - 1) {
        TN_CHECK(half == NULL, "NOCOLOR gave a communicator");
    } else {
        int cnt, rk;
        TN_NCCL(ncclCommCount(half, &cnt));
        TN_NCCL(ncclCommUserRank(half, &rk));
        int members = 0, before = 0;
        for (int r = 0; r < n - 1; r++)
            if (r % 2 == me % 2) {
                members++;
                before += r > me;
            }
        TN_CHECK(cnt == members && rk == before, "count %d rank %d (want %d %d)", cnt, rk,
                 members, before);
        int v = me, sum = 0, want = 0;
        for (int r = 0; r < n - 1; r++)
            want += r % 2 == me % 2 ? r : 0;
        TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, half, s));
        TN_CU(cuStreamSynchronize(s));
        TN_CHECK(sum == want, "sum %d want %d", sum, want);
    }
    /* the parent still works, then shrinks without rank 1 */
    if (me != 1) {
        int ex[1] = {1};
        TN_NCCL(ncclCommShrink(comm, ex, 1, &sub, NULL, NCCL_SHRINK_DEFAULT));
        int cnt, rk;
        TN_NCCL(ncclCommCount(sub, &cnt));
        TN_NCCL(ncclCommUserRank(sub, &rk));
        TN_CHECK(cnt == n - 1 && rk == (me > 1 ? me - 1 : me), "shrunk %d %d", cnt, rk);
        int v = 1, sum = 0;
        TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, sub, s));
        TN_CU(cuStreamSynchronize(s));
        TN_CHECK(sum == n - 1, "shrunk sum %d", sum);
        TN_NCCL(ncclCommDestroy(sub));
    }
    if (half)
        TN_NCCL(ncclCommDestroy(half));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void split_by_color_and_key_and_shrink(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(5, split_rank, NULL, 60), 0);
}

static int init_all_job(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)me, (void)n, (void)id, (void)arg;
    enum { NDEV = 4, C = 1000 };
    ncclComm_t comms[NDEV];
    CUstream streams[NDEV];
    CUcontext ctx[NDEV];
    TN_CU(cuInit(0));
    int devs[NDEV] = {3, 1, 0, 2};
    TN_NCCL(ncclCommInitAll(comms, NDEV, devs));
    float *buf[NDEV];
    for (int i = 0; i < NDEV; i++) {
        int dev, rank, count;
        TN_NCCL(ncclCommCuDevice(comms[i], &dev));
        TN_NCCL(ncclCommUserRank(comms[i], &rank));
        TN_NCCL(ncclCommCount(comms[i], &count));
        TN_CHECK(dev == devs[i] && rank == i && count == NDEV, "comm %d: dev %d rank %d", i, dev,
                 rank);
        TN_CU(cuDevicePrimaryCtxRetain(&ctx[i], dev));
        TN_CU(cuCtxSetCurrent(ctx[i]));
        TN_CU(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
        buf[i] = malloc(C * sizeof(float));
        for (int k = 0; k < C; k++)
            buf[i][k] = (float)(i + k);
    }
    /* one thread drives every device: the group issues all ranks' work together */
    TN_NCCL(ncclGroupStart());
    for (int i = 0; i < NDEV; i++)
        TN_NCCL(ncclAllReduce(buf[i], buf[i], C, ncclFloat32, ncclSum, comms[i], streams[i]));
    TN_NCCL(ncclGroupEnd());
    for (int i = 0; i < NDEV; i++) {
        TN_CU(cuStreamSynchronize(streams[i]));
        for (int k = 0; k < C; k++)
            TN_CHECK(buf[i][k] == (float)(6 + 4 * k), "dev %d [%d] = %g", i, k, buf[i][k]);
        free(buf[i]);
    }
    for (int i = 0; i < NDEV; i++)
        TN_NCCL(ncclCommDestroy(comms[i]));
    ncclComm_t none[2];
    int dup[2] = {1, 1};
    TN_CHECK(ncclCommInitAll(none, 2, dup) == ncclInvalidUsage, "duplicate devices");
    int bad[1] = {99};
    TN_CHECK(ncclCommInitAll(none, 1, bad) == ncclInvalidArgument, "bad device");
    return 0;
}

static void init_all_makes_one_comm_per_device_in_one_process(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(1, init_all_job, NULL, 60), 0);
}

static int nonblocking_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    if (me == 1)
        tn_sleep_ms(300);   /* rank 0 must see its init still in progress */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, *id, me, &cfg);
    TN_CHECK(r == ncclInProgress || r == ncclSuccess, "init -> %d", r);
    TN_CHECK(comm != NULL, "no comm handle");
    ncclResult_t st = ncclInProgress;
    int polls = 0;
    uint64_t t0 = tn_now_ns();
    while (st == ncclInProgress && tn_now_ns() - t0 < 10000000000ull) {
        TN_NCCL(ncclCommGetAsyncError(comm, &st));
        polls += st == ncclInProgress;
        if (st == ncclInProgress)
            tn_sleep_ms(5);
    }
    TN_CHECK(st == ncclSuccess, "init ended with %d", st);
    if (me == 0)
        TN_CHECK(polls > 0 && r == ncclInProgress, "rank 0 never saw ncclInProgress");
    /* a collective on a non-blocking comm: ncclInProgress until its launch is done */
    int v = me + 1, sum = 0;
    r = ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s);
    TN_CHECK(r == ncclInProgress || r == ncclSuccess, "allreduce -> %d", r);
    do {
        TN_NCCL(ncclCommGetAsyncError(comm, &st));
    } while (st == ncclInProgress);
    TN_CHECK(st == ncclSuccess, "allreduce async %d", st);
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(sum == 3, "sum %d", sum);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void nonblocking_init_reports_in_progress_then_success(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, nonblocking_rank, NULL, 60), 0);
}

static int premul_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    double scalar_dev = 0.25, x[2] = {me + 1.0, 4.0}, y[2];
    ncclRedOp_t op;
    TN_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar_dev, ncclFloat64, ncclScalarDevice, comm));
    /* a device scalar is read when the collective runs, not when the op is made */
    scalar_dev = 0.5;
    TN_NCCL(ncclAllReduce(x, y, 2, ncclFloat64, op, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(y[0] == 0.5 * (1 + 2 + 3) && y[1] == 0.5 * 12, "y %g %g", y[0], y[1]);
    TN_NCCL(ncclRedOpDestroy(op, comm));
    TN_CHECK(ncclAllReduce(x, y, 2, ncclFloat64, op, comm, s) == ncclInvalidArgument,
             "destroyed op accepted");
    double host = 3.0;
    TN_NCCL(ncclRedOpCreatePreMulSum(&op, &host, ncclFloat64, ncclScalarHostImmediate, comm));
    host = 100.0;   /* an immediate scalar was read at creation */
    double rs[3] = {me + 1.0, 4.0, 4.0};
    TN_NCCL(ncclReduceScatter(rs, y, 1, ncclFloat64, op, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(y[0] == 3.0 * (me == 0 ? 6 : 12), "rs %g", y[0]);
    TN_CHECK(ncclAllReduce(x, y, 2, ncclFloat32, op, comm, s) == ncclInvalidArgument,
             "dtype mismatch accepted");
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void premulsum_with_host_and_device_scalars(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(3, premul_rank, NULL, 60), 0);
}

static int grouped_init_job(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)me, (void)n, (void)arg;
    /* one thread, two devices, two ranks: only a group lets both inits wait side by side */
    enum { NDEV = 2 };
    CUcontext ctx[NDEV];
    CUstream s[NDEV];
    ncclComm_t comm[NDEV];
    TN_CU(cuInit(0));
    TN_NCCL(ncclGroupStart());
    for (int d = 0; d < NDEV; d++) {
        TN_CU(cuDevicePrimaryCtxRetain(&ctx[d], d));
        TN_CU(cuCtxSetCurrent(ctx[d]));
        TN_NCCL(ncclCommInitRank(&comm[d], NDEV, *id, d));
    }
    TN_NCCL(ncclGroupEnd());
    int v[NDEV] = {5, 7};
    TN_NCCL(ncclGroupStart());
    for (int d = 0; d < NDEV; d++) {
        TN_CU(cuCtxSetCurrent(ctx[d]));
        TN_CU(cuStreamCreate(&s[d], CU_STREAM_NON_BLOCKING));
        TN_NCCL(ncclAllReduce(&v[d], &v[d], 1, ncclInt32, ncclMax, comm[d], s[d]));
    }
    TN_NCCL(ncclGroupEnd());
    for (int d = 0; d < NDEV; d++) {
        TN_CU(cuStreamSynchronize(s[d]));
        TN_CHECK(v[d] == 7, "dev %d: %d", d, v[d]);
        int dev;
        TN_NCCL(ncclCommCuDevice(comm[d], &dev));
        TN_CHECK(dev == d, "comm %d on device %d", d, dev);
        TN_NCCL(ncclCommDestroy(comm[d]));
    }
    return 0;
}

static void init_ranks_in_a_group_run_concurrently(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(1, grouped_init_job, NULL, 30), 0);
}

static int revoke_capture_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    int v = 1, sum = 0;
    /* a captured collective waits for a graph launch: here it never runs... */
    TN_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    CUgraph g;
    TN_CU(cuStreamEndCapture(s, &g));
    TN_CHECK(sum == 0, "the captured collective ran");
    /* ...and the communicator's next collective is not left waiting for it */
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(sum == n, "sum %d", sum);
    TN_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    ncclResult_t r = ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s);
    TN_CHECK(r == ncclInvalidUsage, "after revoke -> %d", r);
    TN_CHECK(strcmp(ncclGetLastError(comm), "AllReduce: communicator was revoked") == 0, "%s",
             ncclGetLastError(comm));
    TN_CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclInvalidArgument, "revoked twice");
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void captured_collectives_do_not_run_and_revoke_refuses_work(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, revoke_capture_rank, NULL, 30), 0);
}

static int peer_dies_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    if (me == 1)
        _exit(0);   /* gone without a word */
    int v = 1, sum = 0;
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    ncclResult_t async = ncclSuccess;
    uint64_t t0 = tn_now_ns();
    while (async == ncclSuccess && tn_now_ns() - t0 < 10000000000ull) {
        tn_sleep_ms(50);
        TN_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    TN_CHECK(async == ncclRemoteError, "async %d", async);
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommAbort(comm));
    return 0;
}

static void a_dead_peer_becomes_a_remote_error(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, peer_dies_rank, NULL, 30), 0);
}

static int scalable_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    ncclUniqueId ids[2] = {*id, *id};
    TN_CHECK(ncclCommInitRankScalable(&comm, n, me, 3, ids, NULL) == ncclInvalidArgument,
             "nId above nranks accepted");
    TN_CHECK(strcmp(ncclGetLastError(NULL),
                    "improper usage of ncclCommInitRank: nId = 3, nranks=2") == 0, "%s",
             ncclGetLastError(NULL));
    TN_NCCL(ncclCommInitRankScalable(&comm, n, me, 2, ids, NULL));
    int v = me + 1, sum = 0;
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(sum == 3, "sum %d", sum);
    TN_NCCL(ncclCommFinalize(comm));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void init_rank_scalable_meets_on_the_first_id(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, scalable_rank, NULL, 30), 0);
}

/* A non-blocking init that cannot complete: a peer that never joins (absent), or
 * COLLPROF_EMU_HANG=RANK:init. It is still in progress after wait_ms, and an abort ends it
 * at once. */
struct pending_init {
    int absent; /* the rank that never calls init; -1: every rank does */
    int wait_ms;
};

static int abort_pending_init(int me, int n, const ncclUniqueId *id, void *arg)
{
    const struct pending_init *p = arg;
    if (me == p->absent)
        return 0;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm;
    TN_CHECK(ncclCommInitRankConfig(&comm, n, *id, me, &cfg) == ncclInProgress, "not async");
    tn_sleep_ms(p->wait_ms);
    ncclResult_t st;
    TN_NCCL(ncclCommGetAsyncError(comm, &st));
    TN_CHECK(st == ncclInProgress, "rank %d: init state %d after %d ms", me, st, p->wait_ms);
    uint64_t t0 = tn_now_ns();
    TN_NCCL(ncclCommAbort(comm));
    /* a ceiling, not a speed: an abort that does not end the pending init is the fault */
    TN_CHECK(tn_now_ns() - t0 < 10000000000ull, "rank %d: abort of a pending init took %.0f ms",
             me, (double)(tn_now_ns() - t0) / 1e6);
    if (p->absent >= 0) {
        char path[128];
        tn_segment_path(id, path, sizeof path);
        TN_CHECK(access(path, F_OK) != 0, "the abandoned rendezvous left %s", path);
    }
    return 0;
}

static void abort_ends_an_initialization_waiting_for_a_peer(void **state)
{
    (void)state;
    struct pending_init p = {.absent = 1, .wait_ms = 100};
    assert_int_equal(tn_run_ranks(2, abort_pending_init, &p, 30), 0);
}

/* COLLPROF_EMU_HANG=1:init: rank 1's init never completes, so neither does rank 0's. */
static void an_init_hang_fault_holds_every_rank_until_abort(void **state)
{
    (void)state;
    static const char *const env[] = {"COLLPROF_EMU_HANG=1:init", NULL};
    struct pending_init p = {.absent = -1, .wait_ms = 500};
    assert_int_equal(tn_job(env, 2, abort_pending_init, &p, 30), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grouped_ring_of_sends_and_receives_completes),
        cmocka_unit_test(all_pairs_exchange_with_self_and_ordering),
        cmocka_unit_test(small_ungrouped_sends_complete_into_the_buffer),
        cmocka_unit_test(split_by_color_and_key_and_shrink),
        cmocka_unit_test(init_all_makes_one_comm_per_device_in_one_process),
        cmocka_unit_test(nonblocking_init_reports_in_progress_then_success),
        cmocka_unit_test(premulsum_with_host_and_device_scalars),
        cmocka_unit_test(init_ranks_in_a_group_run_concurrently),
        cmocka_unit_test(init_rank_scalable_meets_on_the_first_id),
        cmocka_unit_test(captured_collectives_do_not_run_and_revoke_refuses_work),
        cmocka_unit_test(a_dead_peer_becomes_a_remote_error),
        cmocka_unit_test(abort_ends_an_initialization_waiting_for_a_peer),
        cmocka_unit_test(an_init_hang_fault_holds_every_rank_until_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
