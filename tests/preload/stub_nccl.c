/* stub_nccl: a tiny libnccl.so.2 for the shim's tests and benchmark.
 *
 * Every entry point of abi/nccl_api_list.h, with NCCL's signature (declared from the
 * list, so it cannot drift), doing the least that makes a caller's checks meaningful: comms
 * are small structs that answer CommCount/UserRank/CuDevice, collectives return at once.
 * Some inputs fail on purpose, so tests can see that the shim returns exactly what NCCL does:
 *   NULL comm, a datatype >= ncclNumTypes, a peer or root out of range -> ncclInvalidArgument
 *   count == STUB_FAIL_COUNT (777)                     -> ncclSystemError, errno EPROTO
 *   count == STUB_ERRNO_COUNT (779)   success, errno + 1: shows the errno the call was given
 *   ncclGroupEnd without ncclGroupStart                                 -> ncclInvalidUsage
 * A config with blocking = 0 makes a non-blocking comm: init returns ncclInProgress and the
 * comm is ready after one more ncclCommGetAsyncError. Only ncclX names are exported (no
 * pnccl twins), which exercises the shim's fallback; ncclBcast calls ncclBroadcast through
 * the PLT, as an NCCL calling its own API would, which exercises the shim's nesting guard.
 *
 * STUB_NCCL_PROFILER=1: the stub also opens NCCL_PROFILER_PLUGIN (v5) at its first comm and
 * makes NCCL 2.28's profiler calls around each ungrouped ncclAllReduce of a comm of 2+ ranks,
 * in NCCL's order on the calling thread (GroupApi start, GroupStartApiStop, CollApi start and
 * stop, GroupEndApiStart, Group and Coll start, KernelLaunch, Coll and Group stop, GroupApi
 * stop) and its kernel channels' start/KernelChStop/stop from a proxy thread of its own: what
 * bench_shim needs to measure the plugin's cost on the calling thread against a call that
 * costs nothing itself (the emulated NCCL, emu/nccl/profiler.c, is the faithful one).
 * STUB_NCCL_PROFILER=null makes the same calls into a built-in plugin that does nothing.
 * STUB_NCCL_PROFILER_HOLD=K: the K-th such AllReduce's channels (from 0) start and never stop,
 * a kernel that hangs while the calls after it finish (as the plugin sees a hung call that
 * the shim picked to calibrate with, while the comm's other calls complete).
 * STUB_NCCL_PROFILER_NOCH=K: the K-th such AllReduce's task names its 2 channels but none is
 * ever reported, as NCCL's work without a proxy op (a self pair; by its source, symmetric
 * and copy-engine kernels), while the calls after it report theirs.
 * STUB_NCCL_BLOCK_MS=MS[,MS...]: ncclCommInitRank and each ncclAllReduce of count
 * STUB_BLOCK_COUNT (781) block the next MS of the list in turn (a slow bootstrap, a
 * collective waiting on a late peer); once the list is spent they return at once.
 * STUB_NCCL_FRESH_COMMS=1: a destroyed comm's memory is kept (reachable), so that every comm
 * gets an address of its own, as a long job's allocator may hand out.
 * STUB_NCCL_DESTROY_FAILS=K: the K-th ncclCommDestroy (from 0) returns ncclInternalError and
 * leaves the comm as it was, usable and destroyable again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "abi/nccl_profiler_abi.h"

#define STUB_EXPORT __attribute__((visibility("default")))
#define STUB_DECLARE(ret, name, params, args) STUB_EXPORT ret name params;
CP_NCCL_API(STUB_DECLARE)
CP_NCCL_API_DEPRECATED(STUB_DECLARE)

#define STUB_FAIL_COUNT 777
#define STUB_ERRNO_COUNT 779
#define STUB_BLOCK_COUNT 781
#define STUB_MAGIC 0x5354u

struct ncclComm {
    unsigned magic;
    int nranks, rank, dev;
    int pending; /* non-blocking init: GetAsyncError calls until ready */
    void *prof_ctx;
    uint64_t seq_allreduce;
    struct ncclComm *kept; /* STUB_NCCL_FRESH_COMMS: the destroyed before it */
};
static struct ncclComm *g_kept;

/* ---- STUB_NCCL_PROFILER ---- */
static ncclProfiler_v5_t *g_prof;
static int g_prof_mask;
static pthread_once_t g_prof_once = PTHREAD_ONCE_INIT;
#define STUB_PROXY_RING 65536
static struct { void *ctx, *task; } g_proxy_ring[STUB_PROXY_RING];
static pthread_once_t g_proxy_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t g_proxy_head, g_proxy_tail;
static long long g_proxy_hold = -1, g_proxy_noch = -1;

static uint64_t stub_realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The proxy: each task's two channels start and stop (pTimer: the realtime clock, as a
 * GPU's globaltimer roughly is). */
static void *stub_proxy(void *arg)
{
    (void)arg;
    for (;;) {
        uint64_t t = atomic_load_explicit(&g_proxy_tail, memory_order_relaxed);
        if (t == atomic_load_explicit(&g_proxy_head, memory_order_acquire)) {
            nanosleep(&(struct timespec){0, 20000}, NULL);
            continue;
        }
        void *ctx = g_proxy_ring[t % STUB_PROXY_RING].ctx;
        void *task = g_proxy_ring[t % STUB_PROXY_RING].task;
        for (int ch = 0; ch < 2 && (long long)t != g_proxy_noch; ch++) {
            ncclProfilerEventDescr_v5_t d = {.type = ncclProfileKernelCh, .parentObj = task};
            d.kernelCh.channelId = (uint8_t)ch;
            d.kernelCh.pTimer = stub_realtime();
            void *h = NULL;
            g_prof->startEvent(ctx, &h, &d);
            if (h && (long long)t != g_proxy_hold) {
                ncclProfilerEventStateArgs_v5_t a = {.kernelCh = {stub_realtime()}};
                g_prof->recordEventState(h, ncclProfilerKernelChStop, &a);
                g_prof->stopEvent(h);
            }
        }
        atomic_store_explicit(&g_proxy_tail, t + 1, memory_order_release);
    }
    return NULL;
}

static void proxy_start(void)
{
    const char *hold = getenv("STUB_NCCL_PROFILER_HOLD");
    if (hold && *hold)
        g_proxy_hold = atoll(hold);
    const char *noch = getenv("STUB_NCCL_PROFILER_NOCH");
    if (noch && *noch)
        g_proxy_noch = atoll(noch);
    pthread_t t;
    if (pthread_create(&t, NULL, stub_proxy, NULL) == 0)
        pthread_detach(t);
}

/* At a comm's end, as NCCL stops its proxy before the plugin's finalize. */
static void prof_finalize(ncclComm_t c)
{
    if (!c->prof_ctx)
        return;
    while (atomic_load(&g_proxy_tail) != atomic_load(&g_proxy_head))
        nanosleep(&(struct timespec){0, 100000}, NULL);
    g_prof->finalize(c->prof_ctx);
    c->prof_ctx = NULL;
}

/* STUB_NCCL_PROFILER=null: a plugin that does nothing, built in, asking for what collprof
 * asks for: the price NCCL itself pays for calling any plugin (bench_shim's floor). */
static char g_null_token;
static ncclResult_t null_init(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                              int nranks, int rank, ncclDebugLogger_t logfn)
{
    (void)id; (void)name; (void)nnodes; (void)nranks; (void)rank; (void)logfn;
    *ctx = &g_null_token;
    *mask = ncclProfileCollApi | ncclProfileP2pApi | ncclProfileColl | ncclProfileP2p |
            ncclProfileKernelCh;
    return ncclSuccess;
}
static ncclResult_t null_start(void *ctx, void **h, ncclProfilerEventDescr_v5_t *d)
{
    (void)ctx;
    *h = d->type == ncclProfileGroupApi || d->type == ncclProfileGroup ? NULL : &g_null_token;
    return ncclSuccess;
}
static ncclResult_t null_stop(void *h) { (void)h; return ncclSuccess; }
static ncclResult_t null_record(void *h, ncclProfilerEventState_t s,
                                ncclProfilerEventStateArgs_v5_t *a)
{
    (void)h; (void)s; (void)a;
    return ncclSuccess;
}
static ncclResult_t null_finalize(void *ctx) { (void)ctx; return ncclSuccess; }
static ncclProfiler_v5_t g_null_profiler = {"stub-null", null_init, null_start, null_stop,
                                            null_record, null_finalize};

static void prof_load(void)
{
    const char *on = getenv("STUB_NCCL_PROFILER"), *name = getenv("NCCL_PROFILER_PLUGIN");
    if (on && strcmp(on, "null") == 0) {
        g_prof = &g_null_profiler;
        return;
    }
    if (!on || strcmp(on, "1") != 0 || !name || !*name)
        return;
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    g_prof = lib ? dlsym(lib, "ncclProfiler_v5") : NULL;
}

static void prof_init(ncclComm_t c)
{
    pthread_once(&g_prof_once, prof_load);
    if (!g_prof || g_prof->init(&c->prof_ctx, 0x1234, &g_prof_mask, NULL, 1, c->nranks,
                                c->rank, NULL) != ncclSuccess) {
        c->prof_ctx = NULL;
        return;
    }
    pthread_once(&g_proxy_once, proxy_start);
}

static void prof_allreduce(ncclComm_t c, const void *sb, void *rb, size_t count, void *stream)
{
    if (!c->prof_ctx || c->nranks < 2 || !g_prof_mask)
        return;
    void *ctx = c->prof_ctx, *gapi = NULL, *capi = NULL, *grp = NULL, *task = NULL, *kl = NULL;
    ncclProfilerEventDescr_v5_t d = {.type = ncclProfileGroupApi};
    d.groupApi.groupDepth = 1;
    g_prof->startEvent(ctx, &gapi, &d);
    if (gapi)
        g_prof->recordEventState(gapi, ncclProfilerGroupStartApiStop, NULL);
    if (g_prof_mask & (ncclProfileCollApi | ncclProfileColl | ncclProfileKernelCh)) {
        d = (ncclProfilerEventDescr_v5_t){.type = ncclProfileCollApi, .parentObj = gapi};
        d.collApi = (cp_prof_coll_api){"AllReduce", count, "ncclFloat32", 0, stream, 0};
        g_prof->startEvent(ctx, &capi, &d);
        if (capi)
            g_prof->stopEvent(capi);
    }
    if (gapi)
        g_prof->recordEventState(gapi, ncclProfilerGroupEndApiStart, NULL);
    d = (ncclProfilerEventDescr_v5_t){.type = ncclProfileGroup};
    g_prof->startEvent(ctx, &grp, &d);
    d = (ncclProfilerEventDescr_v5_t){.type = ncclProfileColl, .parentObj = capi,
                                      .rank = c->rank};
    d.coll = (cp_prof_coll){c->seq_allreduce++, "AllReduce", sb, rb, count, 0, "ncclFloat32",
                            2, 16, "RING", "LL", grp};
    g_prof->startEvent(ctx, &task, &d);
    if (g_prof_mask & ncclProfileKernelLaunch) {
        d = (ncclProfilerEventDescr_v5_t){.type = ncclProfileKernelLaunch, .parentObj = gapi};
        g_prof->startEvent(ctx, &kl, &d);
        if (kl)
            g_prof->stopEvent(kl);
    }
    if (task) {
        g_prof->stopEvent(task);
        uint64_t h = atomic_load_explicit(&g_proxy_head, memory_order_relaxed);
        while (h - atomic_load_explicit(&g_proxy_tail, memory_order_acquire) >= STUB_PROXY_RING)
            nanosleep(&(struct timespec){0, 10000}, NULL);
        g_proxy_ring[h % STUB_PROXY_RING].ctx = ctx;
        g_proxy_ring[h % STUB_PROXY_RING].task = task;
        atomic_store_explicit(&g_proxy_head, h + 1, memory_order_release);
    }
    if (grp)
        g_prof->stopEvent(grp);
    if (gapi)
        g_prof->stopEvent(gapi);
}

static __thread int g_group_depth;
static int g_pre_mul_sum_next = ncclNumOps;

static int comm_ok(ncclComm_t c) { return c && c->magic == STUB_MAGIC; }

static ncclResult_t new_comm(ncclComm_t *out, int nranks, int rank, int dev, int blocking)
{
    if (!out || nranks <= 0 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    *c = (struct ncclComm){STUB_MAGIC, nranks, rank, dev, blocking ? 0 : 1, NULL, 0, NULL};
    prof_init(c);
    *out = c;
    return blocking ? ncclSuccess : ncclInProgress;
}

static int is_blocking(const ncclConfig_t *config)
{
    return !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
}

static ncclResult_t coll_check(size_t count, ncclDataType_t dt, ncclComm_t comm, int root)
{
    if (!comm_ok(comm) || (unsigned)dt >= (unsigned)ncclNumTypes)
        return ncclInvalidArgument;
    if (comm->pending)
        return ncclInvalidUsage;
    if (root != -1 && (root < 0 || root >= comm->nranks))
        return ncclInvalidArgument;
    if (count == STUB_ERRNO_COUNT)
        errno = errno + 1;
    if (count != STUB_FAIL_COUNT)
        return ncclSuccess;
    errno = EPROTO; /* NCCL's system errors leave the failed call's errno */
    return ncclSystemError;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr)
        return ncclInvalidArgument;
    *ptr = malloc(size ? size : 1);
    return *ptr ? ncclSuccess : ncclSystemError;
}
ncclResult_t ncclMemFree(void *ptr) { free(ptr); return ncclSuccess; }
ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = 22809;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (size_t i = 0; i < sizeof id->internal; i++)
        id->internal[i] = (char)(rand_r(&seed) & 0xff);
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t result)
{
    static const char *const names[] = {"no error", "unhandled cuda error", "unhandled system error",
                                        "internal error", "invalid argument", "invalid usage",
                                        "remote process exited or there was a network error",
                                        "NCCL operation in progress"};
    return (unsigned)result < sizeof names / sizeof names[0] ? names[result] : "unknown result code";
}
const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return "stub: no error"; }
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    (void)commId;
    return new_comm(comm, nranks, rank, 0, is_blocking(config));
}
/* STUB_NCCL_BLOCK_MS: the next value of the list, slept (one thread: the job's). */
static void block_next(void)
{
    static int used;
    const char *list = getenv("STUB_NCCL_BLOCK_MS");
    for (int i = 0; list && *list && i < used; i++) {
        list = strchr(list, ',');
        list = list ? list + 1 : NULL;
    }
    if (!list || !*list)
        return;
    used++;
    long ms = strtol(list, NULL, 10);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    (void)commId;
    block_next();
    return new_comm(comm, nranks, rank, 0, 1);
}
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    if (!comm || ndev <= 0)
        return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++)
        new_comm(&comm[i], ndev, i, devlist ? devlist[i] : i, 1);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId <= 0 || !commIds)
        return ncclInvalidArgument;
    return new_comm(newcomm, nranks, myrank, 0, is_blocking(config));
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    static long destroys;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    const char *fails = getenv("STUB_NCCL_DESTROY_FAILS");
    if (fails && *fails && atol(fails) == destroys++)
        return ncclInternalError;
    prof_finalize(comm);
    comm->magic = 0;
    const char *fresh = getenv("STUB_NCCL_FRESH_COMMS");
    if (fresh && *fresh == '1') {
        comm->kept = g_kept;
        g_kept = comm;
    } else {
        free(comm);
    }
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    return comm_ok(comm) && revokeFlags == 0 ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    (void)key;
    if (!comm_ok(comm) || !newcomm)
        return ncclInvalidArgument;
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    return new_comm(newcomm, comm->nranks, comm->rank, comm->dev, is_blocking(config));
}
/* stub_nccl_min, built without it, stands for an NCCL older than the shim's list. */
#ifndef STUB_WITHOUT_SHRINK
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    (void)excludeRanksList;
    (void)shrinkFlags;
    if (!comm_ok(comm) || !newcomm || excludeRanksCount < 0 || excludeRanksCount >= comm->nranks)
        return ncclInvalidArgument;
    int n = comm->nranks - excludeRanksCount;
    return new_comm(newcomm, n, comm->rank < n ? comm->rank : n - 1, comm->dev,
                    is_blocking(config));
}
#endif
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm_ok(comm) || !asyncError)
        return ncclInvalidArgument;
    *asyncError = comm->pending ? ncclInProgress : ncclSuccess;
    if (comm->pending)
        comm->pending--;
    return ncclSuccess;
}
#define STUB_QUERY(name, field)                                                          \
    ncclResult_t name(const ncclComm_t comm, int *out)                                   \
    {                                                                                    \
        if (!comm_ok(comm) || !out)                                                      \
            return ncclInvalidArgument;                                                  \
        if (comm->pending)                                                               \
            return ncclInProgress;                                                       \
        *out = comm->field;                                                              \
        return ncclSuccess;                                                              \
    }
STUB_QUERY(ncclCommCount, nranks)
STUB_QUERY(ncclCommCuDevice, dev)
STUB_QUERY(ncclCommUserRank, rank)
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    (void)buff; (void)size;
    if (!comm_ok(comm) || !handle)
        return ncclInvalidArgument;
    *handle = comm;
    return ncclSuccess;
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return comm_ok(comm) && handle ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags)
{
    (void)buff; (void)size; (void)winFlags;
    if (!comm_ok(comm) || !win)
        return ncclInvalidArgument;
    *win = (ncclWindow_t)comm;
    return ncclSuccess;
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return comm_ok(comm) && win ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
    (void)scalar; (void)datatype; (void)residence;
    if (!op || !comm_ok(comm))
        return ncclInvalidArgument;
    *op = (ncclRedOp_t)g_pre_mul_sum_next++;
    return ncclSuccess;
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    return comm_ok(comm) && op >= ncclNumOps ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    (void)sendbuff; (void)recvbuff; (void)op; (void)stream;
    return coll_check(count, datatype, comm, root);
}
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)sendbuff; (void)recvbuff; (void)stream;
    return coll_check(count, datatype, comm, root);
}
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
#define STUB_COLL(name, countname, ...)                                                  \
    ncclResult_t name(const void *sendbuff, void *recvbuff, size_t countname,            \
                      ncclDataType_t datatype, __VA_ARGS__ ncclComm_t comm,              \
                      cudaStream_t stream)                                               \
    {                                                                                    \
        (void)sendbuff; (void)recvbuff; (void)stream;                                    \
        return coll_check(countname, datatype, comm, -1);                                \
    }
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)op;
    if (count == STUB_BLOCK_COUNT)
        block_next();
    ncclResult_t r = coll_check(count, datatype, comm, -1);
    if (r == ncclSuccess && g_group_depth == 0)
        prof_allreduce(comm, sendbuff, recvbuff, count, stream);
    return r;
}
STUB_COLL(ncclReduceScatter, recvcount, ncclRedOp_t op __attribute__((unused)),)
STUB_COLL(ncclAllGather, sendcount, )
STUB_COLL(ncclAlltoAll, count, )
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff; (void)recvbuff; (void)stream;
    return coll_check(count, datatype, comm, root);
}
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff; (void)recvbuff; (void)stream;
    return coll_check(count, datatype, comm, root);
}
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff; (void)stream;
    return coll_check(count, datatype, comm, peer);
}
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    (void)recvbuff; (void)stream;
    return coll_check(count, datatype, comm, peer);
}
ncclResult_t ncclGroupStart(void)
{
    g_group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void)
{
    if (g_group_depth == 0)
        return ncclInvalidUsage;
    g_group_depth--;
    return ncclSuccess;
}
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (!simInfo)
        return ncclInvalidArgument;
    simInfo->estimatedTime = 1.0f;
    return ncclSuccess;
}
void ncclResetDebugInit(void) {}
