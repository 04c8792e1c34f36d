/* nvml: the emulated libnvidia-ml.so.1, shaped by the topology of this process's emulated
 * host. Devices are the host's GPUs in topology order — NVML ignores CUDA_VISIBLE_DEVICES, as
 * the real one does — with the UUIDs libcuda.so.1 reports for the same GPUs.
 *
 * NVLink: GPUs behind NVSwitches (every pair using all of a GPU's lanes, as h100-nvlink-8)
 * report each link's remote end as one of four NVSwitches, as a DGX H100 does; directly
 * wired GPUs (a100-nvlink-4) report the peer GPU, lanes given to peers in index order.
 * The PCIe common ancestor follows the link kind: PCIE pairs share a switch (SINGLE), SYS
 * pairs cross sockets (SYSTEM); NVLink pairs report where their PCIe paths meet (NODE within
 * a NUMA node, SYSTEM across), which is what real NVLink boxes report. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "emu/common/topo_ext.h"
#include "abi/nvml_abi.h"

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    int index;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_refs;
static const cpemu_topo *g_topo;
static struct nvmlDevice_st g_devs[CPEMU_MAX_GPUS];

/* Real parts' PCI identities by architecture: device id, subsystem id. */
static void pci_ids(const cpemu_gpu *g, unsigned *dev_id, unsigned *subsys)
{
    if (g->cc_major == 9) {
        *dev_id = 0x2330; /* H100 SXM5 80GB */
        *subsys = 0x16c110de;
    } else if (g->cc_major == 8 && g->cc_minor == 9) {
        *dev_id = 0x26b9; /* L40S */
        *subsys = 0x185110de;
    } else {
        *dev_id = 0x20b0; /* A100-SXM4-40GB */
        *subsys = 0x134f10de;
    }
}

static nvmlReturn_t ready(void)
{
    pthread_mutex_lock(&g_mu);
    int refs = g_refs;
    pthread_mutex_unlock(&g_mu);
    return refs > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t device_of(nvmlDevice_t d, int *index)
{
    nvmlReturn_t r = ready();
    if (r != NVML_SUCCESS)
        return r;
    uintptr_t p = (uintptr_t)d, base = (uintptr_t)g_devs;
    if (p < base || p >= base + (uintptr_t)g_topo->ngpus * sizeof *g_devs ||
        (p - base) % sizeof *g_devs)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = d->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NO_GPUS / NO_ATTACH change nothing where nothing is attached */
    pthread_mutex_lock(&g_mu);
    if (g_refs++ == 0) {
        g_topo = cpemu_topo_get();
        for (int i = 0; i < CPEMU_MAX_GPUS; i++)
            g_devs[i].index = i;
    }
    pthread_mutex_unlock(&g_mu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_mu);
    nvmlReturn_t r = g_refs > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (g_refs > 0)
        g_refs--;
    pthread_mutex_unlock(&g_mu);
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    nvmlReturn_t r = ready();
    if (r != NVML_SUCCESS)
        return r;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)g_topo->ngpus;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t r = ready();
    if (r != NVML_SUCCESS)
        return r;
    if (!device || index >= (unsigned)g_topo->ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devs[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    nvmlReturn_t r = ready();
    if (r != NVML_SUCCESS)
        return r;
    unsigned d, b, v, f;
    /* Any case, 4- or 8-digit domain: "0000:18:00.0", "00000000:18:00.0". */
    if (!pciBusId || !device || cpemu_parse_pci(pciBusId, &d, &b, &v, &f) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < g_topo->ngpus; i++) {
        unsigned gd, gb, gv, gf;
        if (cpemu_parse_pci(g_topo->gpus[i].pci_bus_id, &gd, &gb, &gv, &gf) == 0 && gd == d &&
            gb == b && gv == v && gf == f) {
            *device = &g_devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

static nvmlReturn_t copy_out(char *buf, unsigned int length, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    return r != NVML_SUCCESS ? r : copy_out(name, length, g_topo->gpus[i].name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    unsigned char u[16];
    char text[48];
    cpemu_gpu_uuid(g_topo, cpemu_device_host(g_topo, i, g_topo->ngpus), i, u);
    cpemu_uuid_format(u, text);
    return copy_out(uuid, length, text);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)i;
    return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *p, const char *bus_id, unsigned dev_id, unsigned subsys)
{
    unsigned d = 0, b = 0, v = 0, f = 0;
    cpemu_parse_pci(bus_id, &d, &b, &v, &f);
    memset(p, 0, sizeof *p);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.%X", d & 0xffff, b, v, f);
    snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.%X", d, b, v, f);
    p->domain = d;
    p->bus = b;
    p->device = v;
    p->pciDeviceId = dev_id << 16 | 0x10de;
    p->pciSubSystemId = subsys;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned id, sub;
    pci_ids(&g_topo->gpus[i], &id, &sub);
    fill_pci(pci, g_topo->gpus[i].pci_bus_id, id, sub);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!node)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g_topo->gpus[i].numa_node < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned)g_topo->gpus[i].numa_node;
    return NVML_SUCCESS;
}

static nvmlReturn_t check_link(int i, unsigned int link)
{
    if (link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= (unsigned)g_topo->gpus[i].nvlinks)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                             nvmlEnableState_t *isActive)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS || (r = check_link(i, link)) != NVML_SUCCESS)
        return r;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

/* The peer GPU on the far end of a directly wired link, or -1 (an unused lane). */
static int direct_peer(int i, unsigned link)
{
    unsigned first = 0;
    for (int b = 0; b < g_topo->ngpus; b++) {
        if (b == i || g_topo->link_kind[i][b] != CPEMU_LINK_NVLINK)
            continue;
        unsigned lanes = (unsigned)g_topo->link_lanes[i][b];
        if (link < first + lanes)
            return b;
        first += lanes;
    }
    return -1;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                        nvmlPciInfo_t *pci)
{
    int i;
    nvmlReturn_t r = device_of(device, &i);
    if (r != NVML_SUCCESS || (r = check_link(i, link)) != NVML_SUCCESS)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (cpemu_topo_nvswitch(g_topo)) {
        /* Four NVSwitches: a GPU's lanes split over them 5/4/4/5 on a DGX H100. */
        unsigned n = (unsigned)g_topo->gpus[i].nvlinks;
        unsigned sw = link * 4 / (n ? n : 1);
        char bus[16];
        snprintf(bus, sizeof bus, "0000:%02x:00.0", 5 + sw);
        fill_pci(pci, bus, 0x22a3, 0x169610de); /* NVSwitch gen3 */
        return NVML_SUCCESS;
    }
    int peer = direct_peer(i, link);
    if (peer < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    unsigned id, sub;
    pci_ids(&g_topo->gpus[peer], &id, &sub);
    fill_pci(pci, g_topo->gpus[peer].pci_bus_id, id, sub);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                        nvmlDevice_t device2,
                                                        nvmlGpuTopologyLevel_t *pathInfo)
{
    int a, b;
    nvmlReturn_t r = device_of(device1, &a);
    if (r != NVML_SUCCESS || (r = device_of(device2, &b)) != NVML_SUCCESS)
        return r;
    if (!pathInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    switch (g_topo->link_kind[a][b]) {
    case CPEMU_LINK_SELF:
        *pathInfo = NVML_TOPOLOGY_INTERNAL;
        break;
    case CPEMU_LINK_PCIE:
        *pathInfo = NVML_TOPOLOGY_SINGLE;
        break;
    case CPEMU_LINK_NVLINK:
        *pathInfo = g_topo->gpus[a].numa_node == g_topo->gpus[b].numa_node
                        ? NVML_TOPOLOGY_NODE
                        : NVML_TOPOLOGY_SYSTEM;
        break;
    default:
        *pathInfo = NVML_TOPOLOGY_SYSTEM;
        break;
    }
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "The requested vgpu operation is not available on target device, becasue ECC is "
               "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Ran out of critical resources, other than memory";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "The requested frequency is not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "The provided version is invalid/unsupported";
    case NVML_ERROR_DEPRECATED: return "The requested functionality has been deprecated";
    case NVML_ERROR_NOT_READY: return "The system is not ready for the request";
    case NVML_ERROR_GPU_NOT_FOUND: return "The GPU was not found";
    case NVML_ERROR_INVALID_STATE: return "The requested operation is in an invalid state";
    default: return "Unknown Error";
    }
}
