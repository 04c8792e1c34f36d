/* Shared by the emulated libcuda.so.1's tests: the driver's prototypes (by symbol name, as a
 * program compiled against cuda.h calls them) and small helpers. */
#ifndef COLLPROF_TEST_EMU_CUDA_UTIL_H
#define COLLPROF_TEST_EMU_CUDA_UTIL_H

#include <stdint.h>
#include <time.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "emu/common/emu_stream.h"

#define TEST_DECLARE(ret, api, sym, params, args) ret sym params;
CP_CUDA_API(TEST_DECLARE)
#undef TEST_DECLARE
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);

static inline uint64_t test_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void test_sleep_ms(double ms)
{
    long long ns = (long long)(ms * 1e6);
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

#define MS(ns) ((double)(ns) / 1e6)

#endif
