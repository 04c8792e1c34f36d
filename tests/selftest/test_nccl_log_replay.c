/* Replays the NCCL log reader's fuzz corpus (tests/fuzzdata/nccl_log) through the fuzz
 * target's own function, so every normal and sanitizer test run re-checks every input the
 * fuzzer ever kept or crashed on, and shows the seeds still parse into connections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "selftest/selftest.h"
#include "tests/common/test_corpus_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the seeds (*.log) are real logs: each must still yield connections */
static void check_seed(const char *name, const char *path, const unsigned char *data,
                       size_t len, void *ctx)
{
    (void)data;
    (void)len;
    (void)ctx;
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, ".log") == 0) {
        cps_nccl_log log;
        assert_int_equal(cps_nccl_log_parse_file(path, &log), 0);
        assert_true(log.nconns > 0);
        cps_nccl_log_free(&log);
    }
}

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    assert_true(tc_replay_corpus("nccl_log", LLVMFuzzerTestOneInput, check_seed, NULL) >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_file_goes_through_the_fuzz_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
