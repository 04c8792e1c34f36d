/* hang_job: the synthetic jobs test_hang and test_mismatch share, written as the shim
 * writes them: COMM, SITE, CALL (timed), DONE, HANG (with the GPU's state) and END
 * records, each job chosen so the right verdict, culprit and values are known by
 * construction. Header-only so each test stays one program. */
#ifndef COLLPROF_TEST_HANG_JOB_H
#define COLLPROF_TEST_HANG_JOB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"
#include "trace/trace_writer.h"
#include "tests/trace/test_trace_util.h"

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
static inline void job_open(job *j, int n)
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

static inline void put_comm(job *j, int r, uint32_t index, uint64_t id, int nranks, int crank)
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

static inline uint64_t enter_at(int r, uint64_t seq)
{
    return BASE_NS + seq * 100000 + (uint64_t)r * 10;
}

/* A timed CALL; a DONE after it, dur_ns on the GPU, unless dur_ns is 0. */
static inline void put_call_dur(job *j, int r, callspec c, uint64_t dur_ns)
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

static inline void put_call(job *j, int r, callspec c, int done)
{
    put_call_dur(j, r, c, done ? 10000 : 0);
}

static inline callspec allreduce(uint32_t index, uint64_t seq)
{
    return (callspec){index, CP_OP_ALLREDUCE, seq, 1024, F32, SUM, -1};
}

static inline void put_hang(job *j, int r, uint32_t index, uint64_t seq, uint8_t gpu_state,
                            uint64_t age_ns)
{
    cp_rec_hang h = {.h = {CP_REC_HANG, sizeof h}, .comm_index = index, .seq = seq,
                     .at_ns = enter_at(r, seq) + age_ns, .age_ns = age_ns, .peer = -1,
                     .op = CP_OP_ALLREDUCE, .gpu_state = gpu_state};
    assert_int_equal(cp_trace_writer_append(j->w[r], &h), 0);
}

/* The writer's heartbeat (a CLOCK record) at ns: rank r was alive then, e.g. waiting. */
static inline void put_alive(job *j, int r, uint64_t ns)
{
    cp_rec_clock c = {.h = {CP_REC_CLOCK, sizeof c}, .mono_ns = ns, .realtime_ns = ns};
    assert_int_equal(cp_trace_writer_append(j->w[r], &c), 0);
}

static inline void put_end(job *j, int r)
{
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0, .at_ns = BASE_NS * 2};
    assert_int_equal(cp_trace_writer_append(j->w[r], &e), 0);
}

static inline void job_close(job *j)
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

static inline void analyze(job *j, result *res)
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

static inline void done_with(job *j, result *res)
{
    cpa_mismatches_free(&res->x);
    cpa_hangs_free(&res->h);
    cpa_matched_free(&res->mt);
    cpa_model_free(res->m);
    tt_rmtree(j->dir);
    free(j->dir);
}

static inline void assert_ranks(const int32_t *got, size_t n, const int32_t *want, size_t nwant)
{
    char a[256] = "", b[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%d ", (int)got[i]);
    for (size_t i = 0; i < nwant; i++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%d ", (int)want[i]);
    assert_string_equal(a, b);
}
#define RANKS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

#endif
