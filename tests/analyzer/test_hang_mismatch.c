/* Hangs and mismatches over synthetic traces written as the shim writes them: COMM, SITE,
 * CALL (timed), DONE, HANG (with the GPU's state) and END records, each job chosen so the
 * right verdict, culprit and values are known by construction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"
#include "common/trace_writer.h"
#include "tests/common/test_trace_util.h"

#define WORLD 0x9f2c00000000abcdull
#define SUB 0x51b0000000001234ull
#define F32 7   /* ncclFloat32 */
#define F16 6   /* ncclFloat16 */
#define SUM 0
#define MAX 2
#define BASE_NS 1000000000ull
#define NR 8

typedef struct job {
    char *dir;
    cp_trace_writer *w[NR];
    int n;
} job;

/* Rank r's file with its site record ("site-r" then "main"), world_size n. */
static void job_open(job *j, int n)
{
    j->dir = tt_tmpdir();
    j->n = n;
    for (int r = 0; r < n; r++) {
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/rank%02d%s", j->dir, r, CP_TRACE_FILE_SUFFIX);
        cp_file_header h;
        cp_file_header_init(&h);
        h.rank = r;
        h.world_size = n;
        h.pid = 100 + (uint32_t)r;
        h.flags = CP_FILE_GPU_TIMING;
        snprintf(h.hostname, sizeof h.hostname, "node");
        j->w[r] = cp_trace_writer_open(path, &h, 0, err, sizeof err);
        if (!j->w[r])
            fail_msg("%s", err);
        unsigned char buf[256];
        char frame[64];
        snprintf(frame, sizeof frame, "train_step+0x%x (site-%d)", 16 * r, r);
        const char *frames[] = {frame, "main+0x10 (sim)"};
        size_t len = cp_rec_site_build(buf, sizeof buf, 0, 0x1000 + (uint64_t)r, frames, 2);
        assert_true(len > 0);
        assert_int_equal(cp_trace_writer_append(j->w[r], buf), 0);
    }
}

static void put_comm(job *j, int r, uint32_t index, uint64_t id, int nranks, int crank)
{
    cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                     .nranks = nranks, .rank = crank, .cuda_dev = r,
                     .origin = index ? CP_COMM_SPLIT : CP_COMM_INIT_RANK};
    assert_int_equal(cp_trace_writer_append(j->w[r], &c), 0);
}

typedef struct callspec {
    uint32_t index;   /* comm index */
    uint8_t op;
    uint64_t seq;
    uint64_t count;
    uint8_t dtype;
    uint8_t redop;
    int peer;         /* root or p2p peer, comm ranks */
} callspec;

static uint64_t enter_at(int r, uint64_t seq) { return BASE_NS + seq * 100000 + (uint64_t)r * 10; }

/* A timed CALL; a DONE after it, dur_ns on the GPU, unless dur_ns is 0. */
static void put_call_dur(job *j, int r, callspec c, uint64_t dur_ns)
{
    cp_rec_call rec = {.h = {CP_REC_CALL, sizeof rec}, .op = c.op, .dtype = c.dtype,
                       .redop = c.redop, .flags = CP_CALL_TIMED, .comm_index = c.index,
                       .site_index = 0, .seq = c.seq, .count = c.count, .stream = 1,
                       .enter_ns = enter_at(r, c.seq), .host_ns = 2000, .peer = c.peer};
    assert_int_equal(cp_trace_writer_append(j->w[r], &rec), 0);
    if (!dur_ns)
        return;
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = c.index, .seq = c.seq,
                     .gpu_start_ns = rec.enter_ns + 1000,
                     .gpu_end_ns = rec.enter_ns + 1000 + dur_ns, .peer = c.peer, .op = c.op,
                     .timing = CP_TIMING_EVENTS};
    assert_int_equal(cp_trace_writer_append(j->w[r], &d), 0);
}

static void put_call(job *j, int r, callspec c, int done)
{
    put_call_dur(j, r, c, done ? 10000 : 0);
}

static callspec allreduce(uint32_t index, uint64_t seq)
{
    return (callspec){index, CP_OP_ALLREDUCE, seq, 1024, F32, SUM, -1};
}

static void put_hang(job *j, int r, uint32_t index, uint64_t seq, uint8_t gpu_state,
                     uint64_t age_ns)
{
    cp_rec_hang h = {.h = {CP_REC_HANG, sizeof h}, .comm_index = index, .seq = seq,
                     .at_ns = enter_at(r, seq) + age_ns, .age_ns = age_ns, .peer = -1,
                     .op = CP_OP_ALLREDUCE, .gpu_state = gpu_state};
    assert_int_equal(cp_trace_writer_append(j->w[r], &h), 0);
}

static void put_end(job *j, int r)
{
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0, .at_ns = BASE_NS * 2};
    assert_int_equal(cp_trace_writer_append(j->w[r], &e), 0);
}

static void job_close(job *j)
{
    for (int r = 0; r < j->n; r++)
        if (j->w[r])
            assert_int_equal(cp_trace_writer_close(j->w[r]), 0);
}

typedef struct result {
    cpa_model *m;
    cpa_matched mt;
    cpa_hangs h;
    cpa_mismatches x;
} result;

static void analyze(job *j, result *res)
{
    char err[256] = "";
    job_close(j);
    memset(res, 0, sizeof *res);
    if (cpa_model_load(j->dir, &res->m, err, sizeof err) ||
        cpa_match(res->m, &res->mt, err, sizeof err) ||
        cpa_hangs_find(res->m, &res->mt, &res->h, err, sizeof err) ||
        cpa_mismatches_find(res->m, &res->mt, &res->x, err, sizeof err))
        fail_msg("%s", err);
}

static void done_with(job *j, result *res)
{
    cpa_mismatches_free(&res->x);
    cpa_hangs_free(&res->h);
    cpa_matched_free(&res->mt);
    cpa_model_free(res->m);
    tt_rmtree(j->dir);
    free(j->dir);
}

static void assert_ranks(const int32_t *got, size_t n, const int32_t *want, size_t nwant)
{
    char a[256] = "", b[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%d ", (int)got[i]);
    for (size_t i = 0; i < nwant; i++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%d ", (int)want[i]);
    assert_string_equal(a, b);
}
#define RANKS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

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
    assert_non_null(strstr(h->last, "without a clean exit"));
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

/* All called seq 5, none finished, and every rank was killed (the launcher ended a stuck
 * job): nobody to blame but NCCL. */
static void test_stuck_in_nccl(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, NR);
    for (int r = 0; r < NR; r++) {
        put_comm(&j, r, 0, WORLD, NR, r);
        world_run(&j, r, 5, 4);
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
    assert_string_equal(h->last, "rank 2's trace ends without a clean exit (killed) in "
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

/* The same after an abort that ended the kernels: DONEs at seq 5 everywhere. */
static void test_hang_record_then_done(void **state)
{
    (void)state;
    job j;
    result res;
    job_open(&j, 4);
    for (int r = 0; r < 4; r++) {
        put_comm(&j, r, 0, WORLD, 4, r);
        world_run(&j, r, 5, 5);
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
        cmocka_unit_test(test_rank_not_joined),
        cmocka_unit_test(test_rank_exited),
        cmocka_unit_test(test_rank_exited_lost_tail),
        cmocka_unit_test(test_stuck_in_nccl),
        cmocka_unit_test(test_killed_inside),
        cmocka_unit_test(test_gpu_not_started),
        cmocka_unit_test(test_hang_record_then_done),
        cmocka_unit_test(test_hang_record_cleared),
        cmocka_unit_test(test_split_comm),
        cmocka_unit_test(test_cascade),
        cmocka_unit_test(test_lost_call_no_hang),
        cmocka_unit_test(test_healthy),
        cmocka_unit_test(test_collective_mismatches),
        cmocka_unit_test(test_p2p_count_mismatch),
        cmocka_unit_test(test_peer_mismatch),
        cmocka_unit_test(test_peer_not_for_stall),
        cmocka_unit_test(test_p2p_hang),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_mismatch_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
