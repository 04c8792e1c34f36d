/* The `collprof` command's surface: help, version, verbs, options, exit codes, and what
 * happens to stdout at exit. Each test runs the built binary as a user would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "tests/cli/test_cli_util.h"

/* The real table (cli/verbs.c, linked in): a verb added there is checked here unasked. The
 * binary run below is built from the same table. */
#define NVERBS cli_nverbs
#define VERB(i) (cli_verbs[i].name)

/* Exit 2 with exactly one line on stderr that contains `needle`, nothing on stdout. */
static void assert_usage_error(const char *const *args, const char *needle)
{
    struct cli_result r;
    cli_run(&r, args);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: "));
    if (!strstr(r.err, needle))
        fail_msg("stderr '%s' does not mention '%s'", r.err, needle);
    cli_result_free(&r);
}

static void help_lists_verbs_exit_codes_and_environment(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    assert_true(cli_starts_with(r.out, "usage: collprof <command>"));
    for (size_t i = 0; i < NVERBS; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n    %-10s ", VERB(i));
        if (!strstr(r.out, line))
            fail_msg("--help does not list '%s'", VERB(i));
    }
    assert_non_null(strstr(r.out, "exit codes:"));
    assert_non_null(strstr(r.out, "    2  usage or input error"));
    assert_non_null(strstr(r.out, "COLLPROF_DIR"));
    assert_non_null(strstr(r.out, "COLLPROF_GPU_TIMING"));

    /* -h and `help` print the very same text. */
    struct cli_result h, help;
    cli_runl(&h, "-h", NULL);
    cli_runl(&help, "help", NULL);
    assert_int_equal(h.status, 0);
    assert_int_equal(help.status, 0);
    assert_string_equal(h.out, r.out);
    assert_string_equal(help.out, r.out);
    cli_result_free(&h);
    cli_result_free(&help);
    cli_result_free(&r);
}

static void no_arguments_print_the_help_and_exit_2(void **state)
{
    (void)state;
    struct cli_result r;
    const char *none[] = { NULL };
    cli_run(&r, none);
    assert_int_equal(r.status, 2);
    assert_true(cli_starts_with(r.out, "usage: collprof <command>"));
    cli_result_free(&r);
}

static void version_is_one_line(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "--version", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "collprof " COLLPROF_VERSION "\n");
    assert_string_equal(r.err, "");
    cli_result_free(&r);
}

static void every_verb_has_help_starting_with_its_usage(void **state)
{
    (void)state;
    for (size_t i = 0; i < NVERBS; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "usage: collprof %s", VERB(i));
        struct cli_result r, h, help;
        cli_runl(&r, VERB(i), "--help", NULL);
        cli_runl(&h, VERB(i), "-h", NULL);
        cli_runl(&help, "help", VERB(i), NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        if (!cli_starts_with(r.out, prefix))
            fail_msg("'%s --help' begins '%.40s'", VERB(i), r.out);
        assert_non_null(strstr(r.out, "    -h, --help"));
        assert_int_equal(h.status, 0);
        assert_string_equal(h.out, r.out);
        assert_int_equal(help.status, 0);
        assert_string_equal(help.out, r.out);
        cli_result_free(&r);
        cli_result_free(&h);
        cli_result_free(&help);
    }
}

/* The synopses are the contract's (INTERFACES.md), word for word, and each option the
 * synopsis names is described in the table below it. */
static void verb_help_shows_the_documented_options(void **state)
{
    (void)state;
    static const struct {
        const char *verb, *synopsis, *options[6];
    } expect[] = {
        { "run", "run [--dir D] [--gpu-timing M] -- CMD...", { "--dir D", "--gpu-timing M" } },
        { "report", "report [--json] [--top N] [--fail-on LIST] DIR",
          { "--json", "--top N", "--fail-on LIST", "--buckets", "--table nccl-tests" } },
        { "dump", "dump [--json] DIR|FILE", { "--json" } },
        { "view", "view DIR", { NULL } },
        { "top", "top [--once] [--json] [-d SECS]",
          { "--once", "--json", "-d SECS", "--prometheus FILE" } },
        { "export", "export --perfetto [--window T0:T1] [--ranks LIST] [--all] [-o FILE] DIR",
          { "--perfetto", "--csv", "--prometheus", "-o FILE", "--window T0:T1",
            "--format json|proto" } },
        { "selftest", "selftest [--json] [--quick] [--sizes A:B] [--ops LIST]",
          { "--json", "--quick", "--sizes A:B", "--ops LIST" } },
        { "demo", "demo [--ranks N] [--keep DIR]", { "--ranks N", "--keep DIR" } },
    };
    /* every verb of the table has its contract here, and nothing here is no verb */
    assert_int_equal(sizeof expect / sizeof expect[0], NVERBS);
    for (size_t v = 0; v < NVERBS; v++) {
        size_t i = 0;
        while (i < sizeof expect / sizeof expect[0] && strcmp(expect[i].verb, VERB(v)))
            i++;
        if (i == sizeof expect / sizeof expect[0])
            fail_msg("the verb '%s' has no synopsis in this test (INTERFACES.md's)", VERB(v));
    }
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        struct cli_result r;
        cli_runl(&r, expect[i].verb, "--help", NULL);
        char first[256];
        snprintf(first, sizeof first, "usage: collprof %s\n", expect[i].synopsis);
        if (!cli_starts_with(r.out, first))
            fail_msg("'%s --help' begins '%.80s'", expect[i].verb, r.out);
        for (size_t k = 0; k < 6 && expect[i].options[k]; k++) {
            char row[64];
            snprintf(row, sizeof row, "\n    %s ", expect[i].options[k]);
            if (!strstr(r.out, row))
                fail_msg("'%s --help' does not describe '%s'", expect[i].verb,
                         expect[i].options[k]);
        }
        cli_result_free(&r);
    }
}

static void unknown_verb_is_one_line_and_exit_2(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "frob", NULL);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.err, "collprof: 'frob' is not a collprof command. See 'collprof --help'.\n");
    assert_string_equal(r.out, "");
    cli_result_free(&r);

    cli_runl(&r, "help", "frob", NULL);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.err, "collprof: 'frob' is not a collprof command. See 'collprof --help'.\n");
    cli_result_free(&r);

    const char *global[] = { "--frob", NULL };
    assert_usage_error(global, "'--frob'");
}

static void bad_options_are_one_line_and_exit_2(void **state)
{
    (void)state;
    const char *unknown_long[] = { "dump", "--frob", "x", NULL };
    assert_usage_error(unknown_long, "collprof: dump: unknown option '--frob'");
    const char *unknown_short[] = { "report", "-x", "dir", NULL };
    assert_usage_error(unknown_short, "collprof: report: unknown option '-x'");
    const char *missing_value[] = { "report", "dir", "--top", NULL };
    assert_usage_error(missing_value, "collprof: report: missing N after --top");
    const char *missing_short_value[] = { "top", "-d", NULL };
    assert_usage_error(missing_short_value, "collprof: top: missing SECS after -d");
    const char *not_a_number[] = { "report", "--top", "ten", "dir", NULL };
    assert_usage_error(not_a_number, "bad value 'ten' for --top");
    const char *out_of_range[] = { "top", "-d", "0", NULL };
    assert_usage_error(out_of_range, "bad value '0' for -d");
    const char *flag_with_value[] = { "dump", "--json=yes", "x", NULL };
    assert_usage_error(flag_with_value, "--json takes no value");
    const char *empty_value[] = { "run", "--dir=", "--", "true", NULL };
    assert_usage_error(empty_value, "empty value for --dir");
}

static void wrong_argument_counts_are_one_line_and_exit_2(void **state)
{
    (void)state;
    const char *no_path[] = { "dump", NULL };
    assert_usage_error(no_path, "collprof: dump: missing DIR|FILE");
    const char *two_dirs[] = { "report", "a", "b", NULL };
    assert_usage_error(two_dirs, "unexpected argument 'b'");
    const char *extra[] = { "top", "extra", NULL };
    assert_usage_error(extra, "unexpected argument 'extra'");
    const char *no_cmd[] = { "run", "--dir", "d", NULL };
    assert_usage_error(no_cmd, "missing CMD...");
}

static void export_wants_exactly_one_format(void **state)
{
    (void)state;
    const char *none[] = { "export", "dir", NULL };
    assert_usage_error(none, "wants one of --perfetto, --csv, --prometheus");
    const char *two[] = { "export", "--csv", "--perfetto", "dir", NULL };
    assert_usage_error(two, "--perfetto cannot be used with --csv");
}

static void selftest_refuses_bad_sizes_and_ops(void **state)
{
    (void)state;
    const char *backwards[] = { "selftest", "--sizes", "1M:1K", NULL };
    assert_usage_error(backwards, "--sizes '1M:1K': the first size is larger than the second");
    const char *junk[] = { "selftest", "--sizes", "lots", NULL };
    assert_usage_error(junk, "--sizes wants A:B in bytes from 1 to 64G (e.g. 8:1G), got 'lots'");
    const char *huge[] = { "selftest", "--sizes", "8:128G", NULL };
    assert_usage_error(huge, "--sizes wants A:B in bytes from 1 to 64G (e.g. 8:1G), got '8:128G'");
    const char *op[] = { "selftest", "--ops", "allreduce,gossip", NULL };
    assert_usage_error(op, "--ops: unknown operation 'gossip' (all, allreduce, allgather, "
                           "reducescatter, broadcast, reduce, alltoall, sendrecv)");
    const char *empty[] = { "selftest", "--ops", "", NULL };
    assert_usage_error(empty, "empty value for --ops");
    const char *root[] = { "selftest", "--root", "/nonexistent/sys-root", NULL };
    assert_usage_error(root, "--root '/nonexistent/sys-root': not a directory");
    const char *trailing[] = { "selftest", "--ops", "allreduce,", NULL };
    assert_usage_error(trailing, "--ops: empty entry at the end of 'allreduce,'");
}

/* What follows the command belongs to the child: `run python --help` is not run's help. */
static void run_leaves_the_commands_options_alone(void **state)
{
    (void)state;
    struct cli_result r;
#ifdef CP_TEST_ASAN_RUNTIME
    /* `run` preloads an ASan-built libcollprof.so into sh: ASan's runtime must be there */
    setenv("LD_PRELOAD", CP_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#endif
    cli_runl(&r, "run", "--dir", "/nonexistent/d", "sh", "-c", "echo \"$0\"", "--help", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "--help\n");
    cli_result_free(&r);
    cli_runl(&r, "run", "--dir", "/nonexistent/d", "--", "--help", NULL);
    assert_int_equal(r.status, 127); /* no command named --help */
    cli_result_free(&r);
}

/* Options may follow the arguments, as in git: parsed, so the verb goes on to the
 * directory (which is not there). */
static void options_may_follow_arguments(void **state)
{
    (void)state;
    const char *args[] = { "report", "/nonexistent/dir", "--top=3", "--json", NULL };
    assert_usage_error(args, "collprof: report: cannot read '/nonexistent/dir'");
}

/* A full disk under stdout must not pass silently. */
static void a_full_disk_is_one_line_and_exit_2(void **state)
{
    (void)state;
    int full = open("/dev/full", O_WRONLY);
    if (full < 0)
        skip();
    static const char *const calls[][3] = {
        { "--help", NULL }, { "--version", NULL }, { "dump", "--help", NULL },
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        struct cli_result r;
        cli_run_fd(&r, full, calls[i]);
        assert_int_equal(r.status, 2);
        assert_int_equal(cli_count_lines(r.err), 1);
        assert_true(cli_starts_with(r.err, "collprof: "));
        assert_non_null(strstr(r.err, "cannot write to standard output"));
        cli_result_free(&r);
    }
    close(full);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lists_verbs_exit_codes_and_environment),
        cmocka_unit_test(no_arguments_print_the_help_and_exit_2),
        cmocka_unit_test(version_is_one_line),
        cmocka_unit_test(every_verb_has_help_starting_with_its_usage),
        cmocka_unit_test(verb_help_shows_the_documented_options),
        cmocka_unit_test(unknown_verb_is_one_line_and_exit_2),
        cmocka_unit_test(bad_options_are_one_line_and_exit_2),
        cmocka_unit_test(wrong_argument_counts_are_one_line_and_exit_2),
        cmocka_unit_test(export_wants_exactly_one_format),
        cmocka_unit_test(selftest_refuses_bad_sizes_and_ops),
        cmocka_unit_test(run_leaves_the_commands_options_alone),
        cmocka_unit_test(options_may_follow_arguments),
        cmocka_unit_test(a_full_disk_is_one_line_and_exit_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
