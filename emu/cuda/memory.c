/* memory: device memory is host memory (256-byte aligned, like cuMemAlloc's), tracked so
 * that frees, copies and cuMemGetInfo can be checked as the driver checks them.
 *
 * Copies and memsets are synchronous and ordered on the context's legacy stream, as the
 * driver's are for pageable host memory: they wait for the work queued before them (and,
 * through the legacy stream, for blocking streams' work) and take the model's time — PCIe
 * for host<->device, the GPU's local copy bandwidth on the device. cuMemFree waits for the
 * owning context's streams first, the implicit synchronisation real programs rely on. */
#include <stdlib.h>
#include <string.h>

#include "common/search.h"
#include "emu/cuda/cuda_internal.h"

#define ALIGN 256
#define PCIE_GBPS 25.0   /* pageable host<->device copies */
#define PCIE_ALPHA_NS 5000.0

typedef struct alloc_rec {
    uintptr_t base;
    size_t size;
    struct CUctx_st *ctx;
} alloc_rec;

static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static alloc_rec *g_allocs; /* sorted by base */
static size_t g_nallocs, g_cap;
static uint64_t g_used[CPEMU_MAX_GPUS];

/* Index of the allocation containing p, or -1. Caller holds g_mem_mu. */
static long find_locked(uintptr_t p)
{
    size_t lo;
    CP_LOWER_BOUND(lo, g_nallocs, i, g_allocs[i].base <= p);
    if (lo == 0)
        return -1;
    const alloc_rec *a = &g_allocs[lo - 1];
    return p < a->base + a->size ? (long)(lo - 1) : -1;
}

/* [p, p+n) lies inside one allocation. */
static int device_range(CUdeviceptr p, size_t n)
{
    pthread_mutex_lock(&g_mem_mu);
    long i = find_locked((uintptr_t)p);
    int ok = i >= 0 && n <= g_allocs[i].base + g_allocs[i].size - (uintptr_t)p;
    pthread_mutex_unlock(&g_mem_mu);
    return ok;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize > SIZE_MAX - ALIGN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t rounded = (bytesize + ALIGN - 1) / ALIGN * ALIGN;
    uint64_t total = g_cu.topo->gpus[g_cu.devmap[c->dev]].mem_bytes;
    pthread_mutex_lock(&g_mem_mu);
    if (g_used[c->dev] + rounded > total) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (g_nallocs == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 64;
        alloc_rec *n = realloc(g_allocs, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_mem_mu);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_allocs = n;
        g_cap = cap;
    }
    void *p = aligned_alloc(ALIGN, rounded);
    if (!p) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t i = 0;
    while (i < g_nallocs && g_allocs[i].base < (uintptr_t)p)
        i++;
    memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof *g_allocs);
    g_allocs[i] = (alloc_rec){(uintptr_t)p, rounded, c};
    g_nallocs++;
    g_used[c->dev] += rounded;
    pthread_mutex_unlock(&g_mem_mu);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static void remove_locked(size_t i)
{
    g_used[g_allocs[i].ctx->dev] -= g_allocs[i].size;
    free((void *)g_allocs[i].base);
    memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof *g_allocs);
    g_nallocs--;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS; /* as cudaFree(NULL) */
    pthread_mutex_lock(&g_mem_mu);
    long i = find_locked((uintptr_t)dptr);
    struct CUctx_st *owner = i >= 0 && g_allocs[i].base == (uintptr_t)dptr ? g_allocs[i].ctx : NULL;
    pthread_mutex_unlock(&g_mem_mu);
    if (!owner)
        return CUDA_ERROR_INVALID_VALUE;
    cu_ctx_wait_all(owner);
    pthread_mutex_lock(&g_mem_mu);
    i = find_locked((uintptr_t)dptr);
    if (i >= 0 && g_allocs[i].base == (uintptr_t)dptr)
        remove_locked((size_t)i);
    else
        r = CUDA_ERROR_INVALID_VALUE; /* freed by another thread meanwhile */
    pthread_mutex_unlock(&g_mem_mu);
    return r;
}

void cu_mem_forget_ctx(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&g_mem_mu);
    for (size_t i = g_nallocs; i-- > 0;)
        if (g_allocs[i].ctx == ctx)
            remove_locked(i);
    if (g_nallocs == 0) {
        free(g_allocs);
        g_allocs = NULL;
        g_cap = 0;
    }
    pthread_mutex_unlock(&g_mem_mu);
}

CUresult cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!freeBytes || !totalBytes)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = g_cu.topo->gpus[g_cu.devmap[c->dev]].mem_bytes;
    pthread_mutex_lock(&g_mem_mu);
    *totalBytes = (size_t)total;
    *freeBytes = (size_t)(total - g_used[c->dev]);
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

typedef struct copy_op {
    void *dst;
    const void *src;  /* NULL: a memset of `value` in `unit`-byte elements */
    size_t bytes;
    unsigned value;
    int unit;
    double model_ns;
} copy_op;

static uint64_t copy_run(void *arg, uint64_t start_ns)
{
    copy_op *op = arg;
    if (op->src) {
        memmove(op->dst, op->src, op->bytes);
    } else if (op->unit == 1) {
        memset(op->dst, (int)(op->value & 0xff), op->bytes);
    } else {
        uint32_t v = op->value;
        for (size_t i = 0; i < op->bytes / 4; i++)
            memcpy((char *)op->dst + 4 * i, &v, 4);
    }
    return start_ns + (uint64_t)op->model_ns;
}

/* Runs op on the current context's legacy stream and waits for it. */
static CUresult run_sync(copy_op *op, int host_side)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS || (r = cu_stream_resolve(NULL, &s)) != CUDA_SUCCESS)
        return r;
    const cpemu_topo *t = g_cu.topo;
    int d = g_cu.devmap[c->dev];
    if (host_side)
        op->model_ns = (double)op->bytes / PCIE_GBPS + PCIE_ALPHA_NS;
    else
        op->model_ns = (double)op->bytes / t->link_gbps[d][d] + t->link_alpha_us[d][d] * 1e3;
    if (op->bytes == 0)
        return CUDA_SUCCESS;
    cu_item *it = cu_item_new(ITEM_WORK);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->fn = copy_run;
    it->arg = op;
    if ((r = cu_stream_push(s, it, 1)) != CUDA_SUCCESS)
        return r;
    cu_stream_wait_idle(s);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!srcHost || !device_range(dstDevice, ByteCount))
        return CUDA_ERROR_INVALID_VALUE;
    copy_op op = {(void *)(uintptr_t)dstDevice, srcHost, ByteCount, 0, 0, 0};
    return run_sync(&op, 1);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dstHost || !device_range(srcDevice, ByteCount))
        return CUDA_ERROR_INVALID_VALUE;
    copy_op op = {dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, 0, 0, 0};
    return run_sync(&op, 1);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device_range(dstDevice, ByteCount) || !device_range(srcDevice, ByteCount))
        return CUDA_ERROR_INVALID_VALUE;
    copy_op op = {(void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount,
                  0, 0, 0};
    return run_sync(&op, 0);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    /* Unified addressing: either side may be host memory; the direction sets the cost. */
    int both_device = device_range(dst, ByteCount) && device_range(src, ByteCount);
    copy_op op = {(void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, 0, 0, 0};
    return run_sync(&op, !both_device);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device_range(dstDevice, N))
        return CUDA_ERROR_INVALID_VALUE;
    copy_op op = {(void *)(uintptr_t)dstDevice, NULL, N, uc, 1, 0};
    return run_sync(&op, 0);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (dstDevice % 4 != 0 || N > SIZE_MAX / 4 || !device_range(dstDevice, N * 4))
        return CUDA_ERROR_INVALID_VALUE;
    copy_op op = {(void *)(uintptr_t)dstDevice, NULL, N * 4, ui, 4, 0};
    return run_sync(&op, 0);
}
