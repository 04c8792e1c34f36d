/* wrappers: the exported entry points that only forward.
 *
 * Generated from CP_NCCL_API so that a new NCCL entry point is exported (and forwarded) the
 * moment the list has it. The entry points that record, or need more than forwarding, are
 * named in CP_CUSTOM_* below and defined by hand in wrap_coll.c and wrap_comm.c (their
 * signatures are still checked against the list by shim.h's declarations).
 */
#include "preload/shim.h"

/* Names defined elsewhere: `CP_CUSTOM_<name>` expands to "~, 1". The probe below turns
 * that into 1 and any other name into 0, so the generator can skip them. */
#define CP_CUSTOM_ncclAllReduce ~, 1
#define CP_CUSTOM_ncclBroadcast ~, 1
#define CP_CUSTOM_ncclBcast ~, 1
#define CP_CUSTOM_ncclReduce ~, 1
#define CP_CUSTOM_ncclAllGather ~, 1
#define CP_CUSTOM_ncclReduceScatter ~, 1
#define CP_CUSTOM_ncclAlltoAll ~, 1
#define CP_CUSTOM_ncclGather ~, 1
#define CP_CUSTOM_ncclScatter ~, 1
#define CP_CUSTOM_ncclSend ~, 1
#define CP_CUSTOM_ncclRecv ~, 1
#define CP_CUSTOM_ncclGroupStart ~, 1
#define CP_CUSTOM_ncclGroupEnd ~, 1
#define CP_CUSTOM_ncclCommInitRank ~, 1
#define CP_CUSTOM_ncclCommInitRankConfig ~, 1
#define CP_CUSTOM_ncclCommInitRankScalable ~, 1
#define CP_CUSTOM_ncclCommInitAll ~, 1
#define CP_CUSTOM_ncclCommSplit ~, 1
#define CP_CUSTOM_ncclCommShrink ~, 1
#define CP_CUSTOM_ncclCommFinalize ~, 1
#define CP_CUSTOM_ncclCommDestroy ~, 1
#define CP_CUSTOM_ncclCommAbort ~, 1
#define CP_CUSTOM_ncclCommRevoke ~, 1
#define CP_CUSTOM_ncclCommGetAsyncError ~, 1
#define CP_CUSTOM_ncclGetErrorString ~, 1
#define CP_CUSTOM_ncclGetLastError ~, 1

#define CP_SECOND(a, b, ...) b
#define CP_SECOND_(...) CP_SECOND(__VA_ARGS__)
#define CP_IS_CUSTOM(name) CP_SECOND_(CP_CUSTOM_##name, 0, ~)
#define CP_IF_1(then, otherwise) then
#define CP_IF_0(then, otherwise) otherwise
#define CP_IF_(c) CP_IF_##c
#define CP_IF(c) CP_IF_(c)

#define CP_FORWARD(ret, name, params, args)                                              \
    ret name params                                                                      \
    {                                                                                    \
        cp_fn_##name real = cp_real_##name(__builtin_return_address(0));                 \
        if (CP_UNLIKELY(!real))                                                          \
            return CP_MISSING_RESULT;                                                    \
        return real args;                                                                \
    }
#define CP_MAYBE_FORWARD(ret, name, params, args)                                        \
    CP_IF(CP_IS_CUSTOM(name))(, CP_FORWARD(ret, name, params, args))

CP_NCCL_API(CP_MAYBE_FORWARD)

/* The ones that do not return ncclResult_t: a missing real function gets a fixed answer. */
const char *ncclGetErrorString(ncclResult_t result)
{
    cp_fn_ncclGetErrorString real = cp_real_ncclGetErrorString(__builtin_return_address(0));
    return real ? real(result) : cp_nccl_result_name(result);
}

const char *ncclGetLastError(ncclComm_t comm)
{
    cp_fn_ncclGetLastError real = cp_real_ncclGetLastError(__builtin_return_address(0));
    return real ? real(comm) : "";
}

void ncclResetDebugInit(void)
{
    cp_fn_ncclResetDebugInit real = cp_real_ncclResetDebugInit(__builtin_return_address(0));
    if (real)
        real();
}
