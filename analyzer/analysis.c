/* analyzer/analysis.c: the whole analysis of a trace directory, stage after stage, and what
 * is said of each rank and of the job as a whole. */
#include <limits.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* Set once by the process' owner before its analysis (cpa_keep_freed_memory). */
static atomic_int keep_freed;

/* A call's span, start and end; 0 when it has none (timed, but its DONE never came). */
static int call_span(const cpa_call *c, uint64_t *a, uint64_t *b)
{
    if (c->gpu_timed) {
        *a = c->gpu_start_ns;
        *b = c->gpu_end_ns;
        return 1;
    }
    if (c->flags & CP_CALL_TIMED)
        return 0;
    *a = c->enter_ns;
    *b = c->enter_ns + cpa_call_host_ns(c);
    return 1;
}

/* The union's length of spans by start, one at a time. */
typedef struct span_union {
    uint64_t total, a, b;
    int any;
} span_union;

static void union_add(span_union *u, uint64_t a, uint64_t b)
{
    if (!u->any || a > u->b) {
        u->total += u->b - u->a;
        u->a = a;
        u->b = b;
        u->any = 1;
    } else if (b > u->b) {
        u->b = b;
    }
}

/* Time in NCCL is the union of a rank's operation intervals: operations on several streams
 * overlap, and a sum would count the overlap twice (and exceed the job's duration). The
 * calls come by start nearly always: their union is taken as they come (a span starting
 * within or after the stretch so far cannot reach back to an earlier one), and only where
 * one starts before that stretch are the spans gathered and sorted (an array of them for
 * every rank was most of this stage). */
static int summarize_rank(const cpa_rank *r, cpa_rank_summary *out)
{
    memset(out, 0, sizeof *out);
    out->calls = r->ncalls;
    if (r->last_ns > r->first_ns)
        out->duration_s = (double)(r->last_ns - r->first_ns) / 1e9;
    if (!r->ncalls)
        return 0;
    span_union u = {0};
    uint64_t a, b;
    size_t i = 0;
    for (; i < r->ncalls; i++) {
        if (!call_span(&r->calls[i], &a, &b))
            continue;
        if (u.any && a < u.a)
            break; /* before the stretch: sort */
        union_add(&u, a, b);
    }
    if (i < r->ncalls) { /* the union does not depend on how equal starts are ordered */
        cpa_kv *s = malloc(2 * r->ncalls * sizeof *s);
        if (!s)
            return -1;
        size_t n = 0;
        for (i = 0; i < r->ncalls; i++)
            if (call_span(&r->calls[i], &a, &b))
                s[n++] = (cpa_kv){a, b};
        cpa_sort_kv(s, s + r->ncalls, n);
        u = (span_union){0};
        for (i = 0; i < n; i++)
            union_add(&u, s[i].key, s[i].val);
        free(s);
    }
    uint64_t total = u.total + (u.b - u.a);
    out->nccl_time_s = (double)total / 1e9;
    out->share = out->duration_s > 0 ? out->nccl_time_s / out->duration_s : 0;
    if (out->share > 1)
        out->share = 1;
    return 0;
}

static int collect_hosts(cpa_analysis *a)
{
    const cpa_model *m = a->model;
    a->hosts = calloc(m->nranks ? m->nranks : 1, sizeof *a->hosts);
    if (!a->hosts)
        return -1;
    for (size_t i = 0; i < m->nranks; i++) {
        size_t k = 0;
        while (k < a->nhosts && strcmp(a->hosts[k], m->ranks[i].hostname))
            k++;
        if (k == a->nhosts && !(a->hosts[a->nhosts++] = strdup(m->ranks[i].hostname)))
            return -1;
    }
    return 0;
}

/* The job's span on the job time line: from the earliest record of any rank to the latest. */
static void job_span(cpa_analysis *a)
{
    const cpa_model *m = a->model;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        if (!r->first_ns)
            continue;
        uint64_t f = cpa_clock_job_ns(m, &a->clock, i, r->first_ns);
        uint64_t l = cpa_clock_job_ns(m, &a->clock, i, r->last_ns);
        if (f < lo)
            lo = f;
        if (l > hi)
            hi = l;
    }
    if (lo == UINT64_MAX)
        return;
    a->start_ns = lo;
    a->duration_s = hi > lo ? (double)(hi - lo) / 1e9 : 0;
}

static void say(cpa_progress_fn progress, void *ctx, const char *stage, double f)
{
    if (progress)
        progress(ctx, stage, f);
}

int cpa_analyze(const char *dir, cpa_analysis *a, cpa_progress_fn progress, void *ctx,
                char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    say(progress, ctx, "loading", 0.0);
    cpa_model *m;
    if (cpa_model_load(dir, &m, err, errlen))
        return -1;
    return cpa_analyze_model(m, a, progress, ctx, err, errlen);
}

int cpa_analyze_model(cpa_model *model, cpa_analysis *a, cpa_progress_fn progress, void *ctx,
                      char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->model = model;
    const cpa_model *m = model;
    if (atomic_load(&keep_freed)) { /* the loader's own arrays did better without (-3 %) */
        (void)mallopt(M_MMAP_MAX, 0);
        (void)mallopt(M_TRIM_THRESHOLD, INT_MAX);
    }
    say(progress, ctx, "matching", 0.5);
    if (cpa_match(m, &a->matched, err, errlen))
        goto fail;
    say(progress, ctx, "statistics", 0.6);
    if (cpa_stats_compute(m, &a->matched, CPA_ROWS_EXACT, &a->stats, err, errlen))
        goto fail;
    say(progress, ctx, "clocks", 0.7);
    if (cpa_clock_align(m, &a->matched, &a->clock, err, errlen))
        goto fail;
    say(progress, ctx, "stragglers", 0.8);
    cpa_arrivals_job(m, &a->matched, &a->clock);
    if (cpa_stragglers_compute(m, &a->matched, &a->clock, &a->stragglers, err, errlen))
        goto fail;
    if (cpa_kernels_before(m, &a->matched, &a->stragglers)) {
        snprintf(err, errlen, "out of memory naming the kernels before late collectives");
        goto fail;
    }
    say(progress, ctx, "hangs", 0.9);
    if (cpa_hangs_find(m, &a->matched, &a->hangs, err, errlen))
        goto fail;
    say(progress, ctx, "mismatches", 0.92);
    if (cpa_mismatches_find(m, &a->matched, &a->mismatches, err, errlen))
        goto fail;
    say(progress, ctx, "ranks", 0.94);
    a->ranks = calloc(m->nranks ? m->nranks : 1, sizeof *a->ranks);
    if (!a->ranks || collect_hosts(a))
        goto oom;
    for (size_t i = 0; i < m->nranks; i++)
        if (summarize_rank(&m->ranks[i], &a->ranks[i]))
            goto oom;
    job_span(a);
    say(progress, ctx, "timeline", 0.96);
    if (cpa_timeline_build(a, &a->timeline))
        goto oom_timeline;
    cpa_refused_find(a, &a->refused);
    say(progress, ctx, "done", 1.0);
    return 0;
oom:
    snprintf(err, errlen, "out of memory summarizing the ranks");
    goto fail;
oom_timeline:
    snprintf(err, errlen, "out of memory laying out the job timeline");
fail:
    cpa_analysis_free(a);
    return -1;
}

void cpa_analysis_free(cpa_analysis *a)
{
    if (!a)
        return;
    cpa_timeline_free(&a->timeline);
    cpa_mismatches_free(&a->mismatches);
    cpa_hangs_free(&a->hangs);
    cpa_stragglers_free(&a->stragglers);
    cpa_clock_free(&a->clock);
    cpa_stats_free(&a->stats);
    cpa_matched_free(&a->matched);
    cpa_model_free(a->model);
    free(a->ranks);
    for (size_t i = 0; i < a->nhosts; i++)
        free(a->hosts[i]);
    free(a->hosts);
    memset(a, 0, sizeof *a);
}

void cpa_keep_freed_memory(void)
{
    atomic_store(&keep_freed, 1);
}
