/* expect: the bandwidth and latency the node's links should give, from the topology alone.
 *
 * Per link kind (one direction; the figures and efficiencies are the ones docs/ARCHITECTURE.md
 * gives, and why):
 *   NVLink  lanes × per-lane rate of the generation (compute capability 6.x: 20 GB/s, 7.x-9.x:
 *           25, 10.x and later: 50) × 0.80. A GPU's usable lanes towards a ring are the sum of
 *           its pair lanes to the ring's other GPUs, capped by its own link count (NVML) or,
 *           unknown, the generation's most (4, 6, 12, 18): through NVSwitches every pair
 *           reports all 18, yet the GPU has only 18 to spend.
 *   PCIe    lanes (16 unknown) × 1.97 GB/s (Gen4; 3.94 Gen5 from compute capability 9.0) × 0.80
 *   SYS     the PCIe figure × 0.60: GPU to GPU across the CPU interconnect goes through host
 *           memory (SHM) or the inter-socket link
 *   network the IB/RoCE NICs that are up, their rates added × 0.90; without one, sockets over
 *           the fastest Ethernet port that is up (10 Gb/s unknown) × 0.50
 * and the latency of one ring step: NVLink 1.5 µs, PCIe 3, SYS 4, IB 6, sockets 25. The
 * latencies only matter when the sweep's largest size is small: they keep a 64 KiB run from
 * being judged against a bandwidth it cannot reach. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "selftest/selftest.h"

#define EFF_NVLINK 0.80
#define EFF_PCIE 0.80
#define EFF_SYS 0.60
#define EFF_IB 0.90
#define EFF_SOCKET 0.50
#define ALPHA_NVLINK 1.5
#define ALPHA_PCIE 3.0
#define ALPHA_SYS 4.0
#define ALPHA_IB 6.0
#define ALPHA_SOCKET 25.0

static double nvlink_lane_gbps(const cps_gpu *g)
{
    if (g->cc_major >= 10)
        return 50.0;
    if (g->cc_major == 6)
        return 20.0;
    return 25.0; /* 7.x, 8.x, 9.x, and unknown */
}

static int nvlink_gen_lanes(const cps_gpu *g)
{
    switch (g->cc_major) {
    case 6: return 4;
    case 7: return 6;
    case 8: return 12;
    default: return 18;
    }
}

static double pcie_gbps(const cps_gpu *a, const cps_gpu *b, int lanes, char *basis, size_t n)
{
    int gen5 = a->cc_major >= 9 && b->cc_major >= 9;
    if (lanes <= 0)
        lanes = 16;
    double raw = lanes * (gen5 ? 3.938 : 1.969);
    if (basis)
        snprintf(basis, n, "PCIe Gen%d x%d %.1f GB/s × %.2f", gen5 ? 5 : 4, lanes, raw, EFF_PCIE);
    return raw * EFF_PCIE;
}

static const cps_link *link_between(const cps_topology *t, int a, int b)
{
    if (a > b) {
        int x = a;
        a = b;
        b = x;
    }
    for (int i = 0; i < t->n_links; i++)
        if (t->links[i].a == a && t->links[i].b == b)
            return &t->links[i];
    return NULL;
}

double cps_expect_pair(const cps_topology *t, int a, int b, cps_expect *e)
{
    memset(e, 0, sizeof *e);
    if (a < 0 || b < 0 || a >= t->n_gpus || b >= t->n_gpus || a == b) {
        e->link_kind = CPS_LINK_SYS;
        snprintf(e->basis, sizeof e->basis, "unknown GPUs");
        return 0;
    }
    const cps_gpu *ga = &t->gpus[a], *gb = &t->gpus[b];
    const cps_link *l = link_between(t, a, b);
    int kind = l ? l->kind : CPS_LINK_SYS;
    e->link_kind = kind;
    if (kind == CPS_LINK_NVLINK && l->lanes > 0) {
        int lanes = l->lanes;
        int cap = ga->nvlinks > 0 ? ga->nvlinks : nvlink_gen_lanes(ga);
        if (lanes > cap)
            lanes = cap;
        double lane = nvlink_lane_gbps(ga);
        e->bus_gbps = lanes * lane * EFF_NVLINK;
        e->alpha_us = ALPHA_NVLINK;
        snprintf(e->basis, sizeof e->basis, "NVLink %d lanes × %.0f GB/s × %.2f", lanes, lane,
                 EFF_NVLINK);
        return e->bus_gbps;
    }
    char pb[96];
    double p = pcie_gbps(ga, gb, l ? l->lanes : 0, pb, sizeof pb);
    if (kind == CPS_LINK_SYS) {
        e->bus_gbps = p * EFF_SYS;
        e->alpha_us = ALPHA_SYS;
        snprintf(e->basis, sizeof e->basis, "%s × %.2f across the CPU interconnect (SYS)", pb,
                 EFF_SYS);
    } else {
        e->bus_gbps = p;
        e->alpha_us = ALPHA_PCIE;
        snprintf(e->basis, sizeof e->basis, "%s (%s)", pb,
                 l ? cps_pci_path_name(l->path) : "PCIe");
    }
    return e->bus_gbps;
}

double cps_expect_net_pair(const cps_topology *t, cps_expect *e)
{
    double best = 0;
    for (int i = 0; i < t->n_nics; i++)
        if (t->nics[i].up && t->nics[i].kind != CPS_NIC_ETH && t->nics[i].rate_gbps > best)
            best = t->nics[i].rate_gbps;
    memset(e, 0, sizeof *e);
    e->link_kind = CPS_EXPECT_NET;
    if (best > 0) {
        e->bus_gbps = best / 8.0 * EFF_IB;
        e->alpha_us = ALPHA_IB;
        snprintf(e->basis, sizeof e->basis, "one IB/RoCE NIC, %.0f Gb/s × %.2f", best, EFF_IB);
        return e->bus_gbps;
    }
    /* no IB: the sockets figure of the whole ring applies to one pair as well */
    cps_run none;
    memset(&none, 0, sizeof none);
    cps_expect_ring(t, &none, NULL, 1, e);
    return e->bus_gbps;
}

static void network(const cps_topology *t, cps_expect *e)
{
    double ib = 0, eth = 0;
    int nib = 0;
    for (int i = 0; i < t->n_nics; i++) {
        const cps_nic *n = &t->nics[i];
        if (!n->up)
            continue;
        if (n->kind == CPS_NIC_ETH) {
            if (n->rate_gbps > eth)
                eth = n->rate_gbps;
        } else {
            ib += n->rate_gbps;
            nib++;
        }
    }
    e->link_kind = CPS_EXPECT_NET;
    if (nib > 0 && ib > 0) {
        e->bus_gbps = ib / 8.0 * EFF_IB;
        e->alpha_us = ALPHA_IB;
        snprintf(e->basis, sizeof e->basis, "network: %d IB/RoCE NIC%s up, %.0f Gb/s × %.2f", nib,
                 nib == 1 ? "" : "s", ib, EFF_IB);
    } else {
        int known = eth > 0;
        if (!known)
            eth = 10;
        e->bus_gbps = eth / 8.0 * EFF_SOCKET;
        e->alpha_us = ALPHA_SOCKET;
        snprintf(e->basis, sizeof e->basis, "network: no IB/RoCE NIC up, sockets over %.0f Gb/s%s "
                 "Ethernet × %.2f", eth, known ? "" : " (assumed)", EFF_SOCKET);
    }
}

/* Usable NVLink lanes of GPU g towards the others of the ring. */
static int ring_lanes(const cps_topology *t, const int *gpus, int n, int g)
{
    int sum = 0;
    for (int j = 0; j < n; j++) {
        if (gpus[j] == g)
            continue;
        const cps_link *l = link_between(t, g, gpus[j]);
        sum += l ? l->lanes : 0;
    }
    const cps_gpu *p = &t->gpus[g];
    int cap = p->nvlinks > 0 ? p->nvlinks : nvlink_gen_lanes(p);
    return sum < cap ? sum : cap;
}

void cps_expect_ring(const cps_topology *t, const cps_run *r, const int *map, int net,
                     cps_expect *e)
{
    memset(e, 0, sizeof *e);
    int gpus[CPS_MAX_GPUS], n = 0;
    for (int i = 0; i < r->nranks && n < CPS_MAX_GPUS; i++) {
        if (!map || map[i] < 0 || map[i] >= t->n_gpus)
            continue;
        int dup = 0;
        for (int k = 0; k < n; k++)
            dup |= gpus[k] == map[i];
        if (!dup)
            gpus[n++] = map[i];
    }
    int all_nvlink = n > 1;
    for (int a = 0; a < n && all_nvlink; a++)
        for (int b = a + 1; b < n && all_nvlink; b++) {
            const cps_link *l = link_between(t, gpus[a], gpus[b]);
            all_nvlink = l && l->kind == CPS_LINK_NVLINK && l->lanes > 0;
        }
    if (all_nvlink) {
        int worst = gpus[0], lanes = ring_lanes(t, gpus, n, gpus[0]);
        for (int k = 1; k < n; k++) {
            int x = ring_lanes(t, gpus, n, gpus[k]);
            if (x < lanes) {
                lanes = x;
                worst = gpus[k];
            }
        }
        double lane = nvlink_lane_gbps(&t->gpus[worst]);
        e->bus_gbps = lanes * lane * EFF_NVLINK;
        e->alpha_us = ALPHA_NVLINK;
        e->link_kind = CPS_LINK_NVLINK;
        snprintf(e->basis, sizeof e->basis, "NVLink between all %d GPUs: %d lanes × %.0f GB/s "
                 "× %.2f", n, lanes, lane, EFF_NVLINK);
    } else if (n > 1) {
        /* No NVLink everywhere: the ring in index order, bounded by its slowest hop. */
        for (int k = 0; k < n; k++) {
            cps_expect hop;
            int a = gpus[k], b = gpus[(k + 1) % n];
            if (n == 2 && k == 1)
                break;
            cps_expect_pair(t, a, b, &hop);
            if (k == 0 || hop.bus_gbps < e->bus_gbps) {
                double alpha = e->alpha_us > hop.alpha_us ? e->alpha_us : hop.alpha_us;
                *e = hop;
                e->alpha_us = alpha;
                char tmp[sizeof e->basis];
                snprintf(tmp, sizeof tmp, "%s", hop.basis);
                snprintf(e->basis, sizeof e->basis, "GPU %d-%d: %.150s", a, b, tmp);
            } else if (hop.alpha_us > e->alpha_us) {
                e->alpha_us = hop.alpha_us;
            }
        }
    }
    if (net) {
        cps_expect nw;
        network(t, &nw);
        if (n <= 1 || nw.bus_gbps < e->bus_gbps) {
            double alpha = e->alpha_us > nw.alpha_us ? e->alpha_us : nw.alpha_us;
            *e = nw;
            e->alpha_us = alpha;
        } else if (nw.alpha_us > e->alpha_us) {
            e->alpha_us = nw.alpha_us;
        }
    }
}

double cps_expect_busbw(const cps_expect *e, int op, uint64_t bytes, int n)
{
    double f = cps_busbw_factor(op, n);
    if (f <= 0 || e->bus_gbps <= 0 || bytes == 0)
        return 0;
    double steps;
    switch (op) {
    case CPS_ALLREDUCE: steps = 2.0 * (n - 1); break;
    case CPS_SENDRECV: steps = 1; break;
    default: steps = n - 1; break;
    }
    double moved = (double)bytes * f;
    /* GB/s is bytes per ns */
    double t_ns = moved / e->bus_gbps + steps * e->alpha_us * 1e3;
    return moved / t_ns;
}
