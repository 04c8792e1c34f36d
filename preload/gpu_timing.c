/* gpu_timing: which calls get GPU times, and CUDA events around them on the user's stream.
 *
 * Modes (COLLPROF_GPU_TIMING): auto (the default) takes GPU times from NCCL's profiler
 * plugin (profiler_plugin.c) for every communicator NCCL reports on, and events only for the
 * others (a comm's first call, before its first plugin event told us; a comm of one rank,
 * which makes no kernel; a grouped call on a v4 plugin; an NCCL without the plugin API), under
 * a budget of COLLPROF_OVERHEAD of the thread's time (budget_hit); plugin never records an
 * event; events and sample:N are the events-only modes, every call or every Nth.
 *
 * Per timed call: is the stream capturing (a graph under capture must not get our events:
 * recording one would join it to the graph or invalidate the capture), the stream's context
 * (events belong to one), a pair from that context's pool, a start event before the real
 * call and an end event after it, then a ring slot that hands the pair to the writer, which
 * polls it and writes the DONE record. No synchronize, no lock, no allocation.
 *
 * Groups: NCCL launches a group's work at the outermost ncclGroupEnd, not at each call, so
 * events around a grouped call would time nothing. A grouped call takes (or shares) its
 * stream's pair and is filed in a per-thread list; the outermost GroupEnd records start
 * before and end after the real GroupEnd on every stream of the group, and every grouped
 * op's DONE carries its stream's times: the span the group's launch took on that stream.
 */
#include "preload/shim.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/settings.h"

#define CP_GROUP_STREAMS 32
#define CP_GROUP_OPS 256

_Atomic int cp_gpu_state;
_Atomic int cp_plugin_wanted;
static unsigned g_sample_n = 1;
/* auto mode: the events fallback stays under COLLPROF_OVERHEAD of each thread's time */
static int g_budget;
static double g_budget_frac;

struct group_stream {
    cudaStream_t stream;
    cp_gpu_ctx *ctx;
    int32_t pair;
    uint32_t nops;
    int recorded;
    unsigned why; /* pair < 0: enum cp_untimed_cause */
};
struct group_op {
    uint32_t comm_index;
    int32_t peer;
    uint64_t seq;
    uint8_t op, stream;
};
struct group_state {
    uint32_t nstreams, nops;
    struct group_stream streams[CP_GROUP_STREAMS];
    struct group_op ops[CP_GROUP_OPS];
};
/* Allocated at a thread's first timed grouped call and freed at its exit: a few KiB that
 * static TLS (all of it static, since the shim's hot variables are initial-exec) cannot
 * spare for a dlopen'ed copy. */
static CP_TLS struct group_state *g_group_p;
static pthread_key_t g_group_key;
static pthread_once_t g_group_once = PTHREAD_ONCE_INIT;
static struct group_state g_group_none; /* stays empty: threads that never grouped */

static void group_key_make(void) { pthread_key_create(&g_group_key, free); }

static struct group_state *group_state(void)
{
    if (CP_LIKELY(g_group_p != NULL))
        return g_group_p;
    pthread_once(&g_group_once, group_key_make);
    struct group_state *g = calloc(1, sizeof *g);
    if (g) {
        g_group_p = g;
        pthread_setspecific(g_group_key, g);
    }
    return g;
}
#define g_group (*(g_group_p ? g_group_p : &g_group_none))

static void timing_start(void)
{
    const cp_settings *s = cp_settings_get();
    if (s->gpu_timing == CP_GPU_TIMING_OFF) {
        atomic_store(&cp_gpu_state, CP_GPU_OFF);
        return;
    }
    int plugin = s->gpu_timing == CP_GPU_TIMING_AUTO || s->gpu_timing == CP_GPU_TIMING_PLUGIN;
    atomic_store(&cp_plugin_wanted, plugin);
    if (s->gpu_timing == CP_GPU_TIMING_PLUGIN) {
        atomic_store(&cp_gpu_state, CP_GPU_PLUGIN);
        return;
    }
    g_budget = s->gpu_timing == CP_GPU_TIMING_AUTO;
    g_budget_frac = s->overhead_pct / 100.0;
    g_sample_n = s->gpu_timing == CP_GPU_TIMING_SAMPLE && s->gpu_timing_sample_n > 1
                     ? s->gpu_timing_sample_n
                     : 1;
    if (cp_cuda_load() != 0) {
        if (plugin) {
            cp_info("no usable CUDA driver (libcuda.so.1): GPU times from NCCL's profiler "
                    "plugin only");
            atomic_store(&cp_gpu_state, CP_GPU_PLUGIN);
            return;
        }
        cp_info("no usable CUDA driver (libcuda.so.1): host times only, no DONE records");
        atomic_store(&cp_gpu_state, CP_GPU_HOST);
        return;
    }
    /* cupti: libcupti is opened at the first timed call, once the job's CUDA is loaded */
    atomic_store(&cp_gpu_state,
                 s->gpu_timing == CP_GPU_TIMING_CUPTI ? CP_GPU_CUPTI : CP_GPU_EVENTS);
}

static void timing_reset_after_fork(void)
{
    /* CUDA cannot be used in a fork child of a process that initialized it, nor NCCL's
     * communicators (their proxy threads are the parent's). */
    int st = atomic_load(&cp_gpu_state);
    if (st == CP_GPU_EVENTS || st == CP_GPU_PLUGIN || st == CP_GPU_CUPTI)
        atomic_store(&cp_gpu_state, CP_GPU_HOST);
    atomic_store(&cp_plugin_wanted, 0);
    cp_tls.pcall = NULL;
    cp_tls.plug_open = 0;
    if (g_group_p)
        g_group_p->nstreams = g_group_p->nops = 0;
}

static inline int sample_hit(void)
{
    if (CP_LIKELY(g_sample_n == 1))
        return 1;
    if (cp_tls.sample_count == 0) {
        cp_tls.sample_count = g_sample_n - 1;
        return 1;
    }
    cp_tls.sample_count--;
    return 0;
}

static cp_gpu_ctx *ctx_of(cudaStream_t stream)
{
    CUcontext ctx = NULL;
    if (stream) {
        if (cp_cu.cuStreamGetCtx((CUstream)stream, &ctx) != CUDA_SUCCESS)
            return NULL;
    } else if (cp_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) {
        return NULL;
    }
    return ctx ? cp_gpu_ctx_get(ctx) : NULL;
}

/* The group's entry for stream, taking its pair on first use; NULL when untimed, *why then
 * the cause (enum cp_untimed_cause). */
static struct group_stream *group_stream_of(cudaStream_t stream, unsigned *why)
{
    for (uint32_t i = 0; i < g_group.nstreams; i++)
        if (g_group.streams[i].stream == stream) {
            *why = g_group.streams[i].why;
            return g_group.streams[i].pair >= 0 ? &g_group.streams[i] : NULL;
        }
    *why = CP_UNTIMED_GROUP;
    if (g_group.nstreams == CP_GROUP_STREAMS)
        return NULL;
    struct group_stream *gs = &g_group.streams[g_group.nstreams++];
    *gs = (struct group_stream){.stream = stream, .pair = -1, .why = CP_UNTIMED_NO_CONTEXT};
    if ((gs->ctx = ctx_of(stream)) != NULL) {
        gs->pair = cp_ev_pair_get(gs->ctx);
        gs->why = CP_UNTIMED_EVENT_POOL;
    }
    *why = gs->why;
    return gs->pair >= 0 ? gs : NULL;
}

/* Auto mode's choice of the calls that get events: the first call of each (communicator,
 * op, power-of-two size) always, since the report's rows are those; then the calls whose
 * sequence number is a multiple of 2^k, k growing while the thread's event time is over its
 * budget and shrinking when well under it. Sequence numbers, not a per-thread count: every
 * rank of a communicator then times the same operations (a rank with a larger k times a
 * subset of a smaller k's), which is what a straggler or a hang question compares. */
/* Whether the call of sequence number seq falls on the stride and the thread's event time
 * is within its budget; the stride follows the budget. */
static int budget_stride(uint64_t seq, uint64_t now)
{
    if (cp_tls.budget_t0 == 0)
        cp_tls.budget_t0 = now;
    if (seq & ((1ull << cp_tls.budget_log2) - 1))
        return 0;
    double allowed = g_budget_frac * (double)(now - cp_tls.budget_t0);
    if ((double)cp_tls.budget_spent > allowed) {
        if (cp_tls.budget_log2 < 20)
            cp_tls.budget_log2++;
        return 0;
    }
    if (4.0 * (double)cp_tls.budget_spent < allowed && cp_tls.budget_log2 > 0)
        cp_tls.budget_log2--;
    return 1;
}

/* 1: time it within the budget; 2: time it whatever the budget says (a first call, whose
 * cost, the context's event pool made at the first, is not counted against the budget). */
static int budget_hit(cp_comm *c, uint8_t op, int32_t peer, uint64_t bytes, uint64_t now)
{
    uint64_t seq = cp_tls.sample_count++;
    if (c) {
        unsigned bucket = 63u - (unsigned)__builtin_clzll(bytes | 1);
        if (op < CP_OP_COUNT && !(c->timed_sizes[op] & (1ull << bucket))) {
            c->timed_sizes[op] |= 1ull << bucket;
            return 2;
        }
        if (op == CP_OP_SEND || op == CP_OP_RECV) {
            if (atomic_load_explicit(&c->ready, memory_order_acquire) && peer >= 0 &&
                peer < c->nranks)
                seq = atomic_load_explicit(op == CP_OP_SEND ? &c->send_seq[peer]
                                                            : &c->recv_seq[peer],
                                           memory_order_relaxed);
        } else {
            seq = atomic_load_explicit(&c->coll_seq, memory_order_relaxed);
        }
    }
    return budget_stride(seq, now);
}

static void before_events(cp_gpu_mark *m, cudaStream_t stream);

void cp_gpu_before_calibration(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c)
{
    /* One call a comm in each window of the plugin's clock (cp_comm_want_calibration): two
     * events every few seconds, outside the budget, and only in auto mode (plugin mode never
     * records an event; its clock is the callbacks' alone). */
    atomic_store_explicit(&c->calib_wanted, 0, memory_order_relaxed);
    if (!g_budget || m->grouped ||
        atomic_load_explicit(&cp_gpu_state, memory_order_relaxed) != CP_GPU_EVENTS)
        return;
    before_events(m, stream);
    m->unbudgeted = 1;
}

void cp_gpu_before_events(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c, uint8_t op,
                          int32_t peer, uint64_t bytes)
{
    if (!g_budget) {
        before_events(m, stream);
        return;
    }
    /* In auto mode even the capture check waits for the budget: it is a driver call. */
    uint64_t t0 = cp_now_ticks();
    int hit = budget_hit(c, op, peer, bytes, t0);
    if (!hit)
        return;
    before_events(m, stream);
    if (hit == 1)
        cp_tls.budget_spent += cp_now_ticks() - t0;
    else
        m->unbudgeted = 1;
}

static void before_events(cp_gpu_mark *m, cudaStream_t stream)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cp_cu.cuStreamIsCapturing((CUstream)stream, &cs) != CUDA_SUCCESS)
        return; /* not a stream the driver knows: NCCL will say so */
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        m->flags = CP_CALL_CAPTURED;
        return;
    }
    if (!sample_hit())
        return;
    if (m->grouped) {
        unsigned why = CP_UNTIMED_GROUP;
        struct group_stream *gs = group_state() ? group_stream_of(stream, &why) : NULL;
        if (gs && g_group.nops < CP_GROUP_OPS) {
            m->ctx = gs->ctx;
            m->pair = gs->pair;
            m->flags = CP_CALL_TIMED;
        } else {
            cp_untimed_count(gs ? CP_UNTIMED_GROUP : why);
        }
        return;
    }
    cp_gpu_ctx *c = ctx_of(stream);
    if (!c) {
        cp_untimed_count(CP_UNTIMED_NO_CONTEXT);
        return;
    }
    int32_t p = cp_ev_pair_get(c);
    if (p < 0) {
        cp_untimed_count(CP_UNTIMED_EVENT_POOL);
        return;
    }
    if (cp_cu.cuEventRecord(cp_ev_start(c, (uint32_t)p), (CUstream)stream) != CUDA_SUCCESS) {
        cp_ev_pair_put(c, (uint32_t)p);
        return;
    }
    m->ctx = c;
    m->pair = p;
    m->flags = CP_CALL_TIMED;
}

/* cupti: the outermost group's id, taken by its first timed call; NCCL launches the group's
 * kernels in the outermost ncclGroupEnd, around which it is pushed. */
static CP_TLS uint64_t g_cupti_group;

void cp_gpu_before_cupti(cp_gpu_mark *m, cudaStream_t stream)
{
    if (CP_UNLIKELY(cp_cupti_start() != 0)) {
        /* no CUPTI: events from now on, this call included */
        atomic_store_explicit(&cp_gpu_state, CP_GPU_EVENTS, memory_order_relaxed);
        before_events(m, stream);
        return;
    }
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cp_cu.cuStreamIsCapturing((CUstream)stream, &cs) != CUDA_SUCCESS)
        return;
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        m->flags = CP_CALL_CAPTURED;
        return;
    }
    if (m->grouped) {
        if (!g_cupti_group)
            g_cupti_group = cp_cupti_next_id();
        m->cupti_id = g_cupti_group;
    } else {
        m->cupti_id = cp_cupti_next_id();
        cp_cupti_push(m->cupti_id);
    }
    m->flags = CP_CALL_TIMED;
}

void cp_gpu_before_one_rank(cp_gpu_mark *m, cudaStream_t stream, cp_comm *c, uint8_t op,
                            int32_t peer, uint64_t bytes)
{
    static _Atomic int said;
    if (CP_UNLIKELY(!atomic_load_explicit(&said, memory_order_relaxed)) &&
        !atomic_exchange(&said, 1))
        cp_info("COLLPROF_GPU_TIMING=cupti: calls on one-rank communicators are timed by CUDA "
                "events (NCCL runs them as copies, with no kernel for CUPTI to record)");
    cp_gpu_before_events(m, stream, c, op, peer, bytes);
}

void cp_gpu_after_cupti(cp_gpu_mark *m, int accepted)
{
    if (!m->grouped)
        cp_cupti_pop();
    if (!accepted) {
        m->cupti_id = 0;
        m->flags &= (uint8_t)~CP_CALL_TIMED;
    }
}

static void push_pending(cp_gpu_ctx *c, uint32_t pair, int release, int recorded,
                         uint32_t comm_index, uint64_t seq, int32_t peer, uint8_t op,
                         cp_pcall *pcall)
{
    cp_ring *r = cp_tls.ring;
    cp_pending_slot *s = r ? cp_ring_reserve(r) : NULL;
    if (CP_UNLIKELY(!s)) {
        if (release)
            cp_ev_pair_put(c, pair);
        /* a plugin call that no one will free: leaked from its pool, which is bounded */
        return;
    }
    *s = (cp_pending_slot){
        .h = {CP_REC_SHIM_PENDING, sizeof(cp_pending_slot)},
        .comm_index = comm_index,
        .seq = seq,
        .peer = peer,
        .op = op,
        .release = (uint8_t)release,
        .recorded = (uint8_t)recorded,
        .ctx = c,
        .pair = pair,
        .pcall = pcall,
    };
    cp_ring_commit(r);
}

void cp_gpu_discard_plugin(const cp_gpu_mark *m, uint32_t comm_index, uint64_t seq,
                           int32_t peer, uint8_t op, int calibrate)
{
    /* recorded = 0: the writer writes nothing for it, and gives it back when complete. A call
     * events timed too (a comm's first) calibrates the GPU clock: release says so. */
    push_pending(NULL, 0, calibrate, 0, comm_index, seq, peer, op, m->pcall);
}

static void after_timed(cp_gpu_mark *m, cudaStream_t stream, int accepted);

void cp_gpu_after_timed(cp_gpu_mark *m, cudaStream_t stream, int accepted)
{
    if (!g_budget) {
        after_timed(m, stream, accepted);
        return;
    }
    uint64_t t0 = cp_now_ticks();
    after_timed(m, stream, accepted);
    if (!m->unbudgeted)
        cp_tls.budget_spent += cp_now_ticks() - t0;
}

static void after_timed(cp_gpu_mark *m, cudaStream_t stream, int accepted)
{
    if (m->grouped) {
        if (!accepted) {
            m->pair = -1;
            m->flags &= (uint8_t)~CP_CALL_TIMED;
        }
        return;
    }
    if (!accepted ||
        cp_cu.cuEventRecord(cp_ev_end(m->ctx, (uint32_t)m->pair), (CUstream)stream) !=
            CUDA_SUCCESS) {
        /* Nothing was enqueued (or no end): no DONE. Re-recording the start later is fine. */
        cp_ev_pair_put(m->ctx, (uint32_t)m->pair);
        m->pair = -1;
        m->flags &= (uint8_t)~CP_CALL_TIMED;
    }
}

void cp_gpu_emit_timed(const cp_gpu_mark *m, uint32_t comm_index, uint64_t seq, int32_t peer,
                       uint8_t op)
{
    if (m->cupti_id) {
        cp_ring *r = cp_tls.ring;
        cp_pending_slot *s = r ? cp_ring_reserve(r) : NULL;
        if (CP_UNLIKELY(!s))
            return;
        *s = (cp_pending_slot){.h = {CP_REC_SHIM_PENDING, sizeof(cp_pending_slot)},
                               .comm_index = comm_index, .seq = seq, .peer = peer, .op = op,
                               .recorded = 1, .cupti = 1, .cupti_id = m->cupti_id};
        cp_ring_commit(r);
        return;
    }
    if (!m->grouped) {
        push_pending(m->ctx, (uint32_t)m->pair, 1, 1, comm_index, seq, peer, op, NULL);
        return;
    }
    for (uint32_t i = 0; i < g_group.nstreams; i++) {
        if (g_group.streams[i].pair == m->pair && g_group.streams[i].ctx == m->ctx) {
            g_group.ops[g_group.nops++] = (struct group_op){comm_index, peer, seq, op,
                                                            (uint8_t)i};
            g_group.streams[i].nops++;
            return;
        }
    }
}

void cp_gpu_group_end_before(void)
{
    if (g_cupti_group)
        cp_cupti_push(g_cupti_group);
    if (!g_group_p)
        return;
    for (uint32_t i = 0; i < g_group.nstreams; i++) {
        struct group_stream *gs = &g_group.streams[i];
        gs->recorded = gs->pair >= 0 && gs->nops > 0 &&
                       cp_cu.cuEventRecord(cp_ev_start(gs->ctx, (uint32_t)gs->pair),
                                           (CUstream)gs->stream) == CUDA_SUCCESS;
    }
}

void cp_gpu_group_end_after(void)
{
    if (g_cupti_group) {
        cp_cupti_pop();
        g_cupti_group = 0;
    }
    if (!g_group_p)
        return;
    for (uint32_t i = 0; i < g_group.nstreams; i++) {
        struct group_stream *gs = &g_group.streams[i];
        if (gs->recorded)
            gs->recorded = cp_cu.cuEventRecord(cp_ev_end(gs->ctx, (uint32_t)gs->pair),
                                               (CUstream)gs->stream) == CUDA_SUCCESS;
        if (gs->pair >= 0 && gs->nops == 0)
            cp_ev_pair_put(gs->ctx, (uint32_t)gs->pair);
    }
    /* Each CALL said TIMED, so each gets its DONE, with timing "none" if the events failed;
     * the last op of a stream returns its pair once the writer is done with it. */
    for (uint32_t k = 0; k < g_group.nops; k++) {
        struct group_op *o = &g_group.ops[k];
        struct group_stream *gs = &g_group.streams[o->stream];
        int release = --gs->nops == 0;
        push_pending(gs->ctx, (uint32_t)gs->pair, release, gs->recorded, o->comm_index, o->seq,
                     o->peer, o->op, NULL);
    }
    g_group.nstreams = g_group.nops = 0;
}

static int start_hook(const cp_start_info *s)
{
    (void)s;
    timing_start();
    return 0;
}

const cp_module cp_module_gpu_timing = {
    .name = "gpu_timing",
    .start = start_hook,
    .after_fork_child = timing_reset_after_fork,
};
