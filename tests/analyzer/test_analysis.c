/* The whole analysis (analysis.c): each rank's time in NCCL, the union of its calls' spans
 * whatever order they come in, and the process-wide setting (cpa_keep_freed_memory) by
 * which malloc keeps what a stage frees, from the stage after loading on: its own program,
 * since the setting stays for the rest of the process, and its test last. */
#include "tests/analyzer/analyzer_job.h"

#include <malloc.h>
#include <math.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

#define BIG (64u << 20) /* over the 32 MB that glibc maps on its own whatever it has seen */

/* Whether a fresh array of BIG bytes is a mapping of its own (mallinfo2's hblks counts them). */
static int big_is_mapped(void)
{
    size_t before = mallinfo2().hblks;
    char *p = malloc(BIG);
    assert_non_null(p);
    p[0] = 1; /* used, so the compiler keeps it */
    int mapped = mallinfo2().hblks > before;
    free(p);
    return mapped;
}

/* One rank's AllReduces on a communicator of its own, timed on the GPU over spans[i] (ns
 * after BASE_NS, in file order); its time in NCCL as the analysis says. */
static double nccl_time_ns(const uint64_t (*spans)[2], int n)
{
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    for (int i = 0; i < n; i++) {
        put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, 1024, -1, BASE_NS + spans[i][0] - 10, 1);
        put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, BASE_NS + spans[i][0],
                 BASE_NS + spans[i][1]);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
    cpa_analysis a;
    char err[256] = "";
    assert_int_equal(cpa_analyze(dir, &a, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(a.model->nranks, 1);
    double ns = a.ranks[0].nccl_time_s * 1e9;
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
    return ns;
}

/* Overlapping spans count once; spans in order are joined as they come, and a span that
 * starts before the stretch so far makes the union of them all, sorted: the same length
 * either way. */
static void test_time_in_nccl_is_the_union(void **state)
{
    (void)state;
    const uint64_t in_order[][2] = {{100, 200}, {150, 300}, {400, 450}, {420, 430}};
    assert_true(fabs(nccl_time_ns(in_order, 4) - 250) < 1e-6);
    const uint64_t back[][2] = {{100, 200}, {150, 300}, {50, 80}, {420, 430}};
    assert_true(fabs(nccl_time_ns(back, 4) - 240) < 1e-6);
    const uint64_t inside[][2] = {{100, 400}, {150, 160}, {120, 130}, {390, 500}};
    assert_true(fabs(nccl_time_ns(inside, 4) - 400) < 1e-6);
}

static void test_freed_memory_is_kept_after_loading(void **state)
{
    (void)state;
#ifdef SANITIZED
    skip(); /* the sanitizer's allocator is not glibc's */
#endif
    char *dir = tt_tmpdir();
    write_job(dir);
    assert_true(big_is_mapped()); /* glibc's default */
    cpa_keep_freed_memory();
    cpa_model *m = NULL;
    char err[256] = "";
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), 0);
    assert_true(big_is_mapped()); /* the loader's arrays as before */
    cpa_analysis a;
    assert_int_equal(cpa_analyze_model(m, &a, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(a.matched.nops, N_AR + N_AG + 1);
    assert_false(big_is_mapped()); /* from the heap, */
    assert_true(mallinfo2().keepcost >= BIG); /* and kept there once freed */
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_in_nccl_is_the_union),
        cmocka_unit_test(test_freed_memory_is_kept_after_loading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
