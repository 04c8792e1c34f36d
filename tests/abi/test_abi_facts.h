/* The facts the ABI tests compare: each list is expanded once after the real header and once
 * after ours, and the two tables must agree entry by entry. Expressions only, no include, so
 * a name either header lacks stops the build. X(expr) receives the expression; the value is
 * taken as long long.
 *
 * test_abi_*_real also scans our headers for every enumerator and #define and fails if one
 * is mentioned by no fact here, so a value added to our header must be added here too.
 */
#ifndef COLLPROF_TEST_ABI_FACTS_H
#define COLLPROF_TEST_ABI_FACTS_H

#define CP_TEST_FIELD_SIZE(type, field) sizeof(((type *)0)->field)

#define CP_TEST_NCCL_FACTS(X) \
    /* version encoding, both sides of its 2.8/2.9 switch */ \
    X(NCCL_VERSION(2, 8, 4)) X(NCCL_VERSION(2, 9, 6)) X(NCCL_VERSION(2, 28, 9)) \
    /* handles and ids */ \
    X(NCCL_COMM_NULL == NULL) X(NCCL_UNIQUE_ID_BYTES) \
    X(sizeof(ncclUniqueId)) X(_Alignof(ncclUniqueId)) \
    X(__builtin_types_compatible_p(ncclComm_t, struct ncclComm *)) \
    X(__builtin_types_compatible_p(ncclWindow_t, struct ncclWindow_vidmem *)) \
    X(__builtin_types_compatible_p(cudaStream_t, struct CUstream_st *)) \
    /* ncclResult_t */ \
    X(sizeof(ncclResult_t)) X((ncclResult_t)-1 > (ncclResult_t)0) \
    X(ncclSuccess) X(ncclUnhandledCudaError) X(ncclSystemError) X(ncclInternalError) \
    X(ncclInvalidArgument) X(ncclInvalidUsage) X(ncclRemoteError) X(ncclInProgress) \
    X(ncclNumResults) \
    /* ncclRedOp_t */ \
    X(sizeof(ncclRedOp_t)) X((ncclRedOp_t)-1 > (ncclRedOp_t)0) \
    X(ncclSum) X(ncclProd) X(ncclMax) X(ncclMin) X(ncclAvg) X(ncclNumOps) X(ncclMaxRedOp) \
    /* ncclDataType_t */ \
    X(sizeof(ncclDataType_t)) X((ncclDataType_t)-1 > (ncclDataType_t)0) \
    X(ncclInt8) X(ncclChar) X(ncclUint8) X(ncclInt32) X(ncclInt) X(ncclUint32) X(ncclInt64) \
    X(ncclUint64) X(ncclFloat16) X(ncclHalf) X(ncclFloat32) X(ncclFloat) X(ncclFloat64) \
    X(ncclDouble) X(ncclBfloat16) X(ncclFloat8e4m3) X(ncclFloat8e5m2) X(ncclNumTypes) \
    /* ncclScalarResidence_t */ \
    X(sizeof(ncclScalarResidence_t)) X(ncclScalarDevice) X(ncclScalarHostImmediate) \
    /* flags and sentinels */ \
    X(NCCL_CONFIG_UNDEF_INT) X(NCCL_CONFIG_UNDEF_PTR == NULL) X(NCCL_SPLIT_NOCOLOR) \
    X(NCCL_UNDEF_FLOAT == -1.0f) X(NCCL_WIN_DEFAULT) X(NCCL_WIN_COLL_SYMMETRIC) \
    X(NCCL_WIN_REQUIRED_ALIGNMENT) X(NCCL_CTA_POLICY_DEFAULT) X(NCCL_CTA_POLICY_EFFICIENCY) \
    X(NCCL_CTA_POLICY_ZERO) X(NCCL_SHRINK_DEFAULT) X(NCCL_SHRINK_ABORT) \
    X(NCCL_REVOKE_DEFAULT) \
    /* ncclConfig_t: the struct tag, size, every field's place and size */ \
    X(sizeof(struct ncclConfig_v22800)) X(sizeof(ncclConfig_t)) X(_Alignof(ncclConfig_t)) \
    X(offsetof(ncclConfig_t, size)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, size)) \
    X(offsetof(ncclConfig_t, magic)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, magic)) \
    X(offsetof(ncclConfig_t, version)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, version)) \
    X(offsetof(ncclConfig_t, blocking)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, blocking)) \
    X(offsetof(ncclConfig_t, cgaClusterSize)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, cgaClusterSize)) \
    X(offsetof(ncclConfig_t, minCTAs)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, minCTAs)) \
    X(offsetof(ncclConfig_t, maxCTAs)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, maxCTAs)) \
    X(offsetof(ncclConfig_t, netName)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, netName)) \
    X(offsetof(ncclConfig_t, splitShare)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, splitShare)) \
    X(offsetof(ncclConfig_t, trafficClass)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, trafficClass)) \
    X(offsetof(ncclConfig_t, commName)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, commName)) \
    X(offsetof(ncclConfig_t, collnetEnable)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, collnetEnable)) \
    X(offsetof(ncclConfig_t, CTAPolicy)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, CTAPolicy)) \
    X(offsetof(ncclConfig_t, shrinkShare)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, shrinkShare)) \
    X(offsetof(ncclConfig_t, nvlsCTAs)) X(CP_TEST_FIELD_SIZE(ncclConfig_t, nvlsCTAs)) \
    X(offsetof(ncclConfig_t, nChannelsPerNetPeer)) \
    X(CP_TEST_FIELD_SIZE(ncclConfig_t, nChannelsPerNetPeer)) \
    X(offsetof(ncclConfig_t, nvlinkCentricSched)) \
    X(CP_TEST_FIELD_SIZE(ncclConfig_t, nvlinkCentricSched)) \
    /* what NCCL_CONFIG_INITIALIZER writes; the version only to the minor (ours is 2.28.0) */ \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).size) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).magic) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).version / 100) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).blocking) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).cgaClusterSize) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).minCTAs) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).maxCTAs) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).netName == NULL) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).splitShare) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).trafficClass) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).commName == NULL) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).collnetEnable) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).CTAPolicy) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).shrinkShare) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).nvlsCTAs) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).nChannelsPerNetPeer) \
    X(((ncclConfig_t)NCCL_CONFIG_INITIALIZER).nvlinkCentricSched) \
    /* ncclSimInfo_t and its initializer */ \
    X(sizeof(struct ncclSimInfo_v22200)) X(sizeof(ncclSimInfo_t)) \
    X(offsetof(ncclSimInfo_t, size)) X(offsetof(ncclSimInfo_t, magic)) \
    X(offsetof(ncclSimInfo_t, version)) X(offsetof(ncclSimInfo_t, estimatedTime)) \
    X(CP_TEST_FIELD_SIZE(ncclSimInfo_t, estimatedTime)) \
    X(((ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER).size) \
    X(((ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER).magic) \
    X(((ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER).version / 100) \
    X(((ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER).estimatedTime == -1.0f)

#define CP_TEST_CUDA_FACTS(X) \
    /* scalar and handle types */ \
    X(sizeof(CUdeviceptr)) X(__builtin_types_compatible_p(CUdeviceptr, unsigned long long)) \
    X(__builtin_types_compatible_p(CUdevice, int)) \
    X(__builtin_types_compatible_p(cuuint32_t, uint32_t)) \
    X(__builtin_types_compatible_p(cuuint64_t, uint64_t)) \
    X(__builtin_types_compatible_p(CUcontext, struct CUctx_st *)) \
    X(__builtin_types_compatible_p(CUstream, struct CUstream_st *)) \
    X(__builtin_types_compatible_p(CUevent, struct CUevent_st *)) \
    X(__builtin_types_compatible_p(CUgraph, struct CUgraph_st *)) \
    X(__builtin_types_compatible_p(CUmodule, struct CUmod_st *)) \
    X(__builtin_types_compatible_p(CUfunction, struct CUfunc_st *)) \
    X(__builtin_types_compatible_p(CUgreenCtx, struct CUgreenCtx_st *)) \
    X(__builtin_types_compatible_p(CUuuid, struct CUuuid_st)) X(sizeof(CUuuid)) \
    X(__builtin_types_compatible_p(CUexecAffinityParam, struct CUexecAffinityParam_st)) \
    X(__builtin_types_compatible_p(CUctxCigParam, struct CUctxCigParam_st)) \
    X(__builtin_types_compatible_p(CUctxCreateParams, struct CUctxCreateParams_st)) \
    X(sizeof(CUctxCreateParams)) X(offsetof(CUctxCreateParams, execAffinityParams)) \
    X(offsetof(CUctxCreateParams, numExecAffinityParams)) \
    X(offsetof(CUctxCreateParams, cigParams)) \
    X((uintptr_t)CU_STREAM_LEGACY) X((uintptr_t)CU_STREAM_PER_THREAD) \
    X(CU_DEVICE_CPU) X(CU_DEVICE_INVALID) \
    /* enum sizes and the enumerations' tags */ \
    X(sizeof(CUresult)) X(sizeof(enum cudaError_enum)) \
    X(sizeof(CUdevice_attribute)) X(sizeof(enum CUdevice_attribute_enum)) \
    X(sizeof(enum CUctx_flags_enum)) X(sizeof(CUctx_flags)) \
    X(sizeof(enum CUstream_flags_enum)) X(sizeof(CUstream_flags)) \
    X(sizeof(enum CUevent_flags_enum)) X(sizeof(CUevent_flags)) \
    X(sizeof(enum CUevent_wait_flags_enum)) X(sizeof(CUevent_wait_flags)) \
    X(sizeof(enum CUstreamCaptureStatus_enum)) X(sizeof(CUstreamCaptureStatus)) \
    X(sizeof(enum CUstreamCaptureMode_enum)) X(sizeof(CUstreamCaptureMode)) \
    X(sizeof(enum CUdriverProcAddress_flags_enum)) X(sizeof(CUdriverProcAddress_flags)) \
    X(sizeof(enum CUdriverProcAddressQueryResult_enum)) \
    X(sizeof(CUdriverProcAddressQueryResult)) \
    /* CUresult: every value */ \
    X(CUDA_SUCCESS) X(CUDA_ERROR_INVALID_VALUE) \
    X(CUDA_ERROR_OUT_OF_MEMORY) X(CUDA_ERROR_NOT_INITIALIZED) \
    X(CUDA_ERROR_DEINITIALIZED) X(CUDA_ERROR_PROFILER_DISABLED) \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED) X(CUDA_ERROR_PROFILER_ALREADY_STARTED) \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED) X(CUDA_ERROR_STUB_LIBRARY) \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER) X(CUDA_ERROR_DEVICE_UNAVAILABLE) \
    X(CUDA_ERROR_NO_DEVICE) X(CUDA_ERROR_INVALID_DEVICE) \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED) X(CUDA_ERROR_INVALID_IMAGE) \
    X(CUDA_ERROR_INVALID_CONTEXT) X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT) \
    X(CUDA_ERROR_MAP_FAILED) X(CUDA_ERROR_UNMAP_FAILED) \
    X(CUDA_ERROR_ARRAY_IS_MAPPED) X(CUDA_ERROR_ALREADY_MAPPED) \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU) X(CUDA_ERROR_ALREADY_ACQUIRED) \
    X(CUDA_ERROR_NOT_MAPPED) X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY) \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER) X(CUDA_ERROR_ECC_UNCORRECTABLE) \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT) X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE) \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) X(CUDA_ERROR_INVALID_PTX) \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT) X(CUDA_ERROR_NVLINK_UNCORRECTABLE) \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND) X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION) \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED) X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY) \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC) X(CUDA_ERROR_CONTAINED) \
    X(CUDA_ERROR_INVALID_SOURCE) X(CUDA_ERROR_FILE_NOT_FOUND) \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND) X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) \
    X(CUDA_ERROR_OPERATING_SYSTEM) X(CUDA_ERROR_INVALID_HANDLE) \
    X(CUDA_ERROR_ILLEGAL_STATE) X(CUDA_ERROR_LOSSY_QUERY) \
    X(CUDA_ERROR_NOT_FOUND) X(CUDA_ERROR_NOT_READY) \
    X(CUDA_ERROR_ILLEGAL_ADDRESS) X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) \
    X(CUDA_ERROR_LAUNCH_TIMEOUT) X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING) \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE) X(CUDA_ERROR_CONTEXT_IS_DESTROYED) \
    X(CUDA_ERROR_ASSERT) X(CUDA_ERROR_TOO_MANY_PEERS) \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR) X(CUDA_ERROR_ILLEGAL_INSTRUCTION) \
    X(CUDA_ERROR_MISALIGNED_ADDRESS) X(CUDA_ERROR_INVALID_ADDRESS_SPACE) \
    X(CUDA_ERROR_INVALID_PC) X(CUDA_ERROR_LAUNCH_FAILED) \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) X(CUDA_ERROR_TENSOR_MEMORY_LEAK) \
    X(CUDA_ERROR_NOT_PERMITTED) X(CUDA_ERROR_NOT_SUPPORTED) \
    X(CUDA_ERROR_SYSTEM_NOT_READY) X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) X(CUDA_ERROR_MPS_CONNECTION_FAILED) \
    X(CUDA_ERROR_MPS_RPC_FAILURE) X(CUDA_ERROR_MPS_SERVER_NOT_READY) \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED) X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED) \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED) X(CUDA_ERROR_CDP_NOT_SUPPORTED) \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH) X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) X(CUDA_ERROR_STREAM_CAPTURE_MERGE) \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED) \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION) X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) \
    X(CUDA_ERROR_CAPTURED_EVENT) X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) \
    X(CUDA_ERROR_TIMEOUT) X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) \
    X(CUDA_ERROR_EXTERNAL_DEVICE) X(CUDA_ERROR_INVALID_CLUSTER_SIZE) \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED) X(CUDA_ERROR_INVALID_RESOURCE_TYPE) \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION) X(CUDA_ERROR_KEY_ROTATION) \
    X(CUDA_ERROR_UNKNOWN) \
    /* attributes, flags, capture, cuGetProcAddress */ \
    X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) \
    X(CU_DEVICE_ATTRIBUTE_WARP_SIZE) \
    X(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) \
    X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) \
    X(CU_DEVICE_ATTRIBUTE_INTEGRATED) \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE) \
    X(CU_DEVICE_ATTRIBUTE_ECC_ENABLED) \
    X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) \
    X(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) \
    X(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) \
    X(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) \
    X(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) \
    X(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT) \
    X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) \
    X(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) \
    X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) \
    X(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD) \
    X(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID) \
    X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) \
    X(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) \
    X(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) \
    X(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED) \
    X(CU_CTX_SCHED_AUTO) \
    X(CU_CTX_SCHED_SPIN) \
    X(CU_CTX_SCHED_YIELD) \
    X(CU_CTX_SCHED_BLOCKING_SYNC) \
    X(CU_CTX_BLOCKING_SYNC) \
    X(CU_CTX_SCHED_MASK) \
    X(CU_CTX_MAP_HOST) \
    X(CU_CTX_LMEM_RESIZE_TO_MAX) \
    X(CU_CTX_COREDUMP_ENABLE) \
    X(CU_CTX_USER_COREDUMP_ENABLE) \
    X(CU_CTX_SYNC_MEMOPS) \
    X(CU_CTX_FLAGS_MASK) \
    X(CU_STREAM_DEFAULT) \
    X(CU_STREAM_NON_BLOCKING) \
    X(CU_EVENT_DEFAULT) \
    X(CU_EVENT_BLOCKING_SYNC) \
    X(CU_EVENT_DISABLE_TIMING) \
    X(CU_EVENT_INTERPROCESS) \
    X(CU_EVENT_WAIT_DEFAULT) \
    X(CU_EVENT_WAIT_EXTERNAL) \
    X(CU_STREAM_CAPTURE_STATUS_NONE) \
    X(CU_STREAM_CAPTURE_STATUS_ACTIVE) \
    X(CU_STREAM_CAPTURE_STATUS_INVALIDATED) \
    X(CU_STREAM_CAPTURE_MODE_GLOBAL) \
    X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) \
    X(CU_STREAM_CAPTURE_MODE_RELAXED) \
    X(CU_GET_PROC_ADDRESS_DEFAULT) \
    X(CU_GET_PROC_ADDRESS_LEGACY_STREAM) \
    X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) \
    X(CU_GET_PROC_ADDRESS_SUCCESS) \
    X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) \
    X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)

/* cp_krec: the kernel record each side reads (a typedef of CUpti_ActivityKernel10 in the real
 * header's side, of cp_cupti_kernel_head in ours); cp_krec9 the same for version 9 (CUDA
 * 12's). Typedefs, not macros: a fact's text must read the same on both sides. */
#define CP_TEST_CUPTI_KERNEL_FIELDS(X, T) \
    X(offsetof(T, kind)) X(offsetof(T, start)) X(offsetof(T, end)) X(offsetof(T, completed)) \
    X(offsetof(T, deviceId)) X(offsetof(T, contextId)) X(offsetof(T, streamId)) \
    X(offsetof(T, correlationId)) X(offsetof(T, gridId)) X(offsetof(T, name)) \
    X(CP_TEST_FIELD_SIZE(T, start)) X(CP_TEST_FIELD_SIZE(T, streamId)) \
    X(CP_TEST_FIELD_SIZE(T, correlationId)) X(CP_TEST_FIELD_SIZE(T, name))
#define CP_TEST_CUPTI_FACTS(X) \
    X(CUPTI_SUCCESS) X(CUPTI_ERROR_INVALID_PARAMETER) X(CUPTI_ERROR_MAX_LIMIT_REACHED) \
    X(CUPTI_ERROR_NOT_INITIALIZED) X(CUPTI_ERROR_QUEUE_EMPTY) X(CUPTI_ERROR_INVALID_KIND) \
    X(CUPTI_ERROR_NOT_SUPPORTED) X(CUPTI_ERROR_UNKNOWN) X(CUPTI_ERROR_FORCE_INT) \
    X(sizeof(CUptiResult)) \
    X(CUPTI_ACTIVITY_KIND_INVALID) X(CUPTI_ACTIVITY_KIND_KERNEL) X(CUPTI_ACTIVITY_KIND_DRIVER) \
    X(CUPTI_ACTIVITY_KIND_RUNTIME) X(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) \
    X(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) X(CUPTI_ACTIVITY_KIND_FORCE_INT) \
    X(sizeof(CUpti_ActivityKind)) \
    X(CUPTI_EXTERNAL_CORRELATION_KIND_INVALID) X(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN) \
    X(CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC) X(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) \
    X(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1) X(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) \
    X(CUPTI_EXTERNAL_CORRELATION_KIND_FORCE_INT) X(sizeof(CUpti_ExternalCorrelationKind)) \
    X(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) \
    X(sizeof(CUpti_Activity)) X(_Alignof(CUpti_Activity)) \
    X(sizeof(CUpti_ActivityExternalCorrelation)) X(_Alignof(CUpti_ActivityExternalCorrelation)) \
    X(offsetof(CUpti_ActivityExternalCorrelation, externalKind)) \
    X(offsetof(CUpti_ActivityExternalCorrelation, externalId)) \
    X(offsetof(CUpti_ActivityExternalCorrelation, correlationId)) \
    X(CP_CUPTI_KERNEL10_SIZE) X(_Alignof(cp_krec)) \
    CP_TEST_CUPTI_KERNEL_FIELDS(X, cp_krec) CP_TEST_CUPTI_KERNEL_FIELDS(X, cp_krec9)

#endif
