/* analyzer/match.c: the calls of every rank grouped into the operations they took part in.
 *
 * A collective is one (comm_id, seq): the shim numbers each communicator's collectives in
 * issue order on every rank, and NCCL requires every rank to issue them in the same order.
 * A send/recv pair is one (comm_id, sender, receiver, seq): the shim numbers sends per
 * (comm, peer) and receives per (comm, peer) separately, so the k-th send from a to b meets
 * the k-th receive at b from a whatever else the two ranks exchange in between.
 *
 * Collectives are put in order by counting, not by comparing: a communicator's sequence
 * numbers run densely from its first to its last, so (comm_id, seq) maps to a slot among
 * sum over comms of (last - first + 1), and two passes over the calls place every one in
 * its operation, in O(calls) (a 1024-rank job's 10 M calls took 5 s to qsort, a fraction of
 * that to count). Within an operation the parts stay in rank order as they are placed (the
 * ranks are walked in order); those whose communicator ranks run in another order are sorted
 * there. Sequence numbers too sparse for that (more slots than twice the calls: a hostile
 * file) fall back to sorting one key per call, O(calls log calls); so do send/recv pairs.
 * Either way the memory is a transient array per call, never a table sized by what a file
 * claims, and the result is the same: operations by (comm_id, seq), parts by (comm rank,
 * rank index), ties in call order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* count_collectives places a call this many ahead of the one it prefetches for */
#define PREFETCH 16

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

static cpa_part part_of_call(uint32_t rank_idx, uint32_t call_idx, const cpa_call *c)
{
    cpa_part p = {.rank_idx = rank_idx, .call_idx = call_idx, .gpu_timed = c->gpu_timed != 0,
                  .captured = (c->flags & CP_CALL_CAPTURED) != 0,
                  .timed = (c->flags & CP_CALL_TIMED) != 0, .done = c->done != 0};
    if (c->gpu_timed) {
        p.arrival_ns = c->gpu_start_ns;
        p.end_ns = c->gpu_end_ns;
    } else {
        p.arrival_ns = c->enter_ns;
        p.end_ns = c->enter_ns + cpa_call_host_ns(c);
    }
    return p;
}

static cpa_part part_of(const cpa_model *m, const mkey *k)
{
    return part_of_call(k->rank_idx, k->call_idx,
                        &m->ranks[k->rank_idx].calls[k->call_idx]);
}

/* What an operation copies of its first part's call c. */
static void first_call(cpa_op *o, const cpa_call *c)
{
    o->count = c->count;
    o->peer = c->peer;
    o->dtype = c->dtype;
    o->redop = c->redop;
}

/* A collective's op from its first part (the lowest rank's). */
static void collective_op(const cpa_model *m, cpa_op *o, const cpa_part *first)
{
    const cpa_rank *r = &m->ranks[first->rank_idx];
    const cpa_call *c = &r->calls[first->call_idx];
    first_call(o, c);
    o->nranks = cpa_call_nranks(r, c);
    o->op = c->op;
    o->sender = -1;
    o->receiver = -1;
    o->complete = o->nranks > 0 && o->nparts == (uint32_t)o->nranks;
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
        *o = (cpa_op){.comm_id = keys[i].comm_id, .seq = keys[i].seq,
                      .first_part = mt->nparts, .nparts = (uint32_t)(j - i)};
        int sends = 0, recvs = 0;
        for (size_t k = i; k < j; k++) {
            mt->parts[mt->nparts++] = part_of(m, &keys[k]);
            sends += keys[k].op == CP_OP_SEND;
            recvs += keys[k].op == CP_OP_RECV;
        }
        if (p2p) {
            const cpa_rank *r = &m->ranks[keys[i].rank_idx];
            const cpa_call *c = &r->calls[keys[i].call_idx];
            first_call(o, c);
            o->nranks = cpa_call_nranks(r, c);
            o->op = CP_OP_SEND;
            o->sender = keys[i].a;
            o->receiver = keys[i].b;
            o->complete = sends == 1 && recvs == 1;
        } else {
            collective_op(m, o, &mt->parts[o->first_part]);
        }
        i = j;
    }
    return 0;
}

/* What a call is to the matcher, k its communicator (cpa_call_comm); the same test in every
 * pass over the calls. */
enum { CALL_UNMATCHABLE, CALL_COLLECTIVE, CALL_P2P };

static inline int call_kind(const cpa_call *c, const cpa_comm *k)
{
    if (!k || !k->comm_id || c->seq == CPA_SEQ_NONE)
        return CALL_UNMATCHABLE;
    if (c->op != CP_OP_SEND && c->op != CP_OP_RECV)
        return CALL_COLLECTIVE;
    return k->rank < 0 || c->peer < 0 ? CALL_UNMATCHABLE : CALL_P2P;
}

/* ---- collectives by counting ---- */

typedef struct comm_range {
    uint64_t comm_id;
    uint64_t first_seq, last_seq;
    uint64_t base;     /* its first slot */
} comm_range;

/* comm_id -> its range: an open-addressing table over the few communicators of a job. */
typedef struct comm_table {
    uint32_t *slots;   /* range index + 1; 0 empty */
    size_t mask;
    comm_range *ranges;
    size_t n, cap;
} comm_table;

static uint32_t comm_find(comm_table *t, uint64_t comm_id)
{
    uint64_t h = comm_id * 0x9e3779b97f4a7c15ull;
    for (size_t i = (h ^ (h >> 31)) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t s = t->slots[i];
        if (!s) {
            if (t->n >= t->cap)
                return UINT32_MAX;
            t->ranges[t->n] = (comm_range){.comm_id = comm_id, .first_seq = UINT64_MAX};
            t->slots[i] = (uint32_t)++t->n;
            return (uint32_t)(t->n - 1);
        }
        if (t->ranges[s - 1].comm_id == comm_id)
            return s - 1;
    }
}

static int cmp_range(const void *x, const void *y)
{
    const comm_range *p = x, *q = y;
    return p->comm_id < q->comm_id ? -1 : p->comm_id > q->comm_id;
}

/* Parts [lo, hi) of one operation by (comm rank, rank index), keeping call order on ties;
 * `a` holds each part's comm rank. Already in order unless a communicator numbers its ranks
 * unlike the job. */
static void sort_parts(cpa_part *p, int32_t *a, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++) {
        if (a[i - 1] < a[i] || (a[i - 1] == a[i] && p[i - 1].rank_idx <= p[i].rank_idx))
            continue;
        cpa_part v = p[i];
        int32_t av = a[i];
        size_t j = i;
        while (j > lo && (a[j - 1] > av || (a[j - 1] == av && p[j - 1].rank_idx > v.rank_idx))) {
            p[j] = p[j - 1];
            a[j] = a[j - 1];
            j--;
        }
        p[j] = v;
        a[j] = av;
    }
}

/* The census: every communicator's sequence range, and for each rank's COMM records (by
 * position in its comms) the range they belong to; from the loader's counts by comm index
 * (cpa_rank.census) or, without them, from a walk over the rank's calls. */
typedef struct census {
    comm_table t;
    uint32_t **range;  /* per rank, per position in its comms: its range, UINT32_MAX none */
    size_t nc, np;
    int sparse;        /* counting would not do: sort */
    int dense;         /* every rank's collectives on each communicator numbered one after
                          another (the loader's census): each slot's count from the ranges */
} census;

static void census_free(census *cs, size_t nranks)
{
    if (cs->range)
        for (size_t r = 0; r < nranks; r++)
            free(cs->range[r]);
    free(cs->range);
    free(cs->t.slots);
    free(cs->t.ranges);
    memset(cs, 0, sizeof *cs);
}

/* Whether the parts come out in (comm rank, rank index) order as placed, walking the ranks
 * in order: every communicator's members rank in it as in the job, one COMM record each
 * (a communicator split by color with the job rank as key: all of them, nearly always).
 * Then no operation needs sorting, nor each part's comm rank kept for it (4 bytes a call,
 * at the analysis' peak of memory). -1 out of memory. */
static int parts_come_sorted(const cpa_model *m, const census *cs)
{
    size_t n = cs->t.n ? cs->t.n : 1;
    size_t *last_rank = malloc(n * sizeof *last_rank);
    int32_t *last_cr = malloc(n * sizeof *last_cr);
    int sorted = last_rank && last_cr;
    for (size_t g = 0; sorted && g < cs->t.n; g++)
        last_rank[g] = SIZE_MAX;
    for (size_t r = 0; sorted && r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        for (size_t i = 0; sorted && i < k->ncomms; i++) {
            uint32_t g = cs->range[r][i];
            if (g == UINT32_MAX)
                continue;
            sorted = k->comms[i].rank >= 0 && last_rank[g] != r &&
                     (last_rank[g] == SIZE_MAX || k->comms[i].rank > last_cr[g]);
            last_rank[g] = r;
            last_cr[g] = k->comms[i].rank;
        }
    }
    int rc = last_rank && last_cr ? sorted : -1;
    free(last_rank);
    free(last_cr);
    return rc;
}

/* Rank k's collectives' slots, in walk order, into slot[]; each counted into start when not
 * NULL. Returns how many. */
static size_t rank_slots(const comm_table *t, const uint32_t *order, const uint32_t *range,
                         const cpa_rank *k, uint32_t *slot, uint32_t *start)
{
    size_t n = 0;
    for (size_t c = 0; c < k->ncalls; c++) {
        const cpa_call *call = &k->calls[c];
        const cpa_comm *cm = cpa_call_comm(k, call);
        if (call_kind(call, cm) != CALL_COLLECTIVE)
            continue;
        const comm_range *g = &t->ranges[order[range[cm - k->comms]]];
        slot[n] = (uint32_t)(g->base + (call->seq - g->first_seq));
        if (start)
            start[slot[n]]++;
        n++;
    }
    return n;
}

/* Places the nc collective calls in out->parts [0, nc) and their operations in out->ops.
 * 1 when their sequence numbers are too sparse to count (nothing done), 0 done, -1 out of
 * memory. */
static int count_collectives(const cpa_model *m, census *cs, cpa_matched *out)
{
    comm_table *t = &cs->t;
    const size_t nc = cs->nc;
    uint32_t *order = NULL, *start = NULL, *slot_op = NULL, *slot = NULL;
    int32_t *a = NULL;
    int rc = -1;
    if (cs->sparse || nc >= UINT32_MAX)
        return 1;
    /* Slots in comm_id order; more of them than twice the calls means sparse numbers. */
    order = malloc((t->n ? t->n : 1) * sizeof *order);
    if (!order)
        goto done;
    for (size_t g = 0; g < t->n; g++)
        t->ranges[g].base = g; /* where each was before sorting */
    qsort(t->ranges, t->n, sizeof *t->ranges, cmp_range);
    const uint64_t limit = 2 * (uint64_t)nc + 65536;
    uint64_t nslot = 0;
    for (size_t g = 0; g < t->n; g++) {
        order[t->ranges[g].base] = (uint32_t)g;
        uint64_t span = t->ranges[g].last_seq - t->ranges[g].first_seq;
        if (span >= limit || nslot + span + 1 > limit) {
            rc = 1;
            goto done;
        }
        t->ranges[g].base = nslot;
        nslot += span + 1;
    }
    int sorted = parts_come_sorted(m, cs);
    if (sorted < 0)
        goto done;
    start = calloc(nslot + 1, sizeof *start);
    a = sorted ? NULL : malloc((nc ? nc : 1) * sizeof *a);
    /* Dense: a rank's slots are found again as its calls are placed, into an array of its
     * size; else the count's walk keeps every call's (nc of them). */
    size_t most = 0;
    for (size_t r = 0; cs->dense && r < m->nranks; r++)
        most = m->ranks[r].ncalls > most ? m->ranks[r].ncalls : most;
    slot = malloc((cs->dense ? most : nc ? nc : 1) * sizeof *slot + 1);
    if (!start || (!sorted && !a) || !slot)
        goto done;
    /* Count per slot, then each slot's end; placing the calls last to first moves each end
     * back to its slot's start and keeps every slot's parts in walk (rank, call) order.
     * Dense, each rank's collectives on a communicator fill its slots first_seq..last_seq
     * once each: the counts come from those ranges (a difference at each end, summed), not
     * from a walk of every call (a gigabyte of them on a 1024-rank job). */
    size_t i = 0;
    for (size_t r = 0; cs->dense && r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        for (size_t x = 0; x < k->ncensus; x++) {
            const cpa_comm_census *e = &k->census[x];
            const cpa_comm *cm = cpa_comm_of(k, (uint32_t)x);
            if (!e->ncoll || !cm || !cm->comm_id)
                continue;
            const comm_range *g = &t->ranges[order[cs->range[r][cm - k->comms]]];
            uint64_t s0 = g->base + (e->first_seq - g->first_seq);
            start[s0]++; /* wraps below zero and back: the sums are the counts */
            start[s0 + e->ncoll]--;
        }
    }
    for (uint64_t s = 0, sum = 0; cs->dense && s < nslot; s++)
        start[s] = (uint32_t)(sum += start[s]);
    if (cs->dense)
        start[nslot] = 0;
    for (size_t r = 0; !cs->dense && r < m->nranks; r++)
        i += rank_slots(t, order, cs->range[r], &m->ranks[r], slot + i, start);
    /* Each slot's operation, before the parts are placed: the operations are the slots
     * that have calls, in slot order (below), so each call's operation is known as it is
     * placed and call_op is written rank by rank in memory order. */
    slot_op = malloc((nslot ? nslot : 1) * sizeof *slot_op);
    if (!slot_op)
        goto done;
    for (uint64_t s = 0, nop = 0; s < nslot; s++)
        slot_op[s] = start[s] ? (uint32_t)nop++ : CPA_NO_OP;
    for (uint64_t s = 0, sum = 0; s <= nslot; s++) {
        sum += start[s];
        start[s] = (uint32_t)sum;
    }
    for (size_t r = m->nranks; r-- > 0;) {
        const cpa_rank *k = &m->ranks[r];
        uint32_t *op_of = out->call_op[r];
        if (cs->dense)
            i = rank_slots(t, order, cs->range[r], k, slot, NULL);
        for (size_t c = k->ncalls; c-- > 0;) {
            const cpa_call *call = &k->calls[c];
            const cpa_comm *cm = cpa_call_comm(k, call);
            if (call_kind(call, cm) != CALL_COLLECTIVE) {
                op_of[c] = CPA_NO_OP; /* a send/recv's is written with its pair's */
                continue;
            }
            uint32_t at = --start[slot[--i]];
            /* the part written PREFETCH calls on lies an operation's width away from this
             * one: its line asked for now (the writes were a stall each) */
            if (i >= PREFETCH) {
                __builtin_prefetch(&out->parts[start[slot[i - PREFETCH]] - 1], 1, 0);
                if (a)
                    __builtin_prefetch(&a[start[slot[i - PREFETCH]] - 1], 1, 0);
            }
            op_of[c] = slot_op[slot[i]];
            out->parts[at] = part_of_call((uint32_t)r, (uint32_t)c, call);
            if (a)
                a[at] = cm->rank;
        }
    }
    size_t nops = 0;
    for (uint64_t s = 0; s < nslot; s++)
        nops += start[s + 1] > start[s];
    out->ops = malloc((nops ? nops : 1) * sizeof *out->ops);
    if (!out->ops)
        goto done;
    cpa_populate(out->ops, nops * sizeof *out->ops);
    /* Operations in slot order, which is (comm_id, seq) order. */
    for (size_t g = 0; g < t->n; g++) {
        const comm_range *cr = &t->ranges[g];
        uint64_t span = cr->last_seq - cr->first_seq;
        for (uint64_t q = 0; q <= span; q++) {
            uint64_t s = cr->base + q;
            if (start[s + 1] == start[s])
                continue;
            if (a)
                sort_parts(out->parts, a, start[s], start[s + 1]);
            cpa_op *o = &out->ops[out->nops++];
            *o = (cpa_op){.comm_id = cr->comm_id, .seq = cr->first_seq + q,
                          .first_part = start[s], .nparts = start[s + 1] - start[s]};
            collective_op(m, o, &out->parts[o->first_part]);
        }
    }
    out->nparts = nc;
    rc = 0;
done:
    free(order);
    free(start);
    free(slot_op);
    free(slot);
    free(a);
    return rc;
}

/* A collective range [first, last] of rank k's communicator cm (matchable: it has an id). */
static void census_note(census *cs, const cpa_rank *k, uint32_t *range, const cpa_comm *cm,
                        uint64_t first, uint64_t last)
{
    uint32_t *g = &range[cm - k->comms];
    if (*g == UINT32_MAX && (*g = comm_find(&cs->t, cm->comm_id)) == UINT32_MAX) {
        cs->sparse = 1; /* cannot be (the table has room for every COMM record); sort */
        return;
    }
    comm_range *cr = &cs->t.ranges[*g];
    if (first < cr->first_seq)
        cr->first_seq = first;
    if (last > cr->last_seq)
        cr->last_seq = last;
}

/* What is matchable, and each communicator's first and last sequence number: from the
 * loader's counts where it made them (no pass over the calls), else walking them. Every
 * call's comm_id came from one of its file's COMM records, so the table has room for all. */
static int take_census(const cpa_model *m, census *cs, uint64_t *unmatchable)
{
    size_t ncomms = 0;
    for (size_t r = 0; r < m->nranks; r++)
        ncomms += m->ranks[r].ncomms;
    size_t nslots = 16;
    while (nslots < 2 * ncomms)
        nslots *= 2;
    cs->t.slots = calloc(nslots, sizeof *cs->t.slots);
    cs->t.ranges = malloc((ncomms ? ncomms : 1) * sizeof *cs->t.ranges);
    cs->t.mask = nslots - 1;
    cs->t.cap = ncomms;
    cs->range = calloc(m->nranks ? m->nranks : 1, sizeof *cs->range);
    if (!cs->t.slots || !cs->t.ranges || !cs->range)
        return -1;
    cs->dense = 1;
    for (size_t r = 0; r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        uint32_t *range = cs->range[r] = malloc((k->ncomms ? k->ncomms : 1) * sizeof *range);
        if (!range)
            return -1;
        memset(range, 0xff, (k->ncomms ? k->ncomms : 1) * sizeof *range);
        if (k->census) {
            for (size_t i = 0; i < k->ncensus; i++) {
                const cpa_comm_census *e = &k->census[i];
                const cpa_comm *cm = cpa_comm_of(k, (uint32_t)i);
                if (!cm || !cm->comm_id) {
                    *unmatchable += e->ncoll + e->np2p + e->nnone;
                    continue;
                }
                *unmatchable += e->nnone + (cm->rank < 0 ? e->np2p : 0);
                cs->np += cm->rank < 0 ? 0 : e->np2p;
                if (e->ncoll) {
                    census_note(cs, k, range, cm, e->first_seq, e->last_seq);
                    cs->nc += e->ncoll;
                    cs->dense &= !e->gaps;
                }
            }
            continue;
        }
        cs->dense = 0;
        for (size_t c = 0; c < k->ncalls; c++) {
            const cpa_call *call = &k->calls[c];
            const cpa_comm *cm = cpa_call_comm(k, call);
            int kind = call_kind(call, cm);
            if (kind == CALL_UNMATCHABLE)
                (*unmatchable)++;
            else if (kind == CALL_P2P)
                cs->np++;
            else {
                census_note(cs, k, range, cm, call->seq, call->seq);
                cs->nc++;
            }
        }
    }
    return 0;
}

/* The per-rank arrays of cpa_matched.call_op, unset: one block, call_op[0] its start (a
 * 1024-rank job's 40 KB arrays were each below what is worth mapping in one call, and their
 * 10 K pages a fault each). */
static int alloc_call_op(const cpa_model *m, cpa_matched *mt)
{
    mt->call_op = calloc(m->nranks ? m->nranks : 1, sizeof *mt->call_op);
    if (!mt->call_op)
        return -1;
    size_t total = 0;
    for (size_t r = 0; r < m->nranks; r++)
        total += m->ranks[r].ncalls ? m->ranks[r].ncalls : 1;
    if (!m->nranks)
        return 0;
    uint32_t *block = malloc(total * sizeof *block);
    if (!block)
        return -1;
    mt->nranks = m->nranks;
    cpa_populate(block, total * sizeof *block);
    for (size_t r = 0, at = 0; r < m->nranks; r++) {
        mt->call_op[r] = block + at;
        at += m->ranks[r].ncalls ? m->ranks[r].ncalls : 1;
    }
    return 0;
}

/* call_op of the operations [from, nops), written operation by operation (in order within
 * each communicator on each rank); from 0 every entry is cleared first. */
static void index_ops(const cpa_model *m, cpa_matched *mt, size_t from)
{
    if (from == 0)
        for (size_t r = 0; r < m->nranks; r++)
            memset(mt->call_op[r], 0xff,
                   (m->ranks[r].ncalls ? m->ranks[r].ncalls : 1) * sizeof **mt->call_op);
    for (size_t i = from; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *p = &mt->parts[o->first_part + k];
            mt->call_op[p->rank_idx][p->call_idx] = (uint32_t)i;
        }
    }
}

int cpa_match(const cpa_model *m, cpa_matched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    census cs = {0};
    mkey *keys = NULL;
    if (take_census(m, &cs, &out->unmatchable))
        goto oom;
    const size_t nc = cs.nc, np = cs.np;
    out->parts = malloc((nc + np ? nc + np : 1) * sizeof *out->parts);
    if (!out->parts || alloc_call_op(m, out))
        goto oom;
    cpa_populate(out->parts, (nc + np) * sizeof *out->parts); /* each part is placed once */
    int counted = count_collectives(m, &cs, out);
    if (counted < 0)
        goto oom;
    census_free(&cs, m->nranks);
    /* Sorted keys: collectives (only when they could not be counted) from the front, p2p
     * from the back. */
    size_t nk = (counted ? nc : 0) + np, kc = 0, kp = 0;
    keys = malloc((nk ? nk : 1) * sizeof *keys);
    if (!keys)
        goto oom;
    for (size_t r = 0; nk && r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        for (size_t i = 0; i < k->ncalls; i++) {
            const cpa_call *c = &k->calls[i];
            const cpa_comm *cm = cpa_call_comm(k, c);
            int kind = call_kind(c, cm);
            if (kind == CALL_UNMATCHABLE || (kind == CALL_COLLECTIVE && !counted))
                continue;
            mkey key = {.comm_id = cm->comm_id, .seq = c->seq, .rank_idx = (uint32_t)r,
                        .call_idx = (uint32_t)i, .op = c->op};
            if (kind == CALL_P2P) {
                key.a = c->op == CP_OP_SEND ? cm->rank : c->peer;
                key.b = c->op == CP_OP_SEND ? c->peer : cm->rank;
                keys[nk - 1 - kp++] = key;
            } else {
                key.a = cm->rank;
                keys[kc++] = key;
            }
        }
    }
    size_t cap_ops = out->nops;
    if (counted) {
        qsort(keys, kc, sizeof *keys, cmp_key);
        if (group(m, keys, kc, 0, out, &cap_ops))
            goto oom;
    }
    size_t first_p2p = out->nops;
    qsort(keys + nk - kp, kp, sizeof *keys, cmp_p2p);
    if (group(m, keys + nk - kp, kp, 1, out, &cap_ops))
        goto oom;
    free(keys);
    /* Counted, the collectives' call_op is written: the pairs' remain. */
    index_ops(m, out, counted ? 0 : first_p2p);
    return 0;
oom:
    free(keys);
    census_free(&cs, m->nranks);
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
    if (mt->call_op && mt->nranks)
        free(mt->call_op[0]); /* the block every rank's array is in (alloc_call_op) */
    free(mt->call_op);
    memset(mt, 0, sizeof *mt);
}
