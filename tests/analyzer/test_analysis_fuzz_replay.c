/* Replays the analysis fuzz corpus (tests/fuzzdata/analysis) through the fuzz target's own
 * function, so every normal and sanitizer test run re-checks every input the fuzzer kept or
 * crashed on. The seeds (seed-*: real emulated jobs, their rank files back to back) must stay
 * what the fuzzer starts from: every rank loaded and operations matched across ranks; and
 * between them they must reach a hang, a mismatch, a straggler and two hosts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/analyzer/fuzz_analysis.h"
#include "tests/trace/test_trace_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzzdata/analysis", src);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0, seeds = 0;
    fa_seen most = {0};
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *data = tt_read_file(path, &len);
        assert_non_null(data);
        print_message("replay %s (%zu bytes)\n", e->d_name, len);
        assert_int_equal(LLVMFuzzerTestOneInput(data, len), 0);
        if (strncmp(e->d_name, "seed-", 5) == 0) {
            if (fa_last.ranks < 2 || !fa_last.multi_rank_ops)
                fail_msg("seed %s: %zu ranks, %zu operations across ranks", e->d_name,
                         fa_last.ranks, fa_last.multi_rank_ops);
            most.hosts += fa_last.hosts > 1;
            most.hangs += fa_last.hangs;
            most.mismatches += fa_last.mismatches;
            most.stragglers += fa_last.stragglers;
            seeds++;
        }
        free(data);
        files++;
    }
    closedir(d);
    assert_true(seeds >= 5);
    assert_true(files >= seeds);
    assert_true(most.hosts && most.hangs && most.mismatches && most.stragglers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_file_goes_through_the_fuzz_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
