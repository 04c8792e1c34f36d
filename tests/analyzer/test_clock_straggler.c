/* Clock alignment and stragglers over synthetic traces whose true times are chosen here.
 *
 * Every job is written in "true" time t (ns since the job began). Each host turns it into its
 * own CLOCK_MONOTONIC (a boot time of its own, optionally running fast) and its own wall clock
 * (off by a chosen error); each rank's GPU times may be off by an error of their own (a bad
 * reference event in the shim). The analyzer sees only those local readings, so what it finds
 * (offsets, drift, the late rank, by how much) is checked against the truth, not against its
 * own arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"
#include "common/trace_writer.h"
#include "tests/common/test_trace_util.h"

#define MAXR 16
#define MAXC 8
#define EPOCH 1700000000000000000ull
#define US 1000.0
#define MS 1000000.0
#define LAUNCH_NS 5000.0 /* host entry to GPU start on an idle stream */
#define F32 7

typedef struct thost {
    const char *name;
    uint64_t boot_ns;    /* its monotonic clock reads boot_ns at true time 0 */
    int64_t wall_err_ns; /* its wall clock reads true + wall_err_ns */
    double drift;        /* its monotonic clock runs (1 + drift) fast */
    int clock_at_end;    /* writes a CLOCK record when it closes (the shim does, at exit) */
} thost;

typedef struct tjob {
    char *dir;
    int n;
    const thost *host[MAXR];
    cp_trace_writer *w[MAXR];
    double gerr[MAXR];      /* ns added to that rank's GPU times ... */
    double gerr_late[MAXR]; /* ... or this from true time gerr_switch on (a new reference) */
    double gerr_switch;
    uint64_t seq[MAXC];
    int comm_rank[MAXC][MAXR]; /* -1 not a member */
} tjob;

static uint64_t mono_of(const thost *h, double t)
{
    return h->boot_ns + (uint64_t)llround(t * (1.0 + h->drift));
}

static uint64_t gpu_of(const tjob *j, int r, double t)
{
    double e = j->gerr_switch > 0 && t >= j->gerr_switch ? j->gerr_late[r] : j->gerr[r];
    return mono_of(j->host[r], t + e);
}

/* Deterministic jitter in [-1, 1). */
static double jit(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

static void job_open(tjob *j, int n, const thost *hosts, const int *host_of)
{
    memset(j, 0, sizeof *j);
    memset(j->comm_rank, 0xff, sizeof j->comm_rank);
    j->dir = tt_tmpdir();
    j->n = n;
    for (int r = 0; r < n; r++) {
        const thost *h = &hosts[host_of[r]];
        j->host[r] = h;
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/rank%02d%s", j->dir, r, CP_TRACE_FILE_SUFFIX);
        cp_file_header fh;
        cp_file_header_init(&fh);
        fh.rank = r;
        fh.world_size = n;
        fh.pid = 100 + (uint32_t)r;
        fh.flags = CP_FILE_GPU_TIMING;
        fh.mono_anchor_ns = mono_of(h, 0);
        fh.realtime_anchor_ns = (uint64_t)((int64_t)EPOCH + h->wall_err_ns);
        snprintf(fh.hostname, sizeof fh.hostname, "%s", h->name);
        j->w[r] = cp_trace_writer_open(path, &fh, 0, err, sizeof err);
        if (!j->w[r])
            fail_msg("%s", err);
    }
}

static void job_comm(tjob *j, uint32_t index, uint64_t id, const int *members, int nm)
{
    for (int k = 0; k < nm; k++) {
        cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                         .nranks = nm, .rank = k, .cuda_dev = -1, .origin = CP_COMM_INIT_RANK};
        assert_int_equal(cp_trace_writer_append(j->w[members[k]], &c), 0);
        j->comm_rank[index][members[k]] = k;
    }
}

/* One collective of comm `index`: member k arrives at true time arrive[k] (its GPU start,
 * or its host entry when not timed) and every member's GPU ends at end[k] (NULL: all at
 * end_all). */
static void job_coll(tjob *j, uint32_t index, const int *members, int nm, uint8_t op,
                     const double *arrive, const double *end, double end_all, int timed)
{
    uint64_t seq = j->seq[index]++;
    for (int k = 0; k < nm; k++) {
        int r = members[k];
        const thost *h = j->host[r];
        double e = end ? end[k] : end_all;
        double enter = timed ? arrive[k] - LAUNCH_NS : arrive[k];
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = F32,
                         .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE,
                         .flags = timed ? CP_CALL_TIMED : 0, .comm_index = index,
                         .site_index = UINT32_MAX, .seq = seq, .count = 1024, .stream = 1,
                         .enter_ns = mono_of(h, enter),
                         .host_ns = timed ? 3000 : (uint32_t)(e - arrive[k]),
                         .peer = op == CP_OP_BROADCAST ? 0 : -1};
        assert_int_equal(cp_trace_writer_append(j->w[r], &c), 0);
        if (!timed)
            continue;
        cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = index, .seq = seq,
                         .gpu_start_ns = gpu_of(j, r, arrive[k]), .gpu_end_ns = gpu_of(j, r, e),
                         .peer = c.peer, .op = op, .timing = CP_TIMING_EVENTS};
        assert_int_equal(cp_trace_writer_append(j->w[r], &d), 0);
    }
}

static void job_close(tjob *j, double t_end)
{
    for (int r = 0; r < j->n; r++) {
        const thost *h = j->host[r];
        if (h->clock_at_end) {
            cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = mono_of(h, t_end),
                              .realtime_ns = (uint64_t)((int64_t)EPOCH + h->wall_err_ns +
                                                        (int64_t)llround(t_end))};
            assert_int_equal(cp_trace_writer_append(j->w[r], &k), 0);
        }
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0, .at_ns = mono_of(h, t_end)};
        assert_int_equal(cp_trace_writer_append(j->w[r], &e), 0);
        assert_int_equal(cp_trace_writer_close(j->w[r]), 0);
    }
}

/* Only the stages under test: loading, matching, clocks, stragglers. */
typedef struct res {
    cpa_model *m;
    cpa_matched mt;
    cpa_clock c;
    cpa_stragglers s;
} res;

static void analyze(tjob *j, res *x)
{
    char err[256] = "";
    memset(x, 0, sizeof *x);
    if (cpa_model_load(j->dir, &x->m, err, sizeof err) ||
        cpa_match(x->m, &x->mt, err, sizeof err) ||
        cpa_clock_align(x->m, &x->mt, &x->c, err, sizeof err) ||
        cpa_stragglers_compute(x->m, &x->mt, &x->c, &x->s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(x->m->nwarnings, 0);
}

static void res_free(res *x)
{
    cpa_stragglers_free(&x->s);
    cpa_clock_free(&x->c);
    cpa_matched_free(&x->mt);
    cpa_model_free(x->m);
}

static void job_free(tjob *j)
{
    tt_rmtree(j->dir);
    free(j->dir);
}

/* The job time line is the reference host's wall clock: true time + EPOCH + its error. */
static void assert_job_time(const res *x, const tjob *j, int r, double t, double tol_ns)
{
    /* epochs in ns differ by less than a double can tell (256 ns): subtract as integers */
    uint64_t got = cpa_clock_job_ns(x->m, &x->c, (size_t)r, mono_of(j->host[r], t));
    double off = (double)(int64_t)(got - EPOCH) - (double)j->host[0]->wall_err_ns - t;
    if (fabs(off) > tol_ns + 0.5)
        fail_msg("rank %d at %.0f ns: job time off by %.0f ns", r, t, off);
}

static void assert_no_straggler(const res *x)
{
    if (x->s.nrows)
        fail_msg("rank %d called a straggler (%llu late)", x->s.rows[0].rank,
                 (unsigned long long)x->s.rows[0].late_count);
    assert_int_equal(x->s.kind, CPA_STRAGGLER_NONE);
}

static const int all8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/* ---- clocks ---- */

static void one_host_no_offset(void **state)
{
    (void)state;
    static const thost h[] = {{"node-a", 5000000000000ull, 0, 0, 1}};
    static const int host_of[4] = {0, 0, 0, 0};
    tjob j;
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0xa11, all8, 4);
    uint64_t s = 1;
    for (int i = 0; i < 50; i++) {
        /* rank 0 is always 1.5 ms early: the others are not late for that */
        double t = 1 * MS + i * 2 * MS, arr[4];
        for (int k = 0; k < 4; k++)
            arr[k] = t + 20 * US * jit(&s) - (k == 0 ? 1.5 * MS : 0);
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 500 * US, 1);
    }
    job_close(&j, 120 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.c.ndomains, 1);
    assert_true(x.c.aligned);
    assert_true(x.c.error_us == 0);
    assert_true(x.c.domains[0].offset_ns == 0 && x.c.domains[0].drift == 0);
    assert_string_equal(x.c.domains[0].hostname, "node-a");
    for (int r = 0; r < 4; r++) {
        assert_job_time(&x, &j, r, 7 * MS, 0);
        /* GPU times: good references, so only the launch latency of the tightest call */
        uint64_t g = mono_of(h, 33 * MS);
        double corr = (double)(int64_t)(cpa_clock_gpu_job_ns(x.m, &x.c, (size_t)r, g) -
                                        cpa_clock_job_ns(x.m, &x.c, (size_t)r, g));
        if (fabs(corr + LAUNCH_NS) > 1)
            fail_msg("rank %d: GPU correction %.0f ns", r, corr);
    }
    assert_int_equal(x.s.judged, 50);
    assert_int_equal(x.s.late, 0);
    assert_true(x.s.threshold_us == CPA_LATE_MIN_US);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* Two hosts whose wall clocks are 5 ms apart: anchors alone put host b's ranks 5 ms late. */
static void write_two_hosts(tjob *j, int late_rank, double late_ns)
{
    static const thost h[] = {{"node-a", 5000000000000ull, 0, 0, 1},
                              {"node-b", 9100000000000ull, 5000000, 0, 1}};
    static const int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    job_open(j, 8, h, host_of);
    job_comm(j, 0, 0xb22, all8, 8);
    uint64_t s = 2;
    for (int i = 0; i < 100; i++) {
        double t = 1 * MS + i * 3 * MS, arr[8];
        for (int k = 0; k < 8; k++)
            arr[k] = t + 20 * US * jit(&s) + (k == late_rank ? late_ns : 0);
        job_coll(j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + late_ns + 400 * US, 1);
    }
    job_close(j, 400 * MS);
}

static void two_hosts_wall_clocks_5ms_apart(void **state)
{
    (void)state;
    tjob j;
    res x;
    write_two_hosts(&j, -1, 0);
    analyze(&j, &x);
    assert_int_equal(x.c.ndomains, 2);
    assert_string_equal(x.c.domains[1].hostname, "node-b");
    assert_int_equal(x.c.rank_domain[5], 1);
    assert_true(x.c.aligned && x.c.domains[1].refined);
    assert_true(fabs(x.c.domains[1].offset_ns + 5 * MS) < 2 * US);
    assert_true(x.c.domains[1].drift == 0); /* 0.3 s of trace: too short to weigh a drift */
    assert_int_equal(x.c.domains[1].samples, 100);
    assert_true(x.c.error_us < 2);
    for (int r = 0; r < 8; r++)
        assert_job_time(&x, &j, r, 150 * MS, 2 * US);
    assert_int_equal(x.s.judged, 100);
    assert_int_equal(x.s.late, 0);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);

    /* a real 2 ms straggler on the offset host is still found, and by how much */
    write_two_hosts(&j, 5, 2 * MS);
    analyze(&j, &x);
    assert_true(fabs(x.c.domains[1].offset_ns + 5 * MS) < 2 * US);
    assert_int_equal(x.s.nrows, 1);
    assert_int_equal(x.s.rows[0].rank, 5);
    assert_int_equal(x.s.rows[0].late_count, 100);
    assert_true(x.s.rows[0].share == 1.0);
    assert_true(fabs(x.s.rows[0].late_us_p50 - 2000) < 30);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_PERSISTENT);
    res_free(&x);
    job_free(&j);
}

/* Host c shares collectives only with host b: its offset is found through b's. */
static void three_hosts_chained(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1},
                              {"b", 2000000000000ull, 3000000, 0, 1},
                              {"c", 3000000000000ull, -7000000, 0, 1}};
    static const int host_of[6] = {0, 0, 1, 1, 2, 2};
    static const int ab[4] = {0, 1, 2, 3}, bc[4] = {2, 3, 4, 5};
    tjob j;
    job_open(&j, 6, h, host_of);
    job_comm(&j, 0, 0xab, ab, 4);
    job_comm(&j, 1, 0xbc, bc, 4);
    uint64_t s = 3;
    for (int i = 0; i < 40; i++) {
        double t = 1 * MS + i * 4 * MS, arr[4];
        for (int k = 0; k < 4; k++)
            arr[k] = t + 10 * US * jit(&s);
        job_coll(&j, 0, ab, 4, CP_OP_ALLGATHER, arr, NULL, t + 300 * US, 1);
        for (int k = 0; k < 4; k++)
            arr[k] = t + 2 * MS + 10 * US * jit(&s);
        job_coll(&j, 1, bc, 4, CP_OP_REDUCESCATTER, arr, NULL, t + 2.3 * MS, 1);
    }
    job_close(&j, 200 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.c.ndomains, 3);
    assert_true(x.c.aligned);
    assert_true(x.c.domains[2].refined);
    assert_true(fabs(x.c.domains[1].offset_ns + 3 * MS) < 2 * US);
    assert_true(fabs(x.c.domains[2].offset_ns - 7 * MS) < 2 * US);
    assert_int_equal(x.c.domains[2].samples, 40);
    assert_int_equal(x.c.domains[1].samples, 80);
    for (int r = 0; r < 6; r++)
        assert_job_time(&x, &j, r, 100 * MS, 2 * US);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* 200 s, host b's monotonic clock 20 ppm fast and no anchor after the header (no CLOCK
 * record: killed ranks write none): its offset moves by 4 ms over the trace. */
static void drift_over_a_long_trace(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 0},
                              {"b", 2000000000000ull, 1500000, 20e-6, 0}};
    static const int host_of[4] = {0, 0, 1, 1};
    tjob j;
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0xd1, all8, 4);
    uint64_t s = 4;
    for (int i = 0; i < 400; i++) {
        double t = 0.1e9 + i * 0.5e9, arr[4];
        for (int k = 0; k < 4; k++)
            arr[k] = t + 20 * US * jit(&s);
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 200 * US, 1);
    }
    job_close(&j, 200.5e9);
    res x;
    analyze(&j, &x);
    assert_true(x.c.aligned);
    assert_true(x.c.domains[0].drift == 0);
    /* job = local + anchor + offset + drift * (local - t0): -20 ppm of local time, about */
    assert_true(fabs(x.c.domains[1].drift + 20e-6 / (1 + 20e-6)) < 0.05e-6);
    assert_true(x.c.error_us < 2);
    for (int r = 0; r < 4; r++) {
        assert_job_time(&x, &j, r, 1e9, 3 * US);
        assert_job_time(&x, &j, r, 199e9, 3 * US);
    }
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* No GPU-timed blocking collective spans the hosts (host-only AllReduces, GPU-timed
 * Broadcasts, whose ends are not simultaneous): the anchors are all there is. */
static void write_anchor_only(tjob *j, double late_ns)
{
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1},
                              {"b", 2000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    job_open(j, 8, h, host_of);
    job_comm(j, 0, 0xe1, all8, 8);
    uint64_t s = 5;
    for (int i = 0; i < 30; i++) {
        double t = 1 * MS + i * 10 * MS, arr[8], end[8];
        for (int k = 0; k < 8; k++)
            arr[k] = t + 20 * US * jit(&s) + (k == 5 ? late_ns : 0);
        job_coll(j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + late_ns + 300 * US, 0);
        for (int k = 0; k < 8; k++) {
            arr[k] = t + 6 * MS + 20 * US * jit(&s);
            end[k] = t + 6.2 * MS + k * 50 * US;
        }
        if (i % 3 == 0)
            job_coll(j, 0, all8, 8, CP_OP_BROADCAST, arr, end, 0, 1);
    }
    job_close(j, 400 * MS);
}

static void anchors_only_when_no_gpu_timed_blocking_collective(void **state)
{
    (void)state;
    tjob j;
    res x;
    write_anchor_only(&j, 2.5 * MS);
    analyze(&j, &x);
    assert_int_equal(x.c.ndomains, 2);
    assert_false(x.c.aligned);
    assert_false(x.c.domains[1].refined);
    assert_true(x.c.domains[1].offset_ns == 0);
    assert_int_equal(x.c.domains[1].samples, 0);
    assert_true(x.c.error_us == 1000);
    /* 2.5 ms across hosts is under 4 x the anchors' 1 ms: not called */
    assert_true(x.s.threshold_us == 4000);
    assert_int_equal(x.s.judged, 40);
    assert_int_equal(x.s.late, 0);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);

    /* 5 ms is called */
    write_anchor_only(&j, 5 * MS);
    analyze(&j, &x);
    assert_int_equal(x.s.late, 30);
    assert_int_equal(x.s.nrows, 1);
    assert_int_equal(x.s.rows[0].rank, 5);
    res_free(&x);
    job_free(&j);
}

/* Host b's ends stray by up to 0.6 ms from a's (a noisy clock, as if refined badly): the
 * clock error says so, and a 1.5 ms lateness across the hosts is not called. */
static void lateness_below_the_clock_error_is_not_called(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1},
                              {"b", 2000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    tjob j;
    job_open(&j, 8, h, host_of);
    job_comm(&j, 0, 0xf1, all8, 8);
    uint64_t s = 6;
    for (int i = 0; i < 100; i++) {
        double t = 1 * MS + i * 5 * MS, arr[8], end[8];
        double noise = 600 * US * jit(&s);
        for (int k = 0; k < 8; k++) {
            arr[k] = t + 10 * US * jit(&s) + (k == 5 ? 1.5 * MS : 0) + (k >= 4 ? noise : 0);
            end[k] = t + 1.9 * MS + (k >= 4 ? noise : 0);
        }
        job_coll(&j, 0, all8, 8, CP_OP_ALLREDUCE, arr, end, 0, 1);
    }
    job_close(&j, 600 * MS);
    res x;
    analyze(&j, &x);
    assert_true(x.c.aligned);
    if (!(x.c.error_us > 400 && x.c.error_us < 900))
        fail_msg("clock error %.0f us", x.c.error_us);
    assert_true(x.s.threshold_us == 4 * x.c.error_us);
    assert_true(x.s.late < 10);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* Host b's monotonic clock runs 20 ppm fast while its wall clock keeps true time, and it
 * writes a CLOCK record every 10 s: no collective ties the hosts, yet the anchors, followed
 * from one to the next, keep it within a microsecond (its first anchor alone: 1 ms off by
 * the 50th second). */
static void wall_clock_anchors_are_followed(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1},
                              {"b", 2000000000000ull, 0, 20e-6, 1}};
    static const int host_of[2] = {0, 1};
    tjob j;
    job_open(&j, 2, h, host_of);
    job_comm(&j, 0, 0x900, all8, 2);
    for (int i = 0; i < 100; i++) {
        double t = 0.5e9 + i * 1e9, arr[2] = {t, t};
        job_coll(&j, 0, all8, 2, CP_OP_ALLREDUCE, arr, NULL, t + 100 * US, 0);
        if (i % 10 == 9) {
            cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = mono_of(&h[1], t),
                              .realtime_ns = EPOCH + (uint64_t)t};
            assert_int_equal(cp_trace_writer_append(j.w[1], &k), 0);
        }
    }
    job_close(&j, 100.5e9);
    res x;
    analyze(&j, &x);
    assert_false(x.c.domains[1].refined);
    for (double t = 1e9; t < 100e9; t += 7e9)
        assert_job_time(&x, &j, 1, t, 1 * US);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* Ranks 2 and 3 lost their GPU times (no DONE): their host entries, 2 ms before their GPU
 * starts (a busy stream), are not weighed against the others' GPU starts. */
static void mixed_timing_is_not_judged(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[4] = {0};
    tjob j;
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0xa00, all8, 4);
    for (int i = 0; i < 20; i++) {
        double t = 1 * MS + i * 10 * MS, arr[4] = {t, t + 10 * US, t, t};
        job_coll(&j, 0, all8, 2, CP_OP_ALLREDUCE, arr, NULL, t + 300 * US, 1);
        j.seq[0]--; /* the same collective, on the ranks that lost their DONE */
        double host[2] = {t - 2 * MS, t - 2 * MS};
        job_coll(&j, 0, all8 + 2, 2, CP_OP_ALLREDUCE, host, NULL, t + 300 * US, 0);
    }
    job_close(&j, 300 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.mt.nops, 20);
    assert_true(x.mt.ops[0].complete);
    assert_int_equal(x.s.judged, 0);
    assert_int_equal(x.s.late, 0);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);
}

/* ---- each rank's GPU time line ---- */

/* Two TP groups of 4 on one host, DP pairs across them, and a world AllReduce each step;
 * six ranks' GPU times are off by up to 25 ms (bad reference events), and rank 1 gets a new,
 * worse one half way. Ends put them right; and a real straggler is still found. */
static void write_gpu_frames(tjob *j, int late_rank)
{
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0};
    static const int tp0[4] = {0, 1, 2, 3}, tp1[4] = {4, 5, 6, 7};
    static const double err_ms[8] = {24.6, 0, 15.2, 21.0, 1.3, 0, 4.9, 13.6};
    job_open(j, 8, h, host_of);
    for (int r = 0; r < 8; r++)
        j->gerr[r] = j->gerr_late[r] = err_ms[r] * MS;
    j->gerr_late[1] = 3 * MS;
    j->gerr_switch = 200 * MS;
    job_comm(j, 0, 0x100, all8, 8);
    job_comm(j, 1, 0x101, tp0, 4);
    job_comm(j, 2, 0x102, tp1, 4);
    for (int p = 0; p < 4; p++)
        job_comm(j, (uint32_t)(3 + p), 0x103 + (uint64_t)p, (const int[]){p, p + 4}, 2);
    uint64_t s = 7;
    double t = 1 * MS;
    for (int step = 0; step < 20; step++) {
        for (int l = 0; l < 8; l++, t += 2 * MS)
            for (int g = 0; g < 2; g++) {
                const int *m = g ? tp1 : tp0;
                double arr[4], late = 0;
                for (int k = 0; k < 4; k++) {
                    arr[k] = t + 20 * US * jit(&s) + (m[k] == late_rank ? 2 * MS : 0);
                    late = m[k] == late_rank ? 2 * MS : late;
                }
                job_coll(j, (uint32_t)(1 + g), m, 4, CP_OP_ALLREDUCE, arr, NULL,
                         t + late + 300 * US, 1);
            }
        for (int p = 0; p < 4; p++, t += 1 * MS) {
            const int m[2] = {p, p + 4};
            double arr[2], late = 0;
            for (int k = 0; k < 2; k++) {
                arr[k] = t + 20 * US * jit(&s) + (m[k] == late_rank ? 2 * MS : 0);
                late = m[k] == late_rank ? 2 * MS : late;
            }
            job_coll(j, (uint32_t)(3 + p), m, 2, CP_OP_REDUCESCATTER, arr, NULL,
                     t + late + 200 * US, 1);
        }
        double arr[8], late = late_rank >= 0 ? 2 * MS : 0;
        for (int k = 0; k < 8; k++)
            arr[k] = t + 20 * US * jit(&s) + (k == late_rank ? 2 * MS : 0);
        job_coll(j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + late + 100 * US, 1);
        t += 1 * MS;
    }
    job_close(j, t + 10 * MS);
}

static void bad_gpu_references_are_corrected(void **state)
{
    (void)state;
    tjob j;
    res x;
    write_gpu_frames(&j, -1);
    analyze(&j, &x);
    /* every rank's GPU end of every blocking collective on one instant again */
    for (size_t i = 0; i < x.mt.nops; i++) {
        const cpa_op *o = &x.mt.ops[i];
        const cpa_part *p = &x.mt.parts[o->first_part];
        uint64_t e0 = cpa_clock_gpu_job_ns(x.m, &x.c, p[0].rank_idx, p[0].end_ns);
        for (uint32_t k = 1; k < o->nparts; k++) {
            double d = (double)(int64_t)(cpa_clock_gpu_job_ns(x.m, &x.c, p[k].rank_idx,
                                                               p[k].end_ns) - e0);
            if (fabs(d) > 2 * US)
                fail_msg("op %zu: rank %u's end %.0f ns off rank %u's", i, p[k].rank_idx, d,
                         p[0].rank_idx);
        }
    }
    /* ... and on the true time line, less the tightest launch: the good references' frame */
    uint64_t g = gpu_of(&j, 3, 100 * MS);
    double got = (double)(cpa_clock_gpu_job_ns(x.m, &x.c, 3, g) - EPOCH);
    assert_true(fabs(got - (100 * MS - LAUNCH_NS)) < 25 * US);
    assert_int_equal(x.s.judged, 20 * (16 + 4 + 1));
    assert_true(x.s.late == 0);
    assert_no_straggler(&x);
    res_free(&x);
    job_free(&j);

    write_gpu_frames(&j, 5);
    analyze(&j, &x);
    assert_int_equal(x.s.nrows, 1);
    assert_int_equal(x.s.rows[0].rank, 5);
    assert_int_equal(x.s.rows[0].late_count, 20 * (8 + 1 + 1));
    assert_true(fabs(x.s.rows[0].late_us_p50 - 2000) < 40);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_PERSISTENT);
    res_free(&x);
    job_free(&j);
}

/* Every rank of host b has a bad GPU reference (1.5 to 3 ms early, or late, each its own), so
 * the ends alone would take host b's clock for 2 ms later (earlier) than it is. Its launches
 * would then start before they were made (long after, while host a's start at once): the
 * check against host a's launches puts the host right, and its GPU times stay. */
static void write_bad_host(tjob *j, double sign)
{
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1},
                              {"b", 2000000000000ull, 5000000, 0, 1}};
    static const int host_of[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    job_open(j, 8, h, host_of);
    for (int r = 4; r < 8; r++)
        j->gerr[r] = sign * (1.5 + 0.5 * (r - 4)) * MS;
    job_comm(j, 0, 0xc00, all8, 8);
    uint64_t s = 9;
    for (int i = 0; i < 100; i++) {
        double t = 1 * MS + i * 3 * MS, arr[8];
        for (int k = 0; k < 8; k++)
            arr[k] = t + 20 * US * jit(&s);
        job_coll(j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + 400 * US, 1);
    }
    job_close(j, 400 * MS);
}

static void a_host_whose_gpu_references_are_all_bad(void **state)
{
    (void)state;
    for (double sign = -1; sign <= 1; sign += 2) {
        tjob j;
        res x;
        write_bad_host(&j, sign);
        analyze(&j, &x);
        if (fabs(x.c.domains[1].offset_ns + 5 * MS) > 5 * US)
            fail_msg("references %s: host b's offset %.1f us", sign < 0 ? "early" : "late",
                     x.c.domains[1].offset_ns / US);
        for (int r = 0; r < 8; r++)
            assert_job_time(&x, &j, r, 150 * MS, 5 * US);
        assert_no_straggler(&x);
        res_free(&x);
        job_free(&j);
    }
}

/* ---- stragglers ---- */

static double p6_late(int i) { return 1.5 * MS + (i % 7) * 100 * US; }

/* Rank 6 late in every collective but two, where rank 2 has a 3 ms hiccup. */
static void persistent_straggler(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0};
    tjob j;
    job_open(&j, 8, h, host_of);
    job_comm(&j, 0, 0x600, all8, 8);
    for (int i = 0; i < 60; i++) {
        double t = 1 * MS + i * 10 * MS, arr[8];
        for (int k = 0; k < 8; k++)
            arr[k] = t;
        arr[6] += p6_late(i);
        if (i == 10 || i == 40)
            arr[2] += 3 * MS;
        job_coll(&j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + 3.5 * MS, 1);
    }
    job_close(&j, 700 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.s.judged, 60);
    assert_int_equal(x.s.late, 60);
    assert_int_equal(x.s.nrows, 1); /* rank 2's two hiccups are no straggler */
    const cpa_straggler *r = &x.s.rows[0];
    assert_int_equal(r->rank, 6);
    assert_int_equal(r->late_count, 58);
    assert_true(fabs(r->share - 58.0 / 60) < 1e-9);
    /* nearest rank p50 of its 58 lateness values */
    double v[60], total = 0;
    int n = 0;
    for (int i = 0; i < 60; i++)
        if (i != 10 && i != 40)
            total += v[n++] = p6_late(i) / US;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (v[b] < v[a]) {
                double t = v[a];
                v[a] = v[b];
                v[b] = t;
            }
    assert_true(fabs(r->late_us_p50 - v[(n + 1) / 2 - 1]) < 0.01);
    assert_true(fabs(r->late_us_total - total) < 0.1);
    assert_true(fabs(r->wait_us_total - (3000 - p6_late(10) / US + 3000 - p6_late(40) / US)) <
                0.1);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_PERSISTENT);
    /* per operation: the late rank and by how much, the hiccups included */
    for (size_t i = 0; i < x.mt.nops; i++) {
        int seq = (int)x.mt.ops[i].seq;
        int want = seq == 10 || seq == 40 ? 2 : 6;
        assert_int_equal(x.m->ranks[x.s.op_late_rank_idx[i]].rank, want);
        double us = want == 2 ? 3000 : p6_late(seq) / US;
        assert_true(fabs(x.s.op_late_us[i] - us) < 0.01);
    }
    res_free(&x);
    job_free(&j);
}

/* The late rank changes every collective. */
static void rotating_straggler(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[4] = {0};
    tjob j;
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0x700, all8, 4);
    /* ranks 0-2 take turns; rank 3 is late only twice, too few to be listed */
    for (int i = 0; i < 41; i++) {
        double t = 1 * MS + i * 10 * MS, arr[4] = {t, t, t, t};
        arr[i == 5 || i == 25 ? 3 : i % 3] += 3 * MS;
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 3.4 * MS, 1);
    }
    job_close(&j, 500 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.s.late, 41);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_ROTATING);
    assert_int_equal(x.s.nrows, 3);
    static const int want_rank[3] = {0, 1, 2}, want_late[3] = {14, 13, 12};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(x.s.rows[k].rank, want_rank[k]); /* by late_us_total */
        assert_int_equal(x.s.rows[k].late_count, want_late[k]);
        assert_true(fabs(x.s.rows[k].share - want_late[k] / 41.0) < 1e-9);
        assert_true(fabs(x.s.rows[k].late_us_p50 - 3000) < 0.01);
    }
    res_free(&x);
    job_free(&j);

    /* two ranks each late in half the collectives: both listed, and it is a rotation */
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0x701, all8, 4);
    for (int i = 0; i < 20; i++) {
        double t = 1 * MS + i * 10 * MS, arr[4] = {t, t, t, t};
        arr[1 + i % 2] += 3 * MS;
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 3.4 * MS, 1);
    }
    job_close(&j, 300 * MS);
    analyze(&j, &x);
    assert_int_equal(x.s.nrows, 2);
    assert_true(x.s.rows[0].share == 0.5 && x.s.rows[1].share == 0.5);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_ROTATING);
    res_free(&x);
    job_free(&j);
}

/* Rank 1 arrives 2 ms late, so its peers wait and show the long GPU durations; and in
 * Broadcasts rank 3's GPU time is 5 ms longer though all arrive together. Only rank 1 is
 * late. */
static void long_durations_do_not_make_a_straggler(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[4] = {0};
    tjob j;
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0x800, all8, 4);
    uint64_t s = 8;
    for (int i = 0; i < 40; i++) {
        double t = 1 * MS + i * 10 * MS, arr[4], end[4];
        for (int k = 0; k < 4; k++)
            arr[k] = t + 10 * US * jit(&s) + (k == 1 ? 2 * MS : 0);
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 2.3 * MS, 1);
        if (i % 2)
            continue;
        for (int k = 0; k < 4; k++) {
            arr[k] = t + 4 * MS + 10 * US * jit(&s);
            end[k] = t + 4.3 * MS + (k == 3 ? 5 * MS : 0);
        }
        job_coll(&j, 0, all8, 4, CP_OP_BROADCAST, arr, end, 0, 1);
    }
    job_close(&j, 500 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.s.judged, 60);
    assert_int_equal(x.s.late, 40);
    assert_int_equal(x.s.nrows, 1);
    assert_int_equal(x.s.rows[0].rank, 1);
    assert_true(fabs(x.s.rows[0].share - 40.0 / 60) < 1e-9);
    /* it waited for no one in the AllReduces, and only the jitter in the Broadcasts */
    assert_true(x.s.rows[0].wait_us_total < 20 * 20);
    assert_true(fabs(x.s.rows[0].late_us_p50 - 2000) < 20);
    res_free(&x);
    job_free(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_host_no_offset),
        cmocka_unit_test(two_hosts_wall_clocks_5ms_apart),
        cmocka_unit_test(three_hosts_chained),
        cmocka_unit_test(drift_over_a_long_trace),
        cmocka_unit_test(anchors_only_when_no_gpu_timed_blocking_collective),
        cmocka_unit_test(lateness_below_the_clock_error_is_not_called),
        cmocka_unit_test(wall_clock_anchors_are_followed),
        cmocka_unit_test(mixed_timing_is_not_judged),
        cmocka_unit_test(bad_gpu_references_are_corrected),
        cmocka_unit_test(a_host_whose_gpu_references_are_all_bad),
        cmocka_unit_test(persistent_straggler),
        cmocka_unit_test(rotating_straggler),
        cmocka_unit_test(long_durations_do_not_make_a_straggler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
