/* collprof run: the job's exit status, its environment, and a trace from a job calling
 * NCCL (shim_job against the stub libnccl, as the shim's own tests run it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_cli_util.h"
#include "common/trace_reader.h"

static char *g_tmp;

static int setup(void **state)
{
    (void)state;
    g_tmp = cli_tmpdir();
#ifdef CP_TEST_ASAN_RUNTIME
    /* An ASan-built libcollprof.so works in a plain program only with ASan's runtime
     * loaded too: `run` puts ours first, so the order check is off. */
    setenv("LD_PRELOAD", CP_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#else
    setenv("LD_PRELOAD", "libm.so.6", 1);
#endif
    unsetenv("COLLPROF_DIR");
    /* the jobs' live stats blocks go to the test's own directory, not /dev/shm */
    setenv("COLLPROF_LIVE_DIR", g_tmp, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cli_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void the_jobs_exit_status_comes_back(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/none", g_tmp);
    cli_runl(&r, "run", "--dir", dir, "--", "sh", "-c", "exit 7", NULL);
    assert_int_equal(r.status, 7);
    assert_non_null(strstr(r.err, "no trace"));
    cli_result_free(&r);
    cli_runl(&r, "run", "--dir", dir, "sh", "-c", "kill -TERM $$", NULL);
    assert_int_equal(r.status, 128 + 15);
    cli_result_free(&r);
    cli_runl(&r, "run", "--dir", dir, "--", "/nonexistent/job", NULL);
    assert_int_equal(r.status, 127);
    cli_result_free(&r);
}

static void the_environment_is_set_and_ld_preload_kept(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/env", g_tmp);
    cli_runl(&r, "run", "--dir", dir, "--gpu-timing", "sample:4", "--", "sh", "-c",
             "echo \"$COLLPROF_DIR|$COLLPROF_GPU_TIMING|$LD_PRELOAD\"", NULL);
    assert_int_equal(r.status, 0);
    char want[8400];
    snprintf(want, sizeof want, "%s|sample:4|", dir);
    assert_true(cli_starts_with(r.out, want));
    const char *pre = r.out + strlen(want);
    assert_non_null(strstr(pre, "/lib/libcollprof.so "));
    assert_non_null(strstr(pre, getenv("LD_PRELOAD")));
    assert_true(strstr(pre, "libcollprof.so") < strstr(pre, getenv("LD_PRELOAD")));
    cli_result_free(&r);
}

static void a_bad_gpu_timing_is_one_line_and_exit_2(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "run", "--gpu-timing", "sample:0", "--", "true", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "sample:0"));
    cli_result_free(&r);
}

static void a_job_calling_nccl_leaves_its_trace_in_dir(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200], job[4200];
    snprintf(dir, sizeof dir, "%s/trace/sub", g_tmp);
    snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
    cli_runl(&r, "run", "--dir", dir, "--gpu-timing", "off", "--", job, "burst", "5", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "burst done\n");
    char want[8600];
    snprintf(want, sizeof want, "collprof: trace in '%s'; see it with: collprof report %s\n",
             dir, dir);
    assert_non_null(strstr(r.err, want));
    char **paths = NULL, err[256];
    int n = cp_trace_dir_list(dir, &paths, err, sizeof err);
    assert_int_equal(n, 1);
    cp_trace_dir_free(paths, n);
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_jobs_exit_status_comes_back),
        cmocka_unit_test(the_environment_is_set_and_ld_preload_kept),
        cmocka_unit_test(a_bad_gpu_timing_is_one_line_and_exit_2),
        cmocka_unit_test(a_job_calling_nccl_leaves_its_trace_in_dir),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
