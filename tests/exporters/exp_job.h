/* exp_job: the synthetic job the exporter and report tests share, written with
 * trace/trace_writer so every time in it is chosen here, and the findings (stragglers,
 * hangs, mismatches) an analysis is given by hand, so each output can be checked against
 * values worked out on paper rather than against the analyzer's own arithmetic.
 * Header-only so each test stays one program.
 *
 * The job: 4 ranks on host "node-a", one communicator, each rank one stream.
 *   10 AllReduce, 262144 float32 (1 MiB), GPU 10 us, every rank starting together;
 *   5 AllGather, 65536 float32 per rank (S = 1 MiB), ranks 0-2 start at t, rank 3 at
 *     t + 15 us, all end at t + 20 us: durations 20, 20, 20, 5 (the op's time: 5 us, the
 *     last arrival's);
 *   1 Send (rank 0) / Recv (rank 1) of 1024 float32, untimed: 3 us of host time each.
 * The AllReduces are timed by CUDA events; the AllGathers by NCCL's profiler plugin: each
 * DONE (timing plugin) follows its NCCL_OP (RING/LL on 4 channels, NCCL's seq 0..4).
 * Timed calls start on the GPU as they are entered (idle streams), so the analyzer has no
 * GPU clock error to correct and job times are the trace's own, from AllReduce 0's entry.
 * Rank 0's calls carry a call site whose frames hold a comma and a quote. Each file is two
 * chunks: the AllReduces, then the rest.
 */
#ifndef COLLPROF_TEST_EXP_JOB_H
#define COLLPROF_TEST_EXP_JOB_H

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

#define EXP_NRANKS 4
#define EXP_COMM 0x9f2c0e1d22aa4b01ull
#define EXP_F32 7
#define EXP_N_AR 10
#define EXP_N_AG 5
#define EXP_MONO0 1000000000ull          /* every rank's monotonic anchor ... */
#define EXP_REAL0 1700000000000000000ull /* ... and the wall clock it reads */
#define EXP_HOST_NS 3000u
#define EXP_SITE "train_step+0x12 (libtrain.so) < main, \"quoted\" (app)"

static inline uint64_t exp_ar_start(int i) { return EXP_MONO0 + 1000000ull + (uint64_t)i * 100000; }
static inline uint64_t exp_ag_start(int i) { return EXP_MONO0 + 5000000ull + (uint64_t)i * 100000; }
static inline uint64_t exp_p2p_enter(void) { return EXP_MONO0 + 9000000ull; }
static inline uint64_t exp_stream(int r) { return 0x7f00abc0ull + (uint64_t)r * 16; }

static inline void exp_put(cp_trace_writer *w, const void *rec)
{
    assert_int_equal(cp_trace_writer_append(w, rec), 0);
}

/* text (NULL: none) is the header's job id and launcher. */
static inline cp_trace_writer *exp_open_rank_text(const char *dir, int rank, const char *host,
                                                  const char *text)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/rank%02d%s", dir, rank, CP_TRACE_FILE_SUFFIX);
    cp_file_header h;
    cp_file_header_init(&h);
    h.rank = rank;
    h.world_size = EXP_NRANKS;
    h.pid = 2000 + (uint32_t)rank;
    h.flags = CP_FILE_GPU_TIMING;
    h.mono_anchor_ns = EXP_MONO0;
    h.realtime_anchor_ns = EXP_REAL0;
    snprintf(h.hostname, sizeof h.hostname, "%s", host);
    if (text) {
        /* cut to the fields' size, as the shim cuts them */
        snprintf(h.job_id, sizeof h.job_id, "%.*s", (int)sizeof h.job_id - 1, text);
        snprintf(h.launcher, sizeof h.launcher, "%.*s", (int)sizeof h.launcher - 1, text);
    }
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 0, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    return w;
}

static inline cp_trace_writer *exp_open_rank(const char *dir, int rank, const char *host)
{
    return exp_open_rank_text(dir, rank, host, NULL);
}

static inline void exp_put_comm(cp_trace_writer *w, int nranks, int rank)
{
    cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = 0, .comm_id = EXP_COMM,
                     .nranks = nranks, .rank = rank, .cuda_dev = rank,
                     .origin = CP_COMM_INIT_RANK};
    exp_put(w, &c);
}

static inline void exp_put_call(cp_trace_writer *w, int r, uint8_t op, uint64_t seq,
                                uint64_t count, int peer, uint64_t enter_ns, int timed)
{
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = EXP_F32,
                     .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE,
                     .flags = timed ? CP_CALL_TIMED : 0, .comm_index = 0,
                     .site_index = r == 0 ? 0 : UINT32_MAX, .seq = seq, .count = count,
                     .stream = exp_stream(r), .enter_ns = enter_ns, .host_ns = EXP_HOST_NS,
                     .peer = peer};
    exp_put(w, &c);
}

static inline void exp_put_done_by(cp_trace_writer *w, uint8_t op, uint64_t seq, int peer,
                                   uint64_t start, uint64_t end, uint8_t timing)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = end, .peer = peer, .op = op,
                     .timing = timing};
    exp_put(w, &d);
}

static inline void exp_put_done(cp_trace_writer *w, uint8_t op, uint64_t seq, int peer,
                                uint64_t start, uint64_t end)
{
    exp_put_done_by(w, op, seq, peer, start, end, CP_TIMING_EVENTS);
}

static inline void exp_put_nccl_op(cp_trace_writer *w, uint8_t op, uint64_t seq,
                                   uint64_t nccl_seq, uint8_t algo, uint8_t proto,
                                   uint8_t channels)
{
    cp_rec_nccl_op n = {.h = {CP_REC_NCCL_OP, sizeof n}, .comm_index = 0, .seq = seq,
                        .nccl_seq = nccl_seq, .peer = -1, .op = op, .algo = algo,
                        .proto = proto, .nchannels = channels, .nwarps = 16,
                        .kernel_channels = channels, .kernel_started = channels};
    exp_put(w, &n);
}

/* text (NULL: none) is also the header's job id and launcher and rank 0's first frame,
 * and then rank 0's first AllReduce counts one element more: a count mismatch, so that a
 * report shows the call site. */
/* The holes exp_write_job_with_holes plants in rank 2's trace, between its AllReduces and
 * its AllGathers (at EXP_HOLE_NS): LOST records of 10 (ring_full) and 2 (at_end), and one
 * record of a type no collprof knows. */
#define EXP_HOLE_RANK 2
#define EXP_HOLE_NS (EXP_MONO0 + 4000000ull) /* 3 ms into the job (it starts at +1 ms) */
static int exp_plant_holes;

static inline void exp_write_rank_text(const char *dir, int r, const char *host,
                                       const char *text)
{
    cp_trace_writer *w = exp_open_rank_text(dir, r, host, text);
    exp_put_comm(w, EXP_NRANKS, r);
    if (r == 0) {
        unsigned char buf[512];
        const char *frames[] = { text ? text : "train_step+0x12 (libtrain.so)",
                                 "main, \"quoted\" (app)" };
        size_t n = cp_rec_site_build(buf, sizeof buf, 0, 0x401234, frames, 2);
        assert_true(n > 0);
        exp_put(w, buf);
    }
    for (int i = 0; i < EXP_N_AR; i++) {
        uint64_t count = 262144 + (text && r == 0 && i == 0);
        exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, count, -1, exp_ar_start(i), 1);
        exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, exp_ar_start(i),
                     exp_ar_start(i) + 10000);
    }
    /* Two chunks: a file cut near its end (a rank killed mid-write) keeps the first. */
    assert_int_equal(cp_trace_writer_flush(w), 0);
    if (exp_plant_holes && r == EXP_HOLE_RANK) {
        cp_rec_lost l = {.h = {CP_REC_LOST, sizeof l}, .cause = CP_LOST_RING_FULL, .count = 10,
                         .at_ns = EXP_HOLE_NS};
        exp_put(w, &l);
        l.cause = CP_LOST_AT_END;
        l.count = 2;
        l.at_ns = EXP_HOLE_NS + 1000;
        exp_put(w, &l);
        struct { cp_record_header h; uint64_t x; } unknown = {{200, 16}, 0};
        exp_put(w, &unknown);
    }
    for (int i = 0; i < EXP_N_AG; i++) {
        uint64_t t = exp_ag_start(i);
        uint64_t start = r == 3 ? t + 15000 : t;
        exp_put_call(w, r, CP_OP_ALLGATHER, (uint64_t)(EXP_N_AR + i), 65536, -1, start, 1);
        exp_put_nccl_op(w, CP_OP_ALLGATHER, (uint64_t)(EXP_N_AR + i), (uint64_t)i, CP_ALGO_RING,
                        CP_PROTO_LL, 4);
        exp_put_done_by(w, CP_OP_ALLGATHER, (uint64_t)(EXP_N_AR + i), -1, start, t + 20000,
                        CP_TIMING_PLUGIN);
    }
    if (r == 0 || r == 1)
        exp_put_call(w, r, r == 0 ? CP_OP_SEND : CP_OP_RECV, 0, 1024, r == 0 ? 1 : 0,
                     exp_p2p_enter() + (uint64_t)r * 1000, 0);
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0,
                    .at_ns = EXP_MONO0 + 10000000ull};
    exp_put(w, &e);
    assert_int_equal(cp_trace_writer_close(w), 0);
}

static inline void exp_write_rank(const char *dir, int r, const char *host)
{
    exp_write_rank_text(dir, r, host, NULL);
}

static inline void exp_write_job(const char *dir)
{
    for (int r = 0; r < EXP_NRANKS; r++)
        exp_write_rank(dir, r, "node-a");
}

/* The job, with holes in rank 2's trace (EXP_HOLE_RANK). */
static inline void exp_write_job_with_holes(const char *dir)
{
    exp_plant_holes = 1;
    exp_write_job(dir);
    exp_plant_holes = 0;
}

/* A job a watchdog ended: 2 ranks, AllReduce seq 0 done by both (10 us); rank 1 never
 * enters seq 1; rank 0, in it from EXP_ABORT_T - 3 s, calls ncclCommAbort at EXP_ABORT_T,
 * which releases its kernel: a DONE 826 us long that ends after the abort. */
#define EXP_ABORT_T (EXP_MONO0 + 4000000000ull)
static inline void exp_write_aborted_job(const char *dir)
{
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 2, r);
        exp_put_call(w, r, CP_OP_ALLREDUCE, 0, 256, -1, EXP_MONO0, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, 0, -1, EXP_MONO0 + 1000, EXP_MONO0 + 11000);
        if (r == 0) {
            uint64_t t = EXP_ABORT_T - 3000000000ull;
            exp_put_call(w, r, CP_OP_ALLREDUCE, 1, 256, -1, t, 1);
            exp_put_call(w, r, CP_OP_COMM_ABORT, 0, 0, -1, EXP_ABORT_T, 0);
            exp_put_done(w, CP_OP_ALLREDUCE, 1, -1, EXP_ABORT_T - 200000,
                         EXP_ABORT_T - 200000 + 826000);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
}

/* Two ranks: an AllReduce both finish, then rank 1's Broadcast with root 99, which NCCL
 * refused (ncclInvalidArgument, no seq), while rank 0's Broadcast waits for it. */
static inline void exp_write_refused_job(const char *dir)
{
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 2, r);
        exp_put_call(w, r, CP_OP_ALLREDUCE, 0, 256, -1, EXP_MONO0, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, 0, -1, EXP_MONO0 + 1000, EXP_MONO0 + 11000);
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = CP_OP_BROADCAST, .dtype = EXP_F32,
                         .redop = CP_REDOP_NONE, .flags = CP_CALL_TIMED, .comm_index = 0,
                         .site_index = UINT32_MAX, .seq = r == 1 ? UINT64_MAX : 1,
                         .count = 64, .stream = exp_stream(r), .enter_ns = EXP_MONO0 + 20000,
                         .host_ns = EXP_HOST_NS, .peer = r == 1 ? 99 : 0,
                         .result = r == 1 ? 4 : 0};
        exp_put(w, &c);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
}

/* The job with text in every string a trace holds (exp_write_rank_text), hostnames too. */
static inline void exp_write_job_text(const char *dir, const char *text)
{
    for (int r = 0; r < EXP_NRANKS; r++)
        exp_write_rank_text(dir, r, text, text);
}

static inline void exp_analyze(const char *dir, cpa_analysis *a)
{
    char err[256] = "";
    if (cpa_analyze(dir, a, NULL, NULL, err, sizeof err) != 0)
        fail_msg("cpa_analyze: %s", err);
}

static inline int32_t *exp_ranks(size_t n, ...)
{
    int32_t *v = malloc((n ? n : 1) * sizeof *v);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        v[i] = va_arg(ap, int);
    va_end(ap);
    return v;
}

/* Replaces whatever the analyzer found with known findings:
 *   stragglers: rank 3 persistent, late in 5 of 15 judged, 75 us total, p50 15 us;
 *               rank 1, late once, 10 us (a second row for --top);
 *   hang: RANK_NOT_JOINED at AllReduce seq 10 of EXP_COMM, rank 2 missing, 0,1,3 waiting;
 *   mismatch: count at seq 3 of EXP_COMM, ranks 0-2 1024, rank 3 2048 (culprit), rank 0
 *             with a call site. */
static inline void exp_set_findings(cpa_analysis *a)
{
    const cpa_model *m = a->model;
    cpa_stragglers_free(&a->stragglers);
    cpa_hangs_free(&a->hangs);
    cpa_mismatches_free(&a->mismatches);

    cpa_stragglers *s = &a->stragglers;
    s->rows = calloc(2, sizeof *s->rows);
    s->rows[0] = (cpa_straggler){.rank_idx = 3, .rank = 3, .late_count = 5,
                                 .late_us_total = 75.0, .late_us_p50 = 15.0,
                                 .share = 5.0 / 15.0, .wait_us_total = 0,
                                 .by_cause = {0, 1, 4, 0}, .cause = CPA_CAUSE_BACKLOG,
                                 .host_late_us_p50 = 0.2, .gpu_late_us_p50 = 15.0,
                                 .held_nranks = -1};
    s->rows[1] = (cpa_straggler){.rank_idx = 1, .rank = 1, .late_count = 1,
                                 .late_us_total = 10.0, .late_us_p50 = 10.0,
                                 .share = 1.0 / 15.0, .wait_us_total = 150.0,
                                 .by_cause = {0, 1, 0, 0}, .cause = CPA_CAUSE_HOST,
                                 .host_late_us_p50 = 10.0, .gpu_late_us_p50 = 10.0,
                                 .held_nranks = -1};
    s->nrows = 2;
    s->judged = 15;
    s->late = 6;
    s->threshold_us = 5.0;
    s->kind = CPA_STRAGGLER_PERSISTENT;
    size_t nops = a->matched.nops ? a->matched.nops : 1;
    s->op_late_rank_idx = malloc(nops * sizeof *s->op_late_rank_idx);
    s->op_late_us = calloc(nops, sizeof *s->op_late_us);
    s->op_cause = calloc(nops, sizeof *s->op_cause);
    s->op_host_late_us = calloc(nops, sizeof *s->op_host_late_us);
    for (size_t i = 0; i < a->matched.nops; i++) {
        const cpa_op *o = &a->matched.ops[i];
        int ag = o->op == CP_OP_ALLGATHER;
        s->op_late_rank_idx[i] = ag ? 3 : -1;
        s->op_late_us[i] = ag ? 15.0f : 0.0f;
        s->op_cause[i] = ag ? CPA_CAUSE_BACKLOG : CPA_CAUSE_NONE;
    }

    cpa_hangs *h = &a->hangs;
    h->rows = calloc(1, sizeof *h->rows);
    h->rows[0] = (cpa_hang){.comm_id = EXP_COMM, .seq = 10, .op = CP_OP_ALLREDUCE,
                            .verdict = CPA_HANG_RANK_NOT_JOINED,
                            .missing_ranks = exp_ranks(1, 2), .nmissing = 1,
                            .waiting_ranks = exp_ranks(3, 0, 1, 3), .nwaiting = 3,
                            .age_s = 61.5};
    snprintf(h->rows[0].last, sizeof h->rows[0].last,
             "rank 2 last called AllReduce seq 9, finished");
    h->nrows = 1;

    cpa_mismatches *x = &a->mismatches;
    x->rows = calloc(1, sizeof *x->rows);
    cpa_mismatch *mm = &x->rows[0];
    mm->comm_id = EXP_COMM;
    mm->seq = 3;
    mm->field = CPA_FIELD_COUNT;
    mm->values = calloc(4, sizeof *mm->values);
    for (int r = 0; r < 4; r++)
        mm->values[r] = (cpa_mismatch_value){.rank = r, .value = r == 3 ? 2048 : 1024,
                                             .site = r == 0 ? m->ranks[0].sites[0] : NULL};
    mm->nvalues = 4;
    mm->culprit_ranks = exp_ranks(1, 3);
    mm->nculprits = 1;
    x->nrows = 1;
    x->total = 1;
}

/* What an exporter wrote, as one string (open_memstream). */
typedef struct exp_buf {
    char *data;
    size_t len;
    FILE *f;
} exp_buf;

static inline FILE *exp_buf_open(exp_buf *b)
{
    memset(b, 0, sizeof *b);
    b->f = open_memstream(&b->data, &b->len);
    assert_non_null(b->f);
    return b->f;
}

static inline char *exp_buf_close(exp_buf *b)
{
    fclose(b->f);
    b->f = NULL;
    return b->data;
}

/* Runs python3 with `script` on `input` (stdin); 0 when it exited 0, 1 when it failed, -1
 * when there is no python3 here (the check is skipped, not failed). */
static inline int exp_python(const char *script, const char *input, size_t len)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0)
        return -1;
    char *dir = tt_tmpdir();
    char in[1024], py[1024], cmd[4096];
    snprintf(in, sizeof in, "%s/input", dir);
    snprintf(py, sizeof py, "%s/check.py", dir);
    tt_write_file(in, input, len);
    tt_write_file(py, script, strlen(script));
    snprintf(cmd, sizeof cmd, "python3 '%s' < '%s'", py, in);
    int rc = system(cmd);
    tt_rmtree(dir);
    free(dir);
    return rc == 0 ? 0 : 1;
}

#endif
