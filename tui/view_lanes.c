/* view_lanes: the view's screens drawn along job time: the stragglers with their lateness
 * strips, the timeline of collectives by rank, and one collective's detail (view_draw.h).
 * Times come from the analysis's job timeline (analyzer/timeline.c), so a rank's wait here
 * is the one the report and the Perfetto export show. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/view_internal.h"

#define LABEL_COLS 19 /* "rank 1234 hostname " before a strip or a lane */

static const cpa_analysis *an(const cpv_data *d) { return d->a; }

static void time_label(char *buf, size_t len, double us)
{
    if (fabs(us) >= 1e6)
        snprintf(buf, len, "%.3fs", us / 1e6);
    else if (fabs(us) >= 1e3)
        snprintf(buf, len, "%.3fms", us / 1e3);
    else
        snprintf(buf, len, "%.1fus", us);
}

/* ---- 2 stragglers ---- */

static const cpa_straggler *reported(const cpv_data *d, size_t rank_idx)
{
    const cpa_stragglers *s = &an(d)->stragglers;
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].rank_idx == rank_idx)
            return &s->rows[i];
    return NULL;
}

static int is_reported(const cpv_data *d, size_t rank_idx) { return reported(d, rank_idx) != NULL; }

/* One character per bucket of the job's collectives (in time order): ' ' the rank had none
 * there, '.' on time in all, '1'..'9' its worst lateness there against the job's worst.
 * Built from the rank's own calls, so a row costs its calls, not the job's. */
static void strip(const cpv_data *d, cpv_grid *g, int x0, int y, int cols, size_t rank_idx)
{
    const cpa_analysis *a = an(d);
    if (!d->ncoll)
        return;
    float *late = malloc(d->ncoll * sizeof *late); /* per collective: -1 absent, else late us */
    if (!late)
        return;
    for (size_t k = 0; k < d->ncoll; k++)
        late[k] = -1;
    const cpa_rank *r = &a->model->ranks[rank_idx];
    for (size_t ci = 0; ci < r->ncalls; ci++) {
        uint32_t op = cpa_call_op(a, rank_idx, ci);
        if (op == CPA_NO_OP || d->coll_pos[op] == SIZE_MAX)
            continue;
        late[d->coll_pos[op]] = cpa_op_late_rank_idx(a, op) == (int32_t)rank_idx
                                    ? (float)cpa_op_late_us(a, op) : 0.0f;
    }
    for (int c = 0; c < cols; c++) {
        size_t k0 = (size_t)c * d->ncoll / (size_t)cols;
        size_t k1 = (size_t)(c + 1) * d->ncoll / (size_t)cols;
        if (k1 == k0)
            k1 = k0 + 1; /* fewer collectives than columns: each shows in one or more */
        int present = 0;
        double worst = 0;
        for (size_t k = k0; k < k1 && k < d->ncoll; k++) {
            if (late[k] < 0)
                continue;
            present = 1;
            if (late[k] > worst)
                worst = late[k];
        }
        if (!present)
            continue;
        if (worst > 0 && d->max_late_us > 0) {
            int level = (int)ceil(9.0 * worst / d->max_late_us);
            level = level < 1 ? 1 : level > 9 ? 9 : level;
            cpt_grid_cell(g, x0 + c, y, (char)('0' + level), CPV_LATE);
        } else {
            cpt_grid_cell(g, x0 + c, y, '.', CPV_DIM);
        }
    }
    free(late);
}

int cpv_draw_stragglers(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1)
{
    const cpa_analysis *a = an(d);
    const cpa_stragglers *st = &a->stragglers;
    int y = y0;
    if (st->nrows && st->kind == CPA_STRAGGLER_PERSISTENT)
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN,
                           "stragglers  persistent: rank %d was the late one in %" PRIu64 " of %"
                           PRIu64 " collectives", (int)st->rows[0].rank, st->rows[0].late_count,
                           st->judged);
    else if (st->nrows)
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN, "stragglers  rotating: %zu ranks late in turn, %"
                           PRIu64 " of %" PRIu64 " collectives", st->nrows, st->late, st->judged);
    else
        cpt_grid_putf_utf8(g, 0, y++, CPV_TITLE, "stragglers  none reported: %" PRIu64 " of %"
                           PRIu64 " collectives judged had a late rank", st->late, st->judged);
    if (st->nrows) { /* why the worst one was late (issue 19): its rows say the others' */
        char why[600];
        cpr_cause_text(why, sizeof why, &st->rows[0]);
        cpt_grid_putf_utf8(g, 0, y++, CPV_WARN, "why rank %d: %s", (int)st->rows[0].rank, why);
    }
    char worst[32];
    time_label(worst, sizeof worst, d->max_late_us);
    cpt_grid_putf_utf8(g, 0, y++, CPV_DIM, "late: arrived > %.0f us after the others' median",
                       st->threshold_us);
    cpt_grid_putf_utf8(g, 0, y++, CPV_DIM,
                       "strip: %zu collectives in time order, '.' on time, 1-9 how late (9: %s)",
                       d->ncoll, worst);
    int strip_x = LABEL_COLS + 22;
    int cols = g->w - strip_x;
    cpt_grid_putf_utf8(g, 0, y++, CPV_HEADER, "%-*s %5s %9s %5s %s", LABEL_COLS - 1, "rank", "late",
                       "late ms", "", cols > 8 ? "lateness over the job ->" : "");
    size_t nr = a->model->nranks;
    size_t *rows = malloc((nr ? nr : 1) * sizeof *rows);
    if (!rows)
        return 1;
    size_t n = cpv_rank_rows(d, s, 1, rows);
    int page = y1 - y + 1;
    size_t first = cpv_window(s, CPV_STRAGGLERS, n, page);
    for (size_t i = first; i < n && y <= y1; i++, y++) {
        size_t r = rows[i];
        int sel = !s->plain && i == s->sel[CPV_STRAGGLERS];
        int attr = sel ? CPV_SELECTED : is_reported(d, r) ? CPV_WARN : CPV_NORMAL;
        if (sel)
            cpt_grid_row_role(g, y, CPV_SELECTED);
        char label[64];
        cpv_rank_label(d, r, label, sizeof label, LABEL_COLS - 11);
        /* A reported straggler's figures are the analyzer's; the others' come from the
         * same per-collective verdicts the strip shows. */
        const cpa_straggler *rep = reported(d, r);
        cpt_grid_putf_utf8(g, 0, y, attr, "%s %5" PRIu64 " %9.3f %5s", label,
                           rep ? rep->late_count : d->rank_late_n[r],
                           (rep ? rep->late_us_total : d->rank_late_us[r]) / 1e3,
                           rep ? "SLOW" : "");
        if (cols > 0)
            strip(d, g, strip_x, y, cols, r);
    }
    if (!n)
        cpt_grid_put_utf8(g, 0, y, CPV_DIM, "no rank matches the filter");
    free(rows);
    return page;
}

/* ---- 4 timeline ---- */

static char op_char(unsigned op)
{
    switch (op) {
    case CP_OP_ALLREDUCE: return 'A';
    case CP_OP_ALLGATHER: return 'G';
    case CP_OP_REDUCESCATTER: return 'R';
    case CP_OP_BROADCAST: return 'B';
    case CP_OP_REDUCE: return 'r';
    case CP_OP_ALLTOALL: return 'X';
    case CP_OP_GATHER: return 'g';
    case CP_OP_SCATTER: return 'S';
    case CP_OP_SEND: return 's';
    case CP_OP_RECV: return 'v';
    default: return '?';
    }
}

static int lane_cols(const cpv_grid *g) { return g->w - LABEL_COLS > 1 ? g->w - LABEL_COLS : 1; }

static void fit(const cpv_data *d, cpv_state *s)
{
    int cols = s->lane_cols > 0 ? s->lane_cols : 60;
    s->us_per_col = (d->t1_us - d->t0_us) / cols;
    if (s->us_per_col <= 0)
        s->us_per_col = 1;
    s->view_us = d->t0_us;
}

static void clamp_view(const cpv_data *d, cpv_state *s)
{
    double span = s->us_per_col * s->lane_cols;
    if (s->view_us > d->t1_us - span / 2)
        s->view_us = d->t1_us - span / 2;
    if (s->view_us < d->t0_us - span / 2)
        s->view_us = d->t0_us - span / 2;
}

/* Priority of what a cell shows when several calls fall in it. */
enum { P_NONE, P_WAIT, P_OP, P_LATE, P_OPEN };

static void lane(const cpv_data *d, const cpv_state *s, cpv_grid *g, int y, size_t ri,
                 unsigned char *prio)
{
    const cpa_analysis *a = an(d);
    const cpa_rank *r = &a->model->ranks[ri];
    int cols = s->lane_cols;
    double v0 = s->view_us, upc = s->us_per_col, v1 = v0 + upc * cols;
    memset(prio, P_NONE, (size_t)cols);
    for (size_t ci = 0; ci < r->ncalls; ci++) {
        if (ci % CPV_BLOCK_CALLS == 0) {
            size_t b = ci / CPV_BLOCK_CALLS;
            if (d->blk_hi[ri][b] < v0 || d->blk_lo[ri][b] >= v1) {
                ci += CPV_BLOCK_CALLS - 1; /* nothing of this block in the window */
                continue;
            }
        }
        const cpa_call *c = &r->calls[ci];
        uint64_t st_ns, en_ns;
        int open = 0;
        cpa_call_span_job_ns(a, ri, c, &st_ns, &en_ns, &open);
        double su = cpa_job_ns_us(a, st_ns), eu = cpa_job_ns_us(a, en_ns);
        if (eu < v0 || su >= v1)
            continue;
        uint32_t op = cpa_call_op(a, ri, ci);
        double latest = su;
        int late = 0;
        if (op != CPA_NO_OP) {
            latest = cpa_job_ns_us(a, a->timeline.latest_ns[op]);
            late = cpa_op_late_rank_idx(a, op) == (int32_t)ri;
        }
        long c0 = (long)floor((su - v0) / upc), c1 = (long)floor((eu - v0) / upc);
        long cl = (long)floor((latest - v0) / upc);
        if (c0 < 0)
            c0 = 0;
        if (c1 >= cols)
            c1 = cols - 1;
        for (long x = c0; x <= c1; x++) {
            int p;
            char ch;
            int attr;
            if (open) {
                p = P_OPEN, ch = '>', attr = CPV_BAD;
            } else if (x < cl && x < c1) {
                p = P_WAIT, ch = '-', attr = CPV_WAIT;
            } else {
                p = late ? P_LATE : P_OP, ch = op_char(c->op), attr = late ? CPV_LATE : CPV_NORMAL;
            }
            if (p > prio[x]) {
                prio[x] = (unsigned char)p;
                cpt_grid_cell(g, LABEL_COLS + (int)x, y, ch, attr);
            }
        }
    }
}

int cpv_draw_timeline(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1)
{
    s->lane_cols = lane_cols(g);
    if (s->us_per_col <= 0)
        fit(d, s);
    clamp_view(d, s);
    int cols = s->lane_cols;
    char from[32], to[32], zoom[32];
    time_label(from, sizeof from, s->view_us);
    time_label(to, sizeof to, s->view_us + s->us_per_col * cols);
    time_label(zoom, sizeof zoom, s->us_per_col);
    int y = y0;
    cpt_grid_putf_utf8(g, 0, y++, CPV_TITLE, "timeline  %s .. %s   zoom %s/col   job %.3f s", from,
                       to, zoom, an(d)->duration_s);
    /* The axis: a tick and its time every 16 columns. A ':' down the lanes marks the middle,
     * where Enter looks for a collective. */
    cpt_grid_row_role(g, y, CPV_DIM);
    cpt_grid_put_utf8(g, 0, y, CPV_DIM, "job time ->");
    for (int x = 0; x < cols; x += 16) {
        char t[32];
        time_label(t, sizeof t, s->view_us + s->us_per_col * x);
        cpt_grid_cell(g, LABEL_COLS + x, y, '|', CPV_DIM);
        if (x + 1 + (int)strlen(t) < cols)
            cpt_grid_put_utf8(g, LABEL_COLS + x + 1, y, CPV_DIM, t);
    }
    y++;
    size_t nr = an(d)->model->nranks;
    size_t *rows = malloc((nr ? nr : 1) * sizeof *rows);
    unsigned char *prio = malloc((size_t)cols);
    if (!rows || !prio) {
        free(rows);
        free(prio);
        return 1;
    }
    size_t n = cpv_rank_rows(d, s, 0, rows);
    int page = y1 - y + 1;
    size_t first = cpv_window(s, CPV_TIMELINE, n, page);
    for (size_t i = first; i < n && y <= y1; i++, y++) {
        int sel = !s->plain && i == s->sel[CPV_TIMELINE];
        char label[64];
        cpv_rank_label(d, rows[i], label, sizeof label, LABEL_COLS - 11);
        cpt_grid_put_utf8(g, 0, y,
                          sel ? CPV_SELECTED : is_reported(d, rows[i]) ? CPV_WARN : CPV_NORMAL,
                          label);
        lane(d, s, g, y, rows[i], prio);
        if (prio[cols / 2] == P_NONE)
            cpt_grid_cell(g, LABEL_COLS + cols / 2, y, ':', CPV_DIM);
    }
    if (!n)
        cpt_grid_put_utf8(g, 0, y, CPV_DIM, "no rank matches the filter");
    free(rows);
    free(prio);
    return page;
}

/* ---- 5 a collective's detail ---- */

static size_t coll_pos(const cpv_data *d, size_t op)
{
    return op < an(d)->matched.nops ? d->coll_pos[op] : SIZE_MAX;
}

/* A send/recv pair's place in p2p_order; SIZE_MAX for a collective. A search, run once per
 * key press or draw: pairs keep no position array of their own. */
static size_t p2p_pos(const cpv_data *d, size_t op)
{
    for (size_t k = 0; k < d->np2p; k++)
        if (d->p2p_order[k] == op)
            return k;
    return SIZE_MAX;
}

/* A part's arrival (GPU start when timed, else host entry) in job microseconds. */
static double part_start_us(const cpa_analysis *a, const cpa_part *p)
{
    const cpa_call *c = &a->model->ranks[p->rank_idx].calls[p->call_idx];
    return cpa_job_ns_us(a, cpa_call_arrival_job_ns(a, p->rank_idx, c));
}

int cpv_draw_detail(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1)
{
    const cpa_analysis *a = an(d);
    int y = y0;
    if (s->detail_op >= a->matched.nops) {
        cpt_grid_put_utf8(g, 0, y, CPV_DIM,
                          "no collective chosen: Enter on a timeline, straggler or problem row");
        return 1;
    }
    size_t oi = s->detail_op;
    const cpa_op *o = &a->matched.ops[oi];
    char comm[17], size[24] = "?", nccl[128] = "";
    cpr_fmt_comm(comm, o->comm_id);
    if (o->nparts) {
        const cpa_part *p0 = &a->matched.parts[o->first_part];
        const cpa_call *c0 = &a->model->ranks[p0->rank_idx].calls[p0->call_idx];
        cpr_fmt_size(size, sizeof size, cpa_op_bytes(o->op, c0->count, c0->dtype, o->nranks));
    }
    /* what NCCL's profiler plugin said it ran it with (any rank's: they agree) */
    for (uint32_t i = 0; i < o->nparts && !nccl[0]; i++) {
        const cpa_part *p = &a->matched.parts[o->first_part + i];
        const cpa_call *c = &a->model->ranks[p->rank_idx].calls[p->call_idx];
        if ((c->nccl & CPA_NCCL_SEEN) && (c->algo || c->proto)) {
            /* and its own number for it, which NCCL's logs and RAS use */
            const cpa_rank *r = &a->model->ranks[p->rank_idx];
            uint64_t nseq = cpa_call_nccl_seq(r, c);
            char num[40] = "";
            if (nseq != CPA_SEQ_NONE)
                snprintf(num, sizeof num, " (NCCL's seq %" PRIu64 ")", nseq);
            snprintf(nccl, sizeof nccl, "NCCL ran it %s/%s on %u channels%s",
                     cp_algo_name(c->algo), cp_proto_name(c->proto), (unsigned)c->nchannels,
                     num);
        }
    }
    cpt_grid_putf_utf8(g, 0, y++, CPV_TITLE, "%s seq %" PRIu64 ", comm %s, %u of %d ranks, %s%s",
                       cpr_op_label(o->op, 1), o->seq, comm, o->nparts, (int)o->nranks, size,
                       o->complete ? "" : ", INCOMPLETE");
    if (nccl[0])
        cpt_grid_put_utf8(g, 0, y++, CPV_NORMAL, nccl);
    double latest = cpa_job_ns_us(a, a->timeline.latest_ns[oi]);
    double base = o->nparts ? part_start_us(a, &a->matched.parts[o->first_part +
                                                                  a->timeline.first_part[oi]])
                            : latest;
    size_t pos = coll_pos(d, oi), ppos = pos == SIZE_MAX ? p2p_pos(d, oi) : SIZE_MAX;
    int x = 0;
    if (pos != SIZE_MAX)
        x = cpt_grid_putf_utf8(g, 0, y, CPV_NORMAL, "collective %zu of %zu; ", pos + 1, d->ncoll);
    else if (ppos != SIZE_MAX)
        x = cpt_grid_putf_utf8(g, 0, y, CPV_NORMAL, "send/recv %zu of %zu, rank %d to %d; ",
                               ppos + 1, d->np2p, (int)o->sender, (int)o->receiver);
    int32_t late = cpa_op_late_rank_idx(a, oi);
    if (late >= 0 && (size_t)late < a->model->nranks)
        cpt_grid_putf_utf8(g, x, y++, CPV_LATE, "late rank %d, by %.1f us",
                           (int)a->model->ranks[late].rank, cpa_op_late_us(a, oi));
    else
        cpt_grid_put_utf8(g, x, y++, CPV_NORMAL, "no late rank judged in it");
    cpt_grid_putf_utf8(g, 0, y++, CPV_DIM,
                       "times: us after %.3f ms; start: GPU start when timed, else host entry",
                       base / 1e3);
    cpt_grid_putf_utf8(g, 0, y++, CPV_HEADER, "%-*s %10s %10s %10s %10s %10s", LABEL_COLS - 1,
                       "rank", "entered", "start", "end", "wait", "duration");
    int page = y1 - y + 1;
    size_t first = cpv_window(s, CPV_DETAIL, o->nparts, page);
    for (size_t i = first; i < o->nparts && y <= y1; i++, y++) {
        const cpa_part *p = &a->matched.parts[o->first_part + i];
        const cpa_call *c = &a->model->ranks[p->rank_idx].calls[p->call_idx];
        uint64_t st_ns, en_ns;
        int open = 0;
        cpa_call_span_job_ns(a, p->rank_idx, c, &st_ns, &en_ns, &open);
        double entered = cpa_job_us(a, p->rank_idx, c->enter_ns);
        double start = part_start_us(a, p);
        double end = cpa_job_ns_us(a, en_ns);
        int sel = !s->plain && i == s->sel[CPV_DETAIL];
        int is_late = late == (int32_t)p->rank_idx;
        if (sel)
            cpt_grid_row_role(g, y, CPV_SELECTED);
        char label[64], endtxt[24];
        cpv_rank_label(d, p->rank_idx, label, sizeof label, LABEL_COLS - 11);
        if (open)
            snprintf(endtxt, sizeof endtxt, "%10s", "in flight");
        else
            snprintf(endtxt, sizeof endtxt, "%10.1f", end - base);
        cpt_grid_putf_utf8(g, 0, y, sel ? CPV_SELECTED : is_late ? CPV_LATE : CPV_NORMAL,
                           "%s %10.1f %10.1f %s %10.1f %10.1f%s", label, entered - base,
                           start - base, endtxt, latest - start, end - start,
                           is_late ? "  late" : "");
    }
    return page;
}

/* ---- actions along time ---- */

size_t cpv_enter_op(const cpv_data *d, const cpv_state *s)
{
    const cpa_analysis *a = an(d);
    size_t nr = a->model->nranks;
    size_t *rows = malloc((nr ? nr : 1) * sizeof *rows);
    if (!rows)
        return SIZE_MAX;
    size_t best = SIZE_MAX;
    if (s->screen == CPV_STRAGGLERS) {
        size_t n = cpv_rank_rows(d, s, 1, rows);
        if (s->sel[CPV_STRAGGLERS] < n) {
            size_t r = rows[s->sel[CPV_STRAGGLERS]];
            double worst = 0;
            for (size_t op = 0; op < a->matched.nops; op++)
                if (cpa_op_late_rank_idx(a, op) == (int32_t)r && cpa_op_late_us(a, op) > worst) {
                    worst = cpa_op_late_us(a, op);
                    best = op;
                }
        }
    } else if (s->screen == CPV_TIMELINE) {
        size_t n = cpv_rank_rows(d, s, 0, rows);
        if (s->sel[CPV_TIMELINE] < n && s->us_per_col > 0) {
            size_t ri = rows[s->sel[CPV_TIMELINE]];
            const cpa_rank *r = &a->model->ranks[ri];
            double mid = s->view_us + s->us_per_col * s->lane_cols / 2, dist = INFINITY;
            for (size_t ci = 0; ci < r->ncalls; ci++) {
                uint32_t op = cpa_call_op(a, ri, ci);
                if (op == CPA_NO_OP)
                    continue;
                uint64_t st_ns, en_ns;
                int open;
                cpa_call_span_job_ns(a, ri, &r->calls[ci], &st_ns, &en_ns, &open);
                double su = cpa_job_ns_us(a, st_ns), eu = cpa_job_ns_us(a, en_ns);
                double dd = mid < su ? su - mid : mid > eu ? mid - eu : 0;
                if (dd < dist) {
                    dist = dd;
                    best = op;
                }
            }
        }
    }
    free(rows);
    return best;
}

int cpv_lanes_act(const cpv_data *d, cpv_state *s, int action)
{
    if (s->screen == CPV_DETAIL && (action == CPV_ACT_LEFT || action == CPV_ACT_RIGHT)) {
        /* a pair steps through the pairs, a collective through the collectives */
        size_t pk = coll_pos(d, s->detail_op) == SIZE_MAX ? p2p_pos(d, s->detail_op) : SIZE_MAX;
        if (pk != SIZE_MAX) {
            if (action == CPV_ACT_LEFT && pk > 0)
                pk--;
            else if (action == CPV_ACT_RIGHT && pk + 1 < d->np2p)
                pk++;
            s->detail_op = d->p2p_order[pk];
            return 1;
        }
        size_t k = coll_pos(d, s->detail_op);
        if (k == SIZE_MAX && d->ncoll)
            k = 0;
        else if (action == CPV_ACT_LEFT && k > 0)
            k--;
        else if (action == CPV_ACT_RIGHT && k + 1 < d->ncoll)
            k++;
        if (k < d->ncoll)
            s->detail_op = d->coll_order[k];
        return 1;
    }
    if (s->screen != CPV_TIMELINE)
        return 0;
    if (s->us_per_col <= 0)
        fit(d, s);
    double cols = s->lane_cols > 0 ? s->lane_cols : 60;
    double mid = s->view_us + s->us_per_col * cols / 2;
    switch (action) {
    case CPV_ACT_LEFT:
        s->view_us -= s->us_per_col * cols / 4;
        break;
    case CPV_ACT_RIGHT:
        s->view_us += s->us_per_col * cols / 4;
        break;
    case CPV_ACT_ZOOM_IN:
        /* Down to a nanosecond a column: finer says nothing the trace holds. */
        if (s->us_per_col / 2 >= 1e-3)
            s->us_per_col /= 2;
        s->view_us = mid - s->us_per_col * cols / 2;
        break;
    case CPV_ACT_ZOOM_OUT:
        if (s->us_per_col * cols < 4 * (d->t1_us - d->t0_us))
            s->us_per_col *= 2;
        s->view_us = mid - s->us_per_col * cols / 2;
        break;
    case CPV_ACT_ZOOM_FIT:
        fit(d, s);
        break;
    default:
        return 0;
    }
    clamp_view(d, s);
    return 1;
}
