/* plugin_pool: the free indices of the plugin's fixed arrays (its calls, its events), handed
 * between threads without a lock and without the job's allocator.
 *
 * A pool is a tagged lock-free stack of single indices (any thread gets and puts) plus, for
 * the calls, magazines: the one thread that frees calls (the writer) fills a magazine of
 * CP_MAG_N indices and publishes it whole; a calling thread takes a magazine with one CAS
 * and then its indices from contiguous memory with no atomic at all. The single stack made
 * a caller walk a chain of 64 links the writer had just written, one dependent cache miss a
 * call, and its top shared a line with the arrays' pointers every callback reads (perf on
 * bench_shim's plugin child: a third of the plugin's calling-thread cost).
 */
#ifndef COLLPROF_PRELOAD_PLUGIN_POOL_H
#define COLLPROF_PRELOAD_PLUGIN_POOL_H

#include <stdatomic.h>
#include <stdint.h>

#define CP_MAG_N 63 /* a magazine is 64 words: its count and 63 indices, 4 cache lines */

typedef struct cp_ipool {
    /* written by every get and put: a line of their own */
    _Alignas(64) _Atomic uint64_t top;   /* tag << 32 | (index + 1); 0 empty */
    _Atomic uint32_t fresh;              /* indices never handed out yet */
    _Alignas(64) _Atomic uint64_t mag_full;  /* tag << 32 | (magazine + 1) */
    _Alignas(64) _Atomic uint64_t mag_empty;
    _Atomic uint32_t mag_fresh;
    /* read-only once made */
    _Alignas(64) uint32_t max, nmag;
    uint32_t *next;      /* the single stack's links */
    uint32_t *mag_next;  /* the magazine stacks' links */
    uint32_t (*mags)[CP_MAG_N + 1]; /* [0] count, then indices */
    /* the freeing thread's magazine being filled: that thread only */
    _Alignas(64) uint32_t fill; /* magazine + 1, 0 none */
} cp_ipool;

/* A calling thread's magazine (in its thread-local state). */
typedef struct cp_ipool_cache {
    uint32_t mag; /* magazine + 1, 0 none */
    uint8_t pos, n;
} cp_ipool_cache;

/* Maps the pool's arrays for max indices (mmap: untouched pages cost nothing); 0 done. */
int cp_ipool_make(cp_ipool *p, uint32_t max, int with_magazines);
/* Any thread: a free index, or -1 when every one is out. *fresh: never handed out before
 * (its memory is still mmap's zeros). */
int cp_ipool_get(cp_ipool *p, int *fresh);
/* Any thread: gives an index back to the single stack. */
void cp_ipool_put(cp_ipool *p, uint32_t i);
/* A calling thread: an index from its magazine, a full one taken when it ran out, else from
 * cp_ipool_get. *next: the index the next call will get from the same magazine, -1 unknown
 * (to prefetch what it names). */
int cp_ipool_get_cached(cp_ipool *p, cp_ipool_cache *c, int *fresh, int *next);
/* The one freeing thread: an index into its magazine, published when full. */
void cp_ipool_put_batched(cp_ipool *p, uint32_t i);
/* The same thread: publishes a magazine partly filled (each writer tick), so that a job of
 * few calls does not run its pool dry with indices waiting in it. */
void cp_ipool_flush(cp_ipool *p);

#endif
