/* context: primary contexts, created contexts and each thread's context stack.
 *
 * Choices where CUDA is subtle:
 *  - cuCtxCreate pushes the new context; cuCtxDestroy waits for its streams, frees its
 *    memory and pops it from the calling thread's stack if it is on top. Other threads still
 *    holding it get CUDA_ERROR_CONTEXT_IS_DESTROYED.
 *  - A primary context's last release destroys its streams and memory the same way; the
 *    handle stays usable for a later retain (which reactivates it, as the driver does).
 *  - cuCtxSetCurrent(NULL) unbinds (pops) the top; with an empty stack it binds ctx.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "emu/cuda/cuda_internal.h"

#define CTX_STACK_MAX 64

static __thread struct CUctx_st *tls_stack[CTX_STACK_MAX];
static __thread int tls_depth;

static struct CUctx_st *g_ctx_free;

int cu_ctx_valid(const struct CUctx_st *ctx)
{
    return ctx && __atomic_load_n(&ctx->magic, __ATOMIC_ACQUIRE) == CTX_MAGIC &&
           (!ctx->primary || __atomic_load_n(&ctx->refcount, __ATOMIC_ACQUIRE) > 0);
}

CUresult cu_current_ctx(struct CUctx_st **out)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0 || !tls_stack[tls_depth - 1])
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = tls_stack[tls_depth - 1];
    if (!cu_ctx_valid(c))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

void cu_bind_thread(struct CUctx_st *ctx)
{
    tls_stack[0] = ctx;
    tls_depth = 1;
}

static struct CUctx_st *ctx_alloc(int dev, int primary, unsigned flags)
{
    pthread_mutex_lock(&g_cu.mu);
    struct CUctx_st *c = g_ctx_free;
    if (c)
        g_ctx_free = c->next_free;
    pthread_mutex_unlock(&g_cu.mu);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        pthread_mutex_init(&c->mu, NULL);
    }
    static _Atomic uint32_t ids;
    c->id = atomic_fetch_add(&ids, 1) + 1;
    c->dev = dev;
    c->primary = primary;
    c->refcount = 0;
    c->flags = flags;
    c->streams = NULL;
    c->legacy = NULL;
    c->next_free = NULL;
    __atomic_store_n(&c->magic, CTX_MAGIC, __ATOMIC_RELEASE);
    return c;
}

void cu_ctx_wait_all(struct CUctx_st *ctx)
{
    /* Snapshot under the lock, wait outside it: a work function on a worker may need
     * ctx->mu. Capturing streams hold no runnable work, so waiting on them is harmless. */
    struct CUstream_st *list[256];
    int n = 0, more = 0;
    pthread_mutex_lock(&ctx->mu);
    if (ctx->legacy)
        list[n++] = ctx->legacy;
    for (struct CUstream_st *s = ctx->streams; s; s = s->next) {
        if (n < (int)(sizeof list / sizeof list[0]))
            list[n++] = s;
        else
            more = 1;
    }
    pthread_mutex_unlock(&ctx->mu);
    for (int i = 0; i < n; i++)
        cu_stream_wait_idle(list[i]);
    /* More streams than the snapshot holds is rare; walk the rest one lock at a time. */
    for (int skip = n; more; skip += n) {
        n = 0;
        more = 0;
        int i = 0;
        pthread_mutex_lock(&ctx->mu);
        for (struct CUstream_st *s = ctx->streams; s; s = s->next, i++) {
            if (i < skip)
                continue;
            if (n < (int)(sizeof list / sizeof list[0]))
                list[n++] = s;
            else
                more = 1;
        }
        pthread_mutex_unlock(&ctx->mu);
        for (int k = 0; k < n; k++)
            cu_stream_wait_idle(list[k]);
    }
}

CUresult cu_ctx_sync(struct CUctx_st *ctx)
{
    int capturing = 0;
    pthread_mutex_lock(&ctx->mu);
    for (struct CUstream_st *s = ctx->streams; s; s = s->next) {
        pthread_mutex_lock(&s->mu);
        if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
            /* Synchronising the device during capture invalidates it, as in CUDA. */
            s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            capturing = 1;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&ctx->mu);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    cu_ctx_wait_all(ctx);
    return CUDA_SUCCESS;
}

/* Waits for ctx's work, then retires its streams and frees its memory. */
static void ctx_teardown(struct CUctx_st *ctx)
{
    cu_ctx_wait_all(ctx);
    pthread_mutex_lock(&ctx->mu);
    struct CUstream_st *s = ctx->streams;
    ctx->streams = NULL;
    while (s) {
        struct CUstream_st *next = s->next;
        cu_stream_retire(s);
        s = next;
    }
    if (ctx->legacy) {
        cu_stream_retire(ctx->legacy);
        ctx->legacy = NULL;
    }
    pthread_mutex_unlock(&ctx->mu);
    cu_mem_forget_ctx(ctx);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_cu.mu);
    struct CUctx_st *c = g_cu.primary[dev];
    pthread_mutex_unlock(&g_cu.mu);
    if (!c) {
        struct CUctx_st *fresh = ctx_alloc(dev, 1, 0);
        if (!fresh)
            return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&g_cu.mu);
        if (!g_cu.primary[dev])
            g_cu.primary[dev] = fresh;
        else {
            fresh->magic = DEAD_MAGIC;
            fresh->next_free = g_ctx_free;
            g_ctx_free = fresh;
        }
        c = g_cu.primary[dev];
        pthread_mutex_unlock(&g_cu.mu);
    }
    __atomic_add_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL);
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_cu.mu);
    struct CUctx_st *c = g_cu.primary[dev];
    pthread_mutex_unlock(&g_cu.mu);
    if (!c || __atomic_load_n(&c->refcount, __ATOMIC_ACQUIRE) <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (__atomic_load_n(&c->refcount, __ATOMIC_ACQUIRE) == 1)
        ctx_teardown(c); /* while still valid, so its streams can drain */
    __atomic_sub_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL);
    return CUDA_SUCCESS;
}

/* Same signature and meaning before CUDA 11. */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

static CUresult push(struct CUctx_st *c)
{
    if (tls_depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls_stack[tls_depth++] = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
        return CUDA_ERROR_INVALID_VALUE;
    /* Execution affinity (SM partitions) and CIG have no meaning without a GPU. */
    if (ctxCreateParams &&
        (ctxCreateParams->numExecAffinityParams > 0 || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED;
    struct CUctx_st *c = ctx_alloc(dev, 0, flags);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = push(c)) != CUDA_SUCCESS) {
        cuCtxDestroy_v2(c);
        return r;
    }
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx || __atomic_load_n(&ctx->magic, __ATOMIC_ACQUIRE) != CTX_MAGIC || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(ctx);
    if (tls_depth > 0 && tls_stack[tls_depth - 1] == ctx)
        tls_depth--;
    pthread_mutex_lock(&g_cu.mu);
    __atomic_store_n(&ctx->magic, DEAD_MAGIC, __ATOMIC_RELEASE);
    ctx->next_free = g_ctx_free;
    g_ctx_free = ctx;
    pthread_mutex_unlock(&g_cu.mu);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = tls_depth > 0 ? tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx && __atomic_load_n(&ctx->magic, __ATOMIC_ACQUIRE) != CTX_MAGIC)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == 0)
        return ctx ? push(ctx) : CUDA_SUCCESS;
    if (ctx)
        tls_stack[tls_depth - 1] = ctx;
    else
        tls_depth--;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx || __atomic_load_n(&ctx->magic, __ATOMIC_ACQUIRE) != CTX_MAGIC)
        return CUDA_ERROR_INVALID_CONTEXT;
    return push(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = tls_stack[--tls_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    return cu_ctx_sync(c);
}

int cpemu_current_device(void)
{
    struct CUctx_st *c;
    return cu_current_ctx(&c) == CUDA_SUCCESS ? c->dev : -1;
}
