/* analyzer_job: the synthetic traces test_load, test_match and test_stats share: a 4-rank
 * job written with trace/trace_writer (write_job), whose every time is chosen here, so that
 * counts, matching and bandwidths are checked against values worked out by hand rather than
 * against the code's own arithmetic, and the writers of single records the other tests
 * build their own files with. Header-only so each test stays one program. */
#ifndef COLLPROF_TEST_ANALYZER_JOB_H
#define COLLPROF_TEST_ANALYZER_JOB_H

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

#define NRANKS 4
#define COMM_ID 0x9f2c0000abcdull
#define F32 7                      /* ncclFloat32 */
#define MIB (1024ull * 1024ull)
#define N_AR 100                   /* AllReduces of 1 MiB, 10 us on the GPU */
#define N_AG 5                     /* AllGathers of 256 KiB per rank, 20 us */
#define BASE_NS 1000000000ull

static inline cp_trace_writer *open_rank(const char *dir, int file_no, int header_rank,
                                         const char *host, size_t chunk)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/rank%02d%s", dir, file_no, CP_TRACE_FILE_SUFFIX);
    cp_file_header h;
    cp_file_header_init(&h);
    h.rank = header_rank;
    h.pid = 1000 + (uint32_t)file_no;
    h.flags = CP_FILE_GPU_TIMING;
    snprintf(h.hostname, sizeof h.hostname, "%s", host);
    cp_trace_writer *w = cp_trace_writer_open(path, &h, chunk, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    return w;
}

static inline void put_comm(cp_trace_writer *w, uint32_t index, uint64_t id, int nranks, int rank)
{
    cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                     .nranks = nranks, .rank = rank, .cuda_dev = rank,
                     .origin = CP_COMM_INIT_RANK};
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
}

static inline void put_call_flags(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t count,
                                  int peer, uint64_t enter_ns, uint8_t flags)
{
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = F32,
                     .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE, .flags = flags,
                     .comm_index = 0, .site_index = UINT32_MAX, .seq = seq, .count = count,
                     .stream = 1, .enter_ns = enter_ns, .host_ns = 3000, .peer = peer,
                     .group_depth = (flags & CP_CALL_IN_GROUP) ? 1 : 0};
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
}

static inline void put_call(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t count, int peer,
                            uint64_t enter_ns, int timed)
{
    put_call_flags(w, op, seq, count, peer, enter_ns, timed ? CP_CALL_TIMED : 0);
}

static inline void put_done(cp_trace_writer *w, uint8_t op, uint64_t seq, int peer, uint64_t start,
                            uint64_t end)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = end, .peer = peer, .op = op,
                     .timing = CP_TIMING_EVENTS};
    assert_int_equal(cp_trace_writer_append(w, &d), 0);
}

/* What NCCL's profiler plugin says of a call, as the shim writes it (before its DONE). */
static inline void put_nccl_op(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t nccl_seq,
                               uint8_t algo, uint8_t proto, uint8_t channels)
{
    cp_rec_nccl_op n = {.h = {CP_REC_NCCL_OP, sizeof n}, .comm_index = 0, .seq = seq,
                        .nccl_seq = nccl_seq, .peer = -1, .op = op, .algo = algo,
                        .proto = proto, .nchannels = channels, .nwarps = 8,
                        .kernel_channels = channels, .kernel_started = channels};
    assert_int_equal(cp_trace_writer_append(w, &n), 0);
}

static inline void put_done_by(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t start,
                               uint64_t end, uint8_t timing)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = end, .peer = -1, .op = op,
                     .timing = timing};
    assert_int_equal(cp_trace_writer_append(w, &d), 0);
}

static inline uint64_t ar_start(int i)
{
    return BASE_NS + (uint64_t)i * 100000 + 1000;
}

static inline uint64_t ag_start(int i)
{
    return BASE_NS + 50000000ull + (uint64_t)i * 100000;
}

/* The job: rank r's file; rank 3's header does not know its rank (a PROCESS record tells).
 * Rank 2 writes its DONEs only at the end, newest first, as a late-polling shim could. */
static inline void write_job(const char *dir)
{
    for (int r = 0; r < NRANKS; r++) {
        cp_trace_writer *w = open_rank(dir, r, r == 3 ? -1 : r, r == 3 ? "" : "node-a", 0);
        if (r == 3) {
            unsigned char buf[256];
            cp_rec_process fixed = {.rank = 3, .local_rank = 3, .world_size = NRANKS,
                                    .pid = 4242};
            size_t n = cp_rec_process_build(buf, sizeof buf, &fixed, "node-b", "job", "none");
            assert_true(n > 0);
            assert_int_equal(cp_trace_writer_append(w, buf), 0);
        }
        put_comm(w, 0, COMM_ID, NRANKS, r);
        for (int i = 0; i < N_AR; i++) {
            /* Each rank enters a little later than the last (host side). */
            put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, MIB / 4, -1,
                     ar_start(i) - 900 + (uint64_t)r * 10, 1);
            if (r != 2)
                put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, ar_start(i), ar_start(i) + 10000);
        }
        for (int i = 0; i < N_AG; i++) {
            put_call(w, CP_OP_ALLGATHER, (uint64_t)(N_AR + i), 65536, -1, ag_start(i) - 500, 1);
            put_done(w, CP_OP_ALLGATHER, (uint64_t)(N_AR + i), -1, ag_start(i),
                     ag_start(i) + 20000);
        }
        if (r == 2)
            for (int i = N_AR - 1; i >= 0; i--)
                put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, ar_start(i), ar_start(i) + 10000);
        /* One Send/Recv pair, 4 KiB, 2 us: rank 0 -> rank 1. */
        uint64_t p2p = BASE_NS + 90000000ull;
        if (r == 0 || r == 1) {
            uint8_t op = r == 0 ? CP_OP_SEND : CP_OP_RECV;
            int peer = r == 0 ? 1 : 0;
            put_call(w, op, 0, 1024, peer, p2p - 100, 1);
            put_done(w, op, 0, peer, p2p, p2p + 2000);
        }
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0, .at_ns = p2p + 1000000};
        assert_int_equal(cp_trace_writer_append(w, &e), 0);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
}

static inline int has_warning(const cpa_model *m, const char *needle)
{
    for (size_t i = 0; i < m->nwarnings; i++)
        if (strstr(m->warnings[i], needle))
            return 1;
    return 0;
}

static inline cpa_model *load_or_fail(const char *dir)
{
    cpa_model *m = NULL;
    char err[256] = "";
    if (cpa_model_load(dir, &m, err, sizeof err))
        fail_msg("%s", err);
    return m;
}

static inline void analyze_or_fail(const char *dir, cpa_analysis *a)
{
    char err[256] = "";
    if (cpa_analyze(dir, a, NULL, NULL, err, sizeof err))
        fail_msg("%s", err);
}

/* Matching from the loader's counts by comm index (cpa_rank.census) gives what walking
 * every call gives: the model matched again with the counts hidden. */
static inline void assert_census_agrees(cpa_model *m, const cpa_matched *mt)
{
    cpa_comm_census **kept = calloc(m->nranks + 1, sizeof *kept);
    assert_non_null(kept);
    for (size_t r = 0; r < m->nranks; r++) {
        kept[r] = m->ranks[r].census;
        m->ranks[r].census = NULL;
    }
    cpa_matched w;
    char err[256];
    assert_int_equal(cpa_match(m, &w, err, sizeof err), 0);
    for (size_t r = 0; r < m->nranks; r++)
        m->ranks[r].census = kept[r];
    free(kept);
    assert_int_equal(w.nops, mt->nops);
    assert_int_equal(w.nparts, mt->nparts);
    assert_int_equal(w.unmatchable, mt->unmatchable);
    for (size_t i = 0; i < mt->nops; i++) {
        assert_int_equal(w.ops[i].comm_id, mt->ops[i].comm_id);
        assert_int_equal(w.ops[i].seq, mt->ops[i].seq);
        assert_int_equal(w.ops[i].op, mt->ops[i].op);
        assert_int_equal(w.ops[i].first_part, mt->ops[i].first_part);
        assert_int_equal(w.ops[i].nparts, mt->ops[i].nparts);
    }
    for (size_t i = 0; i < mt->nparts; i++) {
        assert_int_equal(w.parts[i].rank_idx, mt->parts[i].rank_idx);
        assert_int_equal(w.parts[i].call_idx, mt->parts[i].call_idx);
    }
    for (size_t r = 0; r < m->nranks; r++)
        assert_memory_equal(w.call_op[r], mt->call_op[r],
                            (m->ranks[r].ncalls ? m->ranks[r].ncalls : 1) * sizeof **w.call_op);
    cpa_matched_free(&w);
}

/* What matching says of each call (issue 20: the stages after it read these instead of the
 * calls): every part's call points back at its operation through call_op, every call in no
 * part has CPA_NO_OP, and each part's bits are its call's. */
static inline void assert_index_consistent(const cpa_model *m, const cpa_matched *mt)
{
    assert_int_equal(mt->nranks, m->nranks);
    size_t in_ops = 0;
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *p = &mt->parts[o->first_part + k];
            const cpa_call *c = &m->ranks[p->rank_idx].calls[p->call_idx];
            assert_int_equal(mt->call_op[p->rank_idx][p->call_idx], i);
            assert_int_equal(p->gpu_timed, c->gpu_timed != 0);
            assert_int_equal(p->captured, (c->flags & CP_CALL_CAPTURED) != 0);
            assert_int_equal(p->timed, (c->flags & CP_CALL_TIMED) != 0);
            assert_int_equal(p->done, c->done != 0);
            in_ops++;
        }
    }
    size_t indexed = 0;
    for (size_t r = 0; r < m->nranks; r++)
        for (size_t c = 0; c < m->ranks[r].ncalls; c++)
            indexed += mt->call_op[r][c] != CPA_NO_OP;
    assert_int_equal(indexed, in_ops);
    assert_census_agrees((cpa_model *)m, mt);
}

#endif
