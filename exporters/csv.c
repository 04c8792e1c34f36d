/* csv: one row per collective or send/recv call per rank, for pandas and spreadsheets.
 *
 * Rows by rank, then in the rank's call order. Times are microseconds on the job time line
 * since the job's start (three decimals: nanoseconds); a cell is empty when the trace does
 * not know it (no GPU time, an operation with no other rank to wait for). Fields holding a
 * comma, a quote or a line break are quoted with quotes doubled (RFC 4180); lines end in
 * LF. The column list is docs/REPORT.md's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"

static const char header[] =
    "rank,host,comm,seq,op,count,dtype,bytes,root_or_peer,stream,enter_us,start_us,end_us,"
    "dur_us,arrival_us,wait_us,late,site,timing,algo,proto,channels,nccl_seq,rank_holes,"
    "after_hole\n";

/* A text field, escaped and quoted when RFC 4180 wants it. */
static void field(FILE *out, const char *s)
{
    char *c = cp_text_escape_dup(s, strlen(s));
    if (!c) {
        fputs("?", out); /* out of memory for a cell: a visible placeholder, not a lie */
        return;
    }
    if (strpbrk(c, ",\"\r\n") == NULL) {
        fputs(c, out);
    } else {
        fputc('"', out);
        for (const char *p = c; *p; p++) {
            if (*p == '"')
                fputc('"', out);
            fputc(*p, out);
        }
        fputc('"', out);
    }
    free(c);
}

/* ",<microseconds>" from nanoseconds since the job's start. */
static void us(FILE *out, int64_t ns)
{
    char buf[32];
    fputc(',', out);
    fputs(cpr_fmt_ns_us(buf, ns), out);
}

static int64_t rel(const cpa_analysis *a, uint64_t job_ns)
{
    return (int64_t)(job_ns - a->start_ns);
}

static void row(FILE *out, const cpa_analysis *a, size_t ri, size_t ci)
{
    const cpa_rank *r = &a->model->ranks[ri];
    const cpa_call *c = &r->calls[ci];
    char comm[17];
    cpr_fmt_comm(comm, cpa_call_comm_id(r, c));

    fprintf(out, "%d,", (int)r->rank);
    field(out, r->hostname);
    fprintf(out, ",%s,", comm);
    if (c->seq != CPA_SEQ_NONE) /* else empty: a call NCCL refused has no sequence number */
        fprintf(out, "%" PRIu64, c->seq);
    fprintf(out, ",%s,%" PRIu64 ",%s,", cp_op_name(c->op), c->count, cp_dtype_name(c->dtype));
    uint64_t bytes = cpa_elem_bytes(c->count, c->dtype);
    if (bytes != UINT64_MAX) /* else empty: a size that does not fit 64 bits is unknown */
        fprintf(out, "%" PRIu64, bytes);
    fputc(',', out);
    if (c->peer >= 0)
        fprintf(out, "%d", (int)c->peer);
    if (c->stream < r->nstreams)
        fprintf(out, ",0x%" PRIx64, r->streams[c->stream]);
    else
        fputc(',', out);

    uint64_t start, end;
    int unfinished;
    cpa_call_span_job_ns(a, ri, c, &start, &end, &unfinished);
    us(out, rel(a, cpa_clock_job_ns(a->model, &a->clock, ri, c->enter_ns)));
    if (c->gpu_timed) {
        us(out, rel(a, start));
        us(out, rel(a, end));
    } else {
        fputs(",,", out);
    }
    if (unfinished)
        fputc(',', out);
    else
        us(out, (int64_t)(end - start));

    int64_t arrival = rel(a, cpa_call_arrival_job_ns(a, ri, c));
    us(out, arrival);
    uint32_t oi = cpa_call_op(a, ri, ci);
    int late = 0;
    int64_t wait = cpa_call_wait_ns(a, ri, ci);
    if (wait >= 0) {
        us(out, wait);
        late = cpa_op_late_rank_idx(a, oi) == (int32_t)ri;
    } else {
        fputc(',', out);
    }
    fprintf(out, ",%d,", late);
    const char *site = cpa_call_site(r, c);
    if (site)
        field(out, site);
    /* an abort's DONE is no completion: "aborted", never shown as a finished "gpu" call */
    /* nor a call NCCL refused as one it ran: "refused" (it enqueued nothing) */
    fprintf(out, ",%s", cpa_call_refused(c)      ? "refused"
                        : unfinished             ? "unfinished"
                        : cpa_call_aborted(r, c) ? "aborted"
                        : c->gpu_timed           ? "gpu"
                                                 : "host");
    /* what NCCL's profiler plugin said it ran the call with; empty when it said nothing */
    if (c->nccl & CPA_NCCL_SEEN)
        fprintf(out, ",%s,%s,%u", c->algo ? cp_algo_name(c->algo) : "",
                c->proto ? cp_proto_name(c->proto) : "", (unsigned)c->nchannels);
    else
        fputs(",,,", out);
    /* NCCL's own seqNumber (per communicator and function), to read beside NCCL's logs */
    uint64_t nseq = cpa_call_nccl_seq(r, c);
    if (nseq != CPA_SEQ_NONE)
        fprintf(out, ",%" PRIu64, nseq);
    else
        fputs(",", out);
    /* what the rank's trace lacks, on each of its rows (a filter in pandas, not a trailer
     * that breaks its parser), and whether the row comes after its first known hole */
    if (cpa_rank_has_holes(r)) {
        char holes[400];
        cpa_integrity_text(holes, sizeof holes, &r->integrity, r->lost_records);
        fputc(',', out);
        field(out, holes);
        if (r->integrity.first_gap_ns)
            fprintf(out, ",%d\n", c->enter_ns >= r->integrity.first_gap_ns);
        else
            fputs(",\n", out);
    } else {
        fputs(",,\n", out);
    }
}

int cpx_export_csv(FILE *out, const cpa_analysis *a)
{
    fputs(header, out);
    const cpa_model *m = a->model;
    for (size_t ri = 0; ri < m->nranks && !ferror(out); ri++)
        for (size_t ci = 0; ci < m->ranks[ri].ncalls && !ferror(out); ci++)
            row(out, a, ri, ci);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
