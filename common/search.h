/* search: the one binary search of the tree.
 *
 * Offers CP_LOWER_BOUND, the first index of a sorted range whose element does not sort
 * before a key. Every lookup in a sorted array is one: an exact match is the bound when it
 * is equal, "the last at or before t" is the bound of "at or before t" less one. A macro
 * over an expression, not a function over a comparator, so that the hot lookups (a call's
 * communicator, the clock's segments) compile to the loop they were written as.
 */
#ifndef COLLPROF_SEARCH_H
#define COLLPROF_SEARCH_H

#include <stddef.h>

/* out = the first i in [0, n) for which BEFORE is false (n when none); BEFORE is an
 * expression of the size_t variable named i, true on a prefix of the range and false after
 * it. */
#define CP_LOWER_BOUND(out, n, i, BEFORE)                                                    \
    do {                                                                                     \
        size_t cp_lb_lo_ = 0, cp_lb_hi_ = (n);                                               \
        while (cp_lb_lo_ < cp_lb_hi_) {                                                      \
            size_t i = cp_lb_lo_ + (cp_lb_hi_ - cp_lb_lo_) / 2;                              \
            if (BEFORE)                                                                      \
                cp_lb_lo_ = i + 1;                                                           \
            else                                                                             \
                cp_lb_hi_ = i;                                                               \
        }                                                                                    \
        (out) = cp_lb_lo_;                                                                   \
    } while (0)

#endif
