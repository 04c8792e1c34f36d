/* The shim in every way a job loads NCCL (issue 14): each case runs nccl_loader (or Python)
 * without the shim and with it, and checks that the job's exit status, stdout and stderr (less
 * collprof's lines) are the same, that the shim said nothing, and that the trace holds every
 * call the job made. The job reaches NCCL only through client libraries it opens with
 * dlopen(RTLD_LOCAL), as Python imports PyTorch, so no NCCL is in the global scope:
 *   local     a client linked against libnccl.so.2
 *   renamed   a client linked against an NCCL of another file name and soname (2.28.3)
 *   two       both clients in one process, calls alternating: each reaches its own NCCL (the
 *             emulation refuses a communicator made by the other copy)
 *   later     the first calls are made before libnccl.so.2 is loaded at all; then it is opened
 *             RTLD_GLOBAL, and a second client comes
 *   python    Debian's python3, ctypes.CDLL (RTLD_LOCAL), as an `import` does
 * and what the shim itself brings into the job: libunwind, when it is opened for call sites,
 * stays out of the global scope where its _Unwind_RaiseException would take over C++ throws
 * (test_preload_env checks that loading the shim needs only glibc).
 * Before the per-caller resolution (preload/real.c) every case failed: the job got
 * ncclInvalidUsage from ncclGetVersion, as PyTorch's DDP did on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "abi/nccl_abi.h"
#include "shim_test_util.h"

#ifndef CP_TEST_PYTHON3
#define CP_TEST_PYTHON3 "/usr/bin/python3"
#endif

static char g_client[4300], g_client_alt[4300], g_nccl[4300];

/* What the job's runs make, per nccl_client_run (2 ranks, 3 steps). */
enum { RUN_ALLREDUCE = 6, RUN_SEND = 6, RUN_RECV = 6, RUN_INIT = 1, RUN_DESTROY = 2 };

static size_t count_op(const trace_seen *t, uint8_t op)
{
    size_t n = 0;
    for (size_t i = 0; i < t->ncalls; i++)
        n += t->calls[i].op == op;
    return n;
}

/* Runs prog/argv bare (with bare_env) and under the shim, compares, and checks that the trace
 * holds `runs` client runs. Returns the shim run's stdout for more checks. */
static const char *same_with_and_without(const char *prog, const char *bare_env1,
                                         const char *const *argv, int runs)
{
    static job_result bare, shim;
    static char bare_err[65536], shim_err[65536];
    char *tmp = st_tmpdir();
    assert_non_null(tmp);
    char dir[4200], dir_env[4300];
    snprintf(dir, sizeof dir, "%s/t", tmp);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    const char *bare_env[] = {bare_env1, NULL}, *shim_env[] = {dir_env, NULL};
    st_run_prog(&bare, prog, 0, bare_env, argv);
    st_run_prog(&shim, prog, 1, shim_env, argv);
    if (shim.status != bare.status || strcmp(shim.out, bare.out) != 0 || bare.status != 0)
        fprintf(stderr, "bare %#x:\n%s%s\nshim %#x:\n%s%s\n", bare.status, bare.out, bare.err,
                shim.status, shim.out, shim.err);
    assert_true(WIFEXITED(bare.status));
    assert_int_equal(WEXITSTATUS(bare.status), 0);
    assert_int_equal(shim.status, bare.status);
    assert_string_equal(shim.out, bare.out);
    st_strip_collprof(bare.err, bare_err, sizeof bare_err);
    st_strip_collprof(shim.err, shim_err, sizeof shim_err);
    assert_string_equal(shim_err, bare_err);
    if (strstr(shim.err, "collprof: WARN"))
        fprintf(stderr, "%s", shim.err);
    assert_int_equal(st_count_lines(shim.err, "collprof: WARN"), 0);

    char **paths;
    assert_int_equal(st_list(dir, &paths), 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, 1);
    assert_int_equal(count_op(&t, CP_OP_ALLREDUCE), (size_t)(runs * RUN_ALLREDUCE));
    assert_int_equal(count_op(&t, CP_OP_SEND), (size_t)(runs * RUN_SEND));
    assert_int_equal(count_op(&t, CP_OP_RECV), (size_t)(runs * RUN_RECV));
    assert_int_equal(count_op(&t, CP_OP_COMM_INIT), (size_t)(runs * RUN_INIT));
    assert_int_equal(count_op(&t, CP_OP_COMM_DESTROY), (size_t)(runs * RUN_DESTROY));
    for (size_t i = 0; i < t.ncalls; i++)
        assert_int_equal(t.calls[i].result, ncclSuccess);
    assert_int_equal(t.ncomms, (size_t)(2 * runs)); /* every comm learnt its rank and size */
    assert_int_equal(t.walk.lost_records, 0);
    assert_int_equal(t.nend, 1);
    st_free_trace(&t);
    st_rmtree(tmp);
    free(tmp);
    return shim.out;
}

static void a_client_opened_rtld_local(void **state)
{
    (void)state;
    const char *argv[] = {"local", g_client, "run", "0", "torch", NULL};
    const char *out = same_with_and_without("nccl_loader", NULL, argv, 1);
    assert_non_null(strstr(out, "torch: NCCL 22809\n"));
    assert_non_null(strstr(out, "torch: done\n"));
}

static void a_client_of_an_nccl_with_another_soname(void **state)
{
    (void)state;
    const char *argv[] = {"local", g_client_alt, "run", "0", "renamed", NULL};
    const char *out = same_with_and_without("nccl_loader", NULL, argv, 1);
    assert_non_null(strstr(out, "renamed: NCCL 22803\n"));
}

static void two_copies_each_caller_reaches_its_own(void **state)
{
    (void)state;
    const char *argv[] = {"local", g_client, "local", g_client_alt, "run", "0", "a",
                          "run", "1", "b", "run", "0", "a-again", NULL};
    const char *out = same_with_and_without("nccl_loader", NULL, argv, 3);
    assert_non_null(strstr(out, "a: NCCL 22809\n"));
    assert_non_null(strstr(out, "b: NCCL 22803\n"));
    assert_non_null(strstr(out, "a-again: NCCL 22809\n"));
    assert_non_null(strstr(out, "a-again: done\n"));
}

static void an_nccl_opened_after_the_first_calls(void **state)
{
    (void)state;
    const char *argv[] = {"local", g_client_alt, "run", "0", "first", "global", g_nccl,
                          "local", g_client, "run", "2", "second", "run", "0", "first-again",
                          NULL};
    const char *out = same_with_and_without("nccl_loader", NULL, argv, 3);
    assert_non_null(strstr(out, "first: NCCL 22803\n"));
    assert_non_null(strstr(out, "second: NCCL 22809\n"));
    assert_non_null(strstr(out, "first-again: NCCL 22803\n"));
}

/* A real interpreter: ctypes.CDLL opens with RTLD_LOCAL, as `import` opens an extension. */
static void python_ctypes_rtld_local(void **state)
{
    (void)state;
    struct stat st;
    if (stat(CP_TEST_PYTHON3, &st) != 0)
        fail_msg("%s is missing: make deps installs Debian's python3", CP_TEST_PYTHON3);
    static const char script[] =
        "import ctypes, os, sys\n"
        "lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_LOCAL)\n"
        "sys.exit(lib.nccl_client_run(b'python', 2, 3))\n";
    const char *argv[] = {"-c", script, g_client, NULL};
#ifdef CP_TEST_ASAN_RUNTIME
    /* python3 is not built with ASan: the sanitized client libraries need the runtime loaded
     * first (the shim's run gets it before the shim), and its leak check would judge the
     * interpreter */
    const char *asan = getenv("ASAN_OPTIONS");
    char *asan_saved = asan ? strdup(asan) : NULL;
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    const char *bare_env = "LD_PRELOAD=" CP_TEST_ASAN_RUNTIME;
#else
    const char *bare_env = NULL;
#endif
    const char *out = same_with_and_without(CP_TEST_PYTHON3, bare_env, argv, 1);
#ifdef CP_TEST_ASAN_RUNTIME
    if (asan_saved)
        setenv("ASAN_OPTIONS", asan_saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(asan_saved);
#endif
    assert_non_null(strstr(out, "python: NCCL 22809\n"));
    assert_non_null(strstr(out, "python: done\n"));
}

static void libunwind_stays_out_of_the_global_scope(void **state)
{
    (void)state;
    const char *argv[] = {"local", g_client, "run", "0", "sites", "unwinder", NULL};
    const char *out = same_with_and_without("nccl_loader", NULL, argv, 1);
    assert_non_null(strstr(out, "loader: _Unwind_RaiseException from "));
}

int main(void)
{
    snprintf(g_client, sizeof g_client, "%s/nccl_clients/libnccl_client.so", st_build_dir());
    snprintf(g_client_alt, sizeof g_client_alt, "%s/nccl_clients/libnccl_client_alt.so",
             st_build_dir());
    snprintf(g_nccl, sizeof g_nccl, "%s/emu/libnccl.so.2", st_build_dir());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_client_opened_rtld_local),
        cmocka_unit_test(a_client_of_an_nccl_with_another_soname),
        cmocka_unit_test(two_copies_each_caller_reaches_its_own),
        cmocka_unit_test(an_nccl_opened_after_the_first_calls),
        cmocka_unit_test(python_ctypes_rtld_local),
        cmocka_unit_test(libunwind_stays_out_of_the_global_scope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
