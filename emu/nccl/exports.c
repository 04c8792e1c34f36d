/* exports: NCCL's public API, exactly, generated from abi/nccl_api_list.h.
 *
 * As in NCCL itself, each entry point is a strong `pncclX` and `ncclX` is a weak alias of
 * it: a profiler interposing on ncclX can reach the implementation through pncclX. The
 * library is built with -fvisibility=hidden and a version script, so these are the only
 * symbols it exports.
 */
#include "emu/nccl/nccl_emu.h"

#define CPN_EXPORT __attribute__((visibility("default")))

#define CPN_DEFINE(ret, name, params, args)                                                  \
    CPN_EXPORT ret p##name params { return cpn_impl_##name args; }                           \
    CPN_EXPORT __typeof__(p##name) name __attribute__((weak, alias("p" #name)));
CP_NCCL_API(CPN_DEFINE)
#undef CPN_DEFINE

/* void: nothing to return */
CPN_EXPORT void pncclResetDebugInit(void) { cpn_impl_ncclResetDebugInit(); }
CPN_EXPORT __typeof__(pncclResetDebugInit) ncclResetDebugInit
    __attribute__((weak, alias("pncclResetDebugInit")));
