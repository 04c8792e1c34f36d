/* probe_plugin: a job's own NCCL profiler plugin, standing in for Inspector or CoMMA.
 *
 * Built twice: libprobe_profiler_v5.so exports ncclProfiler_v5, libprobe_profiler_v4.so
 * (PROBE_V4) only ncclProfiler_v4. It asks for every event type its version knows, checks
 * that each event's parentObj is a handle it gave out for the parent's type (what NCCL
 * guarantees, and what collprof must keep when it forwards), and at each finalize appends one
 * line of counts to $PROBE_OUT:
 *   v=5 init=1 group_api=.. coll_api=.. group=.. coll=.. kernel_ch=.. kernel_ch_stop=..
 *   stops=.. coll_parent_ok=.. kch_parent_ok=.. finalize=1
 * PROBE_FAIL_INIT=1 makes init fail (NCCL, or collprof, must go on without it).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nccl_profiler_abi.h"

#ifdef PROBE_V4
#define PROBE_VERSION 4
typedef ncclProfilerEventDescr_v4_t descr_t;
#else
#define PROBE_VERSION 5
typedef ncclProfilerEventDescr_v5_t descr_t;
#endif

#define MAX_HANDLES (1 << 20)
static struct handle {
    unsigned type;
} g_handles[MAX_HANDLES];
static _Atomic unsigned g_nhandles;
static _Atomic unsigned long g_count[16], g_stops, g_kch_stop, g_coll_parent_ok,
    g_kch_parent_ok, g_init, g_fini;

static int type_index(unsigned t)
{
    int i = 0;
    while (t > 1 && i < 15) {
        t >>= 1;
        i++;
    }
    return i;
}

static struct handle *mine(void *h)
{
    struct handle *x = h;
    return x >= g_handles && x < g_handles + MAX_HANDLES ? x : NULL;
}

static ncclResult_t init_common(void **ctx, int *mask)
{
    atomic_fetch_add(&g_init, 1);
    if (getenv("PROBE_FAIL_INIT") && strcmp(getenv("PROBE_FAIL_INIT"), "1") == 0)
        return ncclInternalError;
    *ctx = &g_init;
    *mask = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh;
    if (PROBE_VERSION >= 5)
        *mask |= ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                 ncclProfileKernelLaunch;
    return ncclSuccess;
}

static ncclResult_t start(void *ctx, void **eh, descr_t *d)
{
    (void)ctx;
    unsigned type = (unsigned)d->type;
    atomic_fetch_add(&g_count[type_index(type)], 1);
    struct handle *parent = mine(d->parentObj);
    if (type == ncclProfileColl && parent &&
        parent->type == (PROBE_VERSION >= 5 ? (unsigned)ncclProfileCollApi
                                            : (unsigned)ncclProfileGroup))
        atomic_fetch_add(&g_coll_parent_ok, 1);
    if (type == ncclProfileKernelCh && parent && parent->type == ncclProfileColl)
        atomic_fetch_add(&g_kch_parent_ok, 1);
    unsigned i = atomic_fetch_add(&g_nhandles, 1);
    if (i >= MAX_HANDLES) {
        *eh = NULL;
        return ncclSuccess;
    }
    g_handles[i].type = type;
    *eh = &g_handles[i];
    return ncclSuccess;
}

static ncclResult_t stop(void *eh)
{
    if (mine(eh))
        atomic_fetch_add(&g_stops, 1);
    return ncclSuccess;
}

static ncclResult_t record(void *eh, ncclProfilerEventState_t s, void *args)
{
    struct handle *h = mine(eh);
    if (h && h->type == ncclProfileKernelCh && s == ncclProfilerKernelChStop && args)
        atomic_fetch_add(&g_kch_stop, 1);
    return ncclSuccess;
}

static ncclResult_t finalize(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_fini, 1);
    const char *out = getenv("PROBE_OUT");
    FILE *f = out ? fopen(out, "a") : NULL;
    if (!f)
        return ncclSuccess;
    fprintf(f,
            "v=%d init=%lu group_api=%lu coll_api=%lu group=%lu coll=%lu kernel_ch=%lu "
            "kernel_ch_stop=%lu stops=%lu coll_parent_ok=%lu kch_parent_ok=%lu finalize=%lu\n",
            PROBE_VERSION, g_init, g_count[type_index(ncclProfileGroupApi)],
            g_count[type_index(ncclProfileCollApi)], g_count[type_index(ncclProfileGroup)],
            g_count[type_index(ncclProfileColl)], g_count[type_index(ncclProfileKernelCh)],
            g_kch_stop, g_stops, g_coll_parent_ok, g_kch_parent_ok, g_fini);
    fclose(f);
    return ncclSuccess;
}

#ifdef PROBE_V4
static ncclResult_t init_v4(void **ctx, int *mask, const char *name, uint64_t hash, int nnodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)name; (void)hash; (void)nnodes; (void)nranks; (void)rank; (void)logfn;
    return init_common(ctx, mask);
}
__attribute__((visibility("default"))) ncclProfiler_v4_t ncclProfiler_v4 = {
    "probe-v4", init_v4, start, stop,
    (ncclResult_t(*)(void *, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v4_t *))record,
    finalize};
#else
static ncclResult_t init_v5(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)id; (void)name; (void)nnodes; (void)nranks; (void)rank; (void)logfn;
    return init_common(ctx, mask);
}
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    "probe-v5", init_v5, start, stop, (ncclResult_t(*)(void *, ncclProfilerEventState_t,
                                                       ncclProfilerEventStateArgs_v5_t *))record,
    finalize};
#endif
