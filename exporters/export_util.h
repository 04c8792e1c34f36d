/* export_util: what several exporters share (internal to exporters/, not part of its API).
 *
 * Names and numbers formatted one way everywhere (sizes, rank lists, comm ids), and the
 * timeline: for each call, the operation it took part in, and for each operation the
 * latest arrival of its ranks on the job time line, which is what a rank's wait is
 * measured against (straggler.c's definition: the latest arrival minus its own).
 */
#ifndef COLLPROF_EXPORT_UTIL_H
#define COLLPROF_EXPORT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "analyzer/analyzer.h"

#define CPX_NO_OP UINT32_MAX

/* "AllReduce"; a statistics row or matched operation of CP_OP_SEND is a send/recv pair:
 * "Send/Recv" where pairs is set (text), else the contract's name "Send". */
const char *cpx_op_label(unsigned op, int pairs);
/* "SIGTERM" for 15, "signal 77" for one this libc has no name for; in buf (16 bytes). */
const char *cpx_signal_name(int sig, char *buf);

/* Exact, never rounded: the largest unit it is a whole number of ("1 MiB", "22016 KiB",
 * "102227772 B"). At most 24 bytes with the NUL. */
void cpx_fmt_size(char *buf, size_t len, uint64_t bytes);

/* The op table's header and one row, as the text report and `view` print it (80 columns):
 * op, ranks, size, operations, p50 and p99 us, algbw and busbw. A bucket's size reads
 * ">=16 MiB": it holds [16 MiB, 32 MiB). */
#define CPX_STAT_HEADER_FMT "%-13s %5s %12s %7s %8s %8s %10s %10s"
void cpx_fmt_stat_header(char *buf, size_t len);
void cpx_fmt_stat_row(char *buf, size_t len, const cpa_stats *s, const cpa_stat *row);
/* A row's most used NCCL algorithm/protocol, "RING/SIMPLE", with its share when it is not the
 * only one ("RING/LL 96%"); "-" when NCCL's plugin said nothing of the row. */
void cpx_fmt_algo_proto(char *buf, size_t len, const cpa_stat *row);
/* The same pair as numbers (enum cp_algo, cp_proto), and the share of the row's operations
 * NCCL ran with it; 0 when it said nothing of the row. */
double cpx_row_algo_proto(const cpa_stat *row, unsigned *algo, unsigned *proto);

/* Ascending ranks as "0-4,6,7"; cut with "..." when longer than len. */
void cpx_fmt_ranks(char *buf, size_t len, const int32_t *ranks, size_t n);

/* Nanoseconds as microseconds with exactly three decimals ("-12.345"), written without
 * printf's floating-point path (the main cost of a large export otherwise). Returns a
 * pointer into buf. */
const char *cpx_fmt_ns_us(char buf[32], int64_t ns);

/* 16 lowercase hex digits, as dump and the contract write a comm id. */
void cpx_fmt_comm(char buf[17], uint64_t comm_id);

/* The call site escaped (common/text.h), cut to its innermost frames; "" unknown. */
void cpx_fmt_site(char *buf, size_t len, const char *site);

/* A call on the job time line (ns): its arrival (GPU start when timed, else host entry:
 * match.c's rule) and its slice: GPU start..end when timed, else host entry..entry + time
 * in the call, and for a timed call with no DONE (in flight when the trace ended) host
 * entry..the rank's last record, with *unfinished set. GPU times go through
 * cpa_clock_gpu_job_ns, host times through cpa_clock_job_ns. */
uint64_t cpx_call_arrival_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c);
void cpx_call_span_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c,
                          uint64_t *start, uint64_t *end, int *unfinished);

/* Host (cpa_clock_job_ns) or GPU (cpa_clock_gpu_job_ns) local ns of a rank -> microseconds
 * since the job's start on the job line; a job-line time (ns) -> the same. Negative before
 * the start (a GPU time may precede the first record the job span was measured from). */
double cpx_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns);
double cpx_gpu_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns);
double cpx_job_ns_us(const cpa_analysis *a, uint64_t job_ns);

typedef struct cpx_timeline {
    uint32_t **call_op;    /* [rank_idx][call_idx]: index into matched.ops, or CPX_NO_OP */
    uint64_t *latest_ns;   /* per op: its latest arrival on the job line (ns) */
    uint32_t *first_part;  /* per op: the part (0..nparts) that arrived first, ties: lowest */
    uint32_t *last_part;   /* ... and last, ties: the highest rank */
    size_t nranks;
} cpx_timeline;

/* 0, or -1 out of memory (errno ENOMEM). */
int cpx_timeline_build(const cpa_analysis *a, cpx_timeline *t);
void cpx_timeline_free(cpx_timeline *t);

/* A call's wait (ns): its operation's latest arrival minus its own arrival; for a call timed
 * on the GPU never longer than from its arrival to its end (an operation ends after its last
 * rank arrives, unless an abort or an error ended it: then what the call spent). -1 when it
 * is in no operation of two ranks or more. */
int64_t cpx_call_wait_ns(const cpa_analysis *a, const cpx_timeline *tl, size_t ri, size_t ci);

/* The operation's late rank (model index) from the straggler analysis, -1 none. */
int32_t cpx_op_late_rank_idx(const cpa_analysis *a, size_t op_idx);
double cpx_op_late_us(const cpa_analysis *a, size_t op_idx);

/* The trace's holes in one line, as every output says them: "12 records lost (10 ring_full,
 * 2 at_end), 1 chunk missing; 2 of 8 ranks, the first at +3.214 s (rank 3)"; "" when it has
 * none. The first hole's rank index and job time (seconds since the start) in *first_rank
 * and *first_s when known (else -1 and NAN); either may be NULL. */
void cpx_holes_text(char *buf, size_t len, const cpa_analysis *a, long *first_rank,
                    double *first_s);
/* The caveat a figure over a hole carries, "" when the trace has none. */
const char *cpx_holes_caveat(const cpa_analysis *a);

/* Index into model->ranks of global rank `rank`, -1 when no file has it. */
long cpx_rank_index(const cpa_model *m, int32_t rank);

#endif
