/* Our cupti_abi.h's side of test_abi_cupti_real: the same fact list as the real side. */
#include "abi/cupti_abi.h"

#include <stddef.h>
#include <stdint.h>

#include "abi/cupti_api_list.h"
#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

/* Every row must also be a valid prototype over our own types. */
#define CP_DECLARE(ret, name, params, args) ret name params;
CP_CUPTI_API(CP_DECLARE)
#undef CP_DECLARE

typedef cp_cupti_kernel_head cp_krec;
typedef cp_cupti_kernel_head cp_krec9;

size_t cp_test_cupti_facts_ours(cp_test_fact *out, size_t cap);
size_t cp_test_cupti_facts_ours(cp_test_fact *out, size_t cap)
{
    size_t n = 0;
#define CP_FACT(expr)                                          \
    if (n < cap)                                               \
        out[n] = (cp_test_fact){ #expr, (long long)(expr) };   \
    n++;
    CP_TEST_CUPTI_FACTS(CP_FACT)
#undef CP_FACT
    return n;
}
