/* Replays the NCCL log reader's fuzz corpus (tests/fuzzdata/nccl_log) through the fuzz
 * target's own function, so every normal and sanitizer test run re-checks every input the
 * fuzzer ever kept or crashed on, and shows the seeds still parse into connections. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "selftest/selftest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void every_corpus_file_goes_through_the_fuzz_target(void **state)
{
    (void)state;
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzzdata/nccl_log", src);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static uint8_t buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        print_message("replay %s (%zu bytes)\n", e->d_name, len);
        assert_int_equal(LLVMFuzzerTestOneInput(buf, len), 0);
        /* the seeds (*.log) are real logs: each must still yield connections */
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".log") == 0) {
            cps_nccl_log log;
            assert_int_equal(cps_nccl_log_parse_file(path, &log), 0);
            assert_true(log.nconns > 0);
            cps_nccl_log_free(&log);
        }
        files++;
    }
    closedir(d);
    assert_true(files >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_file_goes_through_the_fuzz_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
