/* selftest/nvml.c: GPU names, NVLinks and common ancestors from NVML, loaded with dlopen so
 * collprof runs (on sysfs alone) where no driver is installed. */
#include "selftest/topology.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/nvml_abi.h" /* the real nvml.h names, values and layouts */

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned *);
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*numa)(nvmlDevice_t, unsigned *);             /* newer drivers only */
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, nvmlEnableState_t *);
    nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned, nvmlPciInfo_t *);
    nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *);
} nvml_api;

/* NVML's "00000000:18:00.0" as sysfs writes it, "0000:18:00.0"; -1 when garbled. */
static int norm_bus_id(const char *in, char *out, size_t n)
{
    unsigned dom, bus, dev, fn;
    if (sscanf(in, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || bus > 0xff || dev > 0x1f || fn > 7)
        return -1;
    snprintf(out, n, "%04x:%02x:%02x.%x", dom & 0xffff, bus, dev, fn);
    return 0;
}

static int gpu_by_pci(const cps_topology *t, const char *pci)
{
    for (int i = 0; i < t->n_gpus; i++)
        if (strcmp(t->gpus[i].pci, pci) == 0)
            return i;
    return -1;
}

static int path_of_level(nvmlGpuTopologyLevel_t l)
{
    if (l <= NVML_TOPOLOGY_SINGLE)
        return CPS_PATH_PIX;
    if (l <= NVML_TOPOLOGY_MULTIPLE)
        return CPS_PATH_PXB;
    if (l <= NVML_TOPOLOGY_NODE)
        return CPS_PATH_PHB;
    return CPS_PATH_SYS;
}

static cps_link *link_of(cps_topology *t, int a, int b)
{
    for (int i = 0; i < t->n_links; i++)
        if (t->links[i].a == a && t->links[i].b == b)
            return &t->links[i];
    cps_link *p = realloc(t->links, (size_t)(t->n_links + 1) * sizeof *p);
    if (!p)
        return NULL;
    t->links = p;
    cps_link *l = &p[t->n_links++];
    memset(l, 0, sizeof *l);
    l->a = a;
    l->b = b;
    l->path = CPS_PATH_SYS;
    l->kind = CPS_LINK_SYS;
    return l;
}

static int cmp_link(const void *x, const void *y)
{
    const cps_link *a = x, *b = y;
    return a->a != b->a ? a->a - b->a : a->b - b->b;
}

static int merge(const nvml_api *api, cps_topology *t)
{
    unsigned n = 0;
    if (api->count(&n) != NVML_SUCCESS || n > 1024)
        return -1;
    nvmlDevice_t *dev = calloc(n ? n : 1, sizeof *dev);
    int *gi = calloc(n ? n : 1, sizeof *gi);
    int *sw = calloc(n ? n : 1, sizeof *sw);       /* NVLinks to something not a GPU */
    int *direct = calloc((size_t)(n ? n : 1) * (n ? n : 1), sizeof *direct);
    int rc = (dev && gi && sw && direct) ? 0 : -1;
    for (unsigned i = 0; i < n && rc == 0; i++) {
        nvmlPciInfo_t pci;
        char bdf[CPS_PCI_BYTES];
        gi[i] = -1;
        if (api->handle(i, &dev[i]) != NVML_SUCCESS || api->pci(dev[i], &pci) != NVML_SUCCESS ||
            norm_bus_id(pci.busId, bdf, sizeof bdf))
            continue;
        int g = gpu_by_pci(t, bdf);
        if (g < 0) { /* NVML sees a GPU sysfs does not (no sysfs under this root) */
            cps_gpu *p = realloc(t->gpus, (size_t)(t->n_gpus + 1) * sizeof *p);
            if (!p) {
                rc = -1;
                break;
            }
            t->gpus = p;
            g = t->n_gpus++;
            memset(&p[g], 0, sizeof p[g]);
            p[g].index = g;
            p[g].numa = -1;
            snprintf(p[g].pci, sizeof p[g].pci, "%s", bdf);
        }
        unsigned node;
        if (t->gpus[g].numa < 0 && api->numa && api->numa(dev[i], &node) == NVML_SUCCESS &&
            node < 4096)
            t->gpus[g].numa = (int)node;
        gi[i] = g;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
        if (api->name(dev[i], name, sizeof name) == NVML_SUCCESS) {
            name[sizeof name - 1] = '\0';
            snprintf(t->gpus[g].name, sizeof t->gpus[g].name, "%s", name);
        }
    }
    for (unsigned i = 0; i < n && rc == 0; i++) {
        if (gi[i] < 0)
            continue;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t on;
            nvmlPciInfo_t pci;
            char bdf[CPS_PCI_BYTES];
            if (api->link_state(dev[i], l, &on) != NVML_SUCCESS || on != NVML_FEATURE_ENABLED ||
                api->link_remote(dev[i], l, &pci) != NVML_SUCCESS ||
                norm_bus_id(pci.busId, bdf, sizeof bdf))
                continue;
            unsigned j;
            for (j = 0; j < n && !(gi[j] >= 0 && strcmp(t->gpus[gi[j]].pci, bdf) == 0); j++)
                ;
            if (j < n)
                direct[i * n + j]++;
            else
                sw[i]++;
        }
    }
    for (unsigned i = 0; i < n && rc == 0; i++) {
        if (gi[i] < 0)
            continue;
        int all = sw[i];
        for (unsigned j = 0; j < n; j++)
            all += direct[i * n + j];
        t->gpus[gi[i]].nvlinks = all;
    }
    for (unsigned i = 0; i < n && rc == 0; i++)
        for (unsigned j = 0; j < n && rc == 0; j++) {
            if (gi[i] < 0 || gi[j] < 0 || gi[i] >= gi[j])
                continue;
            cps_link *l = link_of(t, gi[i], gi[j]);
            if (!l) {
                rc = -1;
                break;
            }
            nvmlGpuTopologyLevel_t lvl;
            if (api->ancestor && api->ancestor(dev[i], dev[j], &lvl) == NVML_SUCCESS) {
                l->path = path_of_level(lvl);
                l->kind = l->path == CPS_PATH_SYS ? CPS_LINK_SYS : CPS_LINK_PCIE;
            }
            /* Through NVSwitches every pair talks over all of the smaller side's links, as
             * nccl counts them. */
            int lanes = direct[i * n + j];
            if (sw[i] && sw[j])
                lanes += sw[i] < sw[j] ? sw[i] : sw[j];
            if (lanes > 0) {
                l->kind = CPS_LINK_NVLINK;
                l->lanes = lanes;
            }
        }
    /* One GPU has no links, and qsort's base must not be NULL even for zero elements. */
    if (rc == 0 && t->n_links > 0)
        qsort(t->links, (size_t)t->n_links, sizeof *t->links, cmp_link);
    free(dev);
    free(gi);
    free(sw);
    free(direct);
    return rc;
}

int cps_topo_add_nvml(cps_topology *t, const char *lib, char *why, size_t why_n)
{
    if (!lib)
        lib = "libnvidia-ml.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, why_n, "no NVML: %s", dlerror());
        return -1;
    }
    nvml_api api;
    *(void **)&api.init = dlsym(h, "nvmlInit_v2");
    *(void **)&api.shutdown = dlsym(h, "nvmlShutdown");
    *(void **)&api.count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&api.handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&api.name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&api.pci = dlsym(h, "nvmlDeviceGetPciInfo_v3");
    *(void **)&api.numa = dlsym(h, "nvmlDeviceGetNumaNodeId");
    *(void **)&api.link_state = dlsym(h, "nvmlDeviceGetNvLinkState");
    *(void **)&api.link_remote = dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    *(void **)&api.ancestor = dlsym(h, "nvmlDeviceGetTopologyCommonAncestor");
    if (!api.init || !api.shutdown || !api.count || !api.handle || !api.name || !api.pci ||
        !api.link_state || !api.link_remote) {
        snprintf(why, why_n, "%s lacks a function collprof needs", lib);
        dlclose(h);
        return -1;
    }
    nvmlReturn_t r = api.init();
    if (r != NVML_SUCCESS) {
        snprintf(why, why_n, "nvmlInit failed (NVML error %d)", (int)r);
        dlclose(h);
        return -1;
    }
    int rc = merge(&api, t);
    if (rc)
        snprintf(why, why_n, "NVML: out of memory or no device count");
    api.shutdown();
    dlclose(h);
    return rc;
}
