/* Stragglers over synthetic traces (clock_job.h): persistent and rotating late ranks,
 * never called from durations alone. */
#include "tests/analyzer/clock_job.h"

#include <inttypes.h>

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
    /* it entered NCCL as late as its GPU started: the host's doing */
    assert_int_equal(r->cause, CPA_CAUSE_HOST);
    assert_int_equal(r->by_cause[CPA_CAUSE_HOST], 58);
    assert_true(fabs(r->host_late_us_p50 - r->late_us_p50) < 0.01);
    assert_true(fabs(r->gpu_late_us_p50 - r->late_us_p50) < 0.01);
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

/* Why rank 6 is late, on 40 world collectives 10 ms apart on one stream, rank 6 2 ms late
 * on the GPU in each: per collective `how[i]` says what made it late. 'h': its host entered
 * 2 ms late; 'b': it entered on time, its stream started 2 ms late with no NCCL work before
 * (compute); 'c': it entered on time, and its own comm's AllGather (comm 1, rank 6 alone) ran
 * on its stream until just before. */
static void causes_job(const char *how, res *x, tjob *j)
{
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0}, six[1] = {6};
    job_open(j, 8, h, host_of);
    job_comm(j, 0, 0x600, all8, 8);
    job_comm(j, 1, 0x601, six, 1);
    for (int i = 0; i < 40; i++) {
        double t = 1 * MS + i * 10 * MS, arr[8], ent[8];
        for (int k = 0; k < 8; k++) {
            arr[k] = t;
            ent[k] = t - 50 * US;
        }
        arr[6] += 2 * MS;
        if (how[i] == 'h')
            ent[6] += 2 * MS;
        if (how[i] == 'c') {
            double a1 = t - 1 * MS;
            job_coll(j, 1, six, 1, CP_OP_ALLGATHER, &a1, NULL, arr[6] - 20 * US, 1);
        }
        job_coll_at(j, 0, all8, 8, CP_OP_ALLREDUCE, ent, arr, NULL, arr[6] + 1 * MS, 1);
    }
    job_close(j, 500 * MS);
    analyze(j, x);
    assert_int_equal(x->s.nrows, 1);
    assert_int_equal(x->s.rows[0].rank, 6);
    assert_int_equal(x->s.rows[0].late_count, 40);
}

static void each_cause_is_told_and_a_mix_is_a_mix(void **state)
{
    (void)state;
    char how[41];
    static const struct {
        char c;
        int cause;
    } pure[] = {{'h', CPA_CAUSE_HOST}, {'b', CPA_CAUSE_BACKLOG}, {'c', CPA_CAUSE_COLLECTIVE}};
    for (size_t p = 0; p < 3; p++) {
        memset(how, pure[p].c, 40);
        how[40] = '\0';
        tjob j;
        res x;
        causes_job(how, &x, &j);
        const cpa_straggler *r = &x.s.rows[0];
        if (r->cause != pure[p].cause)
            fail_msg("'%c': cause %s (host %" PRIu64 ", backlog %" PRIu64 ", collective %" PRIu64
                     ")", pure[p].c, cpa_late_cause_name(r->cause), r->by_cause[1],
                     r->by_cause[2], r->by_cause[3]);
        assert_int_equal(r->by_cause[pure[p].cause], 40);
        assert_true(fabs(r->gpu_late_us_p50 - 2000) < 1);
        assert_true(fabs(r->host_late_us_p50 - (pure[p].c == 'h' ? 2000 : 0)) < 1);
        if (pure[p].c == 'c') {
            assert_int_equal(r->held_op, CP_OP_ALLGATHER);
            assert_int_equal(r->held_comm_id, 0x601);
            assert_int_equal(r->held_nranks, 1);
        } else {
            assert_int_equal(r->held_op, 0);
        }
        for (size_t i = 0; i < x.mt.nops; i++)
            if (x.s.op_late_rank_idx[i] >= 0)
                assert_int_equal(x.s.op_cause[i], pure[p].cause);
        res_free(&x);
        job_free(&j);
    }
    /* half host, half GPU backlog: a mix, with both shares */
    for (int i = 0; i < 40; i++)
        how[i] = i % 2 ? 'h' : 'b';
    tjob j;
    res x;
    causes_job(how, &x, &j);
    assert_int_equal(x.s.rows[0].cause, CPA_CAUSE_MIXED);
    assert_int_equal(x.s.rows[0].by_cause[CPA_CAUSE_HOST], 20);
    assert_int_equal(x.s.rows[0].by_cause[CPA_CAUSE_BACKLOG], 20);
    res_free(&x);
    job_free(&j);
    assert_string_equal(cpa_late_cause_name(CPA_CAUSE_COLLECTIVE), "in_collective");
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

    /* the same turns over 16 collectives only: a burst, too few to call a rotation */
    job_open(&j, 4, h, host_of);
    job_comm(&j, 0, 0x702, all8, 4);
    for (int i = 0; i < 16; i++) {
        double t = 1 * MS + i * 10 * MS, arr[4] = {t, t, t, t};
        arr[i % 3] += 3 * MS;
        job_coll(&j, 0, all8, 4, CP_OP_ALLREDUCE, arr, NULL, t + 3.4 * MS, 1);
    }
    job_close(&j, 300 * MS);
    analyze(&j, &x);
    assert_int_equal(x.s.late, 16);
    assert_int_equal(x.s.kind, CPA_STRAGGLER_NONE);
    assert_int_equal(x.s.nrows, 0);
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

/* Lateness is the latest arrival against the others' median, judged right at the half: rank
 * 6 comes 3 ms after five ranks, and three (even operations) or four (odd) of the other
 * seven come 0.5 ms before it. Three near it leave the median gap 3 ms: late; four make it
 * 0.5 ms: not late (fails when the count that skips the median is off by one). */
static void lateness_is_against_the_median_at_the_half(void **state)
{
    (void)state;
    static const thost h[] = {{"a", 1000000000000ull, 0, 0, 1}};
    static const int host_of[8] = {0};
    tjob j;
    job_open(&j, 8, h, host_of);
    job_comm(&j, 0, 0x601, all8, 8);
    for (int i = 0; i < 20; i++) {
        double t = 1 * MS + i * 10 * MS, arr[8];
        for (int k = 0; k < 8; k++)
            arr[k] = t;
        arr[6] += 3 * MS;
        arr[4] = arr[5] = arr[7] = t + 2.5 * MS;
        if (i % 2)
            arr[3] = t + 2.5 * MS;
        job_coll(&j, 0, all8, 8, CP_OP_ALLREDUCE, arr, NULL, t + 3.5 * MS, 1);
    }
    job_close(&j, 300 * MS);
    res x;
    analyze(&j, &x);
    assert_int_equal(x.s.judged, 20);
    assert_int_equal(x.s.late, 10);
    for (size_t i = 0; i < x.mt.nops; i++) {
        int seq = (int)x.mt.ops[i].seq;
        if (seq % 2) {
            assert_int_equal(x.s.op_late_rank_idx[i], -1);
        } else {
            assert_true(x.s.op_late_rank_idx[i] >= 0);
            assert_int_equal(x.m->ranks[x.s.op_late_rank_idx[i]].rank, 6);
            assert_true(fabs(x.s.op_late_us[i] - 3000) < 0.01);
        }
    }
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
        cmocka_unit_test(persistent_straggler),
        cmocka_unit_test(rotating_straggler),
        cmocka_unit_test(each_cause_is_told_and_a_mix_is_a_mix),
        cmocka_unit_test(long_durations_do_not_make_a_straggler),
        cmocka_unit_test(lateness_is_against_the_median_at_the_half),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
