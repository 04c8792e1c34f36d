/* kernels: modules, functions and cuLaunchKernel, for collprof-sim's compute.
 *
 * The emulation runs no device code. A module's image is PTX text; its `.entry` names are its
 * functions. A launched kernel is modelled as the one kind collprof-sim launches, a spin on
 * %globaltimer: it keeps its stream busy for the nanoseconds its first parameter (a u64)
 * gives, then ends. Its name goes to the activity hooks as any kernel's (emu_stream.h), so
 * CUPTI reports it under its PTX name.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "emu/cuda/cuda_internal.h"

#define MOD_MAGIC 0x4d4f4455u
#define FN_MAGIC 0x46554e43u
#define MAX_FNS 64

struct CUfunc_st {
    uint32_t magic;
    char name[128];
};

struct CUmod_st {
    uint32_t magic;
    int nfns;
    struct CUfunc_st fns[MAX_FNS];
    struct CUmod_st *next;
};

/* Every module ever loaded: an unloaded one's names may still be queued on a stream or held
 * in CUPTI's records (the real driver keeps its symbol names for the process's life too). */
static struct CUmod_st *g_modules;
static pthread_mutex_t g_modules_mu = PTHREAD_MUTEX_INITIALIZER;

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    CUresult r = cu_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c;
    if ((r = cu_current_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* every `.entry NAME(` of the PTX */
    for (const char *p = image; (p = strstr(p, ".entry")) && m->nfns < MAX_FNS; p += 6) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t n = strcspn(q, " \t\n(");
        if (n == 0 || n >= sizeof m->fns[0].name)
            continue;
        memcpy(m->fns[m->nfns].name, q, n);
        m->fns[m->nfns].magic = FN_MAGIC;
        m->nfns++;
    }
    if (m->nfns == 0) {
        free(m);
        return CUDA_ERROR_INVALID_PTX;
    }
    m->magic = MOD_MAGIC;
    pthread_mutex_lock(&g_modules_mu);
    m->next = g_modules;
    g_modules = m;
    pthread_mutex_unlock(&g_modules_mu);
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    if (!hmod || hmod->magic != MOD_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hmod->magic = 0; /* kept in g_modules: its names outlive it */
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || hmod->magic != MOD_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < hmod->nfns; i++)
        if (!strcmp(hmod->fns[i].name, name)) {
            *hfunc = &hmod->fns[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

static uint64_t spin(void *arg, uint64_t start_ns) { return start_ns + (uint64_t)(uintptr_t)arg; }

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    (void)extra;
    if (!f || f->magic != FN_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
        (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t ns = 0;
    if (kernelParams && kernelParams[0])
        memcpy(&ns, kernelParams[0], sizeof ns);
    return cpemu_stream_enqueue_kernel(hStream, f->name, spin, (void *)(uintptr_t)ns, NULL);
}
