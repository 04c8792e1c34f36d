/* Every way out of a process leaves a readable trace: return from main, exit(), _exit(),
 * SIGTERM, abort() (as PyTorch's NCCL watchdog ends a job), every other signal whose default
 * action ends a process (sent, or the fault itself, on the main thread or another; under
 * Python's faulthandler too), SIGKILL from outside, and exec.
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

#include <dirent.h>
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


/* The live blocks left in dir (not counting . and ..). */
static int live_blocks(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

enum { N_DIE = 100 };

/* shim_job dies by `sig` the way `how` says after N_DIE calls, without the shim and with it:
 * the same status (signal, core flag) and stdout; the trace holds the init and every call,
 * then END with the signal; the live block is gone. */
static void dies_as_it_would(int sig, const char *how)
{
    char n[16], signo[16], live[4300], live_env[4400];
    snprintf(n, sizeof n, "%d", N_DIE);
    snprintf(signo, sizeof signo, "%d", sig);
    snprintf(live, sizeof live, "%s/live-%d-%s", g_tmp, sig, how);
    snprintf(live_env, sizeof live_env, "COLLPROF_LIVE_DIR=%s", live);
    assert_int_equal(mkdir(live, 0700), 0);
    st_rmtree(g_dir);
    /* far longer than the run: only the signal's flush can write the calls */
    const char *env[] = {g_dir_env, live_env, "COLLPROF_FLUSH_MS=600000", NULL};
    const char *argv[] = {"die", n, signo, how, NULL};
    st_run(&g_bare, 0, env, argv);
    st_run(&g_shim, 1, env, argv);
    if (g_shim.status != g_bare.status || strcmp(g_shim.out, g_bare.out))
        fail_msg("signal %d by %s: status %#x without the shim, %#x with it\n%s%s", sig, how,
                 g_bare.status, g_shim.status, g_shim.out, g_shim.err);
    assert_true(WIFSIGNALED(g_shim.status) && WTERMSIG(g_shim.status) == sig);
    assert_string_equal(g_shim.out, "dying\n");
    trace_seen t;
    read_trace(&t, 0);
    if (t.ncalls != 1 + N_DIE || t.nend != 1 || t.end.signal != sig)
        fail_msg("signal %d by %s: %zu calls, %d END (signal %d)\n%s", sig, how, t.ncalls,
                 t.nend, t.end.signal, g_shim.err);
    assert_calls(&t, N_DIE, N_DIE);
    st_free_trace(&t);
    assert_int_equal(live_blocks(live), 0);
}

/* Every signal whose default action ends the process, sent from outside (kill): the crash
 * signals, the requests to stop, the timers' and I/O's, the first and last real-time one. */
static void every_fatal_signal_keeps_every_call_and_ends_the_same(void **state)
{
    (void)state;
    const int sigs[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,
                        SIGFPE,  SIGUSR1,   SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
                        SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
                        SIGSYS,  SIGRTMIN,  SIGRTMAX};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        dies_as_it_would(sigs[i], "kill");
}

/* The faults themselves (a null write, a division by zero, ud2, a page past a file's end):
 * the handler returns to the faulting instruction with the default action pending. On the
 * main thread and on another. */
static void a_fault_on_any_thread_keeps_every_call(void **state)
{
    (void)state;
    const int sigs[] = {SIGSEGV, SIGFPE, SIGILL, SIGBUS};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        dies_as_it_would(sigs[i], "fault");
        dies_as_it_would(sigs[i], "thread");
    }
}

/* A job's handler installed without SA_RESTART: a read it blocks in returns EINTR when the
 * signal comes, under the shim as without it (the shim's handler used to force SA_RESTART,
 * and the read waited for the data). */
static void a_job_handler_without_sa_restart_still_gets_eintr(void **state)
{
    (void)state;
    const int sigs[] = {SIGTERM, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char signo[16];
        snprintf(signo, sizeof signo, "%d", sigs[i]);
        const char *env[] = {g_dir_env, NULL};
        const char *argv[] = {"eintr", signo, NULL};
        st_run(&g_bare, 0, env, argv);
        st_run(&g_shim, 1, env, argv);
        assert_string_equal(g_bare.out, "read: Interrupted system call\n");
        assert_string_equal(g_shim.out, g_bare.out);
        assert_int_equal(g_shim.status, g_bare.status);
    }
}

/* A job's own handler of a signal that may come thousands of times a second (a sampling
 * profiler's SIGPROF, timers, I/O readiness, a real-time signal) is never interposed: no
 * flush on each delivery; and an ignored signal stays ignored. */
static void frequent_signals_keep_the_jobs_handler(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *argv[] = {"dispositions", NULL};
    st_run(&g_bare, 0, env, argv);
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    assert_null(strstr(g_bare.out, "another"));
    assert_string_equal(g_shim.out, g_bare.out);
}

#ifndef CP_TEST_PYTHON3
#define CP_TEST_PYTHON3 "/usr/bin/python3"
#endif

/* The real pattern: Python with faulthandler (installed at start, before NCCL's first call:
 * it restores SIG_DFL and re-raises from inside its handler under SA_NODEFER) and 100 calls
 * through ctypes, then a segmentation fault. The job ends as without the shim, traceback
 * included; the trace holds every call and END with SIGSEGV; the live block is gone. */
static void python_faulthandler_still_dumps_and_the_calls_are_kept(void **state)
{
    (void)state;
    struct stat st;
    if (stat(CP_TEST_PYTHON3, &st) != 0)
        fail_msg("%s is missing: make deps installs Debian's python3", CP_TEST_PYTHON3);
    static const char script[] =
        "import ctypes, os, sys\n"
        "ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)\n"
        "g = ctypes.CDLL(None)\n"
        "class Uid(ctypes.Structure):\n"
        "    _fields_ = [('internal', ctypes.c_char * 128)]\n"
        "comm = ctypes.c_void_p()\n"
        "assert g.ncclCommInitRank(ctypes.byref(comm), 2, Uid(b'py'), 0) == 0\n"
        "x = ctypes.c_float()\n"
        "for i in range(100):\n"
        "    g.ncclAllReduce(ctypes.byref(x), ctypes.byref(x), ctypes.c_size_t(1), 7, 0,"
        " comm, None)\n"
        "print('dying', flush=True)\n"
        "ctypes.string_at(0)\n";
    char stub[4300];
    snprintf(stub, sizeof stub, "%s/stub_nccl/libnccl.so.2", st_build_dir());
    const char *argv[] = {"-X", "faulthandler", "-c", script, stub, NULL};
    char live[4300], live_env[4400];
    snprintf(live, sizeof live, "%s/live-python", g_tmp);
    snprintf(live_env, sizeof live_env, "COLLPROF_LIVE_DIR=%s", live);
    assert_int_equal(mkdir(live, 0700), 0);
#ifdef CP_TEST_ASAN_RUNTIME
    /* python3 is not built with ASan: the runtime goes first, and its own SEGV handler
     * stays out of faulthandler's way */
    const char *asan = getenv("ASAN_OPTIONS");
    char *asan_saved = asan ? strdup(asan) : NULL;
    setenv("ASAN_OPTIONS", "detect_leaks=0:handle_segv=0", 1);
    const char *bare_env[] = {g_dir_env, live_env, "LD_PRELOAD=" CP_TEST_ASAN_RUNTIME, NULL};
#else
    const char *bare_env[] = {g_dir_env, live_env, NULL};
#endif
    const char *env[] = {g_dir_env, live_env, NULL}; /* the shim's run preloads both */
    st_run_prog(&g_bare, CP_TEST_PYTHON3, 0, bare_env, argv);
    st_run_prog(&g_shim, CP_TEST_PYTHON3, 1, env, argv);
#ifdef CP_TEST_ASAN_RUNTIME
    if (asan_saved)
        setenv("ASAN_OPTIONS", asan_saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(asan_saved);
#endif
    assert_true(WIFSIGNALED(g_bare.status) && WTERMSIG(g_bare.status) == SIGSEGV);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, "dying\n");
    assert_string_equal(g_shim.out, g_bare.out);
    assert_non_null(strstr(g_bare.err, "Fatal Python error: Segmentation fault"));
    if (!strstr(g_shim.err, "Fatal Python error: Segmentation fault"))
        fail_msg("no traceback under the shim:\n%s", g_shim.err);
    trace_seen t;
    read_trace(&t, 0);
    assert_calls(&t, 100, 100);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, SIGSEGV);
    st_free_trace(&t);
    assert_int_equal(live_blocks(live), 0);
}

/* The core flag: a core signal still dumps core under the shim (the handler returns to the
 * fault, or re-raises, with the default action). The job runs in the test's own directory,
 * where its core (a few MB) lands and goes with it. Skipped where cores go to a program or
 * another directory (core_pattern "|...", "/..."): those are the system's, not ours to
 * fill; and under ASan, whose runtime turns core dumps off. */
static void a_core_signal_still_dumps_core(void **state)
{
    (void)state;
    char pattern[256] = "";
    FILE *f = fopen("/proc/sys/kernel/core_pattern", "r");
    if (f) {
        if (!fgets(pattern, sizeof pattern, f))
            pattern[0] = '\0';
        fclose(f);
    }
    if (pattern[0] == '|' || pattern[0] == '/') {
        fprintf(stderr, "skipped: core_pattern sends cores elsewhere (%s)\n", pattern);
        skip();
    }
#ifdef CP_TEST_ASAN_RUNTIME
    fprintf(stderr, "skipped: ASan turns core dumps off (disable_coredump)\n");
    skip();
#endif
    struct rlimit some, none;
    getrlimit(RLIMIT_CORE, &some);
    none = some;
    if (some.rlim_max != RLIM_INFINITY && some.rlim_max < (256u << 20)) {
        fprintf(stderr, "skipped: RLIMIT_CORE's hard limit is %llu bytes\n",
                (unsigned long long)some.rlim_max);
        skip();
    }
    some.rlim_cur = 256u << 20;
    if (setrlimit(RLIMIT_CORE, &some) != 0)
        fail_msg("cannot raise RLIMIT_CORE: %s", strerror(errno));
    char cwd[4200];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_tmp), 0);
    const char *env[] = {g_dir_env, NULL};
    char signo[16];
    snprintf(signo, sizeof signo, "%d", SIGSEGV);
    const char *segv[] = {"die", "10", signo, "fault", NULL};
    st_run(&g_bare, 0, env, segv);
    st_run(&g_shim, 1, env, segv);
    setrlimit(RLIMIT_CORE, &none);
    assert_int_equal(chdir(cwd), 0);
    if (!WIFSIGNALED(g_bare.status) || !WCOREDUMP(g_bare.status))
        fail_msg("no core without the shim: status %#x in %s", g_bare.status, g_tmp);
    assert_int_equal(g_shim.status, g_bare.status);
}

int main(void)
{
    /* abort() would dump core, run after run; the hard limit stays, for the one test that
     * wants a core */
    struct rlimit no_core;
    getrlimit(RLIMIT_CORE, &no_core);
    no_core.rlim_cur = 0;
    setrlimit(RLIMIT_CORE, &no_core);
#ifdef CP_TEST_ASAN_RUNTIME
    /* the jobs' faults are theirs to die of, not ASan's to report (with and without us) */
    static char asan_options[1024];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan_options, sizeof asan_options, "%s%shandle_segv=0:handle_sigbus=0:"
             "handle_sigfpe=0:handle_sigill=0", was ? was : "", was && *was ? ":" : "");
    setenv("ASAN_OPTIONS", asan_options, 1);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(return_from_main, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_takes_the_live_block_away_unless_it_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exit_3, setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm_default, setup, teardown),
        cmocka_unit_test_setup_teardown(abort_like_a_watchdog, setup, teardown),
        cmocka_unit_test_setup_teardown(every_fatal_signal_keeps_every_call_and_ends_the_same,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_fault_on_any_thread_keeps_every_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_core_signal_still_dumps_core, setup, teardown),
        cmocka_unit_test_setup_teardown(a_job_handler_without_sa_restart_still_gets_eintr,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(frequent_signals_keep_the_jobs_handler, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(python_faulthandler_still_dumps_and_the_calls_are_kept,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(underscore_exit_4, setup, teardown),
        cmocka_unit_test_setup_teardown(sigkill_from_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_keeps_every_call, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_exec_keeps_errno_and_tracing, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
