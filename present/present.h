/* present/: how an analysis is said, the same way in every output that writes words: the
 * text and JSON reports, the exporters and the screens of `view` and `top` (analyzer ->
 * present -> exporters, tui). Op names, exact sizes, rank lists, comm ids, call sites, the op
 * table's rows, a trace's holes, refused calls, mismatches, why a straggler was late
 * (words.c, stat_row.c, holes.c, refused.c, mismatch.c, cause.c) and Prometheus text
 * (prom.c); nothing here
 * computes a figure, it only writes one.
 */
#ifndef COLLPROF_PRESENT_H
#define COLLPROF_PRESENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* "AllReduce"; a statistics row or matched operation of CP_OP_SEND is a send/recv pair:
 * "Send/Recv" where pairs is set (text), else the contract's name "Send". */
const char *cpr_op_label(unsigned op, int pairs);
/* "SIGTERM" for 15, "signal 77" for one this libc has no name for; in buf (16 bytes). */
const char *cpr_signal_name(int sig, char *buf);

/* Exact, never rounded: the largest unit it is a whole number of ("1 MiB", "22016 KiB",
 * "102227772 B"). At most 24 bytes with the NUL. */
void cpr_fmt_size(char *buf, size_t len, uint64_t bytes);

/* The op table's header and one row, as the text report and `view` print it (80 columns):
 * op, ranks, size, operations, p50 and p99 us, algbw and busbw. A bucket's size reads
 * ">=16 MiB": it holds [16 MiB, 32 MiB). */
#define CPR_STAT_HEADER_FMT "%-13s %5s %12s %7s %8s %8s %10s %10s"
void cpr_fmt_stat_header(char *buf, size_t len);
void cpr_fmt_stat_row(char *buf, size_t len, const cpa_stats *s, const cpa_stat *row);
/* A row's most used NCCL algorithm/protocol, "RING/SIMPLE", with its share when it is not the
 * only one ("RING/LL 96%"); "-" when NCCL's plugin said nothing of the row. */
void cpr_fmt_algo_proto(char *buf, size_t len, const cpa_stat *row);
/* The same pair as numbers (enum cp_algo, cp_proto), and the share of the row's operations
 * NCCL ran with it; 0 when it said nothing of the row. */
double cpr_row_algo_proto(const cpa_stat *row, unsigned *algo, unsigned *proto);

/* Ascending ranks as "0-4,6,7"; cut with "..." when longer than len. */
void cpr_fmt_ranks(char *buf, size_t len, const int32_t *ranks, size_t n);

/* Nanoseconds as microseconds with exactly three decimals ("-12.345"), written without
 * printf's floating-point path (the main cost of a large export otherwise). Returns a
 * pointer into buf. */
const char *cpr_fmt_ns_us(char buf[32], int64_t ns);

/* "00" to "99": numbers are written two digits at a time. */
static const char cpr_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930"
    "31323334353637383940414243444546474849505152535455565758596061"
    "62636465666768697071727374757677787980818283848586878889909192"
    "93949596979899";

/* Exactly four digits of v < 10000 at q (leading zeros kept). */
static inline void cpr_put_4(char *q, uint32_t v)
{
    uint32_t hi = v / 100;
    memcpy(q, cpr_digit_pairs + 2 * hi, 2);
    memcpy(q + 2, cpr_digit_pairs + 2 * (v - 100 * hi), 2);
}

/* v < 10000's digits at q, no leading zero; returns the end. */
static inline char *cpr_put_upto4(char *q, uint32_t v)
{
    if (v < 100) {
        if (v < 10) {
            *q = (char)('0' + v);
            return q + 1;
        }
        memcpy(q, cpr_digit_pairs + 2 * v, 2);
        return q + 2;
    }
    uint32_t hi = v / 100;
    if (hi < 10)
        *q++ = (char)('0' + hi);
    else {
        memcpy(q, cpr_digit_pairs + 2 * hi, 2);
        q += 2;
    }
    memcpy(q, cpr_digit_pairs + 2 * (v - 100 * hi), 2);
    return q + 2;
}

/* v's decimal digits written at q (no NUL, at most 20); returns the end. Inline: the
 * exporters write a dozen numbers an event, in place (copies of a text made elsewhere were a
 * tenth of the JSON writer). Most numbers (times in us, counts, ids) fit 32 bits: those are
 * split in blocks of four digits with no loop (the loop of two digits at a time was a tenth of
 * the JSON export's instructions); larger ones take 8 digits at a time off the end. */
static inline char *cpr_put_u64(char *q, uint64_t v)
{
    if (v >= 100000000ull) {
        uint64_t hi = v / 100000000ull;
        uint32_t lo = (uint32_t)(v - hi * 100000000ull);
        q = cpr_put_u64(q, hi);
        cpr_put_4(q, lo / 10000);
        cpr_put_4(q + 4, lo % 10000);
        return q + 8;
    }
    uint32_t w = (uint32_t)v;
    if (w < 10000)
        return cpr_put_upto4(q, w);
    uint32_t hi = w / 10000;
    q = cpr_put_upto4(q, hi);
    cpr_put_4(q, w - 10000 * hi);
    return q + 4;
}

/* cpr_fmt_ns_us's text written at q (no NUL, at most 25 bytes); returns the end. */
static inline char *cpr_put_ns_us(char *q, int64_t ns)
{
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        *q++ = '-';
    uint64_t us = v / 1000;
    unsigned frac = (unsigned)(v - us * 1000), tens = frac / 10;
    q = cpr_put_u64(q, us);
    q[0] = '.';
    memcpy(q + 1, cpr_digit_pairs + 2 * tens, 2);
    q[3] = (char)('0' + (frac - 10 * tens));
    return q + 4;
}

/* 16 lowercase hex digits, as dump and the contract write a comm id. */
void cpr_fmt_comm(char buf[17], uint64_t comm_id);

/* The call site escaped (common/text.h), cut to its innermost frames; "" unknown. */
void cpr_fmt_site(char *buf, size_t len, const char *site);

/* A mismatch's headline: "count differs at seq 5, comm 1c08a85a76e33106; culprit 3" (the
 * culprits "unknown" when none stands out). */
void cpr_mismatch_text(char *buf, size_t len, const cpa_mismatch *r);
/* A rank's value of the field that differs: an op's, a dtype's, a redop's name, or the
 * number (a count unsigned). */
void cpr_mismatch_value(char *buf, size_t len, int field, int64_t v);

/* The trace's holes in one line, as every output says them: "12 records lost (10 ring_full,
 * 2 at_end), 1 chunk missing; 2 of 8 ranks, the first at +3.214 s (rank 3)"; "" when it has
 * none. The first hole's rank index and job time (seconds since the start) in *first_rank
 * and *first_s when known (else -1 and NAN); either may be NULL. */
void cpr_holes_text(char *buf, size_t len, const cpa_analysis *a, long *first_rank,
                    double *first_s);
/* The caveat a figure over a hole carries, "" when the trace has none. */
const char *cpr_holes_caveat(const cpa_analysis *a);
/* A rotated trace (COLLPROF_MAX_MB): "the oldest 34325 records of 2 ranks were deleted ...
 * every rank's calls are here from +1.234 s on (rank 1)"; empty when nothing was rotated.
 * *kept_from_s (NAN when nothing was): job time from which every rank's records are kept. */
void cpr_rotated_text(char *buf, size_t len, const cpa_analysis *a, double *kept_from_s);


/* Why a straggler was late, one sentence: "GPU backlog: it entered NCCL on time (median
 * +0.01 ms) but its stream started the collective late, on the GPU 2.00 ms, behind other GPU
 * work (longer compute before it)"; a mix gives each cause's share. */
void cpr_cause_text(char *buf, size_t len, const cpa_straggler *r);

/* ---- Prometheus text exposition (prom.c), for the trace's export and top's live file ----
 * Each family's HELP and TYPE once before its samples; label values cleaned to UTF-8 and
 * escaped (\\, \", \n); floats as Go clients write them; no timestamps (the textfile
 * collector refuses them). */
#define CPR_LABELS_MAX 1024
typedef struct cpr_labels {
    char buf[CPR_LABELS_MAX];
    size_t len;
} cpr_labels;
void cpr_lbl_reset(cpr_labels *l);
/* key="value"; a label that does not fit is left out rather than half written. */
void cpr_lbl_add(cpr_labels *l, const char *key, const char *value);
void cpr_lbl_int(cpr_labels *l, const char *key, int64_t v);
void cpr_prom_family(FILE *out, const char *name, const char *type, const char *help);
/* The shortest %g that reads back as the same double ("NaN", "+Inf", "-Inf" as Go reads). */
void cpr_prom_float(char *num, size_t len, double v);
void cpr_prom_sample(FILE *out, const char *name, const cpr_labels *l, double v);
void cpr_prom_u64(FILE *out, const char *name, const cpr_labels *l, uint64_t v);

/* A by_result slot of cpa_refused as NCCL names the result ("ncclInvalidArgument"). */
const char *cpr_result_id(unsigned slot);
/* The calls NCCL refused in one line: "8 calls NCCL returned an error for, on 8 ranks (they
 * enqueued nothing): 1 ncclInvalidArgument (first: rank 3, Broadcast root 99), 7
 * ncclRemoteError (first: rank 0, AllReduce)"; "" when there are none. */
void cpr_refused_text(char *buf, size_t len, const cpa_analysis *a);

#endif
