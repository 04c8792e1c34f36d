/* watchdog: --timeout, as PyTorch's NCCL watchdog does it.
 *
 * A thread of its own, because the main thread may be the one that is stuck: inside
 * ncclCommInitRank or ncclGroupEnd (peers that never come), or in cuStreamSynchronize behind
 * a collective a peer never joined. Each enqueued call gets an event recorded after it; the
 * thread polls the oldest with cuEventQuery every few milliseconds (never spinning), and
 * polls ncclCommGetAsyncError. A call older than the timeout, or an asynchronous NCCL error,
 * makes it abort every communicator, print one line and end the process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu/sim/sim.h"

#define RING 256 /* calls in flight before the main thread waits for the oldest */

struct entry {
    CUevent ev;
    int op, comm, live;
    uint64_t seq;
    double t0;
};

struct sim_watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, running;
    struct entry ring[RING];
    uint64_t head, tail;
    /* the blocking host call in progress, if any */
    int host_active, host_op, host_comm;
    const char *host_what;
    uint64_t host_seq;
    double host_t0;
};

/* Set under the watchdog's lock. The main thread checks it under the same lock before each
 * NCCL call and parks for good once it is set: ncclCommAbort frees the communicator, so a call
 * made after it would use a freed object. Only a call already in flight (the one that may be
 * stuck) can overlap the abort, as in PyTorch. */
static int g_aborting, g_parked;

int sim_aborting(void)
{
    return __atomic_load_n(&g_aborting, __ATOMIC_ACQUIRE);
}

_Noreturn void sim_park(void)
{
    __atomic_store_n(&g_parked, 1, __ATOMIC_RELEASE);
    for (;;)
        pause();
}

static void alarm_exit(int sig)
{
    (void)sig;
    _exit(SIM_EXIT_TIMEOUT);
}

static void describe(const struct sim *s, const char *what, int op, int comm, uint64_t seq,
                     char *out, size_t cap)
{
    if (op >= 0 && comm >= 0)
        snprintf(out, cap, "%s on comm %s (seq %llu)", sim_op_name[op], s->comms[comm].name,
                 (unsigned long long)seq);
    else
        snprintf(out, cap, "%s", what);
}

/* Called with the lock held; never returns. The line comes first, so that it is there even if
 * an abort blocks; SIGALRM then ends the process should the exit handlers hang. */
static _Noreturn void fire(struct sim *s, const char *line, int code)
{
    __atomic_store_n(&g_aborting, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->wd->mu);
    sim_say("%s", line);
    signal(SIGALRM, alarm_exit);
    alarm(10);
    int n = __atomic_load_n(&s->ncomms, __ATOMIC_ACQUIRE);
    for (int i = n - 1; i >= 0; i--)
        ncclCommAbort(s->comms[i].comm);
    /* exit() runs the libraries' destructors: let the main thread, released by the abort,
     * reach its parking place first rather than race them in driver code */
    for (int i = 0; i < 100 && !__atomic_load_n(&g_parked, __ATOMIC_ACQUIRE); i++)
        sim_sleep_us(10000);
    exit(code);
}

static void check_async(struct sim *s)
{
    int n = __atomic_load_n(&s->ncomms, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        ncclResult_t err = ncclSuccess;
        if (ncclCommGetAsyncError(s->comms[i].comm, &err) != ncclSuccess ||
            err == ncclSuccess || err == ncclInProgress)
            continue;
        char line[1024];
        const char *last = ncclGetLastError(s->comms[i].comm);
        snprintf(line, sizeof line, "NCCL async error on comm %s: %s; NCCL says: %s; aborting "
                 "the communicators", s->comms[i].name, ncclGetErrorString(err),
                 last && *last ? last : "(nothing more)");
        fire(s, line, SIM_EXIT_FAILED);
    }
}

static void *watch(void *arg)
{
    struct sim *s = arg;
    struct sim_watchdog *w = s->wd;
    double timeout = s->opt->timeout_s;
    double period = timeout / 20 < 0.001 ? 0.001 : timeout / 20 > 0.05 ? 0.05 : timeout / 20;
    /* event queries need no current context on a real driver; the emulation may want one */
    s->cu.cuCtxSetCurrent(s->ctx);
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (long)(period * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (w->stop)
            break;
        /* Entries are in issue order, so the first not done is the oldest in flight. */
        while (w->tail < w->head) {
            struct entry *e = &w->ring[w->tail % RING];
            if (e->live && s->cu.cuEventQuery(e->ev) == CUDA_ERROR_NOT_READY)
                break;
            e->live = 0;
            w->tail++;
        }
        double now = sim_now_s();
        char what[256], line[512];
        if (w->tail < w->head && now - w->ring[w->tail % RING].t0 > timeout) {
            const struct entry *e = &w->ring[w->tail % RING];
            describe(s, "a call", e->op, e->comm, e->seq, what, sizeof what);
            snprintf(line, sizeof line, "watchdog: %s not done after %g s; aborting the "
                     "communicators, exit %d", what, timeout, SIM_EXIT_TIMEOUT);
            fire(s, line, SIM_EXIT_TIMEOUT);
        }
        if (w->host_active && now - w->host_t0 > timeout) {
            describe(s, w->host_what, w->host_op, w->host_comm, w->host_seq, what, sizeof what);
            snprintf(line, sizeof line, "watchdog: %s not done after %g s (blocked in %s); "
                     "aborting the communicators, exit %d", what, timeout, w->host_what,
                     SIM_EXIT_TIMEOUT);
            fire(s, line, SIM_EXIT_TIMEOUT);
        }
        check_async(s);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int sim_watchdog_start(struct sim *s)
{
    struct sim_watchdog *w = calloc(1, sizeof *w);
    pthread_condattr_t ca;
    if (!w)
        return -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->wd = w;
    if (pthread_create(&w->thread, NULL, watch, s)) {
        sim_say("cannot start the watchdog thread");
        return -1;
    }
    w->running = 1;
    return 0;
}

void sim_watchdog_stop(struct sim *s)
{
    struct sim_watchdog *w = s->wd;
    if (!w)
        return;
    if (w->running) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        w->running = 0;
    }
    for (int i = 0; i < RING; i++)
        if (w->ring[i].ev)
            s->cu.cuEventDestroy(w->ring[i].ev);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    s->wd = NULL;
}

void sim_watchdog_enter(struct sim *s, const char *what, int op, int comm, uint64_t seq)
{
    struct sim_watchdog *w = s->wd;
    pthread_mutex_lock(&w->mu);
    if (sim_aborting()) {
        pthread_mutex_unlock(&w->mu);
        sim_park();
    }
    w->host_active = 1;
    w->host_what = what;
    w->host_op = op;
    w->host_comm = comm;
    w->host_seq = seq;
    w->host_t0 = sim_now_s();
    pthread_mutex_unlock(&w->mu);
}

void sim_watchdog_leave(struct sim *s)
{
    struct sim_watchdog *w = s->wd;
    pthread_mutex_lock(&w->mu);
    w->host_active = 0;
    pthread_mutex_unlock(&w->mu);
}

void sim_watchdog_track(struct sim *s, int op, int comm, uint64_t seq)
{
    struct sim_watchdog *w = s->wd;
    pthread_mutex_lock(&w->mu);
    while (w->head - w->tail >= RING) {
        /* Full: wait for the oldest outside the lock, as NCCL itself bounds work in flight. */
        uint64_t t = w->tail;
        CUevent ev = w->ring[t % RING].ev;
        pthread_mutex_unlock(&w->mu);
        sim_cu_check(s, s->cu.cuEventSynchronize(ev), "cuEventSynchronize");
        pthread_mutex_lock(&w->mu);
        if (w->tail == t) {
            w->ring[t % RING].live = 0;
            w->tail++;
        }
    }
    struct entry *e = &w->ring[w->head % RING];
    CUresult made = e->ev ? CUDA_SUCCESS : s->cu.cuEventCreate(&e->ev, CU_EVENT_DISABLE_TIMING);
    CUresult recorded = made ? made : s->cu.cuEventRecord(e->ev, s->comms[comm].stream);
    if (!recorded) {
        e->op = op;
        e->comm = comm;
        e->seq = seq;
        e->t0 = sim_now_s();
        e->live = 1;
        w->head++;
    }
    /* a failure ends the process, which stops this thread: never with the lock held */
    pthread_mutex_unlock(&w->mu);
    sim_cu_check(s, made, "cuEventCreate");
    sim_cu_check(s, recorded, "cuEventRecord");
}
