/* selftest/topology: what this node has — GPUs, NICs and the kind of path between each pair of
 * GPUs — read from sysfs under a root directory ("/" on a node, a fixture tree in tests), and
 * written as the "topology" object of `collprof selftest --json` (../shared/INTERFACES.md).
 *
 * Sources, all optional (a missing or garbled file gives "unknown", never an error):
 *   GPUs  <root>/sys/bus/pci/devices/<bdf>/{vendor,class,numa_node,current_link_width}:
 *         vendor 0x10de with class 0x0302xx (3D controller) or 0x0300xx (VGA); NVSwitches
 *         (0x0680xx) and everything else are not GPUs. Indexed in PCI bus id order, as
 *         nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID do. sysfs has no marketing name: name is
 *         "" until the CUDA driver fills it.
 *   NICs  <root>/sys/class/infiniband/<dev>/ports/<n>/{rate,state,link_layer}: kind IB, or ROCE
 *         when link_layer is "Ethernet"; rate from "400 Gb/sec (4X NDR)"; up when the state is
 *         "4: ACTIVE". Then <root>/sys/class/net/<if>/{speed (Mb/s),operstate,device}: kind
 *         ETH, up when operstate is "up"; interfaces with no PCI function behind their device
 *         link (lo, bridges, veth) are skipped (virtio's virtioN counts as its PCI parent), and so are the netdevs of RDMA devices (same PCI function as an
 *         infiniband device), which would otherwise count one NIC twice.
 *   NUMA  numa_node of the PCI function; -1 (the kernel's own "none") when absent or garbled.
 *   Paths the chain of bridges from resolving the /sys/bus/pci/devices/<bdf> symlink.
 *
 * Path kinds follow nccl's names, kept simple:
 *   PIX  both devices within two levels under their deepest common bridge (one PCIe switch:
 *        device - downstream port - upstream port, or one root port);
 *   PXB  a common bridge below the root complex, but deeper (nested switches);
 *   PHB  only the root complex in common, or two root complexes on the same known NUMA node;
 *   SYS  root complexes on different NUMA nodes, or not known to share one (unknown NUMA node,
 *        or a path that could not be resolved): the kind that promises nothing.
 * A GPU pair's link kind is PCIE for PIX, PXB and PHB and SYS for SYS; lanes is the smaller
 * current_link_width of the two (0 unknown). NVLink comes from NVML (cps_topo_add_nvml).
 */
#ifndef COLLPROF_SELFTEST_TOPOLOGY_H
#define COLLPROF_SELFTEST_TOPOLOGY_H

#include <stddef.h>

struct json_object;

enum cps_nic_kind { CPS_NIC_IB = 0, CPS_NIC_ROCE = 1, CPS_NIC_ETH = 2 };
enum cps_link_kind { CPS_LINK_NVLINK = 0, CPS_LINK_PCIE = 1, CPS_LINK_SYS = 2 };
enum cps_pci_path { CPS_PATH_PIX = 0, CPS_PATH_PXB = 1, CPS_PATH_PHB = 2, CPS_PATH_SYS = 3 };

#define CPS_NAME_BYTES 96
#define CPS_PCI_BYTES 32

typedef struct cps_gpu {
    int index;                   /* in PCI bus id order */
    char name[CPS_NAME_BYTES];   /* "" when not known */
    char pci[CPS_PCI_BYTES];     /* "0000:17:00.0" */
    int numa;                    /* -1 unknown */
    int lanes;                   /* current PCIe link width, 0 unknown */
    int nvlinks;                 /* active NVLinks (to GPUs or NVSwitches), 0 none or unknown */
    int cc_major, cc_minor;      /* compute capability from the CUDA driver, 0 unknown */
} cps_gpu;

typedef struct cps_nic {
    char name[CPS_NAME_BYTES];   /* "mlx5_0", "mlx5_0:2" for port 2 of a multi-port device, "eth0" */
    int kind;                    /* enum cps_nic_kind */
    double rate_gbps;            /* 0 unknown (or no link) */
    int up;                      /* 1 active / operstate up */
    int numa;                    /* -1 unknown */
    char pci[CPS_PCI_BYTES];     /* "" when not known */
} cps_nic;

typedef struct cps_link {
    int a, b;                    /* GPU indices, a < b */
    int kind;                    /* enum cps_link_kind */
    int lanes;                   /* PCIe lanes, or NVLink links; 0 unknown */
    int path;                    /* enum cps_pci_path the kind was derived from */
} cps_link;

typedef struct cps_topology {
    cps_gpu *gpus;
    int n_gpus;
    cps_nic *nics;
    int n_nics;
    cps_link *links;
    int n_links;
} cps_topology;

/* Fill *t from sysfs under root ("/" for this node). Missing directories give empty lists.
 * Returns 0, or -1 when memory ran out (t is then empty). Free with cps_topo_free. */
int cps_topo_read_sysfs(const char *root, cps_topology *t);
void cps_topo_free(cps_topology *t);

/* The path kind between two PCI functions (bus ids as in /sys/bus/pci/devices), with their
 * NUMA nodes (-1 unknown) to tell PHB from SYS across root complexes. */
int cps_pci_path(const char *root, const char *bdf_a, int numa_a, const char *bdf_b, int numa_b);

/* Add what NVML (dlopen of lib, NULL for libnvidia-ml.so.1) knows to a topology read from
 * sysfs: GPU names, GPUs sysfs did not show (appended), the driver's common ancestor for each
 * pair, and NVLinks — a pair is NVLINK with lanes = its direct links, plus, when both reach
 * NVSwitches, the smaller of their switch link counts. Returns 0, or -1 with why filled (no
 * library, init failed) and t as it was. */
int cps_topo_add_nvml(cps_topology *t, const char *lib, char *why, size_t why_n);

/* Add what the CUDA driver knows (the sweep's GPU list, this host's GPUs only): each is matched
 * to the topology by PCI bus id, fills an empty name and the compute capability, and is appended
 * when sysfs and NVML did not show it (its links then unknown: SYS). map[i] receives the
 * topology index of CUDA GPU i. Returns 0, or -1 when memory ran out. */
int cps_topo_add_cuda(cps_topology *t, const char (*names)[CPS_NAME_BYTES],
                      const char (*pcis)[CPS_PCI_BYTES], const int *cc_major, const int *cc_minor,
                      int n, int *map);

const char *cps_nic_kind_name(int kind);   /* "IB", "ROCE", "ETH" */
const char *cps_link_kind_name(int kind);  /* "NVLINK", "PCIE", "SYS" */
const char *cps_pci_path_name(int path);   /* "PIX", "PXB", "PHB", "SYS" */

/* The contract's "topology" object (written in selftest_json.c), with exactly its keys:
 * gpus [{index,name,pci,numa}], links [{a,b,kind,lanes}], nics [{name,kind,rate_gbps}];
 * unknowns as in the model (numa -1, lanes 0, rate_gbps 0, name ""). NIC state and NUMA stay
 * in the model for the checks. New reference, or NULL when memory ran out. */
struct json_object *cps_topo_json(const cps_topology *t);

#endif
