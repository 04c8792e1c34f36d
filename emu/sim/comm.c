/* comm: every NCCL communication call of collprof-sim goes through sim_call.
 *
 * One place counts the calls (the count line the profiler's trace is compared with), applies
 * --late and --mismatch at the host, tells the watchdog, and wraps --check around the call:
 * before it the stream is drained, the recv buffer poisoned and the send buffer filled; after
 * it (or after the group's ncclGroupEnd) the stream is drained and the recv buffer compared.
 * --check therefore serialises the job; without it nothing here waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu/sim/sim.h"

const char *const sim_op_name[SIM_NOPS] = { "AllReduce", "AllGather", "ReduceScatter",
                                             "Broadcast", "Reduce", "AlltoAll", "Gather",
                                             "Scatter", "Send", "Recv" };

int sim_op_parse(const char *s)
{
    for (int i = 0; i < SIM_NOPS; i++)
        if (!strcasecmp(s, sim_op_name[i]))
            return i;
    return -1;
}

struct sim_pending {
    struct sim_call call;
    uint64_t seq;
    uint32_t tag;
    int check;
};

static void *ptr(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

static ncclResult_t issue(const struct sim_call *c, const struct sim_comm *cm)
{
    void *sb = ptr(c->send), *rb = ptr(c->recv);
    switch (c->op) {
    case SIM_ALLREDUCE:
        return ncclAllReduce(sb, rb, c->count, c->dtype, c->redop, cm->comm, cm->stream);
    case SIM_ALLGATHER:
        return ncclAllGather(sb, rb, c->count, c->dtype, cm->comm, cm->stream);
    case SIM_REDUCESCATTER:
        return ncclReduceScatter(sb, rb, c->count, c->dtype, c->redop, cm->comm, cm->stream);
    case SIM_BROADCAST:
        return ncclBroadcast(sb, rb, c->count, c->dtype, c->root, cm->comm, cm->stream);
    case SIM_REDUCE:
        return ncclReduce(sb, rb, c->count, c->dtype, c->redop, c->root, cm->comm, cm->stream);
    case SIM_ALLTOALL:
        return ncclAlltoAll(sb, rb, c->count, c->dtype, cm->comm, cm->stream);
    case SIM_GATHER:
        return ncclGather(sb, rb, c->count, c->dtype, c->root, cm->comm, cm->stream);
    case SIM_SCATTER:
        return ncclScatter(sb, rb, c->count, c->dtype, c->root, cm->comm, cm->stream);
    case SIM_SEND:
        return ncclSend(sb, c->count, c->dtype, c->peer, cm->comm, cm->stream);
    case SIM_RECV:
        return ncclRecv(rb, c->count, c->dtype, c->peer, cm->comm, cm->stream);
    default:
        return ncclInternalError;
    }
}

void sim_nccl_fail(struct sim *s, ncclResult_t r, const char *call, int comm, int code)
{
    if (sim_aborting()) /* the call failed because the watchdog aborted its communicator */
        sim_park();
    ncclComm_t c = comm >= 0 ? s->comms[comm].comm : NULL;
    const char *last = ncclGetLastError(c);
    if (comm >= 0)
        sim_say("%s on comm %s failed: %s; NCCL says: %s", call, s->comms[comm].name,
                ncclGetErrorString(r), last && *last ? last : "(nothing more)");
    else
        sim_say("%s failed: %s; NCCL says: %s", call, ncclGetErrorString(r),
                last && *last ? last : "(nothing more)");
    sim_exit(code);
}

static int rooted(int op)
{
    return op == SIM_BROADCAST || op == SIM_REDUCE || op == SIM_GATHER || op == SIM_SCATTER;
}

static int reduces(int op)
{
    return op == SIM_ALLREDUCE || op == SIM_REDUCESCATTER || op == SIM_REDUCE;
}

/* Whether any rank's --mismatch targets the call with this per-process index: --check skips
 * it everywhere, since the other ranks' results are then undefined too. */
static int mismatched_anywhere(const struct sim *s, uint64_t call)
{
    for (int i = 0; i < s->opt->nmismatch; i++)
        if (s->opt->mismatch[i].seq == call)
            return 1;
    return 0;
}

/* Applies this rank's --mismatch rules for this call; 1 when one changed it. The changed call
 * runs on scratch buffers sized for it: a larger count, a wider dtype, another op or a new
 * root could not fit the pattern's buffers. */
static int apply_mismatch(struct sim *s, struct sim_call *c)
{
    int changed = 0;
    for (int i = 0; i < s->opt->nmismatch; i++) {
        const struct sim_mismatch *m = &s->opt->mismatch[i];
        if (m->rank != s->id.rank || m->seq != s->calls)
            continue;
        const char *skip = NULL;
        int p2p = c->op == SIM_SEND || c->op == SIM_RECV;
        if (m->field == SIM_FIELD_COUNT)
            c->count = (size_t)m->value;
        else if (m->field == SIM_FIELD_DTYPE)
            c->dtype = (ncclDataType_t)m->value;
        else if (m->field == SIM_FIELD_ROOT && rooted(c->op))
            c->root = (int)m->value;
        else if (m->field == SIM_FIELD_PEER && p2p)
            c->peer = (int)m->value;
        else if (m->field == SIM_FIELD_REDOP && reduces(c->op))
            c->redop = (ncclRedOp_t)m->value;
        else if (m->field == SIM_FIELD_OP && !p2p)
            c->op = (int)m->value;
        else
            skip = m->field == SIM_FIELD_ROOT   ? "root"
                   : m->field == SIM_FIELD_PEER ? "peer"
                   : m->field == SIM_FIELD_OP   ? "op"
                                                : "redop";
        if (skip) {
            sim_say("--mismatch %d:%llu: %s does not apply to %s; the call is left as it is",
                    m->rank, (unsigned long long)m->seq, skip, sim_op_name[c->op]);
            continue;
        }
        changed = 1;
    }
    if (!changed)
        return 0;
    const struct sim_comm *cm = &s->comms[c->comm];
    size_t se = sim_send_elems(c, cm->size, cm->rank), re = sim_recv_elems(c, cm->size, cm->rank);
    size_t need = (se > re ? se : re) * sim_dtype_size(c->dtype);
    if (need == 0)
        need = 1;
    if (need > s->scratch_bytes) {
        sim_sync_all(s); /* an earlier mismatched call may still use the old scratch */
        if (s->scratch_send) {
            sim_cu_check(s, s->cu.cuMemFree(s->scratch_send), "cuMemFree");
            sim_cu_check(s, s->cu.cuMemFree(s->scratch_recv), "cuMemFree");
        }
        sim_cu_check(s, s->cu.cuMemAlloc(&s->scratch_send, need), "cuMemAlloc");
        sim_cu_check(s, s->cu.cuMemAlloc(&s->scratch_recv, need), "cuMemAlloc");
        s->scratch_bytes = need;
    }
    c->send = s->scratch_send;
    c->recv = s->scratch_recv;
    return 1;
}

static void *host_buffer(struct sim *s, size_t bytes)
{
    if (bytes > s->host_cap) {
        free(s->host_buf);
        s->host_buf = malloc(bytes);
        s->host_cap = s->host_buf ? bytes : 0;
        if (!s->host_buf) {
            sim_say("out of host memory for --check (%zu bytes)", bytes);
            sim_exit(SIM_EXIT_FAILED);
        }
    }
    return s->host_buf;
}

static void check_prepare(struct sim *s, const struct sim_call *c, uint32_t tag)
{
    const struct sim_comm *cm = &s->comms[c->comm];
    size_t es = sim_dtype_size(c->dtype);
    size_t se = sim_send_elems(c, cm->size, cm->rank), re = sim_recv_elems(c, cm->size, cm->rank);
    /* The buffers may still be read or written by this stream's earlier calls. */
    sim_cu_check(s, s->cu.cuStreamSynchronize(cm->stream), "cuStreamSynchronize");
    /* Poison first: a result NCCL never wrote reads as 0xff.., not as last step's answer. */
    if (re && c->recv != c->send)
        sim_cu_check(s, s->cu.cuMemsetD8(c->recv, 0xff, re * es), "cuMemsetD8");
    if (se) {
        void *h = host_buffer(s, se * es);
        sim_fill(s, c, tag, h, se);
        sim_cu_check(s, s->cu.cuMemcpyHtoD(c->send, h, se * es), "cuMemcpyHtoD");
    } else if (re && c->recv == c->send) {
        sim_cu_check(s, s->cu.cuMemsetD8(c->recv, 0xff, re * es), "cuMemsetD8");
    }
}

static void check_verify(struct sim *s, const struct sim_call *c, uint32_t tag, uint64_t seq)
{
    const struct sim_comm *cm = &s->comms[c->comm];
    size_t re = sim_recv_elems(c, cm->size, cm->rank), es = sim_dtype_size(c->dtype);
    if (re == 0) /* a Send, a non-root Reduce or Gather: nothing of this rank's to compare */
        return;
    sim_cu_check(s, s->cu.cuStreamSynchronize(cm->stream), "cuStreamSynchronize");
    void *h = host_buffer(s, re * es);
    sim_cu_check(s, s->cu.cuMemcpyDtoH(h, c->recv, re * es), "cuMemcpyDtoH");
    sim_verify(s, c, tag, seq, h, re);
}

void sim_call(struct sim *s, const struct sim_call *in)
{
    struct sim_call c = *in;
    struct sim_comm *cm = &s->comms[c.comm];
    uint64_t seq = cm->seq;
    int mismatched = apply_mismatch(s, &c);
    uint32_t tag = c.op == SIM_SEND || c.op == SIM_RECV ? c.tag : (uint32_t)seq;
    int check = s->opt->check && !mismatched && !mismatched_anywhere(s, s->calls) &&
                sim_checkable(&c);
    if (check)
        check_prepare(s, &c, tag);
    if (s->late_ms > 0)
        sim_sleep_us(s->late_ms * 1000);

    char what[32];
    snprintf(what, sizeof what, "nccl%s", sim_op_name[c.op]);
    cm->seq++;
    s->calls++;
    s->counts[c.op]++;
    sim_watchdog_enter(s, what, c.op, c.comm, seq);
    ncclResult_t r = issue(&c, cm);
    sim_watchdog_leave(s);
    if (r != ncclSuccess && r != ncclInProgress)
        sim_nccl_fail(s, r, what, c.comm, SIM_EXIT_FAILED);

    if (s->group_depth > 0) {
        if (s->npending == s->cap_pending) {
            int cap = s->cap_pending ? 2 * s->cap_pending : 16;
            struct sim_pending *p = realloc(s->pending, (size_t)cap * sizeof *p);
            if (!p) {
                sim_say("out of host memory");
                sim_exit(SIM_EXIT_FAILED);
            }
            s->pending = p;
            s->cap_pending = cap;
        }
        s->pending[s->npending++] = (struct sim_pending){ c, seq, tag, check };
        return;
    }
    sim_watchdog_track(s, c.op, c.comm, seq);
    if (check)
        check_verify(s, &c, tag, seq);
}

void sim_group_start(struct sim *s)
{
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        sim_nccl_fail(s, r, "ncclGroupStart", -1, SIM_EXIT_FAILED);
    s->group_depth++;
}

void sim_group_end(struct sim *s)
{
    /* NCCL connects p2p peers lazily inside ncclGroupEnd, which then waits for the peer:
     * the watchdog watches it as the group's first call. */
    const struct sim_pending *first = s->npending ? &s->pending[0] : NULL;
    sim_watchdog_enter(s, "ncclGroupEnd", first ? first->call.op : -1,
                       first ? first->call.comm : -1, first ? first->seq : 0);
    ncclResult_t r = ncclGroupEnd();
    sim_watchdog_leave(s);
    if (r != ncclSuccess && r != ncclInProgress)
        sim_nccl_fail(s, r, "ncclGroupEnd", first ? first->call.comm : -1, SIM_EXIT_FAILED);
    if (--s->group_depth > 0)
        return;
    for (int i = 0; i < s->npending; i++)
        sim_watchdog_track(s, s->pending[i].call.op, s->pending[i].call.comm,
                           s->pending[i].seq);
    for (int i = 0; i < s->npending; i++)
        if (s->pending[i].check)
            check_verify(s, &s->pending[i].call, s->pending[i].tag, s->pending[i].seq);
    s->npending = 0;
}

int sim_comm_add(struct sim *s, ncclComm_t comm, const char *name)
{
    int i = s->ncomms;
    struct sim_comm *cm = &s->comms[i];
    cm->comm = comm;
    cm->name = name;
    cm->seq = 0;
    ncclResult_t r = ncclCommCount(comm, &cm->size);
    if (r == ncclSuccess)
        r = ncclCommUserRank(comm, &cm->rank);
    if (r != ncclSuccess) {
        s->ncomms = i + 1; /* so that the failure line can name it */
        sim_nccl_fail(s, r, "ncclCommCount", i, SIM_EXIT_FAILED);
    }
    /* NCCL's streams in PyTorch are non-blocking: no implicit sync with the legacy stream. */
    if (i > 0 && s->opt->one_stream)
        cm->stream = s->comms[0].stream;
    else
        sim_cu_check(s, s->cu.cuStreamCreate(&cm->stream, CU_STREAM_NON_BLOCKING),
                     "cuStreamCreate");
    /* published last: the watchdog thread reads comms[0..ncomms) */
    __atomic_store_n(&s->ncomms, i + 1, __ATOMIC_RELEASE);
    return i;
}

CUdeviceptr sim_alloc(struct sim *s, size_t bytes)
{
    if (s->nallocs == s->cap_allocs) {
        int cap = s->cap_allocs ? 2 * s->cap_allocs : 16;
        CUdeviceptr *a = realloc(s->allocs, (size_t)cap * sizeof *a);
        if (!a) {
            sim_say("out of host memory");
            sim_exit(SIM_EXIT_FAILED);
        }
        s->allocs = a;
        s->cap_allocs = cap;
    }
    CUdeviceptr p = 0;
    char what[64];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
    sim_cu_check(s, s->cu.cuMemAlloc(&p, bytes ? bytes : 1), what);
    s->allocs[s->nallocs++] = p;
    return p;
}

void sim_free_all(struct sim *s)
{
    for (int i = 0; i < s->nallocs; i++)
        sim_cu_check(s, s->cu.cuMemFree(s->allocs[i]), "cuMemFree");
    if (s->scratch_send) {
        sim_cu_check(s, s->cu.cuMemFree(s->scratch_send), "cuMemFree");
        sim_cu_check(s, s->cu.cuMemFree(s->scratch_recv), "cuMemFree");
    }
    free(s->allocs);
    free(s->host_buf);
    free(s->pending);
    s->allocs = NULL;
    s->host_buf = NULL;
    s->pending = NULL;
    s->nallocs = s->cap_allocs = s->npending = s->cap_pending = 0;
    s->scratch_send = s->scratch_recv = 0;
    s->host_cap = s->scratch_bytes = 0;
}

void sim_sync_all(struct sim *s)
{
    for (int i = 0; i < s->ncomms; i++)
        sim_cu_check(s, s->cu.cuStreamSynchronize(s->comms[i].stream), "cuStreamSynchronize");
}

size_t sim_elems(const struct sim *s, double bytes, size_t elem_size)
{
    double n = bytes * s->opt->scale / (double)elem_size;
    return n < 1 ? 1 : (size_t)(n + 0.5);
}

/* The compute kernels: each spins on %globaltimer for its u64 parameter's nanoseconds, the
 * same on a real GPU (the driver compiles the PTX) and on the emulation (which models these
 * kernels so). */
static const char compute_ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry sim_fwd_gemm(.param .u64 ns)\n"
    "{\n"
    "    .reg .pred p;\n"
    "    .reg .b64 t0, t1, d, lim;\n"
    "    ld.param.u64 lim, [ns];\n"
    "    mov.u64 t0, %globaltimer;\n"
    "SPIN_F:\n"
    "    mov.u64 t1, %globaltimer;\n"
    "    sub.u64 d, t1, t0;\n"
    "    setp.lt.u64 p, d, lim;\n"
    "    @p bra SPIN_F;\n"
    "    ret;\n"
    "}\n"
    ".visible .entry sim_bwd_gemm(.param .u64 ns)\n"
    "{\n"
    "    .reg .pred p;\n"
    "    .reg .b64 t0, t1, d, lim;\n"
    "    ld.param.u64 lim, [ns];\n"
    "    mov.u64 t0, %globaltimer;\n"
    "SPIN_B:\n"
    "    mov.u64 t1, %globaltimer;\n"
    "    sub.u64 d, t1, t0;\n"
    "    setp.lt.u64 p, d, lim;\n"
    "    @p bra SPIN_B;\n"
    "    ret;\n"
    "}\n";

void sim_compute_setup(struct sim *s)
{
    static const char *const names[SIM_NKERNELS] = {"sim_fwd_gemm", "sim_bwd_gemm"};
    if (!s->cu.cuModuleLoadData || !s->cu.cuModuleGetFunction || !s->cu.cuLaunchKernel) {
        sim_say("--gpu-compute: the CUDA driver '%s' cannot load kernels (no cuModuleLoadData, "
                "cuModuleGetFunction or cuLaunchKernel)", s->cu.path);
        sim_exit(SIM_EXIT_CANNOT_RUN);
    }
    CUmodule mod;
    CUresult r = s->cu.cuModuleLoadData(&mod, compute_ptx);
    for (int k = 0; r == CUDA_SUCCESS && k < SIM_NKERNELS; k++)
        r = s->cu.cuModuleGetFunction(&s->kernels[k], mod, names[k]);
    if (r != CUDA_SUCCESS) {
        char why[256];
        sim_cuda_result(&s->cu, r, why, sizeof why);
        sim_say("--gpu-compute: the driver cannot load the compute kernels: %s", why);
        sim_exit(SIM_EXIT_CANNOT_RUN);
    }
}

void sim_compute(const struct sim *s, int kernel, double us)
{
    double scaled = us * s->opt->scale * s->slow_factor[kernel];
    if (!s->opt->gpu_compute) {
        sim_sleep_us(scaled);
        return;
    }
    uint64_t ns = (uint64_t)(scaled * 1e3);
    void *params[] = {&ns};
    struct sim *m = (struct sim *)s;
    sim_cu_check(m, s->cu.cuLaunchKernel(s->kernels[kernel], 1, 1, 1, 32, 1, 1, 0,
                                         s->comms[0].stream, params, NULL),
                 "cuLaunchKernel");
}
