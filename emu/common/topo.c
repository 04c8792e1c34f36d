/* topo: the presets, the process-wide topology, placement of devices on emulated hosts, the
 * links between GPUs and the time model. Environment parsing is in topo_env.c, topology files
 * in topo_file.c. */
#include "emu/common/topo.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "emu/common/emu_log.h"
#include "emu/common/topo_ext.h"

/* What distinguishes one preset from another; the rest is shared by all. */
typedef struct preset_spec {
    const char *preset;
    const char *gpu_name;
    int ngpus, cc_major, cc_minor, sm_count, mem_gib, nvlinks, pair_lanes;
    double link_gbps, link_alpha_us, copy_gbps;
    const char *pci[8];
    int numa[8];
} preset_spec;

static const preset_spec presets[] = {
    /* DGX H100: NVLink4 through four NVSwitches, every pair NV18; bus ids of the real box. */
    {"h100-nvlink-8", "NVIDIA H100 80GB HBM3", 8, 9, 0, 132, 80, 18, 18, 370.0, 1.0, 1500.0,
     {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0",
      "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"},
     {0, 0, 0, 0, 1, 1, 1, 1}},
    /* HGX A100 4-GPU: 12 NVLink3 lanes per GPU wired directly, 4 to each of its 3 peers. */
    {"a100-nvlink-4", "NVIDIA A100-SXM4-40GB", 4, 8, 0, 108, 40, 12, 4, 230.0, 1.2, 700.0,
     {"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0"},
     {0, 0, 1, 1}},
    /* A PCIe server: two GPUs under each CPU socket's PCIe switch, no NVLink. */
    {"pcie-4", "NVIDIA L40S", 4, 8, 9, 142, 48, 0, 0, 25.0, 2.0, 350.0,
     {"0000:01:00.0", "0000:02:00.0", "0000:81:00.0", "0000:82:00.0"},
     {0, 0, 1, 1}},
};

static void fill_uuids(cpemu_topo *t)
{
    for (int d = 0; d < t->ngpus; d++) {
        unsigned char u[16];
        cpemu_gpu_uuid(t, 0, d, u);
        cpemu_uuid_format(u, t->gpus[d].uuid);
    }
}

int cpemu_topo_preset(cpemu_topo *t, const char *name)
{
    const preset_spec *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (name && strcmp(name, presets[i].preset) == 0)
            p = &presets[i];
    if (!p)
        return -1;
    snprintf(t->preset, sizeof t->preset, "%s", p->preset);
    t->ngpus = p->ngpus;
    memset(t->gpus, 0, sizeof t->gpus);
    for (int d = 0; d < p->ngpus; d++) {
        cpemu_gpu *g = &t->gpus[d];
        snprintf(g->name, sizeof g->name, "%s", p->gpu_name);
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", p->pci[d]);
        g->numa_node = p->numa[d];
        g->cc_major = p->cc_major;
        g->cc_minor = p->cc_minor;
        g->sm_count = p->sm_count;
        g->mem_bytes = (uint64_t)p->mem_gib << 30;
        g->nvlinks = p->nvlinks;
    }
    for (int a = 0; a < p->ngpus; a++)
        for (int b = 0; b < p->ngpus; b++) {
            int kind = a == b              ? CPEMU_LINK_SELF
                       : p->nvlinks        ? CPEMU_LINK_NVLINK
                       : a / 2 == b / 2    ? CPEMU_LINK_PCIE
                                           : CPEMU_LINK_SYS;
            t->link_kind[a][b] = kind;
            t->link_lanes[a][b] = kind == CPEMU_LINK_NVLINK ? p->pair_lanes : 0;
            t->link_gbps[a][b] = a == b ? p->copy_gbps : p->link_gbps;
            t->link_alpha_us[a][b] = p->link_alpha_us;
        }
    memset(t->nics, 0, sizeof t->nics);
    if (p->nvlinks == 18) {
        t->nnics = 8;
        t->net_gbps_per_nic = 48.0; /* NDR 400 Gb/s */
        for (int i = 0; i < 8; i++) {
            cpemu_nic *n = &t->nics[i];
            snprintf(n->name, sizeof n->name, "mlx5_%d", i);
            n->kind = CPEMU_NIC_IB;
            n->rate_gbps = 400;
            n->numa_node = i < 4 ? 0 : 1;
            n->up = 1;
            snprintf(n->ip, sizeof n->ip, "10.0.0.%d", i + 1);
        }
    } else if (p->nvlinks == 12) {
        t->nnics = 4;
        t->net_gbps_per_nic = 24.0; /* HDR 200 Gb/s */
        for (int i = 0; i < 4; i++) {
            cpemu_nic *n = &t->nics[i];
            snprintf(n->name, sizeof n->name, "mlx5_%d", i);
            n->kind = CPEMU_NIC_IB;
            n->rate_gbps = 200;
            n->numa_node = i < 2 ? 0 : 1;
            n->up = 1;
            snprintf(n->ip, sizeof n->ip, "10.0.0.%d", i + 1);
        }
    } else {
        t->nnics = 1;
        t->net_gbps_per_nic = 48.0; /* unused: no IB NIC */
        snprintf(t->nics[0].name, sizeof t->nics[0].name, "eth0");
        t->nics[0].kind = CPEMU_NIC_ETH;
        t->nics[0].rate_gbps = 100;
        t->nics[0].numa_node = 0;
        t->nics[0].up = 1;
        snprintf(t->nics[0].ip, sizeof t->nics[0].ip, "10.0.0.1");
    }
    t->socket_gbps = 5.0;
    fill_uuids(t);
    return 0;
}

static void topo_defaults(cpemu_topo *t)
{
    memset(t, 0, sizeof *t);
    cpemu_topo_preset(t, "h100-nvlink-8");
    t->hosts = 1;
    t->net_alpha_us = 5.0;
}

int cpemu_topo_load(cpemu_topo *t, char *err, size_t errlen)
{
    topo_defaults(t);
    if (err && errlen)
        err[0] = '\0';
    int rc = 0;
    const char *v = getenv("COLLPROF_EMU_TOPO");
    if (v && *v && cpemu_topo_preset(t, v) != 0) {
        if (strchr(v, '/') || access(v, F_OK) == 0) {
            char why[512];
            if (cpemu_topo_parse_file(t, v, why, sizeof why) != 0) {
                topo_defaults(t);
                if (err && errlen)
                    snprintf(err, errlen, "%s", why);
                rc = -1;
            } else {
                fill_uuids(t);
            }
        } else {
            cpemu_warn("COLLPROF_EMU_TOPO='%s' is neither a preset (h100-nvlink-8, "
                       "a100-nvlink-4, pcie-4) nor a file; using h100-nvlink-8", v);
        }
    }
    cpemu_topo_read_env(t);
    return rc;
}

static cpemu_topo g_topo;
static pthread_once_t g_topo_once = PTHREAD_ONCE_INIT;

static void topo_load_once(void)
{
    char err[512];
    /* Every emulated library of the process loads its own copy: warn once between them. */
    cpemu_warn_dedupe(1);
    if (cpemu_topo_load(&g_topo, err, sizeof err) != 0)
        cpemu_warn("%s; using h100-nvlink-8", err);
    cpemu_warn_dedupe(0);
}

const cpemu_topo *cpemu_topo_get(void)
{
    pthread_once(&g_topo_once, topo_load_once);
    return &g_topo;
}

int cpemu_process_host(void)
{
    const char *v = getenv("COLLPROF_EMU_HOST_ID");
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    long h = strtol(v, &end, 10);
    if (errno || *end || h < 0 || h >= CPEMU_MAX_HOSTS)
        return -1;
    return (int)h;
}

int cpemu_device_host(const cpemu_topo *t, int dev, int ndevices)
{
    int h = cpemu_process_host();
    if (h >= 0)
        return h;
    if (ndevices <= 0 || dev < 0 || t->hosts <= 1)
        return 0;
    if (dev >= ndevices)
        dev = ndevices - 1;
    return (int)((long)dev * t->hosts / ndevices);
}

void cpemu_real_hostname(char *out, size_t cap)
{
    struct utsname u;
    /* The system call, not uname(3): the emuhost preload overrides the libc function. */
    if (syscall(SYS_uname, &u) != 0)
        snprintf(u.nodename, sizeof u.nodename, "localhost");
    snprintf(out, cap, "%s", u.nodename);
}

void cpemu_host_name(int host, char *out, size_t cap)
{
    char real[sizeof(((struct utsname *)0)->nodename)];
    cpemu_real_hostname(real, sizeof real);
    if (host < 0)
        host = cpemu_process_host();
    /* A process no launcher placed is on the real machine, whose name the preload left as is. */
    if (host < 0)
        snprintf(out, cap, "%s", real);
    else
        snprintf(out, cap, "%s-emu%d", real, host);
}

/* The product of the slow-link factors between global GPUs ga and gb that hold for message
 * msg; msg < 0: the link's own (the faults of every message) only. */
static double slow_factor(const cpemu_topo *t, int ga, int gb, long long msg)
{
    double f = 1.0;
    for (int i = 0; i < t->nslow; i++) {
        const cpemu_fault_link *l = &t->slow[i];
        int pair = (l->a == ga && l->b == gb) || (l->a == gb && l->b == ga);
        if (pair && (msg < 0 ? l->msgs == 0 : l->msgs > 0 && msg < l->msgs))
            f *= l->factor;
    }
    return f;
}

double cpemu_topo_passing(const cpemu_topo *t, int host_a, int dev_a, int host_b, int dev_b,
                          uint64_t msg)
{
    int n = t->ngpus > 0 ? t->ngpus : 1;
    dev_a = ((dev_a % n) + n) % n;
    dev_b = ((dev_b % n) + n) % n;
    if (msg > (uint64_t)LLONG_MAX || (host_a == host_b && dev_a == dev_b))
        return 1.0;
    return slow_factor(t, host_a * t->ngpus + dev_a, host_b * t->ngpus + dev_b,
                       (long long)msg);
}

static double net_gbps(const cpemu_topo *t, double *alpha_us)
{
    int ib = 0;
    for (int i = 0; i < t->nnics; i++)
        if (t->nics[i].up && t->nics[i].kind != CPEMU_NIC_ETH)
            ib++;
    /* Without an IB/RoCE port NCCL falls back to sockets, as with COLLPROF_EMU_NET=socket. */
    if (t->net_socket || ib == 0) {
        *alpha_us = 20.0;
        return t->socket_gbps;
    }
    *alpha_us = t->net_alpha_us;
    return ib * t->net_gbps_per_nic;
}

cpemu_link cpemu_topo_link(const cpemu_topo *t, int host_a, int dev_a, int host_b, int dev_b)
{
    cpemu_link l = {CPEMU_LINK_SYS, 0, 0.0, 0.0};
    int n = t->ngpus > 0 ? t->ngpus : 1;
    dev_a = ((dev_a % n) + n) % n;
    dev_b = ((dev_b % n) + n) % n;
    if (host_a != host_b) {
        l.kind = CPEMU_LINK_NET;
        l.gbps = net_gbps(t, &l.alpha_us);
    } else {
        l.kind = t->link_kind[dev_a][dev_b];
        l.lanes = t->link_lanes[dev_a][dev_b];
        l.gbps = t->link_gbps[dev_a][dev_b];
        l.alpha_us = t->link_alpha_us[dev_a][dev_b];
    }
    if (!(host_a == host_b && dev_a == dev_b))
        l.gbps *= slow_factor(t, host_a * t->ngpus + dev_a, host_b * t->ngpus + dev_b, -1);
    return l;
}

double cpemu_model_ns(const cpemu_topo *t, int op, uint64_t bytes, const cpemu_place *ranks,
                      int n)
{
    double S = (double)bytes;
    if (n <= 1 || !ranks) {
        int h = ranks ? ranks[0].host : 0, d = ranks ? ranks[0].dev : 0;
        cpemu_link self = cpemu_topo_link(t, h, d, h, d);
        return S / self.gbps + self.alpha_us * 1e3;
    }
    /* GB/s is bytes per ns: S / B is already in ns. */
    double B = 0, alpha_ns = 0;
    int hops = op == CPEMU_OP_SEND || op == CPEMU_OP_RECV ? 1 : n;
    for (int i = 0; i < hops; i++) {
        const cpemu_place *a = &ranks[i], *b = &ranks[(i + 1) % n];
        cpemu_link l = cpemu_topo_link(t, a->host, a->dev, b->host, b->dev);
        if (i == 0 || l.gbps < B)
            B = l.gbps;
        if (l.alpha_us * 1e3 > alpha_ns)
            alpha_ns = l.alpha_us * 1e3;
    }
    if (B <= 0)
        B = 1e-9;
    double steps = n - 1;
    switch (op) {
    case CPEMU_OP_ALLREDUCE:
        return S * 2.0 * steps / n / B + 2.0 * steps * alpha_ns;
    case CPEMU_OP_ALLGATHER: case CPEMU_OP_REDUCESCATTER: case CPEMU_OP_ALLTOALL:
    case CPEMU_OP_GATHER: case CPEMU_OP_SCATTER:
        return S * steps / n / B + steps * alpha_ns;
    case CPEMU_OP_BROADCAST: case CPEMU_OP_REDUCE:
        return S / B + steps * alpha_ns;
    case CPEMU_OP_SEND: case CPEMU_OP_RECV:
        return S / B + alpha_ns;
    default:
        return S / B + alpha_ns;
    }
}

double cpemu_fault_delay_ms(const cpemu_topo *t, int rank)
{
    double ms = 0;
    for (int i = 0; i < t->ndelays; i++)
        if (t->delays[i].rank == rank)
            ms += t->delays[i].ms;
    return ms;
}

int cpemu_fault_hangs_at(const cpemu_topo *t, int rank, uint64_t seq)
{
    for (int i = 0; i < t->nhangs; i++)
        if (t->hangs[i].rank == rank && t->hangs[i].seq == seq)
            return 1;
    return 0;
}

double cpemu_clock_offset_ns(const cpemu_topo *t, int host)
{
    for (int i = 0; i < t->nclock; i++)
        if (t->clock[i].host == host)
            return t->clock[i].us * 1e3;
    return 0;
}

int cpemu_visible_devices(const cpemu_topo *t, int map[CPEMU_MAX_GPUS])
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        for (int i = 0; i < t->ngpus; i++)
            map[i] = i;
        return t->ngpus;
    }
    int n = 0;
    const char *p = v;
    while (*p && n < t->ngpus) {
        char *end;
        errno = 0;
        long d = strtol(p, &end, 10);
        if (end == p || errno || d < 0 || d >= t->ngpus)
            break; /* CUDA stops at the first invalid entry */
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= map[i] == (int)d;
        if (dup)
            break;
        map[n++] = (int)d;
        while (*end == ' ')
            end++;
        if (*end != ',')
            break;
        p = end + 1;
    }
    return n;
}

void cpemu_gpu_uuid(const cpemu_topo *t, int host, int dev, unsigned char out[16])
{
    /* FNV-1a over what identifies the GPU, spread to 16 bytes by two seeds. */
    char key[160];
    snprintf(key, sizeof key, "%s|%s|%s|%d|%d", t->preset, t->gpus[dev].name,
             t->gpus[dev].pci_bus_id, host, dev);
    for (int half = 0; half < 2; half++) {
        uint64_t h = half ? 0x84222325cbf29ce4ULL : 0xcbf29ce484222325ULL;
        for (const char *c = key; *c; c++) {
            h ^= (unsigned char)*c;
            h *= 0x100000001b3ULL;
        }
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 32;
        for (int i = 0; i < 8; i++)
            out[half * 8 + i] = (unsigned char)(h >> (8 * i));
    }
}

void cpemu_uuid_format(const unsigned char u[16], char out[48])
{
    snprintf(out, 48,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
}

int cpemu_topo_nvswitch(const cpemu_topo *t)
{
    for (int a = 0; a < t->ngpus; a++) {
        int sum = 0;
        for (int b = 0; b < t->ngpus; b++)
            if (b != a && t->link_kind[a][b] == CPEMU_LINK_NVLINK)
                sum += t->link_lanes[a][b];
        if (t->gpus[a].nvlinks > 0 && sum > t->gpus[a].nvlinks)
            return 1;
    }
    return 0;
}
