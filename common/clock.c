#include "common/clock.h"

#include <time.h>

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cp_mono_ns(void) { return read_ns(CLOCK_MONOTONIC); }

uint64_t cp_realtime_ns(void) { return read_ns(CLOCK_REALTIME); }

cp_clock_anchor cp_clock_anchor_now(void)
{
    /* A preemption between the two reads would skew the pair by a scheduler slice;
     * the narrowest of a few brackets bounds that error to about one clock read. */
    cp_clock_anchor best = {0, 0};
    uint64_t best_width = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = cp_mono_ns();
        uint64_t real = cp_realtime_ns();
        uint64_t after = cp_mono_ns();
        if (after - before < best_width) {
            best_width = after - before;
            best.mono_ns = before + (after - before) / 2;
            best.realtime_ns = real;
        }
    }
    return best;
}
