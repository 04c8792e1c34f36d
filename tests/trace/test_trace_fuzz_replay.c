/* Replays the trace reader's fuzz corpus (tests/fuzzdata/trace_reader) through the fuzz
 * target's own function, so every normal and sanitizer test run re-checks every input the
 * fuzzer ever kept or crashed on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_trace_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzzdata/trace_reader", src);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0, valid = 0;
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
        /* The seeds named valid-* must stay whole traces: the fuzzer starts from them. */
        if (strncmp(e->d_name, "valid-", 6) == 0) {
            cp_walk_result res;
            tt_seen seen;
            char err[256];
            assert_int_equal(tt_walk_mem(data, len, &res, &seen, err, sizeof err), CP_READ_OK);
            assert_int_equal(res.stop, CP_WALK_END);
            assert_int_equal(res.corrupt_chunks, 0);
            assert_true(res.records > 0);
            tt_seen_free(&seen);
            valid++;
        }
        free(data);
        files++;
    }
    closedir(d);
    assert_true(files >= 5);
    assert_true(valid >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_file_goes_through_the_fuzz_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
