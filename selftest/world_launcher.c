/* world_launcher: the sweep's world when torchrun, mpirun or srun started one process per GPU.
 *
 * This process drives one rank (struct cps_world with n = 1): the device of its local rank,
 * rank 0's ncclUniqueId through launcher/launcher.h's rendezvous, ncclCommInitRank. What one
 * process would know about all ranks at once (their GPUs, the slowest rank's time, the wrong
 * elements, NCCL's log) each rank here knows only of itself, so those figures travel over the
 * communicator itself (an all-gather or an all-reduce of a few bytes) and every rank ends with
 * the same run, hence the same verdict and exit code. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selftest/sweep_internal.h"

#define CU(call, what) CPS_CU(call, what)

void cps_say_why(void *ctx, const char *line)
{
    struct cps_say *s = ctx;
    /* a line before the failing one may be a note (a stray peer ignored): the last one wins */
    if (s->whyn) {
        snprintf(s->why, s->whyn, "%s", line);
        cps_one_line(s->why);
    }
}

static int init_rank(struct cps_world *w, CUcontext ctx, const ncclUniqueId *uid,
                     const cp_launcher *id, double timeout_s, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    struct cps_init_req req = {.ctx = ctx, .uid = *uid, .nranks = id->world, .rank = id->rank};
    ncclResult_t rc;
    int done = cps_nccl_init_within(L, &req, timeout_s, &w->r[0].comm, &rc);
    if (done < 0) {
        snprintf(why, whyn, "cannot start a thread for ncclCommInitRank");
        return -1;
    }
    if (!done) {
        snprintf(why, whyn, "ncclCommInitRank over %d ranks did not finish within %g s: a rank "
                 "never joined", id->world, timeout_s);
        return -1;
    }
    if (rc != ncclSuccess) {
        char e[384];
        cps_nccl_error(L, rc, NULL, e, sizeof e);
        snprintf(why, whyn, "ncclCommInitRank over %d ranks failed: %s", id->world, e);
        cps_one_line(why);
        w->r[0].comm = NULL;
        return -1;
    }
    w->nccl_ok = 1;
    return 0;
}

/* ---- small exchanges over the communicator ---------------------------------------------- */

enum { XCHG_ALLGATHER, XCHG_ALLREDUCE };

/* In place on local rank 0's exchange buffer: an all-gather of `bytes` per rank (buf holds
 * nranks of them, this rank's at its own offset), or an all-reduce of n doubles. */
static int xchg(struct cps_world *w, int kind, void *buf, size_t bytes, int op,
                const char *what, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    struct cps_rank *k = &w->r[0];
    size_t total = kind == XCHG_ALLGATHER ? bytes * (size_t)w->nranks : bytes;
    size_t mine = kind == XCHG_ALLGATHER ? bytes * (size_t)w->world_rank : 0;
    if (cps_world_xchg(w, 0, total, why, whyn) || cps_world_use(w, 0, why, whyn))
        return -1;
    CU(L->cuMemcpyHtoD(k->xchg + mine, (char *)buf + mine, bytes), "cuMemcpyHtoD");
    /* the copy runs on the legacy stream, which our non-blocking stream does not wait for */
    CU(L->cuCtxSynchronize(), "cuCtxSynchronize");
    void *p = (void *)(uintptr_t)k->xchg;
    ncclResult_t rc =
        kind == XCHG_ALLGATHER
            ? L->ncclAllGather((char *)p + mine, p, bytes, ncclUint8, k->comm, k->stream)
            : L->ncclAllReduce(p, p, bytes / sizeof(double), ncclFloat64, (ncclRedOp_t)op,
                               k->comm, k->stream);
    if (rc != ncclSuccess) {
        char e[384];
        cps_nccl_error(L, rc, k->comm, e, sizeof e);
        snprintf(why, whyn, "%s: %s failed: %s", what,
                 kind == XCHG_ALLGATHER ? "ncclAllGather" : "ncclAllReduce", e);
        cps_one_line(why);
        return -1;
    }
    if (cps_world_drain(w, 1, what, why, whyn))
        return -1;
    CU(L->cuMemcpyDtoH(buf, k->xchg, total), "cuMemcpyDtoH");
    return 0;
}

int cps_world_agree(struct cps_world *w, double *v, size_t n, int op, const char *what,
                    char *why, size_t whyn)
{
    if (w->n >= w->nranks || n == 0)
        return 0;
    return xchg(w, XCHG_ALLREDUCE, v, n * sizeof *v, op, what, why, whyn);
}

/* ---- the world -------------------------------------------------------------------------- */

/* One rank's GPU as it travels: fixed size, the same layout in every process of the job. */
struct ident {
    char name[CPS_NAME_BYTES];
    char pci[CPS_PCI_BYTES];
    char host[CPS_HOST_BYTES];
    int32_t cc_major, cc_minor, cuda_index;
};

int cps_run_host_ranks(const cps_run *r, int rank, int *out)
{
    int n = 0;
    for (int i = 0; i < r->nranks && n < CPS_MAX_GPUS; i++)
        if (strcmp(r->gpus[i].host, r->gpus[rank].host) == 0)
            out[n++] = i;
    return n;
}

static int exchange_gpus(struct cps_world *w, const cps_cuda_gpu *me, int local_world,
                         cps_run *r, char *why, size_t whyn)
{
    int n = w->nranks;
    struct ident *all = calloc((size_t)n, sizeof *all);
    r->gpus = calloc((size_t)n, sizeof *r->gpus);
    if (!all || !r->gpus) {
        free(all);
        snprintf(why, whyn, "out of memory");
        return -1;
    }
    struct ident *mine = &all[w->world_rank];
    snprintf(mine->name, sizeof mine->name, "%s", me->name);
    snprintf(mine->pci, sizeof mine->pci, "%s", me->pci);
    snprintf(mine->host, sizeof mine->host, "%s", me->host);
    mine->cc_major = me->cc_major;
    mine->cc_minor = me->cc_minor;
    mine->cuda_index = me->cuda_index;
    if (xchg(w, XCHG_ALLGATHER, all, sizeof *all, 0, "the ranks' GPUs", why, whyn)) {
        free(all);
        return -1;
    }
    r->nhosts = 0;
    r->local_ranks = 0;
    for (int i = 0; i < n; i++) {
        cps_cuda_gpu *g = &r->gpus[i];
        struct ident *d = &all[i];
        /* another process's strings: terminated here whatever it sent */
        d->name[sizeof d->name - 1] = d->pci[sizeof d->pci - 1] = d->host[sizeof d->host - 1] = 0;
        g->rank = i;
        g->cuda_index = d->cuda_index;
        g->cc_major = d->cc_major;
        g->cc_minor = d->cc_minor;
        snprintf(g->name, sizeof g->name, "%s", d->name);
        snprintf(g->pci, sizeof g->pci, "%s", d->pci);
        snprintf(g->host, sizeof g->host, "%s", d->host);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(all[j].host, d->host) == 0;
        r->nhosts += !seen;
        r->local_ranks += strcmp(d->host, me->host) == 0;
    }
    /* every rank refuses a job with a crowded host, not only that host's ranks */
    for (int i = 0; i < n; i++) {
        int on = 0;
        for (int j = 0; j < n; j++)
            on += strcmp(all[j].host, all[i].host) == 0;
        if (on > CPS_MAX_GPUS) {
            snprintf(why, whyn, "%d ranks on host '%s' (this host's LOCAL_WORLD_SIZE: %d): at "
                     "most %d per host", on, all[i].host, local_world, CPS_MAX_GPUS);
            free(all);
            return -1;
        }
    }
    free(all);
    return 0;
}

int cps_world_open_launcher(struct cps_world *w, const struct cps_lib *L, const cp_launcher *id,
                            double timeout_s, cps_run *r, char *why, size_t whyn)
{
    memset(w, 0, sizeof *w);
    w->L = L;
    w->n = 1;
    w->nranks = id->world;
    w->world_rank = id->rank;
    w->timeout_s = timeout_s;
    r->multi_process = 1;
    r->world_rank = id->rank;
    r->nranks = id->world;
    CUresult crc = L->cuInit(0);
    if (crc != CUDA_SUCCESS)
        return cps_cu_fail(L, crc, crc == CUDA_ERROR_NO_DEVICE ? "no GPU: cuInit" : "cuInit",
                           why, whyn);
    int count = 0;
    CU(L->cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count <= 0) {
        snprintf(why, whyn, "no GPU: the CUDA driver sees none (rank %d)", id->rank);
        return -1;
    }
    (void)L->cuDriverGetVersion(&r->cuda_driver_version);
    /* NCCL refuses two ranks on one GPU: more local ranks than GPUs ends at its init, and the
     * reason then says why */
    char shared[160] = "";
    if (id->local_world > count || id->local_rank >= count)
        snprintf(shared, sizeof shared, " (%d local ranks on %d GPU%s: local rank %d took GPU "
                 "%d, which another rank shares)", id->local_world, count, count == 1 ? "" : "s",
                 id->local_rank, id->local_rank % count);
    struct cps_rank *k = &w->r[0];
    k->rank = id->rank;
    k->dev = id->local_rank % count;
    char host[CPS_HOST_BYTES] = "";
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "?");
    cps_cuda_gpu me;
    memset(&me, 0, sizeof me);
    if (cps_gpu_identity(L, k->dev, host, &me, why, whyn))
        return -1;
    CUdevice dev;
    CU(L->cuDeviceGet(&dev, k->dev), "cuDeviceGet");
    CU(L->cuDevicePrimaryCtxRetain(&k->ctx, dev), "cuDevicePrimaryCtxRetain");
    if (cps_world_use(w, 0, why, whyn))
        return -1;

    ncclUniqueId uid;
    memset(&uid, 0, sizeof uid);
    if (id->rank == 0) {
        ncclResult_t nr = L->ncclGetUniqueId(&uid);
        if (nr != ncclSuccess) {
            char e[384];
            cps_nccl_error(L, nr, NULL, e, sizeof e);
            snprintf(why, whyn, "ncclGetUniqueId failed: %s", e);
            cps_one_line(why);
            return -1;
        }
    }
    struct cps_say say = {why, whyn};
    if (cp_rendezvous(id, timeout_s, &uid, cps_say_why, &say))
        return -1;
    if (init_rank(w, k->ctx, &uid, id, timeout_s, why, whyn)) {
        size_t len = strlen(why);
        if (shared[0] && len < whyn)
            snprintf(why + len, whyn - len, "%s", shared);
        return -1;
    }
    CU(L->cuStreamCreate(&k->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CU(L->cuEventCreate(&k->start, CU_EVENT_DEFAULT), "cuEventCreate");
    CU(L->cuEventCreate(&k->end, CU_EVENT_DEFAULT), "cuEventCreate");
    return exchange_gpus(w, &me, id->local_world, r, why, whyn);
}

/* ---- NCCL's log, merged ---------------------------------------------------------------- */

/* What each rank read of its own log, as it travels. */
struct log_digest {
    int32_t lines, count[CPS_TR_NKINDS], ib_found, nvls;
    char network[sizeof(((cps_nccl_log *)0)->network)];
    char ib_devices[sizeof(((cps_nccl_log *)0)->ib_devices)];
    char socket_ifs[sizeof(((cps_nccl_log *)0)->socket_ifs)];
    char plugin_error[sizeof(((cps_nccl_log *)0)->plugin_error)];
};

#define COPY_STR(dst, src)                                      \
    do {                                                        \
        memcpy(dst, src, sizeof(dst));                          \
        (dst)[sizeof(dst) - 1] = '\0';                          \
    } while (0)

/* Rank 0's string, or the first rank's that has one. */
#define FIRST_STR(out, all, n, field)                           \
    do {                                                        \
        for (int i_ = 0; i_ < (n); i_++)                        \
            if ((all)[i_].field[0]) {                           \
                COPY_STR(out, (all)[i_].field);                 \
                break;                                          \
            }                                                   \
    } while (0)

int cps_world_merge_log(struct cps_world *w, cps_nccl_log *log, char *why, size_t whyn)
{
    int n = w->nranks;
    if (w->n >= n)
        return 0;
    struct log_digest *all = calloc((size_t)n, sizeof *all);
    if (!all) {
        snprintf(why, whyn, "out of memory");
        return -1;
    }
    struct log_digest *d = &all[w->world_rank];
    d->lines = log->lines;
    for (int k = 0; k < CPS_TR_NKINDS; k++)
        d->count[k] = log->count[k];
    d->ib_found = log->ib_found;
    d->nvls = log->nvls;
    COPY_STR(d->network, log->network);
    COPY_STR(d->ib_devices, log->ib_devices);
    COPY_STR(d->socket_ifs, log->socket_ifs);
    COPY_STR(d->plugin_error, log->plugin_error);
    if (xchg(w, XCHG_ALLGATHER, all, sizeof *all, 0, "NCCL's logs", why, whyn)) {
        free(all);
        return -1;
    }
    log->lines = 0;
    memset(log->count, 0, sizeof log->count);
    log->ib_found = -1;
    log->nvls = -1;
    for (int i = 0; i < n; i++) {
        const struct log_digest *o = &all[i];
        log->lines += o->lines;
        for (int k = 0; k < CPS_TR_NKINDS; k++)
            log->count[k] += o->count[k];
        if (o->ib_found > log->ib_found)
            log->ib_found = o->ib_found;
        if (o->nvls >= 0 && (log->nvls < 0 || o->nvls < log->nvls))
            log->nvls = o->nvls;
    }
    log->network[0] = log->plugin_error[0] = '\0';
    FIRST_STR(log->network, all, n, network);
    FIRST_STR(log->plugin_error, all, n, plugin_error);
    /* the devices and interfaces are a host's own: this rank's, unless it logged none */
    if (!log->ib_devices[0])
        FIRST_STR(log->ib_devices, all, n, ib_devices);
    if (!log->socket_ifs[0])
        FIRST_STR(log->socket_ifs, all, n, socket_ifs);
    free(all);
    return 0;
}
