/* profiler_plugin: libcollprof.so is also NCCL's profiler plugin.
 *
 * NCCL (2.23+) times its own kernels on the GPU and tells a profiler plugin: each channel of
 * each collective or p2p task reports its start and stop %globaltimer values, from NCCL's
 * proxy thread, with the algorithm, protocol and channel count of the task. That gives every
 * operation GPU times without a CUDA event on the calling thread (two events cost ~3.4 µs a
 * call on an H100; docs/PERFORMANCE.md). How NCCL reaches us: at load, a preloaded shim sets
 * NCCL_PROFILER_PLUGIN to its own path (cp_plugin_setup_env); NCCL dlopen's that path, which
 * is the already loaded shim, and takes ncclProfiler_v6 (2.29+), _v5 (2.28) or _v4 (2.24-27).
 *
 * Joining NCCL's events to our CALL records. With v5 and later NCCL opens a CollApi (P2pApi)
 * event on the calling thread inside ncclAllReduce (...), i.e. inside our wrapper: the
 * wrapper opens cp_tls.plug_open, and the first API event of the call makes its cp_pcall
 * (one per CALL; AlltoAll, Gather and Scatter open one API event per p2p task they become).
 * The Coll/P2p task events NCCL starts at launch (maybe at a later GroupEnd, maybe on
 * another thread) name that API event as parentObj, and each KernelCh event names its task
 * as parentObj: every GPU time reaches its CALL through pointers, with no guessing. v4 has
 * no API events: a task started inside the wrapper of an ungrouped call is that call's; a
 * grouped call on a v4 comm is left to CUDA events (gpu_timing.c).
 *
 * A cp_pcall is complete when all its API events' tasks have started and all their channels
 * stopped; the writer (gpu_poll.c) then writes NCCL_OP and DONE and gives it back after a
 * grace period (a late ProxyOp start of a chained plugin may still name its task). Captured
 * calls (CUDA graphs) are never given back: a graph launch restarts their tasks with the
 * same parentObj, long after.
 *
 * The job's own plugin. NCCL loads one plugin; if the job named another (NCCL_PROFILER_PLUGIN
 * before we replaced it, kept for children in COLLPROF_PROFILER_CHAIN, or the default
 * libnccl-profiler.so), we open it by NCCL's name rules and forward every callback to it, with
 * its handles in ours (cp_pev.chain) and parentObj translated, so Inspector or CoMMA see what
 * NCCL would have shown them. The event mask is ours OR theirs. A v4 plugin gets no API
 * events (as NCCL's v4 adapter), a v4/v5 one no copy-engine events.
 *
 * GPU clock. pTimer is the GPU's %globaltimer: nanoseconds on a clock of its own. A callback
 * comes after its moment, so (host CLOCK_MONOTONIC at the callback) - pTimer is the clock
 * offset plus the proxy's latency: its minimum over a window is the offset within the
 * smallest latency seen (µs), never early. Two windows of CP_PCLK_WINDOW_NS follow the drift
 * between the clocks. One clock per GPU (the device current when NCCL set the comm up), shared
 * by all its communicators: their samples together find the offset sooner, and a rank's times
 * on its TP, DP and world comms then share one error, which the analyzer removes as one (its
 * GPU frames, clock_gpu.c). A clock per comm had its own error each: on the emulation under
 * load a rank's TP ends came 2 ms after its peer's while its world ends agreed, and the
 * analyzer named a healthy rank a straggler. Calls timed
 * by events too (in auto mode a comm's first call, and one call a comm every window) give
 * a second upper bound each, their end event's time less their last channel's stop
 * (gpu_poll.c), tight where the proxy calls back late; the smallest bound is used.
 */

#include "preload/shim.h"
#include "preload/plugin_pool.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/log.h"
#include "abi/nccl_profiler_abi.h"
#include "common/settings.h"

#define CP_PCALL_MAX 65536u
_Static_assert(CP_PCALL_MAX < (1u << CP_RING_PCALL_BITS),
               "a ring CALL carries any plugin call index + 1 (ring_call.h)");
#define CP_PEV_MAX 65536u
#define CP_PCLK_WINDOW_NS 5000000000ull
#define CP_OUR_MASK                                                                        \
    (ncclProfileCollApi | ncclProfileP2pApi | ncclProfileColl | ncclProfileP2p |           \
     ncclProfileKernelCh)

enum pev_kind { PEV_API = 1, PEV_TASK = 2, PEV_KCH = 3 };

struct cp_pev {
    uint8_t kind;
    uint8_t embedded;     /* inside its cp_pcall: not the pool's */
    cp_pcall *call;
    void *chain;          /* the job's plugin's handle of the same event, or NULL */
    struct cp_pev *next;  /* the call's extra events, given back with it */
};
typedef struct cp_pev cp_pev;

/* A GPU's %globaltimer against this host's CLOCK_MONOTONIC. */
typedef struct cp_pclock {
    int device;                  /* CUdevice; -1 unknown (no driver, no current context) */
    _Atomic int64_t clk_min[2];  /* host - globaltimer, per window; INT64_MAX none */
    _Atomic int clk_win;
    uint64_t clk_rotated_ns;
    int64_t calib_min[2];        /* writer only: the same from calls timed both ways, per
                                  * window; INT64_MAX none */
    int64_t entry_max[2];        /* writer only: call entry - first channel start, per window;
                                  * INT64_MIN none: a lower bound of the offset */
    struct cp_pclock *next;
} cp_pclock;

typedef struct cp_pctx {
    int nranks, rank, version;
    void *chain_ctx;      /* the job's plugin's context for this comm, NULL: none */
    cp_pclock *clk;       /* its GPU's */
    uint32_t calib_pending;      /* writer only: calls timed both ways queued, not yet used */
    struct cp_pctx *next;
} cp_pctx;

struct cp_pcall {
    /* Each field has one writing thread, so a plain load and a release store do, without a
     * locked instruction: the API events come on the call's thread, the tasks of one call on
     * the one thread that launches its group, all its channels on its comm's proxy thread
     * (one per communicator in NCCL). A line for what the call's thread writes, one for its
     * two events, one for the proxy's: the proxy's channels of a call do not take the
     * caller's line away while it still works on it. */
    _Alignas(64) _Atomic uint32_t parts_expected; /* API events (tasks to come) */
    _Atomic uint32_t parts_started;  /* Coll/P2p task events started */
    _Atomic uint32_t ch_expected;    /* channels of the started tasks */
    uint32_t index;
    uint64_t nccl_seq;
    uint8_t algo, proto, nchannels, nwarps;
    uint8_t captured;                /* NCCL said graphCaptured */
    uint8_t keep;                    /* never given back: captured, or an event we lost */
    cp_pctx *ctx;
    _Atomic(cp_pev *) extra;
    _Alignas(64) cp_pev api;         /* the first of each: most calls need no other */
    cp_pev task;
    _Alignas(64) _Atomic uint32_t ch_lost; /* channels we could not follow (no event left) */
    _Atomic uint32_t ch_started, ch_stopped;
    _Atomic uint64_t gt_start;       /* earliest channel start, globaltimer; UINT64_MAX none */
    _Atomic uint64_t gt_end;         /* latest channel stop */
};

/* ---- pools: fixed arrays and their free indices (plugin_pool.c) ---- */
/* Read by every callback, written once: a line of their own (they shared one with the
 * pools' tops, which every free writes, and each free cost the next callbacks a miss). */
static struct {
    cp_pcall *calls;
    cp_pev *evs;
    int ok;
} __attribute__((aligned(64))) g_mem;
static cp_ipool g_call_pool, g_ev_pool;
static pthread_once_t g_pools_once = PTHREAD_ONCE_INIT;

static void *map_zero(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void pools_make(void)
{
    /* mmap, not malloc: untouched pages cost nothing, and the job's allocator never sees us */
    g_mem.calls = map_zero(CP_PCALL_MAX * sizeof *g_mem.calls);
    g_mem.evs = map_zero(CP_PEV_MAX * sizeof *g_mem.evs);
    g_mem.ok = g_mem.calls && g_mem.evs && cp_ipool_make(&g_call_pool, CP_PCALL_MAX, 1) == 0 &&
                 cp_ipool_make(&g_ev_pool, CP_PEV_MAX, 0) == 0;
}

static inline int is_call(const void *h)
{
    return (uintptr_t)h - (uintptr_t)g_mem.calls < CP_PCALL_MAX * sizeof *g_mem.calls;
}
static inline int is_ev(const void *h)
{
    return (uintptr_t)h - (uintptr_t)g_mem.evs < CP_PEV_MAX * sizeof *g_mem.evs;
}
/* Ours: a pool event, or an event embedded in a pool call. Anything else is the job's
 * plugin's handle that we returned as it is. */
static inline cp_pev *ours(void *h)
{
    return h && g_mem.ok && (is_ev(h) || is_call(h)) && !((uintptr_t)h & 1) ? h : NULL;
}

/* A kernel channel's handle when no plugin is chained: its call's address, odd. It needs no
 * event of its own (an allocation on the proxy thread per channel, and a line it would share
 * with no one): only the call's counters change. */
static inline void *kch_handle(cp_pcall *p) { return (char *)p + 1; }
static inline cp_pcall *kch_call(void *h)
{
    return h && ((uintptr_t)h & 1) && g_mem.ok && is_call(h)
               ? (cp_pcall *)((uintptr_t)h & ~(uintptr_t)1)
               : NULL;
}

static cp_pev *ev_new(uint8_t kind, cp_pcall *call)
{
    int fresh;
    int i = cp_ipool_get(&g_ev_pool, &fresh);
    if (i < 0)
        return NULL;
    cp_pev *e = &g_mem.evs[i];
    *e = (cp_pev){.kind = kind, .call = call};
    return e;
}

static void ev_free(cp_pev *e)
{
    if (!e->embedded)
        cp_ipool_put(&g_ev_pool, (uint32_t)(e - g_mem.evs));
}

/* ---- the job's own plugin ---- */
static struct {
    void *lib;
    int version;           /* 6, 5, 4; 0 none */
    const char *name;
    ncclProfiler_v6_t *v6; /* v5 has the same shape */
    ncclProfiler_v4_t *v4;
} g_chain;
static pthread_once_t g_chain_once = PTHREAD_ONCE_INIT;
static char g_self_path[PATH_MAX];
static int g_interposing; /* the preloaded shim, not a copy NCCL opened */

static void *open_plugin(const char *name)
{
    /* NCCL's rules (src/plugin/plugin_open.cc): the name as given, then, for a bare name
     * that is not lib*.so, libnccl-profiler-<name>.so. */
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    size_t n = strlen(name);
    if (!h && !strchr(name, '/') &&
        (strncmp(name, "lib", 3) != 0 || n < 3 || strcmp(name + n - 3, ".so") != 0)) {
        char alt[PATH_MAX];
        snprintf(alt, sizeof alt, "libnccl-profiler-%s.so", name);
        h = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
    }
    return h;
}

static void chain_load(void)
{
    const char *name = getenv("COLLPROF_PROFILER_CHAIN");
    int named = name && *name;
    if (!named)
        name = "libnccl-profiler.so"; /* what NCCL opens when nothing is named */
    if (strcasecmp(name, "none") == 0)
        return;
    void *lib = open_plugin(name);
    if (!lib) {
        if (named)
            cp_warn("the job's NCCL profiler plugin '%s' cannot be opened: %s; it gets no "
                    "events", name, dlerror());
        return;
    }
    Dl_info self, theirs;
    void *v6 = dlsym(lib, "ncclProfiler_v6"), *v5 = dlsym(lib, "ncclProfiler_v5"),
         *v4 = dlsym(lib, "ncclProfiler_v4");
    void *any = v6 ? v6 : v5 ? v5 : v4;
    /* Never chain to ourselves (a child that inherited our NCCL_PROFILER_PLUGIN). */
    if (any && dladdr((void *)chain_load, &self) && dladdr(any, &theirs) &&
        self.dli_fbase == theirs.dli_fbase)
        any = NULL;
    if (!any) {
        if (named)
            cp_warn("'%s' is no NCCL profiler plugin (no ncclProfiler_v4/v5/v6): it gets no "
                    "events", name);
        dlclose(lib);
        return;
    }
    g_chain.lib = lib;
    g_chain.name = name;
    if (v6 || v5) {
        g_chain.version = v6 ? 6 : 5;
        g_chain.v6 = v6 ? v6 : v5;
    } else {
        g_chain.version = 4;
        g_chain.v4 = v4;
    }
    cp_info("forwarding NCCL's profiler events to the job's plugin '%s' (v%d)", name,
            g_chain.version);
}

/* ---- host - globaltimer offset ---- */
static void clk_sample(cp_pclock *c, uint64_t gt)
{
    int64_t s = (int64_t)(cp_mono_ns() - gt);
    _Atomic int64_t *m = &c->clk_min[atomic_load_explicit(&c->clk_win, memory_order_relaxed)];
    int64_t cur = atomic_load_explicit(m, memory_order_relaxed);
    while (s < cur && !atomic_compare_exchange_weak_explicit(m, &cur, s, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

static cp_pctx *_Atomic g_ctxs;
static cp_pclock *_Atomic g_clocks;
static pthread_mutex_t g_clocks_lock = PTHREAD_MUTEX_INITIALIZER;

void cp_plugin_calib_queued(cp_pcall *p, int delta)
{
    p->ctx->calib_pending += (uint32_t)delta;
}

int cp_plugin_calib_waiting(cp_pcall *p) { return p->ctx->calib_pending > 0; }

void cp_plugin_note_entry(cp_pcall *p, uint64_t enter_ns, uint64_t gt)
{
    cp_pclock *c = p->ctx->clk;
    int64_t v = (int64_t)(enter_ns - gt);
    int w = atomic_load_explicit(&c->clk_win, memory_order_relaxed);
    if (v > c->entry_max[w])
        c->entry_max[w] = v;
}

void cp_plugin_calibrate(cp_pcall *p, uint64_t offset_ns)
{
    cp_pclock *c = p->ctx->clk;
    int w = atomic_load_explicit(&c->clk_win, memory_order_relaxed);
    if ((int64_t)offset_ns < c->calib_min[w])
        c->calib_min[w] = (int64_t)offset_ns;
}

int cp_plugin_clock(cp_pcall *p, uint64_t gt, uint64_t *host_ns)
{
    cp_pclock *c = p->ctx->clk;
    int64_t a = atomic_load(&c->clk_min[0]), b = atomic_load(&c->clk_min[1]);
    /* Calls that events timed too (auto mode times a comm's first call so, and one a window)
     * bound it from above as well, to the events' own error (µs): tighter than
     * the callbacks wherever the proxy is slow to call back, as on a loaded machine (the
     * callbacks' bound is off by the quickest one: µs where NCCL's proxy polls, milliseconds
     * on the emulation under load). All are upper bounds: the smallest is kept. */
    if (c->calib_min[0] < a)
        a = c->calib_min[0];
    if (c->calib_min[1] < a)
        a = c->calib_min[1];
    /* The minimum over a window: every sample is the offset plus a latency, never less, so
     * a converted time is never early and never before its call entered NCCL. (The other
     * bound, a kernel starts after its call's entry, is no estimate: for a rank whose stream
     * is always late, the GPU straggler we look for, it is off by exactly that lateness.) */
    int64_t off = a < b ? a : b;
    if (off == INT64_MAX)
        return -1;
    /* ... but never below what the calls' entries prove: a kernel starts after its call
     * entered NCCL. (An events time rests on a reference event whose own error can be early
     * by more than the end event is late.) As an estimate it would hide a GPU straggler; as
     * a floor it only keeps every start at or after its call's entry. */
    int64_t lo = c->entry_max[0] > c->entry_max[1] ? c->entry_max[0] : c->entry_max[1];
    if (lo != INT64_MIN && off < lo)
        off = lo;
    *host_ns = gt + (uint64_t)off;
    return 0;
}

void cp_plugin_tick(uint64_t now)
{
    static uint64_t wanted_at;
    if (g_mem.ok)
        cp_ipool_flush(&g_call_pool); /* the calls given back since the last tick */
    if (atomic_load_explicit(&g_ctxs, memory_order_relaxed) &&
        now - wanted_at >= CP_PCLK_WINDOW_NS) {
        wanted_at = now;
        cp_comm_want_calibration(); /* a call timed both ways in every window */
    }
    for (cp_pclock *c = atomic_load(&g_clocks); c; c = c->next) {
        if (now - c->clk_rotated_ns < CP_PCLK_WINDOW_NS)
            continue;
        /* the older window starts over; the newer one keeps serving meanwhile */
        int w = atomic_load(&c->clk_win);
        atomic_store(&c->clk_min[1 - w], INT64_MAX);
        c->calib_min[1 - w] = INT64_MAX;
        c->entry_max[1 - w] = INT64_MIN;
        atomic_store(&c->clk_win, 1 - w);
        c->clk_rotated_ns = now;
    }
}

/* ---- calls ---- */
static inline void bump(_Atomic uint32_t *v, uint32_t by)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + by,
                          memory_order_release);
}

/* A call fresh for use: what call_new and the writer's cp_pcall_free both leave. The writer
 * does it when it gives a call back, off the hot path; a never used one (mmap's zeros) gets it
 * at its first use. */
static void call_reset(cp_pcall *p, uint32_t index)
{
    atomic_store_explicit(&p->parts_expected, 0, memory_order_relaxed);
    atomic_store_explicit(&p->parts_started, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ch_expected, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ch_started, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ch_stopped, 0, memory_order_relaxed);
    atomic_store_explicit(&p->gt_start, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&p->gt_end, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ch_lost, 0, memory_order_relaxed);
    atomic_store_explicit(&p->extra, NULL, memory_order_relaxed);
    p->nccl_seq = UINT64_MAX;
    p->algo = p->proto = p->nchannels = p->nwarps = 0;
    p->captured = p->keep = 0;
    p->index = index;
    p->api = (cp_pev){.kind = PEV_API, .embedded = 1, .call = p};
    p->task = (cp_pev){.kind = PEV_TASK, .embedded = 1, .call = p};
}

static cp_pcall *call_new(cp_pctx *ctx)
{
    int fresh, next;
    int i = cp_ipool_get_cached(&g_call_pool, &cp_tls.pcall_mag, &fresh, &next);
    if (i < 0)
        return NULL;
    if (next >= 0) {
        /* the next call's lines, which the writer wrote last, on their way while NCCL and
         * the job run: its callbacks then find them here */
        __builtin_prefetch(&g_mem.calls[next], 1);
        __builtin_prefetch((char *)&g_mem.calls[next] + 64, 1);
    }
    cp_pcall *p = &g_mem.calls[i];
    if (fresh) /* never used: still mmap's zeros (the writer resets the ones it gives back) */
        call_reset(p, (uint32_t)i);
    p->ctx = ctx;
    return p;
}

/* NCCL passes its own static strings (ncclAlgoToString): a pointer seen before maps to its
 * code without comparing text. */
#define CP_NAME_CACHE 16
typedef struct name_cache {
    _Atomic(const char *) ptr[CP_NAME_CACHE];
    _Atomic uint8_t code[CP_NAME_CACHE];
} name_cache;
static name_cache g_algo_cache, g_proto_cache;

__attribute__((noinline)) static uint8_t name_code_slow(name_cache *nc, const char *s,
                                                       int (*from_name)(const char *))
{
    if (!s)
        return 0;
    for (int i = 0; i < CP_NAME_CACHE; i++) {
        const char *p = atomic_load_explicit(&nc->ptr[i], memory_order_acquire);
        if (p == s)
            return atomic_load_explicit(&nc->code[i], memory_order_relaxed);
        if (!p) {
            uint8_t code = (uint8_t)from_name(s);
            atomic_store_explicit(&nc->code[i], code, memory_order_relaxed);
            const char *expect = NULL;
            atomic_compare_exchange_strong_explicit(&nc->ptr[i], &expect, s,
                                                    memory_order_release, memory_order_relaxed);
            return code;
        }
    }
    return (uint8_t)from_name(s);
}

/* Most calls of a job use one algorithm and one protocol: the first entry, inline. */
static inline uint8_t name_code(name_cache *nc, const char *s, int (*from_name)(const char *))
{
    if (CP_LIKELY(s != NULL) && atomic_load_explicit(&nc->ptr[0], memory_order_acquire) == s)
        return atomic_load_explicit(&nc->code[0], memory_order_relaxed);
    return name_code_slow(nc, s, from_name);
}

void cp_pcall_free(cp_pcall *p)
{
    cp_pev *e = atomic_load(&p->extra);
    while (e) {
        cp_pev *n = e->next;
        ev_free(e);
        e = n;
    }
    uint32_t index = p->index;
    call_reset(p, index);
    cp_ipool_put_batched(&g_call_pool, index);
}

static void call_add_extra(cp_pcall *p, cp_pev *e)
{
    cp_pev *head = atomic_load_explicit(&p->extra, memory_order_relaxed);
    do {
        e->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&p->extra, &head, e, memory_order_release,
                                                    memory_order_relaxed));
}

cp_pcall *cp_pcall_at(uint32_t index) { return index < CP_PCALL_MAX ? &g_mem.calls[index] : NULL; }

void cp_pcall_no_task(uint32_t index)
{
    cp_pcall *p = cp_pcall_at(index);
    if (!p)
        return;
    /* parts_expected has one writer, the call's thread, which this is */
    uint32_t e = atomic_load_explicit(&p->parts_expected, memory_order_relaxed);
    if (e > 0)
        atomic_store_explicit(&p->parts_expected, e - 1, memory_order_release);
}

int cp_pcall_state(cp_pcall *p, cp_pcall_view *v)
{
    uint32_t expected = atomic_load_explicit(&p->parts_expected, memory_order_acquire);
    uint32_t started = atomic_load_explicit(&p->parts_started, memory_order_acquire);
    uint32_t ch_exp = atomic_load_explicit(&p->ch_expected, memory_order_acquire);
    uint32_t ch_stop = atomic_load_explicit(&p->ch_stopped, memory_order_acquire) +
                       atomic_load_explicit(&p->ch_lost, memory_order_acquire);
    v->ch_started = atomic_load_explicit(&p->ch_started, memory_order_acquire);
    v->ch_stopped = atomic_load_explicit(&p->ch_stopped, memory_order_relaxed);
    v->gt_start = atomic_load_explicit(&p->gt_start, memory_order_relaxed);
    v->gt_end = atomic_load_explicit(&p->gt_end, memory_order_relaxed);
    v->nccl_seq = p->nccl_seq;
    v->algo = p->algo;
    v->proto = p->proto;
    v->nchannels = p->nchannels;
    v->nwarps = p->nwarps;
    return started >= expected && ch_stop >= ch_exp;
}

/* ---- forwarding ---- */
static void *chain_parent(void *parent)
{
    cp_pev *e = ours(parent);
    return e ? e->chain : parent;
}

/* Starts the event in the job's plugin; its handle, or NULL. */
static void *chain_start(cp_pctx *c, const void *descr, uint64_t type)
{
    if (!c->chain_ctx)
        return NULL;
    void *h = NULL;
    if (g_chain.version == 4) {
        /* v4 knows neither API nor launch events (NCCL's own v4 adapter drops them) */
        if (type >= ncclProfileGroupApi)
            return NULL;
        ncclProfilerEventDescr_v4_t d4;
        memcpy(&d4, descr, sizeof d4); /* same offsets: v4's u8 type is v5's low byte */
        const ncclProfilerEventDescr_v5_t *d5 = descr;
        d4.type = (uint8_t)type;
        /* as NCCL's v4 adapter: a task's parent is its Group (a handle of theirs) */
        d4.parentObj = type == ncclProfileColl  ? d5->coll.parentGroup
                       : type == ncclProfileP2p ? d5->p2p.parentGroup
                                                : chain_parent(d5->parentObj);
        g_chain.v4->startEvent(c->chain_ctx, &h, &d4);
        return h;
    }
    if (g_chain.version == 5 && type >= ncclProfileCeColl)
        return NULL;
    ncclProfilerEventDescr_v6_t d;
    memcpy(&d, descr, sizeof d);
    d.parentObj = chain_parent(d.parentObj);
    g_chain.v6->startEvent(c->chain_ctx, &h, &d);
    return h;
}

static void chain_stop(void *h)
{
    if (!h)
        return;
    if (g_chain.version == 4)
        g_chain.v4->stopEvent(h);
    else
        g_chain.v6->stopEvent(h);
}

static void chain_state(void *h, ncclProfilerEventState_t s, void *args)
{
    if (!h)
        return;
    if (g_chain.version == 4)
        g_chain.v4->recordEventState(h, s, args);
    else
        g_chain.v6->recordEventState(h, s, args);
}

/* ---- the callbacks ---- */
/* The device NCCL is setting a comm up on: init runs with the comm's device current. */
static int current_device(void)
{
    CUdevice d;
    if (cp_cuda_load() != 0 || !cp_cu.cuCtxGetDevice || cp_cu.cuCtxGetDevice(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

/* The clock of this device, made at its first comm; never freed (a call may still name it). */
static cp_pclock *clock_of(int device)
{
    pthread_mutex_lock(&g_clocks_lock);
    cp_pclock *c = atomic_load(&g_clocks);
    while (c && c->device != device)
        c = c->next;
    if (!c && (c = calloc(1, sizeof *c)) != NULL) {
        c->device = device;
        atomic_store(&c->clk_min[0], INT64_MAX);
        atomic_store(&c->clk_min[1], INT64_MAX);
        c->calib_min[0] = c->calib_min[1] = INT64_MAX;
        c->entry_max[0] = c->entry_max[1] = INT64_MIN;
        c->clk_rotated_ns = cp_mono_ns();
        c->next = atomic_load(&g_clocks);
        atomic_store(&g_clocks, c); /* the writer's tick walks the list without the lock */
    }
    pthread_mutex_unlock(&g_clocks_lock);
    return c;
}

static cp_pctx *ctx_new(int nranks, int rank, int version)
{
    cp_pctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nranks = nranks;
    c->rank = rank;
    c->version = version;
    if (!(c->clk = clock_of(current_device()))) {
        free(c);
        return NULL;
    }
    /* Contexts are never freed: a pending call may still name one after its comm's end. */
    cp_pctx *head = atomic_load(&g_ctxs);
    do {
        c->next = head;
    } while (!atomic_compare_exchange_weak(&g_ctxs, &head, c));
    return c;
}

/* At a comm's init (often before the process's first record, which starts the rest of the
 * shim): the settings say whether we want NCCL's events at all. */
static int ours_wanted(void)
{
    if (!g_interposing || cp_mode_get() != CP_MODE_ON)
        return 0;
    int m = cp_settings_get()->gpu_timing;
    return m == CP_GPU_TIMING_AUTO || m == CP_GPU_TIMING_PLUGIN;
}

static ncclResult_t init_common(void **context, int *mask, int version, uint64_t comm_id,
                                const char *name, int nnodes, int nranks, int rank,
                                ncclDebugLogger_t logfn)
{
    /* The pools (tens of MiB of address space) only when we follow NCCL's events: a
     * plugin that only forwards to the job's own needs none. */
    int want = ours_wanted();
    if (want)
        pthread_once(&g_pools_once, pools_make);
    pthread_once(&g_chain_once, chain_load);
    cp_pctx *c = ctx_new(nranks, rank, version);
    if (!c) {
        *context = NULL;
        *mask = 0;
        return ncclSystemError; /* NCCL goes on without a profiler for this comm */
    }
    int chain_mask = 0;
    if (g_chain.version) {
        ncclResult_t r = g_chain.version == 4
                             ? g_chain.v4->init(&c->chain_ctx, &chain_mask, name, comm_id,
                                                nnodes, nranks, rank, logfn)
                             : g_chain.v6->init(&c->chain_ctx, comm_id, &chain_mask, name,
                                                nnodes, nranks, rank, logfn);
        if (r != ncclSuccess) {
            cp_warn("the job's NCCL profiler plugin '%s' failed its init (%d): it gets no "
                    "events for this communicator", g_chain.name, (int)r);
            c->chain_ctx = NULL;
            chain_mask = 0;
        }
    }
    *context = c;
    *mask = (want && g_mem.ok ? CP_OUR_MASK : 0) | chain_mask;
    return ncclSuccess;
}

static ncclResult_t init_v5(void **context, uint64_t comm_id, int *mask, const char *name,
                            int nnodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
    return init_common(context, mask, 5, comm_id, name, nnodes, nranks, rank, logfn);
}

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
                            int nnodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
    return init_common(context, mask, 4, comm_hash, name, nnodes, nranks, rank, logfn);
}

static ncclResult_t finalize(void *context)
{
    cp_pctx *c = context;
    if (c && c->chain_ctx) {
        if (g_chain.version == 4)
            g_chain.v4->finalize(c->chain_ctx);
        else
            g_chain.v6->finalize(c->chain_ctx);
        c->chain_ctx = NULL;
    }
    return ncclSuccess;
}

/* The call this thread's recording wrapper is making, made at its first API event. */
static cp_pcall *open_call(cp_pctx *c)
{
    if (!cp_tls.plug_open || !g_mem.ok)
        return NULL;
    cp_pcall *p = cp_tls.pcall;
    if (!p) {
        p = call_new(c);
        if (!p) {
            cp_untimed_count(CP_UNTIMED_PLUGIN_POOL);
            cp_tls.plug_open = 0; /* the rest of this call's events pass us by */
            return NULL;
        }
        cp_tls.pcall = p;
        cp_tls.pcall_index = (uint32_t)(p - g_mem.calls);
        cp_tls.pcall_flags = c->version == 4 ? CP_PCALL_V4 : 0;
    }
    return p;
}

__attribute__((noinline)) static void start_api(cp_pctx *c, void **h, const void *d, uint64_t type, int captured)
{
    cp_pcall *p = open_call(c);
    void *ch = chain_start(c, d, type);
    cp_pev *e = NULL;
    if (p) {
        e = atomic_load_explicit(&p->parts_expected, memory_order_relaxed) == 0
                ? &p->api
                : ev_new(PEV_API, p);
        if (!e) {
            /* an API event we cannot follow: its task would never be counted, and the
             * call's other events name it, so it stays out of the pool */
            p->keep = 1;
            cp_tls.pcall_flags |= CP_PCALL_KEEP;
            cp_tls.plug_open = 0;
        } else {
            bump(&p->parts_expected, 1);
            if (e != &p->api)
                call_add_extra(p, e);
            p->captured |= (uint8_t)captured;
            p->keep |= (uint8_t)captured;
            if (captured)
                cp_tls.pcall_flags |= CP_PCALL_CAPTURED | CP_PCALL_KEEP;
        }
    }
    if (e) {
        e->chain = ch;
        *h = e;
    } else {
        *h = ch;
    }
}

__attribute__((noinline)) static void start_task(cp_pctx *c, void **h, const ncclProfilerEventDescr_v5_t *d, int v4)
{
    void *ch = chain_start(c, d, d->type);
    cp_pev *parent = ours(d->parentObj);
    cp_pcall *p = NULL;
    if (parent && parent->kind == PEV_API) {
        p = parent->call;
    } else if (v4 && !parent && (p = open_call(c)) != NULL) {
        /* v4 has no API events: an ungrouped call's tasks start inside its own wrapper */
        bump(&p->parts_expected, 1);
    }
    cp_pev *e = NULL;
    if (p && !p->keep) {
        int first = atomic_load_explicit(&p->parts_started, memory_order_relaxed) == 0;
        e = first ? &p->task : ev_new(PEV_TASK, p);
        if (e && !first)
            call_add_extra(p, e);
    }
    if (!e) {
        *h = ch;
        return;
    }
    e->chain = ch;
    int coll = d->type == ncclProfileColl;
    uint8_t nch = coll ? d->coll.nChannels : d->p2p.nChannels;
    if (atomic_load_explicit(&p->parts_started, memory_order_relaxed) == 0) {
        if (coll) {
            p->nccl_seq = d->coll.seqNumber;
            p->algo = name_code(&g_algo_cache, d->coll.algo, cp_algo_from_name);
            p->proto = name_code(&g_proto_cache, d->coll.proto, cp_proto_from_name);
            p->nwarps = d->coll.nWarps;
        }
        p->nchannels = nch;
    } else if (nch > p->nchannels) {
        p->nchannels = nch;
    }
    /* A p2p task to the rank itself (a Send/Recv to itself out of place, an AlltoAll's,
     * Gather's or Scatter's own slice) runs in NCCL's kernel, but NCCL 2.28 gives its pair
     * no proxy op (enqueue.cc addP2pToPlan: nProxyOps = selfSend ? 0 : 2) and kernel
     * channels are reported by the proxy: none will come. On an H200 every such call
     * waited for them to the trace's end. */
    if (!coll && d->p2p.peer == d->rank)
        nch = 0;
    bump(&p->ch_expected, nch);
    bump(&p->parts_started, 1); /* after ch_expected: the writer reads them in this order */
    *h = e;
}

__attribute__((noinline)) static void start_kernel_ch(cp_pctx *c, void **h, const ncclProfilerEventDescr_v5_t *d)
{
    void *ch = chain_start(c, d, d->type);
    cp_pev *parent = ours(d->parentObj);
    cp_pcall *p = parent && parent->kind == PEV_TASK ? parent->call : NULL;
    if (!p || p->keep) {
        *h = ch;
        return;
    }
    cp_pev *e = NULL;
    if (ch && !(e = ev_new(PEV_KCH, p))) {
        /* a channel we cannot follow (the job's plugin needs its handle kept): not waited
         * for */
        bump(&p->ch_lost, 1);
        *h = ch;
        return;
    }
    if (e)
        e->chain = ch;
    uint64_t gt = d->kernelCh.pTimer;
    if (gt < atomic_load_explicit(&p->gt_start, memory_order_relaxed))
        atomic_store_explicit(&p->gt_start, gt, memory_order_relaxed);
    bump(&p->ch_started, 1);
    *h = e ? (void *)e : kch_handle(p);
}

static inline ncclResult_t start_event(void *context, void **h, ncclProfilerEventDescr_v5_t *d,
                                       int v4)
{
    cp_pctx *c = context;
    *h = NULL;
    if (!c)
        return ncclSuccess;
    /* NCCL starts its GroupApi, Group and KernelLaunch events whatever the mask asks for
     * (src/plugin/profiler.cc: a mask with Coll in it opens them): without a job's plugin
     * to pass them to, they end here */
    if (CP_LIKELY(!c->chain_ctx) && !(d->type & CP_OUR_MASK))
        return ncclSuccess;
    switch (d->type) {
    case ncclProfileCollApi:
        start_api(c, h, d, d->type, d->collApi.graphCaptured);
        break;
    case ncclProfileP2pApi:
        start_api(c, h, d, d->type, d->p2pApi.graphCaptured);
        break;
    case ncclProfileColl:
    case ncclProfileP2p:
        start_task(c, h, d, v4);
        break;
    case ncclProfileKernelCh:
        start_kernel_ch(c, h, d);
        break;
    default:
        *h = chain_start(c, d, d->type);
        break;
    }
    return ncclSuccess;
}

static ncclResult_t start_v5(void *context, void **h, ncclProfilerEventDescr_v5_t *d)
{
    return start_event(context, h, d, 0);
}

static ncclResult_t start_v6(void *context, void **h, ncclProfilerEventDescr_v6_t *d)
{
    return start_event(context, h, (ncclProfilerEventDescr_v5_t *)(void *)d, 0);
}

static ncclResult_t start_v4(void *context, void **h, ncclProfilerEventDescr_v4_t *d4)
{
    /* v4's descriptor is v5's with a one-byte type and no parentGroup: widen it */
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = d4->type;
    d.parentObj = d4->parentObj;
    d.rank = d4->rank;
    memcpy(&d.coll, &d4->coll, sizeof d4->coll);
    return start_event(context, h, &d, 1);
}

static ncclResult_t stop_event(void *h)
{
    cp_pcall *kp = kch_call(h);
    if (CP_LIKELY(!g_chain.version)) {
        /* no job's plugin: our API and task events end with their call, and a channel is an
         * odd handle (kch_handle), so only a channel's stop has anything to count */
        if (kp)
            bump(&kp->ch_stopped, 1);
        return ncclSuccess;
    }
    if (kp) {
        bump(&kp->ch_stopped, 1);
        return ncclSuccess;
    }
    cp_pev *e = ours(h);
    if (!e) {
        chain_stop(h);
        return ncclSuccess;
    }
    chain_stop(e->chain);
    if (e->kind == PEV_KCH) {
        bump(&e->call->ch_stopped, 1);
        ev_free(e);
    }
    return ncclSuccess;
}

static void kch_stop_time(cp_pcall *p, const void *args)
{
    uint64_t gt = ((const ncclProfilerEventStateArgs_v5_t *)args)->kernelCh.pTimer;
    /* one clock sample per channel, at its stop: the proxy is as late to a stop as to a
     * start, and a sample is a clock read on the proxy's thread */
    clk_sample(p->ctx->clk, gt);
    if (gt > atomic_load_explicit(&p->gt_end, memory_order_relaxed))
        atomic_store_explicit(&p->gt_end, gt, memory_order_relaxed);
}

static ncclResult_t record_state(void *h, ncclProfilerEventState_t s, void *args)
{
    cp_pcall *kp = kch_call(h);
    if (kp) {
        if (s == ncclProfilerKernelChStop && args)
            kch_stop_time(kp, args);
        return ncclSuccess;
    }
    cp_pev *e = ours(h);
    if (!e) {
        chain_state(h, s, args);
        return ncclSuccess;
    }
    if (e->kind == PEV_KCH && s == ncclProfilerKernelChStop && args)
        kch_stop_time(e->call, args);
    chain_state(e->chain, s, args);
    return ncclSuccess;
}

static ncclResult_t record_v5(void *h, ncclProfilerEventState_t s,
                              ncclProfilerEventStateArgs_v5_t *a)
{
    return record_state(h, s, a);
}

CP_EXPORT ncclProfiler_v6_t ncclProfiler_v6 = {"collprof", init_v5, start_v6, stop_event,
                                               record_v5, finalize};
CP_EXPORT ncclProfiler_v5_t ncclProfiler_v5 = {"collprof", init_v5, start_v5, stop_event,
                                               record_v5, finalize};
CP_EXPORT ncclProfiler_v4_t ncclProfiler_v4 = {"collprof", init_v4, start_v4, stop_event,
                                               record_v5, finalize};

/* ---- at load: make NCCL open us ---- */
__attribute__((constructor)) static void cp_plugin_setup_env(void)
{
    /* Only the preloaded shim: a copy NCCL itself opened as a plugin (RTLD_LOCAL, in a
     * process that does not preload us) sees NCCL's ncclAllReduce first, records nothing, and
     * must leave the environment alone. */
    g_interposing = dlsym(RTLD_DEFAULT, "ncclAllReduce") == (void *)ncclAllReduce;
    Dl_info self;
    if (!dladdr((void *)cp_plugin_setup_env, &self) || !self.dli_fname)
        return;
    if (!realpath(self.dli_fname, g_self_path))
        snprintf(g_self_path, sizeof g_self_path, "%s", self.dli_fname);
    if (!g_interposing)
        return;
    /* The settings' own parser, quietly: a bad value means its default here as at the first
     * call, which warns about it once. */
    cp_settings set;
    cp_settings_peek(&set);
    if (!set.enable)
        return;
    /* Modes that take no time from NCCL leave its plugin as the job set it. */
    if (set.gpu_timing != CP_GPU_TIMING_AUTO && set.gpu_timing != CP_GPU_TIMING_PLUGIN)
        return;
    const char *cur = getenv("NCCL_PROFILER_PLUGIN");
    char real[PATH_MAX];
    if (cur && *cur && realpath(cur, real) && strcmp(real, g_self_path) == 0)
        return; /* inherited from a parent that set it: COLLPROF_PROFILER_CHAIN came along */
    /* The process is one thread while constructors run: setenv races no getenv. */
    if (cur && *cur)
        setenv("COLLPROF_PROFILER_CHAIN", cur, 1);
    setenv("NCCL_PROFILER_PLUGIN", g_self_path, 1);
}

int cp_plugin_chained(void) { return g_chain.version != 0; }
