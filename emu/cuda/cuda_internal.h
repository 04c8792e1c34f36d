/* cuda_internal: what the files of the emulated libcuda.so.1 share.
 *
 * Locks, always taken in this order: g_cu.mu (global state: init, free lists) → a context's
 * mu (its stream list) → a stream's mu (its queue) → g_ev_mu (every event's state). Handles
 * are pointers to objects that are never returned to malloc: a destroyed object goes to a
 * free list with its magic changed, so a stale handle reads as invalid instead of crashing
 * the emulation (a real driver may crash; we prefer to report).
 */
#ifndef COLLPROF_EMU_CUDA_INTERNAL_H
#define COLLPROF_EMU_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "emu/common/topo.h"

/* The cpemu_* functions libnccl.so.2 calls are exported with the driver API. */
#pragma GCC visibility push(default)
#include "emu/common/emu_stream.h"
#pragma GCC visibility pop

#define CPEMU_EXPORT __attribute__((visibility("default")))

/* Every entry point, declared exported with the exact parameters of the list: a definition
 * that differs from its row fails to compile. */
#define CPEMU_DECLARE(ret, api, sym, params, args) CPEMU_EXPORT ret sym params;
CP_CUDA_API(CPEMU_DECLARE)
#undef CPEMU_DECLARE

/* Older symbols a still-deployed driver exports and a resolver may fall back to (same
 * meaning, older signature); see procaddr.c. */
CPEMU_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CPEMU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags);
CPEMU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CPEMU_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CPEMU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CPEMU_EXPORT CUresult cuStreamBeginCapture(CUstream hStream);

#define CTX_MAGIC 0x43545821u    /* live context */
#define STREAM_MAGIC 0x53545221u /* live stream */
#define EVENT_MAGIC 0x45564e21u  /* live event */
#define DEAD_MAGIC 0xdeadbeefu

/* ---- global state (devices.c) ---- */
typedef struct cu_global {
    pthread_mutex_t mu;
    int initialized;
    int forked;                      /* this is a fork() child of an initialized parent */
    const cpemu_topo *topo;
    int ndev;
    int devmap[CPEMU_MAX_GPUS];      /* ordinal -> topology GPU index */
    int devhost[CPEMU_MAX_GPUS];     /* ordinal -> emulated host */
    struct CUctx_st *primary[CPEMU_MAX_GPUS];
} cu_global;
extern cu_global g_cu;

/* COLLPROF_EMU_DRIVER=stub: this library plays the CUDA toolkit's stubs/libcuda.so, found
 * before the real driver (a container's LD_LIBRARY_PATH): every call fails with
 * CUDA_ERROR_STUB_LIBRARY and no error has a name or a text. */
int cu_is_stub(void);
/* CUDA_SUCCESS when the driver may be used: cuInit succeeded in this process. */
CUresult cu_ready(void);
CUresult cu_check_dev(CUdevice dev);
uint64_t cu_now_ns(void);
/* Sleeps until CLOCK_MONOTONIC reaches ns (no-op when past). */
void cu_sleep_until(uint64_t ns);

/* ---- contexts (context.c) ---- */
struct CUctx_st {
    uint32_t magic;
    uint32_t id;             /* CUPTI's contextId: unique in the process, never 0 */
    int dev;                 /* ordinal */
    int primary;
    int refcount;            /* primary: retain count; 0 = inactive */
    unsigned flags;
    pthread_mutex_t mu;      /* guards streams and legacy */
    struct CUstream_st *streams;
    struct CUstream_st *legacy;
    struct CUctx_st *next_free;
};

/* The calling thread's current context, validated. CUDA_ERROR_INVALID_CONTEXT when none,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED when it was destroyed underneath. */
CUresult cu_current_ctx(struct CUctx_st **out);
/* Makes ctx current on the calling thread (stack of one); for stream workers. */
void cu_bind_thread(struct CUctx_st *ctx);
int cu_ctx_valid(const struct CUctx_st *ctx);
/* cuCtxSynchronize: waits for every stream of ctx, or fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (invalidating the capture) if one captures. */
CUresult cu_ctx_sync(struct CUctx_st *ctx);
/* Waits for every stream of ctx whatever their capture state (teardown, cuMemFree). */
void cu_ctx_wait_all(struct CUctx_st *ctx);

/* ---- streams (streams.c, capture.c) ---- */
enum cu_item_kind { ITEM_WORK, ITEM_RECORD, ITEM_WAIT, ITEM_HOLD };

typedef struct cu_item {
    struct cu_item *next;
    int kind;
    uint64_t enq_ns;
    cpemu_work_fn fn;
    void *arg;
    void (*free_fn)(void *);
    struct CUevent_st *ev;
    uint64_t gen;
    uint64_t stamp;          /* a record's model time, set when reached */
    uint64_t hold_ns;        /* ITEM_HOLD: how long the stream is held */
    uint64_t hold_from;      /* ITEM_HOLD: when the hold was asked for: it ends no earlier
                              * than hold_ns after this */
    const _Atomic uint32_t *until; /* ITEM_HOLD: held until this word is non-zero instead */
    const char *name;        /* ITEM_WORK: a kernel's, for the activity hooks; NULL none */
    uint32_t corr;           /* ... and its correlation id */
} cu_item;

struct CUstream_st {
    uint32_t magic;
    uint32_t id;                   /* CUPTI's streamId: unique in the process, never 0 */
    struct CUctx_st *ctx;
    unsigned flags;
    int legacy;                    /* the context's NULL stream */
    pthread_mutex_t mu;
    pthread_cond_t wake;           /* worker: items arrived or stop */
    pthread_cond_t idle;           /* waiters: done_seq moved */
    cu_item *head, *tail;
    uint64_t enq_seq, done_seq;    /* items ever enqueued / completed (monotonic) */
    uint64_t vtime;                /* model clock, worker-only */
    struct CUevent_st *last_rec;   /* the last item enqueued, when it is a record (else NULL) */
    uint64_t last_rec_gen, last_rec_enq;
    int stop;                      /* destroyed: drain, then the worker retires it */
    int worker;                    /* a worker thread serves it */
    int capture;                   /* CUstreamCaptureStatus */
    int cap_mode;
    struct CUstream_st *cap_origin; /* the stream whose capture this one belongs to */
    struct CUstream_st *next;      /* in ctx->streams */
    struct CUstream_st *next_free;
};

/* Resolves a handle (NULL and the special handles mean the current context's legacy
 * stream, created on first use). */
CUresult cu_stream_resolve(CUstream h, struct CUstream_st **out);
/* Queues an item (taking ownership of it), honouring capture and, with barrier, the legacy
 * stream's implicit synchronisation. Under capture the item is dropped: CUDA_SUCCESS, or
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED once the capture was invalidated. */
CUresult cu_stream_push(struct CUstream_st *s, cu_item *it, int barrier);
/* Blocks until every item enqueued before the call has run. */
void cu_stream_wait_idle(struct CUstream_st *s);
/* Stops s's worker once its queue drains (frees it then). Caller holds ctx->mu, unlinked s. */
void cu_stream_retire(struct CUstream_st *s);
cu_item *cu_item_new(int kind);

/* ---- events (events.c) ---- */
struct CUevent_st {
    uint32_t magic;
    unsigned flags;
    int refs;            /* the handle (until destroyed) + queued items */
    int handle_alive;
    uint64_t gen;        /* records issued */
    uint64_t done_gen;   /* highest record reached */
    uint64_t stamp_ns;   /* model time of the record done_gen */
    uint64_t held_gen;   /* a hold queued behind this record: not complete until it ends */
    int captured;        /* the last record was made under capture */
    struct CUstream_st *cap_origin;
    struct CUevent_st *next_free;
};
extern pthread_mutex_t g_ev_mu;
extern pthread_cond_t g_ev_cv;

/* An event no handle refers to, for the legacy stream's implicit synchronisation. */
struct CUevent_st *cu_event_internal(void);
/* Runs a record / wait item on the worker; *vtime is the stream's model clock. */
void cu_event_reach(struct CUevent_st *ev, uint64_t gen, uint64_t stamp);
/* A reference on ev if its handle is still alive (item_drop gives it back), else NULL:
 * a record item may be gone, and its event destroyed, by the time the stream looks back. */
struct CUevent_st *cu_event_ref_live(struct CUevent_st *ev);
/* cpemu_stream_delay/_block: record `gen` is held (incomplete to queries, synchronize and
 * waiting streams) until the hold ends; then its stamp moves to stamp (if it is still ev's
 * latest record). */
void cu_event_hold(struct CUevent_st *ev, uint64_t gen);
void cu_event_restamp(struct CUevent_st *ev, uint64_t gen, uint64_t stamp);
void cu_event_await(struct CUevent_st *ev, uint64_t gen, uint64_t *vtime);
void cu_event_unref(struct CUevent_st *ev);
/* Records ev on s / makes s wait for ev's latest record (s->mu not held); barrier as for
 * cu_stream_push. */
CUresult cu_event_record_on(struct CUevent_st *ev, struct CUstream_st *s, int barrier);
CUresult cu_stream_wait_on(struct CUstream_st *s, struct CUevent_st *ev, int barrier);

/* ---- memory (memory.c) ---- */
/* Frees what ctx allocated (its destruction). */
void cu_mem_forget_ctx(struct CUctx_st *ctx);

#endif
