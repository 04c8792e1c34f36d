/* The analyzer on emulated jobs with injected faults, run under the shim: each fault's
 * culprit is named exactly (straggler on the GPU and on the host, a hang on the world comm
 * and on a split comm, a count / dtype / root mismatch, a rank killed with SIGKILL, two hosts
 * whose wall clocks are 5 ms apart), healthy jobs of every pattern report nothing, and a large
 * AllReduce's busbw agrees with the emulation's own model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <time.h>

#include "analyzer/analyzer.h"
#include "exporters/exporters.h"
#include "tests/exporters/perfetto_check.h"
#include "emu/common/topo.h"
#include "tests/preload/shim_test_util.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A fresh trace folder per job, removed by the next test's run (and at exit). */
static char g_dir[64];

static void clean_dir(void)
{
    if (!g_dir[0])
        return;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(g_dir);
    g_dir[0] = '\0';
}

/* Runs collprof-sim under the shim with env (plus COLLPROF_DIR) and returns its status. */
static int run_sim(const char *const *env, const char *const *argv)
{
    clean_dir();
    snprintf(g_dir, sizeof g_dir, "/tmp/collprof-anemu-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    static char dir_var[96];
    snprintf(dir_var, sizeof dir_var, "COLLPROF_DIR=%s", g_dir);
    const char *all[32];
    size_t n = 0;
    all[n++] = dir_var;
    for (; env && *env && n < 31; env++)
        all[n++] = *env;
    all[n] = NULL;
    static job_result res;
    st_run_prog(&res, "collprof-sim", 1, all, argv);
    if (!WIFEXITED(res.status))
        fprintf(stderr, "collprof-sim died: %s\n", res.err);
    return WIFEXITED(res.status) ? WEXITSTATUS(res.status) : -1;
}

/* What holds on every job, whatever went wrong in it (issue 18): a call's wait never runs
 * past its end; an operation's latest arrival is its last part's; no two Perfetto slices of
 * one stream track partly overlap; a call an abort ended is flagged aborted in the Perfetto
 * slice and the CSV row, and its operation is left out of the op table. */
static void assert_timeline_invariants(const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    size_t aborted_calls = 0, timed_in_ops = 0, refused_calls = 0;
    char *op_aborted = calloc(a->matched.nops + 1, 1);
    for (size_t ri = 0; ri < m->nranks; ri++) {
        const cpa_rank *r = &m->ranks[ri];
        for (size_t ci = 0; ci < r->ncalls; ci++) {
            const cpa_call *c = &r->calls[ci];
            uint32_t oi = cpa_call_op(a, ri, ci);
            if (cpa_call_refused(c)) {
                refused_calls++;
                if (oi != CPA_NO_OP)
                    fail_msg("rank %d call %zu: NCCL refused it, yet it is in an operation",
                             (int)r->rank, ci);
            }
            if (cpa_call_aborted(r, c)) {
                aborted_calls++;
                if (oi != CPA_NO_OP)
                    op_aborted[oi] = 1;
            }
            if (oi == CPA_NO_OP)
                continue;
            uint64_t arrival = cpa_call_arrival_job_ns(a, ri, c), start, end;
            int unfinished;
            cpa_call_span_job_ns(a, ri, c, &start, &end, &unfinished);
            if (arrival > a->timeline.latest_ns[oi])
                fail_msg("rank %d call %zu arrives after its operation's latest arrival",
                         (int)r->rank, ci);
            int64_t wait = cpa_call_wait_ns(a, ri, ci);
            if (a->matched.ops[oi].nparts >= 2 && wait < 0)
                fail_msg("rank %d call %zu: no wait in an operation of %u ranks", (int)r->rank,
                         ci, a->matched.ops[oi].nparts);
            if (c->gpu_timed) {
                timed_in_ops++;
                if (wait > (int64_t)(end - arrival))
                    fail_msg("rank %d call %zu waits %lld ns, longer than its %llu ns from "
                             "arrival to end", (int)r->rank, ci, (long long)wait,
                             (unsigned long long)(end - arrival));
            }
        }
    }
    size_t aborted_ops = 0;
    for (size_t i = 0; i < a->matched.nops; i++)
        aborted_ops += op_aborted[i];
    free(op_aborted);
    assert_int_equal(a->stats.aborted, aborted_ops);
    assert_int_equal(a->refused.total, refused_calls);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(cpx_export_perfetto(f, a), 0);
    fclose(f);
    json_object *doc = pj_parse_strict(buf), *events = NULL;
    free(buf);
    assert_true(json_object_object_get_ex(doc, "traceEvents", &events));
    assert_no_partial_overlap(events);
    size_t flagged = 0, flagged_refused = 0;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        if (!strcmp(pj_str(ev, "ph"), "X") && pj_field(pj_field(ev, "args"), "aborted"))
            flagged++;
        if (!strcmp(pj_str(ev, "ph"), "X") && pj_field(pj_field(ev, "args"), "refused"))
            flagged_refused++;
    }
    json_object_put(doc);
    assert_int_equal(flagged, aborted_calls);
    assert_int_equal(flagged_refused, refused_calls);

    f = open_memstream(&buf, &len);
    assert_int_equal(cpx_export_csv(f, a), 0);
    fclose(f);
    size_t csv_aborted = 0, csv_refused = 0;
    for (const char *p = buf; (p = strstr(p, ",aborted,")); p++)
        csv_aborted++;
    for (const char *p = buf; (p = strstr(p, ",refused,")); p++)
        csv_refused++;
    free(buf);
    assert_int_equal(csv_aborted, aborted_calls);
    assert_int_equal(csv_refused, refused_calls);
    fprintf(stderr, "timeline invariants hold: %zu timed calls in operations, %zu aborted "
                    "calls in %zu operations, %zu refused calls\n", timed_in_ops, aborted_calls,
            aborted_ops, refused_calls);
}

static void analyze(cpa_analysis *a)
{
    char err[512];
    if (cpa_analyze(g_dir, a, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "cpa_analyze: %s\n", err);
        fail();
    }
    assert_timeline_invariants(a);
}

static void show(const cpa_analysis *a)
{
    const cpa_stragglers *s = &a->stragglers;
    fprintf(stderr, "stragglers: judged %llu late %llu threshold %.0f us kind %d\n",
            (unsigned long long)s->judged, (unsigned long long)s->late, s->threshold_us,
            s->kind);
    for (size_t i = 0; i < s->nrows; i++)
        fprintf(stderr, "  rank %d late %llu total %.0f us p50 %.0f us share %.2f\n",
                s->rows[i].rank, (unsigned long long)s->rows[i].late_count,
                s->rows[i].late_us_total, s->rows[i].late_us_p50, s->rows[i].share);
    for (size_t i = 0; i < a->hangs.nrows; i++) {
        const cpa_hang *h = &a->hangs.rows[i];
        fprintf(stderr, "  hang comm %016llx seq %llu %s %s missing", (unsigned long long)h->comm_id,
                (unsigned long long)h->seq, cp_op_name(h->op), cpa_hang_verdict_name(h->verdict));
        for (size_t k = 0; k < h->nmissing; k++)
            fprintf(stderr, " %d", h->missing_ranks[k]);
        fprintf(stderr, " waiting");
        for (size_t k = 0; k < h->nwaiting; k++)
            fprintf(stderr, " %d", h->waiting_ranks[k]);
        fprintf(stderr, " (%s)\n", h->last);
    }
    for (size_t i = 0; i < a->mismatches.nrows; i++)
        fprintf(stderr, "  mismatch seq %llu field %s culprits %zu\n",
                (unsigned long long)a->mismatches.rows[i].seq,
                cpa_field_name(a->mismatches.rows[i].field), a->mismatches.rows[i].nculprits);
    for (size_t d = 0; d < a->clock.ndomains; d++)
        fprintf(stderr, "  clock %s offset %.1f us error %.1f us refined %d\n",
                a->clock.domains[d].hostname, a->clock.domains[d].offset_ns / 1e3,
                a->clock.domains[d].error_ns / 1e3, a->clock.domains[d].refined);
}

/* ---- lateness the machine made ----
 * On two shared cores the scheduler now and then holds a rank's process back for
 * milliseconds (more under the sanitizers, or beside other jobs), and the emulated job's
 * hosts pace it: that rank is then late for real, a straggler the job really had. A late
 * collective is its host's doing when the late rank had not even entered NCCL until half its
 * lateness had passed (its entry at or after the others' median arrival + half the
 * lateness): no GPU time, right or wrong, made it late. So a timing verdict is checked
 * against the lateness that explains it: on a healthy job a verdict must rest on host-made
 * lateness, and none may rest on the rest (a GPU time converted wrong shows there: a clock
 * per communicator made a healthy rank late in 55-67 of 117 collectives under load); an
 * injected straggler must stand out by as much as the others' host-made lateness leaves it. */
typedef struct late_tally {
    size_t judged;           /* complete collectives of two or more ranks */
    size_t late[2];          /* late ones: [0] the late rank's host explains it, [1] it does not */
    size_t rank_in[64], rank_late[2][64];
} late_tally;

static void tally_lateness(const cpa_analysis *a, late_tally *t)
{
    memset(t, 0, sizeof *t);
    const cpa_model *m = a->model;
    for (size_t op = 0; op < a->matched.nops; op++) {
        const cpa_op *o = &a->matched.ops[op];
        if (o->sender >= 0 || !o->complete || o->nparts < 2)
            continue;
        t->judged++;
        int32_t late = a->stragglers.op_late_rank_idx[op];
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *pt = &a->matched.parts[o->first_part + k];
            if (pt->rank_idx >= 64)
                continue;
            t->rank_in[pt->rank_idx]++;
            if ((int32_t)pt->rank_idx != late)
                continue;
            const cpa_call *c = &m->ranks[pt->rank_idx].calls[pt->call_idx];
            uint64_t job_arrival = cpa_call_arrival_job_ns(a, pt->rank_idx, c);
            assert_int_equal(pt->arrival_ns, job_arrival); /* on the job time line */
            double arrival = (double)job_arrival;
            double late_ns = a->stragglers.op_late_us[op] * 1e3;
            double enter = (double)cpa_clock_job_ns(m, &a->clock, pt->rank_idx, c->enter_ns);
            int unexplained = enter < arrival - late_ns / 2;
            t->late[unexplained]++;
            t->rank_late[unexplained][pt->rank_idx]++;
        }
    }
}

/* The analyzer's rules (analyzer.h: at least 3 and half of a rank's own collectives, or half
 * of all) on one kind of lateness alone: would they name somebody? */
static int owes_verdict(const cpa_analysis *a, const late_tally *t, int kind)
{
    for (size_t r = 0; r < a->model->nranks && r < 64; r++)
        if (t->rank_late[kind][r] >= 3 && 2 * t->rank_late[kind][r] >= t->rank_in[r])
            return 1;
    return t->judged >= 10 && 2 * t->late[kind] >= t->judged;
}

/* Other ranks' lateness, as a share of the judged collectives: host-made only (kind 0), or
 * of either kind (kind 2: on a machine loaded past its cores an emulated stream thread starts
 * late too, and a collective another rank was later in is not the straggler's). */
static double others_late_share(const cpa_analysis *a, const late_tally *t, int rank, int kind)
{
    size_t n = 0;
    for (size_t r = 0; r < a->model->nranks && r < 64; r++)
        if (a->model->ranks[r].rank != rank)
            n += t->rank_late[0][r] + (kind == 2 ? t->rank_late[1][r] : 0);
    return t->judged ? (double)n / (double)t->judged : 0;
}

static void print_tally(const late_tally *t)
{
    fprintf(stderr, "  late: %zu of %zu collectives made by the host, %zu not\n", t->late[0],
            t->judged, t->late[1]);
}

/* The injected straggler is named first and persistent; late in nearly every collective it
 * took part in (less what other ranks' host-made lateness took from it), and any other rank
 * named owes it to its host. Returns whether the others were on time (their host-made
 * lateness under a tenth): the size of its lateness can then be checked too. */
static int assert_one_straggler_share(const cpa_analysis *a, int rank, double share);
static int assert_one_straggler(const cpa_analysis *a, int rank)
{
    return assert_one_straggler_share(a, rank, 0.8);
}

/* The same where the injected slowness makes the rank late in only `share` of the judged
 * collectives by design. */
static int assert_one_straggler_share(const cpa_analysis *a, int rank, double share)
{
    late_tally t;
    tally_lateness(a, &t);
    double taken = others_late_share(a, &t, rank, 0);
    double taken_any = others_late_share(a, &t, rank, 2);
    if (a->stragglers.nrows != 1 || a->stragglers.rows[0].rank != rank ||
        a->stragglers.kind != CPA_STRAGGLER_PERSISTENT) {
        show(a);
        print_tally(&t);
    }
    assert_true(a->stragglers.nrows >= 1);
    assert_int_equal(a->stragglers.rows[0].rank, rank);
    assert_int_equal(a->stragglers.kind, CPA_STRAGGLER_PERSISTENT);
    if (!(a->stragglers.rows[0].share > share - taken_any)) {
        print_tally(&t);
        fail_msg("rank %d late in %.2f of its collectives; others were late in %.2f (host: "
                 "%.2f)", rank, a->stragglers.rows[0].share, taken_any, taken);
    }
    for (size_t i = 1; i < a->stragglers.nrows; i++) {
        int r = a->stragglers.rows[i].rank;
        size_t idx = 0;
        while (idx < a->model->nranks && a->model->ranks[idx].rank != r)
            idx++;
        assert_true(idx < 64 && 2 * t.rank_late[0][idx] >= a->stragglers.rows[i].late_count);
    }
    return taken <= 0.1;
}

static void assert_nothing_wrong(const cpa_analysis *a, int stragglers_too)
{
    if ((stragglers_too && a->stragglers.nrows) || a->hangs.nrows || a->mismatches.nrows)
        show(a);
    if (stragglers_too) {
        assert_int_equal(a->stragglers.nrows, 0);
        assert_int_equal(a->stragglers.kind, CPA_STRAGGLER_NONE);
    }
    assert_int_equal(a->hangs.nrows, 0);
    assert_int_equal(a->mismatches.nrows, 0);
}

/* The straggler's cause is `want`; otherwise what its late collectives were put down to. */
static void assert_cause(const cpa_straggler *r, int want)
{
    if (r->cause != want)
        fail_msg("cause %s (host %" PRIu64 ", backlog %" PRIu64 ", collective %" PRIu64
                 "), median host lateness %.0f us", cpa_late_cause_name(r->cause),
                 r->by_cause[1], r->by_cause[2], r->by_cause[3], r->host_late_us_p50);
}

/* A healthy job: no hang, no mismatch; a straggler verdict only where the host made most of
 * the lateness (four fifths: a verdict near the analyzer's limits may rest on a few late
 * collectives of the other kind), and never one that the other lateness alone would owe. */
static void assert_healthy(const cpa_analysis *a)
{
    late_tally t;
    tally_lateness(a, &t);
    int host_made = t.late[0] >= 4 * t.late[1] && t.late[0] >= 3,
        rest_owes = owes_verdict(a, &t, 1);
    if (a->stragglers.nrows || rest_owes)
        print_tally(&t);
    assert_nothing_wrong(a, !host_made);
    assert_false(rest_owes);
}

static void straggler_on_the_gpu(void **state)
{
    (void)state;
    /* 5 ms: the hosts' own spread is noise that moves a whole step at once (each step ends
     * with the streams drained, and who wakes first from that is the scheduler's pick), so
     * the median over ten steps' entries is a median of ten draws: under the sanitizers on
     * two cores it reached 0.7 ms here and past 1 ms on CI, against a 2 ms delay */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_DELAY=5:5"),
                             ARGS("--launch", "8", "--pattern", "ddp", "--steps", "10",
                                  "--scale", "0.01")), 0);
    cpa_analysis a;
    analyze(&a);
    /* 5 ms late: the median lateness says so (the model is exact, timing within µs) */
    if (assert_one_straggler(&a, 5)) {
        const cpa_straggler *r = &a.stragglers.rows[0];
        assert_true(r->late_us_p50 > 4800 && r->late_us_p50 < 5600);
        /* why: its host entered on time, its stream started late (the delay holds the GPU) */
        assert_cause(r, CPA_CAUSE_BACKLOG);
        assert_true(r->gpu_late_us_p50 > 4800 && r->gpu_late_us_p50 < 5600);
        if (!(r->host_late_us_p50 < r->gpu_late_us_p50 / 2))
            fail_msg("the host made %.0f us of the %.0f us lateness (median)",
                     r->host_late_us_p50, r->gpu_late_us_p50);
    }
    assert_nothing_wrong(&a, 0);
    cpa_analysis_free(&a);
}

/* The slow-compute scenario of issue 19 with CUPTI: rank 2's backward kernels run 1.5 times
 * as long on its GPU (its host keeps pace), the analyzer names the rank, GPU backlog, and the
 * kernel: sim_bwd_gemm, not the forward one that ran as long as on the peers. */
static void slow_gpu_compute_names_the_kernel(void **state)
{
    (void)state;
    assert_int_equal(run_sim(ENV("COLLPROF_GPU_TIMING=cupti"),
                             ARGS("--launch", "4", "--pattern", "ddp", "--steps", "4",
                                  "--scale", "0.5", "--gpu-compute", "--slow-compute",
                                  "2:1.5:sim_bwd_gemm")), 0);
    cpa_analysis a;
    analyze(&a);
    show(&a);
    /* Only backward is slowed: per step the first bucket's AllReduce follows 1% of it (a
     * few hundred us late, under the 1 ms threshold) and the set-up Broadcast none, so rank 2
     * is late in 4 x 4 of the 21 collectives (0.76), whatever the machine (the 0.8 of a rank
     * slow throughout held only when another rank happened to be late once) */
    if (assert_one_straggler_share(&a, 2, 0.75)) {
        const cpa_straggler *r = &a.stragglers.rows[0];
        assert_cause(r, CPA_CAUSE_BACKLOG);
        fprintf(stderr, "kernel before: '%s' %.0f us longer (%.0f against %.0f us, %" PRIu64
                        " collectives)\n", r->kernel, r->kernel_longer_us_p50, r->kernel_us_p50,
                r->kernel_peers_us_p50, r->kernel_collectives);
        assert_string_equal(r->kernel, "sim_bwd_gemm");
        assert_true(r->kernel_longer_us_p50 > 1000);
        double ratio = r->kernel_us_p50 / r->kernel_peers_us_p50;
        assert_true(ratio > 1.45 && ratio < 1.55);
        assert_true(r->kernel_collectives * 2 >= r->late_count);
        /* the exports carry it: Perfetto per call, Prometheus per straggler */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(cpx_export_perfetto(f, &a), 0);
        fclose(f);
        assert_non_null(strstr(buf, "\"kernels_before\":\"sim_bwd_gemm "));
        free(buf);
        f = open_memstream(&buf, &len);
        assert_int_equal(cpx_export_prometheus(f, &a), 0);
        fclose(f);
        assert_non_null(strstr(buf, "collprof_straggler_kernel_before_longer_seconds{rank=\"2\","
                                    "kernel=\"sim_bwd_gemm\"}"));
        free(buf);
    }
    cpa_analysis_free(&a);
}

static void straggler_on_the_host(void **state)
{
    (void)state;
    assert_int_equal(run_sim(NULL, ARGS("--launch", "8", "--pattern", "ddp", "--steps", "10",
                                        "--scale", "0.01", "--late", "2:3")), 0);
    cpa_analysis a;
    analyze(&a);
    if (assert_one_straggler(&a, 2)) {
        /* why: its host entered NCCL late (--late sleeps on the host before the call) */
        const cpa_straggler *r = &a.stragglers.rows[0];
        assert_cause(r, CPA_CAUSE_HOST);
        assert_true(r->host_late_us_p50 > 1500);
    }
    assert_nothing_wrong(&a, 0);
    cpa_analysis_free(&a);
}

/* A slow link holds the wire: GPUs 5 and 6 linked at 0.1 % of their speed make the TP
 * AllReduces of ranks 4-7 slow; with one communication stream (--one-stream) each DP
 * ReduceScatter {i, i+4} then starts late on rank i+4, whose host entered in time. Every such
 * late collective is put down to an earlier NCCL operation (the TP comm's AllReduce, 4 ranks)
 * and none to the host. */
static void slow_link_holds_the_next_collective(void **state)
{
    (void)state;
    /* 0.1 %, not 1 %: under the sanitizers beside two busy loops the hosts enqueue 10-45 ms
     * late now and then, and at 1 % the link made DP collectives only ~3 ms late, so the host
     * was as much the cause (11 of 16); at 0.1 % the TP group's backlog is ~100 ms a step */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_SLOW_LINK=5-6:0.001"),
                             ARGS("--launch", "8", "--pattern", "mixed", "--steps", "6",
                                  "--scale", "0.1", "--one-stream")), 0);
    cpa_analysis a;
    analyze(&a);
    const cpa_stragglers *st = &a.stragglers;
    size_t late = 0, held = 0;
    for (size_t i = 0; i < a.matched.nops; i++) {
        int32_t r = st->op_late_rank_idx[i];
        /* from step 1 on (3 DP calls a step): step 0's start is the hosts' own */
        if (r < 0 || a.model->ranks[r].rank < 4 || a.matched.ops[i].nparts != 2 ||
            a.matched.ops[i].seq < 3)
            continue;
        late++; /* a DP collective, late on the slow TP group's side */
        if (st->op_cause[i] == CPA_CAUSE_COLLECTIVE)
            held++;
        else
            fprintf(stderr, "DP op %zu late on rank %d: cause %s, lateness %.0f us, host %.0f us\n",
                    i, (int)a.model->ranks[r].rank, cpa_late_cause_name(st->op_cause[i]),
                    (double)st->op_late_us[i], (double)st->op_host_late_us[i]);
    }
    fprintf(stderr, "%zu DP collectives late on ranks 4-7, %zu put down to an earlier NCCL "
                    "operation\n", late, held);
    /* the first ReduceScatter of each DP pair in steps 1-5 (one step may be spared) */
    assert_true(late >= 4 * 4);
    assert_true(held * 4 >= late * 3);
    cpa_analysis_free(&a);
}

static void healthy_patterns_report_nothing(void **state)
{
    (void)state;
    static const char *const patterns[] = {"ddp", "fsdp", "tp", "pp", "moe", "mixed"};
    /* four ranks: eight emulated ranks on two cores are late for real, from the scheduler */
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        assert_int_equal(run_sim(NULL, ARGS("--launch", "4", "--pattern", patterns[i],
                                            "--steps", "3", "--scale", "0.005")), 0);
        cpa_analysis a;
        analyze(&a);
        fprintf(stderr, "%s: %llu collectives judged\n", patterns[i],
                (unsigned long long)a.stragglers.judged);
        assert_true(a.matched.nops > 0);
        assert_healthy(&a);
        cpa_analysis_free(&a);
    }
}

static const cpa_hang *only_hang_of_size(const cpa_analysis *a, int nranks)
{
    for (size_t i = 0; i < a->hangs.nrows; i++) {
        const cpa_hang *h = &a->hangs.rows[i];
        if ((int)(h->nmissing + h->nwaiting) == nranks)
            return h;
    }
    return NULL;
}

static void hang_on_the_world_comm(void **state)
{
    (void)state;
    /* ddp: Broadcast (seq 0), then 5 AllReduce per step: rank 3 never starts seq 5 */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_HANG=3:5", "COLLPROF_HANG_S=1"),
                             ARGS("--launch", "8", "--pattern", "ddp", "--steps", "3",
                                  "--scale", "0.001", "--timeout", "3")), 6);
    cpa_analysis a;
    analyze(&a);
    show(&a);
    assert_true(a.hangs.nrows >= 1);
    const cpa_hang *h = &a.hangs.rows[0];
    assert_int_equal(h->verdict, CPA_HANG_RANK_NOT_JOINED);
    assert_int_equal(h->seq, 5);
    assert_int_equal(h->op, CP_OP_ALLREDUCE);
    assert_int_equal(h->nmissing, 1);
    assert_int_equal(h->missing_ranks[0], 3);
    assert_int_equal(h->nwaiting, 7);
    for (size_t k = 0; k < h->nwaiting; k++)
        assert_int_not_equal(h->waiting_ranks[k], 3);
    cpa_analysis_free(&a);
}

static void hang_on_a_split_comm(void **state)
{
    (void)state;
    /* mixed, 8 ranks on one host: TP comms of 4 (ranks 0-3, 4-7), 16 AllReduce a step each;
     * rank 6 never starts its TP comm's collective 20 (step 1), while its world and DP
     * comms have not reached a 20th */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_HANG=6:20", "COLLPROF_HANG_S=1"),
                             ARGS("--launch", "8", "--pattern", "mixed", "--steps", "3",
                                  "--scale", "0.001", "--timeout", "3")), 6);
    cpa_analysis a;
    analyze(&a);
    show(&a);
    assert_true(a.hangs.nrows >= 1);
    const cpa_hang *h = &a.hangs.rows[0];
    assert_int_equal(h->verdict, CPA_HANG_RANK_NOT_JOINED);
    assert_int_equal(h->seq, 20);
    assert_int_equal(h->nmissing, 1);
    assert_int_equal(h->missing_ranks[0], 6);
    assert_int_equal(h->nwaiting, 3);
    assert_int_equal(h->waiting_ranks[0], 4);
    assert_int_equal(h->waiting_ranks[1], 5);
    assert_int_equal(h->waiting_ranks[2], 7);
    /* the TP comm, not the world */
    const cpa_hang *w = only_hang_of_size(&a, 8);
    assert_true(w == NULL || w != h);
    cpa_analysis_free(&a);
}

static void mismatch_case(const char *rule, int field, int64_t culprit_value, int64_t others)
{
    assert_int_equal(run_sim(NULL, ARGS("--launch", "8", "--pattern", "ddp", "--steps", "2",
                                        "--scale", "0.001", "--timeout", "5", "--mismatch",
                                        rule)), 0);
    cpa_analysis a;
    analyze(&a);
    if (a.mismatches.nrows != 1)
        show(&a);
    assert_int_equal(a.mismatches.nrows, 1);
    const cpa_mismatch *x = &a.mismatches.rows[0];
    assert_int_equal(x->field, field);
    assert_int_equal(x->nculprits, 1);
    assert_int_equal(x->culprit_ranks[0], 3);
    assert_int_equal(x->nvalues, 8);
    int64_t first_other = -1;
    for (size_t i = 0; i < x->nvalues; i++) {
        if (x->values[i].rank == 3) {
            assert_int_equal(x->values[i].value, culprit_value);
        } else {
            if (first_other < 0)
                first_other = x->values[i].value;
            /* the majority agrees, on the value the job meant (when the test knows it) */
            assert_int_equal(x->values[i].value, others >= 0 ? others : first_other);
            assert_int_not_equal(x->values[i].value, culprit_value);
        }
        /* where each side called from: collprof-sim's own frames */
        assert_non_null(x->values[i].site);
    }
    cpa_analysis_free(&a);
}

static void mismatches_name_the_culprit(void **state)
{
    (void)state;
    /* ddp: seq 2 is an fp32 AllReduce of a gradient bucket; seq 0 the Broadcast from rank 0 */
    mismatch_case("3:2:count=7", CPA_FIELD_COUNT, 7, -1);
    mismatch_case("3:2:dtype=float16", CPA_FIELD_DTYPE, 6 /* ncclFloat16 */, 7 /* ncclFloat32 */);
    mismatch_case("3:0:root=2", CPA_FIELD_ROOT, 2, 0);
}

/* The pid in a rank's trace file name: rank00004-host-PID.cptrace. */
static pid_t pid_of_rank(int rank)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "rank%05d-", rank);
    pid_t pid = 0;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            const char *dash = strrchr(e->d_name, '-');
            pid = dash ? (pid_t)atoi(dash + 1) : 0;
        }
    if (d)
        closedir(d);
    return pid;
}

/* A call NCCL refuses (rank 3's Broadcast with root 99: ncclInvalidArgument) enqueues
 * nothing; rank 3 then leaves, and the others' calls fail with ncclRemoteError. The analysis
 * counts both by result, keeps them out of every operation, and the hang names the refusal
 * as what rank 3 last did. */
static void refused_call_is_named(void **state)
{
    (void)state;
    run_sim(NULL, ARGS("--launch", "8", "--pattern", "ddp", "--steps", "2", "--scale", "0.001",
                       "--timeout", "5", "--mismatch", "3:0:root=99"));
    cpa_analysis a;
    analyze(&a);
    assert_int_equal(a.refused.by_result[4], 1); /* ncclInvalidArgument */
    assert_int_equal(a.model->ranks[a.refused.first_rank_idx[4]].rank, 3);
    const cpa_call *c = &a.model->ranks[a.refused.first_rank_idx[4]].calls[a.refused.first_call[4]];
    assert_int_equal(c->op, CP_OP_BROADCAST);
    assert_int_equal(c->peer, 99);
    int named = 0;
    for (size_t i = 0; i < a.hangs.nrows; i++)
        if (strstr(a.hangs.rows[i].last, "rank 3 last called Broadcast root 99") &&
            strstr(a.hangs.rows[i].last, "which NCCL refused (ncclInvalidArgument)"))
            named = 1;
    if (!named)
        show(&a);
    assert_true(named);
    cpa_analysis_free(&a);
}

static void killed_rank_is_named(void **state)
{
    (void)state;
    clean_dir();
    snprintf(g_dir, sizeof g_dir, "/tmp/collprof-anemu-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    char dir_var[96];
    snprintf(dir_var, sizeof dir_var, "COLLPROF_DIR=%s", g_dir);
    fflush(NULL);
    pid_t job = fork();
    if (job == 0) {
        static job_result res;
        st_run_prog(&res, "collprof-sim", 1, ENV(dir_var, "COLLPROF_FLUSH_MS=20"),
                    ARGS("--launch", "8", "--pattern", "ddp", "--steps", "100000", "--scale",
                         "0.01", "--timeout", "3"));
        _exit(WIFEXITED(res.status) ? WEXITSTATUS(res.status) : 99);
    }
    /* let it run a while, then kill rank 4 outright */
    pid_t victim = 0;
    for (int i = 0; i < 200 && !victim; i++) {
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        victim = pid_of_rank(4);
    }
    assert_true(victim > 0);
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    assert_int_equal(kill(victim, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(job, &status, 0), job);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    cpa_analysis a;
    analyze(&a);
    show(&a);
    assert_true(a.hangs.nrows >= 1);
    const cpa_hang *h = &a.hangs.rows[0];
    assert_int_equal(h->verdict, CPA_HANG_RANK_EXITED);
    assert_int_equal(h->nmissing, 1);
    assert_int_equal(h->missing_ranks[0], 4);
    assert_int_equal(h->nwaiting, 7);
    cpa_analysis_free(&a);
}

static void clock_offset_between_hosts(void **state)
{
    (void)state;
    /* host 1's wall clock 5 ms ahead: anchors alone would make ranks 4-7 look 5 ms late */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_HOSTS=2", "COLLPROF_EMU_CLOCK_OFFSET_US=1:5000"),
                             ARGS("--launch", "8", "--pattern", "ddp", "--steps", "10",
                                  "--scale", "0.01")), 0);
    cpa_analysis a;
    analyze(&a);
    if (a.clock.ndomains != 2 || !a.clock.aligned)
        show(&a);
    assert_int_equal(a.clock.ndomains, 2);
    assert_true(a.clock.aligned);
    /* the refinement found the 5 ms, to well under the lateness it will call */
    double off = a.clock.domains[1].offset_ns / 1e3;
    assert_true(off > -5100 && off < -4900);
    assert_true(a.clock.error_us < 100);
    assert_healthy(&a);
    cpa_analysis_free(&a);

    /* and a real straggler on the offset host is still found */
    assert_int_equal(run_sim(ENV("COLLPROF_EMU_HOSTS=2", "COLLPROF_EMU_CLOCK_OFFSET_US=1:5000",
                                 "COLLPROF_EMU_DELAY=6:2"),
                             ARGS("--launch", "8", "--pattern", "ddp", "--steps", "10",
                                  "--scale", "0.01")), 0);
    analyze(&a);
    assert_one_straggler(&a, 6);
    cpa_analysis_free(&a);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void busbw_follows_the_model(void **state)
{
    (void)state;
    /* ddp at full size: AllReduce buckets of 25 MiB (three) and 21.5 MiB, the [16, 32) MiB row */
    assert_int_equal(run_sim(NULL, ARGS("--launch", "8", "--pattern", "ddp", "--steps", "2",
                                        "--scale", "1")), 0);
    cpa_analysis a;
    analyze(&a);
    cpemu_topo topo;
    char err[256];
    assert_int_equal(cpemu_topo_load(&topo, err, sizeof err), 0);
    cpemu_place places[8];
    for (int i = 0; i < 8; i++)
        places[i] = (cpemu_place){0, i};
    /* Per operation, the busbw the model gives and the one the trace gives (the op's time:
     * the last arrival's GPU duration, as stats.c takes it); medians of both, robust to the
     * odd operation a loaded 2-core machine delays between event and kernel. */
    double model[16], seen[16];
    size_t n = 0;
    for (size_t i = 0; i < a.matched.nops && n < 16; i++) {
        const cpa_op *o = &a.matched.ops[i];
        const cpa_part *p = &a.matched.parts[o->first_part];
        const cpa_call *c = &a.model->ranks[p->rank_idx].calls[p->call_idx];
        uint64_t s = cpa_op_bytes(o->op, c->count, c->dtype, 8);
        if (o->op != CP_OP_ALLREDUCE || s < (16u << 20) || s >= (32u << 20))
            continue;
        double t = -1;
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *q = &a.matched.parts[o->first_part + k];
            const cpa_call *qc = &a.model->ranks[q->rank_idx].calls[q->call_idx];
            assert_true(qc->gpu_timed);
            double d = (double)(qc->gpu_end_ns - qc->gpu_start_ns);
            if (t < 0 || d < t)
                t = d;
        }
        double bus = (double)s * cpa_busbw_factor(o->op, 8);
        model[n] = bus / cpemu_model_ns(&topo, o->op, s, places, 8);
        seen[n++] = bus / t;
    }
    assert_int_equal(n, 8);
    qsort(model, n, sizeof *model, cmp_double);
    qsort(seen, n, sizeof *seen, cmp_double);
    double want = model[n / 2], got = seen[n / 2];
    /* the report's rows keep the two sizes apart: 3 x 2 steps of 25 MiB, 2 of the last
     * bucket (what is left of the model's parameters, about 21.5 MiB) */
    const cpa_stat *row = NULL, *other = NULL;
    for (size_t i = 0; i < a.stats.nrows; i++) {
        const cpa_stat *r = &a.stats.rows[i];
        if (r->op == CP_OP_ALLREDUCE && r->nranks == 8 && r->size == (25u << 20))
            row = r;
        if (r->op == CP_OP_ALLREDUCE && r->nranks == 8 && r->size >= (16u << 20) &&
            r->size < (25u << 20))
            other = r;
    }
    assert_non_null(row);
    assert_non_null(other);
    assert_int_equal(row->ops, 6);
    assert_int_equal(other->ops, 2);
    fprintf(stderr, "AllReduce [16, 32) MiB: busbw median %.1f GB/s (report's 25 MiB row %.1f), "
            "model %.1f GB/s\n", got, row->busbw_gbps, want);
#ifdef CP_TEST_ASAN_RUNTIME
    /* Under the sanitizers the emulation's reductions run 2-3x slower on the CPU, and the
     * host's lag between a start event and the kernel shows in event times (CI: -15.2 %).
     * The normal build holds the 15 %; this one checks only that busbw is sane. */
    const double tol = 0.30;
#else
    const double tol = 0.15;
#endif
    assert_true(got > want * (1 - tol) && got < want * (1 + tol));
    assert_int_equal(row->calls, 6 * 8);
    cpa_analysis_free(&a);
}

static int teardown(void **state)
{
    (void)state;
    clean_dir();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(straggler_on_the_gpu, teardown),
        cmocka_unit_test_teardown(straggler_on_the_host, teardown),
        cmocka_unit_test_teardown(slow_gpu_compute_names_the_kernel, teardown),
        cmocka_unit_test_teardown(slow_link_holds_the_next_collective, teardown),
        cmocka_unit_test_teardown(healthy_patterns_report_nothing, teardown),
        cmocka_unit_test_teardown(hang_on_the_world_comm, teardown),
        cmocka_unit_test_teardown(hang_on_a_split_comm, teardown),
        cmocka_unit_test_teardown(mismatches_name_the_culprit, teardown),
        cmocka_unit_test_teardown(refused_call_is_named, teardown),
        cmocka_unit_test_teardown(killed_rank_is_named, teardown),
        cmocka_unit_test_teardown(clock_offset_between_hosts, teardown),
        cmocka_unit_test_teardown(busbw_follows_the_model, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
