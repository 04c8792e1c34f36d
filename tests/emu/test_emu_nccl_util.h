/* Shared by the emulated libnccl.so.2's tests: the NCCL and driver prototypes (by symbol
 * name, as a program built against nccl.h and cuda.h calls them) and a harness that forks
 * the ranks of a job, each of which sets up its device the way a real rank would. */
#ifndef COLLPROF_TEST_EMU_NCCL_UTIL_H
#define COLLPROF_TEST_EMU_NCCL_UTIL_H

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/cuda_abi.h"
#include "abi/cuda_api_list.h"
#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

#define TEST_CU_DECLARE(ret, api, sym, params, args) ret sym params;
CP_CUDA_API(TEST_CU_DECLARE)
#undef TEST_CU_DECLARE
#define TEST_NCCL_DECLARE(ret, name, params, args) ret name params; ret p##name params;
CP_NCCL_API(TEST_NCCL_DECLARE)
#undef TEST_NCCL_DECLARE

static inline uint64_t tn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tn_sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A failed check inside a rank: says where, and makes the rank exit non-zero. */
#define TN_CHECK(cond, ...)                                                                  \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: rank check failed: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)
#define TN_NCCL(call)                                                                        \
    do {                                                                                     \
        ncclResult_t tn_r_ = (call);                                                         \
        TN_CHECK(tn_r_ == ncclSuccess, "%s -> %d (%s)", #call, (int)tn_r_,                   \
                 ncclGetLastError(NULL));                                                    \
    } while (0)
#define TN_CU(call)                                                                          \
    do {                                                                                     \
        CUresult tn_c_ = (call);                                                             \
        TN_CHECK(tn_c_ == CUDA_SUCCESS, "%s -> %d", #call, (int)tn_c_);                      \
    } while (0)

/* The calling thread gets device `dev`'s primary context and a fresh stream on it. */
static inline int tn_device(int dev, CUstream *stream)
{
    CUcontext ctx;
    TN_CU(cuInit(0));
    TN_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    TN_CU(cuCtxSetCurrent(ctx));
    if (stream)
        TN_CU(cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
    return 0;
}

/* One group of a send to the rank itself from sb and a receive from itself into rb, n int32
 * (one buffer: NCCL drops the pair at the group's end). 0, or 1 with the failure said. */
static inline int tn_self_pair(const int32_t *sb, int32_t *rb, size_t n, int rank,
                               ncclComm_t comm, CUstream s)
{
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclSend(sb, n, ncclInt32, rank, comm, s));
    TN_NCCL(ncclRecv(rb, n, ncclInt32, rank, comm, s));
    TN_NCCL(ncclGroupEnd());
    return 0;
}

typedef int (*tn_rank_fn)(int rank, int nranks, const ncclUniqueId *id, void *arg);

/* The unique id of the job being run (set in the launcher, inherited by its ranks). */
static ncclUniqueId tn_job_id;

/* One job: a launcher process takes the environment given ("NAME=VALUE" strings, NULL
 * terminated; the emulation reads it once per process), makes the unique id as a real
 * launcher would, forks nranks ranks that each run fn, and reports how many failed (a
 * non-zero return, a signal, or not done within timeout_s). The test process itself never
 * touches the emulation, so every job starts from a fresh one. */
static inline int tn_job(const char *const *env, int nranks, tn_rank_fn fn, void *arg,
                         int timeout_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t launcher = fork();
    if (launcher < 0)
        return nranks;
    if (launcher == 0) {
        /* a crash must stay a crash: cmocka's handlers would resume the test suite here */
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        for (int i = 0; env && env[i]; i++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        alarm((unsigned)timeout_s + 5);
        if (ncclGetUniqueId(&tn_job_id) != ncclSuccess)
            _exit(100);
        pid_t pids[64];
        for (int r = 0; r < nranks; r++) {
            pids[r] = fork();
            if (pids[r] == 0) {
                alarm((unsigned)timeout_s);
                /* exit, not _exit: under ASan the rank's leaks are checked too */
                exit(fn(r, nranks, &tn_job_id, arg) ? 1 : 0);
            }
        }
        int failed = 0;
        for (int r = 0; r < nranks; r++) {
            int st = 0;
            if (pids[r] < 0 || waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) ||
                WEXITSTATUS(st) != 0) {
                fprintf(stderr, "rank %d of %d failed (status 0x%x)\n", r, nranks, st);
                failed++;
            }
        }
        _exit(failed > 99 ? 99 : failed);
    }
    int st = 0;
    if (waitpid(launcher, &st, 0) != launcher || !WIFEXITED(st))
        return nranks;
    return WEXITSTATUS(st);
}

static inline int tn_run_ranks(int nranks, tn_rank_fn fn, void *arg, int timeout_s)
{
    return tn_job(NULL, nranks, fn, arg, timeout_s);
}

/* NCCL's getHash (src/include/bitops.h): the emulation names a communicator's segment
 * /dev/shm/cpemu-nccl-<getHash of the unique id, 16 hex digits>, and NCCL logs the same
 * value as commId. */
static inline uint64_t tn_nccl_hash(const void *bytes, size_t size)
{
    uint64_t acc[2] = {1, 1};
    const char *p = bytes;
    acc[0] ^= size;
    while (size) {
        acc[0] += acc[1];
        acc[1] ^= acc[0];
        acc[0] ^= acc[0] >> 31;
        acc[0] *= 0x9de62bbc8cef3ce3ull;
        acc[1] ^= acc[1] >> 32;
        acc[1] *= 0x485cd6311b599e79ull;
        size_t n = size < 8 ? size : 8;
        uint64_t x = 0;
        memcpy(&x, p, n);
        p += n;
        size -= n;
        acc[0] += x;
    }
    uint64_t h = acc[0];
    h ^= h >> 31;
    h *= 0xbac3bd562846de6bull;
    h += acc[1];
    h ^= h >> 32;
    h *= 0x995a187a14e7b445ull;
    return h;
}

static inline void tn_segment_path(const ncclUniqueId *id, char *out, size_t cap)
{
    snprintf(out, cap, "/dev/shm/cpemu-nccl-%016llx",
             (unsigned long long)tn_nccl_hash(id->internal, NCCL_UNIQUE_ID_BYTES));
}

#endif
