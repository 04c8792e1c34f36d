/* exec_coll: a collective's data movement and timing, on the stream's worker.
 *
 * Every rank publishes its model arrival and waits for all (the time a GPU kernel spends
 * waiting for its peers) before anything is read; the data moves through the segment in
 * pieces of at most one slot per rank: each piece is a write phase into this rank's slot, a
 * barrier, and a read phase, the first barrier being the arrival one. Slots alternate
 * between two buffers, so a piece needs one barrier (two for large reductions): a buffer is
 * written again only two pieces later, after everyone passed the barrier that followed its
 * last read.
 *
 * A reduction reduces the slots of ranks 0, 1, ..., n-1 in that order, each step rounded to
 * the data type. Large pieces are split: rank r reduces the r-th share into the result
 * buffer and every rank copies the result out (1/n of the arithmetic each); small ones are
 * reduced whole by every rank. Either way every rank gets the same bits, as NCCL's ring
 * gives, and a floating sum is in rank order (emu/nccl/README.md gives the tolerance).
 */
#include <string.h>

#include "emu/nccl/nccl_emu.h"

typedef struct coll_ctx {
    cpn_core *core;
    cpn_link *l;
    const cpn_op *op;
    int n, me;
    size_t es;
    uint64_t scalar;
    int arrived;              /* the arrival barrier is behind us */
    uint64_t arrival, max_arrival;
} coll_ctx;

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* The barrier after a write phase. The first one of a collective is also its arrival
 * barrier: a rank may stage its first piece before its peers arrived (the buffer it writes
 * was last read two steps ago, before everyone passed the previous barrier), and nothing
 * is read before all have arrived. */
static int sync_step(coll_ctx *c)
{
    if (c->arrived)
        return cpn_coll_step(c->l);
    c->arrived = 1;
    return cpn_coll_barrier(c->l, c->core->coll_seq++, c->arrival, &c->max_arrival);
}

/* A piece small enough that every rank reduces all of it itself, over the slots in rank
 * order: one barrier, and the same bits on every rank as the split reduction gives. */
#define CPN_DIRECT_REDUCE_BYTES (256u << 10)

static void reduce_slots(coll_ctx *c, uint8_t *acc, uint64_t b, size_t at, size_t len)
{
    const cpn_op *op = c->op;
    cpn_reduce_first(acc, cpn_coll_slot(c->l, 0, b) + at, len, op->dtype, &op->red, c->scalar);
    for (int j = 1; j < c->n; j++)
        cpn_reduce_accum(acc, cpn_coll_slot(c->l, j, b) + at, len, op->dtype, &op->red,
                         c->scalar);
    cpn_reduce_finish(acc, len, op->dtype, &op->red);
}

static int do_reduce(coll_ctx *c, int to_all)
{
    const cpn_op *op = c->op;
    const uint8_t *send = op->sendbuff;
    uint8_t *recv = op->recvbuff;
    size_t piece = c->l->slot_bytes / c->es;
    for (size_t o = 0; o < op->count; o += piece) {
        size_t len = min_sz(piece, op->count - o);
        uint64_t b = c->core->step_buf++;
        memcpy(cpn_coll_slot(c->l, c->me, b), send + o * c->es, len * c->es);
        int w = sync_step(c);
        if (w)
            return w;
        int mine = to_all || c->me == op->root;
        if (len * c->es * (size_t)c->n <= CPN_DIRECT_REDUCE_BYTES) {
            if (mine)
                reduce_slots(c, recv + o * c->es, b, 0, len);
            continue;
        }
        /* reduce-scatter: rank r reduces the r-th share of the piece into the result */
        size_t lo = len * (size_t)c->me / (size_t)c->n;
        size_t hi = len * (size_t)(c->me + 1) / (size_t)c->n;
        if (hi > lo)
            reduce_slots(c, cpn_coll_result(c->l, b) + lo * c->es, b, lo * c->es, hi - lo);
        if ((w = cpn_coll_step(c->l)))
            return w;
        if (mine)
            memcpy(recv + o * c->es, cpn_coll_result(c->l, b), len * c->es);
    }
    return CPN_WAIT_OK;
}

static int do_broadcast(coll_ctx *c)
{
    const cpn_op *op = c->op;
    const uint8_t *send = op->sendbuff;
    uint8_t *recv = op->recvbuff;
    size_t piece = c->l->slot_bytes / c->es;
    for (size_t o = 0; o < op->count; o += piece) {
        size_t len = min_sz(piece, op->count - o) * c->es;
        uint64_t b = c->core->step_buf++;
        uint8_t *slot = cpn_coll_slot(c->l, op->root, b);
        if (c->me == op->root) {
            memcpy(slot, send + o * c->es, len);
            if (recv != send)
                memcpy(recv + o * c->es, send + o * c->es, len);
        }
        int w = sync_step(c);
        if (w)
            return w;
        if (c->me != op->root)
            memcpy(recv + o * c->es, slot, len);
    }
    return CPN_WAIT_OK;
}

/* AllGather (to_root < 0) and Gather (to_root = root): every rank's piece to all / root. */
static int do_gather(coll_ctx *c, int to_root)
{
    const cpn_op *op = c->op;
    const uint8_t *send = op->sendbuff;
    uint8_t *recv = op->recvbuff;
    size_t piece = c->l->slot_bytes / c->es;
    for (size_t o = 0; o < op->count; o += piece) {
        size_t len = min_sz(piece, op->count - o) * c->es;
        uint64_t b = c->core->step_buf++;
        memcpy(cpn_coll_slot(c->l, c->me, b), send + o * c->es, len);
        int w = sync_step(c);
        if (w)
            return w;
        if (to_root >= 0 && c->me != to_root)
            continue;
        for (int j = 0; j < c->n; j++)
            memcpy(recv + ((size_t)j * op->count + o) * c->es, cpn_coll_slot(c->l, j, b), len);
    }
    return CPN_WAIT_OK;
}

/* ReduceScatter (reduce = 1) and AlltoAll (reduce = 0): block j of every rank's piece goes
 * to rank j. */
static int do_exchange(coll_ctx *c, int reduce)
{
    const cpn_op *op = c->op;
    const uint8_t *send = op->sendbuff;
    uint8_t *recv = op->recvbuff;
    size_t piece = c->l->slot_bytes / ((size_t)c->n * c->es);
    if (piece == 0)
        piece = 1;   /* the layout guarantees a slot holds one element per rank */
    for (size_t o = 0; o < op->count; o += piece) {
        size_t len = min_sz(piece, op->count - o);
        size_t lb = len * c->es;
        uint64_t b = c->core->step_buf++;
        uint8_t *mine = cpn_coll_slot(c->l, c->me, b);
        for (int j = 0; j < c->n; j++)
            memcpy(mine + (size_t)j * lb, send + ((size_t)j * op->count + o) * c->es, lb);
        int w = sync_step(c);
        if (w)
            return w;
        uint8_t *dst = recv + o * c->es;
        size_t at = (size_t)c->me * lb;
        if (reduce) {
            cpn_reduce_first(dst, cpn_coll_slot(c->l, 0, b) + at, len, op->dtype, &op->red,
                             c->scalar);
            for (int j = 1; j < c->n; j++)
                cpn_reduce_accum(dst, cpn_coll_slot(c->l, j, b) + at, len, op->dtype, &op->red,
                                 c->scalar);
            cpn_reduce_finish(dst, len, op->dtype, &op->red);
        } else {
            for (int i = 0; i < c->n; i++)
                memcpy(recv + ((size_t)i * op->count + o) * c->es,
                       cpn_coll_slot(c->l, i, b) + at, lb);
        }
    }
    return CPN_WAIT_OK;
}

static int do_scatter(coll_ctx *c)
{
    const cpn_op *op = c->op;
    const uint8_t *send = op->sendbuff;
    uint8_t *recv = op->recvbuff;
    size_t piece = c->l->slot_bytes / ((size_t)c->n * c->es);
    if (piece == 0)
        piece = 1;
    for (size_t o = 0; o < op->count; o += piece) {
        size_t lb = min_sz(piece, op->count - o) * c->es;
        uint64_t b = c->core->step_buf++;
        uint8_t *slot = cpn_coll_slot(c->l, op->root, b);
        if (c->me == op->root)
            for (int j = 0; j < c->n; j++)
                memcpy(slot + (size_t)j * lb, send + ((size_t)j * op->count + o) * c->es, lb);
        int w = sync_step(c);
        if (w)
            return w;
        memcpy(recv + o * c->es, slot + (size_t)c->me * lb, lb);
    }
    return CPN_WAIT_OK;
}

void cpn_exec_local(const cpn_op *op, uint64_t scalar)
{
    /* NCCL's ncclLaunchOneRank: the op's pre- and post-operation applied to one input */
    size_t es = cpn_dtype_size(op->dtype);
    int reduces = op->kind == CPEMU_OP_ALLREDUCE || op->kind == CPEMU_OP_REDUCE ||
                  op->kind == CPEMU_OP_REDUCESCATTER;
    if (reduces) {
        cpn_reduce_first(op->recvbuff, op->sendbuff, op->count, op->dtype, &op->red, scalar);
        cpn_reduce_finish(op->recvbuff, op->count, op->dtype, &op->red);
    } else if (op->recvbuff != op->sendbuff) {
        memmove(op->recvbuff, op->sendbuff, op->count * es);
    }
}

int cpn_exec_coll(cpn_core *core, const cpn_op *op, uint64_t *t)
{
    coll_ctx c = {core, &core->link, op, core->nranks, core->rank, cpn_dtype_size(op->dtype),
                  0, 0, *t, *t};
    c.scalar = cpn_scalar_for(&op->red, op->dtype);
    int w = CPN_WAIT_OK;
    if (c.n == 1) {
        cpn_exec_local(op, c.scalar);
    } else {
        switch (op->kind) {
        case CPEMU_OP_ALLREDUCE: w = do_reduce(&c, 1); break;
        case CPEMU_OP_REDUCE: w = do_reduce(&c, 0); break;
        case CPEMU_OP_BROADCAST: w = do_broadcast(&c); break;
        case CPEMU_OP_ALLGATHER: w = do_gather(&c, -1); break;
        case CPEMU_OP_GATHER: w = do_gather(&c, op->root); break;
        case CPEMU_OP_REDUCESCATTER: w = do_exchange(&c, 1); break;
        case CPEMU_OP_ALLTOALL: w = do_exchange(&c, 0); break;
        case CPEMU_OP_SCATTER: w = do_scatter(&c); break;
        default: break;
        }
        /* every collective waits for all peers, even one with nothing to move */
        if (w == CPN_WAIT_OK && !c.arrived)
            w = sync_step(&c);
        if (w)
            return w;
    }
    *t = c.max_arrival + (uint64_t)cpn_op_model_ns(core, op);
    return CPN_WAIT_OK;
}
