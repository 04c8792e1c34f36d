/* analyzer/pair_done.c: a DONE or NCCL_OP record's call (pair_done.h says how and why). */
#include "analyzer/pair_done.h"

#include <stdlib.h>
#include <string.h>

#define TABLE_MIN_SLOTS 1024

static inline uint64_t key_hash(uint32_t comm_index, uint8_t op, int32_t peer, uint64_t seq)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)comm_index << 32 | (uint32_t)peer) * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)op * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

static inline uint64_t bloom_bit(uint64_t h) { return 1ull << ((h >> 40) & 63); }
static inline size_t bloom_word(uint64_t h) { return (h >> 46) % (CPA_DONE_BLOOM_BITS / 64); }

static void slot_put(cpa_done_pairer *p, const cpa_call *calls, uint32_t call_idx)
{
    const cpa_call *c = &calls[call_idx];
    uint64_t h = key_hash(c->comm_index, c->op, c->peer, c->seq);
    size_t i = h & p->mask;
    while (p->slots[i])
        i = (i + 1) & p->mask;
    p->slots[i] = call_idx + 1;
    p->bloom[bloom_word(h)] |= bloom_bit(h);
    p->used++;
}

/* Rebuilds the table with room for `want` more calls: the calls still waiting in it are
 * kept, those paired since are dropped. */
static int table_grow(cpa_done_pairer *p, const cpa_call *calls, size_t want)
{
    cpa_done_scratch *s = p->s;
    uint32_t *keep = NULL;
    size_t nkeep = 0;
    if (p->slots) {
        keep = malloc((p->used ? p->used : 1) * sizeof *keep);
        if (!keep)
            return -1;
        for (size_t i = 0; i <= p->mask; i++)
            if (p->slots[i] && !cpa_pair_has(p, &calls[p->slots[i] - 1]))
                keep[nkeep++] = p->slots[i] - 1;
    }
    size_t nslots = TABLE_MIN_SLOTS;
    while (nslots < 2 * (nkeep + want))
        nslots *= 2;
    if (nslots > s->cap_slots) {
        uint32_t *q = malloc(nslots * sizeof *q);
        if (!q) {
            free(keep);
            return -1;
        }
        free(s->slots);
        s->slots = q;
        s->cap_slots = nslots;
    }
    p->slots = s->slots;
    p->mask = nslots - 1;
    p->used = 0;
    memset(p->slots, 0, nslots * sizeof *p->slots);
    memset(p->bloom, 0, sizeof p->bloom);
    for (size_t i = 0; i < nkeep; i++)
        slot_put(p, calls, keep[i]);
    free(keep);
    return 0;
}

/* Puts the calls that left the window still waiting into the table. */
static int table_catch_up(cpa_done_pairer *p, const cpa_call *calls)
{
    size_t n = 0;
    for (size_t i = p->tabled; i < p->head; i++)
        n += !cpa_pair_has(p, &calls[i]);
    if ((!p->slots || (p->used + n) * 2 > p->mask + 1) && table_grow(p, calls, n))
        return -1;
    for (size_t i = p->tabled; i < p->head; i++)
        if (!cpa_pair_has(p, &calls[i]))
            slot_put(p, calls, (uint32_t)i);
    p->tabled = p->head;
    return 0;
}

/* The oldest waiting call in the table with this key (the lowest index along its probe
 * chain: rebuilding the table does not keep insertion order). */
static cpa_call *table_find(const cpa_done_pairer *p, cpa_call *calls, const cpa_pair_key *k,
                            uint64_t h)
{
    cpa_call *best = NULL;
    for (size_t i = h & p->mask; p->slots[i]; i = (i + 1) & p->mask) {
        cpa_call *c = &calls[p->slots[i] - 1];
        if (!cpa_pair_has(p, c) && cpa_done_same_key(c, k) && (!best || c < best))
            best = c;
    }
    return best;
}

/* cpa_done_find when some call before the window still waits: the table first. */
cpa_call *cpa_done_find_old(cpa_done_pairer *p, cpa_rank *r, const cpa_pair_key *k, int *oom)
{
    if (p->tabled < p->head && table_catch_up(p, r->calls)) {
        *oom = 1;
        return NULL;
    }
    uint64_t h = key_hash(k->comm_index, k->op, k->peer, k->seq);
    if (p->bloom[bloom_word(h)] & bloom_bit(h)) {
        cpa_call *c = table_find(p, r->calls, k, h);
        if (c) {
            p->waiting_old--;
            return c;
        }
    }
    for (size_t i = p->head; i < r->ncalls; i++) {
        cpa_call *c = &r->calls[i];
        if (!cpa_pair_has(p, c) && cpa_done_same_key(c, k))
            return c;
    }
    return NULL;
}
