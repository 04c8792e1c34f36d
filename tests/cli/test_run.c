/* collprof run: the job's exit status, its environment, and a trace from a job calling
 * NCCL (shim_job against the stub libnccl, as the shim's own tests run it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_cli_util.h"
#include "trace/trace_reader.h"

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

/* The shim_job of these tests, making NCCL calls (5 AllReduce) under `collprof run --dir`. */
static void run_burst(struct cli_result *r, const char *dir)
{
    char job[4200];
    snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
    cli_runl(r, "run", "--dir", dir, "--gpu-timing", "off", "--", job, "burst", "5", NULL);
    assert_int_equal(r->status, 0);
}

static void assert_says(const struct cli_result *r, const char *want)
{
    if (!strstr(r->err, want))
        fail_msg("stderr does not say \"%s\":\n%s", want, r->err);
}

/* The job called NCCL, but D could not be made (a file where a folder should be): run says
 * so, with the reason, not that the job made no call. */
static void a_directory_that_cannot_be_made_is_said_so(void **state)
{
    (void)state;
    char file[4200], dir[4300], want[8800];
    snprintf(file, sizeof file, "%s/file", g_tmp);
    cli_write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/sub", file);
    struct cli_result r;
    run_burst(&r, dir);
    snprintf(want, sizeof want, "collprof: no trace: cannot create the trace directory '%s': "
             "Not a directory\n", dir);
    assert_says(&r, want);
    assert_null(strstr(r.err, "made no NCCL call"));
    assert_null(strstr(r.err, "see it with"));
    cli_result_free(&r);
}

/* D made by the job's ranks, but no rank could create its file in it (a trace file's path
 * there is longer than PATH_MAX): run says that, not "trace in D". */
static void every_rank_failing_to_create_its_file_is_said_so(void **state)
{
    (void)state;
    static char dir[4096];
    size_t n = (size_t)snprintf(dir, sizeof dir, "%s", g_tmp);
    while (n + 1 + 200 < 4090) {
        dir[n++] = '/';
        memset(dir + n, 'd', 200);
        n += 200;
    }
    dir[n++] = '/';
    memset(dir + n, 'e', 4090 - n);
    dir[4090] = '\0';
    struct cli_result r;
    run_burst(&r, dir);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0); /* the shim made it */
    static char want[8800];
    snprintf(want, sizeof want, "collprof: no trace in '%s': every rank that called NCCL failed "
             "to create its file there: File name too long\n", dir);
    assert_says(&r, want);
    assert_null(strstr(r.err, "see it with"));
    cli_result_free(&r);
}

/* D held a trace before; a job that makes no NCCL call adds none: run does not point at the
 * old one. */
static void an_old_trace_is_not_this_jobs(void **state)
{
    (void)state;
    char dir[4200], old[4300], want[8800];
    snprintf(dir, sizeof dir, "%s/old", g_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(old, sizeof old, "%s/rank00000-host-1.cptrace", dir);
    cli_write_file(old, "x", 1);
    struct cli_result r;
    cli_runl(&r, "run", "--dir", dir, "--", "true", NULL);
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof want, "collprof: the job made no NCCL call: no new trace in '%s'\n",
             dir);
    assert_says(&r, want);
    cli_result_free(&r);
}

/* A directory longer than COLLPROF_DIR takes would send the trace to the shim's default:
 * refused before the job starts. */
static void a_directory_the_shim_would_not_take_is_exit_2(void **state)
{
    (void)state;
    static char dir[4200];
    memset(dir, 'd', 4096);
    dir[0] = '/';
    dir[4096] = '\0';
    struct cli_result r;
    cli_runl(&r, "run", "--dir", dir, "--", "true", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_says(&r, "the trace directory is longer than 4095 bytes");
    cli_result_free(&r);
}

/* The hint's path is quoted for a shell: pasted, it names D, a space and a quote in it. */
static void the_hint_is_pasteable_into_a_shell(void **state)
{
    (void)state;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/it's a \"dir\" $HOME", g_tmp);
    struct cli_result r;
    run_burst(&r, dir);
    const char *hint = strstr(r.err, "see it with: collprof report ");
    assert_non_null(hint);
    hint += strlen("see it with: collprof report ");
    char word[8800];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(hint, "\n"), hint);
    /* the shell's own reading of the pasted word */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "printf %%s %s", word);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char got[4400];
    ssize_t n = 0, k;
    while ((k = read(fds[0], got + n, sizeof got - 1 - (size_t)n)) > 0)
        n += k;
    got[n] = '\0';
    close(fds[0]);
    assert_int_equal(cli_wait(pid), 0);
    assert_string_equal(got, dir);
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_jobs_exit_status_comes_back),
        cmocka_unit_test(the_environment_is_set_and_ld_preload_kept),
        cmocka_unit_test(a_bad_gpu_timing_is_one_line_and_exit_2),
        cmocka_unit_test(a_job_calling_nccl_leaves_its_trace_in_dir),
        cmocka_unit_test(a_directory_that_cannot_be_made_is_said_so),
        cmocka_unit_test(every_rank_failing_to_create_its_file_is_said_so),
        cmocka_unit_test(an_old_trace_is_not_this_jobs),
        cmocka_unit_test(a_directory_the_shim_would_not_take_is_exit_2),
        cmocka_unit_test(the_hint_is_pasteable_into_a_shell),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
