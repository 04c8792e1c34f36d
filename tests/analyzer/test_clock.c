/* Clock alignment over synthetic multi-host traces (clock_job.h): offsets, drift, anchors,
 * each rank's GPU time line, checked against the true times the jobs were written in. */
#include "tests/analyzer/clock_job.h"

#include "analyzer/clock_internal.h" /* the map's fixed offsets, against rounding each time */

static void fixed_matches_unfixed(const cpa_model *m, cpa_clock *c);
static void fixed_matches_unfixed_now(const cpa_model *m, cpa_clock *c);

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
    fixed_matches_unfixed(x.m, &x.c);
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

/* cpa_clock_job_ns_n gives each time what a conversion of it alone gives: every call's entry
 * and GPU start and end, in order and backwards (the rank's fingers moving both ways), and
 * a time past the bound. */
static void batch_matches_singles(const cpa_model *m, const cpa_clock *c)
{
    for (size_t r = 0; r < m->nranks; r++)
        for (size_t i = 0; i < m->ranks[r].ncalls; i++) {
            const cpa_call *k = &m->ranks[r].calls[m->ranks[r].ncalls - 1 - i];
            uint64_t t[4] = {k->enter_ns, k->gpu_start_ns, k->gpu_end_ns, UINT64_MAX}, got[4];
            for (size_t from = 0; from <= 4; from++) {
                cpa_clock_job_ns_n(m, c, r, t, got, 4, from);
                for (size_t q = 0; q < 4; q++) {
                    uint64_t want = q < from ? cpa_clock_job_ns(m, c, r, t[q])
                                             : cpa_clock_gpu_job_ns(m, c, r, t[q]);
                    if (got[q] != want)
                        fail_msg("rank %zu call %zu time %zu: %llu, alone %llu", r, i, q,
                                 (unsigned long long)got[q], (unsigned long long)want);
                }
            }
        }
}

/* The conversions of a finished clock (offsets and GPU corrections rounded once) against
 * the same map rounding them at each conversion, at every call's times, on and beside every
 * anchor and GPU segment boundary, and at the far end of the clock. */
static const double frac[4] = {0.5, -0.5, 0.25, -1.75}; /* halves round away from zero */

static void perturb(const cpa_model *m, cpa_clock *c, double sign)
{
    for (size_t d = 0; d < c->ndomains; d++)
        c->domains[d].offset_ns += sign * frac[d % 4];
    for (size_t i = 0; i < c->map->g_first[m->nranks]; i++)
        c->map->gsegs[i].corr += sign * frac[(i + 1) % 4];
}

static void fixed_matches_unfixed(const cpa_model *m, cpa_clock *c)
{
    struct cpa_clock_map *map = c->map;
    assert_non_null(map->offset_ns);
    assert_true(map->gpu_final);
    for (int pass = 0; pass < 2; pass++) {
        /* the second with corrections not whole ns (a median of an even count is a half) */
        if (pass)
            perturb(m, c, 1);
        assert_int_equal(cpa_clk_fix(m, c, 1), 0);
        fixed_matches_unfixed_now(m, c);
        if (pass)
            perturb(m, c, -1);
    }
    assert_int_equal(cpa_clk_fix(m, c, 1), 0);
}

static void fixed_matches_unfixed_now(const cpa_model *m, cpa_clock *c)
{
    struct cpa_clock_map *map = c->map;
    for (size_t r = 0; r < m->nranks; r++) {
        size_t cap = 3 * m->ranks[r].ncalls + 3 * (map->d[c->rank_domain[r]].n +
                                                     map->g_first[r + 1] - map->g_first[r]) + 8;
        uint64_t *t = malloc(cap * sizeof *t), *host = malloc(cap * sizeof *host),
                 *gpu = malloc(cap * sizeof *gpu);
        size_t n = 0;
        for (size_t i = 0; i < m->ranks[r].ncalls; i++) {
            const cpa_call *k = &m->ranks[r].calls[i];
            t[n++] = k->enter_ns;
            t[n++] = k->gpu_start_ns;
            t[n++] = k->gpu_end_ns;
        }
        const cpa_dmap *dm = &map->d[c->rank_domain[r]];
        for (size_t i = 0; i < dm->n; i++)
            for (int d = -1; d <= 1; d++)
                t[n++] = map->anchors[dm->first + i].mono + (uint64_t)(int64_t)d;
        for (size_t i = map->g_first[r]; i < map->g_first[r + 1]; i++)
            for (int d = -1; d <= 1; d++)
                t[n++] = map->gsegs[i].t + (uint64_t)(int64_t)d;
        const uint64_t ends[] = {0, 1, CPA_TIME_MAX, INT64_MAX, (1ull << 63) + 5, UINT64_MAX};
        for (size_t i = 0; i < sizeof ends / sizeof *ends; i++)
            t[n++] = ends[i];
        assert_true(n <= cap);
        for (size_t i = 0; i < n; i++) {
            host[i] = cpa_clock_job_ns(m, c, r, t[i]);
            gpu[i] = cpa_clock_gpu_job_ns(m, c, r, t[i]);
        }
        /* the per-rank path of the passes over every part (arrivals, the GPU frames' ends) */
        cpa_clk_fast *fh = cpa_clk_fast_make(m, c, 0), *fg = cpa_clk_fast_make(m, c, 1);
        cpa_part *p = malloc(n * sizeof *p);
        assert_non_null(fh);
        assert_non_null(fg);
        assert_non_null(p);
        for (size_t i = 0; i < n; i++) {
            if (fh[r].off != CPA_CLK_NOT_CONST &&
                (cpa_clk_fast_job(&fh[r], t[i], 0) != host[i] ||
                 cpa_clk_fast_job(&fg[r], t[i], 1) != gpu[i]))
                fail_msg("rank %zu time %llu: per rank %llu/%llu, alone %llu/%llu", r,
                         (unsigned long long)t[i],
                         (unsigned long long)cpa_clk_fast_job(&fh[r], t[i], 0),
                         (unsigned long long)cpa_clk_fast_job(&fg[r], t[i], 1),
                         (unsigned long long)host[i], (unsigned long long)gpu[i]);
            p[i] = (cpa_part){.rank_idx = (uint32_t)r, .gpu_timed = i % 2, .arrival_ns = t[i]};
        }
        cpa_clock_arrivals_job(m, c, p, n);
        for (size_t i = 0; i < n; i++)
            if (p[i].arrival_ns != (i % 2 ? gpu[i] : host[i]))
                fail_msg("rank %zu time %llu: arrival %llu, alone %llu", r,
                         (unsigned long long)t[i], (unsigned long long)p[i].arrival_ns,
                         (unsigned long long)(i % 2 ? gpu[i] : host[i]));
        free(fh);
        free(fg);
        free(p);
        cpa_clk_unfix(c);
        for (size_t i = 0; i < n; i++)
            if (host[i] != cpa_clock_job_ns(m, c, r, t[i]) ||
                gpu[i] != cpa_clock_gpu_job_ns(m, c, r, t[i]))
                fail_msg("rank %zu time %llu: fixed %llu/%llu, rounding each time %llu/%llu", r,
                         (unsigned long long)t[i], (unsigned long long)host[i],
                         (unsigned long long)gpu[i],
                         (unsigned long long)cpa_clock_job_ns(m, c, r, t[i]),
                         (unsigned long long)cpa_clock_gpu_job_ns(m, c, r, t[i]));
        assert_int_equal(cpa_clk_fix(m, c, 1), 0);
        free(t);
        free(host);
        free(gpu);
    }
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
    batch_matches_singles(x.m, &x.c); /* drift between the ties, held past them */
    fixed_matches_unfixed(x.m, &x.c);
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

/* Every rank's GPU end of every blocking collective on one instant again. */
static void assert_ends_together(const res *x)
{
    for (size_t i = 0; i < x->mt.nops; i++) {
        const cpa_op *o = &x->mt.ops[i];
        const cpa_part *p = &x->mt.parts[o->first_part];
        uint64_t e0 = cpa_clock_gpu_job_ns(x->m, &x->c, p[0].rank_idx, p[0].end_ns);
        for (uint32_t k = 1; k < o->nparts; k++) {
            double d = (double)(int64_t)(cpa_clock_gpu_job_ns(x->m, &x->c, p[k].rank_idx,
                                                               p[k].end_ns) - e0);
            if (fabs(d) > 2 * US)
                fail_msg("op %zu: rank %u's end %.0f ns off rank %u's", i, p[k].rank_idx, d,
                         p[0].rank_idx);
        }
    }
}

static void bad_gpu_references_are_corrected(void **state)
{
    (void)state;
    tjob j;
    res x;
    write_gpu_frames(&j, -1);
    analyze(&j, &x);
    assert_ends_together(&x);
    /* ... and on the true time line, less the tightest launch: the good references' frame */
    uint64_t g = gpu_of(&j, 3, 100 * MS);
    double got = (double)(cpa_clock_gpu_job_ns(x.m, &x.c, 3, g) - EPOCH);
    assert_true(fabs(got - (100 * MS - LAUNCH_NS)) < 25 * US);
    batch_matches_singles(x.m, &x.c);
    fixed_matches_unfixed(x.m, &x.c);
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

/* Two groups with one lowest rank, each its own communicator: {0,1,2,3} and {0,4,5,6,7}.
 * The frames' pairs of the second group's operations are (0,4), (0,5)...: the pairs found
 * for the first group's, kept by part position, must not be taken for them. */
static void groups_sharing_their_lowest_rank_keep_their_own_pairs(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0};
    static const int ga[4] = {0, 1, 2, 3}, gb[5] = {0, 4, 5, 6, 7};
    static const double err_ms[8] = {0, 3.1, 7.4, 1.9, 12.5, 5.2, 9.8, 2.6};
    tjob j;
    res x;
    job_open(&j, 8, h, host_of);
    for (int r = 0; r < 8; r++)
        j.gerr[r] = err_ms[r] * MS;
    job_comm(&j, 0, 0x201, ga, 4);
    job_comm(&j, 1, 0x202, gb, 5);
    uint64_t s = 11;
    double t = 1 * MS;
    for (int i = 0; i < 40; i++, t += 2 * MS) {
        const int *m = i % 2 ? gb : ga;
        int nm = i % 2 ? 5 : 4;
        double arr[5];
        for (int k = 0; k < nm; k++)
            arr[k] = t + 20 * US * jit(&s);
        job_coll(&j, (uint32_t)(i % 2), m, nm, CP_OP_ALLREDUCE, arr, NULL, t + 300 * US, 1);
    }
    job_close(&j, t + 10 * MS);
    analyze(&j, &x);
    assert_ends_together(&x);
    assert_true(x.s.late == 0);
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

/* ---- hostile values: a time no clock can read ----
 * A trace's times are u64 and every one comes from a file that may be damaged or forged.
 * The analyzer's conversions (realtime - mono, local + anchor + offset) are signed; a value
 * past INT64_MAX once overflowed them (clock.c 165 and 505: the sanitizer build aborted, the
 * release wrapped). Each case here is such a file; the job around it must come out as it
 * would without the bad record, the record rejected and counted. */

/* A two-host job (host b 5 ms off) as write_two_hosts, without its END records yet. */
static void write_two_hosts_open(tjob *j)
{
    static const thost h[] = {{"node-a", 5000000000000ull, 0, 0, 0},
                              {"node-b", 9100000000000ull, 5000000, 0, 0}};
    static const int host_of[4] = {0, 0, 1, 1};
    job_open(j, 4, h, host_of);
    job_comm(j, 0, 0xb23, all8, 4);
    uint64_t s = 3;
    for (int i = 0; i < 40; i++) {
        double t = 1 * MS + i * 3 * MS, arr[4];
        for (int k = 0; k < 4; k++)
            arr[k] = t + 20 * US * jit(&s);
        job_coll(j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 400 * US, 1);
    }
}

static void analyze_hostile(tjob *j, cpa_analysis *a)
{
    char err[256] = "";
    if (cpa_analyze(j->dir, a, NULL, NULL, err, sizeof err))
        fail_msg("%s", err);
}

static int warned(const cpa_model *m, const char *needle)
{
    for (size_t i = 0; i < m->nwarnings; i++)
        if (strstr(m->warnings[i], needle))
            return 1;
    return 0;
}

/* The job around the bad record: host b still 5 ms off, nobody late. */
static void assert_two_hosts_intact(const cpa_analysis *a, uint64_t judged)
{
    assert_int_equal(a->clock.ndomains, 2);
    assert_true(a->clock.aligned);
    if (fabs(a->clock.domains[1].offset_ns + 5 * MS) > 2 * US)
        fail_msg("host b's offset %.1f us", a->clock.domains[1].offset_ns / US);
    assert_int_equal(a->stragglers.judged, judged);
    assert_int_equal(a->stragglers.nrows, 0);
    assert_true(a->duration_s > 0.1 && a->duration_s < 0.3);
}

/* clock.c 165: a CLOCK record whose monotonic time is past INT64_MAX, and one whose wall
 * clock is (dropped before too, but silently). */
static void clock_sample_past_int64_max(void **state)
{
    (void)state;
    tjob j;
    write_two_hosts_open(&j);
    cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = (1ull << 63) + 12345,
                      .realtime_ns = EPOCH + 5000000};
    assert_int_equal(cp_trace_writer_append(j.w[2], &k), 0);
    k = (cp_rec_clock){.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = mono_of(j.host[0], 100 * MS),
                       .realtime_ns = UINT64_MAX - 3};
    assert_int_equal(cp_trace_writer_append(j.w[0], &k), 0);
    job_close(&j, 200 * MS);
    cpa_analysis a;
    analyze_hostile(&j, &a);
    assert_int_equal(a.model->ranks[0].bad_clocks, 1);
    assert_int_equal(a.model->ranks[2].bad_clocks, 1);
    assert_int_equal(a.clock.rejected_samples, 2);
    assert_true(warned(a.model, "rank02.cptrace': 1 clock samples rejected: a time past 2^62"));
    assert_two_hosts_intact(&a, 40);
    cpa_analysis_free(&a);
    job_free(&j);
}

/* A header whose anchor reads past 2^62: the rank's other samples anchor it. */
static void header_anchor_past_the_bound(void **state)
{
    (void)state;
    static const thost h[] = {{"node-a", 5000000000000ull, 0, 0, 1}};
    static const int host_of[2] = {0, 0};
    tjob j;
    job_open(&j, 2, h, host_of);
    cp_trace_writer_close(j.w[1]);
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/rank01%s", j.dir, CP_TRACE_FILE_SUFFIX);
    unlink(path);
    cp_file_header fh;
    cp_file_header_init(&fh);
    fh.rank = 1;
    fh.world_size = 2;
    fh.flags = CP_FILE_GPU_TIMING;
    fh.mono_anchor_ns = CPA_TIME_MAX + 1;
    fh.realtime_anchor_ns = EPOCH;
    snprintf(fh.hostname, sizeof fh.hostname, "node-a");
    j.w[1] = cp_trace_writer_open(path, &fh, 0, err, sizeof err);
    assert_non_null(j.w[1]);
    job_comm(&j, 0, 0xc33, all8, 2);
    for (int i = 0; i < 5; i++) {
        double t = 1 * MS + i * MS, arr[2] = {t, t};
        job_coll(&j, 0, all8, 2, CP_OP_ALLREDUCE, arr, NULL, t + 100 * US, 1);
    }
    job_close(&j, 20 * MS);
    cpa_analysis a;
    analyze_hostile(&j, &a);
    assert_int_equal(a.model->ranks[1].bad_clocks, 1);
    assert_int_equal(a.model->ranks[1].nclocks, 1); /* its CLOCK record at the end */
    assert_int_equal(a.clock.rejected_samples, 1);
    assert_true(a.duration_s > 0.01 && a.duration_s < 0.03);
    cpa_analysis_free(&a);
    job_free(&j);
}

/* clock.c 505: a host time just under INT64_MAX, which the anchor then carried past it. */
static void call_time_near_int64_max(void **state)
{
    (void)state;
    tjob j;
    write_two_hosts_open(&j);
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = CP_OP_ALLREDUCE, .dtype = F32,
                     .comm_index = 0, .site_index = UINT32_MAX, .seq = j.seq[0]++,
                     .count = 1, .stream = 1, .enter_ns = INT64_MAX - 1000, .peer = -1};
    assert_int_equal(cp_trace_writer_append(j.w[1], &c), 0);
    cp_rec_hang g = {.h = {CP_REC_HANG, sizeof g}, .seq = 3, .at_ns = UINT64_MAX, .age_ns = 1,
                     .peer = -1, .op = CP_OP_ALLREDUCE};
    assert_int_equal(cp_trace_writer_append(j.w[3], &g), 0);
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .at_ns = (1ull << 63) + 7};
    assert_int_equal(cp_trace_writer_append(j.w[0], &e), 0);
    job_close(&j, 200 * MS);
    cpa_analysis a;
    analyze_hostile(&j, &a);
    assert_int_equal(a.model->ranks[1].bad_times, 1);
    assert_int_equal(a.model->ranks[1].ncalls, 40); /* the CALL is left out */
    assert_int_equal(a.model->ranks[3].bad_times, 1);
    assert_int_equal(a.model->ranks[3].nhangs, 0);  /* the HANG too */
    assert_int_equal(a.model->ranks[0].bad_times, 1);
    assert_true(a.model->ranks[0].ended);           /* the END's time only */
    assert_true(warned(a.model, "rank01.cptrace': 1 records with an impossible time"));
    assert_int_equal(a.hangs.nrows, 0);
    assert_two_hosts_intact(&a, 40);
    cpa_analysis_free(&a);
    job_free(&j);
}

/* DONE records whose GPU end is past the bound, or before its start: the calls are done,
 * their times unused, and the clocks stand on the rest. */
static void gpu_times_past_the_bound(void **state)
{
    (void)state;
    tjob j;
    write_two_hosts_open(&j);
    double arr[4] = {130 * MS, 130 * MS, 130 * MS, 130 * MS};
    job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, 131 * MS, 0);
    /* the untimed call just written, now said timed by a DONE each */
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = j.seq[0] - 1,
                     .gpu_start_ns = mono_of(j.host[1], 130 * MS), .gpu_end_ns = INT64_MAX - 9,
                     .peer = -1, .op = CP_OP_ALLREDUCE, .timing = CP_TIMING_EVENTS};
    assert_int_equal(cp_trace_writer_append(j.w[1], &d), 0);
    d.gpu_start_ns = mono_of(j.host[2], 131 * MS);
    d.gpu_end_ns = d.gpu_start_ns - 1;
    assert_int_equal(cp_trace_writer_append(j.w[2], &d), 0);
    job_close(&j, 200 * MS);
    cpa_analysis a;
    analyze_hostile(&j, &a);
    for (int r = 1; r <= 2; r++) {
        const cpa_rank *k = &a.model->ranks[r];
        assert_int_equal(k->bad_times, 1);
        assert_true(k->calls[40].done && !k->calls[40].gpu_timed);
    }
    assert_two_hosts_intact(&a, 41); /* the last one judged on host entries: none GPU-timed */
    cpa_analysis_free(&a);
    job_free(&j);
}

/* Whatever local time a caller hands the conversions, the job time is in [0, INT64_MAX]:
 * a rank whose anchor is ahead (wall clock past its monotonic), and one behind. */
static void conversions_saturate(void **state)
{
    (void)state;
    static const thost h[] = {{"ahead", 5000000000000ull, 0, 0, 0},
                              {"behind", 4000000000000000000ull, 0, 0, 0}};
    static const int host_of[2] = {0, 1};
    tjob j;
    job_open(&j, 2, h, host_of);
    job_comm(&j, 0, 0xd44, all8, 2);
    for (int i = 0; i < 5; i++) {
        double t = 1 * MS + i * MS, arr[2] = {t, t};
        job_coll(&j, 0, all8, 2, CP_OP_ALLREDUCE, arr, NULL, t + 100 * US, 1);
    }
    job_close(&j, 20 * MS);
    cpa_analysis a;
    analyze_hostile(&j, &a);
    assert_int_equal(a.model->nwarnings, 0);
    const uint64_t far[] = {INT64_MAX - 1, INT64_MAX, (1ull << 63) + 7, UINT64_MAX};
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < sizeof far / sizeof *far; i++) {
            uint64_t host = cpa_clock_job_ns(a.model, &a.clock, r, far[i]);
            uint64_t gpu = cpa_clock_gpu_job_ns(a.model, &a.clock, r, far[i]);
            assert_true(host <= INT64_MAX && gpu <= INT64_MAX);
            /* the one ahead saturates; the one behind stays a time before it */
            assert_true(r == 0 ? host == INT64_MAX : host < INT64_MAX);
        }
    batch_matches_singles(a.model, &a.clock);
    fixed_matches_unfixed(a.model, &a.clock);
    /* unaligned (no map yet), from the header's anchor */
    cpa_clock bare = {0};
    batch_matches_singles(a.model, &bare);
    assert_int_equal(cpa_clock_job_ns(a.model, &bare, 0, UINT64_MAX), INT64_MAX);
    assert_true(cpa_clock_job_ns(a.model, &bare, 1, UINT64_MAX) < INT64_MAX);
    cpa_analysis_free(&a);
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
        cmocka_unit_test(groups_sharing_their_lowest_rank_keep_their_own_pairs),
        cmocka_unit_test(a_host_whose_gpu_references_are_all_bad),
        cmocka_unit_test(clock_sample_past_int64_max),
        cmocka_unit_test(header_anchor_past_the_bound),
        cmocka_unit_test(call_time_near_int64_max),
        cmocka_unit_test(gpu_times_past_the_bound),
        cmocka_unit_test(conversions_saturate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
