/* profiler_plugin_probe: an NCCL profiler plugin for the tests of the emulated NCCL's plugin
 * support (test_emu_nccl_profiler.c). It logs every callback, one line per write(2) so the
 * ranks' lines never interleave, to the file named by CPPROBE_LOG:
 *
 *   init  <pid> <tid> ctx=<p> hash=<hex> name=<s> nnodes=<n> nranks=<n> rank=<n> v=<4|5>
 *   start <pid> <tid> h=<p> type=<n> parent=<p> rank=<n> <type's fields>
 *   state <pid> <tid> h=<p> st=<n> ptimer=<ns>
 *   stop  <pid> <tid> h=<p>
 *   fini  <pid> <tid> ctx=<p>
 *
 * Built four ways (tests/emu/nccl.cmake): PROBE_V5 exports ncclProfiler_v5, PROBE_V4 only
 * ncclProfiler_v4, PROBE_FAIL a v5 whose init fails, and none of them: no symbol at all.
 * CPPROBE_MASK sets the activation mask (default: every API, task and kernel event).
 * Handles are counters, never dereferenced by NCCL; they are unique in a process.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abi/nccl_profiler_abi.h"

static _Atomic uintptr_t next_handle = 0x10000;

/* One line: the callback's word, pid, tid, then its fields. */
#define LOG(word, ...) out_word(word, __VA_ARGS__)
static void out_word(const char *word, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_word(const char *word, const char *fmt, ...)
{
    char rest[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    const char *path = getenv("CPPROBE_LOG");
    if (!path || !*path)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "%s %d %ld %s\n", word, (int)getpid(),
                     (long)syscall(SYS_gettid), rest);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

static int probe_mask(void)
{
    const char *m = getenv("CPPROBE_MASK");
    if (m && *m)
        return (int)strtol(m, NULL, 0);
    return ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch |
           ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh;
}

static const char *s(const char *p) { return p ? p : "(null)"; }

static void *new_handle(void)
{
    return (void *)atomic_fetch_add(&next_handle, 16);
}

__attribute__((unused)) static ncclResult_t probe_init(void **ctx, uint64_t hash, int *mask, const char *name,
                               int nnodes, int nranks, int rank, ncclDebugLogger_t logfn, int v)
{
    *ctx = new_handle();
    LOG("init", "ctx=%p hash=%llx name=%s nnodes=%d nranks=%d rank=%d v=%d", *ctx,
        (unsigned long long)hash, s(name), nnodes, nranks, rank, v);
    if (logfn)
        logfn(3, 0x4000 /* NCCL_PROFILE */, __FILE__, __LINE__, "probe: init rank %d", rank);
#ifdef PROBE_FAIL
    *mask = probe_mask();
    return ncclInternalError;
#else
    *mask = probe_mask();
    return ncclSuccess;
#endif
}

__attribute__((unused)) static ncclResult_t probe_stop(void *h)
{
    LOG("stop", "h=%p", h);
    return ncclSuccess;
}

__attribute__((unused)) static ncclResult_t probe_state(void *h, ncclProfilerEventState_t st,
                                ncclProfilerEventStateArgs_v5_t *a)
{
    LOG("state", "h=%p st=%d ptimer=%llu", h, (int)st,
        a && st == ncclProfilerKernelChStop ? (unsigned long long)a->kernelCh.pTimer : 0ull);
    return ncclSuccess;
}

__attribute__((unused)) static ncclResult_t probe_fini(void *ctx)
{
    LOG("fini", "ctx=%p", ctx);
    return ncclSuccess;
}

#if defined(PROBE_V5) || defined(PROBE_FAIL)
static ncclResult_t init5(void **ctx, uint64_t hash, int *mask, const char *name, int nnodes,
                          int nranks, int rank, ncclDebugLogger_t logfn)
{
    return probe_init(ctx, hash, mask, name, nnodes, nranks, rank, logfn, 5);
}

static ncclResult_t start5(void *ctx, void **h, ncclProfilerEventDescr_v5_t *d)
{
    (void)ctx;
    *h = new_handle();
    char f[512] = "";
    switch (d->type) {
    case ncclProfileGroupApi:
        snprintf(f, sizeof f, "captured=%d depth=%d", d->groupApi.graphCaptured,
                 d->groupApi.groupDepth);
        break;
    case ncclProfileCollApi:
        snprintf(f, sizeof f, "func=%s count=%zu dtype=%s root=%d stream=%p captured=%d",
                 s(d->collApi.func), d->collApi.count, s(d->collApi.datatype), d->collApi.root,
                 d->collApi.stream, d->collApi.graphCaptured);
        break;
    case ncclProfileP2pApi:
        snprintf(f, sizeof f, "func=%s count=%zu dtype=%s stream=%p captured=%d",
                 s(d->p2pApi.func), d->p2pApi.count, s(d->p2pApi.datatype), d->p2pApi.stream,
                 d->p2pApi.graphCaptured);
        break;
    case ncclProfileKernelLaunch:
        snprintf(f, sizeof f, "stream=%p", d->kernelLaunch.stream);
        break;
    case ncclProfileColl:
        snprintf(f, sizeof f,
                 "func=%s seq=%llu send=%p recv=%p count=%zu root=%d dtype=%s nch=%d nwarps=%d "
                 "algo=%s proto=%s group=%p",
                 s(d->coll.func), (unsigned long long)d->coll.seqNumber, d->coll.sendBuff,
                 d->coll.recvBuff, d->coll.count, d->coll.root, s(d->coll.datatype),
                 d->coll.nChannels, d->coll.nWarps, s(d->coll.algo), s(d->coll.proto),
                 d->coll.parentGroup);
        break;
    case ncclProfileP2p:
        snprintf(f, sizeof f, "func=%s buff=%p count=%zu dtype=%s peer=%d nch=%d group=%p",
                 s(d->p2p.func), d->p2p.buff, d->p2p.count, s(d->p2p.datatype), d->p2p.peer,
                 d->p2p.nChannels, d->p2p.parentGroup);
        break;
    case ncclProfileKernelCh:
        snprintf(f, sizeof f, "ch=%d ptimer=%llu", d->kernelCh.channelId,
                 (unsigned long long)d->kernelCh.pTimer);
        break;
    default:
        break;
    }
    LOG("start", "h=%p type=%d parent=%p rank=%d %s", *h, (int)d->type, d->parentObj, d->rank, f);
    return ncclSuccess;
}

__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    "probe", init5, start5, probe_stop, probe_state, probe_fini,
};
#endif

#ifdef PROBE_V4
static ncclResult_t init4(void **ctx, int *mask, const char *name, uint64_t hash, int nnodes,
                          int nranks, int rank, ncclDebugLogger_t logfn)
{
    return probe_init(ctx, hash, mask, name, nnodes, nranks, rank, logfn, 4);
}

static ncclResult_t start4(void *ctx, void **h, ncclProfilerEventDescr_v4_t *d)
{
    (void)ctx;
    *h = new_handle();
    char f[512] = "";
    switch (d->type) {
    case ncclProfileColl:
        snprintf(f, sizeof f,
                 "func=%s seq=%llu count=%zu root=%d dtype=%s nch=%d nwarps=%d algo=%s proto=%s",
                 s(d->coll.func), (unsigned long long)d->coll.seqNumber, d->coll.count,
                 d->coll.root, s(d->coll.datatype), d->coll.nChannels, d->coll.nWarps,
                 s(d->coll.algo), s(d->coll.proto));
        break;
    case ncclProfileP2p:
        snprintf(f, sizeof f, "func=%s count=%zu dtype=%s peer=%d", s(d->p2p.func),
                 d->p2p.count, s(d->p2p.datatype), d->p2p.peer);
        break;
    case ncclProfileKernelCh:
        snprintf(f, sizeof f, "ch=%d ptimer=%llu", d->kernelCh.channelId,
                 (unsigned long long)d->kernelCh.pTimer);
        break;
    default:
        break;
    }
    LOG("start", "h=%p type=%d parent=%p rank=%d %s", *h, (int)d->type, d->parentObj, d->rank, f);
    return ncclSuccess;
}

static ncclResult_t state4(void *h, ncclProfilerEventState_t st,
                           ncclProfilerEventStateArgs_v4_t *a)
{
    return probe_state(h, st, a);
}

__attribute__((visibility("default"))) ncclProfiler_v4_t ncclProfiler_v4 = {
    "probe-v4", init4, start4, probe_stop, state4, probe_fini,
};
#endif

/* the variant without a symbol still needs something in it */
__attribute__((visibility("default"))) int cpprobe_variant = 0;
