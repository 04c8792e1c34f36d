/* The table screen of `collprof top` (top_draw.h): rows come from one table of columns, each
 * with one formatter; filter, sort and the selection that follows its rank. */
#include "tui/top_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "common/text.h"
#include "trace/trace_format.h"

/* ---- the table's columns ---------------------------------------------------------------- */

enum col_id { C_RANK, C_HOST, C_PID, C_GPU, C_CALLS, C_GBPS, C_NCCL, C_P50, C_FLIGHT, C_LATE,
              C_LAST, NCOLS };

struct col {
    const char *title;
    int width;      /* at its narrowest */
    int grow;       /* what it may take of the room left, in addition */
    int right;      /* right-aligned */
    int optional;   /* dropped when the terminal is too narrow for it */
    int sort;       /* enum cpt_sort it sorts by, -1 none */
};

static const struct col cols[NCOLS] = {
    [C_RANK] = { "RANK", 7, 0, 0, 0, CPT_SORT_RANK },
    [C_HOST] = { "HOST", 8, 16, 0, 0, CPT_SORT_HOST },
    [C_PID] = { "PID", 7, 0, 1, 0, -1 },
    [C_GPU] = { "GPU", 3, 0, 1, 0, -1 },
    [C_CALLS] = { "CALL/S", 6, 0, 1, 0, CPT_SORT_CALLS },
    [C_GBPS] = { "GB/S", 5, 0, 1, 0, CPT_SORT_GBPS },
    [C_NCCL] = { "NCCL%", 5, 0, 1, 0, CPT_SORT_NCCL },
    [C_P50] = { "P50", 6, 0, 1, 0, CPT_SORT_P50 },
    [C_FLIGHT] = { "IN FLIGHT", 16, 8, 0, 0, CPT_SORT_AGE },
    [C_LATE] = { "LATE", 7, 0, 1, 0, CPT_SORT_LATE },
    [C_LAST] = { "LAST", 5, 0, 1, 1, -1 },
};

static const char *const sort_names[CPT_NSORTS] = {
    "rank", "host", "calls/s", "GB/s", "NCCL share", "p50", "in-flight age", "lateness",
};

/* Column x positions and widths for a grid width: host and in-flight take the room left,
 * the optional column shows only when everything else is at its narrowest and it still fits. */
static void layout(int w, int *x, int *width)
{
    int need = 0;
    for (int c = 0; c < NCOLS; c++)
        if (!cols[c].optional)
            need += cols[c].width + (c ? 1 : 0);
    int show_last = need + 1 + cols[C_LAST].width + 6 <= w;
    if (show_last)
        need += 1 + cols[C_LAST].width;
    int room = w > need ? w - need : 0;
    int pos = 0;
    for (int c = 0; c < NCOLS; c++) {
        int cw = cols[c].width;
        if (cols[c].optional && !show_last) {
            x[c] = -1;
            width[c] = 0;
            continue;
        }
        int extra = room < cols[c].grow ? room : cols[c].grow;
        cw += extra;
        room -= extra;
        x[c] = pos;
        width[c] = cw;
        pos += cw + 1;
    }
}

/* The cell text of column c for rank r, in at most width characters. */
static void cell(const cpt_rank *r, int c, int width, double hang_s, char *buf, size_t len)
{
    buf[0] = '\0';
    switch (c) {
    case C_RANK:
        if (r->rank < 0)
            snprintf(buf, len, "?");
        else if (r->local_rank < 0)
            snprintf(buf, len, "%d", r->rank);
        else
            snprintf(buf, len, "%d/%d", r->rank, r->local_rank);
        break;
    case C_HOST: /* escaped and cut to the column, never inside an escape */
        cp_text_escape(buf, (size_t)width + 1 < len ? (size_t)width + 1 : len, r->hostname,
                       strlen(r->hostname));
        break;
    case C_PID:
        snprintf(buf, len, "%u", (unsigned)r->pid);
        break;
    case C_GPU:
        snprintf(buf, len, r->cuda_dev < 0 ? "-" : "%d", r->cuda_dev);
        break;
    case C_CALLS:
        cpt_fmt_rate(buf, len, r->calls_per_s);
        break;
    case C_GBPS:
        cpt_fmt_gbps(buf, len, r->gbps);
        break;
    case C_NCCL:
        snprintf(buf, len, "%.0f%%", r->nccl_share * 100);
        break;
    case C_P50:
        if (r->p50_us > 0)
            cpt_fmt_us(buf, len, r->p50_us);
        else
            snprintf(buf, len, "-");
        break;
    case C_FLIGHT: {
        if (r->state == CPT_EXITED) {
            snprintf(buf, len, r->died ? "died" : "exited");
            break;
        }
        if (r->inflight_op == CP_OP_NONE) {
            snprintf(buf, len, r->hang ? "- hang!" : "-");
            break;
        }
        /* the age and its mark always show; the op's name gives way */
        char age[32];
        cpt_fmt_us(age, sizeof age, r->inflight_age_s * 1e6);
        int a = cpt_in_flight_attr(r, hang_s);
        if (a == CPT_BAD)
            strcat(age, "!");
        else if (a == CPT_WARN)
            strcat(age, "+");
        int room = width - (int)strlen(age) - 1;
        if (room < 1)
            room = 1;
        snprintf(buf, len, "%.*s %s", room, cp_op_name(r->inflight_op), age);
        break;
    }
    case C_LATE:
        if (r->late_judged <= 0)
            snprintf(buf, len, "-");
        else
            cpt_fmt_late(buf, len, r->late_us_p50);
        break;
    case C_LAST:
        if (r->late_judged <= 0)
            snprintf(buf, len, "-");
        else
            snprintf(buf, len, "%d/%d", r->late_count, r->late_judged);
        break;
    }
}

static void put_cell(cpt_grid *g, int y, int x, int width, int right, const char *text, int attr)
{
    char buf[256];
    int n = (int)strlen(text);
    if (n > width)
        n = width;
    if (right)
        snprintf(buf, sizeof buf, "%*.*s", width, n, text);
    else
        snprintf(buf, sizeof buf, "%-*.*s", width, n, text);
    cpt_grid_put(g, x, y, attr, buf);
}

/* ---- rows: filter and sort --------------------------------------------------------------- */

static int matches(const cpt_rank *r, const char *filter)
{
    if (!filter[0])
        return 1;
    if (strcasestr(r->hostname, filter))
        return 1;
    char num[16];
    snprintf(num, sizeof num, "%d", r->rank);
    return r->rank >= 0 && strstr(num, filter) != NULL;
}

static int cmp_num(double a, double b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_rows(const void *pa, const void *pb, void *ctx)
{
    const cpt_live *l = ((const void *const *)ctx)[0];
    int sort = *(const int *)((const void *const *)ctx)[1];
    const cpt_rank *a = &l->ranks[*(const size_t *)pa], *b = &l->ranks[*(const size_t *)pb];
    /* whatever the key, the live ranks first: exited ones must not push them off the screen */
    if (a->state != b->state)
        return a->state == CPT_RUNNING ? -1 : 1;
    int c = 0;
    switch (sort) {
    case CPT_SORT_HOST: c = strcmp(a->hostname, b->hostname); break;
    case CPT_SORT_CALLS: c = cmp_num(b->calls_per_s, a->calls_per_s); break;
    case CPT_SORT_GBPS: c = cmp_num(b->gbps, a->gbps); break;
    case CPT_SORT_NCCL: c = cmp_num(b->nccl_share, a->nccl_share); break;
    case CPT_SORT_P50: c = cmp_num(b->p50_us, a->p50_us); break;
    case CPT_SORT_AGE: {
        /* nothing in flight sorts after the shortest age */
        double x = a->inflight_op == CP_OP_NONE ? -1 : a->inflight_age_s;
        double y = b->inflight_op == CP_OP_NONE ? -1 : b->inflight_age_s;
        c = cmp_num(y, x);
        break;
    }
    case CPT_SORT_LATE: {
        double x = a->late_judged > 0 ? a->late_us_p50 : -1e300;
        double y = b->late_judged > 0 ? b->late_us_p50 : -1e300;
        c = cmp_num(y, x);
        break;
    }
    default: break;
    }
    if (!c)
        c = (a->rank > b->rank) - (a->rank < b->rank);
    if (!c)
        c = (a->pid > b->pid) - (a->pid < b->pid);
    return c;
}

size_t cpt_rows(const cpt_live *l, const cpt_state *s, size_t *idx, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < l->nranks && n < cap; i++)
        if (matches(&l->ranks[i], s->filter))
            idx[n++] = i;
    const void *ctx[2] = { l, &s->sort };
    qsort_r(idx, n, sizeof *idx, cmp_rows, (void *)ctx);
    return n;
}

size_t cpt_settle(const cpt_live *l, cpt_state *s, const size_t *idx, size_t n)
{
    if (n == 0) {
        s->sel = 0;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (s->sel_path[0] && strcmp(l->ranks[idx[i]].path, s->sel_path) == 0) {
            s->sel = i;
            return i;
        }
    if (s->sel >= n)
        s->sel = n - 1;
    snprintf(s->sel_path, sizeof s->sel_path, "%s", l->ranks[idx[s->sel]].path);
    return s->sel;
}

void cpt_state_init(cpt_state *s, double hang_s, double delay_s)
{
    memset(s, 0, sizeof *s);
    s->hang_s = hang_s > 0 ? hang_s : CP_HANG_S_DEFAULT;
    s->delay_s = delay_s;
}

/* ---- the table screen ------------------------------------------------------------------- */

static int draw_table(const cpt_live *l, cpt_state *s, cpt_grid *g)
{
    int page = g->h - 5;
    if (page < 1)
        page = 1;
    char num[32], num2[32];

    cpt_fmt_rate(num, sizeof num, l->calls_per_s);
    cpt_grid_fill_row(g, 0, CPT_TITLE);
    cpt_grid_putf(g, 0, 0, CPT_TITLE, "collprof top  %zu rank%s: %d running, %d exited, %d hung  "
                  "%s calls/s  %.2f GB/s  every %gs", l->nranks, l->nranks == 1 ? "" : "s",
                  l->running, l->exited, l->hung, num, l->gbps, s->delay_s);

    /* a "slowest" that arrives with or before its peers is no news: not named */
    if (l->slowest >= 0 && (size_t)l->slowest < l->nranks &&
        l->ranks[l->slowest].late_judged > 0 && l->ranks[l->slowest].late_us_p50 >= 0.5) {
        const cpt_rank *r = &l->ranks[l->slowest];
        char host[4 * sizeof r->hostname];
        cp_text_escape(host, sizeof host, r->hostname, strlen(r->hostname));
        cpt_fmt_arrives(num2, sizeof num2, r->late_us_p50);
        cpt_grid_putf_utf8(g, 0, 1, CPT_NORMAL,
                           "slowest: rank %d on %s (pid %u): %s its peers (p50), last in %d of %d",
                           r->rank, host, (unsigned)r->pid, num2, r->late_count, r->late_judged);
    } else if (l->slowest >= 0 && (size_t)l->slowest < l->nranks &&
               l->ranks[l->slowest].late_judged > 0) {
        cpt_grid_put(g, 0, 1, CPT_NORMAL, "slowest: none (no rank arrives after its peers)");
    } else {
        cpt_grid_put(g, 0, 1, CPT_NORMAL, "slowest: none yet (no common collectives seen)");
    }

    int x = cpt_grid_putf(g, 0, 2, CPT_NORMAL, "sort: %s", sort_names[s->sort]);
    if (s->filter[0])
        x = cpt_grid_putf(g, x, 2, CPT_NORMAL, "  filter: \"%s\"", s->filter);
    if (l->other_users)
        x = cpt_grid_putf(g, x, 2, CPT_DIM, "  %zu block%s of other users not read", l->other_users,
                          l->other_users == 1 ? "" : "s");
    if (l->nnotes) {
        char note[1024];
        cp_text_escape(note, sizeof note, l->notes[0], strlen(l->notes[0]));
        cpt_grid_putf_utf8(g, x, 2, CPT_DIM, "  %zu block%s skipped: %s", l->nnotes,
                           l->nnotes == 1 ? "" : "s", note);
    }

    int cx[NCOLS], cw[NCOLS];
    layout(g->w, cx, cw);
    cpt_grid_fill_row(g, 3, CPT_HEADER);
    for (int c = 0; c < NCOLS; c++)
        if (cx[c] >= 0)
            put_cell(g, 3, cx[c], cw[c], cols[c].right, cols[c].title,
                     cols[c].sort == s->sort ? CPT_SORTED : CPT_HEADER);

    size_t *idx = malloc((l->nranks ? l->nranks : 1) * sizeof *idx);
    size_t n = idx ? cpt_rows(l, s, idx, l->nranks) : 0;
    cpt_settle(l, s, idx, n);
    if (s->sel < s->scroll)
        s->scroll = s->sel;
    if (s->sel >= s->scroll + (size_t)page)
        s->scroll = s->sel - (size_t)page + 1;
    if (n > (size_t)page && s->scroll > n - (size_t)page)
        s->scroll = n - (size_t)page;
    if (n <= (size_t)page)
        s->scroll = 0;

    char dir[4 * sizeof l->dir];
    cp_text_escape(dir, sizeof dir, l->dir, strlen(l->dir));
    if (s->error) {
        cpt_grid_putf_utf8(g, 0, 4, CPT_BAD, "cannot read %s: %s",
                           dir[0] ? dir : "the live directory", s->error);
    } else if (l->nranks == 0) {
        cpt_grid_putf_utf8(g, 0, 4, CPT_NORMAL,
                           "No profiled process on this node (%s %s).",
                           l->dir_missing ? "no directory" : "no stats block in",
                           dir[0] ? dir : CP_LIVE_DIR_DEFAULT);
        cpt_grid_put(g, 0, 5, CPT_DIM,
                     "Start a job under `collprof run`; its ranks appear here as they start.");
    } else if (n == 0) {
        cpt_grid_putf(g, 0, 4, CPT_NORMAL, "No rank matches \"%s\" (Esc clears the filter).",
                      s->filter);
    }
    for (size_t i = s->scroll; i < n && i < s->scroll + (size_t)page; i++) {
        const cpt_rank *r = &l->ranks[idx[i]];
        int y = 4 + (int)(i - s->scroll);
        int base = i == s->sel ? CPT_SELECTED : r->state == CPT_EXITED ? CPT_DIM : CPT_NORMAL;
        cpt_grid_fill_row(g, y, base);
        for (int c = 0; c < NCOLS; c++) {
            if (cx[c] < 0)
                continue;
            char text[256];
            cell(r, c, cw[c], s->hang_s, text, sizeof text);
            int a = base;
            if (c == C_FLIGHT && r->state != CPT_EXITED) {
                int f = cpt_in_flight_attr(r, s->hang_s);
                if (f != CPT_NORMAL)
                    a = f;
            }
            put_cell(g, y, cx[c], cw[c], cols[c].right, text, a);
        }
    }

    cpt_grid_fill_row(g, g->h - 1, CPT_DIM);
    if (s->editing) {
        cpt_grid_putf(g, 0, g->h - 1, CPT_NORMAL,
                      "filter (host or rank): %s_   Enter keeps, Esc clears", s->filter);
    } else {
        x = cpt_grid_put(g, 0, g->h - 1, CPT_DIM, "q quit  s sort  Enter detail  / filter  h help");
        if (n > (size_t)page)
            cpt_grid_putf(g, x, g->h - 1, CPT_DIM, "   rows %zu-%zu of %zu", s->scroll + 1,
                          s->scroll + (size_t)page < n ? s->scroll + (size_t)page : n, n);
    }
    free(idx);
    return page;
}

int cpt_draw(const cpt_live *l, cpt_state *s, cpt_grid *g)
{
    cpt_grid_clear(g);
    if (g->w < 40 || g->h < 8) {
        cpt_grid_put(g, 0, 0, CPT_BAD, "terminal too small for collprof top");
        return 1;
    }
    switch (s->screen) {
    case CPT_DETAIL: return cpt_draw_detail(l, s, g);
    case CPT_HELP: return cpt_draw_help(g);
    default: return draw_table(l, s, g);
    }
}
