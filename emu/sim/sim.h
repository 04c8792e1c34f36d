/* collprof-sim: a training-like workload that calls only the NCCL and CUDA driver APIs.
 *
 * The same binary runs on the emulation (LD_LIBRARY_PATH=build/emu) and on real GPUs, and it is
 * the job collprof profiles in our tests: NCCL is linked directly (DT_NEEDED libnccl.so.2) so an
 * LD_PRELOADed profiler sees every call; the driver is dlopen()ed so a machine without one still
 * starts and says so. This header is what the files of emu/sim/ share:
 *
 *   main.c        one rank's life: identity, driver, rendezvous, communicators, steps, report
 *   options.c     the command line and --help
 *   driver.c      finding libcuda.so.1 and libnccl.so.2, the device and its context
 *   launch.c      --launch N: N local ranks, each a re-executed copy of this program
 *   comm.c        issuing NCCL calls: counts, --late, --mismatch, groups, --check hooks
 *   watchdog.c    --timeout: PyTorch's NCCL watchdog (abort, one line, exit 6)
 *   check.c       deterministic inputs, host-side expected results, comparison
 *   patterns.c    ddp, fsdp, tp, moe;  patterns_pp.c: pp and mixed
 *
 * Who a rank is (torchrun / OpenMPI / PMI / Slurm variables) and how rank 0's ncclUniqueId
 * reaches the others (COLLPROF_SIM_RENDEZVOUS=DIR, or MASTER_ADDR:MASTER_PORT) come from
 * launcher/launcher.h, which `collprof selftest` shares.
 */
#ifndef COLLPROF_SIM_H
#define COLLPROF_SIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "launcher/launcher.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

/* NCCL is linked directly: its entry points are ordinary external functions here. */
#define SIM_DECLARE_NCCL(ret, name, params, args) ret name params;
CP_NCCL_API(SIM_DECLARE_NCCL)
#undef SIM_DECLARE_NCCL

enum sim_exit {
    SIM_EXIT_OK = 0,
    SIM_EXIT_CHECK = 1,      /* --check found a wrong result */
    SIM_EXIT_USAGE = 2,      /* bad flag or launcher variable */
    SIM_EXIT_CANNOT_RUN = 3, /* no driver, no device, NCCL init failed, no rendezvous */
    SIM_EXIT_FAILED = 4,     /* NCCL or the driver failed after the communicators were up */
    SIM_EXIT_TIMEOUT = 6     /* the watchdog fired */
};

/* The communication calls, in the order of the call-count line. */
enum sim_op {
    SIM_ALLREDUCE, SIM_ALLGATHER, SIM_REDUCESCATTER, SIM_BROADCAST, SIM_REDUCE,
    SIM_ALLTOALL, SIM_GATHER, SIM_SCATTER, SIM_SEND, SIM_RECV, SIM_NOPS
};
extern const char *const sim_op_name[SIM_NOPS];
int sim_op_parse(const char *s); /* -1 when not an op name (case-insensitive) */

enum sim_pattern_id { SIM_DDP, SIM_FSDP, SIM_TP, SIM_PP, SIM_MOE, SIM_MIXED, SIM_NPATTERNS };
extern const char *const sim_pattern_name[SIM_NPATTERNS];

enum sim_field { SIM_FIELD_COUNT, SIM_FIELD_DTYPE, SIM_FIELD_ROOT, SIM_FIELD_OP, SIM_FIELD_REDOP,
                 SIM_FIELD_PEER };

#define SIM_MAX_RULES 32
/* The compute kernels of --gpu-compute (sim_compute). */
enum { SIM_FWD = 0, SIM_BWD = 1, SIM_NKERNELS = 2 };
struct sim_late { int rank; double ms; };
struct sim_slow { int rank; double factor; int kernel; /* -1: every one */ };
struct sim_mismatch {
    int rank;
    uint64_t seq;       /* index among the rank's communication calls, 0-based */
    int field;          /* enum sim_field */
    long long value;    /* the count, dtype, root, peer, redop, or (op) an enum sim_op */
};

struct sim_options {
    int pattern;
    long steps;
    int check;
    double timeout_s;
    int launch;         /* 0: run as one rank */
    double scale;       /* message sizes and compute times */
    int stats;
    int one_stream;     /* every communicator on comms[0]'s stream */
    int gpu_compute;    /* compute phases are kernels on the GPU, not host sleeps */
    int nslow;
    struct sim_slow slow[SIM_MAX_RULES]; /* --slow-compute */
    int nlate, nmismatch;
    struct sim_late late[SIM_MAX_RULES];
    struct sim_mismatch mismatch[SIM_MAX_RULES];
    int launch_argi, launch_argc; /* where --launch sits in argv, to drop it for the ranks */
};
/* 0: run; 1: --help or --version was printed; -1: a usage error line was printed. */
int sim_options_parse(int argc, char **argv, struct sim_options *o);

/* The variable naming the rendezvous directory (launcher/launcher.h's other way is TCP). */
#define SIM_RENDEZVOUS_VAR "COLLPROF_SIM_RENDEZVOUS"

/* The driver entry points, resolved by their real symbol names (cuMemAlloc_v2, ...). */
struct sim_cuda {
#define SIM_CUDA_PTR(ret, api, sym, params, args) ret (*api) params;
    CP_CUDA_API(SIM_CUDA_PTR)
#undef SIM_CUDA_PTR
    void *lib;
    char path[4096];
};
/* Loads libcuda.so.1 (the one that belongs with the loaded libnccl.so.2) and checks the entry
 * points collprof-sim needs. -1 with why filled. */
int sim_cuda_load(struct sim_cuda *cu, char *why, size_t cap);
/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)" */
void sim_cuda_result(const struct sim_cuda *cu, CUresult r, char *out, size_t cap);
/* The file the linked libnccl.so.2 was loaded from; -1 when it cannot be told. */
int sim_nccl_path(char *out, size_t cap);
/* Whether a directory is the emulation's: its libcuda.so.1 is the emulated driver. */
int sim_dir_is_emulation(const char *dir);

int sim_launch(int argc, char **argv, const struct sim_options *o);

/* ---- one rank's state ---- */

#define SIM_MAX_COMMS 4

struct sim_comm {
    ncclComm_t comm;
    const char *name;   /* "world", "tp", "dp" */
    CUstream stream;
    int rank, size;
    uint64_t seq;       /* calls issued on this communicator so far */
};

struct sim_watchdog;

struct sim_check_failure {
    int failed;
    long step;
    int op, comm;
    uint64_t seq;
    size_t index;
    double got, expected;
};

struct sim {
    const struct sim_options *opt;
    cp_launcher id;                /* rank, world, local rank, how to rendezvous */
    struct sim_cuda cu;
    CUdevice dev;
    CUcontext ctx;
    int ncomms;
    struct sim_comm comms[SIM_MAX_COMMS];
    uint64_t calls;                /* communication calls so far: the --mismatch SEQ */
    uint64_t counts[SIM_NOPS];
    long step;
    double late_ms;                /* this rank's --late */
    double slow_factor[SIM_NKERNELS]; /* this rank's --slow-compute, per kernel (1: none) */
    CUfunction kernels[SIM_NKERNELS]; /* --gpu-compute */
    int group_depth;
    struct sim_pending *pending;   /* calls of the open group, checked at ncclGroupEnd */
    int npending, cap_pending;
    struct sim_check_failure first_failure;
    void *host_buf;                /* --check staging, grown on demand */
    size_t host_cap;
    CUdeviceptr *allocs;
    int nallocs, cap_allocs;
    CUdeviceptr scratch_send, scratch_recv; /* a --mismatch call whose size changed */
    size_t scratch_bytes;
    struct sim_watchdog *wd;
    void *pattern_state;
};

/* One line on stderr, "collprof-sim: rank R: ..." once the rank is known; one write(2). */
void sim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_set_rank(int rank);
/* snprintf for messages that may be cut short (long paths): truncation is fine there. */
void sim_format(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Ends the process with code, unless the watchdog is already ending it (then waits for that). */
_Noreturn void sim_exit(int code);
/* A driver call that must not fail once running: on failure, one line and exit 4. */
void sim_cu_check(struct sim *s, CUresult r, const char *what);
double sim_now_s(void);
void sim_sleep_us(double us);

/* comm.c */
struct sim_call {
    int op;                 /* enum sim_op */
    int comm;               /* index into sim.comms */
    size_t count;           /* NCCL's count argument */
    ncclDataType_t dtype;
    ncclRedOp_t redop;
    int root;               /* Broadcast, Reduce, Gather, Scatter */
    int peer;               /* Send, Recv */
    CUdeviceptr send, recv; /* equal for an in-place call */
    uint32_t tag;           /* Send/Recv: the fill tag both ends agree on */
};
void sim_call(struct sim *s, const struct sim_call *c);
void sim_group_start(struct sim *s);
void sim_group_end(struct sim *s);
int sim_comm_add(struct sim *s, ncclComm_t comm, const char *name);
CUdeviceptr sim_alloc(struct sim *s, size_t bytes);
void sim_free_all(struct sim *s);
void sim_sync_all(struct sim *s);
/* Elements for a message of `bytes` at full scale, after --scale (at least 1). */
size_t sim_elems(const struct sim *s, double bytes, size_t elem_size);
/* Host-side compute of `us` microseconds at full scale, after --scale. */
/* A compute phase of us microseconds (times --scale): the host sleeps, or with --gpu-compute
 * the phase's kernel (SIM_FWD, SIM_BWD: sim_fwd_gemm, sim_bwd_gemm) runs on the rank's first
 * stream while the host goes on, --slow-compute times longer on its rank. */
void sim_compute(const struct sim *s, int kernel, double us);
/* --gpu-compute: loads the compute kernels' PTX (exit 3 when the driver refuses it). */
void sim_compute_setup(struct sim *s);
void sim_nccl_fail(struct sim *s, ncclResult_t r, const char *call, int comm, int code);

/* check.c */
size_t sim_dtype_size(ncclDataType_t t);
int sim_dtype_parse(const char *s); /* -1 when unknown */
int sim_redop_parse(const char *s);
/* Elements the call reads from send and writes to recv, for a communicator of n ranks. */
size_t sim_send_elems(const struct sim_call *c, int n, int me);
size_t sim_recv_elems(const struct sim_call *c, int n, int me);
/* Whether --check can fill and verify this call: a dtype it can encode, a built-in redop.
 * (A rank whose recv is empty, a Send or a non-root Reduce, still fills its inputs.) */
int sim_checkable(const struct sim_call *c);
void sim_fill(struct sim *s, const struct sim_call *c, uint32_t tag, void *host, size_t elems);
/* Compares recv (host copy) with the expected result; records the first difference. */
void sim_verify(struct sim *s, const struct sim_call *c, uint32_t tag, uint64_t seq,
                const void *host, size_t elems);

/* watchdog.c */
int sim_watchdog_start(struct sim *s);
void sim_watchdog_stop(struct sim *s);
/* A host call that may block (init, split, a collective, ncclGroupEnd) is starting / done. */
void sim_watchdog_enter(struct sim *s, const char *what, int op, int comm, uint64_t seq);
void sim_watchdog_leave(struct sim *s);
/* The call is enqueued on the communicator's stream: watch it until its event completes. */
void sim_watchdog_track(struct sim *s, int op, int comm, uint64_t seq);
int sim_aborting(void);
/* Waits for the watchdog to end the process: what a thread does once an abort has begun. */
_Noreturn void sim_park(void);

/* patterns.c, patterns_pp.c */
struct sim_pattern {
    void (*setup)(struct sim *s); /* communicators beyond world, buffers, start-up calls */
    void (*step)(struct sim *s);  /* one training step's calls, s->step set; not synchronised */
};
extern const struct sim_pattern sim_patterns[SIM_NPATTERNS];
void sim_pattern_ddp_setup(struct sim *s);
void sim_pattern_ddp_step(struct sim *s);
void sim_pattern_fsdp_setup(struct sim *s);
void sim_pattern_fsdp_step(struct sim *s);
void sim_pattern_tp_setup(struct sim *s);
void sim_pattern_tp_step(struct sim *s);
void sim_pattern_moe_setup(struct sim *s);
void sim_pattern_moe_step(struct sim *s);
void sim_pattern_pp_setup(struct sim *s);
void sim_pattern_pp_step(struct sim *s);
void sim_pattern_mixed_setup(struct sim *s);
void sim_pattern_mixed_step(struct sim *s);

#endif
