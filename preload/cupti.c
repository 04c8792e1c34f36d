/* cupti: COLLPROF_GPU_TIMING=cupti, GPU times from CUPTI's kernel activity records.
 *
 * Loading. The shim never links CUPTI. At the job's first timed call libcupti is opened: a
 * copy the job already loaded (a framework's profiler) first, then the one beside the CUDA
 * the job uses (the directory of its libcudart or libcuda, the pip wheels' sibling
 * nvidia/cuda_cupti/lib, a toolkit's extras/CUPTI/lib64), then by name, then /usr/local/cuda.
 * Any failure says so once and leaves the job on CUDA events.
 *
 * Matching kernels to calls, exactly: around each timed call the wrapper pushes an external
 * correlation id (CUSTOM0) on the calling thread, the id of the call (a grouped call's is its
 * group's, pushed around the outermost ncclGroupEnd, where NCCL launches). CUPTI then writes,
 * for each launch inside, an EXTERNAL_CORRELATION record joining its correlationId to ours,
 * and later the kernel record with that correlationId. External correlation records come only
 * with API records, so DRIVER and RUNTIME activity is enabled too (NCCL launches through
 * either); their records are skipped. A call's GPU span is its kernels' (one, or a group's
 * several): the earliest start, the latest end.
 *
 * Clock. CUPTI is given CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback, CUDA
 * 12.4+): its records are then on the trace's own clock. An older CUPTI keeps its own
 * (CLOCK_REALTIME on Linux); the offset is measured, the tightest of a few bracketed reads.
 *
 * Delivery. CUPTI hands records back in buffers, from its own thread
 * (cuptiActivityFlushPeriod, every COLLPROF_FLUSH_MS) or, with an older CUPTI, at the writer's
 * flush each tick; this file keeps each call's span in a table the writer reads
 * (cp_cupti_result). A call is complete once a delivery after its last kernel record went by
 * (a group's kernels may come in two buffers). At the process's end a forced flush; what is
 * still missing then is written untimed, as an events pair still in flight is.
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "abi/cupti_abi.h"
#include "abi/cupti_api_list.h"
#include "common/log.h"
#include "common/settings.h"

#define CP_CUPTI_BUF (1u << 20)
#define CP_CUPTI_SLOTS (1u << 16)

typedef struct cp_cupti_fns {
#define CP_CUPTI_FN(ret, name, params, args) ret(*name) params;
    CP_CUPTI_API(CP_CUPTI_FN)
#undef CP_CUPTI_FN
} cp_cupti_fns;

static cp_cupti_fns g_fn;
static _Atomic int g_state; /* 0 not tried, 1 running, -1 unavailable */
static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_offset; /* CUPTI time + g_offset = CLOCK_MONOTONIC; 0 with our clock */
static _Atomic uint64_t g_next_id;

/* The tables below (some 8 MB) are allocated when CUPTI starts: a process in another mode
 * does not carry them. */

/* correlationId -> our id, from EXTERNAL_CORRELATION records */
static struct corr {
    uint32_t corr;
    uint64_t id;
} *g_corr;
/* NCCL's kernels whose EXTERNAL_CORRELATION record has not come yet (CUPTI keeps API and
 * kernel records in buffers of their own: their order across buffers is not promised), by
 * correlationId, joined when it comes */
static struct early {
    uint32_t corr, dev;
    uint64_t start, end;
} *g_early;
/* our id -> its kernels' span, and what the device ran before its first kernel */
static struct span {
    uint64_t id, start, end;
    uint32_t kernels, gen;
    uint8_t nbefore;
    struct {
        uint32_t name, count;
        uint64_t total_ns;
    } before[CP_KERNELS_MAX];
} *g_span;

/* Kernel names, interned: a KERNELS record names them by index, a KNAME record once each. */
#define CP_KNAMES 4096
static struct kname {
    char name[CP_KNAME_MAX];
    uint8_t used, written;
} *g_names;

/* Per device, the kernels not NCCL's since its last NCCL kernel (by record order), waiting
 * to be put down as what ran before the next one. */
#define CP_DEVICES 64
#define CP_OTHERS 512
static struct other {
    uint32_t name;
    uint64_t start, end;
} (*g_others)[CP_OTHERS];
static uint32_t g_nothers[CP_DEVICES];
static uint32_t g_gen;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mono_cb(void) { return cp_mono_ns(); }

/* ---- loading ---- */

/* CUDA 13's, 12's, then whatever the unversioned link points at. */
static const char *const g_libnames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
#define CP_NLIBNAMES (sizeof g_libnames / sizeof g_libnames[0])

static void *open_in(const char *dir, const char *rel)
{
    const char *const *names = g_libnames;
    for (size_t i = 0; i < CP_NLIBNAMES; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s%s", dir, rel, names[i]) >= (int)sizeof path)
            continue;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            cp_info("CUPTI: %s", path);
            return h;
        }
    }
    return NULL;
}

struct find_ctx {
    void *handle;
};

/* Beside each CUDA library the process has loaded (libcudart, libcuda). */
static int beside_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct find_ctx *f = arg;
    const char *path = info->dlpi_name, *slash = path ? strrchr(path, '/') : NULL;
    if (f->handle || !slash ||
        (strncmp(slash + 1, "libcudart.so", 12) && strncmp(slash + 1, "libcuda.so", 10)))
        return 0;
    char dir[4096];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir)
        return 0;
    memcpy(dir, path, n);
    dir[n] = '\0';
    /* the library's own directory; a pip wheel's nvidia/cuda_runtime/lib's sibling
     * nvidia/cuda_cupti/lib; a toolkit's lib64's extras/CUPTI/lib64 */
    static const char *const rels[] = {"", "../../cuda_cupti/lib/", "../extras/CUPTI/lib64/"};
    for (size_t i = 0; i < sizeof rels / sizeof rels[0] && !f->handle; i++)
        f->handle = open_in(dir, rels[i]);
    return f->handle != NULL;
}

/* The INFO line every way of finding libcupti ends with: which file the job now runs. */
static void *taken(void *h)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        cp_info("CUPTI: %s", lm->l_name);
    else
        cp_info("CUPTI: a libcupti the loader found");
    return h;
}

static void *find_cupti(void)
{
    const char *const *names = g_libnames;
    for (size_t i = 0; i < CP_NLIBNAMES; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return taken(h);
    }
    struct find_ctx f = {NULL};
    dl_iterate_phdr(beside_loaded, &f);
    if (f.handle)
        return f.handle;
    for (size_t i = 0; i < CP_NLIBNAMES; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return taken(h);
    }
    void *h = open_in("/usr/local/cuda", "lib64/");
    return h ? h : open_in("/usr/local/cuda", "extras/CUPTI/lib64/");
}

/* ---- records ---- */

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, CP_CUPTI_BUF) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? CP_CUPTI_BUF : 0;
    *max_records = 0;
}

/* The index of a name (cut as a KNAME holds it), interned; UINT32_MAX when the table is
 * full. g_mu held. */
static uint32_t intern(const char *name)
{
    char cut[CP_KNAME_MAX];
    snprintf(cut, sizeof cut, "%s", name ? name : "?");
    uint32_t h = 2166136261u;
    for (const char *p = cut; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    for (uint32_t i = 0; i < CP_KNAMES; i++) {
        struct kname *n = &g_names[(h + i) % CP_KNAMES];
        if (!n->used) {
            memcpy(n->name, cut, sizeof cut);
            n->used = 1;
            return (h + i) % CP_KNAMES;
        }
        if (!strcmp(n->name, cut))
            return (h + i) % CP_KNAMES;
    }
    return UINT32_MAX;
}

static int is_nccl_kernel(const char *name)
{
    return name && (!strncmp(name, "ncclDevKernel", 13) || !strncmp(name, "ncclKernel", 10));
}

/* What the device ran before an NCCL kernel that starts at `start`: its other kernels that
 * ended by then, by name, the longest in all first; they are used up. */
static void take_before(struct span *s, uint32_t dev, uint64_t start)
{
    struct other *o = g_others[dev];
    uint32_t n = g_nothers[dev], keep = 0;
    struct {
        uint32_t name, count;
        uint64_t total;
    } agg[32];
    uint32_t nagg = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (o[i].end > start) {
            o[keep++] = o[i];
            continue;
        }
        uint32_t a = 0;
        while (a < nagg && agg[a].name != o[i].name)
            a++;
        if (a == nagg) {
            if (nagg == 32)
                continue;
            agg[nagg++] = (__typeof__(agg[0])){o[i].name, 0, 0};
        }
        agg[a].count++;
        agg[a].total += o[i].end - o[i].start;
    }
    g_nothers[dev] = keep;
    s->nbefore = 0;
    for (uint32_t k = 0; k < CP_KERNELS_MAX && k < nagg; k++) {
        uint32_t best = k;
        for (uint32_t a = k + 1; a < nagg; a++)
            if (agg[a].total > agg[best].total)
                best = a;
        __typeof__(agg[0]) t = agg[k];
        agg[k] = agg[best];
        agg[best] = t;
        s->before[k].name = agg[k].name;
        s->before[k].count = agg[k].count;
        s->before[k].total_ns = agg[k].total;
        s->nbefore++;
    }
}

/* A kernel of call `id` (g_mu held). */
static void note_ours(uint64_t id, uint32_t dev, uint64_t start, uint64_t end)
{
    struct span *s = &g_span[id % CP_CUPTI_SLOTS];
    if (s->id != id) {
        *s = (struct span){.id = id, .start = start, .end = end};
        take_before(s, dev, start);
    } else {
        if (start < s->start)
            s->start = start;
        if (end > s->end)
            s->end = end;
    }
    s->kernels++;
    s->gen = g_gen;
}

static void note_kernel(const cp_cupti_kernel_head *k)
{
    uint32_t c = k->correlationId, dev = k->deviceId % CP_DEVICES;
    uint64_t start = k->start + (uint64_t)g_offset, end = k->end + (uint64_t)g_offset;
    if (c && g_corr[c % CP_CUPTI_SLOTS].corr == c) {
        note_ours(g_corr[c % CP_CUPTI_SLOTS].id, dev, start, end);
        return;
    }
    if (is_nccl_kernel(k->name)) { /* its call's record may come in a later buffer */
        if (c)
            g_early[c % CP_CUPTI_SLOTS] = (struct early){c, dev, start, end};
        return;
    }
    /* a kernel no call of ours launched: the job's compute */
    if (g_nothers[dev] == CP_OTHERS)
        return;
    uint32_t name = intern(k->name);
    if (name != UINT32_MAX)
        g_others[dev][g_nothers[dev]++] = (struct other){name, start, end};
}

static void buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                             size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&g_mu);
    while (buffer && g_fn.cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *x = (const void *)r;
            if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
                uint32_t c = x->correlationId;
                g_corr[c % CP_CUPTI_SLOTS].corr = c;
                g_corr[c % CP_CUPTI_SLOTS].id = x->externalId;
                struct early *e = &g_early[c % CP_CUPTI_SLOTS];
                if (c && e->corr == c) { /* its kernel came first */
                    note_ours(x->externalId, e->dev, e->start, e->end);
                    e->corr = 0;
                }
            }
        } else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
                   r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            note_kernel((const cp_cupti_kernel_head *)(const void *)r);
        }
    }
    g_gen++;
    pthread_mutex_unlock(&g_mu);
    free(buffer);
}

/* ---- start ---- */

static void measure_offset(void)
{
    int64_t best = 0;
    uint64_t width = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t a = cp_mono_ns(), t = 0;
        if (g_fn.cuptiGetTimestamp(&t) != CUPTI_SUCCESS)
            return;
        uint64_t b = cp_mono_ns();
        if (b - a < width) {
            width = b - a;
            best = (int64_t)(a + (b - a) / 2) - (int64_t)t;
        }
    }
    g_offset = best;
}

static int start(void)
{
    g_corr = calloc(CP_CUPTI_SLOTS, sizeof *g_corr);
    g_span = calloc(CP_CUPTI_SLOTS, sizeof *g_span);
    g_early = calloc(CP_CUPTI_SLOTS, sizeof *g_early);
    g_names = calloc(CP_KNAMES, sizeof *g_names);
    g_others = calloc(CP_DEVICES, sizeof *g_others);
    if (!g_corr || !g_span || !g_early || !g_names || !g_others) {
        cp_info("COLLPROF_GPU_TIMING=cupti: no memory for its tables: CUDA events are used");
        return -1;
    }
    void *h = find_cupti();
    if (!h) {
        cp_info("COLLPROF_GPU_TIMING=cupti: no libcupti beside the job's CUDA nor on the "
                "loader's path: CUDA events are used");
        return -1;
    }
#define CP_CUPTI_RESOLVE(ret, name, params, args) g_fn.name = (ret(*) params)dlsym(h, #name);
    CP_CUPTI_API(CP_CUPTI_RESOLVE)
#undef CP_CUPTI_RESOLVE
    if (!g_fn.cuptiActivityEnable || !g_fn.cuptiActivityRegisterCallbacks ||
        !g_fn.cuptiActivityGetNextRecord || !g_fn.cuptiActivityFlushAll ||
        !g_fn.cuptiActivityPushExternalCorrelationId ||
        !g_fn.cuptiActivityPopExternalCorrelationId || !g_fn.cuptiGetTimestamp) {
        cp_info("COLLPROF_GPU_TIMING=cupti: this libcupti lacks the activity API we use: "
                "CUDA events are used");
        return -1;
    }
    if (!g_fn.cuptiActivityRegisterTimestampCallback ||
        g_fn.cuptiActivityRegisterTimestampCallback(mono_cb) != CUPTI_SUCCESS)
        measure_offset();
    CUptiResult r = g_fn.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    static const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_DRIVER,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof kinds[0]; i++)
        r = g_fn.cuptiActivityEnable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
        const char *why = "?";
        if (g_fn.cuptiGetResultString)
            g_fn.cuptiGetResultString(r, &why);
        cp_info("COLLPROF_GPU_TIMING=cupti: CUPTI refused (%s): CUDA events are used", why);
        for (size_t i = 0; g_fn.cuptiActivityDisable && i < sizeof kinds / sizeof kinds[0]; i++)
            g_fn.cuptiActivityDisable(kinds[i]);
        return -1;
    }
    if (g_fn.cuptiActivityFlushPeriod) {
        unsigned ms = cp_settings_get()->flush_ms;
        if (g_fn.cuptiActivityFlushPeriod(ms ? ms : 100) != CUPTI_SUCCESS)
            g_fn.cuptiActivityFlushPeriod = NULL;
    }
    return 0;
}

int cp_cupti_start(void)
{
    int now = atomic_load_explicit(&g_state, memory_order_acquire);
    if (CP_LIKELY(now != 0)) /* every call after the first: no lock */
        return now == 1 ? 0 : -1;
    pthread_mutex_lock(&g_start_mu);
    if (g_state == 0)
        g_state = start() == 0 ? 1 : -1;
    int st = g_state;
    pthread_mutex_unlock(&g_start_mu);
    return st == 1 ? 0 : -1;
}

/* ---- the hot path ---- */

uint64_t cp_cupti_next_id(void)
{
    return atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
}

void cp_cupti_push(uint64_t id)
{
    g_fn.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void cp_cupti_pop(void)
{
    uint64_t last;
    g_fn.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

/* ---- the writer ---- */

void cp_cupti_flush(int final)
{
    if (g_state != 1)
        return;
    if (final || !g_fn.cuptiActivityFlushPeriod)
        g_fn.cuptiActivityFlushAll(final ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (final) {
        pthread_mutex_lock(&g_mu);
        g_gen++; /* nothing more will come: every span seen is whole */
        pthread_mutex_unlock(&g_mu);
    }
}

int cp_cupti_result(uint64_t id, uint64_t *start_ns, uint64_t *end_ns, cp_rec_kernels *before)
{
    if (g_state != 1)
        return 0;
    pthread_mutex_lock(&g_mu);
    const struct span *s = &g_span[id % CP_CUPTI_SLOTS];
    int done = s->id == id && s->kernels > 0 && s->gen != g_gen;
    if (done) {
        *start_ns = s->start;
        *end_ns = s->end;
        before->nkernels = s->nbefore;
        for (unsigned k = 0; k < s->nbefore; k++) {
            before->k[k].name_index = s->before[k].name;
            before->k[k].count = s->before[k].count;
            before->k[k].total_ns = s->before[k].total_ns;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return done;
}

int cp_cupti_kname(uint32_t index, cp_rec_kname *out)
{
    if (index >= CP_KNAMES || g_state != 1)
        return 0;
    pthread_mutex_lock(&g_mu);
    struct kname *n = &g_names[index];
    int fresh = n->used && !n->written;
    if (fresh) {
        n->written = 1;
        *out = (cp_rec_kname){.h = {CP_REC_KNAME, sizeof *out}, .name_index = index};
        memcpy(out->name, n->name, sizeof out->name);
    }
    pthread_mutex_unlock(&g_mu);
    return fresh;
}

