/* Stragglers over synthetic traces (clock_job.h): persistent and rotating late ranks,
 * never called from durations alone. */
#include "tests/analyzer/clock_job.h"

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
        cmocka_unit_test(long_durations_do_not_make_a_straggler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
