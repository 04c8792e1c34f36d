/* Matching calls across ranks into operations (analyzer/match.c), over analyzer_job.h's job
 * and files written for each case: both of matching's ways (by counting, by sorting) and
 * the loader's census checked against a plain walk for every job. */
#include "tests/analyzer/analyzer_job.h"

/* Every operation of the job has all its ranks, in rank order, with GPU arrival times. */
static void test_match_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    write_job(dir);
    cpa_model *m = load_or_fail(dir);
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_int_equal(mt.nops, N_AR + N_AG + 1);
    assert_int_equal(mt.unmatchable, 0);
    assert_int_equal(mt.nparts, NRANKS * (N_AR + N_AG) + 2);
    assert_index_consistent(m, &mt);
    for (size_t i = 0; i < N_AR + N_AG; i++) {
        const cpa_op *o = &mt.ops[i];
        assert_int_equal(o->comm_id, COMM_ID);
        assert_int_equal(o->seq, i);
        assert_int_equal(o->op, i < N_AR ? CP_OP_ALLREDUCE : CP_OP_ALLGATHER);
        assert_int_equal(o->nparts, NRANKS);
        assert_int_equal(o->nranks, NRANKS);
        assert_true(o->complete);
        assert_int_equal(o->sender, -1);
        uint64_t start = i < N_AR ? ar_start((int)i) : ag_start((int)(i - N_AR));
        uint64_t len = i < N_AR ? 10000 : 20000;
        for (uint32_t k = 0; k < NRANKS; k++) {
            const cpa_part *p = &mt.parts[o->first_part + k];
            assert_int_equal(m->ranks[p->rank_idx].rank, k);
            assert_int_equal(m->ranks[p->rank_idx].calls[p->call_idx].seq, i);
            assert_int_equal(p->arrival_ns, start);
            assert_int_equal(p->end_ns, start + len);
        }
    }
    const cpa_op *o = &mt.ops[N_AR + N_AG];
    assert_int_equal(o->op, CP_OP_SEND);
    assert_int_equal(o->sender, 0);
    assert_int_equal(o->receiver, 1);
    assert_int_equal(o->nparts, 2);
    assert_true(o->complete);
    const cpa_part *send = &mt.parts[o->first_part];
    assert_int_equal(m->ranks[send->rank_idx].calls[send->call_idx].op, CP_OP_SEND);
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* Sequence numbers too sparse to count by (a hostile file) take the sorting path: the same
 * operations, and call_op written for them all. */
static void test_match_sparse_sequences(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 2, r);
        for (int i = 0; i < 3; i++)
            put_call(w, CP_OP_ALLREDUCE, (uint64_t)i * 1000000000000ull, 8, 0,
                     BASE_NS + (uint64_t)(i * 100 + r), 0);
        put_call(w, r == 0 ? CP_OP_SEND : CP_OP_RECV, 0, 16, 1 - r, BASE_NS + 5000, 0);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_model *m = load_or_fail(dir);
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_index_consistent(m, &mt);
    assert_int_equal(mt.nops, 3 + 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mt.ops[i].seq, (uint64_t)i * 1000000000000ull);
        assert_int_equal(mt.ops[i].nparts, 2);
    }
    assert_int_equal(mt.ops[3].op, CP_OP_SEND);
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* A comm index past the loader's direct table (64) is found by searching the rank's
 * records: its calls still have their communicator and match. */
static void test_comm_index_past_the_table(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 100, COMM_ID, 2, r);
        put_comm(w, 3, COMM_ID + 1, 2, 1 - r);
        for (int i = 0; i < 3; i++) {
            cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = CP_OP_ALLREDUCE, .dtype = F32,
                             .redop = 0, .comm_index = i == 1 ? 3 : 100,
                             .site_index = UINT32_MAX, .seq = (uint64_t)(i == 2), .count = 8,
                             .stream = 1, .enter_ns = BASE_NS + (uint64_t)i * 100, .host_ns = 10,
                             .peer = -1};
            assert_int_equal(cp_trace_writer_append(w, &c), 0);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_model *m = load_or_fail(dir);
    for (size_t ri = 0; ri < m->nranks; ri++) {
        const cpa_rank *k = &m->ranks[ri];
        assert_int_equal(cpa_call_comm_id(k, &k->calls[0]), COMM_ID);
        assert_int_equal(cpa_call_comm_rank(k, &k->calls[0]), k->rank);
        assert_int_equal(cpa_call_comm_id(k, &k->calls[1]), COMM_ID + 1);
        assert_int_equal(cpa_call_comm_rank(k, &k->calls[1]), 1 - k->rank);
        assert_int_equal(cpa_call_nranks(k, &k->calls[2]), 2);
    }
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_index_consistent(m, &mt);
    assert_int_equal(mt.nops, 3);
    for (size_t i = 0; i < mt.nops; i++) {
        assert_int_equal(mt.ops[i].nparts, 2);
        assert_true(mt.ops[i].complete);
    }
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* Untimed calls arrive at their host entry; a rank that never joined leaves its operation
 * incomplete; sends and receives between the same two ranks pair by direction, whatever
 * order each rank issued them in. */
static void test_match_partial_and_p2p(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 2, r);
        for (int i = 0; i < 3; i++)
            if (!(r == 1 && i == 2))
                put_call(w, CP_OP_BROADCAST, (uint64_t)i, 8, 0,
                         BASE_NS + (uint64_t)(i * 100 + r), 0);
        uint8_t first = r == 0 ? CP_OP_SEND : CP_OP_RECV;
        uint8_t second = r == 0 ? CP_OP_RECV : CP_OP_SEND;
        put_call(w, first, 0, 16, 1 - r, BASE_NS + 5000, 0);
        put_call(w, second, 0, 32, 1 - r, BASE_NS + 6000, 0);
        put_call(w, CP_OP_SEND, CPA_SEQ_NONE, 16, 1 - r, BASE_NS + 7000, 0); /* failed call */
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_model *m = load_or_fail(dir);
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_index_consistent(m, &mt);
    assert_int_equal(mt.unmatchable, 2);
    assert_int_equal(mt.nops, 3 + 2);
    for (int i = 0; i < 3; i++) {
        const cpa_op *o = &mt.ops[i];
        assert_int_equal(o->op, CP_OP_BROADCAST);
        assert_int_equal(o->nparts, i == 2 ? 1 : 2);
        assert_int_equal(o->complete, i != 2);
        const cpa_part *p = &mt.parts[o->first_part];
        assert_int_equal(p->arrival_ns, BASE_NS + (uint64_t)(i * 100));
        assert_int_equal(p->end_ns, BASE_NS + (uint64_t)(i * 100) + 3000);
    }
    for (int i = 0; i < 2; i++) {
        const cpa_op *o = &mt.ops[3 + i];
        assert_int_equal(o->op, CP_OP_SEND);
        assert_int_equal(o->sender, i);
        assert_int_equal(o->receiver, 1 - i);
        assert_int_equal(o->nparts, 2);
        assert_true(o->complete);
        /* Both sides of one pair carry the same count: the pairing is right. */
        const cpa_part *p = &mt.parts[o->first_part];
        const cpa_call *a = &m->ranks[p[0].rank_idx].calls[p[0].call_idx];
        const cpa_call *b = &m->ranks[p[1].rank_idx].calls[p[1].call_idx];
        assert_int_equal(a->op, CP_OP_SEND);
        assert_int_equal(b->op, CP_OP_RECV);
        assert_int_equal(a->count, i == 0 ? 16 : 32);
        assert_int_equal(b->count, a->count);
    }
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_job),
        cmocka_unit_test(test_match_sparse_sequences),
        cmocka_unit_test(test_comm_index_past_the_table),
        cmocka_unit_test(test_match_partial_and_p2p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
