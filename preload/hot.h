/* hot: what runs on every NCCL call the shim records, and nothing else (shim.h has the rest).
 *
 * A recorded call takes no lock, makes no system call and allocates nothing: the mode and the
 * thread's state are loads; the real NCCL is a range check and a load (real.c's cache); the
 * record goes into the thread's ring (reserve, fill, commit); the GPU timing is a load and a
 * branch unless the call is timed, the timed work out of line in gpu_timing.c. Every line
 * here costs every call of every job: measure a change with bench/bench_shim.c and
 * bench/shim_callgrind.sh (docs/PERFORMANCE.md).
 */
#ifndef COLLPROF_PRELOAD_HOT_H
#define COLLPROF_PRELOAD_HOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_abi.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "common/clock.h"
#include "preload/plugin_pool.h"
#include "preload/ring_call.h"
#include "trace/trace_format.h"

#define CP_EXPORT __attribute__((visibility("default")))
#define CP_LIKELY(x) __builtin_expect(!!(x), 1)
#define CP_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The variables the hot path reads on every call: initial-exec TLS is a plain %fs load,
 * where the default model calls __tls_get_addr. Fine for a preloaded library (its TLS is
 * static); a dlopen'ed copy takes glibc's surplus static TLS, which these few bytes fit. */
#define CP_TLS __thread __attribute__((tls_model("initial-exec")))

/* seq of a record that names no sequenced operation (group calls, comm life, failed calls). */
#define CP_SEQ_NONE UINT64_MAX
#define CP_COMM_NONE UINT32_MAX
#define CP_SITE_UNKNOWN UINT32_MAX

/* ---- lifecycle.c: the mode ---- */
enum cp_mode { CP_MODE_UNKNOWN = 0, CP_MODE_ON = 1, CP_MODE_OFF = 2 };
extern _Atomic int cp_mode;
/* Loads the settings once (thread-safe) and returns the mode. */
int cp_mode_init(void);
static inline int cp_mode_get(void)
{
    int m = atomic_load_explicit(&cp_mode, memory_order_relaxed);
    return CP_LIKELY(m != CP_MODE_UNKNOWN) ? m : cp_mode_init();
}

/* ---- per-thread state (ring.c) ---- */
typedef struct cp_ring cp_ring;
typedef struct cp_tls_state {
    uint32_t depth;       /* >0 while inside a recorded wrapper: nested calls pass through */
    uint32_t group_depth; /* this thread's ncclGroupStart nesting, as NCCL keeps it */
    cp_ring *ring;        /* NULL until the first record */
    uint16_t thread_no;
    uint8_t attached;     /* 0 not yet, 1 has a ring, 2 no ring (records count as lost) */
    uint32_t sample_count;/* COLLPROF_GPU_TIMING=sample:N: this thread's timed-call countdown */
    const struct cp_nccl_caller *caller; /* real.c: the object this thread last called from */
    struct cp_pcall *pcall; /* profiler_plugin.c: the call NCCL's API events describe */
    uint32_t pcall_index;   /* ... its index in the pool */
    cp_ipool_cache pcall_mag; /* the free calls this thread took from the pool */
    uint8_t pcall_flags;    /* ... CP_PCALL_CAPTURED, CP_PCALL_KEEP */
    uint8_t plug_open;      /* inside a recording wrapper: NCCL's API events are its call's */
    uint8_t budget_log2;    /* gpu_timing.c, auto mode: events on 1 in 2^k of a comm's seqs */
    uint64_t budget_t0;     /* ticks: the thread's first timed decision */
    uint64_t budget_spent;  /* ticks spent on events by this thread */
    uint32_t groups_ended;  /* this thread's outermost GroupEnds: which group a call is in */
} cp_tls_state;
typedef struct cp_nccl_caller cp_nccl_caller;
extern CP_TLS cp_tls_state cp_tls;

/* ---- real.c: the NCCL each caller would have reached without the shim ----
 * The caller is the object holding the wrapper's return address (read in the exported
 * function itself); real.c says how its NCCL is found: the global scope, else the caller's
 * own dependencies (an RTLD_LOCAL library such as PyTorch's), else any loaded NCCL. Each
 * calling object's text range is cached with its NCCL's function table, so the hot path is a
 * thread-local load, a range check and a load; a miss resolves once per object and name. */
enum {
#define CP_FN_INDEX(ret, name, params, args) CP_NCCL_FN_##name,
    CP_NCCL_API(CP_FN_INDEX) CP_NCCL_API_DEPRECATED(CP_FN_INDEX)
#undef CP_FN_INDEX
    CP_NCCL_FN_COUNT
};
typedef struct cp_nccl_lib cp_nccl_lib; /* one NCCL (or the global scope after us) */
struct cp_nccl_caller {
    uintptr_t lo, span;   /* return addresses in [lo, lo + span) are this object's */
    void *_Atomic *fn;    /* its NCCL's functions, NULL until resolved */
    cp_nccl_lib *lib;
};
/* The slow path: finds (and caches) the caller's NCCL and the function; NULL when missing,
 * after one WARN line per name. errno is left as it was. */
void *cp_nccl_resolve(const void *return_addr, unsigned fn_index);
/* The NCCL the code at return_addr reaches (NULL: none); a function of a given NCCL (NULL:
 * missing, after one WARN). For the shim's own queries on a comm's NCCL. */
cp_nccl_lib *cp_nccl_lib_for(const void *return_addr);
void *cp_nccl_lib_fn(cp_nccl_lib *lib, unsigned fn_index);
/* The first NCCL any caller reached (the version in the trace header), or NULL. */
cp_nccl_lib *cp_nccl_first_lib(void);

static inline void *cp_nccl_cached(const void *return_addr, unsigned fn_index)
{
    const cp_nccl_caller *c = cp_tls.caller;
    if (CP_LIKELY(c != NULL) && CP_LIKELY((uintptr_t)return_addr - c->lo < c->span))
        return atomic_load_explicit(&c->fn[fn_index], memory_order_acquire);
    return NULL;
}
/* cp_real_<name>(ra): the real function for a call returning to ra, or NULL (missing). */
#define CP_DECLARE_REAL(ret, name, params, args)                                         \
    typedef ret(*cp_fn_##name) params;                                                   \
    static inline cp_fn_##name cp_real_##name(const void *return_addr)                   \
    {                                                                                    \
        void *p = cp_nccl_cached(return_addr, CP_NCCL_FN_##name);                        \
        return (cp_fn_##name)(CP_LIKELY(p != NULL)                                       \
                                  ? p : cp_nccl_resolve(return_addr, CP_NCCL_FN_##name)); \
    }
CP_NCCL_API(CP_DECLARE_REAL)
CP_NCCL_API_DEPRECATED(CP_DECLARE_REAL)
#undef CP_DECLARE_REAL
/* A function of a comm's own NCCL, for the shim's queries (comm_table.c). */
#define CP_NCCL_LIB_FN(lib, name) ((cp_fn_##name)cp_nccl_lib_fn((lib), CP_NCCL_FN_##name))

/* The first record of a thread: starts the process if needed, gets the thread a ring.
 * Returns the ring or NULL (tracing off, or no ring left in COLLPROF_BUFFER_MB). */
cp_ring *cp_thread_attach(void);

/* ---- ring.c: single-producer single-consumer rings of 64-byte slots ---- */
#define CP_SLOT_BYTES 64
typedef struct cp_slot {
    unsigned char bytes[CP_SLOT_BYTES];
} __attribute__((aligned(64))) cp_slot;

struct cp_ring {
    /* producer's line */
    _Atomic uint64_t head;
    uint64_t tail_seen;       /* the producer's last look at tail */
    _Atomic uint64_t lost;    /* records the producer dropped on a full ring */
    uint64_t mask;
    cp_slot *slots;
    char pad0[24];
    /* consumer's line */
    _Atomic uint64_t tail;
    uint64_t lost_reported;   /* lost already handed to cp_trace_writer_count_lost */
    uint64_t drain_to;        /* head snapshot of the drain in progress */
    char pad1[40];
    /* fixed after creation, or rarely changed */
    cp_ring *next;            /* registry: immutable once published */
    _Atomic int owned;        /* a live thread produces into it */
    size_t bytes;
};

/* Set by a producer whose ring passed half full: the writer's next tick drains at once. */
extern _Atomic int cp_drain_wanted;
/* Records lost by threads that got no ring at all. */
extern _Atomic uint64_t cp_lost_no_ring;
/* Records the shim could not make off the hot path, counted so that no drop goes uncounted
 * and kept apart by cause because each has another remedy: a COMM or PROCESS record, or a
 * DONE whose bookkeeping found no memory (CP_LOST_NO_MEMORY); the DONEs and SITEs a fatal
 * signal's flush cannot make (CP_LOST_AT_END). */
extern _Atomic uint64_t cp_lost_no_memory;
extern _Atomic uint64_t cp_lost_at_end;

static inline void *cp_ring_reserve(cp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (CP_UNLIKELY(h - r->tail_seen > r->mask)) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_seen > r->mask) {
            /* single producer: a plain load and store, no locked instruction */
            atomic_store_explicit(&r->lost,
                                  atomic_load_explicit(&r->lost, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            return NULL;
        }
    }
    if (CP_UNLIKELY(h - r->tail_seen == (r->mask + 1) / 2))
        atomic_store_explicit(&cp_drain_wanted, 1, memory_order_relaxed);
    return &r->slots[h & r->mask];
}

static inline void cp_ring_commit(cp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* ---- comm_table.c ---- */
typedef struct cp_comm {
    ncclComm_t handle;
    _Atomic uint8_t plugin_cover; /* enum cp_plugin_cover: which calls NCCL's plugin times */
    _Atomic uint8_t calib_wanted; /* auto: time the next call by events too (gpu_timing.c) */
    uint64_t timed_sizes[CP_OP_COUNT]; /* auto mode: log2 sizes whose first call was timed */
    uint32_t comm_index;          /* this file's index, in COMM and CALL records */
    uint8_t origin;               /* enum cp_comm_origin */
    _Atomic int ready;            /* rank/nranks known, COMM record queued */
    uint64_t comm_id;
    uint64_t parent_id;
    int32_t nranks, rank, cuda_dev, color, key;
    _Atomic uint64_t coll_seq;    /* next collective's seq */
    _Atomic uint64_t split_seq;   /* splits and shrinks of this comm, for child ids */
    _Atomic uint64_t *send_seq;   /* [nranks], once ready */
    _Atomic uint64_t *recv_seq;
    struct cp_comm *all_next;     /* the table's comms, or the retired ones (comm_table.c) */
    struct cp_comm *all_prev;
    uint64_t retired_ns;          /* when it left the table */
    cp_nccl_lib *lib;             /* the NCCL that made it, for the shim's own queries */
    /* the sends to itself and receives from itself of the group under way not yet paired
       (wrap_coll.c: NCCL drops a pair on one buffer); one thread's group at a time, as NCCL
       allows a comm no more */
    struct {
        const void *thread;       /* &cp_tls of the group's thread */
        uint32_t group;           /* ... and its groups_ended then */
        uint8_t n[2];             /* waiting: [0] sends, [1] receives */
        uint8_t lost;             /* more waited than q holds: no pairing in this group */
        struct {
            uintptr_t buf;        /* the task's GPU address */
            uint32_t pcall;       /* plugin call index + 1; 0 none */
        } q[2][4];
    } self;
} cp_comm;

/* Lock-free: the comm of a handle, or NULL for one the shim never saw created. */
cp_comm *cp_comm_lookup(ncclComm_t handle);

/* ---- profiler_plugin.c: what the wrappers tell NCCL's plugin and hear from it ---- */
typedef struct cp_pcall cp_pcall;
/* auto and plugin modes: the wrappers open calls for NCCL's events (set at process start). */
extern _Atomic int cp_plugin_wanted;
enum cp_plugin_cover {
    CP_PLUGIN_UNKNOWN = 0, /* no call of the comm has met NCCL's plugin yet */
    CP_PLUGIN_ALL = 1,     /* v5+: every call (its API events name it) */
    CP_PLUGIN_UNGROUPED = 2, /* v4: calls outside a group (their tasks start in the call) */
};
/* What the API callbacks tell the wrapper through cp_tls.pcall_flags. */
enum { CP_PCALL_CAPTURED = 1, /* NCCL said graphCaptured */
       CP_PCALL_KEEP = 2,     /* never given back: captured, or an event we could not follow */
       CP_PCALL_V4 = 4 };     /* the comm's plugin API is v4: ungrouped calls only */

/* ---- recording a call (wrap_coll.c) ---- */
typedef struct cp_call_info {
    uint8_t op, dtype, redop, flags;
    int32_t peer;
    uint32_t group_depth;   /* at entry */
    ncclResult_t result;
    cp_comm *comm;          /* NULL: comm_index none */
    uint64_t seq;
    uint64_t count;
    uint64_t stream;
    uint64_t enter_ticks;   /* cp_now_ticks() at entry */
    uint32_t site;          /* CP_SITE_UNKNOWN or a sites.c index */
    uint32_t pcall;         /* profiler_plugin.c's call index + 1 that times it, 0 none */
} cp_call_info;

/* Whether this call records: tracing on and not nested inside another wrapper. When it
 * returns 1 the caller must call cp_call_end after recording. */
static inline int cp_call_begin(void)
{
    if (CP_UNLIKELY(cp_mode_get() != CP_MODE_ON) || CP_UNLIKELY(cp_tls.depth != 0))
        return 0;
    cp_tls.depth = 1;
    return 1;
}
static inline void cp_call_end(void) { cp_tls.depth = 0; }
/* NCCL took the call: it enqueued work (or, non-blocking, will). */
static inline int cp_nccl_accepted(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

typedef struct cp_gpu_ctx cp_gpu_ctx;
/* ---- gpu_timing.c: the hot path ---- */
enum cp_gpu_state {
    CP_GPU_UNKNOWN = 0,
    CP_GPU_EVENTS = 1,  /* events (every call, sampled, or auto's fallback) */
    CP_GPU_HOST = 2,    /* no driver, no plugin: host times only */
    CP_GPU_OFF = 3,
    CP_GPU_PLUGIN = 4,  /* NCCL's plugin only: never an event */
    CP_GPU_CUPTI = 5,   /* CUPTI's kernel records (falls back to events if CUPTI fails) */
};
extern _Atomic int cp_gpu_state;
/* Decides the timing for this process (settings, driver): once, at process start. */
/* A call about to be made on `stream`: records its start event when it is to be timed. */
typedef struct cp_gpu_mark {
    cp_gpu_ctx *ctx;
    int32_t pair;   /* -1: not timed */
    uint8_t flags;  /* CP_CALL_CAPTURED / CP_CALL_TIMED for the CALL */
    uint8_t grouped;
    uint8_t plug;   /* the plugin may describe this call */
    uint8_t pflags; /* CP_PCALL_* of pcall */
    uint8_t unbudgeted; /* auto: timed as a first call, its cost outside the budget */
    cp_pcall *pcall;
    uint32_t pindex;
    uint64_t cupti_id;  /* cupti: the external correlation id its kernels carry; 0 none */
} cp_gpu_mark;
/* cupti mode, out of line: the call's id pushed and popped (a grouped call's is its group's). */
void cp_gpu_before_cupti(cp_gpu_mark *m, cudaStream_t stream);
/* cupti mode, a one-rank comm: NCCL runs its collectives as copies (ncclLaunchOneRank), with
 * no kernel for CUPTI to record, so CUDA events time them (said once at INFO). */
void cp_gpu_before_one_rank(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c, uint8_t op,
                            int32_t peer, uint64_t bytes);
void cp_gpu_after_cupti(cp_gpu_mark *m, int accepted);
/* Inline, because they run on every call: without events (off, sampled out, no driver)
 * each is a load and a branch; the timed work is out of line in gpu_timing.c. */
void cp_gpu_before_events(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c, uint8_t op,
                          int32_t peer, uint64_t bytes);
/* Auto mode, a call NCCL's plugin times whose comm wants a calibration: events too. */
void cp_gpu_before_calibration(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c);
void cp_gpu_after_timed(cp_gpu_mark *m, cudaStream_t stream, int accepted);
void cp_gpu_emit_timed(const cp_gpu_mark *m, uint32_t comm_index, uint64_t seq, int32_t peer,
                       uint8_t op);
/* A plugin call that times nothing (events timed the call, or NCCL refused it): the writer
 * gives it back once NCCL is done with it. `calibrate`: events timed the same call, whose
 * GPU start on both clocks the writer uses to calibrate the plugin's (gpu_poll.c). */
void cp_gpu_discard_plugin(const cp_gpu_mark *m, uint32_t comm_index, uint64_t seq,
                           int32_t peer, uint8_t op, int calibrate);
/* Writer: a CALL that names a plugin call (in the ring: cp_ring_call_pcall, index + 1). */
void cp_gpu_plugin_add(const cp_rec_call *rec, uint32_t pcall_index);

/* A send or receive to the rank itself: NCCL's plugin gives it no GPU times (no proxy op,
 * so no kernel channels: profiler_plugin.c start_task), so events time it, as a one-rank
 * comm's calls. `op` is a constant in every wrapper: nothing is left of it in the others. */
static inline int cp_self_p2p(const cp_comm *c, uint8_t op, int32_t peer)
{
    return (op == CP_OP_SEND || op == CP_OP_RECV) && c && peer == c->rank &&
           atomic_load_explicit(&c->ready, memory_order_acquire);
}

static inline void cp_gpu_before(cp_gpu_mark *m, cudaStream_t stream, uint32_t group_depth,
                                 cp_comm *c, uint8_t op, int32_t peer, uint64_t bytes)
{
    m->ctx = NULL;
    m->pair = -1;
    m->flags = 0;
    m->grouped = group_depth > 0;
    m->plug = 0;
    m->unbudgeted = 0;
    m->pcall = NULL;
    m->cupti_id = 0;
    if (atomic_load_explicit(&cp_plugin_wanted, memory_order_relaxed)) {
        m->plug = 1;
        cp_tls.pcall = NULL;
        cp_tls.pcall_flags = 0;
        cp_tls.plug_open = 1;
        int cover = c ? atomic_load_explicit(&c->plugin_cover, memory_order_relaxed) : 0;
        if ((cover == CP_PLUGIN_ALL || (cover == CP_PLUGIN_UNGROUPED && !m->grouped)) &&
            !cp_self_p2p(c, op, peer)) {
            if (CP_UNLIKELY(atomic_load_explicit(&c->calib_wanted, memory_order_relaxed)))
                cp_gpu_before_calibration(m, stream, c);
            return;
        }
    }
    int st = atomic_load_explicit(&cp_gpu_state, memory_order_relaxed);
    if (CP_UNLIKELY(st == CP_GPU_EVENTS))
        cp_gpu_before_events(m, stream, c, op, peer, bytes);
    else if (CP_UNLIKELY(st == CP_GPU_CUPTI)) {
        if (c && c->nranks == 1 && atomic_load_explicit(&c->ready, memory_order_acquire))
            cp_gpu_before_one_rank(m, stream, c, op, peer, bytes);
        else
            cp_gpu_before_cupti(m, stream);
    }
}
/* After the real call: records the end event (a grouped op waits for GroupEnd).
 * `accepted`: NCCL enqueued the op; otherwise the mark is dropped and TIMED cleared. */
static inline void cp_gpu_after(cp_gpu_mark *m, cudaStream_t stream, int accepted)
{
    if (m->plug) {
        m->pcall = cp_tls.pcall;
        m->pindex = cp_tls.pcall_index;
        m->pflags = cp_tls.pcall_flags;
        cp_tls.pcall = NULL;
        cp_tls.plug_open = 0;
    }
    if (CP_UNLIKELY(m->pair >= 0))
        cp_gpu_after_timed(m, stream, accepted);
    else if (CP_UNLIKELY(m->cupti_id != 0))
        cp_gpu_after_cupti(m, accepted);
}
/* Once the CALL is in the ring: hands the pair to the writer (or files the grouped op). */
static inline void cp_gpu_emit(const cp_gpu_mark *m, uint32_t comm_index, uint64_t seq,
                               int32_t peer, uint8_t op)
{
    if (CP_UNLIKELY(m->pair >= 0 || m->cupti_id != 0))
        cp_gpu_emit_timed(m, comm_index, seq, peer, op);
}
/* Around the real outermost ncclGroupEnd: events on every stream of the group. */
void cp_gpu_group_end_before(void);
void cp_gpu_group_end_after(void);

/* ---- time ----
 * Records are stamped in ticks (common/clock.h: the TSC where the kernel trusts it, ~10 ns
 * against clock_gettime's ~25); the writer thread turns CALL records' enter_ns and host_ns
 * from ticks into CLOCK_MONOTONIC ns as it drains them, off the hot path. */
static inline uint64_t cp_now_ticks(void) { return cp_ticks(); }

#endif
