/* collprof-sim's command line and launcher variables: every mistake is one line on stderr
 * and exit 2, before any NCCL or driver work; --help documents what the count line counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/emu/test_emu_sim_util.h"

static void expect_usage_error(const char *const *env, const char *const *args,
                               const char *says)
{
    struct sim_result r;
    sim_run(&r, env, args, 20);
    if (r.status != 2 || sim_count_lines(r.err, NULL) != 1 || !strstr(r.err, says) || *r.out)
        sim_show(args[0] ? args[0] : "(no args)", &r);
    assert_int_equal(r.status, 2);
    assert_int_equal(sim_count_lines(r.err, NULL), 1);
    assert_true(strncmp(r.err, "collprof-sim: ", 14) == 0);
    assert_non_null(strstr(r.err, says));
    assert_string_equal(r.out, "");
    sim_result_free(&r);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void bad_flags_exit_2_with_one_line(void **state)
{
    (void)state;
    expect_usage_error(NULL, ARGS("--steps", "3"), "--pattern is required");
    expect_usage_error(NULL, ARGS("--pattern", "ddp"), "--steps is required");
    expect_usage_error(NULL, ARGS("--pattern", "dp", "--steps", "3"), "'dp' is none of");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "three"), "'three'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "-1"), "'-1'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--bogus"),
                       "unknown option '--bogus'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps"), "--steps needs a value");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--timeout", "0"),
                       "--timeout '0'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--late", "1"),
                       "--late '1'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--late", "1:x"),
                       "--late '1:x'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--mismatch", "1:2:count"),
                       "--mismatch '1:2:count'");
    expect_usage_error(NULL,
                       ARGS("--pattern", "ddp", "--steps", "1", "--mismatch", "1:2:dtype=fp7"),
                       "--mismatch '1:2:dtype=fp7'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--mismatch", "1:2:op=Send"),
                       "--mismatch '1:2:op=Send'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--launch", "0"),
                       "--launch '0'");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--launch", "2",
                                  "--launch=2"), "--launch is given twice");
    expect_usage_error(NULL, ARGS("--pattern", "ddp", "--steps", "1", "--scale", "0"),
                       "--scale '0'");
}

static void equals_forms_are_accepted(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL, ARGS("--pattern=tp", "--steps=1", "--scale=0.0001", "--timeout=30",
                           "--late=0:0", "--mismatch=5:0:redop=max"), 30);
    if (r.status != 0)
        sim_show("--flag=value", &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "rank 0: 32 nccl calls (AllReduce=32 AllGather=0 ReduceScatter=0 "
                               "Broadcast=0 Reduce=0 AlltoAll=0 Gather=0 Scatter=0 Send=0 "
                               "Recv=0)\n");
    sim_result_free(&r);
}

static void launcher_variables_are_checked(void **state)
{
    (void)state;
    const char *const *run = ARGS("--pattern", "ddp", "--steps", "1");
    expect_usage_error(((const char *const[]){ "RANK=x", "WORLD_SIZE=2", NULL }), run,
                       "RANK='x'");
    expect_usage_error(((const char *const[]){ "RANK=2", "WORLD_SIZE=2", NULL }), run,
                       "RANK=2 is not below WORLD_SIZE=2");
    expect_usage_error(((const char *const[]){ "OMPI_COMM_WORLD_RANK=1", NULL }), run,
                       "OMPI_COMM_WORLD_SIZE is not");
    expect_usage_error(((const char *const[]){ "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL }), run,
                       "Slurm says 2 ranks but there is no way to share the NCCL id");
    expect_usage_error(((const char *const[]){ "RANK=0", "WORLD_SIZE=2",
                                               "MASTER_ADDR=127.0.0.1", "MASTER_PORT=70000",
                                               NULL }),
                       run, "MASTER_PORT='70000'");
}

static void help_documents_the_count_line(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL, ARGS("--help"), 20);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "usage: collprof-sim --pattern ddp|fsdp|tp|pp|moe|mixed"));
    assert_non_null(strstr(r.out, "rank R: T nccl calls (AllReduce=.."));
    assert_non_null(strstr(r.out, "Not counted: ncclGroupStart/End"));
    assert_non_null(strstr(r.out, "--scale F"));
    assert_non_null(strstr(r.out, "6 watchdog timeout"));
    assert_string_equal(r.err, "");
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_flags_exit_2_with_one_line),
        cmocka_unit_test(equals_forms_are_accepted),
        cmocka_unit_test(launcher_variables_are_checked),
        cmocka_unit_test(help_documents_the_count_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
