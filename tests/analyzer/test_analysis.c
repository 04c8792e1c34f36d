/* The whole analysis' process-wide setting (cpa_keep_freed_memory): malloc keeps what a
 * stage frees, from the stage after loading on. Its own program: the setting stays for the
 * rest of the process. */
#include "tests/analyzer/analyzer_job.h"

#include <malloc.h>

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
        cmocka_unit_test(test_freed_memory_is_kept_after_loading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
