/* cuda_api_list: the CUDA driver entry points collprof (shim, selftest) and the emulation use.
 *
 *     #define CP_CUDA_API(X)  X(ret, api_name, symbol_name, params, args) ...
 *
 * api_name is what C code writes (cuMemAlloc); symbol_name is what libcuda.so.1 exports and
 * what dlsym must ask for (cuMemAlloc_v2). cuda.h bridges the two with #defines, so a
 * program compiled against CUDA 13 calls symbol_name; the emulation exports symbol_name with
 * these params, and the shim resolves symbol_name.
 *
 * Every row is what CUDA 13.0's cuda.h declares (test_abi_cuda_real checks each signature,
 * that cuda.h maps api_name to exactly symbol_name, and that the stub library exports it).
 * Versions new enough to matter on deployed drivers (a driver exports the symbols of its
 * own CUDA version and older):
 *   cuEventElapsedTime_v2     CUDA 12.8 (driver 570); older drivers: cuEventElapsedTime,
 *                             same signature (CP_CUDA_API_OLDER below)
 *   cuCtxCreate_v4            CUDA 12.5; takes a CUctxCreateParams*. Older: cuCtxCreate_v2
 *                             (CUcontext *, unsigned int flags, CUdevice), _v3 (11.4) with an
 *                             exec-affinity array instead
 *   cuGetProcAddress_v2       CUDA 12.0; adds the CUdriverProcAddressQueryResult* out
 *                             argument. Older: cuGetProcAddress without it
 *   cuDeviceGetUuid_v2        CUDA 11.4 (a MIG instance's own UUID; v1 gives the GPU's)
 *   cuDevicePrimaryCtxRelease_v2, cuStreamBeginCapture_v2 (adds the mode): 11.0 / 10.1
 *   the memory _v2 names (64-bit sizes): CUDA 3.2; cuCtxPushCurrent/PopCurrent_v2,
 *   cuStreamDestroy_v2, cuEventDestroy_v2: 4.0
 * Left as they were: cuStreamGetCtx is NOT mapped to cuStreamGetCtx_v2 (12.5, a different
 * API that also returns a green context); CUDA 13.0 adds cuCtxGetDevice_v2 and
 * cuCtxSynchronize_v2 (explicit context) without mapping the plain names to them.
 * Not listed: cuStreamGetCaptureInfo, which CUDA 13 maps to cuStreamGetCaptureInfo_v3
 * (12.3; graph edge data out-arguments) - cuStreamIsCapturing is all collprof needs.
 *
 * Under CUDA_API_PER_THREAD_DEFAULT_STREAM cuda.h maps stream functions to _ptsz/_ptds
 * twins; collprof does not compile that way and always passes explicit streams.
 *
 * Only type names appear here, no include, so the list expands after abi/cuda_abi.h or
 * after the real cuda.h alike. After the real cuda.h, api_name is itself a macro: X sees
 * cuMemAlloc only where it uses the parameter with # or ##; anywhere else, or through a
 * helper macro, it gets cuMemAlloc_v2.
 */
#ifndef COLLPROF_CUDA_API_LIST_H
#define COLLPROF_CUDA_API_LIST_H

#define CP_CUDA_API(X) \
    /* initialisation, errors */ \
    X(CUresult, cuInit, cuInit, (unsigned int flags), (flags)) \
    X(CUresult, cuDriverGetVersion, cuDriverGetVersion, (int *driverVersion), (driverVersion)) \
    X(CUresult, cuGetErrorString, cuGetErrorString, (CUresult error, const char **pStr), \
      (error, pStr)) \
    X(CUresult, cuGetErrorName, cuGetErrorName, (CUresult error, const char **pStr), \
      (error, pStr)) \
    X(CUresult, cuGetProcAddress, cuGetProcAddress_v2, \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, \
       CUdriverProcAddressQueryResult *symbolStatus), \
      (symbol, pfn, cudaVersion, flags, symbolStatus)) \
    /* devices */ \
    X(CUresult, cuDeviceGet, cuDeviceGet, (CUdevice *device, int ordinal), (device, ordinal)) \
    X(CUresult, cuDeviceGetCount, cuDeviceGetCount, (int *count), (count)) \
    X(CUresult, cuDeviceGetName, cuDeviceGetName, (char *name, int len, CUdevice dev), \
      (name, len, dev)) \
    X(CUresult, cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, \
      (char *pciBusId, int len, CUdevice dev), (pciBusId, len, dev)) \
    X(CUresult, cuDeviceGetAttribute, cuDeviceGetAttribute, \
      (int *pi, CUdevice_attribute attrib, CUdevice dev), (pi, attrib, dev)) \
    X(CUresult, cuDeviceTotalMem, cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev), \
      (bytes, dev)) \
    X(CUresult, cuDeviceGetUuid, cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev), \
      (uuid, dev)) \
    /* contexts */ \
    X(CUresult, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, \
      (CUcontext *pctx, CUdevice dev), (pctx, dev)) \
    X(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev), \
      (dev)) \
    X(CUresult, cuCtxCreate, cuCtxCreate_v4, \
      (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev), \
      (pctx, ctxCreateParams, flags, dev)) \
    X(CUresult, cuCtxDestroy, cuCtxDestroy_v2, (CUcontext ctx), (ctx)) \
    X(CUresult, cuCtxGetCurrent, cuCtxGetCurrent, (CUcontext *pctx), (pctx)) \
    X(CUresult, cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx), (ctx)) \
    X(CUresult, cuCtxPushCurrent, cuCtxPushCurrent_v2, (CUcontext ctx), (ctx)) \
    X(CUresult, cuCtxPopCurrent, cuCtxPopCurrent_v2, (CUcontext *pctx), (pctx)) \
    X(CUresult, cuCtxGetDevice, cuCtxGetDevice, (CUdevice *device), (device)) \
    X(CUresult, cuCtxSynchronize, cuCtxSynchronize, (void), ()) \
    /* streams */ \
    X(CUresult, cuStreamCreate, cuStreamCreate, (CUstream *phStream, unsigned int Flags), \
      (phStream, Flags)) \
    X(CUresult, cuStreamDestroy, cuStreamDestroy_v2, (CUstream hStream), (hStream)) \
    X(CUresult, cuStreamSynchronize, cuStreamSynchronize, (CUstream hStream), (hStream)) \
    X(CUresult, cuStreamQuery, cuStreamQuery, (CUstream hStream), (hStream)) \
    X(CUresult, cuStreamGetCtx, cuStreamGetCtx, (CUstream hStream, CUcontext *pctx), \
      (hStream, pctx)) \
    X(CUresult, cuStreamIsCapturing, cuStreamIsCapturing, \
      (CUstream hStream, CUstreamCaptureStatus *captureStatus), (hStream, captureStatus)) \
    X(CUresult, cuStreamBeginCapture, cuStreamBeginCapture_v2, \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode)) \
    X(CUresult, cuStreamEndCapture, cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph), \
      (hStream, phGraph)) \
    X(CUresult, cuStreamWaitEvent, cuStreamWaitEvent, \
      (CUstream hStream, CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags)) \
    /* events */ \
    X(CUresult, cuEventCreate, cuEventCreate, (CUevent *phEvent, unsigned int Flags), \
      (phEvent, Flags)) \
    X(CUresult, cuEventRecord, cuEventRecord, (CUevent hEvent, CUstream hStream), \
      (hEvent, hStream)) \
    X(CUresult, cuEventQuery, cuEventQuery, (CUevent hEvent), (hEvent)) \
    X(CUresult, cuEventSynchronize, cuEventSynchronize, (CUevent hEvent), (hEvent)) \
    X(CUresult, cuEventElapsedTime, cuEventElapsedTime_v2, \
      (float *pMilliseconds, CUevent hStart, CUevent hEnd), (pMilliseconds, hStart, hEnd)) \
    X(CUresult, cuEventDestroy, cuEventDestroy_v2, (CUevent hEvent), (hEvent)) \
    /* memory */ \
    X(CUresult, cuMemAlloc, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), \
      (dptr, bytesize)) \
    X(CUresult, cuMemFree, cuMemFree_v2, (CUdeviceptr dptr), (dptr)) \
    X(CUresult, cuMemcpyHtoD, cuMemcpyHtoD_v2, \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), \
      (dstDevice, srcHost, ByteCount)) \
    X(CUresult, cuMemcpyDtoH, cuMemcpyDtoH_v2, \
      (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), \
      (dstHost, srcDevice, ByteCount)) \
    X(CUresult, cuMemcpyDtoD, cuMemcpyDtoD_v2, \
      (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), \
      (dstDevice, srcDevice, ByteCount)) \
    X(CUresult, cuMemcpy, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), \
      (dst, src, ByteCount)) \
    X(CUresult, cuMemsetD8, cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N), \
      (dstDevice, uc, N)) \
    X(CUresult, cuMemsetD32, cuMemsetD32_v2, \
      (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N)) \
    X(CUresult, cuMemGetInfo, cuMemGetInfo_v2, (size_t *freeBytes, size_t *totalBytes), \
      (freeBytes, totalBytes)) \
    /* modules and kernels: collprof-sim's compute (its PTX spin kernels) */ \
    X(CUresult, cuModuleLoadData, cuModuleLoadData, (CUmodule *module, const void *image), \
      (module, image)) \
    X(CUresult, cuModuleUnload, cuModuleUnload, (CUmodule hmod), (hmod)) \
    X(CUresult, cuModuleGetFunction, cuModuleGetFunction, \
      (CUfunction *hfunc, CUmodule hmod, const char *name), (hfunc, hmod, name)) \
    X(CUresult, cuLaunchKernel, cuLaunchKernel, \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra), \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, \
       hStream, kernelParams, extra))

/* Entries whose CUDA 13 symbol a still-deployed driver may lack while the older symbol has
 * the same signature and meaning, so a resolver may fall back to it:
 *     X(api_name, older_symbol, older_version, symbol_version)
 * the versions being CUDA_VERSION codes (12080 = 12.8), as cudaTypedefs.h names them
 * (PFN_cuEventElapsedTime_v2000) and as cuGetProcAddress's cudaVersion takes them.
 * Of the other renamed rows, cuCtxCreate_v4 (12.5) is the only one newer than 11.4 and its
 * older form takes other arguments; cuDeviceGetUuid's v1 means another UUID under MIG. */
#define CP_CUDA_API_OLDER(X) \
    X(cuEventElapsedTime, cuEventElapsedTime, 2000, 12080)

#endif
