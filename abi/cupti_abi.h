/* cupti_abi: the part of CUPTI's activity API (cupti_activity.h, libcupti.so) collprof uses.
 *
 * The shim never links CUPTI: COLLPROF_GPU_TIMING=cupti opens libcupti at run time, beside the
 * CUDA the job uses, and the emulation builds its own libcupti.so.13. So the types and values
 * are declared here with CUDA 13.0's names; tests/abi/test_abi_cupti_real checks each
 * against the real header when one is installed, and every signature of CP_CUPTI_API against
 * its prototype there.
 *
 * Kernel records. CUPTI writes the newest CUpti_ActivityKernelN its version knows (9 in CUDA
 * 12, 10 in 13), and a reader gets them only through cuptiActivityGetNextRecord, which knows
 * their sizes. The fields collprof reads (kind through name) have sat at the same offsets
 * since CUpti_ActivityKernel4, so they are declared as one head (cp_cupti_kernel_head) that
 * fits every version the shim may meet; the test checks the offsets against versions 9 and
 * 10 of the real header.
 *
 * Not to be included together with the real cupti headers (both declare the same names).
 */
#ifndef COLLPROF_CUPTI_ABI_H
#define COLLPROF_CUPTI_ABI_H

#ifdef _CUPTI_ACTIVITY_H_
#error "abi/cupti_abi.h declares CUPTI's ABI itself; do not include it with cupti_activity.h"
#endif

#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_abi.h"

typedef enum {
    CUPTI_SUCCESS = 0,
    CUPTI_ERROR_INVALID_PARAMETER = 1,
    CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
    CUPTI_ERROR_NOT_INITIALIZED = 15,
    CUPTI_ERROR_QUEUE_EMPTY = 18,
    CUPTI_ERROR_INVALID_KIND = 21,
    CUPTI_ERROR_NOT_SUPPORTED = 27,
    CUPTI_ERROR_UNKNOWN = 999,
    CUPTI_ERROR_FORCE_INT = 0x7fffffff
} CUptiResult;

typedef enum {
    CUPTI_ACTIVITY_KIND_INVALID = 0,
    CUPTI_ACTIVITY_KIND_KERNEL = 3,
    CUPTI_ACTIVITY_KIND_DRIVER = 4,
    CUPTI_ACTIVITY_KIND_RUNTIME = 5,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 39,
    CUPTI_ACTIVITY_KIND_FORCE_INT = 0x7fffffff
} CUpti_ActivityKind;

typedef enum {
    CUPTI_EXTERNAL_CORRELATION_KIND_INVALID = 0,
    CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN = 1,
    CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC = 2,
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 3,
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 = 4,
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 = 5,
    CUPTI_EXTERNAL_CORRELATION_KIND_FORCE_INT = 0x7fffffff
} CUpti_ExternalCorrelationKind;

#define CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (1 << 0)

/* CUPTI's records are packed and 8-aligned (ACTIVITY_RECORD_ALIGNMENT). */
#define CP_CUPTI_PACKED __attribute__((__packed__)) __attribute__((aligned(8)))

typedef struct CP_CUPTI_PACKED {
    CUpti_ActivityKind kind;
} CUpti_Activity;

typedef struct CP_CUPTI_PACKED {
    CUpti_ActivityKind kind;
    CUpti_ExternalCorrelationKind externalKind;
    uint64_t externalId;
    uint32_t correlationId;
    uint32_t reserved;
} CUpti_ActivityExternalCorrelation;

/* The head every CUpti_ActivityKernel4..10 shares (see above); kind is KERNEL or
 * CONCURRENT_KERNEL. Times are CUPTI timestamps (cuptiGetTimestamp's clock, or the one a
 * cuptiActivityRegisterTimestampCallback gave), ns. */
typedef struct CP_CUPTI_PACKED {
    CUpti_ActivityKind kind;
    uint8_t cacheConfig;
    uint8_t sharedMemoryConfig;
    uint16_t registersPerThread;
    uint32_t partitionedGlobalCacheRequested;
    uint32_t partitionedGlobalCacheExecuted;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    int32_t gridX, gridY, gridZ;
    int32_t blockX, blockY, blockZ;
    int32_t staticSharedMemory;
    int32_t dynamicSharedMemory;
    uint32_t localMemoryPerThread;
    uint32_t localMemoryTotal;
    uint32_t correlationId;
    int64_t gridId;
    const char *name;
} cp_cupti_kernel_head;

/* sizeof(CUpti_ActivityKernel10): the record the emulated CUPTI writes. */
#define CP_CUPTI_KERNEL10_SIZE 216

typedef void (*CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size,
                                                  size_t *maxNumRecords);
typedef void (*CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId,
                                                   uint8_t *buffer, size_t size,
                                                   size_t validSize);
typedef uint64_t (*CUpti_TimestampCallbackFunc)(void);

/* The entry points are listed in cupti_api_list.h. */

#endif
