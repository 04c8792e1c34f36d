/* Where the shim's GPU times come from, on the emulation: NCCL's profiler plugin and CUPTI.
 *
 * The shim as NCCL's profiler plugin: collprof-sim's ranks on the emulated
 * NCCL (which opens and calls a profiler plugin as NCCL 2.28.9 does, emu/nccl/profiler.c)
 * and the emulated driver. With COLLPROF_GPU_TIMING=plugin every collective of every
 * communicator of two ranks or more gets its GPU times from NCCL's kernel channels (DONE
 * timing plugin, an NCCL_OP with NCCL's algorithm and protocol) and no CUDA event at all; in
 * auto mode events time only each communicator's first call (NCCL has not yet said it
 * reports on it) and one call a comm in each 5 s window of the plugin's clock, which the two
 * calibrate; and a job's own plugin chained behind the shim receives what it receives
 * without collprof.
 *
 * COLLPROF_GPU_TIMING=cupti: the emulated libcupti (emu/cupti, fed by the emulated driver's
 * kernel launches) found beside the job's libcuda.so.1; every collective and every grouped
 * send/recv gets a DONE timed by CUPTI's kernel records, its kernel starting after the call
 * entered NCCL and no earlier than the previous kernel of its stream ended; without a
 * libcupti that works, one INFO line and CUDA events; on a one-rank communicator, which
 * makes no kernel, CUDA events. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shim_test_util.h"

#define RANKS 4

static char *g_tmp;
static int g_ranks = RANKS;  /* collprof-sim --launch */
static job_result g_res;
static trace_seen g_t[RANKS];
static int g_nt;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void free_traces(void)
{
    for (int i = 0; i < g_nt; i++)
        st_free_trace(&g_t[i]);
    g_nt = 0;
}

/* collprof-sim --launch RANKS on `pattern`, with the shim when `preload`, its libraries from
 * `libdir` (NULL: build/emu), `args` (NULL: 2 steps, --scale 0.001, --check); the ranks'
 * traces into g_t when traced. */
static void run_sim_in(const char *name, int preload, const char *pattern,
                       const char *const *extra, const char *libdir, const char *const *args)
{
    char sim[4200], lib_path[4300], dir[4300], dir_env[4400];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", st_build_dir());
    if (!st_exists(sim))
        skip();
    if (libdir)
        snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s", libdir);
    else
        snprintf(lib_path, sizeof lib_path, "LD_LIBRARY_PATH=%s/emu", st_build_dir());
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    const char *env[16] = {dir_env, lib_path};
    size_t n = 2;
    for (; extra && *extra && n < 15; extra++)
        env[n++] = *extra;
    env[n] = NULL;
    char ranks[8];
    snprintf(ranks, sizeof ranks, "%d", g_ranks);
    const char *argv[16] = {"--launch", ranks, "--pattern", pattern};
    static const char *const dflt[] = {"--steps", "2", "--scale", "0.001", "--check", NULL};
    size_t na = 4;
    for (const char *const *a = args ? args : dflt; *a && na < 15; a++)
        argv[na++] = *a;
    argv[na] = NULL;
    st_run_prog(&g_res, "collprof-sim", preload, env, argv);
    if (g_res.status != 0)
        fprintf(stderr, "%s: %#x\n%s%s", name, g_res.status, g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    if (!preload)
        return;
    char **paths;
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, g_ranks);
    for (int i = 0; i < nf; i++)
        assert_int_equal(st_read_trace(paths[i], &g_t[i]), 0);
    g_nt = nf;
    cp_trace_dir_free(paths, nf);
}

static void run_sim(const char *name, int preload, const char *pattern,
                    const char *const *extra)
{
    run_sim_in(name, preload, pattern, extra, NULL, NULL);
}

static int32_t comm_size(const trace_seen *t, uint32_t comm_index)
{
    for (size_t i = 0; i < t->ncomms; i++)
        if (t->comms[i].comm_index == comm_index)
            return t->comms[i].nranks;
    return -1;
}

static const cp_rec_done *done_of(const trace_seen *t, const cp_rec_call *c)
{
    for (size_t i = 0; i < t->ndones && i < 4096; i++) {
        const cp_rec_done *d = &t->dones[i];
        if (d->comm_index == c->comm_index && d->seq == c->seq && d->op == c->op &&
            d->peer == c->peer)
            return d;
    }
    return NULL;
}

/* Per rank: how many collectives and p2p calls of multi-rank comms were timed by the plugin,
 * by events and (g_cupti) by CUPTI, and how many of those comms there are. */
static size_t g_cupti;
static void tally(const trace_seen *t, size_t *plugin, size_t *events, size_t *calls,
                  size_t *comms)
{
    *plugin = *events = *calls = *comms = 0;
    g_cupti = 0;
    for (size_t i = 0; i < t->ncomms; i++)
        *comms += t->comms[i].nranks > 1;
    for (size_t i = 0; i < t->ncalls; i++) {
        const cp_rec_call *c = &t->calls[i];
        if (!(cp_op_is_collective(c->op) || cp_op_is_p2p(c->op)) ||
            comm_size(t, c->comm_index) < 2 || c->result != 0)
            continue;
        (*calls)++;
        assert_true(c->flags & CP_CALL_TIMED);
        const cp_rec_done *d = done_of(t, c);
        assert_non_null(d);
        assert_true(d->gpu_start_ns > 0 && d->gpu_end_ns >= d->gpu_start_ns);
        /* no kernel starts before its call entered NCCL, by the plugin's clock (events' own
         * times rest on a reference event, whose error is theirs) */
        if (d->timing == CP_TIMING_PLUGIN || d->timing == CP_TIMING_CUPTI)
            assert_true(d->gpu_start_ns >= c->enter_ns);
        *plugin += d->timing == CP_TIMING_PLUGIN;
        *events += d->timing == CP_TIMING_EVENTS;
        g_cupti += d->timing == CP_TIMING_CUPTI;
    }
}

static void plugin_mode_times_every_collective_with_no_event(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=plugin", NULL};
    run_sim("plugin", 1, "mixed", env);
    for (int r = 0; r < g_nt; r++) {
        size_t plugin, events, calls, comms;
        tally(&g_t[r], &plugin, &events, &calls, &comms);
        assert_true(calls > 20);
        assert_int_equal(events, 0);
        assert_int_equal(plugin, calls);
        assert_int_equal(g_t[r].nnccl_ops, calls);
        assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    }
    free_traces();
}

static void auto_mode_times_only_each_comms_first_call_by_events(void **state)
{
    (void)state;
    run_sim("auto", 1, "mixed", NULL);
    for (int r = 0; r < g_nt; r++) {
        size_t plugin, events, calls, comms;
        tally(&g_t[r], &plugin, &events, &calls, &comms);
        /* a comm's first call, and one calibrating call in the job's only window */
        assert_true(events >= 1 && events <= 2 * comms);
        assert_true(plugin > events);
        assert_int_equal(plugin + events, calls);
    }
    free_traces();
}

static void a_jobs_own_plugin_gets_what_it_gets_without_collprof(void **state)
{
    (void)state;
    char log[4300], log_env[4400], plugin_env[4400], bare[512], shim[512];
    snprintf(log, sizeof log, "%s/probe.log", g_tmp);
    snprintf(log_env, sizeof log_env, "CPPROBE_LOG=%s", log);
    snprintf(plugin_env, sizeof plugin_env,
             "NCCL_PROFILER_PLUGIN=%s/tests/emu/prof/libnccl-profiler-probe.so", st_build_dir());
    const char *env[] = {log_env, plugin_env, NULL};
    run_sim("probe-bare", 0, "ddp", env);
    st_probe_summary(log, bare, sizeof bare);
    unlink(log);
    run_sim("probe-shim", 1, "ddp", env);
    st_probe_summary(log, shim, sizeof shim);
    fprintf(stderr, "probe without collprof: %s\nprobe behind collprof:  %s\n", bare, shim);
    assert_non_null(strstr(bare, "init=4 ")); /* one comm on each of 4 ranks */
    assert_null(strstr(bare, " coll=0 "));
    assert_string_equal(shim, bare);
    for (int r = 0; r < g_nt; r++) {
        size_t plugin, events, calls, comms;
        tally(&g_t[r], &plugin, &events, &calls, &comms);
        assert_true(plugin > 0);
    }
    free_traces();
}

/* Each rank's kernels, by CUPTI, run one at a time on its stream in call order: no DONE
 * starts before the previous one of its stream ended, within 1 us (a group's calls share
 * its span). */
static void assert_cupti_spans_in_stream_order(const trace_seen *t)
{
    uint64_t prev_end[64] = {0}, streams[64] = {0};
    for (size_t i = 0; i < t->ncalls; i++) {
        const cp_rec_call *c = &t->calls[i];
        const cp_rec_done *d = done_of(t, c);
        if (!d || d->timing != CP_TIMING_CUPTI)
            continue;
        size_t k = 0;
        while (k < 63 && streams[k] && streams[k] != c->stream)
            k++;
        streams[k] = c->stream;
        /* within 1 us: CUPTI puts GPU times on the host's clock by interpolation, and the
         * emulation's conversion of each time reads the clocks anew (ns apart) */
        if (d->gpu_start_ns + 1000 < prev_end[k] && d->gpu_end_ns != prev_end[k])
            fail_msg("rank %d: %s seq %llu starts %llu ns before its stream's previous kernel "
                     "ended", (int)t->header.rank, cp_op_name(c->op),
                     (unsigned long long)c->seq,
                     (unsigned long long)(prev_end[k] - d->gpu_start_ns));
        prev_end[k] = d->gpu_end_ns;
    }
}

static void cupti_mode_times_every_call_by_its_kernels(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=cupti", "COLLPROF_DEBUG=INFO", NULL};
    /* tp for 10 steps: 320 calls a rank, more records than one of CUPTI's buffers (64 KiB),
     * which its own thread hands over as they fill */
    static const char *const patterns[] = {"mixed", "pp", "tp"};
    static const char *const long_run[] = {"--steps", "10", "--scale", "0.001", NULL};
    for (size_t p = 0; p < 3; p++) {
        run_sim_in(patterns[p], 1, patterns[p], env, NULL, p == 2 ? long_run : NULL);
        assert_non_null(strstr(g_res.err, "CUPTI: "));
        for (int r = 0; r < g_nt; r++) {
            size_t plugin, events, calls, comms;
            tally(&g_t[r], &plugin, &events, &calls, &comms);
            fprintf(stderr, "%s rank %d: %zu calls, %zu timed by CUPTI\n", patterns[p],
                    (int)g_t[r].header.rank, calls, g_cupti);
            assert_true(calls > 10);
            assert_int_equal(g_cupti, calls);
            assert_int_equal(plugin + events, 0);
            assert_cupti_spans_in_stream_order(&g_t[r]);
        }
        free_traces();
    }
}

/* The job's driver and NCCL with no libcupti beside them; whatever the loader or
 * /usr/local/cuda offers then is either missing or refuses the emulated driver. */
static void cupti_mode_without_cupti_says_so_and_uses_events(void **state)
{
    (void)state;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/nocupti", g_tmp);
    assert_int_equal(mkdir(dir, 0700), 0);
    static const char *const libs[] = {"libcuda.so.1", "libnccl.so.2", "libnvidia-ml.so.1",
                                       "libcollprof-emuhost.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        char from[4400], to[4400];
        snprintf(from, sizeof from, "%s/emu/%s", st_build_dir(), libs[i]);
        snprintf(to, sizeof to, "%s/%s", dir, libs[i]);
        assert_int_equal(symlink(from, to), 0);
    }
    const char *env[] = {"COLLPROF_GPU_TIMING=cupti", "COLLPROF_DEBUG=INFO", NULL};
    run_sim_in("nocupti-trace", 1, "ddp", env, dir, NULL);
    assert_true(st_count_lines(g_res.err, "CUDA events are used") >= 1);
    for (int r = 0; r < g_nt; r++) {
        size_t plugin, events, calls, comms;
        tally(&g_t[r], &plugin, &events, &calls, &comms);
        assert_true(calls > 5);
        assert_int_equal(events, calls);
    }
    free_traces();
}

/* A one-GPU job: its communicator has one rank, whose collectives NCCL runs as copies
 * (ncclLaunchOneRank), with no kernel for CUPTI to record; on an H200 every DONE of such a job
 * came out untimed. Events time them, and one INFO line says why. */
static void cupti_mode_times_one_rank_comms_by_events(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=cupti", "COLLPROF_DEBUG=INFO", NULL};
    g_ranks = 1;
    run_sim_in("cupti-one-rank", 1, "mixed", env, NULL, NULL);
    g_ranks = RANKS;
    assert_int_equal(st_count_lines(g_res.err, "one-rank communicators are timed by CUDA "
                                               "events"), 1);
    const trace_seen *t = &g_t[0];
    size_t calls = 0;
    for (size_t i = 0; i < t->ncalls; i++) {
        const cp_rec_call *c = &t->calls[i];
        if (!cp_op_is_collective(c->op) || c->result != 0)
            continue;
        calls++;
        assert_int_equal(comm_size(t, c->comm_index), 1);
        assert_true(c->flags & CP_CALL_TIMED);
        const cp_rec_done *d = done_of(t, c);
        assert_non_null(d);
        assert_int_equal(d->timing, CP_TIMING_EVENTS);
        assert_true(d->gpu_start_ns > 0 && d->gpu_end_ns >= d->gpu_start_ns);
    }
    assert_true(calls > 10);
    free_traces();
}

/* Sends to the rank itself. NCCL drops a pair in place at the group's end (no task), and
 * gives a pair out of place a task but no kernel channels (no proxy op for a self pair:
 * seen on an H200, where every such call waited for them to the trace's end). Neither gets
 * GPU times from NCCL's plugin: in plugin mode they are untimed (no TIMED, no DONE), in
 * auto mode CUDA events time them (a first call always; the budget the rest); none is left
 * in flight. AlltoAll in place (alone, grouped) and out of place, and a Gather in place,
 * whose self pairs run no channel or none NCCL reports, are timed by the plugin from their
 * other tasks' channels. */
static void self_pairs_in(const char *mode)
{
    char dir[4300], dir_env[4400], mode_env[64];
    snprintf(dir, sizeof dir, "%s/self-%s", g_tmp, mode);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    snprintf(mode_env, sizeof mode_env, "COLLPROF_GPU_TIMING=%s", mode);
    const char *env[] = {dir_env, mode_env, NULL};
    const char *argv[] = {NULL};
    int plugin = strcmp(mode, "plugin") == 0;
    st_run_prog(&g_res, "self_p2p_job", 1, env, argv);
    if (g_res.status != 0)
        fprintf(stderr, "%#x\n%s%s", g_res.status, g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    char **paths;
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 2);
    for (int i = 0; i < nf; i++)
        assert_int_equal(st_read_trace(paths[i], &g_t[i]), 0);
    g_nt = nf;
    cp_trace_dir_free(paths, nf);
    for (int r = 0; r < g_nt; r++) {
        size_t p2p = 0, by_events = 0, composite = 0;
        for (size_t i = 0; i < g_t[r].ncalls; i++) {
            const cp_rec_call *c = &g_t[r].calls[i];
            const cp_rec_done *d = done_of(&g_t[r], c);
            if (c->op == CP_OP_ALLTOALL || c->op == CP_OP_GATHER) {
                if (!plugin && !(c->flags & CP_CALL_TIMED))
                    continue; /* auto: the first of each kind timed by events */
                assert_non_null(d);
                if (plugin || d->timing != CP_TIMING_EVENTS)
                    assert_int_equal(d->timing, CP_TIMING_PLUGIN);
                composite++;
                continue;
            }
            if (!cp_op_is_p2p(c->op))
                continue;
            p2p++;
            if (plugin) {
                assert_false(c->flags & CP_CALL_TIMED);
                assert_null(d);
                continue;
            }
            if (!(c->flags & CP_CALL_TIMED)) {
                assert_null(d);
                continue;
            }
            assert_non_null(d); /* every timed one done, by events alone */
            assert_int_equal(d->timing, CP_TIMING_EVENTS);
            assert_true(d->gpu_end_ns >= d->gpu_start_ns && d->gpu_start_ns > 0);
            by_events++;
        }
        assert_int_equal(p2p, 20);
        if (plugin)
            assert_int_equal(composite, 4);
        else
            assert_true(by_events >= 2); /* the first Send and Recv, outside the budget */
    }
    free_traces();
}

static void sends_to_itself_are_done_or_untimed_never_in_flight(void **state)
{
    (void)state;
    self_pairs_in("plugin");
    self_pairs_in("auto");
}

/* What a trace says the GPU ran before each call: rank's total ns of `kernel` before the
 * collective (comm_index, seq), summed over the trace. */
typedef struct before_seen {
    char names[8][CP_KNAME_MAX];
    uint32_t index[8];
    int nnames;
    uint64_t total_ns[64];   /* by seq, of the kernel asked for */
    const char *kernel;
    size_t records;
} before_seen;

static int on_kname(void *ctx, const cp_rec_kname *r)
{
    before_seen *b = ctx;
    if (b->nnames < 8) {
        snprintf(b->names[b->nnames], CP_KNAME_MAX, "%.*s", (int)strnlen(r->name, CP_KNAME_MAX),
                 r->name);
        b->index[b->nnames++] = r->name_index;
    }
    return 0;
}

static int on_kernels(void *ctx, const cp_rec_kernels *r)
{
    before_seen *b = ctx;
    b->records++;
    for (unsigned i = 0; i < r->nkernels && i < CP_KERNELS_MAX; i++)
        for (int n = 0; n < b->nnames; n++)
            if (b->index[n] == r->k[i].name_index && !strcmp(b->names[n], b->kernel) &&
                r->seq < 64)
                b->total_ns[r->seq] += r->k[i].total_ns;
    return 0;
}

/* --gpu-compute --slow-compute 2:1.5: rank 2's compute kernels run 1.5 times as long, and
 * its KERNELS records say so, kernel by kernel, against the others'. */
static void cupti_mode_names_the_kernels_before_each_collective(void **state)
{
    (void)state;
    const char *env[] = {"COLLPROF_GPU_TIMING=cupti", NULL};
    const char *args[] = {"--steps", "3", "--scale", "0.02", "--gpu-compute",
                          "--slow-compute", "2:1.5", NULL};
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/kernels", g_tmp);
    run_sim_in("kernels", 1, "ddp", env, NULL, args);
    double fwd[RANKS];
    for (int r = 0; r < g_nt; r++) {
        int rank = (int)g_t[r].header.rank;
        assert_true(rank >= 0 && rank < RANKS);
        char **paths;
        int nf = st_list(dir, &paths);
        static before_seen b;
        memset(&b, 0, sizeof b);
        b.kernel = "sim_fwd_gemm";
        char want[32];
        snprintf(want, sizeof want, "rank%05d-", rank);
        for (int i = 0; i < nf; i++) {
            if (!strstr(paths[i], want))
                continue;
            int status;
            char err[256];
            cp_trace_reader *rd = cp_trace_reader_open(paths[i], &status, err, sizeof err);
            assert_non_null(rd);
            cp_trace_visitor v = {.ctx = &b, .on_kname = on_kname, .on_kernels = on_kernels};
            cp_walk_result wr;
            cp_trace_walk(rd, &v, &wr);
            cp_trace_reader_close(rd);
        }
        cp_trace_dir_free(paths, nf);
        /* every AllReduce after the Broadcast follows compute: 5 a step */
        assert_true(b.records >= 3 * 5);
        assert_int_equal(b.nnames, 2);
        /* the forward pass, before the first bucket of each step (seq 1, 6, 11) */
        fwd[rank] = (double)(b.total_ns[1] + b.total_ns[6] + b.total_ns[11]) / 3e6;
        fprintf(stderr, "rank %d: sim_fwd_gemm before each step's first bucket: %.3f ms\n",
                rank, fwd[rank]);
    }
    /* 20 ms * 0.02 = 0.4 ms; rank 2's 0.6 ms */
    for (int r = 0; r < RANKS; r++)
        assert_true(fabs(fwd[r] - (r == 2 ? 0.6 : 0.4)) < 0.02);
    free_traces();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plugin_mode_times_every_collective_with_no_event),
        cmocka_unit_test(auto_mode_times_only_each_comms_first_call_by_events),
        cmocka_unit_test(a_jobs_own_plugin_gets_what_it_gets_without_collprof),
        cmocka_unit_test(cupti_mode_times_every_call_by_its_kernels),
        cmocka_unit_test(cupti_mode_without_cupti_says_so_and_uses_events),
        cmocka_unit_test(cupti_mode_times_one_rank_comms_by_events),
        cmocka_unit_test(sends_to_itself_are_done_or_untimed_never_in_flight),
        cmocka_unit_test(cupti_mode_names_the_kernels_before_each_collective),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
