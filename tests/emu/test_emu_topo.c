/* The emulated machine: presets, topology files, the COLLPROF_EMU_* variables (good values
 * and bad ones, which warn once and keep the default), placement on emulated hosts, links and
 * the time model's numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "emu/common/topo.h"
#include "emu/common/topo_ext.h"

static const char *const all_vars[] = {
    "COLLPROF_EMU_TOPO",  "COLLPROF_EMU_HOSTS",        "COLLPROF_EMU_NET",
    "COLLPROF_EMU_DELAY", "COLLPROF_EMU_SLOW_LINK",    "COLLPROF_EMU_HANG",
    "COLLPROF_EMU_CLOCK_OFFSET_US", "COLLPROF_EMU_HOST_ID", "CUDA_VISIBLE_DEVICES"};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
        unsetenv(all_vars[i]);
    return 0;
}

/* Loads the topology with stderr captured into `out`; the load's return value. */
static int load_capturing(cpemu_topo *t, char *out, size_t cap, char *err, size_t errlen)
{
    char path[] = "/tmp/test_emu_topo_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = cpemu_topo_load(t, err, errlen);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    return rc;
}

static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static cpemu_topo g_t;

/* Sets var=value, loads, and checks the number of WARN lines. */
static void load_with(const char *var, const char *value, int warns)
{
    char out[4096], err[256];
    if (var)
        setenv(var, value, 1);
    load_capturing(&g_t, out, sizeof out, err, sizeof err);
    assert_int_equal(count_lines(out, "collprof-emu: WARN "), warns);
    if (warns)
        assert_non_null(strstr(out, var));
}

static void h100_preset_is_a_dgx_h100(void **state)
{
    (void)state;
    load_with(NULL, NULL, 0);
    assert_string_equal(g_t.preset, "h100-nvlink-8");
    assert_int_equal(g_t.ngpus, 8);
    assert_int_equal(g_t.hosts, 1);
    static const char *const bus[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                      "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                      "0000:ba:00.0", "0000:db:00.0"};
    for (int d = 0; d < 8; d++) {
        assert_string_equal(g_t.gpus[d].name, "NVIDIA H100 80GB HBM3");
        assert_string_equal(g_t.gpus[d].pci_bus_id, bus[d]);
        assert_int_equal(g_t.gpus[d].numa_node, d < 4 ? 0 : 1);
        assert_int_equal(g_t.gpus[d].cc_major, 9);
        assert_int_equal(g_t.gpus[d].cc_minor, 0);
        assert_int_equal(g_t.gpus[d].sm_count, 132);
        assert_true(g_t.gpus[d].mem_bytes == 80ull << 30);
        assert_int_equal(strncmp(g_t.gpus[d].uuid, "GPU-", 4), 0);
        assert_int_equal(strlen(g_t.gpus[d].uuid), 40);
        for (int e = 0; e < 8; e++) {
            cpemu_link l = cpemu_topo_link(&g_t, 0, d, 0, e);
            assert_int_equal(l.kind, d == e ? CPEMU_LINK_SELF : CPEMU_LINK_NVLINK);
            if (d != e) {
                assert_int_equal(l.lanes, 18);
                assert_true(l.gbps == 370.0 && l.alpha_us == 1.0);
            }
        }
    }
    assert_int_equal(g_t.nnics, 8);
    assert_string_equal(g_t.nics[7].name, "mlx5_7");
    assert_int_equal(g_t.nics[7].kind, CPEMU_NIC_IB);
    assert_int_equal(g_t.nics[7].rate_gbps, 400);
    assert_int_equal(g_t.nics[3].numa_node, 0);
    assert_int_equal(g_t.nics[4].numa_node, 1);
    assert_true(g_t.nics[0].up);
    assert_true(cpemu_topo_nvswitch(&g_t));
}

static void other_presets(void **state)
{
    (void)state;
    load_with("COLLPROF_EMU_TOPO", "a100-nvlink-4", 0);
    assert_int_equal(g_t.ngpus, 4);
    assert_string_equal(g_t.gpus[3].name, "NVIDIA A100-SXM4-40GB");
    assert_int_equal(g_t.gpus[0].sm_count, 108);
    assert_int_equal(g_t.gpus[0].nvlinks, 12);
    cpemu_link l = cpemu_topo_link(&g_t, 0, 0, 0, 3);
    assert_int_equal(l.kind, CPEMU_LINK_NVLINK);
    assert_true(l.gbps == 230.0 && l.alpha_us == 1.2);
    assert_false(cpemu_topo_nvswitch(&g_t));

    load_with("COLLPROF_EMU_TOPO", "pcie-4", 0);
    assert_string_equal(g_t.gpus[0].name, "NVIDIA L40S");
    assert_int_equal(g_t.gpus[0].cc_minor, 9);
    assert_int_equal(g_t.gpus[0].sm_count, 142);
    assert_int_equal(g_t.gpus[0].nvlinks, 0);
    assert_int_equal(cpemu_topo_link(&g_t, 0, 0, 0, 1).kind, CPEMU_LINK_PCIE);
    assert_int_equal(cpemu_topo_link(&g_t, 0, 2, 0, 3).kind, CPEMU_LINK_PCIE);
    assert_int_equal(cpemu_topo_link(&g_t, 0, 1, 0, 2).kind, CPEMU_LINK_SYS);
    assert_true(cpemu_topo_link(&g_t, 0, 0, 0, 1).gbps == 25.0);
    assert_int_equal(g_t.nnics, 1);
    assert_string_equal(g_t.nics[0].name, "eth0");
    assert_int_equal(g_t.nics[0].kind, CPEMU_NIC_ETH);
    assert_int_equal(g_t.nics[0].rate_gbps, 100);

    load_with("COLLPROF_EMU_TOPO", "h200-nvlink-8", 1);
    assert_string_equal(g_t.preset, "h100-nvlink-8");
}

static void hosts_and_net(void **state)
{
    (void)state;
    load_with("COLLPROF_EMU_HOSTS", "4", 0);
    assert_int_equal(g_t.hosts, 4);
    load_with("COLLPROF_EMU_HOSTS", "64", 0);
    assert_int_equal(g_t.hosts, 64);
    static const char *const bad[] = {"0", "65", "2x", "-1", " "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        load_with("COLLPROF_EMU_HOSTS", bad[i], 1);
        assert_int_equal(g_t.hosts, 1);
    }
    unsetenv("COLLPROF_EMU_HOSTS");
    load_with("COLLPROF_EMU_NET", "socket", 0);
    assert_true(g_t.net_socket);
    load_with("COLLPROF_EMU_NET", "ib", 0);
    assert_false(g_t.net_socket);
    load_with("COLLPROF_EMU_NET", "tcp", 1);
    assert_false(g_t.net_socket);
}

static void fault_lists(void **state)
{
    (void)state;
    load_with("COLLPROF_EMU_DELAY", "1:20,3:5.5", 0);
    assert_int_equal(g_t.ndelays, 2);
    assert_true(cpemu_fault_delay_ms(&g_t, 3) == 5.5);
    assert_true(cpemu_fault_delay_ms(&g_t, 0) == 0);
    static const char *const bad_delay[] = {"1:-2", "x", "1:", "1:2,", "1=2", "1:2;3:4"};
    for (size_t i = 0; i < sizeof bad_delay / sizeof bad_delay[0]; i++) {
        load_with("COLLPROF_EMU_DELAY", bad_delay[i], 1);
        assert_int_equal(g_t.ndelays, 0);
    }
    unsetenv("COLLPROF_EMU_DELAY");

    load_with("COLLPROF_EMU_HANG", "2:5,7:0", 0);
    assert_true(cpemu_fault_hangs_at(&g_t, 2, 5));
    assert_true(cpemu_fault_hangs_at(&g_t, 7, 0));
    assert_false(cpemu_fault_hangs_at(&g_t, 2, 4));
    load_with("COLLPROF_EMU_HANG", "2:-1", 1);
    assert_int_equal(g_t.nhangs, 0);
    load_with("COLLPROF_EMU_HANG", "3:init,1:2", 0);
    assert_true(cpemu_fault_hangs_at(&g_t, 3, CPEMU_HANG_INIT));
    assert_false(cpemu_fault_hangs_at(&g_t, 1, CPEMU_HANG_INIT));
    assert_true(cpemu_fault_hangs_at(&g_t, 1, 2));
    static const char *const bad_hang[] = {"3:initial", "3:18446744073709551615", "init"};
    for (size_t i = 0; i < sizeof bad_hang / sizeof bad_hang[0]; i++) {
        load_with("COLLPROF_EMU_HANG", bad_hang[i], 1);
        assert_int_equal(g_t.nhangs, 0);
    }
    unsetenv("COLLPROF_EMU_HANG");

    load_with("COLLPROF_EMU_SLOW_LINK", "0-3:0.5", 0);
    assert_int_equal(g_t.nslow, 1);
    /* a passing fault (the first MSGS messages) slows those messages, not the link */
    load_with("COLLPROF_EMU_SLOW_LINK", "0-3:0.5,1-2:0.25:7", 0);
    assert_int_equal(g_t.nslow, 2);
    assert_true(cpemu_topo_link(&g_t, 0, 0, 0, 3).gbps == 0.5 * g_t.link_gbps[0][3]);
    assert_true(cpemu_topo_link(&g_t, 0, 1, 0, 2).gbps == g_t.link_gbps[1][2]);
    assert_true(cpemu_topo_passing(&g_t, 0, 2, 0, 1, 6) == 0.25);
    assert_true(cpemu_topo_passing(&g_t, 0, 1, 0, 2, 7) == 1.0);
    assert_true(cpemu_topo_passing(&g_t, 0, 0, 0, 3, 0) == 1.0);
    static const char *const bad_slow[] = {"0-0:0.5", "0-3:1.5", "0-3:0", "0-8:0.5", "3:0.5",
                                           "0-3", "0-3:0.5:0", "0-3:0.5:", "0-3:0.5:x",
                                           "0-3:0.5:2:"};
    for (size_t i = 0; i < sizeof bad_slow / sizeof bad_slow[0]; i++) {
        load_with("COLLPROF_EMU_SLOW_LINK", bad_slow[i], 1);
        assert_int_equal(g_t.nslow, 0);
    }
    /* Global indices: host*ngpus+dev, so 2 hosts have GPUs 0..15. */
    setenv("COLLPROF_EMU_HOSTS", "2", 1);
    load_with("COLLPROF_EMU_SLOW_LINK", "3-11:0.25", 0);
    assert_int_equal(g_t.nslow, 1);
    unsetenv("COLLPROF_EMU_SLOW_LINK");

    load_with("COLLPROF_EMU_CLOCK_OFFSET_US", "1:5000,0:-250.5", 0);
    assert_true(cpemu_clock_offset_ns(&g_t, 1) == 5e6);
    assert_true(cpemu_clock_offset_ns(&g_t, 0) == -250500.0);
    load_with("COLLPROF_EMU_CLOCK_OFFSET_US", "2:5000", 1); /* only hosts 0 and 1 */
    assert_int_equal(g_t.nclock, 0);
    assert_true(cpemu_clock_offset_ns(&g_t, 1) == 0);
}

/* nccl-tests' busbw for an AllReduce of S bytes over n ranks taking ns. */
static double allreduce_busbw(uint64_t S, int n, double ns)
{
    return (double)S / ns * 2.0 * (n - 1) / n;
}

static void model_matches_the_link_bandwidths(void **state)
{
    (void)state;
    load_with(NULL, NULL, 0);
    cpemu_place r[16];
    for (int i = 0; i < 8; i++)
        r[i] = (cpemu_place){0, i};
    uint64_t gib = 1ull << 30;
    double ns = cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, gib, r, 8);
    double bw = allreduce_busbw(gib, 8, ns);
    assert_true(bw > 370 * 0.99 && bw <= 370);
    /* Exactly the header's formula. */
    assert_true(ns == (double)gib * 2 * 7 / 8 / 370.0 + 2 * 7 * 1000.0);
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_ALLGATHER, gib, r, 8) ==
                (double)gib * 7 / 8 / 370.0 + 7 * 1000.0);
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_BROADCAST, gib, r, 8) == (double)gib / 370.0 + 7000.0);
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_SEND, 1000, r, 2) == 1000 / 370.0 + 1000.0);
    /* Small messages are latency bound. */
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, 8, r, 8) > 14000.0);
    /* One rank: a local copy. */
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, gib, r, 1) < ns);

    load_with("COLLPROF_EMU_SLOW_LINK", "2-3:0.5", 0);
    bw = allreduce_busbw(gib, 8, cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, gib, r, 8));
    assert_true(bw > 185 * 0.99 && bw <= 185);
    /* A pair that is not a ring neighbour does not bound the ring; a send over it is slow. */
    assert_true(cpemu_model_ns(&g_t, CPEMU_OP_SEND, gib, (cpemu_place[]){{0, 2}, {0, 3}}, 2) >
                1.9 * cpemu_model_ns(&g_t, CPEMU_OP_SEND, gib, (cpemu_place[]){{0, 1}, {0, 2}}, 2));
    unsetenv("COLLPROF_EMU_SLOW_LINK");

    /* Two hosts over IB: 8 NICs x 48 GB/s do not bound an NVLink ring... */
    setenv("COLLPROF_EMU_HOSTS", "2", 1);
    load_with("COLLPROF_EMU_NET", "ib", 0);
    for (int i = 0; i < 16; i++)
        r[i] = (cpemu_place){i / 8, i % 8};
    cpemu_link net = cpemu_topo_link(&g_t, 0, 7, 1, 0);
    assert_int_equal(net.kind, CPEMU_LINK_NET);
    assert_true(net.gbps == 384.0 && net.alpha_us == 5.0);
    bw = allreduce_busbw(gib, 16, cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, gib, r, 16));
    assert_true(bw > 370 * 0.97 && bw <= 370);
    /* ...sockets cap it at 5 GB/s. */
    load_with("COLLPROF_EMU_NET", "socket", 0);
    net = cpemu_topo_link(&g_t, 0, 7, 1, 0);
    assert_true(net.gbps == 5.0 && net.alpha_us == 20.0);
    bw = allreduce_busbw(gib, 16, cpemu_model_ns(&g_t, CPEMU_OP_ALLREDUCE, gib, r, 16));
    assert_true(bw > 5 * 0.99 && bw <= 5);
    /* A topology without IB falls back to sockets too. */
    unsetenv("COLLPROF_EMU_NET");
    load_with("COLLPROF_EMU_TOPO", "pcie-4", 0);
    assert_true(cpemu_topo_link(&g_t, 0, 0, 1, 0).gbps == 5.0);
}

static void devices_spread_over_hosts(void **state)
{
    (void)state;
    load_with("COLLPROF_EMU_HOSTS", "2", 0);
    for (int d = 0; d < 8; d++)
        assert_int_equal(cpemu_device_host(&g_t, d, 8), d < 4 ? 0 : 1);
    assert_int_equal(cpemu_process_host(), -1);
    load_with("COLLPROF_EMU_HOSTS", "3", 0);
    assert_int_equal(cpemu_device_host(&g_t, 7, 8), 2);
    setenv("COLLPROF_EMU_HOST_ID", "1", 1);
    assert_int_equal(cpemu_process_host(), 1);
    for (int d = 0; d < 8; d++)
        assert_int_equal(cpemu_device_host(&g_t, d, 8), 1);
    setenv("COLLPROF_EMU_HOST_ID", "x", 1);
    assert_int_equal(cpemu_process_host(), -1);
}

static void host_names_append_the_host_to_the_real_name(void **state)
{
    (void)state;
    char real[256], name[300], expect[300];
    cpemu_real_hostname(real, sizeof real);
    assert_true(strlen(real) > 0);
    cpemu_host_name(3, name, sizeof name);
    snprintf(expect, sizeof expect, "%s-emu3", real);
    assert_string_equal(name, expect);
    cpemu_host_name(-1, name, sizeof name);
    assert_string_equal(name, real);
    setenv("COLLPROF_EMU_HOST_ID", "2", 1);
    cpemu_host_name(-1, name, sizeof name);
    snprintf(expect, sizeof expect, "%s-emu2", real);
    assert_string_equal(name, expect);
}

static void visible_devices_and_uuids(void **state)
{
    (void)state;
    load_with(NULL, NULL, 0);
    int map[CPEMU_MAX_GPUS];
    assert_int_equal(cpemu_visible_devices(&g_t, map), 8);
    setenv("CUDA_VISIBLE_DEVICES", "5,2", 1);
    assert_int_equal(cpemu_visible_devices(&g_t, map), 2);
    assert_int_equal(map[0], 5);
    assert_int_equal(map[1], 2);
    setenv("CUDA_VISIBLE_DEVICES", "1,1", 1);
    assert_int_equal(cpemu_visible_devices(&g_t, map), 1);
    setenv("CUDA_VISIBLE_DEVICES", "9", 1);
    assert_int_equal(cpemu_visible_devices(&g_t, map), 0);
    unsigned char a[16], b[16], c[16];
    cpemu_gpu_uuid(&g_t, 0, 0, a);
    cpemu_gpu_uuid(&g_t, 1, 0, b);
    cpemu_gpu_uuid(&g_t, 0, 0, c);
    assert_memory_not_equal(a, b, 16);
    assert_memory_equal(a, c, 16);
}

static char g_path[64];

static void write_topo(const char *text)
{
    snprintf(g_path, sizeof g_path, "/tmp/test_emu_topo_XXXXXX");
    int fd = mkstemp(g_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static const char good_file[] =
    "# two GPUs over PCIe and one over NVLink\n"
    "gpu 0 \"NVIDIA Test GPU\" pci=0000:1A:00.0 cc=9.0 sms=100 mem_gib=24 numa=0 nvlinks=4\n"
    "gpu 1 \"NVIDIA Test GPU\" pci=0000:1b:00.0 cc=9.0 sms=100 mem_gib=24 numa=0 nvlinks=4\n"
    "gpu 2 \"NVIDIA Test GPU\" pci=0000:81:00.0 numa=1   # defaults for the rest\n"
    "\n"
    "link 0 1 nvlink gbps=100 alpha_us=1.5 lanes=4\n"
    "link * * sys gbps=12 alpha_us=3\n"
    "nic ib0 ib rate_gbps=200 numa=0\n"
    "nic eth9 eth rate_gbps=25 up=0 ip=192.168.1.9\n"
    "net gbps_per_nic=24 alpha_us=4\n";

static void topology_file_is_read(void **state)
{
    (void)state;
    write_topo(good_file);
    load_with("COLLPROF_EMU_TOPO", g_path, 0);
    unlink(g_path);
    assert_string_equal(g_t.preset, "file");
    assert_int_equal(g_t.ngpus, 3);
    assert_string_equal(g_t.gpus[0].name, "NVIDIA Test GPU");
    assert_string_equal(g_t.gpus[0].pci_bus_id, "0000:1a:00.0");
    assert_true(g_t.gpus[1].mem_bytes == 24ull << 30);
    assert_int_equal(g_t.gpus[2].numa_node, 1);
    assert_int_equal(g_t.gpus[2].nvlinks, 0);
    assert_int_equal(strncmp(g_t.gpus[2].uuid, "GPU-", 4), 0);
    cpemu_link l = cpemu_topo_link(&g_t, 0, 1, 0, 0);
    assert_int_equal(l.kind, CPEMU_LINK_NVLINK);
    assert_int_equal(l.lanes, 4);
    assert_true(l.gbps == 100 && l.alpha_us == 1.5);
    l = cpemu_topo_link(&g_t, 0, 2, 0, 0);
    assert_int_equal(l.kind, CPEMU_LINK_SYS);
    assert_true(l.gbps == 12);
    assert_int_equal(g_t.nnics, 2);
    assert_false(g_t.nics[1].up);
    assert_string_equal(g_t.nics[1].ip, "192.168.1.9");
    /* Gone: the load fails and says why (cpemu_topo_get turns that into a WARN). */
    char out[1024], err[512];
    assert_int_equal(load_capturing(&g_t, out, sizeof out, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    assert_string_equal(g_t.preset, "h100-nvlink-8");
}

/* docs/EMULATION.md's example: the pcie-4 preset written as a file. */
static const char pcie4_file[] =
    "gpu 0 \"NVIDIA L40S\" pci=0000:01:00.0 cc=8.9 sms=142 mem_gib=48 numa=0 "
    "copy_gbps=350 alpha_us=2\n"
    "gpu 1 \"NVIDIA L40S\" pci=0000:02:00.0 cc=8.9 sms=142 mem_gib=48 numa=0 "
    "copy_gbps=350 alpha_us=2\n"
    "gpu 2 \"NVIDIA L40S\" pci=0000:81:00.0 cc=8.9 sms=142 mem_gib=48 numa=1 "
    "copy_gbps=350 alpha_us=2\n"
    "gpu 3 \"NVIDIA L40S\" pci=0000:82:00.0 cc=8.9 sms=142 mem_gib=48 numa=1 "
    "copy_gbps=350 alpha_us=2\n"
    "link 0 1 pcie gbps=25 alpha_us=2\n"
    "link 2 3 pcie gbps=25 alpha_us=2\n"
    "link * * sys gbps=25 alpha_us=2\n"
    "nic eth0 eth rate_gbps=100 numa=0 ip=10.0.0.1\n";

static void documented_example_file_is_the_pcie4_preset(void **state)
{
    (void)state;
    cpemu_topo preset;
    load_with("COLLPROF_EMU_TOPO", "pcie-4", 0);
    preset = g_t;
    write_topo(pcie4_file);
    load_with("COLLPROF_EMU_TOPO", g_path, 0);
    unlink(g_path);
    assert_int_equal(g_t.ngpus, preset.ngpus);
    for (int a = 0; a < preset.ngpus; a++) {
        /* Compared in place (both zero-filled, padding included); UUIDs derive from the
         * preset's name. */
        memset(g_t.gpus[a].uuid, 0, sizeof g_t.gpus[a].uuid);
        memset(preset.gpus[a].uuid, 0, sizeof preset.gpus[a].uuid);
        assert_memory_equal(&g_t.gpus[a], &preset.gpus[a], sizeof preset.gpus[a]);
        for (int b = 0; b < preset.ngpus; b++) {
            cpemu_link l = cpemu_topo_link(&g_t, 0, a, 0, b);
            cpemu_link m = cpemu_topo_link(&preset, 0, a, 0, b);
            assert_memory_equal(&l, &m, sizeof l);
        }
    }
    assert_int_equal(g_t.nnics, preset.nnics);
    assert_memory_equal(&g_t.nics[0], &preset.nics[0], sizeof preset.nics[0]);
    assert_true(cpemu_topo_link(&g_t, 0, 0, 1, 0).gbps ==
                cpemu_topo_link(&preset, 0, 0, 1, 0).gbps);
}

static void topology_file_errors_name_the_line(void **state)
{
    (void)state;
#define G0 "gpu 0 \"A\" pci=0000:01:00.0\n"
#define G1 "gpu 1 \"A\" pci=0000:02:00.0\n"
    static const struct { const char *text, *want; } cases[] = {
        {"gpu 0 \"A\" pci=0000:01:00.0\nbogus 1\n", "line 2: unknown keyword 'bogus'"},
        {"gpu 0 \"A\" pci=0000:01:00.0 cc=9\n", "line 1: bad cc '9'"},
        {"gpu 0 \"A\" pci=01:00\n", "line 1: bad pci '01:00'"},
        {"gpu 0 \"A\"\n", "line 1: gpu 0 has no pci="},
        {"gpu 0 \"A pci=0000:01:00.0\n", "line 1: unterminated quote"},
        {G0 "gpu 0 \"A\" pci=0000:02:00.0\n", "line 2: gpu 0 defined twice"},
        {G0 "gpu 2 \"A\" pci=0000:02:00.0\n", "gpu 1 is missing"},
        {G0 G1, "no link between gpu 0 and gpu 1"},
        {G0 G1 "link 0 1 nvlink gbps=1 alpha_us=1\n", "line 3: an nvlink link needs lanes="},
        {G0 "link 0 0 pcie gbps=1 alpha_us=1\n", "line 2: link from gpu 0 to itself"},
        {G0 "nic x wifi rate_gbps=1\n", "line 2: unknown nic kind 'wifi'"},
        {"gpu 0 \"A\" pci=0000:01:00.0 sms=-4\n", "line 1: bad value '-4' for sms"},
        {"gpu 99 \"A\" pci=0000:01:00.0\n", "line 1: bad value '99' for gpu index"},
        {"# nothing\n", "no gpu lines"},
    };
#undef G0
#undef G1
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_topo(cases[i].text);
        setenv("COLLPROF_EMU_TOPO", g_path, 1);
        char out[4096], err[512];
        assert_int_equal(load_capturing(&g_t, out, sizeof out, err, sizeof err), -1);
        unlink(g_path);
        if (!strstr(err, cases[i].want) || !strstr(err, g_path))
            fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].want);
        /* The default machine instead. */
        assert_string_equal(g_t.preset, "h100-nvlink-8");
        assert_int_equal(g_t.ngpus, 8);
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, clean_env)
    const struct CMUnitTest tests[] = {
        T(h100_preset_is_a_dgx_h100),
        T(other_presets),
        T(hosts_and_net),
        T(fault_lists),
        T(model_matches_the_link_bandwidths),
        T(devices_spread_over_hosts),
        T(host_names_append_the_host_to_the_real_name),
        T(visible_devices_and_uuids),
        T(topology_file_is_read),
        T(documented_example_file_is_the_pcie4_preset),
        T(topology_file_errors_name_the_line),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
