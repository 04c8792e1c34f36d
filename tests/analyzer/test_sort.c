/* The analysis' sorts and selection (cpa_sort_kv, cpa_sort_doubles, cpa_select, cpa_smallest)
 * against plain references, and selection over NaNs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* The analyzer's sorts and selection against plain references: cpa_sort_kv stable (equal
 * keys in their order) with keys alike in some bytes, cpa_sort_doubles ascending with
 * negatives and both zeros, cpa_select the value sorting puts at k. */
static int cmp_ref_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void test_sorts_and_selection(void **state)
{
    (void)state;
    srand(7);
    const size_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 100, 257, 2000, 5001, 12000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        cpa_kv *kv = malloc((n + 1) * sizeof *kv), *tmp = malloc((n + 1) * sizeof *tmp);
        cpa_kv *ref = malloc((n + 1) * sizeof *ref);
        double *d = malloc((n + 1) * sizeof *d), *dr = malloc((n + 1) * sizeof *dr);
        for (size_t i = 0; i < n; i++) {
            /* few distinct keys (duplicates test stability), differing in low and high bytes */
            uint64_t k = (uint64_t)(rand() % 17);
            kv[i] = (cpa_kv){si % 2 ? k << 56 | 0x1234 : k * 0x10001, i};
            double x = (double)(rand() % 2001 - 1000) / 8.0;
            d[i] = i % 50 == 7 ? -0.0 : x;
            if (n == 5001) /* ascending, then a run all alike: the sample's band at its ends */
                d[i] = i < n / 2 ? (double)i : 3.0;
        }
        memcpy(ref, kv, n * sizeof *kv);
        for (size_t i = 1; i < n; i++) /* insertion: stable */
            for (size_t j = i; j > 0 && ref[j - 1].key > ref[j].key; j--) {
                cpa_kv t = ref[j];
                ref[j] = ref[j - 1];
                ref[j - 1] = t;
            }
        cpa_sort_kv(kv, tmp, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(kv[i].key, ref[i].key);
            assert_int_equal(kv[i].val, ref[i].val);
        }
        memcpy(dr, d, n * sizeof *d);
        qsort(dr, n, sizeof *dr, cmp_ref_double);
        for (size_t k = 0; k < n; k += n / 7 + 1) {
            double *v = malloc(n * sizeof *v);
            memcpy(v, d, n * sizeof *v);
            assert_true(cpa_select(v, n, k) == dr[k]);
            for (size_t i = 0; i < n; i++) /* and the rest on their sides of it */
                assert_true(i < k ? v[i] <= v[k] : i > k ? v[i] >= v[k] : 1);
            free(v);
        }
        assert_int_equal(cpa_sort_doubles(d, n), 0);
        for (size_t i = 0; i < n; i++)
            assert_true(d[i] == dr[i]);
        for (size_t i = 1; i < n; i++)
            assert_false(d[i - 1] == 0 && d[i] == 0 && signbit(d[i]) && !signbit(d[i - 1]));
        free(kv);
        free(tmp);
        free(ref);
        free(d);
        free(dr);
    }
}

/* A NaN (a forged trace can make one) orders with nothing: selection still ends, and
 * returns an element, wherever the NaNs are (the pivot's three places among them). */
static void test_selection_ends_with_nans(void **state)
{
    (void)state;
    const size_t n = 101;
    double v[101];
    for (int pattern = 0; pattern < 4; pattern++)
        for (size_t k = 0; k < n; k += 10) {
            for (size_t i = 0; i < n; i++) {
                int nan = pattern == 0   ? 1
                          : pattern == 1 ? i == 0 || i == n / 2 || i == n - 1
                          : pattern == 2 ? i % 2
                                         : i % 7 == 3;
                v[i] = nan ? NAN : (double)((i * 37) % 101);
            }
            double got = cpa_select(v, n, k);
            size_t found = 0;
            for (size_t i = 0; i < n; i++)
                found += isnan(got) || (double)((i * 37) % 101) == got;
            assert_true(found > 0);
        }
}

/* cpa_smallest: the k-th smallest of a stream, for every k below keep, equal to what sorting
 * the whole stream puts at k, however the values come (rising, falling, all alike, random
 * with repeats, NaNs mixed in, which it drops), across many spills. */
static void test_smallest_of_a_stream(void **state)
{
    (void)state;
    srand(11);
    const size_t n = 20000, keeps[] = {1, 3, 21, 500};
    double *all = malloc(n * sizeof *all), *ref = malloc(n * sizeof *ref);
    assert_non_null(all);
    assert_non_null(ref);
    for (int pattern = 0; pattern < 5; pattern++) {
        size_t nv = 0;
        for (size_t i = 0; i < n; i++) {
            double x = pattern == 0   ? (double)i
                       : pattern == 1 ? (double)(n - i)
                       : pattern == 2 ? 4.0
                       : pattern == 3 ? (double)(rand() % 300) - 150.0
                                      : (i % 9 == 4 ? NAN : (double)(rand() % 5000));
            all[i] = x;
            if (!isnan(x))
                ref[nv++] = x;
        }
        qsort(ref, nv, sizeof *ref, cmp_ref_double);
        for (size_t ki = 0; ki < sizeof keeps / sizeof keeps[0]; ki++) {
            cpa_smallest s;
            assert_int_equal(cpa_smallest_init(&s, keeps[ki]), 0);
            for (size_t i = 0; i < n; i++)
                cpa_smallest_add(&s, all[i]);
            assert_true(s.n <= s.cap);
            for (size_t k = 0; k < keeps[ki]; k++)
                assert_true(cpa_smallest_get(&s, k) == ref[k]);
            cpa_smallest_free(&s);
        }
    }
    free(all);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sorts_and_selection),
        cmocka_unit_test(test_selection_ends_with_nans),
        cmocka_unit_test(test_smallest_of_a_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
