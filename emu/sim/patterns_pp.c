/* patterns_pp: pp (pipeline parallelism over point-to-point calls) and mixed (TP x DP over
 * split communicators), the two patterns where ranks do not all talk to everyone alike. */
#include <stdio.h>
#include <stdlib.h>

#include "emu/sim/sim.h"

#define MIB (1024.0 * 1024.0)

static void *state(struct sim *s, size_t size)
{
    s->pattern_state = calloc(1, size);
    if (!s->pattern_state) {
        sim_say("out of host memory");
        sim_exit(SIM_EXIT_FAILED);
    }
    return s->pattern_state;
}

/* ---- pp: GPipe over one stage per rank, 8 microbatches of 64 MiB fp16 activations ----
 * The schedule runs in ticks: at tick t stage s works on microbatch t - s. Each tick a stage's
 * ncclSend of the microbatch it finished (to s+1) and ncclRecv of the one it starts (from
 * s-1) go in one group, as Megatron batches its p2p ops; the peer posts the matching half in
 * the same tick, so groups pair up and never wait on a later one. Backward runs the same way
 * from the last stage down, with gradients. A 1-rank job has no pipeline: compute only. */
#define PP_MICROBATCHES 8
#define PP_ACT_BYTES (64 * MIB)
#define PP_FWD_US 4000.0
#define PP_BWD_US 8000.0

struct pp {
    CUdeviceptr act_out, act_in, grad_out, grad_in;
    size_t count;
};

void sim_pattern_pp_setup(struct sim *s)
{
    struct pp *p = state(s, sizeof *p);
    p->count = sim_elems(s, PP_ACT_BYTES, 2);
    p->act_out = sim_alloc(s, p->count * 2);
    p->act_in = sim_alloc(s, p->count * 2);
    p->grad_out = sim_alloc(s, p->count * 2);
    p->grad_in = sim_alloc(s, p->count * 2);
}

/* Both ends of a transfer derive the same tag from (step, direction, microbatch). */
static uint32_t pp_tag(long step, int backward, int mb)
{
    return (uint32_t)((step * 2 + backward) * PP_MICROBATCHES + mb);
}

/* One tick in one direction. `up` is the stage this one receives from (-1: none), `down` the
 * one it sends to; `pos` is the stage's place along the direction (0 = first to compute). */
static void pp_tick(struct sim *s, const struct pp *p, int tick, int pos, int up, int down,
                    int backward)
{
    int mb_in = tick - pos, mb_out = tick - 1 - pos;
    int recv = up >= 0 && mb_in >= 0 && mb_in < PP_MICROBATCHES;
    int send = down >= 0 && mb_out >= 0 && mb_out < PP_MICROBATCHES;
    if (recv || send) {
        sim_group_start(s);
        if (send)
            sim_call(s, &(struct sim_call){ .op = SIM_SEND, .count = p->count,
                                            .dtype = ncclFloat16, .peer = down,
                                            .send = backward ? p->grad_out : p->act_out,
                                            .tag = pp_tag(s->step, backward, mb_out) });
        if (recv)
            sim_call(s, &(struct sim_call){ .op = SIM_RECV, .count = p->count,
                                            .dtype = ncclFloat16, .peer = up,
                                            .recv = backward ? p->grad_in : p->act_in,
                                            .tag = pp_tag(s->step, backward, mb_in) });
        sim_group_end(s);
    }
    if (mb_in >= 0 && mb_in < PP_MICROBATCHES)
        sim_compute(s, backward ? SIM_BWD : SIM_FWD, backward ? PP_BWD_US : PP_FWD_US);
}

void sim_pattern_pp_step(struct sim *s)
{
    const struct pp *p = s->pattern_state;
    int n = s->comms[0].size, me = s->comms[0].rank;
    int ticks = PP_MICROBATCHES + n - 1;
    for (int t = 0; t < ticks; t++)
        pp_tick(s, p, t, me, me > 0 ? me - 1 : -1, me < n - 1 ? me + 1 : -1, 0);
    for (int t = 0; t < ticks; t++)
        pp_tick(s, p, t, n - 1 - me, me < n - 1 ? me + 1 : -1, me > 0 ? me - 1 : -1, 1);
}

/* ---- mixed: Megatron-style TP inside a host, data parallelism across hosts ----
 * ncclCommSplit makes the TP group (color rank / T: the ranks of one host) and the DP group
 * (color rank % T: the same TP position on every host). Per step: TP AllReduce of 32 MiB bf16
 * activations per layer in forward and backward, DP ReduceScatter of two 64 MiB fp32 gradient
 * buckets (a distributed optimizer) and AllReduce of 16 MiB of replicated gradients, and a
 * world AllReduce of two int64 (tokens in the batch, steps skipped), exact by nature. Each
 * communicator has its own stream, so TP, DP and world traffic overlap as they do for real. */
#define MX_LAYERS 8
#define MX_TP_BYTES (32 * MIB)
#define MX_DP_BUCKETS 2
#define MX_DP_BUCKET_BYTES (64 * MIB)
#define MX_DP_REPLICATED_BYTES (16 * MIB)
#define MX_FWD_US 1500.0
#define MX_BWD_US 3000.0

enum { MX_WORLD = 0, MX_TP = 1, MX_DP = 2 };

struct mixed {
    CUdeviceptr act, grad_full, grad_shard, replicated, counters, counters_out;
    size_t act_count, shard_count, replicated_count;
};

static int tp_size(const struct sim *s)
{
    int world = s->id.world, t = s->id.local_world;
    /* all ranks on one host would leave DP with groups of one: split the host in two */
    if (t >= world && world >= 4 && world % 2 == 0)
        t = world / 2;
    return t < 1 ? 1 : t;
}

static void split(struct sim *s, int color, const char *name)
{
    ncclComm_t comm = NULL;
    char what[64];
    snprintf(what, sizeof what, "ncclCommSplit (%s)", name);
    sim_watchdog_enter(s, what, -1, -1, 0);
    ncclResult_t r = ncclCommSplit(s->comms[MX_WORLD].comm, color, s->id.rank, &comm, NULL);
    sim_watchdog_leave(s);
    if (r != ncclSuccess)
        sim_nccl_fail(s, r, what, MX_WORLD, SIM_EXIT_CANNOT_RUN);
    sim_comm_add(s, comm, name);
}

void sim_pattern_mixed_setup(struct sim *s)
{
    struct mixed *m = state(s, sizeof *m);
    int t = tp_size(s);
    split(s, s->id.rank / t, "tp");
    split(s, s->id.rank % t, "dp");
    size_t dp = (size_t)s->comms[MX_DP].size;
    m->act_count = sim_elems(s, MX_TP_BYTES, 2);
    m->shard_count = (sim_elems(s, MX_DP_BUCKET_BYTES, 4) + dp - 1) / dp;
    m->replicated_count = sim_elems(s, MX_DP_REPLICATED_BYTES, 4);
    m->act = sim_alloc(s, m->act_count * 2);
    m->grad_full = sim_alloc(s, m->shard_count * dp * 4);
    m->grad_shard = sim_alloc(s, m->shard_count * 4);
    m->replicated = sim_alloc(s, m->replicated_count * 4);
    m->counters = sim_alloc(s, 2 * 8);
    m->counters_out = sim_alloc(s, 2 * 8);
}

static void mx_tp_allreduce(struct sim *s, const struct mixed *m)
{
    sim_call(s, &(struct sim_call){ .op = SIM_ALLREDUCE, .comm = MX_TP, .count = m->act_count,
                                    .dtype = ncclBfloat16, .redop = ncclSum, .send = m->act,
                                    .recv = m->act });
}

void sim_pattern_mixed_step(struct sim *s)
{
    const struct mixed *m = s->pattern_state;
    for (int l = 0; l < MX_LAYERS; l++) {
        sim_compute(s, SIM_FWD, MX_FWD_US);
        mx_tp_allreduce(s, m);
    }
    for (int l = 0; l < MX_LAYERS; l++) {
        sim_compute(s, SIM_BWD, MX_BWD_US);
        mx_tp_allreduce(s, m);
    }
    for (int b = 0; b < MX_DP_BUCKETS; b++)
        sim_call(s, &(struct sim_call){ .op = SIM_REDUCESCATTER, .comm = MX_DP,
                                        .count = m->shard_count, .dtype = ncclFloat32,
                                        .redop = ncclSum, .send = m->grad_full,
                                        .recv = m->grad_shard });
    sim_call(s, &(struct sim_call){ .op = SIM_ALLREDUCE, .comm = MX_DP,
                                    .count = m->replicated_count, .dtype = ncclFloat32,
                                    .redop = ncclSum, .send = m->replicated,
                                    .recv = m->replicated });
    sim_call(s, &(struct sim_call){ .op = SIM_ALLREDUCE, .comm = MX_WORLD, .count = 2,
                                    .dtype = ncclInt64, .redop = ncclSum, .send = m->counters,
                                    .recv = m->counters_out });
}
