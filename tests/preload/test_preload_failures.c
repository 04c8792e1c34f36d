/* The shim's failure policy, case by case: whatever fails on the shim's side, the job's
 * stdout, its stderr once the `collprof:` lines are taken out, and its exit status are what
 * they are without the shim, and the shim says so in at most the documented WARN lines.
 * See "Failure policy" in docs/ARCHITECTURE.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include "shim_test_util.h"

static char *g_tmp;
static char g_dir[4200], g_dir_env[4300];
static job_result g_bare, g_shim;
/* Restored by teardown, so that a failed case cannot leak them into the next ones. */
static struct rlimit g_fsize;
static char g_cwd[4096];

static int setup(void **state)
{
    (void)state;
    if (getrlimit(RLIMIT_FSIZE, &g_fsize) != 0 || !getcwd(g_cwd, sizeof g_cwd))
        return -1;
    g_tmp = st_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/t", g_tmp);
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (setrlimit(RLIMIT_FSIZE, &g_fsize) != 0 || chdir(g_cwd) != 0)
        return -1;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* The job saw no difference between g_bare and g_shim, and the shim printed exactly
 * `warns` lines, all WARN (the default level). */
static void check_same(int warns)
{
    static char bare_err[65536], shim_err[65536];
    st_strip_collprof(g_bare.err, bare_err, sizeof bare_err);
    st_strip_collprof(g_shim.err, shim_err, sizeof shim_err);
    if (st_count_lines(g_shim.err, "collprof: WARN") != warns || g_shim.status != g_bare.status)
        fprintf(stderr, "bare %#x:\n%s%s\nshim %#x:\n%s%s\n", g_bare.status, g_bare.out,
                g_bare.err, g_shim.status, g_shim.out, g_shim.err);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_string_equal(shim_err, bare_err);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), warns);
    assert_int_equal(st_count_lines(g_shim.err, "collprof:"), warns);
}

/* Runs argv bare and under the shim, both with both_env, the shim's run with dir_env (NULL:
 * g_dir) too, and checks as check_same. */
static void run_both_same(const char *const *both_env, const char *dir_env,
                          const char *const *argv, int warns)
{
    const char *env[24];
    size_t n = 0;
    for (; both_env && *both_env && n < 20; both_env++)
        env[n++] = *both_env;
    env[n] = NULL;
    st_run(&g_bare, 0, env, argv);
    env[n++] = dir_env ? dir_env : g_dir_env;
    env[n] = NULL;
    st_run(&g_shim, 1, env, argv);
    check_same(warns);
}

/* The one trace in dir, read; the walk must find no corruption. */
static void read_one(const char *dir, trace_seen *t)
{
    char **paths;
    int n = st_list(dir, &paths);
    assert_int_equal(n, 1);
    assert_int_equal(st_read_trace(paths[0], t), 0);
    assert_int_equal(t->walk.corrupt_chunks, 0);
    cp_trace_dir_free(paths, n);
}

static void a_directory_under_a_regular_file_is_one_warn(void **state)
{
    (void)state;
    char file[4300], env_dir[4400];
    snprintf(file, sizeof file, "%s/plainfile", g_tmp);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    /* ENOTDIR stops root too, where a 0500 directory would not */
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s/x", file);
    const char *argv[] = {"basic", NULL};
    run_both_same(NULL, env_dir, argv, 1);
    assert_non_null(strstr(g_shim.err, "trace directory"));
}

static void a_parent_that_cannot_be_created_is_one_warn(void **state)
{
    (void)state;
    /* procfs refuses mkdir to everyone, root included */
    const char *argv[] = {"basic", NULL};
    run_both_same(NULL, "COLLPROF_DIR=/proc/collprof-no-such/t", argv, 1);
    assert_non_null(strstr(g_shim.err, "/proc/collprof-no-such"));
}

static void a_full_disk_is_one_warn_and_a_readable_trace(void **state)
{
    (void)state;
    char mnt[4300], env_dir[4400];
    snprintf(mnt, sizeof mnt, "%s/full", g_tmp);
    assert_int_equal(mkdir(mnt, 0755), 0);
    /* one page: room for the directory and the file header, not for a chunk */
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=4k") != 0) {
        fprintf(stderr, "skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
        skip();
    }
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s/t", mnt);
    const char *argv[] = {"burst", "3000", NULL};
    run_both_same(NULL, env_dir, argv, 1);
    int warned = strstr(g_shim.err, "cannot write the trace") != NULL;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/t", mnt);
    char **paths;
    int n = st_list(dir, &paths);
    trace_seen t = {0};
    int read_ok = n == 1 && st_read_trace(paths[0], &t) == 0;
    if (n > 0)
        cp_trace_dir_free(paths, n);
    st_free_trace(&t);
    umount2(mnt, MNT_DETACH);
    assert_true(warned);
    assert_true(read_ok);
    assert_int_equal(t.walk.corrupt_chunks, 0);
    assert_true(t.ncalls < 3000); /* the rest could not be written */
}

/* `ulimit -f` is meant for the job's files: ours must never raise SIGXFSZ, whose default
 * action would kill the job. */
static void rlimit_fsize_never_kills_the_job(void **state)
{
    (void)state;
    enum { LIMIT = 16384 };
    struct rlimit lim = g_fsize;
    lim.rlim_cur = LIMIT; /* the children inherit it; this process writes no file meanwhile */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const char *argv[] = {"burst", "3000", NULL};
    run_both_same(NULL, NULL, argv, 1);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &g_fsize), 0);
    assert_true(WIFEXITED(g_shim.status));
    assert_non_null(strstr(g_shim.err, strerror(EFBIG)));
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 1);
    struct stat st;
    assert_int_equal(stat(paths[0], &st), 0);
    assert_true(st.st_size <= LIMIT);
    cp_trace_dir_free(paths, n);
    trace_seen t;
    read_one(g_dir, &t);
    assert_true(t.ncalls < 3000);
    st_free_trace(&t);
}

/* Below the live stats block's size, `ulimit -f` must not let the block's ftruncate raise
 * SIGXFSZ either: no block (one WARN), the trace as far as the limit allows (one WARN). */
static void rlimit_fsize_below_the_stats_block_never_kills_the_job(void **state)
{
    (void)state;
    struct rlimit lim = g_fsize;
    lim.rlim_cur = 8192;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const char *argv[] = {"burst", "3000", NULL};
    run_both_same(NULL, NULL, argv, 2);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &g_fsize), 0);
    assert_true(WIFEXITED(g_shim.status));
    assert_non_null(strstr(g_shim.err, "live"));
}

static void each_bad_setting_is_one_warn_and_tracing_goes_on(void **state)
{
    (void)state;
    static char long_dir[5200] = "COLLPROF_DIR=";
    memset(long_dir + 13, 'd', 5000);
    long_dir[5013] = '\0';
    const char *bad[] = {"COLLPROF_DEBUG=loud",     "COLLPROF_ENABLE=maybe",
                         "COLLPROF_GPU_TIMING=sample:0", "COLLPROF_STACK=65",
                         "COLLPROF_LIVE=2",          "COLLPROF_HANG_S=-1",
                         "COLLPROF_FLUSH_MS=0",      "COLLPROF_BUFFER_MB=4097",
                         "COLLPROF_MAX_MB=big",      long_dir};
    const char *argv[] = {"basic", NULL};
    /* a bad COLLPROF_DIR falls back to ./collprof-<jobid>: keep that out of the build tree */
    assert_int_equal(chdir(g_tmp), 0);
    st_run(&g_bare, 0, NULL, argv);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int is_dir = bad[i] == long_dir;
        char name[40];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(bad[i], '=') - bad[i]), bad[i]);
        const char *env[] = {bad[i], is_dir ? NULL : g_dir_env, NULL};
        st_run(&g_shim, 1, env, argv);
        if (st_count_lines(g_shim.err, "collprof: WARN") != 1)
            fprintf(stderr, "%s:\n%s", name, g_shim.err);
        check_same(1);
        assert_non_null(strstr(g_shim.err, name));
        char dir[4400];
        snprintf(dir, sizeof dir, "%s", g_dir);
        if (is_dir) {
            char cmd[4600], line[256] = "";
            snprintf(cmd, sizeof cmd, "cd '%s' && ls -d collprof-*", g_tmp);
            FILE *p = popen(cmd, "r");
            assert_non_null(p);
            assert_non_null(fgets(line, sizeof line, p));
            pclose(p);
            line[strcspn(line, "\n")] = '\0';
            snprintf(dir, sizeof dir, "%s/%s", g_tmp, line);
        }
        trace_seen t;
        read_one(dir, &t);
        assert_int_equal(t.ncalls, 36); /* every recorded call of basic */
        st_free_trace(&t);
        st_rmtree(dir);
    }
}

static void no_cuda_driver_means_host_timing_without_a_warn(void **state)
{
    (void)state;
    const char *argv[] = {"burst", "5", NULL};
    run_both_same(NULL, NULL, argv, 0); /* shim_job has no libcuda, none is on the path */
    assert_string_equal(g_shim.err, g_bare.err);
    trace_seen t;
    read_one(g_dir, &t);
    assert_false(t.header.flags & CP_FILE_GPU_TIMING);
    size_t n = 0;
    for (size_t i = 0; i < t.ncalls; i++) {
        assert_false(t.calls[i].flags & CP_CALL_TIMED);
        n += t.calls[i].op == CP_OP_ALLREDUCE;
    }
    assert_int_equal(n, 5);
    st_free_trace(&t);
}

/* An NCCL older than the shim's list (stub_nccl_min lacks ncclCommShrink). */
static void a_missing_entry_point_the_job_never_calls_changes_nothing(void **state)
{
    (void)state;
    char lib_path[4300];
    snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s/stub_nccl_min", st_build_dir());
    const char *env[] = {lib_path, NULL};
    const char *argv[] = {"burst", "5", NULL};
    run_both_same(env, NULL, argv, 0);
    trace_seen t;
    read_one(g_dir, &t);
    assert_int_equal(t.ncalls, 7); /* init, 5 AllReduce, destroy */
    st_free_trace(&t);
}

/* The documented differences when the job does reach for the missing entry point: the shim
 * exports every name of its list, so the name is there; calling it returns ncclInvalidUsage
 * after one WARN, where without the shim the dynamic linker kills the job (a direct call)
 * or dlsym finds nothing. */
static void a_missing_entry_point_the_job_reaches_for_is_invalid_usage(void **state)
{
    (void)state;
    char lib_path[4300];
    snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s/stub_nccl_min", st_build_dir());
    const char *env[] = {lib_path, NULL}, *env_shim[] = {lib_path, g_dir_env, NULL};
    const char *lookup[] = {"lookup-shrink", NULL};
    st_run(&g_bare, 0, env, lookup);
    st_run(&g_shim, 1, env_shim, lookup);
    assert_int_equal(g_bare.status, 0);
    assert_int_equal(g_shim.status, 0);
    assert_non_null(strstr(g_bare.out, "ncclCommShrink absent\n"));
    assert_non_null(strstr(g_shim.out, "ncclCommShrink found\n"));
    assert_non_null(strstr(g_shim.out, "=5\n")); /* ncclInvalidUsage */
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
    /* the WARN names the NCCL that lacks it */
    assert_non_null(strstr(g_shim.err, "ncclCommShrink is not in "));
    assert_non_null(strstr(g_shim.err, "stub_nccl_min/libnccl.so.2"));

    const char *basic[] = {"basic", NULL};
    st_run(&g_bare, 0, env, basic);
    st_run(&g_shim, 1, env_shim, basic);
    assert_true(WIFEXITED(g_bare.status));
    assert_int_equal(WEXITSTATUS(g_bare.status), 127);
    assert_non_null(strstr(g_bare.err, "symbol lookup error"));
    assert_int_equal(g_shim.status, 0);
    assert_non_null(strstr(g_shim.out, "ncclCommShrink(c, &excl, 1, &sh, NULL, "
                                       "NCCL_SHRINK_DEFAULT)=5\n"));
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_directory_under_a_regular_file_is_one_warn),
        T(a_parent_that_cannot_be_created_is_one_warn),
        T(a_full_disk_is_one_warn_and_a_readable_trace),
        T(rlimit_fsize_never_kills_the_job),
        T(rlimit_fsize_below_the_stats_block_never_kills_the_job),
        T(each_bad_setting_is_one_warn_and_tracing_goes_on),
        T(no_cuda_driver_means_host_timing_without_a_warn),
        T(a_missing_entry_point_the_job_never_calls_changes_nothing),
        T(a_missing_entry_point_the_job_reaches_for_is_invalid_usage),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
