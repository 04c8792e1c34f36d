/* Hangs over synthetic traces (hang_job.h): ranks not joined, exited or killed, stuck in
 * NCCL, GPU not started, split comms and cascades, point-to-point, missing files. */
#include "tests/analyzer/hang_job.h"

/* The world comm of 8: every rank does AllReduces 0..last, finished up to fin (inclusive). */
static void world_run(job *j, int r, uint64_t last, int64_t fin)
{
    for (uint64_t s = 0; s <= last; s++)
        put_call(j, r, allreduce(0, s), (int64_t)s <= fin);
}

/* Rank 5 never calls seq 5; the others enter it and wait. */
static void write_not_joined(job *j, int rank5_ends)
{
    job_open(j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(j, r, 0, WORLD, NR, r);
        world_run(j, r, r == 5 ? 4 : 5, 4);
        if (r != 5 || rank5_ends)
            put_end(j, r);
    }
}

static void test_rank_not_joined(void **state)
{
    (void)state;
    job j;
    result res;
    write_not_joined(&j, 1);
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->comm_id, WORLD);
    assert_int_equal(h->seq, 5);
    assert_int_equal(h->op, CP_OP_ALLREDUCE);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2, 3, 4, 6, 7));
    assert_string_equal(h->last, "rank 5 last called AllReduce seq 4 on comm "
                                 "9f2c00000000abcd, finished");
    assert_true(h->age_s == 0.0);
    assert_int_equal(res.x.nrows, 0);
    done_with(&j, &res);
}

static void test_rank_exited(void **state)
{
    (void)state;
    job j;
    result res;
    write_not_joined(&j, 0);
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_EXITED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2, 3, 4, 6, 7));
    assert_non_null(strstr(h->last, "AllReduce seq 4"));
    assert_non_null(strstr(h->last, "without END (killed, or unwritable)"));
    done_with(&j, &res);
}

/* A killed rank's file lost its tail (seq 3..6, which the others finished): the hang is where
 * the others stopped finishing, not where its file stops: seq 7, unfinished, or ended after
 * 0.2 s by the dead peer's error (DONEs, but 20000 times the usual 10 us). When the others
 * finished seq 7 as usual (a dead peer's error can come as fast as an operation), it is
 * still the killed rank's exit, named at the last operation, where the job ended. */
static void test_rank_exited_lost_tail(void **state)
{
    (void)state;
    for (int errored = 0; errored < 3; errored++) {
        job j;
        result res;
        job_open(&j, 4);
        for (int r = 0; r < 4; r++) {
            put_comm(&j, r, 0, WORLD, 4, r);
            for (uint64_t s = 0; s <= (r == 2 ? 2u : 7u); s++)
                put_call_dur(&j, r, allreduce(0, s), s <= 6 || errored == 2 ? 10000
                                                     : errored ? 200000000 : 0);
            if (r != 2)
                put_end(&j, r);
        }
        analyze(&j, &res);
        assert_int_equal(res.h.nrows, 1);
        assert_int_equal(res.h.rows[0].seq, 7);
        assert_string_equal(cpa_hang_verdict_name(res.h.rows[0].verdict), "RANK_EXITED");
        assert_ranks(res.h.rows[0].missing_ranks, res.h.rows[0].nmissing, RANKS(2));
        assert_ranks(res.h.rows[0].waiting_ranks, res.h.rows[0].nwaiting, RANKS(0, 1, 3));
        done_with(&j, &res);
    }
}

/* Rank 2 was killed inside seq 5 (called, timed, no DONE, no END) and nobody got further:
 * the others' seq 5 ended anyway (a dead peer's error ends it: DONEs), so there is no laggard
 * and nothing unfinished everywhere; it is still where rank 2 died. */
static void test_killed_inside_others_ended(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        for (uint64_t s = 0; s <= 5; s++)
            put_call_dur(&j, r, allreduce(0, s), r == 2 && s == 5 ? 0 : 10000);
        if (r != 2)
            put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    assert_int_equal(res.h.rows[0].seq, 5);
    assert_string_equal(cpa_hang_verdict_name(res.h.rows[0].verdict), "RANK_EXITED");
    assert_ranks(res.h.rows[0].missing_ranks, res.h.rows[0].nmissing, RANKS(2));
    assert_ranks(res.h.rows[0].waiting_ranks, res.h.rows[0].nwaiting, RANKS(0, 1, 3));
    done_with(&j, &res);
}

/* All called seq 5, none finished, and every rank was killed (the launcher ended a stuck
 * job: the heartbeats say they lived 5 s past it): nobody to blame but NCCL. */
static void test_stuck_in_nccl(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
        put_alive(&j, r, enter_at(r, 5) + 5000000000ull);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "STUCK_IN_NCCL");
    assert_int_equal(h->nmissing, 0);
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2, 3, 4, 5, 6, 7));
    assert_string_equal(h->last, "");
    done_with(&j, &res);
}

/* The same last operation, every rank's DONE for it missing, but every trace lost records
 * after it (a file system that stalled: write_stalled) and ended cleanly: a missing DONE
 * there is no evidence, and no rank is said stuck. */
static void test_stuck_not_judged_on_lost_dones(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
        cp_trace_writer_count_lost(j.w[r], CP_LOST_WRITE_STALLED, 3);
        put_alive(&j, r, enter_at(r, 5) + 5000000000ull);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 0);
    done_with(&j, &res);
}

/* Every rank called seq 5; rank 2 was killed in it (no END) while the others lived on. */
static void test_killed_inside(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        world_run(&j, r, 5, 4);
        if (r != 2)
            put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_EXITED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(2));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 3));
    assert_string_equal(h->last, "rank 2's trace ends without END (killed, or unwritable) in "
                                 "AllReduce seq 5; its last call: AllReduce seq 5 on comm "
                                 "9f2c00000000abcd, not finished");
    done_with(&j, &res);
}

/* Every rank called seq 5, but rank 5's stream never reached it: its watchdog says NOT
 * STARTED, the others' STARTED. The abort then ended every kernel (DONEs everywhere). */
static void test_gpu_not_started(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
        put_hang(&j, r, 0, 5, r == 5 ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_STARTED,
                 (uint64_t)(1500 + r) * 1000000);
        put_call(&j, r, allreduce(0, 6), 0);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2, 3, 4, 6, 7));
    assert_true(h->age_s > 1.5069 && h->age_s < 1.5071);
    assert_string_equal(h->last, "rank 5's GPU never started AllReduce seq 5; the last "
                                 "operation it finished: AllReduce seq 4 on comm "
                                 "9f2c00000000abcd, finished");
    done_with(&j, &res);
}

/* Every rank called seq 5; rank 2 was killed in it (no END), and rank 5's watchdog says its
 * GPU had not started it: the death is the cause (a killed rank's collective never finishes,
 * a kernel not started may only be queued behind it), RANK_EXITED naming rank 2. */
static void test_killed_outranks_not_started(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
        if (r == 2)
            continue;
        put_hang(&j, r, 0, 5, r == 5 ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_STARTED,
                 (uint64_t)(1500 + r) * 1000000);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_EXITED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(2));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 3, 4, 5, 6, 7));
    done_with(&j, &res);
}

/* Rank 5's GPU never started seq 5 and rank 5 was then killed (a teardown: no END): its
 * stuck stream came first, RANK_NOT_JOINED as when it exits cleanly. */
static void test_not_started_then_killed(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
        put_hang(&j, r, 0, 5, r == 5 ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_STARTED,
                 (uint64_t)(1500 + r) * 1000000);
        if (r != 5)
            put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    done_with(&j, &res);
}

/* The same after an abort that ended the kernels: DONEs at seq 5 everywhere. */
static void test_hang_record_then_done(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        world_run(&j, r, 4, 4);
        /* the abort 2.5 s in ends seq 5's kernels, after the records */
        put_call_dur(&j, r, allreduce(0, 5), 2500000000ull);
        put_hang(&j, r, 0, 5, r == 1 ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_STARTED,
                 2000000000ull);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    assert_int_equal(res.h.rows[0].seq, 5);
    assert_string_equal(cpa_hang_verdict_name(res.h.rows[0].verdict), "RANK_NOT_JOINED");
    assert_ranks(res.h.rows[0].missing_ranks, res.h.rows[0].nmissing, RANKS(1));
    assert_true(res.h.rows[0].age_s == 2.0);
    done_with(&j, &res);
}

/* Rank 4's watchdog named seq 1 a second in, yet seq 1's DONE says its kernel ended 10 us
 * after it began: the shim learned of the end late (its plugin's DONEs once waited behind a
 * calibration call that hung). The record is refuted; the hang is rank 5's seq 5. */
static void test_hang_record_refuted_by_its_own_done(void **state)
{
    (void)state;
    job j;
    result res;
    write_not_joined(&j, 1);
    put_hang(&j, 4, 0, 1, CP_HANG_GPU_STARTED, 1000000000ull);
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 5);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    done_with(&j, &res);
}

/* A watchdog stall that cleared: the rank finished later calls it made after the record. */
static void test_hang_record_cleared(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 2);
    for (int r = 0; r < 2; r++) {
        put_comm(&j, r, 0, WORLD, 2, r);
        world_run(&j, r, 3, 3);
        put_hang(&j, r, 0, 3, CP_HANG_GPU_STARTED, 50000);
        for (uint64_t s = 4; s < 10; s++) /* entered after the record, finished */
            put_call(&j, r, allreduce(0, s), 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 0);
    done_with(&j, &res);
}

/* Ranks 4..7 of 8 split off into a comm of 4 (comm ranks 0..3). In the cascade, ranks 0..3
 * go on to a world AllReduce that 4..7, held in the split comm's hang, never reach. */
static void write_split(job *j, int gpu_case, int cascade)
{
    job_open(j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(j, r, 0, WORLD, NR, r);
        for (uint64_t s = 0; s < 3; s++)
            put_call(j, r, allreduce(0, s), 1);
        if (r < 4) {
            if (cascade)
                put_call(j, r, allreduce(0, 3), 0);
            put_end(j, r);
            continue;
        }
        put_comm(j, r, 1, SUB, 4, r - 4);
        uint64_t last = gpu_case || r != 6 ? 4 : 3;
        for (uint64_t s = 0; s <= last; s++)
            put_call(j, r, allreduce(1, s), s < 4);
        if (gpu_case)
            put_hang(j, r, 1, 4, r == 5 ? CP_HANG_GPU_NOT_STARTED : CP_HANG_GPU_STARTED,
                     3000000000ull);
        put_end(j, r);
    }
}

static void test_split_comm(void **state)
{
    (void)state;
    for (int gpu_case = 0; gpu_case < 2; gpu_case++) {
        job j;
        result res;
        write_split(&j, gpu_case, 0);
        analyze(&j, &res);
        assert_int_equal(res.h.nrows, 1);
        const cpa_hang *h = &res.h.rows[0];
        assert_int_equal(h->comm_id, SUB);
        assert_int_equal(h->seq, 4);
        assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
        if (gpu_case) {
            assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
            assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(4, 6, 7));
            assert_non_null(strstr(h->last, "rank 5's GPU never started"));
            assert_non_null(strstr(h->last, "seq 3 on comm 51b0000000001234"));
        } else {
            assert_ranks(h->missing_ranks, h->nmissing, RANKS(6));
            assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(4, 5, 7));
            assert_non_null(strstr(h->last, "rank 6 last called AllReduce seq 3 on comm "
                                            "51b0000000001234"));
        }
        done_with(&j, &res);
    }
}

/* The split comm's hang comes first; the world comm's, whose missing ranks are all held in
 * it, follows and says where they are. */
static void test_cascade(void **state)
{
    (void)state;
    job j;
    result res;
    write_split(&j, 1, 1);
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 2);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->comm_id, SUB);
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(5));
    h = &res.h.rows[1];
    assert_int_equal(h->comm_id, WORLD);
    assert_int_equal(h->seq, 3);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(4, 5, 6, 7));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2, 3));
    assert_string_equal(h->last, "rank 4 last called AllReduce seq 4 on comm 51b0000000001234, "
                                 "not finished; rank 4 waits in AllReduce seq 4 on comm "
                                 "51b0000000001234");
    done_with(&j, &res);
}

/* Rank 3 lost its record of seq 5 but made 6..9: a lost record, no hang. */
static void test_lost_call_no_hang(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        for (uint64_t s = 0; s < 10; s++)
            if (r != 3 || s != 5)
                put_call(&j, r, allreduce(0, s), 1);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 0);
    assert_int_equal(res.x.nrows, 0);
    done_with(&j, &res);
}

/* Rank 0 sends twice to rank 1, which received once and exited cleanly. */
static void test_p2p_hang(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 2);
    for (int r = 0; r < 2; r++) {
        put_comm(&j, r, 0, WORLD, 2, r);
        put_call(&j, r, (callspec){0, r ? CP_OP_RECV : CP_OP_SEND, 0, 64, F32, CP_REDOP_NONE,
                                   !r}, 1);
        if (r == 0)
            put_call(&j, r, (callspec){0, CP_OP_SEND, 1, 64, F32, CP_REDOP_NONE, 1}, 0);
        put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->comm_id, WORLD);
    assert_int_equal(h->seq, 1);
    assert_int_equal(h->op, CP_OP_SEND);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(1));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0));
    assert_non_null(strstr(h->last, "rank 1 last called Recv from comm rank 0 (seq 0)"));
    done_with(&j, &res);
}

/* Rank 3's file is missing: the others wait in seq 4, unfinished. */
static void test_missing_file(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 3; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        for (uint64_t s = 0; s < 5; s++)
            put_call(&j, r, allreduce(0, s), s < 4);
        put_alive(&j, r, enter_at(r, 4) + 5000000000ull); /* waiting, until killed */
    }
    job_close(&j);
    char path[1024];
    snprintf(path, sizeof path, "%s/rank03%s", j.dir, CP_TRACE_FILE_SUFFIX);
    assert_int_equal(unlink(path), 0);
    j.n = 0;
    analyze(&j, &res);
    assert_int_equal(res.h.nrows, 1);
    const cpa_hang *h = &res.h.rows[0];
    assert_int_equal(h->seq, 4);
    assert_string_equal(cpa_hang_verdict_name(h->verdict), "RANK_NOT_JOINED");
    assert_ranks(h->missing_ranks, h->nmissing, RANKS(3));
    assert_ranks(h->waiting_ranks, h->nwaiting, RANKS(0, 1, 2));
    assert_string_equal(h->last, "comm rank 3 of 4 left no trace of this comm (no file, or no "
                                 "COMM record in it); on this world comm, comm rank = global "
                                 "rank");
    done_with(&j, &res);
}

/* test_rank_exited_lost_tail's job with every operation taking 184467440737095517 ns on the
 * GPU (5.8 years: under the loader's 2^62 ns bound), a typical time whose 100 times wrapped
 * to 84 ns: each operation the others finished then looked cut short by the dead rank, and
 * the hang was put at seq 3 instead of at the last one. */
static void test_rank_exited_lost_tail_huge_times(void **state)
{
    (void)state;
    const uint64_t dur = UINT64_MAX / 100 + 1; /* 100 x dur = 2^64 + 84 */
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        for (uint64_t s = 0; s <= (r == 2 ? 2u : 7u); s++)
            put_call_dur(&j, r, allreduce(0, s), dur);
        if (r != 2)
            put_end(&j, r);
    }
    analyze(&j, &res);
    assert_int_equal(res.m->nwarnings, 0);
    assert_int_equal(res.h.nrows, 1);
    assert_int_equal(res.h.rows[0].seq, 7);
    assert_string_equal(cpa_hang_verdict_name(res.h.rows[0].verdict), "RANK_EXITED");
    assert_ranks(res.h.rows[0].missing_ranks, res.h.rows[0].nmissing, RANKS(2));
    done_with(&j, &res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_not_joined),
        cmocka_unit_test(test_rank_exited),
        cmocka_unit_test(test_rank_exited_lost_tail),
        cmocka_unit_test(test_rank_exited_lost_tail_huge_times),
        cmocka_unit_test(test_killed_inside_others_ended),
        cmocka_unit_test(test_stuck_in_nccl),
        cmocka_unit_test(test_stuck_not_judged_on_lost_dones),
        cmocka_unit_test(test_killed_inside),
        cmocka_unit_test(test_gpu_not_started),
        cmocka_unit_test(test_killed_outranks_not_started),
        cmocka_unit_test(test_not_started_then_killed),
        cmocka_unit_test(test_hang_record_then_done),
        cmocka_unit_test(test_hang_record_cleared),
        cmocka_unit_test(test_hang_record_refuted_by_its_own_done),
        cmocka_unit_test(test_split_comm),
        cmocka_unit_test(test_cascade),
        cmocka_unit_test(test_lost_call_no_hang),
        cmocka_unit_test(test_p2p_hang),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
