/* analyzer/kernels_before.c: which kernel made a GPU-backlog straggler late (cupti traces).
 *
 * With COLLPROF_GPU_TIMING=cupti each call carries what its rank's GPU ran before it (KERNELS
 * records: the device's other kernels since its last NCCL kernel, by name, the three longest;
 * TRACE_FORMAT.md). For a straggler whose lateness is GPU backlog, at each collective where
 * it was the late one for that cause, each kernel before its call is set against the same
 * kernel before its peers' calls of the same operation: its time less the peers' median (a
 * peer with a KERNELS record that does not list it ran none of it there; a peer with no record
 * is no evidence). The kernel with the most excess over those collectives is named, with the
 * medians of its excess, its time and the peers', and over how many collectives. Nothing is
 * named without records, or when no kernel ran longer than on the peers.
 * Work: O(late collectives x ranks x 3 x 3); memory: the excesses of at most 16 names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

#define MAX_NAMES 16

static int key_cmp(const cp_rec_kernels *a, uint32_t comm_index, uint8_t op, int32_t peer,
                   uint64_t seq)
{
    if (a->comm_index != comm_index)
        return a->comm_index < comm_index ? -1 : 1;
    if (a->op != op)
        return a->op < op ? -1 : 1;
    if (a->peer != peer)
        return a->peer < peer ? -1 : 1;
    if (a->seq != seq)
        return a->seq < seq ? -1 : 1;
    return 0;
}

static int sort_cmp(const void *x, const void *y)
{
    const cp_rec_kernels *b = y;
    return key_cmp(x, b->comm_index, b->op, b->peer, b->seq);
}

void cpa_kernels_sort(cpa_rank *r)
{
    if (r->nkernels > 1)
        qsort(r->kernels, r->nkernels, sizeof *r->kernels, sort_cmp);
}

const cp_rec_kernels *cpa_kernels_of(const cpa_rank *r, const cpa_call *c)
{
    size_t lo;
    CP_LOWER_BOUND(lo, r->nkernels, i,
                   key_cmp(&r->kernels[i], c->comm_index, c->op, c->peer, c->seq) < 0);
    return lo < r->nkernels &&
                   key_cmp(&r->kernels[lo], c->comm_index, c->op, c->peer, c->seq) == 0
               ? &r->kernels[lo]
               : NULL;
}

const char *cpa_kname_of(const cpa_rank *r, uint32_t index)
{
    for (size_t i = r->nknames; i-- > 0;)
        if (r->knames[i].name_index == index)
            return r->knames[i].name;
    return NULL;
}

/* A kernel's time before a call: its entry's, 0 when the record does not list it. */
static uint64_t time_of(const cpa_rank *r, const cp_rec_kernels *k, const char *name)
{
    for (unsigned i = 0; i < k->nkernels; i++) {
        const char *n = cpa_kname_of(r, k->k[i].name_index);
        if (n && !strcmp(n, name))
            return k->k[i].total_ns;
    }
    return 0;
}

/* The median of v[0, n), which it sorts. */
static double median(double *v, size_t n)
{
    cpa_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct cand {
    const char *name;
    double *excess, *mine, *peers; /* per collective, us */
    size_t n, cap;
    double sum;
};

static int cand_add(struct cand *c, double excess, double mine, double peers)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        double *e = realloc(c->excess, cap * sizeof *e);
        if (e)
            c->excess = e;
        double *m = realloc(c->mine, cap * sizeof *m);
        if (m)
            c->mine = m;
        double *p = realloc(c->peers, cap * sizeof *p);
        if (p)
            c->peers = p;
        if (!e || !m || !p)
            return -1;
        c->cap = cap;
    }
    c->excess[c->n] = excess;
    c->mine[c->n] = mine;
    c->peers[c->n] = peers;
    c->n++;
    c->sum += excess;
    return 0;
}

static int explain(const cpa_model *m, const cpa_matched *mt, const cpa_stragglers *st,
                   cpa_straggler *row, double **scratch, size_t *cap)
{
    struct cand cands[MAX_NAMES];
    size_t ncands = 0;
    int rc = 0;
    const cpa_rank *me = &m->ranks[row->rank_idx];
    for (size_t i = 0; i < mt->nops && rc == 0; i++) {
        if (st->op_late_rank_idx[i] != (int32_t)row->rank_idx ||
            st->op_cause[i] != CPA_CAUSE_BACKLOG)
            continue;
        const cpa_op *o = &mt->ops[i];
        const cp_rec_kernels *mine = NULL;
        for (uint32_t p = 0; p < o->nparts && !mine; p++) {
            const cpa_part *pt = &mt->parts[o->first_part + p];
            if (pt->rank_idx == row->rank_idx)
                mine = cpa_kernels_of(me, &me->calls[pt->call_idx]);
        }
        if (!mine)
            continue;
        if (*cap < o->nparts) {
            double *v = realloc(*scratch, o->nparts * sizeof *v);
            if (!v)
                return -1;
            *scratch = v;
            *cap = o->nparts;
        }
        for (unsigned e = 0; e < mine->nkernels && rc == 0; e++) {
            const char *name = cpa_kname_of(me, mine->k[e].name_index);
            if (!name)
                continue;
            size_t np = 0;
            for (uint32_t p = 0; p < o->nparts; p++) {
                const cpa_part *pt = &mt->parts[o->first_part + p];
                if (pt->rank_idx == row->rank_idx)
                    continue;
                const cpa_rank *pr = &m->ranks[pt->rank_idx];
                const cp_rec_kernels *theirs = cpa_kernels_of(pr, &pr->calls[pt->call_idx]);
                if (theirs)
                    (*scratch)[np++] = (double)time_of(pr, theirs, name) / 1e3;
            }
            if (!np)
                continue;
            double peers = median(*scratch, np), own = (double)mine->k[e].total_ns / 1e3;
            size_t c = 0;
            while (c < ncands && strcmp(cands[c].name, name))
                c++;
            if (c == ncands) {
                if (ncands == MAX_NAMES)
                    continue;
                cands[ncands++] = (struct cand){.name = name};
            }
            rc = cand_add(&cands[c], own - peers, own, peers);
        }
    }
    struct cand *best = NULL;
    for (size_t c = 0; c < ncands; c++)
        if (cands[c].sum > 0 && (!best || cands[c].sum > best->sum))
            best = &cands[c];
    if (best && rc == 0) {
        snprintf(row->kernel, sizeof row->kernel, "%s", best->name);
        row->kernel_collectives = best->n;
        row->kernel_longer_us_p50 = median(best->excess, best->n);
        row->kernel_us_p50 = median(best->mine, best->n);
        row->kernel_peers_us_p50 = median(best->peers, best->n);
    }
    for (size_t c = 0; c < ncands; c++) {
        free(cands[c].excess);
        free(cands[c].mine);
        free(cands[c].peers);
    }
    return rc;
}

int cpa_kernels_before(const cpa_model *m, const cpa_matched *mt, cpa_stragglers *st)
{
    int any = 0;
    for (size_t r = 0; r < m->nranks; r++)
        any |= m->ranks[r].nkernels > 0;
    if (!any || !st->op_late_rank_idx)
        return 0;
    double *scratch = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < st->nrows && rc == 0; i++)
        rc = explain(m, mt, st, &st->rows[i], &scratch, &cap);
    free(scratch);
    return rc;
}
