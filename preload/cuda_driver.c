/* cuda_driver: the job's CUDA driver, found at run time.
 *
 * libcollprof.so has no DT_NEEDED on libcuda: a job without a GPU must load and run. The
 * driver the job already loaded is taken first (RTLD_NOLOAD: the very copy the job's
 * streams belong to); only when there is none is libcuda.so.1 loaded by name, for a job
 * that loads it later through the runtime. Symbols are the exported names of
 * abi/cuda_api_list.h's symbol_name column (cuEventElapsedTime_v2, which a driver older
 * than CUDA 12.8 lacks: then its older twin, CP_CUDA_API_OLDER).
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

cp_cuda cp_cu;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_rc = -1;

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return;
#define CP_CU_RESOLVE(ret, api, sym, params, args) \
    cp_cu.api = (cp_cu_fn_##api)dlsym(h, #sym);
    CP_CUDA_API(CP_CU_RESOLVE)
#undef CP_CU_RESOLVE
#define CP_CU_OLDER(api, older, older_version, version) \
    if (!cp_cu.api)                                      \
        cp_cu.api = (cp_cu_fn_##api)dlsym(h, #older);
    CP_CUDA_API_OLDER(CP_CU_OLDER)
#undef CP_CU_OLDER
    /* What events mode needs; the rest of the list is for other parts. */
    if (cp_cu.cuStreamGetCtx && cp_cu.cuCtxGetCurrent && cp_cu.cuCtxPushCurrent &&
        cp_cu.cuCtxPopCurrent && cp_cu.cuStreamIsCapturing && cp_cu.cuEventCreate &&
        cp_cu.cuEventRecord && cp_cu.cuEventQuery && cp_cu.cuEventElapsedTime &&
        cp_cu.cuStreamCreate)
        g_rc = 0;
    else
        memset(&cp_cu, 0, sizeof cp_cu);
    /* The handle is kept: the driver must outlive every event we made. */
}

int cp_cuda_load(void)
{
    pthread_once(&g_once, load);
    return g_rc;
}
