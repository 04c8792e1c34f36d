/* issue: a communicator's work of one group (or one ungrouped call), put on its streams.
 *
 * The calling thread only validates and enqueues; the work runs on the stream's worker
 * when the stream reaches it, as a kernel would. One unit of work per communicator per
 * group: its collectives in call order, then all its sends and receives at once. When the
 * group's calls used several streams, each of them gets an item and they wait for one
 * another (NCCL joins the streams of a group the same way), the first one doing the work.
 *
 * A communicator's units run one at a time in issue order whatever stream they are on
 * (NCCL orders a communicator's kernels through its internal stream), by ticket. Items hold
 * a reference on the communicator's core, so ncclCommAbort/Destroy never pull the segment
 * out from under a queued item.
 */
#include <stdlib.h>
#include <string.h>

#include "emu/common/emu_stream.h"
#include "emu/nccl/nccl_emu.h"

/* What the streams of one unit share. */
typedef struct cpn_join {
    _Atomic int refs;
    int nstreams;
    _Atomic uint32_t started;    /* items that reached the front of their stream (or dropped) */
    _Atomic uint32_t finished;   /* 1 once the working item is done (or dropped) */
    _Atomic uint64_t start_max;
    _Atomic uint64_t end;
} cpn_join;

typedef struct cpn_item {
    _Atomic int refs;            /* the stream's and the issuer's */
    _Atomic int released;        /* the stream gave the item back (ran or dropped) */
    _Atomic int ran;
    int worker;                  /* does the work (the others only join) */
    cpn_core *core;
    cpn_join *join;
    uint32_t ticket;
    int hang;
    double delay_ms;
    int ncoll, np2p;
    cpn_op *ops;                 /* ncoll collectives then np2p sends/receives */
    cpn_prof_plan *prof;         /* the profiler's view of the unit, NULL without one */
} cpn_item;

static void join_unref(cpn_join *j)
{
    if (j && atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

/* Tickets finish in order; one dropped by stream capture before its turn is remembered and
 * skipped when its turn comes. */
static void ticket_done(cpn_core *core, uint32_t ticket)
{
    pthread_mutex_lock(&core->ticket_lock);
    uint32_t cur = atomic_load(&core->done_ticket);
    if (ticket != cur) {
        if (core->nskipped == core->capskipped) {
            size_t cap = core->capskipped ? core->capskipped * 2 : 8;
            uint64_t *p = realloc(core->skipped, cap * sizeof *p);
            if (p) {
                core->skipped = p;
                core->capskipped = cap;
            }
        }
        if (core->nskipped < core->capskipped)
            core->skipped[core->nskipped++] = ticket;
    } else {
        cur++;
        for (size_t i = 0; i < core->nskipped;) {
            if ((uint32_t)core->skipped[i] == cur) {
                core->skipped[i] = core->skipped[--core->nskipped];
                cur++;
                i = 0;
            } else {
                i++;
            }
        }
        atomic_store(&core->done_ticket, cur);
    }
    pthread_mutex_unlock(&core->ticket_lock);
    cpn_core_wake(&core->waiters, &core->done_ticket);
}

static int wait_turn(cpn_core *core, uint32_t ticket)
{
    uint32_t cur;
    while ((cur = atomic_load(&core->done_ticket)) != ticket) {
        if (atomic_load(&core->abort_word))
            return 0;
        cpn_core_wait(&core->waiters, &core->done_ticket, cur, 200000000);
    }
    return 1;
}

static void item_unref(cpn_item *it)
{
    if (atomic_fetch_sub(&it->refs, 1) != 1)
        return;
    cpn_core *core = it->core;
    join_unref(it->join);
    cpn_prof_plan_release(it->prof);
    free(it->ops);
    free(it);
    if (atomic_fetch_sub(&core->inflight, 1) == 1)
        cpn_core_wake(&core->waiters, &core->inflight);
    cpn_core_release(core);
}

/* Work of the item on the stream that joins: wait for the worker, take its end. */
static uint64_t join_run(cpn_item *it, uint64_t start_ns)
{
    cpn_join *j = it->join;
    uint64_t m = atomic_load(&j->start_max);
    while (start_ns > m && !atomic_compare_exchange_weak(&j->start_max, &m, start_ns))
        ;
    atomic_fetch_add(&j->started, 1);
    cpn_futex_wake(&j->started, 0);
    uint32_t f;
    while ((f = atomic_load(&j->finished)) == 0)
        cpn_futex_wait(&j->finished, f, 0, 200000000);
    uint64_t end = atomic_load(&j->end);
    return end > start_ns ? end : start_ns;
}

static int fail_item(cpn_core *core, int w)
{
    if (w == CPN_WAIT_PEER_GONE) {
        int ok = ncclSuccess;
        atomic_compare_exchange_strong(&core->async_error, &ok, ncclRemoteError);
        /* what NCCL's proxy connection reports when the peer process is gone */
        int dead = 0;
        while (dead < core->nranks - 1 && cpn_peer_alive(&core->link, dead))
            dead++;
        char host[256];
        cpemu_host_name(core->link.peers[dead].host, host, sizeof host);
        cpn_warn("socketProgress: Connection closed by remote peer %s<0>", host);
    }
    return w;
}

static uint64_t item_run(void *arg, uint64_t start_ns)
{
    cpn_item *it = arg;
    cpn_core *core = it->core;
    atomic_store(&it->ran, 1);
    if (!it->worker)
        return join_run(it, start_ns);
    atomic_fetch_add(&core->running, 1);
    if (it->join && it->join->nstreams > 1) {
        /* all streams of the unit must have reached it: they start together */
        uint32_t s, need = (uint32_t)it->join->nstreams - 1;
        while ((s = atomic_load(&it->join->started)) < need && !atomic_load(&core->abort_word))
            cpn_futex_wait(&it->join->started, s, 0, 200000000);
        uint64_t m = atomic_load(&it->join->start_max);
        if (m > start_ns)
            start_ns = m;
    }
    uint64_t t = start_ns;
    int w = CPN_WAIT_OK;
    if (!wait_turn(core, it->ticket)) {
        w = CPN_WAIT_ABORTED;
        goto out;
    }
    if (it->hang) {
        /* COLLPROF_EMU_HANG: this rank never enters; only ncclCommAbort ends the wait */
        while (!atomic_load(&core->abort_word))
            cpn_futex_wait(&core->abort_word, 0, 0, 1000000000);
        w = CPN_WAIT_ABORTED;
        goto out;
    }
    /* the profiler's kernel channels: each op's channels begin at its model start and end
     * at its model end, or when it gave up (the kernel's abort path still stamps its end) */
    for (int i = 0; i < it->ncoll && w == CPN_WAIT_OK; i++) {
        if (it->prof)
            cpn_prof_kernel_begin(it->prof, i, t);
        w = fail_item(core, cpn_exec_coll(core, &it->ops[i], &t));
        if (it->prof)
            cpn_prof_kernel_end(it->prof, i, w == CPN_WAIT_OK ? t : cpn_now_ns());
    }
    if (w == CPN_WAIT_OK && it->np2p) {
        cpn_op **p = malloc((size_t)it->np2p * sizeof *p);
        if (p) {
            for (int i = 0; i < it->np2p; i++) {
                p[i] = &it->ops[it->ncoll + i];
                if (it->prof)
                    cpn_prof_kernel_begin(it->prof, it->ncoll + i, t);
            }
            w = fail_item(core, cpn_exec_p2p(core, p, it->np2p, &t));
            for (int i = 0; it->prof && i < it->np2p; i++)
                cpn_prof_kernel_end(it->prof, it->ncoll + i, w == CPN_WAIT_OK ? t : cpn_now_ns());
            free(p);
        }
    }
out:
    if (w != CPN_WAIT_OK) {
        uint64_t now = cpn_now_ns();
        if (now > t)
            t = now;   /* a kernel that gave up ends when it noticed */
    }
    ticket_done(core, it->ticket);
    if (it->join) {
        atomic_store(&it->join->end, t);
        atomic_store(&it->join->finished, 1);
        cpn_futex_wake(&it->join->finished, 0);
    }
    if (atomic_fetch_sub(&core->running, 1) == 1)
        cpn_core_wake(&core->waiters, &core->running);
    return t;
}

/* The stream is done with the item: it ran, or capture dropped it. */
static void item_release(void *arg)
{
    cpn_item *it = arg;
    atomic_store(&it->released, 1);
    if (!atomic_load(&it->ran)) {
        if (it->worker) {
            ticket_done(it->core, it->ticket);
            if (it->join) {
                atomic_store(&it->join->finished, 1);
                cpn_futex_wake(&it->join->finished, 0);
            }
        } else if (it->join) {
            atomic_fetch_add(&it->join->started, 1);
            cpn_futex_wake(&it->join->started, 0);
        }
    }
    item_unref(it);
}

double cpn_op_model_ns(const cpn_core *core, const cpn_op *op)
{
    size_t bytes = op->count * cpn_dtype_size(op->dtype);
    int n = core->nranks;
    switch (op->kind) {
    case CPEMU_OP_ALLGATHER: case CPEMU_OP_REDUCESCATTER: case CPEMU_OP_ALLTOALL:
    case CPEMU_OP_GATHER: case CPEMU_OP_SCATTER:
        bytes *= (size_t)n;   /* nccl-tests' S: the whole buffer */
        break;
    default:
        break;
    }
    return cpemu_model_ns(&core->topo, op->kind, bytes, core->places, n);
}

static cpn_item *item_new(ncclComm_t comm, cpn_join *join, int worker)
{
    cpn_item *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    atomic_store(&it->refs, 2);
    it->core = comm->core;
    it->join = join;
    it->worker = worker;
    atomic_fetch_add(&comm->core->refs, 1);
    atomic_fetch_add(&comm->core->inflight, 1);
    if (join)
        atomic_fetch_add(&join->refs, 1);
    return it;
}

/* A one-rank communicator's collectives launch no NCCL kernel (ncclLaunchOneRank): a copy
 * when out of place, nothing in place, and a kernel of its own only for a PreMulSum (ncclAvg
 * on floats included). Its sends and receives to itself out of place do run NCCL's kernel
 * (in place NCCL drops them: skip_self_in_place). */
static const char *one_rank_kernel(const cpn_item *it)
{
    if (it->np2p)
        return "ncclDevKernel_SendRecv";
    for (int i = 0; i < it->ncoll; i++) {
        const cpn_op *o = &it->ops[i];
        int reduces = o->kind == CPEMU_OP_ALLREDUCE || o->kind == CPEMU_OP_REDUCE ||
                      o->kind == CPEMU_OP_REDUCESCATTER;
        if (reduces && o->red.kind == CPN_RED_PREMULSUM)
            return "oneRankReduce";
    }
    return NULL;
}

/* The kernel NCCL 2.28 launches for a unit, as CUPTI names it: one per unit, on its first
 * stream (the others only wait for it); a specialised one for a single op, else the generic
 * one. (NCCL's names also carry the reduction, type, algorithm and protocol.) */
static const char *kernel_name(const cpn_item *it)
{
    if (!it->worker)
        return NULL;
    if (it->core->nranks == 1)
        return one_rank_kernel(it);
    if (it->ncoll + it->np2p != 1)
        return it->ncoll ? "ncclDevKernel_Generic" : "ncclDevKernel_SendRecv";
    switch (it->ops[0].kind) {
    case CPEMU_OP_ALLREDUCE: return "ncclDevKernel_AllReduce";
    case CPEMU_OP_BROADCAST: return "ncclDevKernel_Broadcast";
    case CPEMU_OP_REDUCE: return "ncclDevKernel_Reduce";
    case CPEMU_OP_ALLGATHER: return "ncclDevKernel_AllGather";
    case CPEMU_OP_REDUCESCATTER: return "ncclDevKernel_ReduceScatter";
    case CPEMU_OP_SEND:
    case CPEMU_OP_RECV: return "ncclDevKernel_SendRecv";
    default: return "ncclDevKernel_Generic";
    }
}

/* Puts one item on its stream; when the stream refused it without taking it, runs its
 * release here so its ticket and join are still accounted for. */
static ncclResult_t enqueue(cpn_item *it, CUstream s)
{
    CUresult r = cpemu_stream_enqueue_kernel(s, kernel_name(it), item_run, it, item_release);
    if (r != CUDA_SUCCESS && !atomic_load(&it->released))
        item_release(it);
    item_unref(it);
    if (r != CUDA_SUCCESS) {
        cpn_warn("Cuda failure %d 'cuLaunchKernel'", (int)r);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* NCCL pairs a rank's sends to itself with its receives from itself, in the order its tasks
 * were appended, and drops a pair whose buffers are one: nothing to copy, no task for a
 * profiler (src/enqueue.cc scheduleP2pTasksToPlan, "Skip send to self in-place"). The tasks
 * are a Send's or Recv's own, or the self pair of an AlltoAll, and of a Gather or Scatter at
 * its root (taskAppend makes those p2p tasks: an AlltoAll's send and receive for each peer in
 * turn; a Gather's send first, then its root's receives; a Scatter's root's sends first, then
 * its receive). A dropped Send or Recv is skipped whole (no work, no kernel): marked in
 * skip[], by place in the list; a composite op keeps its other peers' work and drops the
 * pair's two tasks from its profiler plan (drop[]). The first SELF_SCAN ops are looked at,
 * a group's few. */
#define SELF_SCAN 128
typedef struct self_task {
    int op;          /* its op's place in the list */
    int task;        /* its index among the op's tasks (taskAppend's order) */
    const void *buf;
} self_task;

/* op's tasks to itself, in taskAppend's order: sends into s, receives into r. */
static void self_tasks(ncclComm_t comm, const cpn_op *o, int at, self_task *s, int *ns,
                       self_task *r, int *nr)
{
    int me = comm->rank, n = comm->nranks;
    size_t chunk = o->count * cpn_dtype_size(o->dtype);
    const char *sb = o->sendbuff;
    char *rb = o->recvbuff;
    switch (o->kind) {
    case CPEMU_OP_SEND:
        if (o->root == me)
            s[(*ns)++] = (self_task){at, 0, sb};
        break;
    case CPEMU_OP_RECV:
        if (o->root == me)
            r[(*nr)++] = (self_task){at, 0, rb};
        break;
    case CPEMU_OP_ALLTOALL:
        if (n > 1 && sb && rb) {
            s[(*ns)++] = (self_task){at, 2 * me, sb + (size_t)me * chunk};
            r[(*nr)++] = (self_task){at, 2 * me + 1, rb + (size_t)me * chunk};
        }
        break;
    case CPEMU_OP_GATHER:
        if (n > 1 && o->root == me && rb) {
            s[(*ns)++] = (self_task){at, 0, sb};
            r[(*nr)++] = (self_task){at, 1 + me, rb + (size_t)me * chunk};
        }
        break;
    case CPEMU_OP_SCATTER:
        if (n > 1 && o->root == me && sb) {
            s[(*ns)++] = (self_task){at, me, sb + (size_t)me * chunk};
            r[(*nr)++] = (self_task){at, n, rb};
        }
        break;
    default:
        break;
    }
}

/* Also NCCL's check on the same pairs: a send to itself with no receive to pair is
 * ncclInvalidUsage for the group ("Trying to send to self without a matching recv"), and the
 * reverse. Returns 1 for a send left alone, -1 for a receive, else 0 (not judged past
 * SELF_SCAN ops, where a pair may straddle the edge). */
static int skip_self_in_place(ncclComm_t comm, cpn_op *ops, unsigned char *skip)
{
    cpn_op *at[SELF_SCAN];
    self_task s[SELF_SCAN], r[SELF_SCAN];
    int n = 0, ns = 0, nr = 0, all = 1;
    for (cpn_op *o = ops; o; o = o->next) {
        o->drop[0] = o->drop[1] = -1;
        if (n < SELF_SCAN) {
            at[n] = o;
            self_tasks(comm, o, n, s, &ns, r, &nr);
            n++;
        } else {
            all = 0;
        }
    }
    if (all && ns != nr)
        return ns > nr ? 1 : -1;
    for (int k = 0; k < ns && k < nr; k++) {
        if (s[k].buf != r[k].buf)
            continue;
        const self_task *pair[2] = {&s[k], &r[k]};
        for (int i = 0; i < 2; i++) {
            cpn_op *o = at[pair[i]->op];
            if (o->kind == CPEMU_OP_SEND || o->kind == CPEMU_OP_RECV)
                skip[pair[i]->op] = 1;
            else
                o->drop[o->drop[0] < 0 ? 0 : 1] = pair[i]->task;
        }
    }
    return 0;
}

ncclResult_t cpn_issue_comm_ops(ncclComm_t comm, cpn_op *ops)
{
    int ncoll = 0, np2p = 0, nstreams = 0;
    CUstream streams[64];
    unsigned char skip[SELF_SCAN] = {0};
    int alone = skip_self_in_place(comm, ops, skip);
    if (alone) { /* scheduleP2pTasksToPlan: the group fails, nothing of it is launched */
        cpn_warn(alone > 0 ? "Trying to send to self without a matching recv"
                           : "Trying to recv to self without a matching send");
        return ncclInvalidUsage;
    }
    int idx = 0;
    for (cpn_op *o = ops; o; o = o->next, idx++) {
        if (idx < SELF_SCAN && skip[idx])
            continue;
        if (o->kind == CPEMU_OP_SEND || o->kind == CPEMU_OP_RECV)
            np2p++;
        else
            ncoll++;
        int seen = 0;
        for (int i = 0; i < nstreams; i++)
            seen |= streams[i] == o->stream;
        if (!seen && nstreams < 64)
            streams[nstreams++] = o->stream;
    }
    if (ncoll + np2p == 0)
        return ncclSuccess;
    cpn_join *join = NULL;
    if (nstreams > 1) {
        join = calloc(1, sizeof *join);
        if (!join)
            return ncclSystemError;
        atomic_store(&join->refs, 1);
        join->nstreams = nstreams;
    }
    cpn_item *it = item_new(comm, join, 1);
    if (!it) {
        join_unref(join);
        return ncclSystemError;
    }
    it->ops = calloc((size_t)(ncoll + np2p), sizeof *it->ops);
    if (!it->ops) {
        item_release(it);
        item_unref(it);
        join_unref(join);
        return ncclSystemError;
    }
    int c = 0, p = ncoll;
    cpn_core *core = comm->core;
    idx = 0;
    for (cpn_op *o = ops; o; o = o->next, idx++) {
        if (idx < SELF_SCAN && skip[idx])
            continue;
        int is_p2p = o->kind == CPEMU_OP_SEND || o->kind == CPEMU_OP_RECV;
        cpn_op *dst = &it->ops[is_p2p ? p++ : c++];
        *dst = *o;
        dst->next = NULL;
        if (!is_p2p && cpemu_fault_hangs_at(&core->topo, core->fault_rank, comm->coll_issued++))
            it->hang = 1;
    }
    it->ncoll = ncoll;
    it->np2p = np2p;
    /* the profiler's plan, from the ops in unit order; the tasks were copied, the ops'
     * pointers to them belong to the group */
    cpn_prof_plan *prof = NULL;
    if (CPN_PROF_ON())
        prof = it->prof = cpn_prof_plan_new(comm, it->ops, ncoll + np2p);
    for (int i = 0; i < ncoll + np2p; i++)
        it->ops[i].prof = NULL;
    it->delay_ms = cpemu_fault_delay_ms(&core->topo, core->fault_rank);
    it->ticket = (uint32_t)comm->issue_ticket++;

    ncclResult_t res = ncclSuccess;
    if (cpn_push_device(comm) != 0) {
        res = ncclUnhandledCudaError;
        item_release(it);
        item_unref(it);
    } else {
        /* COLLPROF_EMU_DELAY: each stream of the operation is busy that long before it, as
         * if a kernel ran late, and ahead of a start event recorded for it (emu_stream.h).
         * COLLPROF_EMU_HANG: busy until an abort, so the rank's GPU never begins it. */
        for (int i = 0; i < nstreams; i++) {
            if (it->hang)
                cpemu_stream_block(streams[i], &cpn_hang_release);
            else if (it->delay_ms > 0)
                cpemu_stream_delay(streams[i], (uint64_t)(it->delay_ms * 1e6));
        }
        if (prof)
            cpn_prof_launch_start(prof, streams[0]);
        res = enqueue(it, streams[0]);
        for (int i = 1; i < nstreams; i++) {
            cpn_item *j = item_new(comm, join, 0);
            if (!j) {
                /* the worker still waits for this stream: count it as arrived */
                atomic_fetch_add(&join->started, 1);
                continue;
            }
            ncclResult_t r2 = enqueue(j, streams[i]);
            if (res == ncclSuccess)
                res = r2;
        }
        /* ncclLaunchKernel's KernelLaunch stop, then hostStreamPlanTask's events */
        if (prof)
            cpn_prof_launch_stop(prof);
        cpn_pop_device();
    }
    cpn_prof_plan_release(prof);   /* the issuer's reference */
    join_unref(join);
    return res;
}
