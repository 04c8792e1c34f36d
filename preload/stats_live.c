/* stats_live: the live stats block in /dev/shm and the hang watchdog.
 *
 * Everything here runs on the writer thread (the token holder), from what it drains: CALL,
 * COMM and PROCESS records, DONE records as gpu_poll makes them, and gpu_poll's queue of
 * pending pairs, whose oldest is the operation in flight. The job's hot path does nothing
 * more for it. The counters live in a private copy; each tick that changed something
 * publishes the copy into the shared block under the seqlock (live/stats_block.h), so a
 * reader never waits for us and we never wait for a reader.
 *
 * The watchdog keeps its private state even when COLLPROF_LIVE=0: the hang signal goes to
 * stderr and the trace whether or not anyone watches the block.
 *
 * Life: created with the trace (cp_process_start), O_EXCL|O_NOFOLLOW so that nothing planted
 * at the name is followed or reused; marked exited then unlinked at exit and on a fatal
 * signal; a fork child forgets the parent's (never unlinks it: the name carries the pid) and
 * creates its own with its own trace.
 */
#include "preload/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/settings.h"
#include "live/stats_block.h"
#include "trace/trace_writer.h"

/* comm_index -> comm_id, direct-mapped by comm_index: a comm whose slot a newer comm took
 * (1024 indexes later, both alive) shows comm id 0; a job that makes and ends comms for ever
 * names every one of them. */
#define CP_LIVE_COMMS 1024
#define CP_LIVE_HIST 64    /* recent GPU durations per op, for the watchdog's "typical" */
/* An index of recent[] by operation: each DONE looks its operation up, and a linear scan of
 * the 256 entries was a tenth of a busy process's writer time (perf, bench_shim's plugin
 * run). Open addressing, linear probing, four times the entries. */
#define CP_LIVE_RECENT_SLOTS (4 * CP_STATS_RECENT)
#define CP_HANG_FACTOR 10  /* in flight this many times the typical duration, at least */

typedef struct pending_key {
    uint32_t comm_index;
    uint64_t seq;
    int32_t peer;
    uint8_t op;
} pending_key;

static struct {
    cp_stats_block *map;      /* the shared block; NULL when none */
    char path[4200];
    pid_t owner;              /* the process that created it (a fork child is not it) */
    int dirty;
    cp_stats_block local;     /* the writer's copy, published under the seqlock */
    uint32_t recent_comm_index[CP_STATS_RECENT]; /* comm_index of each recent[] entry */
    uint16_t recent_index[CP_LIVE_RECENT_SLOTS]; /* key -> recent[] index + 1 (0 empty) */
    struct {
        uint32_t index; /* comm_index + 1; 0 none */
        uint64_t id;
    } comm_ids[CP_LIVE_COMMS];
    uint64_t hist[CP_STATS_OPS][CP_LIVE_HIST];
    uint32_t hist_n[CP_STATS_OPS];
    double hang_s;
    pending_key inflight_key; /* .op CP_OP_NONE: none */
    uint64_t oldest_since_ns; /* when inflight_key became the oldest in flight */
    pending_key hang_key;     /* the last operation reported (reported once) */
    int unlinked;             /* before an exec: the block is mapped but has no name */
    int hang_open;            /* hang_key's comm has not completed anything since */
} g;

static int key_eq(const pending_key *a, const pending_key *b)
{
    return a->op == b->op && a->comm_index == b->comm_index && a->seq == b->seq &&
           a->peer == b->peer;
}

static uint64_t comm_id_of(uint32_t comm_index)
{
    unsigned k = comm_index % CP_LIVE_COMMS;
    return g.comm_ids[k].index == comm_index + 1u ? g.comm_ids[k].id : 0;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static cp_stats_block *create_block(const char *path)
{
    /* Growing a file past the job's RLIMIT_FSIZE (`ulimit -f`) raises SIGXFSZ, which would
     * kill the job: then no block. */
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        lim.rlim_cur < CP_STATS_BYTES) {
        errno = EFBIG;
        return NULL;
    }
    int fd = open(path, O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (ftruncate(fd, CP_STATS_BYTES) == 0)
        p = mmap(NULL, CP_STATS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) {
        unlink(path);
        errno = saved;
        return NULL;
    }
    return p;
}

static void live_start(const cp_identity *id, const char *trace_path, uint32_t nccl_version)
{
    const cp_settings *s = cp_settings_get();
    int saved = errno;
    memset(&g, 0, sizeof g);
    g.hang_s = s->hang_s;
    cp_stats_block *b = &g.local;
    cp_stats_block_init(b);
    b->pid = (uint32_t)getpid();
    b->uid = (uint32_t)geteuid();
    b->rank = id->rank;
    b->local_rank = id->local_rank;
    b->world_size = id->world_size;
    b->cuda_dev = -1;
    b->nccl_version = nccl_version;
    if (atomic_load(&cp_gpu_state) == CP_GPU_EVENTS ||
        atomic_load(&cp_gpu_state) == CP_GPU_CUPTI)
        b->flags |= CP_STATS_GPU_TIMING;
    cp_clock_anchor a = cp_clock_anchor_now();
    b->start_mono_ns = b->update_ns = a.mono_ns;
    b->start_realtime_ns = a.realtime_ns;
    copy_str(b->hostname, sizeof b->hostname, id->hostname);
    copy_str(b->job_id, sizeof b->job_id, id->job_id);
    copy_str(b->trace_path, sizeof b->trace_path, trace_path);
    if (!s->live) {
        errno = saved;
        return;
    }
    cp_stats_path(g.path, sizeof g.path, s->live_dir, b->uid, b->pid);
    g.map = create_block(g.path);
    if (!g.map) {
        cp_warn("cannot create the live stats block '%s': %s; `collprof top` will not see "
                "this process, tracing goes on", g.path, strerror(errno));
        errno = saved;
        return;
    }
    g.owner = getpid();
    memcpy(g.map, b, sizeof *b); /* no reader can have it open yet: the seqlock is 0 */
    errno = saved;
}

static unsigned key_slot(uint32_t comm_index, uint64_t seq, int32_t peer, uint8_t op)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull ^ ((uint64_t)comm_index << 32 | (uint32_t)peer) ^
                 (uint64_t)op << 56;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (unsigned)(h % CP_LIVE_RECENT_SLOTS);
}

static int entry_is(unsigned i, uint32_t comm_index, uint64_t seq, int32_t peer, uint8_t op)
{
    const cp_stats_entry *e = &g.local.recent[i];
    return e->seq == seq && e->op == op && e->peer == peer &&
           g.recent_comm_index[i] == comm_index;
}

/* The index slot holding recent[] entry i's key, or -1. */
static int index_slot_of(unsigned i)
{
    const cp_stats_entry *e = &g.local.recent[i];
    unsigned k = key_slot(g.recent_comm_index[i], e->seq, e->peer, e->op);
    for (unsigned n = 0; n < CP_LIVE_RECENT_SLOTS && g.recent_index[k]; n++) {
        if (g.recent_index[k] == i + 1)
            return (int)k;
        k = (k + 1) % CP_LIVE_RECENT_SLOTS;
    }
    return -1;
}

/* Backward-shift deletion: no tombstones, so a probe stops at the first empty slot. */
static void index_remove(unsigned hole)
{
    g.recent_index[hole] = 0;
    for (unsigned k = (hole + 1) % CP_LIVE_RECENT_SLOTS; g.recent_index[k];
         k = (k + 1) % CP_LIVE_RECENT_SLOTS) {
        unsigned i = g.recent_index[k] - 1u;
        const cp_stats_entry *e = &g.local.recent[i];
        unsigned home = key_slot(g.recent_comm_index[i], e->seq, e->peer, e->op);
        /* may the entry at k move back to the hole? only if its home is not in (hole, k] */
        int between = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
        if (!between) {
            g.recent_index[hole] = g.recent_index[k];
            g.recent_index[k] = 0;
            hole = k;
        }
    }
}

static void recent_push(const cp_rec_call *c)
{
    cp_stats_block *b = &g.local;
    unsigned i = cp_stats_recent_slot(b);
    if (b->recent_count == CP_STATS_RECENT) {
        int old = index_slot_of(i); /* the entry this one overwrites leaves the index */
        if (old >= 0)
            index_remove((unsigned)old);
    }
    cp_stats_recent_append(b, &(cp_stats_entry){
        .comm_id = comm_id_of(c->comm_index), .seq = c->seq,
        .bytes = c->count * cp_dtype_size(c->dtype), .enter_ns = c->enter_ns,
        .peer = c->peer, .op = c->op});
    g.recent_comm_index[i] = c->comm_index;
    /* the newest entry of a key wins: an older one with the same key is replaced */
    unsigned k = key_slot(c->comm_index, c->seq, c->peer, c->op);
    while (g.recent_index[k] &&
           !entry_is(g.recent_index[k] - 1u, c->comm_index, c->seq, c->peer, c->op))
        k = (k + 1) % CP_LIVE_RECENT_SLOTS;
    g.recent_index[k] = (uint16_t)(i + 1);
}

/* The newest recent[] entry of an operation, or -1 (pushed out by 256 newer ones). */
static int recent_find(const pending_key *key)
{
    unsigned k = key_slot(key->comm_index, key->seq, key->peer, key->op);
    for (unsigned n = 0; n < CP_LIVE_RECENT_SLOTS && g.recent_index[k]; n++) {
        unsigned i = g.recent_index[k] - 1u;
        if (entry_is(i, key->comm_index, key->seq, key->peer, key->op))
            return (int)i;
        k = (k + 1) % CP_LIVE_RECENT_SLOTS;
    }
    return -1;
}

void cp_live_observe(const void *record)
{
    const cp_record_header *h = record;
    cp_stats_block *b = &g.local;
    if (h->type == CP_REC_CALL) {
        const cp_rec_call *c = record;
        if (c->op < CP_OP_ALLREDUCE || c->op > CP_OP_RECV)
            return;
        cp_stats_op *o = &b->ops[c->op];
        o->calls++;
        o->bytes += c->count * cp_dtype_size(c->dtype);
        o->host_ns += cp_call_host_ns(c);
        recent_push(c);
    } else if (h->type == CP_REC_COMM) {
        const cp_rec_comm *c = record;
        if (c->comm_index != CP_COMM_NONE) {
            g.comm_ids[c->comm_index % CP_LIVE_COMMS].index = c->comm_index + 1u;
            g.comm_ids[c->comm_index % CP_LIVE_COMMS].id = c->comm_id;
        }
        if (b->cuda_dev < 0)
            b->cuda_dev = c->cuda_dev;
    } else if (h->type == CP_REC_PROCESS) {
        const cp_rec_process *p = record;
        b->rank = p->rank;
        b->world_size = p->world_size;
    } else {
        return;
    }
    g.dirty = 1;
}

void cp_live_done(const cp_rec_done *d)
{
    if ((d->timing != CP_TIMING_EVENTS && d->timing != CP_TIMING_PLUGIN) || d->op >= CP_STATS_OPS)
        return;
    uint64_t dur = d->gpu_end_ns - d->gpu_start_ns;
    g.local.ops[d->op].gpu_ns += dur;
    g.hist[d->op][g.hist_n[d->op]++ % CP_LIVE_HIST] = dur;
    pending_key k = {d->comm_index, d->seq, d->peer, d->op};
    if (g.hang_open && d->comm_index == g.hang_key.comm_index && !key_eq(&k, &g.hang_key))
        g.hang_open = 0; /* the comm moves again: a later stall is a new hang */
    int i = recent_find(&k);
    if (i >= 0) {
        g.local.recent[i].gpu_start_ns = d->gpu_start_ns;
        g.local.recent[i].gpu_end_ns = d->gpu_end_ns;
    }
    g.dirty = 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of the op's recent GPU durations; 0 when it has none. */
static uint64_t typical_ns(unsigned op)
{
    uint32_t n = g.hist_n[op] < CP_LIVE_HIST ? g.hist_n[op] : CP_LIVE_HIST;
    if (n == 0)
        return 0;
    uint64_t v[CP_LIVE_HIST];
    memcpy(v, g.hist[op], n * sizeof v[0]);
    qsort(v, n, sizeof v[0], cmp_u64);
    return v[n / 2];
}

static void fmt_duration(char *out, size_t len, uint64_t ns)
{
    if (ns >= 1000000000u)
        snprintf(out, len, "%.1f s", (double)ns / 1e9);
    else if (ns >= 1000000u)
        snprintf(out, len, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(out, len, "%.1f us", (double)ns / 1e3);
}

/* An operation in flight past COLLPROF_HANG_S and far beyond its op's typical time: one
 * WARN, one HANG record flushed at once (a rank killed next still has it), the block's
 * flag. Once per operation. */
static void watchdog(cp_trace_writer *w, uint64_t now)
{
    const cp_stats_inflight *f = &g.local.inflight;
    /* The operations queued behind a hung one on its comm are the same hang: they too
     * age past the threshold, or become the oldest once an abort errors the first out. */
    if (f->op == CP_OP_NONE || key_eq(&g.inflight_key, &g.hang_key) ||
        (g.hang_open && g.inflight_key.comm_index == g.hang_key.comm_index))
        return;
    /* Judged on how long it has been the oldest: one queued behind a hang that an abort
     * just released has waited long, but has only now had its chance to complete. */
    uint64_t from = f->since_ns > g.oldest_since_ns ? f->since_ns : g.oldest_since_ns;
    uint64_t stalled = now > from ? now - from : 0;
    if ((double)stalled < g.hang_s * 1e9)
        return;
    uint64_t typical = typical_ns(f->op);
    if (typical && stalled / CP_HANG_FACTOR <= typical)
        return;
    g.hang_key = g.inflight_key;
    g.hang_open = 1;
    char age[32], typ[32] = "no history";
    fmt_duration(age, sizeof age, f->age_ns);
    if (typical)
        fmt_duration(typ, sizeof typ, typical);
    cp_warn("suspected hang: %s comm=%016" PRIx64 " seq=%" PRIu64 " in flight for %s "
            "(typical %s)", cp_op_name(f->op), f->comm_id, f->seq, age, typ);
    /* Whether this rank's GPU had begun it tells a rank that never joined (its stream is
     * stuck before the operation) from one waiting inside it for the others. */
    cp_pending_slot p;
    int gpu_state = cp_gpu_oldest_pending(&p) ? cp_gpu_started(&p) : CP_HANG_GPU_UNKNOWN;
    cp_rec_hang rec = {.h = {CP_REC_HANG, sizeof rec}, .comm_index = g.inflight_key.comm_index,
                       .seq = f->seq, .at_ns = now, .age_ns = f->age_ns, .peer = f->peer,
                       .op = f->op, .gpu_state = (uint8_t)gpu_state};
    cp_trace_writer_append(w, &rec);
    cp_trace_writer_flush(w);
    g.local.flags |= CP_STATS_HANG;
    g.local.hang = (cp_stats_hang){.comm_id = f->comm_id, .seq = f->seq, .at_ns = now,
                                   .age_ns = f->age_ns, .typical_ns = typical,
                                   .peer = f->peer, .op = f->op};
}

static void update_inflight(uint64_t now)
{
    cp_stats_inflight *f = &g.local.inflight;
    cp_pending_slot p;
    if (!cp_gpu_oldest_pending(&p)) {
        if (f->op != CP_OP_NONE)
            g.dirty = 1;
        memset(f, 0, sizeof *f);
        g.inflight_key.op = CP_OP_NONE;
        return;
    }
    pending_key k = {p.comm_index, p.seq, p.peer, p.op};
    if (!key_eq(&k, &g.inflight_key)) {
        g.inflight_key = k;
        g.oldest_since_ns = now;
        int i = recent_find(&k);
        /* Not found: 256 newer operations pushed it out, so it is older than any of them;
         * its age counts from now, an underestimate, never a false alarm. */
        *f = (cp_stats_inflight){.comm_id = comm_id_of(k.comm_index), .seq = k.seq,
                                 .bytes = i >= 0 ? g.local.recent[i].bytes : 0,
                                 .since_ns = i >= 0 ? g.local.recent[i].enter_ns : now,
                                 .peer = k.peer, .op = k.op};
    }
    f->age_ns = now > f->since_ns ? now - f->since_ns : 0;
    g.dirty = 1;
}

static void publish(uint64_t now)
{
    if (!g.map || !g.dirty)
        return;
    g.local.update_ns = now;
    /* Everything from flags on; magic, version, size and the seqlock itself never change,
     * and `exited` belongs to the exit paths. */
    size_t from = offsetof(cp_stats_block, flags);
    cp_stats_write_begin(g.map);
    memcpy((char *)g.map + from, (const char *)&g.local + from, sizeof g.local - from);
    cp_stats_write_end(g.map);
    g.dirty = 0;
}

void cp_live_tick(cp_trace_writer *w)
{
    uint64_t now = cp_mono_ns();
    update_inflight(now);
    watchdog(w, now);
    uint64_t lost = cp_trace_writer_records_lost(w);
    g.dirty |= lost != g.local.lost_records;
    g.local.lost_records = lost;
    for (unsigned c = 1; c <= CP_UNTIMED_CAUSE_LAST; c++) {
        uint64_t n = atomic_load_explicit(&cp_untimed[c], memory_order_relaxed);
        g.dirty |= n != g.local.untimed[c - 1];
        g.local.untimed[c - 1] = n;
    }
    for (unsigned c = 1; c <= CP_LOST_CAUSE_LAST; c++) {
        uint64_t n = cp_trace_writer_lost_by_cause(w, (enum cp_lost_cause)c);
        g.dirty |= n != g.local.lost_by_cause[c];
        g.local.lost_by_cause[c] = n;
    }
    publish(now);
}

void cp_live_close(int in_signal)
{
    if (!g.map || g.owner != getpid())
        return;
    if (!in_signal) {
        /* The writer thread has stopped: this is the last update. No watchdog here: a hang
         * it did not report while the job ran is not reported on the way out. */
        uint64_t now = cp_mono_ns();
        update_inflight(now);
        g.dirty = 1;
        publish(now);
    }
    atomic_store_explicit(&g.map->exited, 1, memory_order_release);
    unlink(g.path); /* async-signal-safe, like everything on the in_signal path */
    if (!in_signal) {
        munmap(g.map, CP_STATS_BYTES);
        g.map = NULL;
    }
}

/* exec keeps the pid, which names the block: unlinked before the exec, so that `top` never
 * shows the new program with our last collective in flight and its age growing; put back
 * (a new file holding the block as it is) when the exec fails. The caller parks the writer
 * around both, so nothing is published into the block meanwhile. */
void cp_live_before_exec(void)
{
    if (g.map && g.owner == getpid() && unlink(g.path) == 0)
        g.unlinked = 1;
}

void cp_live_after_failed_exec(void)
{
    if (!g.unlinked)
        return;
    g.unlinked = 0;
    cp_stats_block *p = create_block(g.path);
    if (!p)
        return; /* `top` no longer sees this process; the trace goes on */
    memcpy(p, g.map, CP_STATS_BYTES);
    munmap(g.map, CP_STATS_BYTES);
    g.map = p;
}

static void forget_after_fork(void)
{
    /* The parent's block: its name has the parent's pid, so it stays the parent's. */
    if (g.map)
        munmap(g.map, CP_STATS_BYTES);
    g.map = NULL;
    g.owner = 0;
}

static int start_hook(const cp_start_info *s)
{
    live_start(s->id, s->path, s->nccl_version);
    return 0; /* no block is no reason to stop tracing */
}

static void stop_hook(int signal_number)
{
    (void)signal_number;
    cp_live_close(0);
}

const cp_module cp_module_live = {
    .name = "live",
    .start = start_hook,
    .after_fork_child = forget_after_fork,
    .stop = stop_hook,
};
