/* ring: the per-thread rings and the list the writer drains.
 *
 * Each recording thread owns one single-producer single-consumer ring of 64-byte slots
 * (shim.h has the inline reserve/commit). Rings are allocated once per thread, off the
 * steady state, and pushed onto a list that only ever grows; the writer walks it without a
 * lock. A thread that exits releases its ring (a pthread key destructor): the writer drains
 * what is left and the next new thread reuses it, so thread churn does not grow memory.
 *
 * Sizing within COLLPROF_BUFFER_MB: each new ring takes an eighth of what is left, between
 * 64 KiB (1024 records) and 4 MiB, rounded down to a power of two. The first threads (the
 * busy ones, in a training job) get large rings and many more threads still get one; a
 * thread that comes when the budget is spent records nothing and counts its records lost.
 */
#include "preload/shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CP_RING_MIN_BYTES (64u << 10)
#define CP_RING_MAX_BYTES (4u << 20)

_Atomic int cp_drain_wanted;
_Atomic uint64_t cp_lost_no_ring;
_Atomic uint64_t cp_lost_no_memory;
_Atomic uint64_t cp_lost_at_end;

static cp_ring *_Atomic g_head;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t g_used_bytes;

cp_ring *cp_ring_list(void) { return atomic_load_explicit(&g_head, memory_order_acquire); }

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

cp_ring *cp_ring_acquire(size_t budget_bytes)
{
    /* A released ring first: its last records are the writer's to drain, and SPSC still
     * holds, since ownership passes through the acquire/release on `owned`. */
    for (cp_ring *r = cp_ring_list(); r; r = r->next) {
        int expected = 0;
        if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&r->owned, &expected, 1,
                                                    memory_order_acquire,
                                                    memory_order_relaxed)) {
            r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
            return r;
        }
    }
    pthread_mutex_lock(&g_mu);
    size_t left = budget_bytes > g_used_bytes ? budget_bytes - g_used_bytes : 0;
    size_t want = left / 8;
    if (want > CP_RING_MAX_BYTES)
        want = CP_RING_MAX_BYTES;
    if (want < CP_RING_MIN_BYTES)
        want = left >= CP_RING_MIN_BYTES ? CP_RING_MIN_BYTES : 0;
    want = want ? pow2_floor(want) : 0;
    cp_ring *r = NULL;
    void *slots = NULL;
    if (want && (r = calloc(1, sizeof *r)) != NULL &&
        posix_memalign(&slots, CP_SLOT_BYTES, want) == 0) {
        r->slots = slots;
        r->mask = want / CP_SLOT_BYTES - 1;
        r->bytes = want;
        atomic_store_explicit(&r->owned, 1, memory_order_relaxed);
        r->next = atomic_load_explicit(&g_head, memory_order_relaxed);
        g_used_bytes += want;
        atomic_store_explicit(&g_head, r, memory_order_release);
    } else {
        free(r);
        r = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

void cp_ring_release(cp_ring *r)
{
    if (r)
        atomic_store_explicit(&r->owned, 0, memory_order_release);
}

/* Fork child: every ring is free again, the forking thread's too (its next record starts the
 * child's trace). */
static void reset_after_fork(void)
{
    pthread_mutex_init(&g_mu, NULL);
    for (cp_ring *r = cp_ring_list(); r; r = r->next) {
        /* The parent's records are the parent's: the child's file starts empty. */
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        atomic_store_explicit(&r->tail, h, memory_order_relaxed);
        r->tail_seen = h;
        uint64_t lost = atomic_load_explicit(&r->lost, memory_order_relaxed);
        r->lost_reported = lost;
        atomic_store_explicit(&r->owned, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&cp_lost_no_ring, 0, memory_order_relaxed);
    atomic_store_explicit(&cp_lost_no_memory, 0, memory_order_relaxed);
    atomic_store_explicit(&cp_lost_at_end, 0, memory_order_relaxed);
    atomic_store_explicit(&cp_drain_wanted, 0, memory_order_relaxed);
}

const cp_module cp_module_ring = {.name = "ring", .after_fork_child = reset_after_fork};
