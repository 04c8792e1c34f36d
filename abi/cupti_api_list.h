/* cupti_api_list: the CUPTI entry points collprof uses, one X-macro row each, with
 * cupti_activity.h's signatures (checked against it by tests/abi/test_abi_cupti_real).
 * Types only by name: include abi/cupti_abi.h (or, in that test, the real header) first.
 */
#ifndef COLLPROF_CUPTI_API_LIST_H
#define COLLPROF_CUPTI_API_LIST_H

/* X(ret, name, params, args). The shim takes each with dlsym; an older libcupti may lack
 * cuptiActivityRegisterTimestampCallback (CUDA 12.4+) and cuptiActivityFlushPeriod. */
#define CP_CUPTI_API(X)                                                                     \
    X(CUptiResult, cuptiGetResultString, (CUptiResult result, const char **str),            \
      (result, str))                                                                        \
    X(CUptiResult, cuptiGetTimestamp, (uint64_t * timestamp), (timestamp))                  \
    X(CUptiResult, cuptiActivityEnable, (CUpti_ActivityKind kind), (kind))                  \
    X(CUptiResult, cuptiActivityDisable, (CUpti_ActivityKind kind), (kind))                 \
    X(CUptiResult, cuptiActivityGetNextRecord,                                              \
      (uint8_t * buffer, size_t validBufferSizeBytes, CUpti_Activity **record),             \
      (buffer, validBufferSizeBytes, record))                                               \
    X(CUptiResult, cuptiActivityGetNumDroppedRecords,                                       \
      (CUcontext context, uint32_t streamId, size_t *dropped), (context, streamId, dropped)) \
    X(CUptiResult, cuptiActivityRegisterCallbacks,                                          \
      (CUpti_BuffersCallbackRequestFunc funcBufferRequested,                                \
       CUpti_BuffersCallbackCompleteFunc funcBufferCompleted),                              \
      (funcBufferRequested, funcBufferCompleted))                                           \
    X(CUptiResult, cuptiActivityFlushAll, (uint32_t flag), (flag))                          \
    X(CUptiResult, cuptiActivityFlushPeriod, (uint32_t time), (time))                       \
    X(CUptiResult, cuptiActivityPushExternalCorrelationId,                                  \
      (CUpti_ExternalCorrelationKind kind, uint64_t id), (kind, id))                        \
    X(CUptiResult, cuptiActivityPopExternalCorrelationId,                                   \
      (CUpti_ExternalCorrelationKind kind, uint64_t * lastId), (kind, lastId))              \
    X(CUptiResult, cuptiActivityRegisterTimestampCallback,                                  \
      (CUpti_TimestampCallbackFunc funcTimestamp), (funcTimestamp))                         \
    X(CUptiResult, cuptiFinalize, (void), ())


#endif
