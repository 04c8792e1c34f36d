/* world: the ranks this process drives (struct cps_world, sweep_internal.h): their contexts,
 * communicators, streams, events and buffers; issuing timed work on them and waiting for it.
 *
 * Nothing waits without a deadline: completion is polled with cuEventQuery, and work not done
 * within the timeout aborts every communicator (a hung collective would otherwise keep the
 * health check from ever answering). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "selftest/sweep_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CU(call, what) CPS_CU(call, what)
#define CU_OUT(call, what) CPS_CU_OUT(call, what)

/* ---- NCCL's init with a deadline --------------------------------------------------------- */

/* A thread given up on stays blocked inside NCCL; the job it shares is freed by whichever side
 * lets go last. */
struct init_job {
    const struct cps_lib *L;
    struct cps_init_req req;
    ncclComm_t comms[CPS_MAX_GPUS];
    ncclResult_t rc;
    int done, refs;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void job_release(struct init_job *j)
{
    pthread_mutex_lock(&j->lock);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (last) {
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->cond);
        free(j);
    }
}

static void *init_thread(void *arg)
{
    struct init_job *j = arg;
    ncclComm_t comms[CPS_MAX_GPUS] = {0};
    ncclResult_t rc = ncclUnhandledCudaError;
    if (j->req.ndev > 0)
        rc = j->L->ncclCommInitAll(comms, j->req.ndev, NULL);
    /* NCCL takes the device from the calling thread's current context */
    else if (j->L->cuCtxSetCurrent(j->req.ctx) == CUDA_SUCCESS)
        rc = j->L->ncclCommInitRank(&comms[0], j->req.nranks, j->req.uid, j->req.rank);
    pthread_mutex_lock(&j->lock);
    memcpy(j->comms, comms, sizeof comms);
    j->rc = rc;
    j->done = 1;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    job_release(j);
    return NULL;
}

int cps_nccl_init_within(const struct cps_lib *L, const struct cps_init_req *req,
                         double timeout_s, ncclComm_t *comms, ncclResult_t *rc)
{
    struct init_job *j = calloc(1, sizeof *j);
    pthread_condattr_t ca;
    if (!j || req->ndev > CPS_MAX_GPUS || pthread_condattr_init(&ca)) {
        free(j);
        return -1;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, &ca);
    pthread_condattr_destroy(&ca);
    j->L = L;
    j->req = *req;
    j->refs = 2;
    pthread_t t;
    if (pthread_create(&t, NULL, init_thread, j)) {
        j->refs = 1;
        job_release(j);
        return -1;
    }
    pthread_detach(t);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)timeout_s;
    until.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->lock);
    while (!j->done && pthread_cond_timedwait(&j->cond, &j->lock, &until) == 0)
        ;
    int done = j->done;
    *rc = j->rc;
    if (done)
        memcpy(comms, j->comms, sizeof *comms * (size_t)(req->ndev > 0 ? req->ndev : 1));
    pthread_mutex_unlock(&j->lock);
    job_release(j);
    return done;
}

/* ---- the ranks of this process ---------------------------------------------------------- */

int cps_world_use(struct cps_world *w, int i, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    CU(L->cuCtxSetCurrent(w->r[i].ctx), "cuCtxSetCurrent");
    return 0;
}

int cps_world_open_local(struct cps_world *w, const struct cps_lib *L, int ndev,
                         double timeout_s, char *why, size_t whyn)
{
    memset(w, 0, sizeof *w);
    w->L = L;
    w->n = w->nranks = ndev;
    w->timeout_s = timeout_s;
    for (int i = 0; i < ndev; i++) {
        w->r[i].rank = i;
        w->r[i].dev = i;
        CUdevice dev;
        CU(L->cuDeviceGet(&dev, i), "cuDeviceGet");
        CU(L->cuDevicePrimaryCtxRetain(&w->r[i].ctx, dev), "cuDevicePrimaryCtxRetain");
    }
    ncclComm_t comms[CPS_MAX_GPUS];
    struct cps_init_req req = {.ndev = ndev};
    ncclResult_t nr;
    int done = cps_nccl_init_within(L, &req, timeout_s, comms, &nr);
    if (done <= 0) {
        if (done < 0)
            snprintf(why, whyn, "cannot start a thread for ncclCommInitAll");
        else
            snprintf(why, whyn, "ncclCommInitAll over %d GPUs did not finish within %g s: a GPU "
                     "that does not answer, or a bootstrap that cannot connect (check "
                     "NCCL_SOCKET_IFNAME)", ndev, timeout_s);
        return -1;
    }
    if (nr != ncclSuccess) {
        char e[384];
        cps_nccl_error(L, nr, NULL, e, sizeof e);
        snprintf(why, whyn, "ncclCommInitAll over %d GPUs failed: %s", ndev, e);
        cps_one_line(why);
        return -1;
    }
    w->nccl_ok = 1;
    for (int i = 0; i < ndev; i++) {
        struct cps_rank *k = &w->r[i];
        k->comm = comms[i];
        if (cps_world_use(w, i, why, whyn))
            return -1;
        CU(L->cuStreamCreate(&k->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        CU(L->cuEventCreate(&k->start, CU_EVENT_DEFAULT), "cuEventCreate");
        CU(L->cuEventCreate(&k->end, CU_EVENT_DEFAULT), "cuEventCreate");
    }
    return 0;
}

void cps_world_abort(struct cps_world *w)
{
    if (!w->nccl_ok || w->aborted)
        return;
    for (int i = 0; i < w->n; i++)
        if (w->r[i].comm) {
            (void)w->L->cuCtxSetCurrent(w->r[i].ctx);
            (void)w->L->ncclCommAbort(w->r[i].comm);
        }
    w->aborted = 1;
}

void cps_world_close(struct cps_world *w, int failed)
{
    const struct cps_lib *L = w->L;
    if (!L)
        return;
    if (failed)
        cps_world_abort(w);
    for (int i = 0; i < w->n; i++) {
        struct cps_rank *k = &w->r[i];
        if (!k->ctx)
            continue;
        (void)L->cuCtxSetCurrent(k->ctx);
        if (k->comm && w->nccl_ok && !w->aborted)
            (void)L->ncclCommDestroy(k->comm);
        k->comm = NULL;
    }
    for (int i = 0; i < w->n; i++) {
        struct cps_rank *k = &w->r[i];
        if (!k->ctx)
            continue;
        (void)L->cuCtxSetCurrent(k->ctx);
        if (k->send)
            (void)L->cuMemFree(k->send);
        if (k->recv)
            (void)L->cuMemFree(k->recv);
        if (k->xchg)
            (void)L->cuMemFree(k->xchg);
        if (k->start)
            (void)L->cuEventDestroy(k->start);
        if (k->end)
            (void)L->cuEventDestroy(k->end);
        if (k->stream)
            (void)L->cuStreamDestroy(k->stream);
        CUdevice dev;
        if (L->cuDeviceGet(&dev, k->dev) == CUDA_SUCCESS)
            (void)L->cuDevicePrimaryCtxRelease(dev);
        memset(k, 0, sizeof *k);
    }
    (void)L->cuCtxSetCurrent(NULL);
    w->n = 0;
}

int cps_world_buffers(struct cps_world *w, size_t bytes, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    if (bytes < sizeof(float))
        bytes = sizeof(float);
    for (int i = 0; i < w->n; i++) {
        struct cps_rank *k = &w->r[i];
        if (k->cap >= bytes)
            continue;
        if (cps_world_use(w, i, why, whyn))
            return -1;
        if (k->send)
            CU(L->cuMemFree(k->send), "cuMemFree");
        if (k->recv)
            CU(L->cuMemFree(k->recv), "cuMemFree");
        k->send = k->recv = 0;
        k->cap = 0;
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes on GPU %d", bytes, k->dev);
        CU(L->cuMemAlloc(&k->send, bytes), what);
        CU(L->cuMemAlloc(&k->recv, bytes), what);
        k->cap = bytes;
    }
    return 0;
}

int cps_world_xchg(struct cps_world *w, int i, size_t bytes, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    struct cps_rank *k = &w->r[i];
    if (k->xchg_cap >= bytes)
        return 0;
    if (cps_world_use(w, i, why, whyn))
        return -1;
    if (k->xchg)
        CU(L->cuMemFree(k->xchg), "cuMemFree");
    k->xchg = 0;
    k->xchg_cap = 0;
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes on GPU %d", bytes, k->dev);
    CU(L->cuMemAlloc(&k->xchg, bytes), what);
    k->xchg_cap = bytes;
    return 0;
}

/* ---- waiting and timing ------------------------------------------------------------------ */

static int wait_ends(struct cps_world *w, unsigned mask, const char *what, char *why,
                     size_t whyn)
{
    const struct cps_lib *L = w->L;
    double deadline = now_s() + w->timeout_s, last_async = 0;
    unsigned pending = mask;
    long nap_ns = 20000;
    for (;;) {
        for (int i = 0; i < w->n; i++) {
            if (!(pending & (1u << i)))
                continue;
            if (cps_world_use(w, i, why, whyn))
                return -1;
            CUresult rc = L->cuEventQuery(w->r[i].end);
            if (rc == CUDA_SUCCESS) {
                pending &= ~(1u << i);
            } else if (rc != CUDA_ERROR_NOT_READY) {
                char e[256];
                cps_cu_error(L, rc, e, sizeof e);
                snprintf(why, whyn, "%s: waiting on GPU %d failed: %s", what, w->r[i].dev, e);
                cps_one_line(why);
                cps_world_abort(w);
                return -1;
            }
        }
        if (!pending)
            return 0;
        double t = now_s();
        if (t - last_async > 0.05) {
            last_async = t;
            for (int i = 0; i < w->n; i++) {
                ncclResult_t async = ncclSuccess;
                if (!(mask & (1u << i)) ||
                    L->ncclCommGetAsyncError(w->r[i].comm, &async) != ncclSuccess ||
                    async == ncclSuccess || async == ncclInProgress)
                    continue;
                char e[384];
                cps_nccl_error(L, async, w->r[i].comm, e, sizeof e);
                snprintf(why, whyn, "%s: NCCL reported an error on rank %d: %s", what,
                         w->r[i].rank, e);
                cps_one_line(why);
                cps_world_abort(w);
                return -1;
            }
        }
        if (t > deadline) {
            snprintf(why, whyn, "%s did not finish within %g s: every communicator aborted",
                     what, w->timeout_s);
            cps_world_abort(w);
            return -1;
        }
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

int cps_world_drain(struct cps_world *w, unsigned mask, const char *what, char *why,
                    size_t whyn)
{
    const struct cps_lib *L = w->L;
    for (int i = 0; i < w->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (cps_world_use(w, i, why, whyn))
            return -1;
        CU(L->cuEventRecord(w->r[i].end, w->r[i].stream), "cuEventRecord");
    }
    return wait_ends(w, mask, what, why, whyn);
}

static void destroy_events(const struct cps_lib *L, CUevent *ev, int n)
{
    for (int i = 0; i < n; i++)
        if (ev[i])
            (void)L->cuEventDestroy(ev[i]);
    free(ev);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cps_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int cps_time_each(struct cps_world *w, unsigned mask, cps_issue_fn fn, void *arg, int warmup,
                  int iters, int shortest, const char *what, double *us, char *why,
                  size_t whyn)
{
    const struct cps_lib *L = w->L;
    int per = iters + 1, rc = -1;
    /* ev[i * per + k]: rank i's event before call k (k = iters: after the last) */
    CUevent *ev = calloc((size_t)w->n * (size_t)per, sizeof *ev);
    if (!ev) {
        snprintf(why, whyn, "%s: out of memory", what);
        return -1;
    }
    for (int i = 0; i < w->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (cps_world_use(w, i, why, whyn))
            goto out;
        for (int k = 0; k < per; k++)
            CU_OUT(L->cuEventCreate(&ev[i * per + k], CU_EVENT_DEFAULT), "cuEventCreate");
    }
    for (int k = 0; k < warmup; k++)
        if (fn(w, arg, why, whyn))
            goto out;
    for (int k = 0; k < per; k++) {
        if (k > 0 && fn(w, arg, why, whyn))
            goto out;
        for (int i = 0; i < w->n; i++) {
            if (!(mask & (1u << i)))
                continue;
            if (cps_world_use(w, i, why, whyn))
                goto out;
            CU_OUT(L->cuEventRecord(ev[i * per + k], w->r[i].stream), "cuEventRecord");
        }
    }
    if (cps_world_drain(w, mask, what, why, whyn))
        goto out;
    for (int k = 0; k < iters; k++) {
        float pick = -1;
        for (int i = 0; i < w->n; i++) {
            if (!(mask & (1u << i)))
                continue;
            float ms = 0;
            if (cps_world_use(w, i, why, whyn))
                goto out;
            CU_OUT(L->cuEventElapsedTime(&ms, ev[i * per + k], ev[i * per + k + 1]),
               "cuEventElapsedTime");
            if (pick < 0 || (shortest ? ms < pick : ms > pick))
                pick = ms;
        }
        us[k] = pick > 0 ? (double)pick * 1000.0 : 0.0;
    }
    rc = 0;
out:
    destroy_events(L, ev, w->n * per);
    return rc;
}
