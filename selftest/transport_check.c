/* transport_check: the `transport` check — did NCCL use the transports this node offers?
 *
 * The two failures it looks for cost the most and show nowhere else: NET/Socket while an IB or
 * RoCE NIC is up (inter-host traffic on TCP, several times slower), and SHM between GPUs that
 * NVLink joins (P2P refused, every hop through host memory). Each FAIL names the NCCL setting
 * that usually causes it, read from the environment the run had. measured is the number of
 * connections on the wrong transport, expected 0.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "selftest/selftest.h"

extern char **environ;

#define DETAIL_MAX 380   /* one line of cps_check.detail, with room to spare */

static const char *env_get(char *const *env, const char *name)
{
    if (!env)
        env = environ;
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* printf at the end of a fixed buffer: what does not fit is cut */
__attribute__((format(printf, 3, 4))) static void appendf(char *buf, size_t n, const char *fmt, ...)
{
    size_t have = strlen(buf);
    if (have + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + have, n - have, fmt, ap);
    va_end(ap);
}

/* "mlx5_0, mlx5_1, mlx5_2 and 5 more" for the IB/RoCE NICs that are up; returns how many. */
static int ib_nics_up(const cps_topology *t, char *names, size_t n)
{
    int up = 0;
    names[0] = '\0';
    for (int i = 0; t && i < t->n_nics; i++) {
        const cps_nic *c = &t->nics[i];
        if (!c->up || (c->kind != CPS_NIC_IB && c->kind != CPS_NIC_ROCE))
            continue;
        if (up < 3)
            appendf(names, n, "%s%s", up ? ", " : "", c->name);
        up++;
    }
    if (up > 3)
        appendf(names, n, " and %d more", up - 3);
    return up;
}

/* The settings that put NCCL on sockets, those that apply; the driver's side when none. */
static void socket_cause(const cps_nccl_log *log, char *const *env, char *out, size_t n)
{
    out[0] = '\0';
    const char *v = env_get(env, "NCCL_IB_DISABLE");
    if (v && *v && strcmp(v, "0") != 0)
        appendf(out, n, "NCCL_IB_DISABLE=%.16s is set", v);
    v = env_get(env, "NCCL_NET");
    if (v && strcasecmp(v, "Socket") == 0)
        appendf(out, n, "%sNCCL_NET=%.16s is set", out[0] ? "; " : "", v);
    if (log->plugin_error[0])
        appendf(out, n, "%snet plugin failed: %.90s", out[0] ? "; " : "", log->plugin_error);
    v = env_get(env, "NCCL_SOCKET_IFNAME");
    if (v)   /* NET/IB takes its out-of-band interface from it: a wrong one disables IB */
        appendf(out, n, "%sNCCL_SOCKET_IFNAME=%.32s is set", out[0] ? "; " : "", v);
    if (!out[0]) {
        v = env_get(env, "NCCL_IB_HCA");
        if (log->ib_found > 0)
            appendf(out, n, "NCCL found IB yet chose sockets (NCCL_NET, or the communicator's "
                            "netName?)");
        else if (v)
            appendf(out, n, "NCCL_IB_HCA=%.32s matched no usable HCA?", v);
        else
            appendf(out, n, "NET/IB found no usable device (driver/libibverbs?)");
    }
}

static void p2p_cause(char *const *env, char *out, size_t n)
{
    out[0] = '\0';
    const char *v = env_get(env, "NCCL_P2P_DISABLE");
    if (v && *v && strcmp(v, "0") != 0)
        appendf(out, n, "NCCL_P2P_DISABLE=%.16s is set", v);
    v = env_get(env, "NCCL_P2P_LEVEL");
    if (v)
        appendf(out, n, "%sNCCL_P2P_LEVEL=%.16s is set", out[0] ? "; " : "", v);
    if (!out[0])
        appendf(out, n, "P2P unavailable (container without IPC? ACS/IOMMU?)");
}

static int topo_index(int dev, const int *dev_to_topo, int ndev)
{
    return dev_to_topo && dev >= 0 && dev < ndev ? dev_to_topo[dev] : -1;
}

static int nvlink_between(const cps_topology *t, int a, int b)
{
    for (int i = 0; t && i < t->n_links; i++) {
        const cps_link *l = &t->links[i];
        if (((l->a == a && l->b == b) || (l->a == b && l->b == a)) && l->kind == CPS_LINK_NVLINK)
            return 1;
    }
    return 0;
}

static int any_nvlink(const cps_topology *t)
{
    for (int i = 0; t && i < t->n_links; i++)
        if (t->links[i].kind == CPS_LINK_NVLINK)
            return 1;
    return 0;
}

/* SHM connections between GPUs NVLink joins; pairs named in out ("GPU 0-1, 2-3", CUDA indices
 * when the topology index is unknown). Returns how many. */
static int shm_over_nvlink(const cps_topology *t, const cps_nccl_log *log, const int *dev_to_topo,
                           int ndev, char *pairs, size_t n)
{
    int bad = 0, named = 0, nvl = any_nvlink(t);
    pairs[0] = '\0';
    for (int i = 0; i < log->nconns; i++) {
        const cps_conn *c = &log->conns[i];
        if (c->kind != CPS_TR_SHM)
            continue;
        int a = topo_index(c->from_dev, dev_to_topo, ndev);
        int b = topo_index(c->to_dev, dev_to_topo, ndev);
        int hit;
        if (a >= 0 && b >= 0)
            hit = a != b && nvlink_between(t, a, b);
        else
            hit = nvl;   /* cannot tell which GPUs: NVLink on the node is reason enough */
        if (!hit)
            continue;
        if (named < 4) {
            if (a >= 0 && b >= 0)
                appendf(pairs, n, "%sGPU %d-%d", named ? ", " : "", a, b);
            else
                appendf(pairs, n, "%sranks %d-%d (devices unmapped)", named ? ", " : "",
                        c->from_rank, c->to_rank);
            named++;
        }
        bad++;
    }
    if (bad > named)
        appendf(pairs, n, " and %d more", bad - named);
    return bad;
}

/* "P2P 56, NET/IB 16 connections; NVLS available" */
static void summary(const cps_nccl_log *log, char *out, size_t n)
{
    out[0] = '\0';
    int total = 0;
    for (int k = 0; k < CPS_TR_NKINDS; k++)
        if (log->count[k]) {
            appendf(out, n, "%s%s %d", out[0] ? ", " : "", cps_transport_name(k), log->count[k]);
            total += log->count[k];
        }
    appendf(out, n, " connection%s", total == 1 ? "" : "s");
    int no_gdr = 0;
    for (int i = 0; i < log->nconns; i++)
        no_gdr += log->conns[i].kind == CPS_TR_NET_IB && !strstr(log->conns[i].via, "GDRDMA");
    if (no_gdr)   /* IB still, but through host memory: slower, not a transport failure */
        appendf(out, n, " (%d NET/IB without GPUDirect RDMA)", no_gdr);
    if (log->nvls >= 0)
        appendf(out, n, "; NVLS %savailable", log->nvls ? "" : "not ");
}

static void set(cps_check *out, int status, double measured, const char *detail)
{
    out->status = status;
    out->measured = measured;
    snprintf(out->detail, sizeof out->detail, "%.*s", DETAIL_MAX, detail);
}

void cps_check_transport(const cps_topology *t, const cps_nccl_log *log, const int *dev_to_topo,
                         int ndev, char *const *env, cps_check *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "transport");
    snprintf(out->unit, sizeof out->unit, "connections");
    out->expected = 0;
    char d[512];

    if (!log || log->lines == 0) {
        set(out, CPS_WARN, NAN,
            "NCCL's INFO log (NCCL_DEBUG_FILE) could not be read: the transport of each "
            "connection is unknown");
        return;
    }
    /* under a launcher the counts are every rank's, conns only this one's */
    int total = 0;
    for (int k = 0; k < CPS_TR_NKINDS; k++)
        total += log->count[k];
    if (total == 0) {
        int one_gpu = ndev == 1 || (ndev <= 0 && t && t->n_gpus == 1);
        if (one_gpu)
            set(out, CPS_PASS, 0, "one GPU: no connections");
        else
            set(out, CPS_WARN, NAN,
                "NCCL logged no connections (NCCL_DEBUG_SUBSYS without INIT?): the transport "
                "of each connection is unknown");
        return;
    }

    char nics[128], cause[256];
    int ib_up = ib_nics_up(t, nics, sizeof nics);
    int sock = log->count[CPS_TR_NET_SOCKET];
    char pairs[160];
    int shm = shm_over_nvlink(t, log, dev_to_topo, ndev, pairs, sizeof pairs);
    int sock_bad = sock > 0 && (ib_up > 0 || log->ib_found > 0) ? sock : 0;
    d[0] = '\0';

    if (sock_bad) {
        socket_cause(log, env, cause, sizeof cause);
        if (ib_up > 0)
            appendf(d, sizeof d, "%d connection%s on NET/Socket while IB is up (%s): %s", sock,
                    sock == 1 ? "" : "s", nics, cause);
        else
            appendf(d, sizeof d,
                    "%d connection%s on NET/Socket while NCCL listed IB devices (%.60s): %s",
                    sock, sock == 1 ? "" : "s", log->ib_devices, cause);
    }
    if (shm > 0) {
        p2p_cause(env, cause, sizeof cause);
        appendf(d, sizeof d, "%s%d SHM connection%s between NVLink GPUs (%s): %s",
                d[0] ? " | " : "", shm, shm == 1 ? "" : "s", pairs, cause);
    }
    if (d[0]) {
        set(out, CPS_FAIL, sock_bad + shm, d);
        return;
    }
    if (sock > 0) {
        snprintf(d, sizeof d,
                 "%d connection%s on NET/Socket, no IB/RoCE NIC up: inter-host traffic on TCP "
                 "sockets, expect several times less bandwidth",
                 sock, sock == 1 ? "" : "s");
        set(out, CPS_WARN, sock, d);
        return;
    }
    summary(log, d, sizeof d);
    if (ib_up > 0 && strcmp(log->network, "Socket") == 0) {
        /* nothing crossed hosts in this run, but a multi-node job would go over TCP */
        socket_cause(log, env, cause, sizeof cause);
        char w[512] = "";
        appendf(w, sizeof w, "NCCL chose network Socket while IB is up (%s): %s; %s", nics,
                 cause, d);
        set(out, CPS_WARN, 0, w);
        return;
    }
    set(out, CPS_PASS, 0, d);
}
