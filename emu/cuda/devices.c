/* devices: cuInit, the driver version and the devices, which are the topology's GPUs of this
 * process's emulated host (CUDA_VISIBLE_DEVICES honoured).
 *
 * fork(): a real driver is not fork-safe — a child of a process that initialised CUDA gets
 * CUDA_ERROR_NOT_INITIALIZED from every call, cuInit included, while a child of a process
 * that never did may initialise normally. We do exactly that: the child's copies of our
 * threads are gone, so it must never touch the inherited streams or locks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/common/topo_ext.h"
#include "emu/cuda/cuda_internal.h"

cu_global g_cu = {.mu = PTHREAD_MUTEX_INITIALIZER};

uint64_t cu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cu_sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ; /* EINTR: sleep on to the same absolute time */
}

/* Held across fork() so the child never inherits it locked by a thread it does not have. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_cu.mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_cu.mu); }

static void atfork_child(void)
{
    if (g_cu.initialized)
        g_cu.forked = 1;
    pthread_mutex_unlock(&g_cu.mu);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

CUresult cu_ready(void)
{
    /* Set once under the lock, then only read: a racy read sees 0 (not yet) or 1. */
    if (__atomic_load_n(&g_cu.forked, __ATOMIC_ACQUIRE))
        return CUDA_ERROR_NOT_INITIALIZED;
    return __atomic_load_n(&g_cu.initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cu_check_dev(CUdevice dev)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < g_cu.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

int cu_is_stub(void)
{
    const char *v = getenv("COLLPROF_EMU_DRIVER");
    return v && strcmp(v, "stub") == 0;
}

CUresult cuInit(unsigned int flags)
{
    if (cu_is_stub())
        return CUDA_ERROR_STUB_LIBRARY;
    pthread_once(&g_atfork_once, register_atfork);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (g_cu.forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_cu.mu);
    if (!g_cu.initialized) {
        g_cu.topo = cpemu_topo_get();
        g_cu.ndev = cpemu_visible_devices(g_cu.topo, g_cu.devmap);
        for (int i = 0; i < g_cu.ndev; i++)
            g_cu.devhost[i] = cpemu_device_host(g_cu.topo, i, g_cu.ndev);
        /* As on a machine whose GPUs are all hidden: cuInit fails, and so does every call
         * after it. */
        if (g_cu.ndev > 0)
            __atomic_store_n(&g_cu.initialized, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_cu.mu);
    return g_cu.ndev > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    /* Works before cuInit, as the real one does. */
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CP_CUDA_ABI_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= g_cu.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g_cu.ndev;
    return CUDA_SUCCESS;
}

static const cpemu_gpu *gpu_of(CUdevice dev) { return &g_cu.topo->gpus[g_cu.devmap[dev]]; }

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", gpu_of(dev)->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned d = 0, b = 0, v = 0, f = 0;
    cpemu_parse_pci(gpu_of(dev)->pci_bus_id, &d, &b, &v, &f);
    /* The driver writes the hex digits in upper case ("0000:AB:00.0"). */
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.%X", d, b, v, f);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)gpu_of(dev)->mem_bytes;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char u[16];
    cpemu_gpu_uuid(g_cu.topo, g_cu.devhost[dev], g_cu.devmap[dev], u);
    memcpy(uuid->bytes, u, sizeof uuid->bytes);
    return CUDA_SUCCESS;
}

/* No MIG in the emulation: the GPU's UUID is the device's, as v1 reports. */
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

/* What the topology does not say, by architecture: the figures the real parts report. */
typedef struct arch_facts {
    int cc_major, cc_minor;
    int clock_khz, mem_clock_khz, bus_width_bits, l2_bytes, copy_engines;
    int fabric, multicast;
} arch_facts;

static const arch_facts archs[] = {
    {9, 0, 1980000, 2619000, 5120, 52428800, 3, 1, 1},  /* H100 SXM */
    {8, 0, 1410000, 1215000, 5120, 41943040, 3, 0, 0},  /* A100 SXM4 */
    {8, 9, 2520000, 9001000, 384, 100663296, 2, 0, 0},  /* L40S */
};

static const arch_facts *arch_of(const cpemu_gpu *g)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].cc_major == g->cc_major && archs[i].cc_minor == g->cc_minor)
            return &archs[i];
    return &archs[1];
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = cu_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    const cpemu_gpu *g = gpu_of(dev);
    const arch_facts *a = arch_of(g);
    unsigned dom = 0, bus = 0, devno = 0, fn = 0;
    cpemu_parse_pci(g->pci_bus_id, &dom, &bus, &devno, &fn);
    switch ((int)attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = a->clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = g->sm_count; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *pi = 0; break; /* CU_COMPUTEMODE_DEFAULT */
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = (int)bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = (int)devno; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = (int)dom; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *pi = a->mem_clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = a->bus_width_bits; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = a->l2_bytes; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = a->copy_engines; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = g->cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = g->cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: *pi = 0; break;
    /* A distinct board per GPU, as on SXM and PCIe parts. */
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: *pi = g_cu.devmap[dev]; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED: *pi = a->fabric; break;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
        *pi = a->multicast && cpemu_topo_nvswitch(g_cu.topo);
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
