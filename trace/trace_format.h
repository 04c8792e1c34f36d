/* The collprof trace format, version 1: the bytes on disk.
 *
 * docs/TRACE_FORMAT.md is the prose specification of this header; the two change together.
 * Everything is little-endian; every struct here is the exact on-disk layout (static
 * assertions below pin the sizes and offsets), so writer and reader share one definition.
 *
 * A file is a 512-byte file header followed by chunks. A chunk is a 40-byte chunk header
 * and a payload of whole records. A record starts with {u16 type, u16 size}; size counts
 * the whole record, is a multiple of 8, and lets a reader skip a type it does not know.
 * Chunks are written whole, each with a hash of its payload, so a file cut at any byte
 * (SIGKILL, a full disk) still reads back every whole chunk before the cut.
 */
#ifndef COLLPROF_TRACE_FORMAT_H
#define COLLPROF_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define CP_TRACE_MAGIC "COLLPROF"          /* 8 bytes, no terminator on disk */
#define CP_TRACE_BYTE_ORDER 0x01020304u    /* reads 0x04030201 on a byte-swapped file */
#define CP_TRACE_VERSION 1                 /* the version this code writes */
#define CP_TRACE_READ_VERSION 1            /* the newest compat_version this code can read */
#define CP_TRACE_HEADER_BYTES 512
#define CP_TRACE_FILE_SUFFIX ".cptrace"
/* The trace's side log, the same name with this suffix instead: the shim's own lines that
 * the job's stderr could no longer take (text, one `collprof: LEVEL ...` a line). */
#define CP_SIDE_LOG_SUFFIX ".log"

#define CP_CHUNK_MAGIC 0x4b435043u         /* "CPCK" */
#define CP_CHUNK_HEADER_BYTES 40
/* A reader refuses a chunk that claims more: a corrupt length must not make it
 * walk (or allocate) gigabytes. Writers use CP_CHUNK_DEFAULT_PAYLOAD. */
#define CP_CHUNK_MAX_PAYLOAD (16u << 20)
#define CP_CHUNK_DEFAULT_PAYLOAD (64u << 10)

#define CP_HOSTNAME_BYTES 64
#define CP_JOBID_BYTES 64
#define CP_LAUNCHER_BYTES 16

/* File header. Fields not known when the file is created (the rank a communicator gives,
 * for instance) arrive later as PROCESS records; the header holds what is known at open. */
typedef struct cp_file_header {
    char magic[8];               /* "COLLPROF" */
    uint32_t byte_order;         /* CP_TRACE_BYTE_ORDER */
    uint16_t version;            /* format version of the writer */
    uint16_t compat_version;     /* oldest reader version that can read this file */
    uint32_t header_bytes;       /* CP_TRACE_HEADER_BYTES; chunks start here */
    uint32_t flags;              /* CP_FILE_* */
    uint32_t pid;
    int32_t rank;                /* global rank from the launcher env, -1 unknown */
    int32_t local_rank;          /* -1 unknown */
    int32_t world_size;          /* -1 unknown */
    uint32_t nccl_version;       /* NCCL_VERSION_CODE of the loaded NCCL, 0 unknown */
    uint32_t reserved0;          /* must be zero */
    uint64_t mono_anchor_ns;     /* CLOCK_MONOTONIC ... */
    uint64_t realtime_anchor_ns; /* ... and CLOCK_REALTIME read back to back at open */
    uint64_t start_ns;           /* CLOCK_MONOTONIC at process start (0 unknown) */
    char hostname[CP_HOSTNAME_BYTES];  /* NUL-padded */
    char job_id[CP_JOBID_BYTES];       /* NUL-padded */
    char launcher[CP_LAUNCHER_BYTES];  /* torchrun, openmpi, pmi, slurm, none */
    uint8_t reserved[CP_TRACE_HEADER_BYTES - 216 - 8]; /* must be zero */
    uint64_t header_hash;        /* XXH3_64 of the 504 bytes before it */
} cp_file_header;

enum cp_file_flags {
    CP_FILE_GPU_TIMING = 1u << 0, /* the writer recorded GPU times (DONE records) */
};

typedef struct cp_chunk_header {
    uint32_t magic;           /* CP_CHUNK_MAGIC */
    uint32_t payload_bytes;   /* bytes of records after this header, multiple of 8 */
    uint64_t chunk_index;     /* 0, 1, 2 ... in file order: a gap means lost chunks */
    uint64_t lost_records;    /* running total of records dropped by the writer so far */
    uint64_t payload_hash;    /* XXH3_64 of the payload */
    uint32_t record_count;
    uint32_t header_hash;     /* low 32 bits of XXH3_64 of the 36 bytes before it */
} cp_chunk_header;

/* Record types. Numbers are never reused; a reader skips types it does not know. */
enum cp_record_type {
    CP_REC_PROCESS = 1,  /* identity learnt after open (rank, NCCL version, ...) */
    CP_REC_COMM = 2,     /* a communicator: index in this file -> identity across ranks */
    CP_REC_SITE = 3,     /* a call site: index -> symbolized stack */
    CP_REC_CALL = 4,     /* an NCCL call, written at enqueue */
    CP_REC_DONE = 5,     /* GPU completion of a CALL */
    CP_REC_CLOCK = 6,    /* a monotonic/realtime anchor pair, taken periodically */
    CP_REC_LOST = 7,     /* records dropped, by cause */
    CP_REC_HANG = 8,     /* watchdog: a collective in flight too long */
    CP_REC_END = 9,      /* clean end of the process's trace */
    CP_REC_NCCL_OP = 10, /* NCCL's own view of a CALL: its profiler plugin's descriptor */
    CP_REC_KNAME = 11,   /* a GPU kernel's name: index -> name (CUPTI's) */
    CP_REC_KERNELS = 12, /* the other kernels the GPU ran before a CALL's (CUPTI's) */
    CP_REC_SEGMENT = 13, /* this file is one segment of a rotated trace (COLLPROF_MAX_MB) */
    CP_REC_UNTIMED = 14, /* calls recorded without GPU times the shim meant to take, by cause */
    CP_REC_TYPE_MAX_KNOWN = 14
};

typedef struct cp_record_header {
    uint16_t type;
    uint16_t size; /* whole record, bytes, multiple of 8, >= 8 */
} cp_record_header;

/* Operations. Kept small so they fit in a byte; names come from cp_op_name(). */
enum cp_op {
    CP_OP_NONE = 0,
    CP_OP_ALLREDUCE = 1,
    CP_OP_BROADCAST = 2,
    CP_OP_REDUCE = 3,
    CP_OP_ALLGATHER = 4,
    CP_OP_REDUCESCATTER = 5,
    CP_OP_ALLTOALL = 6,
    CP_OP_GATHER = 7,
    CP_OP_SCATTER = 8,
    CP_OP_SEND = 9,
    CP_OP_RECV = 10,
    CP_OP_GROUP_START = 11,
    CP_OP_GROUP_END = 12,
    CP_OP_COMM_INIT = 13,
    CP_OP_COMM_SPLIT = 14,
    CP_OP_COMM_SHRINK = 15,
    CP_OP_COMM_FINALIZE = 16,
    CP_OP_COMM_DESTROY = 17,
    CP_OP_COMM_ABORT = 18,
    CP_OP_COMM_REVOKE = 19,
    CP_OP_COUNT
};

/* Datatypes are NCCL's own numbers (ncclDataType_t, 0..11); CP_DTYPE_UNKNOWN otherwise. */
#define CP_DTYPE_COUNT 12
#define CP_DTYPE_UNKNOWN 255
/* Reductions are NCCL's built-in numbers (0..4); every dynamic (PreMulSum) op is this: */
#define CP_REDOP_DYNAMIC 5
#define CP_REDOP_NONE 255

enum cp_call_flags {
    CP_CALL_IN_GROUP = 1u << 0,  /* issued between GroupStart and the outermost GroupEnd */
    CP_CALL_CAPTURED = 1u << 1,  /* the stream was being captured (CUDA graph): no GPU time */
    CP_CALL_TIMED = 1u << 2,     /* GPU events were recorded: a DONE record will follow */
    CP_CALL_IN_PLACE = 1u << 3,
    CP_CALL_NESTED = 1u << 4,    /* made by NCCL itself from inside another entry point */
};

/* 64 bytes: the hot record. */
typedef struct cp_rec_call {
    cp_record_header h;   /* CP_REC_CALL, 64 */
    uint8_t op;           /* enum cp_op */
    uint8_t dtype;        /* ncclDataType_t or CP_DTYPE_UNKNOWN */
    uint8_t redop;        /* 0..4, CP_REDOP_DYNAMIC, CP_REDOP_NONE */
    uint8_t flags;        /* enum cp_call_flags */
    uint32_t comm_index;  /* CP_REC_COMM index in this file; UINT32_MAX for none */
    uint32_t site_index;  /* CP_REC_SITE index; UINT32_MAX for unknown */
    uint64_t seq;         /* per-comm sequence for collectives, per (comm, peer) for p2p */
    uint64_t count;       /* NCCL's count argument, elements */
    uint64_t stream;      /* the user's stream handle, as an opaque number */
    uint64_t enter_ns;    /* host CLOCK_MONOTONIC at entry */
    uint32_t host_ns;     /* host time inside the call: read it with cp_call_host_ns */
    int32_t peer;         /* root for rooted collectives, peer for send/recv, -1 none */
    int8_t result;        /* ncclResult_t returned to the caller */
    uint8_t group_depth;  /* GroupStart nesting at the call */
    uint16_t thread;      /* small per-process thread number */
    uint32_t host_hi;     /* 0, or a long call's duration >> 20 (cp_call_host_ns) */
} cp_rec_call;

/* A CALL's host time. Under CP_HOST_NS_WIDE (4.29 s) it is host_ns, host_hi 0. From there on
 * host_hi holds the duration >> 20 and host_ns CP_HOST_NS_WIDE | its low 20 bits: exact to
 * the ns up to CP_HOST_NS_MAX (52 days), which means that long or longer (saturated). A
 * reader that knows no host_hi (the word was reserved, zero) reads such a call within 1.05
 * ms of 2^32 - 1, the value at which writers before it saturated: what it read of a long
 * call before, so the format keeps its compat_version (docs/TRACE_FORMAT.md). */
#define CP_HOST_LOW_BITS 20
#define CP_HOST_NS_WIDE 0xfff00000u
#define CP_HOST_NS_MAX ((1ull << (32 + CP_HOST_LOW_BITS)) - 1)
static inline uint64_t cp_call_host_ns(const cp_rec_call *c)
{
    if (!c->host_hi)
        return c->host_ns;
    return (uint64_t)c->host_hi << CP_HOST_LOW_BITS |
           (c->host_ns & ((1u << CP_HOST_LOW_BITS) - 1));
}
static inline void cp_call_set_host_ns(cp_rec_call *c, uint64_t ns)
{
    if (ns < CP_HOST_NS_WIDE) {
        c->host_ns = (uint32_t)ns;
        c->host_hi = 0;
        return;
    }
    if (ns > CP_HOST_NS_MAX)
        ns = CP_HOST_NS_MAX;
    c->host_hi = (uint32_t)(ns >> CP_HOST_LOW_BITS);
    c->host_ns = CP_HOST_NS_WIDE | (uint32_t)(ns & ((1u << CP_HOST_LOW_BITS) - 1));
}

enum cp_timing_source {
    CP_TIMING_NONE = 0,
    CP_TIMING_EVENTS = 1,   /* CUDA events on the user's stream */
    CP_TIMING_CUPTI = 2,    /* kernel activity records */
    CP_TIMING_HOST = 3,     /* no GPU: host enqueue/return only */
    CP_TIMING_PLUGIN = 4,   /* NCCL's profiler plugin: its kernel channels' GPU timers */
};

/* 40 bytes: GPU completion, matched to its CALL by (comm_index, op, peer, seq). */
typedef struct cp_rec_done {
    cp_record_header h;   /* CP_REC_DONE, 40 */
    uint32_t comm_index;
    uint64_t seq;
    uint64_t gpu_start_ns; /* on this process's CLOCK_MONOTONIC time line */
    uint64_t gpu_end_ns;
    int32_t peer;
    uint8_t op;
    uint8_t timing;        /* enum cp_timing_source */
    uint16_t reserved;     /* must be zero */
} cp_rec_done;

/* NCCL's algorithms and protocols (ncclAlgoToString, ncclProtoToString); 0 unknown or none
 * (point-to-point operations have neither). Names from cp_algo_name / cp_proto_name. */
enum cp_algo {
    CP_ALGO_UNKNOWN = 0, CP_ALGO_TREE = 1, CP_ALGO_RING = 2, CP_ALGO_COLLNET_DIRECT = 3,
    CP_ALGO_COLLNET_CHAIN = 4, CP_ALGO_NVLS = 5, CP_ALGO_NVLS_TREE = 6, CP_ALGO_PAT = 7,
    CP_ALGO_COUNT
};
enum cp_proto {
    CP_PROTO_UNKNOWN = 0, CP_PROTO_LL = 1, CP_PROTO_LL128 = 2, CP_PROTO_SIMPLE = 3,
    CP_PROTO_COUNT
};

/* 40 bytes: what NCCL's profiler plugin said of a recorded operation, matched to its CALL by
 * (comm_index, op, peer, seq) as DONE is; written just before that operation's DONE. */
typedef struct cp_rec_nccl_op {
    cp_record_header h;   /* CP_REC_NCCL_OP, 40 */
    uint32_t comm_index;
    uint64_t seq;         /* collprof's sequence number (the CALL's) */
    uint64_t nccl_seq;    /* NCCL's seqNumber: per communicator and function; p2p: UINT64_MAX */
    int32_t peer;
    uint8_t op;
    uint8_t algo;         /* enum cp_algo */
    uint8_t proto;        /* enum cp_proto */
    uint8_t nchannels;    /* channels NCCL ran it on */
    uint8_t nwarps;       /* warps per channel, 0 unknown */
    uint8_t kernel_channels; /* channels whose kernel start and stop NCCL reported */
    uint8_t kernel_started;  /* channels whose start NCCL reported: 0 with no DONE, the GPU
                              * never began the operation (a hang's rank that never joined) */
    uint8_t reserved[5];  /* must be zero */
} cp_rec_nccl_op;

/* A kernel name, written once before the first KERNELS record that names it. */
#define CP_KNAME_MAX 116
typedef struct cp_rec_kname {
    cp_record_header h;   /* CP_REC_KNAME, 128 */
    uint32_t name_index;  /* this file's; KERNELS records name it */
    uint32_t reserved;    /* must be zero */
    char name[CP_KNAME_MAX]; /* NUL-terminated, cut at CP_KNAME_MAX - 1 bytes (the same cut on
                              * every rank, so ranks compare) */
} cp_rec_kname;

/* What the GPU of this rank ran before a CALL's NCCL kernel (COLLPROF_GPU_TIMING=cupti): the
 * kernels of the call's device, not NCCL's, that ended after the device's previous NCCL
 * kernel began and before this one started, by name, the CP_KERNELS_MAX longest in all. */
#define CP_KERNELS_MAX 3
typedef struct cp_rec_kernels {
    cp_record_header h;   /* CP_REC_KERNELS, 72 */
    uint32_t comm_index;  /* the CALL's key, as a DONE's */
    uint64_t seq;
    int32_t peer;
    uint8_t op;
    uint8_t nkernels;     /* entries used, <= CP_KERNELS_MAX */
    uint8_t reserved[2];  /* must be zero */
    struct {
        uint32_t name_index; /* a KNAME record's */
        uint32_t count;      /* launches of it in the window */
        uint64_t total_ns;   /* their GPU time together */
    } k[CP_KERNELS_MAX];
} cp_rec_kernels;

enum cp_comm_origin {
    CP_COMM_INIT_RANK = 1,      /* InitRank, InitRankConfig, InitRankScalable */
    CP_COMM_INIT_ALL = 2,
    CP_COMM_SPLIT = 3,
    CP_COMM_SHRINK = 4,
};

/* 48 bytes: a communicator as this rank saw it. comm_id names it on every rank. */
typedef struct cp_rec_comm {
    cp_record_header h;    /* CP_REC_COMM, 48 */
    uint32_t comm_index;
    uint64_t comm_id;      /* the same on every rank of the communicator */
    uint64_t parent_id;    /* split/shrink parent, 0 none */
    int32_t nranks;
    int32_t rank;          /* this process's rank in the communicator */
    int32_t cuda_dev;      /* -1 unknown */
    int32_t color;         /* split color, 0 otherwise */
    int32_t key;           /* split key, 0 otherwise */
    uint8_t origin;        /* enum cp_comm_origin */
    uint8_t reserved[3];   /* must be zero */
} cp_rec_comm;

/* Variable size: a call site and its symbolized stack.
 * After the fixed part: frame_count strings, each a u16 length then bytes, no NUL, the
 * whole record padded with zeros to a multiple of 8. Each string reads "func+0xoff (lib)". */
typedef struct cp_rec_site {
    cp_record_header h;   /* CP_REC_SITE, 24 + strings */
    uint32_t site_index;
    uint64_t return_addr; /* the caller's return address (this process's address space) */
    uint16_t frame_count;
    uint16_t reserved[3]; /* must be zero */
} cp_rec_site;

/* Variable size: identity learnt after open. Same string encoding as SITE after the fixed
 * part: string_count strings, in this order: hostname, job id, launcher (later ones may be
 * absent). A later PROCESS record supersedes an earlier one. */
typedef struct cp_rec_process {
    cp_record_header h;   /* CP_REC_PROCESS, 32 + strings */
    int32_t rank;
    int32_t local_rank;
    int32_t world_size;
    uint32_t nccl_version;
    uint32_t pid;
    uint16_t string_count;
    uint16_t reserved0;   /* must be zero */
    uint32_t cuda_driver_version;
} cp_rec_process;

/* 24 bytes: monotonic and realtime read back to back (drift over long traces). */
typedef struct cp_rec_clock {
    cp_record_header h;   /* CP_REC_CLOCK, 24 */
    uint32_t reserved;    /* must be zero */
    uint64_t mono_ns;
    uint64_t realtime_ns;
} cp_rec_clock;

enum cp_lost_cause {
    CP_LOST_RING_FULL = 1,   /* the job produced faster than the writer drained */
    CP_LOST_WRITE_ERROR = 2, /* disk full or I/O error */
    CP_LOST_TOO_BIG = 3,     /* a record larger than a chunk */
    CP_LOST_NO_MEMORY = 4,   /* the shim could not allocate room for them */
    CP_LOST_AT_END = 5,      /* a fatal signal ended the process before they were finished */
    CP_LOST_WRITE_STALLED = 6, /* the file system did not answer: dropped while a write hung */
    CP_LOST_ROTATED = 7,     /* in a segment deleted to keep the trace under COLLPROF_MAX_MB */
    CP_LOST_CAUSE_LAST = CP_LOST_ROTATED,
};

/* 24 bytes: records dropped since the last LOST record of this cause. */
typedef struct cp_rec_lost {
    cp_record_header h;   /* CP_REC_LOST, 24 */
    uint32_t cause;       /* enum cp_lost_cause */
    uint64_t count;
    uint64_t at_ns;
} cp_rec_lost;

/* Why a call the shim meant to time has no GPU times (its CALL is not TIMED). */
enum cp_untimed_cause {
    CP_UNTIMED_EVENT_POOL = 1,  /* its context's CUDA event pairs were all in use (or failed) */
    CP_UNTIMED_PLUGIN_POOL = 2, /* the profiler plugin's pool of calls was full */
    CP_UNTIMED_GROUP = 3,       /* a group with more operations or streams than the shim times */
    CP_UNTIMED_NO_CONTEXT = 4,  /* the driver named no CUDA context for its stream */
    CP_UNTIMED_CAUSE_LAST = CP_UNTIMED_NO_CONTEXT,
};

/* 24 bytes: calls left untimed since the last UNTIMED record of this cause. */
typedef struct cp_rec_untimed {
    cp_record_header h;   /* CP_REC_UNTIMED, 24 */
    uint32_t cause;       /* enum cp_untimed_cause */
    uint64_t count;
    uint64_t at_ns;       /* CLOCK_MONOTONIC when the writer wrote it */
} cp_rec_untimed;

/* 40 bytes: the watchdog saw this operation in flight for age_ns. */
typedef struct cp_rec_hang {
    cp_record_header h;   /* CP_REC_HANG, 40 */
    uint32_t comm_index;
    uint64_t seq;
    uint64_t at_ns;
    uint64_t age_ns;
    int32_t peer;
    uint8_t op;
    uint8_t gpu_state;    /* enum cp_hang_gpu_state */
    uint8_t reserved[2];  /* must be zero */
} cp_rec_hang;

/* Whether the hung operation's GPU work had begun when the watchdog looked: a rank whose
 * stream never reached it did not join, the others wait inside it. Zero (unknown) is what a
 * writer that does not look writes. */
enum cp_hang_gpu_state {
    CP_HANG_GPU_UNKNOWN = 0,
    CP_HANG_GPU_NOT_STARTED = 1,  /* its start event had not completed */
    CP_HANG_GPU_STARTED = 2,      /* started, not finished */
};

/* 24 bytes: the process ended its trace on purpose (exit, a handled signal). */
typedef struct cp_rec_end {
    cp_record_header h;   /* CP_REC_END, 24 */
    int32_t signal;       /* 0 for a normal exit, else the signal that ended it */
    int32_t exit_code;    /* when known, else -1 */
    uint32_t reserved;    /* must be zero */
    uint64_t at_ns;
} cp_rec_end;

/* 32 bytes: the first record of every segment of a rotated trace. A process whose trace is
 * capped (COLLPROF_MAX_MB) writes segment 0 to its usual file name and segment N to the same
 * name with ".sNNNNNN" before the suffix; each segment starts with the same file header, this
 * record, and the records that what follows names (PROCESS, COMM, SITE, KNAME), so it reads
 * on its own. The oldest segments are deleted: the records written before the first segment
 * left (records_before of it) are the ones rotation dropped. */
#define CP_TRACE_SEGMENTS 8u /* the segments a writer keeps at most */
typedef struct cp_rec_segment {
    cp_record_header h;     /* CP_REC_SEGMENT, 32 */
    uint32_t segment;       /* 0, 1, 2 ... */
    uint64_t records_before; /* the writer's records in every earlier segment of the process */
    uint64_t at_ns;         /* CLOCK_MONOTONIC when the segment was opened */
    uint64_t lost_before;   /* the chunk headers' loss total then, less what the LOST record
                             * of cause rotated after it (the deletion that opened it) says */
} cp_rec_segment;

/* Sizes and offsets are the format: any change is a new version. */
_Static_assert(sizeof(cp_file_header) == CP_TRACE_HEADER_BYTES, "file header size");
_Static_assert(offsetof(cp_file_header, hostname) == 72, "hostname offset");
_Static_assert(offsetof(cp_file_header, header_hash) == 504, "header hash offset");
_Static_assert(sizeof(cp_chunk_header) == CP_CHUNK_HEADER_BYTES, "chunk header size");
_Static_assert(sizeof(cp_rec_call) == 64, "CALL record size");
_Static_assert(sizeof(cp_rec_done) == 40, "DONE record size");
_Static_assert(sizeof(cp_rec_comm) == 48, "COMM record size");
_Static_assert(sizeof(cp_rec_site) == 24, "SITE record fixed size");
_Static_assert(sizeof(cp_rec_process) == 32, "PROCESS record fixed size");
_Static_assert(sizeof(cp_rec_clock) == 24, "CLOCK record size");
_Static_assert(sizeof(cp_rec_lost) == 24, "LOST record size");
_Static_assert(sizeof(cp_rec_hang) == 40, "HANG record size");
_Static_assert(sizeof(cp_rec_end) == 24, "END record size");
_Static_assert(sizeof(cp_rec_untimed) == 24, "UNTIMED record size");
_Static_assert(sizeof(cp_rec_nccl_op) == 40, "NCCL_OP record size");
_Static_assert(sizeof(cp_rec_kname) == 128, "KNAME record size");
_Static_assert(sizeof(cp_rec_kernels) == 72, "KERNELS record size");
_Static_assert(sizeof(cp_rec_segment) == 32, "SEGMENT record size");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "collprof writes its trace in the host's byte order, which must be little-endian"
#endif

/* Names and sizes shared by every part that prints a record. */
const char *cp_op_name(unsigned op);             /* "AllReduce"; "?" when unknown */
int cp_op_from_name(const char *name);           /* -1 when unknown */
const char *cp_dtype_name(unsigned dtype);       /* "float32"; "?" when unknown */
const char *cp_redop_name(unsigned redop);       /* "sum"; "?" when unknown */
const char *cp_lost_cause_name(unsigned cause);
/* "event_pool", "plugin_pool", "group", "no_context"; NULL when unknown */
const char *cp_untimed_cause_name(unsigned cause);  /* "ring_full"; NULL when unknown */
const char *cp_record_type_name(unsigned type);  /* "CALL"; NULL when unknown */
const char *cp_algo_name(unsigned algo);         /* "RING"; "?" when unknown */
const char *cp_proto_name(unsigned proto);       /* "SIMPLE"; "?" when unknown */
int cp_algo_from_name(const char *name);         /* CP_ALGO_UNKNOWN when unknown */
int cp_proto_from_name(const char *name);
int cp_op_is_collective(unsigned op);            /* AllReduce .. Scatter */
int cp_op_is_p2p(unsigned op);                   /* Send, Recv */
/* A rotated trace's segment names (cp_rec_segment): segment 0 is path itself, segment N is
 * path with ".sNNNNNN" before the suffix. 0, or -1 when out is too small. */
int cp_trace_segment_path(char *out, size_t cap, const char *path, unsigned segment);
/* The segment a file name says (0 for a name without the tag) and the length of the part
 * of its name that its process's other segments share. */
long cp_trace_segment_of(const char *path, size_t *family_len);

/* Bytes per element, 0 when unknown. Inline: the shim needs it on every call. */
static inline unsigned cp_dtype_size(unsigned dtype)
{
    static const unsigned char size[CP_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return dtype < CP_DTYPE_COUNT ? size[dtype] : 0;
}

#endif
