/* analyzer/model: what each rank's trace file says, loaded once (load.c) and read by
 * everything after it (match.c, stats.c). Part of analyzer.h's API; included by it.
 */
#ifndef COLLPROF_ANALYZER_MODEL_H
#define COLLPROF_ANALYZER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/search.h"
#include "trace/trace_format.h"

/* ---- the model: what each rank's file says ---- */

typedef struct cpa_comm {
    uint64_t comm_id;   /* the same on every rank of the communicator */
    uint64_t parent_id; /* split/shrink parent, 0 none */
    uint32_t index;     /* this file's comm_index */
    int32_t nranks;
    int32_t rank;       /* this process's rank in the communicator */
    int32_t cuda_dev;   /* -1 unknown */
} cpa_comm;

/* A watchdog HANG record: this rank saw the operation in flight for age_ns. */
typedef struct cpa_hang_seen {
    uint64_t comm_id;   /* 0 when the file has no COMM record for comm_index */
    uint64_t seq;
    uint64_t at_ns;
    uint64_t age_ns;
    int32_t peer;
    uint8_t op;
    uint8_t gpu_state;  /* enum cp_hang_gpu_state: had its GPU work begun */
} cpa_hang_seen;

/* A monotonic/realtime pair read back to back (the header's anchor and CLOCK records). */
typedef struct cpa_clock_sample {
    uint64_t mono_ns;
    uint64_t realtime_ns;
} cpa_clock_sample;

/* The latest time a trace may name: 2^62 ns, 146 years. No CLOCK_MONOTONIC nor wall clock
 * reads more before 2116, and with every time under it the clocks' signed arithmetic (an
 * anchor realtime - mono, then local + anchor) cannot overflow. A record naming a later
 * time, or a GPU end before its start, is damaged or forged: the loader leaves it out, or
 * its time, and counts it (cpa_rank.bad_clocks, bad_times), so every time in the model is
 * at most this. */
#define CPA_TIME_MAX (1ull << 62)

/* Counts a file states (LOST records, a chunk's running total) are summed saturating: a
 * forged count must not wrap the total back to a small, believable one. */
static inline uint64_t cpa_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Trace files (ranks) one analysis takes: a part names its rank in 28 bits. */
#define CPA_MAX_RANKS (1 << 28)

#define CPA_MAX_WARNINGS 1000  /* a directory of broken files must not flood the report */
#define CPA_SEQ_NONE UINT64_MAX  /* the shim's "no sequence" (a failed call) */

/* A call's site index in cpa_call: 20 bits, all ones for none. The loader keeps no site
 * record of this index or past it, and a CALL naming one gets this: no site. */
#define CPA_SITE_NONE ((1u << 20) - 1)

/* A DONE's timing source in cpa_call (3 bits): the last this collprof knows, and what one
 * past it reads as, equal to none of them. */
#define CPA_TIMING_LAST_KNOWN CP_TIMING_PLUGIN
#define CPA_TIMING_UNKNOWN 7

/* A call's host time in 32 bits of cpa_call: ns under 2^31 (2.1 s); past it the top bit and
 * the ns >> CPA_HOST_SHIFT rounded, 65.5 us steps (at most 32.8 us off, 16 parts in a million)
 * up to 2^47 ns, 39 hours, where a longer one stays (the file's CALL is exact to 52 days:
 * cp_call_host_ns; the shim's ring holds 7.8 hours at least). */
#define CPA_HOST_SHIFT 16
#define CPA_HOST_WIDE (1u << 31)
static inline uint32_t cpa_host_pack(uint64_t ns)
{
    if (ns < CPA_HOST_WIDE)
        return (uint32_t)ns;
    uint64_t q = (ns + (1u << (CPA_HOST_SHIFT - 1))) >> CPA_HOST_SHIFT;
    return CPA_HOST_WIDE | (uint32_t)(q < CPA_HOST_WIDE - 1 ? q : CPA_HOST_WIDE - 1);
}
static inline uint64_t cpa_host_unpack(uint32_t q)
{
    return q < CPA_HOST_WIDE ? q : (uint64_t)(q & (CPA_HOST_WIDE - 1)) << CPA_HOST_SHIFT;
}

typedef struct cpa_call {
    uint64_t seq;          /* per comm for collectives, per (comm, peer, direction) for p2p */
    uint64_t count;        /* elements */
    uint64_t enter_ns;     /* host CLOCK_MONOTONIC of this process */
    uint64_t gpu_start_ns; /* 0 unless gpu_timed */
    uint64_t gpu_end_ns;
    uint32_t comm_index;   /* the file's: its communicator is cpa_call_comm's */
    uint32_t host_q;       /* host time inside the call: cpa_host_pack, cpa_call_host_ns */
    int32_t peer;          /* root of rooted collectives, peer of send/recv, -1 none */
    uint32_t site_index : 20; /* into the rank's sites (cpa_call_site); CPA_SITE_NONE none */
    uint32_t timing : 3;   /* its DONE's enum cp_timing_source (CP_TIMING_NONE: no DONE), or
                            * CPA_TIMING_UNKNOWN */
    uint32_t nccl : 2;     /* CPA_NCCL_*: what NCCL's profiler plugin said of it */
    uint32_t done : 1;     /* a DONE record was matched to this call */
    uint32_t gpu_timed : 1; /* ... and it carried usable GPU times (end >= start > 0) */
    uint32_t algo : 3;     /* NCCL's, from an NCCL_OP record: enum cp_algo, cp_proto */
    uint32_t proto : 2;
    uint16_t stream;       /* into the rank's streams (first seen first) */
    uint8_t op;            /* enum cp_op: a collective or CP_OP_SEND / CP_OP_RECV */
    uint8_t dtype;
    uint8_t redop;
    uint8_t flags;         /* enum cp_call_flags */
    uint8_t nchannels;     /* ... the channels NCCL ran it on */
    int8_t result;         /* the ncclResult_t NCCL returned to the caller */
    /* NCCL's own seqNumber is 8 bytes and no room is left: it lives beside the calls, in
     * cpa_rank.nccl_seqs, for the files that have NCCL_OP records only. The CALL record's
     * thread number is not kept: nothing reads it. */
} cpa_call;

/* One cache line a call, and the loader aligns the arrays to lines: the model is most of the
 * analysis' memory (64 bytes against 72 were 82 MB of a 1024-rank job's), and up to nine
 * passes stream every call of every rank (96-byte calls cost them a fifth more time:
 * docs/PERFORMANCE.md). Values of a few bits share one word; the communicator's id, size
 * and this rank in it are its COMM record's, looked up (cpa_call_comm), not copied. */
_Static_assert(sizeof(cpa_call) == 64, "cpa_call grew: the model's memory per call is 64 bytes");
_Static_assert(CP_ALGO_COUNT <= 8 && CP_PROTO_COUNT <= 4 &&
                   CPA_TIMING_LAST_KNOWN < CPA_TIMING_UNKNOWN,
               "cpa_call's algo, proto and timing bits hold every known value");

static inline uint64_t cpa_call_host_ns(const cpa_call *c) { return cpa_host_unpack(c->host_q); }

enum {
    CPA_NCCL_SEEN = 1,        /* an NCCL_OP record was matched to this call */
    CPA_NCCL_NOT_STARTED = 2, /* ... and no kernel channel of it had started by the end */
};

/* What a trace lacks, by kind: every output says it where its figures rest on it. */
typedef struct cpa_integrity {
    uint64_t lost_by_cause[CP_LOST_CAUSE_LAST + 1]; /* LOST records' counts; [0] a cause this
                                                      * collprof does not know */
    uint64_t unknown_records;  /* of a type this collprof does not know: skipped */
    uint64_t untimed_by_cause[CP_UNTIMED_CAUSE_LAST + 1]; /* UNTIMED records' counts: calls
                                * the shim meant to time and could not; [0] unknown cause.
                                * Not a hole: the CALLs are there, without GPU times */
    uint64_t corrupt_chunks;   /* failed their checks: skipped */
    uint64_t missing_chunks;   /* gaps in the chunk sequence (corrupt, or never written) */
    uint64_t truncated;        /* files cut short inside a chunk (a kill, a full disk) */
    uint64_t first_gap_ns;     /* monotonic time of its first hole where known (the first
                                * LOST record's time; the last record before a cut), else 0 */
} cpa_integrity;

/* The loader's count of one communicator index's calls, for matching (cpa_match), which
 * would otherwise walk every call once more to learn it. */
typedef struct cpa_comm_census {
    uint64_t first_seq, last_seq; /* of its collectives with a seq (ncoll of them) */
    uint64_t ncoll;
    uint64_t next_seq; /* the last collective's seq + 1 */
    int gaps;          /* a collective's seq was not the one before's + 1: its seqs are not
                          exactly first_seq..last_seq once each, so matching counts calls */
    uint64_t np2p;   /* sends and receives with a seq and a peer */
    uint64_t nnone;  /* calls with no seq, sends and receives with no peer: never matched */
} cpa_comm_census;

typedef struct cpa_rank {
    char *path;
    int32_t rank;          /* header's, superseded by a PROCESS record's when >= 0 */
    int32_t local_rank;    /* -1 unknown */
    int32_t world_size;    /* -1 unknown */
    uint32_t pid;
    uint32_t file_flags;   /* enum cp_file_flags */
    uint32_t nccl_version;
    char hostname[CP_HOSTNAME_BYTES + 1];
    char job_id[CP_JOBID_BYTES + 1];
    cpa_clock_sample *clocks; /* the header's anchor first, then CLOCK records in order */
    size_t nclocks, cap_clocks;
    uint64_t first_ns;     /* earliest and latest monotonic time any record names */
    uint64_t last_ns;
    uint64_t *streams;     /* the user's stream handles; calls name them by index */
    size_t nstreams, cap_streams;
    char **sites;          /* by site index: "frame < frame < ..." innermost first; NULL unknown */
    size_t nsites;
    cpa_hang_seen *hangs;  /* watchdog HANG records, in file order */
    size_t nhangs, cap_hangs;
    cp_rec_kname *knames;  /* KNAME records (cupti), in file order */
    size_t nknames, cap_knames;
    cp_rec_kernels *kernels; /* KERNELS records (cupti), sorted by key after load
                                (cpa_kernels_of) */
    size_t nkernels, cap_kernels;
    uint64_t abort_ns;     /* the first ncclCommAbort's entry (a watchdog's), 0 none */
    int32_t end_signal;    /* END record: 0 normal exit, else the signal; when ended */
    int32_t end_exit_code;
    uint64_t end_ns;
    cpa_comm *comms;       /* sorted by index after load */
    size_t ncomms;
    uint32_t *comm_at;     /* by comm index below ncomm_at: 1 + the position in comms of the
                              one cpa_comm_of gives, 0 none (NULL: search) */
    size_t ncomm_at;
    cpa_call *calls;       /* in file order */
    size_t ncalls;
    size_t ngrouped;       /* calls with CP_CALL_IN_GROUP: the statistics' shares of a group's
                              span pass over a rank's calls only when it has two */
    size_t nrefused;       /* calls cpa_call_refused: refused.c passes over those ranks only */
    cpa_comm_census *census; /* by comm index below ncensus; NULL: a call named an index past
                                the loader's table (or the model was not loaded): walk */
    size_t ncensus;
    uint64_t *nccl_seqs;   /* NCCL's seqNumber by call index, up to the last call an NCCL_OP
                              joined (NULL: none did); CPA_SEQ_NONE none. cpa_call_nccl_seq */
    size_t nnccl_seqs, cap_nccl_seqs;
    size_t cap_comms, cap_calls;
    uint64_t records;      /* valid records read */
    uint64_t lost_records; /* the writer's own count of records it dropped */
    uint64_t unmatched_done; /* DONE records with no CALL to go to */
    uint64_t unmatched_nccl_op; /* NCCL_OP records with no CALL to go to */
    uint64_t bad_clocks;   /* clock samples (header anchor, CLOCK) left out: past CPA_TIME_MAX */
    uint64_t bad_times;    /* CALL and HANG records left out, DONE GPU times and END times
                              unused: past CPA_TIME_MAX, or a GPU end before its start */
    int walk_stop;         /* enum cp_walk_stop */
    int ended;             /* an END record was seen: the process closed its trace */
    cpa_integrity integrity;
    /* A rotated trace (COLLPROF_MAX_MB): its segments, joined in order, are this rank. */
    uint32_t segments;        /* segment files read (0: not a rotated trace) */
    uint64_t rotated_records; /* records of the deleted oldest segments: lost, cause rotated */
    uint64_t kept_from_ns;    /* the oldest kept call's time (else the first kept segment's
                                 start): nothing of before is here; 0 when nothing was rotated */
} cpa_rank;

typedef struct cpa_model {
    cpa_rank *ranks;       /* sorted by rank */
    size_t nranks;
    char **warnings;       /* one line each, what and where */
    size_t nwarnings;
    size_t cap_warnings;
    uint64_t dropped_warnings; /* past CPA_MAX_WARNINGS: counted, not kept */
    uint64_t records;
    uint64_t lost_records; /* saturates at UINT64_MAX */
    cpa_integrity integrity; /* the ranks' summed (first_gap_ns: unused, per rank only) */
    size_t ranks_with_holes; /* ranks whose trace lost records or chunks, or was cut */
    uint64_t rotated_records; /* the ranks' rotated_records summed */
    size_t ranks_rotated;     /* ranks with rotated_records */
} cpa_model;

/* Ended by its rank's ncclCommAbort (a watchdog's) rather than done: an abort ends the
 * kernels it releases, which then show DONEs; the span such a DONE gives is no duration. */
/* KERNELS records (kernels_before.c): sorted once after load; a call's, or NULL; a name. */
void cpa_kernels_sort(cpa_rank *r);
const cp_rec_kernels *cpa_kernels_of(const cpa_rank *r, const cpa_call *c);
const char *cpa_kname_of(const cpa_rank *r, uint32_t index);

static inline int cpa_call_aborted(const cpa_rank *r, const cpa_call *c)
{
    return r->abort_ns && c->gpu_timed && c->gpu_end_ns >= r->abort_ns;
}

/* NCCL returned an error for the call: it enqueued nothing and belongs to no operation (the
 * shim gives it no sequence number). ncclInProgress (7), a non-blocking comm's answer, is
 * no refusal: the call was enqueued. */
#define CPA_NCCL_IN_PROGRESS 7
static inline int cpa_call_refused(const cpa_call *c)
{
    return c->result != 0 && c->result != CPA_NCCL_IN_PROGRESS;
}

/* Whether a rank's trace, or the job's, has a hole: records lost, unknown, chunks corrupt or
 * missing, a cut. */
static inline int cpa_rank_has_holes(const cpa_rank *r)
{
    const cpa_integrity *g = &r->integrity;
    return r->lost_records || g->unknown_records || g->corrupt_chunks || g->missing_chunks ||
           g->truncated;
}
static inline int cpa_model_has_holes(const cpa_model *m)
{
    return m->ranks_with_holes > 0;
}

/* "12 records lost (10 ring_full, 2 at_end), 1 chunk missing, cut short": what g counts,
 * with lost the records lost in all (which may exceed the LOST records' sum: the chunk
 * headers count what a lost LOST record told). "" when nothing. */
void cpa_integrity_text(char *buf, size_t len, const cpa_integrity *g, uint64_t lost);
/* "N calls untimed: A event pool exhausted, B plugin pool full"; "" when none. */
void cpa_untimed_text(char *buf, size_t len, const cpa_integrity *g);

/* Whether m->lost_records is a lower bound only: a trace that ends without END (killed, or
 * its closing chunk never reached the disk) lost what its process still held, uncounted. */
static inline int cpa_lost_at_least(const cpa_model *m)
{
    for (size_t i = 0; i < m->nranks; i++)
        if (!m->ranks[i].ended)
            return 1;
    return 0;
}

/* NCCL's seqNumber of a call of r (its NCCL_OP's: per communicator and function), or
 * CPA_SEQ_NONE: no NCCL_OP, or a send/recv (NCCL numbers only collectives). */
static inline uint64_t cpa_call_nccl_seq(const cpa_rank *r, const cpa_call *c)
{
    size_t i = (size_t)(c - r->calls);
    return i < r->nnccl_seqs ? r->nccl_seqs[i] : CPA_SEQ_NONE;
}

/* The COMM record of r that comm_index names, or NULL. r->comms is sorted by index after
 * load; of two records claiming one index, the one sorting first (the lower id), as the
 * loader warns. */
static inline const cpa_comm *cpa_comm_of(const cpa_rank *r, uint32_t index)
{
    if (index < r->ncomm_at) /* the loader's table of the indices a file uses, most of them */
        return r->comm_at[index] ? &r->comms[r->comm_at[index] - 1] : NULL;
    size_t lo;
    CP_LOWER_BOUND(lo, r->ncomms, i, r->comms[i].index < index);
    return lo < r->ncomms && r->comms[lo].index == index ? &r->comms[lo] : NULL;
}

/* A call's communicator, NULL when its file has no COMM record for it; and from it the
 * communicator's id (0 unknown), its size and this rank in it (-1 unknown). */
static inline const cpa_comm *cpa_call_comm(const cpa_rank *r, const cpa_call *c)
{
    return cpa_comm_of(r, c->comm_index);
}
static inline uint64_t cpa_call_comm_id(const cpa_rank *r, const cpa_call *c)
{
    const cpa_comm *k = cpa_call_comm(r, c);
    return k ? k->comm_id : 0;
}
static inline int32_t cpa_call_nranks(const cpa_rank *r, const cpa_call *c)
{
    const cpa_comm *k = cpa_call_comm(r, c);
    return k ? k->nranks : -1;
}
static inline int32_t cpa_call_comm_rank(const cpa_rank *r, const cpa_call *c)
{
    const cpa_comm *k = cpa_call_comm(r, c);
    return k ? k->rank : -1;
}

/* The call site of a call as one line, or NULL when the file did not say. */
const char *cpa_call_site(const cpa_rank *r, const cpa_call *c);

/* Loads every trace file of dir. Returns 0 and *out, or -1 with one line in err when dir
 * cannot be listed, holds no trace file, or no file in it could be read. */
int cpa_model_load(const char *dir, cpa_model **out, char *err, size_t errlen);
/* The same on a chosen number of threads, each loading whole files: at most 8 and one per
 * file; 0 is one per online CPU, what cpa_model_load uses. The model and its warnings are
 * the same whatever the number. */
int cpa_model_load_threads(const char *dir, unsigned threads, cpa_model **out, char *err,
                           size_t errlen);
/* The same from files in memory (tests, the fuzz target): each file's name (what warnings
 * and cpa_rank.path say) and bytes, which are copied; loaded on the caller's thread. */
typedef struct cpa_mem_file {
    const char *name;
    const void *data;
    size_t len;
} cpa_mem_file;
int cpa_model_load_mem(const cpa_mem_file *files, size_t n, cpa_model **out, char *err,
                       size_t errlen);
void cpa_model_free(cpa_model *m);

/* Index into model->ranks of global rank `rank`, -1 when no file has it. */
long cpa_rank_index(const cpa_model *m, int32_t rank);

/* Internal to the library (model.c): a warning line into the model, and geometric growth
 * of an array so that *cap >= need (element size elem). Both return 0, or -1 out of memory. */
int cpa_model_warn(cpa_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cpa_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* Maps in the whole pages of p[0..len), a fresh array about to be written end to end, in one
 * call (MADV_POPULATE_WRITE) instead of a page fault a page; nothing where the kernel lacks
 * it. A hint: the array reads and writes the same either way. */
void cpa_populate(void *p, size_t len);
/* The k-th smallest (0-based) of v[0..n), n > 0, reordering v: what sorting would put at k,
 * in O(n) (a median per operation was a sort per operation). Of 8 or fewer, a -0.0 may come
 * back +0.0. */
double cpa_select(double *v, size_t n, size_t k);
/* The same for integers. */
int64_t cpa_select_i64(int64_t *v, size_t n, size_t k);
/* The smallest of a stream of doubles, for a k-th smallest whose k is at most keep - 1, in
 * memory of a few times keep instead of one double a value: the clock stage's lowest 1 per
 * mille of a host's launch slacks was an array of a double a call (80 MB for 10 M calls)
 * and a selection over all of it. Values at or above the keep-th smallest so far are
 * dropped as they come; NaNs too. */
typedef struct cpa_smallest {
    double *v;
    size_t n, cap, keep;
    double below; /* what a value must be under to be kept */
} cpa_smallest;
/* 0, or -1 out of memory. keep >= 1. */
int cpa_smallest_init(cpa_smallest *s, size_t keep);
void cpa_smallest_spill(cpa_smallest *s);
static inline void cpa_smallest_add(cpa_smallest *s, double x)
{
    if (!(x < s->below))
        return;
    if (s->n == s->cap) {
        cpa_smallest_spill(s);
        if (!(x < s->below))
            return;
    }
    s->v[s->n++] = x;
}
/* The k-th smallest (0-based, k < keep) of the values added, which must be more than k;
 * reorders what is kept. */
double cpa_smallest_get(cpa_smallest *s, size_t k);
void cpa_smallest_free(cpa_smallest *s);
/* A 64-bit key and what goes with it. */
typedef struct cpa_kv {
    uint64_t key;
    uint64_t val;
} cpa_kv;
/* Sorts v[0..n) by key, stable (equal keys keep their order), in O(n) passes of a byte each
 * (those where every key has the same byte are skipped); tmp is scratch of n. The sorted
 * array ends in v. Where qsort's calls through a comparator were a tenth of an analysis. */
void cpa_sort_kv(cpa_kv *v, cpa_kv *tmp, size_t n);
/* Sorts v[0..n) ascending (no NaN; -0.0 before +0.0): insertion for a few, else a radix
 * sort on the bits (qsort when out of memory): qsort's calls through a comparator were
 * most of the clock stage's sorting. Returns 0. */
int cpa_sort_doubles(double *v, size_t n);
/* A double >= 0 (or +-0, NaN never) as a key that sorts as the double does. */
static inline uint64_t cpa_key_of_double(double d)
{
    uint64_t u;
    __builtin_memcpy(&u, &d, sizeof u);
    return u & ~(1ull << 63); /* -0.0 with +0.0 */
}

#endif
