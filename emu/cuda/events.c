/* events: markers a stream reaches in order, stamped with the stream's model clock.
 *
 * Choices where CUDA is subtle:
 *  - A never-recorded event is complete (query/synchronize succeed, as in CUDA), but
 *    ElapsedTime on it is CUDA_ERROR_INVALID_HANDLE.
 *  - Re-recording resets: the event is complete when its latest record is reached.
 *  - Destroying an event with records pending is allowed; it lives until they are reached.
 *  - An event last recorded under capture is never reached by a stream:
 *    Query/Synchronize/ElapsedTime say CUDA_ERROR_CAPTURED_EVENT, and a stream that waits
 *    on it joins the capture (how CUDA forks a capture into other streams).
 * All event state is under one lock and one condition variable: few events are waited on at
 * once, and a waiter never spins.
 */
#include <stdlib.h>

#include "emu/cuda/cuda_internal.h"

pthread_mutex_t g_ev_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_ev_cv = PTHREAD_COND_INITIALIZER;
static struct CUevent_st *g_ev_free;

/* COLLPROF_EMU_EVENT_NS=R[:Q]: the real driver's event calls take the calling thread R ns a
 * record and Q ns a query or elapsed time (default R/5), spent holding one lock of the
 * driver's, so that a profiler's own thread reaping events contends with the job's records
 * (an H100: a timed record 1.91 µs, a query 0.37). 0 (the default): free, as before. */
static pthread_mutex_t g_drv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_cost_once = PTHREAD_ONCE_INIT;
static uint64_t g_record_ns, g_query_ns;

static void cost_init(void)
{
    const char *v = getenv("COLLPROF_EMU_EVENT_NS");
    if (!v || !*v)
        return;
    char *end;
    unsigned long long r = strtoull(v, &end, 10), q = r / 5;
    if (*end == ':')
        q = strtoull(end + 1, &end, 10);
    if (*end || r > 1000000000ull || q > 1000000000ull)
        return; /* not a cost: none */
    g_record_ns = r;
    g_query_ns = q;
}

static void driver_cost(int record)
{
    pthread_once(&g_cost_once, cost_init);
    uint64_t ns = record ? g_record_ns : g_query_ns;
    if (!ns)
        return;
    pthread_mutex_lock(&g_drv_mu);
    for (uint64_t until = cu_now_ns() + ns; cu_now_ns() < until;)
        ;
    pthread_mutex_unlock(&g_drv_mu);
}

static struct CUevent_st *event_alloc(unsigned flags, int handle)
{
    pthread_mutex_lock(&g_ev_mu);
    struct CUevent_st *e = g_ev_free;
    if (e)
        g_ev_free = e->next_free;
    pthread_mutex_unlock(&g_ev_mu);
    if (!e && !(e = calloc(1, sizeof *e)))
        return NULL;
    pthread_mutex_lock(&g_ev_mu);
    e->flags = flags;
    e->refs = 1;
    e->handle_alive = handle;
    e->gen = e->done_gen = 0;
    e->stamp_ns = 0;
    e->held_gen = 0;
    e->captured = 0;
    e->cap_origin = NULL;
    e->next_free = NULL;
    __atomic_store_n(&e->magic, handle ? EVENT_MAGIC : DEAD_MAGIC, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_ev_mu);
    return e;
}

struct CUevent_st *cu_event_internal(void) { return event_alloc(CU_EVENT_DISABLE_TIMING, 0); }

/* Caller holds g_ev_mu. */
static void unref_locked(struct CUevent_st *e)
{
    if (--e->refs == 0) {
        e->magic = DEAD_MAGIC;
        e->next_free = g_ev_free;
        g_ev_free = e;
    }
}

void cu_event_unref(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_ev_mu);
    unref_locked(e);
    pthread_mutex_unlock(&g_ev_mu);
}

void cu_event_reach(struct CUevent_st *e, uint64_t gen, uint64_t stamp)
{
    pthread_mutex_lock(&g_ev_mu);
    if (gen > e->done_gen) {
        e->done_gen = gen;
        e->stamp_ns = stamp;
    }
    pthread_cond_broadcast(&g_ev_cv);
    pthread_mutex_unlock(&g_ev_mu);
}

struct CUevent_st *cu_event_ref_live(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_ev_mu);
    int live = e->magic == EVENT_MAGIC;
    if (live)
        e->refs++;
    pthread_mutex_unlock(&g_ev_mu);
    return live ? e : NULL;
}

void cu_event_hold(struct CUevent_st *e, uint64_t gen)
{
    pthread_mutex_lock(&g_ev_mu);
    if (e->gen == gen)
        e->held_gen = gen;
    pthread_mutex_unlock(&g_ev_mu);
}

void cu_event_restamp(struct CUevent_st *e, uint64_t gen, uint64_t stamp)
{
    pthread_mutex_lock(&g_ev_mu);
    if (e->done_gen == gen && e->gen == gen && stamp > e->stamp_ns)
        e->stamp_ns = stamp;
    if (e->held_gen == gen)
        e->held_gen = 0;
    pthread_cond_broadcast(&g_ev_cv);
    pthread_mutex_unlock(&g_ev_mu);
}

void cu_event_await(struct CUevent_st *e, uint64_t gen, uint64_t *vtime)
{
    pthread_mutex_lock(&g_ev_mu);
    while (e->done_gen < gen || (e->held_gen && e->held_gen == gen))
        pthread_cond_wait(&g_ev_cv, &g_ev_mu);
    /* The stamp of the newest reached record, at least that of `gen`. */
    if (e->stamp_ns > *vtime)
        *vtime = e->stamp_ns;
    pthread_mutex_unlock(&g_ev_mu);
}

static CUresult event_resolve(CUevent h)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!h || __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult cu_event_record_on(struct CUevent_st *e, struct CUstream_st *s, int barrier)
{
    pthread_mutex_lock(&s->mu);
    int cap = s->capture;
    struct CUstream_st *origin = s->cap_origin;
    pthread_mutex_unlock(&s->mu);
    if (cap == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (cap == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        /* Becomes a node of the graph: nothing will ever reach it in this stream. */
        pthread_mutex_lock(&g_ev_mu);
        e->gen++;
        e->captured = 1;
        e->cap_origin = origin;
        pthread_mutex_unlock(&g_ev_mu);
        return CUDA_SUCCESS;
    }
    cu_item *it = cu_item_new(ITEM_RECORD);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_ev_mu);
    it->gen = ++e->gen;
    it->ev = e;
    e->refs++;
    e->captured = 0;
    pthread_mutex_unlock(&g_ev_mu);
    return cu_stream_push(s, it, barrier);
}

CUresult cu_stream_wait_on(struct CUstream_st *s, struct CUevent_st *e, int barrier)
{
    pthread_mutex_lock(&g_ev_mu);
    uint64_t gen = e->gen;
    int captured = e->captured;
    struct CUstream_st *origin = e->cap_origin;
    if (gen > 0 && !captured)
        e->refs++;
    pthread_mutex_unlock(&g_ev_mu);
    if (gen == 0)
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    if (captured) {
        pthread_mutex_lock(&s->mu);
        CUresult r = CUDA_SUCCESS;
        if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) {
            if (s->legacy) {
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            } else {
                s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
                s->cap_origin = origin;
            }
        }
        pthread_mutex_unlock(&s->mu);
        return r;
    }
    cu_item *it = cu_item_new(ITEM_WAIT);
    if (!it) {
        cu_event_unref(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    it->ev = e;
    it->gen = gen;
    return cu_stream_push(s, it, barrier);
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUctx_st *c;
    CUresult r = cu_current_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!phEvent || (Flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    /* CUDA requires interprocess events to be timing-free. */
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = event_alloc(Flags, 1);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = e;
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult r = event_resolve(hEvent);
    struct CUstream_st *s;
    if (r != CUDA_SUCCESS || (r = cu_stream_resolve(hStream, &s)) != CUDA_SUCCESS)
        return r;
    driver_cost(1);
    return cu_event_record_on(hEvent, s, 1);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CUresult r = event_resolve(hEvent);
    struct CUstream_st *s;
    if (r != CUDA_SUCCESS || (r = cu_stream_resolve(hStream, &s)) != CUDA_SUCCESS)
        return r;
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    return cu_stream_wait_on(s, hEvent, 1);
}

/* The state of an event's latest record, g_ev_mu held. */
static CUresult state_locked(const struct CUevent_st *e)
{
    if (e->captured)
        return CUDA_ERROR_CAPTURED_EVENT;
    int held = e->held_gen && e->held_gen == e->gen;
    return e->done_gen == e->gen && !held ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventQuery(CUevent hEvent)
{
    CUresult r = event_resolve(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    driver_cost(0);
    pthread_mutex_lock(&g_ev_mu);
    r = state_locked(hEvent);
    pthread_mutex_unlock(&g_ev_mu);
    return r;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult r = event_resolve(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUevent_st *e = hEvent;
    pthread_mutex_lock(&g_ev_mu);
    if (e->captured) {
        pthread_mutex_unlock(&g_ev_mu);
        return CUDA_ERROR_CAPTURED_EVENT;
    }
    /* The record current at the call: a later re-record does not extend the wait. */
    uint64_t target = e->gen;
    while (e->done_gen < target || (e->held_gen && e->held_gen == target))
        pthread_cond_wait(&g_ev_cv, &g_ev_mu);
    pthread_mutex_unlock(&g_ev_mu);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult r = event_resolve(hStart);
    if (r != CUDA_SUCCESS || (r = event_resolve(hEnd)) != CUDA_SUCCESS)
        return r;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    driver_cost(0);
    pthread_mutex_lock(&g_ev_mu);
    if (hStart->gen == 0 || hEnd->gen == 0) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if ((r = state_locked(hStart)) == CUDA_SUCCESS &&
               (r = state_locked(hEnd)) == CUDA_SUCCESS) {
        double ns = (double)hEnd->stamp_ns - (double)hStart->stamp_ns;
        *pMilliseconds = (float)(ns / 1e6);
    }
    pthread_mutex_unlock(&g_ev_mu);
    return r;
}

/* The symbol drivers before 12.8 export: same signature and meaning. */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult r = event_resolve(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_ev_mu);
    if (hEvent->handle_alive) {
        hEvent->handle_alive = 0;
        hEvent->magic = DEAD_MAGIC;
        unref_locked(hEvent);
    }
    pthread_mutex_unlock(&g_ev_mu);
    return CUDA_SUCCESS;
}
