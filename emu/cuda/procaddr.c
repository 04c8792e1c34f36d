/* procaddr: cuGetProcAddress, the way the shim and cudart find driver functions.
 *
 * Looked up by API name (what C code writes: "cuMemAlloc", never "cuMemAlloc_v2"), the
 * version returned is the newest this library has at or below cudaVersion, as the driver's
 * does: a caller built against CUDA 12.0 asking for cuEventElapsedTime gets the pre-12.8
 * symbol. A name we do not implement: CUDA_ERROR_NOT_FOUND and
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; one whose every version is newer than cudaVersion:
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT. The per-thread-default-stream flag returns the
 * same functions (the emulation has no _ptsz twins; collprof passes explicit streams). */
#include <string.h>

#include "emu/cuda/cuda_internal.h"

CPEMU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                     int numParams, unsigned int flags, CUdevice dev);

/* CUDA 11.4 .. 12.4's form: an exec-affinity array, which has no meaning without a GPU. */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    if (paramsArray && numParams > 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

typedef struct proc_entry {
    const char *api;
    void *fn;
} proc_entry;

static const proc_entry newest[] = {
#define CPEMU_ROW(ret, api, sym, params, args) {#api, (void *)sym},
    CP_CUDA_API(CPEMU_ROW)
#undef CPEMU_ROW
};

/* Each API's versions, newest first, with the CUDA version that introduced each; an API
 * missing here has had one version since before CUDA 4. */
typedef struct proc_version {
    const char *api;
    int since;
    void *fn;
} proc_version;

static const proc_version versions[] = {
    {"cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2},
    {"cuGetProcAddress", 11030, (void *)cuGetProcAddress},
    {"cuEventElapsedTime", 12080, (void *)cuEventElapsedTime_v2},
    {"cuEventElapsedTime", 2000, (void *)cuEventElapsedTime},
    {"cuCtxCreate", 12050, (void *)cuCtxCreate_v4},
    {"cuCtxCreate", 11040, (void *)cuCtxCreate_v3},
    {"cuCtxCreate", 3020, (void *)cuCtxCreate_v2},
    {"cuDeviceGetUuid", 11040, (void *)cuDeviceGetUuid_v2},
    {"cuDeviceGetUuid", 9020, (void *)cuDeviceGetUuid},
    {"cuDevicePrimaryCtxRelease", 11000, (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuDevicePrimaryCtxRelease", 7000, (void *)cuDevicePrimaryCtxRelease},
    {"cuStreamBeginCapture", 10010, (void *)cuStreamBeginCapture_v2},
    {"cuStreamBeginCapture", 10000, (void *)cuStreamBeginCapture},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain},
    {"cuLaunchKernel", 4000, (void *)cuLaunchKernel},
    {"cuGetErrorString", 6000, (void *)cuGetErrorString},
    {"cuGetErrorName", 6000, (void *)cuGetErrorName},
    {"cuStreamIsCapturing", 10000, (void *)cuStreamIsCapturing},
    {"cuStreamEndCapture", 10000, (void *)cuStreamEndCapture},
    {"cuStreamGetCtx", 9020, (void *)cuStreamGetCtx},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    /* Usable before cuInit: cudart resolves cuInit itself this way. */
    if (!symbol || !pfn || cudaVersion <= 0 ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        if (strcmp(versions[i].api, symbol) != 0)
            continue;
        known = 1;
        if (cudaVersion >= versions[i].since) {
            *pfn = versions[i].fn;
            break;
        }
    }
    if (!known)
        for (size_t i = 0; i < sizeof newest / sizeof newest[0]; i++)
            if (strcmp(newest[i].api, symbol) == 0)
                *pfn = newest[i].fn;
    if (symbolStatus)
        *symbolStatus = *pfn    ? CU_GET_PROC_ADDRESS_SUCCESS
                        : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
