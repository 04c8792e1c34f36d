/* Streams and time as a profiler sees them: a call returns before its collective ran; an
 * event after a collective completes only once every peer arrived; COLLPROF_EMU_DELAY
 * makes a peer's collectives late and its partners wait; measured (event) durations of
 * large all-reduces follow the time model on every preset, a slow link and the socket
 * fallback change them by their factor; COLLPROF_EMU_HANG leaves a collective stuck until
 * ncclCommAbort releases it; ncclGroupSimulateEnd gives the model's estimate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "emu/common/topo.h"
#include "tests/emu/test_emu_nccl_util.h"

static int setup_on(int dev, int me, int n, const ncclUniqueId *id, CUstream *s,
                    ncclComm_t *comm)
{
    if (tn_device(dev, s))
        return 1;
    TN_NCCL(ncclCommInitRank(comm, n, *id, me));
    return 0;
}

static int setup(int me, int n, const ncclUniqueId *id, CUstream *s, ncclComm_t *comm)
{
    return setup_on(me % 8, me, n, id, s, comm);
}

static float elapsed_ms(CUevent a, CUevent b)
{
    float ms = -1;
    return cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS ? ms : -1;
}

static int async_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    ncclComm_t comm;
    if (setup(me, n, id, &s, &comm))
        return 1;
    CUevent before, after;
    TN_CU(cuEventCreate(&before, 0));
    TN_CU(cuEventCreate(&after, 0));
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = 1.0f;
    if (me == 1)
        tn_sleep_ms(500);   /* the late peer */
    uint64_t t0 = tn_now_ns();
    TN_CU(cuEventRecord(before, s));
    TN_NCCL(ncclAllReduce(x, y, 256, ncclFloat32, ncclSum, comm, s));
    uint64_t t1 = tn_now_ns();
    TN_CU(cuEventRecord(after, s));
    /* far less than the peer is late (the bound leaves room for a loaded machine) */
    TN_CHECK(t1 - t0 < 150000000ull, "the call took %.1f ms", (double)(t1 - t0) / 1e6);
    if (me == 0) {
        tn_sleep_ms(100);
        TN_CHECK(cuEventQuery(before) == CUDA_SUCCESS, "the event before is late");
        TN_CHECK(cuEventQuery(after) == CUDA_ERROR_NOT_READY, "done before the peer arrived");
    }
    TN_CU(cuEventSynchronize(after));
    if (me == 0) {
        TN_CHECK(tn_now_ns() - t0 >= 400000000ull, "done %.1f ms after the call",
                 (double)(tn_now_ns() - t0) / 1e6);
        TN_CHECK(elapsed_ms(before, after) >= 400.0f, "elapsed %.1f ms",
                 (double)elapsed_ms(before, after));
    }
    TN_CHECK(y[0] == 2.0f, "y %g", y[0]);
    TN_CU(cuEventDestroy_v2(before));
    TN_CU(cuEventDestroy_v2(after));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void calls_return_at_once_and_events_wait_for_peers(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, async_rank, NULL, 60), 0);
}

static int delay_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    ncclComm_t comm;
    if (setup(me, n, id, &s, &comm))
        return 1;
    CUevent z, a, b, c;
    TN_CU(cuEventCreate(&z, 0));
    TN_CU(cuEventCreate(&a, 0));
    TN_CU(cuEventCreate(&b, 0));
    TN_CU(cuEventCreate(&c, 0));
    int v = 1, sum = 0;
    /* z, a and b frame the second collective as a profiler does: a start event just before
     * it, an end event just after. */
    TN_CU(cuEventRecord(z, s));
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuEventRecord(a, s));
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuEventRecord(b, s));
    TN_CU(cuStreamSynchronize(s));
    float took = elapsed_ms(a, b);
    if (me == 1) {
        /* the delayed rank's stream is busy before the collective, ahead of its start
         * event: the start is late, the collective itself waits for no one */
        float start_late = elapsed_ms(z, a);
        TN_CHECK(start_late >= 400.0f, "rank 1: start event only %.2f ms late",
                 (double)start_late);
        /* bounds with room for a loaded machine's stalls: the delay is 400 ms */
        TN_CHECK(took < 300.0f, "rank 1: its own collective took %.2f ms", (double)took);
    } else {
        /* the peer arrives on time and waits inside the collective for rank 1 */
        TN_CHECK(took >= 400.0f && took < 5000.0f, "rank %d: collective took %.2f ms", me,
                 (double)took);
    }
    /* work that is not a collective is never delayed: the stream itself is on time */
    uint64_t t0 = tn_now_ns();
    TN_CU(cuEventRecord(c, s));
    TN_CU(cuEventSynchronize(c));
    TN_CHECK(tn_now_ns() - t0 < 300000000ull, "an event alone took %.1f ms",
             (double)(tn_now_ns() - t0) / 1e6);
    TN_CU(cuEventDestroy_v2(z));
    TN_CU(cuEventDestroy_v2(a));
    TN_CU(cuEventDestroy_v2(b));
    TN_CU(cuEventDestroy_v2(c));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void a_delayed_rank_makes_its_peers_collective_late(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_EMU_DELAY=1:400", NULL};
    assert_int_equal(tn_job(env, 2, delay_rank, NULL, 60), 0);
}

typedef struct model_job {
    size_t bytes;
    int ib_disabled;       /* the expectation must model the socket fallback too */
} model_job;

static double expected_ms(int n, int op, size_t bytes, int socket)
{
    cpemu_topo t = *cpemu_topo_get();
    if (socket)
        t.net_socket = 1;
    cpemu_place p[16];
    for (int r = 0; r < n; r++) {
        p[r].dev = r;
        p[r].host = cpemu_device_host(&t, r, t.ngpus);
    }
    return cpemu_model_ns(&t, op, bytes, p, n) / 1e6;
}

/* Ranks 0..n-2 measure; rank n-1 only keeps the gate. Every measuring rank queues a gate
 * collective on the whole job, then the measured chain on a communicator without the
 * gatekeeper, which calls the gate last: so all the chain is queued before any of it
 * starts, and it then runs at the model's pace, not at the pace its host enqueues (a host
 * slower than the model leaves a GPU idle, here as on real hardware). */
static int model_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    const model_job *j = arg;
    int keeper = me == n - 1, m = n - 1;
    CUstream s;
    ncclComm_t world, comm = NULL;
    /* The keeper is in the world comm only, never in the measured one: an emulated host of
     * its own keeps it off the measuring ranks' GPUs (NCCL refuses two ranks on one GPU). */
    if (keeper)
        setenv("COLLPROF_EMU_HOST_ID", "63", 1);
    if (setup_on(keeper ? 0 : me, me, n, id, &s, &world))
        return 1;
    TN_NCCL(ncclCommSplit(world, keeper ? NCCL_SPLIT_NOCOLOR : 0, me, &comm, NULL));
    size_t count = j->bytes / 4;
    float *buf = calloc(count, 4);
    int gate = 0;
    if (keeper) {
        tn_sleep_ms(100);
        TN_NCCL(ncclAllReduce(&gate, &gate, 1, ncclInt32, ncclSum, world, s));
        TN_CU(cuStreamSynchronize(s));
        free(buf);
        TN_NCCL(ncclCommDestroy(world));
        return 0;
    }
    /* NCHAIN collectives, of which the two fastest are held to the model: a machine loaded
     * past its cores can stall an emulated stream thread (5 ms once, beside two busy loops
     * and a sanitizer build), which makes one collective longer, never one shorter */
    enum { NCHAIN = 6 };
    CUevent ev[NCHAIN + 1];
    for (int i = 0; i <= NCHAIN; i++)
        TN_CU(cuEventCreate(&ev[i], 0));
    TN_NCCL(ncclAllReduce(&gate, &gate, 1, ncclInt32, ncclSum, world, s));
    TN_CU(cuEventRecord(ev[0], s));
    for (int i = 1; i <= NCHAIN; i++) {
        TN_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
        TN_CU(cuEventRecord(ev[i], s));
    }
    TN_CU(cuStreamSynchronize(s));
    double want = expected_ms(m, CPEMU_OP_ALLREDUCE, j->bytes, j->ib_disabled);
    double got[2] = {INFINITY, INFINITY};
    for (int i = 0; i < NCHAIN; i++) {
        double d = elapsed_ms(ev[i], ev[i + 1]);
        if (d < got[0]) {
            got[1] = got[0];
            got[0] = d;
        } else if (d < got[1]) {
            got[1] = d;
        }
    }
    if (me == 0)
        printf("  %s%s %d ranks, %zu MiB all-reduce: fastest two of %d %.3f and %.3f ms, model %.3f ms\n",
               getenv("COLLPROF_EMU_TOPO") ? getenv("COLLPROF_EMU_TOPO") : "h100-nvlink-8",
               getenv("COLLPROF_EMU_SLOW_LINK") ? " slow-link"
               : getenv("COLLPROF_EMU_NET") ? " 2 hosts, socket"
               : getenv("NCCL_IB_DISABLE") ? " 2 hosts, NCCL_IB_DISABLE"
               : getenv("COLLPROF_EMU_HOSTS") ? " 2 hosts, IB" : "", m,
               j->bytes >> 20, NCHAIN, got[0], got[1], want);
    fflush(stdout);   /* ranks end with _exit */
    for (int i = 0; i < 2; i++)
        TN_CHECK(fabs(got[i] / want - 1.0) <= 0.15, "measured %.3f ms, model %.3f ms", got[i],
                 want);
    /* the simulated group gives the same model, in microseconds, and runs nothing */
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
    TN_NCCL(ncclGroupSimulateEnd(&sim));
    TN_CHECK(fabs(sim.estimatedTime / (want * 1e3) - 1.0) < 1e-3, "estimate %g us",
             (double)sim.estimatedTime);
    TN_CHECK(cuStreamQuery(s) == CUDA_SUCCESS, "the simulated group ran");
    for (int i = 0; i <= NCHAIN; i++)
        TN_CU(cuEventDestroy_v2(ev[i]));
    free(buf);
    TN_NCCL(ncclCommDestroy(comm));
    TN_NCCL(ncclCommDestroy(world));
    return 0;
}

static void durations_follow_the_model_on_every_preset(void **state)
{
    (void)state;
    model_job j = {8u << 20, 0};
    const char *h100[] = {"COLLPROF_EMU_TOPO=h100-nvlink-8", NULL};
    const char *a100[] = {"COLLPROF_EMU_TOPO=a100-nvlink-4", NULL};
    const char *pcie[] = {"COLLPROF_EMU_TOPO=pcie-4", NULL};
    assert_int_equal(tn_job(h100, 9, model_rank, &j, 60), 0);
    assert_int_equal(tn_job(a100, 5, model_rank, &j, 60), 0);
    assert_int_equal(tn_job(pcie, 5, model_rank, &j, 60), 0);
}

static void a_slow_link_and_the_socket_fallback_slow_collectives_down(void **state)
{
    (void)state;
    model_job j = {8u << 20, 0};
    const char *slow[] = {"COLLPROF_EMU_SLOW_LINK=2-3:0.25", NULL};
    const char *sock[] = {"COLLPROF_EMU_HOSTS=2", "COLLPROF_EMU_NET=socket", NULL};
    const char *ib[] = {"COLLPROF_EMU_HOSTS=2", NULL};
    const char *noib[] = {"COLLPROF_EMU_HOSTS=2", "NCCL_IB_DISABLE=1", NULL};
    assert_int_equal(tn_job(slow, 9, model_rank, &j, 60), 0);
    assert_int_equal(tn_job(ib, 9, model_rank, &j, 60), 0);
    assert_int_equal(tn_job(sock, 9, model_rank, &j, 60), 0);
    model_job noib_job = {8u << 20, 1};
    assert_int_equal(tn_job(noib, 9, model_rank, &noib_job, 60), 0);
    /* and the factors themselves: a quarter of the bandwidth on one hop bounds the ring */
    setenv("COLLPROF_EMU_SLOW_LINK", "2-3:0.25", 1);
    double bw_slow = 0, bw_fast = 0;
    {
        cpemu_topo t;
        char err[128];
        cpemu_topo_load(&t, err, sizeof err);
        cpemu_place p[8];
        for (int r = 0; r < 8; r++)
            p[r] = (cpemu_place){0, r};
        bw_slow = cpemu_model_ns(&t, CPEMU_OP_ALLREDUCE, 1ull << 32, p, 8);
        unsetenv("COLLPROF_EMU_SLOW_LINK");
        cpemu_topo_load(&t, err, sizeof err);
        bw_fast = cpemu_model_ns(&t, CPEMU_OP_ALLREDUCE, 1ull << 32, p, 8);
    }
    assert_true(fabs(bw_slow / bw_fast - 4.0) < 0.05);
}

static int hang_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    ncclComm_t comm;
    if (setup(me, n, id, &s, &comm))
        return 1;
    int v = 1, sum = 0;
    CUevent ev;
    TN_CU(cuEventCreate(&ev, 0));
    for (int k = 0; k < 2; k++)
        TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(sum == n, "sum %d", sum);
    /* collective #2: rank 1 never enters it */
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuEventRecord(ev, s));
    tn_sleep_ms(300);
    TN_CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY, "rank %d: the hung collective ended", me);
    ncclResult_t async;
    TN_NCCL(ncclCommGetAsyncError(comm, &async));
    TN_CHECK(async == ncclSuccess, "async %d", async);
    uint64_t t0 = tn_now_ns();
    TN_NCCL(ncclCommAbort(comm));
    TN_CU(cuEventSynchronize(ev));
    /* a ceiling, not a speed: a hung collective the abort did not end is the fault */
    TN_CHECK(tn_now_ns() - t0 < 10000000000ull, "abort took %.0f ms",
             (double)(tn_now_ns() - t0) / 1e6);
    TN_CU(cuEventDestroy_v2(ev));
    return 0;
}

static void abort_releases_a_collective_stuck_on_a_hung_peer(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_EMU_HANG=1:2", NULL};
    assert_int_equal(tn_job(env, 2, hang_rank, NULL, 60), 0);
    assert_int_equal(tn_job(env, 3, hang_rank, NULL, 60), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calls_return_at_once_and_events_wait_for_peers),
        cmocka_unit_test(a_delayed_rank_makes_its_peers_collective_late),
        cmocka_unit_test(durations_follow_the_model_on_every_preset),
        cmocka_unit_test(a_slow_link_and_the_socket_fallback_slow_collectives_down),
        cmocka_unit_test(abort_releases_a_collective_stuck_on_a_hung_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
