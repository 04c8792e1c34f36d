/* event_pool: CUDA event pairs per context, bounded, taken and returned without a lock.
 *
 * An event belongs to the context it was created in and can only be recorded on that
 * context's streams, so a process that drives several GPUs (ncclCommInitAll, one thread
 * per GPU) has one pool per context. Contexts are few: a fixed table scanned linearly
 * (the common case, one context, is one compare); a new context takes a mutex once.
 *
 * Free pairs sit in a bounded multi-producer multi-consumer queue (Vyukov's: one CAS per
 * take or return, no ABA, no allocation): user threads take, the writer returns. Pairs are
 * created on demand by the thread that finds the queue empty while the pool is below
 * CP_EV_PAIRS, in the pool's context (pushed and popped around the creation if another is
 * current, so the thread's current context is never changed). Creation only happens while
 * the pool grows to what the job keeps in flight; the steady state reuses.
 */
#include "preload/shim.h"

#include <pthread.h>
#include <stdlib.h>

struct cp_cell {
    _Atomic uint64_t seq;
    uint32_t pair;
};

struct cp_gpu_ctx {
    CUcontext ctx;
    _Atomic uint32_t created;                 /* pairs claimed for creation */
    _Atomic uint64_t enq, deq;
    struct cp_cell cells[CP_EV_PAIRS];
    CUevent start[CP_EV_PAIRS], end[CP_EV_PAIRS];
};

_Atomic uint64_t cp_untimed[CP_UNTIMED_CAUSE_LAST + 1];
static cp_gpu_ctx *_Atomic g_ctx[CP_GPU_CTX_MAX];
static _Atomic unsigned g_nctx;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

unsigned cp_gpu_ctx_count(void) { return atomic_load_explicit(&g_nctx, memory_order_acquire); }
cp_gpu_ctx *cp_gpu_ctx_at(unsigned i) { return atomic_load_explicit(&g_ctx[i], memory_order_acquire); }
CUcontext cp_gpu_ctx_handle(const cp_gpu_ctx *c) { return c->ctx; }
CUevent cp_ev_start(const cp_gpu_ctx *c, uint32_t pair) { return c->start[pair]; }
CUevent cp_ev_end(const cp_gpu_ctx *c, uint32_t pair) { return c->end[pair]; }

cp_gpu_ctx *cp_gpu_ctx_get(CUcontext ctx)
{
    unsigned n = cp_gpu_ctx_count();
    for (unsigned i = 0; i < n; i++) {
        cp_gpu_ctx *c = cp_gpu_ctx_at(i);
        if (CP_LIKELY(c->ctx == ctx))
            return c;
    }
    pthread_mutex_lock(&g_mu);
    cp_gpu_ctx *c = NULL;
    n = atomic_load_explicit(&g_nctx, memory_order_relaxed);
    for (unsigned i = 0; i < n && !c; i++)
        if (g_ctx[i]->ctx == ctx)
            c = g_ctx[i];
    if (!c && n < CP_GPU_CTX_MAX && (c = calloc(1, sizeof *c)) != NULL) {
        c->ctx = ctx;
        for (uint32_t i = 0; i < CP_EV_PAIRS; i++)
            atomic_store_explicit(&c->cells[i].seq, i, memory_order_relaxed);
        atomic_store_explicit(&g_ctx[n], c, memory_order_release);
        atomic_store_explicit(&g_nctx, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_mu);
    return c;
}

void cp_ev_pair_put(cp_gpu_ctx *c, uint32_t pair)
{
    uint64_t pos = atomic_load_explicit(&c->enq, memory_order_relaxed);
    for (;;) {
        struct cp_cell *cell = &c->cells[pos & (CP_EV_PAIRS - 1)];
        uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&c->enq, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed)) {
                cell->pair = pair;
                atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
                return;
            }
        } else if (dif < 0) {
            return; /* cannot happen: never more pairs than cells */
        } else {
            pos = atomic_load_explicit(&c->enq, memory_order_relaxed);
        }
    }
}

static int32_t take(cp_gpu_ctx *c)
{
    uint64_t pos = atomic_load_explicit(&c->deq, memory_order_relaxed);
    for (;;) {
        struct cp_cell *cell = &c->cells[pos & (CP_EV_PAIRS - 1)];
        uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - (pos + 1));
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&c->deq, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed)) {
                uint32_t pair = cell->pair;
                atomic_store_explicit(&cell->seq, pos + CP_EV_PAIRS, memory_order_release);
                return (int32_t)pair;
            }
        } else if (dif < 0) {
            return -1; /* empty */
        } else {
            pos = atomic_load_explicit(&c->deq, memory_order_relaxed);
        }
    }
}

/* Creates pair n in c's context without leaving the thread's current context changed. */
static int create_pair(cp_gpu_ctx *c, uint32_t n)
{
    CUcontext cur = NULL;
    int pushed = 0;
    if (cp_cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != c->ctx) {
        if (cp_cu.cuCtxPushCurrent(c->ctx) != CUDA_SUCCESS)
            return -1;
        pushed = 1;
    }
    int ok = cp_cu.cuEventCreate(&c->start[n], CU_EVENT_DEFAULT) == CUDA_SUCCESS;
    if (ok && cp_cu.cuEventCreate(&c->end[n], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        if (cp_cu.cuEventDestroy)
            cp_cu.cuEventDestroy(c->start[n]);
        ok = 0;
    }
    if (pushed) {
        CUcontext popped;
        cp_cu.cuCtxPopCurrent(&popped);
    }
    return ok ? 0 : -1;
}

int32_t cp_ev_pair_get(cp_gpu_ctx *c)
{
    int32_t p = take(c);
    if (CP_LIKELY(p >= 0))
        return p;
    uint32_t n = atomic_load_explicit(&c->created, memory_order_relaxed);
    while (n < CP_EV_PAIRS) {
        if (atomic_compare_exchange_weak_explicit(&c->created, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            if (create_pair(c, n) == 0)
                return (int32_t)n;
            /* The slot is spent: the pool is one pair smaller, and this call untimed. */
            break;
        }
    }
    return -1; /* the caller counts its call untimed (CP_UNTIMED_EVENT_POOL) */
}
