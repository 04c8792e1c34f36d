/* selftest/topology.c: the sysfs readers of topology.h. Every file is optional and every
 * value is checked, since the same code runs on fixture trees with garbage in them. */
#include "selftest/topology.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CPS_MAX_DEPTH 32

/* Read a small sysfs file into buf, trailing whitespace dropped; -1 when absent/unreadable. */
static int read_small(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t len = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[len] = '\0';
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        buf[--len] = '\0';
    return (int)len;
}

static int join(char *out, size_t n, const char *a, const char *b, const char *c)
{
    int w = snprintf(out, n, "%s/%s%s%s", a, b, c ? "/" : "", c ? c : "");
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

/* A whole decimal integer (sign allowed), or fallback. */
static long parse_long(const char *s, long fallback)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno)
        return fallback;
    while (isspace((unsigned char)*end))
        end++;
    return *end ? fallback : v;
}

static int read_numa(const char *devdir)
{
    char p[PATH_MAX], buf[32];
    if (join(p, sizeof p, devdir, "numa_node", NULL) || read_small(p, buf, sizeof buf) < 0)
        return -1;
    long v = parse_long(buf, -1);
    return (v < 0 || v > 4095) ? -1 : (int)v;
}

static int read_width(const char *devdir)
{
    char p[PATH_MAX], buf[32];
    if (join(p, sizeof p, devdir, "current_link_width", NULL) || read_small(p, buf, sizeof buf) < 0)
        return 0;
    long v = parse_long(buf, 0);
    return (v < 0 || v > 64) ? 0 : (int)v;
}

static int is_bdf(const char *s)
{
    unsigned dom, bus, dev, fn;
    char tail;
    return strlen(s) < CPS_PCI_BYTES &&
           sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

/* The chain from the root complex down to the device, from the resolved sysfs path:
 * .../devices/pci0000:00/0000:00:01.0/0000:01:00.0 -> rc "pci0000:00", bdfs [00:01.0, 01:00.0]. */
typedef struct pci_chain {
    char rc[CPS_PCI_BYTES];
    char bdf[CPS_MAX_DEPTH][CPS_PCI_BYTES];
    int depth;
} pci_chain;

static int pci_chain_read(const char *root, const char *bdf, pci_chain *c)
{
    char p[PATH_MAX];
    memset(c, 0, sizeof *c);
    if (join(p, sizeof p, root, "sys/bus/pci/devices", bdf))
        return -1;
    char *real = realpath(p, NULL);
    if (!real)
        return -1;
    /* The last "pciDDDD:BB" component is the root complex (virtual machines may put other
     * nodes above it). */
    char *rc = NULL;
    for (char *s = strstr(real, "/pci"); s; s = strstr(s + 1, "/pci")) {
        unsigned dom, bus;
        char tail;
        char comp[CPS_PCI_BYTES] = "";
        const char *end = strchr(s + 1, '/');
        size_t len = end ? (size_t)(end - (s + 1)) : strlen(s + 1);
        if (len < sizeof comp) {
            memcpy(comp, s + 1, len);
            comp[len] = '\0';
            if (sscanf(comp, "pci%x:%x%c", &dom, &bus, &tail) == 2)
                rc = s + 1;
        }
    }
    int ok = -1;
    if (rc) {
        char *save = NULL;
        char *tok = strtok_r(rc, "/", &save);
        snprintf(c->rc, sizeof c->rc, "%s", tok);
        ok = 0;
        while ((tok = strtok_r(NULL, "/", &save))) {
            if (!is_bdf(tok) || c->depth == CPS_MAX_DEPTH) {
                ok = -1;
                break;
            }
            snprintf(c->bdf[c->depth++], CPS_PCI_BYTES, "%s", tok);
        }
        /* The resolved path must end at the device asked about. */
        if (ok == 0 && (c->depth == 0 || strcmp(c->bdf[c->depth - 1], bdf) != 0))
            ok = -1;
    }
    free(real);
    return ok;
}

int cps_pci_path(const char *root, const char *bdf_a, int numa_a, const char *bdf_b, int numa_b)
{
    pci_chain a, b;
    if (pci_chain_read(root, bdf_a, &a) || pci_chain_read(root, bdf_b, &b))
        return CPS_PATH_SYS;
    if (strcmp(a.rc, b.rc) != 0)
        return (numa_a >= 0 && numa_a == numa_b) ? CPS_PATH_PHB : CPS_PATH_SYS;
    /* Common bridges, not counting the devices themselves. */
    int common = 0;
    while (common < a.depth - 1 && common < b.depth - 1 &&
           strcmp(a.bdf[common], b.bdf[common]) == 0)
        common++;
    if (common == 0)
        return CPS_PATH_PHB;
    int below_a = a.depth - common, below_b = b.depth - common;
    return (below_a <= 2 && below_b <= 2) ? CPS_PATH_PIX : CPS_PATH_PXB;
}

static int is_nvidia_gpu(const char *devdir)
{
    char p[PATH_MAX], vendor[32], cls[32];
    if (join(p, sizeof p, devdir, "vendor", NULL) || read_small(p, vendor, sizeof vendor) < 0)
        return 0;
    if (strcasecmp(vendor, "0x10de") != 0)
        return 0;
    if (join(p, sizeof p, devdir, "class", NULL) || read_small(p, cls, sizeof cls) < 0)
        return 0;
    char *end;
    errno = 0;
    unsigned long c = strtoul(cls, &end, 16);
    if (end == cls || *end || errno || strncasecmp(cls, "0x", 2) != 0)
        return 0;
    unsigned long sub = c >> 8;
    return sub == 0x0302 || sub == 0x0300;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_dot(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Grow an array of n elements of size sz by one; NULL when memory ran out. */
static void *grow(void **arr, int *n, size_t sz)
{
    void *p = realloc(*arr, (size_t)(*n + 1) * sz);
    if (!p)
        return NULL;
    *arr = p;
    char *e = (char *)p + (size_t)(*n) * sz;
    memset(e, 0, sz);
    (*n)++;
    return e;
}

static int read_gpus(const char *root, cps_topology *t)
{
    char dir[PATH_MAX];
    if (join(dir, sizeof dir, root, "sys/bus/pci/devices", NULL))
        return 0;
    struct dirent **ents;
    int n = scandir(dir, &ents, not_dot, by_name);
    if (n < 0)
        return 0;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char devdir[PATH_MAX];
        const char *bdf = ents[i]->d_name;
        if (rc == 0 && is_bdf(bdf) && join(devdir, sizeof devdir, dir, bdf, NULL) == 0 &&
            is_nvidia_gpu(devdir)) {
            cps_gpu *g = grow((void **)&t->gpus, &t->n_gpus, sizeof *g);
            if (!g) {
                rc = -1;
            } else {
                g->index = t->n_gpus - 1;
                snprintf(g->pci, sizeof g->pci, "%.31s", bdf);
                g->numa = read_numa(devdir);
                g->lanes = read_width(devdir);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

/* The PCI function a class device (infiniband/<dev>, net/<if>) sits on, from its device link. */
static void device_pci(const char *classdir, char *pci, size_t n, int *numa)
{
    char p[PATH_MAX];
    pci[0] = '\0';
    *numa = -1;
    if (join(p, sizeof p, classdir, "device", NULL))
        return;
    char *real = realpath(p, NULL);
    if (!real)
        return;
    /* A virtio NIC's device is virtioN, a child of its PCI function: look one level up. */
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(real, '/');
        const char *base = slash ? slash + 1 : real;
        if (is_bdf(base)) {
            snprintf(pci, n, "%s", base);
            *numa = read_numa(real);
            break;
        }
        if (!slash || slash == real)
            break;
        *slash = '\0';
    }
    free(real);
}

static double parse_ib_rate(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0.0) || v > 1e6)
        return 0.0;
    while (*end == ' ')
        end++;
    return strncmp(end, "Gb/sec", 6) == 0 ? v : 0.0;
}

static int parse_ib_state(const char *s)
{
    /* "4: ACTIVE"; 4 is IB_PORT_ACTIVE. */
    char *end;
    long v = strtol(s, &end, 10);
    return end != s && *end == ':' && v == 4;
}

/* A port directory's number (IB ports are 1..254), or 0 for anything else. */
static int port_number(const char *name)
{
    long v = parse_long(name, 0);
    return (v > 0 && v < 255) ? (int)v : 0;
}

static int read_ib(const char *root, cps_topology *t)
{
    char dir[PATH_MAX];
    if (join(dir, sizeof dir, root, "sys/class/infiniband", NULL))
        return 0;
    struct dirent **devs;
    int nd = scandir(dir, &devs, not_dot, by_name);
    if (nd < 0)
        return 0;
    int rc = 0;
    for (int i = 0; i < nd; i++) {
        char devdir[PATH_MAX], portsdir[PATH_MAX], pci[CPS_PCI_BYTES];
        int numa;
        struct dirent **ports = NULL;
        int np = -1;
        if (rc == 0 && join(devdir, sizeof devdir, dir, devs[i]->d_name, NULL) == 0 &&
            join(portsdir, sizeof portsdir, devdir, "ports", NULL) == 0) {
            device_pci(devdir, pci, sizeof pci, &numa);
            np = scandir(portsdir, &ports, not_dot, by_name);
        }
        int n_valid = 0;
        for (int j = 0; j < np; j++)
            n_valid += port_number(ports[j]->d_name) > 0;
        for (int j = 0; j < np; j++) {
            int port = port_number(ports[j]->d_name);
            char pdir[PATH_MAX], p[PATH_MAX], buf[128];
            if (rc == 0 && port > 0 && join(pdir, sizeof pdir, portsdir, ports[j]->d_name, NULL) == 0) {
                cps_nic *nic = grow((void **)&t->nics, &t->n_nics, sizeof *nic);
                if (!nic) {
                    rc = -1;
                } else {
                    if (n_valid > 1)
                        snprintf(nic->name, sizeof nic->name, "%.80s:%d", devs[i]->d_name, port);
                    else
                        snprintf(nic->name, sizeof nic->name, "%.80s", devs[i]->d_name);
                    nic->kind = CPS_NIC_IB;
                    /* Only RoCE ports say Ethernet; an absent file is an old IB-only kernel. */
                    if (join(p, sizeof p, pdir, "link_layer", NULL) == 0 &&
                        read_small(p, buf, sizeof buf) >= 0 && strcmp(buf, "Ethernet") == 0)
                        nic->kind = CPS_NIC_ROCE;
                    if (join(p, sizeof p, pdir, "rate", NULL) == 0 && read_small(p, buf, sizeof buf) >= 0)
                        nic->rate_gbps = parse_ib_rate(buf);
                    if (join(p, sizeof p, pdir, "state", NULL) == 0 && read_small(p, buf, sizeof buf) >= 0)
                        nic->up = parse_ib_state(buf);
                    nic->numa = numa;
                    snprintf(nic->pci, sizeof nic->pci, "%s", pci);
                }
            }
            free(ports[j]);
        }
        free(ports);
        free(devs[i]);
    }
    free(devs);
    return rc;
}

static int read_net(const char *root, cps_topology *t, int n_rdma)
{
    char dir[PATH_MAX];
    if (join(dir, sizeof dir, root, "sys/class/net", NULL))
        return 0;
    struct dirent **ifs;
    int n = scandir(dir, &ifs, not_dot, by_name);
    if (n < 0)
        return 0;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char ifdir[PATH_MAX], p[PATH_MAX], buf[64], pci[CPS_PCI_BYTES];
        int numa;
        if (rc == 0 && join(ifdir, sizeof ifdir, dir, ifs[i]->d_name, NULL) == 0) {
            device_pci(ifdir, pci, sizeof pci, &numa);
            int skip = pci[0] == '\0';
            for (int k = 0; k < n_rdma && !skip; k++)
                skip = strcmp(t->nics[k].pci, pci) == 0;
            cps_nic *nic = skip ? NULL : grow((void **)&t->nics, &t->n_nics, sizeof *nic);
            if (!skip && !nic) {
                rc = -1;
            } else if (nic) {
                snprintf(nic->name, sizeof nic->name, "%.90s", ifs[i]->d_name);
                nic->kind = CPS_NIC_ETH;
                nic->numa = numa;
                snprintf(nic->pci, sizeof nic->pci, "%s", pci);
                /* speed is Mb/s, and -1 (or unreadable) when there is no link. */
                if (join(p, sizeof p, ifdir, "speed", NULL) == 0 && read_small(p, buf, sizeof buf) >= 0) {
                    long mbps = parse_long(buf, 0);
                    nic->rate_gbps = (mbps > 0 && mbps < 100000000) ? (double)mbps / 1000.0 : 0.0;
                }
                if (join(p, sizeof p, ifdir, "operstate", NULL) == 0 && read_small(p, buf, sizeof buf) >= 0)
                    nic->up = strcmp(buf, "up") == 0;
            }
        }
        free(ifs[i]);
    }
    free(ifs);
    return rc;
}

static int pair_links(const char *root, cps_topology *t)
{
    for (int a = 0; a < t->n_gpus; a++)
        for (int b = a + 1; b < t->n_gpus; b++) {
            cps_link *l = grow((void **)&t->links, &t->n_links, sizeof *l);
            if (!l)
                return -1;
            const cps_gpu *ga = &t->gpus[a], *gb = &t->gpus[b];
            l->a = a;
            l->b = b;
            l->path = cps_pci_path(root, ga->pci, ga->numa, gb->pci, gb->numa);
            l->kind = l->path == CPS_PATH_SYS ? CPS_LINK_SYS : CPS_LINK_PCIE;
            l->lanes = (ga->lanes && gb->lanes) ? (ga->lanes < gb->lanes ? ga->lanes : gb->lanes) : 0;
        }
    return 0;
}

int cps_topo_read_sysfs(const char *root, cps_topology *t)
{
    memset(t, 0, sizeof *t);
    if (!root || !*root)
        root = "/";
    int rc = read_gpus(root, t);
    if (rc == 0)
        rc = read_ib(root, t);
    if (rc == 0)
        rc = read_net(root, t, t->n_nics);
    if (rc == 0)
        rc = pair_links(root, t);
    if (rc) {
        cps_topo_free(t);
        return -1;
    }
    return 0;
}

void cps_topo_free(cps_topology *t)
{
    free(t->gpus);
    free(t->nics);
    free(t->links);
    memset(t, 0, sizeof *t);
}

const char *cps_nic_kind_name(int kind)
{
    return kind == CPS_NIC_ROCE ? "ROCE" : kind == CPS_NIC_ETH ? "ETH" : "IB";
}

const char *cps_link_kind_name(int kind)
{
    return kind == CPS_LINK_NVLINK ? "NVLINK" : kind == CPS_LINK_PCIE ? "PCIE" : "SYS";
}

const char *cps_pci_path_name(int path)
{
    static const char *const names[] = {"PIX", "PXB", "PHB", "SYS"};
    return (path >= 0 && path <= CPS_PATH_SYS) ? names[path] : "SYS";
}

int cps_topo_add_cuda(cps_topology *t, const char (*names)[CPS_NAME_BYTES],
                      const char (*pcis)[CPS_PCI_BYTES], const int *cc_major, const int *cc_minor,
                      int n, int *map)
{
    for (int i = 0; i < n; i++) {
        int g = -1;
        for (int k = 0; k < t->n_gpus && g < 0; k++)
            if (strcasecmp(t->gpus[k].pci, pcis[i]) == 0)
                g = k;
        if (g < 0) {
            /* Neither sysfs nor NVML showed it (a container without /sys/bus/pci, no NVML):
             * the driver's word is enough for a GPU, not for its links. */
            int old = t->n_gpus;
            cps_gpu *p = grow((void **)&t->gpus, &t->n_gpus, sizeof *p);
            if (!p)
                return -1;
            p->index = old;
            p->numa = -1;
            snprintf(p->pci, sizeof p->pci, "%s", pcis[i]);
            for (int k = 0; k < old; k++) {
                cps_link *l = grow((void **)&t->links, &t->n_links, sizeof *l);
                if (!l)
                    return -1;
                l->a = k;
                l->b = old;
                l->kind = CPS_LINK_SYS;
                l->path = CPS_PATH_SYS;
            }
            g = old;
        }
        cps_gpu *p = &t->gpus[g];
        if (!p->name[0])
            snprintf(p->name, sizeof p->name, "%s", names[i]);
        p->cc_major = cc_major[i];
        p->cc_minor = cc_minor[i];
        map[i] = g;
    }
    return 0;
}
