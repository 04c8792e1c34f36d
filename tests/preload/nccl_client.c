/* nccl_client: a library linked against an NCCL (DT_NEEDED), the way libtorch_cuda.so is.
 *
 * The loading-pattern tests never link it: nccl_loader (or Python's ctypes) opens it with
 * dlopen(RTLD_LOCAL), so its NCCL is in no global scope, and calls nccl_client_run. Built twice:
 * against the emulated libnccl.so.2 (2.28.9) and against a second copy under another soname
 * (libnccl.so.2.28.3), so one process can hold both. Every line it prints is deterministic, so
 * a run under the shim must print exactly what a run without it prints. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

#define CLIENT_CU_DECLARE(ret, api, sym, params, args) ret sym params;
CP_CUDA_API(CLIENT_CU_DECLARE)
#define CLIENT_NCCL_DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(CLIENT_NCCL_DECLARE)

#define NDEV_MAX 4
#define COUNT 1024

#define CHECK(tag, what, cond)                                                              \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            printf("%s: %s failed\n", tag, what);                                           \
            fflush(stdout);                                                                 \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)
#define NCCL(tag, call) CHECK(tag, #call, (call) == ncclSuccess)

/* Host-only calls, which also run on a real NCCL without a GPU: the version and an error
 * string. 0 when NCCL answered. */
__attribute__((visibility("default"))) int nccl_client_version(const char *tag)
{
    int version = 0;
    ncclResult_t r = ncclGetVersion(&version);
    printf("%s: ncclGetVersion=%d, NCCL %d\n", tag, (int)r, version);
    printf("%s: %s\n", tag, ncclGetErrorString(ncclInvalidUsage));
    fflush(stdout);
    return r == ncclSuccess ? 0 : 1;
}

/* A fork while this process's collectives still run on the GPU (the test holds rank 1's
 * stream with COLLPROF_EMU_DELAY): the child makes one group call, as a worker process that
 * touches NCCL would, stays past a flush and leaves with _exit (CUDA is not usable in a fork
 * child); the parent waits for it, then for its collectives. 0 when all went right. */
__attribute__((visibility("default"))) int nccl_client_fork(const char *tag)
{
    ncclComm_t comms[2];
    CUstream streams[2];
    static float buf[2][COUNT];
    CHECK(tag, "cuInit", cuInit(0) == CUDA_SUCCESS);
    NCCL(tag, ncclCommInitAll(comms, 2, NULL));
    for (int i = 0; i < 2; i++) {
        CUcontext ctx;
        CHECK(tag, "context", cuDevicePrimaryCtxRetain(&ctx, i) == CUDA_SUCCESS &&
                                  cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
        CHECK(tag, "stream", cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        for (int k = 0; k < COUNT; k++)
            buf[i][k] = (float)(i + k);
    }
    NCCL(tag, ncclGroupStart());
    for (int i = 0; i < 2; i++)
        NCCL(tag, ncclAllReduce(buf[i], buf[i], COUNT, ncclFloat32, ncclSum, comms[i], streams[i]));
    NCCL(tag, ncclGroupEnd());
    usleep(100000); /* the profiler, if any, has taken in the calls while they still run */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        ncclGroupStart();
        ncclGroupEnd();
        usleep(300000);
        _exit(0);
    }
    int st = -1;
    CHECK(tag, "fork", child > 0 && waitpid(child, &st, 0) == child);
    printf("%s: child exited %d\n", tag, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    for (int i = 0; i < 2; i++) {
        CHECK(tag, "synchronize", cuStreamSynchronize(streams[i]) == CUDA_SUCCESS);
        CHECK(tag, "allreduce result", buf[i][COUNT - 1] == (float)(2 * (COUNT - 1) + 1));
        NCCL(tag, ncclCommDestroy(comms[i]));
        cuStreamDestroy_v2(streams[i]);
    }
    printf("%s: done\n", tag);
    fflush(stdout);
    return 0;
}

/* ndev ranks in this process (ncclCommInitAll), `steps` times: a grouped AllReduce over
 * every rank, then a grouped exchange with the next rank (Send/Recv). 0 when every result
 * was right. */
__attribute__((visibility("default"))) int nccl_client_run(const char *tag, int ndev,
                                                           int steps)
{
    if (ndev < 2 || ndev > NDEV_MAX)
        return 2;
    int version = 0;
    NCCL(tag, ncclGetVersion(&version));
    printf("%s: NCCL %d\n", tag, version);
    CHECK(tag, "cuInit", cuInit(0) == CUDA_SUCCESS);
    ncclComm_t comms[NDEV_MAX];
    CUstream streams[NDEV_MAX];
    float *buf[NDEV_MAX], *out[NDEV_MAX], *in[NDEV_MAX];
    NCCL(tag, ncclCommInitAll(comms, ndev, NULL));
    for (int i = 0; i < ndev; i++) {
        CUcontext ctx;
        CHECK(tag, "context", cuDevicePrimaryCtxRetain(&ctx, i) == CUDA_SUCCESS &&
                                  cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
        CHECK(tag, "stream", cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        buf[i] = malloc(COUNT * sizeof(float));
        out[i] = malloc(COUNT * sizeof(float));
        in[i] = malloc(COUNT * sizeof(float));
        CHECK(tag, "malloc", buf[i] && out[i] && in[i]);
    }
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < ndev; i++)
            for (int k = 0; k < COUNT; k++) {
                buf[i][k] = (float)(i + k + s);
                out[i][k] = (float)(100 * i + k);
            }
        NCCL(tag, ncclGroupStart());
        for (int i = 0; i < ndev; i++)
            NCCL(tag, ncclAllReduce(buf[i], buf[i], COUNT, ncclFloat32, ncclSum, comms[i],
                                    streams[i]));
        NCCL(tag, ncclGroupEnd());
        NCCL(tag, ncclGroupStart());
        for (int i = 0; i < ndev; i++) {
            NCCL(tag, ncclSend(out[i], COUNT, ncclFloat32, (i + 1) % ndev, comms[i], streams[i]));
            NCCL(tag, ncclRecv(in[i], COUNT, ncclFloat32, (i + ndev - 1) % ndev, comms[i],
                               streams[i]));
        }
        NCCL(tag, ncclGroupEnd());
        double sum = 0;
        for (int i = 0; i < ndev; i++) {
            CHECK(tag, "synchronize", cuStreamSynchronize(streams[i]) == CUDA_SUCCESS);
            int prev = (i + ndev - 1) % ndev;
            for (int k = 0; k < COUNT; k++) {
                CHECK(tag, "allreduce result",
                      buf[i][k] == (float)(ndev * (k + s) + ndev * (ndev - 1) / 2));
                CHECK(tag, "recv result", in[i][k] == (float)(100 * prev + k));
            }
            sum += buf[i][COUNT - 1];
        }
        printf("%s: step %d allreduce and exchange right (sum %.1f)\n", tag, s, sum);
    }
    for (int i = 0; i < ndev; i++) {
        NCCL(tag, ncclCommDestroy(comms[i]));
        cuStreamDestroy_v2(streams[i]);
        free(buf[i]);
        free(out[i]);
        free(in[i]);
    }
    printf("%s: done\n", tag);
    fflush(stdout);
    return 0;
}
