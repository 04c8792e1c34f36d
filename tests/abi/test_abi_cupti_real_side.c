/* The real cupti_activity.h's side of test_abi_cupti_real: this file alone sees the
 * toolkit's header. Every row of CP_CUPTI_API has the prototype cupti_activity.h (or
 * cupti_result.h) gives it, checked at compile time; at run time, the fact table. */
#include <cupti_activity.h>

#include <stddef.h>
#include <stdint.h>

#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

#include "abi/cupti_api_list.h"

#define CP_CHECK_SIGNATURE(ret, name, params, args)                                         \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params),           \
                   #name ": CP_CUPTI_API's signature differs from cupti_activity.h");
CP_CUPTI_API(CP_CHECK_SIGNATURE)

/* CUDA 13 still writes version 10 of the record; CUDA 12 writes 9 */
typedef CUpti_ActivityKernel10 cp_krec;
typedef CUpti_ActivityKernel9 cp_krec9;
#define CP_CUPTI_KERNEL10_SIZE sizeof(CUpti_ActivityKernel10)

size_t cp_test_cupti_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_cupti_facts_real(cp_test_fact *out, size_t cap)
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
