/* report_text: `collprof report`, the one-screen summary of an analysis.
 *
 * Sections in the order a reader asks: the job, its clocks (whether lateness can be
 * trusted), what it sent (the op table), who was slow, what hung, what disagreed, what was
 * lost on the way. Every line is cut to 80 columns and every string from the trace is
 * escaped (common/text.h): a hostile hostname must not drive the terminal. Colour only
 * when the caller asks (cpx_want_color), and only around whole lines, so a cut never
 * leaves an escape sequence open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"

#define WIDTH 80
#define INDENT "         " /* under the job/clock labels */
#define MAX_WARNINGS_SHOWN 5
#define MAX_HOSTS_SHOWN 4

enum style { PLAIN, TITLE, BAD, WARN };

typedef struct tw {
    FILE *out;
    int color;
    size_t top;
    const char *caveat; /* under each table of figures when the trace has holes, else "" */
} tw;

int cpx_want_color(int fd)
{
    const char *no = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    if (no && *no)
        return 0;
    if (term && strcmp(term, "dumb") == 0)
        return 0;
    return isatty(fd);
}

/* Cuts s (clean UTF-8) to WIDTH code points. */
static void cut_to_width(char *s)
{
    size_t cols = 0;
    for (size_t i = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) == 0x80)
            continue;
        if (cols++ == WIDTH) {
            s[i] = '\0';
            return;
        }
    }
}

static void emit_line(tw *w, enum style st, const char *text)
{
    static const char *const on[] = { "", "\033[1m", "\033[1;31m", "\033[1;33m" };
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    cut_to_width(buf);
    /* Trailing blanks from fixed-width columns are noise in a pasted report. */
    size_t n = strlen(buf);
    while (n && buf[n - 1] == ' ')
        buf[--n] = '\0';
    if (w->color && st != PLAIN)
        fprintf(w->out, "%s%s\033[0m\n", on[st], buf);
    else
        fprintf(w->out, "%s\n", buf);
}

static void line(tw *w, enum style st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void line(tw *w, enum style st, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit_line(w, st, buf);
}

/* Free text (a warning, what a rank did last) on at most max_lines lines of WIDTH, broken
 * at spaces, each after indent, in style st; what does not fit ends in "...". */
static void wrapped_style(tw *w, enum style st, const char *indent, const char *text,
                          int max_lines)
{
    char *clean = cp_text_escape_dup(text, strlen(text));
    if (!clean)
        return;
    size_t avail = WIDTH - strlen(indent);
    const char *p = clean;
    for (int l = 0; l < max_lines && *p; l++) {
        size_t len = strlen(p);
        size_t take = len;
        if (len > avail) {
            if (l == max_lines - 1) {
                take = avail - 3;
            } else {
                take = avail;
                while (take > avail / 2 && p[take] != ' ')
                    take--;
                if (p[take] != ' ')
                    take = avail;
            }
            while (take > 0 && ((unsigned char)p[take] & 0xc0) == 0x80)
                take--;
        }
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%.*s%s", indent, (int)take, p,
                 len > take && l == max_lines - 1 ? "..." : "");
        emit_line(w, st, buf);
        p += take;
        while (*p == ' ')
            p++;
    }
    free(clean);
}

static void wrapped(tw *w, const char *indent, const char *text, int max_lines)
{
    wrapped_style(w, PLAIN, indent, text, max_lines);
}

/* s escaped, cut to max_cols bytes at a whole character or escape. */
static void clean_cut(char *dst, size_t cap, const char *s, size_t max_cols)
{
    cp_text_escape(dst, max_cols + 1 < cap ? max_cols + 1 : cap, s, strlen(s));
}

/* ---- the job ---- */

static void section_job(tw *w, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    char hosts[160] = "";
    if (a->nhosts <= 3) {
        size_t used = 0;
        for (size_t i = 0; i < a->nhosts && used < sizeof hosts; i++) {
            char h[40];
            clean_cut(h, sizeof h, a->hosts[i][0] ? a->hosts[i] : "?", 24);
            used += (size_t)snprintf(hosts + used, sizeof hosts - used, "%s%s", i ? ", " : "", h);
        }
    }
    line(w, PLAIN, "job      %zu rank%s on %zu host%s%s%s%s, %.3f s", m->nranks,
         m->nranks == 1 ? "" : "s", a->nhosts, a->nhosts == 1 ? "" : "s",
         hosts[0] ? " (" : "", hosts, hosts[0] ? ")" : "", a->duration_s);

    uint64_t calls = 0;
    for (size_t i = 0; i < m->nranks; i++)
        calls += m->ranks[i].ncalls;
    char lost[96];
    int at_least = cpa_lost_at_least(m);
    /* A trace without END proves nothing was counted after its end: its process was killed,
     * or its file could no longer be written (a read-only remount). "at least 0" would read
     * as "none"; the number is not known. */
    if (at_least && !m->lost_records)
        snprintf(lost, sizeof lost, "LOST unknown");
    else if (m->lost_records || at_least)
        snprintf(lost, sizeof lost, "%s%" PRIu64 " LOST", at_least ? "at least " : "",
                 m->lost_records);
    else
        snprintf(lost, sizeof lost, "none lost");
    line(w, m->lost_records || at_least ? WARN : PLAIN,
         INDENT "%" PRIu64 " records (%s), %" PRIu64 " calls in %zu operations", m->records, lost,
         calls, a->matched.nops);
    if (at_least) {
        size_t unended = 0;
        for (size_t i = 0; i < m->nranks; i++)
            unended += !m->ranks[i].ended;
        char text[300];
        snprintf(text, sizeof text, "%zu trace%s without END: what %s process%s held after %s "
                 "last chunk is not counted (killed, or the file could no longer be written)",
                 unended, unended == 1 ? " ends" : "s end", unended == 1 ? "its" : "their",
                 unended == 1 ? "" : "es", unended == 1 ? "its" : "their");
        wrapped_style(w, WARN, INDENT, text, 4);
    }
    char refused[512];
    cpr_refused_text(refused, sizeof refused, a);
    if (refused[0]) {
        char text[600];
        snprintf(text, sizeof text, "refused: %s", refused);
        wrapped_style(w, WARN, INDENT, text, 4);
    }
    char holes[512];
    cpr_holes_text(holes, sizeof holes, a, NULL, NULL);
    if (holes[0]) {
        char text[600];
        snprintf(text, sizeof text, "holes: %s", holes);
        wrapped_style(w, WARN, INDENT, text, 3);
    }
    cpa_untimed_text(holes, sizeof holes, &m->integrity);
    if (holes[0]) {
        char text[600];
        snprintf(text, sizeof text, "untimed: %s (no GPU times for them)", holes);
        wrapped_style(w, WARN, INDENT, text, 4);
    }
    char rotated[512];
    cpr_rotated_text(rotated, sizeof rotated, a, NULL);
    if (rotated[0]) {
        char text[600];
        snprintf(text, sizeof text, "rotated: %s", rotated);
        wrapped_style(w, WARN, INDENT, text, 3);
    }

    if (a->ranks && m->nranks) {
        size_t lo = 0, hi = 0;
        double sum = 0;
        for (size_t i = 0; i < m->nranks; i++) {
            sum += a->ranks[i].share;
            if (a->ranks[i].share < a->ranks[lo].share)
                lo = i;
            if (a->ranks[i].share > a->ranks[hi].share)
                hi = i;
        }
        if (m->nranks == 1)
            line(w, PLAIN, INDENT "time in NCCL %.1f%% of the rank's run", 100 * sum);
        else
            line(w, PLAIN, INDENT "time in NCCL %.1f%% mean, %.1f%% rank %d (least), %.1f%% "
                                  "rank %d (most)",
                 100 * sum / (double)m->nranks, 100 * a->ranks[lo].share, (int)m->ranks[lo].rank,
                 100 * a->ranks[hi].share, (int)m->ranks[hi].rank);
    }
}

/* The anchors (and so every time shown) rest on the samples kept. */
static void clock_rejected(tw *w, const cpa_clock *c)
{
    if (c->rejected_samples)
        line(w, WARN, INDENT "%" PRIu64 " clock sample%s rejected: a time past 2^62 ns",
             c->rejected_samples, c->rejected_samples == 1 ? "" : "s");
}

static void section_clock(tw *w, const cpa_analysis *a)
{
    const cpa_clock *c = &a->clock;
    if (c->ndomains <= 1) {
        line(w, PLAIN, "clock    one host: one clock, nothing to align");
        clock_rejected(w, c);
        return;
    }
    if (c->aligned)
        line(w, PLAIN, "clock    %zu hosts, aligned to within %.1f us", c->ndomains, c->error_us);
    else
        line(w, WARN, "clock    %zu hosts, NOT aligned (wall-clock anchors only)", c->ndomains);
    for (size_t d = 0; d < c->ndomains && d < MAX_HOSTS_SHOWN; d++) {
        const cpa_clock_domain *dom = &c->domains[d];
        char h[40];
        clean_cut(h, sizeof h, dom->hostname[0] ? dom->hostname : "?", 24);
        if (d == 0)
            line(w, PLAIN, INDENT "%-24s reference", h);
        else if (dom->refined)
            line(w, PLAIN, INDENT "%-24s %+.1f us, error %.1f us (%" PRIu64 " collectives)", h,
                 dom->offset_ns / 1e3, dom->error_ns / 1e3, dom->samples);
        else
            line(w, PLAIN, INDENT "%-24s %+.1f us, anchors only", h, dom->offset_ns / 1e3);
    }
    if (c->ndomains > MAX_HOSTS_SHOWN)
        line(w, PLAIN, INDENT "... %zu more hosts (--json)", c->ndomains - MAX_HOSTS_SHOWN);
    clock_rejected(w, c);
    if (a->stragglers.threshold_us > 0)
        line(w, PLAIN, INDENT "lateness under %.0f us is not judged", a->stragglers.threshold_us);
}

/* ---- what it sent ---- */

static void ops_oversized(tw *w, const cpa_stats *s)
{
    if (s->oversized)
        line(w, WARN, "%" PRIu64 " operation%s of no possible size (S past 2^64 bytes) left out",
             s->oversized, s->oversized == 1 ? "" : "s");
    /* an abort's DONE ends the kernel it releases: its span is no duration */
    if (s->aborted)
        line(w, WARN, "%" PRIu64 " operation%s ended by ncclCommAbort (a watchdog's) left out",
             s->aborted, s->aborted == 1 ? "" : "s");
}

static int cmp_stat_time(const void *x, const void *y)
{
    const cpa_stat *p = *(const cpa_stat *const *)x, *q = *(const cpa_stat *const *)y;
    if (p->time_us_total != q->time_us_total)
        return p->time_us_total > q->time_us_total ? -1 : 1;
    return p < q ? -1 : p > q;
}

/* Calls a row's operations should hold: every rank's, or a pair's two. */
static uint64_t calls_expected(const cpa_stat *r)
{
    return r->ops * (r->op == CP_OP_SEND ? 2u : (uint64_t)(r->nranks > 0 ? r->nranks : 1));
}

static void section_ops(tw *w, const cpa_stats *s)
{
    line(w, PLAIN, "%s", "");
    if (!s->nrows) {
        line(w, TITLE, "operations   none with a known duration");
        ops_oversized(w, s);
        return;
    }
    line(w, TITLE, "operations (by total time%s)",
         s->kind == CPA_ROWS_BUCKETS ? "; sizes in power-of-two buckets" : "");
    char text[256];
    cpr_fmt_stat_header(text, sizeof text);
    line(w, PLAIN, "%s", text);
    const cpa_stat **order = malloc(s->nrows * sizeof *order);
    if (!order)
        return;
    for (size_t i = 0; i < s->nrows; i++)
        order[i] = &s->rows[i];
    qsort(order, s->nrows, sizeof *order, cmp_stat_time);
    size_t shown = s->nrows < w->top ? s->nrows : w->top;
    for (size_t i = 0; i < shown; i++) {
        cpr_fmt_stat_row(text, sizeof text, s, order[i]);
        line(w, PLAIN, "%s", text);
    }
    if (s->nrows > shown)
        line(w, PLAIN, "... %zu more rows (--top N, or --json)", s->nrows - shown);
    ops_oversized(w, s);
    if (*w->caveat)
        line(w, WARN, "%s", w->caveat);
    /* An operation some rank's call is missing from (its file lost, or cut) is timed on the
     * ranks that are there: say so, beside the operations, since "ops" cannot show it. */
    uint64_t short_ops = 0, calls = 0;
    for (size_t i = 0; i < s->nrows; i++) {
        calls += s->rows[i].calls;
        if (s->rows[i].calls < calls_expected(&s->rows[i]))
            short_ops += s->rows[i].ops;
    }
    if (short_ops) {
        snprintf(text, sizeof text,
                 "(rows count operations; %" PRIu64 " of them lack some rank's call, so their "
                 "times rest on the ranks that are there: the ranks' calls are %" PRIu64 ")",
                 short_ops, calls);
        wrapped(w, "", text, 2);
    }
    /* what the times rest on: NCCL's plugin, CUDA events, or the host's enqueue only */
    uint64_t plugin = 0, events = 0, host = 0, cupti = 0;
    for (size_t i = 0; i < s->nrows; i++) {
        plugin += s->rows[i].timed_plugin;
        events += s->rows[i].timed_events;
        host += s->rows[i].timed_host;
        cupti += s->rows[i].timed_cupti;
    }
    uint64_t all = plugin + events + host + cupti;
    if (cupti) {
        snprintf(text, sizeof text,
                 "(times: on the GPU by CUPTI for %.0f%% of the operations, NCCL's plugin for "
                 "%.0f%%, CUDA events for %.0f%%, the host's enqueue only for %.0f%%)",
                 100.0 * (double)cupti / (double)all, 100.0 * (double)plugin / (double)all,
                 100.0 * (double)events / (double)all, 100.0 * (double)host / (double)all);
        wrapped(w, "", text, 2);
    } else if (all) {
        snprintf(text, sizeof text,
                 "(times: on the GPU by NCCL's profiler plugin for %.0f%% of the operations, by "
                 "CUDA events for %.0f%%, the host's enqueue only for %.0f%%)",
                 100.0 * (double)plugin / (double)all, 100.0 * (double)events / (double)all,
                 100.0 * (double)host / (double)all);
        wrapped(w, "", text, 2);
    }
    int nccl = 0;
    for (size_t i = 0; i < shown; i++)
        nccl |= order[i]->channels_max > 0;
    if (nccl) {
        line(w, PLAIN, "%s", "");
        line(w, TITLE, "nccl (algorithm/protocol and channels NCCL chose, by its plugin)");
        line(w, PLAIN, "%-13s %5s %12s  %-24s %8s", "op", "ranks", "size", "algo/proto",
             "channels");
        for (size_t i = 0; i < shown; i++) {
            const cpa_stat *r = order[i];
            if (!r->channels_max)
                continue;
            char size[24], algo[48];
            cpr_fmt_size(size, sizeof size, r->size);
            cpr_fmt_algo_proto(algo, sizeof algo, r);
            line(w, PLAIN, "%-13s %5d %12s  %-24s %8u", cpr_op_label(r->op, 1), (int)r->nranks,
                 size, algo, (unsigned)r->channels_max);
        }
    }
    free(order);
}

/* ---- who was slow ---- */

static void section_stragglers(tw *w, const cpa_analysis *a)
{
    const cpa_stragglers *s = &a->stragglers;
    line(w, PLAIN, "%s", "");
    if (!s->nrows) {
        if (s->judged && !s->late)
            line(w, TITLE, "stragglers   none: no rank late in %" PRIu64
                           " collectives judged (threshold %.0f us)",
                 s->judged, s->threshold_us);
        else if (s->judged) { /* late now and then, nobody often: no one to name */
            line(w, TITLE, "stragglers   none named: %" PRIu64 " of %" PRIu64 " collectives had "
                           "a late rank", s->late, s->judged);
            line(w, PLAIN, "(late: > %.0f us; no rank was late often enough to be named)",
                 s->threshold_us);
        }
        else
            line(w, TITLE, "stragglers   none judged (no complete collective of 2+ ranks)");
        return;
    }
    const cpa_straggler *top = &s->rows[0];
    if (s->kind == CPA_STRAGGLER_PERSISTENT)
        line(w, WARN, "stragglers   persistent: rank %d was the late one in %" PRIu64 " of %" PRIu64
                      " collectives", (int)top->rank, top->late_count, s->judged);
    else if (s->kind == CPA_STRAGGLER_ROTATING)
        line(w, WARN, "stragglers   rotating: %zu ranks late in turn, %" PRIu64 " of %" PRIu64
                      " collectives", s->nrows, s->late, s->judged);
    else
        line(w, WARN, "stragglers   %" PRIu64 " of %" PRIu64 " collectives had a late rank",
             s->late, s->judged);
    line(w, PLAIN, "%6s  %-14s %8s %13s %9s %7s %11s", "rank", "host", "late", "late total ms",
         "p50 us", "share", "waited ms");
    size_t shown = s->nrows < w->top ? s->nrows : w->top;
    for (size_t i = 0; i < shown; i++) {
        const cpa_straggler *r = &s->rows[i];
        char h[40];
        const char *host = r->rank_idx < a->model->nranks ? a->model->ranks[r->rank_idx].hostname
                                                          : "";
        clean_cut(h, sizeof h, host[0] ? host : "?", 14);
        line(w, PLAIN, "%6d  %-14s %8" PRIu64 " %13.3f %9.1f %6.1f%% %11.3f", (int)r->rank, h,
             r->late_count, r->late_us_total / 1e3, r->late_us_p50, 100 * r->share,
             r->wait_us_total / 1e3);
    }
    if (s->nrows > shown)
        line(w, PLAIN, "... %zu more ranks (--top N, or --json)", s->nrows - shown);
    for (size_t i = 0; i < shown; i++) {
        char why[600], text[640];
        cpr_cause_text(why, sizeof why, &s->rows[i]);
        snprintf(text, sizeof text, "why rank %d: %s", (int)s->rows[i].rank, why);
        wrapped_style(w, PLAIN, "  ", text, 4);
    }
    line(w, PLAIN, "(late: arrived > %.0f us after the others' median, whatever the durations)",
         s->threshold_us);
    if (*w->caveat)
        line(w, WARN, "%s", w->caveat);
}

/* ---- what hung, what disagreed ---- */

static void section_hangs(tw *w, const cpa_analysis *a)
{
    const cpa_hangs *h = &a->hangs;
    line(w, PLAIN, "%s", "");
    char stop[128] = "", sig[16];
    if (h->stop_signal > 0)
        snprintf(stop, sizeof stop, "stopped by %s", cpr_signal_name(h->stop_signal, sig));
    else if (h->stop_signal < 0) /* the traces cannot tell a kill from a file that failed */
        snprintf(stop, sizeof stop, "cut short (no trace ends with END: the processes were "
                 "killed, or their last records could not be written)");
    if (!h->nrows)
        line(w, TITLE, "hangs        none");
    if (h->interrupted) {
        char text[320];
        snprintf(text, sizeof text, "the job was %s with %zu operation%s in flight for less "
                 "than a stall: interrupted, not hung", stop, h->interrupted,
                 h->interrupted == 1 ? "" : "s");
        wrapped_style(w, PLAIN, "  ", text, 4);
    }
    if (h->unknown)
        line(w, WARN, "  %zu operation%s not judged: rank %d, which never joined, lost records "
             "(its calls may be among them)", h->unknown, h->unknown == 1 ? "" : "s",
             (int)h->unknown_rank);
    if (!h->nrows)
        return;
    line(w, BAD, "hangs (%zu)", h->nrows);
    size_t shown = h->nrows < w->top ? h->nrows : w->top;
    for (size_t i = 0; i < shown; i++) {
        const cpa_hang *r = &h->rows[i];
        char comm[17], missing[48], waiting[48];
        cpr_fmt_comm(comm, r->comm_id);
        cpr_fmt_ranks(missing, sizeof missing, r->missing_ranks, r->nmissing);
        cpr_fmt_ranks(waiting, sizeof waiting, r->waiting_ranks, r->nwaiting);
        line(w, BAD, "%s  %s seq %" PRIu64 ", comm %s%s", cpa_hang_verdict_name(r->verdict),
             cpr_op_label(r->op, 1), r->seq, comm,
             r->aborted ? " (the job's watchdog aborted it)" : "");
        char age[40] = "";
        if (r->age_s > 0)
            snprintf(age, sizeof age, "; in flight %.1f s", r->age_s);
        if (r->nmissing)
            line(w, PLAIN, "  missing %s; waiting %s%s", missing, r->nwaiting ? waiting : "none",
                 age);
        else
            line(w, PLAIN, "  every rank entered (%s), none finished%s", waiting, age);
        /* hang.c words it whole ("rank 5 last called ..."): shown as it is. */
        if (r->last[0])
            wrapped(w, "  ", r->last, 2);
    }
    if (h->nrows > shown)
        line(w, PLAIN, "... %zu more hangs (--top N, or --json)", h->nrows - shown);
}

/* The ranks of one mismatch grouped by value (a 1024-rank job must stay on one screen):
 * each value once, its ranks, and the call site of the first of them. */
static void mismatch_groups(tw *w, const cpa_mismatch *r)
{
    int32_t *ranks = malloc((r->nvalues ? r->nvalues : 1) * sizeof *ranks);
    unsigned char *done = calloc(r->nvalues ? r->nvalues : 1, 1);
    if (!ranks || !done)
        goto out;
    size_t groups = 0;
    for (size_t i = 0; i < r->nvalues; i++) {
        if (done[i])
            continue;
        size_t n = 0;
        for (size_t k = i; k < r->nvalues; k++)
            if (!done[k] && r->values[k].value == r->values[i].value) {
                done[k] = 1;
                ranks[n++] = r->values[k].rank;
            }
        if (groups++ == 4) {
            line(w, PLAIN, "    ... more values (--json)");
            break;
        }
        char list[40], val[32], site[96];
        cpr_fmt_ranks(list, sizeof list, ranks, n);
        cpr_mismatch_value(val, sizeof val, r->field, r->values[i].value);
        cpr_fmt_site(site, sizeof site, r->values[i].site);
        line(w, PLAIN, "  %s %s: %s", n == 1 ? "rank" : "ranks", list, val);
        if (site[0])
            wrapped(w, "      at ", site, 1);
    }
out:
    free(ranks);
    free(done);
}

static void section_mismatches(tw *w, const cpa_analysis *a)
{
    const cpa_mismatches *x = &a->mismatches;
    line(w, PLAIN, "%s", "");
    uint64_t total = x->total > x->nrows ? x->total : x->nrows;
    if (!total) {
        line(w, TITLE, "mismatches   none");
        return;
    }
    line(w, BAD, "mismatches (%" PRIu64 ")", total);
    size_t shown = x->nrows < w->top ? x->nrows : w->top;
    for (size_t i = 0; i < shown; i++) {
        const cpa_mismatch *r = &x->rows[i];
        char head[160];
        cpr_mismatch_text(head, sizeof head, r);
        line(w, BAD, "%s", head);
        mismatch_groups(w, r);
    }
    if (total > shown)
        line(w, PLAIN, "... %" PRIu64 " more mismatches (--top N, or --json)", total - shown);
}

static void section_warnings(tw *w, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    uint64_t total = m->nwarnings + m->dropped_warnings;
    if (!total)
        return;
    line(w, PLAIN, "%s", "");
    line(w, WARN, "warnings (%" PRIu64 ")", total);
    size_t shown = m->nwarnings < MAX_WARNINGS_SHOWN ? m->nwarnings : MAX_WARNINGS_SHOWN;
    for (size_t i = 0; i < shown; i++)
        wrapped(w, "  ", m->warnings[i], 2);
    if (total > shown)
        line(w, PLAIN, "  ... %" PRIu64 " more (--json lists %zu)", total - shown, m->nwarnings);
}

int cpx_report_text(FILE *out, const cpa_analysis *a, const cpx_text_options *o)
{
    tw w = { .out = out, .color = o && o->color, .top = o && o->top ? o->top : CPX_TOP_DEFAULT,
             .caveat = cpr_holes_caveat(a) };
    if (o && o->title) {
        char t[WIDTH + 1];
        clean_cut(t, sizeof t, o->title, WIDTH - 17);
        line(&w, TITLE, "collprof report: %s", t);
    }
    section_job(&w, a);
    section_clock(&w, a);
    /* rows other than the analysis' own are cut for this report only */
    cpa_stats other;
    const cpa_stats *stats = &a->stats;
    if (o && o->rows != stats->kind) {
        char err[128];
        if (cpa_stats_compute(a->model, &a->matched, o->rows, &other, err, sizeof err)) {
            errno = ENOMEM;
            return -1;
        }
        stats = &other;
    }
    section_ops(&w, stats);
    section_stragglers(&w, a);
    section_hangs(&w, a);
    section_mismatches(&w, a);
    section_warnings(&w, a);
    if (stats != &a->stats)
        cpa_stats_free(&other);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
