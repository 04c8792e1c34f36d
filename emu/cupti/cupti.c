/* libcupti.so.13: the emulated CUPTI activity API (docs/EMULATION.md), the subset collprof's
 * COLLPROF_GPU_TIMING=cupti uses, with cupti_activity.h's signatures (abi/cupti_abi.h).
 *
 * Where records come from: the emulated driver (libcuda.so.1, already in the process, as the
 * real driver is when CUPTI is used) announces each named kernel it is asked to launch, on the
 * launching thread, and each kernel's model start and end once its stream ran it
 * (cpemu_activity_set_hooks). As the real CUPTI does:
 *   - the launch is an API record (CUPTI_ACTIVITY_KIND_DRIVER, when DRIVER or RUNTIME is
 *     enabled), preceded by one EXTERNAL_CORRELATION record per kind with an id pushed on
 *     the launching thread (cuptiActivityPushExternalCorrelationId) when that kind is
 *     enabled: without API records there are none;
 *   - the kernel is a CUpti_ActivityKernel10 record (KERNEL or CONCURRENT_KERNEL enabled)
 *     carrying the launch's correlationId, its name, device, context and stream ids;
 *   - timestamps are CLOCK_REALTIME ns (cuptiGetTimestamp's), or the clock a
 *     cuptiActivityRegisterTimestampCallback gave, the GPU's times converted when the record
 *     is made;
 *   - records wait in CUPTI's own store and reach the client only through the buffers it
 *     gives (bufferRequested), handed back full of records by bufferCompleted: when the
 *     store holds a buffer's worth, every cuptiActivityFlushPeriod ms from CUPTI's own
 *     thread, or at cuptiActivityFlushAll on the caller's thread. A NULL or too small buffer
 *     drops the records, counted by cuptiActivityGetNumDroppedRecords.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi/cupti_abi.h"
#include "abi/cupti_api_list.h"
#include "emu/common/emu_stream.h"

#define EXPORT __attribute__((visibility("default")))
#define DECLARE(ret, name, params, args) EXPORT ret name params;
CP_CUPTI_API(DECLARE)
#undef DECLARE

#define API_RECORD_SIZE 40   /* sizeof(CUpti_ActivityAPI) */
#define EXT_KINDS 8
#define EXT_DEPTH 64
#define DELIVER_AT (64u << 10) /* stored bytes that make CUPTI hand a buffer back */
#define CBID_LAUNCH_KERNEL 307 /* CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_enabled;               /* bit per CUpti_ActivityKind below 64 */
static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static _Atomic(CUpti_TimestampCallbackFunc) g_ts_fn;
/* Records not yet handed to the client, in two queues as CUPTI keeps them: the API side's
 * (API and external correlation records, made on the launching thread) and the GPU side's
 * (kernel records). A buffer holds one queue's records, and the GPU side's go first: the
 * order across the two is not promised, and a client must join them either way. */
enum { Q_API = 0, Q_GPU = 1, NQ = 2 };
static struct queue {
    uint8_t *rec;
    size_t n, cap;
} g_q[NQ];
static size_t g_dropped;
static uint32_t g_period_ms;
static pthread_t g_thread;
static int g_thread_on, g_stop;
static _Atomic uint32_t g_corr;
static pthread_mutex_t g_deliver_mu = PTHREAD_MUTEX_INITIALIZER; /* one delivery at a time */

static __thread uint64_t t_ext[EXT_KINDS][EXT_DEPTH];
static __thread int t_ext_n[EXT_KINDS];

static uint64_t now_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cupti_now(void)
{
    CUpti_TimestampCallbackFunc f = atomic_load(&g_ts_fn);
    return f ? f() : now_ns(CLOCK_REALTIME);
}

/* CUPTI's clock less CLOCK_MONOTONIC, as CUPTI relates the GPU's clock to the host's: from
 * sync points (the tightest of a few bracketed reads), kept for a second, not read anew for
 * each record (a thread preempted between two reads put one kernel 115 us before the end of
 * the one before it, under the sanitizers on a loaded machine). g_mu held. */
static int64_t g_off;
static uint64_t g_off_at; /* CLOCK_MONOTONIC of the last sync; 0 none */

static uint64_t to_cupti(uint64_t mono)
{
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    if (!g_off_at || now - g_off_at > 1000000000ull) {
        uint64_t best = UINT64_MAX;
        int64_t off = 0;
        for (int i = 0; i < 5; i++) {
            uint64_t a = now_ns(CLOCK_MONOTONIC), c = cupti_now(), b = now_ns(CLOCK_MONOTONIC);
            if (b - a < best) {
                best = b - a;
                off = (int64_t)(c - (a + (b - a) / 2));
            }
        }
        /* a sync whose every read was preempted keeps the last good one */
        if (!g_off_at || best < 20000)
            g_off = off;
        g_off_at = now;
    }
    return mono + (uint64_t)g_off;
}

static int enabled(CUpti_ActivityKind k) { return (unsigned)k < 64 && (g_enabled >> k) & 1; }

static size_t record_size(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return CP_CUPTI_KERNEL10_SIZE;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: return API_RECORD_SIZE;
    default: return 0;
    }
}

static void deliver(int all);

/* Stores one record in queue q (g_mu held); 0, or -1 when memory ran out (counted
 * dropped). */
static int store(int q, const void *rec, size_t len)
{
    struct queue *Q = &g_q[q];
    if (Q->n + len > Q->cap) {
        size_t cap = Q->cap ? 2 * Q->cap : 256u << 10;
        while (cap < Q->n + len)
            cap *= 2;
        uint8_t *p = realloc(Q->rec, cap);
        if (!p) {
            g_dropped++;
            return -1;
        }
        Q->rec = p;
        Q->cap = cap;
    }
    memcpy(Q->rec + Q->n, rec, len);
    Q->n += len;
    return 0;
}

static void *period_main(void *arg);
static int g_kick; /* a queue holds a buffer's worth: CUPTI's thread hands it over */

/* CUPTI's own thread, started on first need (g_mu held). */
static void thread_on(void)
{
    if (!g_thread_on) {
        g_stop = 0;
        g_thread_on = pthread_create(&g_thread, NULL, period_main, NULL) == 0;
    }
}

/* A queue that holds a buffer's worth goes to the client from CUPTI's thread, never from the
 * launching thread or the stream's worker that made the record. */
static void maybe_deliver(void)
{
    pthread_mutex_lock(&g_mu);
    if (g_q[Q_API].n >= DELIVER_AT || g_q[Q_GPU].n >= DELIVER_AT) {
        g_kick = 1;
        thread_on();
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
}

static uint32_t on_launch(const char *name)
{
    (void)name;
    uint32_t corr = atomic_fetch_add(&g_corr, 1) + 1;
    pthread_mutex_lock(&g_mu);
    int api = enabled(CUPTI_ACTIVITY_KIND_DRIVER) || enabled(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (api && enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
        for (int k = 0; k < EXT_KINDS; k++) {
            if (!t_ext_n[k])
                continue;
            CUpti_ActivityExternalCorrelation x = {
                .kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                .externalKind = (CUpti_ExternalCorrelationKind)k,
                .externalId = t_ext[k][t_ext_n[k] - 1],
                .correlationId = corr};
            store(Q_API, &x, sizeof x);
        }
    }
    if (api) {
        /* CUpti_ActivityAPI: kind, cbid, start, end, processId, threadId, correlationId,
         * returnValue; the launch takes no time here */
        uint8_t a[API_RECORD_SIZE] = {0};
        uint32_t kind = enabled(CUPTI_ACTIVITY_KIND_DRIVER) ? CUPTI_ACTIVITY_KIND_DRIVER
                                                            : CUPTI_ACTIVITY_KIND_RUNTIME;
        uint32_t cbid = CBID_LAUNCH_KERNEL;
        uint64_t t = cupti_now();
        memcpy(a, &kind, 4);
        memcpy(a + 4, &cbid, 4);
        memcpy(a + 8, &t, 8);
        memcpy(a + 16, &t, 8);
        memcpy(a + 32, &corr, 4);
        store(Q_API, a, sizeof a);
    }
    int kernels = enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
                  enabled(CUPTI_ACTIVITY_KIND_KERNEL);
    pthread_mutex_unlock(&g_mu);
    maybe_deliver();
    return kernels ? corr : 0;
}

static void on_done(uint32_t corr, const char *name, uint64_t start, uint64_t end,
                    uint32_t device, uint32_t context_id, uint32_t stream_id)
{
    if (!corr)
        return;
    union {
        cp_cupti_kernel_head h;
        uint8_t bytes[CP_CUPTI_KERNEL10_SIZE];
    } k;
    memset(&k, 0, sizeof k);
    pthread_mutex_lock(&g_mu);
    k.h.kind = enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                   ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                   : CUPTI_ACTIVITY_KIND_KERNEL;
    k.h.start = to_cupti(start);
    k.h.end = to_cupti(end);
    k.h.completed = k.h.end;
    k.h.deviceId = device;
    k.h.contextId = context_id;
    k.h.streamId = stream_id;
    k.h.gridX = k.h.gridY = k.h.gridZ = 1;
    k.h.blockX = 512;
    k.h.blockY = k.h.blockZ = 1;
    k.h.correlationId = corr;
    k.h.gridId = corr;
    k.h.name = name;
    store(Q_GPU, &k, sizeof k);
    pthread_mutex_unlock(&g_mu);
    maybe_deliver();
}

static const cpemu_activity_hooks g_hooks = {on_launch, on_done};

/* Hands the stored records to the client, a buffer at a time and a queue at a time (the
 * GPU side's first): when they fill one (all = 0), or every one (all). On the calling
 * thread; the callbacks are called without g_mu. */
static void deliver(int all)
{
    pthread_mutex_lock(&g_deliver_mu);
    for (int q = Q_GPU; q >= Q_API; q--) {
        struct queue *Q = &g_q[q];
        for (;;) {
            pthread_mutex_lock(&g_mu);
            CUpti_BuffersCallbackRequestFunc req = g_request;
            CUpti_BuffersCallbackCompleteFunc done = g_complete;
            size_t have = Q->n;
            pthread_mutex_unlock(&g_mu);
            if (!req || !done || have == 0 || (!all && have < DELIVER_AT))
                break;
            uint8_t *buf = NULL;
            size_t size = 0, max_records = 0;
            req(&buf, &size, &max_records);
            pthread_mutex_lock(&g_mu);
            size_t used = 0, n = 0;
            while (used < Q->n) {
                CUpti_ActivityKind k;
                memcpy(&k, Q->rec + used, sizeof k);
                size_t len = record_size(k);
                if (!buf || used + len > size || (max_records && n == max_records))
                    break;
                used += len;
                n++;
            }
            size_t valid = 0;
            if (buf && used) {
                memcpy(buf, Q->rec, used);
                valid = used;
            } else {
                /* no room at all: the records are lost, as CUPTI drops them */
                for (size_t off = 0; off < Q->n; g_dropped++) {
                    CUpti_ActivityKind k;
                    memcpy(&k, Q->rec + off, sizeof k);
                    off += record_size(k);
                }
                used = Q->n;
            }
            memmove(Q->rec, Q->rec + used, Q->n - used);
            Q->n -= used;
            pthread_mutex_unlock(&g_mu);
            if (buf)
                done(NULL, 0, buf, size, valid);
        }
    }
    pthread_mutex_unlock(&g_deliver_mu);
}

static void *period_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_stop) {
        if (g_kick) {
            g_kick = 0;
            pthread_mutex_unlock(&g_mu);
            deliver(0);
            pthread_mutex_lock(&g_mu);
            continue;
        }
        uint32_t ms = g_period_ms;
        if (!ms) {
            pthread_cond_wait(&g_cv, &g_mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
        if (g_stop || g_kick)
            continue;
        pthread_mutex_unlock(&g_mu);
        deliver(1);
        pthread_mutex_lock(&g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* The driver's hooks, from the libcuda.so.1 in the process; 0 when it has none. */
static int hook_driver(const cpemu_activity_hooks *h)
{
    void (*set)(const cpemu_activity_hooks *) =
        (void (*)(const cpemu_activity_hooks *))dlsym(RTLD_DEFAULT, "cpemu_activity_set_hooks");
    if (!set) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (lib)
            set = (void (*)(const cpemu_activity_hooks *))dlsym(lib, "cpemu_activity_set_hooks");
    }
    if (!set)
        return 0;
    set(h);
    return 1;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_QUEUE_EMPTY: *str = "CUPTI_ERROR_QUEUE_EMPTY"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *timestamp = cupti_now();
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (!record_size(kind))
        return CUPTI_ERROR_NOT_SUPPORTED;
    if (!hook_driver(&g_hooks))
        return CUPTI_ERROR_NOT_INITIALIZED; /* no driver in the process */
    pthread_mutex_lock(&g_mu);
    g_enabled |= 1ull << kind;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    if (!record_size(kind))
        return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_mu);
    g_enabled &= ~(1ull << kind);
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                       CUpti_Activity **record)
{
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*record) {
        off = (size_t)((uint8_t *)*record - buffer);
        size_t len = record_size((*record)->kind);
        if (!len || off >= validBufferSizeBytes)
            return CUPTI_ERROR_INVALID_PARAMETER;
        off += len;
    }
    if (off >= validBufferSizeBytes) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)(buffer + off);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                              size_t *dropped)
{
    (void)context;
    (void)streamId;
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    *dropped = g_dropped;
    g_dropped = 0;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                           CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    if (!funcBufferRequested || !funcBufferCompleted)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_mu);
    g_request = funcBufferRequested;
    g_complete = funcBufferCompleted;
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    deliver(1);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushPeriod(uint32_t time)
{
    pthread_mutex_lock(&g_mu);
    g_period_ms = time;
    if (time)
        thread_on();
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                   uint64_t id)
{
    if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (t_ext_n[kind] < EXT_DEPTH)
        t_ext[kind][t_ext_n[kind]] = id;
    t_ext_n[kind]++;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                  uint64_t *lastId)
{
    if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!t_ext_n[kind])
        return CUPTI_ERROR_QUEUE_EMPTY;
    t_ext_n[kind]--;
    if (lastId)
        *lastId = t_ext_n[kind] < EXT_DEPTH ? t_ext[kind][t_ext_n[kind]] : 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
    if (!funcTimestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&g_ts_fn, funcTimestamp);
    pthread_mutex_lock(&g_mu);
    g_off_at = 0; /* a new clock: sync again */
    pthread_mutex_unlock(&g_mu);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiFinalize(void)
{
    hook_driver(NULL);
    pthread_mutex_lock(&g_mu);
    g_enabled = 0;
    int join = g_thread_on;
    g_stop = 1;
    g_thread_on = 0;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (join)
        pthread_join(g_thread, NULL);
    return CUPTI_SUCCESS;
}
