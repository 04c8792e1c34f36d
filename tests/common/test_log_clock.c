/* Logging levels and line shape; clocks and their anchors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

static void capture(void (*fn)(void), char *out, size_t cap)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn();
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static void log_at_warn(void)
{
    cp_log_set_level(CP_LOG_WARN);
    cp_warn("disk '%s' is full", "/tmp/x");
    cp_info("not shown");
    cp_trace("not shown");
}

static void log_at_trace(void)
{
    cp_log_set_level(CP_LOG_TRACE);
    cp_info("one\n");
    cp_trace("two");
    cp_log_set_level(CP_LOG_WARN);
}

static void log_long(void)
{
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cp_warn("%s", big);
}

static void levels_filter_and_lines_are_prefixed(void **state)
{
    (void)state;
    char out[8192];
    capture(log_at_warn, out, sizeof out);
    assert_string_equal(out, "collprof: WARN disk '/tmp/x' is full\n");
    capture(log_at_trace, out, sizeof out);
    assert_string_equal(out, "collprof: INFO one\ncollprof: TRACE two\n");
    capture(log_long, out, sizeof out);
    assert_true(strlen(out) <= 1024);
    assert_int_equal(out[strlen(out) - 1], '\n');
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* exactly one line */
}

static void level_names_parse_both_ways(void **state)
{
    (void)state;
    assert_int_equal(cp_log_level_parse("warn"), CP_LOG_WARN);
    assert_int_equal(cp_log_level_parse("INFO"), CP_LOG_INFO);
    assert_int_equal(cp_log_level_parse("Trace"), CP_LOG_TRACE);
    assert_int_equal(cp_log_level_parse("debug"), -1);
    assert_int_equal(cp_log_level_parse(NULL), -1);
    assert_string_equal(cp_log_level_name(CP_LOG_INFO), "INFO");
}

static void monotonic_never_goes_back_and_anchors_are_tight(void **state)
{
    (void)state;
    uint64_t last = cp_mono_ns();
    for (int i = 0; i < 100000; i++) {
        uint64_t now = cp_mono_ns();
        assert_true(now >= last);
        last = now;
    }
    cp_clock_anchor a = cp_clock_anchor_now();
    uint64_t mono = cp_mono_ns(), real = cp_realtime_ns();
    /* The pair read now and the anchor must describe the same offset to within 1 ms. */
    int64_t off_anchor = (int64_t)(a.realtime_ns - a.mono_ns);
    int64_t off_now = (int64_t)(real - mono);
    int64_t diff = off_anchor - off_now;
    assert_true(diff < 1000000 && diff > -1000000);
    assert_true(a.realtime_ns > 1600000000ull * 1000000000ull); /* after 2020 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(levels_filter_and_lines_are_prefixed),
        cmocka_unit_test(level_names_parse_both_ways),
        cmocka_unit_test(monotonic_never_goes_back_and_anchors_are_tight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
