/* analyzer/pair_done: which call a DONE record completes, or an NCCL_OP record describes,
 * while one rank file is read (load.c). Internal to the analyzer library.
 *
 * Both records name their call by the same key (comm_index, op, peer, seq), and both come
 * after it, so one pairer serves either kind; a file has one of each (cpa_pair_kind), and
 * neither looks at the other: NCCL_OP precedes its DONE as the shim writes them, but the
 * format does not promise that order, so an NCCL_OP after its DONE still finds its call.
 *
 * A record goes to the oldest call with its key that has none of its kind yet: a key seen
 * twice (a hostile or restarted writer) then pairs its records in order. DONEs
 * follow their CALL by an unbounded distance (a slow GPU, a long group), but mostly by a few
 * calls and in call order; hashing every call for the rare exception took a third of the
 * load's user time. So the calls since the oldest one still waiting (at most
 * CPA_DONE_WINDOW of them) are searched directly, and only a call that waits longer, or that
 * was not timed and will likely never see a DONE, moves into an open-addressing table,
 * filled lazily when a DONE could be looking for such a call. Every call still waiting is in
 * exactly one of the two, the table's all older than the window's, so the oldest match is
 * the table's if it has one.
 */
#ifndef COLLPROF_ANALYZER_PAIR_DONE_H
#define COLLPROF_ANALYZER_PAIR_DONE_H

#include <stddef.h>
#include <stdint.h>

#include "analyzer/model.h"

/* Calls searched directly for a DONE: the search costs up to this many steps when an old
 * call holds the window open, the table's hashing about 30. */
#define CPA_DONE_WINDOW 32
#define CPA_DONE_BLOOM_BITS 4096

/* The table's memory, kept by a loading thread from one file to the next. */
typedef struct cpa_done_scratch {
    uint32_t *slots;   /* call index + 1; 0 empty */
    size_t cap_slots;  /* allocated; a file uses a power-of-two prefix of it */
} cpa_done_scratch;

/* Which record a pairer joins to calls, and so which of the call's marks says it has one. */
enum cpa_pair_kind {
    CPA_PAIR_DONE = 0,    /* cpa_call.done */
    CPA_PAIR_NCCL_OP = 1, /* cpa_call.nccl & CPA_NCCL_SEEN */
};

/* The key a DONE or NCCL_OP names its call by. */
typedef struct cpa_pair_key {
    uint64_t seq;
    uint32_t comm_index;
    int32_t peer;
    uint8_t op;
} cpa_pair_key;

static inline cpa_pair_key cpa_pair_key_done(const cp_rec_done *d)
{
    return (cpa_pair_key){.seq = d->seq, .comm_index = d->comm_index, .peer = d->peer,
                          .op = d->op};
}

static inline cpa_pair_key cpa_pair_key_nccl_op(const cp_rec_nccl_op *n)
{
    return (cpa_pair_key){.seq = n->seq, .comm_index = n->comm_index, .peer = n->peer,
                          .op = n->op};
}

/* One file's state; zero it (but for s and kind) before the file. Call indexes must fit
 * in u32. */
typedef struct cpa_done_pairer {
    cpa_done_scratch *s;
    int kind;            /* enum cpa_pair_kind */
    size_t head;         /* the oldest call of the window; those before it done or old */
    size_t tabled;       /* calls before it were put in the table if still waiting */
    size_t waiting_old;  /* calls before head still waiting */
    uint32_t *slots;     /* the table: s->slots, a power-of-two prefix; NULL unused */
    size_t mask;
    size_t used;         /* slots taken, including calls done since */
    uint64_t bloom[CPA_DONE_BLOOM_BITS / 64]; /* key hashes in the table: most lookups end here */
} cpa_done_pairer;

/* Whether call c already has its record of the pairer's kind. */
static inline int cpa_pair_has(const cpa_done_pairer *p, const cpa_call *c)
{
    return p->kind == CPA_PAIR_NCCL_OP ? (c->nccl & CPA_NCCL_SEEN) != 0 : c->done;
}

/* Moves the window's start past calls paired, and past calls that were not timed (neither
 * a DONE nor an NCCL_OP is due for them; one that comes anyway finds them in the table). */
static inline void cpa_done_settle(cpa_done_pairer *p, const cpa_rank *r)
{
    while (p->head < r->ncalls) {
        const cpa_call *c = &r->calls[p->head];
        if (!cpa_pair_has(p, c)) {
            if (c->flags & CP_CALL_TIMED)
                break;
            p->waiting_old++;
        }
        p->head++;
    }
}

/* After a call was appended to r->calls: one still waiting after CPA_DONE_WINDOW more calls
 * becomes an old one, for the table. */
static inline void cpa_done_added(cpa_done_pairer *p, const cpa_rank *r)
{
    if (r->ncalls - p->head > CPA_DONE_WINDOW) {
        p->waiting_old++;
        p->head++;
    }
    cpa_done_settle(p, r);
}

/* Starts a pairer on a file whose calls so far were read without it (the NCCL_OP pairer,
 * which a file without NCCL_OP records never pays for): its window where cpa_done_added
 * would have left it, none of those calls having a record of its kind yet. */
static inline void cpa_done_begin(cpa_done_pairer *p, const cpa_rank *r)
{
    cpa_done_settle(p, r);
    while (r->ncalls - p->head > CPA_DONE_WINDOW) {
        p->waiting_old++;
        p->head++;
        cpa_done_settle(p, r);
    }
}

static inline int cpa_done_same_key(const cpa_call *c, const cpa_pair_key *k)
{
    return c->seq == k->seq && c->comm_index == k->comm_index && c->op == k->op &&
           c->peer == k->peer;
}

cpa_call *cpa_done_find_old(cpa_done_pairer *p, cpa_rank *r, const cpa_pair_key *k, int *oom);

/* The oldest call of r with the key that has no record of the pairer's kind yet, or NULL
 * (*oom set when the table could not be built). The caller marks it, then calls
 * cpa_done_marked. */
static inline cpa_call *cpa_done_find(cpa_done_pairer *p, cpa_rank *r, const cpa_pair_key *k,
                                      int *oom)
{
    if (p->waiting_old)
        return cpa_done_find_old(p, r, k, oom);
    for (size_t i = p->head; i < r->ncalls; i++) {
        cpa_call *c = &r->calls[i];
        if (!cpa_pair_has(p, c) && cpa_done_same_key(c, k))
            return c;
    }
    return NULL;
}

static inline void cpa_done_marked(cpa_done_pairer *p, const cpa_rank *r, const cpa_call *c)
{
    if (c == &r->calls[p->head])
        cpa_done_settle(p, r);
}

#endif
