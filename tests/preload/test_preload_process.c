/* The trace survives the ways a process ends, and fork gives the child a trace of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>

#include "shim_test_util.h"

static char *g_tmp;
static char g_dir[4200], g_dir_env[4300];
static job_result g_bare, g_shim;

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

static size_t count_op(const trace_seen *t, unsigned op)
{
    size_t n = 0;
    for (size_t i = 0; i < t->ncalls; i++)
        n += t->calls[i].op == op;
    return n;
}

static void read_only_trace(trace_seen *t)
{
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 1);
    assert_int_equal(st_read_trace(paths[0], t), 0);
    cp_trace_dir_free(paths, n);
}

static void sigkill_after_a_flush_leaves_every_call_before_it(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_FLUSH_MS=20", NULL};
    const char *argv[] = {"kill", "300", NULL};
    st_run(&g_shim, 1, env, argv);
    assert_true(WIFSIGNALED(g_shim.status));
    assert_int_equal(WTERMSIG(g_shim.status), SIGKILL);
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(t.nend, 0);
    assert_int_equal(t.ncalls, 11);
    assert_int_equal(t.calls[10].op, CP_OP_ALLREDUCE);
    assert_int_equal(t.calls[10].seq, 9);
    st_free_trace(&t);
}

static void sigterm_flushes_writes_end_and_still_kills(void **state)
{
    (void)state;
    /* a flush period far longer than the run: only the signal path can have written */
    const char *env[] = {g_dir_env, "COLLPROF_FLUSH_MS=600000", NULL};
    const char *argv[] = {"sigterm", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_true(WIFSIGNALED(g_shim.status));
    assert_int_equal(WTERMSIG(g_shim.status), SIGTERM);
    assert_string_equal(g_shim.out, g_bare.out);
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(count_op(&t, CP_OP_ALLREDUCE), 10);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, SIGTERM);
    st_free_trace(&t);
}

static void a_job_handler_still_gets_sigterm_and_the_job_goes_on(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *argv[] = {"sigterm-handled", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_non_null(strstr(g_shim.out, "handled SIGTERM"));
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, 0);
    st_free_trace(&t);
}

/* The job's handler is called as the kernel would call it: with its own sa_mask blocked, and
 * once only when it asked for SA_RESETHAND (the second SIGTERM then kills). */
static void a_job_handler_keeps_its_mask_and_resethand(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *argv[] = {"sigterm-once", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_true(WIFSIGNALED(g_bare.status));
    assert_int_equal(WTERMSIG(g_bare.status), SIGTERM);
    assert_non_null(strstr(g_bare.out, "handled SIGTERM once, SIGUSR1 blocked\n"));
    assert_null(strstr(g_bare.out, "after the second"));
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, SIGTERM);
    st_free_trace(&t);
}

/* What NCCL leaves in errno is what the job reads, and what the job set is what NCCL sees,
 * the first recorded call (which opens the trace) included. */
static void errno_passes_through_every_recorded_call(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *argv[] = {"errno", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_bare.status, 0);
    assert_non_null(strstr(g_bare.out, "allreduce echo: errno 1235\n"));
    assert_non_null(strstr(g_bare.out, "send echo: errno 1235\n"));
    assert_non_null(strstr(g_bare.out, "allreduce system error: errno 71\n"));
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
}

/* A fork while the parent's collectives run on the GPU, their GPU timings pending in the
 * shim: the child's file holds the child's calls only, never a DONE of the parent's (the
 * child used to poll the parent's pending events and write their DONEs as its own). */
static void a_fork_child_gets_none_of_the_parents_pending_gpu_timings(void **state)
{
    (void)state;
    char client[4300];
    snprintf(client, sizeof client, "%s/nccl_clients/libnccl_client.so", st_build_dir());
    if (!st_exists(client))
        skip(); /* built with the emulation only */
    const char *env[] = {g_dir_env, "COLLPROF_EMU_DELAY=1:400", "COLLPROF_FLUSH_MS=50", NULL};
    const char *argv[] = {"local", client, "fork", "0", "f", NULL};
    st_run_prog(&g_shim, "nccl_loader", 1, env, argv);
    if (g_shim.status != 0)
        fprintf(stderr, "%s%s", g_shim.out, g_shim.err);
    assert_int_equal(g_shim.status, 0);
    assert_non_null(strstr(g_shim.out, "f: child exited 0\n"));
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 2);
    int children = 0;
    for (int i = 0; i < n; i++) {
        trace_seen t;
        assert_int_equal(st_read_trace(paths[i], &t), 0);
        if (t.ncomms == 0) { /* the child: its group call, nothing of the parent's */
            children++;
            assert_int_equal(t.ncalls, 2);
            assert_int_equal(t.ndones, 0);
        } else {
            assert_int_equal(t.ndones, 2); /* the parent's two AllReduces */
        }
        st_free_trace(&t);
    }
    assert_int_equal(children, 1);
    cp_trace_dir_free(paths, n);
}

static void fork_children_trace_only_what_they_call(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *with[] = {"fork-nccl", NULL}, *without[] = {"fork-plain", NULL};

    st_run(&g_shim, 1, env, without);
    assert_int_equal(g_shim.status, 0);
    trace_seen t;
    read_only_trace(&t);
    assert_int_equal(t.ncalls, 9); /* init, 3 + 4 AllReduce, destroy */
    assert_int_equal(t.calls[7].seq, 6);
    st_free_trace(&t);
    st_rmtree(g_dir);

    st_run(&g_shim, 1, env, with);
    assert_int_equal(g_shim.status, 0);
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 2);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(st_read_trace(paths[i], &t), 0);
        assert_int_equal(t.nend, 1);
        if (t.ncalls == 4) { /* the child: its own comm, seqs from 0 */
            assert_int_equal(t.ncomms, 1);
            assert_int_equal(t.comms[0].rank, 1);
            assert_int_equal(t.calls[2].seq, 1);
        } else {
            assert_int_equal(t.ncalls, 9);
        }
        total += t.ncalls;
        st_free_trace(&t);
    }
    assert_int_equal(total, 13);
    cp_trace_dir_free(paths, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sigkill_after_a_flush_leaves_every_call_before_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm_flushes_writes_end_and_still_kills, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_job_handler_still_gets_sigterm_and_the_job_goes_on,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_job_handler_keeps_its_mask_and_resethand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(errno_passes_through_every_recorded_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_fork_child_gets_none_of_the_parents_pending_gpu_timings,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fork_children_trace_only_what_they_call, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
