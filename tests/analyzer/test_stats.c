/* The statistics (analyzer/stats.c): rows, sizes, bandwidths and percentiles of
 * analyzer_job.h's job and of files written for each case, against figures worked out by
 * hand; the bus bandwidth formulas; sizes no trace can hold. */
#include "tests/analyzer/analyzer_job.h"

#include <math.h>

static void assert_close(double got, double want)
{
    if (fabs(got - want) > 1e-9 * fabs(want) + 1e-12)
        fail_msg("got %.12g, want %.12g", got, want);
}

static const cpa_stat *find_row(const cpa_stats *st, unsigned op, uint64_t size)
{
    for (size_t i = 0; i < st->nrows; i++)
        if (st->rows[i].op == op && st->rows[i].size == size)
            return &st->rows[i];
    fail_msg("no row for %s size %llu", cp_op_name(op), (unsigned long long)size);
    return NULL;
}

/* The job's figures, worked out by hand:
 *   AllReduce 1 MiB in 10 us: algbw 1048576 B / 10 us = 104.8576 GB/s, busbw x 2(3)/4 =
 *   157.2864; AllGather 65536 float32 per rank on 4 ranks: S = 1 MiB, 20 us: 52.4288 and
 *   x 3/4 = 39.3216; Send/Recv 4096 B in 2 us: 2.048 both. */
/* The statistics of the trace in dir (loaded and matched here, then let go: rows stand alone). */
static void stats_of(const char *dir, cpa_rows kind, cpa_stats *st)
{
    cpa_model *m = load_or_fail(dir);
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_index_consistent(m, &mt);
    assert_int_equal(cpa_stats_compute(m, &mt, kind, st, err, sizeof err), 0);
    assert_int_equal(st->kind, kind);
    cpa_matched_free(&mt);
    cpa_model_free(m);
}

/* One timed call and its DONE on communicator comm_index: 10 us on the GPU. */
static void put_timed_in(cp_trace_writer *w, uint32_t comm_index, uint8_t op, uint64_t seq,
                         uint64_t count, int root)
{
    uint64_t t = BASE_NS + seq * 1000000 + comm_index * 100000000ull;
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = F32,
                     .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE, .flags = CP_CALL_TIMED,
                     .comm_index = comm_index, .site_index = UINT32_MAX, .seq = seq,
                     .count = count, .stream = 1, .enter_ns = t, .host_ns = 3000, .peer = root};
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = comm_index, .seq = seq,
                     .gpu_start_ns = t + 1000, .gpu_end_ns = t + 11000, .peer = root,
                     .op = op, .timing = CP_TIMING_EVENTS};
    assert_int_equal(cp_trace_writer_append(w, &d), 0);
}

static void test_stats_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    write_job(dir);
    cpa_stats st;
    stats_of(dir, CPA_ROWS_EXACT, &st);
    assert_int_equal(st.nrows, 3);
    assert_int_equal(st.rows[0].op, CP_OP_ALLREDUCE);
    assert_int_equal(st.rows[1].op, CP_OP_ALLGATHER);
    assert_int_equal(st.rows[2].op, CP_OP_SEND);

    const cpa_stat *ar = find_row(&st, CP_OP_ALLREDUCE, MIB);
    assert_int_equal(ar->nranks, 4);
    assert_int_equal(ar->ops, N_AR);
    assert_int_equal(ar->calls, 4 * N_AR);
    assert_int_equal(ar->dtype, F32);
    assert_int_equal(ar->redop, 0);
    assert_int_equal(ar->root, CPA_ROOT_NONE);
    assert_int_equal(ar->bytes, N_AR * MIB);
    assert_close(ar->time_us_p50, 10.0);
    assert_close(ar->time_us_p99, 10.0);
    assert_close(ar->time_us_total, 1000.0);
    assert_close(ar->algbw_gbps, 104.8576);
    assert_close(ar->busbw_gbps, 157.2864);

    const cpa_stat *ag = find_row(&st, CP_OP_ALLGATHER, MIB);
    assert_int_equal(ag->ops, N_AG);
    assert_int_equal(ag->redop, CP_REDOP_NONE);
    assert_int_equal(ag->bytes, N_AG * MIB);
    assert_close(ag->time_us_p50, 20.0);
    assert_close(ag->algbw_gbps, 52.4288);
    assert_close(ag->busbw_gbps, 39.3216);

    const cpa_stat *p2p = find_row(&st, CP_OP_SEND, 4096);
    assert_int_equal(p2p->ops, 1);
    assert_int_equal(p2p->calls, 2);
    assert_int_equal(p2p->bytes, 4096);
    assert_close(p2p->time_us_p50, 2.0);
    assert_close(p2p->algbw_gbps, 2.048);
    assert_close(p2p->busbw_gbps, 2.048);
    cpa_stats_free(&st);
    tt_rmtree(dir);
    free(dir);
}

/* Percentiles by nearest rank over durations 1..100 us (p50 = 50, p99 = 99); an operation
 * still in flight (timed, no DONE) is left out; an untimed one counts with its host time;
 * sizes as they are, or in power-of-two buckets when asked (6000 B -> 4096). */
static void test_stats_percentiles(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    uint64_t sum_ns = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t start = BASE_NS + (uint64_t)i * 1000000, len = (uint64_t)(100 - i) * 1000;
        put_call(w, CP_OP_REDUCE, (uint64_t)i, i % 2 ? 1024 : 1500, 0, start - 10, 1);
        put_done(w, CP_OP_REDUCE, (uint64_t)i, 0, start, start + len);
        sum_ns += len;
    }
    put_call(w, CP_OP_REDUCE, 100, 1024, 0, BASE_NS + 200000000ull, 1); /* in flight */
    put_call(w, CP_OP_REDUCE, 101, 1, 0, BASE_NS + 200000000ull, 0);    /* untimed */
    assert_int_equal(cp_trace_writer_close(w), 0);

    cpa_stats st;
    stats_of(dir, CPA_ROWS_EXACT, &st);
    assert_int_equal(st.nrows, 3);
    assert_int_equal(find_row(&st, CP_OP_REDUCE, 4096)->ops, 50);
    assert_int_equal(find_row(&st, CP_OP_REDUCE, 6000)->ops, 50);
    assert_int_equal(find_row(&st, CP_OP_REDUCE, 6000)->root, 0);
    assert_int_equal(find_row(&st, CP_OP_REDUCE, 6000)->dtype, F32);
    cpa_stats_free(&st);

    stats_of(dir, CPA_ROWS_BUCKETS, &st);
    assert_int_equal(st.nrows, 2);
    const cpa_stat *small = find_row(&st, CP_OP_REDUCE, 4);
    assert_int_equal(small->ops, 1);
    assert_close(small->time_us_p50, 3.0);
    const cpa_stat *r = find_row(&st, CP_OP_REDUCE, 4096);
    assert_int_equal(r->ops, 100);
    assert_int_equal(r->bytes, 50 * 4096 + 50 * 6000);
    assert_close(r->time_us_p50, 50.0);
    assert_close(r->time_us_p99, 99.0);
    assert_close(r->algbw_gbps, (50.0 * 4096 + 50.0 * 6000) / (double)sum_ns);
    assert_close(r->busbw_gbps, r->algbw_gbps); /* Reduce: factor 1 */
    cpa_stats_free(&st);
    tt_rmtree(dir);
    free(dir);
}

/* A straggler must not lower the bandwidth: the early ranks' GPU durations hold their wait
 * for it; the op's time is the duration of the rank that arrived last (the shortest). */
static void test_stats_time_of_the_last_arrival(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 4; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 4, r);
        for (int i = 0; i < 10; i++) {
            uint64_t end = BASE_NS + (uint64_t)(i + 1) * 10000000ull;
            /* rank 3 arrives 2 ms after the others; the transfer takes 100 us */
            uint64_t start = end - 100000 - (r == 3 ? 0 : 2000000);
            put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, MIB / 4, -1, start - 500, 1);
            put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, start, end);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_stats st;
    stats_of(dir, CPA_ROWS_EXACT, &st);
    const cpa_stat *ar = find_row(&st, CP_OP_ALLREDUCE, MIB);
    assert_non_null(ar);
    assert_close(ar->time_us_p50, 100.0);
    assert_close(ar->algbw_gbps, (double)MIB / 100000.0);
    assert_close(ar->busbw_gbps, ar->algbw_gbps * 1.5);
    cpa_stats_free(&st);
    tt_rmtree(dir);
    free(dir);
}

/* A group's members each carry the whole group's span (NCCL launches the group at once): a
 * member's time is its share of the span by bus bytes, sends and receives apart, so a group of
 * four AllGathers is not reported at a quarter of the bandwidth it reached. */
static void test_stats_grouped_calls_share_the_span(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    const uint8_t grouped = CP_CALL_TIMED | CP_CALL_IN_GROUP;
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 2, r);
        for (int grp = 0; grp < 5; grp++) {
            uint64_t t0 = BASE_NS + (uint64_t)grp * 1000000;
            /* four AllGathers of 1 MiB each (512 KiB per rank), one launch of 80 us: 20 us
             * each */
            for (int k = 0; k < 4; k++)
                put_call_flags(w, CP_OP_ALLGATHER, (uint64_t)(grp * 4 + k), MIB / 8, -1,
                               t0 + (uint64_t)k * 100, grouped);
            for (int k = 0; k < 4; k++)
                put_done(w, CP_OP_ALLGATHER, (uint64_t)(grp * 4 + k), -1, t0 + 1000,
                         t0 + 81000);
            /* then a group of one send and one receive of 1 MiB each way, 100 us */
            uint64_t t1 = t0 + 500000;
            put_call_flags(w, CP_OP_SEND, (uint64_t)grp, MIB / 4, 1 - r, t1, grouped);
            put_call_flags(w, CP_OP_RECV, (uint64_t)grp, MIB / 4, 1 - r, t1 + 100, grouped);
            put_done(w, CP_OP_SEND, (uint64_t)grp, 1 - r, t1 + 1000, t1 + 101000);
            put_done(w, CP_OP_RECV, (uint64_t)grp, 1 - r, t1 + 1000, t1 + 101000);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_stats st;
    stats_of(dir, CPA_ROWS_EXACT, &st);
    const cpa_stat *ag = find_row(&st, CP_OP_ALLGATHER, MIB);
    assert_non_null(ag);
    assert_int_equal(ag->ops, 20);
    assert_int_equal(ag->calls, 40);
    assert_close(ag->time_us_p50, 20.0);
    assert_close(ag->busbw_gbps, (double)MIB * 0.5 / 20000.0);
    const cpa_stat *p2p = find_row(&st, CP_OP_SEND, MIB);
    assert_non_null(p2p);
    assert_close(p2p->time_us_p50, 100.0); /* both directions at once: not 50 us */
    assert_close(p2p->busbw_gbps, (double)MIB / 100000.0);
    cpa_stats_free(&st);
    tt_rmtree(dir);
    free(dir);
}

/* Rows are (op, communicator size, exact S): a 25 MiB and a 21.5 MiB AllReduce are two rows
 * (one 16 MiB bucket when buckets are asked for), the same 25 MiB on a 2-rank and an 8-rank
 * communicator are two rows, and nccl-tests' cut also splits Broadcasts by root. */
static void test_stats_rows_by_comm_size_and_exact_size(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    const uint64_t big = 25 * MIB / 4, smaller = 43 * MIB / 8; /* float32 counts */
    for (int r = 0; r < 8; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 8, r);
        put_timed_in(w, 0, CP_OP_ALLREDUCE, 0, big, -1);
        put_timed_in(w, 0, CP_OP_ALLREDUCE, 1, smaller, -1);
        put_timed_in(w, 0, CP_OP_BROADCAST, 2, 1024, 0);
        put_timed_in(w, 0, CP_OP_BROADCAST, 3, 1024, 3);
        if (r < 2) {
            put_comm(w, 1, COMM_ID + 1, 2, r);
            put_timed_in(w, 1, CP_OP_ALLREDUCE, 0, big, -1);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_stats st;
    stats_of(dir, CPA_ROWS_EXACT, &st);
    assert_int_equal(st.nrows, 4);
    /* sorted by op, then communicator size, then S */
    assert_int_equal(st.rows[0].op, CP_OP_ALLREDUCE);
    assert_int_equal(st.rows[0].nranks, 2);
    assert_int_equal(st.rows[0].size, 25 * MIB);
    assert_int_equal(st.rows[0].calls, 2);
    assert_close(st.rows[0].busbw_gbps, 25.0 * MIB / 10000.0 * 1.0);
    assert_int_equal(st.rows[1].nranks, 8);
    assert_int_equal(st.rows[1].size, 43 * MIB / 2);
    assert_int_equal(st.rows[2].nranks, 8);
    assert_int_equal(st.rows[2].size, 25 * MIB);
    assert_int_equal(st.rows[2].calls, 8);
    assert_close(st.rows[2].busbw_gbps, 25.0 * MIB / 10000.0 * 1.75);
    assert_int_equal(st.rows[3].op, CP_OP_BROADCAST);
    assert_int_equal(st.rows[3].ops, 2);
    assert_int_equal(st.rows[3].root, CPA_ROOT_MIXED);
    cpa_stats_free(&st);

    stats_of(dir, CPA_ROWS_BUCKETS, &st);
    assert_int_equal(st.nrows, 3);
    assert_int_equal(st.rows[1].nranks, 8);
    assert_int_equal(st.rows[1].size, 16 * MIB);
    assert_int_equal(st.rows[1].ops, 2);
    assert_int_equal(st.rows[1].bytes, 25 * MIB + 43 * MIB / 2);
    cpa_stats_free(&st);

    stats_of(dir, CPA_ROWS_NCCL_TESTS, &st);
    assert_int_equal(st.nrows, 5);
    assert_int_equal(st.rows[3].op, CP_OP_BROADCAST);
    assert_int_equal(st.rows[3].root, 0);
    assert_int_equal(st.rows[4].root, 3);
    assert_int_equal(st.rows[4].ops, 1);
    cpa_stats_free(&st);
    tt_rmtree(dir);
    free(dir);
}

static void test_formulas(void **state)
{
    (void)state;
    assert_int_equal(cpa_op_bytes(CP_OP_ALLREDUCE, 1000, F32, 8), 4000);
    assert_int_equal(cpa_op_bytes(CP_OP_BROADCAST, 1000, F32, 8), 4000);
    assert_int_equal(cpa_op_bytes(CP_OP_REDUCE, 1000, 8, 8), 8000);
    assert_int_equal(cpa_op_bytes(CP_OP_SEND, 1000, F32, 8), 4000);
    static const unsigned times_n[] = {CP_OP_ALLGATHER, CP_OP_REDUCESCATTER, CP_OP_ALLTOALL,
                                       CP_OP_GATHER, CP_OP_SCATTER};
    for (size_t i = 0; i < sizeof times_n / sizeof *times_n; i++) {
        assert_int_equal(cpa_op_bytes(times_n[i], 1000, 6, 8), 16000);
        assert_close(cpa_busbw_factor(times_n[i], 8), 7.0 / 8);
    }
    assert_close(cpa_busbw_factor(CP_OP_ALLREDUCE, 8), 14.0 / 8);
    assert_close(cpa_busbw_factor(CP_OP_BROADCAST, 8), 1.0);
    assert_close(cpa_busbw_factor(CP_OP_REDUCE, 8), 1.0);
    assert_close(cpa_busbw_factor(CP_OP_SEND, 2), 1.0);
    assert_int_equal(cpa_op_bytes(CP_OP_ALLREDUCE, 5, CP_DTYPE_UNKNOWN, 8), 0);
}

/* Sizes and counts no trace can hold: an AllReduce of 2^62 float32 (S past 2^64 bytes) is
 * left out of the statistics and counted, where it used to wrap to a 0-byte row; forged
 * LOST counts saturate rather than wrap back to a small, believable total. */
static void test_impossible_sizes_and_counts(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 0);
        put_comm(w, 0, COMM_ID, 2, r);
        put_call(w, CP_OP_ALLREDUCE, 0, 1ull << 62, -1, BASE_NS, 1);
        put_done(w, CP_OP_ALLREDUCE, 0, -1, BASE_NS + 1000, BASE_NS + 11000);
        put_call(w, CP_OP_ALLREDUCE, 1, 1024, -1, BASE_NS + 100000, 1);
        put_done(w, CP_OP_ALLREDUCE, 1, -1, BASE_NS + 101000, BASE_NS + 111000);
        cp_rec_lost l = {.h = {CP_REC_LOST, sizeof l}, .cause = CP_LOST_RING_FULL,
                         .count = 1ull << 63, .at_ns = BASE_NS};
        assert_int_equal(cp_trace_writer_append(w, &l), 0);
        assert_int_equal(cp_trace_writer_append(w, &l), 0);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_model *m = load_or_fail(dir);
    assert_true(m->ranks[0].lost_records == UINT64_MAX);
    assert_true(m->lost_records == UINT64_MAX);
    cpa_matched mt;
    cpa_stats st;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    assert_int_equal(cpa_stats_compute(m, &mt, CPA_ROWS_EXACT, &st, err, sizeof err), 0);
    assert_int_equal(st.oversized, 1);
    assert_int_equal(st.nrows, 1);
    assert_int_equal(st.rows[0].size, 4096);
    assert_int_equal(st.rows[0].bytes, 4096);
    assert_int_equal(st.rows[0].ops, 1);
    assert_int_equal(st.rows[0].calls, 2);
    cpa_stats_free(&st);
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);

    assert_true(cpa_elem_bytes(1ull << 62, F32) == UINT64_MAX);
    assert_true(cpa_elem_bytes(1ull << 61, F32) == 1ull << 63);
    assert_true(cpa_op_bytes(CP_OP_ALLGATHER, 1ull << 60, F32, 8) == UINT64_MAX);
    assert_true(cpa_op_bytes(CP_OP_ALLGATHER, 1u << 20, F32, INT32_MAX) ==
                (4ull << 20) * INT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_job),
        cmocka_unit_test(test_stats_percentiles),
        cmocka_unit_test(test_stats_time_of_the_last_arrival),
        cmocka_unit_test(test_stats_grouped_calls_share_the_span),
        cmocka_unit_test(test_stats_rows_by_comm_size_and_exact_size),
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_impossible_sizes_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
