/* Many threads and comms lose nothing with room enough; a ring too small loses records,
 * counts every one of them, and never blocks the job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <time.h>

#include "shim_test_util.h"

static char *g_tmp;
static char g_dir[4200], g_dir_env[4300];
static job_result g_shim;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/t", g_tmp);
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void read_only_trace(trace_seen *t)
{
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 1);
    assert_int_equal(st_read_trace(paths[0], t), 0);
    cp_trace_dir_free(paths, n);
}

#define THREADS 32
#define COMMS 32
#define CALLS 40

static void threads_times_comms_lose_nothing_and_seqs_are_dense(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_BUFFER_MB=512", NULL};
    const char *argv[] = {"threads", "32", "32", "40", NULL};
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(t.walk.lost_records, 0);
    assert_int_equal(t.ncomms, COMMS);
    static unsigned char seen[COMMS][THREADS * CALLS];
    memset(seen, 0, sizeof seen);
    size_t allreduce = 0;
    unsigned threads_seen[65536 / 8] = {0};
    for (size_t i = 0; i < t.ncalls; i++) {
        const cp_rec_call *c = &t.calls[i];
        if (c->op != CP_OP_ALLREDUCE)
            continue;
        allreduce++;
        assert_true(c->comm_index < COMMS);
        assert_true(c->seq < THREADS * CALLS);
        assert_int_equal(seen[c->comm_index][c->seq], 0);
        seen[c->comm_index][c->seq] = 1;
        threads_seen[c->thread / 32] |= 1u << (c->thread % 32);
    }
    assert_int_equal(allreduce, THREADS * COMMS * CALLS);
    int nthreads = 0;
    for (size_t i = 0; i < sizeof threads_seen / sizeof threads_seen[0]; i++)
        nthreads += __builtin_popcount(threads_seen[i]);
    assert_int_equal(nthreads, THREADS);
    st_free_trace(&t);
}

static void a_tiny_buffer_counts_lost_records_and_never_blocks(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_BUFFER_MB=1", "COLLPROF_FLUSH_MS=1000", NULL};
    const char *argv[] = {"burst", "400000", NULL};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    st_run(&g_shim, 1, env, argv);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_int_equal(g_shim.status, 0);
    assert_true(b.tv_sec - a.tv_sec < 20);
    trace_seen t;
    read_only_trace(&t);
    assert_true(t.walk.lost_records > 0);
    /* 400000 AllReduce + init + destroy, every one either written or counted */
    assert_int_equal(t.ncalls + t.walk.lost_records, 400002);
    st_free_trace(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(threads_times_comms_lose_nothing_and_seqs_are_dense,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_tiny_buffer_counts_lost_records_and_never_blocks,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
