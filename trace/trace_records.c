/* trace_records: the names of the format's enums, the variable-record builders and the
 * format's hash. */
#include "trace/trace_format.h"
#include "trace/trace_hash.h"
#include "trace/trace_writer.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The only inclusion of xxHash's body in collprof (see trace_hash.h). */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t cp_trace_hash(const void *data, size_t len) { return XXH3_64bits(data, len); }

/* Names as NCCL spells its entry points, without the "nccl" prefix. */
static const char *const op_names[CP_OP_COUNT] = {
    [CP_OP_NONE] = "None",
    [CP_OP_ALLREDUCE] = "AllReduce",
    [CP_OP_BROADCAST] = "Broadcast",
    [CP_OP_REDUCE] = "Reduce",
    [CP_OP_ALLGATHER] = "AllGather",
    [CP_OP_REDUCESCATTER] = "ReduceScatter",
    [CP_OP_ALLTOALL] = "AlltoAll",
    [CP_OP_GATHER] = "Gather",
    [CP_OP_SCATTER] = "Scatter",
    [CP_OP_SEND] = "Send",
    [CP_OP_RECV] = "Recv",
    [CP_OP_GROUP_START] = "GroupStart",
    [CP_OP_GROUP_END] = "GroupEnd",
    [CP_OP_COMM_INIT] = "CommInit",
    [CP_OP_COMM_SPLIT] = "CommSplit",
    [CP_OP_COMM_SHRINK] = "CommShrink",
    [CP_OP_COMM_FINALIZE] = "CommFinalize",
    [CP_OP_COMM_DESTROY] = "CommDestroy",
    [CP_OP_COMM_ABORT] = "CommAbort",
    [CP_OP_COMM_REVOKE] = "CommRevoke",
};

const char *cp_op_name(unsigned op) { return op < CP_OP_COUNT ? op_names[op] : "?"; }

int cp_op_from_name(const char *name)
{
    if (!name)
        return -1;
    /* Users type op filters by hand: any case, and NCCL's ncclBcast alias. */
    for (int op = 0; op < CP_OP_COUNT; op++)
        if (strcasecmp(name, op_names[op]) == 0)
            return op;
    if (strcasecmp(name, "Bcast") == 0)
        return CP_OP_BROADCAST;
    return -1;
}

/* Indexed by ncclDataType_t: NCCL's own numbering, 0..11. */
static const char *const dtype_names[CP_DTYPE_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2",
};

const char *cp_dtype_name(unsigned dtype) { return dtype < CP_DTYPE_COUNT ? dtype_names[dtype] : "?"; }

/* ncclRedOp_t's built-in numbers, then every dynamic (PreMulSum) op as one. */
static const char *const redop_names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};

const char *cp_redop_name(unsigned redop)
{
    if (redop < sizeof redop_names / sizeof redop_names[0])
        return redop_names[redop];
    return redop == CP_REDOP_NONE ? "none" : "?";
}

const char *cp_lost_cause_name(unsigned cause)
{
    static const char *const names[CP_LOST_CAUSE_LAST + 1] = {
        [CP_LOST_RING_FULL] = "ring_full", [CP_LOST_WRITE_ERROR] = "write_error",
        [CP_LOST_TOO_BIG] = "too_big",     [CP_LOST_NO_MEMORY] = "no_memory",
        [CP_LOST_AT_END] = "at_end",       [CP_LOST_WRITE_STALLED] = "write_stalled",
        [CP_LOST_ROTATED] = "rotated"};
    return cause <= CP_LOST_CAUSE_LAST ? names[cause] : NULL;
}

const char *cp_untimed_cause_name(unsigned cause)
{
    static const char *const names[CP_UNTIMED_CAUSE_LAST + 1] = {
        [CP_UNTIMED_EVENT_POOL] = "event_pool",
        [CP_UNTIMED_PLUGIN_POOL] = "plugin_pool",
        [CP_UNTIMED_GROUP] = "group",
        [CP_UNTIMED_NO_CONTEXT] = "no_context"};
    return cause >= 1 && cause <= CP_UNTIMED_CAUSE_LAST ? names[cause] : NULL;
}

static const char *const record_type_names[CP_REC_TYPE_MAX_KNOWN + 1] = {
    [CP_REC_PROCESS] = "PROCESS", [CP_REC_COMM] = "COMM", [CP_REC_SITE] = "SITE",
    [CP_REC_CALL] = "CALL",       [CP_REC_DONE] = "DONE", [CP_REC_CLOCK] = "CLOCK",
    [CP_REC_LOST] = "LOST",       [CP_REC_HANG] = "HANG", [CP_REC_END] = "END",
    [CP_REC_NCCL_OP] = "NCCL_OP", [CP_REC_KNAME] = "KNAME", [CP_REC_KERNELS] = "KERNELS",
    [CP_REC_UNTIMED] = "UNTIMED",
    [CP_REC_SEGMENT] = "SEGMENT",
};

/* NCCL's own spellings (ncclAlgoToString, ncclProtoToString), index = enum cp_algo/proto. */
static const char *const algo_names[CP_ALGO_COUNT] = {
    "?", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char *const proto_names[CP_PROTO_COUNT] = {"?", "LL", "LL128", "SIMPLE"};

const char *cp_algo_name(unsigned algo) { return algo < CP_ALGO_COUNT ? algo_names[algo] : "?"; }

const char *cp_proto_name(unsigned proto)
{
    return proto < CP_PROTO_COUNT ? proto_names[proto] : "?";
}

int cp_algo_from_name(const char *name)
{
    for (int i = 1; name && i < CP_ALGO_COUNT; i++)
        if (strcmp(name, algo_names[i]) == 0)
            return i;
    return CP_ALGO_UNKNOWN;
}

int cp_proto_from_name(const char *name)
{
    for (int i = 1; name && i < CP_PROTO_COUNT; i++)
        if (strcmp(name, proto_names[i]) == 0)
            return i;
    return CP_PROTO_UNKNOWN;
}

const char *cp_record_type_name(unsigned type)
{
    return type <= CP_REC_TYPE_MAX_KNOWN ? record_type_names[type] : NULL;
}

int cp_op_is_collective(unsigned op) { return op >= CP_OP_ALLREDUCE && op <= CP_OP_SCATTER; }

int cp_op_is_p2p(unsigned op) { return op == CP_OP_SEND || op == CP_OP_RECV; }

/* The largest record a u16 size can describe while staying a multiple of 8. */
#define CP_RECORD_MAX_BYTES 65528u

static size_t string_bytes(const char *s)
{
    size_t n = s ? strnlen(s, CP_STRING_MAX) : 0;
    return n;
}

/* Appends the u16-length strings after a record's fixed part; `total` was computed by
 * the caller, so everything fits. Returns the padded record size. */
static size_t put_strings(unsigned char *rec, size_t fixed, const char *const *strs, unsigned n)
{
    size_t pos = fixed;
    for (unsigned i = 0; i < n; i++) {
        size_t len = string_bytes(strs[i]);
        uint16_t len16 = (uint16_t)len;
        memcpy(rec + pos, &len16, sizeof len16);
        if (len)
            memcpy(rec + pos + 2, strs[i], len);
        pos += 2 + len;
    }
    size_t size = (pos + 7) & ~(size_t)7;
    memset(rec + pos, 0, size - pos);
    return size;
}

static size_t strings_size(size_t fixed, const char *const *strs, unsigned n)
{
    size_t pos = fixed;
    for (unsigned i = 0; i < n; i++)
        pos += 2 + string_bytes(strs[i]);
    return (pos + 7) & ~(size_t)7;
}

size_t cp_rec_site_build(void *buf, size_t cap, uint32_t site_index, uint64_t return_addr,
                         const char *const *frames, unsigned frame_count)
{
    if (!buf || (frame_count && !frames) || frame_count > UINT16_MAX)
        return 0;
    size_t size = strings_size(sizeof(cp_rec_site), frames, frame_count);
    if (size > cap || size > CP_RECORD_MAX_BYTES)
        return 0;
    cp_rec_site fixed;
    memset(&fixed, 0, sizeof fixed);
    fixed.h.type = CP_REC_SITE;
    fixed.h.size = (uint16_t)size;
    fixed.site_index = site_index;
    fixed.return_addr = return_addr;
    fixed.frame_count = (uint16_t)frame_count;
    memcpy(buf, &fixed, sizeof fixed);
    return put_strings(buf, sizeof fixed, frames, frame_count);
}

size_t cp_rec_process_build(void *buf, size_t cap, const cp_rec_process *fixed,
                            const char *hostname, const char *job_id, const char *launcher)
{
    if (!buf || !fixed)
        return 0;
    const char *const strs[3] = {hostname, job_id, launcher};
    /* Trailing absent strings are left out; an absent one before a present one is "". */
    unsigned n = 3;
    while (n > 0 && !strs[n - 1])
        n--;
    size_t size = strings_size(sizeof(cp_rec_process), strs, n);
    if (size > cap || size > CP_RECORD_MAX_BYTES)
        return 0;
    cp_rec_process rec = *fixed;
    rec.h.type = CP_REC_PROCESS;
    rec.h.size = (uint16_t)size;
    rec.string_count = (uint16_t)n;
    rec.reserved0 = 0;
    memcpy(buf, &rec, sizeof rec);
    return put_strings(buf, sizeof rec, strs, n);
}

/* ".s" and six digits: segment numbers sort as names up to 999999, and a segment's name
 * still ends in the suffix every tool looks for. */
#define SEG_TAG ".s"

int cp_trace_segment_path(char *out, size_t cap, const char *path, unsigned segment)
{
    /* no stdio: the writer names its next segment here, maybe in a fatal signal's flush */
    size_t n = strlen(path), suffix = strlen(CP_TRACE_FILE_SUFFIX);
    size_t stem = n >= suffix && strcmp(path + n - suffix, CP_TRACE_FILE_SUFFIX) == 0
                      ? n - suffix : n;
    char digits[16];
    size_t d = 0;
    for (unsigned v = segment; segment && (v || d < 6); v /= 10)
        digits[d++] = (char)('0' + v % 10);
    size_t tag = segment ? strlen(SEG_TAG) + d : 0;
    if (n + tag + 1 > cap)
        return -1;
    memmove(out, path, stem);
    size_t at = stem;
    if (segment) {
        memcpy(out + at, SEG_TAG, strlen(SEG_TAG));
        at += strlen(SEG_TAG);
        while (d)
            out[at++] = digits[--d];
    }
    memcpy(out + at, path + stem, n - stem + 1);
    return 0;
}

long cp_trace_segment_of(const char *path, size_t *family_len)
{
    size_t n = strlen(path), suffix = strlen(CP_TRACE_FILE_SUFFIX);
    size_t stem = n >= suffix && strcmp(path + n - suffix, CP_TRACE_FILE_SUFFIX) == 0
                      ? n - suffix : n;
    *family_len = stem;
    /* back over the digits, then the tag: at least six digits, as the writer names them */
    size_t d = stem;
    while (d > 0 && path[d - 1] >= '0' && path[d - 1] <= '9')
        d--;
    size_t tag = strlen(SEG_TAG);
    if (stem - d < 6 || stem - d > 9 || d < tag + 1 || memcmp(path + d - tag, SEG_TAG, tag) != 0)
        return 0;
    long seg = 0;
    for (size_t i = d; i < stem; i++)
        seg = seg * 10 + (path[i] - '0');
    if (seg == 0)
        return 0; /* segment 0 never has a tag: this is some other name */
    *family_len = d - tag;
    return seg;
}
