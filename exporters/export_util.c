/* export_util: formatting and the timeline the exporters share (export_util.h). */
#include "exporters/export_util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

const char *cpx_op_label(unsigned op, int pairs)
{
    if (op == CP_OP_SEND && pairs)
        return "Send/Recv";
    return cp_op_name(op);
}

void cpx_fmt_size(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    unsigned u = 0;
    uint64_t v = bytes;
    while (u + 1 < sizeof units / sizeof units[0] && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    /* Never rounded ("97.5 MiB"): two messages a few bytes apart would read alike, and
     * neither as nccl-tests prints it. */
    snprintf(buf, len, "%" PRIu64 " %s", v, units[u]);
}

void cpx_fmt_stat_header(char *buf, size_t len)
{
    snprintf(buf, len, CPX_STAT_HEADER_FMT, "op", "ranks", "size", "ops", "p50 us", "p99 us",
             "algbw GB/s", "busbw GB/s");
}

void cpx_fmt_stat_row(char *buf, size_t len, const cpa_stats *s, const cpa_stat *row)
{
    char size[32], ranks[16], exact[24];
    cpx_fmt_size(exact, sizeof exact, row->size);
    /* a bucket holds [size, 2 size) */
    snprintf(size, sizeof size, "%s%s", s->kind == CPA_ROWS_BUCKETS && row->size ? ">=" : "",
             exact);
    snprintf(ranks, sizeof ranks, "%d", (int)row->nranks);
    snprintf(buf, len, "%-13s %5s %12s %7" PRIu64 " %8.1f %8.1f %10.2f %10.2f",
             cpx_op_label(row->op, 1), ranks, size, row->ops, row->time_us_p50,
             row->time_us_p99, row->algbw_gbps, row->busbw_gbps);
}

void cpx_fmt_ranks(char *buf, size_t len, const int32_t *ranks, size_t n)
{
    if (!len)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        char part[40];
        if (j == i)
            snprintf(part, sizeof part, "%s%" PRId32, i ? "," : "", ranks[i]);
        else if (j == i + 1)
            snprintf(part, sizeof part, "%s%" PRId32 ",%" PRId32, i ? "," : "", ranks[i],
                     ranks[j]);
        else
            snprintf(part, sizeof part, "%s%" PRId32 "-%" PRId32, i ? "," : "", ranks[i],
                     ranks[j]);
        size_t plen = strlen(part);
        /* Keep room for ",..." so a cut list says it is cut. */
        if (used + plen + (j + 1 < n ? 4 : 0) >= len) {
            if (used + 4 < len)
                memcpy(buf + used, ",...", 5);
            else if (len > 3)
                memcpy(buf + len - 4, "...", 4);
            return;
        }
        memcpy(buf + used, part, plen + 1);
        used += plen;
        i = j + 1;
    }
}

const char *cpx_fmt_ns_us(char buf[32], int64_t ns)
{
    char *q = buf + 32;
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    *--q = '\0';
    for (int i = 0; i < 3; i++, v /= 10)
        *--q = (char)('0' + v % 10);
    *--q = '.';
    do {
        *--q = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (ns < 0)
        *--q = '-';
    return q;
}

void cpx_fmt_comm(char buf[17], uint64_t comm_id)
{
    snprintf(buf, 17, "%016" PRIx64, comm_id);
}

void cpx_fmt_site(char *buf, size_t len, const char *site)
{
    if (!len)
        return;
    if (!site) {
        buf[0] = '\0';
        return;
    }
    if (cp_text_escape(buf, len, site, strlen(site)) < len)
        return;
    if (len < 4) {
        buf[0] = '\0';
        return;
    }
    /* Innermost frames come first: keep the head, cut at a whole character or escape. */
    cp_text_escape(buf, len - 3, site, strlen(site));
    strcat(buf, "...");
}

long cpx_rank_index(const cpa_model *m, int32_t rank)
{
    /* Ranks are sorted by rank (load.c); files without one sort first as -1. */
    size_t lo = 0, hi = m->nranks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ranks[mid].rank == rank)
            return (long)mid;
        if (m->ranks[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const char *cpx_signal_name(int sig, char *buf)
{
    const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
    if (abbrev)
        snprintf(buf, 16, "SIG%.12s", abbrev);
    else
        snprintf(buf, 16, "signal %d", sig);
    return buf;
}

double cpx_row_algo_proto(const cpa_stat *row, unsigned *algo, unsigned *proto)
{
    uint64_t total = 0, best = 0;
    *algo = *proto = 0;
    for (unsigned a = 0; a < CP_ALGO_COUNT; a++)
        for (unsigned p = 0; p < CP_PROTO_COUNT; p++) {
            uint32_t n = row->algo_proto[a][p];
            total += n;
            if (n > best) {
                best = n;
                *algo = a;
                *proto = p;
            }
        }
    return total ? (double)best / (double)total : 0;
}

void cpx_fmt_algo_proto(char *buf, size_t len, const cpa_stat *row)
{
    unsigned a, p;
    double share = cpx_row_algo_proto(row, &a, &p);
    if (share <= 0)
        snprintf(buf, len, "-");
    else if (share >= 1)
        snprintf(buf, len, "%s/%s", cp_algo_name(a), cp_proto_name(p));
    else
        snprintf(buf, len, "%s/%s %.0f%%", cp_algo_name(a), cp_proto_name(p), 100.0 * share);
}

void cpx_holes_text(char *buf, size_t len, const cpa_analysis *a, long *first_rank,
                    double *first_s)
{
    const cpa_model *m = a->model;
    long fr = -1;
    double fs = NAN;
    if (len)
        buf[0] = '\0';
    if (first_rank)
        *first_rank = -1;
    if (first_s)
        *first_s = NAN;
    if (!cpa_model_has_holes(m) || !len)
        return;
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        if (!cpa_rank_has_holes(r) || !r->integrity.first_gap_ns)
            continue;
        double s = cpa_job_us(a, i, r->integrity.first_gap_ns) / 1e6;
        if (fr < 0 || s < fs) {
            fr = (long)i;
            fs = s;
        }
    }
    cpa_integrity_text(buf, len, &m->integrity, m->lost_records);
    size_t n = strlen(buf);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "; %zu of %zu rank%s", m->ranks_with_holes,
                              m->nranks, m->nranks == 1 ? "" : "s");
    if (fr >= 0 && n < len)
        snprintf(buf + n, len - n, ", the first at %+.3f s (rank %d)", fs,
                 (int)m->ranks[fr].rank);
    if (first_rank)
        *first_rank = fr;
    if (first_s)
        *first_s = fs;
}

const char *cpx_holes_caveat(const cpa_analysis *a)
{
    return cpa_model_has_holes(a->model)
               ? "(the trace has holes, see job: these figures may leave operations out)"
               : "";
}
