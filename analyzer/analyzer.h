/* analyzer: turns a job's trace directory into answers (issue "The analyzer, collprof report").
 *
 * Offers three steps, each a plain data structure the next one reads:
 *   cpa_model_load  every *.cptrace of a directory -> per-rank identity, communicators and
 *                   the collective/p2p calls, each with its GPU times when a DONE matched it;
 *   cpa_match       the calls of all ranks grouped into operations: a collective by
 *                   (comm_id, seq), a send/recv pair by (comm_id, sender, receiver, seq);
 *   cpa_stats       per op, communicator size and exact S (or nccl-tests' finer rows, or
 *                   power-of-two buckets): operations, calls, bytes, time p50/p99, algbw,
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
 *   algbw  = S / t                 (over a row: sum S / sum t, which is S / mean t when
 *                                   every operation has the same S, as in nccl-tests)
 *   busbw  = algbw * factor
 *     AllReduce                                           2(n-1)/n
 *     AllGather, ReduceScatter, AlltoAll, Gather, Scatter (n-1)/n
 *     Broadcast, Reduce, Send/Recv                        1
 * t of an operation is, where GPU times are known, the shortest of its ranks' GPU durations
 * (gpu_end - gpu_start): the one of the rank that arrived last, which did not wait for
 * anyone. The others' durations also hold their wait for the last arrival, which is the
 * straggler's cost (reported under stragglers), not the links'. nccl-tests averages over
 * ranks that a barrier has just lined up, where the two agree. Without GPU times, t is the
 * mean of the ranks' host times inside the call.
 */
#ifndef COLLPROF_ANALYZER_H
#define COLLPROF_ANALYZER_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzer/model.h"
#include "trace/trace_format.h"

/* ---- matching: operations across ranks ---- */

typedef struct cpa_part {
    /* Into model->ranks: fewer than CPA_MAX_RANKS, which the loader enforces. */
    uint32_t rank_idx : 28;
    /* Its call's, copied: the passes operation by operation (a part's call lies anywhere in
     * a gigabyte of calls) read them here instead of a cache miss each. */
    uint32_t gpu_timed : 1; /* cpa_call.gpu_timed */
    uint32_t captured : 1;  /* CP_CALL_CAPTURED */
    uint32_t timed : 1;     /* CP_CALL_TIMED */
    uint32_t done : 1;      /* cpa_call.done */
    uint32_t call_idx;     /* into that rank's calls */
    /* gpu_start when timed, else enter_ns: the rank's local time until cpa_arrivals_job
     * (cpa_matched.arrivals_job) puts it on the job time line, once for every stage after
     * the clocks (two of them converted each of 10 M arrivals of a 1024-rank job again) */
    uint64_t arrival_ns;
    uint64_t end_ns;       /* gpu_end when timed, else enter_ns + host_ns */
} cpa_part;

typedef struct cpa_op {
    uint64_t comm_id;
    uint64_t seq;
    size_t first_part;     /* parts[first_part .. first_part + nparts) */
    /* Its first part's call's count, peer, dtype and redop, copied as matching has the call
     * in hand: the statistics' pass operation by operation reads them here instead of a
     * cache miss each. */
    uint64_t count;
    int32_t peer;
    uint32_t nparts;
    int32_t nranks;        /* ranks the communicator has (-1 unknown) */
    int32_t sender;        /* p2p: communicator ranks; -1 for collectives */
    int32_t receiver;
    uint8_t op;            /* the lowest rank's op; CP_OP_SEND for a send/recv pair */
    uint8_t complete;      /* every rank expected is there (n for collectives, 2 for p2p) */
    uint8_t dtype, redop;
} cpa_op;

#define CPA_NO_OP UINT32_MAX

typedef struct cpa_matched {
    cpa_op *ops;           /* collectives by (comm_id, seq), then p2p pairs */
    size_t nops;
    cpa_part *parts;       /* each op's parts sorted by rank */
    size_t nparts;
    uint64_t unmatchable;  /* calls with no comm_id or no sequence: left out */
    /* [rank_idx][call_idx]: index into ops, or CPA_NO_OP. What lets a stage go rank by
     * rank through the calls in memory order and add into its operations, instead of
     * operation by operation to calls all over the model. */
    uint32_t **call_op;
    size_t nranks;         /* call_op's */
    int arrivals_job;      /* parts' arrival_ns are on the job time line (cpa_arrivals_job) */
} cpa_matched;

int cpa_match(const cpa_model *m, cpa_matched *out, char *err, size_t errlen);
void cpa_matched_free(cpa_matched *mt);

/* count elements of dtype in bytes; UINT64_MAX when that does not fit 64 bits (a count no
 * memory holds: a forged one), so that it cannot wrap to a small size. */
uint64_t cpa_elem_bytes(uint64_t count, unsigned dtype);
/* Elements, dtype and ranks -> nccl-tests' S (UINT64_MAX when it does not fit), and the
 * busbw factor. */
uint64_t cpa_op_bytes(unsigned op, uint64_t count, unsigned dtype, int nranks);
double cpa_busbw_factor(unsigned op, int nranks);

/* ---- statistics ----
 *
 * Rows of operations with a known duration, what nccl-tests would print for them. An
 * operation counts once, whatever number of ranks took part. Three ways to cut them into
 * rows, the first the report's: */

typedef enum cpa_rows {
    CPA_ROWS_EXACT,      /* (op, nranks, S): S as it is, never rounded */
    CPA_ROWS_NCCL_TESTS, /* (op, nranks, S, dtype, redop, root): nccl-tests' own rows */
    CPA_ROWS_BUCKETS,    /* (op, nranks, largest power of two <= S): a histogram, bounded
                          * however many sizes a job sends (MoE, variable sequences) */
} cpa_rows;

#define CPA_MIXED 0xfe   /* a row's dtype or redop when its operations differ (255: none) */
#define CPA_ROOT_NONE (-1)
#define CPA_ROOT_MIXED (-2)

typedef struct cpa_stat {
    uint8_t op;            /* CP_OP_SEND stands for send/recv pairs */
    uint8_t dtype, redop;  /* the operations' own, or CPA_MIXED */
    int32_t nranks;        /* ranks of the communicator (p2p: of the pair's communicator) */
    int32_t root;          /* rooted collectives' root, CPA_ROOT_NONE, or CPA_ROOT_MIXED */
    uint64_t size;         /* S; CPA_ROWS_BUCKETS: the bucket (0 for S = 0) */
    uint64_t ops;          /* operations */
    uint64_t calls;        /* the ranks' calls in them (ops x nranks when every rank's is there) */
    uint64_t bytes;        /* sum of S */
    double time_us_total;
    double time_us_p50;    /* nearest rank: the ceil(p * ops)-th smallest */
    double time_us_p99;
    double algbw_gbps;
    double busbw_gbps;
    /* Where its times come from: operations timed on the GPU by NCCL's profiler plugin, by
     * CUDA events, or on the host only (no GPU time on any rank: the enqueue's duration). */
    uint64_t timed_plugin, timed_events, timed_host, timed_cupti;
    /* What NCCL's plugin said it ran them with: operations by algorithm and protocol
     * (enum cp_algo x cp_proto; [0][0] none said), and the most channels any used. */
    uint32_t algo_proto[CP_ALGO_COUNT][CP_PROTO_COUNT];
    uint8_t channels_max;
} cpa_stat;

typedef struct cpa_stats {
    cpa_rows kind;
    cpa_stat *rows;        /* sorted by op, nranks, size (then dtype, redop, root) */
    size_t nrows;
    uint64_t oversized;    /* operations whose S does not fit 64 bits: left out of the rows */
    uint64_t aborted;      /* operations an abort ended (cpa_call_aborted): left out */
} cpa_stats;

int cpa_stats_compute(const cpa_model *m, const cpa_matched *mt, cpa_rows kind, cpa_stats *out,
                      char *err, size_t errlen);
void cpa_stats_free(cpa_stats *s);

/* ---- clocks (clock.c): every rank's monotonic times on one job time line ----
 *
 * Ranks with the same hostname share one clock domain (one CLOCK_MONOTONIC). A domain's
 * monotonic time maps to job time through its wall-clock anchors (the header's and CLOCK
 * records: realtime - mono), then an offset (and drift) refined from the ends of blocking
 * collectives that span domains, which finish within microseconds of each other on every
 * rank. Job time is nanoseconds since the Unix epoch as the first domain's wall clock reads
 * it. */

typedef struct cpa_clock_domain {
    char hostname[CP_HOSTNAME_BYTES + 1];
    double offset_ns;      /* added after the anchors: job = local + anchor + offset + drift */
    double drift;          /* ns per ns of local time since drift_t0_ns (0: none measured) */
    uint64_t drift_t0_ns;  /* local monotonic time the drift counts from */
    double error_ns;       /* how far its ends stray from the reference after refinement */
    uint64_t samples;      /* collectives that tied it to the others */
    int refined;           /* offset from collectives; 0: anchors only */
} cpa_clock_domain;

typedef struct cpa_clock {
    cpa_clock_domain *domains;   /* domains[0] is the reference: offset 0 */
    size_t ndomains;
    uint32_t *rank_domain;       /* per model rank index */
    double error_us;             /* the alignment error the report states: 0 on one host */
    int aligned;                 /* one domain, or every domain refined */
    uint64_t rejected_samples;   /* clock samples left out (a time past CPA_TIME_MAX): the
                                    anchors rest on the others */
    struct cpa_clock_map *map;   /* clock.c's own: anchors and GPU corrections, for the two
                                    conversions below */
} cpa_clock;

int cpa_clock_align(const cpa_model *m, const cpa_matched *mt, cpa_clock *out, char *err,
                    size_t errlen);
/* The two conversions below saturate: any local time, however forged, gives a job time in
 * [0, INT64_MAX], so differences of job times fit an int64_t. */
void cpa_clock_free(cpa_clock *c);
/* A rank's local monotonic time on the job time line. */
uint64_t cpa_clock_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                          uint64_t local_ns);
/* The same for a time the rank's GPU timing gave (gpu_start_ns, gpu_end_ns; a part's
 * arrival_ns and end_ns when its call is gpu_timed): the shim put it on the host clock
 * through a reference event whose error is the rank's own (measured on the emulation under
 * load: up to +-27 ms) and changes with each reference; corrected from the ends of blocking
 * collectives, and placed so that the tightest launch starts at its host entry
 * (clock_gpu.c). */
uint64_t cpa_clock_gpu_job_ns(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                              uint64_t local_ns);
/* n times of one rank at once, each what the two above give: local[i] for i < gpu_from
 * through cpa_clock_job_ns, the rest through cpa_clock_gpu_job_ns (a call's entry and its
 * GPU start and end share the rank's lookups: three conversions a call were a sixth of the
 * Perfetto export). */
void cpa_clock_job_ns_n(const cpa_model *m, const cpa_clock *c, size_t rank_idx,
                        const uint64_t *local, uint64_t *job, size_t n, size_t gpu_from);
/* parts[0..n)'s arrival_ns, local, onto the job time line in place: each as
 * cpa_part_arrival_job_ns would give it (cpa_arrivals_job's pass). */
void cpa_clock_arrivals_job(const cpa_model *m, const cpa_clock *c, cpa_part *parts, size_t n);

/* A double to the nearest int64_t, NaN as 0 and beyond the range the nearer end: a cast (or
 * llround) of a value out of range is undefined, and a forged trace can make any sum. */
static inline int64_t cpa_round_i64(double v)
{
    /* llround's half away from zero, inline below 2^52 (every job time's correction), where
     * v - trunc(v) is exact: libm's llround was a fifth of each time conversion. */
    if (v > -4503599627370496.0 && v < 4503599627370496.0) {
        int64_t r = (int64_t)v;
        double frac = v - (double)r;
        return r + (frac >= 0.5 ? 1 : frac <= -0.5 ? -1 : 0);
    }
    if (!(v == v))
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)llround(v);
}

/* ---- stragglers (straggler.c) ----
 *
 * Per collective (complete, at least two ranks, every rank GPU-timed or none, none captured):
 * each rank's arrival on the job time line (GPU start when timed, else host entry); the
 * latest arrival; each rank's wait (latest minus its own). The last rank is late in that
 * collective when its arrival exceeds the median of the others' by more than the threshold:
 * CPA_LATE_MIN_US within one clock domain, max(CPA_LATE_MIN_US, 4 x the clock error) across
 * domains (threshold_us). Durations are never used: a straggler's peers are the ones with long
 * durations. A rank is reported (rows) only when lateness is no chance: it was late in at
 * least half of its judged collectives (persistent), or, with no such rank, at least half of
 * all judged collectives had a late rank (rotating: then each rank late at least 3 times and
 * in 1 % of its collectives). straggler.c says why.
 * CPA_LATE_MIN_US: 1 ms. On 8 emulated ranks sharing 2 busy cores, the last arrival of a
 * healthy job's collectives trails the others' median by p50 0.06-0.4 ms, p90 0.2-2 ms, now
 * and then 10-35 ms; a 200 us threshold found a late rank in 11-70 % of them, 1 ms in 4-40 %,
 * spread over the ranks, which the rules above leave unreported. */

#define CPA_LATE_MIN_US 1000.0

/* Why the late rank was late (issue 19), from what the trace has, per late collective; L is
 * its lateness (its GPU start after the others' median start S), H its host entry after the
 * others' median entry:
 *   HOST        H >= L/2 and its stream was free when it entered: its GPU waited for its
 *               host (data loading, Python, CPU contention). A collective timed on the
 *               host only is always this: its arrival is the entry;
 *   COLLECTIVE  it entered on time, but its stream was still in an earlier NCCL operation
 *               (another comm's collective, a send/recv) past half the lateness: that one took
 *               longer on this rank (a slow link or NIC on its path);
 *   BACKLOG     it entered on time and its stream was not in NCCL: it started the collective
 *               late behind other GPU work (longer compute before it).
 * A straggler's cause is the one of at least CPA_CAUSE_MIN_SHARE of its late collectives,
 * else MIXED (each share is given). */
enum cpa_late_cause {
    CPA_CAUSE_NONE = 0,
    CPA_CAUSE_HOST = 1,
    CPA_CAUSE_BACKLOG = 2,
    CPA_CAUSE_COLLECTIVE = 3,
    CPA_CAUSE_MIXED = 4,
};
#define CPA_CAUSES 4 /* by_cause's size: NONE .. COLLECTIVE */
#define CPA_CAUSE_MIN_SHARE 0.75
/* "host", "gpu_backlog", "in_collective", "mixed", "none": the JSON's and Prometheus' names. */
const char *cpa_late_cause_name(int cause);

enum cpa_straggler_kind {
    CPA_STRAGGLER_NONE = 0,
    CPA_STRAGGLER_PERSISTENT = 1,   /* one rank is the late one in most late collectives */
    CPA_STRAGGLER_ROTATING = 2,     /* lateness spread over several ranks */
};

typedef struct cpa_straggler {
    uint32_t rank_idx;
    int32_t rank;
    uint64_t late_count;     /* collectives in which it was the late one */
    double late_us_total;    /* sum of its lateness over those */
    double late_us_p50;
    double share;            /* late_count / the collectives it took part in that were judged */
    double wait_us_total;    /* time it spent waiting for others (its arrivals before the last) */
    uint64_t by_cause[CPA_CAUSES]; /* its late collectives by enum cpa_late_cause */
    int cause;               /* the one of CPA_CAUSE_MIN_SHARE of them, else CPA_CAUSE_MIXED */
    double host_late_us_p50; /* median over its late collectives of its host entry after the
                                others' median entry (may be negative) */
    double gpu_late_us_p50;  /* median lateness of its GPU starts (NAN: none GPU-timed) */
    /* the earlier NCCL operation its stream was still in (COLLECTIVE), the last such seen */
    uint8_t held_op;         /* enum cp_op, 0 none */
    int32_t held_nranks;     /* its communicator's size, -1 unknown */
    uint64_t held_comm_id;
    /* cupti traces, GPU backlog: the kernel before its late collectives that ran longest past
     * its peers' (kernels_before.c); kernel[0] == 0 none */
    char kernel[CP_KNAME_MAX];
    uint64_t kernel_collectives;  /* late collectives that had its evidence */
    double kernel_longer_us_p50;  /* median of (its time - the peers' median) */
    double kernel_us_p50;         /* its time there, median */
    double kernel_peers_us_p50;   /* the peers' median time there, median */
} cpa_straggler;

typedef struct cpa_stragglers {
    cpa_straggler *rows;     /* ranks reported (see above), worst (late_us_total) first */
    size_t nrows;
    uint64_t judged;         /* collectives judged */
    uint64_t late;           /* of them, with a late rank */
    double threshold_us;
    int kind;                /* enum cpa_straggler_kind */
    int32_t *op_late_rank_idx; /* per matched op: model rank index of its late rank, or -1 */
    float *op_late_us;       /* per matched op: that lateness, 0 when none */
    uint8_t *op_cause;       /* per matched op: enum cpa_late_cause of its late rank */
    float *op_host_late_us;  /* per matched op: that rank's H (see enum cpa_late_cause) */
} cpa_stragglers;

int cpa_stragglers_compute(const cpa_model *m, const cpa_matched *mt, const cpa_clock *c,
                           cpa_stragglers *out, char *err, size_t errlen);
void cpa_stragglers_free(cpa_stragglers *s);
/* Names the kernel behind each GPU-backlog straggler's late collectives, from KERNELS records
 * (kernels_before.c); 0, or -1 out of memory. */
int cpa_kernels_before(const cpa_model *m, const cpa_matched *mt, cpa_stragglers *st);

/* ---- hangs (hang.c) ----
 *
 * Per communicator, the first collective (or send/recv pair) that did not finish everywhere
 * at the end of the trace, or one a watchdog HANG record names:
 *   RANK_NOT_JOINED  some ranks entered it, others never did (no call at that seq, or their
 *                    GPU never started it); the missing rank's last operation is told;
 *   RANK_EXITED      as RANK_NOT_JOINED, but a missing rank's trace ended without a clean
 *                    exit (no END record: killed);
 *   STUCK_IN_NCCL    every rank entered it and none finished.
 * A DONE that completed after its rank's ncclCommAbort was ended by the abort, not done;
 * such a hang is `aborted`. A job stopped as a whole (the same fatal signal in every END, or
 * no END anywhere) has no hang unless an operation was in flight for a stall (a watchdog's
 * HANG record, or at least max(2 s, 100 typical operations) before the end): the others are
 * `interrupted`. A row whose missing rank lost records is `unknown`, never an accusation. */

enum cpa_hang_verdict {
    CPA_HANG_RANK_NOT_JOINED = 1,
    CPA_HANG_STUCK_IN_NCCL = 2,
    CPA_HANG_RANK_EXITED = 3,
};
const char *cpa_hang_verdict_name(int verdict);

typedef struct cpa_hang {
    uint64_t comm_id;
    uint64_t seq;
    uint8_t op;
    int verdict;
    int32_t *missing_ranks;   /* global ranks, ascending */
    size_t nmissing;
    int32_t *waiting_ranks;
    size_t nwaiting;
    double age_s;             /* longest in flight any rank's watchdog saw; 0 unknown */
    int aborted;              /* the job's watchdog ended it with ncclCommAbort */
    char last[256];           /* what the (first) missing rank did last, or "" */
} cpa_hang;

typedef struct cpa_hangs {
    cpa_hang *rows;           /* worst first: more waiting ranks first */
    size_t nrows;
    /* Not hangs, and why: the job was stopped as a whole (every rank ended on stop_signal,
     * or every trace ends without END: killed) while `interrupted` operations were in
     * flight for less than a stall; and operations whose missing rank's trace lost records
     * (`unknown`, the first such rank in unknown_rank), where nobody can tell. */
    size_t interrupted;
    int stop_signal;          /* 0: no whole-job signal; -1 every trace cut (SIGKILL) */
    size_t unknown;
    int32_t unknown_rank;
} cpa_hangs;

int cpa_hangs_find(const cpa_model *m, const cpa_matched *mt, cpa_hangs *out, char *err,
                   size_t errlen);
void cpa_hangs_free(cpa_hangs *h);

/* ---- mismatches (mismatch.c) ----
 *
 * At the same (comm, seq) of a collective, ranks that disagree on op, count, dtype, redop or
 * root; in a send/recv pair, a count or dtype that differs between the two sides (peer: a
 * send whose receiver never posted the matching receive, while it received from another).
 * Culprits are the minority of values (ties: the ranks away from the lowest rank's value). */

enum cpa_field {
    CPA_FIELD_OP = 0,
    CPA_FIELD_COUNT = 1,
    CPA_FIELD_DTYPE = 2,
    CPA_FIELD_REDOP = 3,
    CPA_FIELD_ROOT = 4,
    CPA_FIELD_PEER = 5,
};
const char *cpa_field_name(int field);

typedef struct cpa_mismatch_value {
    int32_t rank;             /* global rank */
    int64_t value;            /* op / dtype / redop as enum numbers; root or peer; count, a
                                 u64 in two's complement ((uint64_t)value is the count) */
    const char *site;         /* that rank's call site, NULL unknown (owned by the model) */
} cpa_mismatch_value;

typedef struct cpa_mismatch {
    uint64_t comm_id;
    uint64_t seq;
    int field;
    cpa_mismatch_value *values; /* every rank's, by rank */
    size_t nvalues;
    int32_t *culprit_ranks;
    size_t nculprits;
} cpa_mismatch;

typedef struct cpa_mismatches {
    cpa_mismatch *rows;       /* by (comm, seq); the first of a comm is the one that matters */
    size_t nrows;
    uint64_t total;           /* found, including those past the kept rows */
} cpa_mismatches;

int cpa_mismatches_find(const cpa_model *m, const cpa_matched *mt, cpa_mismatches *out,
                        char *err, size_t errlen);
void cpa_mismatches_free(cpa_mismatches *x);

/* ---- calls NCCL refused (refused.c) ----
 *
 * A call NCCL returned an error for (cpa_call_refused: an argument it rejects, a comm a
 * remote failure broke) enqueued nothing: it is in no operation and its time is only the
 * host's. Counted by result, each with the first such call on the job time line, so a
 * report can say "rank 3's Broadcast was refused: ncclInvalidArgument" where the hang it
 * caused is all the rest of the trace shows. */

#define CPA_NCCL_RESULTS 9 /* ncclResult_t 0..8 of NCCL 2.28; [0]: a value it does not define */

typedef struct cpa_refused {
    uint64_t total;
    uint64_t by_result[CPA_NCCL_RESULTS];
    int32_t first_rank_idx[CPA_NCCL_RESULTS]; /* the earliest of each result, -1 none */
    uint32_t first_call[CPA_NCCL_RESULTS];
    uint32_t nranks;                          /* ranks with at least one */
} cpa_refused;

/* The index into by_result of a call's result. */
unsigned cpa_refused_slot(int8_t result);
/* A call's op and what names its counterpart: "Send to comm rank 3", "Broadcast root 0",
 * "AllReduce" (the words a refused call is told in: it has no seq). */
void cpa_call_args(char *buf, size_t len, const cpa_call *c);

/* ---- the whole analysis (analysis.c) ---- */

typedef struct cpa_rank_summary {
    double nccl_time_s;       /* union of its operations' intervals (GPU when timed) */
    double duration_s;        /* first to last record */
    double share;             /* nccl_time_s / duration_s */
    uint64_t calls;
} cpa_rank_summary;

/* ---- the job timeline (timeline.c) ----
 *
 * Every output's one source of job time: after clock alignment, each call's operation and
 * its arrival, slice and wait on the job time line, and each operation's latest arrival and
 * its first and last ranks to arrive. Built once by cpa_analyze_model; the report, the
 * exporters and the screens read it and never convert a time themselves. */

typedef struct cpa_timeline {
    uint64_t *latest_ns;   /* per op: its latest arrival on the job line (ns) */
    uint32_t *first_part;  /* per op: the part (0..nparts) that arrived first, ties: lowest */
    uint32_t *last_part;   /* ... and last, ties: the highest rank */
} cpa_timeline;

typedef struct cpa_analysis {
    cpa_model *model;
    cpa_matched matched;
    cpa_stats stats;
    cpa_clock clock;
    cpa_stragglers stragglers;
    cpa_hangs hangs;
    cpa_mismatches mismatches;
    cpa_timeline timeline;
    cpa_refused refused;
    cpa_rank_summary *ranks;  /* per model rank */
    char **hosts;             /* distinct hostnames, first seen first */
    size_t nhosts;
    double duration_s;        /* job time line: first to last record of any rank */
    uint64_t start_ns;        /* job time of the first record */
} cpa_analysis;

typedef void (*cpa_progress_fn)(void *ctx, const char *stage, double fraction);

/* Everything above, in order. 0, or -1 with one line in err (nothing readable, out of
 * memory). progress, when given, hears of each stage. */
int cpa_analyze(const char *dir, cpa_analysis *out, cpa_progress_fn progress, void *ctx,
                char *err, size_t errlen);
/* For a process that runs one analysis and exits (collprof report and export;
 * bench_analyzer's analysis): from the stage after loading on, malloc keeps what a stage
 * frees for the next stage's arrays. By default glibc maps each array over 32 MB on its own
 * and unmaps it when freed, so every stage's arrays were faulted in afresh: on
 * bench_analyzer's 1024-rank job 135 K of the stages' page faults, 102 K with this
 * (docs/PERFORMANCE.md). Process wide (glibc's mallopt: no array mapped on its own, the heap
 * never trimmed), so never for a library's caller nor a process that lives on; the loader's
 * own arrays do better without it, hence after loading. */
void cpa_keep_freed_memory(void);
/* Every stage after loading, on a model already loaded (cpa_model_load_mem): *out owns m
 * from here, and on failure m is freed with the rest. */
int cpa_analyze_model(cpa_model *m, cpa_analysis *out, cpa_progress_fn progress, void *ctx,
                      char *err, size_t errlen);
void cpa_analysis_free(cpa_analysis *a);

/* Calls NCCL refused, counted (after clock alignment; refused.c); nothing to free. */
void cpa_refused_find(const cpa_analysis *a, cpa_refused *out);

/* ---- reading the job timeline (timeline.c) ---- */

/* A call on the job time line (ns): its arrival (GPU start when timed, else host entry:
 * match.c's rule) and its slice: GPU start..end when timed, else host entry..entry + time
 * in the call, and for a timed call with no DONE (in flight when the trace ended) host
 * entry..the rank's last record, with *unfinished set. GPU times go through
 * cpa_clock_gpu_job_ns, host times through cpa_clock_job_ns. */
uint64_t cpa_call_arrival_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c);
void cpa_call_span_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c,
                          uint64_t *start, uint64_t *end, int *unfinished);
/* The same, and the call's host entry on the job time line (*start when untimed). */
void cpa_call_times_job_ns(const cpa_analysis *a, size_t rank_idx, const cpa_call *c,
                           uint64_t *start, uint64_t *end, uint64_t *enter, int *unfinished);

/* Host (cpa_clock_job_ns) or GPU (cpa_clock_gpu_job_ns) local ns of a rank -> microseconds
 * since the job's start on the job line; a job-line time (ns) -> the same. Negative before
 * the start (a GPU time may precede the first record the job span was measured from). */
double cpa_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns);
double cpa_gpu_job_us(const cpa_analysis *a, size_t rank_idx, uint64_t local_ns);
double cpa_job_ns_us(const cpa_analysis *a, uint64_t job_ns);

/* Every part's arrival_ns on the job time line (its call's arrival, cpa_call_arrival_job_ns
 * of it), once the clocks are aligned; cpa_analyze_model calls it before the stragglers. */
void cpa_arrivals_job(const cpa_model *m, cpa_matched *mt, const cpa_clock *c);
/* A part's arrival on the job time line, whether or not cpa_arrivals_job has run. */
static inline uint64_t cpa_part_arrival_job_ns(const cpa_model *m, const cpa_matched *mt,
                                               const cpa_clock *c, const cpa_part *p)
{
    if (mt->arrivals_job)
        return p->arrival_ns;
    return p->gpu_timed ? cpa_clock_gpu_job_ns(m, c, p->rank_idx, p->arrival_ns)
                        : cpa_clock_job_ns(m, c, p->rank_idx, p->arrival_ns);
}
/* 0, or -1 out of memory (errno ENOMEM); cpa_analyze_model calls it. */
int cpa_timeline_build(const cpa_analysis *a, cpa_timeline *t);
void cpa_timeline_free(cpa_timeline *t);

/* The operation a call belongs to (index into matched.ops), CPA_NO_OP none. */
uint32_t cpa_call_op(const cpa_analysis *a, size_t rank_idx, size_t call_idx);

/* A call's wait (ns): its operation's latest arrival minus its own arrival; for a call timed
 * on the GPU never longer than from its arrival to its end (an operation ends after its last
 * rank arrives, unless an abort or an error ended it: then what the call spent). -1 when it
 * is in no operation of two ranks or more. */
int64_t cpa_call_wait_ns(const cpa_analysis *a, size_t rank_idx, size_t call_idx);

/* The operation's late rank (model index) from the straggler analysis, -1 none. */
int32_t cpa_op_late_rank_idx(const cpa_analysis *a, size_t op_idx);
double cpa_op_late_us(const cpa_analysis *a, size_t op_idx);

#endif
