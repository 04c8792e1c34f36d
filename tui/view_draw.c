/* view_draw: the view's state and actions, the top bar and footer, the summary and the help;
 * the screens drawn along time are in view_lanes.c, hangs and mismatches in view_problems.c.
 * See view_draw.h. */
#include "tui/view_draw.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tui/view_internal.h"

/* ---- the data the screens share ---- */

static const cpv_data *sort_ctx;

static int cmp_coll(const void *x, const void *y)
{
    size_t p = *(const size_t *)x, q = *(const size_t *)y;
    uint64_t a = sort_ctx->a->timeline.latest_ns[p], b = sort_ctx->a->timeline.latest_ns[q];
    if (a != b)
        return a < b ? -1 : 1;
    return p < q ? -1 : p > q;
}

/* The analyzer's reported stragglers first, in its order (worst first), then the others by
 * their lateness summed. */
static size_t reported_pos(const cpv_data *d, size_t rank_idx)
{
    const cpa_stragglers *s = &d->a->stragglers;
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].rank_idx == rank_idx)
            return i;
    return SIZE_MAX;
}

static int cmp_late(const void *x, const void *y)
{
    size_t p = *(const size_t *)x, q = *(const size_t *)y;
    size_t rp = reported_pos(sort_ctx, p), rq = reported_pos(sort_ctx, q);
    if (rp != rq)
        return rp < rq ? -1 : 1;
    double a = sort_ctx->rank_late_us[p], b = sort_ctx->rank_late_us[q];
    if (a != b)
        return a > b ? -1 : 1;
    return p < q ? -1 : p > q;
}

static int block_index(cpv_data *d)
{
    const cpa_analysis *a = d->a;
    size_t nr = a->model->nranks;
    d->blk_lo = calloc(nr ? nr : 1, sizeof *d->blk_lo);
    d->blk_hi = calloc(nr ? nr : 1, sizeof *d->blk_hi);
    if (!d->blk_lo || !d->blk_hi)
        return -1;
    for (size_t ri = 0; ri < nr; ri++) {
        const cpa_rank *r = &a->model->ranks[ri];
        size_t nb = (r->ncalls + CPV_BLOCK_CALLS - 1) / CPV_BLOCK_CALLS;
        d->blk_lo[ri] = malloc((nb ? nb : 1) * sizeof **d->blk_lo);
        d->blk_hi[ri] = malloc((nb ? nb : 1) * sizeof **d->blk_hi);
        if (!d->blk_lo[ri] || !d->blk_hi[ri])
            return -1;
        for (size_t b = 0; b < nb; b++) {
            double lo = INFINITY, hi = -INFINITY;
            for (size_t ci = b * CPV_BLOCK_CALLS; ci < r->ncalls && ci < (b + 1) * CPV_BLOCK_CALLS;
                 ci++) {
                uint64_t st, en;
                int open;
                cpa_call_span_job_ns(a, ri, &r->calls[ci], &st, &en, &open);
                double su = cpa_job_ns_us(a, st), eu = cpa_job_ns_us(a, en);
                lo = su < lo ? su : lo;
                hi = eu > hi ? eu : hi;
            }
            d->blk_lo[ri][b] = lo;
            d->blk_hi[ri][b] = hi;
        }
    }
    return 0;
}

/* The timeline's extent: the calls that took part in an operation, with a margin. The job's
 * first-to-last record would put a long start-up (25 s, the collectives in its last 5) in
 * the fitted view, and every zoom around its middle on a blank stretch. */
static void timeline_extent(cpv_data *d)
{
    const cpa_analysis *a = d->a;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t ri = 0; ri < a->model->nranks; ri++) {
        const cpa_rank *r = &a->model->ranks[ri];
        for (size_t ci = 0; ci < r->ncalls; ci++) {
            if (cpa_call_op(a, ri, ci) == CPA_NO_OP)
                continue;
            uint64_t st, en;
            int open;
            cpa_call_span_job_ns(a, ri, &r->calls[ci], &st, &en, &open);
            double su = cpa_job_ns_us(a, st), eu = cpa_job_ns_us(a, en);
            lo = su < lo ? su : lo;
            hi = eu > hi ? eu : hi;
        }
    }
    if (!(lo <= hi)) { /* no operation: the job's whole span */
        lo = 0;
        hi = a->duration_s * 1e6;
    }
    double margin = (hi - lo) / 50;
    d->t0_us = lo - margin;
    d->t1_us = hi + margin;
    if (d->t1_us <= d->t0_us)
        d->t1_us = d->t0_us + 1;
}

int cpv_data_init(cpv_data *d, const cpa_analysis *a, const char *title)
{
    memset(d, 0, sizeof *d);
    d->a = a;
    d->title = title ? title : "";
    size_t nr = a->model->nranks, nops = a->matched.nops;
    d->coll_order = malloc((nops ? nops : 1) * sizeof *d->coll_order);
    d->coll_pos = malloc((nops ? nops : 1) * sizeof *d->coll_pos);
    d->p2p_order = malloc((nops ? nops : 1) * sizeof *d->p2p_order);
    d->rank_order = malloc((nr ? nr : 1) * sizeof *d->rank_order);
    d->rank_late_n = calloc(nr ? nr : 1, sizeof *d->rank_late_n);
    d->rank_late_us = calloc(nr ? nr : 1, sizeof *d->rank_late_us);
    if (!d->coll_order || !d->coll_pos || !d->p2p_order || !d->rank_order || !d->rank_late_n ||
        !d->rank_late_us) {
        cpv_data_free(d);
        return -1;
    }
    for (size_t i = 0; i < nops; i++) {
        if (a->matched.ops[i].sender < 0 && a->matched.ops[i].nparts)
            d->coll_order[d->ncoll++] = i;
        else if (a->matched.ops[i].nparts)
            d->p2p_order[d->np2p++] = i;
        int32_t late = cpa_op_late_rank_idx(a, i);
        if (late >= 0 && (size_t)late < nr) {
            double us = cpa_op_late_us(a, i);
            d->rank_late_n[late]++;
            d->rank_late_us[late] += us;
            if (us > d->max_late_us)
                d->max_late_us = us;
        }
    }
    for (size_t i = 0; i < nr; i++)
        d->rank_order[i] = i;
    sort_ctx = d;
    qsort(d->coll_order, d->ncoll, sizeof *d->coll_order, cmp_coll);
    qsort(d->p2p_order, d->np2p, sizeof *d->p2p_order, cmp_coll);
    qsort(d->rank_order, nr, sizeof *d->rank_order, cmp_late);
    sort_ctx = NULL;
    for (size_t i = 0; i < nops; i++)
        d->coll_pos[i] = SIZE_MAX;
    for (size_t k = 0; k < d->ncoll; k++)
        d->coll_pos[d->coll_order[k]] = k;
    if (block_index(d) != 0) {
        cpv_data_free(d);
        return -1;
    }
    timeline_extent(d);
    return 0;
}

void cpv_data_free(cpv_data *d)
{
    for (size_t i = 0; d->a && i < d->a->model->nranks; i++) {
        if (d->blk_lo)
            free(d->blk_lo[i]);
        if (d->blk_hi)
            free(d->blk_hi[i]);
    }
    free(d->blk_lo);
    free(d->blk_hi);
    free(d->coll_order);
    free(d->coll_pos);
    free(d->p2p_order);
    free(d->rank_order);
    free(d->rank_late_n);
    free(d->rank_late_us);
    memset(d, 0, sizeof *d);
}

/* ---- state and actions ---- */

void cpv_state_init(cpv_state *s)
{
    memset(s, 0, sizeof *s);
    s->detail_op = SIZE_MAX;
    s->prev_screen = CPV_SUMMARY;
}

void cpv_goto(cpv_state *s, int screen)
{
    if (screen < 0 || screen >= CPV_NSCREENS)
        return;
    if (screen == CPV_DETAIL && s->screen != CPV_DETAIL)
        s->prev_screen = s->screen;
    s->screen = screen;
    s->help = 0;
}

static size_t summary_op(const cpv_data *d, const cpv_state *s);

void cpv_act(const cpv_data *d, cpv_state *s, int action, int rows_per_page)
{
    size_t page = rows_per_page > 1 ? (size_t)rows_per_page - 1 : 1;
    size_t *sel = &s->sel[s->screen];
    if (s->help) {
        if (action == CPV_ACT_BACK || action == CPV_ACT_HELP || action == CPV_ACT_ENTER)
            s->help = 0;
        return;
    }
    if (cpv_lanes_act(d, s, action))
        return;
    switch (action) {
    case CPV_ACT_UP:
        if (*sel)
            (*sel)--;
        break;
    case CPV_ACT_DOWN:
        (*sel)++; /* clamped on the next draw, which knows how many rows there are */
        break;
    case CPV_ACT_PGUP:
        *sel = *sel > page ? *sel - page : 0;
        break;
    case CPV_ACT_PGDN:
        *sel += page;
        break;
    case CPV_ACT_HOME:
        *sel = 0;
        break;
    case CPV_ACT_END:
        *sel = SIZE_MAX / 2;
        break;
    case CPV_ACT_NEXT:
        cpv_goto(s, (s->screen + 1) % CPV_NSCREENS);
        break;
    case CPV_ACT_HELP:
        s->help = 1;
        break;
    case CPV_ACT_BACK:
        if (s->screen == CPV_DETAIL)
            cpv_goto(s, s->prev_screen);
        else if (s->filter[0])
            s->filter[0] = '\0';
        break;
    case CPV_ACT_ENTER: {
        size_t op = SIZE_MAX;
        if (s->screen == CPV_SUMMARY)
            op = summary_op(d, s);
        else if (s->screen == CPV_PROBLEMS)
            op = cpv_problems_op(d, s, *sel);
        else
            op = cpv_enter_op(d, s);
        if (op != SIZE_MAX) {
            s->detail_op = op;
            cpv_goto(s, CPV_DETAIL);
        }
        break;
    }
    default:
        break;
    }
}

/* ---- the top bar and the footer ---- */

static const char *const screen_names[CPV_NSCREENS] = { "summary", "stragglers", "problems",
                                                        "timeline", "detail" };

static void top_bar(const cpv_data *d, const cpv_state *s, cpv_grid *g)
{
    cpt_grid_row_role(g, 0, CPV_TITLE);
    char title[1024];
    cp_text_escape(title, sizeof title, d->title, strlen(d->title));
    if (s->plain) {
        cpt_grid_putf_utf8(g, 0, 0, CPV_TITLE, "collprof view: %s", title);
        return;
    }
    int x = cpt_grid_put_utf8(g, 0, 0, CPV_TITLE, "collprof view ");
    for (int i = 0; i < CPV_NSCREENS; i++) {
        x = cpt_grid_putf_utf8(g, x, 0, i == s->screen ? CPV_SELECTED : CPV_TITLE, " %d %s ", i + 1,
                               screen_names[i]);
    }
    x = cpt_grid_put_utf8(g, x, 0, CPV_TITLE, "  ");
    /* The directory gets what is left; cut from the left, where its least telling part is. */
    int room = g->w - x;
    size_t len = strlen(title);
    if (room > 4 && (int)len > room)
        cpt_grid_putf_utf8(g, x, 0, CPV_TITLE, "...%s", title + len - (size_t)(room - 3));
    else if (room > 4)
        cpt_grid_put_utf8(g, x, 0, CPV_TITLE, title);
}

static void footer(const cpv_state *s, cpv_grid *g)
{
    int y = g->h - 1;
    cpt_grid_row_role(g, y, CPV_DIM);
    static const char *const hints[CPV_NSCREENS] = {
        "Enter detail", "Enter worst collective", "Enter detail",
        "+/- zoom  <-/-> scroll  0 fit  Enter detail", "<-/-> previous/next  Esc back",
    };
    int x = 0;
    /* The filter first: the hints are what a narrow terminal may lose. */
    if (s->filter[0])
        x = cpt_grid_putf_utf8(g, 0, y, CPV_WARN, "filter: %s (Esc clears)", s->filter) + 2;
    cpt_grid_putf_utf8(g, x, y, CPV_DIM, "q quit  h help  Tab/1-5 screens  / filter  %s",
                       hints[s->screen]);
}

/* ---- 1 summary ---- */

static int cmp_stat_time(const void *x, const void *y)
{
    const cpa_stat *p = *(const cpa_stat *const *)x, *q = *(const cpa_stat *const *)y;
    if (p->time_us_total != q->time_us_total)
        return p->time_us_total > q->time_us_total ? -1 : 1;
    return p < q ? -1 : p > q;
}

/* The op table's rows, by total time, filtered: n rows into a new array (NULL: none or out
 * of memory). */
static const cpa_stat **stat_rows(const cpv_data *d, const cpv_state *s, size_t *n)
{
    const cpa_stats *st = &d->a->stats;
    *n = 0;
    if (!st->nrows)
        return NULL;
    const cpa_stat **rows = malloc(st->nrows * sizeof *rows);
    if (!rows)
        return NULL;
    for (size_t i = 0; i < st->nrows; i++)
        if (cpv_match(s, cpr_op_label(st->rows[i].op, 1)))
            rows[(*n)++] = &st->rows[i];
    qsort(rows, *n, sizeof *rows, cmp_stat_time);
    return rows;
}

static size_t summary_op(const cpv_data *d, const cpv_state *s)
{
    size_t n;
    const cpa_stat **rows = stat_rows(d, s, &n);
    size_t op = SIZE_MAX;
    if (rows && s->sel[CPV_SUMMARY] < n) {
        /* the row's first operation: same op, communicator size and S */
        const cpa_stat *r = rows[s->sel[CPV_SUMMARY]];
        const cpa_matched *mt = &d->a->matched;
        for (size_t k = 0; k < d->ncoll && op == SIZE_MAX; k++) {
            const cpa_op *o = &mt->ops[d->coll_order[k]];
            if (o->op != r->op || !o->nparts)
                continue;
            const cpa_part *p = &mt->parts[o->first_part];
            const cpa_call *c = &d->a->model->ranks[p->rank_idx].calls[p->call_idx];
            int n = o->nranks > 0 ? o->nranks : (int)o->nparts;
            if (n == r->nranks && cpa_op_bytes(o->op, c->count, c->dtype, n) == r->size)
                op = d->coll_order[k];
        }
    }
    free(rows);
    return op;
}

static int summary_job(const cpv_data *d, cpv_grid *g, int y)
{
    const cpa_analysis *a = d->a;
    const cpa_model *m = a->model;
    char hosts[128] = "";
    if (a->nhosts && a->nhosts <= 3) {
        size_t used = 0;
        for (size_t i = 0; i < a->nhosts && used < sizeof hosts; i++) {
            char host[25];
            cp_text_escape(host, sizeof host, a->hosts[i][0] ? a->hosts[i] : "?",
                           a->hosts[i][0] ? strlen(a->hosts[i]) : 1);
            used += (size_t)snprintf(hosts + used, sizeof hosts - used, "%s%s", i ? ", " : " (",
                                     host);
        }
        if (used < sizeof hosts - 1)
            strcat(hosts, ")");
    }
    cpt_grid_putf_utf8(g, 0, y++, CPV_NORMAL, "job      %zu rank%s on %zu host%s%s, %.3f s",
                       m->nranks, m->nranks == 1 ? "" : "s", a->nhosts, a->nhosts == 1 ? "" : "s",
                       hosts, a->duration_s);
    uint64_t calls = 0;
    for (size_t i = 0; i < m->nranks; i++)
        calls += m->ranks[i].ncalls;
    char lost[48] = "none lost";
    if (m->lost_records)
        snprintf(lost, sizeof lost, "%" PRIu64 " LOST", m->lost_records);
    cpt_grid_putf_utf8(g, 0, y++, m->lost_records ? CPV_WARN : CPV_NORMAL, "         %" PRIu64
                       " records (%s), %" PRIu64 " calls in %zu operations", m->records, lost,
                       calls, a->matched.nops);
    char holes[512];
    cpr_holes_text(holes, sizeof holes, a, NULL, NULL);
    if (holes[0])
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN, "         holes: %s", holes);
    char refused[512];
    cpr_refused_text(refused, sizeof refused, a);
    if (refused[0])
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN, "         refused: %s", refused);
    if (a->ranks && m->nranks) {
        double sum = 0;
        size_t hi = 0;
        for (size_t i = 0; i < m->nranks; i++) {
            sum += a->ranks[i].share;
            if (a->ranks[i].share > a->ranks[hi].share)
                hi = i;
        }
        cpt_grid_putf_utf8(g, 0, y++, CPV_NORMAL,
                           "         time in NCCL %.1f%% mean, %.1f%% rank %d (most)",
                           100 * sum / (double)m->nranks, 100 * a->ranks[hi].share,
                           (int)m->ranks[hi].rank);
    }
    const cpa_clock *c = &a->clock;
    if (c->ndomains <= 1)
        cpt_grid_put_utf8(g, 0, y++, CPV_NORMAL, "clock    one host: one clock, nothing to align");
    else if (c->aligned)
        cpt_grid_putf_utf8(g, 0, y++, CPV_NORMAL, "clock    %zu hosts, aligned to within %.1f us",
                           c->ndomains, c->error_us);
    else
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN,
                           "clock    %zu hosts, NOT aligned (wall-clock anchors only)",
                           c->ndomains);

    const cpa_stragglers *st = &a->stragglers;
    char strag[96];
    if (st->nrows && st->kind == CPA_STRAGGLER_PERSISTENT)
        snprintf(strag, sizeof strag, "straggler rank %d (persistent)", (int)st->rows[0].rank);
    else if (st->nrows)
        snprintf(strag, sizeof strag, "%zu stragglers (rotating)", st->nrows);
    else
        snprintf(strag, sizeof strag, "no straggler");
    uint64_t mism = a->mismatches.total > a->mismatches.nrows ? a->mismatches.total
                                                               : a->mismatches.nrows;
    int bad = a->hangs.nrows || mism;
    cpt_grid_putf_utf8(g, 0, y++, bad ? CPV_BAD : st->nrows ? CPV_WARN : CPV_NORMAL,
                       "findings %s, %zu hang%s, %" PRIu64 " mismatch%s", strag, a->hangs.nrows,
                       a->hangs.nrows == 1 ? "" : "s", mism, mism == 1 ? "" : "es");
    return y;
}

static int draw_summary(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1)
{
    int y = summary_job(d, g, y0) + 1;
    size_t n;
    const cpa_stat **rows = stat_rows(d, s, &n);
    if (!d->a->stats.nrows) {
        cpt_grid_put_utf8(g, 0, y, CPV_TITLE, "operations   none with a known duration");
        return 1;
    }
    int holes = cpa_model_has_holes(d->a->model);
    cpt_grid_putf_utf8(g, 0, y++, holes ? CPV_WARN : CPV_TITLE, "operations (by total time)%s%s",
                       n ? "" : ": none match the filter",
                       holes ? "; the trace has holes: rows may leave operations out" : "");
    char text[256];
    cpr_fmt_stat_header(text, sizeof text);
    cpt_grid_put_utf8(g, 0, y++, CPV_HEADER, text);
    int page = y1 - y + 1;
    size_t first = cpv_window(s, CPV_SUMMARY, n, page);
    for (size_t i = first; i < n && y <= y1; i++, y++) {
        int sel = !s->plain && i == s->sel[CPV_SUMMARY];
        if (sel)
            cpt_grid_row_role(g, y, CPV_SELECTED);
        cpr_fmt_stat_row(text, sizeof text, &d->a->stats, rows[i]);
        cpt_grid_put_utf8(g, 0, y, sel ? CPV_SELECTED : CPV_NORMAL, text);
    }
    if (n > first + (size_t)(page > 0 ? page : 0) && y1 >= y0)
        cpt_grid_putf_utf8(g, g->w - 12, y1, CPV_DIM, "%zu more", n - first - (size_t)page);
    free(rows);
    return page;
}

/* ---- help ---- */

static void draw_help(cpv_grid *g)
{
    static const char *const lines[] = {
        "collprof view: keys",
        "",
        "1-5, Tab     summary, stragglers, problems, timeline, detail",
        "Up/Down      move the selection; PgUp/PgDn a page; Home/End",
        "Enter        the selected row's collective in detail: every",
        "             rank's arrival, start, end and wait",
        "Left/Right   timeline: scroll in time; detail: previous/next of its",
        "             kind (collective, or send/recv pair)",
        "+ / -  0     timeline: zoom in / out, fit the whole job",
        "/            filter rows (op, rank, host; screen 3: any word of a",
        "             hang or mismatch, a call site too); Esc clears it",
        "Esc          back from the detail, or close this help",
        "h            this help          q  quit",
        "",
        "timeline: a letter per op (A AllReduce, G AllGather,",
        "R ReduceScatter, B Broadcast, r Reduce, X AlltoAll, g Gather,",
        "S Scatter, s Send, v Recv), '-' waiting for the late rank,",
        "the late rank's op marked; '>' in flight when the trace ended",
    };
    int n = (int)(sizeof lines / sizeof lines[0]);
    int bw = 66 < g->w ? 66 : g->w, bh = n + 2 < g->h ? n + 2 : g->h;
    int x0 = (g->w - bw) / 2, y0 = (g->h - bh) / 2;
    for (int y = y0; y < y0 + bh; y++) {
        for (int x = x0; x < x0 + bw; x++)
            cpt_grid_cell(g, x, y, ' ', CPV_TITLE);
    }
    for (int i = 0; i < n && i + 1 < bh; i++)
        cpt_grid_put_utf8(g, x0 + 2, y0 + 1 + i, CPV_TITLE, lines[i]);
}

/* ---- the whole screen ---- */

int cpv_draw(const cpv_data *d, cpv_state *s, cpv_grid *g)
{
    cpt_grid_clear(g);
    top_bar(d, s, g);
    int y0 = 1, y1 = s->plain ? g->h - 1 : g->h - 2;
    int page = 1;
    if (!s->plain)
        footer(s, g);
    if (y1 >= y0) {
        switch (s->screen) {
        case CPV_SUMMARY: page = draw_summary(d, s, g, y0, y1); break;
        case CPV_STRAGGLERS: page = cpv_draw_stragglers(d, s, g, y0, y1); break;
        case CPV_PROBLEMS: page = cpv_draw_problems(d, s, g, y0, y1); break;
        case CPV_TIMELINE: page = cpv_draw_timeline(d, s, g, y0, y1); break;
        default: page = cpv_draw_detail(d, s, g, y0, y1); break;
        }
    }
    if (s->help)
        draw_help(g);
    return page > 0 ? page : 1;
}

char *cpv_summary_text(const cpv_data *d, int w)
{
    cpv_state s;
    cpv_state_init(&s);
    s.plain = 1;
    cpv_grid g;
    int h = 12 + (int)d->a->stats.nrows;
    if (cpv_grid_init(&g, w, h) != 0)
        return NULL;
    cpv_draw(d, &s, &g);
    char *out = malloc((size_t)h * (size_t)(g.w + 1) + 1), *p = out;
    if (out) {
        int last = -1;
        for (int y = 0; y < g.h; y++) {
            cpv_grid_row(&g, y, p);
            if (*p)
                last = y;
            p += strlen(p);
            *p++ = '\n';
        }
        /* Rows past the content are blank: cut them. */
        p = out;
        for (int y = 0; y <= last; y++)
            p = strchr(p, '\n') + 1;
        *p = '\0';
    }
    cpv_grid_free(&g);
    return out;
}
