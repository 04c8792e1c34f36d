/* transport_log: which transport each ring hop uses, and NCCL's INFO lines saying so
 * (init.cc, graph/rings.cc, transport/{p2p,shm,net}.cc, the IB and Socket plugins).
 *
 * NCCL tries P2P, then SHM, then NET for each hop: P2P between GPUs of one host joined by
 * NVLink or a PCIe switch (not across the CPU interconnect) unless NCCL_P2P_DISABLE=1 -
 * "read" over NVLink, "direct pointer" when both ranks are one process; SHM unless
 * NCCL_SHM_DISABLE=1; otherwise, and always between hosts, the network: IB with GPUDirect
 * RDMA, or sockets when COLLPROF_EMU_NET=socket, NCCL_IB_DISABLE=1 or there is no HCA. The
 * time model follows the same choice (the socket fallback caps inter-host bandwidth).
 *
 * Channel counts are the emulation's: 16 over NVLink4's 18 lanes (the lane count, even and
 * at most 16, below that), 2 over PCIe, SHM or sockets, one per HCA (2 at least) over IB.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu/nccl/nccl_emu.h"

enum hop_kind { HOP_P2P, HOP_SHM, HOP_NET };

typedef struct hop {
    int kind;
    int nvlink;
    int same_pid;
    int channels;
} hop;

static hop hop_between(const ncclComm_t comm, const cpn_netinfo *ni, int a, int b)
{
    const cpn_core *core = comm->core;
    const cpn_rank_info *pa = &core->link.peers[a], *pb = &core->link.peers[b];
    hop h = {HOP_NET, 0, pa->pid == pb->pid, 2};
    int nnet = ni->use_socket ? ni->nsock : ni->nib;
    if (pa->host == pb->host) {
        cpemu_link l = cpemu_topo_link(&core->topo, pa->host, pa->dev, pb->host, pb->dev);
        int p2p_ok = (l.kind == CPEMU_LINK_NVLINK || l.kind == CPEMU_LINK_PCIE ||
                      l.kind == CPEMU_LINK_SELF) && cpn_env_int("NCCL_P2P_DISABLE", 0) != 1;
        if (p2p_ok) {
            h.kind = HOP_P2P;
            h.nvlink = l.kind == CPEMU_LINK_NVLINK;
            if (h.nvlink) {
                int lanes = l.lanes > 16 ? 16 : l.lanes - l.lanes % 2;
                h.channels = lanes < 2 ? 2 : lanes;
            }
            return h;
        }
        if (cpn_env_int("NCCL_SHM_DISABLE", 0) != 1) {
            h.kind = HOP_SHM;
            return h;
        }
    }
    if (!ni->use_socket)
        h.channels = nnet < 2 ? 2 : nnet > 16 ? 16 : nnet;
    return h;
}

void cpn_topo_for_comm(cpn_core *core, int host)
{
    core->topo = *cpemu_topo_get();
    cpn_netinfo ni;
    cpn_netinfo_get(host, &ni);
    /* NCCL_IB_DISABLE (or no HCA) puts the network on sockets: so does the model */
    if (ni.use_socket)
        core->topo.net_socket = 1;
}

static void log_net_once(const ncclComm_t comm, const cpn_netinfo *ni)
{
    /* the plugins initialize once per process, and print once */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int done;
    pthread_mutex_lock(&lock);
    if (!done) {
        done = 1;
        char line[1024] = "";
        /* NCCL_IB_DISABLE: the IB plugin quits silently. Otherwise it looks for HCAs, and
         * under COLLPROF_EMU_NET=socket (a cluster whose IB is unusable) finds none. */
        if (!ni->ib_disabled) {
            int usable = cpemu_topo_get()->net_socket ? 0 : ni->nib;
            for (int i = 0; i < usable; i++)
                snprintf(line + strlen(line), sizeof line - strlen(line), " [%d]%s:1/%s", i,
                         ni->ib_name[i], ni->ib_roce[i] ? "RoCE" : "IB");
            if (usable == 0)
                cpn_info(CPN_INIT | CPN_NET, comm->dev, "NET/IB : No device found.");
            else
                cpn_info(CPN_INIT | CPN_NET, comm->dev, "NET/IB : Using%s ; OOB %s:%s<0>", line,
                         ni->oob_if, ni->oob_ip);
        }
        if (ni->use_socket) {
            line[0] = '\0';
            for (int i = 0; i < ni->nsock; i++)
                snprintf(line + strlen(line), sizeof line - strlen(line), " [%d]%s:%s<0>", i,
                         ni->sock_if[i], ni->sock_ip[i]);
            cpn_info(CPN_INIT | CPN_NET, comm->dev, "NET/Socket : Using%s", line);
        }
    }
    pthread_mutex_unlock(&lock);
}

static void log_hop(const ncclComm_t comm, const cpn_netinfo *ni, int c, int from, int to,
                    const hop *h)
{
    const cpn_core *core = comm->core;
    int me = comm->rank;
    int dfrom = core->link.peers[from].dev, dto = core->link.peers[to].dev;
    int nnet = ni->use_socket ? ni->nsock : ni->nib;
    int dev = nnet > 0 ? c % nnet : 0;
    const char *net = ni->use_socket ? "Socket" : "IB";
    const char *gdr = ni->use_socket ? "" : "/GDRDMA";
    if (h->kind == HOP_NET) {
        /* both ends of a network hop log it: the sender [send], the receiver [receive] */
        if (from == me)
            cpn_info(CPN_INIT | CPN_NET, comm->dev,
                     "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s", c, 0, from,
                     dfrom, to, dto, net, dev, gdr);
        if (to == me)
            cpn_info(CPN_INIT | CPN_NET, comm->dev,
                     "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s", c, 0, from,
                     dfrom, to, dto, net, dev, gdr);
        return;
    }
    if (from != me)
        return;
    if (h->kind == HOP_SHM)
        cpn_info(CPN_INIT | CPN_SHM, comm->dev,
                 "Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct", c, from, dfrom, to, dto);
    else if (h->same_pid)
        cpn_info(CPN_INIT | CPN_P2P, comm->dev,
                 "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/direct pointer%s", c, 0, from, dfrom,
                 to, dto, h->nvlink ? "/read" : "");
    else
        cpn_info(CPN_INIT | CPN_P2P, comm->dev,
                 "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/CUMEM%s", c, 0, from, dfrom, to,
                 dto, h->nvlink ? "/read" : "");
}

void cpn_log_transports(ncclComm_t comm)
{
    const cpn_core *core = comm->core;
    int n = comm->nranks, me = comm->rank;
    cpn_netinfo ni;
    cpn_netinfo_get(core->link.peers[me].host, &ni);
    log_net_once(comm, &ni);
    cpn_info(CPN_INIT, comm->dev, "Using network %s", ni.use_socket ? "Socket" : "IB");

    int nodes = 0, local = 0, local_rank = 0;
    for (int r = 0; r < n; r++) {
        int first = 1;
        for (int q = 0; q < r; q++)
            first &= core->link.peers[q].host != core->link.peers[r].host;
        nodes += first;
        if (core->link.peers[r].host == core->link.peers[me].host) {
            if (r < me)
                local_rank++;
            local++;
        }
    }
    cpn_info(CPN_INIT, comm->dev,
             "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d",
             (void *)comm, me, n, nodes, local, local_rank, 0);
    comm->nnodes = nodes;
    comm->nchannels = 1;
    comm->nvlink_ring = 0;
    if (n < 2)
        return;
    /* the ring runs in rank order; its slowest kind of hop sets the channel count */
    int nch = 16, gdr = !ni.use_socket, nvlink = 1;
    for (int r = 0; r < n; r++) {
        hop h = hop_between(comm, &ni, r, (r + 1) % n);
        if (h.channels < nch)
            nch = h.channels;
        nvlink &= h.kind == HOP_P2P && h.nvlink;
    }
    comm->nchannels = nch;
    comm->nvlink_ring = nvlink;   /* the profiler's tuner model (profiler.c) */
    if (me == 0) {
        char line[128];
        for (int c = 0; c < nch; c++) {
            int w = snprintf(NULL, 0, "%d", n - 1);
            int o = snprintf(line, sizeof line, "Channel %02d/%02d :", c, nch);
            for (int r = 0; r < n && o < (int)sizeof line - 1; r++)
                o += snprintf(line + o, sizeof line - (size_t)o, " %*d", w, r);
            if (o >= (int)sizeof line)
                snprintf(line + sizeof line - 4, 4, "...");
            cpn_info(CPN_INIT, comm->dev, "%s", line);
        }
    }
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    hop hs = hop_between(comm, &ni, me, next), hr = hop_between(comm, &ni, prev, me);
    for (int c = 0; c < nch; c++) {
        log_hop(comm, &ni, c, prev, me, &hr);
        log_hop(comm, &ni, c, me, next, &hs);
    }
    cpn_info(CPN_INIT, comm->dev, "Connected all rings, use ring PXN 0 GDR %d", gdr);
    cpn_info(CPN_INIT, comm->dev,
             "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p "
             "channels per peer",
             nch, nch, 0, nch * 2 > 32 ? 32 : nch * 2, 1);
}
