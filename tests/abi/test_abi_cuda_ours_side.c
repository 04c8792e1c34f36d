/* Our cuda_abi.h's side of test_abi_cuda_real: the same fact list as the real side. */
#include "abi/cuda_abi.h"

#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_api_list.h"
#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

/* Every row must also be a valid prototype over our own types, under its exported name. */
#define CP_DECLARE(ret, api, sym, params, args) ret sym params;
CP_CUDA_API(CP_DECLARE)
#undef CP_DECLARE

size_t cp_test_cuda_facts_ours(cp_test_fact *out, size_t cap);
size_t cp_test_cuda_facts_ours(cp_test_fact *out, size_t cap)
{
    size_t n = 0;
#define CP_FACT(expr)                                          \
    if (n < cap)                                               \
        out[n] = (cp_test_fact){ #expr, (long long)(expr) };   \
    n++;
    CP_TEST_CUDA_FACTS(CP_FACT)
#undef CP_FACT
    return n;
}
