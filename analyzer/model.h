/* analyzer/model: what each rank's trace file says, loaded once (load.c) and read by
 * everything after it (match.c, stats.c). Part of analyzer.h's API; included by it.
 */
#ifndef COLLPROF_ANALYZER_MODEL_H
#define COLLPROF_ANALYZER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace_format.h"

/* ---- the model: what each rank's file says ---- */

typedef struct cpa_comm {
    uint64_t comm_id;   /* the same on every rank of the communicator */
    uint32_t index;     /* this file's comm_index */
    int32_t nranks;
    int32_t rank;       /* this process's rank in the communicator */
} cpa_comm;

#define CPA_MAX_WARNINGS 1000  /* a directory of broken files must not flood the report */
#define CPA_SEQ_NONE UINT64_MAX  /* the shim's "no sequence" (a failed call) */

typedef struct cpa_call {
    uint64_t comm_id;      /* 0 when this file has no COMM record for comm_index */
    uint64_t seq;          /* per comm for collectives, per (comm, peer, direction) for p2p */
    uint64_t count;        /* elements */
    uint64_t enter_ns;     /* host CLOCK_MONOTONIC of this process */
    uint64_t gpu_start_ns; /* 0 unless gpu_timed */
    uint64_t gpu_end_ns;
    uint32_t comm_index;
    uint32_t host_ns;      /* host time inside the call */
    int32_t peer;          /* root of rooted collectives, peer of send/recv, -1 none */
    int32_t nranks;        /* the communicator's, -1 unknown */
    int32_t comm_rank;     /* this rank in the communicator, -1 unknown */
    uint8_t op;            /* enum cp_op: a collective or CP_OP_SEND / CP_OP_RECV */
    uint8_t dtype;
    uint8_t redop;
    uint8_t flags;         /* enum cp_call_flags */
    uint8_t done;          /* a DONE record was matched to this call */
    uint8_t gpu_timed;     /* ... and it carried usable GPU times (end >= start > 0) */
} cpa_call;

typedef struct cpa_rank {
    char *path;
    int32_t rank;          /* header's, superseded by a PROCESS record's when >= 0 */
    uint32_t pid;
    char hostname[CP_HOSTNAME_BYTES + 1];
    cpa_comm *comms;       /* sorted by index after load */
    size_t ncomms;
    cpa_call *calls;       /* in file order */
    size_t ncalls;
    size_t cap_comms, cap_calls;
    uint64_t records;      /* valid records read */
    uint64_t lost_records; /* the writer's own count of records it dropped */
    uint64_t unmatched_done; /* DONE records with no CALL to go to */
    int walk_stop;         /* enum cp_walk_stop */
    int ended;             /* an END record was seen: the process closed its trace */
} cpa_rank;

typedef struct cpa_model {
    cpa_rank *ranks;       /* sorted by rank */
    size_t nranks;
    char **warnings;       /* one line each, what and where */
    size_t nwarnings;
    size_t cap_warnings;
    uint64_t dropped_warnings; /* past CPA_MAX_WARNINGS: counted, not kept */
    uint64_t records;
    uint64_t lost_records;
} cpa_model;

/* Loads every trace file of dir. Returns 0 and *out, or -1 with one line in err when dir
 * cannot be listed, holds no trace file, or no file in it could be read. */
int cpa_model_load(const char *dir, cpa_model **out, char *err, size_t errlen);
void cpa_model_free(cpa_model *m);

/* Internal to the library (model.c): a warning line into the model, and geometric growth
 * of an array so that *cap >= need (element size elem). Both return 0, or -1 out of memory. */
int cpa_model_warn(cpa_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cpa_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
