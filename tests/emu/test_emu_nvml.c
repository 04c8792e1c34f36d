/* The emulated NVML against the topology it describes, and against the emulated driver
 * (the same GPUs must have the same UUIDs and PCI ids through both). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/nvml_abi.h"
#include "tests/emu/test_emu_cuda_util.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
const char *nvmlErrorString(nvmlReturn_t result);

static void pci_info_has_the_published_layout(void **state)
{
    (void)state;
    assert_int_equal(sizeof(nvmlPciInfo_t), 68);
    assert_int_equal(offsetof(nvmlPciInfo_t, domain), 16);
    assert_int_equal(offsetof(nvmlPciInfo_t, pciDeviceId), 28);
    assert_int_equal(offsetof(nvmlPciInfo_t, pciSubSystemId), 32);
    assert_int_equal(offsetof(nvmlPciInfo_t, busId), 36);
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

/* Runs fn in a child with COLLPROF_EMU_TOPO=topo (the topology is read once per process). */
static void in_child_with_topo(const char *topo, void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("COLLPROF_EMU_TOPO", topo, 1);
        fn();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

#define CHILD_CHECK(cond, code) \
    do {                        \
        if (!(cond))            \
            _exit(code);        \
    } while (0)

static void a100_child(void)
{
    unsigned n;
    nvmlPciInfo_t pci;
    nvmlEnableState_t on;
    nvmlGpuTopologyLevel_t lvl;
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetCount_v2(&n) == 0 && n == 4, 1);
    nvmlDevice_t d0, d3;
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d0) == 0, 2);
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(3, &d3) == 0, 2);
    /* Wired directly: links 0-3 go to GPU 1, 4-7 to GPU 2, 8-11 to GPU 3. */
    CHILD_CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d0, 9, &pci) == 0, 3);
    CHILD_CHECK(strcmp(pci.busId, "00000000:4E:00.0") == 0, 4);
    CHILD_CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d3, 0, &pci) == 0, 5);
    CHILD_CHECK(strcmp(pci.busIdLegacy, "0000:07:00.0") == 0, 6);
    CHILD_CHECK(nvmlDeviceGetNvLinkState(d0, 11, &on) == 0 && on == NVML_FEATURE_ENABLED, 7);
    CHILD_CHECK(nvmlDeviceGetNvLinkState(d0, 12, &on) == NVML_ERROR_NOT_SUPPORTED, 8);
    CHILD_CHECK(nvmlDeviceGetTopologyCommonAncestor(d0, d3, &lvl) == 0 &&
                    lvl == NVML_TOPOLOGY_SYSTEM, 9);
}

static void pcie_child(void)
{
    unsigned n;
    nvmlEnableState_t on;
    nvmlGpuTopologyLevel_t lvl;
    nvmlPciInfo_t pci;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetCount_v2(&n) == 0 && n == 4, 1);
    nvmlDevice_t d[4];
    for (unsigned i = 0; i < 4; i++)
        CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(i, &d[i]) == 0, 2);
    CHILD_CHECK(nvmlDeviceGetName(d[2], name, sizeof name) == 0 && !strcmp(name, "NVIDIA L40S"), 3);
    CHILD_CHECK(nvmlDeviceGetNvLinkState(d[0], 0, &on) == NVML_ERROR_NOT_SUPPORTED, 4);
    CHILD_CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d[0], 0, &pci) == NVML_ERROR_NOT_SUPPORTED, 5);
    CHILD_CHECK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[1], &lvl) == 0 &&
                    lvl == NVML_TOPOLOGY_SINGLE, 6);
    CHILD_CHECK(nvmlDeviceGetTopologyCommonAncestor(d[1], d[2], &lvl) == 0 &&
                    lvl == NVML_TOPOLOGY_SYSTEM, 7);
}

static void other_presets_shape_nvml(void **state)
{
    (void)state;
    in_child_with_topo("a100-nvlink-4", a100_child);
    in_child_with_topo("pcie-4", pcie_child);
}

static void bad_value_child(void)
{
    char path[] = "/tmp/test_emu_nvml_stderr_XXXXXX";
    int fd = mkstemp(path);
    CHILD_CHECK(fd >= 0, 1);
    unlink(path);
    dup2(fd, 2);
    setenv("COLLPROF_EMU_HOSTS", "0", 1);
    /* Two libraries, each with its own copy of the topology code, read the bad value. */
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS && nvmlInit_v2() == NVML_SUCCESS, 2);
    char out[2048] = {0};
    CHILD_CHECK(pread(fd, out, sizeof out - 1, 0) > 0, 3);
    const char *first = strstr(out, "collprof-emu: WARN COLLPROF_EMU_HOSTS='0'");
    CHILD_CHECK(first != NULL, 4);
    CHILD_CHECK(strstr(first + 1, "collprof-emu: WARN") == NULL, 5);
}

static void a_bad_value_warns_once_per_process(void **state)
{
    (void)state;
    in_child_with_topo("h100-nvlink-8", bad_value_child);
}

static void calls_need_init(void **state)
{
    (void)state;
    unsigned n;
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlInitWithFlags(0), NVML_SUCCESS);
    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* still one reference */
    assert_int_equal(n, 8);
}

static void devices_match_the_topology_and_the_driver(void **state)
{
    (void)state;
    static const char *const bus[] = {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"};
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    for (unsigned i = 0; i < 8; i++) {
        nvmlDevice_t d = dev(i);
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        char want[64], cubus[32];
        unsigned idx, numa;
        nvmlPciInfo_t pci;
        assert_int_equal(nvmlDeviceGetName(d, name, sizeof name), NVML_SUCCESS);
        assert_string_equal(name, "NVIDIA H100 80GB HBM3");
        assert_int_equal(nvmlDeviceGetIndex(d, &idx), NVML_SUCCESS);
        assert_int_equal(idx, i);
        assert_int_equal(nvmlDeviceGetNumaNodeId(d, &numa), NVML_SUCCESS);
        assert_int_equal(numa, i < 4 ? 0 : 1);
        assert_int_equal(nvmlDeviceGetPciInfo_v3(d, &pci), NVML_SUCCESS);
        snprintf(want, sizeof want, "00000000:%s:00.0", bus[i]);
        assert_string_equal(pci.busId, want);
        assert_string_equal(pci.busIdLegacy, want + 4);
        assert_int_equal(pci.domain, 0);
        assert_int_equal(pci.bus, strtoul(bus[i], NULL, 16));
        assert_int_equal(pci.device, 0);
        assert_int_equal(pci.pciDeviceId, 0x233010de);
        /* The driver names the same GPU the same way. */
        assert_int_equal(cuDeviceGetPCIBusId(cubus, sizeof cubus, (CUdevice)i), CUDA_SUCCESS);
        assert_string_equal(cubus, pci.busIdLegacy);
        CUuuid cu;
        assert_int_equal(cuDeviceGetUuid_v2(&cu, (CUdevice)i), CUDA_SUCCESS);
        const unsigned char *u = (const unsigned char *)cu.bytes;
        snprintf(want, sizeof want,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                 u[13], u[14], u[15]);
        assert_int_equal(nvmlDeviceGetUUID(d, uuid, sizeof uuid), NVML_SUCCESS);
        assert_string_equal(uuid, want);
    }
    char small[8];
    assert_int_equal(nvmlDeviceGetName(dev(0), small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
    nvmlDevice_t d;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(8, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("00000000:5d:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, dev(3));
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("0000:DB:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, dev(7));
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("0000:db:01.0", &d), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("garbage", &d), NVML_ERROR_INVALID_ARGUMENT);
    unsigned idx;
    assert_int_equal(nvmlDeviceGetIndex((nvmlDevice_t)&idx, &idx), NVML_ERROR_INVALID_ARGUMENT);
}

static void nvlink_goes_through_nvswitches_on_h100(void **state)
{
    (void)state;
    nvmlEnableState_t on;
    nvmlPciInfo_t pci;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        assert_int_equal(nvmlDeviceGetNvLinkState(dev(2), l, &on), NVML_SUCCESS);
        assert_int_equal(on, NVML_FEATURE_ENABLED);
        assert_int_equal(nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(2), l, &pci), NVML_SUCCESS);
        assert_int_equal(pci.pciDeviceId & 0xffff, 0x10de);
        assert_true(pci.bus >= 5 && pci.bus <= 8);
    }
    assert_int_equal(nvmlDeviceGetNvLinkState(dev(2), 18, &on), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuTopologyLevel_t lvl;
    assert_int_equal(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(0), &lvl), NVML_SUCCESS);
    assert_int_equal(lvl, NVML_TOPOLOGY_INTERNAL);
    assert_int_equal(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(3), &lvl), NVML_SUCCESS);
    assert_int_equal(lvl, NVML_TOPOLOGY_NODE);
    assert_int_equal(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(4), &lvl), NVML_SUCCESS);
    assert_int_equal(lvl, NVML_TOPOLOGY_SYSTEM);
}

static void error_strings(void **state)
{
    (void)state;
    assert_string_equal(nvmlErrorString(NVML_SUCCESS), "Success");
    assert_string_equal(nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
    assert_string_equal(nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    assert_string_equal(nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");
}

int main(void)
{
    static const char *const vars[] = {"COLLPROF_EMU_TOPO", "COLLPROF_EMU_HOSTS",
                                       "COLLPROF_EMU_HOST_ID", "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pci_info_has_the_published_layout),
        cmocka_unit_test(other_presets_shape_nvml),
        cmocka_unit_test(a_bad_value_warns_once_per_process),
        cmocka_unit_test(calls_need_init),
        cmocka_unit_test(devices_match_the_topology_and_the_driver),
        cmocka_unit_test(nvlink_goes_through_nvswitches_on_h100),
        cmocka_unit_test(error_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
