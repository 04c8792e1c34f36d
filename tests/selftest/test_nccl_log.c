/* NCCL's INFO log read back (selftest/nccl_log.c): every line form, NCCL 2.28's format
 * strings filled in, and hostile input. The transport check on such logs is
 * test_transport_check.c. */
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

static const cps_conn *find_conn(const cps_nccl_log *log, int from, int to, int kind)
{
    for (int i = 0; i < log->nconns; i++)
        if (log->conns[i].from_rank == from && log->conns[i].to_rank == to &&
            log->conns[i].kind == kind)
            return &log->conns[i];
    return NULL;
}

/* ---- the parser ------------------------------------------------------------------------ */

static void test_prefixes(void **state)
{
    (void)state;
    const char *lines[] = {
        "node7:1234:1250 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM",
        "[1,5]<stdout>:node8:99:99 [1] NCCL INFO Channel 00/0 : 5[1] -> 6[2] via P2P/IPC",
        "[rank6]:node9:7:8 [2] NCCL INFO Channel 01/0 : 6[2] -> 7[3] via P2P/direct pointer",
        "[2026-11-22 10:00:01] node10:1:2 [0] NCCL INFO Channel 02 : 7[3] -> 8[0] via SHM/direct",
        "no host at all NCCL INFO Channel 03 : 8[0] -> 9[1] via SHM/direct/direct",
        "node7:1234:1250 [3] NCCL DEBUG Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM",
        NULL,
    };
    cps_nccl_log log;
    parse_lines(&log, lines);
    assert_int_equal(log.lines, 5);   /* the DEBUG line is not NCCL INFO */
    assert_int_equal(log.nconns, 5);
    const cps_conn *c = find_conn(&log, 3, 4, CPS_TR_P2P);
    assert_non_null(c);
    assert_string_equal(c->host, "node7");
    assert_int_equal(c->from_dev, 3);
    assert_int_equal(c->to_dev, 4);
    assert_string_equal(c->via, "P2P/CUMEM");
    c = find_conn(&log, 5, 6, CPS_TR_P2P);
    assert_non_null(c);
    assert_string_equal(c->host, "node8");
    assert_string_equal(c->via, "P2P/IPC");
    c = find_conn(&log, 6, 7, CPS_TR_P2P);
    assert_non_null(c);
    assert_string_equal(c->host, "node9");
    assert_string_equal(c->via, "P2P/direct pointer");
    c = find_conn(&log, 7, 8, CPS_TR_SHM);
    assert_non_null(c);
    assert_string_equal(c->host, "node10");
    assert_string_equal(c->via, "SHM/direct");
    c = find_conn(&log, 8, 9, CPS_TR_SHM);
    assert_non_null(c);
    assert_string_equal(c->host, "");
    assert_int_equal(log.count[CPS_TR_P2P], 3);
    assert_int_equal(log.count[CPS_TR_SHM], 2);
    cps_nccl_log_free(&log);
    assert_null(log.conns);
    assert_int_equal(log.nconns, 0);
}

static void test_connection_forms(void **state)
{
    (void)state;
    const char *lines[] = {
        "h:1:1 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA",
        "h:1:1 [7] NCCL INFO Channel 14/0 : 15[7] -> 0[0] [send] via NET/Socket/0",
        "h:1:1 [1] NCCL INFO Channel 00/0 : 3[1] -> 2[0] via P2P/CUMEM/read",
        "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/MNNVL",
        "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 4[4] via SHM/direct/direct",
        "h:1:1 [0] NCCL INFO CollNet 00/0 : 5 [send] via COLLNET/SHARP/0/GDRDMA",
        "h:1:1 [0] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/Socket/0",
        "h:1:1 [0] NCCL INFO Channel 00 : 9[1b000] -> 10[18000] via P2P/IPC",
        "h:1:1 [0] NCCL INFO Channel 02/0 : 11[3] -> 12[0] [send] via NET/IB/0(1)/GDRDMA/Shared",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 13[0] -> 14[1] via P2P/indirect/2[2]",
        "h:1:1 [0] NCCL INFO Channel 03/0 : 16[0] -> 17[0] [send] via NET/AWS Libfabric/1",
        "h:1:1 [0] NCCL INFO Channel 04/0 : 18[0] -> 19[0] [send] via NET/IBext_v8/1/GDRDMA",
        /* rings and channel listings are not connections */
        "h:1:1 [0] NCCL INFO Channel 00/16 :    0   1   2   3",
        "h:1:1 [0] NCCL INFO Ring 00 : 3 -> 0 -> 1",
        "h:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 3[1] -> 2[0] via CE/whatever",
        NULL,
    };
    cps_nccl_log log;
    parse_lines(&log, lines);
    assert_int_equal(log.lines, 16);
    assert_int_equal(log.nconns, 12);

    const cps_conn *c = find_conn(&log, 0, 2, CPS_TR_NET_IB);
    assert_non_null(c);
    assert_int_equal(c->from_dev, 0);
    assert_int_equal(c->to_dev, 0);
    assert_string_equal(c->via, "NET/IB/3/GDRDMA");
    c = find_conn(&log, 15, 0, CPS_TR_NET_SOCKET);
    assert_non_null(c);
    assert_int_equal(c->from_dev, 7);
    assert_string_equal(c->via, "NET/Socket/0");
    c = find_conn(&log, 3, 2, CPS_TR_P2P);
    assert_non_null(c);
    assert_int_equal(c->from_dev, 1);
    assert_string_equal(c->via, "P2P/CUMEM/read");
    assert_non_null(find_conn(&log, 0, 1, CPS_TR_P2P));
    c = find_conn(&log, 0, 4, CPS_TR_SHM);
    assert_non_null(c);
    assert_int_equal(c->to_dev, 4);
    assert_string_equal(c->via, "SHM/direct/direct");
    c = find_conn(&log, 5, -1, CPS_TR_COLLNET);
    assert_non_null(c);
    assert_string_equal(c->via, "COLLNET/SHARP/0/GDRDMA");
    c = find_conn(&log, 7, 8, CPS_TR_NET_SOCKET);
    assert_non_null(c);
    assert_int_equal(c->from_dev, -1);   /* old rings carry no device */
    c = find_conn(&log, 9, 10, CPS_TR_P2P);
    assert_non_null(c);
    assert_int_equal(c->from_dev, -1);   /* a PCI bus id is not a CUDA index */
    assert_int_equal(c->to_dev, -1);
    c = find_conn(&log, 11, 12, CPS_TR_NET_IB);
    assert_non_null(c);
    assert_string_equal(c->via, "NET/IB/0(1)/GDRDMA/Shared");
    assert_non_null(find_conn(&log, 13, 14, CPS_TR_P2P));
    c = find_conn(&log, 16, 17, CPS_TR_NET_OTHER);
    assert_non_null(c);
    assert_string_equal(c->via, "NET/AWS Libfabric/1");
    assert_non_null(find_conn(&log, 18, 19, CPS_TR_NET_IB));

    assert_int_equal(log.count[CPS_TR_P2P], 4);
    assert_int_equal(log.count[CPS_TR_SHM], 1);
    assert_int_equal(log.count[CPS_TR_NET_IB], 3);
    assert_int_equal(log.count[CPS_TR_NET_SOCKET], 2);
    assert_int_equal(log.count[CPS_TR_NET_OTHER], 1);
    assert_int_equal(log.count[CPS_TR_COLLNET], 1);
    assert_int_equal(log.count[CPS_TR_NVLS], 0);
    cps_nccl_log_free(&log);
}

/* 16 channels over one hop, logged by both ends, are one connection. */
static void test_channels_count_once(void **state)
{
    (void)state;
    cps_nccl_log log;
    cps_nccl_log_init(&log);
    char line[256];
    for (int ch = 0; ch < 16; ch++) {
        snprintf(line, sizeof line,
                 "a:1:1 [0] NCCL INFO Channel %02d/0 : 0[0] -> 1[1] via P2P/CUMEM/read", ch);
        cps_nccl_log_parse_line(line, &log);
        snprintf(line, sizeof line,
                 "a:1:1 [1] NCCL INFO Channel %02d/0 : 1[1] -> 8[0] [send] via NET/IB/%d/GDRDMA",
                 ch, ch % 8);
        cps_nccl_log_parse_line(line, &log);
        snprintf(line, sizeof line,
                 "b:2:2 [0] NCCL INFO Channel %02d/0 : 1[1] -> 8[0] [receive] via NET/IB/%d/GDRDMA",
                 ch, ch % 8);
        cps_nccl_log_parse_line(line, &log);
    }
    assert_int_equal(log.lines, 48);
    assert_int_equal(log.nconns, 2);
    assert_int_equal(log.count[CPS_TR_P2P], 1);
    assert_int_equal(log.count[CPS_TR_NET_IB], 1);
    /* one pair over two transports (P2P for the ring, NET for p2p ops through PXN) is two */
    cps_nccl_log_parse_line("a:1:1 [0] NCCL INFO Channel 02/1 : 0[0] -> 1[1] [send] via "
                            "NET/IB/0/GDRDMA", &log);
    assert_int_equal(log.nconns, 3);
    assert_int_equal(log.count[CPS_TR_NET_IB], 2);
    /* the first line of a connection stays its record */
    assert_string_equal(find_conn(&log, 1, 8, CPS_TR_NET_IB)->via, "NET/IB/0/GDRDMA");
    assert_string_equal(find_conn(&log, 1, 8, CPS_TR_NET_IB)->host, "a");
    cps_nccl_log_free(&log);
}

/* Enough distinct hops to grow the lookup table several times, each found again after. */
static void test_many_connections(void **state)
{
    (void)state;
    cps_nccl_log log;
    cps_nccl_log_init(&log);
    char line[256];
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < 3000; r++) {
            snprintf(line, sizeof line,
                     "h:1:1 [0] NCCL INFO Channel %02d/1 : %d[0] -> %d[1] via P2P/CUMEM", pass,
                     r, (r + 1) % 3000);
            cps_nccl_log_parse_line(line, &log);
        }
    assert_int_equal(log.nconns, 3000);
    assert_int_equal(log.count[CPS_TR_P2P], 3000);
    assert_non_null(find_conn(&log, 2999, 0, CPS_TR_P2P));
    cps_nccl_log_free(&log);
}

static void test_network_lines(void **state)
{
    (void)state;
    const char *lines[] = {
        "h:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/RoCE [RO]; OOB "
        "eth0:10.0.0.1<0>",
        /* every rank of a process says it again */
        "h:1:1 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/RoCE [RO]; OOB "
        "eth0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0> [1]ens4:fe80::1%ens4<0>",
        "h:1:1 [0] NCCL INFO Using network IBext_v8",
        "h:1:1 [0] NCCL INFO NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)",
        NULL,
    };
    cps_nccl_log log;
    parse_lines(&log, lines);
    assert_int_equal(log.ib_found, 2);
    assert_string_equal(log.ib_devices, "mlx5_0:1/IB/SHARP mlx5_1:1/RoCE");
    assert_string_equal(log.socket_ifs, "ens3:172.31.12.210 ens4:fe80::1%ens4");
    assert_string_equal(log.network, "IBext_v8");
    assert_int_equal(log.nvls, 1);
    assert_string_equal(log.plugin_error, "");
    assert_int_equal(log.nconns, 0);
    cps_nccl_log_free(&log);

    const char *none[] = {
        "h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so",
        "h:1:1 [0] NCCL INFO Failed to initialize NET plugin IB",
        "h:1:1 [0] NCCL INFO NET/IB : No device found.",
        "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO Using network Socket",
        "h:1:1 [0] NCCL INFO NVLS multicast support is not available on dev 0",
        "h:1:1 [1] NCCL INFO NVLS multicast support is available on dev 1",
        NULL,
    };
    parse_lines(&log, none);
    assert_int_equal(log.ib_found, 0);
    assert_string_equal(log.ib_devices, "");
    assert_string_equal(log.socket_ifs, "eth0:10.0.0.1");
    assert_string_equal(log.network, "Socket");
    assert_int_equal(log.nvls, 0);   /* one GPU without is enough */
    assert_string_equal(log.plugin_error, "");   /* no plugin installed is the normal case */
    cps_nccl_log_free(&log);

    cps_nccl_log_init(&log);
    assert_int_equal(log.ib_found, -1);
    assert_int_equal(log.nvls, -1);
    assert_string_equal(log.network, "");
}

static void test_plugin_errors(void **state)
{
    (void)state;
    static const struct {
        const char *line, *error;
    } cases[] = {
        {"h:1:1 [0] NCCL INFO NET/Plugin: Could not find: aws-ofi libnccl-net-aws-ofi.so",
         "NET/Plugin: Could not find: aws-ofi libnccl-net-aws-ofi.so"},
        {"h:1:1 [0] NCCL INFO NET/Plugin: libnccl-net.so: libfabric.so.1: cannot open shared "
         "object file: No such file or directory",
         "NET/Plugin: libnccl-net.so: libfabric.so.1: cannot open shared object file: No such "
         "file or directory"},
        {"h:1:1 [0] NCCL INFO External network plugin /opt/libnccl-net.so is unsupported",
         "External network plugin /opt/libnccl-net.so is unsupported"},
        {"h:1:1 [0] NCCL INFO Failed to initialize NET plugin Libfabric",
         "Failed to initialize NET plugin Libfabric"},
        {"h:1:1 [0] init.cc:100 NCCL WARN Failed to initialize any NET plugin",
         "Failed to initialize any NET plugin"},
        {"h:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v8)", ""},
        {"h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network "
         "plugin.", ""},
        {"h:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
         "implementation", ""},
        {"h:1:1 [0] NCCL INFO Failed to initialize NET plugin Socket", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cps_nccl_log log;
        cps_nccl_log_init(&log);
        cps_nccl_log_parse_line(cases[i].line, &log);
        if (strcmp(log.plugin_error, cases[i].error) != 0)
            fail_msg("%s: got \"%s\"", cases[i].line, log.plugin_error);
        cps_nccl_log_free(&log);
    }
}

static void test_transport_names(void **state)
{
    (void)state;
    assert_string_equal(cps_transport_name(CPS_TR_P2P), "P2P");
    assert_string_equal(cps_transport_name(CPS_TR_SHM), "SHM");
    assert_string_equal(cps_transport_name(CPS_TR_NET_IB), "NET/IB");
    assert_string_equal(cps_transport_name(CPS_TR_NET_SOCKET), "NET/Socket");
    assert_string_equal(cps_transport_name(CPS_TR_COLLNET), "CollNet");
    assert_string_equal(cps_transport_name(CPS_TR_NVLS), "NVLS");
    assert_string_equal(cps_transport_name(-1), "unknown");
    assert_string_equal(cps_transport_name(CPS_TR_NKINDS), "unknown");
}

/* ---- hostile input --------------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_junk_lines(void **state)
{
    (void)state;
    const char *lines[] = {
        "", "NCCL INFO", "NCCL INFO ", "x NCCL INFO Channel", "x NCCL INFO Channel ",
        "x NCCL INFO Channel 99999999999999 : 1[1] -> 2[2] via P2P",
        "x NCCL INFO Channel 00 : 1[1] -> via P2P", "x NCCL INFO Channel 00 : 1[1 -> 2[2] via P2P",
        "x NCCL INFO Channel 00 : 1[123456789012345678901234] -> 2[2] via P2P",
        "x NCCL INFO Channel 00 : 1[1] -> 2[2] via ", "x NCCL INFO CollNet 00 : via COLLNET",
        "x NCCL INFO NET/IB : Using [", "x NCCL INFO NET/IB : Using [0]", "x NCCL INFO NET/IB",
        "x NCCL INFO NET/Socket : Using [0]<0>", "x NCCL INFO NET/Plugin",
        "[[[[ ]]]] :::: [0] NCCL INFO Channel 00 : 1 -> 2 via SHM", ":1:1 [0] NCCL INFO x",
        " [0] NCCL INFO Using network ", NULL,
    };
    cps_nccl_log log;
    parse_lines(&log, lines);
    assert_int_equal(log.nconns, 1);   /* only the last Channel line is whole */
    assert_int_equal(log.count[CPS_TR_SHM], 1);
    assert_string_equal(log.conns[0].host, "");
    assert_string_equal(log.network, "");
    assert_int_equal(log.ib_found, -1);
    cps_nccl_log_parse_line(NULL, &log);
    cps_nccl_log_parse_line("x", NULL);
    cps_nccl_log_free(&log);
    cps_nccl_log_free(NULL);
}

static void test_hostile_file(void **state)
{
    (void)state;
    char path[] = "/tmp/collprof-nccl-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    /* binary junk, a 10 MB line, NUL bytes inside a good line, no newline at the end */
    size_t big = 10u << 20, n = 0;
    char *buf = malloc(big + 65536);
    assert_non_null(buf);
    uint32_t x = 12345;
    for (int i = 0; i < 8192; i++) {
        x = x * 1103515245u + 12345u;
        buf[n++] = (char)(x >> 16);
    }
    buf[n++] = '\n';
    const char *good = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n";
    memcpy(buf + n, good, strlen(good));
    n += strlen(good);
    memset(buf + n, 'A', big);
    memcpy(buf + n + 100, good, strlen(good) - 1);   /* inside the long line: skipped */
    n += big;
    buf[n++] = '\n';
    const char nul[] = "h:1:1 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via SHM/\0direct\n";
    memcpy(buf + n, nul, sizeof nul - 1);
    n += sizeof nul - 1;
    const char *last = "h:1:1 [0] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/IPC";
    memcpy(buf + n, last, strlen(last));
    n += strlen(last);
    write_file(path, buf, n);
    free(buf);

    cps_nccl_log log;
    assert_int_equal(cps_nccl_log_parse_file(path, &log), 0);
    assert_int_equal(log.nconns, 3);
    assert_non_null(find_conn(&log, 0, 1, CPS_TR_P2P));
    assert_string_equal(find_conn(&log, 1, 2, CPS_TR_SHM)->via, "SHM/ direct");
    assert_non_null(find_conn(&log, 2, 3, CPS_TR_P2P));
    cps_nccl_log_free(&log);
    unlink(path);
}

static void test_missing_file(void **state)
{
    (void)state;
    cps_nccl_log log;
    assert_int_equal(cps_nccl_log_parse_file("/nonexistent/collprof/nccl.log", &log), -1);
    assert_int_equal(log.lines, 0);
    assert_int_equal(log.nconns, 0);
    assert_int_equal(log.ib_found, -1);
    assert_int_equal(log.nvls, -1);
    assert_int_equal(cps_nccl_log_parse_file("/", &log), -1);   /* a directory */
    assert_int_equal(cps_nccl_log_parse_file(NULL, &log), -1);
    cps_nccl_log_free(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_connection_forms),
        cmocka_unit_test(test_channels_count_once),
        cmocka_unit_test(test_many_connections),
        cmocka_unit_test(test_network_lines),
        cmocka_unit_test(test_plugin_errors),
        cmocka_unit_test(test_transport_names),
        cmocka_unit_test(test_junk_lines),
        cmocka_unit_test(test_hostile_file),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
