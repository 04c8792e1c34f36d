/* collectives: the collective and point-to-point entry points (src/collectives.cc,
 * enqueue.cc's ncclEnqueueCheck/taskAppend/hostToDevRedOp, misc/argcheck.cc).
 *
 * Each call is checked the way NCCL checks it - same order, same WARN text, same result
 * code - then queued in the (possibly implicit) group; the group's end issues it to the
 * stream and the call returns before anything ran.
 */
#include <string.h>

#include "emu/nccl/nccl_emu.h"

/* NCCL's ncclBcast calls its public ncclBroadcast, so an interposer sees that call too. */
extern ncclResult_t ncclBroadcast(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                                  cudaStream_t) __attribute__((visibility("default")));

/* ncclUserRedOpMangle: user ops are XORed with a hash of the comm pointer, so an op handle
 * of another communicator is caught. The mapping is its own inverse. */
int cpn_user_op_mangle(const ncclComm_t comm, int op)
{
    if (op < (int)ncclNumOps)
        return op;
    uint64_t h = (uint64_t)(uintptr_t)comm;
    h ^= h >> 32;
    h *= 0x9e3779b97f4a7c13ull;
    h >>= 32;
    h &= (uint64_t)ncclMaxRedOp;
    int op1 = (int)h ^ op;
    return op1 < (int)ncclNumOps ? op : op1;
}

static ncclResult_t args_check(const cpn_op *op)
{
    ncclComm_t comm = op->comm;
    if (op->root < 0 || op->root >= comm->nranks) {
        cpn_warn("%s : invalid root %d (root should be in the 0..%d range)", op->name, op->root,
                 comm->nranks);
        return ncclInvalidArgument;
    }
    if (op->dtype < 0 || op->dtype >= ncclNumTypes) {
        cpn_warn("%s : invalid type %d", op->name, op->dtype);
        return ncclInvalidArgument;
    }
    int rop = op->red.user_op;
    if (rop < 0 || rop > (int)ncclMaxRedOp) {
        cpn_warn("%s : invalid reduction operation %d", op->name, rop);
        return ncclInvalidArgument;
    }
    int ix = cpn_user_op_mangle(comm, rop) - (int)ncclNumOps;
    if (rop >= (int)ncclNumOps && (ix >= CPN_MAX_USER_OPS || ix < 0 || !comm->user_ops[ix].used)) {
        cpn_warn("%s : reduction operation %d unknown to this communicator", op->name, rop);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static void avg_scalar(int dtype, int n, cpn_redop *red)
{
    /* NCCL rounds 1/n to float first, then to the dtype */
    double inv = (double)(float)(1.0 / n);
    uint64_t bits = 0;
    switch (dtype) {
    case ncclFloat64: { double d = 1.0 / n; memcpy(&bits, &d, 8); break; }
    case ncclFloat32: { float f = (float)(1.0 / n); memcpy(&bits, &f, 4); break; }
    case ncclFloat16: bits = cpn_double_to_half(inv); break;
    case ncclBfloat16: bits = cpn_double_to_bf16(inv); break;
    case ncclFloat8e4m3: bits = cpn_double_to_fp8(inv, 0); break;
    case ncclFloat8e5m2: bits = cpn_double_to_fp8(inv, 1); break;
    default: break;
    }
    red->kind = CPN_RED_PREMULSUM;
    red->scalar_bits = bits;
}

static ncclResult_t device_redop(cpn_op *op)
{
    ncclComm_t comm = op->comm;
    cpn_redop *red = &op->red;
    switch (red->user_op) {
    case ncclSum: red->kind = CPN_RED_SUM; return ncclSuccess;
    case ncclProd: red->kind = CPN_RED_PROD; return ncclSuccess;
    case ncclMin: red->kind = CPN_RED_MIN; return ncclSuccess;
    case ncclMax: red->kind = CPN_RED_MAX; return ncclSuccess;
    case ncclAvg:
        if (cpn_dtype_is_float(op->dtype)) {
            avg_scalar(op->dtype, comm->nranks, red);
        } else {
            red->kind = CPN_RED_SUMPOSTDIV;
            red->divisor = comm->nranks;
        }
        return ncclSuccess;
    default: {
        /* a user op is copied now: its handle may be destroyed before the group ends */
        int ix = cpn_user_op_mangle(comm, red->user_op) - (int)ncclNumOps;
        const cpn_user_op *u = &comm->user_ops[ix];
        if (u->dtype != op->dtype) {
            cpn_warn("Data type supplied to user-created ncclRedOp_t does not match type "
                     "given to reduction operation");
            return ncclInvalidArgument;
        }
        int user_op = red->user_op;
        *red = u->op;
        red->user_op = user_op;
        return ncclSuccess;
    }
    }
}

static int min_compute_capability(const ncclComm_t comm)
{
    const cpemu_topo *t = &comm->core->topo;
    int m = 1000;
    for (int r = 0; r < comm->nranks; r++) {
        const cpemu_gpu *g = &t->gpus[comm->core->places[r].dev % (t->ngpus ? t->ngpus : 1)];
        int cc = g->cc_major * 10 + g->cc_minor;
        if (cc < m)
            m = cc;
    }
    return m;
}

static ncclResult_t task_append(cpn_op *op)
{
    if (op->kind != CPEMU_OP_SEND && op->kind != CPEMU_OP_RECV) {
        if (op->count == 0)
            return ncclSuccess;   /* NCCL discards empty collectives */
        int fp8 = op->dtype == ncclFloat8e4m3 || op->dtype == ncclFloat8e5m2;
        int moves_only = op->kind == CPEMU_OP_ALLGATHER || op->kind == CPEMU_OP_BROADCAST ||
                         op->kind == CPEMU_OP_ALLTOALL || op->kind == CPEMU_OP_SCATTER ||
                         op->kind == CPEMU_OP_GATHER;
        if (fp8 && !moves_only && min_compute_capability(op->comm) < 90) {
            cpn_warn("FP8 reduction support begins with sm90 capable devices.");
            return ncclInvalidArgument;
        }
        ncclResult_t r = device_redop(op);
        if (r != ncclSuccess)
            return r;
    }
    if (CPN_PROF_ON())
        cpn_prof_task_append(op);
    ncclResult_t r = cpn_group_add_op(op);
    if (r != ncclSuccess) {
        cpn_prof_op_free(op->prof);
        op->prof = NULL;
    }
    return r;
}

static ncclResult_t enqueue_check(cpn_op *op)
{
    ncclComm_t comm = op->comm;
    ncclResult_t r = cpn_comm_check(comm, op->name, "comm");
    if (r != ncclSuccess) {
        cpn_group_error(r);
        return r;
    }
    if (comm->revoked) {
        cpn_warn("%s: communicator was revoked", op->name);
        cpn_group_error(ncclInvalidUsage);
        return ncclInvalidUsage;
    }
    if (CPN_PROF_ON())
        cpn_prof_enqueue_enter();
    cpn_group_start();
    r = cpn_comm_ensure_ready(comm);
    if (r == ncclSuccess)
        r = args_check(op);
    if (r == ncclSuccess) {
        cpn_info(CPN_COLL, comm->dev,
                 "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d "
                 "comm %p [nranks=%d] stream %p",
                 op->name, (unsigned long)comm->op_count++, op->sendbuff, (void *)op->recvbuff,
                 op->count, op->dtype, op->red.user_op, op->root, (void *)comm, comm->nranks,
                 (void *)op->stream);
        r = task_append(op);
    }
    if (r != ncclSuccess && !comm->blocking)
        atomic_store(&comm->async_state, r);
    cpn_group_error(r);
    ncclResult_t e = cpn_group_end(NULL);
    if (e != ncclSuccess && e != ncclInProgress)
        return e;
    if (!comm->blocking)
        (void)cpn_impl_ncclCommGetAsyncError(comm, &r);
    return r;
}

static ncclResult_t call(int kind, const char *name, const void *sendbuff, void *recvbuff,
                         size_t count, ncclDataType_t dtype, int red, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    cpn_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.name = name;
    op.sendbuff = sendbuff;
    op.recvbuff = recvbuff;
    op.count = count;
    op.dtype = (int)dtype;
    op.red.user_op = red;
    op.root = root;
    op.stream = (CUstream)stream;
    op.comm = comm;
    return enqueue_check(&op);
}

ncclResult_t cpn_impl_ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t stream)
{
    return call(CPEMU_OP_ALLREDUCE, "AllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm,
                stream);
}

ncclResult_t cpn_impl_ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream)
{
    return call(CPEMU_OP_BROADCAST, "Broadcast", sendbuff, recvbuff, count, datatype, ncclSum, root,
                comm, stream);
}

ncclResult_t cpn_impl_ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t cpn_impl_ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, int root,
                                 ncclComm_t comm, cudaStream_t stream)
{
    return call(CPEMU_OP_REDUCE, "Reduce", sendbuff, recvbuff, count, datatype, op, root, comm,
                stream);
}

ncclResult_t cpn_impl_ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return call(CPEMU_OP_ALLGATHER, "AllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum,
                0, comm, stream);
}

ncclResult_t cpn_impl_ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream)
{
    return call(CPEMU_OP_REDUCESCATTER, "ReduceScatter", sendbuff, recvbuff, recvcount, datatype,
                op, 0, comm, stream);
}

ncclResult_t cpn_impl_ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return call(CPEMU_OP_ALLTOALL, "AlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm,
                stream);
}

ncclResult_t cpn_impl_ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream)
{
    return call(CPEMU_OP_GATHER, "Gather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                stream);
}

ncclResult_t cpn_impl_ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return call(CPEMU_OP_SCATTER, "Scatter", sendbuff, recvbuff, count, datatype, ncclSum, root,
                comm, stream);
}

ncclResult_t cpn_impl_ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                               int peer, ncclComm_t comm, cudaStream_t stream)
{
    return call(CPEMU_OP_SEND, "Send", sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}

ncclResult_t cpn_impl_ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclComm_t comm, cudaStream_t stream)
{
    return call(CPEMU_OP_RECV, "Recv", NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}
