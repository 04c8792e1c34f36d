/* view_problems: the view's screen 3, what hung and what disagreed: each hang with its
 * missing and waiting ranks, each mismatch with every rank's value of the field and its call
 * site, culprits marked (view_draw.h). Enter on a line opens its collective. The filter keeps
 * a hang or a mismatch whole when any of its lines holds it (an op, a rank, a field, a
 * file of a call site). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tui/view_internal.h"

static size_t find_op(const cpa_analysis *a, uint64_t comm, uint64_t seq)
{
    for (size_t i = 0; i < a->matched.nops; i++) {
        const cpa_op *o = &a->matched.ops[i];
        if (o->sender < 0 && o->comm_id == comm && o->seq == seq)
            return i;
    }
    return SIZE_MAX;
}

/* ---- 3 hangs and mismatches ---- */

typedef struct pline {
    char text[200];
    int attr;
    size_t op;    /* the collective Enter opens, SIZE_MAX none */
    long entry;   /* the hang or mismatch it belongs to, -1 a section's title */
} pline;

static int has_rank(const int32_t *v, size_t n, int32_t r)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == r)
            return 1;
    return 0;
}

/* Every line of the screen (out: a new array, *n lines), filtered by s; -1 out of memory.
 * Built whole: hangs and mismatches are few, and each mismatch lists every rank's value. */
static int problem_lines(const cpv_data *d, const cpv_state *s, pline **out, size_t *n)
{
    const cpa_analysis *a = d->a;
    size_t cap = 4 + a->hangs.nrows * 4;
    for (size_t i = 0; i < a->mismatches.nrows; i++)
        cap += 1 + a->mismatches.rows[i].nvalues;
    pline *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    size_t k = 0;
    long entry = -1;
#define ADD(at, o, ...)                                                                  \
    do {                                                                                 \
        snprintf(v[k].text, sizeof v[k].text, __VA_ARGS__);                              \
        v[k].attr = (at);                                                                \
        v[k].entry = entry;                                                              \
        v[k++].op = (o);                                                                 \
    } while (0)
    const cpa_hangs *h = &a->hangs;
    if (!h->nrows)
        ADD(CPV_TITLE, SIZE_MAX, "hangs        none");
    else
        ADD(CPV_BAD, SIZE_MAX, "hangs (%zu)", h->nrows);
    for (size_t i = 0; i < h->nrows; i++) {
        const cpa_hang *r = &h->rows[i];
        entry = (long)i;
        size_t op = find_op(a, r->comm_id, r->seq);
        char comm[17], missing[48], waiting[48], age[40] = "";
        cpr_fmt_comm(comm, r->comm_id);
        cpr_fmt_ranks(missing, sizeof missing, r->missing_ranks, r->nmissing);
        cpr_fmt_ranks(waiting, sizeof waiting, r->waiting_ranks, r->nwaiting);
        if (r->age_s > 0)
            snprintf(age, sizeof age, "; in flight %.1f s", r->age_s);
        ADD(CPV_BAD, op, "%s  %s seq %" PRIu64 ", comm %s", cpa_hang_verdict_name(r->verdict),
            cpr_op_label(r->op, 1), r->seq, comm);
        if (r->nmissing)
            ADD(CPV_NORMAL, op, "  missing %s; waiting %s%s", missing,
                r->nwaiting ? waiting : "none", age);
        else
            ADD(CPV_NORMAL, op, "  every rank entered (%s), none finished%s", waiting, age);
        if (r->last[0])
            ADD(CPV_NORMAL, op, "  %.190s", r->last);
    }
    entry = -1;
    const cpa_mismatches *x = &a->mismatches;
    uint64_t total = x->total > x->nrows ? x->total : x->nrows;
    if (!total)
        ADD(CPV_TITLE, SIZE_MAX, "mismatches   none");
    else
        ADD(CPV_BAD, SIZE_MAX, "mismatches (%" PRIu64 ")%s", total,
            total > x->nrows ? ", the first of each kept" : "");
    for (size_t i = 0; i < x->nrows; i++) {
        const cpa_mismatch *r = &x->rows[i];
        entry = (long)(h->nrows + i);
        size_t op = find_op(a, r->comm_id, r->seq);
        char head[160];
        cpr_mismatch_text(head, sizeof head, r);
        ADD(CPV_BAD, op, "%s", head);
        for (size_t j = 0; j < r->nvalues; j++) {
            const cpa_mismatch_value *mv = &r->values[j];
            char val[32], site[128];
            cpr_mismatch_value(val, sizeof val, r->field, mv->value);
            cpr_fmt_site(site, sizeof site, mv->site);
            int culprit = has_rank(r->culprit_ranks, r->nculprits, mv->rank);
            ADD(culprit ? CPV_BAD : CPV_NORMAL, op, "  rank %-5d %-12s %s%s%s", (int)mv->rank,
                val, culprit ? "<- culprit " : "", site[0] ? "at " : "", site);
        }
    }
#undef ADD
    if (s->filter[0]) {
        /* keep an entry whole when any of its lines holds the filter; titles always */
        size_t kept = 0, entries = 0;
        for (size_t i = 0; i < k;) {
            size_t j = i + 1;
            int hit = v[i].entry < 0 || cpv_match(s, v[i].text);
            for (; v[i].entry >= 0 && j < k && v[j].entry == v[i].entry; j++)
                hit |= cpv_match(s, v[j].text);
            entries += hit && v[i].entry >= 0;
            for (size_t m = i; m < j && hit; m++)
                v[kept++] = v[m];
            i = j;
        }
        if (!entries && h->nrows + x->nrows) /* kept is the two titles: room for one more */
            v[kept++] = (pline){.text = "  none match the filter", .attr = CPV_DIM,
                                .op = SIZE_MAX, .entry = -1};
        k = kept;
    }
    *out = v;
    *n = k;
    return 0;
}

size_t cpv_problems_op(const cpv_data *d, const cpv_state *s, size_t line)
{
    pline *v;
    size_t n, op = SIZE_MAX;
    if (problem_lines(d, s, &v, &n) != 0)
        return SIZE_MAX;
    if (line < n)
        op = v[line].op;
    free(v);
    return op;
}

int cpv_draw_problems(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1)
{
    pline *v;
    size_t n;
    if (problem_lines(d, s, &v, &n) != 0) {
        cpt_grid_put_utf8(g, 0, y0, CPV_BAD, "out of memory");
        return 1;
    }
    int page = y1 - y0 + 1;
    size_t first = cpv_window(s, CPV_PROBLEMS, n, page);
    int y = y0;
    for (size_t i = first; i < n && y <= y1; i++, y++) {
        int sel = !s->plain && i == s->sel[CPV_PROBLEMS];
        if (sel)
            cpt_grid_row_role(g, y, CPV_SELECTED);
        char shown[4 * sizeof v[i].text];
        cp_text_escape(shown, sizeof shown, v[i].text, strlen(v[i].text));
        cpt_grid_put_utf8(g, 0, y, sel ? CPV_SELECTED : v[i].attr, shown);
    }
    free(v);
    return page;
}

