/* real: finding the real NCCL behind each exported name.
 *
 * NCCL exports each entry point twice: the strong pncclX and its weak alias ncclX. The shim
 * asks for pncclX first, so a program (or NCCL itself) that calls pncclX never reaches a
 * wrapper and nothing is recorded twice; ncclX is the fallback for an NCCL (or an emulation)
 * without the p-names. RTLD_NEXT looks only at objects loaded after libcollprof.so, so the
 * answer is never our own wrapper.
 *
 * A miss is not cached: a libnccl the job dlopens later with RTLD_GLOBAL is found then.
 *
 * When the loaded NCCL lacks a function (older than the 2.28 list), the wrapper returns
 * ncclInvalidUsage after one WARN line. Without the shim such a job would not have run at
 * all (an undefined symbol at load) or would have seen a NULL weak reference and skipped the
 * call; with it, the call fails the way NCCL fails a feature it does not support, which a
 * caller that checks results handles, instead of the shim killing the process the way the
 * dynamic linker would. The const char * getters return a fixed string instead.
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <string.h>

#include "common/log.h"

static void *find_real(const char *name)
{
    char pname[96] = "p";
    strncat(pname, name, sizeof pname - 2);
    void *p = dlsym(RTLD_NEXT, pname);
    if (!p)
        p = dlsym(RTLD_NEXT, name);
    return p;
}

/* One WARN per missing name, however many threads call it. */
static void warn_missing(const char *name, _Atomic int *warned)
{
    if (atomic_exchange_explicit(warned, 1, memory_order_relaxed) == 0)
        cp_warn("%s is not in the loaded NCCL (or no libnccl is loaded): the call returns "
                "ncclInvalidUsage and is not recorded", name);
}

#define CP_DEFINE_RESOLVE(ret, name, params, args)                                       \
    void *_Atomic cp_real_ptr_##name;                                                    \
    cp_fn_##name cp_resolve_##name(void)                                                 \
    {                                                                                    \
        static _Atomic int warned;                                                       \
        void *p = find_real(#name);                                                      \
        if (!p) {                                                                        \
            warn_missing(#name, &warned);                                                \
            return NULL;                                                                 \
        }                                                                                \
        atomic_store_explicit(&cp_real_ptr_##name, p, memory_order_release);             \
        return (cp_fn_##name)p;                                                          \
    }
CP_NCCL_API(CP_DEFINE_RESOLVE)
CP_NCCL_API_DEPRECATED(CP_DEFINE_RESOLVE)
