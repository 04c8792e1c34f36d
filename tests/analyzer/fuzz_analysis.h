/* fuzz_analysis.h: what the analysis fuzz target (fuzz_analysis.c) tells its replay test of
 * the last input it ran, so that the test can check its seeds reach the analysis' depths. */
#ifndef COLLPROF_TEST_FUZZ_ANALYSIS_H
#define COLLPROF_TEST_FUZZ_ANALYSIS_H

#include <stddef.h>

#define FA_MAX_FILES 16 /* trace files one input makes at most */

typedef struct fa_seen {
    size_t ranks;          /* files loaded; 0 when nothing was readable */
    size_t hosts;          /* clock domains */
    size_t multi_rank_ops; /* operations matched across two ranks or more */
    size_t hangs, mismatches, stragglers; /* rows of each */
} fa_seen;

extern fa_seen fa_last;

#endif
