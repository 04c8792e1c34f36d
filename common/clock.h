/* clock: the time bases of a trace.
 *
 * Events are stamped with CLOCK_MONOTONIC nanoseconds (cheap, never steps). Ranks on other
 * hosts have other monotonic clocks, so a trace also keeps anchors: MONOTONIC and REALTIME
 * read back to back, which the analyzer uses to put every rank on one time line.
 */
#ifndef COLLPROF_CLOCK_H
#define COLLPROF_CLOCK_H

#include <stdint.h>

uint64_t cp_mono_ns(void);
uint64_t cp_realtime_ns(void);

typedef struct cp_clock_anchor {
    uint64_t mono_ns;
    uint64_t realtime_ns;
} cp_clock_anchor;

/* Reads both clocks as close together as it can: the tightest of a few tries, the
 * monotonic reading taken as the midpoint of the two around the realtime read. */
cp_clock_anchor cp_clock_anchor_now(void);


/* ---- ticks: the cheapest stamp a hot path can take ----
 *
 * clock_gettime costs ~25 ns here; rdtsc ~10 ns. A recording shim reads the clock twice per
 * call, so the clock is most of its cost. Ticks are the invariant TSC where the kernel itself
 * trusts it (its clocksource is "tsc": then CLOCK_MONOTONIC is the TSC scaled, and cores agree),
 * else CLOCK_MONOTONIC ns. Ticks are turned into CLOCK_MONOTONIC ns off the hot path, by one
 * consumer holding a cp_tick_calib. */
extern int cp_ticks_are_tsc; /* set once by cp_ticks_init; 0 until then */

/* Chooses the source. `sysfs_root` is "" for the real machine (tests pass a fixture tree).
 * Safe to call more than once; not concurrently with itself. */
void cp_ticks_init(const char *sysfs_root);

static inline uint64_t cp_ticks(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(cp_ticks_are_tsc, 1)) {
        unsigned lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
    return cp_mono_ns();
}

/* Maps ticks to CLOCK_MONOTONIC ns: ns = ns_ref + (ticks - tick_ref) * ns_per_tick, with the
 * rate measured over the longest baseline seen so far (the first pair to the latest) and the
 * reference moved to the latest pair, so extrapolation never spans more than one refresh. */
typedef struct cp_tick_calib {
    uint64_t tick0, ns0;       /* the first pair */
    uint64_t tick_ref, ns_ref; /* the latest pair */
    double ns_per_tick;
} cp_tick_calib;

/* Takes the first pair and an initial rate over `settle_ns` (a short sleep; 0 for ns ticks). */
void cp_tick_calib_init(cp_tick_calib *c, uint64_t settle_ns);
/* Takes a new pair and refines the rate. Async-signal-safe. */
void cp_tick_calib_refresh(cp_tick_calib *c);
uint64_t cp_ticks_to_ns(const cp_tick_calib *c, uint64_t ticks);
uint64_t cp_tick_span_to_ns(const cp_tick_calib *c, uint64_t ticks);

#endif
