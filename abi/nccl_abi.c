/* nccl_abi: NCCL's error strings and the safe reader of a caller's ncclConfig_t. */
#include "abi/nccl_abi.h"

#include <string.h>

/* The ABI the rest of collprof relies on; tests/abi/test_abi_nccl_real checks the same
 * against the real nccl.h, these keep a wrong edit from compiling at all. */
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(int), "ncclRedOp_t keeps the size of an int enum");
_Static_assert(offsetof(ncclConfig_t, blocking) == 16, "ncclConfig_t header is 16 bytes");

const char *cp_nccl_result_name(ncclResult_t result)
{
    /* Copied from NCCL 2.28's ncclGetErrorString (src/init.cc); test_abi_nccl_symbols
     * compares each with the installed libnccl's answer. */
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *cp_nccl_result_id(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "?";
    }
}

/* The user attributes in layout order. `since` is the version below which NCCL's
 * parseCommConfig resets the field to its default whatever the bytes say; fields NCCL does
 * not gate (splitShare, commName) have 0. */
static const struct cp_nccl_config_field_desc {
    const char *name;
    size_t offset;
    size_t size;
    int is_ptr;
    unsigned int since;
} cp_config_fields[CP_NCCL_CFG_FIELD_COUNT] = {
#define CP_INT_FIELD(f, v) { #f, offsetof(ncclConfig_t, f), sizeof(int), 0, v }
#define CP_PTR_FIELD(f, v) { #f, offsetof(ncclConfig_t, f), sizeof(const char *), 1, v }
    [CP_NCCL_CFG_BLOCKING] = CP_INT_FIELD(blocking, 21400),
    [CP_NCCL_CFG_CGA_CLUSTER_SIZE] = CP_INT_FIELD(cgaClusterSize, 21700),
    [CP_NCCL_CFG_MIN_CTAS] = CP_INT_FIELD(minCTAs, 21700),
    [CP_NCCL_CFG_MAX_CTAS] = CP_INT_FIELD(maxCTAs, 21700),
    [CP_NCCL_CFG_NET_NAME] = CP_PTR_FIELD(netName, 21700),
    [CP_NCCL_CFG_SPLIT_SHARE] = CP_INT_FIELD(splitShare, 0),
    [CP_NCCL_CFG_TRAFFIC_CLASS] = CP_INT_FIELD(trafficClass, 22500),
    [CP_NCCL_CFG_COMM_NAME] = CP_PTR_FIELD(commName, 0),
    [CP_NCCL_CFG_COLLNET_ENABLE] = CP_INT_FIELD(collnetEnable, 22700),
    [CP_NCCL_CFG_CTA_POLICY] = CP_INT_FIELD(CTAPolicy, 22700),
    [CP_NCCL_CFG_SHRINK_SHARE] = CP_INT_FIELD(shrinkShare, 22700),
    [CP_NCCL_CFG_NVLS_CTAS] = CP_INT_FIELD(nvlsCTAs, 22700),
    [CP_NCCL_CFG_NCHANNELS_PER_NET_PEER] = CP_INT_FIELD(nChannelsPerNetPeer, 22800),
    [CP_NCCL_CFG_NVLINK_CENTRIC_SCHED] = CP_INT_FIELD(nvlinkCentricSched, 22800),
#undef CP_INT_FIELD
#undef CP_PTR_FIELD
};

/* The last field ends where the struct does (bar padding): a field added to ncclConfig_t
 * without a row above fails here. */
_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) + sizeof(int) == sizeof(ncclConfig_t),
               "every ncclConfig_t field has a row in cp_config_fields");

static void cp_config_reset_field(ncclConfig_t *c, int f)
{
    const struct cp_nccl_config_field_desc *d = &cp_config_fields[f];
    unsigned char *p = (unsigned char *)c + d->offset;
    if (d->is_ptr) {
        const char *undef = NCCL_CONFIG_UNDEF_PTR;
        memcpy(p, &undef, sizeof undef);
    } else {
        int undef = NCCL_CONFIG_UNDEF_INT;
        memcpy(p, &undef, sizeof undef);
    }
}

static void cp_config_defaults(cp_nccl_config_view *out)
{
    const ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    memset(out, 0, sizeof *out);
    out->config = init;
}

int cp_nccl_config_read(const ncclConfig_t *user, cp_nccl_config_view *out)
{
    if (out == NULL)
        return CP_NCCL_CONFIG_BAD_ARG;
    cp_config_defaults(out);
    if (user == NULL)
        return CP_NCCL_CONFIG_NONE;

    /* The size word first: until it is known to be sane nothing past it is read, so even a
     * pointer to something that is no config at all costs one 8-byte read. */
    size_t size = user->size;
    out->user_size = size;
    if (size < CP_NCCL_CONFIG_MIN_SIZE || size > CP_NCCL_CONFIG_MAX_SIZE)
        return CP_NCCL_CONFIG_BAD_SIZE;
    unsigned int version = user->version;
    out->user_version = version;
    if (user->magic != CP_NCCL_CONFIG_MAGIC)
        return CP_NCCL_CONFIG_BAD_MAGIC;

    size_t n = size < sizeof(ncclConfig_t) ? size : sizeof(ncclConfig_t);
    memcpy(&out->config, user, n);
    /* The copy is an object of our size: say so, or a consumer handing it on would make the
     * next reader trust the caller's size against our smaller buffer. */
    out->config.size = sizeof(ncclConfig_t);
    out->bytes_read = n;
    for (int f = 0; f < CP_NCCL_CFG_FIELD_COUNT; f++) {
        const struct cp_nccl_config_field_desc *d = &cp_config_fields[f];
        if (d->offset + d->size <= n && version >= d->since)
            out->present |= 1u << f;
        else
            cp_config_reset_field(&out->config, f);
    }
    return CP_NCCL_CONFIG_OK;
}

int cp_nccl_config_has(const cp_nccl_config_view *view, int f)
{
    if (view == NULL || f < 0 || f >= CP_NCCL_CFG_FIELD_COUNT)
        return 0;
    return (view->present >> f) & 1u;
}

unsigned int cp_nccl_config_field_since(int f)
{
    if (f < 0 || f >= CP_NCCL_CFG_FIELD_COUNT)
        return 0;
    return cp_config_fields[f].since;
}

const char *cp_nccl_config_field_name(int f)
{
    if (f < 0 || f >= CP_NCCL_CFG_FIELD_COUNT)
        return "?";
    return cp_config_fields[f].name;
}
