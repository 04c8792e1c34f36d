/* The shim as NCCL's profiler plugin, against the stub NCCL making NCCL 2.28's plugin calls
 * (STUB_NCCL_PROFILER=1; the emulated NCCL's own, faithful ones are tested end to end in
 * test_preload_timing_emu): NCCL opens the preloaded shim, every AllReduce of a two-rank comm
 * gets NCCL_OP and a DONE timed by the plugin with no driver at all, and a plugin the job
 * named itself (tests/emu/profiler_plugin_probe.c, v5 or v4, which logs every callback) gets
 * exactly the events it gets without collprof, with their parents intact; its failing init,
 * "none", the modes that leave NCCL's plugin alone, and a shim NCCL opens without the preload
 * behave as docs/ARCHITECTURE.md says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shim_test_util.h"

#include "abi/nccl_profiler_abi.h"

#define CALLS 50

static char *g_tmp;
static job_result g_res;
static char g_out[4300], g_out_env[4400], g_probe5[4300], g_probe4[4300], g_probefail[4300];

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    snprintf(g_out, sizeof g_out, "%s/probe.log", g_tmp);
    snprintf(g_out_env, sizeof g_out_env, "CPPROBE_LOG=%s", g_out);
    const char *b = st_build_dir();
    snprintf(g_probe5, sizeof g_probe5, "%s/tests/emu/prof/libnccl-profiler-probe.so", b);
    snprintf(g_probe4, sizeof g_probe4, "%s/tests/emu/prof/libnccl-profiler-probev4.so", b);
    snprintf(g_probefail, sizeof g_probefail, "%s/tests/emu/prof/libnccl-profiler-probefail.so",
             b);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* Runs shim_job plugin CALLS in its own trace directory; the probe's line into `probe`. */
static void run(const char *name, int preload, const char *const *extra, trace_seen *t,
                char *probe, size_t cap)
{
    char dir[4300], dir_env[4400];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);
    unlink(g_out);
    const char *env[16] = {dir_env, g_out_env, "STUB_NCCL_PROFILER=1"};
    size_t n = 3;
    for (; extra && *extra && n < 15; extra++)
        env[n++] = *extra;
    env[n] = NULL;
    char calls[16];
    snprintf(calls, sizeof calls, "%d", CALLS);
    const char *argv[] = {"plugin", calls, NULL};
    st_run(&g_res, preload, env, argv);
    if (g_res.status != 0 || strstr(g_res.err, "collprof: WARN"))
        fprintf(stderr, "%s: status %#x\n%s%s", name, g_res.status, g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    assert_string_equal(g_res.out, "plugin done\n");
    if (probe)
        st_probe_summary(g_out, probe, cap);
    if (t) {
        char **paths;
        int nf = st_list(dir, &paths);
        assert_int_equal(nf, 1);
        assert_int_equal(st_read_trace(paths[0], t), 0);
        cp_trace_dir_free(paths, nf);
    }
}

/* Every AllReduce is TIMED, and its DONE says the plugin timed it, on the host's clock. */
static void check_plugin_timed(const trace_seen *t)
{
    size_t ar = 0, plugin = 0;
    for (size_t i = 0; i < t->ncalls; i++) {
        if (t->calls[i].op != CP_OP_ALLREDUCE)
            continue;
        ar++;
        if (!(t->calls[i].flags & CP_CALL_TIMED))
            fprintf(stderr, "untimed: seq %llu flags %#x result %d; %zu DONE, %zu NCCL_OP\n%s",
                    (unsigned long long)t->calls[i].seq, t->calls[i].flags,
                    t->calls[i].result, t->ndones, t->nnccl_ops, g_res.err);
        assert_true(t->calls[i].flags & CP_CALL_TIMED);
        /* the ring carries the plugin call in host_hi: never on disk (a short call: 0) */
        assert_int_equal(t->calls[i].host_hi, 0);
    }
    assert_int_equal(t->nnccl_ops, CALLS);
    for (size_t i = 0; i < t->ndones; i++) {
        const cp_rec_done *d = &t->dones[i];
        if (d->timing != CP_TIMING_PLUGIN)
            fprintf(stderr, "DONE seq %llu timing %u start %llu end %llu\n",
                    (unsigned long long)d->seq, d->timing,
                    (unsigned long long)d->gpu_start_ns, (unsigned long long)d->gpu_end_ns);
        assert_int_equal(d->timing, CP_TIMING_PLUGIN);
        assert_true(d->gpu_end_ns >= d->gpu_start_ns);
        assert_true(d->gpu_start_ns >= t->header.mono_anchor_ns);
        plugin++;
    }
    assert_int_equal(ar, CALLS);
    assert_int_equal(plugin, CALLS);
}

static void nccl_opens_the_preloaded_shim_and_every_call_is_timed_without_a_driver(void **s)
{
    (void)s;
    trace_seen t;
    run("plain", 1, NULL, &t, NULL, 0);
    check_plugin_timed(&t);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    st_free_trace(&t);
}

static void the_jobs_own_plugin_gets_every_event_it_gets_without_collprof(void **s)
{
    (void)s;
    char bare[512], shim[512];
    char plugin_env[4400];
    snprintf(plugin_env, sizeof plugin_env, "NCCL_PROFILER_PLUGIN=%s", g_probe5);
    const char *env[] = {plugin_env, NULL};
    run("bare", 0, env, NULL, bare, sizeof bare);
    trace_seen t;
    run("chained", 1, env, &t, shim, sizeof shim);
    /* 50 calls: a GroupApi, a CollApi, a Group, a Coll and 2 channels each */
    assert_non_null(strstr(bare, "coll=50 kernel_ch=100 kernel_ch_stop=100"));
    assert_non_null(strstr(bare, "coll_parent_ok=50 kch_parent_ok=100 finalize=1"));
    assert_string_equal(shim, bare);
    check_plugin_timed(&t);
    st_free_trace(&t);
}

static void a_v4_plugin_gets_what_nccls_v4_adapter_gives_it(void **s)
{
    (void)s;
    char plugin_env[4400], probe[512];
    snprintf(plugin_env, sizeof plugin_env, "NCCL_PROFILER_PLUGIN=%s", g_probe4);
    const char *env[] = {plugin_env, NULL};
    trace_seen t;
    run("v4", 1, env, &t, probe, sizeof probe);
    /* no API or launch events; a Coll's parent is its Group, a channel's its Coll */
    assert_non_null(strstr(probe, "v=4 init=1 group_api=0 coll_api=0 group=50 coll=50 "
                                  "kernel_ch=100 kernel_ch_stop=100"));
    assert_non_null(strstr(probe, "coll_parent_ok=50 kch_parent_ok=100 finalize=1"));
    check_plugin_timed(&t);
    st_free_trace(&t);
}

static void a_plugin_that_fails_its_init_is_left_out_and_timing_goes_on(void **s)
{
    (void)s;
    char plugin_env[4400], probe[512];
    snprintf(plugin_env, sizeof plugin_env, "NCCL_PROFILER_PLUGIN=%s", g_probefail);
    const char *env[] = {plugin_env, NULL};
    trace_seen t;
    run("failing", 1, env, &t, probe, sizeof probe);
    /* its init was called and failed: no event, never finalized */
    assert_non_null(strstr(probe, "init=1 group_api=0 coll_api=0 group=0 coll=0 kernel_ch=0"));
    assert_non_null(strstr(probe, "finalize=0"));
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 1);
    assert_non_null(strstr(g_res.err, "failed its init"));
    check_plugin_timed(&t);
    st_free_trace(&t);
}

static void none_and_a_missing_plugin_still_time_every_call(void **s)
{
    (void)s;
    const char *none[] = {"NCCL_PROFILER_PLUGIN=none", NULL};
    trace_seen t;
    run("none", 1, none, &t, NULL, 0);
    check_plugin_timed(&t);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    st_free_trace(&t);
    const char *missing[] = {"NCCL_PROFILER_PLUGIN=/nonexistent/libx.so", NULL};
    run("missing", 1, missing, &t, NULL, 0);
    check_plugin_timed(&t);
    /* named by the job and not there: said once */
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 1);
    st_free_trace(&t);
}

static void modes_without_the_plugin_leave_nccls_plugin_as_the_job_set_it(void **s)
{
    (void)s;
    char plugin_env[4400], bare[512], off[512];
    snprintf(plugin_env, sizeof plugin_env, "NCCL_PROFILER_PLUGIN=%s", g_probe5);
    const char *env[] = {plugin_env, "COLLPROF_GPU_TIMING=off", NULL};
    run("bare-off", 0, env, NULL, bare, sizeof bare);
    trace_seen t;
    run("off", 1, env, &t, off, sizeof off);
    assert_string_equal(off, bare); /* NCCL opened the job's plugin itself */
    assert_int_equal(t.ndones, 0);
    st_free_trace(&t);
}

/* COLLPROF_ENABLE's "no" spellings are the settings table's, at load as at the first call:
 * NCCL is not pointed at the shim and no pool is mapped; and a shim NCCL opens anyway (the
 * job named it) while tracing is off maps none either. */
static void enable_off_leaves_nccls_plugin_alone_and_maps_no_pools(void **s)
{
    (void)s;
    const char *argv[] = {"plugin-env", "50", NULL};
    char shim_env[4400];
    snprintf(shim_env, sizeof shim_env, "NCCL_PROFILER_PLUGIN=%s/lib/libcollprof.so",
             st_build_dir());
    /* without the preload; named, NCCL opens the shim as a plugin that records nothing, and
     * its own threads for a plugin (the stub's proxy) are there too */
    long bare[2];
    for (int named = 0; named < 2; named++) {
        const char *base_env[] = {"STUB_NCCL_PROFILER=1", named ? shim_env : NULL, NULL};
        st_run(&g_res, 0, base_env, argv);
        assert_int_equal(g_res.status, 0);
        const char *v = strstr(g_res.out, "vm_kb=");
        assert_non_null(v);
        bare[named] = atol(v + 6);
    }
    const char *v;
    static const char *const offs[] = {"COLLPROF_ENABLE=off", "COLLPROF_ENABLE=false",
                                       "COLLPROF_ENABLE=no", "COLLPROF_ENABLE=0"};
    for (size_t i = 0; i < 2 * sizeof offs / sizeof offs[0]; i++) {
        int named = i >= sizeof offs / sizeof offs[0]; /* the job named the shim itself */
        const char *env[] = {"STUB_NCCL_PROFILER=1", offs[i % 4], named ? shim_env : NULL,
                             NULL};
        st_run(&g_res, 1, env, argv);
        assert_int_equal(g_res.status, 0);
        assert_string_equal(g_res.err, "");
        if (!named)
            assert_non_null(strstr(g_res.out, "NCCL_PROFILER_PLUGIN unset\n"));
        v = strstr(g_res.out, "vm_kb=");
        assert_non_null(v);
        long vm = atol(v + 6);
        /* the pools are tens of MiB of address space; the shim's own mappings a few */
        if (vm - bare[named] >= 8L << 10)
            fprintf(stderr, "%s%s: VmSize %ld kB, %ld kB without the shim\n", offs[i % 4],
                    named ? " (NCCL_PROFILER_PLUGIN=the shim)" : "", vm, bare[named]);
        assert_true(vm - bare[named] < 8L << 10);
    }
}

/* A bad COLLPROF_GPU_TIMING is auto, from load on: one WARN, and NCCL's plugin times every
 * call as auto's would. */
static void a_bad_gpu_timing_is_auto_with_its_plugin_and_one_warning(void **s)
{
    (void)s;
    const char *env[] = {"COLLPROF_GPU_TIMING=bogus", NULL};
    trace_seen t;
    run("bogus", 1, env, &t, NULL, 0);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 1);
    assert_non_null(strstr(g_res.err, "COLLPROF_GPU_TIMING='bogus'"));
    check_plugin_timed(&t);
    st_free_trace(&t);
}

static void a_shim_nccl_opens_without_the_preload_records_nothing(void **s)
{
    (void)s;
    char shim_env[4400];
    snprintf(shim_env, sizeof shim_env, "NCCL_PROFILER_PLUGIN=%s/lib/libcollprof.so",
             st_build_dir());
    const char *env[] = {shim_env, NULL};
    run("unpreloaded", 0, env, NULL, NULL, 0);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/unpreloaded", g_tmp);
    assert_false(st_exists(dir)); /* no trace: NCCL's calls are not ours to record */
    assert_string_equal(g_res.err, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_opens_the_preloaded_shim_and_every_call_is_timed_without_a_driver),
        cmocka_unit_test(the_jobs_own_plugin_gets_every_event_it_gets_without_collprof),
        cmocka_unit_test(a_v4_plugin_gets_what_nccls_v4_adapter_gives_it),
        cmocka_unit_test(a_plugin_that_fails_its_init_is_left_out_and_timing_goes_on),
        cmocka_unit_test(none_and_a_missing_plugin_still_time_every_call),
        cmocka_unit_test(modes_without_the_plugin_leave_nccls_plugin_as_the_job_set_it),
        cmocka_unit_test(a_shim_nccl_opens_without_the_preload_records_nothing),
        cmocka_unit_test(enable_off_leaves_nccls_plugin_alone_and_maps_no_pools),
        cmocka_unit_test(a_bad_gpu_timing_is_auto_with_its_plugin_and_one_warning),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
