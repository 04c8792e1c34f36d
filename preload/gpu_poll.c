/* gpu_poll: the writer's side of GPU timing — in-order polling and the reference events.
 *
 * Pending pairs arrive in each thread's ring behind their CALL records and wait here in
 * issue order. Every writer tick queries each one's end event (cuEventQuery, which never
 * blocks); a completed pair becomes a DONE record and goes back to its pool.
 *
 * GPU times become host CLOCK_MONOTONIC through one reference event per context, recorded
 * on a private idle stream of that context (non-blocking, so it waits for nothing, not
 * even the legacy stream): an event on an idle stream completes at once, so the host time
 * of the record call is its GPU time, within the few µs the record takes. Then
 *     gpu_ns = ref_host_ns + cuEventElapsedTime(ref, ev)
 * ElapsedTime is float ms, whose resolution falls with the span (~60 ns at 1 s): the
 * reference is re-recorded every second, on the other of two events so that the previous
 * one serves until the new one has completed.
 *
 * The record call's host time is only known to within its own duration, and on a loaded
 * machine a preempted call takes milliseconds: one such reference put a rank's every GPU
 * time milliseconds off, a false straggler. So a new reference replaces the current one only
 * when it is tight (CP_REF_TIGHT_NS) or no wider than it; while the current one is wide, a
 * candidate is recorded every tick until a tight one comes. The first reference is used
 * whatever its width (withholding DONEs for a better one lost them at exit), and a current
 * one older than CP_REF_MAX_AGE_NS gives way to any candidate under CP_REF_STALE_OK_NS, so
 * that the GPU clock's drift from the host's cannot build up for long.
 */
#include "preload/shim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "trace/trace_writer.h"

#define CP_REANCHOR_NS 1000000000ull
#define CP_REF_TIGHT_NS 20000ull
#define CP_REF_MAX_AGE_NS 60000000000ull
#define CP_REF_STALE_OK_NS 1000000ull
#define CP_REF_WAIT_NS 200000000ull
#define CP_FINAL_WAIT_NS 200000000ull

struct ref {
    cp_gpu_ctx *ctx;
    CUstream stream;
    CUevent ev[2];
    uint64_t host_ns[2];
    uint64_t width_ns[2]; /* how long the record call took: the bound on host_ns's error */
    int cur, pending; /* -1 none */
    int state;        /* 0 not set up, 1 usable, 2 failed: pairs get DONE with timing none */
};

static struct ref g_refs[CP_GPU_CTX_MAX];
static cp_pending_slot *g_q;
static size_t g_n, g_cap;
static _Atomic int g_want;

int cp_gpu_poll_wanted(void) { return atomic_load_explicit(&g_want, memory_order_relaxed); }

size_t cp_gpu_pending_count(void) { return g_n; }

static void noch_forget(void);

/* Fork child: the parent's pending pairs and references are forgotten. */
static void forget_after_fork(void)
{
    /* The pending pairs are the parent's calls, in the parent's CUDA contexts, which a fork
     * child cannot use: polling them would write their DONEs into the child's file (with no
     * timing, as the child's driver refuses every call). Their pools stay the parent's. */
    g_n = 0;
    atomic_store_explicit(&g_want, 0, memory_order_relaxed);
    for (int i = 0; i < CP_GPU_CTX_MAX; i++)
        g_refs[i].state = 2;
    noch_forget();
}

void cp_gpu_pending_add(const cp_pending_slot *slot)
{
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 1024;
        cp_pending_slot *q = realloc(g_q, cap * sizeof *q);
        if (!q) {
            if (slot->release && !slot->pcall) /* a plugin call's "release" is no pair */
                cp_ev_pair_put(slot->ctx, slot->pair);
            /* its DONE is lost, and counted; the job goes on */
            atomic_fetch_add_explicit(&cp_lost_no_memory, 1, memory_order_relaxed);
            return;
        }
        g_q = q;
        g_cap = cap;
    }
    g_q[g_n++] = *slot;
    /* a discarded plugin call (events timed it) carries no entry: its arrival here, later
     * than its entry, still orders it for the give-up rule (noch_given_up), conservatively */
    if (slot->pcall && !slot->recorded && !slot->enter_ns)
        g_q[g_n - 1].enter_ns = cp_mono_ns();
    atomic_store_explicit(&g_want, 1, memory_order_relaxed);
}

static int push(struct ref *r)
{
    CUcontext cur = NULL;
    if (cp_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == cp_gpu_ctx_handle(r->ctx))
        return 0;
    return cp_cu.cuCtxPushCurrent(cp_gpu_ctx_handle(r->ctx)) == CUDA_SUCCESS ? 1 : -1;
}

static void pop(int pushed)
{
    CUcontext popped;
    if (pushed == 1)
        cp_cu.cuCtxPopCurrent(&popped);
}

static void ref_record(struct ref *r, int k)
{
    int pushed = push(r);
    if (pushed < 0)
        return;
    uint64_t t0 = cp_mono_ns();
    CUresult rc = cp_cu.cuEventRecord(r->ev[k], r->stream);
    uint64_t t1 = cp_mono_ns();
    pop(pushed);
    if (rc == CUDA_SUCCESS) {
        r->host_ns[k] = t0 + (t1 - t0) / 2;
        r->width_ns[k] = t1 - t0;
        r->pending = k;
    }
}

static void ref_setup(struct ref *r, cp_gpu_ctx *c)
{
    r->ctx = c;
    r->cur = r->pending = -1;
    r->state = 2;
    int pushed = push(r);
    if (pushed < 0)
        return;
    if (cp_cu.cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
        cp_cu.cuEventCreate(&r->ev[0], CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
        cp_cu.cuEventCreate(&r->ev[1], CU_EVENT_DEFAULT) == CUDA_SUCCESS)
        r->state = 1;
    pop(pushed);
    if (r->state == 1)
        ref_record(r, 0);
}

static void ref_tick(struct ref *r, uint64_t now)
{
    if (r->state != 1)
        return;
    if (r->pending >= 0) {
        CUresult q = cp_cu.cuEventQuery(r->ev[r->pending]);
        if (q == CUDA_SUCCESS) {
            int k = r->pending;
            uint64_t w = r->width_ns[k];
            if (r->cur < 0 || w <= CP_REF_TIGHT_NS || w <= r->width_ns[r->cur] ||
                (now - r->host_ns[r->cur] > CP_REF_MAX_AGE_NS && w <= CP_REF_STALE_OK_NS))
                r->cur = k;
            r->pending = -1;
        } else if (q != CUDA_ERROR_NOT_READY) {
            r->pending = -1; /* try again next tick */
        }
    }
    if (r->pending < 0 &&
        (r->cur < 0 || r->width_ns[r->cur] > CP_REF_TIGHT_NS ||
         now - r->host_ns[r->cur] > CP_REANCHOR_NS))
        ref_record(r, r->cur < 0 ? 0 : 1 - r->cur);
}

static struct ref *ref_of(cp_gpu_ctx *c)
{
    for (unsigned i = 0; i < CP_GPU_CTX_MAX; i++)
        if (g_refs[i].ctx == c)
            return &g_refs[i];
    return NULL;
}

static uint64_t to_host(const struct ref *r, float ms)
{
    double ns = (double)r->host_ns[r->cur] + (double)ms * 1e6;
    return ns > 0 ? (uint64_t)ns : 0;
}

/* 1 when the slot is finished (its DONE written), 0 while its events are in flight. */
/* Set while the process ends or flushes (exec, a comm's end): every pair is converted with
 * what there is. */
static int g_final;
/* Set only while the process ends: a plugin call NCCL has not finished is written untimed.
 * Not at a flush: NCCL goes on reporting the calls of the other comms. */
static int g_plugin_final;

/* With a job's own plugin chained, calls are given back only a while after their DONE: its
 * late ProxyOp start may still name their task event. Without one, at once: the grace held
 * 100 ms of calls out of the pool, and a process making a million calls a second ran it dry
 * (bench_shim: half its calls untimed). */
#define CP_PCALL_GRACE_NS 100000000ull
struct retired {
    cp_pcall *p;
    uint64_t at;
};
static struct retired *g_retired;
static size_t g_nretired, g_cap_retired, g_retired_head;

static void retire(cp_pcall *p)
{
    if (g_nretired == g_cap_retired) {
        size_t cap = g_cap_retired ? 2 * g_cap_retired : 256;
        struct retired *q = malloc(cap * sizeof *q);
        if (!q)
            return; /* not given back: the pool is bounded, the job goes on */
        for (size_t i = 0; i < g_nretired; i++)
            q[i] = g_retired[(g_retired_head + i) % g_cap_retired];
        free(g_retired);
        g_retired = q;
        g_cap_retired = cap;
        g_retired_head = 0;
    }
    g_retired[(g_retired_head + g_nretired++) % g_cap_retired] =
        (struct retired){p, cp_mono_ns()};
}

static void give_back_retired(uint64_t now)
{
    while (g_nretired && now - g_retired[g_retired_head].at > CP_PCALL_GRACE_NS) {
        cp_pcall_free(g_retired[g_retired_head].p);
        g_retired_head = (g_retired_head + 1) % g_cap_retired;
        g_nretired--;
    }
}

void cp_gpu_plugin_add(const cp_rec_call *rec, uint32_t pcall_index)
{
    cp_pcall *p = cp_pcall_at(pcall_index);
    if (!p)
        return;
    /* a call not TIMED (to the rank itself: NCCL times nothing of it) is only given back */
    cp_pending_slot s = {.h = {CP_REC_SHIM_PENDING, sizeof s}, .comm_index = rec->comm_index,
                         .seq = rec->seq, .peer = rec->peer, .op = rec->op,
                         .recorded = (rec->flags & CP_CALL_TIMED) != 0, .pcall = p,
                         .enter_ns = rec->enter_ns};
    cp_gpu_pending_add(&s);
}

/* The last events DONEs: a comm's first call is timed by events and described by the plugin
 * too, and the two together calibrate the plugin's GPU clock (cp_plugin_calibrate). */
#define CP_RECENT_EV 64
static struct {
    uint32_t comm_index;
    uint64_t seq;
    int32_t peer;
    uint8_t op;
    uint64_t start, end;
} g_recent_ev[CP_RECENT_EV];
static unsigned g_recent_ev_n;

static void note_events_done(const cp_rec_done *d)
{
    unsigned i = g_recent_ev_n++ % CP_RECENT_EV;
    g_recent_ev[i].comm_index = d->comm_index;
    g_recent_ev[i].seq = d->seq;
    g_recent_ev[i].peer = d->peer;
    g_recent_ev[i].op = d->op;
    g_recent_ev[i].start = d->gpu_start_ns;
    g_recent_ev[i].end = d->gpu_end_ns;
}

/* A call timed both ways. Its end event completes just after its kernel's last channel (it
 * was queued behind the kernel), so (events end - plugin end) bounds the clock offset from
 * above, like the callbacks' envelope, and is tight where the envelope is not: when NCCL's
 * proxy calls back late. (The start event completes before the kernel, by the launch: a
 * lower bound, which would put starts before their calls' entry.) 1 when done with it, 0 to
 * wait for its events' DONE. */
static int calibrate(cp_pending_slot *p, const cp_pcall_view *v)
{
    if (v->gt_start == UINT64_MAX || v->gt_end < v->gt_start)
        return 1;
    for (unsigned k = 0; k < CP_RECENT_EV && k < g_recent_ev_n; k++) {
        unsigned i = (g_recent_ev_n - 1 - k) % CP_RECENT_EV;
        if (g_recent_ev[i].comm_index == p->comm_index && g_recent_ev[i].seq == p->seq &&
            g_recent_ev[i].peer == p->peer && g_recent_ev[i].op == p->op) {
            cp_plugin_calibrate(p->pcall, g_recent_ev[i].end - v->gt_end);
            return 1;
        }
    }
    /* its events may finish a tick later; an events DONE that never came ends the wait */
    return ++p->waits > 50;
}

/* Calls whose kernel ran but whose channels NCCL never reports. NCCL's kernel channels
 * come from its proxy, and some work has no proxy op: a send to the rank itself (the one
 * case we know and handle at its start, profiler_plugin.c start_task), and by NCCL 2.28's
 * source symmetric-memory kernels and copy-engine collectives (uploadWork returns early for
 * isSymColl / isCeColl), which we cannot run here. Such a call would wait to the trace's
 * end, a false "unfinished" and a hang in `top`. NCCL runs a communicator's kernels in
 * order, so once a call of the same comm entered after it has ended (its channels came),
 * its own channels, had it any, are due within the proxy's latency (µs to ms), and its tasks
 * (NCCL starts them as its plan launches, in order too): a call with no channel begun
 * CP_NOCH_GRACE_NS after that is done, untimed. A copy-engine collective may make no task at
 * all: the same rule ends it. Captured calls never come here (kept, not recorded). Per comm
 * (direct-mapped by index; a collision only delays the rule): the latest entry of a call
 * that ended with channels. */
#define CP_NOCH_GRACE_NS 1000000000ull
#define CP_NOCH_COMMS 256
static struct {
    uint32_t comm_index;
    uint64_t enter_ns;
} g_noch_last[CP_NOCH_COMMS];
static uint64_t g_poll_now;

static void noch_forget(void) { memset(g_noch_last, 0, sizeof g_noch_last); }

static void noch_ended(const cp_pending_slot *p)
{
    if (!p->enter_ns || p->comm_index == CP_COMM_NONE)
        return;
    unsigned k = p->comm_index % CP_NOCH_COMMS;
    if (g_noch_last[k].comm_index != p->comm_index || g_noch_last[k].enter_ns < p->enter_ns) {
        g_noch_last[k].comm_index = p->comm_index;
        g_noch_last[k].enter_ns = p->enter_ns;
    }
}

static int noch_given_up(cp_pending_slot *p, const cp_pcall_view *v)
{
    if (v->ch_started || !p->enter_ns || p->comm_index == CP_COMM_NONE)
        return 0;
    unsigned k = p->comm_index % CP_NOCH_COMMS;
    if (g_noch_last[k].comm_index != p->comm_index || g_noch_last[k].enter_ns <= p->enter_ns)
        return 0;
    uint32_t now_ms = (uint32_t)(g_poll_now / 1000000u) | 1u; /* never 0: 0 is "not seen" */
    if (!p->noch_ms) {
        p->noch_ms = now_ms;
        return 0;
    }
    return (uint64_t)(uint32_t)(now_ms - p->noch_ms) * 1000000u > CP_NOCH_GRACE_NS;
}

/* A call NCCL's plugin describes: NCCL_OP and DONE once every channel stopped. At the
 * process's end a call still in flight gets its NCCL_OP (what NCCL said of it) but no DONE,
 * as an events pair in flight gets none: its CALL on disk says it never finished. */
static int finish_plugin(cp_trace_writer *w, cp_pending_slot *p)
{
    cp_pcall_view v;
    int complete = cp_pcall_state(p->pcall, &v), given_up = 0;
    if (!complete && !g_plugin_final && noch_given_up(p, &v))
        complete = given_up = 1;
    if (!complete && !g_plugin_final)
        return 0;
    if (!p->recorded && p->release) { /* calibrating */
        if (complete && !g_plugin_final && !calibrate(p, &v)) {
            /* Held from its end, not from its launch: a calibrating call that hangs (the
             * window's pick can be the call the job hangs in) once held the comm's earlier,
             * finished calls until the job's end, and the watchdog named one of them. */
            if (!p->calib_held) {
                p->calib_held = 1;
                cp_plugin_calib_queued(p->pcall, +1);
            }
            return 0;
        }
        if (p->calib_held)
            cp_plugin_calib_queued(p->pcall, -1);
    } else if (p->recorded && complete && !g_plugin_final && cp_plugin_calib_waiting(p->pcall)) {
        return 0;
    }
    if (p->recorded) {
        cp_rec_nccl_op n = {.h = {CP_REC_NCCL_OP, sizeof n}, .comm_index = p->comm_index,
                            .seq = p->seq, .nccl_seq = v.nccl_seq, .peer = p->peer,
                            .op = p->op, .algo = v.algo, .proto = v.proto,
                            .nchannels = v.nchannels, .nwarps = v.nwarps,
                            .kernel_channels = (uint8_t)(v.ch_stopped > 255 ? 255
                                                                            : v.ch_stopped),
                            .kernel_started = (uint8_t)(v.ch_started > 255 ? 255
                                                                           : v.ch_started)};
        cp_trace_writer_append(w, &n);
        if (complete) {
            cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = p->comm_index,
                             .seq = p->seq, .peer = p->peer, .op = p->op,
                             .timing = CP_TIMING_NONE};
            uint64_t a, b;
            if (v.gt_start != UINT64_MAX && p->enter_ns)
                cp_plugin_note_entry(p->pcall, p->enter_ns, v.gt_start);
            /* no channel (a task NCCL ran on none) or no clock yet: done, untimed */
            if (v.ch_stopped > 0 && v.gt_start != UINT64_MAX && v.gt_end >= v.gt_start &&
                cp_plugin_clock(p->pcall, v.gt_start, &a) == 0 &&
                cp_plugin_clock(p->pcall, v.gt_end, &b) == 0) {
                d.gpu_start_ns = a;
                d.gpu_end_ns = b;
                d.timing = CP_TIMING_PLUGIN;
            }
            cp_trace_writer_append(w, &d);
            cp_live_done(&d);
        }
    }
    if (complete && !given_up && p->recorded && v.ch_stopped > 0)
        noch_ended(p);
    if (complete) {
        /* given up on: a channel that came after all would name it, so it waits the grace
         * a chained plugin's calls wait */
        if (cp_plugin_chained() || given_up)
            retire(p->pcall);
        else
            cp_pcall_free(p->pcall); /* no one else names its events any more */
    }
    return 1;
}

/* A call CUPTI's kernel records time: DONE once its kernels' span is whole; at the end,
 * untimed if CUPTI never gave it (dropped, or still running). */
static int finish_cupti(cp_trace_writer *w, const cp_pending_slot *p)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = p->comm_index, .seq = p->seq,
                     .peer = p->peer, .op = p->op, .timing = CP_TIMING_NONE};
    uint64_t a, b;
    cp_rec_kernels k = {.h = {CP_REC_KERNELS, sizeof k}, .comm_index = p->comm_index,
                        .seq = p->seq, .peer = p->peer, .op = p->op};
    if (cp_cupti_result(p->cupti_id, &a, &b, &k)) {
        d.gpu_start_ns = a;
        d.gpu_end_ns = b < a ? a : b;
        d.timing = CP_TIMING_CUPTI;
    } else if (!g_plugin_final) {
        return 0;
    }
    cp_trace_writer_append(w, &d);
    cp_live_done(&d);
    if (k.nkernels) {
        for (unsigned i = 0; i < k.nkernels; i++) {
            cp_rec_kname n;
            if (cp_cupti_kname(k.k[i].name_index, &n))
                cp_trace_writer_append_kept(w, &n);
        }
        cp_trace_writer_append(w, &k);
    }
    return 1;
}

static int finish(cp_trace_writer *w, cp_pending_slot *p)
{
    if (p->pcall)
        return finish_plugin(w, p);
    if (p->cupti)
        return finish_cupti(w, p);
    struct ref *r = ref_of(p->ctx);
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = p->comm_index, .seq = p->seq,
                     .peer = p->peer, .op = p->op, .timing = CP_TIMING_NONE};
    if (p->recorded && r && r->state == 1) {
        if (r->cur < 0)
            return 0;
        /* A wide reference, just taken, is likely to be replaced by a tight one within a
         * few ticks: its pairs wait for it (briefly, never at exit, and not while the
         * pool runs low: a waiting pair is one the calls cannot take, and on an H200 a
         * one-rank in-place AllReduce at 3 us a call takes the pool's 4096 in 12 ms). */
        if (!g_final && r->width_ns[r->cur] > CP_REF_TIGHT_NS &&
            cp_mono_ns() - r->host_ns[r->cur] < CP_REF_WAIT_NS && g_n < CP_EV_PAIRS / 4)
            return 0;
        CUresult q = cp_cu.cuEventQuery(cp_ev_end(p->ctx, p->pair));
        if (q == CUDA_ERROR_NOT_READY)
            return 0;
        float a, b;
        if (q == CUDA_SUCCESS &&
            cp_cu.cuEventElapsedTime(&a, r->ev[r->cur], cp_ev_start(p->ctx, p->pair)) ==
                CUDA_SUCCESS &&
            cp_cu.cuEventElapsedTime(&b, r->ev[r->cur], cp_ev_end(p->ctx, p->pair)) ==
                CUDA_SUCCESS) {
            d.gpu_start_ns = to_host(r, a);
            d.gpu_end_ns = to_host(r, b);
            if (d.gpu_end_ns < d.gpu_start_ns)
                d.gpu_end_ns = d.gpu_start_ns;
            d.timing = CP_TIMING_EVENTS;
        }
    }
    cp_trace_writer_append(w, &d);
    cp_live_done(&d);
    if (d.timing == CP_TIMING_EVENTS)
        note_events_done(&d);
    if (p->release)
        cp_ev_pair_put(p->ctx, p->pair);
    return 1;
}

int cp_gpu_oldest_pending(cp_pending_slot *out)
{
    /* Pairs whose events were never recorded finish at the next poll: not in flight. */
    for (size_t i = 0; i < g_n; i++)
        if (g_q[i].recorded) {
            *out = g_q[i];
            return 1;
        }
    return 0;
}

/* Events time calls in events and auto mode, and in cupti mode those of one-rank comms. */
static int events_in_use(void)
{
    int st = atomic_load_explicit(&cp_gpu_state, memory_order_relaxed);
    return st == CP_GPU_EVENTS || st == CP_GPU_CUPTI;
}

int cp_gpu_started(const cp_pending_slot *p)
{
    if (p->pcall) {
        cp_pcall_view v;
        cp_pcall_state(p->pcall, &v);
        return v.ch_started > 0 ? CP_HANG_GPU_STARTED : CP_HANG_GPU_NOT_STARTED;
    }
    if (!p->recorded || p->cupti || !events_in_use())
        return CP_HANG_GPU_UNKNOWN;
    CUresult q = cp_cu.cuEventQuery(cp_ev_start(p->ctx, p->pair));
    if (q == CUDA_SUCCESS)
        return CP_HANG_GPU_STARTED;
    return q == CUDA_ERROR_NOT_READY ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_UNKNOWN;
}

static void poll_once(cp_trace_writer *w)
{
    uint64_t now = cp_mono_ns();
    g_poll_now = now;
    cp_plugin_tick(now);
    give_back_retired(now);
    unsigned nctx = events_in_use() ? cp_gpu_ctx_count() : 0;
    for (unsigned i = 0; i < nctx && i < CP_GPU_CTX_MAX; i++) {
        cp_gpu_ctx *c = cp_gpu_ctx_at(i);
        struct ref *r = ref_of(c);
        if (!r) {
            r = ref_of(NULL);
            ref_setup(r, c);
        }
        ref_tick(r, now);
    }
    size_t keep = 0;
    for (size_t i = 0; i < g_n; i++)
        if (!finish(w, &g_q[i]))
            g_q[keep++] = g_q[i];
    g_n = keep;
    atomic_store_explicit(&g_want, g_n > 0, memory_order_relaxed);
}

/* Whether anything pending is worth a short wait: events' pairs, and at the end plugin calls. */
static int waiting(int plugin_too)
{
    for (size_t i = 0; i < g_n; i++)
        if (!g_q[i].pcall || plugin_too)
            return 1;
    return 0;
}

void cp_gpu_poll(cp_trace_writer *w, int final)
{
    int st = atomic_load_explicit(&cp_gpu_state, memory_order_relaxed);
    if (st == CP_GPU_CUPTI)
        cp_cupti_flush(final == CP_POLL_END);
    else if (st != CP_GPU_EVENTS && st != CP_GPU_PLUGIN) {
        g_n = 0; /* a fork child's inheritance: the parent's events, not ours to query */
        atomic_store_explicit(&g_want, 0, memory_order_relaxed);
        return;
    }
    g_final = final != CP_POLL_TICK;
    g_plugin_final = 0;
    poll_once(w);
    /* At exit the job has usually synchronized already; what is still in flight gets a
     * short grace, polled, never a synchronize (at a flush, only the events' pairs: the
     * plugin's calls of other comms may run on for long). */
    uint64_t until = cp_mono_ns() + CP_FINAL_WAIT_NS;
    while (final != CP_POLL_TICK && waiting(final == CP_POLL_END) && cp_mono_ns() < until) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (st == CP_GPU_CUPTI)
            cp_cupti_flush(final == CP_POLL_END);
        poll_once(w);
    }
    if (final == CP_POLL_END) {
        g_plugin_final = 1;
        poll_once(w);
    }
}

const cp_module cp_module_gpu_poll = {.name = "gpu_poll", .after_fork_child = forget_after_fork};
