/* stats_block: the live stats block a profiled process publishes in shared memory.
 *
 * Offers: the block's layout (one fixed-size struct, versioned, little-endian; written by
 * the shim's writer thread, docs/STATS_BLOCK.md), the seqlock both sides follow, and the
 * reader side for `collprof top` and tests: open (validated, owner-checked), snapshot (never
 * torn), list the candidate blocks of a directory.
 *
 * The reader never maps the file: it reads it with pread, so a block its owner truncates or
 * rewrites under it gives an error, never a SIGBUS or an out-of-bounds access.
 */
#ifndef COLLPROF_STATS_BLOCK_H
#define COLLPROF_STATS_BLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "common/settings.h"
#include "trace/trace_format.h"

#define CP_STATS_MAGIC "CPLIVE\0\0" /* 8 bytes */
#define CP_STATS_VERSION 1
#define CP_STATS_BYTES 16384
#define CP_STATS_RECENT 256          /* the ring of the last operations */
#define CP_STATS_OPS 16              /* per-op counters, indexed by enum cp_op */
#define CP_STATS_PATH_BYTES 1024
#define CP_STATS_LOST_CAUSES 8       /* lost_by_cause[]: room for causes 0..7 */
#define CP_STATS_PREFIX "collprof-"  /* then <uid>-<pid> */

enum cp_stats_flags {
    CP_STATS_GPU_TIMING = 1u << 0, /* GPU times are measured: in-flight and gpu_* are live */
    CP_STATS_HANG = 1u << 1,       /* the watchdog reported `hang` */
};

typedef struct cp_stats_op {
    uint64_t calls;
    uint64_t bytes;    /* NCCL's count x element size, summed */
    uint64_t host_ns;  /* host time spent inside the NCCL call */
    uint64_t gpu_ns;   /* GPU end - start of the completed ones */
} cp_stats_op;

/* One operation of the recent ring. */
typedef struct cp_stats_entry {
    uint64_t comm_id;      /* the communicator's id, the same on every rank; 0 unknown */
    uint64_t seq;
    uint64_t bytes;
    uint64_t enter_ns;     /* host CLOCK_MONOTONIC at entry */
    uint64_t gpu_start_ns; /* 0 until (unless) its GPU times are known */
    uint64_t gpu_end_ns;
    int32_t peer;          /* root or peer, -1 none */
    uint8_t op;            /* enum cp_op */
    uint8_t reserved[3];
} cp_stats_entry;

/* The oldest timed operation enqueued and not yet completed on the GPU. */
typedef struct cp_stats_inflight {
    uint64_t comm_id;
    uint64_t seq;
    uint64_t bytes;
    uint64_t since_ns;     /* host CLOCK_MONOTONIC at its entry */
    uint64_t age_ns;       /* update_ns - since_ns */
    int32_t peer;
    uint8_t op;            /* CP_OP_NONE: nothing in flight */
    uint8_t reserved[3];
} cp_stats_inflight;

/* What the watchdog reported (valid when flags has CP_STATS_HANG). */
typedef struct cp_stats_hang {
    uint64_t comm_id;
    uint64_t seq;
    uint64_t at_ns;        /* when it was reported */
    uint64_t age_ns;       /* in flight for this long then */
    uint64_t typical_ns;   /* p50 of that op's recent GPU times, 0 no history */
    int32_t peer;
    uint8_t op;
    uint8_t reserved[3];
} cp_stats_hang;

typedef struct cp_stats_block {
    char magic[8];              /* CP_STATS_MAGIC */
    uint32_t version;           /* CP_STATS_VERSION */
    uint32_t total_bytes;       /* CP_STATS_BYTES */
    _Atomic uint64_t seqlock;   /* odd while the writer updates; see cp_stats_write_begin */
    _Atomic uint32_t exited;    /* 1: the process ended (outside the seqlock: a signal sets it) */
    uint32_t flags;             /* enum cp_stats_flags */
    uint32_t pid;
    uint32_t uid;
    int32_t rank;               /* -1 unknown (learnt from the first comm when not launched) */
    int32_t local_rank;
    int32_t world_size;
    int32_t cuda_dev;           /* of the first communicator, -1 unknown */
    uint32_t nccl_version;      /* NCCL_VERSION_CODE, 0 unknown */
    uint32_t recent_count;      /* valid entries in recent[], <= CP_STATS_RECENT */
    uint64_t start_mono_ns;     /* CLOCK_MONOTONIC when tracing started */
    uint64_t start_realtime_ns; /* CLOCK_REALTIME read back to back with it */
    uint64_t update_ns;         /* CLOCK_MONOTONIC of the last update */
    uint64_t lost_records;      /* records the trace lost so far */
    uint64_t recent_total;      /* operations ever put in recent[]: newest at (total-1) % 256 */
    uint64_t reserved0;
    char hostname[CP_HOSTNAME_BYTES]; /* NUL-terminated */
    char job_id[CP_JOBID_BYTES];
    char trace_path[CP_STATS_PATH_BYTES];
    cp_stats_inflight inflight;
    cp_stats_hang hang;
    cp_stats_op ops[CP_STATS_OPS];
    cp_stats_entry recent[CP_STATS_RECENT];
    /* lost_records by cause (enum cp_lost_cause: 1 ring_full .. 7 rotated; [0] and
     * causes this version does not have stay 0). Reserved (zero) in blocks of older shims. */
    uint64_t lost_by_cause[CP_STATS_LOST_CAUSES];
    uint8_t reserved[CP_STATS_BYTES - 16272 - 32]; /* zero */
    /* calls the shim meant to time and could not, so far, by cause: [i] is the trace's
     * enum cp_untimed_cause i + 1 (event pool, plugin pool, group, no context) */
    uint64_t untimed[4];
} cp_stats_block;

_Static_assert(sizeof(cp_stats_entry) == 56, "stats entry size");
_Static_assert(sizeof(cp_stats_inflight) == 48, "stats in-flight size");
_Static_assert(sizeof(cp_stats_hang) == 48, "stats hang size");
_Static_assert(offsetof(cp_stats_block, seqlock) == 16, "seqlock offset");
_Static_assert(offsetof(cp_stats_block, hostname) == 112, "hostname offset");
_Static_assert(offsetof(cp_stats_block, untimed) == CP_STATS_BYTES - 32, "untimed offset");
_Static_assert(CP_UNTIMED_CAUSE_LAST == 4, "one untimed[] slot a cause");
_Static_assert(offsetof(cp_stats_block, inflight) == 1264, "in-flight offset");
_Static_assert(offsetof(cp_stats_block, ops) == 1360, "ops offset");
_Static_assert(offsetof(cp_stats_block, recent) == 1872, "recent offset");
_Static_assert(offsetof(cp_stats_block, lost_by_cause) == 16208, "lost by cause offset");
_Static_assert(CP_LOST_CAUSE_LAST < CP_STATS_LOST_CAUSES, "a slot a cause");
_Static_assert(sizeof(cp_stats_block) == CP_STATS_BYTES, "stats block size");

/* The writer's side of the seqlock (one writer per block). Between begin and end the writer
 * may change any field under the seqlock; a reader that saw the same even value before and
 * after its copy has a consistent snapshot. */
static inline void cp_stats_write_begin(cp_stats_block *b)
{
    uint64_t s = atomic_load_explicit(&b->seqlock, memory_order_relaxed);
    atomic_store_explicit(&b->seqlock, s + 1, memory_order_relaxed);
    /* the odd value must be visible before any of the data stores that follow */
    atomic_thread_fence(memory_order_release);
}
static inline void cp_stats_write_end(cp_stats_block *b)
{
    uint64_t s = atomic_load_explicit(&b->seqlock, memory_order_relaxed);
    atomic_store_explicit(&b->seqlock, s + 1, memory_order_release);
}

/* A writer's new block: zeroes, then the header a reader checks (magic, version, size). */
static inline void cp_stats_block_init(cp_stats_block *b)
{
    memset(b, 0, sizeof *b);
    memcpy(b->magic, CP_STATS_MAGIC, sizeof b->magic);
    b->version = CP_STATS_VERSION;
    b->total_bytes = CP_STATS_BYTES;
}

/* The ring slot the next entry takes: the oldest one's once the ring is full. */
static inline unsigned cp_stats_recent_slot(const cp_stats_block *b)
{
    return (unsigned)(b->recent_total % CP_STATS_RECENT);
}

/* Puts e into the ring as the newest entry (a writer does it between write_begin and
 * write_end); returns its slot. */
static inline unsigned cp_stats_recent_append(cp_stats_block *b, const cp_stats_entry *e)
{
    unsigned i = cp_stats_recent_slot(b);
    b->recent[i] = *e;
    b->recent_total++;
    if (b->recent_count < CP_STATS_RECENT)
        b->recent_count++;
    return i;
}

/* The block's file name in dir: "<dir>/collprof-<uid>-<pid>". */
void cp_stats_path(char *out, size_t len, const char *dir, unsigned uid, unsigned pid);

typedef struct cp_stats_handle cp_stats_handle;
/* Opens a block for reading: O_NOFOLLOW, a regular file owned by the caller's effective uid
 * (any owner for root), of exactly the size its header claims, with the right magic and
 * version. NULL with a one-line reason in err (the path in quotes). */
cp_stats_handle *cp_stats_open(const char *path, char *err, size_t errlen);
/* The same checking ownership against `uid` (0: any owner), for tests and tools. */
cp_stats_handle *cp_stats_open_as(const char *path, uid_t uid, char *err, size_t errlen);
void cp_stats_close(cp_stats_handle *h);
/* A consistent copy of the block: 0, or -1 when every one of a bounded number of tries was
 * torn by the writer, or when the file stopped being a valid block (errno set). */
int cp_stats_snapshot(cp_stats_handle *h, cp_stats_block *out);

/* The files of dir (NULL: /dev/shm) named collprof-<uid>-<pid>, sorted; they are only
 * candidates, cp_stats_open decides. Returns how many (paths malloc'ed, free with
 * cp_stats_list_free), or -1 when dir cannot be read. */
int cp_stats_list(const char *dir, char ***paths);
void cp_stats_list_free(char **paths, int n);

#endif
