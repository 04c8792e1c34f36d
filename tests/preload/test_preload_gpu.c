/* GPU timing by CUDA events (COLLPROF_GPU_TIMING=events unless a case says otherwise; NCCL's
 * profiler plugin has tests/preload/test_preload_plugin.c) and call sites: shim_gpu_job on
 * the emulated libcuda.so.1 (build/emu) and the stub NCCL, under the shim. Every timed CALL gets exactly one DONE, on the host's time
 * line, in stream order; sampling, off, capture, groups and a missing driver behave as
 * docs/ARCHITECTURE.md says; each call site is one SITE record naming the job's function. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shim_test_util.h"

typedef struct seen {
    cp_file_header header;
    cp_rec_call calls[4096];
    size_t dones_before[4096]; /* DONE records the file had before each CALL */
    size_t ncalls;
    cp_rec_done dones[4096];
    size_t ndones;
    uint32_t site_index[16];
    char site_frames[16][2048];
    size_t nsites;
    uint64_t untimed[CP_UNTIMED_CAUSE_LAST + 1]; /* UNTIMED records' counts */
} seen;

static char *g_tmp;
static char g_dir_env[4300];
static job_result g_res;
static seen g_seen;

static int on_call(void *ctx, const cp_rec_call *r)
{
    seen *s = ctx;
    if (s->ncalls < 4096) {
        s->dones_before[s->ncalls] = s->ndones;
        s->calls[s->ncalls++] = *r;
    }
    return 0;
}
static int on_done(void *ctx, const cp_rec_done *r)
{
    seen *s = ctx;
    if (s->ndones < 4096)
        s->dones[s->ndones++] = *r;
    return 0;
}
static int on_untimed(void *ctx, const cp_rec_untimed *r)
{
    seen *s = ctx;
    s->untimed[r->cause <= CP_UNTIMED_CAUSE_LAST ? r->cause : 0] += r->count;
    return 0;
}
static int on_site(void *ctx, const cp_rec_site *r)
{
    seen *s = ctx;
    if (s->nsites == 16)
        return 0;
    char *out = s->site_frames[s->nsites];
    size_t len = 0;
    const unsigned char *p = (const unsigned char *)r + sizeof *r;
    for (unsigned i = 0; i < r->frame_count; i++) {
        uint16_t n;
        memcpy(&n, p, 2);
        if (len + n + 2 < sizeof s->site_frames[0])
            len += (size_t)snprintf(out + len, sizeof s->site_frames[0] - len, "%.*s\n", (int)n,
                                    (const char *)p + 2);
        p += 2 + n;
    }
    s->site_index[s->nsites++] = r->site_index;
    return 0;
}

/* Runs prog scenario under the shim with env; reads its one trace into g_seen. */
static void run(const char *prog, const char *const *extra_env, const char *const *argv)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/t%d", g_tmp, rand());
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", dir);
    const char *env[16] = {g_dir_env};
    size_t n = 1;
    for (; extra_env && *extra_env && n < 14; extra_env++)
        env[n++] = *extra_env;
    env[n++] = "COLLPROF_GPU_TIMING=events"; /* after a case's own: the first one counts */
    env[n] = NULL;
    st_run_prog(&g_res, prog, 1, env, argv);
    if (g_res.status != 0)
        fprintf(stderr, "%s\n%s", g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    char **paths;
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 1);
    memset(&g_seen, 0, sizeof g_seen);
    int status;
    char err[256];
    cp_trace_reader *r = cp_trace_reader_open(paths[0], &status, err, sizeof err);
    assert_non_null(r);
    g_seen.header = *cp_trace_reader_header(r);
    cp_trace_visitor v = {.ctx = &g_seen, .on_call = on_call, .on_done = on_done,
                          .on_site = on_site, .on_untimed = on_untimed};
    cp_walk_result wr;
    cp_trace_walk(r, &v, &wr);
    cp_trace_reader_close(r);
    cp_trace_dir_free(paths, nf);
}

static const cp_rec_done *done_of(const cp_rec_call *c)
{
    const cp_rec_done *found = NULL;
    for (size_t i = 0; i < g_seen.ndones; i++) {
        const cp_rec_done *d = &g_seen.dones[i];
        if (d->comm_index == c->comm_index && d->seq == c->seq && d->op == c->op &&
            d->peer == c->peer) {
            assert_null(found); /* exactly one */
            found = d;
        }
    }
    return found;
}

static int is_op(const cp_rec_call *c) { return c->op >= CP_OP_ALLREDUCE && c->op <= CP_OP_RECV; }

static void every_timed_call_has_one_done_in_stream_order(void **state)
{
    (void)state;
    const char *argv[] = {"events", "20", NULL};
    run("shim_gpu_job", NULL, argv);
    assert_true(g_seen.header.flags & CP_FILE_GPU_TIMING);
    size_t timed = 0;
    uint64_t last_start[3] = {0, 0, 0}, streams[3] = {0, 0, 0};
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (!is_op(c))
            continue;
        assert_true(c->flags & CP_CALL_TIMED);
        const cp_rec_done *d = done_of(c);
        assert_non_null(d);
        assert_int_equal(d->timing, CP_TIMING_EVENTS);
        assert_true(d->gpu_start_ns <= d->gpu_end_ns);
        /* the emulated GPU starts an item no earlier than it was enqueued */
        assert_true(d->gpu_start_ns + 20000 >= c->enter_ns);
        size_t k = 0;
        while (k < 2 && streams[k] && streams[k] != c->stream)
            k++;
        streams[k] = c->stream;
        assert_true(d->gpu_start_ns >= last_start[k]);
        last_start[k] = d->gpu_start_ns;
        timed++;
    }
    assert_int_equal(timed, 23);
    assert_int_equal(g_seen.ndones, 23);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
}

/* Auto mode times a comm's first call both ways, to calibrate the plugin's GPU clock, and
 * holds the comm's plugin times until it can. When that call never ends (the job hangs in
 * it: a window's calibrating pick can be the hung call) the calls that did end must still
 * get their DONEs, at once: held to the job's end, they once made the watchdog name a
 * finished call and the report a hang at the wrong collective. */
/* shim_gpu_job's "hold 8" under the stub's plugin with `stub_env` (STUB_NCCL_PROFILER_...):
 * the index of its Broadcast's CALL, 1.5 s after its 8 AllReduces. */
static size_t run_hold_job(const char *timing, const char *stub_env)
{
    const char *env[] = {timing, "STUB_NCCL_PROFILER=1", stub_env, NULL};
    const char *argv[] = {"hold", "8", NULL};
    run("shim_gpu_job", env, argv);
    size_t bcast = SIZE_MAX, allreduces = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        if (g_seen.calls[i].op == CP_OP_BROADCAST)
            bcast = i;
        allreduces += g_seen.calls[i].op == CP_OP_ALLREDUCE;
    }
    assert_int_equal(allreduces, 8);
    assert_true(bcast != SIZE_MAX);
    return bcast;
}

static void a_calibrating_call_that_never_ends_holds_back_no_other(void **state)
{
    (void)state;
    size_t bcast = run_hold_job("COLLPROF_GPU_TIMING=auto", "STUB_NCCL_PROFILER_HOLD=0");
    /* 1.5 s after the last AllReduce, before the Broadcast's CALL: every AllReduce's DONE
     * (the first's by its events, the others' by the plugin) */
    size_t plugin = 0, events = 0;
    for (size_t i = 0; i < g_seen.dones_before[bcast]; i++) {
        const cp_rec_done *d = &g_seen.dones[i];
        if (d->op != CP_OP_ALLREDUCE)
            continue;
        plugin += d->timing == CP_TIMING_PLUGIN;
        events += d->timing == CP_TIMING_EVENTS && d->seq == 0;
    }
    if (plugin != 7 || events != 1)
        fprintf(stderr, "before the Broadcast: %zu plugin DONEs, %zu events DONE of seq 0 "
                        "(%zu DONEs in all)\n", plugin, events, g_seen.ndones);
    assert_int_equal(events, 1);
    assert_int_equal(plugin, 7);
}

/* A call whose task NCCL started but whose channels it never reports (work without a proxy
 * op: a self pair, by NCCL's source symmetric and copy-engine kernels) is done, untimed,
 * once a later call of its comm has ended and a grace has passed: not left in flight to the
 * trace's end, where it read as unfinished and `top` would age it as a hang. The calls
 * around it keep their GPU times. */
static void a_call_whose_channels_never_come_is_done_untimed(void **state)
{
    (void)state;
    size_t bcast = run_hold_job("COLLPROF_GPU_TIMING=plugin", "STUB_NCCL_PROFILER_NOCH=2");
    /* before the Broadcast's CALL */
    size_t plugin = 0, untimed = 0;
    for (size_t i = 0; i < g_seen.dones_before[bcast]; i++) {
        const cp_rec_done *d = &g_seen.dones[i];
        if (d->op != CP_OP_ALLREDUCE)
            continue;
        if (d->seq == 2) {
            assert_int_equal(d->timing, CP_TIMING_NONE);
            untimed++;
        } else {
            assert_int_equal(d->timing, CP_TIMING_PLUGIN);
            plugin++;
        }
    }
    assert_int_equal(untimed, 1);
    assert_int_equal(plugin, 7);
}

static void sample_n_times_every_nth_call(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=sample:4", NULL};
    const char *argv[] = {"events", "20", NULL};
    run("shim_gpu_job", env, argv);
    size_t k = 0, timed = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (!is_op(c))
            continue;
        int want = k++ % 4 == 0;
        assert_int_equal(!!(c->flags & CP_CALL_TIMED), want);
        assert_int_equal(done_of(c) != NULL, want);
        timed += want;
    }
    assert_int_equal(timed, 6); /* calls 0, 4, 8, 12, 16, 20 of 23 */
    assert_int_equal(g_seen.ndones, timed);
}

/* auto with no profiler plugin from NCCL (the stub makes no plugin calls): events under
 * COLLPROF_OVERHEAD. The first call of each (comm, op, size) is always timed; then, at the
 * default 0.5 %, an event pair (~1 µs on the emulation) beside calls that cost about as much
 * leaves most calls untimed; at 100 % every call is. Every timed call has its DONE. */
static void auto_without_the_plugin_times_within_its_budget(void **state)
{
    (void)state;
    const char *argv[] = {"events", "3000", NULL};
    size_t total[2] = {0}, timed[2] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const char *env[] = {"COLLPROF_GPU_TIMING=auto",
                             pass ? "COLLPROF_OVERHEAD=100" : "COLLPROF_OVERHEAD=0.5", NULL};
        run("shim_gpu_job", env, argv);
        int first = 1;
        for (size_t i = 0; i < g_seen.ncalls; i++) {
            const cp_rec_call *c = &g_seen.calls[i];
            if (!is_op(c))
                continue;
            total[pass]++;
            if (first)
                assert_true(c->flags & CP_CALL_TIMED); /* the comm's first AllReduce */
            first = 0;
            if (c->flags & CP_CALL_TIMED) {
                timed[pass]++;
                assert_non_null(done_of(c));
            }
        }
        assert_int_equal(g_seen.ndones, timed[pass]);
    }
    fprintf(stderr, "auto: %zu of %zu calls timed at 0.5%%, %zu of %zu at 100%%\n", timed[0],
            total[0], timed[1], total[1]);
    assert_int_equal(total[0], 3003);
    assert_true(timed[0] * 4 < total[0]);
    assert_int_equal(timed[1], total[1]);
}

static void off_gives_no_done(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=off", NULL};
    const char *argv[] = {"events", "5", NULL};
    run("shim_gpu_job", env, argv);
    assert_int_equal(g_seen.ndones, 0);
    assert_false(g_seen.header.flags & CP_FILE_GPU_TIMING);
    for (size_t i = 0; i < g_seen.ncalls; i++)
        assert_false(g_seen.calls[i].flags & CP_CALL_TIMED);
}

static void a_captured_stream_gets_no_events_and_its_capture_survives(void **state)
{
    (void)state;
    const char *argv[] = {"capture", NULL};
    run("shim_gpu_job", NULL, argv);
    assert_non_null(strstr(g_res.out, "end capture=0 graph=1\n"));
    size_t k = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (c->op != CP_OP_ALLREDUCE)
            continue;
        if (k++ == 0) {
            assert_int_equal(c->flags & (CP_CALL_CAPTURED | CP_CALL_TIMED), CP_CALL_CAPTURED);
            assert_null(done_of(c));
        } else {
            assert_int_equal(c->flags & (CP_CALL_CAPTURED | CP_CALL_TIMED), CP_CALL_TIMED);
            assert_non_null(done_of(c));
        }
    }
    assert_int_equal(k, 2);
}

static void grouped_ops_carry_their_groups_times(void **state)
{
    (void)state;
    const char *argv[] = {"group", NULL};
    run("shim_gpu_job", NULL, argv);
    const cp_rec_done *d[3];
    size_t k = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (c->op != CP_OP_SEND && c->op != CP_OP_RECV)
            continue;
        assert_true(c->flags & CP_CALL_IN_GROUP);
        assert_true(c->flags & CP_CALL_TIMED);
        d[k] = done_of(c);
        assert_non_null(d[k]);
        assert_int_equal(d[k]->timing, CP_TIMING_EVENTS);
        k++;
    }
    assert_int_equal(k, 3);
    /* both sends were on s1: the same events, so the same times */
    assert_int_equal(d[0]->gpu_start_ns, d[2]->gpu_start_ns);
    assert_int_equal(d[0]->gpu_end_ns, d[2]->gpu_end_ns);
    assert_int_equal(g_seen.ndones, 4); /* and the AllReduce after the group */
}

/* A group of more operations than the shim times: the rest are untimed, and the trace, then
 * the report, say how many and why. */
static void calls_left_untimed_are_counted_by_cause_in_trace_and_report(void **state)
{
    (void)state;
    const char *argv[] = {"biggroup", "300", NULL};
    run("shim_gpu_job", NULL, argv);
    size_t sends = 0, untimed = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++)
        if (g_seen.calls[i].op == CP_OP_SEND) {
            sends++;
            untimed += !(g_seen.calls[i].flags & CP_CALL_TIMED);
        }
    assert_int_equal(sends, 300);
    assert_int_equal(untimed, 300 - 256);
    assert_int_equal(g_seen.untimed[CP_UNTIMED_GROUP], 300 - 256);
    assert_int_equal(g_seen.untimed[CP_UNTIMED_EVENT_POOL], 0);
    const char *dir = g_dir_env + strlen("COLLPROF_DIR=");
    const char *rargv[] = {"report", dir, NULL};
    job_result *rep = calloc(1, sizeof *rep);
    st_run_prog(rep, "collprof", 0, NULL, rargv);
    if (!strstr(rep->out, "44 calls untimed: 44 group too large"))
        fprintf(stderr, "%s%s", rep->out, rep->err);
    assert_non_null(strstr(rep->out, "44 calls untimed: 44 group too large"));
    free(rep);
}

static void without_a_driver_host_timing_is_said_once(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_DEBUG=info", NULL};
    const char *argv[] = {"burst", "5", NULL};
    run("shim_job", env, argv); /* not linked to libcuda, none on the library path */
    assert_int_equal(g_seen.ndones, 0);
    assert_false(g_seen.header.flags & CP_FILE_GPU_TIMING);
    for (size_t i = 0; i < g_seen.ncalls; i++)
        assert_false(g_seen.calls[i].flags & CP_CALL_TIMED);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    assert_int_equal(st_count_lines(g_res.err, "no usable CUDA driver"), 1);
}

static void each_call_site_is_one_site_record_with_the_jobs_function(void **state)
{
    (void)state;
    const char *argv[] = {"sites", NULL};
    run("shim_gpu_job", NULL, argv);
    uint32_t a = UINT32_MAX, b = UINT32_MAX;
    size_t k = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (c->op != CP_OP_ALLREDUCE)
            continue;
        if (k++ < 3) {
            if (a == UINT32_MAX)
                a = c->site_index;
            assert_int_equal(c->site_index, a);
        } else {
            b = c->site_index;
        }
    }
    assert_int_not_equal(a, UINT32_MAX);
    assert_int_not_equal(b, UINT32_MAX);
    assert_int_not_equal(a, b);
    assert_int_equal(g_seen.nsites, 2);
    for (size_t i = 0; i < 2; i++) {
        const char *want = g_seen.site_index[i] == a ? "site_a+0x" : "site_b+0x";
        assert_true(g_seen.site_index[i] == a || g_seen.site_index[i] == b);
        if (!strstr(g_seen.site_frames[i], want))
            fprintf(stderr, "frames:\n%s", g_seen.site_frames[i]);
        /* the innermost frame is the job's function, then main */
        assert_true(strncmp(g_seen.site_frames[i], want, strlen(want)) == 0);
        assert_non_null(strstr(g_seen.site_frames[i], "main+0x"));
        assert_non_null(strstr(g_seen.site_frames[i], "(shim_gpu_job)"));
    }
}

/* A fatal signal ends the process before the shim has made every DONE (a signal handler may
 * not call the driver): each one it could not make is counted lost, so every timed call has
 * its DONE or its loss, and a report on this trace cannot say "none lost". */
static void a_fatal_signal_counts_the_dones_it_cannot_make(void **state)
{
    (void)state;
    char dir[4200], dir_env[4300];
    snprintf(dir, sizeof dir, "%s/term", g_tmp);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    const char *env[] = {dir_env, "COLLPROF_GPU_TIMING=events", NULL};
    const char *argv[] = {"events-term", "200", NULL};
    st_run_prog(&g_res, "shim_gpu_job", 1, env, argv);
    assert_true(WIFSIGNALED(g_res.status) && WTERMSIG(g_res.status) == SIGTERM);
    char **paths;
    assert_int_equal(st_list(dir, &paths), 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, 1);
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.end.signal, SIGTERM);
    size_t calls = 0;
    for (size_t i = 0; i < t.ncalls; i++)
        calls += t.calls[i].op == CP_OP_ALLREDUCE;
    assert_int_equal(calls, 200);
    /* Every call's DONE is written or counted lost. So is the loop's one call site: the
     * writer thread symbolizes it off the hot path, which on a loaded machine may happen
     * before the signal (a SITE record) or not (one more lost). */
    size_t site_lost = t.nsites == 0;
    if (t.ndones + t.walk.lost_records != 200 + site_lost)
        fprintf(stderr, "%zu DONEs, %zu SITEs, %llu lost\n", t.ndones, t.nsites,
                (unsigned long long)t.walk.lost_records);
    assert_int_equal(t.nsites, 1 - site_lost);
    assert_int_equal(t.ndones + t.walk.lost_records, 200 + site_lost);
    /* and the file says why: the process ended, not a full ring */
    assert_int_equal(t.lost_by_cause[CP_LOST_AT_END], t.walk.lost_records);
    st_free_trace(&t);
}

/* COLLPROF_UNWIND=glibc, what a machine without libunwind gets: glibc's backtrace finds the
 * same two sites and their frames; dladdr names only exported functions, so the job's own
 * static functions are "??" with the object's name and offset. */
static void without_libunwind_sites_are_still_found(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_UNWIND=glibc", NULL};
    const char *argv[] = {"sites", NULL};
    run("shim_gpu_job", env, argv);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    uint32_t sites[2];
    size_t nsites = 0;
    for (size_t i = 0; i < g_seen.ncalls; i++) {
        const cp_rec_call *c = &g_seen.calls[i];
        if (c->op != CP_OP_ALLREDUCE)
            continue;
        assert_int_not_equal(c->site_index, UINT32_MAX);
        if (nsites == 0 || (nsites == 1 && sites[0] != c->site_index))
            sites[nsites++] = c->site_index;
        else
            assert_true(c->site_index == sites[0] || c->site_index == sites[1]);
    }
    assert_int_equal(nsites, 2);
    assert_int_equal(g_seen.nsites, 2);
    for (size_t i = 0; i < 2; i++) {
        if (strncmp(g_seen.site_frames[i], "??+0x", 5) != 0)
            fprintf(stderr, "frames:\n%s", g_seen.site_frames[i]);
        assert_true(strncmp(g_seen.site_frames[i], "??+0x", 5) == 0);
        assert_non_null(strstr(g_seen.site_frames[i], "(shim_gpu_job)"));
        assert_non_null(strchr(g_seen.site_frames[i], '\n')); /* more than one frame */
    }
    /* the two sites are two return addresses in the job: their first frames differ */
    assert_string_not_equal(g_seen.site_frames[0], g_seen.site_frames[1]);
}

/* The emulated NCCL and collprof-sim under the shim: rank 1's stream starts each collective
 * 30 ms late, so rank 0's collectives take >= ~30 ms on its GPU, waiting for it. */
static void a_late_rank_shows_in_its_peers_gpu_times(void **state)
{
    (void)state;
    char sim[4200], lib_path[4300], dir[4200];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", st_build_dir());
    if (!st_exists(sim)) {
        fprintf(stderr, "skipped: collprof-sim is not built (emu/sim)\n");
        skip();
    }
    snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s/emu", st_build_dir());
    snprintf(dir, sizeof dir, "%s/sim", g_tmp);
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", dir);
    const char *env[] = {g_dir_env, lib_path, "COLLPROF_EMU_DELAY=1:30",
                         "COLLPROF_GPU_TIMING=events", NULL};
    const char *argv[] = {"--launch", "4", "--pattern", "ddp", "--steps", "3", NULL};
    st_run_prog(&g_res, "collprof-sim", 1, env, argv);
    if (g_res.status != 0)
        fprintf(stderr, "%s\n%s", g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    char **paths;
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 4);
    static seen rank[2];
    for (int k = 0; k < 2; k++) {
        int status;
        char err[256];
        cp_trace_reader *r = cp_trace_reader_open(paths[k], &status, err, sizeof err);
        assert_non_null(r);
        memset(&rank[k], 0, sizeof rank[k]);
        rank[k].header = *cp_trace_reader_header(r);
        assert_int_equal(rank[k].header.rank, k); /* files sort by rank */
        cp_trace_visitor v = {.ctx = &rank[k], .on_call = on_call, .on_done = on_done};
        cp_walk_result wr;
        cp_trace_walk(r, &v, &wr);
        cp_trace_reader_close(r);
    }
    cp_trace_dir_free(paths, nf);
    size_t checked = 0, waited = 0;
    for (size_t i = 0; i < rank[0].ndones; i++) {
        const cp_rec_done *d0 = &rank[0].dones[i];
        if (d0->op != CP_OP_ALLREDUCE || d0->timing != CP_TIMING_EVENTS)
            continue;
        /* COLLPROF_EMU_DELAY=1:30 keeps rank 1's stream busy before each collective, as a
         * slow kernel would: its own GPU start is late, rank 0 arrives on time and waits
         * inside the collective, and both end together. Rank 0 is on time unless its host
         * itself was held up that long (a loaded machine, a sanitizer): most, not all. */
        const cp_rec_done *d1 = NULL;
        for (size_t k = 0; k < rank[1].ndones; k++)
            if (rank[1].dones[k].op == d0->op && rank[1].dones[k].seq == d0->seq)
                d1 = &rank[1].dones[k];
        assert_non_null(d1);
        waited += d0->gpu_end_ns - d0->gpu_start_ns >= 25000000 &&
                  d1->gpu_start_ns >= d0->gpu_start_ns + 25000000;
        assert_true(d1->gpu_end_ns - d1->gpu_start_ns < 25000000);
        uint64_t gap = d0->gpu_end_ns > d1->gpu_end_ns ? d0->gpu_end_ns - d1->gpu_end_ns
                                                       : d1->gpu_end_ns - d0->gpu_end_ns;
        assert_true(gap < 10000000);
        checked++;
    }
    assert_true(checked >= 3);
    assert_true(2 * waited > checked);
}

int main(void)
{
    g_tmp = st_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_timed_call_has_one_done_in_stream_order),
        cmocka_unit_test(a_calibrating_call_that_never_ends_holds_back_no_other),
        cmocka_unit_test(a_call_whose_channels_never_come_is_done_untimed),
        cmocka_unit_test(sample_n_times_every_nth_call),
        cmocka_unit_test(auto_without_the_plugin_times_within_its_budget),
        cmocka_unit_test(off_gives_no_done),
        cmocka_unit_test(a_captured_stream_gets_no_events_and_its_capture_survives),
        cmocka_unit_test(grouped_ops_carry_their_groups_times),
        cmocka_unit_test(calls_left_untimed_are_counted_by_cause_in_trace_and_report),
        cmocka_unit_test(without_a_driver_host_timing_is_said_once),
        cmocka_unit_test(each_call_site_is_one_site_record_with_the_jobs_function),
        cmocka_unit_test(without_libunwind_sites_are_still_found),
        cmocka_unit_test(a_fatal_signal_counts_the_dones_it_cannot_make),
        cmocka_unit_test(a_late_rank_shows_in_its_peers_gpu_times),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    st_rmtree(g_tmp);
    free(g_tmp);
    return rc;
}
