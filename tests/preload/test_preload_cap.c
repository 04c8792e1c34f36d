/* COLLPROF_MAX_MB: a long job's trace stays under its cap, in rotated segments that each read
 * alone; collprof joins them into one rank and says what rotation deleted; a bad value is one
 * WARN and the default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* The first number that follows "key": in a JSON text (a key whose value is an array or an
 * object is passed over), or -1. */
static long long json_number(const char *json, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    long long v;
    for (const char *at = json; (at = strstr(at, quoted)) != NULL; at += strlen(quoted))
        if (sscanf(at + strlen(quoted), " %lld", &v) == 1)
            return v;
    return -1;
}

#define CAP_MB "0.125"
#define CAP_BYTES (131072ull)
#define CALLS "25000" /* under a ring's 32768 slots: none lost to a full ring */

/* 25,000 calls make about 1.7 MB of trace: thirteen times the cap. What is on disk stays under
 * the cap and one segment, the newest calls are there (the last one included) in segments
 * that read alone, and the report counts the kept calls' operations and names the loss. */
static void a_long_job_keeps_its_newest_calls_under_the_cap(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_MAX_MB=" CAP_MB, NULL};
    const char *argv[] = {"many", CALLS, NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_int_equal(st_count_lines(g_shim.err, "collprof:"), 0);

    char **paths;
    int n = st_list(g_dir, &paths);
    assert_true(n >= 2 && n <= (int)CP_TRACE_SEGMENTS);
    uint64_t bytes = 0, kept = 0, last_seq = 0, prev_seq = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        assert_int_equal(stat(paths[i], &st), 0);
        bytes += (uint64_t)st.st_size;
        size_t family;
        assert_true(cp_trace_segment_of(paths[i], &family) > 0); /* segment 0 is gone */
        trace_seen t;
        assert_int_equal(st_read_trace(paths[i], &t), 0); /* alone */
        assert_int_equal(t.walk.corrupt_chunks, 0);
        assert_int_equal(t.walk.missing_chunks, 0);
        assert_int_equal(t.walk.unknown_records, 0);
        assert_true(t.ncomms >= 1); /* the head names the communicator its calls use */
        assert_true(t.nsites >= 1);
        for (size_t k = 0; k < t.ncalls; k++) {
            if (t.calls[k].op != CP_OP_ALLREDUCE)
                continue;
            assert_true(t.calls[k].comm_index == t.comms[0].comm_index);
            if (kept) /* in order across the segments, none missing */
                assert_int_equal(t.calls[k].seq, prev_seq + 1);
            prev_seq = last_seq = t.calls[k].seq;
            kept++;
        }
        if (i == n - 1) {
            assert_int_equal(t.nend, 1);
            assert_true(t.walk.lost_records > 0);
        }
        st_free_trace(&t);
    }
    assert_true(bytes <= CAP_BYTES + CAP_BYTES / CP_TRACE_SEGMENTS);
    assert_int_equal(last_seq, 25000 - 1);
    assert_true(kept > 100 && kept < 25000);

    const char *report[] = {"report", "--json", g_dir, NULL};
    job_result *r = &g_shim;
    st_run_prog(r, "collprof", 0, NULL, report);
    assert_int_equal(WEXITSTATUS(r->status), 0);
    assert_int_equal(json_number(r->out, "ranks"), 1);
    assert_int_equal(json_number(r->out, "ops"), (long long)kept);
    long long rotated = json_number(r->out, "rotated_records");
    assert_true(rotated >= (long long)(25000 - kept));
    assert_int_equal(json_number(r->out, "rotated"), rotated); /* lost_by_cause */
    assert_true(json_number(r->out, "lost_records") >= rotated);
    assert_non_null(strstr(r->out, "\"kept_from_s\":"));

    const char *text[] = {"report", g_dir, NULL};
    st_run_prog(r, "collprof", 0, NULL, text);
    assert_int_equal(WEXITSTATUS(r->status), 0);
    assert_non_null(strstr(r->out, "rotated: the oldest"));

    const char *dump[] = {"dump", g_dir, NULL};
    st_run_prog(r, "collprof", 0, NULL, dump);
    assert_int_equal(WEXITSTATUS(r->status), 0);
    assert_non_null(strstr(r->out, "cause=rotated"));
    cp_trace_dir_free(paths, n);
}

/* A value that is no size is one WARN naming the variable, and the default cap (far above
 * this job) stands: one file, every call in it. */
static void a_bad_cap_is_one_warning_and_the_default(void **state)
{
    (void)state;
    static const char *const bad[] = {"COLLPROF_MAX_MB=lots", "COLLPROF_MAX_MB=-1",
                                      "COLLPROF_MAX_MB=0.01", "COLLPROF_MAX_MB=1e99"};
    const char *argv[] = {"many", "3000", NULL};
    st_run(&g_bare, 0, NULL, argv);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        const char *env[] = {g_dir_env, bad[b], NULL};
        st_run(&g_shim, 1, env, argv);
        assert_string_equal(g_shim.out, g_bare.out);
        assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
        assert_non_null(strstr(g_shim.err, "COLLPROF_MAX_MB"));
        char **paths;
        int n = st_list(g_dir, &paths);
        assert_int_equal(n, 1);
        trace_seen t;
        assert_int_equal(st_read_trace(paths[0], &t), 0);
        assert_true(t.ncalls >= 3000);
        assert_int_equal(t.walk.lost_records, 0);
        st_free_trace(&t);
        cp_trace_dir_free(paths, n);
        st_rmtree(g_dir);
    }
}

/* 0 and unlimited mean no cap: a job past 0.125 MiB keeps one file. */
static void zero_and_unlimited_mean_no_cap(void **state)
{
    (void)state;
    static const char *const none[] = {"COLLPROF_MAX_MB=0", "COLLPROF_MAX_MB=unlimited"};
    const char *argv[] = {"many", "5000", NULL};
    for (size_t b = 0; b < sizeof none / sizeof none[0]; b++) {
        const char *env[] = {g_dir_env, none[b], NULL};
        st_run(&g_shim, 1, env, argv);
        assert_int_equal(st_count_lines(g_shim.err, "collprof:"), 0);
        char **paths;
        int n = st_list(g_dir, &paths);
        assert_int_equal(n, 1);
        struct stat st;
        assert_int_equal(stat(paths[0], &st), 0);
        assert_true((uint64_t)st.st_size > CAP_BYTES);
        cp_trace_dir_free(paths, n);
        st_rmtree(g_dir);
    }
}

/* A job that SIGTERM ends with 12,000 calls still in its ring (under half of it: the writer
 * thread is not woken, and COLLPROF_FLUSH_MS is far off): the signal's flush writes them,
 * rotating segments from inside the handler (nothing allocated there), and the newest
 * segment ends with END and the signal; the job dies by SIGTERM as it would have. */
static void a_fatal_signal_rotates_from_its_handler(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_MAX_MB=" CAP_MB, "COLLPROF_FLUSH_MS=600000", NULL};
    const char *argv[] = {"many-term", "12000", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_true(WIFSIGNALED(g_bare.status) && WTERMSIG(g_bare.status) == SIGTERM);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.out, g_bare.out);
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_true(n >= 2 && n <= (int)CP_TRACE_SEGMENTS);
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        assert_int_equal(stat(paths[i], &st), 0);
        bytes += (uint64_t)st.st_size;
    }
    assert_true(bytes <= CAP_BYTES + CAP_BYTES / CP_TRACE_SEGMENTS);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[n - 1], &t), 0);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, SIGTERM);
    assert_true(t.ncalls > 0);
    assert_int_equal(t.calls[t.ncalls - 1].seq, 12000 - 1);
    assert_true(t.walk.lost_records > 0); /* what rotation deleted, counted */
    st_free_trace(&t);
    cp_trace_dir_free(paths, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_long_job_keeps_its_newest_calls_under_the_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_bad_cap_is_one_warning_and_the_default, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(zero_and_unlimited_mean_no_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(a_fatal_signal_rotates_from_its_handler, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
