/* A rank's detail (its recent collectives, newest first) and the key help of `collprof top`
 * (top_draw.h). */
#include "tui/top_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "trace/trace_format.h"

/* ---- a rank's detail -------------------------------------------------------------------- */

static const cpt_rank *selected_rank(const cpt_live *l, const cpt_state *s)
{
    for (size_t i = 0; i < l->nranks; i++)
        if (strcmp(l->ranks[i].path, s->sel_path) == 0)
            return &l->ranks[i];
    return NULL;
}

static size_t recent_count(const cp_stats_block *b)
{
    uint64_t n = b->recent_count;
    if (n > CP_STATS_RECENT)
        n = CP_STATS_RECENT;
    if (n > b->recent_total)
        n = b->recent_total;
    return (size_t)n;
}

/* The i-th newest operation of the ring. */
static const cp_stats_entry *recent_at(const cp_stats_block *b, size_t i)
{
    return &b->recent[(b->recent_total - 1 - i) % CP_STATS_RECENT];
}

static void fmt_since(char *buf, size_t len, uint64_t t, uint64_t from)
{
    if (!t || t < from)
        snprintf(buf, len, "-");
    else
        cpt_fmt_us(buf, len, (double)(t - from) / 1e3);
}

int cpt_draw_detail(const cpt_live *l, cpt_state *s, cpt_grid *g)
{
    int page = g->h - 8;
    if (page < 1)
        page = 1;
    const cpt_rank *r = selected_rank(l, s);
    cpt_grid_fill_row(g, 0, CPT_TITLE);
    cpt_grid_fill_row(g, g->h - 1, CPT_DIM);
    cpt_grid_put(g, 0, g->h - 1, CPT_DIM, "Esc/q/Enter back  up/down/PgUp/PgDn scroll");
    if (!r) {
        cpt_grid_put(g, 0, 0, CPT_TITLE, "rank detail");
        cpt_grid_put(g, 0, 2, CPT_NORMAL, "This rank is gone (its block was dropped).");
        return page;
    }
    char a[32], b[32], c[32];
    char host[4 * sizeof r->hostname], job[4 * sizeof r->job_id];
    cp_text_escape(host, sizeof host, r->hostname, strlen(r->hostname));
    cp_text_escape(job, sizeof job, r->job_id, strlen(r->job_id));
    cpt_grid_putf_utf8(g, 0, 0, CPT_TITLE, "rank %d/%d of %d on %s  pid %u  GPU %d  job %s%s",
                       r->rank, r->local_rank, r->world_size, host, (unsigned)r->pid,
                       r->cuda_dev, job[0] ? job : "-", r->state == CPT_EXITED ? "  (exited)" : "");
    cpt_fmt_bytes(a, sizeof a, r->bytes);
    cpt_grid_putf(g, 0, 1, CPT_NORMAL, "%llu calls, %s  GPU timing %s  lost records %llu",
                  (unsigned long long)r->calls, a, r->gpu_timing ? "yes" : "no (host times)",
                  (unsigned long long)r->lost_records);
    if (r->inflight_op != CP_OP_NONE && r->state != CPT_EXITED) {
        cpt_fmt_us(a, sizeof a, r->inflight_age_s * 1e6);
        if (r->typical_us > 0)
            cpt_fmt_us(b, sizeof b, r->typical_us);
        else
            snprintf(b, sizeof b, "unknown");
        cpt_fmt_bytes(c, sizeof c, r->inflight_bytes);
        cpt_grid_putf(g, 0, 2, cpt_in_flight_attr(r, s->hang_s),
                      "in flight %s seq %llu, %s, %s (typical %s), comm %016llx",
                      cp_op_name(r->inflight_op), (unsigned long long)r->inflight_seq, c, a, b,
                      (unsigned long long)r->inflight_comm);
    } else {
        cpt_grid_put(g, 0, 2, CPT_NORMAL, "in flight: nothing");
    }
    if (r->hang) {
        const cp_stats_hang *h = &r->snap.hang;
        cpt_fmt_us(a, sizeof a, (double)h->age_ns / 1e3);
        cpt_grid_putf(g, 0, 3, CPT_BAD, "watchdog: %s seq %llu hung after %s, comm %016llx",
                      cp_op_name(h->op), (unsigned long long)h->seq, a,
                      (unsigned long long)h->comm_id);
    }
    if (r->late_judged > 0) {
        char arr[64];
        cpt_fmt_arrives(arr, sizeof arr, r->late_us_p50);
        cpt_grid_putf(g, 0, 4, CPT_NORMAL, "%s its local peers (p50), last in %d of %d recent", arr,
                      r->late_count, r->late_judged);
    } else {
        cpt_grid_put(g, 0, 4, CPT_NORMAL, "lateness: no common collective with local peers yet");
    }

    size_t n = recent_count(&r->snap);
    cpt_grid_putf(g, 0, 5, CPT_NORMAL, "recent collectives, newest first (%zu); times after entry",
                  n);
    cpt_grid_fill_row(g, 6, CPT_HEADER);
    cpt_grid_putf(g, 0, 6, CPT_HEADER, "%-13s %-8s %8s %7s %11s %10s %8s %8s", "OP", "COMM", "SEQ",
                  "SIZE", "ENTER(s)", "GPU-START", "GPU-END", "DUR");
    if (n > (size_t)page && s->detail_scroll > n - (size_t)page)
        s->detail_scroll = n - (size_t)page;
    if (n <= (size_t)page)
        s->detail_scroll = 0;
    for (size_t i = s->detail_scroll; i < n && i < s->detail_scroll + (size_t)page; i++) {
        const cp_stats_entry *e = recent_at(&r->snap, i);
        int y = 7 + (int)(i - s->detail_scroll);
        char size[32], st[32], en[32], dur[32];
        cpt_fmt_bytes(size, sizeof size, e->bytes);
        fmt_since(st, sizeof st, e->gpu_start_ns, e->enter_ns);
        fmt_since(en, sizeof en, e->gpu_end_ns, e->enter_ns);
        if (e->gpu_start_ns && e->gpu_end_ns >= e->gpu_start_ns)
            fmt_since(dur, sizeof dur, e->gpu_end_ns, e->gpu_start_ns);
        else
            snprintf(dur, sizeof dur, "-");
        double enter_s = e->enter_ns >= r->snap.start_mono_ns
                             ? (double)(e->enter_ns - r->snap.start_mono_ns) / 1e9 : 0;
        cpt_grid_putf(g, 0, y, CPT_NORMAL, "%-13.13s %08llx %8llu %7s %11.6f %10s %8s %8s",
                      cp_op_name(e->op), (unsigned long long)(e->comm_id >> 32),
                      (unsigned long long)e->seq, size, enter_s, st, en, dur);
    }
    if (n > (size_t)page)
        cpt_grid_putf(g, 46, g->h - 1, CPT_DIM, "rows %zu-%zu of %zu", s->detail_scroll + 1,
                      s->detail_scroll + (size_t)page < n ? s->detail_scroll + (size_t)page : n, n);
    return page;
}

/* ---- help ---------------------------------------------------------------------------------- */

static const char *const help_lines[] = {
    "collprof top: the profiled ranks of this node, live",
    "",
    "  q            quit (in a detail: back)",
    "  up/down      move the selection",
    "  PgUp/PgDn    a page up or down;  Home/End  first or last",
    "  s            sort by the next column (rank, host, calls/s, GB/s, NCCL%,",
    "               p50, in-flight age, lateness)",
    "  Enter        the selected rank's recent collectives (Esc/q/Enter back)",
    "  /            filter by host or rank (Enter keeps, Esc clears)",
    "  h            this help",
    "",
    "IN FLIGHT: the collective the rank is in and for how long;",
    "  age+ past its typical time, age! past COLLPROF_HANG_S or reported hung.",
    "LATE: how much later than its local peers it arrives (median of the recent",
    "  common collectives); LAST: in how many of them it arrived last.",
    "",
    "Any key goes back.",
};

int cpt_draw_help(cpt_grid *g)
{
    cpt_grid_fill_row(g, 0, CPT_TITLE);
    cpt_grid_put(g, 0, 0, CPT_TITLE, help_lines[0]);
    for (size_t i = 1; i < sizeof help_lines / sizeof *help_lines; i++)
        cpt_grid_put(g, 0, (int)i, CPT_NORMAL, help_lines[i]);
    return g->h - 5 > 0 ? g->h - 5 : 1;
}
