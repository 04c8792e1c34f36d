/* The shim records every NCCL call of an unmodified job once, with the right fields, and
 * the job sees exactly what NCCL returns. shim_job runs under LD_PRELOAD=libcollprof.so
 * against the stub libnccl.so.2 (stub_nccl.c says which inputs fail on purpose). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "abi/nccl_abi.h"
#include "trace/trace_hash.h"
#include "shim_test_util.h"

#define NONE UINT64_MAX
#define NOCOMM UINT32_MAX

static char *g_tmp;
static char g_dir[4200];
static job_result g_bare, g_shim;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    snprintf(g_dir, sizeof g_dir, "COLLPROF_DIR=%s/t", g_tmp);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* Runs `argv` bare and under the shim with env; checks both agree; reads the one trace. */
static void run_both(const char *const *env, const char *const *argv, trace_seen *t)
{
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    char **paths;
    int n = st_list(g_dir + strlen("COLLPROF_DIR="), &paths);
    assert_int_equal(n, 1);
    assert_int_equal(st_read_trace(paths[0], t), 0);
    cp_trace_dir_free(paths, n);
}

struct want {
    uint8_t op, dtype, redop, flags;
    uint32_t comm;
    uint64_t seq, count;
    int32_t peer;
    int8_t result;
    uint8_t gd;
};

#define F32 7
#define NO_DT 255
#define NO_OP 255
#define IP CP_CALL_IN_PLACE
#define IG CP_CALL_IN_GROUP

static const struct want basic_calls[] = {
    {CP_OP_COMM_INIT, NO_DT, NO_OP, 0, 0, NONE, 0, -1, 0, 0},
    {CP_OP_ALLREDUCE, F32, 0, IP, 0, 0, 16, -1, 0, 0},
    {CP_OP_ALLREDUCE, F32, 2, 0, 0, 1, 16, -1, 0, 0},
    {CP_OP_BROADCAST, 2, NO_OP, 0, 0, 2, 8, 2, 0, 0},
    {CP_OP_BROADCAST, 2, NO_OP, IP, 0, 3, 8, 3, 0, 0}, /* ncclBcast: once, not twice */
    {CP_OP_REDUCE, 8, 1, 0, 0, 4, 8, 0, 0, 0},
    {CP_OP_ALLGATHER, F32, NO_OP, IP, 0, 5, 4, -1, 0, 0},
    {CP_OP_REDUCESCATTER, F32, 4, IP, 0, 6, 4, -1, 0, 0},
    {CP_OP_ALLTOALL, 1, NO_OP, 0, 0, 7, 4, -1, 0, 0},
    {CP_OP_GATHER, 9, NO_OP, 0, 0, 8, 4, 1, 0, 0},
    {CP_OP_SCATTER, 0, NO_OP, 0, 0, 9, 4, 1, 0, 0},
    {CP_OP_GROUP_START, NO_DT, NO_OP, 0, NOCOMM, NONE, 0, -1, 0, 0},
    {CP_OP_SEND, F32, NO_OP, IG, 0, 0, 5, 2, 0, 1},
    {CP_OP_RECV, F32, NO_OP, IG, 0, 0, 5, 3, 0, 1},
    {CP_OP_SEND, F32, NO_OP, IG, 0, 1, 6, 2, 0, 1},
    {CP_OP_GROUP_END, NO_DT, NO_OP, IG, NOCOMM, NONE, 0, -1, 0, 1},
    {CP_OP_ALLREDUCE, F32, CP_REDOP_DYNAMIC, IP, 0, 10, 3, -1, 0, 0},
    {CP_OP_ALLREDUCE, F32, 0, 0, 0, NONE, 777, -1, 2, 0},   /* refused: no seq */
    {CP_OP_ALLREDUCE, NO_DT, 0, 0, 0, NONE, 1, -1, 4, 0},
    {CP_OP_SEND, F32, NO_OP, 0, 0, NONE, 1, 9, 4, 0},
    {CP_OP_ALLREDUCE, F32, 0, 0, NOCOMM, NONE, 1, -1, 4, 0},
    {CP_OP_GROUP_END, NO_DT, NO_OP, 0, NOCOMM, NONE, 0, -1, 5, 0},
    {CP_OP_COMM_SPLIT, NO_DT, NO_OP, 0, 0, 0, 0, -1, 0, 0},
    {CP_OP_COMM_SPLIT, NO_DT, NO_OP, 0, 0, 1, 0, -1, 0, 0},
    {CP_OP_COMM_SHRINK, NO_DT, NO_OP, 0, 0, 2, 0, -1, 0, 0},
    {CP_OP_ALLREDUCE, F32, 0, IP, 1, 0, 2, -1, 0, 0},
    {CP_OP_COMM_INIT, NO_DT, NO_OP, 0, 3, NONE, 2, -1, 0, 0},
    {CP_OP_ALLREDUCE, F32, 0, IP, 4, 0, 2, -1, 0, 0},
    {CP_OP_COMM_FINALIZE, NO_DT, NO_OP, 0, 0, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_REVOKE, NO_DT, NO_OP, 0, 0, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_DESTROY, NO_DT, NO_OP, 0, 1, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_DESTROY, NO_DT, NO_OP, 0, 2, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_DESTROY, NO_DT, NO_OP, 0, 3, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_ABORT, NO_DT, NO_OP, 0, 4, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_DESTROY, NO_DT, NO_OP, 0, 0, NONE, 0, -1, 0, 0},
    {CP_OP_COMM_DESTROY, NO_DT, NO_OP, 0, NOCOMM, NONE, 0, -1, 4, 0},
};

static void every_call_recorded_once_with_its_fields(void **state)
{
    (void)state;
    const char *env[] = {g_dir, "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", NULL};
    const char *argv[] = {"basic", NULL};
    trace_seen t;
    run_both(env, argv, &t);
    assert_string_equal(g_shim.err, "");
    assert_int_equal(t.walk.stop, CP_WALK_END);
    assert_int_equal(t.walk.lost_records, 0);

    assert_int_equal(t.header.rank, 3);
    assert_int_equal(t.header.local_rank, 1);
    assert_int_equal(t.header.world_size, 4);
    assert_string_equal(t.header.launcher, "torchrun");
    assert_int_equal(t.header.nccl_version, 22809);

    size_t want_n = sizeof basic_calls / sizeof basic_calls[0];
    assert_int_equal(t.ncalls, want_n);
    uint64_t prev_enter = 0;
    for (size_t i = 0; i < want_n; i++) {
        const struct want *w = &basic_calls[i];
        const cp_rec_call *c = &t.calls[i];
        print_message("call %zu: %s\n", i, cp_op_name(c->op));
        assert_int_equal(c->op, w->op);
        assert_int_equal(c->dtype, w->dtype);
        assert_int_equal(c->redop, w->redop);
        assert_int_equal(c->flags, w->flags);
        assert_int_equal(c->comm_index, w->comm);
        assert_int_equal(c->seq, w->seq);
        assert_int_equal(c->count, w->count);
        assert_int_equal(c->peer, w->peer);
        assert_int_equal(c->result, w->result);
        assert_int_equal(c->group_depth, w->gd);
        /* comm life is not keyed by site; every other call is, one site per line of basic() */
        if (c->op >= CP_OP_COMM_INIT)
            assert_int_equal(c->site_index, UINT32_MAX);
        else
            assert_int_not_equal(c->site_index, UINT32_MAX);
        assert_int_equal(c->thread, 0);
        assert_int_equal(c->host_hi, 0); /* short calls: ring_call.h never reaches the file */
        if (c->comm_index != NOCOMM && cp_op_is_collective(c->op))
            assert_int_equal(c->stream, 0x5000);
        assert_true(c->enter_ns >= prev_enter);
        assert_true(c->host_ns < 1000000000u);
        prev_enter = c->enter_ns;
    }

    /* c, split, shrink, InitAll x2; NOCOLOR made none */
    assert_int_equal(t.ncomms, 5);
    ncclUniqueId id;
    memset(&id, 7, sizeof id);
    const cp_rec_comm *cm = t.comms;
    assert_int_equal(cm[0].comm_index, 0);
    assert_int_equal(cm[0].comm_id, cp_trace_hash(&id, sizeof id));
    assert_int_equal(cm[0].nranks, 4);
    assert_int_equal(cm[0].rank, 1);
    assert_int_equal(cm[0].origin, CP_COMM_INIT_RANK);
    assert_int_equal(cm[1].parent_id, cm[0].comm_id);
    assert_int_equal(cm[1].color, 5);
    assert_int_equal(cm[1].key, 1);
    assert_int_equal(cm[1].origin, CP_COMM_SPLIT);
    assert_int_equal(cm[2].origin, CP_COMM_SHRINK);
    assert_int_equal(cm[2].nranks, 3);
    assert_int_not_equal(cm[2].comm_id, cm[1].comm_id);
    assert_int_equal(cm[3].origin, CP_COMM_INIT_ALL);
    assert_int_equal(cm[3].comm_id, cm[4].comm_id);
    assert_int_equal(cm[3].rank, 0);
    assert_int_equal(cm[4].rank, 1);
    assert_int_equal(cm[4].nranks, 2);

    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, 0);
    assert_int_equal(t.nprocess, 0); /* the launcher env gave the rank */
    st_free_trace(&t);
}

/* Two processes of one job derive the same ids for the same communicators. */
static void comm_ids_agree_across_processes(void **state)
{
    (void)state;
    const char *argv[] = {"basic", NULL};
    uint64_t ids[2][3];
    for (int run = 0; run < 2; run++) {
        char env_dir[4300];
        snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s/ids%d", g_tmp, run);
        const char *env[] = {env_dir, NULL};
        st_run(&g_shim, 1, env, argv);
        char **paths;
        int n = st_list(env_dir + strlen("COLLPROF_DIR="), &paths);
        assert_int_equal(n, 1);
        assert_non_null(strstr(paths[0], "/norank-"));
        trace_seen t;
        assert_int_equal(st_read_trace(paths[0], &t), 0);
        cp_trace_dir_free(paths, n);
        assert_int_equal(t.ncomms, 5);
        for (int k = 0; k < 3; k++)
            ids[run][k] = t.comms[k].comm_id;
        /* no launcher env: the first comm tells the rank */
        assert_int_equal(t.header.rank, -1);
        assert_int_equal(t.nprocess, 1);
        assert_int_equal(t.process.rank, 1);
        assert_int_equal(t.process.world_size, 4);
        st_free_trace(&t);
    }
    for (int k = 0; k < 3; k++)
        assert_int_equal(ids[0][k], ids[1][k]);
}

static void nonblocking_comm_learns_its_rank_later(void **state)
{
    (void)state;
    const char *env[] = {g_dir, NULL};
    const char *argv[] = {"nonblocking", NULL};
    trace_seen t;
    run_both(env, argv, &t);
    assert_int_equal(t.ncomms, 1);
    assert_int_equal(t.comms[0].nranks, 8);
    assert_int_equal(t.comms[0].rank, 5);
    assert_int_equal(t.ncalls, 3);
    assert_int_equal(t.calls[0].result, ncclInProgress);
    assert_int_equal(t.calls[1].op, CP_OP_ALLREDUCE);
    assert_int_equal(t.calls[1].seq, 0);
    st_free_trace(&t);
}

/* A job whose first recorded call is a blocking init (one rank, no launcher: collprof-sim,
 * all_reduce_perf) learns its rank from that comm before the trace exists; the PROCESS record
 * must still be written (it was dropped, and the report showed rank -1). */
static void a_first_call_that_makes_a_comm_still_tells_the_rank(void **state)
{
    (void)state;
    const char *env[] = {g_dir, NULL};
    const char *argv[] = {"burst", "3", NULL};
    trace_seen t;
    run_both(env, argv, &t);
    assert_int_equal(t.header.rank, -1);
    assert_int_equal(t.calls[0].op, CP_OP_COMM_INIT);
    assert_int_equal(t.nprocess, 1);
    assert_int_equal(t.process.rank, 0);
    assert_int_equal(t.process.world_size, 1);
    st_free_trace(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_call_recorded_once_with_its_fields, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(comm_ids_agree_across_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(nonblocking_comm_learns_its_rank_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_first_call_that_makes_a_comm_still_tells_the_rank,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
