/* The COLLPROF_* settings table: good values are taken, bad ones give exactly one
 * `collprof: WARN` line naming the variable and the default, and the default is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/settings.h"

/* A fake environment: "NAME=value" strings. */
static const char *fake_lookup(const char *name, void *ctx)
{
    const char *const *env = ctx;
    size_t n = strlen(name);
    for (; *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* Runs the loader with stderr captured; returns the bad-value count. */
static int load_capturing(cp_settings *s, const char *const *env, char *err, size_t errlen)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    int bad = cp_settings_load_from(s, fake_lookup, (void *)env);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, errlen - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    cp_log_set_level(CP_LOG_WARN);
    return bad;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void defaults_match_the_contract(void **state)
{
    (void)state;
    cp_settings s;
    cp_settings_defaults(&s);
    assert_string_equal(s.dir, "");
    assert_int_equal(s.enable, 1);
    /* the contract's default was events; issue 16 made it auto (docs/ARCHITECTURE.md) */
    assert_int_equal(s.gpu_timing, CP_GPU_TIMING_AUTO);
    assert_true(s.overhead_pct == 0.5);
    assert_int_equal(s.stack_depth, 8);
    assert_int_equal(s.live, 1);
    assert_string_equal(s.live_dir, "/dev/shm");
    assert_true(s.hang_s == 60.0);
    assert_int_equal(s.flush_ms, 200);
    assert_int_equal(s.buffer_mb, 16);
    assert_int_equal(s.max_bytes, 2048ull << 20);
    assert_int_equal(s.debug, CP_LOG_WARN);
}

static void good_values_are_taken(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_DIR=/tmp/x y", "COLLPROF_ENABLE=0",
                         "COLLPROF_GPU_TIMING=sample:16", "COLLPROF_STACK=0",
                         "COLLPROF_LIVE=off", "COLLPROF_LIVE_DIR=/run/cp",
                         "COLLPROF_HANG_S=2.5", "COLLPROF_FLUSH_MS=1",
                         "COLLPROF_BUFFER_MB=4096", "COLLPROF_DEBUG=trace", "COLLPROF_OVERHEAD=2.5%",
                         "COLLPROF_MAX_MB=0.25", NULL};
    cp_settings s;
    char err[4096];
    assert_int_equal(load_capturing(&s, env, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_string_equal(s.dir, "/tmp/x y");
    assert_int_equal(s.enable, 0);
    assert_int_equal(s.gpu_timing, CP_GPU_TIMING_SAMPLE);
    assert_int_equal(s.gpu_timing_sample_n, 16);
    assert_true(s.overhead_pct == 2.5);
    assert_int_equal(s.stack_depth, 0);
    assert_int_equal(s.live, 0);
    assert_string_equal(s.live_dir, "/run/cp");
    assert_true(s.hang_s == 2.5);
    assert_int_equal(s.flush_ms, 1);
    assert_int_equal(s.buffer_mb, 4096);
    assert_int_equal(s.max_bytes, 262144);
    assert_int_equal(s.debug, CP_LOG_TRACE);
    /* no cap, both ways */
    const char *none[] = {"COLLPROF_MAX_MB=unlimited", NULL}, *zero[] = {"COLLPROF_MAX_MB=0", NULL};
    assert_int_equal(load_capturing(&s, none, err, sizeof err), 0);
    assert_int_equal(s.max_bytes, 0);
    assert_int_equal(load_capturing(&s, zero, err, sizeof err), 0);
    assert_int_equal(s.max_bytes, 0);
}

static void each_bad_value_warns_once_and_keeps_the_default(void **state)
{
    (void)state;
    static struct {
        const char *env;
        const char *expect; /* in the warning */
    } cases[] = {
        {"COLLPROF_ENABLE=maybe", "COLLPROF_ENABLE='maybe' is not 0 or 1; using 1"},
        {"COLLPROF_GPU_TIMING=sample:0",
         "COLLPROF_GPU_TIMING='sample:0' is not auto, plugin, events, cupti, off"},
        {"COLLPROF_GPU_TIMING=gpu", "using auto"},
        {"COLLPROF_OVERHEAD=0", "COLLPROF_OVERHEAD='0' is not a percentage above 0"},
        {"COLLPROF_OVERHEAD=101", "using 0.5"},
        {"COLLPROF_OVERHEAD=1%x", "using 0.5"},
        {"COLLPROF_STACK=65", "COLLPROF_STACK='65' is not an integer from 0 to 64; using 8"},
        {"COLLPROF_STACK=8x", "COLLPROF_STACK='8x'"},
        {"COLLPROF_HANG_S=-1", "COLLPROF_HANG_S='-1'"},
        {"COLLPROF_HANG_S=nan", "using 60"},
        {"COLLPROF_FLUSH_MS=0", "COLLPROF_FLUSH_MS='0'"},
        {"COLLPROF_BUFFER_MB=99999999999999999999", "using 16"},
        {"COLLPROF_MAX_MB=lots", "COLLPROF_MAX_MB='lots' is not a number of MiB from 0.125"},
        {"COLLPROF_MAX_MB=0.1", "using 2048"},
        {"COLLPROF_MAX_MB=-5", "using 2048"},
        {"COLLPROF_MAX_MB=nan", "using 2048"},
        {"COLLPROF_DEBUG=loud", "COLLPROF_DEBUG='loud' is not WARN, INFO or TRACE; using WARN"},
        {"COLLPROF_LIVE=2", "COLLPROF_LIVE='2'"},
        {NULL, "is not a path shorter than 4096 bytes; using /dev/shm"}, /* long_dir below */
    };
    /* a folder no path can name (4096 bytes and more) */
    static char long_dir[4200] = "COLLPROF_LIVE_DIR=/";
    memset(long_dir + 19, 'd', sizeof long_dir - 20);
    cases[sizeof cases / sizeof cases[0] - 1].env = long_dir;
    cp_settings defaults;
    cp_settings_defaults(&defaults);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *env[] = {cases[i].env, NULL};
        cp_settings s;
        char err[4096];
        assert_int_equal(load_capturing(&s, env, err, sizeof err), 1);
        assert_int_equal(count_lines(err), 1);
        assert_true(strncmp(err, "collprof: WARN ", 15) == 0);
        if (!strstr(err, cases[i].expect))
            fail_msg("%s: warning was '%s'", cases[i].env, err);
        assert_memory_equal(&s, &defaults, sizeof s);
    }
}

static void empty_means_unset(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_STACK=", "COLLPROF_DEBUG=", NULL};
    cp_settings s, defaults;
    char err[256];
    cp_settings_defaults(&defaults);
    assert_int_equal(load_capturing(&s, env, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_memory_equal(&s, &defaults, sizeof s);
}

static void a_long_hostile_value_gives_one_bounded_line(void **state)
{
    (void)state;
    static char big[20000];
    memset(big, 'A', sizeof big - 1);
    memcpy(big, "COLLPROF_STACK=", 15);
    const char *env[] = {big, NULL};
    cp_settings s;
    char err[8192];
    assert_int_equal(load_capturing(&s, env, err, sizeof err), 1);
    assert_int_equal(count_lines(err), 1);
    assert_true(strlen(err) < 1024);
}

/* docs/ENVIRONMENT.md is generated from the same table; this keeps them from drifting. */
static void the_docs_hold_the_generated_table(void **state)
{
    (void)state;
    char *table = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&table, &len);
    cp_settings_print_help(mem, 1);
    fclose(mem);

    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/ENVIRONMENT.md", src);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open '%s'", path);
    static char doc[65536];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    if (!strstr(doc, table))
        fail_msg("docs/ENVIRONMENT.md does not hold the table that `cp_settings_print_help` "
                 "prints; regenerate it:\n%s",
                 table);
    free(table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_match_the_contract),
        cmocka_unit_test(good_values_are_taken),
        cmocka_unit_test(each_bad_value_warns_once_and_keeps_the_default),
        cmocka_unit_test(empty_means_unset),
        cmocka_unit_test(a_long_hostile_value_gives_one_bounded_line),
        cmocka_unit_test(the_docs_hold_the_generated_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
