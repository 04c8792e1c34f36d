/* convert: NCCL's element types and the narrow float formats (half, bfloat16, fp8).
 *
 * A GPU rounds every narrow result to nearest-even, so the emulation must too or a sum of
 * halves would differ from NCCL's in the last bit. Results are computed exactly in double
 * (a sum or product of two narrow values fits double's 53 bits closely enough that one
 * rounding of the double equals rounding the exact value: 53 >= 2p+2 for p <= 24) and
 * rounded once here. Special values follow the CUDA headers: NaN becomes the canonical
 * 0x7fff (half, bf16) or 0x7f (fp8), and fp8 saturates to its largest finite value
 * (__NV_SATFINITE, what __nv_fp8_e4m3(half) does).
 */
#include <math.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

size_t cpn_dtype_size(int dtype)
{
    switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

int cpn_dtype_is_float(int dtype)
{
    return dtype == ncclFloat16 || dtype == ncclFloat32 || dtype == ncclFloat64 ||
           dtype == ncclBfloat16 || dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2;
}

/* |x| (finite, > 0) rounded to nearest-even with `mbits` fraction bits and smallest normal
 * exponent `emin`: the biased exponent field and fraction. An exponent field past the
 * format's largest is left to the caller (overflow). */
static void round_fields(double ax, int mbits, int emin, int bias, uint32_t *efield,
                         uint32_t *frac)
{
    int e;
    (void)frexp(ax, &e);
    int lead = e - 1;
    if (lead < emin)
        lead = emin;                           /* subnormal: the quantum stops shrinking */
    double r = nearbyint(ldexp(ax, mbits - lead)); /* scaling by 2^k is exact */
    uint64_t m = (uint64_t)r;
    if (m >= (2ull << mbits)) {                 /* rounded up into the next binade */
        m >>= 1;
        lead++;
    }
    if (m < (1ull << mbits)) {
        *efield = 0;
        *frac = (uint32_t)m;
    } else {
        *efield = (uint32_t)(lead + bias);
        *frac = (uint32_t)(m - (1ull << mbits));
    }
}

uint16_t cpn_double_to_half(double x)
{
    if (isnan(x))
        return 0x7fff;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double ax = fabs(x);
    if (ax == 0.0)
        return sign;
    if (isinf(ax))
        return sign | 0x7c00;
    uint32_t e, f;
    round_fields(ax, 10, -14, 15, &e, &f);
    if (e >= 31)
        return sign | 0x7c00;                  /* overflow: __float2half_rn gives inf */
    return (uint16_t)(sign | (e << 10) | f);
}

double cpn_half_to_double(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    double v;
    if (e == 0x1f)
        v = f ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)f, -24);
    else
        v = ldexp((double)(f | 0x400), e - 25);
    return sign ? -v : v;
}

uint16_t cpn_double_to_bf16(double x)
{
    if (isnan(x))
        return 0x7fff;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double ax = fabs(x);
    if (ax == 0.0)
        return sign;
    if (isinf(ax))
        return sign | 0x7f80;
    uint32_t e, f;
    round_fields(ax, 7, -126, 127, &e, &f);
    if (e >= 255)
        return sign | 0x7f80;
    return (uint16_t)(sign | (e << 7) | f);
}

double cpn_bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

uint8_t cpn_double_to_fp8(double x, int e5m2)
{
    if (isnan(x))
        return 0x7f;                           /* both kinds: the canonical NaN, no sign */
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double ax = fabs(x);
    const int mbits = e5m2 ? 2 : 3, emin = e5m2 ? -14 : -6, bias = e5m2 ? 15 : 7;
    const uint8_t maxnorm = e5m2 ? 0x7b : 0x7e;   /* 57344, 448 */
    if (ax == 0.0)
        return sign;
    if (isinf(ax))
        return sign | maxnorm;
    uint32_t e, f;
    round_fields(ax, mbits, emin, bias, &e, &f);
    uint32_t bits = (e << mbits) | f;
    /* past the largest finite value (e5m2: the inf/NaN exponent; e4m3: 0x7f is NaN) */
    if (bits > maxnorm)
        bits = maxnorm;
    return (uint8_t)(sign | bits);
}

double cpn_fp8_to_double(uint8_t v, int e5m2)
{
    int sign = v >> 7;
    double r;
    if (e5m2) {
        return cpn_half_to_double((uint16_t)((uint16_t)v << 8));
    } else {
        int e = (v >> 3) & 0xf, f = v & 7;
        if ((v & 0x7f) == 0x7f)
            return NAN;
        if (e == 0)
            r = ldexp((double)f, -9);
        else
            r = ldexp((double)(f | 8), e - 10);
    }
    return sign ? -r : r;
}

double cpn_elem_to_double(const void *p, int dtype)
{
    switch (dtype) {
    case ncclInt8: { int8_t v; memcpy(&v, p, 1); return v; }
    case ncclUint8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case ncclInt32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ncclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ncclInt64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case ncclUint64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case ncclFloat16: { uint16_t v; memcpy(&v, p, 2); return cpn_half_to_double(v); }
    case ncclFloat32: { float v; memcpy(&v, p, 4); return v; }
    case ncclFloat64: { double v; memcpy(&v, p, 8); return v; }
    case ncclBfloat16: { uint16_t v; memcpy(&v, p, 2); return cpn_bf16_to_double(v); }
    case ncclFloat8e4m3: { uint8_t v; memcpy(&v, p, 1); return cpn_fp8_to_double(v, 0); }
    case ncclFloat8e5m2: { uint8_t v; memcpy(&v, p, 1); return cpn_fp8_to_double(v, 1); }
    default: return 0.0;
    }
}

void cpn_double_to_elem(double x, void *p, int dtype)
{
    switch (dtype) {
    case ncclInt8: { int8_t v = (int8_t)(int64_t)x; memcpy(p, &v, 1); break; }
    case ncclUint8: { uint8_t v = (uint8_t)(int64_t)x; memcpy(p, &v, 1); break; }
    case ncclInt32: { int32_t v = (int32_t)(int64_t)x; memcpy(p, &v, 4); break; }
    case ncclUint32: { uint32_t v = (uint32_t)(int64_t)x; memcpy(p, &v, 4); break; }
    case ncclInt64: { int64_t v = (int64_t)x; memcpy(p, &v, 8); break; }
    case ncclUint64: { uint64_t v = x < 0 ? (uint64_t)(int64_t)x : (uint64_t)x;
                       memcpy(p, &v, 8); break; }
    case ncclFloat16: { uint16_t v = cpn_double_to_half(x); memcpy(p, &v, 2); break; }
    case ncclFloat32: { float v = (float)x; memcpy(p, &v, 4); break; }
    case ncclFloat64: memcpy(p, &x, 8); break;
    case ncclBfloat16: { uint16_t v = cpn_double_to_bf16(x); memcpy(p, &v, 2); break; }
    case ncclFloat8e4m3: { uint8_t v = cpn_double_to_fp8(x, 0); memcpy(p, &v, 1); break; }
    case ncclFloat8e5m2: { uint8_t v = cpn_double_to_fp8(x, 1); memcpy(p, &v, 1); break; }
    default: break;
    }
}
