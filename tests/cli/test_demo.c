/* `collprof demo`: the emulated 8-rank job with a straggler, under the shim, then the report,
 * which must name the injected straggler; the temporary trace is removed, --keep keeps it
 * and refuses a folder that already holds a trace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>
#include <time.h>

#include "tests/cli/test_cli_util.h"

static char *g_tmp;

static int setup(void **state)
{
    (void)state;
    g_tmp = cli_tmpdir();
#ifdef CP_TEST_ASAN_RUNTIME
    /* The demo preloads the ASan-built shim into the (ASan-built) collprof-sim after what the
     * caller preloads: the runtime first. */
    setenv("LD_PRELOAD", CP_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#endif
    unsetenv("COLLPROF_DIR");
    setenv("COLLPROF_LIVE_DIR", g_tmp, 1);
    /* the demo's temporary trace goes here, so the test can see it removed */
    setenv("TMPDIR", g_tmp, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cli_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

static void demo_names_its_straggler(void **state)
{
    (void)state;
    struct cli_result r;
    double t0 = now_s();
    cli_runl(&r, "demo", NULL);
    double took = now_s() - t0;
    fprintf(stderr, "collprof demo took %.1f s\n", took);
    if (r.status != 0)
        fprintf(stderr, "stdout:\n%s\nstderr:\n%s\n", r.out, r.err);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "collprof named rank 5, the rank the demo made late"));
    /* and why: the demo holds its GPU, its host is on time */
    assert_non_null(strstr(r.out, "It also told why: its host entered NCCL on time"));
    /* the report itself: the op table and the straggler table, rank 5 on top */
    assert_non_null(strstr(r.out, "AllReduce"));
    assert_non_null(strstr(r.out, "ReduceScatter"));
    assert_non_null(strstr(r.out, "collprof export --perfetto"));
    /* the temporary trace folder is gone */
    assert_int_equal(count_entries(g_tmp, "collprof-demo-"), 0);
    cli_result_free(&r);
}

static void demo_keeps_the_trace_when_asked(void **state)
{
    (void)state;
    char keep[4096];
    snprintf(keep, sizeof keep, "%s/kept trace", g_tmp); /* a space: the hints quote it */
    struct cli_result r;
    cli_runl(&r, "demo", "--ranks", "4", "--keep", keep, NULL);
    if (r.status != 0)
        fprintf(stderr, "stdout:\n%s\nstderr:\n%s\n", r.out, r.err);
    assert_int_equal(r.status, 0);
    /* four ranks: the straggler is the last one */
    assert_non_null(strstr(r.out, "collprof named rank 3"));
    assert_int_equal(count_entries(keep, "rank0000"), 4);
    char hint[4200];
    snprintf(hint, sizeof hint, "\n  collprof view '%s'\n", keep);
    assert_non_null(strstr(r.out, hint));
    cli_result_free(&r);
    /* a report of the kept trace names the same straggler */
    cli_runl(&r, "report", "--json", keep, NULL);
    assert_int_equal(r.status, 0);
    struct json_object *top = json_tokener_parse(r.out), *rows, *first, *rank;
    assert_non_null(top);
    assert_true(json_object_object_get_ex(top, "stragglers", &rows));
    assert_true(json_object_array_length(rows) >= 1);
    first = json_object_array_get_idx(rows, 0);
    assert_true(json_object_object_get_ex(first, "rank", &rank));
    assert_int_equal(json_object_get_int(rank), 3);
    json_object_put(top);
    cli_result_free(&r);
    /* the same folder again: it holds a trace now, and two jobs must not mix */
    cli_runl(&r, "demo", "--ranks", "4", "--keep", keep, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "already holds 4 trace files"));
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demo_names_its_straggler),
        cmocka_unit_test(demo_keeps_the_trace_when_asked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
