/* analyzer: turns a job's trace directory into answers (issue "The analyzer, collprof report").
 *
 * Offers three steps, each a plain data structure the next one reads:
 *   cpa_model_load  every *.cptrace of a directory -> per-rank identity, communicators and
 *                   the collective/p2p calls, each with its GPU times when a DONE matched it;
 *   cpa_match       the calls of all ranks grouped into operations: a collective by
 *                   (comm_id, seq), a send/recv pair by (comm_id, sender, receiver, seq);
 *   cpa_stats       per op and power-of-two size bucket: calls, bytes, time p50/p99, algbw,
 *                   busbw.
 * Damage is never fatal past the first step's "no trace at all": a cut or corrupt file, lost
 * records, a DONE without its CALL each become a warning line and the rest is used.
 * Memory grows with what is kept (calls and operations, in arrays that grow geometrically),
 * never with what a file claims.
 *
 * Bandwidth (nccl-tests' definitions, shared/REFERENCE.md; GB/s = 1e9 B/s; n = the
 * communicator's ranks; size = bytes per element of the dtype):
 *   S (bytes per operation)
 *     AllReduce, Broadcast, Reduce                        count * size
 *     AllGather, ReduceScatter, AlltoAll, Gather, Scatter count * size * n
 *     Send/Recv pair                                      count * size
 *   algbw  = S / t                 (over a bucket: sum S / sum t, which is S / mean t when
 *                                   every operation has the same S, as in nccl-tests)
 *   busbw  = algbw * factor
 *     AllReduce                                           2(n-1)/n
 *     AllGather, ReduceScatter, AlltoAll, Gather, Scatter (n-1)/n
 *     Broadcast, Reduce, Send/Recv                        1
 * t of an operation is the mean over its participating ranks of each rank's duration: the
 * GPU's (gpu_end - gpu_start) where that rank's DONE was matched, else the host's time inside
 * the call; ranks with GPU times are preferred over those without (nccl-tests, too, averages
 * its time across ranks).
 */
#ifndef COLLPROF_ANALYZER_H
#define COLLPROF_ANALYZER_H

#include <stddef.h>
#include <stdint.h>

#include "analyzer/model.h"
#include "common/trace_format.h"

/* ---- matching: operations across ranks ---- */

typedef struct cpa_part {
    uint32_t rank_idx;     /* into model->ranks */
    uint32_t call_idx;     /* into that rank's calls */
    uint64_t arrival_ns;   /* gpu_start when timed, else enter_ns */
    uint64_t end_ns;       /* gpu_end when timed, else enter_ns + host_ns */
} cpa_part;

typedef struct cpa_op {
    uint64_t comm_id;
    uint64_t seq;
    size_t first_part;     /* parts[first_part .. first_part + nparts) */
    uint32_t nparts;
    int32_t nranks;        /* ranks the communicator has (-1 unknown) */
    int32_t sender;        /* p2p: communicator ranks; -1 for collectives */
    int32_t receiver;
    uint8_t op;            /* the lowest rank's op; CP_OP_SEND for a send/recv pair */
    uint8_t complete;      /* every rank expected is there (n for collectives, 2 for p2p) */
} cpa_op;

typedef struct cpa_matched {
    cpa_op *ops;           /* collectives by (comm_id, seq), then p2p pairs */
    size_t nops;
    cpa_part *parts;       /* each op's parts sorted by rank */
    size_t nparts;
    uint64_t unmatchable;  /* calls with no comm_id or no sequence: left out */
} cpa_matched;

int cpa_match(const cpa_model *m, cpa_matched *out, char *err, size_t errlen);
void cpa_matched_free(cpa_matched *mt);

/* Bytes per element, elements and ranks -> nccl-tests' S, and the busbw factor. */
uint64_t cpa_op_bytes(unsigned op, uint64_t count, unsigned dtype, int nranks);
double cpa_busbw_factor(unsigned op, int nranks);

/* ---- statistics ---- */

typedef struct cpa_stat {
    uint8_t op;            /* CP_OP_SEND stands for send/recv pairs */
    uint64_t bucket;       /* largest power of two <= S (0 for S = 0) */
    uint64_t calls;        /* operations */
    uint64_t bytes;        /* sum of S */
    double time_us_total;
    double time_us_p50;    /* nearest rank: the ceil(p * calls)-th smallest */
    double time_us_p99;
    double algbw_gbps;
    double busbw_gbps;
} cpa_stat;

typedef struct cpa_stats {
    cpa_stat *rows;        /* sorted by op, then bucket */
    size_t nrows;
} cpa_stats;

int cpa_stats_compute(const cpa_model *m, const cpa_matched *mt, cpa_stats *out, char *err,
                      size_t errlen);
void cpa_stats_free(cpa_stats *s);

#endif
