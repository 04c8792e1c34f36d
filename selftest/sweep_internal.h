/* sweep_internal: what the sweep's files share (not part of selftest.h's API).
 *
 *   cuda_nccl.c  the CUDA driver and NCCL loaded at run time into one table (struct cps_lib),
 *                and a GPU's identity through it
 *   progress.c   the progress callback the sweep and the matrix report through
 *   sweep.c      the driver's GPU list, the NCCL log set-up, the size loop, the results
 *   world.c      the ranks of this process (struct cps_world): contexts, communicators,
 *                streams, buffers; timing with events, waiting with a timeout
 *   world_launcher.c  one rank per process under a launcher: the device, rank 0's id, the
 *                communicator; every rank's GPU, and figures agreed over the ranks
 *   sweep_ops.c  one op issued over every local rank, its counts and sizes, the correctness check
 *   p2p.c        the pairwise send/recv matrix, and the rail pairs between hosts
 *
 * Everything past the communicators' creation works on a struct cps_world: the ranks this
 * process drives, each with its comm, context, stream, events and buffers. One process over all
 * local GPUs fills it with ncclCommInitAll (cps_world_open_local); a process per GPU under a
 * launcher fills one rank of it with ncclCommInitRank (cps_world_open_launcher) and the rest
 * runs unchanged, but for what each process measured on its own: times, wrong elements and
 * NCCL's log are agreed over the ranks (cps_world_agree), so every rank reaches one verdict.
 */
#ifndef COLLPROF_SELFTEST_SWEEP_INTERNAL_H
#define COLLPROF_SELFTEST_SWEEP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_abi.h"
#include "launcher/launcher.h"
#include "abi/cuda_api_list.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "selftest/selftest.h"

/* ---- cuda_nccl.c ---- */

struct cps_lib {
    void *cuda, *nccl;
    char cuda_path[512], nccl_path[512];
#define CPS_LIB_CUDA_FN(ret, api, sym, params, args) ret (*api) params;
    CP_CUDA_API(CPS_LIB_CUDA_FN)
#undef CPS_LIB_CUDA_FN
#define CPS_LIB_NCCL_FN(ret, name, params, args) ret (*name) params;
    CP_NCCL_API(CPS_LIB_NCCL_FN)
#undef CPS_LIB_NCCL_FN
};

/* The driver, then NCCL, loaded once per process and never unloaded (neither library supports
 * being unloaded while its threads run). Returns the table, or NULL with a one-line reason. */
const struct cps_lib *cps_lib_load(char *why, size_t whyn);
/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)" */
void cps_cu_error(const struct cps_lib *L, CUresult rc, char *out, size_t outn);
/* why = "<what> failed: <the driver's error>"; returns -1. */
int cps_cu_fail(const struct cps_lib *L, CUresult rc, const char *what, char *why, size_t whyn);
/* CUDA ordinal `ordinal` as the run lists it: name, PCI id, compute capability, host. */
int cps_gpu_identity(const struct cps_lib *L, int ordinal, const char *host, cps_cuda_gpu *g,
                     char *why, size_t whyn);
/* A driver call in a function with L, why and whyn in scope: on failure, the reason and
 * return -1 (CPS_CU) or goto out (CPS_CU_OUT). */
#define CPS_CU(call, what)                                             \
    do {                                                               \
        CUresult rc_ = (call);                                         \
        if (rc_ != CUDA_SUCCESS)                                       \
            return cps_cu_fail(L, rc_, what, why, whyn);               \
    } while (0)
#define CPS_CU_OUT(call, what)                                         \
    do {                                                               \
        CUresult rc_ = (call);                                         \
        if (rc_ != CUDA_SUCCESS) {                                     \
            cps_cu_fail(L, rc_, what, why, whyn);                      \
            goto out;                                                  \
        }                                                              \
    } while (0)
/* NCCL's error string, and what ncclGetLastError adds (comm may be NULL). */
void cps_nccl_error(const struct cps_lib *L, ncclResult_t rc, ncclComm_t comm, char *out,
                    size_t outn);
/* Replaces line breaks and tabs with spaces: every reason is one line. */
void cps_one_line(char *s);

/* ---- world.c: the ranks this process drives ---- */

struct cps_rank {
    int rank;               /* NCCL rank in the communicator */
    int dev;                /* CUDA ordinal in this process */
    CUcontext ctx;          /* the device's primary context (retained) */
    CUstream stream;
    ncclComm_t comm;
    CUevent start, end;
    CUdeviceptr send, recv;
    size_t cap;             /* bytes of send and of recv */
    CUdeviceptr xchg;       /* small exchanges between processes (world_launcher.c) */
    size_t xchg_cap;
};

struct cps_world {
    const struct cps_lib *L;
    int n;                  /* ranks driven here (local indices 0..n-1) */
    int nranks;             /* ranks in the communicator */
    int nccl_ok;            /* comms exist */
    int aborted;            /* comms were aborted: destroy nothing of theirs again */
    double timeout_s;
    int world_rank;         /* under a launcher: this process's rank (n = 1 < nranks) */
    struct cps_rank r[CPS_MAX_GPUS];
};

/* What NCCL's init is asked: ncclCommInitAll over CUDA devices 0..ndev-1 when ndev > 0, else
 * ncclCommInitRank of rank in nranks from uid, on ctx. */
struct cps_init_req {
    CUcontext ctx;
    ncclUniqueId uid;
    int nranks, rank, ndev;
};
/* NCCL's init has no deadline: a rank that never comes or a bootstrap that never connects
 * holds it for ever. It runs on a thread of its own, waited for at most timeout_s.
 * 1: it returned, *rc its result and comms[] (ndev of them, or one) filled on success;
 * 0: not done in time (the thread is left blocked inside NCCL); -1: no thread. */
int cps_nccl_init_within(const struct cps_lib *L, const struct cps_init_req *req,
                         double timeout_s, ncclComm_t *comms, ncclResult_t *rc);
/* ncclCommInitAll over CUDA devices 0..ndev-1 (bounded by timeout_s), then a stream and two
 * events per rank. */
int cps_world_open_local(struct cps_world *w, const struct cps_lib *L, int ndev,
                         double timeout_s, char *why, size_t whyn);
/* One rank of id's world in this process: device LOCAL_RANK modulo the devices, rank 0's
 * ncclUniqueId through cp_rendezvous, ncclCommInitRank (bounded by timeout_s, as a rank that
 * never comes would hold it forever), a stream and two events; then every rank's GPU
 * exchanged, so r->gpus, nranks, nhosts, local_ranks, multi_process and world_rank are the
 * same on every rank. */
int cps_world_open_launcher(struct cps_world *w, const struct cps_lib *L, const cp_launcher *id,
                            double timeout_s, cps_run *r, char *why, size_t whyn);
/* cp_launcher_say_fn for a `struct cps_say`: the line becomes the reason. */
struct cps_say { char *why; size_t whyn; };
void cps_say_why(void *ctx, const char *line);
/* Under a launcher: v[0..n-1] becomes its sum (op ncclSum) or maximum (ncclMax) over every
 * rank of the world. Nothing to do when this process drives every rank. */
int cps_world_agree(struct cps_world *w, double *v, size_t n, int op, const char *what,
                    char *why, size_t whyn);
/* Under a launcher: NCCL's log as every rank read its own, merged (selftest.h, cps_run.log). */
int cps_world_merge_log(struct cps_world *w, cps_nccl_log *log, char *why, size_t whyn);
/* The device buffer for exchanges: at least bytes on local rank i. */
int cps_world_xchg(struct cps_world *w, int i, size_t bytes, char *why, size_t whyn);
/* Streams, events, buffers, comms (destroyed, or aborted after a failure), contexts. */
void cps_world_close(struct cps_world *w, int failed);
/* Send and recv buffers of at least bytes on every local rank. */
int cps_world_buffers(struct cps_world *w, size_t bytes, char *why, size_t whyn);
/* Makes rank i's context current. */
int cps_world_use(struct cps_world *w, int i, char *why, size_t whyn);
/* Aborts every comm (a hang or a failed call): later calls on them fail fast. */
void cps_world_abort(struct cps_world *w);

/* Work issued on the ranks of `mask` (bit i: local rank i) inside one NCCL group. */
typedef int (*cps_issue_fn)(struct cps_world *w, void *arg, char *why, size_t whyn);

/* warmup + iters calls of fn, an event on each masked stream before every timed call and
 * after the last; waits for them (timeout: every comm aborted, -1). us[k] = call k's GPU
 * time over the masked ranks: the longest (a send/recv pair: both ends) or, with shortest,
 * the shortest — the rank that arrived last, whose time holds no wait for a peer, so a rank
 * issued late (a host stall, the emulation on a loaded machine) does not lengthen the
 * collective's time, as on a GPU pipeline it would not. what names it in a failure. */
int cps_time_each(struct cps_world *w, unsigned mask, cps_issue_fn fn, void *arg, int warmup,
                  int iters, int shortest, const char *what, double *us, char *why,
                  size_t whyn);
/* The median of v (n > 0; v is reordered). */
double cps_median(double *v, int n);
/* Waits until every masked rank's stream reached everything issued so far. */
int cps_world_drain(struct cps_world *w, unsigned mask, const char *what, char *why,
                    size_t whyn);
/* ---- progress.c ---- */

/* The progress callback: what runs next and the fraction done, then one step more. */
struct cps_progress {
    const cps_options *o;
    int done, total;
    int quiet;              /* a rank other than 0 under a launcher: rank 0 tells */
};
void cps_progress_step(struct cps_progress *p, const char *what);
/* The same callback without a step more: a pair measured again (p2p.c), which no total
 * could count ahead. */
void cps_progress_note(struct cps_progress *p, const char *what);

/* ---- sweep_ops.c ---- */

/* Elements per call for op at nccl-tests size S over n ranks (per rank for AllGather and
 * ReduceScatter, per peer for AlltoAll), and the S that count gives back. */
size_t cps_op_count(int op, uint64_t bytes, int n);
uint64_t cps_op_bytes(int op, size_t count, int n);
/* Per-rank buffer bytes op needs at size S (the larger of send and recv). */
uint64_t cps_op_buffer_bytes(int op, uint64_t bytes, int n);

struct cps_op_call {
    int op;
    size_t count;
    int use_alltoall;       /* ncclAlltoAll exported; else grouped sends and receives */
};
/* cps_issue_fn for a struct cps_op_call: every local rank's call in one group. */
int cps_op_issue(struct cps_world *w, void *arg, char *why, size_t whyn);
/* One call of op at S = bytes on known inputs; *wrong = elements that differ from the host's
 * answer over every local rank's output. */
int cps_op_check(struct cps_world *w, int op, uint64_t bytes, int use_alltoall, long *wrong,
                 char *why, size_t whyn);

/* ---- p2p.c ---- */

/* Every ordered pair of this host's ranks: a one-way send/recv of bytes, timed; fills
 * r->p2p_*. Under a launcher every rank walks the same steps (a pair of local indices, run
 * on every host at once) and the figures of this host's pairs reach every rank. */
int cps_p2p_steps(const struct cps_world *w, const cps_run *r);
int cps_p2p_matrix(struct cps_world *w, uint64_t bytes, int warmup, int iters,
                   struct cps_progress *pr, cps_run *r, char *why, size_t whyn);
/* Under a launcher with 2+ hosts: the rail pairs (selftest.h, cps_run.net_pairs), a
 * one-way send/recv of bytes each way, one pair at a time over the whole job; fills
 * r->net_pairs alike on every rank. Nothing to do otherwise (0 steps). */
int cps_net_steps(const struct cps_world *w, const cps_run *r);
int cps_net_pairs(struct cps_world *w, uint64_t bytes, int warmup, int iters,
                  struct cps_progress *pr, cps_run *r, char *why, size_t whyn);

#endif
