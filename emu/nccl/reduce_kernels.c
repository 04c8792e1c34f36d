/* reduce_kernels: NCCL's reduction functions, element by element, as its kernels compute
 * them (src/device/reduce_kernel.h).
 *
 * What has to match NCCL bit for bit: integers wrap (sums and products are unsigned
 * arithmetic), ncclAvg on integers is a wrapped sum divided once at the end with C's
 * truncation toward zero (FuncSumPostDiv), ncclAvg on floats multiplies every input by the
 * dtype's rounding of 1/n before summing (FuncPreMulSum), min/max of floats ignore a NaN
 * operand (fminf, __hmin), half and bfloat16 round each step to their own precision, and
 * fp8 computes in half and then rounds to fp8 (so fp8 sums round twice, as on sm90).
 * The accumulator is the caller's buffer of the dtype itself: each step rounds, as a ring
 * step on the GPU does.
 */
#include <math.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

/* ---- integers ---- */

#define CPN_INT_KERNELS(NAME, T, UT)                                                         \
    static void NAME##_first(T *acc, const T *src, size_t n, int kind, uint64_t s)           \
    {                                                                                        \
        if (kind == CPN_RED_PREMULSUM) {                                                     \
            UT us;                                                                           \
            memcpy(&us, &s, sizeof us);                                                      \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = (T)(UT)((UT)src[i] * us);                                           \
        } else if (acc != src) {                                                             \
            memmove(acc, src, n * sizeof(T));                                                \
        }                                                                                    \
    }                                                                                        \
    static void NAME##_accum(T *acc, const T *src, size_t n, int kind, uint64_t s)           \
    {                                                                                        \
        switch (kind) {                                                                      \
        case CPN_RED_SUM:                                                                    \
        case CPN_RED_SUMPOSTDIV:                                                             \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = (T)(UT)((UT)acc[i] + (UT)src[i]);                                   \
            break;                                                                           \
        case CPN_RED_PROD:                                                                   \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = (T)(UT)((UT)acc[i] * (UT)src[i]);                                   \
            break;                                                                           \
        case CPN_RED_MIN:                                                                    \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = src[i] < acc[i] ? src[i] : acc[i];                                  \
            break;                                                                           \
        case CPN_RED_MAX:                                                                    \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = src[i] > acc[i] ? src[i] : acc[i];                                  \
            break;                                                                           \
        case CPN_RED_PREMULSUM: {                                                            \
            UT us;                                                                           \
            memcpy(&us, &s, sizeof us);                                                      \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = (T)(UT)((UT)acc[i] + (UT)((UT)src[i] * us));                        \
            break;                                                                           \
        }                                                                                    \
        }                                                                                    \
    }                                                                                        \
    static void NAME##_postdiv(T *acc, size_t n, int divisor, int is_signed)                 \
    {                                                                                        \
        const UT top = (UT)((UT)1 << (sizeof(T) * 8 - 1));                                   \
        for (size_t i = 0; i < n; i++) {                                                     \
            UT x = (UT)acc[i];                                                               \
            int neg = is_signed && (x & top);                                                \
            UT mag = neg ? (UT)(0 - x) : x;                                                  \
            UT q = (UT)(mag / (UT)divisor);                                                  \
            acc[i] = (T)(neg ? (UT)(0 - q) : q);                                             \
        }                                                                                    \
    }

CPN_INT_KERNELS(k_i8, int8_t, uint8_t)
CPN_INT_KERNELS(k_u8, uint8_t, uint8_t)
CPN_INT_KERNELS(k_i32, int32_t, uint32_t)
CPN_INT_KERNELS(k_u32, uint32_t, uint32_t)
CPN_INT_KERNELS(k_i64, int64_t, uint64_t)
CPN_INT_KERNELS(k_u64, uint64_t, uint64_t)

/* ---- float and double: the hardware's own IEEE arithmetic ---- */

#define CPN_FLOAT_KERNELS(NAME, T, FMIN, FMAX)                                               \
    static void NAME##_first(T *acc, const T *src, size_t n, int kind, uint64_t s)           \
    {                                                                                        \
        if (kind == CPN_RED_PREMULSUM) {                                                     \
            T fs;                                                                            \
            memcpy(&fs, &s, sizeof fs);                                                      \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = src[i] * fs;                                                        \
        } else if (acc != src) {                                                             \
            memmove(acc, src, n * sizeof(T));                                                \
        }                                                                                    \
    }                                                                                        \
    static void NAME##_accum(T *acc, const T *src, size_t n, int kind, uint64_t s)           \
    {                                                                                        \
        switch (kind) {                                                                      \
        case CPN_RED_SUM:                                                                    \
        case CPN_RED_SUMPOSTDIV:                                                             \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = acc[i] + src[i];                                                    \
            break;                                                                           \
        case CPN_RED_PROD:                                                                   \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = acc[i] * src[i];                                                    \
            break;                                                                           \
        case CPN_RED_MIN:                                                                    \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = FMIN(acc[i], src[i]);                                               \
            break;                                                                           \
        case CPN_RED_MAX:                                                                    \
            for (size_t i = 0; i < n; i++)                                                   \
                acc[i] = FMAX(acc[i], src[i]);                                               \
            break;                                                                           \
        case CPN_RED_PREMULSUM: {                                                            \
            T fs;                                                                            \
            memcpy(&fs, &s, sizeof fs);                                                      \
            for (size_t i = 0; i < n; i++) {                                                 \
                T pre = src[i] * fs; /* rounded before the sum, as the kernel does */        \
                acc[i] = acc[i] + pre;                                                       \
            }                                                                                \
            break;                                                                           \
        }                                                                                    \
        }                                                                                    \
    }

CPN_FLOAT_KERNELS(k_f32, float, fminf, fmaxf)
CPN_FLOAT_KERNELS(k_f64, double, fmin, fmax)

/* ---- narrow floats: exact in double, then one rounding to the format ---- */

typedef double (*cpn_dec_fn)(const uint8_t *p);
typedef void (*cpn_enc_fn)(double x, uint8_t *p);

static double dec_half(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return cpn_half_to_double(v);
}
static double dec_bf16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return cpn_bf16_to_double(v);
}
static double dec_e4m3(const uint8_t *p) { return cpn_fp8_to_double(*p, 0); }
static double dec_e5m2(const uint8_t *p) { return cpn_fp8_to_double(*p, 1); }
static void enc_half(double x, uint8_t *p) { uint16_t v = cpn_double_to_half(x); memcpy(p, &v, 2); }
static void enc_bf16(double x, uint8_t *p) { uint16_t v = cpn_double_to_bf16(x); memcpy(p, &v, 2); }
/* fp8 arithmetic runs in half (__hadd(__half(x), __half(y))) and converts the half result */
static void enc_e4m3(double x, uint8_t *p)
{
    *p = cpn_double_to_fp8(cpn_half_to_double(cpn_double_to_half(x)), 0);
}
static void enc_e5m2(double x, uint8_t *p)
{
    *p = cpn_double_to_fp8(cpn_half_to_double(cpn_double_to_half(x)), 1);
}

static double narrow_apply(int kind, double a, double b)
{
    switch (kind) {
    case CPN_RED_PROD: return a * b;
    case CPN_RED_MIN: return fmin(a, b);
    case CPN_RED_MAX: return fmax(a, b);
    default: return a + b;
    }
}

static void narrow_first(uint8_t *acc, const uint8_t *src, size_t n, size_t es, int kind,
                         double scalar, cpn_dec_fn dec, cpn_enc_fn enc)
{
    if (kind != CPN_RED_PREMULSUM) {
        if (acc != src)
            memmove(acc, src, n * es);
        return;
    }
    for (size_t i = 0; i < n; i++)
        enc(dec(src + i * es) * scalar, acc + i * es);
}

static void narrow_accum(uint8_t *acc, const uint8_t *src, size_t n, size_t es, int kind,
                         double scalar, cpn_dec_fn dec, cpn_enc_fn enc)
{
    for (size_t i = 0; i < n; i++) {
        double b = dec(src + i * es);
        if (kind == CPN_RED_PREMULSUM) {
            uint8_t pre[2];
            enc(b * scalar, pre);       /* the pre-multiplied input is itself rounded */
            b = dec(pre);
        }
        enc(narrow_apply(kind, dec(acc + i * es), b), acc + i * es);
    }
}

/* The PreMulSum scalar of a narrow type, as the kernel widens it (exactly). */
static double narrow_scalar(int dtype, uint64_t bits)
{
    uint8_t b[8];
    memcpy(b, &bits, 8);
    switch (dtype) {
    case ncclFloat16: return dec_half(b);
    case ncclBfloat16: return dec_bf16(b);
    case ncclFloat8e4m3: return dec_e4m3(b);
    default: return dec_e5m2(b);
    }
}

static int narrow_fns(int dtype, cpn_dec_fn *dec, cpn_enc_fn *enc)
{
    switch (dtype) {
    case ncclFloat16: *dec = dec_half; *enc = enc_half; return 1;
    case ncclBfloat16: *dec = dec_bf16; *enc = enc_bf16; return 1;
    case ncclFloat8e4m3: *dec = dec_e4m3; *enc = enc_e4m3; return 1;
    case ncclFloat8e5m2: *dec = dec_e5m2; *enc = enc_e5m2; return 1;
    default: return 0;
    }
}

void cpn_reduce_first(void *acc, const void *src, size_t n, int dtype, const cpn_redop *op,
                      uint64_t s)
{
    int k = op->kind;
    switch (dtype) {
    case ncclInt8: k_i8_first(acc, src, n, k, s); return;
    case ncclUint8: k_u8_first(acc, src, n, k, s); return;
    case ncclInt32: k_i32_first(acc, src, n, k, s); return;
    case ncclUint32: k_u32_first(acc, src, n, k, s); return;
    case ncclInt64: k_i64_first(acc, src, n, k, s); return;
    case ncclUint64: k_u64_first(acc, src, n, k, s); return;
    case ncclFloat32: k_f32_first(acc, src, n, k, s); return;
    case ncclFloat64: k_f64_first(acc, src, n, k, s); return;
    default: {
        cpn_dec_fn dec;
        cpn_enc_fn enc;
        if (narrow_fns(dtype, &dec, &enc))
            narrow_first(acc, src, n, cpn_dtype_size(dtype), k, narrow_scalar(dtype, s), dec,
                         enc);
        return;
    }
    }
}

void cpn_reduce_accum(void *acc, const void *src, size_t n, int dtype, const cpn_redop *op,
                      uint64_t s)
{
    int k = op->kind;
    switch (dtype) {
    case ncclInt8: k_i8_accum(acc, src, n, k, s); return;
    case ncclUint8: k_u8_accum(acc, src, n, k, s); return;
    case ncclInt32: k_i32_accum(acc, src, n, k, s); return;
    case ncclUint32: k_u32_accum(acc, src, n, k, s); return;
    case ncclInt64: k_i64_accum(acc, src, n, k, s); return;
    case ncclUint64: k_u64_accum(acc, src, n, k, s); return;
    case ncclFloat32: k_f32_accum(acc, src, n, k, s); return;
    case ncclFloat64: k_f64_accum(acc, src, n, k, s); return;
    default: {
        cpn_dec_fn dec;
        cpn_enc_fn enc;
        if (narrow_fns(dtype, &dec, &enc))
            narrow_accum(acc, src, n, cpn_dtype_size(dtype), k, narrow_scalar(dtype, s), dec,
                         enc);
        return;
    }
    }
}

void cpn_reduce_finish(void *acc, size_t n, int dtype, const cpn_redop *op)
{
    if (op->kind != CPN_RED_SUMPOSTDIV || op->divisor <= 1)
        return;
    switch (dtype) {
    case ncclInt8: k_i8_postdiv(acc, n, op->divisor, 1); return;
    case ncclUint8: k_u8_postdiv(acc, n, op->divisor, 0); return;
    case ncclInt32: k_i32_postdiv(acc, n, op->divisor, 1); return;
    case ncclUint32: k_u32_postdiv(acc, n, op->divisor, 0); return;
    case ncclInt64: k_i64_postdiv(acc, n, op->divisor, 1); return;
    case ncclUint64: k_u64_postdiv(acc, n, op->divisor, 0); return;
    default: return;
    }
}

uint64_t cpn_scalar_for(const cpn_redop *op, int dtype)
{
    if (op->kind != CPN_RED_PREMULSUM)
        return 0;
    if (!op->scalar_is_ptr)
        return op->scalar_bits;
    /* ncclScalarDevice: NCCL's kernel reads the scalar when it runs, not at the call */
    uint64_t bits = 0;
    memcpy(&bits, op->scalar_ptr, cpn_dtype_size(dtype));
    return bits;
}
