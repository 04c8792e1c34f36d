/* sweep_ops: one swept op issued over every rank this process drives, and its correctness
 * check.
 *
 * Every op runs on float32 with sum and root 0, out of place, as nccl-tests does by default.
 * All local ranks' calls go into one NCCL group: one thread drives every communicator, and
 * without the group the first call would wait for peers whose calls were never made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/sweep_internal.h"

static int per_rank_op(int op)
{
    return op == CPS_ALLGATHER || op == CPS_REDUCESCATTER || op == CPS_ALLTOALL;
}

size_t cps_op_count(int op, uint64_t bytes, int n)
{
    uint64_t unit = sizeof(float) * (uint64_t)(per_rank_op(op) && n > 0 ? n : 1);
    return (size_t)(bytes / unit);
}

uint64_t cps_op_bytes(int op, size_t count, int n)
{
    return (uint64_t)count * sizeof(float) * (uint64_t)(per_rank_op(op) && n > 0 ? n : 1);
}

uint64_t cps_op_buffer_bytes(int op, uint64_t bytes, int n)
{
    /* AllGather's receive, ReduceScatter's send and AlltoAll's both are S; the rest are S. */
    return cps_op_bytes(op, cps_op_count(op, bytes, n), n);
}

static void *dptr(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

static ncclResult_t issue_one(const struct cps_lib *L, const struct cps_rank *k, int nranks,
                              const struct cps_op_call *c)
{
    void *sb = dptr(k->send), *rb = dptr(k->recv);
    size_t n = c->count;
    switch (c->op) {
    case CPS_ALLREDUCE:
        return L->ncclAllReduce(sb, rb, n, ncclFloat32, ncclSum, k->comm, k->stream);
    case CPS_ALLGATHER:
        return L->ncclAllGather(sb, rb, n, ncclFloat32, k->comm, k->stream);
    case CPS_REDUCESCATTER:
        return L->ncclReduceScatter(sb, rb, n, ncclFloat32, ncclSum, k->comm, k->stream);
    case CPS_BROADCAST:
        return L->ncclBroadcast(sb, rb, n, ncclFloat32, 0, k->comm, k->stream);
    case CPS_REDUCE:
        return L->ncclReduce(sb, rb, n, ncclFloat32, ncclSum, 0, k->comm, k->stream);
    case CPS_ALLTOALL:
        if (c->use_alltoall)
            return L->ncclAlltoAll(sb, rb, n, ncclFloat32, k->comm, k->stream);
        /* NCCL before 2.28 has no ncclAlltoAll: nccl-tests' grouped sends and receives */
        for (int p = 0; p < nranks; p++) {
            size_t off = (size_t)p * n * sizeof(float);
            ncclResult_t rc = L->ncclSend((char *)sb + off, n, ncclFloat32, p, k->comm,
                                          k->stream);
            if (rc == ncclSuccess)
                rc = L->ncclRecv((char *)rb + off, n, ncclFloat32, p, k->comm, k->stream);
            if (rc != ncclSuccess)
                return rc;
        }
        return ncclSuccess;
    case CPS_SENDRECV: {
        ncclResult_t rc = L->ncclSend(sb, n, ncclFloat32, (k->rank + 1) % nranks, k->comm,
                                      k->stream);
        if (rc == ncclSuccess)
            rc = L->ncclRecv(rb, n, ncclFloat32, (k->rank + nranks - 1) % nranks, k->comm,
                             k->stream);
        return rc;
    }
    default:
        return ncclInvalidArgument;
    }
}

static const char *call_name(const struct cps_op_call *c)
{
    static const char *const fn[CPS_NOPS] = {"ncclAllReduce", "ncclAllGather",
                                             "ncclReduceScatter", "ncclBroadcast",
                                             "ncclReduce", "ncclAlltoAll", "ncclSend/ncclRecv"};
    if (c->op == CPS_ALLTOALL && !c->use_alltoall)
        return "ncclSend/ncclRecv";
    return c->op >= 0 && c->op < CPS_NOPS ? fn[c->op] : "?";
}

int cps_op_issue(struct cps_world *w, void *arg, char *why, size_t whyn)
{
    const struct cps_op_call *c = arg;
    const struct cps_lib *L = w->L;
    ncclResult_t rc = L->ncclGroupStart();
    int bad = -1;
    for (int i = 0; rc == ncclSuccess && i < w->n; i++) {
        rc = issue_one(L, &w->r[i], w->nranks, c);
        if (rc != ncclSuccess)
            bad = i;
    }
    /* The group is closed even after a failed call: NCCL's group depth is per thread. */
    ncclResult_t end = L->ncclGroupEnd();
    if (rc == ncclSuccess && end != ncclSuccess)
        rc = end;
    if (rc == ncclSuccess)
        return 0;
    char e[384];
    cps_nccl_error(L, rc, bad >= 0 ? w->r[bad].comm : NULL, e, sizeof e);
    if (bad >= 0)
        snprintf(why, whyn, "%s of %zu floats on rank %d failed: %s", call_name(c), c->count,
                 w->r[bad].rank, e);
    else
        snprintf(why, whyn, "ncclGroupEnd after %s of %zu floats failed: %s", call_name(c),
                 c->count, e);
    cps_one_line(why);
    return -1;
}

/* ---- the correctness check ---------------------------------------------------------------- */

/* Small integers, so that a sum over any number of ranks is exact in float32 and a wrong
 * element cannot hide behind rounding. */
static float input(int rank, size_t i)
{
    return (float)((i * 7u + (size_t)rank * 13u) % 61u + 1u);
}

static float sum_over(int n, size_t i)
{
    float s = 0;
    for (int j = 0; j < n; j++)
        s += input(j, i);
    return s;
}

static float expected(int op, int n, int rank, size_t count, size_t i)
{
    switch (op) {
    case CPS_ALLREDUCE:
    case CPS_REDUCE:
        return sum_over(n, i);
    case CPS_ALLGATHER:
        return input((int)(i / count), i % count);
    case CPS_REDUCESCATTER:
        return sum_over(n, (size_t)rank * count + i);
    case CPS_BROADCAST:
        return input(0, i);
    case CPS_ALLTOALL:
        return input((int)(i / count), (size_t)rank * count + i % count);
    case CPS_SENDRECV:
        return input((rank + n - 1) % n, i);
    default:
        return 0;
    }
}

#define CU(call, what)                                                        \
    do {                                                                      \
        CUresult rc_ = (call);                                                \
        if (rc_ != CUDA_SUCCESS) {                                            \
            char e_[256];                                                     \
            cps_cu_error(L, rc_, e_, sizeof e_);                              \
            snprintf(why, whyn, "%s check: %s failed: %s", cps_op_name(op),   \
                     what, e_);                                               \
            goto out;                                                         \
        }                                                                     \
    } while (0)

int cps_op_check(struct cps_world *w, int op, uint64_t bytes, int use_alltoall, long *wrong,
                 char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    int n = w->nranks, rc = -1;
    struct cps_op_call call = {op, cps_op_count(op, bytes, n), use_alltoall};
    if (call.count == 0)
        call.count = 1;
    size_t send_elems = call.count * (op == CPS_REDUCESCATTER || op == CPS_ALLTOALL ? n : 1);
    size_t recv_elems = call.count * (op == CPS_ALLGATHER || op == CPS_ALLTOALL ? n : 1);
    size_t most = send_elems > recv_elems ? send_elems : recv_elems;
    float *h = malloc(most * sizeof(float));
    if (!h) {
        snprintf(why, whyn, "%s check: out of memory", cps_op_name(op));
        return -1;
    }
    if (cps_world_buffers(w, most * sizeof(float), why, whyn))
        goto out;
    for (int i = 0; i < w->n; i++) {
        const struct cps_rank *k = &w->r[i];
        for (size_t e = 0; e < send_elems; e++)
            h[e] = input(k->rank, e);
        if (cps_world_use(w, i, why, whyn))
            goto out;
        CU(L->cuMemcpyHtoD(k->send, h, send_elems * sizeof(float)), "cuMemcpyHtoD");
        /* NaN everywhere NCCL should write: an element it skipped cannot pass */
        CU(L->cuMemsetD8(k->recv, 0xff, recv_elems * sizeof(float)), "cuMemsetD8");
        /* the copies run on the legacy stream, which our non-blocking streams do not wait for */
        CU(L->cuCtxSynchronize(), "cuCtxSynchronize");
    }
    char what[96], size[32];
    cps_bytes_text(cps_op_bytes(op, call.count, n), size, sizeof size);
    snprintf(what, sizeof what, "%s check %s", cps_op_name(op), size);
    if (cps_op_issue(w, &call, why, whyn) || cps_world_drain(w, (1u << w->n) - 1, what, why,
                                                             whyn))
        goto out;
    long bad = 0;
    for (int i = 0; i < w->n; i++) {
        const struct cps_rank *k = &w->r[i];
        if (op == CPS_REDUCE && k->rank != 0)
            continue; /* only the root receives */
        if (cps_world_use(w, i, why, whyn))
            goto out;
        CU(L->cuMemcpyDtoH(h, k->recv, recv_elems * sizeof(float)), "cuMemcpyDtoH");
        for (size_t e = 0; e < recv_elems; e++)
            bad += h[e] != expected(op, n, k->rank, call.count, e);
    }
    *wrong = bad;
    rc = 0;
out:
    if (rc)
        cps_one_line(why);
    free(h);
    return rc;
}
