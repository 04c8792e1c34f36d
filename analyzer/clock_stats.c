/* analyzer/clock_stats.c: the small statistics the clock's stages share (clock_internal.h),
 * below clock.c, clock_solve.c and clock_gpu.c. */
#include <math.h>

#include "analyzer/clock_internal.h"

/* Nearest rank: the ceil(0.9 n)-th smallest. */
double cpa_clk_p90(double *v, size_t n)
{
    size_t k = (size_t)ceil(0.9 * (double)n);
    return cpa_select(v, n, k ? k - 1 : 0);
}

/* Where an operation's ends agree: the median of the largest group lying within 2 x
 * CPA_CLK_AGREE_NS, reordering v. Good references agree to microseconds and bad ones are each
 * off by their own milliseconds, so when two ranks of four have bad references at once the
 * good pair still agrees, where a median would split the difference and blame all four. With
 * no single largest group (two ranks; four each on its own; two pairs), the median, halfway
 * between the middle two: nothing says which side is right. */
double cpa_clk_consensus(double *v, size_t n)
{
    /* Most operations' ends all agree: then the largest group is all of them, alone, and its
     * median is the lower median, found without the sort. */
    double lo = n ? v[0] : 0, hi = lo;
    for (size_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    if (n && hi - lo <= 2 * CPA_CLK_AGREE_NS)
        return cpa_select(v, n, (n - 1) / 2);
    cpa_sort_doubles(v, n);
    size_t best = 0, best_n = 0, ties = 0;
    for (size_t a = 0, b = 0; a < n; a++) {
        while (b < n && v[b] - v[a] <= 2 * CPA_CLK_AGREE_NS)
            b++;
        if (b - a > best_n) {
            best_n = b - a;
            best = a;
            ties = 0;
        } else if (b - a == best_n && v[a] - v[best] > 2 * CPA_CLK_AGREE_NS) {
            ties++; /* another group as large, apart from the first */
        }
    }
    if (best_n >= 2 && !ties)
        return v[best + (best_n - 1) / 2];
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
