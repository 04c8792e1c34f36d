/* analyzer/match.c: the calls of every rank grouped into the operations they took part in.
 *
 * A collective is one (comm_id, seq): the shim numbers each communicator's collectives in
 * issue order on every rank, and NCCL requires every rank to issue them in the same order.
 * A send/recv pair is one (comm_id, sender, receiver, seq): the shim numbers sends per
 * (comm, peer) and receives per (comm, peer) separately, so the k-th send from a to b meets
 * the k-th receive at b from a whatever else the two ranks exchange in between.
 * Both are found by sorting one key per call, which costs O(calls log calls) time and a
 * transient key array, and never a table sized by what a file claims.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

typedef struct mkey {
    uint64_t comm_id;
    uint64_t seq;
    int32_t a;         /* collectives: comm rank; p2p: sender */
    int32_t b;         /* p2p: receiver; collectives: 0 */
    uint32_t rank_idx;
    uint32_t call_idx;
    uint8_t op;
} mkey;

static int cmp_key(const void *x, const void *y)
{
    const mkey *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->seq != q->seq)
        return p->seq < q->seq ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return p->rank_idx < q->rank_idx ? -1 : p->rank_idx > q->rank_idx;
}

static int cmp_p2p(const void *x, const void *y)
{
    const mkey *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    if (p->seq != q->seq)
        return p->seq < q->seq ? -1 : 1;
    if (p->op != q->op) /* the Send (9) before the Recv (10) */
        return p->op < q->op ? -1 : 1;
    return p->rank_idx < q->rank_idx ? -1 : p->rank_idx > q->rank_idx;
}

static cpa_part part_of(const cpa_model *m, const mkey *k)
{
    const cpa_call *c = &m->ranks[k->rank_idx].calls[k->call_idx];
    cpa_part p = {.rank_idx = k->rank_idx, .call_idx = k->call_idx};
    if (c->gpu_timed) {
        p.arrival_ns = c->gpu_start_ns;
        p.end_ns = c->gpu_end_ns;
    } else {
        p.arrival_ns = c->enter_ns;
        p.end_ns = c->enter_ns + c->host_ns;
    }
    return p;
}

/* Turns sorted keys [0, n) into operations: a run of equal (comm_id, seq), and for p2p
 * equal (sender, receiver), is one. */
static int group(const cpa_model *m, const mkey *keys, size_t n, int p2p, cpa_matched *mt,
                 size_t *cap_ops)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && keys[j].comm_id == keys[i].comm_id && keys[j].seq == keys[i].seq &&
               (p2p ? keys[j].a == keys[i].a && keys[j].b == keys[i].b : 1))
            j++;
        if (cpa_grow((void **)&mt->ops, cap_ops, mt->nops + 1, sizeof *mt->ops))
            return -1;
        cpa_op *o = &mt->ops[mt->nops++];
        const cpa_call *first = &m->ranks[keys[i].rank_idx].calls[keys[i].call_idx];
        *o = (cpa_op){.comm_id = keys[i].comm_id, .seq = keys[i].seq,
                      .first_part = mt->nparts, .nparts = (uint32_t)(j - i),
                      .nranks = first->nranks, .sender = -1, .receiver = -1,
                      .op = first->op};
        int sends = 0, recvs = 0;
        for (size_t k = i; k < j; k++) {
            mt->parts[mt->nparts++] = part_of(m, &keys[k]);
            sends += keys[k].op == CP_OP_SEND;
            recvs += keys[k].op == CP_OP_RECV;
        }
        if (p2p) {
            o->op = CP_OP_SEND;
            o->sender = keys[i].a;
            o->receiver = keys[i].b;
            o->complete = sends == 1 && recvs == 1;
        } else {
            o->complete = o->nranks > 0 && o->nparts == (uint32_t)o->nranks;
        }
        i = j;
    }
    return 0;
}

int cpa_match(const cpa_model *m, cpa_matched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (size_t r = 0; r < m->nranks; r++)
        total += m->ranks[r].ncalls;
    mkey *keys = malloc((total ? total : 1) * sizeof *keys);
    if (!keys)
        goto oom;
    /* Collectives fill keys from the front, p2p from the back: one array for both. */
    size_t nc = 0, np = 0;
    for (size_t r = 0; r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        for (size_t i = 0; i < k->ncalls; i++) {
            const cpa_call *c = &k->calls[i];
            mkey key = {.comm_id = c->comm_id, .seq = c->seq, .rank_idx = (uint32_t)r,
                        .call_idx = (uint32_t)i, .op = c->op};
            if (!c->comm_id || c->seq == CPA_SEQ_NONE) {
                out->unmatchable++;
            } else if (cp_op_is_p2p(c->op)) {
                if (c->comm_rank < 0 || c->peer < 0) {
                    out->unmatchable++;
                    continue;
                }
                key.a = c->op == CP_OP_SEND ? c->comm_rank : c->peer;
                key.b = c->op == CP_OP_SEND ? c->peer : c->comm_rank;
                keys[total - 1 - np++] = key;
            } else {
                key.a = c->comm_rank;
                keys[nc++] = key;
            }
        }
    }
    qsort(keys, nc, sizeof *keys, cmp_key);
    qsort(keys + total - np, np, sizeof *keys, cmp_p2p);
    out->parts = malloc((nc + np ? nc + np : 1) * sizeof *out->parts);
    if (!out->parts)
        goto oom;
    size_t cap_ops = 0;
    if (group(m, keys, nc, 0, out, &cap_ops) ||
        group(m, keys + total - np, np, 1, out, &cap_ops))
        goto oom;
    free(keys);
    return 0;
oom:
    free(keys);
    cpa_matched_free(out);
    snprintf(err, errlen, "out of memory matching operations across ranks");
    return -1;
}

void cpa_matched_free(cpa_matched *mt)
{
    if (!mt)
        return;
    free(mt->ops);
    free(mt->parts);
    memset(mt, 0, sizeof *mt);
}
