/* nccl_emu: the inside of the emulated libnccl.so.2 (emu/nccl/README.md, docs/EMULATION.md).
 *
 * Offers the parts the entry points are built from: data types and reductions
 * (reduce_kernels.c, convert.c), NCCL's log (debug_log.c), the emulated network and the
 * transports it implies (netinfo.c, transport_log.c), the shared-memory rendezvous of a
 * communicator's ranks (rendezvous.c, shm_sync.c), communicators (comm*.c), the group
 * machinery that issues work to streams (group.c, issue.c) and the work itself, run on a
 * stream's worker (exec_coll.c, exec_p2p.c). Must not touch: anything but NCCL's API goes
 * out of the library (-fvisibility=hidden, a version script; exports.c publishes the API).
 */
#ifndef COLLPROF_EMU_NCCL_EMU_H
#define COLLPROF_EMU_NCCL_EMU_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_abi.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "emu/common/topo.h"

/* The release we emulate: NCCL 2.28.9 built against CUDA 13.0 (the ABI layout is 2.28's).
 * A second copy for tests (two NCCLs in one process) is built with another patch level. */
#ifndef CPN_NCCL_PATCH
#define CPN_NCCL_PATCH 9
#endif
#define CPN_NCCL_VERSION_CODE NCCL_VERSION(CP_NCCL_ABI_MAJOR, CP_NCCL_ABI_MINOR, CPN_NCCL_PATCH)

/* Every public entry point is implemented as cpn_impl_<name>; exports.c wraps each in the
 * strong pnccl<name> and its weak nccl<name> alias. */
#define CPN_DECLARE_IMPL(ret, name, params, args) ret cpn_impl_##name params;
CP_NCCL_API(CPN_DECLARE_IMPL)
CP_NCCL_API_DEPRECATED(CPN_DECLARE_IMPL)
#undef CPN_DECLARE_IMPL

/* ---- data types and reductions (convert.c, reduce_kernels.c) ---- */

size_t cpn_dtype_size(int dtype);   /* 0 for a value that is no ncclDataType_t */
int cpn_dtype_is_float(int dtype);

/* Round-to-nearest-even conversions, as the CUDA headers do them (NaN becomes the canonical
 * NaN; fp8 saturates to its largest finite value, __NV_SATFINITE). */
uint16_t cpn_double_to_half(double x);
double cpn_half_to_double(uint16_t h);
uint16_t cpn_double_to_bf16(double x);
double cpn_bf16_to_double(uint16_t b);
uint8_t cpn_double_to_fp8(double x, int e5m2);
double cpn_fp8_to_double(uint8_t v, int e5m2);
/* An element of any type, as a double (integers exactly up to 2^53), and back (RNE, integers
 * truncated toward zero and wrapped like a C cast of an in-range value). */
double cpn_elem_to_double(const void *p, int dtype);
void cpn_double_to_elem(double x, void *p, int dtype);

/* The device-side form of a reduction, as NCCL's hostToDevRedOp builds it. */
enum cpn_red_kind {
    CPN_RED_SUM = 0,
    CPN_RED_PROD,
    CPN_RED_MIN,
    CPN_RED_MAX,
    CPN_RED_PREMULSUM,  /* each input times `scalar`, then summed (ncclAvg on floats too) */
    CPN_RED_SUMPOSTDIV, /* summed, then divided by `divisor` (ncclAvg on integers) */
};

typedef struct cpn_redop {
    int kind;                 /* enum cpn_red_kind */
    int scalar_is_ptr;        /* PreMulSum with ncclScalarDevice: read when the work runs */
    uint64_t scalar_bits;     /* the scalar, stored as NCCL does: the dtype's bytes */
    const void *scalar_ptr;
    int divisor;              /* SumPostDiv */
    int user_op;              /* the ncclRedOp_t the caller passed (for logs) */
} cpn_redop;

/* acc[i] = pre(src[i]) for the first contribution ... */
void cpn_reduce_first(void *acc, const void *src, size_t n, int dtype, const cpn_redop *op,
                      uint64_t scalar_bits);
/* ... acc[i] = acc[i] (op) pre(src[i]) for each next one, in rank order ... */
void cpn_reduce_accum(void *acc, const void *src, size_t n, int dtype, const cpn_redop *op,
                      uint64_t scalar_bits);
/* ... and the post-operation (SumPostDiv's division) once all are in. */
void cpn_reduce_finish(void *acc, size_t n, int dtype, const cpn_redop *op);

/* ---- NCCL's log (debug_log.c) ---- */

enum cpn_subsys {
    CPN_INIT = 0x1, CPN_COLL = 0x2, CPN_P2P = 0x4, CPN_SHM = 0x8, CPN_NET = 0x10,
    CPN_GRAPH = 0x20, CPN_TUNING = 0x40, CPN_ENV = 0x80, CPN_ALLOC = 0x100, CPN_CALL = 0x200,
    CPN_PROXY = 0x400, CPN_NVLS = 0x800, CPN_BOOTSTRAP = 0x1000, CPN_REG = 0x2000,
    CPN_PROFILE = 0x4000, CPN_RAS = 0x8000, CPN_ALL = ~0,
};
enum cpn_log_level {
    CPN_LOG_NONE = 0, CPN_LOG_VERSION = 1, CPN_LOG_WARN = 2, CPN_LOG_INFO = 3,
    CPN_LOG_ABORT = 4, CPN_LOG_TRACE = 5,
};

int cpn_log_level(void);   /* NCCL_DEBUG, read once */
/* An INFO line for subsystem mask `flags`; dev is the [cudaDev] field (-1: this thread's). */
void cpn_info(unsigned long flags, int dev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A WARN: always remembered for ncclGetLastError, printed at NCCL_DEBUG=WARN and up. */
void cpn_warn_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define cpn_warn(...) cpn_warn_at(__FILE__, __LINE__, __VA_ARGS__)
/* The version line, once per process, when NCCL would print it. */
void cpn_log_version_once(int myrank);
const char *cpn_last_error(void);
void cpn_log_reset(void);   /* ncclResetDebugInit */
/* ncclDebugLog's form, for a plugin's logger: a line at any level (WARN remembered). */
void cpn_log_v(int level, unsigned long flags, const char *file, int line, const char *fmt,
               va_list ap);

/* ---- the emulated machine as this library sees it (netinfo.c) ---- */

typedef struct cpn_netinfo {
    int ok;                 /* 0: no socket interface at all (bootstrap fails) */
    char oob_if[16];        /* the bootstrap / OOB interface */
    char oob_ip[40];
    int nsock;              /* socket interfaces NET/Socket would use */
    char sock_if[CPEMU_MAX_NICS][16];
    char sock_ip[CPEMU_MAX_NICS][40];
    int nib;                /* IB / RoCE ports NET/IB would use */
    char ib_name[CPEMU_MAX_NICS][16];
    int ib_roce[CPEMU_MAX_NICS];
    int ib_disabled;        /* NCCL_IB_DISABLE=1 */
    int use_socket;         /* NET is Socket: COLLPROF_EMU_NET=socket, NCCL_IB_DISABLE, no HCA */
} cpn_netinfo;

/* The network as NCCL on emulated host `host` would find it (NCCL_SOCKET_IFNAME,
 * NCCL_IB_DISABLE, COLLPROF_EMU_NET honoured). */
void cpn_netinfo_get(int host, cpn_netinfo *ni);
/* Logs "Bootstrap: Using ..." once per process; ncclInvalidUsage when no interface. */
ncclResult_t cpn_bootstrap_net_init(int dev);
int cpn_env_int(const char *name, int dflt);

/* ---- shared memory between the ranks of a communicator (rendezvous.c, shm_sync.c) ---- */

typedef struct cpn_shm cpn_shm;   /* layout private to rendezvous.c */

typedef struct cpn_rank_info {
    int pid;
    int host, dev;          /* placement for the time model */
    int64_t bus_id;         /* NCCL's int64 form of the PCI bus id ("0000:18:00.0" -> 0x18000) */
} cpn_rank_info;

/* Waits of the shared protocol give up when `abort_word` becomes non-zero (ncclCommAbort)
 * or a peer process is gone. */
enum cpn_wait_result { CPN_WAIT_OK = 0, CPN_WAIT_ABORTED = 1, CPN_WAIT_PEER_GONE = 2 };

typedef struct cpn_link {
    cpn_shm *shm;             /* the mapping */
    size_t map_bytes;
    int nranks, rank;
    uint64_t key;             /* names the segment: /cpemu-nccl-<key hex> */
    _Atomic uint32_t *abort_word;
    cpn_rank_info *peers;     /* nranks entries, filled by cpn_link_attach */
    size_t slot_bytes;        /* collective staging slot per rank and buffer */
    size_t pair_bytes;        /* p2p buffer per ordered pair (two chunks) */
} cpn_link;

/* Maps (creating on first use) the segment of `key`, publishes this rank's info and waits
 * for every rank; the last to attach unlinks the name. ncclSuccess, ncclInvalidUsage
 * (a different rank count, a rank twice), ncclSystemError (shm), or ncclInternalError when
 * aborted while waiting. */
ncclResult_t cpn_link_attach(cpn_link *l, uint64_t key, int nranks, int rank,
                             const cpn_rank_info *mine, _Atomic uint32_t *abort_word);
void cpn_link_detach(cpn_link *l);
/* Removes the segments of jobs whose every attached rank died (ncclGetUniqueId). */
void cpn_shm_sweep(void);
/* Wakes every waiter of this rank on the segment (after setting the abort word). */
void cpn_link_wake_all(cpn_link *l);

/* Collective protocol: a barrier over all ranks, generation by generation. `arrival_ns`
 * is published with it; the barrier returns the maximum over the ranks. */
int cpn_coll_barrier(cpn_link *l, uint64_t seq, uint64_t arrival_ns, uint64_t *max_arrival);
int cpn_coll_step(cpn_link *l);      /* a plain barrier between data steps */
uint8_t *cpn_coll_slot(cpn_link *l, int rank, uint64_t buf);   /* buf: parity counter */
uint8_t *cpn_coll_result(cpn_link *l, uint64_t buf);

/* Host-side exchange for ncclCommSplit: every participant (participants NULL: ranks 0 ..
 * npart-1) publishes a 16-byte payload under seq; returns when all have, payloads[]
 * receiving them in participant order. One exchange at a time per rank. */
int cpn_boot_exchange(cpn_link *l, uint64_t seq, const int *participants, int npart,
                      const int32_t payload[4], int32_t (*payloads)[4]);

/* Point-to-point channels: see exec_p2p.c. */
typedef struct cpn_p2p_chan cpn_p2p_chan;
cpn_p2p_chan *cpn_p2p_chan_get(cpn_link *l, int src, int dst);
uint8_t *cpn_p2p_buffer(cpn_link *l, int src, int dst);
_Atomic uint32_t *cpn_doorbell(cpn_link *l, int rank);
void cpn_ring(cpn_link *l, int rank);
int cpn_wait_doorbell(cpn_link *l, uint32_t seen);
int cpn_peer_alive(const cpn_link *l, int rank);

/* Futexes (shared when the word lives in the segment, private otherwise). */
void cpn_futex_wait(_Atomic uint32_t *w, uint32_t val, int shared, long timeout_ns);
void cpn_futex_wake(_Atomic uint32_t *w, int shared);
uint64_t cpn_now_ns(void);   /* CLOCK_MONOTONIC */
/* Set by the first ncclCommAbort of the process: releases COLLPROF_EMU_HANG's held streams. */
extern _Atomic uint32_t cpn_hang_release;
/* Waits on a word of a core (private futex) while it still reads `val`, counted in *waiters
 * so that wakers can skip the system call when nobody sleeps. */
void cpn_core_wait(_Atomic uint32_t *waiters, _Atomic uint32_t *w, uint32_t val, long timeout_ns);
void cpn_core_wake(_Atomic uint32_t *waiters, _Atomic uint32_t *w);

/* ---- communicators (comm.c, comm_init.c, comm_child.c) ---- */

#define CPN_COMM_MAGIC 0x0ccc1cafe0c0ffeeull

/* The profiler plugin's objects (profiler.c): a communicator's plugin context, an op's
 * tasks as its API events saw them, a unit's launch and kernel-channel state. */
typedef struct cpn_prof_comm cpn_prof_comm;
typedef struct cpn_prof_op cpn_prof_op;
typedef struct cpn_prof_plan cpn_prof_plan;
#define CPN_MAX_USER_OPS 256

typedef struct cpn_user_op {
    int used;
    int dtype;
    cpn_redop op;
} cpn_user_op;

typedef struct cpn_reg {       /* ncclCommRegister handles and windows */
    struct cpn_reg *next;
    void *buff;
    size_t size;
    int is_window;
    int flags;
} cpn_reg;

/* What the stream items of a communicator share with it. Reference-counted so that a
 * communicator destroyed or aborted while items still sit in stream queues stays valid
 * for them; the last reference unmaps the segment. */
typedef struct cpn_core {
    _Atomic int refs;
    _Atomic uint32_t abort_word;      /* ncclCommAbort: every wait gives up */
    _Atomic uint32_t running;         /* items inside their work function */
    _Atomic uint32_t inflight;        /* items issued, not yet finished (ncclCommDestroy waits) */
    _Atomic uint32_t done_ticket;     /* items of one communicator run one at a time, in order */
    _Atomic int async_error;          /* set by a failed item (a peer gone) */
    _Atomic uint32_t waiters;         /* threads asleep on the words above: wake only then */
    pthread_mutex_t ticket_lock;
    uint64_t *skipped;                /* tickets finished out of order (dropped by capture) */
    size_t nskipped, capskipped;
    cpn_link link;
    uint64_t coll_seq;                /* barriers issued: the worker's own count */
    uint64_t step_buf;                /* staging buffer parity, shared by all collectives */
    uint64_t *p2p_sent, *p2p_recvd;   /* per peer: messages, as the worker sees them */
    cpemu_topo topo;                  /* the topology, with this comm's transport choices */
    cpemu_place *places;              /* nranks, in rank order */
    int fault_rank;                   /* the global rank COLLPROF_EMU_* faults name */
    int nranks, rank;
} cpn_core;

struct ncclComm {
    uint64_t magic;
    _Atomic int init_state;       /* ncclInProgress until initialized, then its result */
    _Atomic int async_state;      /* NCCL's asyncResult: what ncclCommGetAsyncError says */
    int blocking;
    int rank, nranks;
    int dev;                      /* CUDA ordinal */
    int nvml_dev;                 /* the topology's index of that GPU */
    int64_t bus_id;
    uint64_t comm_hash;           /* NCCL's commHash (children hash from it) */
    uint64_t key;                 /* the segment's key */
    uint64_t id_hash;             /* commIdHash for the INFO line (0 for children) */
    char func_name[32];
    int finalized, destroyed, revoked;
    int split_count, shrink_count;
    uint64_t boot_seq;            /* split exchanges created on this parent */
    _Atomic uint32_t boot_turn;   /* ... and done, in order */
    uint64_t issue_ticket;        /* next ticket handed to a unit of work */
    uint64_t coll_issued;         /* collectives issued: the SEQ of COLLPROF_EMU_HANG */
    uint64_t op_count;            /* calls, for the COLL log line's opCount */
    _Atomic uint32_t group_jobs;  /* non-blocking group or finalize threads in flight */
    int nnodes;                   /* hosts of the comm, channels of its ring and whether */
    int nchannels, nvlink_ring;   /* every hop is NVLink (cpn_log_transports) */
    cpn_prof_comm *prof;          /* the profiler plugin's context, NULL: no events */
    cpn_core *core;
    CUcontext ctx;                /* the device's primary context, retained */
    cpn_user_op user_ops[CPN_MAX_USER_OPS];
    cpn_reg *regs;
    pthread_mutex_t lock;
    ncclConfig_t config;
};

int cpn_comm_check(ncclComm_t comm, const char *opname, const char *argname);
ncclResult_t cpn_comm_ensure_ready(ncclComm_t comm);
ncclResult_t cpn_ptr_check(const void *ptr, const char *opname, const char *argname);

/* Initialization of one rank: all parameters NCCL's job carries. */
typedef struct cpn_init_job {
    ncclComm_t comm;              /* NULL for a NCCL_SPLIT_NOCOLOR rank */
    ncclComm_t owner;             /* whose blocking mode and async state the job follows */
    ncclComm_t *user_out;         /* children: where the comm goes once made */
    int nranks, rank, dev;
    uint64_t key, comm_hash, id_hash;
    ncclComm_t parent;            /* split / shrink */
    int color, key_arg, split_count;
    int split_color_pending;      /* split: rank and size come from the exchange */
    uint64_t boot_seq;
    char func_name[32];
    ncclResult_t result;
    struct cpn_init_job *next;
} cpn_init_job;

ncclResult_t cpn_init_run(cpn_init_job *job);      /* attach, log, ready (comm_init.c) */
ncclResult_t cpn_async_launch(cpn_init_job *job);  /* now at depth 0, else at GroupEnd */
ncclResult_t cpn_split_resolve(cpn_init_job *job); /* comm_child.c */
ncclResult_t cpn_comm_new(const ncclConfig_t *config, const ncclComm_t inherit,
                          ncclComm_t *out);
void cpn_comm_free(ncclComm_t comm);
void cpn_comm_abort_inflight(ncclComm_t comm);     /* ncclCommShrink's NCCL_SHRINK_ABORT */
void cpn_core_release(cpn_core *core);
uint64_t cpn_hash_bytes(const void *p, size_t n);  /* NCCL's getHash */
uint64_t cpn_hash_child(uint64_t parent_hash, int split_count, int color);
int cpn_fault_rank_for(int dev, int rank);
int cpn_visible_devices(void);
int cpn_user_op_mangle(const ncclComm_t comm, int op);
/* The device's primary context: retained for the comm's life, pushed around an issue (what
 * NCCL's cudaSetDevice(comm->cudaDev) does). */
int cpn_retain_device(ncclComm_t comm);
void cpn_release_device(ncclComm_t comm);
int cpn_push_device(ncclComm_t comm);
void cpn_pop_device(void);
int cpn_current_dev(void);   /* the calling thread's device, 0 when none (cudaGetDevice) */

/* INFO lines of an initialized rank: network, channels, transports (transport_log.c). */
void cpn_log_transports(ncclComm_t comm);
/* The per-comm copy of the topology the time model uses (socket fallback applied). */
void cpn_topo_for_comm(cpn_core *core, int host);

/* ---- groups and the work they issue (group.c, issue.c) ---- */

typedef struct cpn_op {
    int kind;                 /* enum cp_op: ALLREDUCE .. RECV */
    const char *name;         /* NCCL's opName: "AllReduce" */
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    int dtype;
    cpn_redop red;
    int root;                 /* root, or the peer of Send/Recv */
    CUstream stream;
    ncclComm_t comm;
    cpn_prof_op *prof;        /* the profiler's tasks (NULL without a plugin); group.c frees */
    int drop[2];              /* tasks NCCL drops at launch (a self pair in place); -1 none */
    struct cpn_op *next;
} cpn_op;

/* Thread-local group state: depth, queued work, deferred error. */
ncclResult_t cpn_group_start(void);
ncclResult_t cpn_group_end(ncclSimInfo_t *sim);
void cpn_group_error(ncclResult_t res);        /* ncclGroupErrCheck */
/* Queues a validated op (copied) for the outermost GroupEnd. */
ncclResult_t cpn_group_add_op(const cpn_op *op);
ncclResult_t cpn_group_add_init(cpn_init_job *job);
ncclResult_t cpn_group_note_comm(ncclComm_t comm);   /* blocking mode consistency */
int cpn_group_depth(void);                           /* NCCL's ncclGroupDepth */

/* Issues every op of one communicator as one unit of work on its stream(s). */
ncclResult_t cpn_issue_comm_ops(ncclComm_t comm, cpn_op *ops);
/* Model duration of one op on a comm, ns (GroupSimulateEnd, the work functions). */
double cpn_op_model_ns(const cpn_core *core, const cpn_op *op);

/* ---- the work, on the stream's worker (exec_coll.c, exec_p2p.c) ---- */

/* One collective's data movement and timing: `t` is this rank's arrival in model time and
 * becomes the collective's end. A cpn_wait_result: anything but CPN_WAIT_OK means it gave
 * up (aborted, or a peer died) and `t` is left alone. */
int cpn_exec_coll(cpn_core *core, const cpn_op *op, uint64_t *t);
/* Every Send/Recv of one unit at once (so grouped rings cannot deadlock); same contract. */
int cpn_exec_p2p(cpn_core *core, cpn_op **ops, int nops, uint64_t *t);
/* A collective of one rank on its own (NCCL's ncclLaunchOneRank). */
void cpn_exec_local(const cpn_op *op, uint64_t scalar_bits);
/* The PreMulSum scalar's bytes, read now for a device-resident one. */
uint64_t cpn_scalar_for(const cpn_redop *op, int dtype);

/* ---- the profiler plugin (profiler.c; emu/nccl/README.md, "Profiler plugin") ---- */

/* Non-NULL while a plugin is loaded: with none, each hook costs this one branch. */
extern _Atomic(void *) cpn_prof_plugin;
#define CPN_PROF_ON() \
    __builtin_expect(atomic_load_explicit(&cpn_prof_plugin, memory_order_relaxed) != NULL, 0)
#define CPN_PROF_MAX_CH 32

/* init.cc's ncclProfilerPluginInit (the plugin loaded at the first, refcounted) at the end
 * of a successful init, and ncclProfilerPluginFinalize in the comm's free. */
void cpn_prof_comm_init(ncclComm_t comm);
void cpn_prof_comm_fini(ncclComm_t comm);
/* The calling thread's API events: ncclEnqueueCheck's group depth bump, taskAppend's
 * GroupApi/CollApi/P2pApi events (op->prof gets the op's tasks), GroupEnd's state and
 * the GroupApi stop at its end. */
void cpn_prof_enqueue_enter(void);
void cpn_prof_task_append(cpn_op *op);
void cpn_prof_op_free(cpn_prof_op *po);
void cpn_prof_group_end_enter(void);
void cpn_prof_group_end_exit(void);
/* A unit's launch (issue.c): the plan of its tasks (NULL: nothing to report; holds a
 * reference for the issuer and one for the item), KernelLaunch around the enqueue, then
 * hostStreamPlanTask's Group and task events. */
cpn_prof_plan *cpn_prof_plan_new(ncclComm_t comm, cpn_op *ops, int nops);
void cpn_prof_launch_start(cpn_prof_plan *p, CUstream stream);
void cpn_prof_launch_stop(cpn_prof_plan *p);
void cpn_prof_plan_release(cpn_prof_plan *p);
/* On the stream worker: unit op `op` began / ended at this model time (CLOCK_MONOTONIC
 * ns); the proxy thread delivers its KernelCh events once that time has passed. */
void cpn_prof_kernel_begin(cpn_prof_plan *p, int op, uint64_t start_ns);
void cpn_prof_kernel_end(cpn_prof_plan *p, int op, uint64_t end_ns);

#endif
