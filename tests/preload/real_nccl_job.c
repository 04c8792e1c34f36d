/* real_nccl_job: NCCL's host-only entry points, run against the REAL libnccl.so.2 with no
 * GPU and no driver, with and without the shim (test_preload_real_nccl.c).
 *
 * Linked against the stub libnccl.so.2 with no run path: only LD_LIBRARY_PATH decides which
 * NCCL is loaded, and every call goes through the PLT, where the shim interposes. It prints
 * every result and string it gets, so any difference the shim makes shows on stdout.
 */
#include <stdio.h>
#include <string.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

#define DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(DECLARE)

#define SHOW(call) printf("%s=%d\n", #call, (int)(call))

static void last_error(void)
{
    const char *s = ncclGetLastError(NULL);
    printf("ncclGetLastError(NULL)=\"%s\"\n", s ? s : "(null)");
}

int main(void)
{
    int version = -1;
    SHOW(ncclGetVersion(&version));
    printf("version=%d\n", version);
    SHOW(ncclGetVersion(NULL));
    for (int r = 0; r <= ncclNumResults; r++)
        printf("ncclGetErrorString(%d)=\"%s\"\n", r, ncclGetErrorString((ncclResult_t)r));
    printf("ncclGetErrorString(99)=\"%s\"\n", ncclGetErrorString((ncclResult_t)99));
    last_error();

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    SHOW(ncclGetUniqueId(&id));
    SHOW(ncclGetUniqueId(NULL));
    last_error();

    ncclComm_t comm = NULL;
    SHOW(ncclCommInitRank(&comm, 1, id, 0)); /* no GPU: fails */
    printf("comm %s\n", comm ? "set" : "NULL");
    last_error();
    SHOW(ncclCommInitRank(&comm, 2, id, 5)); /* rank out of range */
    SHOW(ncclCommInitRank(NULL, 1, id, 0));

    ncclResult_t async = ncclSuccess;
    SHOW(ncclCommGetAsyncError(NULL, &async));
    printf("async=%d\n", (int)async);
    int n = -7;
    SHOW(ncclCommCount(NULL, &n));
    SHOW(ncclCommUserRank(NULL, &n));
    SHOW(ncclCommCuDevice(NULL, &n));
    printf("n=%d\n", n);
    SHOW(ncclCommDestroy(NULL));
    SHOW(ncclCommFinalize(NULL));
    SHOW(ncclGroupStart());
    SHOW(ncclGroupEnd());
    SHOW(ncclGroupEnd()); /* without a start */
    last_error();
    fflush(stdout);
    return version > 0 ? 0 : 3;
}
