/* The shim in front of the REAL NCCL ($CUDA_HOME/lib64/libnccl.so.2): with no GPU and no
 * driver, the host-only entry points and the failing ones return, print and leave in
 * ncclGetLastError exactly what they do without the shim. Skipped (77) without that NCCL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shim_test_util.h"

static char g_lib_path[4300];

static void host_calls_answer_the_same_through_the_shim(void **state)
{
    (void)state;
    static job_result bare, shim;
    static char bare_err[65536], shim_err[65536];
    char *tmp = st_tmpdir();
    assert_non_null(tmp);
    char dir[4200], dir_env[4300];
    snprintf(dir, sizeof dir, "%s/t", tmp);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    const char *env[] = {g_lib_path, NULL}, *shim_env[] = {g_lib_path, dir_env, NULL};
    st_run_prog(&bare, "real_nccl_job", 0, env, NULL);
    st_run_prog(&shim, "real_nccl_job", 1, shim_env, NULL);
    if (shim.status != bare.status || strcmp(shim.out, bare.out) != 0)
        fprintf(stderr, "bare %#x:\n%s%s\nshim %#x:\n%s%s\n", bare.status, bare.out, bare.err,
                shim.status, shim.out, shim.err);
    /* the real NCCL ran: its version, and the driver it could not find */
    assert_true(WIFEXITED(bare.status));
    assert_int_equal(WEXITSTATUS(bare.status), 0);
    assert_non_null(strstr(bare.out, "ncclCommInitRank(&comm, 1, id, 0)="));
    assert_string_equal(shim.out, bare.out);
    assert_int_equal(shim.status, bare.status);
    st_strip_collprof(bare.err, bare_err, sizeof bare_err);
    st_strip_collprof(shim.err, shim_err, sizeof shim_err);
    assert_string_equal(shim_err, bare_err);
    assert_int_equal(st_count_lines(shim.err, "collprof:"), 0);
    /* and the shim was in front of it: the failed inits are in its trace */
    char **paths;
    int n = st_list(dir, &paths);
    assert_int_equal(n, 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    assert_int_equal(t.walk.corrupt_chunks, 0);
    size_t inits = 0;
    for (size_t i = 0; i < t.ncalls; i++)
        inits += t.calls[i].op == CP_OP_COMM_INIT;
    assert_int_equal(inits, 3);
    st_free_trace(&t);
    cp_trace_dir_free(paths, n);
    st_rmtree(tmp);
    free(tmp);
}

/* The real libnccl.so.2 as frameworks load it: a dependency of a library the job opens with
 * dlopen(RTLD_LOCAL) (nccl_client, whose libnccl.so.2 LD_LIBRARY_PATH makes the real one), so
 * it is in no global scope. Through the shim the job gets the real version, not the
 * ncclInvalidUsage it got when the shim looked only at RTLD_NEXT. */
static void the_real_nccl_behind_an_rtld_local_library(void **state)
{
    (void)state;
    static job_result bare, shim;
    char client[4300];
    snprintf(client, sizeof client, "%s/nccl_clients/libnccl_client.so", st_build_dir());
    if (!st_exists(client))
        skip(); /* built only with the emulation (the client needs its libcuda.so.1) */
    char *tmp = st_tmpdir();
    assert_non_null(tmp);
    char dir_env[4300];
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s/t", tmp);
    const char *env[] = {g_lib_path, NULL}, *shim_env[] = {g_lib_path, dir_env, NULL};
    const char *argv[] = {"local", client, "version", "0", "real", NULL};
    st_run_prog(&bare, "nccl_loader", 0, env, argv);
    st_run_prog(&shim, "nccl_loader", 1, shim_env, argv);
    if (shim.status != bare.status || strcmp(shim.out, bare.out) != 0)
        fprintf(stderr, "bare %#x:\n%s%s\nshim %#x:\n%s%s\n", bare.status, bare.out, bare.err,
                shim.status, shim.out, shim.err);
    assert_int_equal(bare.status, 0);
    assert_non_null(strstr(bare.out, "real: ncclGetVersion=0, NCCL 2"));
    assert_string_equal(shim.out, bare.out);
    assert_int_equal(shim.status, 0);
    assert_int_equal(st_count_lines(shim.err, "collprof:"), 0);
    st_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const char *cuda = getenv("CUDA_HOME");
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/lib64/libnccl.so.2", cuda && *cuda ? cuda : "/usr/local/cuda");
    if (!st_exists(lib)) {
        fprintf(stderr, "skipped: no real NCCL at %s\n", lib);
        return 77;
    }
    snprintf(g_lib_path, sizeof g_lib_path, "LD_LIBRARY_PATH=%.*s", (int)(strrchr(lib, '/') - lib),
             lib);
    unsetenv("NCCL_DEBUG"); /* NCCL's own lines would differ only in timing and pids */
    /* The real NCCL leaks a group job at each ncclGroupEnd: its leak, not ours, and an
     * ASan-built job would report it (with pids) and exit 1. */
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_calls_answer_the_same_through_the_shim),
        cmocka_unit_test(the_real_nccl_behind_an_rtld_local_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
