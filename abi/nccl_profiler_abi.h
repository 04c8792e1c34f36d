/* nccl_profiler_abi: NCCL's profiler-plugin interface (versions 4, 5 and 6), declared here.
 *
 * NCCL (2.23 and later) opens a profiler plugin at its first communicator: the library named
 * by NCCL_PROFILER_PLUGIN (a path, a name, or "libnccl-profiler-<name>.so"; unset:
 * "libnccl-profiler.so"), dlopen'ed RTLD_NOW | RTLD_LOCAL, and takes the newest of the
 * symbols ncclProfiler_v6 (2.29+), ncclProfiler_v5 (2.28), ncclProfiler_v4 (2.24-2.27) it
 * exports. Both sides of collprof use it: the shim is such a plugin (preload/profiler_plugin.c)
 * and the emulated NCCL loads and calls one (emu/nccl/profiler.c).
 *
 * Transcribed from NCCL's src/include/plugin/nccl_profiler.h and profiler/profiler_v{4,5,6}.h
 * (v2.28.9 for v4/v5, master for v6); the offsets asserted below are the ones gcc gives
 * NCCL's own headers on x86-64 and aarch64 (LP64), so a field that drifts fails to compile.
 * Only what collprof reads is named: the union members we never touch keep their size.
 */
#ifndef COLLPROF_NCCL_PROFILER_ABI_H
#define COLLPROF_NCCL_PROFILER_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/nccl_abi.h"

/* Event types (eActivationMask bits and eDescr->type). */
enum {
    ncclProfileGroup = 1 << 0,
    ncclProfileColl = 1 << 1,
    ncclProfileP2p = 1 << 2,
    ncclProfileProxyOp = 1 << 3,
    ncclProfileProxyStep = 1 << 4,
    ncclProfileProxyCtrl = 1 << 5,
    ncclProfileKernelCh = 1 << 6,
    ncclProfileNetPlugin = 1 << 7,
    ncclProfileGroupApi = 1 << 8,     /* v5 */
    ncclProfileCollApi = 1 << 9,      /* v5 */
    ncclProfileP2pApi = 1 << 10,      /* v5 */
    ncclProfileKernelLaunch = 1 << 11,/* v5 */
    ncclProfileCeColl = 1 << 12,      /* v6 */
    ncclProfileCeSync = 1 << 13,      /* v6 */
    ncclProfileCeBatch = 1 << 14,     /* v6 */
};

/* The states of recordEventState that matter here (NCCL's enum has more). */
typedef int ncclProfilerEventState_t;
enum {
    ncclProfilerKernelChStop = 22,
    ncclProfilerGroupStartApiStop = 23,
    ncclProfilerGroupEndApiStart = 24,
};

/* NCCL's logger (nccl_common.h): level is ncclDebugLogLevel. */
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

/* The union members of v4, v5 and v6 that share one layout. */
typedef struct cp_prof_coll {
    uint64_t seqNumber;        /* NCCL's per-function count: comm->seqNumber[func] */
    const char *func;          /* "AllReduce" ... (ncclFuncToString) */
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;      /* "ncclFloat32" ... */
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;          /* "RING", "TREE", "NVLS" ... (ncclAlgoToString) */
    const char *proto;         /* "LL", "LL128", "SIMPLE" */
    void *parentGroup;         /* v5/v6 only */
} cp_prof_coll;
typedef struct cp_prof_coll_v4 {   /* v4: the same, without parentGroup */
    uint64_t seqNumber;
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;
    const char *proto;
} cp_prof_coll_v4;

typedef struct cp_prof_p2p {
    const char *func;          /* "Send", "Recv" */
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t nChannels;
    void *parentGroup;         /* v5/v6 only */
} cp_prof_p2p;
typedef struct cp_prof_p2p_v4 {
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t nChannels;
} cp_prof_p2p_v4;

typedef struct cp_prof_kernel_ch {
    uint8_t channelId;
    uint64_t pTimer;           /* the GPU's %globaltimer (ns) when the channel began */
} cp_prof_kernel_ch;

typedef struct cp_prof_coll_api {   /* v5 */
    const char *func;
    size_t count;
    const char *datatype;
    int root;
    void *stream;
    _Bool graphCaptured;
} cp_prof_coll_api;

typedef struct cp_prof_p2p_api {    /* v5 */
    const char *func;
    size_t count;
    const char *datatype;
    void *stream;
    _Bool graphCaptured;
} cp_prof_p2p_api;

typedef struct cp_prof_group_api {  /* v5 */
    _Bool graphCaptured;
    int groupDepth;
} cp_prof_group_api;

typedef struct cp_prof_proxy_op {
    pid_t pid;
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
} cp_prof_proxy_op;

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        cp_prof_coll_v4 coll;
        cp_prof_p2p_v4 p2p;
        cp_prof_proxy_op proxyOp;
        cp_prof_kernel_ch kernelCh;
        struct { int step; } proxyStep;
        struct { int64_t id; void *data; } netPlugin;
    };
} ncclProfilerEventDescr_v4_t;

typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        cp_prof_group_api groupApi;
        cp_prof_coll_api collApi;
        cp_prof_p2p_api p2pApi;
        struct { void *stream; } kernelLaunch;
        cp_prof_coll coll;
        cp_prof_p2p p2p;
        cp_prof_proxy_op proxyOp;
        cp_prof_kernel_ch kernelCh;
        struct { int step; } proxyStep;
        struct { int64_t id; void *data; } netPlugin;
    };
} ncclProfilerEventDescr_v5_t;

/* v6 adds copy-engine collectives (ceColl, ceCollSync, ceCollBatch) to v5's union; the
 * members before them keep v5's offsets, and ceColl (88 bytes) is no larger than coll. */
typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        cp_prof_group_api groupApi;
        cp_prof_coll_api collApi;
        cp_prof_p2p_api p2pApi;
        cp_prof_coll coll;
        cp_prof_p2p p2p;
        cp_prof_kernel_ch kernelCh;
        unsigned char ce[88];  /* ceColl, ceCollSync, ceCollBatch */
    };
} ncclProfilerEventDescr_v6_t;

typedef union {
    struct { size_t transSize; } proxyStep;
    struct { int appendedProxyOps; } proxyCtrl;
    struct { void *data; } netPlugin;
    struct { uint64_t pTimer; } kernelCh;   /* the GPU's %globaltimer when the channel ended */
} ncclProfilerEventStateArgs_v4_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName,
                         uint64_t commHash, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *d);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v4_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v4_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
                         const char *commName, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *d);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v5_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
                         const char *commName, int nNodes, int nranks, int rank,
                         ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v6_t *d);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_t eState,
                                     ncclProfilerEventStateArgs_v6_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v6_t;

/* NCCL's layout, as g++ lays out its headers (LP64): checked against NCCL's own. */
#define CP_PROF_AT(T, m, at) _Static_assert(offsetof(T, m) == (at), #T "." #m)
CP_PROF_AT(ncclProfilerEventDescr_v5_t, coll.nChannels, 80);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, coll.algo, 88);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, coll.parentGroup, 104);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, p2p.nChannels, 60);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, kernelCh.pTimer, 32);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, collApi.graphCaptured, 64);
CP_PROF_AT(ncclProfilerEventDescr_v5_t, p2pApi.graphCaptured, 56);
CP_PROF_AT(ncclProfilerEventDescr_v4_t, coll.algo, 88);
CP_PROF_AT(ncclProfilerEventDescr_v4_t, coll.proto, 96);
CP_PROF_AT(ncclProfilerEventDescr_v4_t, p2p.nChannels, 60);
CP_PROF_AT(ncclProfilerEventDescr_v6_t, coll.algo, 88);
CP_PROF_AT(ncclProfilerEventDescr_v6_t, kernelCh.pTimer, 32);
CP_PROF_AT(ncclProfilerEventDescr_v6_t, p2pApi.graphCaptured, 56);
#undef CP_PROF_AT
_Static_assert(sizeof(ncclProfilerEventDescr_v4_t) == 104, "v4 descriptor");
_Static_assert(sizeof(ncclProfilerEventDescr_v5_t) == 112, "v5 descriptor");
_Static_assert(sizeof(ncclProfilerEventDescr_v6_t) == 112, "v6 descriptor");

#endif
