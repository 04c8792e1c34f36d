/* comm: communicator objects, their checks, queries and ends (src/init.cc's
 * ncclCommFinalize/Destroy/Abort/Revoke, ncclCommGetAsyncError and the queries).
 *
 * Live communicators are kept in a registry so a call with a destroyed or garbage handle is
 * told "corrupted comm object" (NCCL's magic check) without this library reading freed
 * memory. A communicator's core (abort word, segment, model inputs) outlives it while stream
 * items still hold it.
 */
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t *live;
static size_t nlive, caplive;

static int registry_add(ncclComm_t c)
{
    pthread_mutex_lock(&reg_lock);
    if (nlive == caplive) {
        size_t cap = caplive ? caplive * 2 : 16;
        ncclComm_t *p = realloc(live, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&reg_lock);
            return -1;
        }
        live = p;
        caplive = cap;
    }
    live[nlive++] = c;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

static int registry_has(const void *c)
{
    int found = 0;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nlive && !found; i++)
        found = (const void *)live[i] == c;
    pthread_mutex_unlock(&reg_lock);
    return found;
}

static void registry_remove(ncclComm_t c)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nlive; i++)
        if (live[i] == c) {
            live[i] = live[--nlive];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

ncclResult_t cpn_ptr_check(const void *ptr, const char *opname, const char *argname)
{
    if (ptr == NULL) {
        cpn_warn("%s : %s argument is NULL", opname, argname);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

int cpn_comm_check(ncclComm_t comm, const char *opname, const char *argname)
{
    ncclResult_t r = cpn_ptr_check(comm, opname, argname);
    if (r != ncclSuccess)
        return r;
    if (!registry_has(comm) || comm->magic != CPN_COMM_MAGIC) {
        cpn_warn("Error: corrupted comm object detected");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static ncclResult_t async_result(ncclComm_t comm)
{
    ncclResult_t r = atomic_load(&comm->async_state);
    if (r == ncclSuccess && comm->core)
        r = atomic_load(&comm->core->async_error);
    return r;
}

ncclResult_t cpn_comm_ensure_ready(ncclComm_t comm)
{
    /* as in NCCL: a communicator being aborted is past caring about its async state */
    if (comm->core && atomic_load(&comm->core->abort_word) && !comm->revoked)
        return ncclSuccess;
    ncclResult_t r = async_result(comm);
    if (r == ncclInProgress) {
        cpn_warn("Attempt to use communicator before the previous operation returned ncclSuccess");
        return ncclInvalidArgument;
    }
    return r;
}

/* ---- allocation ---- */

#define CPN_MAXCHANNELS 64   /* NCCL's MAXCHANNELS, the bound of nChannelsPerNetPeer */

static ncclResult_t parse_config(ncclComm_t comm, const ncclConfig_t *config)
{
    cp_nccl_config_view v;
    int st = cp_nccl_config_read(config, &v);
    if (st == CP_NCCL_CONFIG_BAD_MAGIC || st == CP_NCCL_CONFIG_BAD_SIZE) {
        cpn_warn("ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    ncclConfig_t *c = &v.config;
    const int U = NCCL_CONFIG_UNDEF_INT;
    /* NCCL's own checks, in its order and words */
    if (c->blocking != U && c->blocking != 0 && c->blocking != 1) {
        cpn_warn("Invalid config blocking attribute value %d", c->blocking);
        return ncclInvalidArgument;
    }
    if (c->cgaClusterSize != U && c->cgaClusterSize < 0) {
        cpn_warn("Invalid config cgaClusterSize attribute value %d", c->cgaClusterSize);
        return ncclInvalidArgument;
    }
    if ((c->minCTAs != U && c->minCTAs <= 0) || (c->maxCTAs != U && c->maxCTAs <= 0) ||
        c->minCTAs > c->maxCTAs) {
        cpn_warn("Invalid config min/max channels attribute value %d/%d", c->minCTAs, c->maxCTAs);
        return ncclInvalidArgument;
    }
    if (c->splitShare != U && c->splitShare != 0 && c->splitShare != 1) {
        cpn_warn("Invalid config splitShare attribute value %d", c->splitShare);
        return ncclInvalidArgument;
    }
    if (c->collnetEnable != U && (c->collnetEnable < 0 || c->collnetEnable > 1)) {
        cpn_warn("Invalid config collnetEnable attribute value %d", c->collnetEnable);
        return ncclInvalidArgument;
    }
    if (c->CTAPolicy != U && (c->CTAPolicy < NCCL_CTA_POLICY_DEFAULT ||
                              c->CTAPolicy > NCCL_CTA_POLICY_ZERO)) {
        cpn_warn("Invalid config policy attribute value %d", c->CTAPolicy);
        return ncclInvalidArgument;
    }
    if (c->shrinkShare != U && c->shrinkShare != 0 && c->shrinkShare != 1) {
        cpn_warn("Invalid config shrinkShare attribute value %d", c->shrinkShare);
        return ncclInvalidArgument;
    }
    if (c->nvlsCTAs != U && c->nvlsCTAs <= 0) {
        cpn_warn("Invalid config nvlsCTAs attribute value %d", c->nvlsCTAs);
        return ncclInvalidArgument;
    }
    if (c->nChannelsPerNetPeer != U &&
        (c->nChannelsPerNetPeer <= 0 || c->nChannelsPerNetPeer > CPN_MAXCHANNELS)) {
        cpn_warn("Invalid config nChannelsPerNetPeer attribute value %d", c->nChannelsPerNetPeer);
        return ncclInvalidArgument;
    }
    if (c->nvlinkCentricSched != U && c->nvlinkCentricSched != 0 && c->nvlinkCentricSched != 1) {
        cpn_warn("Invalid config nvlinkCentricSched attribute value %d", c->nvlinkCentricSched);
        return ncclInvalidArgument;
    }
    comm->config = *c;
    comm->blocking = c->blocking == U ? 1 : c->blocking;
    /* NCCL_COMM_BLOCKING overrides the config, as envConfigOverride does */
    int env = cpn_env_int("NCCL_COMM_BLOCKING", U);
    if (env == 0 || env == 1)
        comm->blocking = env;
    comm->config.blocking = comm->blocking;
    return ncclSuccess;
}

ncclResult_t cpn_comm_new(const ncclConfig_t *config, const ncclComm_t inherit, ncclComm_t *out)
{
    *out = NULL;
    ncclComm_t c = calloc(1, sizeof *c);
    cpn_core *core = calloc(1, sizeof *core);
    if (!c || !core) {
        free(c);
        free(core);
        return ncclSystemError;
    }
    atomic_store(&core->refs, 1);
    pthread_mutex_init(&core->ticket_lock, NULL);
    c->core = core;
    c->magic = CPN_COMM_MAGIC;
    c->rank = c->nranks = -1;
    pthread_mutex_init(&c->lock, NULL);
    atomic_store(&c->init_state, ncclInProgress);
    atomic_store(&c->async_state, ncclSuccess);
    ncclResult_t r;
    if (!config && inherit) {
        c->config = inherit->config;   /* a child without a config copies its parent's */
        c->blocking = inherit->blocking;
        r = ncclSuccess;
    } else {
        r = parse_config(c, config);
    }
    if (r != ncclSuccess || registry_add(c) != 0) {
        cpn_core_release(core);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return r != ncclSuccess ? r : ncclSystemError;
    }
    *out = c;
    return ncclSuccess;
}

void cpn_core_release(cpn_core *core)
{
    if (!core || atomic_fetch_sub(&core->refs, 1) != 1)
        return;
    cpn_link_detach(&core->link);
    free(core->skipped);
    free(core->places);
    free(core->p2p_sent);
    free(core->p2p_recvd);
    pthread_mutex_destroy(&core->ticket_lock);
    free(core);
}

void cpn_comm_free(ncclComm_t comm)
{
    cpn_prof_comm_fini(comm);   /* commFree's ncclProfilerPluginFinalize */
    registry_remove(comm);
    comm->magic = 0;
    for (cpn_reg *r = comm->regs, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    cpn_release_device(comm);
    cpn_core_release(comm->core);
    pthread_mutex_destroy(&comm->lock);
    free(comm);
}

/* ---- waits on a communicator's outstanding work ---- */

static void wait_zero(_Atomic uint32_t *w)
{
    uint32_t v;
    while ((v = atomic_load(w)) != 0)
        cpn_futex_wait(w, v, 0, 200000000);
}

/* The same for a core's counters, whose wakers only wake counted waiters. */
static void core_wait_zero(cpn_core *core, _Atomic uint32_t *w)
{
    uint32_t v;
    while ((v = atomic_load(w)) != 0)
        cpn_core_wait(&core->waiters, w, v, 200000000);
}

/* Non-blocking group and finalize threads that still use the communicator. */
static void join_pending(ncclComm_t comm)
{
    wait_zero(&comm->group_jobs);
}

/* COLLPROF_EMU_HANG holds a stream in libcuda until this word is set (issue.c). A hold may
 * outlive the communicator that made it, so the word is the process's, not the comm's: any
 * abort releases every held stream, which only delays an abort's end for a hang already
 * given up. */
_Atomic uint32_t cpn_hang_release;

static void set_abort(ncclComm_t comm, uint32_t v)
{
    if (v)
        atomic_store(&cpn_hang_release, 1);
    atomic_store(&comm->core->abort_word, v);
    cpn_futex_wake(&comm->core->abort_word, 0);
    cpn_futex_wake(&comm->core->done_ticket, 0);
    /* The segment is only touched once initialization made it: an initialization still
     * under way owns it (and unmaps it when the abort makes it give up); its waits look at
     * the abort word at least every 100 ms by themselves. */
    if (atomic_load(&comm->init_state) == ncclSuccess)
        cpn_link_wake_all(&comm->core->link);
}

void cpn_comm_abort_inflight(ncclComm_t comm)
{
    set_abort(comm, 1);
    core_wait_zero(comm->core, &comm->core->inflight);
    set_abort(comm, 0);
}

/* ---- public ---- */

ncclResult_t cpn_impl_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t r = cpn_comm_check(comm, "ncclGetAsyncError", "comm");
    if (r == ncclSuccess)
        r = cpn_ptr_check(asyncError, "ncclGetAsyncError", "asyncError");
    if (r != ncclSuccess)
        return r;
    *asyncError = async_result(comm);
    return ncclSuccess;
}

#define CPN_QUERY(fn, opname, argname, type, field)                                         \
    ncclResult_t cpn_impl_##fn(const ncclComm_t comm, type *out)                            \
    {                                                                                       \
        ncclResult_t r = cpn_comm_check(comm, opname, "comm");                              \
        if (r == ncclSuccess)                                                               \
            r = cpn_ptr_check(out, opname, argname);                                        \
        if (r == ncclSuccess)                                                               \
            r = cpn_comm_ensure_ready(comm);                                                \
        if (r == ncclSuccess)                                                               \
            *out = comm->field;                                                             \
        return r;                                                                           \
    }
CPN_QUERY(ncclCommCount, "CommCount", "count", int, nranks)
CPN_QUERY(ncclCommCuDevice, "CommCuDevice", "devid", int, dev)
CPN_QUERY(ncclCommUserRank, "CommUserRank", "rank", int, rank)
#undef CPN_QUERY

static void finalize_sync(ncclComm_t comm)
{
    /* outstanding operations complete first, as NCCL's commDestroySync waits for them */
    core_wait_zero(comm->core, &comm->core->inflight);
}

static void *finalize_main(void *arg)
{
    ncclComm_t comm = arg;
    finalize_sync(comm);
    atomic_store(&comm->async_state, ncclSuccess);
    if (atomic_fetch_sub(&comm->group_jobs, 1) == 1)
        cpn_futex_wake(&comm->group_jobs, 0);
    return NULL;
}

ncclResult_t cpn_impl_ncclCommFinalize(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    ncclResult_t r = cpn_comm_check(comm, "ncclCommFinalize", "comm");
    if (r == ncclSuccess)
        r = cpn_comm_ensure_ready(comm);
    if (r == ncclSuccess && comm->finalized)
        r = ncclInvalidArgument;   /* NCCL refuses a second finalize, without a WARN */
    if (r != ncclSuccess) {
        cpn_group_error(r);
        return r;
    }
    comm->finalized = 1;
    if (comm->blocking) {
        finalize_sync(comm);
        return ncclSuccess;
    }
    atomic_store(&comm->async_state, ncclInProgress);
    atomic_fetch_add(&comm->group_jobs, 1);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, finalize_main, comm) != 0)
        finalize_main(comm);
    pthread_attr_destroy(&attr);
    return async_result(comm);
}

ncclResult_t cpn_impl_ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    if (!registry_has(comm)) {
        cpn_warn("comm %p has already been destroyed", (void *)comm);
        return ncclInvalidArgument;
    }
    ncclResult_t r = cpn_comm_ensure_ready(comm);
    if (r != ncclSuccess && r != ncclRemoteError && atomic_load(&comm->init_state) == ncclSuccess)
        return r;
    join_pending(comm);
    comm->destroyed = 1;
    if (atomic_load(&comm->init_state) == ncclSuccess && !comm->finalized)
        finalize_sync(comm);
    cpn_comm_free(comm);
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclCommAbort(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    if (!registry_has(comm)) {
        cpn_warn("comm %p has already been destroyed", (void *)comm);
        return ncclInvalidArgument;
    }
    cpn_info(CPN_INIT, comm->dev, "comm %p rank %d nRanks %d cudaDev %d busId %lx - Abort START",
             (void *)comm, comm->rank, comm->nranks, comm->dev, (unsigned long)comm->bus_id);
    /* every wait of this communicator in this process gives up: items stuck on a peer that
     * never comes, a rendezvous still waiting, a hung rank's own item */
    set_abort(comm, 1);
    join_pending(comm);
    core_wait_zero(comm->core, &comm->core->running);
    comm->destroyed = 1;
    cpn_info(CPN_INIT, comm->dev, "comm %p rank %d nranks %d cudaDev %d busId %lx - Abort COMPLETE",
             (void *)comm, comm->rank, comm->nranks, comm->dev, (unsigned long)comm->bus_id);
    cpn_comm_free(comm);
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    if (comm == NULL)
        return ncclSuccess;
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return ncclInvalidArgument;
    ncclResult_t r = cpn_comm_check(comm, "ncclCommRevoke", "comm");
    if (r != ncclSuccess)
        return r;
    if (comm->destroyed || comm->finalized || comm->revoked)
        return ncclInvalidArgument;
    cpn_info(CPN_INIT, comm->dev, "comm %p rank %d nRanks %d cudaDev %d busId %lx - Revoke START",
             (void *)comm, comm->rank, comm->nranks, comm->dev, (unsigned long)comm->bus_id);
    comm->revoked = 1;
    comm->finalized = 1;
    set_abort(comm, 1);
    join_pending(comm);
    /* what was launched before the revoke ends (aborted); then the flags go down again */
    core_wait_zero(comm->core, &comm->core->inflight);
    set_abort(comm, 0);
    cpn_info(CPN_INIT, comm->dev,
             "comm %p rank %d nRanks %d cudaDev %d busId %lx - Revoke COMPLETE, result %d",
             (void *)comm, comm->rank, comm->nranks, comm->dev, (unsigned long)comm->bus_id, 0);
    return ncclSuccess;
}
