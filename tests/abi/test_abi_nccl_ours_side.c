/* Our nccl_abi.h's side of test_abi_nccl_real: the same fact list as the real side. */
#include "abi/nccl_abi.h"

#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_api_list.h"
#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

/* Every row must also be a valid prototype over our own types: declare them all. */
#define CP_DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(CP_DECLARE)
CP_NCCL_API_DEPRECATED(CP_DECLARE)
#undef CP_DECLARE

size_t cp_test_nccl_facts_ours(cp_test_fact *out, size_t cap);
size_t cp_test_nccl_facts_ours(cp_test_fact *out, size_t cap)
{
    size_t n = 0;
#define CP_FACT(expr)                                          \
    if (n < cap)                                               \
        out[n] = (cp_test_fact){ #expr, (long long)(expr) };   \
    n++;
    CP_TEST_NCCL_FACTS(CP_FACT)
#undef CP_FACT
    return n;
}
