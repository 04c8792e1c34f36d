/* ring_call: how a CALL in a thread's ring carries what the file's CALL has no room for.
 *
 * In the ring a CALL's host time is in ticks (the writer converts it), and the plugin call
 * that times it rides along (index + 1, 0 none: no second slot a call). The record's host_ns
 * holds the ticks' low 32 bits; its host_hi word the plugin call in its low
 * CP_RING_PCALL_BITS and the ticks' next bits above: 47 bits of ticks, 7.8 hours of a 5 GHz
 * TSC (39 hours where ticks are ns). A longer call is stored as CP_RING_TICKS_MAX, which the
 * writer turns into CP_HOST_NS_MAX: that long or longer. Pure functions, for the hot path
 * (hot.h's cp_record_emit), the writer and their test.
 */
#ifndef COLLPROF_PRELOAD_RING_CALL_H
#define COLLPROF_PRELOAD_RING_CALL_H

#include <stdint.h>

#include "trace/trace_format.h"

#define CP_RING_PCALL_BITS 17 /* the plugin's pool: CP_PCALL_MAX (65536) + 1 values */
#define CP_RING_TICK_BITS (32 + 32 - CP_RING_PCALL_BITS)
#define CP_RING_TICKS_MAX ((1ull << CP_RING_TICK_BITS) - 1)

/* The span clamped to what the ring holds. */
static inline uint64_t cp_ring_ticks_clamp(uint64_t ticks)
{
    return ticks > CP_RING_TICKS_MAX ? CP_RING_TICKS_MAX : ticks;
}
/* host_ns and host_hi of a ring CALL from a clamped span and the plugin call (index + 1). */
static inline uint32_t cp_ring_host_lo(uint64_t ticks) { return (uint32_t)ticks; }
static inline uint32_t cp_ring_host_hi(uint64_t ticks, uint32_t pcall)
{
    return pcall | (uint32_t)(ticks >> 32) << CP_RING_PCALL_BITS;
}

/* The writer's side. */
static inline uint64_t cp_ring_call_ticks(const cp_rec_call *c)
{
    return (uint64_t)(c->host_hi >> CP_RING_PCALL_BITS) << 32 | c->host_ns;
}
static inline uint32_t cp_ring_call_pcall(const cp_rec_call *c)
{
    return c->host_hi & ((1u << CP_RING_PCALL_BITS) - 1);
}

#endif
