/* cps_topo_add_nvml over the emulated libnvidia-ml.so.1 (build/emu). The emulation reads its
 * topology once per process, so each preset is its own ctest run: test_topology_nvml [PRESET]
 * (h100-nvlink-8 when none). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/topology.h"

static const char *preset = "h100-nvlink-8";
static char lib[PATH_MAX];

static void expect_gpus(const cps_topology *t, int n, const char *name, const char *const *pci,
                        const int *numa)
{
    assert_int_equal(t->n_gpus, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(t->gpus[i].index, i);
        assert_string_equal(t->gpus[i].name, name);
        assert_string_equal(t->gpus[i].pci, pci[i]);
        assert_int_equal(t->gpus[i].numa, numa[i]);
    }
    assert_int_equal(t->n_links, n * (n - 1) / 2);
    for (int i = 0, a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, i++) {
            assert_int_equal(t->links[i].a, a);
            assert_int_equal(t->links[i].b, b);
        }
}

static void test_preset(void **state)
{
    (void)state;
    cps_topology t = {0};
    char why[256] = "";
    assert_int_equal(cps_topo_add_nvml(&t, lib, why, sizeof why), 0);
    if (strcmp(preset, "h100-nvlink-8") == 0) {
        static const char *const pci[8] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                           "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                           "0000:ba:00.0", "0000:db:00.0"};
        static const int numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
        expect_gpus(&t, 8, "NVIDIA H100 80GB HBM3", pci, numa);
        for (int i = 0; i < t.n_links; i++) { /* every pair over all 18 links, via NVSwitch */
            assert_int_equal(t.links[i].kind, CPS_LINK_NVLINK);
            assert_int_equal(t.links[i].lanes, 18);
        }
    } else if (strcmp(preset, "a100-nvlink-4") == 0) {
        static const char *const pci[4] = {"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0",
                                           "0000:4e:00.0"};
        static const int numa[4] = {0, 0, 1, 1};
        expect_gpus(&t, 4, "NVIDIA A100-SXM4-40GB", pci, numa);
        for (int i = 0; i < t.n_links; i++) { /* 4 direct links to each peer */
            assert_int_equal(t.links[i].kind, CPS_LINK_NVLINK);
            assert_int_equal(t.links[i].lanes, 4);
        }
    } else {
        assert_string_equal(preset, "pcie-4");
        static const char *const pci[4] = {"0000:01:00.0", "0000:02:00.0", "0000:81:00.0",
                                           "0000:82:00.0"};
        static const int numa[4] = {0, 0, 1, 1};
        expect_gpus(&t, 4, "NVIDIA L40S", pci, numa);
        for (int i = 0; i < t.n_links; i++) { /* a switch per socket, the sockets apart */
            int same = t.links[i].a / 2 == t.links[i].b / 2;
            assert_int_equal(t.links[i].kind, same ? CPS_LINK_PCIE : CPS_LINK_SYS);
            assert_int_equal(t.links[i].path, same ? CPS_PATH_PIX : CPS_PATH_SYS);
            assert_int_equal(t.links[i].lanes, 0);
        }
    }
    cps_topo_free(&t);
}

/* GPUs sysfs found keep their place and NUMA node; NVML names them and adds the others. */
static void test_merge(void **state)
{
    (void)state;
    if (strcmp(preset, "h100-nvlink-8") != 0)
        skip();
    cps_topology t = {0};
    t.gpus = calloc(2, sizeof *t.gpus);
    assert_non_null(t.gpus);
    t.n_gpus = 2;
    snprintf(t.gpus[0].pci, sizeof t.gpus[0].pci, "0000:5d:00.0");
    t.gpus[0].numa = 3;
    t.gpus[1].numa = -1; /* unknown to sysfs: NVML's node is taken */
    snprintf(t.gpus[1].pci, sizeof t.gpus[1].pci, "0000:ab:00.0");
    t.gpus[1].index = 1;
    char why[256] = "";
    assert_int_equal(cps_topo_add_nvml(&t, lib, why, sizeof why), 0);
    assert_int_equal(t.n_gpus, 8);
    assert_string_equal(t.gpus[0].pci, "0000:5d:00.0");
    assert_int_equal(t.gpus[0].numa, 3);
    assert_string_equal(t.gpus[0].name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(t.gpus[1].pci, "0000:ab:00.0");
    assert_int_equal(t.gpus[1].numa, 1);
    assert_string_equal(t.gpus[2].pci, "0000:18:00.0");
    assert_int_equal(t.gpus[2].index, 2);
    assert_int_equal(t.gpus[2].numa, 0);
    assert_int_equal(t.n_links, 28);
    cps_topo_free(&t);
}

static void test_no_library(void **state)
{
    (void)state;
    cps_topology t = {0};
    char why[256] = "";
    assert_int_equal(cps_topo_add_nvml(&t, "/nonexistent/libnvidia-ml.so.1", why, sizeof why), -1);
    assert_non_null(strstr(why, "no NVML"));
    assert_int_equal(t.n_gpus + t.n_links, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        preset = argv[1];
    const char *build = getenv("COLLPROF_BUILD_DIR");
    if (!build || snprintf(lib, sizeof lib, "%s/emu/libnvidia-ml.so.1", build) >= (int)sizeof lib) {
        fprintf(stderr, "COLLPROF_BUILD_DIR is not set\n");
        return 1;
    }
    setenv("COLLPROF_EMU_TOPO", preset, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preset),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_no_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
