/* The real nccl.h's side of test_abi_nccl_real: this file alone sees NCCL's own header.
 *
 * It proves at compile time that every row of CP_NCCL_API has exactly NCCL's signature (and
 * its pnccl twin's), and fills the fact table the test compares with ours at run time.
 */
#include <nccl.h>

#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_api_list.h"
#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

/* __builtin_types_compatible_p on the pointer types is C's own compatibility rule: the same
 * return type and parameter types, top-level qualifiers ignored; nccl.h's unprototyped
 * `ncclGroupStart()` is compatible with our `(void)`. */
#define CP_CHECK_SIGNATURE(ret, name, params, args)                                         \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params),           \
                   #name ": CP_NCCL_API's signature differs from nccl.h");                  \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&p##name), ret(*) params),        \
                   "p" #name ": CP_NCCL_API's signature differs from nccl.h");
CP_NCCL_API(CP_CHECK_SIGNATURE)

/* nccl.h marks these deprecated; naming them is the point here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CP_NCCL_API_DEPRECATED(CP_CHECK_SIGNATURE)
#pragma GCC diagnostic pop

size_t cp_test_nccl_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_nccl_facts_real(cp_test_fact *out, size_t cap)
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
