/* cuda_nccl: the CUDA driver and NCCL, loaded at run time into one table.
 *
 * The driver is opened first: NCCL dlopens libcuda.so.1 itself, and a library already loaded
 * under that soname is what it then gets, so both of us talk to the same driver (contexts and
 * streams of one driver mean nothing to another). collprof builds and starts without either;
 * a missing one is a reason to print (exit 3), not a failure to start. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "selftest/sweep_internal.h"

static struct cps_lib lib;
static int loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void cps_one_line(char *s)
{
    for (; s && *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t')
            *s = ' ';
}

static void where_loaded(void *h, char *out, size_t outn)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
        snprintf(out, outn, "%s", lm->l_name);
}

static int load_cuda(char *why, size_t whyn)
{
    if (!lib.cuda) {
        lib.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib.cuda) {
            const char *e = dlerror();
            snprintf(why, whyn, "no CUDA driver: libcuda.so.1 not found (%s)", e ? e : "?");
            return -1;
        }
        where_loaded(lib.cuda, lib.cuda_path, sizeof lib.cuda_path);
    }
#define RESOLVE(ret, api, sym, params, args) lib.api = (ret (*) params)dlsym(lib.cuda, #sym);
    CP_CUDA_API(RESOLVE)
#undef RESOLVE
    /* Drivers before CUDA 12.8 export only the older name, with the same signature. */
#define OLDER(api, older, older_version, version) \
    if (!lib.api)                                 \
        lib.api = (__typeof__(lib.api))dlsym(lib.cuda, #older);
    CP_CUDA_API_OLDER(OLDER)
#undef OLDER
    const struct { const char *name; int present; } need[] = {
#define N(api) { #api, lib.api != NULL }
        N(cuInit), N(cuDriverGetVersion), N(cuGetErrorName), N(cuGetErrorString),
        N(cuDeviceGetCount), N(cuDeviceGet), N(cuDeviceGetName), N(cuDeviceGetPCIBusId),
        N(cuDeviceGetAttribute), N(cuDevicePrimaryCtxRetain), N(cuDevicePrimaryCtxRelease),
        N(cuCtxSetCurrent), N(cuCtxSynchronize), N(cuStreamCreate), N(cuStreamDestroy),
        N(cuEventCreate), N(cuEventRecord), N(cuEventQuery), N(cuEventElapsedTime),
        N(cuEventDestroy), N(cuMemAlloc), N(cuMemFree), N(cuMemcpyHtoD), N(cuMemcpyDtoH),
        N(cuMemsetD8),
#undef N
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!need[i].present) {
            snprintf(why, whyn, "the CUDA driver '%s' lacks %s", lib.cuda_path, need[i].name);
            return -1;
        }
    return 0;
}

static int load_nccl(char *why, size_t whyn)
{
    if (!lib.nccl) {
        lib.nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!lib.nccl) {
            const char *e = dlerror();
            snprintf(why, whyn, "no NCCL: libnccl.so.2 not found (%s)", e ? e : "?");
            return -1;
        }
        where_loaded(lib.nccl, lib.nccl_path, sizeof lib.nccl_path);
    }
#define RESOLVE(ret, name, params, args) lib.name = (ret (*) params)dlsym(lib.nccl, #name);
    CP_NCCL_API(RESOLVE)
#undef RESOLVE
    /* ncclAlltoAll (2.28) and ncclGetLastError (2.13) are optional: older NCCL has neither,
     * and the sweep does without them. */
    const struct { const char *name; int present; } need[] = {
#define N(api) { #api, lib.api != NULL }
        N(ncclGetVersion), N(ncclGetErrorString), N(ncclGetUniqueId), N(ncclCommInitAll),
        N(ncclCommInitRank), N(ncclCommDestroy), N(ncclCommAbort), N(ncclCommGetAsyncError),
        N(ncclGroupStart), N(ncclGroupEnd), N(ncclAllReduce), N(ncclAllGather),
        N(ncclReduceScatter), N(ncclBroadcast), N(ncclReduce), N(ncclSend), N(ncclRecv),
#undef N
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!need[i].present) {
            snprintf(why, whyn, "the NCCL library '%s' lacks %s", lib.nccl_path, need[i].name);
            return -1;
        }
    return 0;
}

const struct cps_lib *cps_lib_load(char *why, size_t whyn)
{
    pthread_mutex_lock(&lock);
    int ok = loaded || (load_cuda(why, whyn) == 0 && load_nccl(why, whyn) == 0);
    if (ok)
        loaded = 1;
    pthread_mutex_unlock(&lock);
    if (!ok)
        cps_one_line(why);
    return ok ? &lib : NULL;
}

void cps_cu_error(const struct cps_lib *L, CUresult rc, char *out, size_t outn)
{
    const char *name = NULL, *text = NULL;
    if (L->cuGetErrorName(rc, &name) != CUDA_SUCCESS)
        name = NULL;
    if (L->cuGetErrorString(rc, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name || !text)
        cp_cu_result_fallback(rc, &name, &text);
    if (name)
        snprintf(out, outn, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(out, outn, "CUresult %d (%s)", (int)rc, text ? text : "no description");
    cps_one_line(out);
}

int cps_cu_fail(const struct cps_lib *L, CUresult rc, const char *what, char *why, size_t whyn)
{
    char e[256];
    cps_cu_error(L, rc, e, sizeof e);
    snprintf(why, whyn, "%s failed: %s", what, e);
    cps_one_line(why);
    return -1;
}

void cps_nccl_error(const struct cps_lib *L, ncclResult_t rc, ncclComm_t comm, char *out,
                    size_t outn)
{
    const char *text = L->ncclGetErrorString(rc);
    const char *last = L->ncclGetLastError ? L->ncclGetLastError(comm) : NULL;
    if (last && *last)
        snprintf(out, outn, "%s; NCCL says: %s", text ? text : "?", last);
    else
        snprintf(out, outn, "%s", text ? text : "?");
    cps_one_line(out);
}

/* ---- a GPU as the run lists it ---- */

#define CU(call, what) CPS_CU(call, what)

static void pci_normalize(const char *in, char *out, size_t outn)
{
    unsigned dom, bus, dev, fn;
    if (sscanf(in, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
        snprintf(out, outn, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
        return;
    }
    snprintf(out, outn, "%s", in);
    for (char *c = out; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
}

int cps_gpu_identity(const struct cps_lib *L, int ordinal, const char *host, cps_cuda_gpu *g,
                     char *why, size_t whyn)
{
    CUdevice dev;
    char bus[64] = "";
    CU(L->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    CU(L->cuDeviceGetName(g->name, (int)sizeof g->name, dev), "cuDeviceGetName");
    CU(L->cuDeviceGetPCIBusId(bus, (int)sizeof bus, dev), "cuDeviceGetPCIBusId");
    CU(L->cuDeviceGetAttribute(&g->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
       "cuDeviceGetAttribute");
    CU(L->cuDeviceGetAttribute(&g->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
       "cuDeviceGetAttribute");
    pci_normalize(bus, g->pci, sizeof g->pci);
    g->rank = ordinal;
    g->cuda_index = ordinal;
    snprintf(g->host, sizeof g->host, "%s", host);
    return 0;
}
