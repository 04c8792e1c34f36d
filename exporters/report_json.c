/* report_json: `collprof report --json`, the contract's object (shared/INTERFACES.md) and the
 * keys docs/REPORT.md adds. Arrays are worst first; rank-keyed objects use the global rank
 * as a decimal string; comm ids are 16 hex digits (a JSON number would lose their low bits
 * in most readers). Numbers keep the decimals chosen here rather than json-c's 17 digits.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"

/* json-c returns NULL only when out of memory; adding NULL to an object stores a JSON null,
 * so a failed allocation is found once at the end by checking a flag, not after each call. */
typedef struct jb {
    int oom;
} jb;

static json_object *chk(jb *b, json_object *o)
{
    if (!o)
        b->oom = 1;
    return o;
}

static void put(jb *b, json_object *obj, const char *key, json_object *v)
{
    if (!obj || !v || json_object_object_add(obj, key, v) != 0) {
        b->oom = 1;
        json_object_put(v);
    }
}

static void push(jb *b, json_object *arr, json_object *v)
{
    if (!arr || !v || json_object_array_add(arr, v) != 0) {
        b->oom = 1;
        json_object_put(v);
    }
}

static json_object *num(jb *b, double v, int decimals)
{
    char buf[64];
    if (!isfinite(v))
        v = 0;
    snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return chk(b, json_object_new_double_s(v, buf));
}

static json_object *str(jb *b, const char *s)
{
    char *clean = cp_text_escape_dup(s ? s : "", s ? strlen(s) : 0);
    if (!clean)
        return chk(b, NULL);
    json_object *o = chk(b, json_object_new_string(clean));
    free(clean);
    return o;
}

static json_object *comm_str(jb *b, uint64_t id)
{
    char hex[17];
    cpr_fmt_comm(hex, id);
    return chk(b, json_object_new_string(hex));
}

static json_object *rank_array(jb *b, const int32_t *ranks, size_t n)
{
    json_object *arr = chk(b, json_object_new_array_ext((int)(n < 1024 ? n : 1024)));
    for (size_t i = 0; i < n; i++)
        push(b, arr, chk(b, json_object_new_int(ranks[i])));
    return arr;
}

static size_t limit(size_t n, size_t top)
{
    return top && n > top ? top : n;
}

/* What a trace (or all of them) lacks: lost records by cause, unknown records, chunks
 * missing or corrupt, files cut short. */
static json_object *integrity(jb *b, const cpa_integrity *g, uint64_t lost)
{
    json_object *o = chk(b, json_object_new_object());
    json_object *causes = chk(b, json_object_new_object());
    uint64_t by_cause = 0;
    for (unsigned c = 0; c <= CP_LOST_CAUSE_LAST; c++) {
        by_cause += g->lost_by_cause[c];
        if (g->lost_by_cause[c])
            put(b, causes, c ? cp_lost_cause_name(c) : "unknown",
                chk(b, json_object_new_uint64(g->lost_by_cause[c])));
    }
    /* drops the chunk headers count whose LOST record never reached the disk */
    if (lost > by_cause)
        put(b, causes, "untold", chk(b, json_object_new_uint64(lost - by_cause)));
    put(b, o, "lost_by_cause", causes);
    put(b, o, "unknown_records", chk(b, json_object_new_uint64(g->unknown_records)));
    put(b, o, "missing_chunks", chk(b, json_object_new_uint64(g->missing_chunks)));
    put(b, o, "corrupt_chunks", chk(b, json_object_new_uint64(g->corrupt_chunks)));
    put(b, o, "truncated_files", chk(b, json_object_new_uint64(g->truncated)));
    return o;
}

/* {"ncclInvalidArgument": {"calls": 1, "first_rank": 3, "first_call": "Broadcast root 99"}} */
static json_object *refused(jb *b, const cpa_analysis *a)
{
    const cpa_refused *x = &a->refused;
    json_object *o = chk(b, json_object_new_object());
    for (unsigned k = 0; k < CPA_NCCL_RESULTS; k++) {
        if (!x->by_result[k])
            continue;
        json_object *e = chk(b, json_object_new_object());
        put(b, e, "calls", chk(b, json_object_new_uint64(x->by_result[k])));
        int32_t ri = x->first_rank_idx[k];
        if (ri >= 0) {
            const cpa_rank *r = &a->model->ranks[ri];
            char what[64];
            cpa_call_args(what, sizeof what, &r->calls[x->first_call[k]]);
            put(b, e, "first_rank", chk(b, json_object_new_int(r->rank)));
            put(b, e, "first_call", str(b, what));
        }
        put(b, o, cpr_result_id(k), e);
    }
    return o;
}

static json_object *job(jb *b, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    json_object *o = chk(b, json_object_new_object());
    put(b, o, "ranks", chk(b, json_object_new_uint64(m->nranks)));
    json_object *hosts = chk(b, json_object_new_array());
    for (size_t i = 0; i < a->nhosts; i++)
        push(b, hosts, str(b, a->hosts[i]));
    put(b, o, "hosts", hosts);
    put(b, o, "records", chk(b, json_object_new_uint64(m->records)));
    put(b, o, "lost_records", chk(b, json_object_new_uint64(m->lost_records)));
    put(b, o, "lost_at_least", chk(b, json_object_new_boolean(cpa_lost_at_least(m))));
    /* a rotated trace (COLLPROF_MAX_MB): what was deleted, and from when every rank is here */
    put(b, o, "rotated_records", chk(b, json_object_new_uint64(m->rotated_records)));
    double kept_from;
    char rot[512];
    cpr_rotated_text(rot, sizeof rot, a, &kept_from);
    if (m->rotated_records && isfinite(kept_from))
        put(b, o, "kept_from_s", num(b, kept_from, 6));
    put(b, o, "duration_s", num(b, a->duration_s, 6));
    uint64_t calls = 0;
    for (size_t i = 0; i < m->nranks; i++)
        calls += m->ranks[i].ncalls;
    put(b, o, "calls", chk(b, json_object_new_uint64(calls)));
    put(b, o, "operations", chk(b, json_object_new_uint64(a->matched.nops)));
    put(b, o, "unmatched_calls", chk(b, json_object_new_uint64(a->matched.unmatchable)));
    /* How the job ended, as the hang finder judged it: stopped as a whole (the signal every
     * END names, or "killed": no END anywhere), with the operations that were only in
     * flight then, and those no one can judge because a missing rank lost records. */
    const cpa_hangs *h = &a->hangs;
    char sig[16];
    if (h->stop_signal)
        put(b, o, "stopped_by",
            chk(b, json_object_new_string(h->stop_signal > 0
                                              ? cpr_signal_name(h->stop_signal, sig)
                                              : "killed")));
    /* "killed" above is the contract's name for "no END anywhere", which a file system that
     * stopped taking writes leaves too: this count is the evidence, whatever the cause */
    size_t unended = 0;
    for (size_t i = 0; i < m->nranks; i++)
        unended += !m->ranks[i].ended;
    put(b, o, "unended_ranks", chk(b, json_object_new_uint64(unended)));
    put(b, o, "interrupted_operations", chk(b, json_object_new_uint64(h->interrupted)));
    put(b, o, "unjudged_operations", chk(b, json_object_new_uint64(h->unknown)));
    put(b, o, "oversized_operations", chk(b, json_object_new_uint64(a->stats.oversized)));
    put(b, o, "aborted_operations", chk(b, json_object_new_uint64(a->stats.aborted)));
    put(b, o, "refused_calls", chk(b, json_object_new_uint64(a->refused.total)));
    put(b, o, "refused_by_result", refused(b, a));
    json_object *g = integrity(b, &m->integrity, m->lost_records);
    put(b, g, "holes", chk(b, json_object_new_boolean(cpa_model_has_holes(m))));
    put(b, g, "ranks_with_holes", chk(b, json_object_new_uint64(m->ranks_with_holes)));
    long first;
    double first_s;
    char text[512];
    cpr_holes_text(text, sizeof text, a, &first, &first_s);
    if (first >= 0) {
        json_object *f = chk(b, json_object_new_object());
        put(b, f, "rank", chk(b, json_object_new_int(m->ranks[first].rank)));
        put(b, f, "t_s", num(b, first_s, 6));
        put(b, g, "first_hole", f);
    }
    put(b, o, "integrity", g);
    return o;
}

/* Where the time goes first: total time, then the analyzer's (op, nranks, size) order. */
static int cmp_stat_time(const void *x, const void *y)
{
    const cpa_stat *p = *(const cpa_stat *const *)x, *q = *(const cpa_stat *const *)y;
    if (p->time_us_total != q->time_us_total)
        return p->time_us_total > q->time_us_total ? -1 : 1;
    return p < q ? -1 : p > q;
}

/* The contract's "algo" and "proto": the pair NCCL's plugin named for most of the row's
 * operations; absent when it named none. */
static void put_algo_proto(jb *b, json_object *o, const cpa_stat *r)
{
    unsigned al, pr;
    if (cpr_row_algo_proto(r, &al, &pr) <= 0)
        return;
    put(b, o, "algo", chk(b, json_object_new_string(cp_algo_name(al))));
    put(b, o, "proto", chk(b, json_object_new_string(cp_proto_name(pr))));
}

static json_object *ops(jb *b, const cpa_analysis *a, size_t top)
{
    const cpa_stats *s = &a->stats;
    json_object *arr = chk(b, json_object_new_array());
    const cpa_stat **order = malloc((s->nrows ? s->nrows : 1) * sizeof *order);
    if (!order) {
        b->oom = 1;
        return arr;
    }
    for (size_t i = 0; i < s->nrows; i++)
        order[i] = &s->rows[i];
    qsort(order, s->nrows, sizeof *order, cmp_stat_time);
    for (size_t i = 0; i < limit(s->nrows, top); i++) {
        const cpa_stat *r = order[i];
        json_object *o = chk(b, json_object_new_object());
        put(b, o, "op", chk(b, json_object_new_string(cpr_op_label(r->op, 0))));
        put(b, o, "bytes", chk(b, json_object_new_uint64(r->size)));
        put(b, o, "nranks", chk(b, json_object_new_int(r->nranks)));
        put(b, o, "ops", chk(b, json_object_new_uint64(r->ops)));
        put(b, o, "calls", chk(b, json_object_new_uint64(r->calls)));
        /* what every operation of the row shares; absent where they differ */
        if (r->dtype != CPA_MIXED)
            put(b, o, "dtype", chk(b, json_object_new_string(cp_dtype_name(r->dtype))));
        if (r->redop != CPA_MIXED && r->redop != CP_REDOP_NONE)
            put(b, o, "redop", chk(b, json_object_new_string(cp_redop_name(r->redop))));
        if (r->root >= 0)
            put(b, o, "root", chk(b, json_object_new_int(r->root)));
        if (r->dtype != CPA_MIXED && cp_dtype_size(r->dtype))
            put(b, o, "count", chk(b, json_object_new_uint64(r->size / cp_dtype_size(r->dtype))));
        put(b, o, "time_us_p50", num(b, r->time_us_p50, 3));
        put(b, o, "time_us_p99", num(b, r->time_us_p99, 3));
        put(b, o, "algbw_gbps", num(b, r->algbw_gbps, 3));
        put(b, o, "busbw_gbps", num(b, r->busbw_gbps, 3));
        put(b, o, "bytes_total", chk(b, json_object_new_uint64(r->bytes)));
        put(b, o, "time_us_total", num(b, r->time_us_total, 3));
        put(b, o, "send_recv_pairs", chk(b, json_object_new_boolean(r->op == CP_OP_SEND)));
        json_object *src = chk(b, json_object_new_object());
        put(b, src, "plugin", chk(b, json_object_new_uint64(r->timed_plugin)));
        put(b, src, "events", chk(b, json_object_new_uint64(r->timed_events)));
        put(b, src, "host", chk(b, json_object_new_uint64(r->timed_host)));
        put(b, src, "cupti", chk(b, json_object_new_uint64(r->timed_cupti)));
        put(b, o, "timing", src);
        json_object *algos = chk(b, json_object_new_object());
        for (unsigned al = 0; al < CP_ALGO_COUNT; al++)
            for (unsigned pr = 0; pr < CP_PROTO_COUNT; pr++)
                if (r->algo_proto[al][pr]) {
                    char key[48];
                    snprintf(key, sizeof key, "%s/%s", cp_algo_name(al), cp_proto_name(pr));
                    put(b, algos, key, chk(b, json_object_new_uint64(r->algo_proto[al][pr])));
                }
        json_object *nccl = chk(b, json_object_new_object());
        put(b, nccl, "algo_proto", algos);
        put(b, nccl, "channels_max", chk(b, json_object_new_int(r->channels_max)));
        put(b, o, "nccl", nccl);
        put_algo_proto(b, o, r);
        push(b, arr, o);
    }
    free(order);
    return arr;
}

static const char *rank_host(const cpa_analysis *a, size_t rank_idx)
{
    return rank_idx < a->model->nranks ? a->model->ranks[rank_idx].hostname : "";
}

static json_object *stragglers(jb *b, const cpa_analysis *a, size_t top)
{
    const cpa_stragglers *s = &a->stragglers;
    json_object *arr = chk(b, json_object_new_array());
    for (size_t i = 0; i < limit(s->nrows, top); i++) {
        const cpa_straggler *r = &s->rows[i];
        json_object *o = chk(b, json_object_new_object());
        put(b, o, "rank", chk(b, json_object_new_int(r->rank)));
        put(b, o, "late_count", chk(b, json_object_new_uint64(r->late_count)));
        put(b, o, "late_us_total", num(b, r->late_us_total, 3));
        put(b, o, "late_us_p50", num(b, r->late_us_p50, 3));
        put(b, o, "share", num(b, r->share, 4));
        put(b, o, "wait_us_total", num(b, r->wait_us_total, 3));
        put(b, o, "host", str(b, rank_host(a, r->rank_idx)));
        /* why (issue 19): the cause, each cause's count, the median host and GPU lateness */
        put(b, o, "cause", str(b, cpa_late_cause_name(r->cause)));
        json_object *bc = chk(b, json_object_new_object());
        for (int k = CPA_CAUSE_HOST; k < CPA_CAUSES; k++)
            put(b, bc, cpa_late_cause_name(k), chk(b, json_object_new_uint64(r->by_cause[k])));
        put(b, o, "late_by_cause", bc);
        put(b, o, "host_late_us_p50", num(b, r->host_late_us_p50, 3));
        if (!isnan(r->gpu_late_us_p50))
            put(b, o, "gpu_late_us_p50", num(b, r->gpu_late_us_p50, 3));
        if (r->held_op) {
            char comm[17];
            cpr_fmt_comm(comm, r->held_comm_id);
            json_object *h = chk(b, json_object_new_object());
            put(b, h, "op", str(b, cp_op_name(r->held_op)));
            put(b, h, "comm", str(b, comm));
            put(b, h, "nranks", chk(b, json_object_new_int(r->held_nranks)));
            put(b, o, "held_by", h);
        }
        if (r->kernel[0]) {
            json_object *k = chk(b, json_object_new_object());
            put(b, k, "name", str(b, r->kernel));
            put(b, k, "longer_us_p50", num(b, r->kernel_longer_us_p50, 3));
            put(b, k, "rank_us_p50", num(b, r->kernel_us_p50, 3));
            put(b, k, "peers_us_p50", num(b, r->kernel_peers_us_p50, 3));
            put(b, k, "collectives", chk(b, json_object_new_uint64(r->kernel_collectives)));
            put(b, o, "kernel_before", k);
        }
        char why[600];
        cpr_cause_text(why, sizeof why, r);
        put(b, o, "why", str(b, why));
        push(b, arr, o);
    }
    return arr;
}

static const char *straggler_kind(int kind)
{
    switch (kind) {
    case CPA_STRAGGLER_PERSISTENT: return "persistent";
    case CPA_STRAGGLER_ROTATING: return "rotating";
    default: return "none";
    }
}

static json_object *hangs(jb *b, const cpa_analysis *a, size_t top)
{
    const cpa_hangs *h = &a->hangs;
    json_object *arr = chk(b, json_object_new_array());
    for (size_t i = 0; i < limit(h->nrows, top); i++) {
        const cpa_hang *r = &h->rows[i];
        json_object *o = chk(b, json_object_new_object());
        put(b, o, "comm", comm_str(b, r->comm_id));
        put(b, o, "seq", chk(b, json_object_new_uint64(r->seq)));
        put(b, o, "op", chk(b, json_object_new_string(cpr_op_label(r->op, 0))));
        put(b, o, "verdict", chk(b, json_object_new_string(cpa_hang_verdict_name(r->verdict))));
        put(b, o, "missing_ranks", rank_array(b, r->missing_ranks, r->nmissing));
        put(b, o, "waiting_ranks", rank_array(b, r->waiting_ranks, r->nwaiting));
        put(b, o, "age_s", num(b, r->age_s, 3));
        put(b, o, "aborted", chk(b, json_object_new_boolean(r->aborted)));
        put(b, o, "last", str(b, r->last));
        push(b, arr, o);
    }
    return arr;
}

/* op, dtype and redop by name (their numbers are collprof's or NCCL's enums, which a reader
 * should not need to know); count, root and peer as numbers. */
static json_object *mismatch_value(jb *b, int field, int64_t v)
{
    switch (field) {
    case CPA_FIELD_OP:
        return chk(b, json_object_new_string(v >= 0 && v <= 255 ? cp_op_name((unsigned)v) : "?"));
    case CPA_FIELD_DTYPE:
        return chk(b, json_object_new_string(v >= 0 && v <= 255 ? cp_dtype_name((unsigned)v)
                                                                : "?"));
    case CPA_FIELD_REDOP:
        return chk(b, json_object_new_string(v >= 0 && v <= 255 ? cp_redop_name((unsigned)v)
                                                                : "?"));
    case CPA_FIELD_COUNT: /* a u64 kept in an int64_t (analyzer.h) */
        return chk(b, json_object_new_uint64((uint64_t)v));
    default:
        return chk(b, json_object_new_int64(v));
    }
}

static json_object *mismatches(jb *b, const cpa_analysis *a, size_t top)
{
    const cpa_mismatches *x = &a->mismatches;
    json_object *arr = chk(b, json_object_new_array());
    for (size_t i = 0; i < limit(x->nrows, top); i++) {
        const cpa_mismatch *r = &x->rows[i];
        json_object *o = chk(b, json_object_new_object());
        put(b, o, "comm", comm_str(b, r->comm_id));
        put(b, o, "seq", chk(b, json_object_new_uint64(r->seq)));
        put(b, o, "field", chk(b, json_object_new_string(cpa_field_name(r->field))));
        json_object *values = chk(b, json_object_new_object());
        json_object *sites = chk(b, json_object_new_object());
        for (size_t k = 0; k < r->nvalues; k++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)r->values[k].rank);
            put(b, values, key, mismatch_value(b, r->field, r->values[k].value));
            if (r->values[k].site)
                put(b, sites, key, str(b, r->values[k].site));
        }
        put(b, o, "values", values);
        put(b, o, "culprit_ranks", rank_array(b, r->culprit_ranks, r->nculprits));
        put(b, o, "sites", sites);
        push(b, arr, o);
    }
    return arr;
}

static json_object *clock(jb *b, const cpa_analysis *a)
{
    const cpa_clock *c = &a->clock;
    const cpa_model *m = a->model;
    json_object *o = chk(b, json_object_new_object());
    put(b, o, "aligned", chk(b, json_object_new_boolean(c->aligned != 0)));
    json_object *offsets = chk(b, json_object_new_object());
    for (size_t i = 0; i < m->nranks; i++) {
        double off = 0;
        if (c->rank_domain && c->rank_domain[i] < c->ndomains)
            off = c->domains[c->rank_domain[i]].offset_ns / 1e3;
        char key[16];
        snprintf(key, sizeof key, "%d", (int)m->ranks[i].rank);
        put(b, offsets, key, num(b, off, 3));
    }
    put(b, o, "offsets_us", offsets);
    put(b, o, "error_us", num(b, c->error_us, 3));
    put(b, o, "rejected_samples", chk(b, json_object_new_uint64(c->rejected_samples)));
    json_object *hosts = chk(b, json_object_new_array());
    for (size_t d = 0; d < c->ndomains; d++) {
        const cpa_clock_domain *dom = &c->domains[d];
        json_object *h = chk(b, json_object_new_object());
        put(b, h, "host", str(b, dom->hostname));
        json_object *ranks = chk(b, json_object_new_array());
        for (size_t i = 0; i < m->nranks; i++)
            if (c->rank_domain && c->rank_domain[i] == d)
                push(b, ranks, chk(b, json_object_new_int(m->ranks[i].rank)));
        put(b, h, "ranks", ranks);
        put(b, h, "offset_us", num(b, dom->offset_ns / 1e3, 3));
        put(b, h, "drift_ppm", num(b, dom->drift * 1e6, 3));
        put(b, h, "error_us", num(b, dom->error_ns / 1e3, 3));
        put(b, h, "samples", chk(b, json_object_new_uint64(dom->samples)));
        put(b, h, "refined", chk(b, json_object_new_boolean(dom->refined != 0)));
        put(b, h, "reference", chk(b, json_object_new_boolean(d == 0)));
        push(b, hosts, h);
    }
    put(b, o, "hosts", hosts);
    return o;
}

static json_object *per_rank(jb *b, const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    json_object *arr = chk(b, json_object_new_array());
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        json_object *o = chk(b, json_object_new_object());
        put(b, o, "rank", chk(b, json_object_new_int(r->rank)));
        put(b, o, "host", str(b, r->hostname));
        put(b, o, "calls", chk(b, json_object_new_uint64(r->ncalls)));
        if (a->ranks) {
            put(b, o, "nccl_time_s", num(b, a->ranks[i].nccl_time_s, 6));
            put(b, o, "duration_s", num(b, a->ranks[i].duration_s, 6));
            put(b, o, "share", num(b, a->ranks[i].share, 4));
        }
        put(b, o, "records", chk(b, json_object_new_uint64(r->records)));
        put(b, o, "lost_records", chk(b, json_object_new_uint64(r->lost_records)));
        put(b, o, "integrity", integrity(b, &r->integrity, r->lost_records));
        if (r->integrity.first_gap_ns)
            put(b, o, "first_hole_s",
                num(b, cpa_job_us(a, i, r->integrity.first_gap_ns) / 1e6, 6));
        put(b, o, "ended", chk(b, json_object_new_boolean(r->ended != 0)));
        if (r->ended && r->end_signal)
            put(b, o, "signal", chk(b, json_object_new_int(r->end_signal)));
        push(b, arr, o);
    }
    return arr;
}

json_object *cpx_report_json_object(const cpa_analysis *a, size_t top)
{
    jb b = { 0 };
    json_object *root = chk(&b, json_object_new_object());
    put(&b, root, "version", chk(&b, json_object_new_int(1)));
    put(&b, root, "job", job(&b, a));
    put(&b, root, "ops", ops(&b, a, top));
    put(&b, root, "stragglers", stragglers(&b, a, top));
    put(&b, root, "straggler_kind",
        chk(&b, json_object_new_string(straggler_kind(a->stragglers.kind))));
    json_object *sstats = chk(&b, json_object_new_object());
    put(&b, sstats, "judged", chk(&b, json_object_new_uint64(a->stragglers.judged)));
    put(&b, sstats, "late", chk(&b, json_object_new_uint64(a->stragglers.late)));
    put(&b, sstats, "threshold_us", num(&b, a->stragglers.threshold_us, 3));
    put(&b, sstats, "ranks", chk(&b, json_object_new_uint64(a->stragglers.nrows)));
    put(&b, root, "straggler_stats", sstats);
    put(&b, root, "hangs", hangs(&b, a, top));
    put(&b, root, "mismatches", mismatches(&b, a, top));
    uint64_t total = a->mismatches.total > a->mismatches.nrows ? a->mismatches.total
                                                                : a->mismatches.nrows;
    put(&b, root, "mismatches_total", chk(&b, json_object_new_uint64(total)));
    put(&b, root, "clock", clock(&b, a));
    put(&b, root, "per_rank", per_rank(&b, a));
    json_object *warnings = chk(&b, json_object_new_array());
    for (size_t i = 0; i < a->model->nwarnings; i++)
        push(&b, warnings, str(&b, a->model->warnings[i]));
    put(&b, root, "warnings", warnings);
    put(&b, root, "warnings_dropped", chk(&b, json_object_new_uint64(a->model->dropped_warnings)));
    if (b.oom) {
        json_object_put(root);
        errno = ENOMEM;
        return NULL;
    }
    return root;
}

int cpx_report_json(FILE *out, const cpa_analysis *a, size_t top)
{
    json_object *root = cpx_report_json_object(a, top);
    if (!root)
        return -1;
    const char *s = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = s && fputs(s, out) >= 0 && fputc('\n', out) != EOF ? 0 : -1;
    json_object_put(root);
    if (fflush(out) != 0 || ferror(out))
        rc = -1;
    return rc;
}
