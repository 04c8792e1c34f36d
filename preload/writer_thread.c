/* writer_thread: drains every ring into the rank's trace file.
 *
 * One thread per process, started with the trace at the first recorded call. It wakes every
 * tick (10 ms, or COLLPROF_FLUSH_MS when shorter): it drains when a producer flagged a ring
 * past half full, and at every FLUSH_MS it drains and writes the chunk out, so the file on
 * disk is never more than FLUSH_MS behind what the job did. Producers never wait for it and
 * never make a system call to wake it: a full ring counts its record lost instead.
 *
 * Exclusive use of the cp_trace_writer passes through one token (g_busy), taken by the
 * thread for each drain, by the exit path, and by a fatal-signal handler (best effort); the
 * token-holder is the consumer of every ring.
 *
 * Order in the file: each drain takes a snapshot of every ring's head, then writes the
 * control queue (COMM, PROCESS), then the rings up to the snapshot. A COMM is queued before
 * any CALL that names it is committed, so it always lands in the file first.
 */
#include "preload/shim.h"
#include "preload/writer_pace.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/settings.h"
#include "preload/io_exec.h"
#include "trace/trace_writer.h"

#define CP_TICK_MS 10

static cp_trace_writer *g_w;
static cp_trace_writer *g_abandoned; /* a fork child's copy of the parent's writer */
/* The trace file's blocking calls run there (io_exec.h): no thread of the job sleeps on the
 * trace's file system. NULL when it could not start: the writer makes them itself. */
static cp_io_exec *g_exec;
static pthread_t g_thread;
static int g_thread_running;
static _Atomic int g_busy;
static _Atomic int g_stop;
static int g_flush_ms = 200;
/* what each counter of lost records held when last handed to the writer */
static uint64_t g_reported[3];
static pthread_mutex_t g_wait_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wait_cv;

/* Ticks -> ns. Touched only by the token holder, like the writer. */
static cp_tick_calib g_calib;

static pthread_mutex_t g_ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *g_ctl;
static size_t g_ctl_len, g_ctl_cap;

void cp_control_push(const void *record)
{
    uint16_t size;
    memcpy(&size, (const unsigned char *)record + offsetof(cp_record_header, size), 2);
    pthread_mutex_lock(&g_ctl_mu);
    if (g_ctl_len + size > g_ctl_cap) {
        size_t cap = g_ctl_cap ? 2 * g_ctl_cap : 4096;
        while (cap < g_ctl_len + size)
            cap *= 2;
        unsigned char *p = realloc(g_ctl, cap);
        if (!p) {
            pthread_mutex_unlock(&g_ctl_mu);
            /* an allocation failure costs this record, not the job; counted */
            atomic_fetch_add_explicit(&cp_lost_no_memory, 1, memory_order_relaxed);
            return;
        }
        g_ctl = p;
        g_ctl_cap = cap;
    }
    memcpy(g_ctl + g_ctl_len, record, size);
    g_ctl_len += size;
    pthread_mutex_unlock(&g_ctl_mu);
}

/* Holder of g_busy only. `in_signal`: the control queue's mutex may be held by the very
 * thread the signal interrupted, so it is only tried. */
/* What the trace already says of cp_untimed; the drain's holder only. */
static uint64_t g_untimed_said[CP_UNTIMED_CAUSE_LAST + 1];

/* An UNTIMED record per cause that grew since the last: the calls a reader sees untimed
 * (not TIMED), and why. */
static void append_untimed(void)
{
    for (unsigned c = 1; c <= CP_UNTIMED_CAUSE_LAST; c++) {
        uint64_t n = atomic_load_explicit(&cp_untimed[c], memory_order_relaxed);
        if (n == g_untimed_said[c])
            continue;
        cp_rec_untimed rec = {.h = {CP_REC_UNTIMED, sizeof rec}, .cause = c,
                              .count = n - g_untimed_said[c], .at_ns = cp_mono_ns()};
        cp_trace_writer_append(g_w, &rec);
        g_untimed_said[c] = n;
    }
}

static void drain(int in_signal)
{
    if (!in_signal)
        cp_comm_reclaim(); /* free() and a mutex: never in a signal handler */
    for (cp_ring *r = cp_ring_list(); r; r = r->next)
        r->drain_to = atomic_load_explicit(&r->head, memory_order_acquire);

    if (in_signal ? pthread_mutex_trylock(&g_ctl_mu) == 0 : pthread_mutex_lock(&g_ctl_mu) == 0) {
        for (size_t off = 0; off + sizeof(cp_record_header) <= g_ctl_len;) {
            uint16_t size;
            memcpy(&size, g_ctl + off + offsetof(cp_record_header, size), 2);
            /* COMM and PROCESS: kept for a rotated trace's later segments (not in a signal
             * handler: keeping may allocate) */
            if (in_signal)
                cp_trace_writer_append(g_w, g_ctl + off);
            else
                cp_trace_writer_append_kept(g_w, g_ctl + off);
            cp_live_observe(g_ctl + off);
            off += size;
        }
        g_ctl_len = 0;
        pthread_mutex_unlock(&g_ctl_mu);
    }
    append_untimed();

    cp_tick_calib_refresh(&g_calib);
    for (cp_ring *r = cp_ring_list(); r; r = r->next) {
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        for (; t != r->drain_to; t++) {
            const cp_record_header *h = (const cp_record_header *)&r->slots[t & r->mask];
            /* The hot path's requests: finished here, never written as they are. In a
             * signal handler neither the driver nor the symbolizer may be called: those
             * DONE and SITE records are lost with the dying process. */
            if (h->type == CP_REC_SHIM_PENDING || h->type == CP_REC_SHIM_SITE) {
                if (in_signal)
                    atomic_fetch_add_explicit(&cp_lost_at_end, 1, memory_order_relaxed);
                else if (h->type == CP_REC_SHIM_PENDING)
                    cp_gpu_pending_add((const cp_pending_slot *)h);
                else
                    cp_site_write(g_w, ((const cp_site_slot *)h)->site);
                continue;
            }
            if (h->type != CP_REC_CALL) {
                cp_trace_writer_append(g_w, h);
                continue;
            }
            cp_rec_call rec;
            memcpy(&rec, h, sizeof rec);
            rec.enter_ns = cp_ticks_to_ns(&g_calib, rec.enter_ns);
            uint32_t pcall = cp_ring_call_pcall(&rec);
            uint64_t ticks = cp_ring_call_ticks(&rec);
            if (pcall) {
                /* the hot path's plugin call rides in the CALL (no second slot) */
                if (!in_signal)
                    cp_gpu_plugin_add(&rec, pcall - 1);
                else if (rec.flags & CP_CALL_TIMED) /* its DONE; an untimed call has none */
                    atomic_fetch_add_explicit(&cp_lost_at_end, 1, memory_order_relaxed);
            }
            /* a span the ring could not hold stays "that long or longer" in the file */
            cp_call_set_host_ns(&rec, ticks >= CP_RING_TICKS_MAX
                                          ? CP_HOST_NS_MAX
                                          : cp_tick_span_to_ns(&g_calib, ticks));
            cp_trace_writer_append(g_w, &rec);
            cp_live_observe(&rec);
            /* a destroyed communicator is no later segment's: its COMM is not repeated */
            if ((rec.op == CP_OP_COMM_DESTROY || rec.op == CP_OP_COMM_ABORT) && rec.result == 0)
                cp_trace_writer_forget(g_w, CP_REC_COMM, rec.comm_index);
        }
        atomic_store_explicit(&r->tail, t, memory_order_release);
        uint64_t lost = atomic_load_explicit(&r->lost, memory_order_relaxed);
        cp_trace_writer_count_lost(g_w, CP_LOST_RING_FULL, lost - r->lost_reported);
        r->lost_reported = lost;
    }
    /* a thread with no ring lost its records to the spent COLLPROF_BUFFER_MB: the remedy
     * of a full ring */
    static const struct {
        _Atomic uint64_t *count;
        enum cp_lost_cause cause;
    } counted[] = {{&cp_lost_no_ring, CP_LOST_RING_FULL},
                   {&cp_lost_no_memory, CP_LOST_NO_MEMORY},
                   {&cp_lost_at_end, CP_LOST_AT_END}};
    _Static_assert(sizeof counted / sizeof counted[0] == sizeof g_reported / sizeof g_reported[0],
                   "one reported total a counter");
    for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++) {
        uint64_t n = atomic_load_explicit(counted[i].count, memory_order_relaxed);
        cp_trace_writer_count_lost(g_w, counted[i].cause, n - g_reported[i]);
        g_reported[i] = n;
    }
}

static int take_token(void)
{
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(&g_busy, &expected, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void give_token(void) { atomic_store_explicit(&g_busy, 0, memory_order_release); }

/* Once per process, whichever write fails first: a job short enough never to flush before
 * exit (a full disk, `ulimit -f`) still says why its trace lacks records. */
static void warn_write_failed(uint64_t stalled_lost)
{
    static int warned, warned_stall;
    if (errno == ETIMEDOUT) { /* the writer's word for a call past the io's bound */
        if (!stalled_lost)
            return; /* a hiccup the spare buffer took: nothing lost, nothing to say */
        if (!warned_stall)
            cp_warn("the trace's file system does not answer (a write has waited over %d ms): "
                    "records are counted as lost (write_stalled) until it does",
                    CP_IO_BOUND_MS);
        warned_stall = 1;
        return;
    }
    if (warned)
        return;
    warned = 1;
    cp_warn("cannot write the trace (%s): records are counted as lost until writes succeed "
            "again", strerror(errno));
}

/* A CLOCK record every second: besides anchoring the clocks, it is the trace's heartbeat.
 * A job killed while stuck (SIGKILL writes no END) shows how long it lived past its last
 * call, which is what tells a hang from a healthy job stopped mid-collective. */
#define CP_HEARTBEAT_NS 1000000000ull

static void append_clock(void)
{
    cp_clock_anchor a = cp_clock_anchor_now();
    cp_rec_clock clk = {.h = {CP_REC_CLOCK, sizeof clk}, .mono_ns = a.mono_ns,
                        .realtime_ns = a.realtime_ns};
    cp_trace_writer_append(g_w, &clk);
}

/* Set by the writer once it runs: a thread still starting holds locks of its own (the C
 * library's, a sanitizer's allocator), and a fork that caught it there left them locked in
 * the child for good (a child's writer hung at its start, 1 run in 5 under ASan). */
static _Atomic int g_thread_up;

/* The writer's stack. glibc's default is RLIMIT_STACK (8 MiB, more where a site raises it):
 * address space a job under `ulimit -v` needs for itself. What the writer does deepest (a
 * new site's symbolization through libunwind's ELF reader and dladdr, a drain, the GPU poll
 * with its driver calls and CUPTI's flush, the live block) used at most CP_WRITER_STACK_USED
 * bytes on the emulation (docs/RELIABILITY.md: how it is measured; every exit says it at
 * INFO); the stack is 8 times that, for a real driver's and CUPTI's deeper calls, plus the
 * static TLS that glibc carves out of the same block (every loaded library's __thread
 * data), plus its guard page, which stays. */
#define CP_WRITER_STACK_USED (32u << 10)
#define CP_WRITER_STACK_BYTES (8u * CP_WRITER_STACK_USED)

static size_t writer_stack_bytes(void)
{
    size_t bytes = CP_WRITER_STACK_BYTES;
    /* glibc's own measure of what a thread's block needs before its stack (static TLS,
     * the thread descriptor): private to glibc but exported, and missing elsewhere */
    size_t (*minstack)(const pthread_attr_t *) = NULL;
    *(void **)&minstack = dlsym(RTLD_DEFAULT, "__pthread_get_minstack");
    pthread_attr_t a;
    if (minstack && pthread_attr_init(&a) == 0) {
        bytes += minstack(&a);
        pthread_attr_destroy(&a);
    } else {
        bytes += 1u << 20; /* a generous bound on static TLS */
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0)
        bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    return bytes;
}

/* Bytes of the calling thread's stack ever written: its block comes from mmap (zeros), and
 * the lowest byte no longer zero is as deep as it went (a cached block of an exited thread
 * reads deeper, never shallower). 0 when unknown. */
static size_t stack_used(size_t *size)
{
    pthread_attr_t a;
    void *lo = NULL;
    *size = 0;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return 0;
    int rc = pthread_attr_getstack(&a, &lo, size);
    pthread_attr_destroy(&a);
    if (rc != 0 || !lo)
        return 0;
    const unsigned char *p = lo, *end = p + *size;
    while (p < end && *p == 0)
        p++;
    return (size_t)(end - p);
}

static void *writer_main(void *arg)
{
    (void)arg;
    atomic_store_explicit(&g_thread_up, 1, memory_order_release);
    int tick_ms = g_flush_ms < CP_TICK_MS ? g_flush_ms : CP_TICK_MS;
    uint64_t next_flush = cp_mono_ns() + (uint64_t)g_flush_ms * 1000000u;
    uint64_t next_heartbeat = cp_mono_ns() + CP_HEARTBEAT_NS;
    long wait_ms = tick_ms;
    uint64_t last_tick = cp_mono_ns();
    size_t left = 0; /* pending after the last poll */
    pthread_mutex_lock(&g_wait_mu);
    while (!atomic_load(&g_stop)) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += wait_ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        wait_ms = tick_ms; /* unless this tick paces the next */
        pthread_cond_timedwait(&g_wait_cv, &g_wait_mu, &until);
        if (atomic_load(&g_stop))
            break;
        int wanted = atomic_exchange_explicit(&cp_drain_wanted, 0, memory_order_relaxed);
        uint64_t now = cp_mono_ns();
        int flush_due = now >= next_flush;
        /* With GPU events on, every tick drains and polls: a pair must become a DONE while
         * its context lives, and a short job (or the tail of any job) that destroys its
         * context before the next flush would otherwise lose its GPU times. */
        int gpu = cp_gpu_poll_wanted() ||
                  atomic_load_explicit(&cp_gpu_state, memory_order_relaxed) == CP_GPU_EVENTS;
        int heartbeat = now >= next_heartbeat;
        if (!(wanted || flush_due || gpu || heartbeat) || !take_token())
            continue;
        if (heartbeat) {
            append_clock();
            next_heartbeat = now + CP_HEARTBEAT_NS;
        }
        if (wanted || flush_due || gpu)
            drain(0);
        /* what came since the last tick paces the next (writer_pace.h); a flush on the
         * job's thread may have taken some: never negative */
        size_t pending = cp_gpu_pending_count();
        wait_ms = cp_writer_wait_ms(tick_ms, wanted, pending > left ? pending - left : 0,
                                    now - last_tick, CP_EV_PAIRS / 8);
        last_tick = now;
        cp_gpu_poll(g_w, CP_POLL_TICK);
        left = cp_gpu_pending_count();
        cp_live_tick(g_w);
        if (flush_due) {
            if (cp_trace_writer_flush(g_w) != 0)
                warn_write_failed(cp_trace_writer_lost_by_cause(g_w, CP_LOST_WRITE_STALLED));
            next_flush = now + (uint64_t)g_flush_ms * 1000000u;
        }
        give_token();
    }
    pthread_mutex_unlock(&g_wait_mu);
    size_t size, used = stack_used(&size);
    cp_info("the writer thread used %zu of its %zu stack bytes", used, size);
    return NULL;
}

/* A capped trace's chunks: a quarter of a segment, so that a segment holds its head and a
 * few of them, within the usual 64 KiB; 0 (the default) without a cap. */
static size_t chunk_for_cap(unsigned long long max_bytes)
{
    if (!max_bytes)
        return 0;
    unsigned long long c = max_bytes / CP_TRACE_SEGMENTS / 4 & ~7ull;
    return c > CP_CHUNK_DEFAULT_PAYLOAD ? CP_CHUNK_DEFAULT_PAYLOAD : c < 4096 ? 4096 : (size_t)c;
}

/* Set by a fatal signal's flush, which must not start a process (it allocates). */
static _Atomic int g_in_signal_flush;

/* A rotated trace's next segment (cp_trace_writer_on_segment) gets an executor of its own:
 * the last one holds a copy of its own file's fd only. In a fatal signal's flush none can be
 * started (it allocates): the dying process writes the new segment itself, as it writes the
 * segment's head (trace_writer.c), and the old executor ends with the process. Without an
 * executor the last segment would grow past the cap by what the rings held. The old one has
 * nothing in flight (a rotation waits for that). */
static int next_segment_io(void *ctx, int fd)
{
    (void)ctx;
    if (!g_exec)
        return 0; /* the direct calls: nothing bound to the last file */
    if (atomic_load_explicit(&g_in_signal_flush, memory_order_relaxed)) {
        cp_trace_writer_set_io(g_w, NULL);
        return 0;
    }
    char err[256];
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    cp_io_exec *x = cp_io_exec_start(fd, CP_IO_BOUND_MS, err, sizeof err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!x)
        return -1;
    cp_io_exec_release(g_exec);
    g_exec = x;
    cp_trace_writer_set_io(g_w, cp_io_exec_io(x));
    return 0;
}

static int writer_start(const char *path, const cp_file_header *header, int flush_ms)
{
    char err[512];
    const cp_settings *set = cp_settings_get();
    g_w = cp_trace_writer_open_mode(path, header, chunk_for_cap(set->max_bytes), set->file_mode,
                                    err, sizeof err);
    if (!g_w) {
        cp_warn("%s; tracing is off, the job runs on", err);
        return -1;
    }
    if (set->max_bytes && cp_trace_writer_rotate(g_w, set->max_bytes) != 0)
        cp_warn("cannot cap the trace at COLLPROF_MAX_MB (out of memory): it grows unbounded");
    g_flush_ms = flush_ms > 0 ? flush_ms : 200;
    /* The executor keeps the mask it is cloned with: every signal blocked, the job's go to
     * the job's threads. */
    {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        g_exec = cp_io_exec_start(cp_trace_writer_fd(g_w), CP_IO_BOUND_MS, err, sizeof err);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (g_exec) {
            cp_trace_writer_set_io(g_w, cp_io_exec_io(g_exec));
            cp_trace_writer_on_segment(g_w, next_segment_io, NULL);
        }
        else
            cp_info("%s: the trace is written by the job's threads, and a hung file system "
                    "can hold the job's exit", err);
    }
    /* A short settle gives the first rate; every drain then refines it over a longer
     * baseline. The first NCCL call (an init, which takes far longer) pays it once. */
    cp_tick_calib_init(&g_calib, 2000000);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wait_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&g_stop, 0);
    give_token();

    /* The job's signals go to the job's threads, never to ours. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&g_thread_up, 0);
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        if (pthread_attr_setstacksize(&attr, writer_stack_bytes()) != 0)
            cp_info("the writer thread keeps glibc's default stack size");
        rc = pthread_create(&g_thread, &attr, writer_main, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* Not back to the job (which may fork next) before the thread is up: bounded, a thread
     * that cannot run for a second is left to start on its own. */
    for (int i = 0; rc == 0 && i < 10000 && !atomic_load_explicit(&g_thread_up,
                                                                   memory_order_acquire); i++)
        nanosleep(&(struct timespec){0, 100000}, NULL);
    if (rc != 0) {
        /* No thread: the exit path still drains once, whatever the rings kept. */
        cp_warn("cannot start the trace writer thread (%s): the trace is written at exit only",
                strerror(rc));
        return 0;
    }
    g_thread_running = 1;
    return 0;
}

/* The closing chunk: what is buffered goes first, then CLOCK and END in a chunk of their own
 * that the writer keeps room for, so a full disk still ends the file with END and its loss
 * count (warn_write_failed runs after the close). */
static void append_end(int end_signal)
{
    cp_trace_writer_closing(g_w);
    append_clock();
    cp_rec_end end = {.h = {CP_REC_END, sizeof end}, .signal = end_signal, .exit_code = -1,
                      .at_ns = cp_mono_ns()};
    cp_trace_writer_append(g_w, &end);
}

static void writer_stop(int end_signal)
{
    if (g_thread_running && !pthread_equal(pthread_self(), g_thread)) {
        pthread_mutex_lock(&g_wait_mu);
        atomic_store(&g_stop, 1);
        pthread_cond_signal(&g_wait_cv);
        pthread_mutex_unlock(&g_wait_mu);
        pthread_join(g_thread, NULL);
        g_thread_running = 0;
    }
    if (!g_w)
        return;
    /* The token may be held by a signal handler that flushes for a dying process. */
    for (int i = 0; i < 1000 && !take_token(); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    if (!g_w)
        return;
    drain(0);
    cp_gpu_poll(g_w, CP_POLL_END);
    append_end(end_signal);
    uint64_t stalled = cp_trace_writer_lost_by_cause(g_w, CP_LOST_WRITE_STALLED);
    if (cp_trace_writer_close(g_w) != 0)
        warn_write_failed(stalled);
    g_w = NULL; /* the token stays taken: nothing writes after END */
    cp_io_exec_release(g_exec); /* it finishes the queue (END) on its own if it hangs */
    g_exec = NULL;
}

void cp_writer_flush_from_signal(int end_signal)
{
    if (!g_w || (g_thread_running && pthread_equal(pthread_self(), g_thread)))
        return;
    int got = 0;
    for (int i = 0; i < 200 && !(got = take_token()); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    if (!got || !g_w)
        return;
    atomic_store_explicit(&g_in_signal_flush, 1, memory_order_relaxed);
    drain(1);
    if (end_signal > 0) {
        /* the process ends here: the DONEs still pending will never be made */
        cp_trace_writer_count_lost(g_w, CP_LOST_AT_END, cp_gpu_pending_count());
        append_end(end_signal);
    }
    cp_trace_writer_flush(g_w);
    atomic_store_explicit(&g_in_signal_flush, 0, memory_order_relaxed);
    if (end_signal <= 0)
        give_token(); /* the process lives on (a user handler took the signal) */
}

/* pthread_atfork's prepare: the writer thread allocates and takes locks only while it holds
 * the token (its drain), so holding the token across fork keeps it parked outside them, and
 * the child never inherits a lock (malloc's, a sanitizer allocator's) owned by a thread it
 * does not have. Waits at most a second for a drain in progress. Returns 1 if it took it. */
int cp_writer_hold_for_fork(void)
{
    if (!g_w || !g_thread_running || pthread_equal(pthread_self(), g_thread))
        return 0;
    for (int i = 0; i < 1000; i++) {
        if (take_token())
            return 1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

void cp_writer_release_after_fork(int held)
{
    if (held)
        give_token();
}

void cp_writer_forget_after_fork(void)
{
    /* The parent's writer, thread and queued records are the parent's. Its struct is kept
     * reachable, not closed: closing would flush the parent's records into its file. */
    if (g_w)
        g_abandoned = g_w;
    g_w = NULL;
    cp_io_exec_forget(g_exec);
    g_exec = NULL;
    g_thread_running = 0;
    atomic_store(&g_stop, 0);
    atomic_store(&g_busy, 0);
    memset(g_reported, 0, sizeof g_reported);
    /* the parent's untimed calls are in the parent's trace */
    for (unsigned c = 0; c <= CP_UNTIMED_CAUSE_LAST; c++)
        g_untimed_said[c] = atomic_load(&cp_untimed[c]);
    pthread_mutex_init(&g_wait_mu, NULL);
    pthread_mutex_init(&g_ctl_mu, NULL);
    g_ctl_len = 0;
}

/* Before exec: everything the rings hold reaches the file, but the file stays open and the
 * token is given back, because a failed exec returns and the job records on. No END: the
 * pid lives on as another program, and a reader already treats a file without END as a
 * process that ended unannounced. Waits for the token like cp_writer_stop; gives up (the
 * records stay in the rings) only if a dying signal handler keeps it. */
void cp_writer_flush_now(void)
{
    if (!g_w || (g_thread_running && pthread_equal(pthread_self(), g_thread)))
        return;
    int saved = errno; /* called from the job's own thread, in an NCCL call or before exec */
    int got = 0;
    for (int i = 0; i < 1000 && !(got = take_token()); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    if (!got) {
        errno = saved;
        return;
    }
    if (g_w) {
        drain(0);
        /* before an exec or a communicator's end: the context may be gone next, so every
         * completed pair is converted now, with the reference there is */
        cp_gpu_poll(g_w, CP_POLL_FLUSH);
        if (cp_trace_writer_flush(g_w) != 0)
            warn_write_failed(cp_trace_writer_lost_by_cause(g_w, CP_LOST_WRITE_STALLED));
    }
    give_token();
    errno = saved;
}

/* The file header: who, where, when, and whether GPU times come (events and CUPTI are known
 * to work by now; NCCL's plugin only once NCCL opens it, later). */
static int start_hook(const cp_start_info *s)
{
    cp_file_header h;
    cp_file_header_init(&h);
    if (atomic_load(&cp_gpu_state) == CP_GPU_EVENTS ||
        atomic_load(&cp_gpu_state) == CP_GPU_CUPTI)
        h.flags |= CP_FILE_GPU_TIMING;
    h.pid = (uint32_t)getpid();
    h.rank = s->id->rank;
    h.local_rank = s->id->local_rank;
    h.world_size = s->id->world_size;
    h.nccl_version = s->nccl_version;
    cp_clock_anchor a = cp_clock_anchor_now();
    h.mono_anchor_ns = a.mono_ns;
    h.realtime_anchor_ns = a.realtime_ns;
    memcpy(h.hostname, s->id->hostname, sizeof h.hostname);
    memcpy(h.job_id, s->id->job_id, sizeof h.job_id);
    memcpy(h.launcher, s->id->launcher, sizeof h.launcher);
    return writer_start(s->path, &h, s->settings->flush_ms);
}

static int g_fork_held; /* the writer's token, held across fork (cp_writer_hold_for_fork) */

static void before_fork(void) { g_fork_held = cp_writer_hold_for_fork(); }

static void after_fork_parent(void) { cp_writer_release_after_fork(g_fork_held); }

const cp_module cp_module_writer = {
    .name = "writer",
    .start = start_hook,
    .before_fork = before_fork,
    .after_fork_parent = after_fork_parent,
    .after_fork_child = cp_writer_forget_after_fork,
    .stop = writer_stop,
};
