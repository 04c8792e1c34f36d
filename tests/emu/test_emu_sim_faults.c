/* collprof-sim when the job goes wrong: a rank that never joins a collective (the emulation's
 * COLLPROF_EMU_HANG) trips every waiting rank's watchdog, each of which prints one line and
 * exits 6, and so does the launcher; an interrupted launcher passes the signal on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/emu/test_emu_sim_util.h"

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void hung_rank_trips_the_watchdog_of_the_waiting_ranks(void **state)
{
    (void)state;
    struct sim_result r;
    /* ddp issues Broadcast (seq 0), then 5 AllReduce per step: seq 5 is step 0's last */
    sim_run(&r, (const char *const[]){ "COLLPROF_EMU_HANG=3:5", NULL },
            ARGS("--launch", "4", "--pattern", "ddp", "--steps", "3", "--scale", "0.001",
                 "--timeout", "2"), 40);
    int waiting = 0;
    for (int rank = 0; rank < 3; rank++) {
        char line[256];
        snprintf(line, sizeof line, "collprof-sim: rank %d: watchdog: AllReduce on comm world "
                 "(seq 5) not done after 2 s", rank);
        waiting += sim_count_lines(r.err, line) == 1;
    }
    if (r.status != 6 || waiting != 3 || sim_count_lines(r.out, "nccl calls") != 0)
        sim_show("COLLPROF_EMU_HANG=3:5", &r);
    assert_int_equal(r.status, 6);
    assert_int_equal(waiting, 3);
    assert_int_equal(sim_count_lines(r.out, "nccl calls"), 0);
    /* the watchdog fires after 2 s, not the launcher's grace period or the test's deadline */
    assert_true(r.seconds < 15);
    sim_result_free(&r);
}

/* Nine ranks on an eight-GPU node: two share device 0, which NCCL refuses at init. */
static void two_ranks_on_one_gpu_fail_init_as_nccl_does(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL,
            ARGS("--launch", "9", "--pattern", "ddp", "--steps", "1", "--scale", "0.001",
                 "--timeout", "10"), 60);
    int dup0 = sim_count_lines(r.err, "Duplicate GPU detected : rank 0 and rank 8 both on "
                                      "CUDA device 18000");
    int dup8 = sim_count_lines(r.err, "Duplicate GPU detected : rank 8 and rank 0 both on "
                                      "CUDA device 18000");
    if (r.status == 0 || dup0 != 1 || dup8 != 1)
        sim_show("--launch 9", &r);
    assert_int_not_equal(r.status, 0);
    assert_int_equal(dup0, 1);
    assert_int_equal(dup8, 1);
    assert_int_equal(sim_count_lines(r.out, "nccl calls"), 0);
    sim_result_free(&r);
}

static void launcher_forwards_sigterm(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_result r;
    sim_start(&p, NULL, ARGS("--launch", "2", "--pattern", "tp", "--steps", "100000000",
                             "--scale", "0.001"));
    sleep(2); /* both ranks past their set-up, inside the steps */
    kill(p.pid, SIGTERM);
    sim_finish(&p, &r, 20);
    if (r.status != 128 + SIGTERM)
        sim_show("SIGTERM to --launch 2", &r);
    assert_int_equal(r.status, 128 + SIGTERM);
    assert_true(r.seconds < 10);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hung_rank_trips_the_watchdog_of_the_waiting_ranks),
        cmocka_unit_test(two_ranks_on_one_gpu_fail_init_as_nccl_does),
        cmocka_unit_test(launcher_forwards_sigterm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
