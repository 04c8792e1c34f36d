/* profiler: NCCL's profiler plugin, opened and called as NCCL 2.28.9 does (src/plugin/
 * profiler.cc, plugin_open.cc, plugin/profiler/profiler_v4.cc; the call sites in enqueue.cc,
 * group.cc, init.cc; the proxy's kernel-channel events of transport/profiler.cc).
 *
 * Four kinds of callback, on the threads NCCL makes them on:
 *  - init/finalize per communicator, at the end of its init and in its free;
 *  - API events (GroupApi, CollApi, P2pApi) on the calling thread, while the call appends its
 *    tasks; thread-local state as NCCL's ncclProfilerApiState;
 *  - launch events (KernelLaunch, Group, Coll, P2p) on the thread that issues the group's
 *    unit of work: started and stopped around the launch, as hostStreamPlanTask does (a task
 *    event's stop is not its completion);
 *  - kernel-channel events (KernelCh) on a proxy thread of the process: the stream worker
 *    posts each task's start and end in model time, and the proxy delivers them once that
 *    moment has passed in wall time, with the emulated GPU's %globaltimer as pTimer.
 * With no plugin loaded (the default) every hook is behind one branch on `cpn_prof_plugin`.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "abi/nccl_profiler_abi.h"
#include "emu/nccl/nccl_emu.h"

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);

/* ---- the plugin: loading (profiler.cc's ncclProfilerPluginLoad/Unload) ---- */

_Atomic(void *) cpn_prof_plugin;      /* the loaded table (v5 or v4), NULL: none */
static int prof_version;              /* 5 or 4 */
static ncclProfiler_v5_t *p5;
static ncclProfiler_v4_t *p4;
static void *prof_lib;
static int prof_refs;
enum { LOAD_FAILED = -1, LOAD_READY = 0, LOAD_OK = 1 };
static int prof_status = LOAD_READY;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
/* NCCL's ncclProfilerEventMask: the plugin's init writes it, the last init wins, and the
 * plugin may change it later (read atomically at each group's first call). */
static int prof_event_mask;
/* CLOCK_REALTIME - CLOCK_MONOTONIC at load: the emulated %globaltimer is the model's
 * CLOCK_MONOTONIC time plus this, as a GPU's globaltimer approximates unix time. */
static uint64_t gt_offset;

static void proxy_shutdown(void);

/* plugin_open.cc's tryOpenLib: dlopen, and whether the failure was "no such file". */
static void *try_open(const char *name, int *enoent)
{
    *enoent = 0;
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        *enoent = e && strstr(e, name) && strstr(e, "No such file or directory");
        if (!*enoent)
            cpn_info(CPN_INIT, -1, "PROFILER/Plugin: %s: %s", name, e ? e : "dlopen failed");
    }
    return h;
}

/* plugin_open.cc's openPluginLib: the name as given, then libnccl-profiler-<name>.so for a
 * bare name (no '/', not lib*.so); unset: libnccl-profiler.so. */
static void *open_lib(const char *name, char *path, size_t pathsz)
{
    char lib[256], missing[600] = "";
    int enoent;
    size_t len = name ? strlen(name) : 0;
    snprintf(lib, sizeof lib, "%s", len ? name : "libnccl-profiler.so");
    void *h = try_open(lib, &enoent);
    if (!h && enoent)
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", lib);
    int is_lib_so = len >= 3 && strncmp(name, "lib", 3) == 0 && strcmp(name + len - 3, ".so") == 0;
    if (!h && len && !strchr(name, '/') && !is_lib_so) {
        snprintf(lib, sizeof lib, "libnccl-profiler-%s.so", name);
        h = try_open(lib, &enoent);
        if (!h && enoent)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", lib);
    }
    if (!h) {
        if (missing[0])
            cpn_info(CPN_INIT, -1, "PROFILER/Plugin: Could not find:%s", missing);
        return NULL;
    }
    /* NCCL logs the path the loader found (dlinfo's link map) */
    Dl_info di;
    void *sym = dlsym(h, "ncclProfiler_v5");
    if (!sym)
        sym = dlsym(h, "ncclProfiler_v4");
    if (sym && dladdr(sym, &di) && di.dli_fname)
        snprintf(path, pathsz, "%s", di.dli_fname);
    else
        snprintf(path, pathsz, "%s", lib);
    return h;
}

static int plugin_load(void)
{
    pthread_mutex_lock(&prof_lock);
    if (prof_status == LOAD_FAILED) {
        pthread_mutex_unlock(&prof_lock);
        return 0;
    }
    if (prof_status == LOAD_OK) {
        prof_refs++;
        pthread_mutex_unlock(&prof_lock);
        return 1;
    }
    const char *name = getenv("NCCL_PROFILER_PLUGIN");
    if (name && !*name)
        name = NULL;   /* an empty value means unset, as ncclGetEnv reads it */
    if (name)
        cpn_info(CPN_ENV, -1, "NCCL_PROFILER_PLUGIN set by environment to %s", name);
    char path[4096] = "";
    void *h = NULL;
    if (!name || strcasecmp(name, "none") != 0)
        h = open_lib(name, path, sizeof path);
    /* 2.28.9 takes v5, else v4 (it has adapters for v3 and older too, not emulated) */
    ncclProfiler_v5_t *t5 = h ? dlsym(h, "ncclProfiler_v5") : NULL;
    ncclProfiler_v4_t *t4 = h && !t5 ? dlsym(h, "ncclProfiler_v4") : NULL;
    if (h && !t5 && !t4)
        cpn_info(CPN_INIT, -1, "External profiler plugin %s is unsupported", path);
    if (!t5 && !t4) {
        if (h)
            dlclose(h);
        prof_status = LOAD_FAILED;
        pthread_mutex_unlock(&prof_lock);
        return 0;
    }
    if (t5) {
        cpn_info(CPN_INIT, -1, "PROFILER/Plugin: Loaded %s (v5)", t5->name ? t5->name : "(null)");
        prof_version = 5;
    } else {
        cpn_info(CPN_INIT, -1, "PROFILER/Plugin: Loaded %s (v4)", t4->name ? t4->name : "(null)");
        prof_version = 4;
    }
    cpn_info(CPN_INIT, -1, "Successfully loaded external profiler plugin %s", path);
    p5 = t5;
    p4 = t4;
    prof_lib = h;
    prof_refs = 1;
    prof_status = LOAD_OK;
    struct timespec m, r;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    gt_offset = ((uint64_t)r.tv_sec - (uint64_t)m.tv_sec) * 1000000000ull +
                (uint64_t)r.tv_nsec - (uint64_t)m.tv_nsec;
    atomic_store(&cpn_prof_plugin, t5 ? (void *)t5 : (void *)t4);
    pthread_mutex_unlock(&prof_lock);
    return 1;
}

static void plugin_unload(void)
{
    pthread_mutex_lock(&prof_lock);
    if (prof_status != LOAD_OK || --prof_refs > 0) {
        pthread_mutex_unlock(&prof_lock);
        return;
    }
    cpn_info(CPN_INIT, -1, "PROFILER/Plugin: Closing profiler plugin %s",
             prof_version == 5 ? (p5->name ? p5->name : "(null)")
                               : (p4->name ? p4->name : "(null)"));
    atomic_store(&cpn_prof_plugin, NULL);
    proxy_shutdown();
    dlclose(prof_lib);
    prof_lib = NULL;
    p5 = NULL;
    p4 = NULL;
    prof_status = LOAD_READY;   /* a later communicator loads it again, as NCCL's does */
    pthread_mutex_unlock(&prof_lock);
}

/* ---- calls into the plugin; a v4 plugin through NCCL's adapter (profiler_v4.cc) ---- */

static void ev_start(void *ctx, void **handle, ncclProfilerEventDescr_v5_t *d)
{
    if (prof_version == 5) {
        p5->startEvent(ctx, handle, d);
        return;
    }
    /* the adapter passes Group, Coll, P2p, proxy and KernelCh events; the v5 API and
     * KernelLaunch events are dropped and *handle is left alone. Coll and P2p take their
     * parent from parentGroup; the adapter never copies p2p.nChannels (NCCL leaves it
     * uninitialized on its stack; here it is 0). */
    ncclProfilerEventDescr_v4_t v;
    memset(&v, 0, sizeof v);
    v.type = (uint8_t)d->type;
    v.parentObj = d->parentObj;
    v.rank = d->rank;
    switch (d->type) {
    case ncclProfileGroup:
        break;
    case ncclProfileColl:
        v.coll.seqNumber = d->coll.seqNumber;
        v.coll.func = d->coll.func;
        v.coll.sendBuff = d->coll.sendBuff;
        v.coll.recvBuff = d->coll.recvBuff;
        v.coll.count = d->coll.count;
        v.coll.root = d->coll.root;
        v.coll.datatype = d->coll.datatype;
        v.coll.nChannels = d->coll.nChannels;
        v.coll.nWarps = d->coll.nWarps;
        v.coll.algo = d->coll.algo;
        v.coll.proto = d->coll.proto;
        v.parentObj = d->coll.parentGroup;
        break;
    case ncclProfileP2p:
        v.p2p.func = d->p2p.func;
        v.p2p.buff = d->p2p.buff;
        v.p2p.count = d->p2p.count;
        v.p2p.datatype = d->p2p.datatype;
        v.p2p.peer = d->p2p.peer;
        v.parentObj = d->p2p.parentGroup;
        break;
    case ncclProfileKernelCh:
        v.kernelCh.channelId = d->kernelCh.channelId;
        v.kernelCh.pTimer = d->kernelCh.pTimer;
        break;
    default:
        return;
    }
    p4->startEvent(ctx, handle, &v);
}

static void ev_stop(void *handle)
{
    if (prof_version == 5)
        p5->stopEvent(handle);
    else
        p4->stopEvent(handle);
}

static void ev_state(void *handle, int state, ncclProfilerEventStateArgs_v5_t *args)
{
    if (prof_version == 5) {
        p5->recordEventState(handle, state, args);
        return;
    }
    if (state != ncclProfilerKernelChStop)
        return;   /* the adapter drops the v5 group API states */
    ncclProfilerEventStateArgs_v4_t a;
    memset(&a, 0, sizeof a);
    a.kernelCh.pTimer = args->kernelCh.pTimer;
    p4->recordEventState(handle, state, &a);
}

/* ncclDebugLogger_t for the plugin: its lines go to the emulation's log. */
static void prof_log(int level, unsigned long flags, const char *file, int line,
                     const char *fmt, ...)
{
    if (!fmt)
        return;
    va_list ap;
    va_start(ap, fmt);
    cpn_log_v(level, flags, file ? file : "", line, fmt, ap);
    va_end(ap);
}

/* ---- per communicator: init and finalize (init.cc, profiler.cc) ---- */

#define PROF_FUNCS (CPEMU_OP_RECV + 1)

struct cpn_prof_comm {
    _Atomic int refs;            /* the comm's, and each unit's kernel plan */
    void *ctx;                   /* what the plugin's init returned */
    int rank, nranks, nnodes, nchannels, nvlink_ring;
    uint64_t seq[PROF_FUNCS];    /* NCCL's comm->seqNumber[func] */
    int closing;                 /* finalize under way: nothing more is posted */
    int pending;                 /* kernel-channel tasks posted and not yet stopped */
    int delivering;              /* callbacks the proxy is making for it right now */
};

static void pc_unref(cpn_prof_comm *pc)
{
    if (pc && atomic_fetch_sub(&pc->refs, 1) == 1)
        free(pc);
}

void cpn_prof_comm_init(ncclComm_t comm)
{
    if (!plugin_load())
        return;
    cpn_prof_comm *pc = calloc(1, sizeof *pc);
    if (!pc) {
        plugin_unload();
        return;
    }
    atomic_store(&pc->refs, 1);
    pc->rank = comm->rank;
    pc->nranks = comm->nranks;
    pc->nnodes = comm->nnodes > 0 ? comm->nnodes : 1;
    pc->nchannels = comm->nchannels > 0 ? comm->nchannels : 1;
    pc->nvlink_ring = comm->nvlink_ring;
    const char *name = comm->config.commName;
    int err;
    errno = 0;
    if (prof_version == 5)
        err = p5->init(&pc->ctx, comm->comm_hash, &prof_event_mask, name, pc->nnodes,
                       comm->nranks, comm->rank, prof_log);
    else
        err = p4->init(&pc->ctx, &prof_event_mask, name, comm->comm_hash, pc->nnodes,
                       comm->nranks, comm->rank, prof_log);
    if (err) {
        /* NCCL goes on with the plugin and a context the init did not make; here that
         * communicator gets no events at all, and gives its reference back now */
        cpn_info(CPN_INIT, comm->dev,
                 "Profiler init failed with error '%d': %s. Continue without profiler.", err,
                 strerror(errno));
        free(pc);
        plugin_unload();
        return;
    }
    comm->prof = pc;
}

static void proxy_drain(cpn_prof_comm *pc);

void cpn_prof_comm_fini(ncclComm_t comm)
{
    cpn_prof_comm *pc = comm->prof;
    if (!pc)
        return;
    comm->prof = NULL;
    /* the proxy delivers what the comm's kernels still owe before finalize, as NCCL's
     * proxy is gone before commFree calls ncclProfilerPluginFinalize */
    proxy_drain(pc);
    if (prof_version == 5)
        p5->finalize(pc->ctx);
    else
        p4->finalize(pc->ctx);
    pc_unref(pc);
    plugin_unload();
}

/* ---- names, as NCCL prints them (collectives.cc) ---- */

static const char *func_name(int kind)
{
    switch (kind) {
    case CPEMU_OP_ALLGATHER: return "AllGather";
    case CPEMU_OP_ALLREDUCE: return "AllReduce";
    case CPEMU_OP_ALLTOALL: return "AlltoAll";
    case CPEMU_OP_BROADCAST: return "Broadcast";
    case CPEMU_OP_GATHER: return "Gather";
    case CPEMU_OP_RECV: return "Recv";
    case CPEMU_OP_REDUCE: return "Reduce";
    case CPEMU_OP_REDUCESCATTER: return "ReduceScatter";
    case CPEMU_OP_SCATTER: return "Scatter";
    case CPEMU_OP_SEND: return "Send";
    default: return "Invalid";
    }
}

static const char *dtype_name(int t)
{
    /* ncclDatatypeToString has no case for ncclUint8: NCCL says "Unknown" too */
    switch (t) {
    case ncclInt8: return "ncclInt8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
    default: return "Unknown";
    }
}

/* ---- API events on the calling thread (enqueue.cc, group.cc) ---- */

enum { API_STARTED = 1, API_STOPPED, API_RESET };

static _Thread_local struct {
    int group_depth;      /* profilerGroupDepth */
    int mask;             /* eActivationMask, read at each GroupApi start attempt */
    int state;
    void *group_api, *p2p_api, *coll_api;
} A;

void cpn_prof_enqueue_enter(void)
{
    /* a group API event already started: the call's implicit group counts in its depth */
    if (A.group_depth > 0)
        A.group_depth++;
}

static void record_group_state(int st)
{
    int rec = 0;
    if (st == ncclProfilerGroupStartApiStop && A.state == API_STARTED) {
        A.state = API_STOPPED;
        rec = 1;
    } else if (st == ncclProfilerGroupEndApiStart && A.state == API_STOPPED) {
        A.state = API_RESET;
        rec = 1;
    }
    if (rec && A.group_api)
        ev_state(A.group_api, st, NULL);
}

void cpn_prof_group_end_enter(void)
{
    if (A.group_depth > 0)
        A.group_depth--;
    if (A.group_depth == 0)
        record_group_state(ncclProfilerGroupEndApiStart);
}

void cpn_prof_group_end_exit(void)
{
    if (A.group_api && A.group_depth == 0) {
        ev_stop(A.group_api);
        A.group_api = NULL;
    }
}

static void start_group_api(const cpn_prof_comm *pc, int captured)
{
    A.mask = __atomic_load_n(&prof_event_mask, __ATOMIC_RELAXED);
    int group_api_mask = ncclProfileGroupApi | ncclProfileP2pApi | ncclProfileCollApi |
                         ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl |
                         ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
                         ncclProfileKernelCh | ncclProfileNetPlugin;
    /* only the outermost group gets an event */
    if ((A.mask & group_api_mask) && A.group_depth == 0) {
        ncclProfilerEventDescr_v5_t d;
        memset(&d, 0, sizeof d);
        d.type = ncclProfileGroupApi;
        d.groupApi.graphCaptured = captured != 0;
        d.groupApi.groupDepth = cpn_group_depth();
        if (pc)
            ev_start(pc->ctx, &A.group_api, &d);
        A.group_depth = cpn_group_depth();
        A.state = API_STARTED;
    }
}

/* One task as NCCL's taskAppend makes it, with the profiler's view of it. */
typedef struct prof_task {
    int coll;                 /* a collective task (Coll event), else p2p (P2p event) */
    int func;                 /* enum cp_op: every p2p task is SEND or RECV */
    const void *sendbuff;
    void *recvbuff;           /* a p2p task's buffer */
    size_t count;
    int dtype;
    int root;                 /* the root, or a p2p task's peer */
    int mask;                 /* eActivationMask when appended */
    void *group_api, *api;    /* its GroupApi and CollApi/P2pApi handles */
    /* at launch (the tuner's choice) and after */
    void *event;              /* Coll / P2p handle */
    int nch, nwarps, chan0;
    int no_proxy;             /* a p2p task to the rank itself: no proxy op, no KernelCh */
    const char *algo, *proto;
    /* kernel channels, under the proxy's lock */
    int kstate;               /* KS_* */
    int has_end;
    uint64_t kstart, kend;    /* model CLOCK_MONOTONIC ns */
    void *kch[CPN_PROF_MAX_CH];
} prof_task;

struct cpn_prof_op {
    int captured;
    int ntasks;
    prof_task tasks[];
};

static void append_task(cpn_prof_op *po, const cpn_op *op, int coll, int func,
                        const void *sendbuff, void *recvbuff, size_t count, int dtype, int root)
{
    const cpn_prof_comm *pc = op->comm->prof;
    prof_task *t = &po->tasks[po->ntasks++];
    memset(t, 0, sizeof *t);
    t->coll = coll;
    t->func = func;
    t->sendbuff = sendbuff;
    t->recvbuff = recvbuff;
    t->count = count;
    t->dtype = dtype;
    t->root = root;
    start_group_api(pc, po->captured);
    record_group_state(ncclProfilerGroupStartApiStop);
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof d);
    d.parentObj = A.group_api;
    void **h;
    int want;
    if (coll) {
        d.type = ncclProfileCollApi;
        d.collApi.func = func_name(op->kind);
        d.collApi.count = op->count;
        d.collApi.datatype = dtype_name(op->dtype);
        d.collApi.root = op->root;
        d.collApi.stream = (void *)op->stream;
        d.collApi.graphCaptured = po->captured != 0;
        want = ncclProfileCollApi | ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep |
               ncclProfileKernelCh | ncclProfileNetPlugin;
        h = &A.coll_api;
    } else {
        d.type = ncclProfileP2pApi;
        d.p2pApi.func = func_name(func);
        d.p2pApi.count = count;
        d.p2pApi.datatype = dtype_name(dtype);
        d.p2pApi.stream = (void *)op->stream;
        d.p2pApi.graphCaptured = po->captured != 0;
        want = ncclProfileP2pApi | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
               ncclProfileKernelCh | ncclProfileNetPlugin;
        h = &A.p2p_api;
    }
    if (pc && (A.mask & want))
        ev_start(pc->ctx, h, &d);
    t->mask = A.mask;
    t->group_api = A.group_api;
    t->api = *h;
    /* NCCL leaves the CollApi handle set after its stop; it is cleared here, so a later
     * call whose CollApi event was not started never stops this one again */
    if (*h) {
        ev_stop(*h);
        *h = NULL;
    }
}

void cpn_prof_task_append(cpn_op *op)
{
    ncclComm_t comm = op->comm;
    int p2p = op->kind == CPEMU_OP_SEND || op->kind == CPEMU_OP_RECV;
    /* a one-rank communicator runs a collective as ncclLaunchOneRank: no task, no event */
    if (!p2p && comm->nranks == 1)
        return;
    int n = comm->nranks, ntasks = 1;
    if (op->kind == CPEMU_OP_ALLTOALL)
        ntasks = 2 * n;
    else if (op->kind == CPEMU_OP_GATHER || op->kind == CPEMU_OP_SCATTER)
        ntasks = 1 + (comm->rank == op->root ? n : 0);
    cpn_prof_op *po = calloc(1, sizeof *po + (size_t)ntasks * sizeof(prof_task));
    if (!po)
        return;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cuStreamIsCapturing(op->stream, &cs) == CUDA_SUCCESS &&
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        po->captured = 1;
    size_t es = cpn_dtype_size(op->dtype);
    const char *sb = op->sendbuff;
    char *rb = op->recvbuff;
    switch (op->kind) {
    case CPEMU_OP_SEND:
        append_task(po, op, 0, CPEMU_OP_SEND, NULL, (void *)sb, op->count, op->dtype, op->root);
        break;
    case CPEMU_OP_RECV:
        append_task(po, op, 0, CPEMU_OP_RECV, NULL, rb, op->count, op->dtype, op->root);
        break;
    case CPEMU_OP_ALLTOALL:
        /* NCCL 2.28 turns these into p2p tasks (taskAppend), each its own P2pApi event */
        for (int r = 0; r < n; r++) {
            size_t off = (size_t)r * op->count * es;
            append_task(po, op, 0, CPEMU_OP_SEND, NULL, (void *)(sb ? sb + off : NULL), op->count,
                        op->dtype, r);
            append_task(po, op, 0, CPEMU_OP_RECV, NULL, rb ? rb + off : NULL, op->count, op->dtype,
                        r);
        }
        break;
    case CPEMU_OP_GATHER:
        append_task(po, op, 0, CPEMU_OP_SEND, NULL, (void *)sb, op->count, op->dtype, op->root);
        if (comm->rank == op->root)
            for (int r = 0; r < n; r++)
                append_task(po, op, 0, CPEMU_OP_RECV, NULL,
                            rb ? rb + (size_t)r * op->count * es : NULL, op->count, op->dtype, r);
        break;
    case CPEMU_OP_SCATTER:
        if (comm->rank == op->root)
            for (int r = 0; r < n; r++)
                append_task(po, op, 0, CPEMU_OP_SEND, NULL,
                            (void *)(sb ? sb + (size_t)r * op->count * es : NULL), op->count,
                            op->dtype, r);
        append_task(po, op, 0, CPEMU_OP_RECV, NULL, rb, op->count, op->dtype, op->root);
        break;
    default: {
        /* collTaskAppend: AllGather and Broadcast count bytes, as ncclInt8 */
        size_t count = op->count;
        int dtype = op->dtype;
        if (op->kind == CPEMU_OP_ALLGATHER || op->kind == CPEMU_OP_BROADCAST) {
            count *= es;
            dtype = ncclInt8;
        }
        append_task(po, op, 1, op->kind, op->sendbuff, op->recvbuff, count, dtype, op->root);
        break;
    }
    }
    op->prof = po;
}

void cpn_prof_op_free(cpn_prof_op *po)
{
    free(po);
}

/* ---- launch events on the issuing thread (enqueue.cc's ncclLaunchKernel, hostStreamPlanTask) */

enum { KS_IDLE = 0, KS_POSTED, KS_STARTED, KS_DONE };

struct cpn_prof_plan {
    _Atomic int refs;            /* the issuer's, the item's, the proxy list's */
    cpn_prof_comm *pc;
    int persistent;              /* captured: its task events wait for a graph launch */
    int ready;                   /* task events started (ncclProxyStart): the proxy may go */
    int listed;
    struct cpn_prof_plan *next;  /* the proxy's list */
    int mask;                    /* the first task's non-zero mask */
    void *group_api;             /* ... and its GroupApi handle */
    void *launch_event, *group_event;
    int nops;
    int *op_first;               /* nops + 1: the tasks of unit op i */
    int ntasks;
    prof_task tasks[];
};

static void plan_unref(cpn_prof_plan *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    pc_unref(p->pc);
    free(p->op_first);
    free(p);
}

void cpn_prof_plan_release(cpn_prof_plan *p)
{
    plan_unref(p);
}

/* The tuner's choice, a small model of NCCL's (emu/nccl/README.md, "Profiler plugin"). */
static void tune(const cpn_prof_comm *pc, prof_task *t)
{
    size_t bytes = t->count * cpn_dtype_size(t->dtype);
    if (!t->coll) {
        /* one p2p channel per peer (the log's "1 p2p channels per peer"), spread over the
         * p2p channels by the peer's distance in the ring */
        int p2pch = pc->nchannels * 2 > 32 ? 32 : pc->nchannels * 2;
        int delta = (t->root - pc->rank + pc->nranks) % (pc->nranks ? pc->nranks : 1);
        t->nch = 1;
        t->chan0 = p2pch > 0 ? delta % p2pch : 0;
        /* A send to itself runs in the kernel but NCCL gives its pair no proxy op
         * (enqueue.cc addP2pToPlan: nProxyOps = selfSend ? 0 : 2), and kernel-channel
         * events come from the proxy: its P2p event says nChannels, no channel follows.
         * Seen on an H200 (docs/VALIDATION.md). */
        t->no_proxy = t->root == pc->rank;
        return;
    }
    int ll = bytes < (64u << 10);
    int ll128 = !ll && pc->nnodes == 1 && pc->nvlink_ring && bytes < (4u << 20);
    t->proto = ll ? "LL" : ll128 ? "LL128" : "SIMPLE";
    t->nwarps = ll ? 16 : 8;
    int tree = pc->nnodes > 1 && t->func == CPEMU_OP_ALLREDUCE && !ll && bytes < (32u << 20);
    t->algo = tree ? "TREE" : "RING";
    size_t want = (bytes + (128u << 10) - 1) / (128u << 10);
    int nch = pc->nchannels < CPN_PROF_MAX_CH ? pc->nchannels : CPN_PROF_MAX_CH;
    t->nch = want < 1 ? 1 : want > (size_t)nch ? nch : (int)want;
    t->chan0 = 0;
}

cpn_prof_plan *cpn_prof_plan_new(ncclComm_t comm, cpn_op *ops, int nops)
{
    cpn_prof_comm *pc = comm->prof;
    if (!pc)
        return NULL;
    int ntasks = 0, persistent = 0;
    for (int i = 0; i < nops; i++)
        if (ops[i].prof) {
            ntasks += ops[i].prof->ntasks - (ops[i].drop[0] >= 0) - (ops[i].drop[1] >= 0);
            persistent |= ops[i].prof->captured;
        }
    if (ntasks == 0)
        return NULL;   /* nothing NCCL would have made a task of */
    cpn_prof_plan *p = calloc(1, sizeof *p + (size_t)ntasks * sizeof(prof_task));
    if (!p || !(p->op_first = calloc((size_t)nops + 1, sizeof *p->op_first))) {
        free(p);
        return NULL;
    }
    atomic_store(&p->refs, 2);   /* the issuer's and the item's */
    atomic_fetch_add(&pc->refs, 1);
    p->pc = pc;
    p->persistent = persistent;
    p->nops = nops;
    for (int i = 0; i < nops; i++) {
        p->op_first[i] = p->ntasks;
        if (!ops[i].prof)
            continue;
        for (int k = 0; k < ops[i].prof->ntasks; k++) {
            if (k == ops[i].drop[0] || k == ops[i].drop[1])
                continue; /* a self pair in place: NCCL frees its tasks unlaunched */
            prof_task *t = &p->tasks[p->ntasks++];
            *t = ops[i].prof->tasks[k];
            tune(pc, t);
            if (!p->mask && t->mask) {
                p->mask = t->mask;
                p->group_api = t->group_api;
            }
        }
    }
    p->op_first[nops] = p->ntasks;
    return p;
}

void cpn_prof_launch_start(cpn_prof_plan *p, CUstream stream)
{
    if (!(p->mask & ncclProfileKernelLaunch))
        return;
    ncclProfilerEventDescr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = ncclProfileKernelLaunch;
    d.parentObj = p->group_api;
    d.kernelLaunch.stream = (void *)stream;
    ev_start(p->pc->ctx, &p->launch_event, &d);
}

static void proxy_start(cpn_prof_plan *p);

void cpn_prof_launch_stop(cpn_prof_plan *p)
{
    if (p->launch_event)
        ev_stop(p->launch_event);
    if (p->persistent)
        return;   /* hostStreamPlanTask runs at each graph launch: never, here */
    cpn_prof_comm *pc = p->pc;
    if (p->mask & (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                   ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin)) {
        ncclProfilerEventDescr_v5_t d;
        memset(&d, 0, sizeof d);
        d.type = ncclProfileGroup;
        ev_start(pc->ctx, &p->group_event, &d);
    }
    /* ncclProfilerStartTaskEvents: collective tasks, then p2p tasks */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->ntasks; i++) {
            prof_task *t = &p->tasks[i];
            if (t->coll != (pass == 0))
                continue;
            ncclProfilerEventDescr_v5_t d;
            memset(&d, 0, sizeof d);
            d.parentObj = t->api;
            d.rank = pc->rank;
            if (t->coll) {
                if (t->mask & (ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep |
                               ncclProfileKernelCh | ncclProfileNetPlugin)) {
                    d.type = ncclProfileColl;
                    d.coll.parentGroup = p->group_event;
                    d.coll.seqNumber = __atomic_load_n(&pc->seq[t->func], __ATOMIC_RELAXED);
                    d.coll.func = func_name(t->func);
                    d.coll.sendBuff = t->sendbuff;
                    d.coll.recvBuff = t->recvbuff;
                    d.coll.count = t->count;
                    d.coll.root = t->root;
                    d.coll.datatype = dtype_name(t->dtype);
                    d.coll.nChannels = (uint8_t)t->nch;
                    d.coll.nWarps = (uint8_t)t->nwarps;
                    d.coll.algo = t->algo;
                    d.coll.proto = t->proto;
                    ev_start(pc->ctx, &t->event, &d);
                }
                __atomic_fetch_add(&pc->seq[t->func], 1, __ATOMIC_RELAXED);
            } else if (t->mask & (ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
                                  ncclProfileKernelCh | ncclProfileNetPlugin)) {
                d.type = ncclProfileP2p;
                d.p2p.parentGroup = p->group_event;
                d.p2p.func = func_name(t->func);
                d.p2p.buff = t->recvbuff;
                d.p2p.count = t->count;
                d.p2p.datatype = dtype_name(t->dtype);
                d.p2p.peer = t->root;
                d.p2p.nChannels = (uint8_t)t->nch;
                ev_start(pc->ctx, &t->event, &d);
            }
        }
    proxy_start(p);   /* ncclProxyStart: the proxy sees the unit only now */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->ntasks; i++)
            if (p->tasks[i].coll == (pass == 0) && p->tasks[i].event)
                ev_stop(p->tasks[i].event);
    if (p->group_event)
        ev_stop(p->group_event);
}

/* ---- kernel-channel events: the stream worker posts, the proxy thread delivers ---- */

static pthread_mutex_t px_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t px_wake;       /* the proxy: something was posted (CLOCK_MONOTONIC) */
static pthread_cond_t px_done;       /* a finalize: its comm's tasks were delivered */
static pthread_once_t px_once = PTHREAD_ONCE_INIT;
static cpn_prof_plan *px_head;
static pthread_t px_thread;
static int px_running, px_stop;
static pid_t px_pid;

static void px_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&px_wake, &a);
    pthread_cond_init(&px_done, &a);
    pthread_condattr_destroy(&a);
}

static void abs_time(struct timespec *ts, uint64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

static void px_list_add(cpn_prof_plan *p)
{
    if (p->listed)
        return;
    p->listed = 1;
    atomic_fetch_add(&p->refs, 1);
    /* at the tail: ties go to the earlier launch, as NCCL's proxy sees its ops in order */
    p->next = NULL;
    cpn_prof_plan **pp = &px_head;
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
}

static void deliver_start(cpn_prof_plan *p, prof_task *t, uint64_t start)
{
    for (int c = 0; c < t->nch; c++) {
        ncclProfilerEventDescr_v5_t d;
        memset(&d, 0, sizeof d);
        d.type = ncclProfileKernelCh;
        d.parentObj = t->event;
        d.kernelCh.channelId = (uint8_t)(t->chan0 + c);
        d.kernelCh.pTimer = start + gt_offset;
        t->kch[c] = NULL;
        ev_start(p->pc->ctx, &t->kch[c], &d);
    }
}

static void deliver_stop(prof_task *t, uint64_t end)
{
    for (int c = 0; c < t->nch; c++)
        if (t->kch[c]) {
            ncclProfilerEventStateArgs_v5_t a;
            memset(&a, 0, sizeof a);
            a.kernelCh.pTimer = end + gt_offset;
            ev_state(t->kch[c], ncclProfilerKernelChStop, &a);
            ev_stop(t->kch[c]);
        }
}

/* One pass over the posted tasks: delivers the one due first (lock dropped around the
 * callbacks), or says when the next one will be. In time order, as NCCL's proxy observes its
 * kernels' channels: a backlog (the proxy thread held off the CPU) once came out newest
 * first, a later collective's end before an earlier one's. 1: something was delivered. */
static int px_step(uint64_t *next)
{
    uint64_t now = cpn_now_ns(), best_at = UINT64_MAX;
    cpn_prof_plan *best_p = NULL;
    prof_task *best_t = NULL;
    *next = UINT64_MAX;
    for (cpn_prof_plan **pp = &px_head; *pp;) {
        cpn_prof_plan *p = *pp;
        int live = 0;
        for (int i = 0; p->ready && i < p->ntasks; i++) {
            prof_task *t = &p->tasks[i];
            if (t->kstate != KS_POSTED && t->kstate != KS_STARTED)
                continue;
            live = 1;
            int start = t->kstate == KS_POSTED;
            uint64_t at = start ? t->kstart : t->kend;
            if (!start && !t->has_end)
                continue;
            if (now < at) {
                if (at < *next)
                    *next = at;
            } else if (at < best_at) {
                best_at = at;
                best_p = p;
                best_t = t;
            }
        }
        if (!p->ready) {
            pp = &p->next;
            continue;
        }
        if (!live) {
            *pp = p->next;
            p->listed = 0;
            plan_unref(p);
            continue;
        }
        pp = &p->next;
    }
    if (!best_t)
        return 0;
    int start = best_t->kstate == KS_POSTED;
    best_p->pc->delivering++;
    pthread_mutex_unlock(&px_lock);
    if (start)
        deliver_start(best_p, best_t, best_at);
    else
        deliver_stop(best_t, best_at);
    pthread_mutex_lock(&px_lock);
    best_p->pc->delivering--;
    best_t->kstate = start ? KS_STARTED : KS_DONE;
    if (!start && --best_p->pc->pending == 0)
        pthread_cond_broadcast(&px_done);
    else if (best_p->pc->delivering == 0)
        pthread_cond_broadcast(&px_done);
    return 1;
}

static void *px_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&px_lock);
    while (!px_stop) {
        uint64_t next;
        if (px_step(&next))
            continue;
        if (next == UINT64_MAX) {
            pthread_cond_wait(&px_wake, &px_lock);
        } else {
            struct timespec ts;
            abs_time(&ts, next);
            pthread_cond_timedwait(&px_wake, &px_lock, &ts);
        }
    }
    pthread_mutex_unlock(&px_lock);
    return NULL;
}

/* Called with px_lock held: the proxy thread of this process, started on first use (and
 * again in a forked child, which has none). */
static void px_ensure_thread(void)
{
    pid_t me = getpid();
    if (px_running && px_pid == me)
        return;
    if (px_running && px_pid != me) {
        /* a forked child: the parent's thread and list are not ours */
        px_head = NULL;
        px_running = 0;
    }
    px_stop = 0;
    if (pthread_create(&px_thread, NULL, px_main, NULL) == 0) {
        px_running = 1;
        px_pid = me;
    }
}

static void proxy_start(cpn_prof_plan *p)
{
    pthread_once(&px_once, px_init);
    pthread_mutex_lock(&px_lock);
    p->ready = 1;
    pthread_cond_broadcast(&px_wake);
    pthread_mutex_unlock(&px_lock);
}

static void post(cpn_prof_plan *p, int op, uint64_t ns, int end)
{
    if (op < 0 || op >= p->nops)
        return;
    pthread_once(&px_once, px_init);
    pthread_mutex_lock(&px_lock);
    int any = 0;
    for (int i = p->op_first[op]; i < p->op_first[op + 1]; i++) {
        prof_task *t = &p->tasks[i];
        if (!(t->mask & ncclProfileKernelCh) || t->no_proxy)
            continue;
        if (!end && t->kstate == KS_IDLE && !p->pc->closing) {
            t->kstate = KS_POSTED;
            t->kstart = ns;
            p->pc->pending++;
            any = 1;
        } else if (end && (t->kstate == KS_POSTED || t->kstate == KS_STARTED) && !t->has_end) {
            t->kend = ns > t->kstart ? ns : t->kstart;
            t->has_end = 1;
            any = 1;
        }
    }
    if (any) {
        px_list_add(p);
        px_ensure_thread();
        pthread_cond_broadcast(&px_wake);
    }
    pthread_mutex_unlock(&px_lock);
}

void cpn_prof_kernel_begin(cpn_prof_plan *p, int op, uint64_t start_ns)
{
    post(p, op, start_ns, 0);
}

void cpn_prof_kernel_end(cpn_prof_plan *p, int op, uint64_t end_ns)
{
    post(p, op, end_ns, 1);
}

/* Waits until the proxy delivered every kernel-channel event a finalizing comm still owes
 * (they are all due within the model's durations: its work is done or gave up), at most
 * 10 s; what is left after that is never delivered. */
static void proxy_drain(cpn_prof_comm *pc)
{
    pthread_once(&px_once, px_init);
    pthread_mutex_lock(&px_lock);
    pc->closing = 1;
    uint64_t deadline = cpn_now_ns() + 10000000000ull;
    while ((pc->pending > 0 || pc->delivering > 0) && cpn_now_ns() < deadline) {
        if (!px_running || px_pid != getpid())
            break;
        pthread_cond_broadcast(&px_wake);
        struct timespec ts;
        abs_time(&ts, cpn_now_ns() + 100000000ull);
        pthread_cond_timedwait(&px_done, &px_lock, &ts);
    }
    while (pc->delivering > 0) {
        struct timespec ts;
        abs_time(&ts, cpn_now_ns() + 100000000ull);
        pthread_cond_timedwait(&px_done, &px_lock, &ts);
    }
    /* anything still owed is dropped: the context is about to be finalized */
    for (cpn_prof_plan *p = px_head; p; p = p->next)
        if (p->pc == pc)
            for (int i = 0; i < p->ntasks; i++)
                if (p->tasks[i].kstate == KS_POSTED || p->tasks[i].kstate == KS_STARTED)
                    p->tasks[i].kstate = KS_DONE;
    pc->pending = 0;
    pthread_mutex_unlock(&px_lock);
}

/* The last unload: the proxy thread ends (prof_lock held). */
static void proxy_shutdown(void)
{
    pthread_once(&px_once, px_init);
    pthread_mutex_lock(&px_lock);
    int join = px_running && px_pid == getpid();
    px_stop = 1;
    pthread_cond_broadcast(&px_wake);
    pthread_mutex_unlock(&px_lock);
    if (join)
        pthread_join(px_thread, NULL);
    pthread_mutex_lock(&px_lock);
    while (px_head) {
        cpn_prof_plan *p = px_head;
        px_head = p->next;
        p->listed = 0;
        plan_unref(p);
    }
    px_running = 0;
    px_stop = 0;
    pthread_mutex_unlock(&px_lock);
}
