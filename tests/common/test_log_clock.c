/* Logging levels and line shape; clocks and their anchors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* A fixture sysfs tree whose clocksource file says `source` (NULL: no file at all). */
static void make_sysfs(char *root, size_t cap, const char *source)
{
    snprintf(root, cap, "/tmp/collprof-clk-XXXXXX");
    assert_non_null(mkdtemp(root));
    if (!source)
        return;
    char path[512];
    const char *parts[] = {"/sys", "/sys/devices", "/sys/devices/system",
                           "/sys/devices/system/clocksource",
                           "/sys/devices/system/clocksource/clocksource0"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        snprintf(path, sizeof path, "%s%s", root, parts[i]);
        mkdir(path, 0755);
    }
    snprintf(path, sizeof path, "%s%s/current_clocksource", root, parts[4]);
    FILE *f = fopen(path, "w");
    fputs(source, f);
    fclose(f);
}

static void ticks_use_the_tsc_only_where_the_kernel_does(void **state)
{
    (void)state;
    static const struct { const char *source; int tsc; } cases[] = {
        {"tsc\n", 1}, {"hpet\n", 0}, {"tsc-early\n", 0}, {"kvm-clock\n", 0}, {NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[64], cmd[128];
        make_sysfs(root, sizeof root, cases[i].source);
        cp_ticks_init(root);
#if defined(__x86_64__)
        assert_int_equal(cp_ticks_are_tsc, cases[i].tsc);
#else
        assert_int_equal(cp_ticks_are_tsc, 0);
#endif
        snprintf(cmd, sizeof cmd, "rm -rf %s", root);
        assert_int_equal(system(cmd), 0);
    }
}

/* Whatever the source, converted ticks must land on CLOCK_MONOTONIC: within 20 us of a
 * monotonic reading taken next to them, also for a stamp taken before the latest pair. */
static void ticks_convert_to_monotonic_ns(void **state)
{
    (void)state;
    for (int source = 0; source < 2; source++) {
        if (source == 0) {
            char root[64], cmd[128];
            make_sysfs(root, sizeof root, "hpet\n");
            cp_ticks_init(root);
            snprintf(cmd, sizeof cmd, "rm -rf %s", root);
            assert_int_equal(system(cmd), 0);
        } else {
            cp_ticks_init("");
        }
        cp_tick_calib c;
        cp_tick_calib_init(&c, 2000000);
        /* the tightest of a few bracketed readings: a thread preempted between the two
         * reads (the sanitizer suite on two busy cores) puts them tens of us apart */
        uint64_t early_mono = 0, early = 0, width = UINT64_MAX;
        for (int i = 0; i < 8; i++) {
            uint64_t a = cp_mono_ns(), t = cp_ticks(), b = cp_mono_ns();
            if (b - a < width) {
                width = b - a;
                early_mono = a + (b - a) / 2;
                early = t;
            }
        }
        usleep(20000);
        cp_tick_calib_refresh(&c);
        for (int i = 0; i < 3; i++) {
            uint64_t m = 0, t = 0, w = UINT64_MAX;
            for (int k = 0; k < 8; k++) { /* the tightest bracket, as above */
                uint64_t a = cp_mono_ns(), tk = cp_ticks(), b = cp_mono_ns();
                if (b - a < w) {
                    w = b - a;
                    m = a + (b - a) / 2;
                    t = tk;
                }
            }
            int64_t err = (int64_t)cp_ticks_to_ns(&c, t) - (int64_t)m;
            assert_true(err > -20000 && err < 20000);
            usleep(5000);
        }
        int64_t err = (int64_t)cp_ticks_to_ns(&c, early) - (int64_t)early_mono;
        assert_true(err > -20000 && err < 20000);
        uint64_t t0 = cp_ticks();
        usleep(10000);
        uint64_t span = cp_tick_span_to_ns(&c, cp_ticks() - t0);
        assert_true(span >= 10000000 && span < 60000000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(levels_filter_and_lines_are_prefixed),
        cmocka_unit_test(level_names_parse_both_ways),
        cmocka_unit_test(monotonic_never_goes_back_and_anchors_are_tight),
        cmocka_unit_test(ticks_use_the_tsc_only_where_the_kernel_does),
        cmocka_unit_test(ticks_convert_to_monotonic_ns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
