/* prometheus: the analysis as Prometheus text exposition format (version 0.0.4), for
 * node_exporter's textfile collector (write it to a *.prom file there) or a Pushgateway.
 *
 * Each family has its HELP and TYPE once, before its samples, and its samples together;
 * counters end in _total; units are the base ones (seconds, bytes, bytes per second); no
 * timestamps (the textfile collector refuses them). Label values are cleaned to UTF-8 and
 * escaped (\\, \", \n). A rank claimed by two files appears once: the first file's.
 * tests/exporters/test_prometheus.c checks all of this the way promtool does.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"

static void job_metrics(FILE *out, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    cpr_prom_family(out, "collprof_ranks", "gauge", "Ranks (trace files) in the analysed job.");
    cpr_prom_u64(out, "collprof_ranks", NULL, m->nranks);
    cpr_prom_family(out, "collprof_hosts", "gauge", "Distinct hosts of the job's ranks.");
    cpr_prom_u64(out, "collprof_hosts", NULL, a->nhosts);
    cpr_prom_family(out, "collprof_records_total", "counter", "Trace records read.");
    cpr_prom_u64(out, "collprof_records_total", NULL, m->records);
    cpr_prom_family(out, "collprof_lost_records_total", "counter",
           "Trace records the writers dropped (a full ring, a write error).");
    cpr_prom_u64(out, "collprof_lost_records_total", NULL, m->lost_records);
    /* what the trace lacks, by kind: a dashboard must not show figures from a holed trace as
     * whole (docs/REPORT.md) */
    const cpa_integrity *g = &m->integrity;
    cpr_prom_family(out, "collprof_lost_records_by_cause_total", "counter",
           "Trace records dropped, by the cause their LOST records give (untold: the chunk "
           "headers count drops whose LOST record never reached the disk).");
    cpr_labels l;
    uint64_t by_cause = 0;
    for (unsigned c = 0; c <= CP_LOST_CAUSE_LAST; c++) {
        by_cause += g->lost_by_cause[c];
        if (!g->lost_by_cause[c])
            continue;
        cpr_lbl_reset(&l);
        cpr_lbl_add(&l, "cause", c ? cp_lost_cause_name(c) : "unknown");
        cpr_prom_u64(out, "collprof_lost_records_by_cause_total", &l, g->lost_by_cause[c]);
    }
    if (m->lost_records > by_cause) {
        cpr_lbl_reset(&l);
        cpr_lbl_add(&l, "cause", "untold");
        cpr_prom_u64(out, "collprof_lost_records_by_cause_total", &l, m->lost_records - by_cause);
    }
    cpr_prom_family(out, "collprof_trace_unknown_records_total", "counter",
           "Trace records of a type this collprof does not know: skipped.");
    cpr_prom_u64(out, "collprof_trace_unknown_records_total", NULL, g->unknown_records);
    cpr_prom_family(out, "collprof_trace_missing_chunks_total", "counter",
           "Chunks missing from the traces (corrupt, or never written).");
    cpr_prom_u64(out, "collprof_trace_missing_chunks_total", NULL, g->missing_chunks);
    cpr_prom_family(out, "collprof_trace_truncated_files", "gauge",
           "Trace files cut short inside a chunk (a kill, a full disk).");
    cpr_prom_u64(out, "collprof_trace_truncated_files", NULL, g->truncated);
    cpr_prom_family(out, "collprof_trace_ranks_with_holes", "gauge",
           "Ranks whose trace lost records or chunks, or was cut: figures over them may leave "
           "operations out.");
    cpr_prom_u64(out, "collprof_trace_ranks_with_holes", NULL, m->ranks_with_holes);
    cpr_prom_family(out, "collprof_refused_calls_total", "counter",
           "Calls NCCL returned an error for (they enqueued nothing), by result.");
    for (unsigned k = 0; k < CPA_NCCL_RESULTS; k++) {
        if (!a->refused.by_result[k])
            continue;
        cpr_lbl_reset(&l);
        cpr_lbl_add(&l, "result", cpr_result_id(k));
        cpr_prom_u64(out, "collprof_refused_calls_total", &l, a->refused.by_result[k]);
    }
    if (!a->refused.total)
        cpr_prom_u64(out, "collprof_refused_calls_total", NULL, 0);
    cpr_prom_family(out, "collprof_warnings", "gauge", "Problems met reading the trace (cut files, ...).");
    cpr_prom_u64(out, "collprof_warnings", NULL, m->nwarnings + m->dropped_warnings);
    cpr_prom_family(out, "collprof_trace_duration_seconds", "gauge",
           "First to last record of any rank on the job time line.");
    cpr_prom_sample(out, "collprof_trace_duration_seconds", NULL, a->duration_s);
    cpr_prom_family(out, "collprof_clock_aligned", "gauge",
           "1 when every host's clock was put on one time line (or one host), else 0.");
    cpr_prom_sample(out, "collprof_clock_aligned", NULL, a->clock.aligned ? 1 : 0);
    cpr_prom_family(out, "collprof_clock_error_seconds", "gauge",
           "How far the hosts' aligned clocks may still disagree.");
    cpr_prom_sample(out, "collprof_clock_error_seconds", NULL, a->clock.error_us / 1e6);
    cpr_prom_family(out, "collprof_clock_rejected_samples_total", "counter",
           "Clock samples left out of the alignment: a time no clock reads (a damaged trace).");
    cpr_prom_u64(out, "collprof_clock_rejected_samples_total", NULL, a->clock.rejected_samples);
}

/* Operations and bytes per op from the matched operations: every operation counts, also
 * one whose duration is unknown (the statistics leave those out). */
static void op_counters(FILE *out, const cpa_analysis *a)
{
    uint64_t count[CP_OP_COUNT] = { 0 }, bytes[CP_OP_COUNT] = { 0 };
    const cpa_matched *mt = &a->matched;
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        if (o->op >= CP_OP_COUNT || !o->nparts)
            continue;
        const cpa_part *p = &mt->parts[o->first_part];
        const cpa_call *c = &a->model->ranks[p->rank_idx].calls[p->call_idx];
        int n = o->nranks > 0 ? o->nranks : (int)o->nparts;
        uint64_t s = cpa_op_bytes(o->op, c->count, c->dtype, n);
        count[o->op]++;
        if (s != UINT64_MAX) /* no size: counted, adds no bytes (the statistics say so) */
            bytes[o->op] = cpa_sat_add(bytes[o->op], s);
    }
    cpr_labels l;
    cpr_prom_family(out, "collprof_ops_total", "counter",
           "Operations across ranks (a collective or a send/recv pair counts once), by op.");
    for (unsigned op = 0; op < CP_OP_COUNT; op++)
        if (count[op]) {
            cpr_lbl_reset(&l);
            cpr_lbl_add(&l, "op", cpr_op_label(op, 0));
            cpr_prom_u64(out, "collprof_ops_total", &l, count[op]);
        }
    cpr_prom_family(out, "collprof_bytes_total", "counter",
           "Bytes of the operations as nccl-tests counts them (S), by op.");
    for (unsigned op = 0; op < CP_OP_COUNT; op++)
        if (count[op]) {
            cpr_lbl_reset(&l);
            cpr_lbl_add(&l, "op", cpr_op_label(op, 0));
            cpr_prom_u64(out, "collprof_bytes_total", &l, bytes[op]);
        }
}

/* "bytes" is the bucket's lower end: a label per exact size would make a series per
 * message size, which a job with variable sizes (MoE, packed sequences) has thousands of. */
static void op_bucket_labels(cpr_labels *l, const cpa_stat *r)
{
    cpr_lbl_reset(l);
    cpr_lbl_add(l, "op", cpr_op_label(r->op, 0));
    char b[32], n[16];
    snprintf(n, sizeof n, "%d", (int)r->nranks);
    cpr_lbl_add(l, "nranks", n);
    snprintf(b, sizeof b, "%" PRIu64, r->size);
    cpr_lbl_add(l, "bytes", b);
}

static int stat_metrics(FILE *out, const cpa_analysis *a)
{
    cpa_stats buckets;
    char err[128];
    if (cpa_stats_compute(a->model, &a->matched, CPA_ROWS_BUCKETS, &buckets, err, sizeof err))
        return -1;
    const cpa_stats *s = &buckets;
    cpr_labels l;
    cpr_prom_family(out, "collprof_op_duration_seconds", "summary",
           "Duration of an operation (its time as the report's op table takes it), by op, "
           "communicator size and power-of-two size bucket.");
    for (size_t i = 0; i < s->nrows; i++) {
        const cpa_stat *r = &s->rows[i];
        static const char *const q[] = { "0.5", "0.99" };
        double v[] = { r->time_us_p50 / 1e6, r->time_us_p99 / 1e6 };
        for (int k = 0; k < 2; k++) {
            op_bucket_labels(&l, r);
            cpr_lbl_add(&l, "quantile", q[k]);
            cpr_prom_sample(out, "collprof_op_duration_seconds", &l, v[k]);
        }
        op_bucket_labels(&l, r);
        cpr_prom_sample(out, "collprof_op_duration_seconds_sum", &l, r->time_us_total / 1e6);
        cpr_prom_u64(out, "collprof_op_duration_seconds_count", &l, r->ops);
    }
    cpr_prom_family(out, "collprof_algbw_bytes_per_second", "gauge",
           "Algorithm bandwidth (nccl-tests: S / t) by op, communicator size and size bucket.");
    for (size_t i = 0; i < s->nrows; i++) {
        op_bucket_labels(&l, &s->rows[i]);
        cpr_prom_sample(out, "collprof_algbw_bytes_per_second", &l, s->rows[i].algbw_gbps * 1e9);
    }
    cpr_prom_family(out, "collprof_busbw_bytes_per_second", "gauge",
           "Bus bandwidth (nccl-tests: algbw x the op's factor) by op, communicator size and "
           "size bucket.");
    for (size_t i = 0; i < s->nrows; i++) {
        op_bucket_labels(&l, &s->rows[i]);
        cpr_prom_sample(out, "collprof_busbw_bytes_per_second", &l, s->rows[i].busbw_gbps * 1e9);
    }
    cpa_stats_free(&buckets);
    return 0;
}

/* A rank's label set, or 0 when an earlier file already claimed that rank. */
static int rank_labels(cpr_labels *l, const cpa_model *m, size_t ri)
{
    if (ri > 0 && m->ranks[ri - 1].rank == m->ranks[ri].rank)
        return 0;
    cpr_lbl_reset(l);
    cpr_lbl_int(l, "rank", m->ranks[ri].rank);
    return 1;
}

static void straggler_metrics(FILE *out, const cpa_analysis *a, const cpa_straggler **by_rank)
{
    const cpa_model *m = a->model;
    static const char *const kinds[] = { "none", "persistent", "rotating" };
    cpr_labels l;
    cpr_prom_family(out, "collprof_straggler_kind", "gauge",
           "1 for the kind of lateness found: none, persistent (one rank) or rotating.");
    for (int k = 0; k < 3; k++) {
        cpr_lbl_reset(&l);
        cpr_lbl_add(&l, "kind", kinds[k]);
        cpr_prom_sample(out, "collprof_straggler_kind", &l, a->stragglers.kind == k ? 1 : 0);
    }
    cpr_prom_family(out, "collprof_straggler_late_collectives_total", "counter",
           "Collectives in which the rank arrived last, late by more than the threshold.");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (by_rank[ri] && rank_labels(&l, m, ri))
            cpr_prom_u64(out, "collprof_straggler_late_collectives_total", &l,
                       by_rank[ri]->late_count);
    cpr_prom_family(out, "collprof_straggler_late_seconds_total", "counter",
           "Sum of the rank's lateness over the collectives it was late in.");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (by_rank[ri] && rank_labels(&l, m, ri))
            cpr_prom_sample(out, "collprof_straggler_late_seconds_total", &l,
                   by_rank[ri]->late_us_total / 1e6);
    cpr_prom_family(out, "collprof_straggler_share", "gauge",
           "Share of the judged collectives the rank took part in where it was the late one.");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (by_rank[ri] && rank_labels(&l, m, ri))
            cpr_prom_sample(out, "collprof_straggler_share", &l, by_rank[ri]->share);
    cpr_prom_family(out, "collprof_straggler_late_by_cause_total", "counter",
           "The rank's late collectives by cause: host (entered NCCL late), gpu_backlog (its "
           "stream started late behind other GPU work), in_collective (its stream was still in "
           "an earlier NCCL operation).");
    for (size_t ri = 0; ri < m->nranks; ri++)
        for (int k = CPA_CAUSE_HOST; by_rank[ri] && k < CPA_CAUSES; k++)
            if (rank_labels(&l, m, ri)) {
                cpr_lbl_add(&l, "cause", cpa_late_cause_name(k));
                cpr_prom_u64(out, "collprof_straggler_late_by_cause_total", &l,
                           by_rank[ri]->by_cause[k]);
            }
    int kernels = 0;
    for (size_t ri = 0; ri < m->nranks; ri++)
        kernels |= by_rank[ri] && by_rank[ri]->kernel[0];
    if (!kernels)
        return;
    cpr_prom_family(out, "collprof_straggler_kernel_before_longer_seconds", "gauge",
           "For a GPU-backlog straggler (COLLPROF_GPU_TIMING=cupti): how much longer than on its "
           "peers (median) the kernel before its late collectives ran, by kernel.");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (by_rank[ri] && by_rank[ri]->kernel[0] && rank_labels(&l, m, ri)) {
            cpr_lbl_add(&l, "kernel", by_rank[ri]->kernel);
            cpr_prom_sample(out, "collprof_straggler_kernel_before_longer_seconds", &l,
                            by_rank[ri]->kernel_longer_us_p50 / 1e6);
        }
}

static void rank_metrics(FILE *out, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    if (!a->ranks)
        return;
    cpr_labels l;
    cpr_prom_family(out, "collprof_rank_nccl_seconds_total", "counter",
           "Time the rank spent in NCCL operations (the union of their intervals).");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (rank_labels(&l, m, ri)) {
            cpr_lbl_add(&l, "host", m->ranks[ri].hostname);
            cpr_prom_sample(out, "collprof_rank_nccl_seconds_total", &l, a->ranks[ri].nccl_time_s);
        }
    cpr_prom_family(out, "collprof_rank_nccl_share", "gauge",
           "Time in NCCL over the rank's first-to-last record.");
    for (size_t ri = 0; ri < m->nranks; ri++)
        if (rank_labels(&l, m, ri)) {
            cpr_lbl_add(&l, "host", m->ranks[ri].hostname);
            cpr_prom_sample(out, "collprof_rank_nccl_share", &l, a->ranks[ri].share);
        }
}

/* Two findings at the same place would be two samples of one series, which a scraper
 * refuses: the later is left out. Findings are few (one per communicator at most). */
typedef struct seen {
    char **sets;
    size_t n;
} seen;

static int first_time(seen *s, const cpr_labels *l)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->sets[i], l->buf) == 0)
            return 0;
    char **grown = realloc(s->sets, (s->n + 1) * sizeof *grown);
    char *copy = strdup(l->buf);
    if (!grown || !copy) {
        free(copy);
        if (grown)
            s->sets = grown;
        return 0; /* out of memory: leaving a sample out is safer than a duplicate series */
    }
    s->sets = grown;
    s->sets[s->n++] = copy;
    return 1;
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->sets[i]);
    free(s->sets);
    s->sets = NULL;
    s->n = 0;
}

static void finding_metrics(FILE *out, const cpa_analysis *a)
{
    cpr_labels l;
    seen once = { 0 };
    char comm[17], seq[32], ranks[256];
    cpr_prom_family(out, "collprof_hangs", "gauge", "Operations that never finished everywhere.");
    cpr_prom_u64(out, "collprof_hangs", NULL, a->hangs.nrows);
    cpr_prom_family(out, "collprof_hang_info", "gauge", "1 per hang: where it is and its verdict.");
    for (size_t i = 0; i < a->hangs.nrows; i++) {
        const cpa_hang *h = &a->hangs.rows[i];
        cpr_lbl_reset(&l);
        cpr_fmt_comm(comm, h->comm_id);
        snprintf(seq, sizeof seq, "%" PRIu64, h->seq);
        cpr_fmt_ranks(ranks, sizeof ranks, h->missing_ranks, h->nmissing);
        cpr_lbl_add(&l, "comm", comm);
        cpr_lbl_add(&l, "seq", seq);
        cpr_lbl_add(&l, "op", cpr_op_label(h->op, 0));
        cpr_lbl_add(&l, "verdict", cpa_hang_verdict_name(h->verdict));
        cpr_lbl_add(&l, "missing_ranks", ranks);
        if (first_time(&once, &l))
            cpr_prom_sample(out, "collprof_hang_info", &l, 1);
    }
    seen_free(&once);
    uint64_t total = a->mismatches.total > a->mismatches.nrows ? a->mismatches.total
                                                                : a->mismatches.nrows;
    cpr_prom_family(out, "collprof_mismatches", "gauge",
           "Operations whose ranks disagreed on op, count, dtype, redop, root or peer.");
    cpr_prom_u64(out, "collprof_mismatches", NULL, total);
    cpr_prom_family(out, "collprof_mismatch_info", "gauge", "1 per mismatch kept: where, which field, "
                                                   "and the culprit ranks.");
    for (size_t i = 0; i < a->mismatches.nrows; i++) {
        const cpa_mismatch *x = &a->mismatches.rows[i];
        cpr_lbl_reset(&l);
        cpr_fmt_comm(comm, x->comm_id);
        snprintf(seq, sizeof seq, "%" PRIu64, x->seq);
        cpr_fmt_ranks(ranks, sizeof ranks, x->culprit_ranks, x->nculprits);
        cpr_lbl_add(&l, "comm", comm);
        cpr_lbl_add(&l, "seq", seq);
        cpr_lbl_add(&l, "field", cpa_field_name(x->field));
        cpr_lbl_add(&l, "culprit_ranks", ranks);
        if (first_time(&once, &l))
            cpr_prom_sample(out, "collprof_mismatch_info", &l, 1);
    }
    seen_free(&once);
}

int cpx_export_prometheus(FILE *out, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    const cpa_straggler **by_rank = calloc(m->nranks ? m->nranks : 1, sizeof *by_rank);
    if (!by_rank) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < a->stragglers.nrows; i++)
        if (a->stragglers.rows[i].rank_idx < m->nranks)
            by_rank[a->stragglers.rows[i].rank_idx] = &a->stragglers.rows[i];
    job_metrics(out, a);
    op_counters(out, a);
    if (stat_metrics(out, a)) {
        free(by_rank);
        errno = ENOMEM;
        return -1;
    }
    straggler_metrics(out, a, by_rank);
    rank_metrics(out, a);
    finding_metrics(out, a);
    free(by_rank);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
