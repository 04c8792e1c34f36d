/* Long jobs: calls that block for seconds keep their true host times, in the file and in
 * what collprof prints of it. shim_job runs under LD_PRELOAD=libcollprof.so against the stub
 * libnccl.so.2 (STUB_NCCL_BLOCK_MS makes its init and AllReduces of count 781 block).
 *
 * Slack: a blocked call's host time is at least what it slept less SLACK_UNDER (the tick
 * rate's calibration, parts in a million of seconds) and at most SLACK_OVER more (a loaded
 * machine waking the sleeper late). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "abi/nccl_abi.h"
#include "trace/trace_hash.h"
#include "shim_test_util.h"

#define MS 1000000ull
#define SLACK_UNDER (1 * MS)
#define SLACK_OVER (1000 * MS)

static char *g_tmp;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void near(uint64_t got, uint64_t want)
{
    if (got + SLACK_UNDER < want || got > want + SLACK_OVER)
        fail_msg("host time %llu ns, slept %llu ns", (unsigned long long)got,
                 (unsigned long long)want);
}

/* host_dur_ns of the n-th `op` CALL line of `collprof dump` output, or -1. */
static long long dumped(const char *out, const char *op, int n)
{
    char key[64];
    snprintf(key, sizeof key, " CALL %s ", op);
    for (const char *p = out; (p = strstr(p, key)) != NULL; p++) {
        if (n-- > 0)
            continue;
        const char *d = strstr(p, "host_dur_ns=");
        const char *eol = strchr(p, '\n');
        return d && (!eol || d < eol) ? atoll(d + strlen("host_dur_ns=")) : -1;
    }
    return -1;
}

/* The number after the first `key` in a JSON text, or -1. */
static double json_number(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? atof(p + strlen(key)) : -1;
}

/* Across 2^32 ticks (1.4 s of a 3 GHz TSC) and 2^32 ns (4.29 s): an init of 5 s, AllReduces
 * of 2 and 3 s read what they blocked, in the trace, in `collprof dump` and in the report. */
static void calls_of_seconds_keep_their_host_times(void **state)
{
    (void)state;
    char dir[4200], env_dir[4300];
    snprintf(dir, sizeof dir, "%s/t", g_tmp);
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s", dir);
    const char *env[] = {env_dir, "STUB_NCCL_BLOCK_MS=5000,2000,3000", NULL};
    const char *argv[] = {"block", "3", NULL};
    job_result res;
    st_run(&res, 1, env, argv);
    assert_int_equal(res.status, 0);
    char **paths;
    assert_int_equal(st_list(dir, &paths), 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, 1);

    static const uint64_t slept[] = {5000 * MS, 2000 * MS, 3000 * MS, 0};
    size_t k = 0;
    for (size_t i = 0; i < t.ncalls && k < 4; i++) {
        const cp_rec_call *c = &t.calls[i];
        if (c->op != CP_OP_COMM_INIT && c->op != CP_OP_ALLREDUCE)
            continue;
        assert_int_equal(c->op, k == 0 ? CP_OP_COMM_INIT : CP_OP_ALLREDUCE);
        near(cp_call_host_ns(c), slept[k]);
        k++;
    }
    assert_int_equal(k, 4);
    st_free_trace(&t);

    job_result d;
    const char *dump[] = {"dump", dir, NULL};
    st_run_prog(&d, "collprof", 0, NULL, dump);
    assert_int_equal(d.status, 0);
    near((uint64_t)dumped(d.out, "CommInit", 0), slept[0]);
    near((uint64_t)dumped(d.out, "AllReduce", 0), slept[1]);
    near((uint64_t)dumped(d.out, "AllReduce", 1), slept[2]);
    near((uint64_t)dumped(d.out, "AllReduce", 2), 0);

    /* the report's AllReduce times (the analyzer's 65.5 us steps are inside the slack) */
    const char *report[] = {"report", "--json", dir, NULL};
    static job_result rep;
    st_run_prog(&rep, "collprof", 0, NULL, report);
    assert_int_equal(rep.status, 0);
    near((uint64_t)(json_number(rep.out, "\"time_us_p50\": ") * 1000), slept[1]);
    near((uint64_t)(json_number(rep.out, "\"time_us_p99\": ") * 1000), slept[2]);
    near((uint64_t)(json_number(rep.out, "\"time_us_total\": ") * 1000), slept[1] + slept[2]);
}

/* ---- communicators made and ended for ever ---- */

#define CHURN 30000
#define FRESH 10000            /* past the table's 8192 slots */
#define RSS_SLACK_KB 512       /* the growth allowed from half the churn to its end */
#define GRACE_SLACK 1000       /* comms ended in the grace before exit (10 ms; an aborted one
                                * 1 s): not yet freed */

/* The k-th cycle's comm: its CommInit, its AllReduce, its end, in file order; every comm
 * index new, every AllReduce naming its cycle's comm, whose COMM says its cycle's id. */
typedef struct churn_check {
    uint64_t *ids;      /* comm_index -> comm_id + 1 (0: no COMM yet) */
    size_t nids;
    uint64_t inits, allreduces, ends, bad, unnamed;
    uint32_t cur;       /* the comm_index of the cycle under way */
} churn_check;

static uint64_t churn_id(uint64_t k)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    snprintf(id.internal, sizeof id.internal, "churn-%llu", (unsigned long long)k);
    return cp_trace_hash(&id, sizeof id);
}

static int cc_comm(void *ctx, const cp_rec_comm *rec)
{
    churn_check *x = ctx;
    if (rec->comm_index >= x->nids) {
        size_t n = rec->comm_index + 1024;
        x->ids = realloc(x->ids, n * sizeof *x->ids);
        memset(x->ids + x->nids, 0, (n - x->nids) * sizeof *x->ids);
        x->nids = n;
    }
    x->bad += x->ids[rec->comm_index] != 0; /* an index names one comm a file */
    x->ids[rec->comm_index] = rec->comm_id + 1;
    return 0;
}

static int cc_call(void *ctx, const cp_rec_call *rec)
{
    churn_check *x = ctx;
    if (rec->comm_index == UINT32_MAX) {
        x->unnamed++;
        return 0;
    }
    int known = rec->comm_index < x->nids && x->ids[rec->comm_index] != 0;
    switch (rec->op) {
    case CP_OP_COMM_INIT:
        x->bad += !known || x->ids[rec->comm_index] != churn_id(x->inits) + 1 ||
                  (x->inits > 0 && rec->comm_index <= x->cur);
        x->cur = rec->comm_index;
        x->inits++;
        break;
    case CP_OP_ALLREDUCE:
        x->bad += rec->comm_index != x->cur;
        x->allreduces++;
        break;
    case CP_OP_COMM_DESTROY:
    case CP_OP_COMM_ABORT:
        x->bad += rec->comm_index != x->cur;
        x->ends++;
        break;
    default:
        break;
    }
    return 0;
}

/* `extra`: cycles whose failed destroy was followed by one more AllReduce and destroy. */
static void check_churn_trace(const char *dir, uint64_t cycles, uint64_t extra)
{
    char **paths;
    assert_int_equal(st_list(dir, &paths), 1);
    int status;
    char err[256];
    cp_trace_reader *r = cp_trace_reader_open(paths[0], &status, err, sizeof err);
    cp_trace_dir_free(paths, 1);
    assert_non_null(r);
    churn_check x = {0};
    cp_trace_visitor v = {.ctx = &x, .on_comm = cc_comm, .on_call = cc_call};
    cp_walk_result res;
    cp_trace_walk(r, &v, &res);
    cp_trace_reader_close(r);
    free(x.ids);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.lost_records, 0);
    assert_int_equal(x.unnamed, 0);
    assert_int_equal(x.bad, 0);
    assert_int_equal(x.inits, cycles);
    assert_int_equal(x.allreduces, cycles + extra);
    assert_int_equal(x.ends, cycles + extra);
}

typedef struct census {
    long rss_early, rss_end, reused;
    unsigned live, used, slots, probe;
    unsigned long long freed;
    unsigned named, entries;
    unsigned long long total;
} census;

static census read_census(const char *err)
{
    census c = {-1, -1, -1, 99999, 0, 0, 99999, 0, 0, 0, 0};
    const char *p = strstr(err, "rss_kb ");
    int cycles;
    if (p)
        sscanf(p, "rss_kb %d %ld", &cycles, &c.rss_early);
    if (p && (p = strstr(p + 1, "rss_kb ")) != NULL)
        sscanf(p, "rss_kb %d %ld", &cycles, &c.rss_end);
    if ((p = strstr(err, "reused ")) != NULL)
        sscanf(p, "reused %ld", &c.reused);
    if ((p = strstr(err, "comm table: ")) != NULL)
        sscanf(p, "comm table: %u live, %u of %u slots used, longest probe %u, %llu freed",
               &c.live, &c.used, &c.slots, &c.probe, &c.freed);
    if ((p = strstr(err, "live_named ")) != NULL)
        sscanf(p, "live_named %u %u %llu", &c.named, &c.entries, &c.total);
    return c;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 30,000 comms made, used and ended (every thousandth aborted, one destroy failing and made again),
 * NCCL handing the same address out again: the process's memory and the shim's table stay
 * flat, every comm is freed but those ended in the grace before exit, each call names its own
 * comm (a reused handle its new one, a comm whose destroy failed itself), and the live block
 * names comms far past its 1,024 slots. */
static void churning_comms_leave_memory_flat(void **state)
{
    (void)state;
    char dir[4200], env_dir[4300], cycles[16];
    snprintf(dir, sizeof dir, "%s/t", g_tmp);
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s", dir);
    snprintf(cycles, sizeof cycles, "%d", CHURN);
    /* the 1000th destroy fails: that comm lives on, named by the calls after it */
    const char *env[] = {env_dir, "COLLPROF_DEBUG=trace", "STUB_NCCL_DESTROY_FAILS=1000",
                         NULL};
    const char *argv[] = {"churn", cycles, "1000", NULL};
    static job_result res;
    double t0 = now_s();
    st_run(&res, 1, env, argv);
    double took = now_s() - t0;
    assert_int_equal(res.status, 0);
    assert_non_null(strstr(res.err, "destroy failed "));
    census c = read_census(res.err);
    print_message("churn of %d comms: %.2f s, RSS %ld -> %ld kB, %ld handles reused; "
                  "table %u live, %u slots used, longest probe %u, %llu freed\n",
                  CHURN, took, c.rss_early, c.rss_end, c.reused, c.live, c.used, c.probe,
                  c.freed);
    assert_true(c.rss_early > 0 && c.rss_end > 0);
#ifndef CP_TEST_ASAN_RUNTIME
    /* (AddressSanitizer quarantines what is freed: neither memory nor addresses come back) */
    assert_true(c.rss_end <= c.rss_early + RSS_SLACK_KB);
    assert_true(c.reused > 0); /* the allocator gave addresses back: the case checked */
#endif
    assert_int_equal(c.live, 0);
    assert_true(c.probe >= 1 && c.probe <= 64); /* comm_table.c CP_COMM_PROBES */
    assert_true(c.freed + GRACE_SLACK >= CHURN);
    /* every recent operation is named, though their comms' indexes are past 1,024 */
    assert_int_equal(c.entries, 256);
    assert_true(c.total >= CHURN);
    assert_int_equal(c.named, c.entries);
    check_churn_trace(dir, CHURN, 1);
}

/* 10,000 comms each at an address of its own (more than the table's 8192 slots): no slot
 * runs out, no WARN, every call names its comm, and the table holds none of them at exit. */
static void comms_at_fresh_addresses_never_fill_the_table(void **state)
{
    (void)state;
    char dir[4200], env_dir[4300], cycles[16];
    snprintf(dir, sizeof dir, "%s/t", g_tmp);
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s", dir);
    snprintf(cycles, sizeof cycles, "%d", FRESH);
    const char *env[] = {env_dir, "COLLPROF_DEBUG=trace", "STUB_NCCL_FRESH_COMMS=1", NULL};
    const char *argv[] = {"churn", cycles, NULL};
    static job_result res;
    st_run(&res, 1, env, argv);
    assert_int_equal(res.status, 0);
    census c = read_census(res.err);
    print_message("fresh addresses, %d comms: %u live, %u slots used, longest probe %u, "
                  "%llu freed\n", FRESH, c.live, c.used, c.probe, c.freed);
    assert_null(strstr(res.err, "WARN"));
    assert_int_equal(c.reused, 0);
    assert_int_equal(c.live, 0);
    assert_true(c.probe >= 1 && c.probe <= 64); /* comm_table.c CP_COMM_PROBES */
    check_churn_trace(dir, FRESH, 0);
}

/* ncclCommAbort from another thread releases a call blocked on the comm; the call's wrapper
 * then records with the comm it looked up, which must still be ours (the sanitizer build
 * sees a use after free otherwise): the CALL names the comm. */
static void a_call_released_by_an_abort_records_its_comm(void **state)
{
    (void)state;
    char dir[4200], env_dir[4300];
    snprintf(dir, sizeof dir, "%s/t", g_tmp);
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s", dir);
    /* 600 ms: past the writer's flushes (200 ms) that free what ended long enough ago */
    const char *env[] = {env_dir, "STUB_NCCL_BLOCK_MS=0,600", "STUB_NCCL_FRESH_COMMS=1", NULL};
    const char *argv[] = {"abort-blocked", NULL};
    static job_result res;
    st_run(&res, 1, env, argv);
    assert_int_equal(res.status, 0);
    assert_non_null(strstr(res.out, "ncclCommAbort((ncclComm_t)arg)=0"));
    char **paths;
    assert_int_equal(st_list(dir, &paths), 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, 1);
    int seen = 0;
    for (size_t i = 0; i < t.ncalls; i++)
        if (t.calls[i].op == CP_OP_ALLREDUCE) {
            assert_int_equal(t.calls[i].comm_index, 0);
            seen++;
        }
    assert_int_equal(seen, 1);
    st_free_trace(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(calls_of_seconds_keep_their_host_times, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(churning_comms_leave_memory_flat, setup, teardown),
        cmocka_unit_test_setup_teardown(comms_at_fresh_addresses_never_fill_the_table, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_call_released_by_an_abort_records_its_comm, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
