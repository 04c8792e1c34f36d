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

#endif
