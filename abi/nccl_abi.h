/* nccl_abi: collprof's own declaration of the NCCL 2.28 ABI.
 *
 * collprof builds without the CUDA toolkit, yet the shim must export NCCL's entry points with
 * NCCL's exact signatures and the emulation must build a libnccl.so.2 that real programs link
 * against. So the types are declared here, byte for byte as NCCL 2.28's nccl.h declares them
 * (tests/abi/test_abi_nccl_real checks every value, size and offset against the real
 * header when one is installed). The entry points themselves are listed in nccl_api_list.h.
 *
 * Never include this together with the real nccl.h: the two would declare the same names
 * twice. A translation unit that needs the real header uses nccl_api_list.h alone.
 */
#ifndef COLLPROF_NCCL_ABI_H
#define COLLPROF_NCCL_ABI_H

#ifdef NCCL_H_
#error "abi/nccl_abi.h declares NCCL's ABI itself; do not include it together with nccl.h"
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The layout declared here is that of NCCL 2.28.0 (struct tag ncclConfig_v22800). */
#define CP_NCCL_ABI_MAJOR 2
#define CP_NCCL_ABI_MINOR 28
#define CP_NCCL_ABI_PATCH 0

/* NCCL's own encoding: 2.8.x and older are X*1000+Y*100+Z, newer X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define CP_NCCL_ABI_VERSION_CODE \
    NCCL_VERSION(CP_NCCL_ABI_MAJOR, CP_NCCL_ABI_MINOR, CP_NCCL_ABI_PATCH)

/* cudaStream_t is the runtime's name for the driver's CUstream: the same struct tag, so our
 * signatures stay compatible with code compiled against cuda_runtime.h. */
typedef struct CUstream_st *cudaStream_t;

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags (reserved, must be 0) */
#define NCCL_REVOKE_DEFAULT 0x00

/* NCCL checks this magic to tell a config made by NCCL_CONFIG_INITIALIZER from garbage. */
#define CP_NCCL_CONFIG_MAGIC 0xcafebeefu

typedef struct ncclConfig_v22800 {
    /* written by the initializer, never by users */
    size_t size;
    unsigned int magic;
    unsigned int version;
    /* user attributes */
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                                   \
    sizeof(ncclConfig_t),                  /* size */                               \
    CP_NCCL_CONFIG_MAGIC,                  /* magic */                              \
    CP_NCCL_ABI_VERSION_CODE,              /* version */                            \
    NCCL_CONFIG_UNDEF_INT,                 /* blocking */                           \
    NCCL_CONFIG_UNDEF_INT,                 /* cgaClusterSize */                     \
    NCCL_CONFIG_UNDEF_INT,                 /* minCTAs */                            \
    NCCL_CONFIG_UNDEF_INT,                 /* maxCTAs */                            \
    NCCL_CONFIG_UNDEF_PTR,                 /* netName */                            \
    NCCL_CONFIG_UNDEF_INT,                 /* splitShare */                         \
    NCCL_CONFIG_UNDEF_INT,                 /* trafficClass */                       \
    NCCL_CONFIG_UNDEF_PTR,                 /* commName */                           \
    NCCL_CONFIG_UNDEF_INT,                 /* collnetEnable */                      \
    NCCL_CONFIG_UNDEF_INT,                 /* CTAPolicy */                          \
    NCCL_CONFIG_UNDEF_INT,                 /* shrinkShare */                        \
    NCCL_CONFIG_UNDEF_INT,                 /* nvlsCTAs */                           \
    NCCL_CONFIG_UNDEF_INT,                 /* nChannelsPerNetPeer */                \
    NCCL_CONFIG_UNDEF_INT,                 /* nvlinkCentricSched */                 \
}

#define CP_NCCL_SIM_INFO_MAGIC 0x74685283u

typedef struct ncclSimInfo_v22200 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER {                                                 \
    sizeof(ncclSimInfo_t),                 /* size */                               \
    CP_NCCL_SIM_INFO_MAGIC,                /* magic */                              \
    CP_NCCL_ABI_VERSION_CODE,              /* version */                            \
    NCCL_UNDEF_FLOAT                       /* estimatedTime */                      \
}

/* ncclMaxRedOp is the largest value that does not grow the enum past the size an enum of
 * these values had in older NCCL: the same expression as nccl.h's, so sizeof agrees. */
typedef enum { cp_nccl_redop_dummy_ = 5 } cp_nccl_redop_dummy_t;
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    /* built-in count; also the smallest value ncclRedOpCreatePreMulSum hands out */
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(cp_nccl_redop_dummy_t))
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
    ncclScalarDevice = 0,         /* read on the device while the collective runs */
    ncclScalarHostImmediate = 1   /* read on the host before ncclRedOpCreate* returns */
} ncclScalarResidence_t;

/* NCCL's ncclGetErrorString text for each result ("unknown result code" otherwise), so a
 * message collprof prints reads exactly as NCCL's own would. */
const char *cp_nccl_result_name(ncclResult_t result);
/* The enumerator's name ("ncclInvalidUsage"); "?" for a value NCCL 2.28 does not define. */
const char *cp_nccl_result_id(ncclResult_t result);

/* ---- Reading a caller's ncclConfig_t safely ----
 *
 * A program built against another NCCL passes its own struct: smaller (older) or larger
 * (newer) than ours. Its `size` says how many bytes it has; reading past that is reading
 * past the caller's object. cp_nccl_config_read copies min(size, sizeof(ncclConfig_t))
 * bytes, and, as NCCL's parseCommConfig does, treats a field the caller's `version`
 * predates as unset. Every field it could not read holds NCCL_CONFIG_UNDEF_*.
 */

/* One bit per user attribute, in layout order. */
enum cp_nccl_config_field {
    CP_NCCL_CFG_BLOCKING = 0,
    CP_NCCL_CFG_CGA_CLUSTER_SIZE,
    CP_NCCL_CFG_MIN_CTAS,
    CP_NCCL_CFG_MAX_CTAS,
    CP_NCCL_CFG_NET_NAME,
    CP_NCCL_CFG_SPLIT_SHARE,
    CP_NCCL_CFG_TRAFFIC_CLASS,
    CP_NCCL_CFG_COMM_NAME,
    CP_NCCL_CFG_COLLNET_ENABLE,
    CP_NCCL_CFG_CTA_POLICY,
    CP_NCCL_CFG_SHRINK_SHARE,
    CP_NCCL_CFG_NVLS_CTAS,
    CP_NCCL_CFG_NCHANNELS_PER_NET_PEER,
    CP_NCCL_CFG_NVLINK_CENTRIC_SCHED,
    CP_NCCL_CFG_FIELD_COUNT
};

/* The largest `size` accepted: no NCCL config is near it, so more means a garbage word. */
#define CP_NCCL_CONFIG_MAX_SIZE 4096
/* The smallest: the header and `blocking`, the first user attribute (NCCL 2.14). */
#define CP_NCCL_CONFIG_MIN_SIZE (offsetof(ncclConfig_t, blocking) + sizeof(int))

typedef struct cp_nccl_config_view {
    ncclConfig_t config;       /* our layout, size = sizeof(ncclConfig_t), magic and version
                                  the caller's; what was not read is NCCL_CONFIG_UNDEF_* */
    size_t user_size;          /* the caller's declared size (0 without a config) */
    unsigned int user_version; /* the caller's declared version (0 without a config) */
    size_t bytes_read;         /* min(user_size, sizeof(ncclConfig_t)) */
    uint32_t present;          /* bit (1u << cp_nccl_config_field): the caller gave it */
} cp_nccl_config_view;

enum cp_nccl_config_status {
    CP_NCCL_CONFIG_OK = 0,         /* read; see `present` */
    CP_NCCL_CONFIG_NONE = 1,       /* NULL config: NCCL's defaults, nothing present */
    CP_NCCL_CONFIG_BAD_MAGIC = -1, /* not made by NCCL_CONFIG_INITIALIZER (NCCL refuses it) */
    CP_NCCL_CONFIG_BAD_SIZE = -2,  /* size below CP_NCCL_CONFIG_MIN_SIZE or above ..._MAX_ */
    CP_NCCL_CONFIG_BAD_ARG = -3    /* out is NULL */
};

/* Fills *out (always, when out is not NULL: defaults on any failure) and returns a
 * cp_nccl_config_status. Reads the caller's size word first and nothing else until that
 * size is sane; then magic and version; then min(size, sizeof(ncclConfig_t)) bytes. */
int cp_nccl_config_read(const ncclConfig_t *user, cp_nccl_config_view *out);
/* Whether the caller gave field f (a cp_nccl_config_field). */
int cp_nccl_config_has(const cp_nccl_config_view *view, int f);
/* The NCCL version that introduced field f, as NCCL gates it (0: not gated). */
unsigned int cp_nccl_config_field_since(int f);
/* The field's name as in nccl.h ("nChannelsPerNetPeer"), "?" when f is out of range. */
const char *cp_nccl_config_field_name(int f);

#endif
