/* topo: the emulated machine — hosts, GPUs, links, NICs — and the faults injected into it,
 * all read from the COLLPROF_EMU_* environment, plus the time model of a collective.
 *
 * Shared (compiled in) by the emulated libcuda.so.1 (device names, PCI ids), libnvidia-ml.so.1
 * (NVLink state) and libnccl.so.2 (transports, durations, faults). Nothing here touches a real
 * GPU: it is a description, and the arithmetic of what such a machine would take.
 */
#ifndef COLLPROF_EMU_TOPO_H
#define COLLPROF_EMU_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define CPEMU_MAX_GPUS 16      /* per emulated host */
#define CPEMU_MAX_NICS 16      /* per emulated host */
#define CPEMU_MAX_HOSTS 64
#define CPEMU_MAX_FAULTS 64

enum cpemu_link_kind {
    CPEMU_LINK_SELF = 0,
    CPEMU_LINK_NVLINK = 1,  /* direct or through NVSwitch */
    CPEMU_LINK_PCIE = 2,    /* same PCIe switch / root complex */
    CPEMU_LINK_SYS = 3,     /* across the CPU interconnect (QPI/UPI) */
    CPEMU_LINK_NET = 4,     /* between emulated hosts */
};

enum cpemu_nic_kind { CPEMU_NIC_IB = 0, CPEMU_NIC_ROCE = 1, CPEMU_NIC_ETH = 2 };

typedef struct cpemu_gpu {
    char name[64];          /* "NVIDIA H100 80GB HBM3" */
    char pci_bus_id[16];    /* "0000:18:00.0" */
    char uuid[48];          /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    int numa_node;          /* -1 unknown */
    int cc_major, cc_minor; /* compute capability */
    int sm_count;
    uint64_t mem_bytes;
    int nvlinks;            /* NVLink lanes of this GPU (0: none) */
} cpemu_gpu;

typedef struct cpemu_nic {
    char name[16];          /* "mlx5_0", "eth0" */
    int kind;               /* enum cpemu_nic_kind */
    int rate_gbps;          /* link rate, Gb/s (400 for NDR) */
    int numa_node;
    int up;                 /* port state ACTIVE */
    char ip[32];            /* for NET/Socket log lines: "10.0.0.2" */
} cpemu_nic;

typedef struct cpemu_fault_delay { int rank; double ms; } cpemu_fault_delay;
typedef struct cpemu_fault_hang { int rank; uint64_t seq; } cpemu_fault_hang;
/* COLLPROF_EMU_HANG=RANK:init: the seq of a rank whose communicator init never completes */
#define CPEMU_HANG_INIT UINT64_MAX
/* A slow link: every message, or (msgs > 0) only the first msgs messages each way between
 * the pair, as a link busy with another job's traffic for a while. */
typedef struct cpemu_fault_link { int a, b; double factor; long msgs; } cpemu_fault_link;
typedef struct cpemu_fault_clock { int host; double us; } cpemu_fault_clock;

typedef struct cpemu_topo {
    char preset[32];                 /* h100-nvlink-8, a100-nvlink-4, pcie-4, or "file" */
    int ngpus;                       /* GPUs per emulated host */
    cpemu_gpu gpus[CPEMU_MAX_GPUS];
    int link_kind[CPEMU_MAX_GPUS][CPEMU_MAX_GPUS];   /* enum cpemu_link_kind */
    int link_lanes[CPEMU_MAX_GPUS][CPEMU_MAX_GPUS];  /* NVLink lanes between the pair */
    double link_gbps[CPEMU_MAX_GPUS][CPEMU_MAX_GPUS];/* ring busbw the pair sustains, GB/s */
    double link_alpha_us[CPEMU_MAX_GPUS][CPEMU_MAX_GPUS]; /* per-step latency */
    int nnics;
    cpemu_nic nics[CPEMU_MAX_NICS];
    int hosts;                       /* COLLPROF_EMU_HOSTS, >= 1 */
    int net_socket;                  /* COLLPROF_EMU_NET=socket */
    double net_gbps_per_nic;         /* IB: ~48 GB/s per NDR NIC */
    double socket_gbps;              /* TCP sockets: ~5 GB/s per host */
    double net_alpha_us;
    int ndelays, nhangs, nslow, nclock;
    cpemu_fault_delay delays[CPEMU_MAX_FAULTS];  /* COLLPROF_EMU_DELAY */
    cpemu_fault_hang hangs[CPEMU_MAX_FAULTS];    /* COLLPROF_EMU_HANG */
    cpemu_fault_link slow[CPEMU_MAX_FAULTS];     /* COLLPROF_EMU_SLOW_LINK */
    cpemu_fault_clock clock[CPEMU_MAX_FAULTS];   /* COLLPROF_EMU_CLOCK_OFFSET_US */
} cpemu_topo;

/* Reads COLLPROF_EMU_TOPO (preset name or a file), _HOSTS, _NET, _DELAY, _SLOW_LINK, _HANG,
 * _CLOCK_OFFSET_US. A bad value: one `collprof-emu: WARN` line on stderr and the default, as
 * collprof itself does. Returns 0; -1 only when a topology file cannot be used at all
 * (then the default preset is loaded and err says why). */
int cpemu_topo_load(cpemu_topo *t, char *err, size_t errlen);
/* The process-wide topology, loaded once on first use (thread-safe). */
const cpemu_topo *cpemu_topo_get(void);

/* Where a process or device lives. A process's emulated host comes from COLLPROF_EMU_HOST_ID
 * (set by the launcher); without it, and in a single process driving several devices
 * (ncclCommInitAll, the selftest), device d of the process's visible devices is placed on host
 * d * hosts / ndevices, so a one-process job still spans the emulated hosts. */
int cpemu_process_host(void);                       /* -1: not set by a launcher */
int cpemu_device_host(const cpemu_topo *t, int dev, int ndevices);
/* The emulated hostname of host h: "<real hostname>-emu<h>" ; h < 0 means this process's. */
void cpemu_host_name(int host, char *out, size_t cap);

/* The link between two GPUs placed as (host, device). CPEMU_LINK_NET across hosts. The
 * bandwidth includes COLLPROF_EMU_SLOW_LINK factors (by global GPU index: host*ngpus+dev). */
typedef struct cpemu_link { int kind; int lanes; double gbps; double alpha_us; } cpemu_link;
cpemu_link cpemu_topo_link(const cpemu_topo *t, int host_a, int dev_a, int host_b, int dev_b);
/* The factor COLLPROF_EMU_SLOW_LINK's passing faults (A-B:F:N) put on message msg (0-based,
 * one direction) between two GPUs: F while msg < N, else 1. A message under it takes 1/F as
 * long; cpemu_topo_link leaves these out (the link itself is as fast as ever). */
double cpemu_topo_passing(const cpemu_topo *t, int host_a, int dev_a, int host_b, int dev_b,
                          uint64_t msg);

/* The model's duration of one operation, ns: a ring over the ranks in the given order, bounded
 * by its slowest link (NET links carry all NICs of a host in parallel, or socket_gbps).
 * op is an enum cpemu_op; bytes is nccl-tests' S for that op (e.g. count*size
 * for AllReduce, count*size*n for AllGather). For Send/Recv pass the two ends only (n = 2).
 *   AllReduce:                   S*2(n-1)/n / B + 2(n-1)*alpha
 *   AllGather, ReduceScatter,
 *   AlltoAll, Gather, Scatter:   S*(n-1)/n / B + (n-1)*alpha
 *   Broadcast, Reduce:           S / B + (n-1)*alpha
 *   Send/Recv:                   S / B(a,b) + alpha
 *   n == 1:                      S / (local copy bandwidth) + alpha
 * so busbw (nccl-tests' definition) tends to B for large S. */
/* The emulation's operations, its own names for what NCCL runs: the trace format's CP_OP_* are
 * collprof's and change with it, never with NCCL. The numbers are NCCL's order of its API. */
enum cpemu_op {
    CPEMU_OP_ALLREDUCE = 1,
    CPEMU_OP_BROADCAST,
    CPEMU_OP_REDUCE,
    CPEMU_OP_ALLGATHER,
    CPEMU_OP_REDUCESCATTER,
    CPEMU_OP_ALLTOALL,
    CPEMU_OP_GATHER,
    CPEMU_OP_SCATTER,
    CPEMU_OP_SEND,
    CPEMU_OP_RECV,
};

typedef struct cpemu_place { int host; int dev; } cpemu_place;
double cpemu_model_ns(const cpemu_topo *t, int op, uint64_t bytes, const cpemu_place *ranks,
                      int n);

/* Faults for a global rank. */
double cpemu_fault_delay_ms(const cpemu_topo *t, int rank);   /* 0 when none */
int cpemu_fault_hangs_at(const cpemu_topo *t, int rank, uint64_t seq);
double cpemu_clock_offset_ns(const cpemu_topo *t, int host);  /* 0 when none */

#endif
