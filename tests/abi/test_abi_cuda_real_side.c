/* The real cuda.h's side of test_abi_cuda_real: this file alone sees the toolkit's header.
 *
 * At compile time: every row of CP_CUDA_API has the signature cuda.h gives symbol_name, and
 * every CP_CUDA_API_OLDER fallback has the same signature as the current symbol (checked
 * through cudaTypedefs.h's PFN_<api>_v<version> types, which name each version's signature).
 * At run time it reports what cuda.h maps each api_name to, and the fact table.
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include <stddef.h>
#include <stdint.h>

#include "abi/cuda_api_list.h"
#include "tests/abi/test_abi_facts.h"
#include "tests/abi/test_abi_util.h"

#define CP_CHECK_SIGNATURE(ret, api, sym, params, args)                                     \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&sym), ret(*) params),            \
                   #sym ": CP_CUDA_API's signature differs from cuda.h");
CP_CUDA_API(CP_CHECK_SIGNATURE)

#define CP_CHECK_OLDER(api, older, older_version, version)                                    \
    _Static_assert(__builtin_types_compatible_p(PFN_##older##_v##older_version,               \
                                                PFN_##api##_v##version),                     \
                   #older " is no same-signature fallback for " #api);                       \
    _Static_assert(__builtin_types_compatible_p(PFN_##api##_v##version, __typeof__(&api)),    \
                   #api ": cuda.h's current symbol is not the " #version " one");
CP_CUDA_API_OLDER(CP_CHECK_OLDER)

/* Two steps so that api_name is expanded by cuda.h's #defines before it is spelled. */
#define CP_STR(x) #x
#define CP_XSTR(x) CP_STR(x)

size_t cp_test_cuda_symbol_map(const char *(*out)[3], size_t cap);
size_t cp_test_cuda_symbol_map(const char *(*out)[3], size_t cap)
{
    size_t n = 0;
#define CP_MAP(ret, api, sym, params, args) \
    if (n < cap) {                          \
        out[n][0] = #api;                   \
        out[n][1] = CP_XSTR(api);           \
        out[n][2] = #sym;                   \
    }                                       \
    n++;
    CP_CUDA_API(CP_MAP)
#undef CP_MAP
    return n;
}

size_t cp_test_cuda_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_cuda_facts_real(cp_test_fact *out, size_t cap)
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
