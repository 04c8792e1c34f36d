/* `collprof selftest` run as an operator runs it, on the emulated driver, NCCL and NVML
 * (LD_LIBRARY_PATH=<build>/emu), each scenario of issue 8 in its own process: a healthy
 * 8×H100 node, two hosts whose NCCL fell back to sockets, one slow NVLink pair, a PCIe box,
 * and no driver at all. NICs come from a sysfs fixture (--root) the test writes, since this
 * machine has none. */
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "tests/cli/test_cli_util.h"
#include "tests/selftest/selftest_test_util.h"

static char root_ib[PATH_MAX], root_none[PATH_MAX], emu_dir[PATH_MAX], empty_dir[PATH_MAX];
static char base[PATH_MAX];

#ifdef CP_TEST_SANITIZE
/* Under the sanitizers the emulation's CPU work runs 2-3x slower and, on 2 cores, its worker
 * threads reach a call late enough to show in the model's event times: the ops with many
 * calls per group (SendRecv, AlltoAll) measured 67-74 % of expected there. That build checks
 * memory safety; it asks AllReduce to hold 30 % and every other op to stay above 30 % of the
 * model (SendRecv read 50 % once with other builds running beside it). */
#define SANITIZED 1
#define TOLERANCE 0.30
#else
#define SANITIZED 0
#define TOLERANCE 0.15
#endif

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    const char *build = getenv("COLLPROF_BUILD_DIR");
    assert_non_null(build);
    PATHF(emu_dir, "%s/emu", build);
    PATHF(base, "%s/collprof-selftest-cli.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(base));
    PATHF(root_ib, "%s/ib", base);
    PATHF(root_none, "%s/none", base);
    PATHF(empty_dir, "%s/nolibs", base);
    st_ib_fixture(root_ib, 8);
    mkdir(root_none, 0755);
    mkdir(empty_dir, 0755);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* Every scenario starts from the same environment: only the emulation's knobs differ. */
static void emu_env(const char *libdir)
{
    setenv("LD_LIBRARY_PATH", libdir, 1);
    unsetenv("COLLPROF_EMU_TOPO");
    unsetenv("COLLPROF_EMU_HOSTS");
    unsetenv("COLLPROF_EMU_NET");
    unsetenv("COLLPROF_EMU_SLOW_LINK");
    unsetenv("COLLPROF_EMU_HANG");
    unsetenv("COLLPROF_EMU_DRIVER");
    unsetenv("NCCL_IB_DISABLE");
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static const char *field(json_object *c, const char *key)
{
    const char *s = json_object_get_string(json_object_object_get(c, key));
    return s ? s : "";
}

static double num(json_object *c, const char *key)
{
    return json_object_get_double(json_object_object_get(c, key));
}

/* The checks that did not pass, as "name STATUS measured/expected unit; ...", to say why a
 * run's exit status was not the one wanted. */
static void not_passed(json_object *o, char *buf, size_t n)
{
    json_object *checks = json_object_object_get(o, "checks");
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(checks) && at < n; i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        if (strcmp(field(c, "status"), "PASS") != 0)
            at += (size_t)snprintf(buf + at, n - at, "%s %s %.1f/%.1f %s; ", field(c, "name"),
                                   field(c, "status"), num(c, "measured"), num(c, "expected"),
                                   field(c, "unit"));
    }
}

static json_object *run_sizes(struct cli_result *r, const char *root, const char *sizes,
                              int expect_status)
{
    const char *args[] = { "selftest", "--json", "--quick", "--sizes", sizes, "--root", root,
                           NULL };
    cli_run(r, args);
    json_object *o = json_tokener_parse(r->out);
    if (r->status != expect_status) {
        char why[2048] = "";
        if (o)
            not_passed(o, why, sizeof why);
        fail_msg("selftest exited %d, wanted %d; not passed: %s; stderr: %s", r->status,
                 expect_status, why, r->err);
    }
    if (!o)
        fail_msg("not JSON: %.300s", r->out);
    return o;
}

static json_object *run_json(struct cli_result *r, const char *root, int expect_status)
{
    return run_sizes(r, root, "8:16M", expect_status);
}

static json_object *check(json_object *o, const char *name)
{
    json_object *checks = json_object_object_get(o, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        if (strcmp(json_object_get_string(json_object_object_get(c, "name")), name) == 0)
            return c;
    }
    return NULL;
}

static int count_prefix(json_object *o, const char *prefix)
{
    json_object *checks = json_object_object_get(o, "checks");
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(checks); i++)
        n += strncmp(field(json_object_array_get_idx(checks, i), "name"), prefix,
                     strlen(prefix)) == 0;
    return n;
}

/* busbw the emulation's own time model gives (docs/EMULATION.md) for the largest size run. */
static double emu_model_busbw(json_object *o, const char *op, double B, double alpha_us, int n)
{
    json_object *ops = json_object_object_get(o, "ops");
    double bytes = 0;
    for (size_t i = 0; i < json_object_array_length(ops); i++) {
        json_object *p = json_object_array_get_idx(ops, i);
        if (strcmp(field(p, "op"), op) == 0 && num(p, "bytes") > bytes)
            bytes = num(p, "bytes");
    }
    double f, steps;
    if (strcmp(op, "AllReduce") == 0) {
        f = 2.0 * (n - 1) / n;
        steps = 2.0 * (n - 1);
    } else if (strcmp(op, "Broadcast") == 0 || strcmp(op, "Reduce") == 0) {
        f = 1;
        steps = n - 1;
    } else if (strcmp(op, "SendRecv") == 0) {
        f = 1;
        steps = 1;
    } else {
        f = (double)(n - 1) / n;
        steps = n - 1;
    }
    double t_ns = bytes * f / B + steps * alpha_us * 1e3;
    return bytes * f / t_ns;
}

static void healthy_h100_passes_near_the_model(void **state)
{
    (void)state;
    emu_env(emu_dir);
    struct cli_result r;
    json_object *o = run_sizes(&r, root_ib, ST_HEALTHY_SIZES, 0);
    if (!SANITIZED || strcmp(field(o, "verdict"), "WARN") != 0)
        assert_string_equal(field(o, "verdict"), "PASS");
    json_object *topo = json_object_object_get(o, "topology");
    assert_int_equal(json_object_array_length(json_object_object_get(topo, "gpus")), 8);
    json_object *links = json_object_object_get(topo, "links");
    assert_int_equal(json_object_array_length(links), 28);
    for (size_t i = 0; i < 28; i++) {
        json_object *l = json_object_array_get_idx(links, i);
        assert_string_equal(field(l, "kind"), "NVLINK");
        assert_int_equal((int)num(l, "lanes"), 18);
    }
    assert_int_equal(json_object_array_length(json_object_object_get(topo, "nics")), 8);
    static const char *const ops[] = { "AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                       "Reduce", "AlltoAll", "SendRecv" };
    for (size_t i = 0; i < 7; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.busbw", ops[i]);
        for (char *p = name; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        json_object *c = check(o, name);
        if (!c)
            fail_msg("no check %s", name);
        assert_string_equal(field(c, "unit"), "GB/s");
        double model = emu_model_busbw(o, ops[i], 370.0, 1.0, 8);
        double got = num(c, "measured");
        if (!SANITIZED) {
            assert_string_equal(field(c, "status"), "PASS");
            if (fabs(got - model) > TOLERANCE * model)
                fail_msg("%s: %.1f GB/s, the emulation's model %.1f", name, got, model);
        } else {
            /* under the sanitizers on a loaded 2-core machine the ranks' hosts enqueue late
             * and skew the per-call times (the whole verdict may WARN, above): never a FAIL,
             * and within what a slow host explains */
            assert_string_not_equal(field(c, "status"), "FAIL");
            if (got < 0.3 * model || got > 1.05 * model)
                fail_msg("%s: %.1f GB/s, the emulation's model %.1f", name, got, model);
        }
        /* judged against NVLink, not against something slower */
        assert_true(num(c, "expected") > 0.5 * model);
    }
    assert_string_equal(field(check(o, "transport"), "status"), "PASS");
    assert_string_equal(field(check(o, "correctness"), "status"), "PASS");
    assert_string_equal(field(check(o, "p2p"), "status"), "PASS");
    assert_int_equal(count_prefix(o, "p2p."), 0);
    json_object_put(o);
    cli_result_free(&r);
}

static void sockets_between_two_hosts_fail_the_transport(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("COLLPROF_EMU_HOSTS", "2", 1);
    setenv("COLLPROF_EMU_NET", "socket", 1);
    struct cli_result r;
    json_object *o = run_json(&r, root_ib, 1);
    assert_string_equal(field(o, "verdict"), "FAIL");
    json_object *t = check(o, "transport");
    assert_non_null(t);
    assert_string_equal(field(t, "status"), "FAIL");
    if (!strstr(field(t, "detail"), "NET/Socket") || !strstr(field(t, "detail"), "mlx5_0"))
        fail_msg("transport detail: %s", field(t, "detail"));
    assert_true(num(t, "measured") > 0);
    /* the sockets also show in the bandwidth */
    assert_string_equal(field(check(o, "allreduce.busbw"), "status"), "FAIL");
    json_object_put(o);
    cli_result_free(&r);

    /* The same run on a node with no IB port: sockets are all it has, a warning. */
    o = run_json(&r, root_none, 0);
    assert_string_equal(field(o, "verdict"), "WARN");
    t = check(o, "transport");
    assert_string_equal(field(t, "status"), "WARN");
    json_object_put(o);
    cli_result_free(&r);
}

static void one_slow_link_is_named(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("COLLPROF_EMU_SLOW_LINK", "2-5:0.25", 1);
    struct cli_result r;
    json_object *o = run_json(&r, root_ib, 1);
    assert_string_equal(field(o, "verdict"), "FAIL");
    json_object *c = check(o, "p2p.2-5");
    if (!c)
        fail_msg("no p2p.2-5 check: %.2000s", r.out);
    assert_string_equal(field(c, "status"), "FAIL");
    double ratio = num(c, "measured") / num(c, "expected");
    if (ratio < 0.2 || ratio > 0.32)
        fail_msg("p2p.2-5 at %.2f of its peers, the fault is 0.25", ratio);
    assert_int_equal(count_prefix(o, "p2p."), 1);
    assert_string_equal(field(check(o, "p2p"), "status"), "FAIL");
    assert_string_equal(field(check(o, "transport"), "status"), "PASS");
    json_object_put(o);
    cli_result_free(&r);
}

/* A link slow for a while (another job's traffic, a host busy with something else: the
 * emulation beside another test under the sanitizers made a healthy pair read 104 of 362
 * GB/s) is measured again after the pass and is not named; slow on both looks, it is. The
 * fault covers the first MSGS messages each way: 2 warmup + 3 timed calls make one look
 * (only AllReduce swept, so no other op sends between the pair). */
static void a_link_slow_for_a_while_is_measured_again_not_named(void **state)
{
    (void)state;
    static const char *const faults[] = { "1-3:0.25:5", "1-3:0.25:10" };
    for (int k = 0; k < 2; k++) {
        emu_env(emu_dir);
        setenv("COLLPROF_EMU_SLOW_LINK", faults[k], 1);
        const char *args[] = { "selftest", "--json", "--quick", "--sizes", "8:16M", "--ops",
                               "allreduce", "--warmup", "2", "--iters", "3", "--root", root_ib,
                               NULL };
        struct cli_result r;
        cli_run(&r, args);
        json_object *o = json_tokener_parse(r.out);
        if (!o)
            fail_msg("%s: not JSON: %.300s; stderr: %.300s", faults[k], r.out, r.err);
        json_object *c = check(o, "p2p.1-3");
        if (k == 0 && (c || r.status != 0))
            fail_msg("slow for one look, named or not passed (exit %d): %.2000s", r.status,
                     r.out);
        if (k == 1) {
            if (!c || r.status != 1)
                fail_msg("slow for two looks, not named (exit %d): %.2000s", r.status, r.out);
            assert_string_equal(field(c, "status"), "FAIL");
            assert_int_equal(count_prefix(o, "p2p."), 1);
        }
        json_object_put(o);
        cli_result_free(&r);
    }
}

/* CUDA numbers the GPUs CUDA_VISIBLE_DEVICES leaves in its own order; checks name them as
 * nvidia-smi does (PCI order), so the slow pair is still 2-5, and the GPUs hidden on purpose
 * are not reported missing. */
static void gpus_are_named_in_pci_order_whatever_cuda_calls_them(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("CUDA_VISIBLE_DEVICES", "5,2,0", 1);
    setenv("COLLPROF_EMU_SLOW_LINK", "2-5:0.25", 1);
    struct cli_result r;
    json_object *o = run_json(&r, root_ib, 1);
    assert_string_equal(field(check(o, "gpus"), "status"), "PASS");
    assert_int_equal((int)num(check(o, "gpus"), "measured"), 3);
    json_object *c = check(o, "p2p.2-5");
    if (!c)
        fail_msg("no p2p.2-5 check: %.2000s", r.out);
    assert_string_equal(field(c, "status"), "FAIL");
    assert_int_equal(count_prefix(o, "p2p."), 1);
    json_object *gpus = json_object_object_get(json_object_object_get(o, "p2p"), "gpus");
    assert_int_equal(json_object_get_int(json_object_array_get_idx(gpus, 0)), 5);
    assert_int_equal(json_object_get_int(json_object_array_get_idx(gpus, 1)), 2);
    assert_int_equal(json_object_get_int(json_object_array_get_idx(gpus, 2)), 0);
    json_object_put(o);
    cli_result_free(&r);
}

static void pcie_box_passes_against_pcie(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("COLLPROF_EMU_TOPO", "pcie-4", 1);
    struct cli_result r;
    json_object *o = run_json(&r, root_none, 0);
    if (strcmp(field(o, "verdict"), "PASS") != 0)
        fail_msg("verdict %s: %.3000s", field(o, "verdict"), r.out);
    json_object *topo = json_object_object_get(o, "topology");
    assert_int_equal(json_object_array_length(json_object_object_get(topo, "gpus")), 4);
    json_object *links = json_object_object_get(topo, "links");
    for (size_t i = 0; i < json_object_array_length(links); i++)
        assert_string_not_equal(field(json_object_array_get_idx(links, i), "kind"), "NVLINK");
    json_object *c = check(o, "allreduce.busbw");
    assert_string_equal(field(c, "status"), "PASS");
    /* PCIe Gen4's figures, nowhere near NVLink's */
    assert_true(num(c, "expected") > 5 && num(c, "expected") < 32);
    double model = emu_model_busbw(o, "AllReduce", 25.0, 2.0, 4);
    if (fabs(num(c, "measured") - model) > TOLERANCE * model)
        fail_msg("allreduce %.1f GB/s, the emulation's model %.1f", num(c, "measured"), model);
    json_object *run = json_object_object_get(o, "run");
    assert_non_null(strstr(field(run, "expected_basis"), "PCIe"));
    json_object_put(o);
    cli_result_free(&r);
}

static void text_summary_fits_the_verdict(void **state)
{
    (void)state;
    emu_env(emu_dir);
    struct cli_result r;
    const char *args[] = { "selftest", "--quick", "--sizes", ST_HEALTHY_SIZES,
                           "--ops", "allreduce,allgather", "--no-p2p", "--root", root_ib, NULL };
    cli_run(&r, args);
    if (r.status != 0)
        fail_msg("exit %d: %s", r.status, r.err);
    if (!cli_starts_with(r.out, "collprof selftest: PASS\n"))
        fail_msg("%s", r.out);
    assert_non_null(strstr(r.out, "AllReduce"));
    assert_non_null(strstr(r.out, "AllGather"));
    assert_null(strstr(r.out, "SendRecv"));
    assert_non_null(strstr(r.out, "PASS  <op>.busbw           2 ops"));
    assert_null(strstr(r.out, "send/recv GB/s"));
    assert_true(cli_count_lines(r.out) <= 40);
    cli_result_free(&r);
}

/* A run that cannot happen: exit 3, nothing on stdout, one line on stderr holding every
 * string of want. Returns the seconds it took. */
static double cannot_run(const char *const *args, const char *const *want)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cli_result r;
    cli_run(&r, args);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(r.status, 3);
    assert_string_equal(r.out, "");
    assert_int_equal(cli_count_lines(r.err), 1);
    for (int i = 0; want[i]; i++)
        if (!strstr(r.err, want[i]))
            fail_msg("no \"%s\" in stderr: %s", want[i], r.err);
    cli_result_free(&r);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

static void no_driver_cannot_run(void **state)
{
    (void)state;
    emu_env(empty_dir);
    const char *args[] = { "selftest", "--quick", NULL };
    const char *want[] = { "libcuda.so.1", NULL };
    cannot_run(args, want);
}

/* The toolkit's stubs/libcuda.so found before the real driver (a container's LD_LIBRARY_PATH)
 * answers 34 to everything and names nothing: the one line still says what it is and what
 * to change. */
static void stub_driver_cannot_run(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("COLLPROF_EMU_DRIVER", "stub", 1);
    const char *args[] = { "selftest", "--quick", NULL };
    const char *want[] = { "CUDA_ERROR_STUB_LIBRARY (CUDA driver is a stub library)",
                           "libcuda.so.1", "LD_LIBRARY_PATH", NULL };
    cannot_run(args, want);
    unsetenv("COLLPROF_EMU_DRIVER");
}

/* NCCL's own init has no deadline; the selftest's --timeout bounds it too, so a node whose
 * GPUs never connect still gets an answer a health check can act on. */
static void init_that_never_finishes_cannot_run(void **state)
{
    (void)state;
    emu_env(emu_dir);
    setenv("COLLPROF_EMU_HANG", "3:init", 1);
#ifdef CP_TEST_SANITIZE
    /* The process exits with the emulated init threads still blocked in it, and LeakSanitizer's
     * exit-time scan of their dynamic TLS crashes ("Tracer caught signal 11", gcc 12): the
     * leak check runs without the TLS roots instead (no leak reported that way either). */
    setenv("LSAN_OPTIONS", "use_tls=0:print_suppressions=0", 1);
#endif
    const char *args[] = { "selftest", "--quick", "--timeout", "2", "--root", root_ib, NULL };
    const char *want[] = { "ncclCommInitAll over 8 GPUs did not finish within 2 s", NULL };
    double s = cannot_run(args, want);
    unsetenv("COLLPROF_EMU_HANG");
    unsetenv("LSAN_OPTIONS");
    if (s > 30)
        fail_msg("it took %.1f s to give up after a 2 s timeout", s);
}

/* A collective that never finishes part-way through the sweep: a FAIL that says which size
 * and what happened, with every size measured before it in the table; exit 1, not 3. The
 * checks print figures that mean something ("0 wrong elements", "2 / 2 GPUs"), and the link
 * summary counts the links between the GPUs tested (two of eight: one pair). */
static void a_size_that_times_out_keeps_what_came_before(void **state)
{
    (void)state;
    emu_env(emu_dir);
    /* the check (1 call), then 7 calls a size: 1 KiB and 2 KiB pass, 4 KiB never ends */
    setenv("COLLPROF_EMU_HANG", "1:17", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
    const char *args[] = { "selftest", "--ops", "allreduce", "--sizes", "1K:4K", "--warmup", "2",
                           "--iters", "5", "--no-p2p", "--timeout", "1", "--root", root_ib,
                           NULL };
    struct cli_result r;
    cli_run(&r, args);
    unsetenv("COLLPROF_EMU_HANG");
    unsetenv("CUDA_VISIBLE_DEVICES");
    fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "collprof: selftest: allreduce 4 KiB did not finish within 1 s: "
                               "every communicator aborted (the sizes measured before it are "
                               "in the report)\n");
    assert_true(cli_starts_with(r.out, "collprof selftest: FAIL\n"));
    assert_non_null(strstr(r.out, "\n  links     NVLINK 1 pair x18\n"));
    /* the table's row: the largest size measured, and the smallest */
    assert_non_null(strstr(r.out, "\n  AllReduce          2 KiB "));
    assert_non_null(strstr(r.out, "  1 KiB in "));
    assert_non_null(strstr(r.out, "\n  FAIL  sweep                2 sizes measured: stopped: "
                                  "allreduce 4 KiB did not finish within 1 s"));
    assert_non_null(strstr(r.out, "\n  PASS  correctness          0 wrong elements: "));
    assert_non_null(strstr(r.out, "\n  PASS  gpus                 2 / 2 GPUs: "));
    assert_null(strstr(r.out, ".0 GPUs"));
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthy_h100_passes_near_the_model),
        cmocka_unit_test(a_size_that_times_out_keeps_what_came_before),
        cmocka_unit_test(sockets_between_two_hosts_fail_the_transport),
        cmocka_unit_test(one_slow_link_is_named),
        cmocka_unit_test(a_link_slow_for_a_while_is_measured_again_not_named),
        cmocka_unit_test(gpus_are_named_in_pci_order_whatever_cuda_calls_them),
        cmocka_unit_test(pcie_box_passes_against_pcie),
        cmocka_unit_test(text_summary_fits_the_verdict),
        cmocka_unit_test(no_driver_cannot_run),
        cmocka_unit_test(stub_driver_cannot_run),
        cmocka_unit_test(init_that_never_finishes_cannot_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
