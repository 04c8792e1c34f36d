/* selftest/selftest: `collprof selftest` — is this node healthy?
 *
 * The parts, each its own file and header section below:
 *   topology.h   what the node has (sysfs under a root, NVML): GPUs, NICs, a link per GPU pair
 *   sweep        the measurement: the CUDA driver's GPU list, every collective over a size sweep
 *                timed with CUDA events, a correctness check at a small size, the pairwise
 *                send/recv matrix; one process over all local GPUs (ncclCommInitAll), or one
 *                process per GPU under torchrun/mpirun/srun (sweep.c, sweep_ops.c, p2p.c,
 *                world.c, world_launcher.c, cuda_nccl.c; sweep_internal.h says which does what)
 *   transport    NCCL's own INFO log (NCCL_DEBUG_FILE) read back: which transport each
 *                connection used, and the `transport` check (nccl_log.c, transport_check.c)
 *   expect       what the links should give (expect.c; efficiencies in docs/ARCHITECTURE.md)
 *   verdict      the checks, PASS/WARN/FAIL, the text summary and the --json object
 *                (verdict.c, summary.c, selftest_json.c)
 *   ops.c        op names, the --ops list, busbw factors, status names, sizes as text
 *
 * CUDA and NCCL are loaded at run time (dlopen of libcuda.so.1 and libnccl.so.2): collprof
 * builds and starts without them and says why it cannot run (exit 3).
 */
#ifndef COLLPROF_SELFTEST_H
#define COLLPROF_SELFTEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "selftest/topology.h"

struct json_object;

/* The swept operations, in the order of the summary. */
enum cps_op {
    CPS_ALLREDUCE, CPS_ALLGATHER, CPS_REDUCESCATTER, CPS_BROADCAST, CPS_REDUCE, CPS_ALLTOALL,
    CPS_SENDRECV, CPS_NOPS
};
const char *cps_op_name(int op);   /* "allreduce": --ops and check names */
const char *cps_op_title(int op);  /* "AllReduce": the summary */
/* "allreduce,AllGather,sendrecv" (case-insensitive, "all" for every op) into a mask of
 * 1u << op. Returns 0, or -1 with a one-line reason in err. */
int cps_ops_parse(const char *list, unsigned *mask, char *err, size_t errn);
/* "64 MiB", "1536 KiB", "8 B": the largest binary unit that divides bytes exactly. */
void cps_bytes_text(uint64_t bytes, char *out, size_t outn);
/* nccl-tests' busbw factor for op over n ranks (REFERENCE.md). */
double cps_busbw_factor(int op, int n);

#define CPS_MAX_GPUS 16   /* per host */
#define CPS_HOST_BYTES 64

enum cps_status { CPS_PASS = 0, CPS_WARN = 1, CPS_FAIL = 2 };
const char *cps_status_name(int status); /* "PASS", "WARN", "FAIL" */

/* ---- transport -------------------------------------------------------------------------- */

enum cps_transport_kind {
    CPS_TR_P2P, CPS_TR_SHM, CPS_TR_NET_IB, CPS_TR_NET_SOCKET, CPS_TR_NET_OTHER, CPS_TR_COLLNET,
    CPS_TR_NVLS, CPS_TR_NKINDS
};
const char *cps_transport_name(int kind); /* "P2P", "SHM", "NET/IB", "NET/Socket", ... */

typedef struct cps_conn {
    int from_rank, from_dev, to_rank, to_dev;  /* dev: CUDA index in brackets, -1 unknown */
    int kind;                                  /* enum cps_transport_kind */
    char via[48];                              /* as logged: "P2P/CUMEM/read", "NET/IB/3/GDRDMA" */
    char host[CPS_HOST_BYTES];                 /* the line's host, "" unknown */
} cps_conn;

typedef struct cps_nccl_log {
    int lines;                 /* NCCL INFO lines read */
    cps_conn *conns;           /* distinct (from, to, kind) connections */
    int nconns;
    int count[CPS_TR_NKINDS];  /* connections per kind */
    char network[32];          /* "Using network X": "IB", "Socket", "IBext_v8"; "" none */
    int ib_found;              /* -1 not said, 0 "NET/IB : No device found.", else devices */
    char ib_devices[256];      /* "mlx5_0:1/IB mlx5_1:1/RoCE" */
    char socket_ifs[128];      /* "ens3:172.31.12.210" */
    int nvls;                  /* -1 not said, 0 not available, 1 available */
    char plugin_error[160];    /* a net plugin that failed to load, as logged */
} cps_nccl_log;

/* Read NCCL's INFO log (any of the line forms in REFERENCE.md; other lines skipped).
 * parse_file returns 0, or -1 when the file cannot be read (log left empty). */
int cps_nccl_log_parse_file(const char *path, cps_nccl_log *log);
/* The same from an open stream (the caller closes it): -1 on a read error. */
int cps_nccl_log_parse_stream(FILE *f, cps_nccl_log *log);
/* parse_line adds to a log that parse_file filled or cps_nccl_log_init emptied (a zeroed one
 * would read as "NET/IB : No device found."). conns belongs to the parser (its block also holds
 * the lookup that counts each connection once): read it, free it only with cps_nccl_log_free. */
void cps_nccl_log_init(cps_nccl_log *log);
void cps_nccl_log_parse_line(const char *line, cps_nccl_log *log);
void cps_nccl_log_free(cps_nccl_log *log);

/* ---- sweep ---------------------------------------------------------------------------- */

typedef struct cps_options {
    unsigned ops;             /* mask of 1u << enum cps_op */
    uint64_t min_bytes;       /* nccl-tests' "size": S of REFERENCE.md's table */
    uint64_t max_bytes;
    int quick;                /* fewer sizes and iterations */
    int warmup, iters;        /* per size; 0 = the defaults (quick or not) */
    uint64_t check_bytes;     /* size of the correctness check; 0 = default */
    uint64_t p2p_bytes;       /* message of the pairwise matrix; 0 = default */
    int p2p;                  /* 1: measure the pairwise matrix */
    const char *log_dir;      /* where NCCL_DEBUG_FILE goes (a temp dir the caller owns) */
    double timeout_s;         /* no collective may take longer: then an abort and exit 3 */
    /* Called between measurements: what runs now, and the fraction done (0..1). */
    void (*progress)(void *arg, const char *what, double frac);
    void *progress_arg;
} cps_options;

/* A GPU as the CUDA driver numbers it (CUDA_VISIBLE_DEVICES applied). */
typedef struct cps_cuda_gpu {
    int rank;                 /* NCCL rank that drove it */
    int cuda_index;           /* ordinal in its process */
    char name[CPS_NAME_BYTES];
    char pci[CPS_PCI_BYTES];  /* "0000:18:00.0", lower case, as sysfs names it */
    int cc_major, cc_minor;
    char host[CPS_HOST_BYTES];
} cps_cuda_gpu;

/* One op at one size. Time is per operation: the median over the timed calls of each call's
 * GPU time on the rank that arrived last (the shortest over the ranks: no wait for a peer in
 * it). On a GPU kept busy this equals nccl-tests' wall time per iteration; a rank issued late
 * does not lengthen it. */
typedef struct cps_point {
    int op;
    uint64_t bytes;           /* S actually run (rounded down to whole elements per rank) */
    uint64_t count;           /* elements per call as nccl-tests counts them */
    double time_us;
    double algbw_gbps, busbw_gbps;
} cps_point;

/* A rail pair: two ranks of one local index on neighbouring hosts (under a launcher with
 * several hosts), timed like the matrix's pairs. a < b, NCCL ranks. */
typedef struct cps_net_pair {
    int a, b;
    double gbps_ab, gbps_ba;  /* one-way send/recv of p2p_bytes, each way */
} cps_net_pair;

typedef struct cps_run {
    int nranks;               /* ranks of the swept communicator */
    int nhosts;               /* distinct hosts among them */
    int local_ranks;          /* ranks on this host (= GPUs this process drove, one-process) */
    int multi_process;        /* 1: one process per GPU under a launcher */
    int world_rank;           /* this process's rank (0 in one-process mode) */
    int nccl_version;         /* ncclGetVersion's code, e.g. 22809 */
    int cuda_driver_version;  /* cuDriverGetVersion, e.g. 13000 */
    cps_cuda_gpu *gpus;       /* by NCCL rank, nranks of them */
    cps_point *points;        /* by op, then size */
    int npoints;
    /* The correctness check: per op, -1 not run, else the number of wrong elements. */
    long wrong[CPS_NOPS];
    uint64_t check_bytes;
    /* The pairwise matrix between this host's ranks (local index a sends to b): GB/s of a
     * one-way send/recv of p2p_bytes, 0 where not measured; p2p_n local ranks. */
    int p2p_n;
    double p2p_gbps[CPS_MAX_GPUS][CPS_MAX_GPUS];
    int p2p_rank[CPS_MAX_GPUS];   /* NCCL rank of local index a */
    uint64_t p2p_bytes;
    /* Under a launcher, every host's matrix as every rank agreed it: p2p_job[rank *
     * p2p_widest + b] GB/s from rank to local index b of its host, 0 where not measured;
     * NULL in one process. The verdict judges the other hosts' pairs from it. */
    double *p2p_job;
    int p2p_widest;
    /* Under a launcher with 2+ hosts, the rail pairs: for each local index every host has,
     * host h's rank to host h+1's (a ring of hosts; one pair per rail with two), same on every
     * rank. The path between hosts that the matrix above never crosses: NIC, cable, switch. */
    cps_net_pair *net_pairs;
    int n_net_pairs;
    char log_path[512];       /* this process's NCCL INFO log, "" when none */
    char stopped[512];        /* "" when the sweep ran to its end, else what stopped it */
    /* What NCCL logged: this process's log; under a launcher, every rank's counts, network,
     * IB, NVLS and plugin findings merged (conns stay this rank's own). */
    cps_nccl_log log;
} cps_run;

/* Under a launcher, the directory through which rank 0's ncclUniqueId reaches the others
 * (else MASTER_ADDR:MASTER_PORT). */
#define CPS_RENDEZVOUS_VAR "COLLPROF_RENDEZVOUS_DIR"

enum cps_sweep_rc {
    CPS_SWEEP_OK = 0,
    CPS_SWEEP_PARTIAL = 1,
    CPS_SWEEP_USAGE = 2,
    CPS_SWEEP_CANNOT_RUN = 3,
};

/* Run the sweep. Returns CPS_SWEEP_OK; CPS_SWEEP_PARTIAL when a measurement failed once the
 * communicators were up (a collective past the timeout, a call that failed): r holds every
 * point measured before it and r->stopped (and why) says what happened, a FAIL to judge, not a
 * run that never was; CPS_SWEEP_CANNOT_RUN with a one-line reason in why (no driver, no GPU,
 * no NCCL, init failed, a peer never came); CPS_SWEEP_USAGE for a bad launcher variable. Free
 * with cps_run_free. */
int cps_sweep(const cps_options *o, cps_run *r, char *why, size_t whyn);
void cps_run_free(cps_run *r);
/* The ranks on rank's host (gpus[].host), ascending: their local indices; at most
 * CPS_MAX_GPUS. Returns how many. out[0] == rank: rank is its host's first. */
int cps_run_host_ranks(const cps_run *r, int rank, int *out);

/* ---- checks ----------------------------------------------------------------------------- */

#define CPS_CHECK_NAME 48
typedef struct cps_check {
    char name[CPS_CHECK_NAME];  /* "allreduce.busbw", "transport", "p2p.2-5", ... */
    int status;                 /* enum cps_status */
    double measured, expected;  /* NAN when not a number (JSON null) */
    char unit[16];              /* "GB/s", "connections", "elements", "" */
    char detail[384];           /* one line */
} cps_check;

/* The transport check: NET/Socket where an IB/RoCE NIC is up, or SHM between GPUs NVLink
 * joins, is a FAIL naming the reason and the NCCL settings that usually cause it (read from
 * env, NULL for the process environment); sockets with no IB NIC at all a WARN; no log a
 * WARN. dev_to_topo maps a CUDA index of this host to its topology index (-1 unknown), ndev
 * entries. */
void cps_check_transport(const cps_topology *t, const cps_nccl_log *log, const int *dev_to_topo,
                         int ndev, char *const *env, cps_check *out);

/* ---- expect: what the links should give (efficiencies and latencies: ARCHITECTURE.md) --- */

/* The bus bandwidth a ring over the swept ranks should reach with large messages, and the
 * latency of one ring step, from the topology: NVLink by generation (compute capability) and
 * usable lanes, PCIe by lanes, SYS across the CPU interconnect, and the network (IB/RoCE NIC
 * rates, or sockets) when the ring crosses hosts. */
typedef struct cps_expect {
    double bus_gbps;
    double alpha_us;
    int link_kind;          /* enum cps_link_kind of the bottleneck, or CPS_EXPECT_NET */
    char basis[192];        /* one line: how bus_gbps was derived */
} cps_expect;
#define CPS_EXPECT_NET 10

/* map[i]: the topology index of the run's GPU of NCCL rank i on this host (-1 other hosts or
 * unknown). net: the ring crosses hosts (a NET connection, or several hosts in the run). */
void cps_expect_ring(const cps_topology *t, const cps_run *r, const int *map, int net,
                     cps_expect *e);
/* busbw nccl-tests would report at size S (bytes) when the ring gives e: S·f/(S·f/B + steps·α). */
double cps_expect_busbw(const cps_expect *e, int op, uint64_t bytes, int n);
/* One-way send/recv GB/s between GPUs of two hosts: NCCL gives a GPU its nearest NIC, so one
 * IB/RoCE NIC's rate (the fastest up), or sockets. */
double cps_expect_net_pair(const cps_topology *t, cps_expect *e);
/* One-way send/recv GB/s that the link between topology GPUs a and b should give. */
double cps_expect_pair(const cps_topology *t, int a, int b, cps_expect *e);

/* ---- verdict and output ---------------------------------------------------------------- */

typedef struct cps_report {
    cps_topology *topo;     /* merged: sysfs, NVML, the driver */
    cps_run *run;
    int *map;               /* run GPU (NCCL rank) -> topology index, -1 not on this host */
    int net;                /* the ring crosses hosts */
    cps_expect ring;
    cps_check *checks;
    int nchecks;
    int verdict;            /* worst status */
    char sources[160];      /* where the topology came from: "sysfs /, NVML", ... */
} cps_report;

/* Judge a finished run: every check, worst first within its kind. env as for
 * cps_check_transport. Returns 0, or -1 when memory ran out. */
int cps_judge(cps_report *rep, char *const *env);
void cps_report_free_checks(cps_report *rep);

/* The one-screen text summary. all_sizes: a table per op with every size swept. */
void cps_summary_print(FILE *out, const cps_report *rep, int all_sizes);
/* The contract's object (version, verdict, topology, checks) plus "ops" (every point) and
 * "run" (ranks, hosts, versions). New reference, or NULL when memory ran out. */
struct json_object *cps_report_json(const cps_report *rep);

#endif
