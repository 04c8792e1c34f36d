/* ring_call: a ring CALL carries 47 bits of ticks beside the plugin call, and the writer
 * reads both back; a longer span is kept as the cap, which the file says as saturated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "preload/ring_call.h"

static cp_rec_call ring_call(uint64_t span, uint32_t pcall)
{
    cp_rec_call c = {0};
    uint64_t t = cp_ring_ticks_clamp(span);
    c.host_ns = cp_ring_host_lo(t);
    c.host_hi = cp_ring_host_hi(t, pcall);
    return c;
}

static void ticks_and_the_plugin_call_both_come_back(void **state)
{
    (void)state;
    static const uint64_t spans[] = {0, 1, UINT32_MAX - 1, UINT32_MAX, 1ull << 32,
                                     (1ull << 32) + 1, 5000000000ull * 3, /* 5 s at 3 GHz */
                                     CP_RING_TICKS_MAX - 1, CP_RING_TICKS_MAX};
    static const uint32_t pcalls[] = {0, 1, 65536, (1u << CP_RING_PCALL_BITS) - 1};
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++)
        for (size_t j = 0; j < sizeof pcalls / sizeof pcalls[0]; j++) {
            cp_rec_call c = ring_call(spans[i], pcalls[j]);
            assert_int_equal(cp_ring_call_ticks(&c), spans[i]);
            assert_int_equal(cp_ring_call_pcall(&c), pcalls[j]);
        }
}

static void a_span_past_the_ring_is_the_cap(void **state)
{
    (void)state;
    /* hours of a 5 GHz TSC fit; past 2^47 ticks, or a clock that went back (a huge
     * unsigned span), the cap */
    assert_true(CP_RING_TICKS_MAX >= 5000000000ull * 3600 * 7);
    static const uint64_t past[] = {CP_RING_TICKS_MAX + 1, 1ull << 48, UINT64_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        cp_rec_call c = ring_call(past[i], 65536);
        assert_int_equal(cp_ring_call_ticks(&c), CP_RING_TICKS_MAX);
        assert_int_equal(cp_ring_call_pcall(&c), 65536);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ticks_and_the_plugin_call_both_come_back),
        cmocka_unit_test(a_span_past_the_ring_is_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
