/* wrap_comm: communicator life — init, split, shrink, finalize, destroy, abort, revoke.
 *
 * Each of these is one CALL record (ops CommInit .. CommRevoke) and each comm it creates is
 * registered (comm_table.c) with an id every rank of it computes alike:
 *   InitRank, InitRankConfig   hash of the ncclUniqueId
 *   InitRankScalable           hash of the first of its ncclUniqueIds
 *   InitAll                    hash of host, pid and this process's InitAll count: the
 *                              whole clique lives in this process, rank = index
 *   Split, Shrink              hash of the parent's id, the color and the parent's count of
 *                              splits and shrinks so far (the key differs per rank: not it);
 *                              NCCL_SPLIT_NOCOLOR gives no comm
 * The CALL of a split or shrink names the parent (it is collective on the parent) with the
 * parent's split count as seq; an init's CALL names the new comm (InitAll: the first one).
 * A non-blocking init (ncclInProgress) registers the comm at once; its rank and size are
 * learnt when it is first used or when ncclCommGetAsyncError reports ncclSuccess.
 */
#include "preload/shim.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "trace/trace_format.h"

static _Atomic uint64_t g_init_all_count;

void cp_record_plain(uint8_t op, cp_comm *c, uint64_t seq, uint64_t count, uint64_t t0,
                     uint32_t gd, ncclResult_t r, uint32_t site)
{
    cp_call_info ci = {
        .op = op,
        .dtype = CP_DTYPE_UNKNOWN,
        .redop = CP_REDOP_NONE,
        .flags = gd ? CP_CALL_IN_GROUP : 0,
        .peer = -1,
        .group_depth = gd,
        .result = r,
        .comm = c,
        .seq = seq,
        .count = count,
        .enter_ticks = t0,
        .site = site,
    };
    cp_record_emit(&ci);
}

/* The common shape: forward, and when recording, time the call and run `after`; errno is
 * kept as wrap_coll.c says. */
#define CP_LIFE(name, call_args, after)                                                  \
    void *ra = __builtin_return_address(0);                                              \
    cp_fn_##name real = cp_real_##name(ra);                                              \
    if (CP_UNLIKELY(!real))                                                              \
        return CP_MISSING_RESULT;                                                        \
    if (!cp_call_begin())                                                                \
        return real call_args;                                                           \
    int job_errno = errno;                                                               \
    uint32_t gd = cp_tls.group_depth;                                                    \
    uint64_t t0 = cp_now_ticks();                                                        \
    errno = job_errno;                                                                   \
    ncclResult_t r = real call_args;                                                     \
    job_errno = errno;                                                                   \
    after;                                                                               \
    cp_call_end();                                                                       \
    errno = job_errno;                                                                   \
    return r

/* A comm is queried later (rank, size, async error) in the NCCL that made it: the caller's. */
static void after_init(ncclComm_t *comm, uint64_t id, int nranks, int rank, uint64_t t0,
                       uint32_t gd, ncclResult_t r, void *ra)
{
    cp_comm *c = NULL;
    if (cp_nccl_accepted(r) && comm && *comm)
        c = cp_comm_create(*comm, id, 0, CP_COMM_INIT_RANK, 0, 0, r == ncclSuccess, rank,
                           nranks, cp_nccl_lib_for(ra));
    cp_record_plain(CP_OP_COMM_INIT, c, CP_SEQ_NONE, 0, t0, gd, r, CP_SITE_UNKNOWN);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    CP_LIFE(ncclCommInitRank, (comm, nranks, commId, rank),
            after_init(comm, cp_comm_id_from_unique_id(&commId), nranks, rank, t0, gd, r, ra));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                    int rank, ncclConfig_t *config)
{
    CP_LIFE(ncclCommInitRankConfig, (comm, nranks, commId, rank, config),
            after_init(comm, cp_comm_id_from_unique_id(&commId), nranks, rank, t0, gd, r, ra));
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    CP_LIFE(ncclCommInitRankScalable, (newcomm, nranks, myrank, nId, commIds, config),
            after_init(newcomm, nId > 0 && commIds ? cp_comm_id_from_unique_id(&commIds[0]) : 0,
                       nranks, myrank, t0, gd, r, ra));
}

static void after_init_all(ncclComm_t *comm, int ndev, uint64_t t0, uint32_t gd,
                           ncclResult_t r, void *ra)
{
    cp_comm *first = NULL;
    if (cp_nccl_accepted(r) && comm && ndev > 0) {
        char host[CP_HOSTNAME_BYTES] = "";
        gethostname(host, sizeof host - 1);
        uint64_t id = cp_comm_id_init_all(host, atomic_fetch_add(&g_init_all_count, 1));
        for (int i = 0; i < ndev; i++) {
            cp_comm *c = cp_comm_create(comm[i], id, 0, CP_COMM_INIT_ALL, 0, 0,
                                        r == ncclSuccess, i, ndev, cp_nccl_lib_for(ra));
            if (!first)
                first = c;
        }
    }
    cp_record_plain(CP_OP_COMM_INIT, first, CP_SEQ_NONE, ndev > 0 ? (uint64_t)ndev : 0, t0, gd,
                    r, CP_SITE_UNKNOWN);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    CP_LIFE(ncclCommInitAll, (comm, ndev, devlist), after_init_all(comm, ndev, t0, gd, r, ra));
}

/* Split and shrink: a child of `parent` whose id all its ranks derive alike. */
static void after_split(uint8_t op, ncclComm_t parent, ncclComm_t *newcomm, int color, int key,
                        uint64_t t0, uint32_t gd, ncclResult_t r, void *ra)
{
    cp_comm *p = cp_comm_lookup(parent);
    uint64_t index = CP_SEQ_NONE;
    if (p && cp_nccl_accepted(r)) {
        index = atomic_fetch_add(&p->split_seq, 1);
        int shrink = op == CP_OP_COMM_SHRINK;
        if ((shrink || color != NCCL_SPLIT_NOCOLOR) && newcomm && *newcomm)
            cp_comm_create(*newcomm, cp_comm_id_split(p->comm_id, color, index, shrink),
                           p->comm_id, shrink ? CP_COMM_SHRINK : CP_COMM_SPLIT,
                           shrink ? 0 : color, shrink ? 0 : key, r == ncclSuccess, -1, -1,
                           cp_nccl_lib_for(ra));
    }
    cp_record_plain(op, p, index, 0, t0, gd, r, CP_SITE_UNKNOWN);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    CP_LIFE(ncclCommSplit, (comm, color, key, newcomm, config),
            after_split(CP_OP_COMM_SPLIT, comm, newcomm, color, key, t0, gd, r, ra));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    CP_LIFE(ncclCommShrink,
            (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags),
            after_split(CP_OP_COMM_SHRINK, comm, newcomm, 0, 0, t0, gd, r, ra));
}

/* Finalize, destroy, abort, revoke: one CALL naming the comm. A destroy or an abort NCCL
 * took ends the comm (comm_table.c frees it later); one that failed leaves it as it was,
 * to be used or destroyed again. */
#define CP_END_OF_LIFE(op)                                                               \
    cp_record_plain(op, cp_comm_lookup(comm), CP_SEQ_NONE, 0, t0, gd, r, CP_SITE_UNKNOWN)
static void end_of_comm(uint8_t op, ncclComm_t comm, uint64_t t0, uint32_t gd,
                        ncclResult_t r)
{
    cp_comm *c = cp_comm_lookup(comm);
    cp_record_plain(op, c, CP_SEQ_NONE, 0, t0, gd, r, CP_SITE_UNKNOWN);
    if (c && cp_nccl_accepted(r))
        cp_comm_end(comm, c, op == CP_OP_COMM_ABORT);
}

/* A job often destroys its context right after its communicators: the GPU times of what
 * already completed are read now, while its events can still be queried. */
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    cp_writer_flush_now();
    CP_LIFE(ncclCommFinalize, (comm), CP_END_OF_LIFE(CP_OP_COMM_FINALIZE));
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    cp_writer_flush_now();
    CP_LIFE(ncclCommDestroy, (comm), end_of_comm(CP_OP_COMM_DESTROY, comm, t0, gd, r));
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    CP_LIFE(ncclCommAbort, (comm), end_of_comm(CP_OP_COMM_ABORT, comm, t0, gd, r));
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    CP_LIFE(ncclCommRevoke, (comm, revokeFlags), CP_END_OF_LIFE(CP_OP_COMM_REVOKE));
}

/* Not recorded; but a non-blocking comm that NCCL now reports ready is learnt here. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    cp_fn_ncclCommGetAsyncError real = cp_real_ncclCommGetAsyncError(__builtin_return_address(0));
    if (CP_UNLIKELY(!real))
        return CP_MISSING_RESULT;
    ncclResult_t r = real(comm, asyncError);
    int job_errno = errno;
    if (r == ncclSuccess && asyncError && *asyncError == ncclSuccess &&
        cp_mode_get() == CP_MODE_ON && cp_tls.depth == 0) {
        cp_comm *c = cp_comm_lookup(comm);
        if (c && !atomic_load_explicit(&c->ready, memory_order_acquire))
            cp_comm_make_ready(c);
    }
    errno = job_errno;
    return r;
}
