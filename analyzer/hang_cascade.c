/* analyzer/hang_cascade.c: hangs that follow from others (explain says how one is told),
 * and the order of the rows: the causes first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/hang_internal.h"

enum held { HELD_WAITING = 0, HELD_GPU = 1, HELD_DEAD = 2 };

typedef struct where {
    int32_t rank;
    uint32_t row;
    uint8_t how;    /* enum held: how that row's operation holds the rank */
} where;

static int cmp_where(const void *x, const void *y)
{
    const where *p = x, *q = y;
    if (p->rank != q->rank)
        return p->rank < q->rank ? -1 : 1;
    if (p->how != q->how)
        return p->how < q->how ? -1 : 1;
    return p->row < q->row ? -1 : p->row > q->row;
}

static int has_trace(const cpa_model *m, int32_t rank)
{
    size_t lo;
    CP_LOWER_BOUND(lo, m->nranks, i, (uint32_t)m->ranks[i].rank < (uint32_t)rank);
    return lo < m->nranks && m->ranks[lo].rank == rank;
}

typedef struct sorted_row {
    cpa_hang row;
    int follows;    /* every missing rank is held in another comm's hang */
} sorted_row;

/* A rank missing from one operation because another hang holds it (it waits there, its
 * stream is stuck there, or it was killed there) makes the first a consequence: `last` says
 * where it is held, and the rows where nothing explains a missing rank (the causes) come
 * first. Two comms entered in opposite orders explain each other: a deadlock, both kept. */
static int explain(finder *f, sorted_row *sr)
{
    cpa_hangs *h = f->out;
    size_t n = 0;
    for (size_t i = 0; i < h->nrows; i++)
        n += h->rows[i].nwaiting + h->rows[i].nmissing;
    where *w = malloc((n ? n : 1) * sizeof *w);
    if (!w)
        return -1;
    n = 0;
    for (size_t i = 0; i < h->nrows; i++) {
        for (size_t k = 0; k < h->rows[i].nwaiting; k++)
            w[n++] = (where){h->rows[i].waiting_ranks[k], (uint32_t)i, 0};
        uint8_t how = f->kinds[i] == ROW_GPU ? HELD_GPU : HELD_DEAD;
        for (size_t k = 0; (f->kinds[i] == ROW_GPU || f->kinds[i] == ROW_DEATH) &&
                           k < h->rows[i].nmissing; k++)
            w[n++] = (where){h->rows[i].missing_ranks[k], (uint32_t)i, how};
    }
    qsort(w, n, sizeof *w, cmp_where);
    for (size_t i = 0; i < h->nrows; i++) {
        cpa_hang *r = &h->rows[i];
        sr[i] = (sorted_row){.row = *r};
        if (f->kinds[i] != ROW_NO_CALL)
            continue;
        int all = 1, any = 0;
        for (size_t k = 0; k < r->nmissing; k++) {
            int32_t g = r->missing_ranks[k];
            if (!has_trace(f->m, g)) {
                all = 0;
                continue;
            }
            where key = {g, 0, 0};
            size_t lo;
            CP_LOWER_BOUND(lo, n, i, cmp_where(&w[i], &key) < 0);
            for (; lo < n && w[lo].rank == g && w[lo].row == i; lo++)
                ;
            if (lo >= n || w[lo].rank != g) {
                all = 0;
                continue;
            }
            if (!any) {
                const cpa_hang *o = &h->rows[w[lo].row];
                size_t at = strlen(sr[i].row.last);
                static const char *const how[] = {" waits in", "'s GPU never started",
                                                  " was killed in"};
                snprintf(sr[i].row.last + at, sizeof sr[i].row.last - at,
                         "; rank %d%s %s seq %" PRIu64 " on comm %016" PRIx64, (int)g,
                         how[w[lo].how], cp_op_name(o->op), o->seq, o->comm_id);
            }
            any = 1;
        }
        sr[i].follows = any && all;
    }
    free(w);
    return 0;
}

static int cmp_row(const void *x, const void *y)
{
    const sorted_row *a = x, *b = y;
    if (a->follows != b->follows)
        return a->follows - b->follows;
    const cpa_hang *p = &a->row, *q = &b->row;
    if (p->nwaiting != q->nwaiting)
        return p->nwaiting > q->nwaiting ? -1 : 1;
    if (p->comm_id != q->comm_id)
        return p->comm_id < q->comm_id ? -1 : 1;
    return p->seq < q->seq ? -1 : p->seq > q->seq;
}

int cpa_hg_order(finder *f)
{
    cpa_hangs *out = f->out;
    if (!out->nrows)
        return 0;
    sorted_row *sr = malloc(out->nrows * sizeof *sr);
    int rc = !sr || explain(f, sr);
    if (rc == 0) {
        qsort(sr, out->nrows, sizeof *sr, cmp_row);
        for (size_t i = 0; i < out->nrows; i++)
            out->rows[i] = sr[i].row;
    }
    free(sr);
    return rc ? -1 : 0;
}
