/* writer_pace: how long the shim's writer thread may sleep before its next tick.
 *
 * A call timed by CUDA events holds one of its context's CP_EV_PAIRS event pairs until a
 * tick of the writer gives it back, and a call that finds none is untimed (it never waits).
 * At 3 µs a call (a one-rank in-place AllReduce on an H200, or the emulation's) the pool
 * lasts 12 ms: a fixed 10 ms tick left 600-1100 of 10,104 calls untimed on the H200 and
 * 5,900 of 20,000 on the emulation. So the wait is what lets the calls, at the rate the last
 * tick saw them come, take at most an eighth of the pool; a ring half full (`wanted`) asks
 * for the next tick at once too. Pure, for the unit test.
 */
#ifndef COLLPROF_PRELOAD_WRITER_PACE_H
#define COLLPROF_PRELOAD_WRITER_PACE_H

#include <stddef.h>
#include <stdint.h>

/* ms to wait, in [1, tick_ms]: `arrived` pending calls came in the `span_ns` since the last
 * tick, `budget` of them may come before the next (an eighth of the pool). */
static inline long cp_writer_wait_ms(long tick_ms, int wanted, size_t arrived, uint64_t span_ns,
                                     size_t budget)
{
    if (wanted || tick_ms <= 1)
        return 1;
    if (!arrived || !span_ns)
        return tick_ms;
    double ms = (double)budget * (double)span_ns / 1e6 / (double)arrived;
    return ms >= (double)tick_ms ? tick_ms : ms < 1.0 ? 1 : (long)ms;
}

#endif
