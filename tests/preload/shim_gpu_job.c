/* shim_gpu_job: an NCCL job with real (emulated) CUDA streams, for the shim's GPU timing
 * and call-site tests. Linked against the emulated libcuda.so.1 (build/emu) and the stub
 * libnccl.so.2; the stub enqueues nothing, so the events time an empty span of the stream,
 * which is all the shim's bookkeeping needs.
 *   events N    N AllReduces on a stream, 2 on the NULL stream, 1 on a second stream
 *   group       GroupStart, Send on s1, Recv on s2, Send on s1, GroupEnd; then 1 AllReduce
 *   biggroup N  GroupStart, N Sends on s1, GroupEnd: more than the shim times in a group
 *   capture     an AllReduce on a stream under capture (global mode), then EndCapture
 *   sites       3 calls from site_a (one line), 1 from site_b
 *   events-term N  N AllReduces on a stream, then SIGTERM at once (default action): the
 *               DONEs the shim has not made yet die with the process
 *   hold N      N AllReduces on a stream, 1.5 s of nothing, then a Broadcast on a second
 *               stream (with STUB_NCCL_PROFILER_HOLD, a call the plugin never sees end)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

#define DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(DECLARE)
#define DECLARE_CU(ret, api, sym, params, args) ret sym params;
CP_CUDA_API(DECLARE_CU)

#define CHECK(call)                                                                      \
    do {                                                                                 \
        int rc_ = (int)(call);                                                           \
        if (rc_ != 0) {                                                                  \
            fprintf(stderr, "%s: %d\n", #call, rc_);                                     \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static float g_buf[64];

/* One call instruction, reached three times: an unrolled loop would be three call sites. */
#if defined(__clang__)
#define NO_UNROLL _Pragma("clang loop unroll(disable)")
#else
#define NO_UNROLL _Pragma("GCC unroll 1")
#endif

static __attribute__((noinline)) void site_a(ncclComm_t c, CUstream s)
{
    NO_UNROLL
    for (int i = 0; i < 3; i++)
        CHECK(ncclAllReduce(g_buf, g_buf, 4, ncclFloat32, ncclSum, c, (cudaStream_t)s));
}

static __attribute__((noinline)) void site_b(ncclComm_t c, CUstream s)
{
    CHECK(ncclAllReduce(g_buf, g_buf, 8, ncclFloat32, ncclSum, c, (cudaStream_t)s));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "events";
    int n = argc > 2 ? atoi(argv[2]) : 10;
    CUdevice dev;
    CUcontext ctx;
    CUstream s1, s2;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    ncclUniqueId id;
    memset(&id, 5, sizeof id);
    ncclComm_t c;
    CHECK(ncclCommInitRank(&c, 4, id, 0));
    if (!strcmp(what, "events")) {
        for (int i = 0; i < n; i++)
            CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
        CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, NULL));
        CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, NULL));
        CHECK(ncclBroadcast(g_buf, g_buf, 16, ncclFloat32, 0, c, (cudaStream_t)s2));
    } else if (!strcmp(what, "group")) {
        CHECK(ncclGroupStart());
        CHECK(ncclSend(g_buf, 4, ncclFloat32, 1, c, (cudaStream_t)s1));
        CHECK(ncclRecv(g_buf, 4, ncclFloat32, 2, c, (cudaStream_t)s2));
        CHECK(ncclSend(g_buf, 4, ncclFloat32, 3, c, (cudaStream_t)s1));
        CHECK(ncclGroupEnd());
        CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
    } else if (!strcmp(what, "biggroup")) {
        CHECK(ncclGroupStart());
        for (int i = 0; i < n; i++)
            CHECK(ncclSend(g_buf, 4, ncclFloat32, 1, c, (cudaStream_t)s1));
        CHECK(ncclGroupEnd());
    } else if (!strcmp(what, "capture")) {
        CUgraph graph = NULL;
        CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
        int rc = (int)cuStreamEndCapture(s1, &graph);
        printf("end capture=%d graph=%d\n", rc, graph != NULL);
        CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
    } else if (!strcmp(what, "events-term")) {
        for (int i = 0; i < n; i++)
            CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
        raise(SIGTERM);
    } else if (!strcmp(what, "hold")) {
        for (int i = 0; i < n; i++)
            CHECK(ncclAllReduce(g_buf, g_buf, 16, ncclFloat32, ncclSum, c, (cudaStream_t)s1));
        nanosleep(&(struct timespec){1, 500000000}, NULL);
        CHECK(ncclBroadcast(g_buf, g_buf, 16, ncclFloat32, 0, c, (cudaStream_t)s2));
    } else if (!strcmp(what, "sites")) {
        site_a(c, s1);
        site_b(c, s1);
    } else {
        fprintf(stderr, "shim_gpu_job: unknown scenario '%s'\n", what);
        return 2;
    }
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuStreamSynchronize(s2));
    CHECK(ncclCommDestroy(c));
    printf("%s done\n", what);
    return 0;
}
