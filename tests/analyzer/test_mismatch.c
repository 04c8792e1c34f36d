/* Mismatches over synthetic traces (hang_job.h): op, count, dtype, redop, root and peer, the
 * minority culprit, call sites; none on healthy jobs or stalled pipelines. */
#include "tests/analyzer/hang_job.h"

/* Collectives of every kind on a world comm and a split comm, and a send/recv ring. */
static void test_healthy(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        put_comm(&j, r, 1, SUB + (uint64_t)(r & 1), NR / 2, r / 2);
        uint64_t s = 0;
        put_call(&j, r, allreduce(0, s++), 1);
        put_call(&j, r, (callspec){0, CP_OP_BROADCAST, s++, 64, F32, CP_REDOP_NONE, 3}, 1);
        put_call(&j, r, (callspec){0, CP_OP_REDUCE, s++, 64, F16, MAX, 0}, 1);
        put_call(&j, r, (callspec){0, CP_OP_ALLGATHER, s++, 8, F32, CP_REDOP_NONE, -1}, 1);
        put_call(&j, r, (callspec){0, CP_OP_SEND, 0, 32, F32, CP_REDOP_NONE, (r + 1) % NR}, 1);
        put_call(&j, r, (callspec){0, CP_OP_RECV, 0, 32, F32, CP_REDOP_NONE, (r + NR - 1) % NR},
                 1);
        for (uint64_t k = 0; k < 3; k++)
            put_call(&j, r, allreduce(1, k), 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 0);
    assert_int_equal(res.x.nrows, 0);
    assert_int_equal(res.x.total, 0);
    done_with(&j, &res);
}

static const cpa_mismatch *row_at(const result *res, uint64_t seq, int field)
{
    for (size_t i = 0; i < res->x.nrows; i++)
        if (res->x.rows[i].seq == seq && res->x.rows[i].field == field)
            return &res->x.rows[i];
    fail_msg("no %s mismatch at seq %llu", cpa_field_name(field), (unsigned long long)seq);
    return NULL;
}

static void assert_values(const cpa_mismatch *x, const int64_t *want)
{
    assert_int_equal(x->nvalues, 4);
    for (size_t i = 0; i < 4; i++) {
        char site[96];
        snprintf(site, sizeof site, "train_step+0x%x (site-%d) < main+0x10 (sim)", 16 * (int)i,
                 (int)i);
        assert_int_equal(x->values[i].rank, (int32_t)i);
        assert_int_equal(x->values[i].value, want[i]);
        assert_non_null(x->values[i].site);
        assert_string_equal(x->values[i].site, site);
    }
}

/* One field wrong on one rank at each seq; a 2-vs-2 tie at the last. */
static void test_collective_mismatches(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        put_call(&j, r, (callspec){0, CP_OP_ALLREDUCE, 0, r == 2 ? 7 : 1024, F32, SUM, -1}, 1);
        put_call(&j, r, (callspec){0, CP_OP_ALLREDUCE, 1, 1024, r == 3 ? F16 : F32, SUM, -1}, 1);
        put_call(&j, r, (callspec){0, CP_OP_BROADCAST, 2, 64, F32, CP_REDOP_NONE, r == 1}, 1);
        put_call(&j, r, (callspec){0, r == 0 ? CP_OP_ALLGATHER : CP_OP_ALLREDUCE, 3, 256, F32,
                                   r == 0 ? CP_REDOP_NONE : SUM, -1}, 1);
        put_call(&j, r, (callspec){0, CP_OP_ALLREDUCE, 4, 256, F32, r == 3 ? MAX : SUM, -1}, 1);
        put_call(&j, r, (callspec){0, CP_OP_ALLREDUCE, 5, r < 2 ? 100 : 200, F32, SUM, -1}, 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 0);
    assert_int_equal(res.x.nrows, 6);
    assert_int_equal(res.x.total, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(res.x.rows[i].comm_id, WORLD);
        assert_int_equal(res.x.rows[i].seq, i); /* sorted by (comm, seq) */
    }
    const cpa_mismatch *x = row_at(&res, 0, CPA_FIELD_COUNT);
    assert_values(x, (const int64_t[]){1024, 1024, 7, 1024});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(2));
    x = row_at(&res, 1, CPA_FIELD_DTYPE);
    assert_values(x, (const int64_t[]){F32, F32, F32, F16});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(3));
    x = row_at(&res, 2, CPA_FIELD_ROOT);
    assert_values(x, (const int64_t[]){0, 1, 0, 0});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(1));
    x = row_at(&res, 3, CPA_FIELD_OP);
    assert_values(x, (const int64_t[]){CP_OP_ALLGATHER, CP_OP_ALLREDUCE, CP_OP_ALLREDUCE,
                                       CP_OP_ALLREDUCE});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(0));
    x = row_at(&res, 4, CPA_FIELD_REDOP);
    assert_values(x, (const int64_t[]){SUM, SUM, SUM, MAX});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(3));
    x = row_at(&res, 5, CPA_FIELD_COUNT);
    assert_values(x, (const int64_t[]){100, 100, 200, 200});
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(2, 3));
    assert_string_equal(cpa_field_name(CPA_FIELD_REDOP), "redop");
    assert_string_equal(cpa_field_name(CPA_FIELD_PEER), "peer");
    done_with(&j, &res);
}

/* A send of 1024 received as 512. */
static void test_p2p_count_mismatch(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 2);
    for (int r = 0; r < 2; r++) {
        put_comm(&j, r, 0, WORLD, 2, r);
        put_call(&j, r, (callspec){0, r ? CP_OP_RECV : CP_OP_SEND, 0, r ? 512 : 1024, F32,
                                   CP_REDOP_NONE, !r}, 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.x.nrows, 1);
    const cpa_mismatch *x = &res.x.rows[0];
    assert_int_equal(x->field, CPA_FIELD_COUNT);
    assert_int_equal(x->nvalues, 2);
    assert_int_equal(x->values[0].rank, 0);
    assert_int_equal(x->values[0].value, 1024);
    assert_int_equal(x->values[1].rank, 1);
    assert_int_equal(x->values[1].value, 512);
    assert_string_equal(x->values[1].site, "train_step+0x10 (site-1) < main+0x10 (sim)");
    assert_ranks(x->culprit_ranks, x->nculprits, RANKS(1));
    assert_int_equal(res.h.nrows, 0);
    done_with(&j, &res);
}

/* A pipeline 0 -> 1 -> 2 -> 3: rank 1 sends to 3 instead of 2 (sender wrong), or rank 2
 * receives from 0 instead of 1 (receiver wrong). */
static void test_peer_mismatch(void **state)
{
    (void)state;
    for (int wrong = 1; wrong <= 2; wrong++) {
        job j;
        result res;
        job_open(&j, 4);
        for (int r = 0; r < 4; r++) {
            put_comm(&j, r, 0, WORLD, 4, r);
            int from = r - 1, to = r + 1;
            if (wrong == 2 && r == 2)
                from = 0;
            if (wrong == 1 && r == 1)
                to = 3;
            if (r > 0)
                put_call(&j, r, (callspec){0, CP_OP_RECV, 0, 64, F32, CP_REDOP_NONE, from}, 0);
            /* Rank 2's receive never comes, so it never sends on to 3. */
            if (r < 2)
                put_call(&j, r, (callspec){0, CP_OP_SEND, 0, 64, F32, CP_REDOP_NONE, to}, 0);
        }
        analyze(&j, &res);
        size_t peers = 0;
        const cpa_mismatch *x = NULL;
        for (size_t i = 0; i < res.x.nrows; i++)
            if (res.x.rows[i].field == CPA_FIELD_PEER) {
                peers++;
                x = &res.x.rows[i];
            }
        assert_int_equal(peers, 1);
        assert_int_equal(res.x.total, 1);
        assert_int_equal(x->nvalues, 2);
        if (wrong == 1) {
            /* 1 sent to 3 what 2 waits for. */
            assert_int_equal(x->values[0].rank, 1);
            assert_int_equal(x->values[0].value, 3);
            assert_int_equal(x->values[1].rank, 2);
            assert_int_equal(x->values[1].value, 1);
            assert_ranks(x->culprit_ranks, x->nculprits, RANKS(1));
        } else {
            /* 1 sent to 2; 2 listens to 0. */
            assert_int_equal(x->values[0].rank, 1);
            assert_int_equal(x->values[0].value, 2);
            assert_int_equal(x->values[1].rank, 2);
            assert_int_equal(x->values[1].value, 0);
            assert_ranks(x->culprit_ranks, x->nculprits, RANKS(2));
        }
        done_with(&j, &res);
    }
}

/* A pipeline stalled by a killed rank (2) is no wrong peer: every channel whose message is
 * missing has carried one before. Rank 0 waits for a gradient from 1, which waits on 2. */
static void test_peer_not_for_stall(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        for (uint64_t mb = 0; mb < 2; mb++) {
            if (r == 2 && mb == 1)
                break; /* killed */
            if (r > 0)
                put_call(&j, r, (callspec){0, CP_OP_RECV, mb, 64, F32, CP_REDOP_NONE, r - 1},
                         mb == 0 || r != 3);
            if (r < 3)
                put_call(&j, r, (callspec){0, CP_OP_SEND, mb, 64, F32, CP_REDOP_NONE, r + 1},
                         mb == 0);
        }
        if (r == 0)
            put_call(&j, r, (callspec){0, CP_OP_RECV, 0, 64, F32, CP_REDOP_NONE, 1}, 0);
        if (r != 2)
            put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.x.total, 0);
    /* The hangs: 1 -> 2 (2 killed), 2 -> 3 (3 waits on the dead rank), 1 -> 0 (0 waits on 1,
     * which is held sending to 2). */
    assert_int_equal(res.h.nrows, 3);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(cpa_hang_verdict_name(res.h.rows[i].verdict), "RANK_EXITED");
        assert_ranks(res.h.rows[i].missing_ranks, res.h.rows[i].nmissing, RANKS(2));
    }
    const cpa_hang *h = &res.h.rows[2];
    assert_int_equal(h->op, CP_OP_RECV);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(1));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0));
    assert_non_null(strstr(h->last, "; rank 1 waits in Send seq 1 on comm 9f2c00000000abcd"));
    done_with(&j, &res);
}

/* Past the kept rows, mismatches are still counted; the kept ones are the first seqs. */
static void test_mismatch_cap(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 2);
    for (int r = 0; r < 2; r++) {
        put_comm(&j, r, 0, WORLD, 2, r);
        for (uint64_t s = 0; s < 1500; s++)
            put_call(&j, r, (callspec){0, CP_OP_ALLREDUCE, s, r ? 2 : 1, F32, SUM, -1}, 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.x.total, 1500);
    assert_int_equal(res.x.nrows, 1000);
    assert_int_equal(res.x.rows[0].seq, 0);
    assert_int_equal(res.x.rows[999].seq, 999);
    assert_ranks(res.x.rows[0].culprit_ranks, res.x.rows[0].nculprits, RANKS(1));
    done_with(&j, &res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy),
        cmocka_unit_test(test_collective_mismatches),
        cmocka_unit_test(test_p2p_count_mismatch),
        cmocka_unit_test(test_peer_mismatch),
        cmocka_unit_test(test_peer_not_for_stall),
        cmocka_unit_test(test_mismatch_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
