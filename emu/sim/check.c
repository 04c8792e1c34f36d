/* check: --check's inputs, expected results and comparison.
 *
 * Every input element is a small integer (0..10), a hash of (sender rank, tag, index), where
 * the tag is the call's per-communicator seq (the same on every member) or, for Send/Recv, a
 * tag both ends derive from the schedule. Small integers keep every partial sum of up to 25
 * ranks exact even in bf16, so the result does not depend on the order NCCL (or the emulation)
 * adds in; the hash makes a block from the wrong rank or at the wrong offset differ in ~10 of
 * 11 elements. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "emu/sim/sim.h"

static const struct { const char *names[3]; size_t size; } dtypes[ncclNumTypes] = {
    [ncclInt8] = { { "int8", "char", NULL }, 1 },
    [ncclUint8] = { { "uint8", NULL, NULL }, 1 },
    [ncclInt32] = { { "int32", "int", NULL }, 4 },
    [ncclUint32] = { { "uint32", NULL, NULL }, 4 },
    [ncclInt64] = { { "int64", NULL, NULL }, 8 },
    [ncclUint64] = { { "uint64", NULL, NULL }, 8 },
    [ncclFloat16] = { { "fp16", "float16", "half" }, 2 },
    [ncclFloat32] = { { "fp32", "float32", "float" }, 4 },
    [ncclFloat64] = { { "fp64", "float64", "double" }, 8 },
    [ncclBfloat16] = { { "bf16", "bfloat16", NULL }, 2 },
    [ncclFloat8e4m3] = { { "fp8e4m3", "float8e4m3", NULL }, 1 },
    [ncclFloat8e5m2] = { { "fp8e5m2", "float8e5m2", NULL }, 1 },
};

size_t sim_dtype_size(ncclDataType_t t)
{
    return (unsigned)t < ncclNumTypes ? dtypes[t].size : 1;
}

int sim_dtype_parse(const char *s)
{
    for (int t = 0; t < ncclNumTypes; t++)
        for (int k = 0; k < 3 && dtypes[t].names[k]; k++)
            if (!strcasecmp(s, dtypes[t].names[k]))
                return t;
    return -1;
}

static const char *const redops[ncclNumOps] = { "sum", "prod", "max", "min", "avg" };

int sim_redop_parse(const char *s)
{
    for (int i = 0; i < ncclNumOps; i++)
        if (!strcasecmp(s, redops[i]))
            return i;
    return -1;
}

/* ---- element encoding ---- */

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even; our values never overflow */
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Inputs are integers 0..10, exact in fp16: only the normal range needs encoding. */
static uint16_t small_int_to_f16(double v)
{
    if (v == 0)
        return 0;
    int e;
    double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)lround((m * 2 - 1) * 1024);
    return (uint16_t)(((uint32_t)(e - 1 + 15) << 10) | (mant & 0x3ff));
}

static double f16_to_double(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0    ? ldexp(mant, -24)
               : exp == 31 ? (mant ? NAN : INFINITY)
                           : ldexp(mant + 1024, exp - 25);
    return (h & 0x8000) ? -v : v;
}

static int decodable(ncclDataType_t t)
{
    return (unsigned)t < ncclNumTypes && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

static void encode(ncclDataType_t t, void *base, size_t i, double v)
{
    char *p = (char *)base + i * sim_dtype_size(t);
    switch (t) {
    case ncclInt8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case ncclUint8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case ncclInt32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case ncclUint32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case ncclUint64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case ncclFloat16: { uint16_t x = small_int_to_f16(v); memcpy(p, &x, 2); break; }
    case ncclFloat32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case ncclFloat64: memcpy(p, &v, 8); break;
    case ncclBfloat16: { uint16_t x = f32_to_bf16((float)v); memcpy(p, &x, 2); break; }
    default: memset(p, (int)v, sim_dtype_size(t)); break;
    }
}

static double decode(ncclDataType_t t, const void *base, size_t i)
{
    const char *p = (const char *)base + i * sim_dtype_size(t);
    switch (t) {
    case ncclInt8: { int8_t x; memcpy(&x, p, 1); return x; }
    case ncclUint8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case ncclInt32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclFloat16: { uint16_t x; memcpy(&x, p, 2); return f16_to_double(x); }
    case ncclFloat32: { float x; memcpy(&x, p, 4); return x; }
    case ncclFloat64: { double x; memcpy(&x, p, 8); return x; }
    case ncclBfloat16: { uint16_t x; memcpy(&x, p, 2); return bf16_to_f32(x); }
    default: return NAN;
    }
}

static int is_float(ncclDataType_t t)
{
    return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

/* ---- what each op reads and writes ---- */

size_t sim_send_elems(const struct sim_call *c, int n, int me)
{
    switch (c->op) {
    case SIM_REDUCESCATTER:
    case SIM_ALLTOALL:
        return c->count * (size_t)n;
    case SIM_SCATTER:
        return me == c->root ? c->count * (size_t)n : 0;
    case SIM_BROADCAST:
        return me == c->root ? c->count : 0;
    case SIM_RECV:
        return 0;
    default:
        return c->count;
    }
}

size_t sim_recv_elems(const struct sim_call *c, int n, int me)
{
    switch (c->op) {
    case SIM_ALLGATHER:
    case SIM_ALLTOALL:
        return c->count * (size_t)n;
    case SIM_GATHER:
        return me == c->root ? c->count * (size_t)n : 0;
    case SIM_REDUCE:
        return me == c->root ? c->count : 0;
    case SIM_SEND:
        return 0;
    default:
        return c->count;
    }
}

int sim_checkable(const struct sim_call *c)
{
    return decodable(c->dtype) && (unsigned)c->redop < ncclNumOps;
}

static uint32_t mix(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* The value `rank` puts at index i of its send buffer for the call tagged `tag`. */
static double input(int rank, uint32_t tag, size_t i)
{
    uint32_t h = mix((uint32_t)rank * 0x9e3779b1u ^ mix(tag * 0x85ebca77u ^ (uint32_t)i) ^
                     (uint32_t)(i >> 32));
    return (double)(h % 11u);
}

void sim_fill(struct sim *s, const struct sim_call *c, uint32_t tag, void *host, size_t elems)
{
    const struct sim_comm *cm = &s->comms[c->comm];
    for (size_t i = 0; i < elems; i++)
        encode(c->dtype, host, i, input(cm->rank, tag, i));
}

static double reduce(const struct sim_call *c, int n, uint32_t tag, size_t i)
{
    double acc = input(0, tag, i);
    for (int r = 1; r < n; r++) {
        double v = input(r, tag, i);
        switch (c->redop) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (c->redop == ncclAvg)
        acc = is_float(c->dtype) ? acc / n : floor(acc / n);
    return acc;
}

/* The element at index i of this rank's recv buffer. */
static double expected(const struct sim_call *c, int n, int me, uint32_t tag, size_t i)
{
    size_t k = c->count ? i / c->count : 0, j = c->count ? i % c->count : 0;
    switch (c->op) {
    case SIM_ALLREDUCE:
    case SIM_REDUCE:
        return reduce(c, n, tag, i);
    case SIM_REDUCESCATTER:
        return reduce(c, n, tag, (size_t)me * c->count + i);
    case SIM_BROADCAST:
        return input(c->root, tag, i);
    case SIM_ALLGATHER:
    case SIM_GATHER:
        return input((int)k, tag, j);
    case SIM_ALLTOALL:
        return input((int)k, tag, (size_t)me * c->count + j);
    case SIM_SCATTER:
        return input(c->root, tag, (size_t)me * c->count + i);
    case SIM_RECV:
        return input(c->peer, tag, i);
    default:
        return NAN;
    }
}

static double tolerance(ncclDataType_t t, double want)
{
    double scale = fabs(want) > 1 ? fabs(want) : 1;
    switch (t) {
    case ncclFloat64: return 1e-12 * scale;
    case ncclFloat32: return 1e-6 * scale;
    case ncclFloat16: return 0x1p-10 * scale;
    case ncclBfloat16: return 0x1p-7 * scale;
    default: return 0;
    }
}

void sim_verify(struct sim *s, const struct sim_call *c, uint32_t tag, uint64_t seq,
                const void *host, size_t elems)
{
    const struct sim_comm *cm = &s->comms[c->comm];
    if (s->first_failure.failed)
        return;
    for (size_t i = 0; i < elems; i++) {
        double got = decode(c->dtype, host, i), want = expected(c, cm->size, cm->rank, tag, i);
        /* integer results wider than a double's mantissa are compared as doubles; our inputs
         * keep every sum far below 2^53, so that is exact */
        if (!(fabs(got - want) <= tolerance(c->dtype, want))) {
            struct sim_check_failure *f = &s->first_failure;
            f->failed = 1;
            f->step = s->step;
            f->op = c->op;
            f->comm = c->comm;
            f->seq = seq;
            f->index = i;
            f->got = got;
            f->expected = want;
            return;
        }
    }
}
