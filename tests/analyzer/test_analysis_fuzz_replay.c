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
#include "tests/common/test_corpus_util.h"
#include "tests/trace/test_trace_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seeds {
    int n;
    fa_seen most;
};

static void check_seed(const char *name, const char *path, const unsigned char *data,
                       size_t len, void *ctx)
{
    (void)path;
    (void)data;
    (void)len;
    struct seeds *sd = ctx;
    if (strncmp(name, "seed-", 5) != 0)
        return;
    if (fa_last.ranks < 2 || !fa_last.multi_rank_ops)
        fail_msg("seed %s: %zu ranks, %zu operations across ranks", name, fa_last.ranks,
                 fa_last.multi_rank_ops);
    /* a rotated trace's four segments are two processes' (the target names them so) */
    if (!strncmp(name, "seed-rotated", 12) && fa_last.ranks != 2)
        fail_msg("seed %s: %zu ranks, not its 2 processes' segments joined", name,
                 fa_last.ranks);
    sd->most.hosts += fa_last.hosts > 1;
    sd->most.hangs += fa_last.hangs;
    sd->most.mismatches += fa_last.mismatches;
    sd->most.stragglers += fa_last.stragglers;
    sd->n++;
}

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    struct seeds sd = {0};
    int files = tc_replay_corpus("analysis", LLVMFuzzerTestOneInput, check_seed, &sd);
    assert_true(sd.n >= 5);
    assert_true(files >= sd.n);
    assert_true(sd.most.hosts && sd.most.hangs && sd.most.mismatches && sd.most.stragglers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_file_goes_through_the_fuzz_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
