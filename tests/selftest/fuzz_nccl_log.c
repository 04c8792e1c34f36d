/* fuzz_nccl_log: libFuzzer target for NCCL's INFO log reader and the transport check.
 *
 * The input is read as a log file (through a memory stream, so the reader's own line
 * splitting, its long-line skip and its NUL handling are what run), then judged against a
 * fixed 8-GPU NVLink node with IB ports up. It asserts the reader's promises: counts match
 * the connections kept, each string is NUL-terminated within its field, and the check's
 * detail is one line. Built with -fsanitize=fuzzer under COLLPROF_FUZZ; test_nccl_log_replay
 * runs it over tests/fuzzdata/nccl_log in every normal test run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/selftest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!(cond))                                                                        \
            abort();                                                                        \
    } while (0)

static void node(cps_topology *t, cps_gpu *g, cps_link *l, cps_nic *n)
{
    memset(t, 0, sizeof *t);
    int k = 0;
    for (int a = 0; a < 8; a++) {
        g[a] = (cps_gpu){.index = a, .numa = a / 4, .nvlinks = 18, .cc_major = 9};
        snprintf(g[a].pci, sizeof g[a].pci, "0000:%02x:00.0", 0x18 + a);
        for (int b = a + 1; b < 8; b++)
            l[k++] = (cps_link){.a = a, .b = b, .kind = CPS_LINK_NVLINK, .lanes = 18};
    }
    for (int i = 0; i < 2; i++) {
        n[i] = (cps_nic){.kind = CPS_NIC_IB, .rate_gbps = 400, .up = 1, .numa = i};
        snprintf(n[i].name, sizeof n[i].name, "mlx5_%d", i);
    }
    *t = (cps_topology){.gpus = g, .n_gpus = 8, .links = l, .n_links = k, .nics = n,
                        .n_nics = 2};
}

static int terminated(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* fmemopen refuses an empty buffer */
    static const char empty[1] = "";
    FILE *f = fmemopen(size ? (void *)data : (void *)empty, size ? size : 1, "rb");
    REQUIRE(f);
    cps_nccl_log log;
    int rc = cps_nccl_log_parse_stream(f, &log);
    fclose(f);
    REQUIRE(rc == 0);
    REQUIRE(log.lines >= 0 && (size_t)log.lines <= size + 1);
    REQUIRE(log.nconns >= 0 && (size_t)log.nconns <= size);
    int sum = 0;
    for (int k = 0; k < CPS_TR_NKINDS; k++) {
        REQUIRE(log.count[k] >= 0);
        sum += log.count[k];
    }
    REQUIRE(sum == log.nconns);
    for (int i = 0; i < log.nconns; i++) {
        const cps_conn *c = &log.conns[i];
        REQUIRE(c->kind >= 0 && c->kind < CPS_TR_NKINDS);
        REQUIRE(terminated(c->via, sizeof c->via) && terminated(c->host, sizeof c->host));
    }
    REQUIRE(terminated(log.network, sizeof log.network));
    REQUIRE(terminated(log.ib_devices, sizeof log.ib_devices));
    REQUIRE(terminated(log.socket_ifs, sizeof log.socket_ifs));
    REQUIRE(terminated(log.plugin_error, sizeof log.plugin_error));

    cps_topology t;
    cps_gpu g[8];
    cps_link l[28];
    cps_nic n[2];
    node(&t, g, l, n);
    static const int map[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    char *env[] = {"NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0", NULL};
    cps_check c;
    cps_check_transport(&t, &log, map, 8, env, &c);
    REQUIRE(c.status >= CPS_PASS && c.status <= CPS_FAIL);
    REQUIRE(terminated(c.detail, sizeof c.detail) && !strchr(c.detail, '\n'));
    cps_nccl_log_free(&log);
    return 0;
}
