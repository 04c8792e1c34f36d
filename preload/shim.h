/* shim: the parts of libcollprof.so and what each offers the others.
 *
 * libcollprof.so is preloaded into an unmodified NCCL job. It exports every NCCL entry point
 * of abi/nccl_api_list.h under NCCL's own name (never the pnccl* twins), forwards each call
 * to the real NCCL found at run time, and records the calls that matter as CALL records.
 * Nothing else is exported (exports.map). The parts:
 *
 *   real.c          the real NCCL of each calling object: found by the linker's rules, cached
 *   wrappers.c      the exported wrappers that only forward, generated from the X-macro list
 *   wrap_coll.c     collectives, send/recv and groups: the hot path that records
 *   wrap_comm.c     communicator life: init, split, shrink, finalize, destroy, abort, revoke
 *   comm_table.c    ncclComm_t -> cp_comm: lock-free lookup, comm ids agreed across ranks
 *   ring.c          per-thread SPSC rings and the lock-free list the writer drains
 *   ring_call.h     how a CALL carries its host ticks and its plugin call through the ring
 *   writer_thread.c the thread that drains rings into the rank's file every COLLPROF_FLUSH_MS
 *   io_exec.c       the trace file's blocking calls in a process of its own (io_exec.h)
 *   identity.c      who this process is: launcher env, host, job id, file name
 *   lifecycle.c     settings (once), start at the first recorded call, exit, fork
 *   signals.c       the fatal signals: flush, END, then the job's handler or the default
 *   cuda_driver.c   the job's CUDA driver, found at run time (never a DT_NEEDED)
 *   profiler_plugin.c  the shim as NCCL's profiler plugin: GPU times without events
 *   gpu_timing.c    the hot path's GPU timing: which calls get events, events around them
 *   event_pool.c    per-context pools of event pairs, lock-free, bounded
 *   gpu_poll.c      the writer's side: polling, reference events, DONE and NCCL_OP records
 *   sites.c         call sites: return address -> index (one probe), stacks captured once
 *   site_symbols.c  the writer's side: symbolizing a new site's stack into a SITE record
 *   unwind.c        stacks and names: libunwind opened at run time when present, else glibc
 *   stats_live.c    the writer's side: the live stats block in /dev/shm and the hang watchdog
 *
 * The hot path (a recorded call on a thread that already has its ring) takes no lock, makes
 * no system call (clock_gettime is the vDSO) and allocates nothing: all it uses is in hot.h,
 * which this header includes. Everything that may block
 * or allocate happens once: a thread's first record, a comm's creation, the process start.
 * Failure policy: the shim never changes what NCCL returns and never takes the job down; a
 * failure prints one `collprof: WARN` line and tracing degrades or stops.
 */
#ifndef COLLPROF_PRELOAD_SHIM_H
#define COLLPROF_PRELOAD_SHIM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "common/clock.h"
#include "preload/hot.h"
#include "preload/plugin_pool.h"
#include "trace/trace_format.h"

/* ---- exports: every entry point with NCCL's exact signature ----
 * Declared here from the list, so a hand-written wrapper whose signature drifted from
 * NCCL's does not compile. */
#define CP_DECLARE_EXPORT(ret, name, params, args) CP_EXPORT ret name params;
CP_NCCL_API(CP_DECLARE_EXPORT)
CP_NCCL_API_DEPRECATED(CP_DECLARE_EXPORT)
#undef CP_DECLARE_EXPORT

/* What a wrapper returns when the real function is missing: see real.c for why. */
#define CP_MISSING_RESULT ncclInvalidUsage

/* ---- lifecycle.c: mode, settings, start, shutdown ---- */
typedef struct cp_settings cp_settings;
const cp_settings *cp_settings_get(void);
/* Opens the trace and starts the writer thread, once per process (again in a fork child).
 * 0 when tracing runs, -1 when it could not start (then cp_mode is OFF: pass-through). */
int cp_process_start(void);
/* Drains, writes END, flushes, stops the writer. Idempotent; after it cp_mode is OFF. */
void cp_shutdown(int signal_number);
/* A fatal signal's handler wrote END: tracing is off for good (async-signal-safe). */
void cp_process_dying(void);

/* ---- signals.c: the fatal signals (which, and what they get, are in its header) ---- */
/* With the process's other hooks, once per process image: our handler on each fatal signal
 * the job has not ignored (over the job's own handler for the crash and stop signals). */
void cp_signals_install(void);

/* ---- ring.c: the rings' life (their hot half is in hot.h) ---- */
/* A ring for the calling thread: a free one left by an exited thread, else a new one while
 * the COLLPROF_BUFFER_MB budget lasts. NULL when none. */
cp_ring *cp_ring_acquire(size_t budget_bytes);
/* The thread that owned it exited: the writer drains what is left, a new thread may reuse it. */
void cp_ring_release(cp_ring *r);
cp_ring *cp_ring_list(void);

/* ---- writer_thread.c ---- */
/* Queues a record that is not on a hot path (COMM, PROCESS): under a mutex, written before
 * the ring records of the same drain, so a COMM always precedes the CALLs that name it. */
void cp_control_push(const void *record);
/* From a signal handler: drain and flush if the writer is not busy (best effort). */
void cp_writer_flush_from_signal(int end_signal);
/* Fork child: forget the parent's writer and thread without touching its file. */
void cp_writer_forget_after_fork(void);
/* fork's prepare/parent handlers: the writer parked outside its drain across the fork. */
int cp_writer_hold_for_fork(void);
void cp_writer_release_after_fork(int held);
/* Before exec: drains and writes everything, keeps the file open (a failed exec goes on). */
void cp_writer_flush_now(void);
/* Whether this process (not a vfork child sharing our memory) has a trace open. Lock-free. */
int cp_trace_open_here(void);

/* ---- comm_table.c (the comm itself and its lookup are in hot.h) ---- */
/* Registers a new comm (mutex). When the init has completed (blocking init), queries the
 * real NCCL for rank/nranks/device and queues the COMM record; otherwise that happens in
 * cp_comm_make_ready at its first use. Returns NULL if no slot is free within a probe's reach
 * (WARN once). */
cp_comm *cp_comm_create(ncclComm_t handle, uint64_t comm_id, uint64_t parent_id, int origin,
                        int color, int key, int completed, int rank_hint, int nranks_hint,
                        cp_nccl_lib *lib);
/* For a comm created in progress (non-blocking init): if NCCL now says it is ready, learns
 * rank and nranks and queues the COMM record. Returns the ready flag. */
int cp_comm_make_ready(cp_comm *c);
/* NCCL destroyed or aborted the comm (and said so): its entry leaves the table (the handle
 * may come back for another comm) and the comm is freed by a later cp_comm_reclaim, 10 ms
 * on (an aborted one 1 s on: a call the abort released may still be recording with it). */
void cp_comm_end(ncclComm_t handle, cp_comm *c, int aborted);
/* Writer, each drain: frees the comms that ended long enough ago. */
void cp_comm_reclaim(void);
/* The table's state: live entries, slots used (tombstones too), the longest probe a lookup
 * of any comm so far took (its slot's distance from home, + 1), comms freed so far
 * (COLLPROF_DEBUG=trace prints it at exit). */
void cp_comm_table_census(uint32_t *live, uint32_t *used, uint32_t *longest, uint64_t *freed);
/* Writer, every CP_PCLK_WINDOW_NS: each comm NCCL's plugin covers times one more call by
 * events too, to calibrate the plugin's GPU clock in the new window. */
void cp_comm_want_calibration(void);

/* ---- identity.c ---- */
typedef struct cp_identity {
    int32_t rank, local_rank, world_size; /* from the launcher env, -1 unknown */
    char launcher[CP_LAUNCHER_BYTES];
    char job_id[CP_JOBID_BYTES];
    char hostname[CP_HOSTNAME_BYTES];
} cp_identity;
void cp_identity_load(cp_identity *id);
/* "<dir>/rank00003-<host>-<pid>.cptrace", or "<dir>/norank-<host>-<pid>.cptrace" */
void cp_identity_file_name(const cp_identity *id, const char *dir, char *out, size_t len);
/* mkdir -p, each directory it creates with `mode` (less the umask). 0 or -1 (errno set). */
int cp_mkdir_p(const char *dir, unsigned mode);
uint64_t cp_comm_id_from_unique_id(const ncclUniqueId *id);
uint64_t cp_comm_id_init_all(const char *hostname, uint64_t counter);
uint64_t cp_comm_id_split(uint64_t parent_id, int color, uint64_t split_index, int shrink);
/* The first comm told us our rank (when the launcher env did not): a PROCESS record. */
void cp_identity_learn_rank(int rank, int nranks);

/* ---- the modules' hooks: lifecycle.c calls them through one table ----
 * What a module does when the process starts tracing (its first record, the trace file
 * chosen), around a fork, and when tracing ends. Starts run in the table's order (the GPU
 * timing mode before the writer, which writes it into the file header; the live block before
 * the writer thread that feeds it); a failed start stops the modules started before it, in
 * reverse; fork children reset and exits stop in reverse too (the writer first: it leans on
 * the others). A NULL hook: nothing to do then. */
typedef struct cp_start_info {
    const cp_identity *id;
    const cp_settings *settings;
    const char *path;      /* the trace file */
    uint32_t nccl_version; /* of the NCCL that started the trace, 0 unknown */
} cp_start_info;
typedef struct cp_module {
    const char *name;
    int (*start)(const cp_start_info *s); /* 0, or -1 (after its WARN): tracing off */
    void (*before_fork)(void);
    void (*after_fork_parent)(void);
    void (*after_fork_child)(void);
    void (*stop)(int signal_number);      /* exit: 0 (END's signal, as cp_shutdown's) */
} cp_module;
extern const cp_module cp_module_gpu_timing, cp_module_unwind, cp_module_gpu_poll,
    cp_module_comm, cp_module_ring, cp_module_live, cp_module_writer;

/* ---- wrap_coll.c: making the records (a call's begin and end are in hot.h) ---- */
/* A CALL with no data (groups, communicator life): op, comm (NULL: none), seq, count.
 * Communicator life passes CP_SITE_UNKNOWN: it is rare, and sites are for the hot calls. */
void cp_record_plain(uint8_t op, cp_comm *c, uint64_t seq, uint64_t count, uint64_t t0,
                     uint32_t gd, ncclResult_t r, uint32_t site);
/* Stamps the exit time (ticks) and puts the CALL record in this thread's ring (or counts it
 * lost). */
void cp_record_emit(const cp_call_info *ci);

/* ---- ring records that never reach the file ----
 * The hot path hands the writer what it must finish off the hot path through the thread's
 * own ring, in order with the CALL records: the writer consumes these types as it drains. */
enum { CP_REC_SHIM_PENDING = 0xff01, CP_REC_SHIM_SITE = 0xff02 };

/* ---- cuda_driver.c ---- */
#define CP_DECLARE_CU(ret, api, sym, params, args) typedef ret(*cp_cu_fn_##api) params;
CP_CUDA_API(CP_DECLARE_CU)
#undef CP_DECLARE_CU
typedef struct cp_cuda {
#define CP_CU_MEMBER(ret, api, sym, params, args) cp_cu_fn_##api api;
    CP_CUDA_API(CP_CU_MEMBER)
#undef CP_CU_MEMBER
} cp_cuda;
/* The driver's functions; NULL members are missing. Valid once cp_cuda_load returned 0. */
extern cp_cuda cp_cu;
/* Finds libcuda.so.1 (the job's own copy first) and the functions GPU timing needs, once
 * per process. 0, or -1 (then GPU timing falls back to host times). */
int cp_cuda_load(void);

/* ---- event_pool.c: events per CUDA context ---- */
#define CP_EV_PAIRS 4096 /* per context: power of two */
#define CP_GPU_CTX_MAX 64
typedef struct cp_gpu_ctx cp_gpu_ctx;
/* The context's pool (created at its first timed call), or NULL when the table is full or
 * events cannot be made in it. */
cp_gpu_ctx *cp_gpu_ctx_get(CUcontext ctx);
/* A free pair (creating it if the pool is not yet at CP_EV_PAIRS), or -1. Lock-free. */
int32_t cp_ev_pair_get(cp_gpu_ctx *c);
void cp_ev_pair_put(cp_gpu_ctx *c, uint32_t pair);
CUevent cp_ev_start(const cp_gpu_ctx *c, uint32_t pair);
CUevent cp_ev_end(const cp_gpu_ctx *c, uint32_t pair);
CUcontext cp_gpu_ctx_handle(const cp_gpu_ctx *c);
/* Every context ever seen, for the writer's reference events: count, and the i-th. */
unsigned cp_gpu_ctx_count(void);
cp_gpu_ctx *cp_gpu_ctx_at(unsigned i);
/* Calls the shim meant to time and could not, by cause (enum cp_untimed_cause): the writer
 * puts them in the trace (UNTIMED records) and the live block. Slow paths only. */
extern _Atomic uint64_t cp_untimed[CP_UNTIMED_CAUSE_LAST + 1];
static inline void cp_untimed_count(unsigned cause)
{
    atomic_fetch_add_explicit(&cp_untimed[cause], 1, memory_order_relaxed);
}

/* ---- profiler_plugin.c: the shim as NCCL's profiler plugin (the wrappers' side in hot.h) ---- */
typedef struct cp_pcall_view {
    uint32_t ch_started, ch_stopped;
    uint64_t gt_start, gt_end; /* globaltimer; gt_start UINT64_MAX: no channel began */
    uint64_t nccl_seq;
    uint8_t algo, proto, nchannels, nwarps;
} cp_pcall_view;
/* 1 when every task of the call started and every channel stopped; *v filled either way. */
int cp_pcall_state(cp_pcall *p, cp_pcall_view *v);
cp_pcall *cp_pcall_at(uint32_t index);
void cp_pcall_free(cp_pcall *p);
/* NCCL will start no task for this call, on its own thread after its API event: an in-place
 * send to itself, dropped at its group's end. Complete once its other tasks are. */
void cp_pcall_no_task(uint32_t index);
/* A globaltimer value on this process's CLOCK_MONOTONIC: 0, or -1 while unknown. */
int cp_plugin_clock(cp_pcall *p, uint64_t gt, uint64_t *host_ns);
/* Writer, each tick: the clock offset's windows. */
void cp_plugin_tick(uint64_t now_ns);
/* Writer: an upper bound of host - globaltimer from a call timed both ways (its events' end
 * less its plugin's end; two's complement), kept beside the callbacks' in the same windows. */
void cp_plugin_calibrate(cp_pcall *p, uint64_t offset_ns);
/* Writer: a calibrating call whose kernel NCCL says has ended began (+1) or stopped (-1)
 * waiting for its events' DONE; while one waits, the comm's other plugin times wait for it
 * (converted before it, they would rest on the callbacks' bound alone: milliseconds late on
 * a loaded machine). Only from its end: one that never ends (a hang) holds nothing back. */
void cp_plugin_calib_queued(cp_pcall *p, int delta);
/* Writer: a complete call entered NCCL at enter_ns (host) and its first channel began at gt
 * (globaltimer): a kernel starts after its call's entry, a lower bound of the offset. */
void cp_plugin_note_entry(cp_pcall *p, uint64_t enter_ns, uint64_t gt);
int cp_plugin_calib_waiting(cp_pcall *p);
/* Whether a job's own plugin gets NCCL's events through us. */
int cp_plugin_chained(void);

/* What the hot path hands the writer per timed op (a ring slot). */
typedef struct cp_pending_slot {
    cp_record_header h;  /* CP_REC_SHIM_PENDING */
    uint32_t comm_index;
    uint64_t seq;
    int32_t peer;
    uint8_t op;
    uint8_t release;     /* the last op on this pair: return it to the pool when done (a
                          * discarded plugin call: events timed it too, calibrate with it) */
    uint8_t recorded;    /* 0: the events could not be recorded (DONE says timing none) */
    uint8_t waits;       /* a calibrating plugin call: polls spent waiting for its events */
    uint8_t calib_held;  /* ... and it holds its comm's other plugin times meanwhile */
    uint8_t cupti;       /* CUPTI's records time it: cupti_id says which */
    cp_gpu_ctx *ctx;
    union {
        uint32_t pair;     /* events */
        uint32_t noch_ms;  /* plugin: since when (ms, wrapping) a later call of its comm
                            * ended while it has no channel yet; 0 not seen */
    };
    cp_pcall *pcall;     /* NULL: events; else NCCL's plugin times it (or, discarded, frees it) */
    union {
        uint64_t enter_ns; /* plugin: the CALL's entry, host ns (0 unknown) */
        uint64_t cupti_id; /* cupti: its kernels' external correlation id */
    };
} cp_pending_slot;
_Static_assert(sizeof(cp_pending_slot) <= CP_SLOT_BYTES, "a pending slot fits a ring slot");

/* ---- gpu_poll.c: the writer's side (token holder only) ---- */
typedef struct cp_trace_writer cp_trace_writer;
void cp_gpu_pending_add(const cp_pending_slot *slot);
/* Polls every pending pair in order without blocking, writes DONE for the completed.
 * `final`: CP_POLL_END, the process is ending: waits up to a short bound for what is still
 * in flight, then writes the rest untimed; CP_POLL_FLUSH (exec, a comm's end): converts what
 * completed and waits briefly for the events' pairs only. */
enum { CP_POLL_TICK = 0, CP_POLL_END = 1, CP_POLL_FLUSH = 2 };
void cp_gpu_poll(cp_trace_writer *w, int final);
int cp_gpu_poll_wanted(void);
/* Pairs still waiting for their DONE (token holder): what a fatal signal's flush loses. */
size_t cp_gpu_pending_count(void);
/* The oldest pair whose events are still in flight (issue order): 1 and *out, or 0. */
int cp_gpu_oldest_pending(cp_pending_slot *out);
/* Whether a pending pair's start event has completed: enum cp_hang_gpu_state. */
int cp_gpu_started(const cp_pending_slot *p);

/* ---- cupti.c: COLLPROF_GPU_TIMING=cupti ---- */
/* Opens libcupti and starts its kernel records, once; 0, or -1 (said at INFO): use events. */
int cp_cupti_start(void);
uint64_t cp_cupti_next_id(void);
/* Around the real call (or the outermost GroupEnd): the id its launches carry. */
void cp_cupti_push(uint64_t id);
void cp_cupti_pop(void);
/* Writer: hands CUPTI's records over (each tick unless CUPTI's own thread does; forced and
 * final at the end). */
void cp_cupti_flush(int final);
/* Writer: 1 and the id's kernels' span (CLOCK_MONOTONIC ns), with what the device ran before
 * it (before's nkernels and k[]), once whole; else 0. */
int cp_cupti_result(uint64_t id, uint64_t *start_ns, uint64_t *end_ns, cp_rec_kernels *before);
/* Writer: 1 and the KNAME record of a name not written yet (marked written), else 0. */
int cp_cupti_kname(uint32_t index, cp_rec_kname *out);

/* ---- sites.c ---- */
#define CP_SITES_MAX 4096
/* The site of a return address: one probe when known; a new one captures the calling
 * thread's stack (rare) and queues it to the writer. CP_SITE_UNKNOWN when off or full. */
uint32_t cp_site_of(void *return_addr);
typedef struct cp_site_slot {
    cp_record_header h;  /* CP_REC_SHIM_SITE */
    uint32_t site;
} cp_site_slot;
/* Writer: the SITE record of a new site, symbolized (site_symbols.c). */
void cp_site_write(cp_trace_writer *w, uint32_t site);
/* The raw stack of a site (sites.c to site_symbols.c). */
int cp_site_stack(uint32_t site, void *const **pcs, uint64_t *return_addr);

/* ---- unwind.c: stacks and frame names (libunwind opened at run time, else glibc) ---- */
/* At process start, off the NCCL call that may capture the first site. */
void cp_unwind_load(void);
/* The calling thread's return addresses, innermost first; how many. */
int cp_unwind_backtrace(void **pcs, int max);
/* The function holding ip and ip's offset in it: 0, or -1 when unnamed. */
int cp_unwind_proc_name(uintptr_t ip, char *buf, size_t len, uintptr_t *off);

/* ---- stats_live.c: live stats block and watchdog (writer thread, but start and close) ----
 * live/stats_block.h is the block's layout. All of it is fed from what the writer drains;
 * nothing on the hot path. */
/* At process start (cp_module_live), before the writer thread: the private state, and the
 * block unless COLLPROF_LIVE=0 (a failure: one WARN, no block, tracing goes on). */
/* A record as the writer drains it (CALL with its times in ns, COMM, PROCESS; others are
 * ignored), and a DONE as gpu_poll makes it. */
void cp_live_observe(const void *record);
void cp_live_done(const cp_rec_done *d);
/* Every writer tick that polled: in-flight operation, watchdog (WARN, HANG record, flag),
 * publication under the seqlock. */
void cp_live_tick(cp_trace_writer *w);
/* Exit (after the writer stopped) or a fatal signal (`in_signal`: async-signal-safe only):
 * marks the block exited and unlinks it. Only the process that created it does. */
void cp_live_close(int in_signal);
/* Around an exec (writer parked): the block loses its name, and gets it back if exec fails. */
void cp_live_before_exec(void);
void cp_live_after_failed_exec(void);

#endif
