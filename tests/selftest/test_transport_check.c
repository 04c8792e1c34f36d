/* The `transport` check (selftest/transport_check.c) on logs the emulation
 * (emu/nccl/transport_log.c) wrote for 4 ranks on 2 hosts, and on hand-built topologies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selftest/selftest.h"

static void parse_lines(cps_nccl_log *log, const char *const *lines)
{
    cps_nccl_log_init(log);
    for (; *lines; lines++)
        cps_nccl_log_parse_line(*lines, log);
}

/* ---- the transport check --------------------------------------------------------------- */

/* What the emulation's rank 0 logged (NCCL_DEBUG=INFO, COLLPROF_EMU_HOSTS=2,
 * COLLPROF_EMU_NET=socket, 4 ranks of collprof-sim --pattern ddp): host 0 has ranks 0 and 1. */
static const char *const emu_socket[] = {
    "vm-emu0:525:525 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>",
    "vm-emu0:525:525 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
    "vm-emu0:525:525 [0] NCCL INFO NET/IB : No device found.",
    "vm-emu0:525:525 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "vm-emu0:525:525 [0] NCCL INFO Using network Socket",
    "vm-emu0:525:525 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 "
    "MNNVL 0",
    "vm-emu0:525:525 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
    "vm-emu0:525:525 [0] NCCL INFO Channel 01/02 :    0   1   2   3",
    "vm-emu0:525:525 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0",
    "vm-emu0:525:525 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "vm-emu0:525:525 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/Socket/0",
    "vm-emu0:525:525 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "vm-emu0:525:525 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0",
    "vm-emu0:526:526 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0",
    "vm-emu0:526:526 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/Socket/0",
    NULL,
};

/* The same job on IB (COLLPROF_EMU_NET unset), and 4 ranks on one host with NCCL_P2P_DISABLE=1. */
static const char *const emu_ib[] = {
    "vm-emu0:540:540 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
    "[3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB ; OOB "
    "eth0:10.0.0.1<0>",
    "vm-emu0:540:540 [0] NCCL INFO Using network IB",
    "vm-emu0:540:540 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA",
    "vm-emu0:540:540 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "vm-emu0:540:540 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/IB/1/GDRDMA",
    "vm-emu0:540:540 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "vm-emu0:540:540 [0] NCCL INFO NVLS multicast support is available on dev 0",
    NULL,
};
static const char *const emu_shm[] = {
    "vm:554:554 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>",
    "vm:554:554 [0] NCCL INFO Using network IB",
    "vm:554:554 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
    "vm:554:554 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct/direct",
    "vm:555:555 [1] NCCL INFO Channel 00 : 1[1] -> 2[2] via SHM/direct/direct",
    "vm:556:556 [2] NCCL INFO Channel 00 : 2[2] -> 3[3] via SHM/direct/direct",
    "vm:559:559 [3] NCCL INFO Channel 00 : 3[3] -> 0[0] via SHM/direct/direct",
    NULL,
};

static cps_gpu gpus[8];
static cps_nic nics[9];
static cps_link links[28];

/* An 8-GPU node, every pair on NVLink (or all PCIe), with n_ib IB NICs up and eth0. */
static void make_topology(cps_topology *t, int n_ib, int nvlink)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < 8; i++) {
        gpus[i] = (cps_gpu){.index = i, .numa = i / 4, .lanes = 16};
        snprintf(gpus[i].pci, sizeof gpus[i].pci, "0000:%02x:00.0", 0x18 + i * 0x10);
    }
    int n = 0;
    for (int i = 0; i < n_ib; i++) {
        nics[n] = (cps_nic){.kind = CPS_NIC_IB, .rate_gbps = 400, .up = 1, .numa = i / 4};
        snprintf(nics[n++].name, sizeof nics[0].name, "mlx5_%d", i);
    }
    nics[n] = (cps_nic){.kind = CPS_NIC_ETH, .rate_gbps = 25, .up = 1, .numa = 0};
    snprintf(nics[n++].name, sizeof nics[0].name, "eth0");
    int l = 0;
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            links[l++] = (cps_link){a, b, nvlink ? CPS_LINK_NVLINK : CPS_LINK_PCIE,
                                    nvlink ? 18 : 16, CPS_PATH_PIX};
    t->gpus = gpus;
    t->n_gpus = 8;
    t->nics = nics;
    t->n_nics = n;
    t->links = links;
    t->n_links = l;
}

static const int identity[8] = {0, 1, 2, 3, 4, 5, 6, 7};

static void check_lines(const char *const *lines, const cps_topology *t, char *const *env,
                        cps_check *out)
{
    cps_nccl_log log;
    parse_lines(&log, lines);
    cps_check_transport(t, &log, identity, 8, env, out);
    cps_nccl_log_free(&log);
}

static void assert_contains(const char *s, const char *part)
{
    if (!strstr(s, part))
        fail_msg("\"%s\" lacks \"%s\"", s, part);
}

static void assert_one_line(const cps_check *c)
{
    assert_null(strchr(c->detail, '\n'));
    assert_true(strlen(c->detail) <= 380);
    assert_string_equal(c->name, "transport");
    assert_string_equal(c->unit, "connections");
    assert_true(c->expected == 0);
}

static void test_sockets_with_ib_up_fail(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    char *env[] = {"PATH=/usr/bin", NULL};
    cps_check c;
    check_lines(emu_socket, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_true(c.measured == 2);   /* 3->0 and 1->2, two channels each */
    assert_string_equal(c.detail,
                        "2 connections on NET/Socket while IB is up (mlx5_0, mlx5_1, mlx5_2 and 5 "
                        "more): NET/IB found no usable device (driver/libibverbs?)");

    char *ib_off[] = {"NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0", NULL};
    check_lines(emu_socket, &t, ib_off, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_contains(c.detail, "NET/Socket");
    assert_contains(c.detail, "mlx5_0");
    assert_contains(c.detail, "NCCL_IB_DISABLE=1 is set; NCCL_SOCKET_IFNAME=eth0 is set");

    char *net_sock[] = {"NCCL_NET=Socket", "NCCL_IB_DISABLE=0", NULL};
    check_lines(emu_socket, &t, net_sock, &c);
    assert_contains(c.detail, "NCCL_NET=Socket is set");
    assert_null(strstr(c.detail, "NCCL_IB_DISABLE"));

    /* NULL: the process environment */
    setenv("NCCL_IB_DISABLE", "1", 1);
    check_lines(emu_socket, &t, NULL, &c);
    unsetenv("NCCL_IB_DISABLE");
    assert_contains(c.detail, "NCCL_IB_DISABLE=1 is set");

    /* a plugin that failed, from the log */
    const char *plugin[] = {
        "h:1:1 [0] NCCL INFO NET/Plugin: libnccl-net.so: undefined symbol: ibv_reg_dmabuf_mr",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0", NULL,
    };
    check_lines(plugin, &t, env, &c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_contains(c.detail,
                    "net plugin failed: NET/Plugin: libnccl-net.so: undefined symbol: ibv_reg");
}

/* No IB NIC in the topology, but NCCL itself listed IB devices and still went to sockets. */
static void test_sockets_with_ib_in_log_fail(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 0, 1);
    const char *lines[] = {
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0", NULL,
    };
    char *env[] = {"NCCL_NET=socket", NULL};
    cps_check c;
    check_lines(lines, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_true(c.measured == 1);
    assert_string_equal(c.detail,
                        "1 connection on NET/Socket while NCCL listed IB devices (mlx5_0:1/RoCE): "
                        "NCCL_NET=socket is set");
    char *none[] = {NULL};
    check_lines(lines, &t, none, &c);
    assert_contains(c.detail, "NCCL found IB yet chose sockets");
    char *hca[] = {"NCCL_IB_HCA=mlx5_9", NULL};
    check_lines(emu_socket, &t, hca, &c);
    assert_int_equal(c.status, CPS_WARN);   /* no IB NIC up and none in the log */
    make_topology(&t, 1, 1);
    check_lines(emu_socket, &t, hca, &c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_string_equal(c.detail, "2 connections on NET/Socket while IB is up (mlx5_0): "
                                  "NCCL_IB_HCA=mlx5_9 matched no usable HCA?");
}

static void test_sockets_without_ib_warn(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 0, 1);
    cps_check c;
    char *env[] = {NULL};
    check_lines(emu_socket, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_WARN);
    assert_true(c.measured == 2);
    assert_string_equal(c.detail, "2 connections on NET/Socket, no IB/RoCE NIC up: inter-host "
                                  "traffic on TCP sockets, expect several times less bandwidth");
    /* an IB NIC that is down does not count */
    make_topology(&t, 2, 1);
    nics[0].up = nics[1].up = 0;
    check_lines(emu_socket, &t, env, &c);
    assert_int_equal(c.status, CPS_WARN);
}

static void test_shm_over_nvlink_fail(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    cps_check c;
    char *p2p_off[] = {"NCCL_P2P_DISABLE=1", NULL};
    check_lines(emu_shm, &t, p2p_off, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_true(c.measured == 4);
    assert_string_equal(c.detail, "4 SHM connections between NVLink GPUs (GPU 0-1, GPU 1-2, GPU "
                                  "2-3, GPU 3-0): NCCL_P2P_DISABLE=1 is set");

    char *none[] = {NULL};
    check_lines(emu_shm, &t, none, &c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_contains(c.detail, "P2P unavailable (container without IPC? ACS/IOMMU?)");

    char *level[] = {"NCCL_P2P_LEVEL=LOC", NULL};
    check_lines(emu_shm, &t, level, &c);
    assert_contains(c.detail, "NCCL_P2P_LEVEL=LOC is set");

    /* CUDA devices 1 and 2 swapped in the topology: still NVLink, named by topology index */
    int swapped[8] = {0, 2, 1, 3, 4, 5, 6, 7};
    cps_nccl_log log;
    parse_lines(&log, emu_shm);
    cps_check_transport(&t, &log, swapped, 8, p2p_off, &c);
    assert_contains(c.detail, "(GPU 0-2, GPU 2-1, GPU 1-3, GPU 3-0)");

    /* devices the caller could not map: NVLink on the node is enough, the pair said unmapped */
    int unknown[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    cps_check_transport(&t, &log, unknown, 8, p2p_off, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_contains(c.detail, "ranks 0-1 (devices unmapped)");
    cps_check_transport(&t, &log, NULL, 0, p2p_off, &c);
    assert_int_equal(c.status, CPS_FAIL);

    /* two NVLink islands of 4 (0-3, 4-7) joined over the CPU: SHM across them is no fault */
    for (int i = 0; i < t.n_links; i++)
        if ((links[i].a < 4) != (links[i].b < 4))
            links[i].kind = CPS_LINK_SYS;
    const char *islands[] = {
        "h:1:1 [3] NCCL INFO Channel 00 : 3[3] -> 4[4] via SHM/direct/direct",
        "h:1:1 [7] NCCL INFO Channel 00 : 7[7] -> 0[0] via SHM/direct/direct", NULL,
    };
    check_lines(islands, &t, p2p_off, &c);
    assert_int_equal(c.status, CPS_PASS);
    assert_string_equal(c.detail, "SHM 2 connections");

    /* a PCIe box: SHM is what NCCL picks when P2P is off there, not a failure of NVLink */
    make_topology(&t, 8, 0);
    cps_check_transport(&t, &log, identity, 8, p2p_off, &c);
    assert_int_equal(c.status, CPS_PASS);
    assert_string_equal(c.detail, "SHM 4 connections");
    cps_nccl_log_free(&log);
}

/* Both failures at once: one line, both named, the connections added up. */
static void test_both_failures(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    const char *lines[] = {
        "h:1:1 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0",
        "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", NULL,
    };
    char *env[] = {"NCCL_IB_DISABLE=1", "NCCL_P2P_DISABLE=1", NULL};
    cps_check c;
    check_lines(lines, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_FAIL);
    assert_true(c.measured == 2);
    assert_contains(c.detail, "NCCL_IB_DISABLE=1");
    assert_contains(c.detail, " | 1 SHM connection between NVLink GPUs (GPU 0-1): "
                              "NCCL_P2P_DISABLE=1 is set");
}

static void test_healthy_pass(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    char *env[] = {NULL};
    cps_check c;
    check_lines(emu_ib, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_PASS);
    assert_true(c.measured == 0);
    assert_string_equal(c.detail, "P2P 1, NET/IB 1 connections; NVLS available");

    /* IB without GPUDirect RDMA still passes, and says so */
    const char *no_gdr[] = {
        "h:1:1 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0", NULL,
    };
    check_lines(no_gdr, &t, env, &c);
    assert_int_equal(c.status, CPS_PASS);
    assert_string_equal(c.detail, "NET/IB 1 connection (1 NET/IB without GPUDirect RDMA)");

    /* under a launcher the sweep merges every rank's counts into a log whose conns are its own */
    cps_nccl_log log;
    parse_lines(&log, emu_ib);
    log.count[CPS_TR_NET_IB] = 4;
    log.count[CPS_TR_P2P] = 4;
    cps_check_transport(&t, &log, identity, 8, env, &c);
    assert_int_equal(c.status, CPS_PASS);
    assert_string_equal(c.detail, "P2P 4, NET/IB 4 connections; NVLS available");
    cps_nccl_log_free(&log);
}

/* One host, all P2P, but NCCL chose sockets for the network while IB is up: a multi-node job
 * would run on TCP. */
static void test_socket_network_single_host_warn(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    const char *lines[] = {
        "h:1:1 [0] NCCL INFO NET/IB : No device found.",
        "h:1:1 [0] NCCL INFO Using network Socket",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", NULL,
    };
    char *env[] = {NULL};
    cps_check c;
    check_lines(lines, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_WARN);
    assert_true(c.measured == 0);
    assert_string_equal(c.detail, "NCCL chose network Socket while IB is up (mlx5_0, mlx5_1, "
                                  "mlx5_2 and 5 more): NET/IB found no usable device "
                                  "(driver/libibverbs?); P2P 1 connection");
}

static void test_no_log_warn(void **state)
{
    (void)state;
    cps_topology t;
    make_topology(&t, 8, 1);
    char *env[] = {NULL};
    cps_check c;
    cps_check_transport(&t, NULL, identity, 8, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_WARN);
    assert_true(isnan(c.measured));
    assert_contains(c.detail, "NCCL_DEBUG_FILE");

    cps_nccl_log log;
    assert_int_equal(cps_nccl_log_parse_file("/nonexistent/nccl.log", &log), -1);
    cps_check_transport(&t, &log, identity, 8, env, &c);
    assert_int_equal(c.status, CPS_WARN);
    assert_contains(c.detail, "could not be read");

    /* INFO lines, but none about connections, on 8 GPUs */
    const char *quiet[] = {"h:1:1 [0] NCCL INFO Using network IB", NULL};
    check_lines(quiet, &t, env, &c);
    assert_one_line(&c);
    assert_int_equal(c.status, CPS_WARN);
    assert_contains(c.detail, "NCCL logged no connections");

    /* one GPU has nothing to connect */
    parse_lines(&log, quiet);
    cps_check_transport(&t, &log, identity, 1, env, &c);
    assert_int_equal(c.status, CPS_PASS);
    assert_true(c.measured == 0);
    assert_string_equal(c.detail, "one GPU: no connections");
    cps_nccl_log_free(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sockets_with_ib_up_fail),
        cmocka_unit_test(test_sockets_with_ib_in_log_fail),
        cmocka_unit_test(test_sockets_without_ib_warn),
        cmocka_unit_test(test_shm_over_nvlink_fail),
        cmocka_unit_test(test_both_failures),
        cmocka_unit_test(test_healthy_pass),
        cmocka_unit_test(test_socket_network_single_host_warn),
        cmocka_unit_test(test_no_log_warn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
