/* The emulated NCCL's element conversions and reduction kernels, against values worked out
 * by hand from the IEEE formats and from NCCL's kernels (src/device/reduce_kernel.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

static void half_rounds_to_nearest_even(void **state)
{
    (void)state;
    assert_int_equal(cpn_double_to_half(1.0), 0x3c00);
    assert_int_equal(cpn_double_to_half(-2.0), 0xc000);
    assert_int_equal(cpn_double_to_half(-0.0), 0x8000);
    assert_int_equal(cpn_double_to_half(65504.0), 0x7bff);
    assert_int_equal(cpn_double_to_half(65519.0), 0x7bff);     /* below the midpoint */
    assert_int_equal(cpn_double_to_half(65520.0), 0x7c00);     /* midpoint: to even = inf */
    assert_int_equal(cpn_double_to_half(1.0 + ldexp(1, -11)), 0x3c00);       /* tie, even */
    assert_int_equal(cpn_double_to_half(1.0 + 3 * ldexp(1, -11)), 0x3c02);   /* tie, up */
    assert_int_equal(cpn_double_to_half(ldexp(1, -24)), 0x0001);  /* smallest subnormal */
    assert_int_equal(cpn_double_to_half(ldexp(1, -25)), 0x0000);  /* tie to even zero */
    assert_int_equal(cpn_double_to_half(3 * ldexp(1, -26)), 0x0001);
    assert_int_equal(cpn_double_to_half(ldexp(1023, -24) + ldexp(1, -25)), 0x0400); /* to normal */
    assert_int_equal(cpn_double_to_half(NAN), 0x7fff);
    assert_int_equal(cpn_double_to_half(-INFINITY), 0xfc00);
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue;   /* NaNs come back canonical */
        assert_int_equal(cpn_double_to_half(cpn_half_to_double((uint16_t)h)), h);
    }
}

static void bf16_rounds_to_nearest_even(void **state)
{
    (void)state;
    assert_int_equal(cpn_double_to_bf16(1.0), 0x3f80);
    assert_int_equal(cpn_double_to_bf16(1.0 + ldexp(1, -8)), 0x3f80);
    assert_int_equal(cpn_double_to_bf16(1.0 + 3 * ldexp(1, -8)), 0x3f82);
    assert_int_equal(cpn_double_to_bf16(3.3895313892515355e38), 0x7f7f);
    assert_int_equal(cpn_double_to_bf16(3.4e38), 0x7f80);
    assert_int_equal(cpn_double_to_bf16(NAN), 0x7fff);
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
            continue;
        assert_int_equal(cpn_double_to_bf16(cpn_bf16_to_double((uint16_t)b)), b);
    }
}

static void fp8_saturates_and_rounds(void **state)
{
    (void)state;
    /* e4m3: max 448, no infinity; SATFINITE clamps, NaN is 0x7f */
    assert_int_equal(cpn_double_to_fp8(1.0, 0), 0x38);
    assert_int_equal(cpn_double_to_fp8(448.0, 0), 0x7e);
    assert_int_equal(cpn_double_to_fp8(464.0, 0), 0x7e);    /* midpoint: even is 448 */
    assert_int_equal(cpn_double_to_fp8(470.0, 0), 0x7e);    /* would be 480: saturated */
    assert_int_equal(cpn_double_to_fp8(-1e9, 0), 0xfe);
    assert_int_equal(cpn_double_to_fp8(INFINITY, 0), 0x7e);
    assert_int_equal(cpn_double_to_fp8(NAN, 0), 0x7f);
    assert_int_equal(cpn_double_to_fp8(ldexp(1, -9), 0), 0x01);
    assert_int_equal(cpn_double_to_fp8(ldexp(1, -10), 0), 0x00);
    assert_int_equal(cpn_double_to_fp8(1.0625, 0), 0x38);    /* tie between 1 and 1.125 */
    assert_int_equal(cpn_double_to_fp8(1.1875, 0), 0x3a);    /* tie between 1.125 and 1.25 */
    /* e5m2: max 57344 */
    assert_int_equal(cpn_double_to_fp8(1.0, 1), 0x3c);
    assert_int_equal(cpn_double_to_fp8(57344.0, 1), 0x7b);
    assert_int_equal(cpn_double_to_fp8(61440.0, 1), 0x7b);
    assert_int_equal(cpn_double_to_fp8(-INFINITY, 1), 0xfb);
    assert_true(isnan(cpn_fp8_to_double(0x7f, 0)));
    assert_true(isinf(cpn_fp8_to_double(0x7c, 1)));
    for (int e5 = 0; e5 < 2; e5++)
        for (uint32_t v = 0; v < 256; v++) {
            double d = cpn_fp8_to_double((uint8_t)v, e5);
            if (isnan(d) || isinf(d))
                continue;
            assert_int_equal(cpn_double_to_fp8(d, e5), v);
        }
}

static cpn_redop red(int kind)
{
    cpn_redop r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    return r;
}

static void integers_wrap_like_the_gpu(void **state)
{
    (void)state;
    int8_t a[3] = {100, -128, 5}, b[3] = {100, -1, -7};
    cpn_redop sum = red(CPN_RED_SUM);
    cpn_reduce_accum(a, b, 3, ncclInt8, &sum, 0);
    assert_int_equal(a[0], -56);
    assert_int_equal(a[1], 127);
    assert_int_equal(a[2], -2);
    uint8_t u[2] = {16, 255}, v[2] = {16, 2};
    cpn_redop prod = red(CPN_RED_PROD);
    cpn_reduce_accum(u, v, 2, ncclUint8, &prod, 0);
    assert_int_equal(u[0], 0);
    assert_int_equal(u[1], 254);
    int32_t m[2] = {-5, 7}, n[2] = {3, -9};
    cpn_redop mn = red(CPN_RED_MIN), mx = red(CPN_RED_MAX);
    cpn_reduce_accum(m, n, 2, ncclInt32, &mn, 0);
    assert_int_equal(m[0], -5);
    assert_int_equal(m[1], -9);
    uint32_t p[1] = {0xffffffffu}, q[1] = {1};
    cpn_reduce_accum(p, q, 1, ncclUint32, &mx, 0);
    assert_true(p[0] == 0xffffffffu);
    int64_t big[1] = {INT64_MAX}, one[1] = {1};
    cpn_reduce_accum(big, one, 1, ncclInt64, &sum, 0);
    assert_true(big[0] == INT64_MIN);
}

static void average_of_integers_divides_once_toward_zero(void **state)
{
    (void)state;
    cpn_redop avg = red(CPN_RED_SUMPOSTDIV);
    avg.divisor = 2;
    int32_t a[3] = {-4, 3, 7}, b[3] = {-3, 4, 0};
    cpn_reduce_first(a, a, 3, ncclInt32, &avg, 0);
    cpn_reduce_accum(a, b, 3, ncclInt32, &avg, 0);
    cpn_reduce_finish(a, 3, ncclInt32, &avg);
    assert_int_equal(a[0], -3);    /* -7 / 2 */
    assert_int_equal(a[1], 3);
    assert_int_equal(a[2], 3);
    int8_t c[1] = {-128}, d[1] = {0};
    avg.divisor = 3;
    cpn_reduce_accum(c, d, 1, ncclInt8, &avg, 0);
    cpn_reduce_finish(c, 1, ncclInt8, &avg);
    assert_int_equal(c[0], -42);
    uint64_t e[1] = {UINT64_MAX}, f[1] = {0};
    avg.divisor = 2;
    cpn_reduce_accum(e, f, 1, ncclUint64, &avg, 0);
    cpn_reduce_finish(e, 1, ncclUint64, &avg);
    assert_true(e[0] == UINT64_MAX / 2);
}

static void floats_follow_ieee_and_ignore_nan_in_min_max(void **state)
{
    (void)state;
    float a[3] = {1.5f, NAN, 2.0f}, b[3] = {2.25f, 3.0f, NAN};
    cpn_redop mn = red(CPN_RED_MIN), sum = red(CPN_RED_SUM);
    cpn_reduce_accum(a, b, 3, ncclFloat32, &mn, 0);
    assert_true(a[0] == 1.5f && a[1] == 3.0f && a[2] == 2.0f);
    double x[1] = {0.1}, y[1] = {0.2};
    cpn_reduce_accum(x, y, 1, ncclFloat64, &sum, 0);
    assert_true(x[0] == 0.1 + 0.2);
    float big[1] = {16777216.0f}, one[1] = {1.0f};
    cpn_reduce_accum(big, one, 1, ncclFloat32, &sum, 0);
    assert_true(big[0] == 16777216.0f);   /* each step rounds to float */
}

static void narrow_sums_round_each_step(void **state)
{
    (void)state;
    cpn_redop sum = red(CPN_RED_SUM);
    uint16_t h[1] = {cpn_double_to_half(2048.0)}, o[1] = {cpn_double_to_half(1.0)};
    cpn_reduce_accum(h, o, 1, ncclFloat16, &sum, 0);
    cpn_reduce_accum(h, o, 1, ncclFloat16, &sum, 0);
    assert_true(cpn_half_to_double(h[0]) == 2048.0);   /* 2049 ties to even, twice */
    uint16_t b[1] = {cpn_double_to_bf16(256.0)}, c[1] = {cpn_double_to_bf16(1.5)};
    cpn_reduce_accum(b, c, 1, ncclBfloat16, &sum, 0);
    assert_true(cpn_bf16_to_double(b[0]) == 258.0);    /* 257.5 rounds to 258 */
    /* fp8 adds in half then converts: 1 + 0.0625 is exact in half, a tie in e4m3 */
    uint8_t e[1] = {cpn_double_to_fp8(1.0, 0)}, f[1] = {cpn_double_to_fp8(0.0625, 0)};
    cpn_reduce_accum(e, f, 1, ncclFloat8e4m3, &sum, 0);
    assert_int_equal(e[0], 0x38);
    uint8_t g[1] = {cpn_double_to_fp8(448.0, 0)}, k[1] = {cpn_double_to_fp8(448.0, 0)};
    cpn_reduce_accum(g, k, 1, ncclFloat8e4m3, &sum, 0);
    assert_int_equal(g[0], 0x7e);                     /* saturates, no NaN */
    cpn_redop mx = red(CPN_RED_MAX);
    uint8_t m[1] = {0x7f}, n[1] = {cpn_double_to_fp8(2.0, 1)};
    cpn_reduce_accum(m, n, 1, ncclFloat8e5m2, &mx, 0);
    assert_true(cpn_fp8_to_double(m[0], 1) == 2.0);   /* __hmax ignores a NaN operand */
}

static void premulsum_multiplies_each_input_in_its_type(void **state)
{
    (void)state;
    cpn_redop pm = red(CPN_RED_PREMULSUM);
    float s = 0.5f;
    uint64_t bits = 0;
    memcpy(&bits, &s, sizeof s);
    float a[2] = {3.0f, -1.0f}, b[2] = {5.0f, 4.0f}, acc[2];
    cpn_reduce_first(acc, a, 2, ncclFloat32, &pm, bits);
    cpn_reduce_accum(acc, b, 2, ncclFloat32, &pm, bits);
    assert_true(acc[0] == 4.0f && acc[1] == 1.5f);
    int32_t i[1] = {7}, j[1] = {-2}, iacc[1];
    uint64_t three = 3;
    cpn_reduce_first(iacc, i, 1, ncclInt32, &pm, three);
    cpn_reduce_accum(iacc, j, 1, ncclInt32, &pm, three);
    assert_int_equal(iacc[0], 15);
    uint16_t hs = cpn_double_to_half(1.0 / 3.0);
    uint16_t h[1] = {cpn_double_to_half(3.0)}, hacc[1];
    cpn_reduce_first(hacc, h, 1, ncclFloat16, &pm, hs);
    /* 3 * half(1/3) = 3 * 0.333251953125 = 1 - 2^-12: a tie in half, rounded to even 1.0 */
    assert_true(cpn_half_to_double(hs) == 0.333251953125);
    assert_true(cpn_half_to_double(hacc[0]) == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half_rounds_to_nearest_even),
        cmocka_unit_test(bf16_rounds_to_nearest_even),
        cmocka_unit_test(fp8_saturates_and_rounds),
        cmocka_unit_test(integers_wrap_like_the_gpu),
        cmocka_unit_test(average_of_integers_divides_once_toward_zero),
        cmocka_unit_test(floats_follow_ieee_and_ignore_nan_in_min_max),
        cmocka_unit_test(narrow_sums_round_each_step),
        cmocka_unit_test(premulsum_multiplies_each_input_in_its_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
