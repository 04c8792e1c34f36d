/* streams: one worker thread per stream runs its items in order, on a model clock.
 *
 * An item starts at max(stream vtime, the wall time it was enqueued); a work item's function
 * returns its model end and the worker sleeps until then if the CPU was faster, so the host
 * sees the model's durations; the stream's vtime becomes that end (emu_stream.h).
 *
 * Workers start on a stream's first item, are detached and block every signal (a process's
 * handlers run on its own threads, as with the driver's threads). Nothing joins them at exit:
 * exit() with work in flight, or a stream hung on a peer that never comes, ends the process
 * like a GPU job's exit does. A destroyed stream drains its queue and then its worker frees it.
 *
 * The legacy (NULL) stream synchronises implicitly as CUDA's does: its items wait for the work
 * already queued on every blocking stream of its context, and a blocking stream's items wait
 * for the legacy stream's queued work. CU_STREAM_PER_THREAD is served by the legacy stream too
 * (a simplification: a per-thread default stream would not wait for other blocking streams).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/cuda/cuda_internal.h"

static struct CUstream_st *g_stream_free;
static _Atomic uint32_t g_stream_ids;
static const cpemu_activity_hooks *_Atomic g_hooks;

void cpemu_activity_set_hooks(const cpemu_activity_hooks *hooks) { atomic_store(&g_hooks, hooks); }

cu_item *cu_item_new(int kind)
{
    cu_item *it = calloc(1, sizeof *it);
    if (it) {
        it->kind = kind;
        it->enq_ns = cu_now_ns();
    }
    return it;
}

/* Releases an item: its free_fn (for work), its event reference, its memory. */
static void item_drop(cu_item *it)
{
    if (it->kind == ITEM_WORK && it->free_fn)
        it->free_fn(it->arg);
    if (it->ev)
        cu_event_unref(it->ev);
    free(it);
}

/* Runs an item on the worker. A record only computes its stamp here: the event completes
 * together with the stream's progress (worker_main), so no one can see one without the other. */
static void run_item(struct CUstream_st *s, cu_item *it)
{
    uint64_t start = s->vtime > it->enq_ns ? s->vtime : it->enq_ns;
    switch (it->kind) {
    case ITEM_WORK: {
        uint64_t end = it->fn(it->arg, start);
        if (end < start)
            end = start;
        cu_sleep_until(end);
        s->vtime = end;
        const cpemu_activity_hooks *h = atomic_load(&g_hooks);
        if (h && it->name)
            h->done(it->corr, it->name, start, end, (uint32_t)s->ctx->dev, s->ctx->id, s->id);
        if (it->free_fn) /* before the item counts as done: see worker_main */
            it->free_fn(it->arg);
        it->free_fn = NULL;
        break;
    }
    case ITEM_RECORD:
        s->vtime = start;
        it->stamp = start;
        break;
    case ITEM_WAIT:
        cu_event_await(it->ev, it->gen, &s->vtime);
        break;
    case ITEM_HOLD: {
        /* Enqueued as of the held record's own enqueue time, so it starts right where that
         * record stood; the record then completes where the hold ends. */
        /* Late by hold_ns from the operation's issue, whenever the held record stood: a
         * trailing record enqueued long before (a job's own event, not a profiler's start
         * event) must not let an idle stream absorb the delay. */
        uint64_t end = (start > it->hold_from ? start : it->hold_from) + it->hold_ns;
        if (it->until) {
            /* COLLPROF_EMU_HANG: a kernel that never starts; only an abort lets it go. */
            struct timespec ms = {0, 1000000};
            while (!atomic_load(it->until))
                nanosleep(&ms, NULL);
            end = cu_now_ns();
            if (end < start)
                end = start;
        }
        cu_sleep_until(end);
        s->vtime = end;
        if (it->ev)
            cu_event_restamp(it->ev, it->gen, end);
        break;
    }
    }
}

static void *worker_main(void *p)
{
    struct CUstream_st *s = p;
    /* libnccl's work functions may ask which device they run for. */
    cu_bind_thread(s->ctx);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->wake, &s->mu);
        if (!s->head)
            break;
        cu_item *it = s->head;
        pthread_mutex_unlock(&s->mu);
        run_item(s, it);
        /* Counted done only after its free_fn ran: whoever synchronised on the stream may then
         * free what free_fn still used. Until then a query sees it pending. */
        pthread_mutex_lock(&s->mu);
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        if (it->kind == ITEM_RECORD)
            cu_event_reach(it->ev, it->gen, it->stamp);
        s->done_seq++;
        pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->mu);
        item_drop(it);
        pthread_mutex_lock(&s->mu);
    }
    s->worker = 0;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&g_cu.mu);
    s->next_free = g_stream_free;
    g_stream_free = s;
    pthread_mutex_unlock(&g_cu.mu);
    return NULL;
}

/* Caller holds s->mu. */
static int start_worker(struct CUstream_st *s)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &attr, worker_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        s->worker = 1;
    return rc;
}

static struct CUstream_st *stream_alloc(struct CUctx_st *ctx, unsigned flags, int legacy)
{
    pthread_mutex_lock(&g_cu.mu);
    struct CUstream_st *s = g_stream_free;
    if (s)
        g_stream_free = s->next_free;
    pthread_mutex_unlock(&g_cu.mu);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        /* Initialised once: a late waiter on a recycled stream must never meet a re-init. */
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->wake, NULL);
        pthread_cond_init(&s->idle, NULL);
    }
    pthread_mutex_lock(&s->mu);
    s->id = atomic_fetch_add(&g_stream_ids, 1) + 1;
    s->ctx = ctx;
    s->flags = flags;
    s->legacy = legacy;
    s->head = s->tail = NULL;
    s->vtime = 0;
    s->stop = 0;
    s->worker = 0;
    s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
    s->cap_origin = NULL;
    s->next = s->next_free = NULL;
    __atomic_store_n(&s->magic, STREAM_MAGIC, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->mu);
    return s;
}

void cu_stream_retire(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    __atomic_store_n(&s->magic, DEAD_MAGIC, __ATOMIC_RELEASE);
    s->stop = 1;
    int serving = s->worker;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (!serving) {
        pthread_mutex_lock(&g_cu.mu);
        s->next_free = g_stream_free;
        g_stream_free = s;
        pthread_mutex_unlock(&g_cu.mu);
    }
}

CUresult cu_stream_resolve(CUstream h, struct CUstream_st **out)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        struct CUctx_st *c;
        if ((r = cu_current_ctx(&c)) != CUDA_SUCCESS)
            return r;
        pthread_mutex_lock(&c->mu);
        if (!c->legacy)
            c->legacy = stream_alloc(c, CU_STREAM_DEFAULT, 1);
        *out = c->legacy;
        pthread_mutex_unlock(&c->mu);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cu_ctx_valid(h->ctx))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = h;
    return CUDA_SUCCESS;
}

static int pending(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    int p = s->done_seq != s->enq_seq;
    pthread_mutex_unlock(&s->mu);
    return p;
}

/* Appends without the implicit synchronisation. */
static CUresult push_raw(struct CUstream_st *s, cu_item *it)
{
    pthread_mutex_lock(&s->mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* Captured work waits for a graph launch that the emulation never makes. */
        int invalidated = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        pthread_mutex_unlock(&s->mu);
        item_drop(it);
        return invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    }
    if (!s->worker && start_worker(s) != 0) {
        pthread_mutex_unlock(&s->mu);
        item_drop(it);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    it->next = NULL;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->enq_seq++;
    if (it->kind == ITEM_RECORD) {
        s->last_rec = it->ev;
        s->last_rec_gen = it->gen;
        s->last_rec_enq = it->enq_ns;
    } else {
        s->last_rec = NULL;
    }
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

/* Makes `waiter` wait for what is queued on `on` now. */
static CUresult order_after(struct CUstream_st *waiter, struct CUstream_st *on)
{
    struct CUevent_st *ev = cu_event_internal();
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = cu_event_record_on(ev, on, 0);
    if (r == CUDA_SUCCESS)
        r = cu_stream_wait_on(waiter, ev, 0);
    cu_event_unref(ev);
    return r;
}

/* CUDA's legacy-stream semantics for an item about to go on s. */
static CUresult legacy_barrier(struct CUstream_st *s)
{
    struct CUctx_st *c = s->ctx;
    if (s->legacy) {
        struct CUstream_st *busy[64];
        int n = 0;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&c->mu);
        for (struct CUstream_st *o = c->streams; o; o = o->next) {
            if (o->flags & CU_STREAM_NON_BLOCKING)
                continue;
            pthread_mutex_lock(&o->mu);
            if (o->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
                /* The legacy stream may not depend on a capturing blocking stream. */
                o->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            } else if (o->done_seq != o->enq_seq && n < 64) {
                busy[n++] = o;
            }
            pthread_mutex_unlock(&o->mu);
        }
        pthread_mutex_unlock(&c->mu);
        /* Each blocking stream gets its marker before the legacy stream waits for it. */
        for (int i = 0; r == CUDA_SUCCESS && i < n; i++)
            r = order_after(s, busy[i]);
        return r;
    }
    if (s->flags & CU_STREAM_NON_BLOCKING)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&c->mu);
    struct CUstream_st *l = c->legacy;
    pthread_mutex_unlock(&c->mu);
    if (l && pending(l))
        return order_after(s, l);
    return CUDA_SUCCESS;
}

CUresult cu_stream_push(struct CUstream_st *s, cu_item *it, int barrier)
{
    if (barrier) {
        pthread_mutex_lock(&s->mu);
        int capturing = s->capture != CU_STREAM_CAPTURE_STATUS_NONE;
        pthread_mutex_unlock(&s->mu);
        CUresult r = capturing ? CUDA_SUCCESS : legacy_barrier(s);
        if (r != CUDA_SUCCESS) {
            item_drop(it);
            return r;
        }
    }
    return push_raw(s, it);
}

/* cuStreamSynchronize(NULL): the legacy stream, and so every blocking stream's work. */
static void legacy_sync(struct CUstream_st *l)
{
    struct CUctx_st *c = l->ctx;
    struct CUstream_st *list[256];
    int n = 0;
    /* A snapshot: a work function on a worker may itself need ctx->mu. */
    pthread_mutex_lock(&c->mu);
    for (struct CUstream_st *o = c->streams; o && n < 256; o = o->next)
        if (!(o->flags & CU_STREAM_NON_BLOCKING))
            list[n++] = o;
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < n; i++)
        cu_stream_wait_idle(list[i]);
    cu_stream_wait_idle(l);
}

void cu_stream_wait_idle(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enq_seq;
    while (s->done_seq < target)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

CUresult cpemu_stream_enqueue_kernel(CUstream h, const char *name, cpemu_work_fn fn, void *arg,
                                     void (*free_fn)(void *))
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(h, &s);
    if (r == CUDA_SUCCESS && !fn)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    cu_item *it = cu_item_new(ITEM_WORK);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->fn = fn;
    it->arg = arg;
    it->free_fn = free_fn;
    const cpemu_activity_hooks *hk = atomic_load(&g_hooks);
    if (name && hk) {
        it->name = name;
        it->corr = hk->launch(name);
    }
    return cu_stream_push(s, it, 1);
}

CUresult cpemu_stream_enqueue(CUstream h, cpemu_work_fn fn, void *arg, void (*free_fn)(void *))
{
    return cpemu_stream_enqueue_kernel(h, NULL, fn, arg, free_fn);
}

static CUresult hold(CUstream h, uint64_t ns, const _Atomic uint32_t *until)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(h, &s);
    if (r != CUDA_SUCCESS || (ns == 0 && !until))
        return r;
    cu_item *it = cu_item_new(ITEM_HOLD);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->hold_ns = ns;
    it->hold_from = it->enq_ns;
    it->until = until;
    pthread_mutex_lock(&s->mu);
    if (s->last_rec && (it->ev = cu_event_ref_live(s->last_rec)) != NULL) {
        it->gen = s->last_rec_gen;
        it->enq_ns = s->last_rec_enq;
        cu_event_hold(it->ev, it->gen);
    }
    pthread_mutex_unlock(&s->mu);
    return cu_stream_push(s, it, 1);
}

CUresult cpemu_stream_delay(CUstream h, uint64_t ns) { return hold(h, ns, NULL); }

CUresult cpemu_stream_block(CUstream h, const _Atomic uint32_t *until)
{
    return until ? hold(h, 0, until) : CUDA_ERROR_INVALID_VALUE;
}

int cpemu_stream_device(CUstream h)
{
    struct CUstream_st *s;
    return cu_stream_resolve(h, &s) == CUDA_SUCCESS ? s->ctx->dev : -1;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_alloc(c, Flags, 0);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&c->mu);
    s->next = c->streams;
    c->streams = s;
    pthread_mutex_unlock(&c->mu);
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD ||
        __atomic_load_n(&hStream->magic, __ATOMIC_ACQUIRE) != STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUctx_st *c = hStream->ctx;
    pthread_mutex_lock(&c->mu);
    struct CUstream_st **pp = &c->streams;
    while (*pp && *pp != hStream)
        pp = &(*pp)->next;
    if (!*pp) {
        pthread_mutex_unlock(&c->mu);
        return CUDA_ERROR_INVALID_HANDLE; /* destroyed by another thread meanwhile */
    }
    *pp = hStream->next;
    /* Returns at once; the queued work still runs, as the driver documents. */
    cu_stream_retire(hStream);
    pthread_mutex_unlock(&c->mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&s->mu);
    int capturing = s->capture != CU_STREAM_CAPTURE_STATUS_NONE;
    if (capturing) /* an illegal call during capture invalidates it, as CUDA's does */
        s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    pthread_mutex_unlock(&s->mu);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->legacy)
        legacy_sync(s);
    else
        cu_stream_wait_idle(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&s->mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (s->done_seq != s->enq_seq) {
        r = CUDA_ERROR_NOT_READY;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = s->ctx;
    return CUDA_SUCCESS;
}
