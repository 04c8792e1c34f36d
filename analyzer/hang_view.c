/* analyzer/hang_view.c: the hang finder's view of each communicator: its members (from COMM
 * records), the HANG records naming it and its matched collectives, and lookups in them.
 */
#include <stdlib.h>

#include "analyzer/hang_internal.h"

static int cmp_member(const void *x, const void *y)
{
    const member *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->comm_rank != q->comm_rank)
        return p->comm_rank < q->comm_rank ? -1 : 1;
    return p->rank_idx < q->rank_idx ? -1 : p->rank_idx > q->rank_idx;
}

static int cmp_seen(const void *x, const void *y)
{
    const seen *p = x, *q = y;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    if (p->seq != q->seq)
        return p->seq < q->seq ? -1 : 1;
    return p->rank_idx < q->rank_idx ? -1 : p->rank_idx > q->rank_idx;
}

static int cmp_by_idx(const void *x, const void *y)
{
    const struct by_idx *p = x, *q = y;
    if (p->rank_idx != q->rank_idx)
        return p->rank_idx < q->rank_idx ? -1 : 1;
    return p->k < q->k ? -1 : p->k > q->k;
}

member *cpa_hg_find_member(const comm_view *cv, int32_t comm_rank, uint32_t rank_idx)
{
    size_t lo;
    CP_LOWER_BOUND(lo, cv->nmem, i, cv->mem[i].comm_rank < comm_rank);
    for (; lo < cv->nmem && cv->mem[lo].comm_rank == comm_rank; lo++)
        if (rank_idx == UINT32_MAX || cv->mem[lo].rank_idx == rank_idx)
            return &cv->mem[lo];
    return NULL;
}

long cpa_hg_member_of_idx(const comm_view *cv, uint32_t rank_idx)
{
    size_t lo;
    CP_LOWER_BOUND(lo, cv->nmem, i, cv->by_idx[i].rank_idx < rank_idx);
    return lo < cv->nmem && cv->by_idx[lo].rank_idx == rank_idx ? (long)cv->by_idx[lo].k : -1;
}

comm_view *cpa_hg_view_of(finder *f, uint64_t comm_id)
{
    size_t lo;
    CP_LOWER_BOUND(lo, f->nviews, i, f->views[i].comm_id < comm_id);
    return lo < f->nviews && f->views[lo].comm_id == comm_id ? &f->views[lo] : NULL;
}

size_t cpa_hg_op_lower(const comm_view *cv, uint64_t seq)
{
    size_t lo;
    CP_LOWER_BOUND(lo, cv->nops, i, cv->ops[i].seq < seq);
    return lo;
}

size_t cpa_hg_seen_lower(const comm_view *cv, uint64_t seq)
{
    size_t lo;
    CP_LOWER_BOUND(lo, cv->nhs, i, cv->hs[i].seq < seq);
    return lo;
}

int cpa_hg_build(finder *f)
{
    const cpa_model *m = f->m;
    size_t nm = 0, nh = 0;
    for (size_t r = 0; r < m->nranks; r++) {
        nm += m->ranks[r].ncomms;
        nh += m->ranks[r].nhangs;
    }
    f->mem = malloc((nm ? nm : 1) * sizeof *f->mem);
    f->hs = malloc((nh ? nh : 1) * sizeof *f->hs);
    if (!f->mem || !f->hs)
        return -1;
    for (size_t r = 0; r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        for (size_t i = 0; i < k->ncomms; i++)
            f->mem[f->nmem++] = (member){.comm_id = k->comms[i].comm_id,
                                         .comm_rank = k->comms[i].rank,
                                         .nranks = k->comms[i].nranks,
                                         .rank_idx = (uint32_t)r};
        for (size_t i = 0; i < k->nhangs; i++) {
            const cpa_hang_seen *h = &k->hangs[i];
            if (h->comm_id)
                f->hs[f->nhs++] = (seen){.comm_id = h->comm_id, .seq = h->seq,
                                         .at_ns = h->at_ns, .age_ns = h->age_ns,
                                         .rank_idx = (uint32_t)r, .peer = h->peer,
                                         .op = h->op, .gpu_state = h->gpu_state};
        }
    }
    qsort(f->mem, f->nmem, sizeof *f->mem, cmp_member);
    qsort(f->hs, f->nhs, sizeof *f->hs, cmp_seen);
    /* One file naming a comm twice (index reuse) is one member; one process holding several
     * ranks of a comm (ncclCommInitAll) is several. */
    size_t keep = 0;
    for (size_t i = 0; i < f->nmem; i++)
        if (!keep || cmp_member(&f->mem[keep - 1], &f->mem[i]))
            f->mem[keep++] = f->mem[i];
    f->nmem = keep;

    f->ncoll = 0;
    while (f->ncoll < f->mt->nops && f->mt->ops[f->ncoll].sender < 0)
        f->ncoll++;
    size_t ncomms = 0;
    for (size_t i = 0; i < f->nmem; i++)
        ncomms += !i || f->mem[i].comm_id != f->mem[i - 1].comm_id;
    f->views = calloc(ncomms ? ncomms : 1, sizeof *f->views);
    f->cap_missing = f->nmem + 1;
    f->missing = malloc(f->cap_missing * sizeof *f->missing);
    f->waiting = malloc((f->nmem + 1) * sizeof *f->waiting);
    f->flag = malloc(f->nmem + 1);
    if (!f->views || !f->missing || !f->waiting || !f->flag)
        return -1;
    size_t oi = 0, hi = 0;
    for (size_t i = 0; i < f->nmem;) {
        size_t j = i;
        comm_view *cv = &f->views[f->nviews++];
        cv->comm_id = f->mem[i].comm_id;
        cv->mem = &f->mem[i];
        cv->identity = 1;
        for (; j < f->nmem && f->mem[j].comm_id == cv->comm_id; j++) {
            if (f->mem[j].nranks > cv->nranks)
                cv->nranks = f->mem[j].nranks;
            if (global_rank(f, f->mem[j].rank_idx) != f->mem[j].comm_rank)
                cv->identity = 0;
        }
        cv->nmem = j - i;
        cv->by_idx = malloc(cv->nmem * sizeof *cv->by_idx);
        if (!cv->by_idx)
            return -1;
        for (size_t k = 0; k < cv->nmem; k++)
            cv->by_idx[k] = (struct by_idx){cv->mem[k].rank_idx, (uint32_t)k};
        qsort(cv->by_idx, cv->nmem, sizeof *cv->by_idx, cmp_by_idx);
        /* Identity maps an absent comm rank to a global rank only on a world-sized comm. */
        int world = 0;
        for (size_t k = 0; k < cv->nmem; k++) {
            int32_t ws = m->ranks[cv->mem[k].rank_idx].world_size;
            world |= ws == cv->nranks;
            if (ws > 0 && ws != cv->nranks)
                cv->identity = 0;
        }
        cv->identity &= world;
        /* Comm ids ascend in both the members and the collectives, so one pass pairs them. */
        while (oi < f->ncoll && f->mt->ops[oi].comm_id < cv->comm_id)
            oi++;
        cv->ops = &f->mt->ops[oi];
        while (oi < f->ncoll && f->mt->ops[oi].comm_id == cv->comm_id)
            oi++;
        cv->nops = (size_t)(&f->mt->ops[oi] - cv->ops);
        while (hi < f->nhs && f->hs[hi].comm_id < cv->comm_id)
            hi++;
        cv->hs = &f->hs[hi];
        while (hi < f->nhs && f->hs[hi].comm_id == cv->comm_id)
            hi++;
        cv->nhs = (size_t)(&f->hs[hi] - cv->hs);
        i = j;
    }
    return 0;
}

void cpa_hg_finder_free(finder *f)
{
    for (size_t v = 0; v < f->nviews; v++)
        free(f->views[v].by_idx);
    free(f->views);
    free(f->mem);
    free(f->hs);
    free(f->missing);
    free(f->waiting);
    free(f->flag);
    free(f->kinds);
}
