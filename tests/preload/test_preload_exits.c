/* Every way out of a process leaves a readable trace: return from main, exit(), _exit(),
 * SIGTERM, abort() (as PyTorch's NCCL watchdog ends a job), SIGKILL from outside, and exec.
 * Each case runs shim_job with and without the shim: the exit status must not change.
 *
 * Paths that run our code (return, exit, the signals we catch, exec) must hold every CALL;
 * _exit and SIGKILL run none of it, so what the last flush wrote is all that can be asked.
 * A collective that never completes (its CALL still on disk) is emulated-hang territory:
 * test_preload_gpu.c's SIGKILL-during-hang case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "shim_test_util.h"

enum { N_BEFORE = 10, M_AFTER = 7 };

static char *g_tmp;
static char g_dir[4200], g_dir_env[4300], g_pidfile[4300];
static job_result g_bare, g_shim;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/t", g_tmp);
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", g_dir);
    snprintf(g_pidfile, sizeof g_pidfile, "%s/pid", g_tmp);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* SIGKILL from outside: the job writes its pid once its calls are made, then waits. */
static void *killer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) { /* 20 s */
        FILE *f = fopen(g_pidfile, "r");
        int pid = 0;
        if (f) {
            int got = fscanf(f, "%d", &pid);
            fclose(f);
            if (got == 1 && pid > 0) {
                unlink(g_pidfile);
                kill(pid, SIGKILL);
                return NULL;
            }
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return NULL;
}

static void run_both(const char *how)
{
    char n[16], m[16];
    snprintf(n, sizeof n, "%d", N_BEFORE);
    snprintf(m, sizeof m, "%d", M_AFTER);
    /* Flushes at 100, 200, 300 ms; the sleep ends between two, so the N calls are on disk
     * and the M after it are only there if the way out wrote them. */
    const char *env[] = {g_dir_env, "COLLPROF_FLUSH_MS=100", NULL};
    const char *argv[] = {"exits", n, "350", m, how, g_pidfile, NULL};
    int kill_it = !strcmp(how, "kill");
    for (int with_shim = 0; with_shim < 2; with_shim++) {
        pthread_t t;
        if (kill_it)
            assert_int_equal(pthread_create(&t, NULL, killer, NULL), 0);
        st_run(with_shim ? &g_shim : &g_bare, with_shim, with_shim ? env : NULL, argv);
        if (kill_it)
            pthread_join(t, NULL);
    }
    if (g_shim.status != g_bare.status)
        fprintf(stderr, "%s: status %#x without the shim, %#x with it:\n%s\n%s\n", how,
                g_bare.status, g_shim.status, g_bare.err, g_shim.err);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
}

/* The one trace, walked; `cut_allowed` where the process could not finish a write. */
static void read_trace(trace_seen *t, int cut_allowed)
{
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 1);
    assert_int_equal(st_read_trace(paths[0], t), 0);
    cp_trace_dir_free(paths, n);
    assert_int_equal(t->walk.corrupt_chunks, 0);
    assert_int_equal(t->walk.missing_chunks, 0);
    if (!cut_allowed)
        assert_int_equal(t->walk.stop, CP_WALK_END);
    else
        assert_true(t->walk.stop == CP_WALK_END || t->walk.stop == CP_WALK_TRUNCATED);
}

/* The init, then AllReduces with seq 0, 1, ...: `at_least` of them, and no hole. */
static void assert_calls(const trace_seen *t, size_t at_least, size_t at_most)
{
    assert_true(t->ncalls >= 1 + at_least);
    assert_true(t->ncalls <= 1 + at_most);
    assert_int_equal(t->calls[0].op, CP_OP_COMM_INIT);
    for (size_t i = 1; i < t->ncalls; i++) {
        assert_int_equal(t->calls[i].op, CP_OP_ALLREDUCE);
        assert_int_equal(t->calls[i].seq, i - 1);
    }
}

static void every_call_and_end(const char *how, int end_signal)
{
    run_both(how);
    trace_seen t;
    read_trace(&t, 0);
    assert_calls(&t, N_BEFORE + M_AFTER, N_BEFORE + M_AFTER);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, end_signal);
    /* atexit is not told the status: documented in lifecycle.c */
    assert_int_equal(t.end.exit_code, -1);
    st_free_trace(&t);
}

static void return_from_main(void **state)
{
    (void)state;
    every_call_and_end("return", 0);
    assert_true(WIFEXITED(g_shim.status) && WEXITSTATUS(g_shim.status) == 0);
}

static void exit_3(void **state)
{
    (void)state;
    every_call_and_end("exit", 0);
    assert_true(WIFEXITED(g_shim.status) && WEXITSTATUS(g_shim.status) == 3);
}

static void sigterm_default(void **state)
{
    (void)state;
    every_call_and_end("sigterm", SIGTERM);
    assert_true(WIFSIGNALED(g_shim.status) && WTERMSIG(g_shim.status) == SIGTERM);
}

static void abort_like_a_watchdog(void **state)
{
    (void)state;
    every_call_and_end("abort", SIGABRT);
    assert_true(WIFSIGNALED(g_shim.status) && WTERMSIG(g_shim.status) == SIGABRT);
}

static void up_to_the_last_flush(const char *how)
{
    run_both(how);
    trace_seen t;
    read_trace(&t, 1);
    assert_calls(&t, N_BEFORE, N_BEFORE + M_AFTER);
    assert_int_equal(t.nend, 0);
    st_free_trace(&t);
}

static void underscore_exit_4(void **state)
{
    (void)state;
    up_to_the_last_flush("_exit");
    assert_true(WIFEXITED(g_shim.status) && WEXITSTATUS(g_shim.status) == 4);
}

static void sigkill_from_outside(void **state)
{
    (void)state;
    up_to_the_last_flush("kill");
    assert_true(WIFSIGNALED(g_shim.status) && WTERMSIG(g_shim.status) == SIGKILL);
}

/* A flush period far longer than the run: only the exec path can have written. */
#define CP_NO_FLUSH "COLLPROF_FLUSH_MS=600000"

static void exec_keeps_every_call(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, CP_NO_FLUSH, NULL};
    const char *argv[] = {"exec", "12", "/bin/true", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
    trace_seen t;
    read_trace(&t, 0);
    assert_calls(&t, 12, 12);
    assert_int_equal(t.nend, 0); /* the pid lives on as /bin/true */
    st_free_trace(&t);
}

static void a_failed_exec_keeps_errno_and_tracing(void **state)
{
    (void)state;
    char missing[4400];
    snprintf(missing, sizeof missing, "%s/no-such-program", g_tmp);
    const char *env[] = {g_dir_env, CP_NO_FLUSH, NULL};
    const char *argv[] = {"exec", "12", missing, NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    assert_int_equal(g_shim.status, g_bare.status);
    char want[64];
    snprintf(want, sizeof want, "execv failed: errno %d\n", ENOENT);
    assert_string_equal(g_bare.out, want);
    assert_string_equal(g_shim.out, g_bare.out);
    trace_seen t;
    read_trace(&t, 0);
    /* init, 12 + 2 AllReduces, destroy: the records after the failed exec too */
    assert_int_equal(t.ncalls, 16);
    assert_int_equal(t.calls[14].seq, 13);
    assert_int_equal(t.calls[15].op, CP_OP_COMM_DESTROY);
    assert_int_equal(t.nend, 1);
    st_free_trace(&t);
}

/* exec keeps the pid that names the live stats block: the new program must not show in `top`
 * as this one (the block is unlinked before the exec), and a failed exec keeps its block. */
static void exec_takes_the_live_block_away_unless_it_fails(void **state)
{
    (void)state;
    char live[4300], live_env[4400], script[4400], missing[4400];
    snprintf(live, sizeof live, "%s/live", g_tmp);
    snprintf(live_env, sizeof live_env, "COLLPROF_LIVE_DIR=%s", live);
    assert_int_equal(mkdir(live, 0700), 0);
    /* the new image lists the live blocks it can see */
    snprintf(script, sizeof script, "%s/list.sh", g_tmp);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho \"blocks: $(ls -A '%s' | wc -l)\"\n", live);
    fclose(f);
    assert_int_equal(chmod(script, 0755), 0);
    const char *env[] = {g_dir_env, live_env, NULL};
    const char *argv[] = {"exec", "3", script, NULL};
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    assert_string_equal(g_shim.out, "blocks: 0\n");

    snprintf(missing, sizeof missing, "%s/no-such-program", g_tmp);
    const char *failing[] = {"exec", "3", missing, NULL};
    st_run(&g_shim, 1, env, failing);
    assert_int_equal(g_shim.status, 0);
    if (!strstr(g_shim.err, "live blocks after the failed exec: 1\n"))
        fprintf(stderr, "%s", g_shim.err);
    assert_non_null(strstr(g_shim.err, "live blocks after the failed exec: 1\n"));
}

int main(void)
{
    /* abort() would dump core, run after run */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(return_from_main, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_takes_the_live_block_away_unless_it_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exit_3, setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm_default, setup, teardown),
        cmocka_unit_test_setup_teardown(abort_like_a_watchdog, setup, teardown),
        cmocka_unit_test_setup_teardown(underscore_exit_4, setup, teardown),
        cmocka_unit_test_setup_teardown(sigkill_from_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_keeps_every_call, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_exec_keeps_errno_and_tracing, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
