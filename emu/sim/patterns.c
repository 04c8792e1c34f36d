/* patterns: ddp, fsdp, tp and moe, each the communication of a real training job of its kind.
 *
 * Sizes are those of real models (at --scale 1); compute is the host sleeping for a time in
 * proportion (the driver API alone cannot launch a kernel), during which the communication
 * stream runs what was enqueued: the overlap of a real job. Every rank issues the same calls
 * in the same order on each communicator, as NCCL requires. The counts per step are in
 * --help; tests/emu/test_emu_sim_patterns.c holds them to it.
 *
 * pp and mixed, which need more than one peer relation, are in patterns_pp.c. */
#include <stdlib.h>

#include "emu/sim/sim.h"

#define MIB (1024.0 * 1024.0)

const struct sim_pattern sim_patterns[SIM_NPATTERNS] = {
    [SIM_DDP] = { sim_pattern_ddp_setup, sim_pattern_ddp_step },
    [SIM_FSDP] = { sim_pattern_fsdp_setup, sim_pattern_fsdp_step },
    [SIM_TP] = { sim_pattern_tp_setup, sim_pattern_tp_step },
    [SIM_PP] = { sim_pattern_pp_setup, sim_pattern_pp_step },
    [SIM_MOE] = { sim_pattern_moe_setup, sim_pattern_moe_step },
    [SIM_MIXED] = { sim_pattern_mixed_setup, sim_pattern_mixed_step },
};

static void *state(struct sim *s, size_t size)
{
    s->pattern_state = calloc(1, size);
    if (!s->pattern_state) {
        sim_say("out of host memory");
        sim_exit(SIM_EXIT_FAILED);
    }
    return s->pattern_state;
}

/* ---- ddp: PyTorch DistributedDataParallel on ResNet-50 (25.6 M fp32 parameters) ----
 * DDP broadcasts the parameters from rank 0 at wrap time, then reduces gradients in buckets:
 * the first bucket capped at 1 MiB (so communication starts early in backward), the rest at
 * 25 MiB. Buckets are fixed fractions of the model, so their number (5) does not depend on
 * --scale; they add up to the model's 102.2 MB. */
#define DDP_BUCKETS 5
static const double ddp_bucket_mib[DDP_BUCKETS] = { 1, 25, 25, 25, 21.492 };
#define DDP_FWD_US 20000.0
#define DDP_BWD_US 40000.0

struct ddp {
    CUdeviceptr params, grads;
    size_t total, off[DDP_BUCKETS], cnt[DDP_BUCKETS];
};

void sim_pattern_ddp_setup(struct sim *s)
{
    struct ddp *d = state(s, sizeof *d);
    for (int b = 0; b < DDP_BUCKETS; b++) {
        d->off[b] = d->total;
        d->cnt[b] = sim_elems(s, ddp_bucket_mib[b] * MIB, 4);
        d->total += d->cnt[b];
    }
    d->params = sim_alloc(s, d->total * 4);
    d->grads = sim_alloc(s, d->total * 4);
    /* DDP's _sync_module_states: in place, from rank 0 */
    sim_call(s, &(struct sim_call){ .op = SIM_BROADCAST, .count = d->total,
                                    .dtype = ncclFloat32, .root = 0, .send = d->params,
                                    .recv = d->params });
}

void sim_pattern_ddp_step(struct sim *s)
{
    struct ddp *d = s->pattern_state;
    sim_compute(s, SIM_FWD, DDP_FWD_US);
    for (int b = 0; b < DDP_BUCKETS; b++) {
        /* the bucket's gradients are ready once its share of backward is computed */
        sim_compute(s, SIM_BWD, DDP_BWD_US * (double)d->cnt[b] / (double)d->total);
        CUdeviceptr g = d->grads + d->off[b] * 4;
        sim_call(s, &(struct sim_call){ .op = SIM_ALLREDUCE, .count = d->cnt[b],
                                        .dtype = ncclFloat32, .redop = ncclSum, .send = g,
                                        .recv = g });
    }
}

/* ---- fsdp: FSDP over a 1.2 B-parameter transformer, 12 units of 48 Mi bf16 parameters ----
 * Each rank keeps 1/n of every unit; forward gathers a unit before using it, backward gathers
 * it again (it was freed after forward) and reduce-scatters its gradients, averaged. */
#define FSDP_UNITS 12
#define FSDP_UNIT_BYTES (96 * MIB)
#define FSDP_FWD_US 3000.0
#define FSDP_BWD_US 6000.0

struct fsdp {
    CUdeviceptr shard, full, grad_full, grad_shard;
    size_t shard_count;
};

void sim_pattern_fsdp_setup(struct sim *s)
{
    struct fsdp *f = state(s, sizeof *f);
    size_t n = (size_t)s->comms[0].size;
    size_t unit = sim_elems(s, FSDP_UNIT_BYTES, 2);
    f->shard_count = (unit + n - 1) / n; /* FSDP pads a unit to a multiple of the world */
    f->shard = sim_alloc(s, f->shard_count * 2);
    f->full = sim_alloc(s, f->shard_count * n * 2);
    f->grad_full = sim_alloc(s, f->shard_count * n * 2);
    f->grad_shard = sim_alloc(s, f->shard_count * 2);
}

static void fsdp_gather(struct sim *s, const struct fsdp *f)
{
    sim_call(s, &(struct sim_call){ .op = SIM_ALLGATHER, .count = f->shard_count,
                                    .dtype = ncclBfloat16, .send = f->shard, .recv = f->full });
}

void sim_pattern_fsdp_step(struct sim *s)
{
    const struct fsdp *f = s->pattern_state;
    for (int u = 0; u < FSDP_UNITS; u++) {
        fsdp_gather(s, f);
        sim_compute(s, SIM_FWD, FSDP_FWD_US);
    }
    for (int u = FSDP_UNITS - 1; u >= 0; u--) {
        fsdp_gather(s, f);
        sim_compute(s, SIM_BWD, FSDP_BWD_US);
        sim_call(s, &(struct sim_call){ .op = SIM_REDUCESCATTER, .count = f->shard_count,
                                        .dtype = ncclBfloat16, .redop = ncclAvg,
                                        .send = f->grad_full, .recv = f->grad_shard });
    }
}

/* ---- tp: Megatron-style tensor parallelism, hidden 8192, 4096 tokens per microbatch ----
 * The activations (64 MiB bf16) are all-reduced once per layer in forward (after the
 * row-parallel projection) and once in backward (the column-parallel input gradient). */
#define TP_LAYERS 16
#define TP_ACT_BYTES (64 * MIB)
#define TP_FWD_US 1500.0
#define TP_BWD_US 3000.0

struct tp {
    CUdeviceptr act;
    size_t count;
};

void sim_pattern_tp_setup(struct sim *s)
{
    struct tp *t = state(s, sizeof *t);
    t->count = sim_elems(s, TP_ACT_BYTES, 2);
    t->act = sim_alloc(s, t->count * 2);
}

static void tp_allreduce(struct sim *s, const struct tp *t)
{
    sim_call(s, &(struct sim_call){ .op = SIM_ALLREDUCE, .count = t->count,
                                    .dtype = ncclBfloat16, .redop = ncclSum, .send = t->act,
                                    .recv = t->act });
}

void sim_pattern_tp_step(struct sim *s)
{
    const struct tp *t = s->pattern_state;
    for (int l = 0; l < TP_LAYERS; l++) {
        sim_compute(s, SIM_FWD, TP_FWD_US);
        tp_allreduce(s, t);
    }
    for (int l = 0; l < TP_LAYERS; l++) {
        sim_compute(s, SIM_BWD, TP_BWD_US);
        tp_allreduce(s, t);
    }
}

/* ---- moe: expert parallelism, top-2 routing of 4096 tokens of hidden 4096 per rank ----
 * Each MoE layer dispatches its tokens to the experts' ranks and combines them back: an
 * AlltoAll each way in forward, and the two mirrored in backward. */
#define MOE_LAYERS 8
#define MOE_TOKENS_BYTES (64 * MIB)
#define MOE_EXPERT_FWD_US 2000.0
#define MOE_EXPERT_BWD_US 4000.0

struct moe {
    CUdeviceptr tokens, routed;
    size_t per_peer;
};

void sim_pattern_moe_setup(struct sim *s)
{
    struct moe *m = state(s, sizeof *m);
    size_t n = (size_t)s->comms[0].size;
    size_t total = sim_elems(s, MOE_TOKENS_BYTES, 2);
    m->per_peer = (total + n - 1) / n;
    m->tokens = sim_alloc(s, m->per_peer * n * 2);
    m->routed = sim_alloc(s, m->per_peer * n * 2);
}

static void moe_alltoall(struct sim *s, const struct moe *m, CUdeviceptr from, CUdeviceptr to)
{
    sim_call(s, &(struct sim_call){ .op = SIM_ALLTOALL, .count = m->per_peer,
                                    .dtype = ncclBfloat16, .send = from, .recv = to });
}

void sim_pattern_moe_step(struct sim *s)
{
    const struct moe *m = s->pattern_state;
    for (int l = 0; l < MOE_LAYERS; l++) {
        moe_alltoall(s, m, m->tokens, m->routed); /* dispatch */
        sim_compute(s, SIM_FWD, MOE_EXPERT_FWD_US);
        moe_alltoall(s, m, m->routed, m->tokens); /* combine */
    }
    for (int l = MOE_LAYERS - 1; l >= 0; l--) {
        moe_alltoall(s, m, m->tokens, m->routed); /* combine's gradient */
        sim_compute(s, SIM_BWD, MOE_EXPERT_BWD_US);
        moe_alltoall(s, m, m->routed, m->tokens); /* dispatch's gradient */
    }
}
