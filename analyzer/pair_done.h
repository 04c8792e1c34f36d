/* analyzer/pair_done: which call a DONE record completes, while one rank file is read
 * (load.c). Internal to the analyzer library.
 *
 * A DONE goes to the oldest call with its key (comm_index, op, peer, seq) that has no DONE
 * yet: a key seen twice (a hostile or restarted writer) then pairs its DONEs in order. DONEs
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

/* One file's state; zero it (but for s) before the file. Call indexes must fit in u32. */
typedef struct cpa_done_pairer {
    cpa_done_scratch *s;
    size_t head;         /* the oldest call of the window; those before it done or old */
    size_t tabled;       /* calls before it were put in the table if still waiting */
    size_t waiting_old;  /* calls before head still waiting */
    uint32_t *slots;     /* the table: s->slots, a power-of-two prefix; NULL unused */
    size_t mask;
    size_t used;         /* slots taken, including calls done since */
    uint64_t bloom[CPA_DONE_BLOOM_BITS / 64]; /* key hashes in the table: most lookups end here */
} cpa_done_pairer;

/* Moves the window's start past calls done, and past calls that were not timed (no DONE
 * is due for them; one that comes anyway finds them in the table). */
static inline void cpa_done_settle(cpa_done_pairer *p, const cpa_rank *r)
{
    while (p->head < r->ncalls) {
        const cpa_call *c = &r->calls[p->head];
        if (!c->done) {
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

static inline int cpa_done_same_key(const cpa_call *c, const cp_rec_done *d)
{
    return c->seq == d->seq && c->comm_index == d->comm_index && c->op == d->op &&
           c->peer == d->peer;
}

cpa_call *cpa_done_find_old(cpa_done_pairer *p, cpa_rank *r, const cp_rec_done *d, int *oom);

/* The oldest call of r with the DONE's key that has none yet, or NULL (*oom set when the
 * table could not be built). The caller marks it done, then calls cpa_done_marked. */
static inline cpa_call *cpa_done_find(cpa_done_pairer *p, cpa_rank *r, const cp_rec_done *d,
                                      int *oom)
{
    if (p->waiting_old)
        return cpa_done_find_old(p, r, d, oom);
    for (size_t i = p->head; i < r->ncalls; i++) {
        cpa_call *c = &r->calls[i];
        if (!c->done && cpa_done_same_key(c, d))
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
