/* writer_pace: the writer's wait keeps the calls, at the rate they came, within their share
 * of the event pool between two ticks, never under 1 ms nor over the tick. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "preload/writer_pace.h"

#define MS 1000000ull

static void a_fast_job_gets_short_waits(void **state)
{
    (void)state;
    /* 3 µs a call (the H200's in-place AllReduce): 3,333 calls in 10 ms, 512 may come */
    assert_int_equal(cp_writer_wait_ms(10, 0, 3333, 10 * MS, 512), 1);
    /* 100 calls a ms: 512 take 5 ms */
    assert_int_equal(cp_writer_wait_ms(10, 0, 1000, 10 * MS, 512), 5);
    /* slower than the pool's share in a tick: the tick */
    assert_int_equal(cp_writer_wait_ms(10, 0, 100, 10 * MS, 512), 10);
}

static void bounds_and_quiet(void **state)
{
    (void)state;
    assert_int_equal(cp_writer_wait_ms(10, 0, 0, 10 * MS, 512), 10);       /* nothing came */
    assert_int_equal(cp_writer_wait_ms(10, 0, 5, 0, 512), 10);             /* no span */
    assert_int_equal(cp_writer_wait_ms(10, 0, 1000000, 1 * MS, 512), 1);   /* never under 1 */
    assert_int_equal(cp_writer_wait_ms(10, 1, 0, 10 * MS, 512), 1);        /* ring half full */
    assert_int_equal(cp_writer_wait_ms(1, 0, 0, 10 * MS, 512), 1);         /* a 1 ms tick */
    assert_int_equal(cp_writer_wait_ms(200, 0, 1, 1000 * MS, 512), 200);   /* long tick */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fast_job_gets_short_waits),
        cmocka_unit_test(bounds_and_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
