/* `collprof selftest` one process per GPU, started the way torchrun starts a job: four
 * processes of the real binary with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, on two
 * emulated hosts placed as collprof-sim --launch places them (COLLPROF_EMU_HOST_ID, the emuhost
 * preload for the hostnames). The id travels over MASTER_ADDR:MASTER_PORT, or through
 * COLLPROF_RENDEZVOUS_DIR; a rank whose peer never comes, or never enters a collective, ends
 * by --timeout with exit 3; so do two ranks on one GPU, at once. A slow link between the hosts
 * is named by its rail pair (net.<a>-<b>). */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "tests/cli/test_cli_util.h"
#include "tests/selftest/selftest_test_util.h"
#include "tests/common/test_port_util.h"

#ifdef CP_TEST_SANITIZE
#define TOLERANCE 0.30 /* the emulation's CPU work runs 2-3x slower under the sanitizers */
#else
#define TOLERANCE 0.15
#endif

static char *base;
static char root_ib[PATH_MAX], rdv_dir[PATH_MAX];
/* The best rail pair a healthy job measured (run_healthy), GB/s: 0 until one ran. */
static double g_healthy_rail_gbps;

static int setup(void **state)
{
    (void)state;
    base = cli_tmpdir();
    PATHF(root_ib, "%s/ib", base);
    /* four active NDR ports: the transport check then wants NET/IB between the hosts */
    st_ib_fixture(root_ib, 4);
    PATHF(rdv_dir, "%s/rendezvous", base);
    mkdir(rdv_dir, 0755);
    char live[PATH_MAX];
    PATHF(live, "%s/live", base);
    mkdir(live, 0755);
    setenv("COLLPROF_LIVE_DIR", live, 1);
    setenv("TMPDIR", base, 1);
    const char *clean[] = {"COLLPROF_EMU_TOPO", "COLLPROF_EMU_NET", "COLLPROF_EMU_SLOW_LINK",
                           "COLLPROF_EMU_HANG", "NCCL_IB_DISABLE", "CUDA_VISIBLE_DEVICES",
                           "COLLPROF_RENDEZVOUS_DIR", "MASTER_ADDR", "MASTER_PORT",
                           "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                           "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof clean / sizeof *clean; i++)
        unsetenv(clean[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cli_rmtree(base);
    free(base);
    return 0;
}

struct job {
    int world, per_host, hosts;
    int port;            /* MASTER_PORT; 0: the rendezvous directory */
    const char *timeout; /* --timeout */
    const char *visible; /* CUDA_VISIBLE_DEVICES, NULL: unset */
    const char *hang;    /* COLLPROF_EMU_HANG, NULL: unset; one AllReduce size then */
    const char *slow;    /* COLLPROF_EMU_SLOW_LINK, NULL: unset; a short AllReduce sweep then */
};

struct rank_run {
    pid_t pid;
    FILE *out, *err;
    struct cli_result res;
};

static void set_num(const char *name, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d", v);
    setenv(name, s, 1);
}

/* Starts rank r of the job (in the child: its launcher variables, then exec). */
static void start_rank(struct rank_run *k, const struct job *j, int r)
{
    k->out = tmpfile();
    k->err = tmpfile();
    assert_non_null(k->out);
    assert_non_null(k->err);
    fflush(NULL);
    k->pid = fork();
    assert_true(k->pid >= 0);
    if (k->pid > 0)
        return;
    set_num("RANK", r);
    set_num("WORLD_SIZE", j->world);
    set_num("LOCAL_RANK", r % j->per_host);
    set_num("LOCAL_WORLD_SIZE", j->per_host);
    if (j->visible)
        setenv("CUDA_VISIBLE_DEVICES", j->visible, 1);
    if (j->hang)
        setenv("COLLPROF_EMU_HANG", j->hang, 1);
    if (j->slow)
        setenv("COLLPROF_EMU_SLOW_LINK", j->slow, 1);
    if (j->port) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        set_num("MASTER_PORT", j->port);
    } else {
        setenv("COLLPROF_RENDEZVOUS_DIR", rdv_dir, 1);
    }
    if (j->hosts > 1) {
        char pre[PATH_MAX];
        snprintf(pre, sizeof pre, "%s/emu/libcollprof-emuhost.so", getenv("COLLPROF_BUILD_DIR"));
        set_num("COLLPROF_EMU_HOSTS", j->hosts);
        set_num("COLLPROF_EMU_HOST_ID", r / j->per_host);
        setenv("LD_PRELOAD", pre, 1);
#ifdef CP_TEST_SANITIZE
        /* ASan insists on being first in the initial library list, which a preload precedes */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan && *asan ? asan : "",
                 asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
#endif
    }
    dup2(fileno(k->out), STDOUT_FILENO);
    dup2(fileno(k->err), STDERR_FILENO);
    /* 20 timed calls a size rather than --quick's 5: one host stall weighs less */
    const char *argv[] = {"collprof", "selftest", "--json", "--quick", "--sizes", "8:4M",
                          "--iters", "20", "--timeout", j->timeout, "--root", root_ib, NULL};
    const char *hang_argv[] = {"collprof", "selftest", "--json", "--ops", "allreduce",
                               "--sizes", "1K:4K", "--warmup", "2", "--iters", "5",
                               "--timeout", j->timeout, "--root", root_ib, NULL};
    /* the rail pairs, not the sweep, find a slow link between hosts: the sweep kept short */
    const char *slow_argv[] = {"collprof", "selftest", "--json", "--quick", "--ops", "allreduce",
                               "--sizes", "8:1M", "--timeout", j->timeout, "--root", root_ib,
                               NULL};
    execv(cli_binary(),
          (char *const *)(j->hang ? hang_argv : j->slow ? slow_argv : argv));
    _exit(127);
}

static void finish_rank(struct rank_run *k)
{
    k->res.status = cli_wait(k->pid);
    k->res.out = cli_slurp(k->out);
    k->res.err = cli_slurp(k->err);
    fclose(k->out);
    fclose(k->err);
}

/* Every rank of j started, then each waited for: k[0..j->world-1]. */
static void run_job(struct rank_run *k, const struct job *j)
{
    for (int r = 0; r < j->world; r++)
        start_rank(&k[r], j, r);
    for (int r = 0; r < j->world; r++)
        finish_rank(&k[r]);
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no \"%s\" in the report", key);
    return v;
}

static json_object *find_check(json_object *report, const char *name)
{
    json_object *checks = get(report, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        if (!strcmp(json_object_get_string(get(c, "name")), name))
            return c;
    }
    return NULL;
}

static json_object *check_named(json_object *report, const char *name)
{
    json_object *c = find_check(report, name);
    if (!c)
        fail_msg("no check \"%s\"", name);
    return c;
}

/* Rank 0's report of a finished job of n ranks: every rank exits want (or, want < 0, as
 * rank 0 does) and only rank 0 prints. The caller puts it. */
static json_object *rank0_report(struct rank_run *k, int n, int want)
{
    for (int r = 0; r < n; r++) {
        fprintf(stderr, "rank %d: exit %d %s\n", r, k[r].res.status, k[r].res.err);
        assert_int_equal(k[r].res.status, want < 0 ? k[0].res.status : want);
        if (r > 0)
            assert_string_equal(k[r].res.out, "");
    }
    json_object *o = json_tokener_parse(k[0].res.out);
    if (!o)
        fail_msg("rank 0 printed no JSON: '%s'", k[0].res.out);
    return o;
}

static void free_ranks(struct rank_run *k, int n)
{
    for (int r = 0; r < n; r++)
        cli_result_free(&k[r].res);
}

/* Four ranks on two hosts: every rank exits with one code (0: PASS), rank 0 alone prints,
 * and its report is of the whole job. */
static void run_healthy(int port)
{
    struct job j = {4, 2, 2, port, "30", NULL, NULL, NULL};
    struct rank_run k[4];
    run_job(k, &j);
    for (int r = 0; r < 4; r++)
        fprintf(stderr, "rank %d: exit %d\n", r, k[r].res.status);
    if (k[0].res.status != 0)
        fprintf(stderr, "rank 0 said: %s%s\n", k[0].res.err, k[0].res.out);
    for (int r = 0; r < 4; r++) {
        /* every rank judged the same figures: one verdict, one exit code */
        if (k[r].res.status != k[0].res.status)
            fail_msg("rank %d: exit %d, rank 0: exit %d: %s", r, k[r].res.status,
                     k[0].res.status, k[r].res.err);
        if (r > 0)
            assert_string_equal(k[r].res.out, ""); /* only rank 0 prints */
    }
    json_object *o = json_tokener_parse(k[0].res.out);
    if (!o)
        fail_msg("rank 0 printed no JSON: '%s' (exit %d: %s)", k[0].res.out, k[0].res.status,
                 k[0].res.err);
    json_object *checks = get(o, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        const char *name = json_object_get_string(get(c, "name"));
        if (strcmp(json_object_get_string(get(c, "status")), "FAIL") != 0)
            continue;
#ifdef CP_TEST_SANITIZE
        /* Four sanitized processes and the emulation's stream threads share 2 cores: a rank
         * descheduled while it issues holds every peer inside the collective, and the
         * emulation starts no call before its host issued it, so a size's time can
         * triple. That lowers a busbw check and nothing else. */
        if (strstr(name, ".busbw")) {
            fprintf(stderr, "under the sanitizers: %s FAIL (%s)\n", name,
                    json_object_get_string(get(c, "detail")));
            continue;
        }
#endif
        fail_msg("check %s: FAIL: %s", name, json_object_get_string(get(c, "detail")));
    }
#ifndef CP_TEST_SANITIZE
    assert_int_equal(k[0].res.status, 0);
#endif
    json_object *run = get(o, "run");
    assert_int_equal(json_object_get_int(get(run, "ranks")), 4);
    assert_int_equal(json_object_get_int(get(run, "hosts")), 2);
    assert_true(json_object_get_boolean(get(run, "multi_process")));
    assert_string_equal(json_object_get_string(get(run, "network")), "IB");
    json_object *conns = get(run, "connections");
    int ib = json_object_get_int(get(conns, "NET/IB"));
    int sock = json_object_get_int(get(conns, "NET/Socket"));
    fprintf(stderr, "connections: NET/IB %d, P2P %d, NET/Socket %d\n", ib,
            json_object_get_int(get(conns, "P2P")), sock);
    /* Each rank read only its own log: the ring 0->1->2->3->0 has two hops inside a host
     * (P2P, logged by the sender) and two between hosts (NET, logged at both ends), so rank 0
     * alone saw P2P 1 and NET/IB 1; the run's figures are every rank's, summed. */
    assert_int_equal(ib, 4);
    assert_int_equal(json_object_get_int(get(conns, "P2P")), 2);
    assert_int_equal(sock, 0);
    assert_string_equal(json_object_get_string(get(check_named(o, "transport"), "status")),
                        "PASS");
    assert_string_equal(json_object_get_string(get(check_named(o, "correctness"), "status")),
                        "PASS");
    json_object *ops = get(o, "ops");
    int seen[7] = {0};
    for (size_t i = 0; i < json_object_array_length(ops); i++) {
        json_object *p = json_object_array_get_idx(ops, i);
        double busbw = json_object_get_double(get(p, "busbw_gbps"));
        int64_t bytes = json_object_get_int64(get(p, "bytes"));
        /* the JSON keeps two decimals: a few bytes' GB/s reads 0 */
        if (!(json_object_get_double(get(p, "time_us")) > 0) || (bytes >= 1 << 20 && !(busbw > 0)))
            fail_msg("op %zu: %lld B, busbw %g", i, (long long)bytes, busbw);
        static const char *const names[7] = {"AllReduce", "AllGather", "ReduceScatter",
                                             "Broadcast", "Reduce",    "AlltoAll",
                                             "SendRecv"};
        for (int n = 0; n < 7; n++)
            seen[n] += !strcmp(json_object_get_string(get(p, "op")), names[n]);
        if (bytes == 4 << 20)
            fprintf(stderr, "%-13s 4 MiB busbw %6.1f GB/s\n",
                    json_object_get_string(get(p, "op")), busbw);
        /* The emulation's time model (docs/EMULATION.md) for a ring over 4 ranks: NVLink's
         * 370 GB/s bounds it (8 NICs x 48 GB/s per host are more), each step costs the
         * network's 5 us. Each rank timed its own span and the slowest one counts, so a rank
         * that reported before its peers finished would read faster than the model. */
        if (bytes == 4 << 20 && !strcmp(json_object_get_string(get(p, "op")), "AllReduce")) {
            double us = (double)bytes * 2 * 3 / 4 / 370e3 + 2 * 3 * 5.0;
            double want = (double)bytes / us / 1e3 * 1.5;
#ifdef CP_TEST_SANITIZE
            int ok = busbw < want * (1 + TOLERANCE); /* slower: the host lag said above */
#else
            int ok = fabs(busbw - want) <= want * TOLERANCE;
#endif
            if (!ok)
                fail_msg("AllReduce 4 MiB busbw %.1f GB/s, model %.1f", busbw, want);
        }
    }
    for (int n = 0; n < 7; n++)
        assert_true(seen[n] > 0);
    /* the pairwise matrix: rank 0's host, its two ranks, both ways measured */
    json_object *p2p = get(o, "p2p");
    json_object *rows = get(p2p, "gbps");
    assert_int_equal(json_object_array_length(rows), 2);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            if (a != b) {
                json_object *row = json_object_array_get_idx(rows, (size_t)a);
                double g = json_object_get_double(json_object_array_get_idx(row, (size_t)b));
                fprintf(stderr, "p2p %d->%d %.1f GB/s\n", a, b, g);
                assert_true(g > 0);
            }
    /* the rail pairs: local index 0 and 1 of host 0 to the same of host 1, none slow */
    assert_string_equal(json_object_get_string(get(check_named(o, "net"), "status")), "PASS");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        const char *name =
            json_object_get_string(get(json_object_array_get_idx(checks, i), "name"));
        if (!strncmp(name, "net.", 4))
            fail_msg("healthy hosts, yet a slow rail pair: %s", name);
    }
    json_object *net = get(o, "net_pairs");
    assert_int_equal(json_object_array_length(net), 2);
    for (int i = 0; i < 2; i++) {
        json_object *p = json_object_array_get_idx(net, (size_t)i);
        assert_int_equal(json_object_get_int(get(p, "a")), i);
        assert_int_equal(json_object_get_int(get(p, "b")), i + 2);
        assert_string_equal(json_object_get_string(get(p, "host_a")), "vm-emu0");
        assert_string_equal(json_object_get_string(get(p, "host_b")), "vm-emu1");
        fprintf(stderr, "net %d-%d %.1f / %.1f GB/s\n", i, i + 2,
                json_object_get_double(get(p, "gbps_ab")),
                json_object_get_double(get(p, "gbps_ba")));
        assert_true(json_object_get_double(get(p, "gbps_ab")) > 0);
        assert_true(json_object_get_double(get(p, "gbps_ba")) > 0);
        for (int k = 0; k < 2; k++) {
            double g = json_object_get_double(get(p, k ? "gbps_ba" : "gbps_ab"));
            if (g > g_healthy_rail_gbps)
                g_healthy_rail_gbps = g;
        }
    }
    json_object_put(o);
    free_ranks(k, 4);
}

static void test_master_port(void **state)
{
    (void)state;
    run_healthy(tp_free_port());
}

static void test_rendezvous_dir(void **state)
{
    (void)state;
    run_healthy(0);
}

/* A slow link between host 0's GPU 1 and host 1's GPU 1 (the emulation numbers GPUs
 * host * 8 + device: 1-9), which no pair of the matrix crosses: ranks 0, 1 are host 0's
 * devices 0, 1 and ranks 2, 3 host 1's, so the rail pair of local index 1 is ranks 1 and 3.
 * It alone is named, and every rank exits 1. */
static void test_slow_rail(void **state)
{
    (void)state;
    struct job j = {4, 2, 2, tp_free_port(), "30", NULL, NULL, "1-9:0.25"};
    struct rank_run k[4];
    run_job(k, &j);
    json_object *o = rank0_report(k, 4, 1);
    assert_string_equal(json_object_get_string(get(o, "verdict")), "FAIL");
    json_object *slow = check_named(o, "net.1-3");
    const char *detail = json_object_get_string(get(slow, "detail"));
    fprintf(stderr, "net.1-3: %s\n", detail);
    assert_string_equal(json_object_get_string(get(slow, "status")), "FAIL");
    assert_non_null(strstr(detail, "rank 1 on vm-emu0"));
    assert_non_null(strstr(detail, "rank 3 on vm-emu1"));
    assert_non_null(strstr(detail, "slow inter-host path"));
    /* a quarter of the healthy rail's figure. The selftest's "expected" is the best rail pair
     * of this same run, which a loaded machine can make slow as well (the sanitizers' pass
     * here measured it at 228 of 344.6 GB/s: ratio 0.41); the healthy jobs before this test
     * measured the rail unslowed, and the better of the two is the reference. */
    double expected = json_object_get_double(get(slow, "expected"));
    if (g_healthy_rail_gbps > expected)
        expected = g_healthy_rail_gbps;
    double ratio = json_object_get_double(get(slow, "measured")) / expected;
    if (!(ratio > 0.25 * (1 - TOLERANCE) && ratio < 0.25 * (1 + TOLERANCE)))
        fail_msg("net.1-3 at %.2f of the healthy rail, want 0.25", ratio);
    json_object *net = check_named(o, "net");
    assert_string_equal(json_object_get_string(get(net, "status")), "FAIL");
    /* no other pair is named, and the matrix inside each host is healthy */
    json_object *checks = get(o, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        const char *name = json_object_get_string(get(c, "name"));
        if ((!strncmp(name, "net.", 4) || !strncmp(name, "p2p.", 4)) && strcmp(name, "net.1-3"))
            fail_msg("only net.1-3 is slow, yet %s: %s", name,
                     json_object_get_string(get(c, "detail")));
    }
    assert_null(find_check(o, "p2p.0-1"));
    assert_string_equal(json_object_get_string(get(check_named(o, "p2p"), "status")), "PASS");
    json_object_put(o);
    free_ranks(k, 4);
}

/* A slow NVLink on the second host (its GPUs 0-1: global 8-9, ranks 3 and 4 of three ranks a
 * host). Rank 0 prints the report, so it judges every host's matrix from the figures all
 * ranks agreed: the pair is named with its host, and every rank exits 1 (rank 0 said PASS
 * and exited 0 while the second host's ranks exited 1). */
static void test_slow_pair_on_another_host_is_named(void **state)
{
    (void)state;
    struct job j = {6, 3, 2, tp_free_port(), "30", NULL, NULL, "8-9:0.25"};
    struct rank_run k[6];
    run_job(k, &j);
    json_object *o = rank0_report(k, 6, 1);
    json_object *checks = get(o, "checks");
    int named = 0;
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        const char *name = json_object_get_string(get(c, "name"));
        const char *detail = json_object_get_string(get(c, "detail"));
        if (strncmp(name, "p2p.", 4) && strncmp(name, "net.", 4))
            continue;
        if (strncmp(name, "p2p.0-1@", 8) || !strstr(name, "-emu1"))
            fail_msg("only host 1's pair 0-1 is slow, yet %s: %s", name, detail);
        fprintf(stderr, "%s: %s\n", name, detail);
        assert_string_equal(json_object_get_string(get(c, "status")), "FAIL");
        double ratio = json_object_get_double(get(c, "measured")) /
                       json_object_get_double(get(c, "expected"));
        if (!(ratio > 0.25 * (1 - TOLERANCE) && ratio < 0.25 * (1 + TOLERANCE)))
            fail_msg("%s at %.2f of its host's other pairs, want 0.25", name, ratio);
        named++;
    }
    assert_int_equal(named, 1);
    json_object *p2p = check_named(o, "p2p");
    assert_string_equal(json_object_get_string(get(p2p, "status")), "FAIL");
    assert_non_null(strstr(json_object_get_string(get(p2p, "detail")), "on 2 hosts"));
    /* and every host's matrix in the JSON: the second host's ranks 3-5, its 0-1 pair slow */
    json_object *hosts = get(o, "p2p_hosts");
    assert_int_equal(json_object_array_length(hosts), 2);
    json_object *h1 = json_object_array_get_idx(hosts, 1);
    assert_non_null(strstr(json_object_get_string(get(h1, "host")), "-emu1"));
    json_object *ranks = get(h1, "ranks"), *rows = get(h1, "gbps");
    for (int i = 0; i < 3; i++)
        assert_int_equal(json_object_get_int(json_object_array_get_idx(ranks, (size_t)i)),
                         3 + i);
    double slow01 = json_object_get_double(
               json_object_array_get_idx(json_object_array_get_idx(rows, 0), 1)),
           ok02 = json_object_get_double(
               json_object_array_get_idx(json_object_array_get_idx(rows, 0), 2));
    assert_null(json_object_array_get_idx(json_object_array_get_idx(rows, 1), 1)); /* diagonal */
    if (!(slow01 > 0 && ok02 > 0 && slow01 < 0.5 * ok02))
        fail_msg("host 1's matrix: 0->1 %.1f GB/s, 0->2 %.1f", slow01, ok02);
    json_object_put(o);
    free_ranks(k, 6);
}

/* Links slow for a while only, as when another job's traffic shares them: the pair of
 * host 0's GPUs 0-1 (ranks 0, 1: a pair of the matrix) and the rail 1-9 (ranks 1, 3), each
 * for the first 9 messages each way: a pair's first look (2 warmup + 5 timed calls, and two
 * swaps of the spans between the two ranks). Every rank measures both again after the pass,
 * at full speed, and none is named; with a fault that lasts, test_slow_rail names it. */
static void test_passing_slowness_is_not_named(void **state)
{
    (void)state;
    struct job j = {4, 2, 2, tp_free_port(), "30", NULL, NULL, "0-1:0.25:9,1-9:0.25:9"};
    struct rank_run k[4];
    run_job(k, &j);
    json_object *o = rank0_report(k, 4, -1);
    json_object *checks = get(o, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i);
        const char *name = json_object_get_string(get(c, "name"));
        if (!strncmp(name, "net.", 4) || !strncmp(name, "p2p.", 4))
            fail_msg("slow only on the first look, yet %s: %s", name,
                     json_object_get_string(get(c, "detail")));
    }
    assert_string_not_equal(json_object_get_string(get(check_named(o, "net"), "status")),
                            "FAIL");
    assert_string_not_equal(json_object_get_string(get(check_named(o, "p2p"), "status")),
                            "FAIL");
    json_object_put(o);
    free_ranks(k, 4);
}

/* One rank of two: the other never comes, and the run ends by --timeout with one line. */
static void run_alone(int port, int rank, const char *says)
{
    struct job j = {2, 2, 1, port, "1", NULL, NULL, NULL};
    struct rank_run k;
    start_rank(&k, &j, rank);
    finish_rank(&k);
    fprintf(stderr, "rank %d alone: exit %d: %s", rank, k.res.status, k.res.err);
    assert_int_equal(k.res.status, 3);
    assert_string_equal(k.res.out, "");
    assert_int_equal(cli_count_lines(k.res.err), 1);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "collprof: selftest: rank %d of 2: ", rank);
    assert_true(cli_starts_with(k.res.err, prefix));
    assert_non_null(strstr(k.res.err, says));
    cli_result_free(&k.res);
}

static void test_peer_missing(void **state)
{
    (void)state;
    run_alone(tp_free_port(), 1, "no NCCL id from rank 0 at 127.0.0.1:");
    /* through a directory rank 0 waits for nobody, so it is ncclCommInitRank that waits */
    run_alone(0, 0, "ncclCommInitRank over 2 ranks did not finish within 1 s");
}

/* Two ranks of a host but one GPU visible: NCCL refuses them, and the reason says why. */
static void test_ranks_share_a_gpu(void **state)
{
    (void)state;
    struct job j = {2, 2, 1, tp_free_port(), "10", "0", NULL, NULL};
    struct rank_run k[2];
    run_job(k, &j);
    for (int r = 0; r < 2; r++) {
        fprintf(stderr, "rank %d: exit %d: %s", r, k[r].res.status, k[r].res.err);
        assert_int_equal(k[r].res.status, 3);
        assert_int_equal(cli_count_lines(k[r].res.err), 1);
        assert_non_null(strstr(k[r].res.err, "ncclCommInitRank over 2 ranks failed"));
        char says[128];
        snprintf(says, sizeof says, "(2 local ranks on 1 GPU: local rank %d took GPU 0, which "
                 "another rank shares)\n", r);
        assert_non_null(strstr(k[r].res.err, says));
        cli_result_free(&k[r].res);
    }
}

/* A rank that never enters a collective (its 21st AllReduce: after the check and the sum
 * that agrees on its count, then 7 calls and the min that agrees on the times for each of
 * 1 KiB and 2 KiB, the third of 4 KiB): every rank's --timeout ends the run, each
 * with its own line, exit 1 (a FAIL, not a run that could not be made); rank 0's report keeps
 * the two sizes measured before it and says the sweep stopped. */
static void test_hang_times_out(void **state)
{
    (void)state;
    struct job j = {2, 2, 1, tp_free_port(), "1", NULL, "1:20", NULL};
    struct rank_run k[2];
    run_job(k, &j);
    for (int r = 0; r < 2; r++) {
        fprintf(stderr, "rank %d: exit %d: %s", r, k[r].res.status, k[r].res.err);
        char want[256];
        snprintf(want, sizeof want, "collprof: selftest: rank %d of 2: allreduce 4 KiB did not "
                 "finish within 1 s: every communicator aborted (the sizes measured before it "
                 "are in %s)\n", r, r == 0 ? "the report" : "rank 0's report");
        assert_int_equal(k[r].res.status, 1);
        assert_string_equal(k[r].res.err, want);
    }
    assert_string_equal(k[1].res.out, "");
    json_object *o = json_tokener_parse(k[0].res.out);
    assert_non_null(o);
    assert_string_equal(json_object_get_string(get(o, "verdict")), "FAIL");
    assert_true(json_object_get_boolean(get(get(o, "run"), "partial")));
    json_object *sweep = check_named(o, "sweep");
    assert_string_equal(json_object_get_string(get(sweep, "status")), "FAIL");
    assert_int_equal(json_object_get_int(get(sweep, "measured")), 2);
    assert_non_null(strstr(json_object_get_string(get(sweep, "detail")),
                           "allreduce 4 KiB did not finish within 1 s"));
    assert_int_equal(json_object_array_length(get(o, "ops")), 2);
    json_object_put(o);
    for (int r = 0; r < 2; r++)
        cli_result_free(&k[r].res);
}

/* A launcher variable that makes no sense is a usage error, before anything starts. */
static void test_bad_variable(void **state)
{
    (void)state;
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "one", 1);
    struct cli_result r;
    cli_runl(&r, "selftest", "--json", "--quick", "--root", root_ib, NULL);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    assert_int_equal(r.status, 2);
    assert_string_equal(r.err, "collprof: selftest: WORLD_SIZE='one' is not a non-negative "
                               "number\n");
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_port),
        cmocka_unit_test(test_rendezvous_dir),
        cmocka_unit_test(test_slow_rail),
        cmocka_unit_test(test_passing_slowness_is_not_named),
        cmocka_unit_test(test_slow_pair_on_another_host_is_named),
        cmocka_unit_test(test_peer_missing),
        cmocka_unit_test(test_ranks_share_a_gpu),
        cmocka_unit_test(test_hang_times_out),
        cmocka_unit_test(test_bad_variable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
