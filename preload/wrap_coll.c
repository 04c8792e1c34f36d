/* wrap_coll: collectives, send/recv and groups — the hot path.
 *
 * Per recorded call: two clock reads (vDSO), a lock-free comm lookup, one atomic add for
 * the sequence number and a 64-byte store into this thread's ring. The real function is
 * called with the caller's arguments untouched and its result returned as it is.
 *
 * errno: what the job set is what NCCL sees, and what NCCL leaves is what the job reads (a
 * caller of a call that failed with ncclSystemError reads it); the shim's own work around
 * the call (the first record opens files, a new site unwinds, events call the driver) is
 * kept out of it by a save and restore, two thread-local accesses.
 *
 * Sequence numbers only advance for calls NCCL accepted (ncclSuccess, or ncclInProgress on
 * a non-blocking comm): a refused call enqueued nothing, so counting it would shift this
 * rank's numbering against its peers'. Refused calls carry CP_SEQ_NONE.
 */
#include "preload/shim.h"

#include <errno.h>
#include <string.h>

#include "common/settings.h"

enum inplace_rule { INPLACE_NO, INPLACE_SAME, INPLACE_ALLGATHER, INPLACE_REDUCESCATTER };

static uint8_t dtype_code(ncclDataType_t d)
{
    return (unsigned)d < (unsigned)ncclNumTypes ? (uint8_t)d : CP_DTYPE_UNKNOWN;
}

static inline uint64_t seq_next(_Atomic uint64_t *counter)
{
    uint64_t v = atomic_load_explicit(counter, memory_order_relaxed);
    atomic_store_explicit(counter, v + 1, memory_order_relaxed);
    return v;
}

static uint8_t redop_code(ncclRedOp_t op)
{
    return (unsigned)op < (unsigned)ncclNumOps ? (uint8_t)op : CP_REDOP_DYNAMIC;
}

void cp_record_emit(const cp_call_info *ci)
{
    uint64_t exit_ticks = cp_now_ticks();
    cp_ring *ring = cp_tls.ring;
    if (CP_UNLIKELY(!ring)) {
        if (cp_tls.attached == 2) {
            atomic_fetch_add_explicit(&cp_lost_no_ring, 1, memory_order_relaxed);
            return;
        }
        ring = cp_thread_attach();
        if (!ring)
            return;
    }
    cp_rec_call *rec = cp_ring_reserve(ring);
    if (CP_UNLIKELY(!rec))
        return;
    uint64_t host_ticks = cp_ring_ticks_clamp(exit_ticks - ci->enter_ticks);
    *rec = (cp_rec_call){
        .h = {CP_REC_CALL, sizeof(cp_rec_call)},
        .op = ci->op,
        .dtype = ci->dtype,
        .redop = ci->redop,
        .flags = ci->flags,
        .comm_index = ci->comm ? ci->comm->comm_index : CP_COMM_NONE,
        .site_index = ci->site,
        .seq = ci->seq,
        .count = ci->count,
        .stream = ci->stream,
        .enter_ns = ci->enter_ticks, /* ticks until the writer converts them */
        .host_ns = cp_ring_host_lo(host_ticks), /* ticks, ring_call.h */
        .peer = ci->peer,
        .result = (int8_t)ci->result,
        .group_depth = ci->group_depth > 255 ? 255 : (uint8_t)ci->group_depth,
        .thread = cp_tls.thread_no,
        /* the ticks' high bits and the plugin call, which the writer takes from here */
        .host_hi = cp_ring_host_hi(host_ticks, ci->pcall),
    };
    cp_ring_commit(ring);
}

/* NCCL pairs a group's sends to the rank itself with its receives from itself, comm by comm
 * in the order their tasks were appended, and drops a pair whose buffers are one at the
 * group's end (src/enqueue.cc, scheduleP2pTasksToPlan: "Skip send to self in-place"): no
 * task, so NCCL's plugin never completes the calls, which then stayed in flight to the
 * trace's end. A grouped send or receive to itself that NCCL accepted pairs here with the
 * oldest waiting one of the other kind; an in-place pair's plugin calls expect no task. */
static void note_self(cp_comm *c, int is_send, uintptr_t buf, uint32_t pcall)
{
    if (c->self.thread != (const void *)&cp_tls || c->self.group != cp_tls.groups_ended) {
        c->self.thread = &cp_tls; /* a new group: what waited from another is NCCL's error */
        c->self.group = cp_tls.groups_ended;
        c->self.n[0] = c->self.n[1] = 0;
        c->self.lost = 0;
    }
    int me = is_send ? 0 : 1, other = !me;
    size_t cap = sizeof c->self.q[0] / sizeof c->self.q[0][0];
    /* bounds held even if a job broke NCCL's rule and used one comm from two threads */
    if (c->self.lost || c->self.n[0] > cap || c->self.n[1] > cap)
        return;
    if (c->self.n[other] > 0) {
        uintptr_t obuf = c->self.q[other][0].buf;
        uint32_t opcall = c->self.q[other][0].pcall;
        memmove(&c->self.q[other][0], &c->self.q[other][1],
                (size_t)(--c->self.n[other]) * sizeof c->self.q[other][0]);
        if (obuf == buf) {
            if (opcall)
                cp_pcall_no_task(opcall - 1);
            if (pcall)
                cp_pcall_no_task(pcall - 1);
        }
        return;
    }
    if (c->self.n[me] >= cap) {
        c->self.lost = 1;
        return;
    }
    c->self.q[me][c->self.n[me]].buf = buf;
    c->self.q[me][c->self.n[me]++].pcall = pcall;
}

/* The tasks to itself NCCL appends for an accepted call (taskAppend): a Send's or Recv's
 * own; an AlltoAll's send and receive of this rank's slice; a Gather's send and its root's
 * receive of its slice, a Scatter's root's send of its slice and its receive, at the root.
 * An ungrouped call is a group of its own: its pair is its own. Addresses as integers: they
 * are the GPU's, and offsets past an object are no pointer arithmetic C allows. */
static __attribute__((noinline)) void note_self_tasks(cp_comm *c, uint8_t op, int peer,
                                                      const void *sendbuff,
                                                      const void *recvbuff, size_t count,
                                                      uint8_t dtype, uint32_t pcall,
                                                      uint32_t gd)
{
    if (!atomic_load_explicit(&c->ready, memory_order_acquire)) /* rank unknown */
        return;
    uintptr_t sb = (uintptr_t)sendbuff, rb = (uintptr_t)recvbuff, s = 0, r = 0;
    uintptr_t mine = (uintptr_t)((uint64_t)c->rank * count * cp_dtype_size(dtype));
    int has = 0;
    switch (op) {
    case CP_OP_SEND:
    case CP_OP_RECV:
        if (gd && peer == c->rank)
            note_self(c, op == CP_OP_SEND, op == CP_OP_SEND ? sb : rb, pcall);
        return;
    case CP_OP_ALLTOALL:
        has = sb && rb;
        s = sb + mine, r = rb + mine;
        break;
    case CP_OP_GATHER:
        has = peer == c->rank && rb;
        s = sb, r = rb + mine;
        break;
    case CP_OP_SCATTER:
        has = peer == c->rank && sb;
        s = sb + mine, r = rb;
        break;
    default:
        return;
    }
    if (!has || c->nranks < 2) /* a one-rank comm's collective makes no task at all */
        return;
    if (gd) {
        note_self(c, 1, s, pcall);
        note_self(c, 0, r, pcall);
    } else if (s == r && pcall) {
        cp_pcall_no_task(pcall - 1);
        cp_pcall_no_task(pcall - 1);
    }
}

/* Everything a collective or p2p call needs after the real call returned; the call's plugin
 * call (pool index + 1) for the self-pair bookkeeping, timing it or discarded; 0 none. */
static uint32_t record_op(uint8_t op, cp_comm *comm, size_t count, ncclDataType_t dtype,
                          int redop, int peer, cudaStream_t stream, const void *sendbuff,
                          const void *recvbuff, int inplace, uint64_t enter_ticks, uint32_t gd,
                          ncclResult_t r, cp_gpu_mark *gm, void *ra)
{
    uint32_t pcall = 0, pcall_self = 0;
    int discard = 0;
    if (gm->pcall) {
        /* NCCL's plugin described the call: it is timed (a DONE follows) unless events
         * timed it already, NCCL refused it, it goes to the rank itself (no GPU times from
         * NCCL: cp_self_p2p, below), or NCCL said a graph captures it (then NCCL may name
         * the call again at any graph launch: it is kept) */
        if (gm->pflags & CP_PCALL_CAPTURED)
            gm->flags |= CP_CALL_CAPTURED;
        else if (gm->pflags & CP_PCALL_KEEP)
            ;
        else if (gm->pair < 0 && cp_nccl_accepted(r))
            pcall = gm->pindex + 1;
        else
            discard = 1; /* handed to the writer once the call's key is known, below */
        /* to itself, the call is not TIMED: its plugin call still rides in the CALL (no
         * second ring slot: a slot a call filled sendrecv_perf's rings on an H200), for the
         * writer to give back, writing nothing (cp_gpu_plugin_add) */
        if (pcall && !cp_self_p2p(comm, op, peer))
            gm->flags |= CP_CALL_TIMED;
        /* a discarded call of a self pair NCCL drops still waits for its task: the pairing
         * (note_self) must be able to tell it none will come, or the pool leaks it */
        pcall_self = pcall ? pcall : discard && cp_nccl_accepted(r) ? gm->pindex + 1 : 0;
        /* NCCL reports on this comm: its next calls need no events */
        uint8_t cover = gm->pflags & CP_PCALL_V4 ? CP_PLUGIN_UNGROUPED : CP_PLUGIN_ALL;
        if (comm && atomic_load_explicit(&comm->plugin_cover, memory_order_relaxed) != cover)
            atomic_store_explicit(&comm->plugin_cover, cover, memory_order_relaxed);
    }
    cp_call_info ci = {
        .op = op,
        .dtype = dtype_code(dtype),
        .redop = redop < 0 ? CP_REDOP_NONE : redop_code((ncclRedOp_t)redop),
        .flags = (uint8_t)((gd ? CP_CALL_IN_GROUP : 0) | gm->flags),
        .peer = peer,
        .group_depth = gd,
        .result = r,
        .comm = comm,
        .seq = CP_SEQ_NONE,
        .count = count,
        .stream = (uint64_t)(uintptr_t)stream,
        .enter_ticks = enter_ticks,
        .site = cp_site_of(ra),
        .pcall = pcall,
    };
    cp_comm *c = ci.comm;
    if (c && cp_nccl_accepted(r)) {
        int ready = atomic_load_explicit(&c->ready, memory_order_acquire);
        if (CP_UNLIKELY(!ready))
            ready = cp_comm_make_ready(c);
        /* NCCL forbids using one communicator from several threads at once, so its calls
         * are already serialized: a relaxed load and store suffice, without the cost of a
         * locked add on every call. */
        if (op == CP_OP_SEND || op == CP_OP_RECV) {
            if (ready && peer >= 0 && peer < c->nranks)
                ci.seq = seq_next(op == CP_OP_SEND ? &c->send_seq[peer] : &c->recv_seq[peer]);
        } else {
            ci.seq = seq_next(&c->coll_seq);
        }
        /* NCCL's in-place rules: the same buffer, or for the gather/scatter pair this
         * rank's slice of the big buffer. */
        uintptr_t s = (uintptr_t)sendbuff, d = (uintptr_t)recvbuff;
        uint64_t slice = (uint64_t)count * cp_dtype_size(ci.dtype);
        if ((inplace == INPLACE_SAME && s == d) ||
            (inplace == INPLACE_ALLGATHER && ready && s == d + (uint64_t)c->rank * slice) ||
            (inplace == INPLACE_REDUCESCATTER && ready && d == s + (uint64_t)c->rank * slice))
            ci.flags |= CP_CALL_IN_PLACE;
    }
    cp_record_emit(&ci);
    cp_gpu_emit(gm, c ? c->comm_index : CP_COMM_NONE, ci.seq, peer, op);
    if (discard)
        cp_gpu_discard_plugin(gm, c ? c->comm_index : CP_COMM_NONE, ci.seq, peer, op,
                              gm->pair >= 0 && cp_nccl_accepted(r));
    return pcall_self;
}

/* The shape every recorded collective and p2p wrapper shares. The return address is read
 * here, in the exported function itself: it is the job's call site. */
#define CP_RECORDED(name, call_args, op, comm, count, dtype, redop, peer, stream, sb, rb,  \
                    inplace)                                                             \
    void *ra = __builtin_return_address(0);                                              \
    cp_fn_##name real = cp_real_##name(ra);                                              \
    if (CP_UNLIKELY(!real))                                                              \
        return CP_MISSING_RESULT;                                                        \
    if (!cp_call_begin())                                                                \
        return real call_args;                                                           \
    int job_errno = errno;                                                               \
    uint32_t gd = cp_tls.group_depth;                                                    \
    uint64_t t0 = cp_now_ticks();                                                        \
    cp_comm *cc = cp_comm_lookup(comm);                                                  \
    cp_gpu_mark gm;                                                                      \
    cp_gpu_before(&gm, stream, gd, cc, op, peer,                                         \
                  (uint64_t)(count) * cp_dtype_size(dtype_code(dtype)));                 \
    errno = job_errno;                                                                   \
    ncclResult_t r = real call_args;                                                     \
    job_errno = errno;                                                                   \
    cp_gpu_after(&gm, stream, cp_nccl_accepted(r));                                      \
    uint32_t pcall_ = record_op(op, cc, count, dtype, redop, peer, stream, sb, rb, inplace, \
                                t0, gd, r, &gm, ra);                                     \
    /* the ops with p2p tasks (op is a constant: nothing for the others) */               \
    if ((op) >= CP_OP_ALLTOALL && (op) <= CP_OP_RECV && cc && cp_nccl_accepted(r))       \
        note_self_tasks(cc, op, peer, sb, rb, count, dtype_code(dtype), pcall_, gd);     \
    cp_call_end();                                                                       \
    errno = job_errno;                                                                   \
    return r

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    CP_RECORDED(ncclAllReduce, (sendbuff, recvbuff, count, datatype, op, comm, stream),
                CP_OP_ALLREDUCE, comm, count, datatype, (int)op, -1, stream, sendbuff,
                recvbuff, INPLACE_SAME);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    CP_RECORDED(ncclBroadcast, (sendbuff, recvbuff, count, datatype, root, comm, stream),
                CP_OP_BROADCAST, comm, count, datatype, -1, root, stream, sendbuff, recvbuff,
                INPLACE_SAME);
}

/* ncclBcast is NCCL's in-place broadcast: one buffer, recorded as Broadcast. */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclBcast, (buff, count, datatype, root, comm, stream), CP_OP_BROADCAST, comm,
                count, datatype, -1, root, stream, buff, buff, INPLACE_SAME);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    CP_RECORDED(ncclReduce, (sendbuff, recvbuff, count, datatype, op, root, comm, stream),
                CP_OP_REDUCE, comm, count, datatype, (int)op, root, stream, sendbuff, recvbuff,
                INPLACE_SAME);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclAllGather, (sendbuff, recvbuff, sendcount, datatype, comm, stream),
                CP_OP_ALLGATHER, comm, sendcount, datatype, -1, -1, stream, sendbuff, recvbuff,
                INPLACE_ALLGATHER);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    CP_RECORDED(ncclReduceScatter, (sendbuff, recvbuff, recvcount, datatype, op, comm, stream),
                CP_OP_REDUCESCATTER, comm, recvcount, datatype, (int)op, -1, stream, sendbuff,
                recvbuff, INPLACE_REDUCESCATTER);
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclAlltoAll, (sendbuff, recvbuff, count, datatype, comm, stream),
                CP_OP_ALLTOALL, comm, count, datatype, -1, -1, stream, sendbuff, recvbuff,
                INPLACE_NO);
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclGather, (sendbuff, recvbuff, count, datatype, root, comm, stream),
                CP_OP_GATHER, comm, count, datatype, -1, root, stream, sendbuff, recvbuff,
                INPLACE_NO);
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    CP_RECORDED(ncclScatter, (sendbuff, recvbuff, count, datatype, root, comm, stream),
                CP_OP_SCATTER, comm, count, datatype, -1, root, stream, sendbuff, recvbuff,
                INPLACE_NO);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclSend, (sendbuff, count, datatype, peer, comm, stream), CP_OP_SEND, comm,
                count, datatype, -1, peer, stream, sendbuff, NULL, INPLACE_NO);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    CP_RECORDED(ncclRecv, (recvbuff, count, datatype, peer, comm, stream), CP_OP_RECV, comm,
                count, datatype, -1, peer, stream, NULL, recvbuff, INPLACE_NO);
}

/* The thread's group depth mirrors NCCL's own (thread-local in NCCL too): GroupStart adds
 * one when it succeeds; GroupEnd takes one off whenever there was one, as NCCL does even
 * when the group fails. It is kept while tracing is off too, so it is right if tracing
 * starts inside a group. */
ncclResult_t ncclGroupStart(void)
{
    void *ra = __builtin_return_address(0);
    cp_fn_ncclGroupStart real = cp_real_ncclGroupStart(ra);
    if (CP_UNLIKELY(!real))
        return CP_MISSING_RESULT;
    if (!cp_call_begin()) {
        ncclResult_t r = real();
        if (r == ncclSuccess && cp_tls.depth == 0)
            cp_tls.group_depth++;
        return r;
    }
    int job_errno = errno;
    uint32_t gd = cp_tls.group_depth;
    uint64_t t0 = cp_now_ticks();
    errno = job_errno;
    ncclResult_t r = real();
    job_errno = errno;
    if (r == ncclSuccess)
        cp_tls.group_depth++;
    cp_record_plain(CP_OP_GROUP_START, NULL, CP_SEQ_NONE, 0, t0, gd, r, cp_site_of(ra));
    cp_call_end();
    errno = job_errno;
    return r;
}

ncclResult_t ncclGroupEnd(void)
{
    void *ra = __builtin_return_address(0);
    cp_fn_ncclGroupEnd real = cp_real_ncclGroupEnd(ra);
    if (CP_UNLIKELY(!real))
        return CP_MISSING_RESULT;
    if (!cp_call_begin()) {
        ncclResult_t r = real();
        if (cp_tls.depth == 0 && cp_tls.group_depth > 0 && --cp_tls.group_depth == 0)
            cp_tls.groups_ended++;
        return r;
    }
    int job_errno = errno;
    uint32_t gd = cp_tls.group_depth;
    uint64_t t0 = cp_now_ticks();
    /* The outermost GroupEnd launches the group: its streams' events go around it. */
    int outermost = gd == 1;
    if (outermost)
        cp_gpu_group_end_before();
    errno = job_errno;
    ncclResult_t r = real();
    job_errno = errno;
    if (outermost) {
        cp_gpu_group_end_after();
        cp_tls.groups_ended++;
    }
    if (cp_tls.group_depth > 0)
        cp_tls.group_depth--;
    cp_record_plain(CP_OP_GROUP_END, NULL, CP_SEQ_NONE, 0, t0, gd, r, cp_site_of(ra));
    cp_call_end();
    errno = job_errno;
    return r;
}
