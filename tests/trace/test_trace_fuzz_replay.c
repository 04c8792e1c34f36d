/* Replays the trace reader's fuzz corpus (tests/fuzzdata/trace_reader) through the fuzz
 * target's own function, so every normal and sanitizer test run re-checks every input the
 * fuzzer ever kept or crashed on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/common/test_corpus_util.h"
#include "test_trace_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The seeds named valid-* must stay whole traces: the fuzzer starts from them. */
static void check_seed(const char *name, const char *path, const unsigned char *data,
                       size_t len, void *ctx)
{
    (void)path;
    if (strncmp(name, "valid-", 6) != 0)
        return;
    cp_walk_result res;
    tt_seen seen;
    char err[256];
    assert_int_equal(tt_walk_mem(data, len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_true(res.records > 0);
    tt_seen_free(&seen);
    (*(int *)ctx)++;
}

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    int valid = 0;
    int files = tc_replay_corpus("trace_reader", LLVMFuzzerTestOneInput, check_seed, &valid);
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
