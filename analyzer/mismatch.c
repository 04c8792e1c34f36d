/* analyzer/mismatch.c: ranks that disagree on what an operation is.
 *
 * A collective (comm, seq) is compared field by field over the ranks that called it: op,
 * count and dtype over all of them, redop over those whose op reduces, root over those
 * whose op has one (a rank that called another op at that seq is still compared there:
 * NCCL numbers nothing differently for it). A send/recv pair is compared on count and dtype.
 * peer: a pair-direction a -> b ends in a Send that b never received (b made no receive from
 * a from that seq on), and either
 *   - a third rank d waits on a receive from a that a never sent, and a -> b never carried
 *     a message: a sent to b what d expected; culprit a, values a's (b) and d's (a); or
 *   - b waits on a receive from some c != a that c never sent, and c -> b never carried a
 *     message: b listens to the wrong rank; culprit b, values a's (b) and b's (c).
 * A channel that never carried anything is what tells a wrong peer from a pipeline stalled
 * for another reason (a rank killed, a hang elsewhere), where every channel has carried
 * messages before.
 * Culprits elsewhere are the ranks holding a minority value; between equally common values
 * the one the lowest rank holds is taken as right.
 * Every mismatch is counted; the first CPA_MISMATCH_KEEP by (comm, seq) are kept with every
 * rank's value and call site, since the first of a comm is the one that explains the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/hang_internal.h"

#define CPA_MISMATCH_KEEP 1000

const char *cpa_field_name(int f)
{
    static const char *const names[] = {"op", "count", "dtype", "redop", "root", "peer"};
    return f >= 0 && f < 6 ? names[f] : "?";
}

/* A mismatch found, before its values are gathered (only the kept ones are). */
typedef struct found {
    uint64_t comm_id;
    uint64_t seq;
    size_t op_idx;      /* into mt->ops; peer: the Send's pair-direction op */
    size_t other_idx;   /* peer: the receiver's unmatched Recv op */
    int field;
    int32_t culprit;    /* peer: the global rank judged wrong */
} found;

/* The first op of a pair-direction that has one side only, the other side making no
 * later call on it. */
typedef struct dangling {
    uint64_t comm_id;
    int32_t sender, receiver;  /* comm ranks */
    size_t op_idx;
    int send_side;             /* the side present is the Send */
    int carried;               /* some earlier op of the pair had both sides */
} dangling;

typedef struct scan {
    const cpa_model *m;
    const cpa_matched *mt;
    found *found;
    size_t nfound, cap_found;
    dangling *dang;
    size_t ndang, cap_dang;
} scan;

static const cpa_call *call_at(const scan *s, const cpa_op *o, uint32_t p)
{
    const cpa_part *pt = &s->mt->parts[o->first_part + p];
    return &s->m->ranks[pt->rank_idx].calls[pt->call_idx];
}

static int reduces(unsigned op)
{
    return op == CP_OP_ALLREDUCE || op == CP_OP_REDUCE || op == CP_OP_REDUCESCATTER;
}

static int rooted(unsigned op)
{
    return op == CP_OP_BROADCAST || op == CP_OP_REDUCE || op == CP_OP_GATHER ||
           op == CP_OP_SCATTER;
}

/* Whether this call takes part in comparing field, and its value there. */
static int value_of(const cpa_call *c, int field, int64_t *v)
{
    switch (field) {
    case CPA_FIELD_OP: *v = c->op; return 1;
    case CPA_FIELD_COUNT: *v = (int64_t)c->count; return 1;
    case CPA_FIELD_DTYPE: *v = c->dtype; return 1;
    case CPA_FIELD_REDOP: *v = c->redop; return reduces(c->op);
    case CPA_FIELD_ROOT: *v = c->peer; return rooted(c->op);
    default: return 0;
    }
}

static int add_found(scan *s, found f)
{
    if (cpa_grow((void **)&s->found, &s->cap_found, s->nfound + 1, sizeof *s->found))
        return -1;
    s->found[s->nfound++] = f;
    return 0;
}

static int compare_op(scan *s, size_t oi)
{
    const cpa_op *o = &s->mt->ops[oi];
    int fields[] = {CPA_FIELD_OP, CPA_FIELD_COUNT, CPA_FIELD_DTYPE, CPA_FIELD_REDOP,
                    CPA_FIELD_ROOT};
    int p2p = o->sender >= 0;
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        if (p2p && fields[k] != CPA_FIELD_COUNT && fields[k] != CPA_FIELD_DTYPE)
            continue;
        int64_t first = 0, v;
        int n = 0, differ = 0;
        for (uint32_t p = 0; p < o->nparts; p++) {
            if (!value_of(call_at(s, o, p), fields[k], &v))
                continue;
            if (n++ == 0)
                first = v;
            else if (v != first)
                differ = 1;
        }
        if (differ && add_found(s, (found){.comm_id = o->comm_id, .seq = o->seq, .op_idx = oi,
                                           .field = fields[k], .culprit = -1}))
            return -1;
    }
    return 0;
}

/* Pair-direction ops [lo, hi): a complete pair is compared; the first one-sided op whose
 * other side made no later call is kept as dangling. */
static int scan_pair(scan *s, size_t lo, size_t hi)
{
    int send_side = 0, carried = 0;
    size_t d = cpa_pair_dangling(s->m, s->mt, lo, hi, &send_side);
    for (size_t i = lo; i < hi; i++) {
        int sends, recvs;
        cpa_pair_sides(s->m, s->mt, &s->mt->ops[i], &sends, &recvs);
        if (sends == 1 && recvs == 1) {
            carried |= i < d;
            if (compare_op(s, i))
                return -1;
        }
    }
    if (d == hi)
        return 0;
    if (cpa_grow((void **)&s->dang, &s->cap_dang, s->ndang + 1, sizeof *s->dang))
        return -1;
    const cpa_op *o = &s->mt->ops[d];
    s->dang[s->ndang++] = (dangling){.comm_id = o->comm_id, .sender = o->sender,
                                     .receiver = o->receiver, .op_idx = d,
                                     .send_side = send_side, .carried = carried};
    return 0;
}

static int cmp_by_receiver(const void *x, const void *y)
{
    const dangling *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->receiver != q->receiver)
        return p->receiver < q->receiver ? -1 : 1;
    return p->sender < q->sender ? -1 : p->sender > q->sender;
}

static int cmp_by_sender(const void *x, const void *y)
{
    const dangling *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->sender != q->sender)
        return p->sender < q->sender ? -1 : 1;
    return p->receiver < q->receiver ? -1 : p->receiver > q->receiver;
}

/* First element of recvs[0, n) not ordered before (comm, a, b) by cmp. */
static size_t lower(const dangling *v, size_t n, const dangling *key,
                    int (*cmp)(const void *, const void *))
{
    size_t lo;
    CP_LOWER_BOUND(lo, n, i, cmp(&v[i], key) < 0);
    return lo;
}

static int32_t global_of(const scan *s, const cpa_op *o)
{
    return s->m->ranks[s->mt->parts[o->first_part].rank_idx].rank;
}

/* Unmatched Sends whose receiver waits on another rank instead. */
static int find_peers(scan *s)
{
    size_t nr = 0;
    for (size_t i = 0; i < s->ndang; i++)
        nr += !s->dang[i].send_side;
    dangling *by_recv = malloc((nr ? nr : 1) * sizeof *by_recv);
    dangling *by_send = malloc((nr ? nr : 1) * sizeof *by_send);
    if (!by_recv || !by_send) {
        free(by_recv);
        free(by_send);
        return -1;
    }
    nr = 0;
    for (size_t i = 0; i < s->ndang; i++)
        if (!s->dang[i].send_side)
            by_recv[nr] = by_send[nr] = s->dang[i], nr++;
    qsort(by_recv, nr, sizeof *by_recv, cmp_by_receiver);
    qsort(by_send, nr, sizeof *by_send, cmp_by_sender);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->ndang; i++) {
        const dangling *d = &s->dang[i];
        if (!d->send_side)
            continue;
        const dangling *other = NULL;
        int sender_wrong = 0;
        /* Someone else waits on a receive from the sender: a sent it to the wrong rank. */
        dangling sk = {.comm_id = d->comm_id, .sender = d->sender, .receiver = INT32_MIN};
        for (size_t j = lower(by_send, nr, &sk, cmp_by_sender);
             !d->carried && !other && j < nr && by_send[j].comm_id == d->comm_id &&
             by_send[j].sender == d->sender; j++)
            if (by_send[j].receiver != d->receiver)
                other = &by_send[j], sender_wrong = 1;
        /* The receiver waits on a rank that never sends to it: b listens to the wrong rank. */
        dangling rk = {.comm_id = d->comm_id, .receiver = d->receiver, .sender = INT32_MIN};
        for (size_t k = lower(by_recv, nr, &rk, cmp_by_receiver);
             !other && k < nr && by_recv[k].comm_id == d->comm_id &&
             by_recv[k].receiver == d->receiver; k++)
            if (by_recv[k].sender != d->sender && !by_recv[k].carried)
                other = &by_recv[k];
        if (!other)
            continue;
        const cpa_op *send_op = &s->mt->ops[d->op_idx];
        const cpa_op *recv_op = &s->mt->ops[other->op_idx];
        rc = add_found(s, (found){.comm_id = d->comm_id, .seq = send_op->seq,
                                  .op_idx = d->op_idx, .other_idx = other->op_idx,
                                  .field = CPA_FIELD_PEER,
                                  .culprit = sender_wrong ? global_of(s, send_op)
                                                          : global_of(s, recv_op)});
    }
    free(by_recv);
    free(by_send);
    return rc;
}

static int cmp_found(const void *x, const void *y)
{
    const found *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->seq != q->seq)
        return p->seq < q->seq ? -1 : 1;
    if (p->field != q->field)
        return p->field < q->field ? -1 : 1;
    return p->op_idx < q->op_idx ? -1 : p->op_idx > q->op_idx;
}

static int cmp_value_rank(const void *x, const void *y)
{
    const cpa_mismatch_value *p = x, *q = y;
    return p->rank < q->rank ? -1 : p->rank > q->rank;
}

static int cmp_value_value(const void *x, const void *y)
{
    const cpa_mismatch_value *p = x, *q = y;
    if (p->value != q->value)
        return p->value < q->value ? -1 : 1;
    return p->rank < q->rank ? -1 : p->rank > q->rank;
}

/* Culprits: every rank whose value is not the most common one; among equally common
 * values, the one held by the lowest rank is taken as right. vals is sorted by rank. */
static int set_culprits(cpa_mismatch *x)
{
    size_t n = x->nvalues;
    cpa_mismatch_value *v = malloc(n * sizeof *v);
    x->culprit_ranks = malloc(n * sizeof *x->culprit_ranks);
    if (!v || !x->culprit_ranks) {
        free(v);
        return -1;
    }
    memcpy(v, x->values, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_value_value);
    int64_t best = 0;
    size_t best_n = 0;
    int32_t best_low = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].value == v[i].value)
            j++;
        /* v[i] holds the lowest rank of this value: sorted by (value, rank). */
        if (j - i > best_n || (j - i == best_n && v[i].rank < best_low)) {
            best = v[i].value;
            best_n = j - i;
            best_low = v[i].rank;
        }
        i = j;
    }
    free(v);
    for (size_t i = 0; i < n; i++)
        if (x->values[i].value != best)
            x->culprit_ranks[x->nculprits++] = x->values[i].rank;
    return 0;
}

static void put_value(const scan *s, const cpa_part *pt, int64_t value, cpa_mismatch_value *out)
{
    const cpa_rank *r = &s->m->ranks[pt->rank_idx];
    const cpa_call *c = &r->calls[pt->call_idx];
    *out = (cpa_mismatch_value){.rank = r->rank, .value = value, .site = cpa_call_site(r, c)};
}

/* The kept row of one finding: every rank's value and site. */
static int materialize(const scan *s, const found *f, cpa_mismatch *x)
{
    memset(x, 0, sizeof *x);
    x->comm_id = f->comm_id;
    x->seq = f->seq;
    x->field = f->field;
    const cpa_op *o = &s->mt->ops[f->op_idx];
    size_t cap = f->field == CPA_FIELD_PEER ? 2 : o->nparts;
    x->values = malloc((cap ? cap : 1) * sizeof *x->values);
    if (!x->values)
        return -1;
    if (f->field == CPA_FIELD_PEER) {
        const cpa_op *r = &s->mt->ops[f->other_idx];
        const cpa_part *sp = &s->mt->parts[o->first_part];
        const cpa_part *rp = &s->mt->parts[r->first_part];
        put_value(s, sp, o->receiver, &x->values[0]);
        put_value(s, rp, r->sender, &x->values[1]);
        x->nvalues = 2;
        qsort(x->values, 2, sizeof *x->values, cmp_value_rank);
        x->culprit_ranks = malloc(sizeof *x->culprit_ranks);
        if (!x->culprit_ranks)
            return -1;
        x->culprit_ranks[0] = f->culprit;
        x->nculprits = 1;
        return 0;
    }
    for (uint32_t p = 0; p < o->nparts; p++) {
        int64_t v;
        if (value_of(call_at(s, o, p), f->field, &v))
            put_value(s, &s->mt->parts[o->first_part + p], v, &x->values[x->nvalues++]);
    }
    qsort(x->values, x->nvalues, sizeof *x->values, cmp_value_rank);
    return set_culprits(x);
}

/* What an operation's first part says: the values every other part is held to. */
typedef struct ref {
    uint64_t count;
    int32_t peer;
    uint8_t op, dtype, redop;
} ref;

/* The collectives [0, ncoll) of two parts or more where some part differs from the first in
 * a compared field, flagged in differ. The calls are read rank by rank in memory order, not
 * operation by operation: a part of every operation lies in every rank's array, and going
 * to each in turn was a cache miss a part. A call with the first one's op takes part in the
 * same fields, so comparing each call's fields with the first's finds exactly the
 * operations compare_op reports on; those alone are compared again field by field. -1 out
 * of memory. */
static int flag_differing(const cpa_model *m, const cpa_matched *mt, size_t ncoll,
                          uint8_t *differ)
{
    ref *first = malloc((ncoll ? ncoll : 1) * sizeof *first);
    if (!first)
        return -1;
    /* differ[]: 0 no call seen yet, 1 all alike so far, 2 one differs. The first call the
     * walk meets is what the others are held to, kept as it comes rather than looked up
     * beforehand (a cache miss an operation): whichever part it is, the calls agree with it
     * exactly when they all agree (the fields compared follow the op, compared first). An
     * operation of one part is never flagged. */
    for (size_t r = 0; r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        const uint32_t *op_of = mt->call_op[r];
        for (size_t ci = 0; ci < k->ncalls; ci++) {
            uint32_t oi = op_of[ci];
            if (oi >= ncoll || differ[oi] == 2)
                continue;
            const cpa_call *c = &k->calls[ci];
            ref *f = &first[oi];
            if (!differ[oi]) {
                *f = (ref){.count = c->count, .peer = c->peer, .op = c->op, .dtype = c->dtype,
                           .redop = c->redop};
                differ[oi] = 1;
                continue;
            }
            differ[oi] = c->op != f->op || c->count != f->count || c->dtype != f->dtype ||
                                 (reduces(c->op) && c->redop != f->redop) ||
                                 (rooted(c->op) && c->peer != f->peer)
                             ? 2
                             : 1;
        }
    }
    for (size_t i = 0; i < ncoll; i++)
        differ[i] = differ[i] == 2;
    free(first);
    return 0;
}

int cpa_mismatches_find(const cpa_model *m, const cpa_matched *mt, cpa_mismatches *out,
                        char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    scan s = {.m = m, .mt = mt};
    size_t ncoll = 0;
    while (ncoll < mt->nops && mt->ops[ncoll].sender < 0)
        ncoll++;
    uint8_t *differ = calloc(ncoll ? ncoll : 1, 1);
    int rc = !differ || flag_differing(m, mt, ncoll, differ) ? -1 : 0;
    size_t i = 0;
    for (; rc == 0 && i < ncoll; i++)
        if (differ[i])
            rc = compare_op(&s, i);
    free(differ);
    while (rc == 0 && i < mt->nops) {
        size_t j = cpa_pair_end(mt, i);
        rc = scan_pair(&s, i, j);
        i = j;
    }
    if (rc == 0)
        rc = find_peers(&s);
    if (rc == 0) {
        if (s.nfound)
            qsort(s.found, s.nfound, sizeof *s.found, cmp_found);
        out->total = s.nfound;
        size_t keep = s.nfound < CPA_MISMATCH_KEEP ? s.nfound : CPA_MISMATCH_KEEP;
        out->rows = calloc(keep ? keep : 1, sizeof *out->rows);
        if (!out->rows)
            rc = -1;
        for (size_t k = 0; rc == 0 && k < keep; k++) {
            rc = materialize(&s, &s.found[k], &out->rows[k]);
            out->nrows++; /* a half-built row is freed with the rest */
        }
    }
    free(s.found);
    free(s.dang);
    if (rc) {
        cpa_mismatches_free(out);
        snprintf(err, errlen, "out of memory comparing operations across ranks");
        return -1;
    }
    return 0;
}

void cpa_mismatches_free(cpa_mismatches *x)
{
    for (size_t i = 0; i < x->nrows; i++) {
        free(x->rows[i].values);
        free(x->rows[i].culprit_ranks);
    }
    free(x->rows);
    memset(x, 0, sizeof *x);
}
