/* The analyzer over synthetic traces: a 4-rank job written with trace/trace_writer, whose
 * every time is chosen here, so counts, matching and bandwidths are checked against values
 * worked out by hand rather than against the code's own arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "analyzer/demangle.h"
#include "trace/trace_writer.h"
#include "tests/trace/test_trace_util.h"

#define NRANKS 4
#define COMM_ID 0x9f2c0000abcdull
#define F32 7                      /* ncclFloat32 */
#define MIB (1024ull * 1024ull)
#define N_AR 100                   /* AllReduces of 1 MiB, 10 us on the GPU */
#define N_AG 5                     /* AllGathers of 256 KiB per rank, 20 us */
#define BASE_NS 1000000000ull

static cp_trace_writer *open_rank(const char *dir, int file_no, int header_rank,
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

static void put_comm(cp_trace_writer *w, uint32_t index, uint64_t id, int nranks, int rank)
{
    cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                     .nranks = nranks, .rank = rank, .cuda_dev = rank,
                     .origin = CP_COMM_INIT_RANK};
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
}

static void put_call_flags(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t count,
                           int peer, uint64_t enter_ns, uint8_t flags)
{
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = F32,
                     .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE, .flags = flags,
                     .comm_index = 0, .site_index = UINT32_MAX, .seq = seq, .count = count,
                     .stream = 1, .enter_ns = enter_ns, .host_ns = 3000, .peer = peer,
                     .group_depth = (flags & CP_CALL_IN_GROUP) ? 1 : 0};
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
}

static void put_call(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t count, int peer,
                     uint64_t enter_ns, int timed)
{
    put_call_flags(w, op, seq, count, peer, enter_ns, timed ? CP_CALL_TIMED : 0);
}

static void put_done(cp_trace_writer *w, uint8_t op, uint64_t seq, int peer, uint64_t start,
                     uint64_t end)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = end, .peer = peer, .op = op,
                     .timing = CP_TIMING_EVENTS};
    assert_int_equal(cp_trace_writer_append(w, &d), 0);
}

/* What NCCL's profiler plugin says of a call, as the shim writes it (before its DONE). */
static void put_nccl_op(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t nccl_seq,
                        uint8_t algo, uint8_t proto, uint8_t channels)
{
    cp_rec_nccl_op n = {.h = {CP_REC_NCCL_OP, sizeof n}, .comm_index = 0, .seq = seq,
                        .nccl_seq = nccl_seq, .peer = -1, .op = op, .algo = algo,
                        .proto = proto, .nchannels = channels, .nwarps = 8,
                        .kernel_channels = channels, .kernel_started = channels};
    assert_int_equal(cp_trace_writer_append(w, &n), 0);
}

static void put_done_by(cp_trace_writer *w, uint8_t op, uint64_t seq, uint64_t start,
                        uint64_t end, uint8_t timing)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = 0, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = end, .peer = -1, .op = op,
                     .timing = timing};
    assert_int_equal(cp_trace_writer_append(w, &d), 0);
}

static uint64_t ar_start(int i) { return BASE_NS + (uint64_t)i * 100000 + 1000; }
static uint64_t ag_start(int i) { return BASE_NS + 50000000ull + (uint64_t)i * 100000; }

/* The job: rank r's file; rank 3's header does not know its rank (a PROCESS record tells).
 * Rank 2 writes its DONEs only at the end, newest first, as a late-polling shim could. */
static void write_job(const char *dir)
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

static int has_warning(const cpa_model *m, const char *needle)
{
    for (size_t i = 0; i < m->nwarnings; i++)
        if (strstr(m->warnings[i], needle))
            return 1;
    return 0;
}

static void test_load_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    write_job(dir);
    cpa_model *m = NULL;
    char err[256] = "";
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), 0);
    assert_int_equal(m->nranks, NRANKS);
    assert_int_equal(m->nwarnings, 0);
    assert_int_equal(m->lost_records, 0);
    for (int r = 0; r < NRANKS; r++) {
        const cpa_rank *k = &m->ranks[r];
        assert_int_equal(k->rank, r);
        assert_string_equal(k->hostname, r == 3 ? "node-b" : "node-a");
        assert_int_equal(k->pid, r == 3 ? 4242 : 1000 + r);
        assert_int_equal(k->ncomms, 1);
        assert_int_equal(k->comms[0].comm_id, COMM_ID);
        assert_int_equal(k->comms[0].rank, r);
        assert_int_equal(k->ncalls, N_AR + N_AG + (r < 2 ? 1 : 0));
        assert_int_equal(k->unmatched_done, 0);
        assert_true(k->ended);
        assert_int_equal(k->walk_stop, CP_WALK_END);
        for (size_t i = 0; i < k->ncalls; i++) {
            const cpa_call *c = &k->calls[i];
            assert_int_equal(cpa_call_comm_id(k, c), COMM_ID);
            assert_int_equal(cpa_call_nranks(k, c), NRANKS);
            assert_int_equal(cpa_call_comm_rank(k, c), r);
            assert_true(c->done && c->gpu_timed);
        }
        const cpa_call *c = &k->calls[7];
        assert_int_equal(c->op, CP_OP_ALLREDUCE);
        assert_int_equal(c->seq, 7);
        assert_int_equal(c->count, MIB / 4);
        assert_int_equal(c->gpu_start_ns, ar_start(7));
        assert_int_equal(c->gpu_end_ns, ar_start(7) + 10000);
        assert_int_equal(c->enter_ns, ar_start(7) - 900 + (uint64_t)r * 10);
    }
    /* Records: PROCESS (rank 3), COMM, CALL+DONE per op, END. */
    assert_int_equal(m->records, 4 * (1 + 2 * (N_AR + N_AG) + 1) + 1 + 2 * 2);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* A file cut inside its last chunk (a SIGKILLed rank) loads every whole chunk before the
 * cut and says so in a warning. */
static void test_load_cut(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    for (int i = 0; i < 30; i++) {
        put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, 256, -1, BASE_NS + (uint64_t)i * 1000, 0);
        if (i % 10 == 9)
            assert_int_equal(cp_trace_writer_flush(w), 0);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/rank00%s", dir, CP_TRACE_FILE_SUFFIX);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 100), 0);

    cpa_model *m = NULL;
    char err[256] = "";
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), 0);
    assert_int_equal(m->nranks, 1);
    assert_int_equal(m->ranks[0].ncalls, 20);
    assert_int_equal(m->ranks[0].walk_stop, CP_WALK_TRUNCATED);
    assert_false(m->ranks[0].ended);
    assert_int_equal(m->nwarnings, 1);
    assert_true(has_warning(m, "is cut at byte"));
    assert_true(has_warning(m, "rank00.cptrace"));
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* No trace: an error naming the directory, not an empty report. So is a directory whose
 * only trace file is not one. */
static void test_load_empty(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cpa_model *m = (cpa_model *)1;
    char err[256] = "";
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), -1);
    assert_null(m);
    assert_non_null(strstr(err, "no trace file"));
    assert_non_null(strstr(err, dir));

    char path[1024];
    snprintf(path, sizeof path, "%s/junk%s", dir, CP_TRACE_FILE_SUFFIX);
    tt_write_file(path, "not a trace", 11);
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), -1);
    assert_null(m);
    assert_non_null(strstr(err, "no readable trace file"));

    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(cpa_model_load(path, &m, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    tt_rmtree(dir);
    free(dir);
}

static cpa_model *load_or_fail(const char *dir)
{
    cpa_model *m = NULL;
    char err[256] = "";
    if (cpa_model_load(dir, &m, err, sizeof err))
        fail_msg("%s", err);
    return m;
}

static void analyze_or_fail(const char *dir, cpa_analysis *a)
{
    char err[256] = "";
    if (cpa_analyze(dir, a, NULL, NULL, err, sizeof err))
        fail_msg("%s", err);
}

/* Matching from the loader's counts by comm index (cpa_rank.census) gives what walking
 * every call gives: the model matched again with the counts hidden. */
static void assert_census_agrees(cpa_model *m, const cpa_matched *mt)
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

/* Every operation of the job has all its ranks, in rank order, with GPU arrival times. */
/* What matching says of each call (issue 20: the stages after it read these instead of the
 * calls): every part's call points back at its operation through call_op, every call in no
 * part has CPA_NO_OP, and each part's bits are its call's. */
static void assert_index_consistent(const cpa_model *m, const cpa_matched *mt)
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

/* The analyzer's sorts and selection against plain references: cpa_sort_kv stable (equal
 * keys in their order) with keys alike in some bytes, cpa_sort_doubles ascending with
 * negatives and both zeros, cpa_select the value sorting puts at k. */
static int cmp_ref_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void test_sorts_and_selection(void **state)
{
    (void)state;
    srand(7);
    const size_t sizes[] = {0, 1, 2, 3, 31, 32, 33, 100, 257, 2000, 5001, 12000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        cpa_kv *kv = malloc((n + 1) * sizeof *kv), *tmp = malloc((n + 1) * sizeof *tmp);
        cpa_kv *ref = malloc((n + 1) * sizeof *ref);
        double *d = malloc((n + 1) * sizeof *d), *dr = malloc((n + 1) * sizeof *dr);
        for (size_t i = 0; i < n; i++) {
            /* few distinct keys (duplicates test stability), differing in low and high bytes */
            uint64_t k = (uint64_t)(rand() % 17);
            kv[i] = (cpa_kv){si % 2 ? k << 56 | 0x1234 : k * 0x10001, i};
            double x = (double)(rand() % 2001 - 1000) / 8.0;
            d[i] = i % 50 == 7 ? -0.0 : x;
            if (n == 5001) /* ascending, then a run all alike: the sample's band at its ends */
                d[i] = i < n / 2 ? (double)i : 3.0;
        }
        memcpy(ref, kv, n * sizeof *kv);
        for (size_t i = 1; i < n; i++) /* insertion: stable */
            for (size_t j = i; j > 0 && ref[j - 1].key > ref[j].key; j--) {
                cpa_kv t = ref[j];
                ref[j] = ref[j - 1];
                ref[j - 1] = t;
            }
        cpa_sort_kv(kv, tmp, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(kv[i].key, ref[i].key);
            assert_int_equal(kv[i].val, ref[i].val);
        }
        memcpy(dr, d, n * sizeof *d);
        qsort(dr, n, sizeof *dr, cmp_ref_double);
        for (size_t k = 0; k < n; k += n / 7 + 1) {
            double *v = malloc(n * sizeof *v);
            memcpy(v, d, n * sizeof *v);
            assert_true(cpa_select(v, n, k) == dr[k]);
            for (size_t i = 0; i < n; i++) /* and the rest on their sides of it */
                assert_true(i < k ? v[i] <= v[k] : i > k ? v[i] >= v[k] : 1);
            free(v);
        }
        assert_int_equal(cpa_sort_doubles(d, n), 0);
        for (size_t i = 0; i < n; i++)
            assert_true(d[i] == dr[i]);
        for (size_t i = 1; i < n; i++)
            assert_false(d[i - 1] == 0 && d[i] == 0 && signbit(d[i]) && !signbit(d[i - 1]));
        free(kv);
        free(tmp);
        free(ref);
        free(d);
        free(dr);
    }
}

/* A NaN (a forged trace can make one) orders with nothing: selection still ends, and
 * returns an element, wherever the NaNs are (the pivot's three places among them). */
static void test_selection_ends_with_nans(void **state)
{
    (void)state;
    const size_t n = 101;
    double v[101];
    for (int pattern = 0; pattern < 4; pattern++)
        for (size_t k = 0; k < n; k += 10) {
            for (size_t i = 0; i < n; i++) {
                int nan = pattern == 0   ? 1
                          : pattern == 1 ? i == 0 || i == n / 2 || i == n - 1
                          : pattern == 2 ? i % 2
                                         : i % 7 == 3;
                v[i] = nan ? NAN : (double)((i * 37) % 101);
            }
            double got = cpa_select(v, n, k);
            size_t found = 0;
            for (size_t i = 0; i < n; i++)
                found += isnan(got) || (double)((i * 37) % 101) == got;
            assert_true(found > 0);
        }
}

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

/* Losses and a DONE with no CALL are kept as warnings; the calls around them still load. */
static void test_load_losses(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    put_call(w, CP_OP_ALLREDUCE, 0, 256, -1, BASE_NS, 1);
    cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 5);
    assert_int_equal(cp_trace_writer_flush(w), 0);
    put_done(w, CP_OP_ALLREDUCE, 0, -1, BASE_NS + 10, BASE_NS + 20);
    put_done(w, CP_OP_ALLREDUCE, 9, -1, BASE_NS + 30, BASE_NS + 40);
    assert_int_equal(cp_trace_writer_close(w), 0);
    cpa_model *m = load_or_fail(dir);
    assert_int_equal(m->lost_records, 5);
    assert_int_equal(m->ranks[0].unmatched_done, 1);
    assert_true(m->ranks[0].calls[0].gpu_timed);
    assert_true(has_warning(m, "lost 5 records"));
    assert_true(has_warning(m, "1 DONE records match no CALL"));
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* NCCL_OP records join their calls by the DONE's key but on their own, in any order: 50
 * calls before any (so the first finds the older ones through the table), NCCL_OPs newest
 * first, then the DONEs; one NCCL_OP after its call's DONE; one with no CALL and one for a
 * call that already has one (both counted, like a DONE with no CALL); an algorithm and a
 * protocol no NCCL has ("?"); a call timed by events beside its NCCL_OP (auto mode), which
 * the statistics count as events, not the plugin. NCCL's own seqNumber is kept beside. */
static void test_load_nccl_op(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    const int n = 50;
    for (int i = 0; i < n; i++)
        put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, 256, -1, ar_start(i) - 500, 1);
    for (int i = n - 1; i >= 0; i--)
        put_nccl_op(w, CP_OP_ALLREDUCE, (uint64_t)i, i == 5 ? UINT64_MAX : 1000 + (uint64_t)i,
                    i == 7 ? 200 : CP_ALGO_RING, i == 7 ? 99 : CP_PROTO_SIMPLE, 8);
    for (int i = 0; i < n; i++)
        put_done_by(w, CP_OP_ALLREDUCE, (uint64_t)i, ar_start(i), ar_start(i) + 10000,
                    i == 3 ? CP_TIMING_EVENTS : CP_TIMING_PLUGIN);
    /* the last AllReduce: its DONE first, then what NCCL said of it */
    put_call(w, CP_OP_ALLREDUCE, (uint64_t)n, 256, -1, ar_start(n) - 500, 1);
    put_done_by(w, CP_OP_ALLREDUCE, (uint64_t)n, ar_start(n), ar_start(n) + 10000,
                CP_TIMING_PLUGIN);
    put_nccl_op(w, CP_OP_ALLREDUCE, (uint64_t)n, 1000 + (uint64_t)n, CP_ALGO_TREE, CP_PROTO_LL,
                2);
    put_nccl_op(w, CP_OP_ALLREDUCE, (uint64_t)n, 7, CP_ALGO_PAT, CP_PROTO_LL128, 1); /* twice */
    put_nccl_op(w, CP_OP_ALLREDUCE, 99, 99, CP_ALGO_RING, CP_PROTO_LL, 1);          /* no CALL */
    assert_int_equal(cp_trace_writer_close(w), 0);

    cpa_analysis a;
    analyze_or_fail(dir, &a);
    const cpa_rank *r = &a.model->ranks[0];
    assert_int_equal(r->ncalls, n + 1);
    assert_int_equal(r->unmatched_nccl_op, 2);
    assert_int_equal(r->unmatched_done, 0);
    assert_true(has_warning(a.model, "2 NCCL_OP records match no CALL"));
    for (int i = 0; i <= n; i++) {
        const cpa_call *c = &r->calls[i];
        assert_true(c->nccl & CPA_NCCL_SEEN);
        assert_false(c->nccl & CPA_NCCL_NOT_STARTED);
        assert_true(c->done && c->gpu_timed);
        assert_int_equal(c->timing, i == 3 ? CP_TIMING_EVENTS : CP_TIMING_PLUGIN);
        assert_int_equal(cpa_call_nccl_seq(r, c), i == 5 ? CPA_SEQ_NONE : 1000 + (uint64_t)i);
        if (i == n) {
            assert_string_equal(cp_algo_name(c->algo), "TREE");
            assert_string_equal(cp_proto_name(c->proto), "LL");
            assert_int_equal(c->nchannels, 2);
        } else if (i == 7) {
            assert_string_equal(cp_algo_name(c->algo), "?");
            assert_string_equal(cp_proto_name(c->proto), "?");
            assert_int_equal(c->nchannels, 8);
        } else {
            assert_int_equal(c->algo, CP_ALGO_RING);
            assert_int_equal(c->proto, CP_PROTO_SIMPLE);
            assert_int_equal(c->nchannels, 8);
        }
    }
    assert_int_equal(a.stats.nrows, 1);
    const cpa_stat *row = &a.stats.rows[0];
    assert_int_equal(row->ops, n + 1);
    assert_int_equal(row->timed_plugin, n);
    assert_int_equal(row->timed_events, 1);
    assert_int_equal(row->timed_host, 0);
    assert_int_equal(row->algo_proto[CP_ALGO_RING][CP_PROTO_SIMPLE], n - 1);
    assert_int_equal(row->algo_proto[CP_ALGO_TREE][CP_PROTO_LL], 1);
    assert_int_equal(row->algo_proto[CP_ALGO_PAT][CP_PROTO_LL128], 0);
    assert_int_equal(row->channels_max, 8);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* Sizes and counts no trace can hold: an AllReduce of 2^62 float32 (S past 2^64 bytes) is
 * left out of the statistics and counted, where it used to wrap to a 0-byte row; forged
 * LOST counts saturate rather than wrap back to a small, believable total. */
/* What each trace lacks reaches the model by kind: rank 0 LOST records of three causes (one
 * this collprof has no name for) and a record of an unknown type; rank 1 a corrupt chunk in
 * the middle; rank 2 a file cut inside its last chunk (its hole starts after the last record
 * read); rank 3 nothing. */
static void test_integrity_by_kind(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char path[3][1024];
    for (int r = 0; r < 4; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 1024);
        put_comm(w, 0, COMM_ID, 4, r);
        for (int i = 0; i < 40; i++) {
            uint64_t t = BASE_NS + (uint64_t)i * 1000000;
            put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, 1024, -1, t, 1);
            put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, t + 1000, t + 11000);
            if (r == 0 && i == 20) {
                static const struct { uint32_t cause; uint64_t count; } lost[] = {
                    {CP_LOST_WRITE_ERROR, 3}, {CP_LOST_TOO_BIG, 1}, {99, 5}};
                for (size_t k = 0; k < 3; k++) {
                    cp_rec_lost l = {.h = {CP_REC_LOST, sizeof l}, .cause = lost[k].cause,
                                     .count = lost[k].count, .at_ns = t + 500 + k};
                    assert_int_equal(cp_trace_writer_append(w, &l), 0);
                }
                struct { cp_record_header h; uint64_t x; } unknown = {{250, 16}, 0};
                assert_int_equal(cp_trace_writer_append(w, &unknown), 0);
            }
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
        if (r < 3)
            snprintf(path[r], sizeof path[r], "%s/rank%02d%s", dir, r, CP_TRACE_FILE_SUFFIX);
    }
    struct stat st;
    assert_int_equal(stat(path[1], &st), 0);
    FILE *f = fopen(path[1], "r+b");
    assert_non_null(f);
    fseek(f, st.st_size / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, st.st_size / 2, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    assert_int_equal(stat(path[2], &st), 0);
    assert_int_equal(truncate(path[2], st.st_size - 100), 0);

    cpa_model *m = load_or_fail(dir);
    assert_int_equal(m->nranks, 4);
    const cpa_integrity *g0 = &m->ranks[0].integrity, *g1 = &m->ranks[1].integrity,
                        *g2 = &m->ranks[2].integrity, *g3 = &m->ranks[3].integrity;
    assert_int_equal(g0->lost_by_cause[CP_LOST_WRITE_ERROR], 3);
    assert_int_equal(g0->lost_by_cause[CP_LOST_TOO_BIG], 1);
    assert_int_equal(g0->lost_by_cause[0], 5);
    assert_int_equal(g0->unknown_records, 1);
    assert_int_equal(g0->first_gap_ns, BASE_NS + 20 * 1000000ull + 500);
    assert_int_equal(m->ranks[0].lost_records, 9);
    assert_int_equal(g1->corrupt_chunks, 1);
    assert_true(g1->missing_chunks >= 1);
    assert_int_equal(g2->truncated, 1);
    assert_int_equal(g2->first_gap_ns, m->ranks[2].last_ns);
    assert_true(g2->first_gap_ns > BASE_NS);
    assert_false(cpa_rank_has_holes(&m->ranks[3]));
    assert_int_equal(g3->first_gap_ns, 0);
    assert_int_equal(m->ranks_with_holes, 3);
    assert_int_equal(m->integrity.truncated, 1);
    assert_int_equal(m->integrity.unknown_records, 1);
    char text[256];
    cpa_integrity_text(text, sizeof text, g0, m->ranks[0].lost_records);
    assert_string_equal(text, "9 records lost (3 write_error, 1 too_big, 5 cause unknown), 1 of "
                              "an unknown type");
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

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

/* A PyTorch job's sites, as the shim records them (the dynamic symbol table's mangled
 * names), come out of the model demangled; a long parameter list is shortened, a C name and
 * a name that is not a valid mangling stay as they are. */
static void test_sites_demangled(void **state)
{
    (void)state;
    if (!cpa_demangle_available())
        skip(); /* no libstdc++.so.6: the frames stay as recorded, as the header says */
    char out[256];
    const char *torch = "_ZN4c10d16ProcessGroupNCCL9allreduceEv+0xe91 (libtorch_cuda.so)";
    cpa_demangle_frame(torch, strlen(torch), out, sizeof out);
    assert_string_equal(out, "c10d::ProcessGroupNCCL::allreduce()+0xe91 (libtorch_cuda.so)");
    const char *c_frame = "issue+0x40e (collprof-sim)";
    cpa_demangle_frame(c_frame, strlen(c_frame), out, sizeof out);
    assert_string_equal(out, c_frame);
    const char *bad = "_Zjunk+0x1 (x.so)";
    cpa_demangle_frame(bad, strlen(bad), out, sizeof out);
    assert_string_equal(out, bad);
    /* std::vector<at::Tensor>& ... : a long list becomes (...) */
    const char *lng = "_ZN4c10d16ProcessGroupNCCL9allgatherERSt6vectorIS1_IN2at6TensorESaIS3_EESaIS5_EERS5_RKNS_16AllgatherOptionsE+0x10 (libtorch_cuda.so)";
    cpa_demangle_frame(lng, strlen(lng), out, sizeof out);
    assert_string_equal(out, "c10d::ProcessGroupNCCL::allgather(...)+0x10 (libtorch_cuda.so)");

    /* through the loader: the site line of a call */
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    unsigned char buf[512];
    const char *frames[] = {"_ZN4c10d16ProcessGroupNCCL9allreduceEv+0xe91 (libtorch_cuda.so)",
                            "main+0x12 (python3)"};
    size_t n = cp_rec_site_build(buf, sizeof buf, 0, 0x401234, frames, 2);
    assert_true(n > 0);
    assert_int_equal(cp_trace_writer_append(w, buf), 0);
    assert_int_equal(cp_trace_writer_close(w), 0);
    cpa_model *m = load_or_fail(dir);
    assert_true(m->ranks[0].nsites >= 1);
    assert_string_equal(m->ranks[0].sites[0], "c10d::ProcessGroupNCCL::allreduce()+0xe91 "
                                              "(libtorch_cuda.so) < main+0x12 (python3)");
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* A call keeps its site index, its DONE's timing source, NCCL's algorithm and protocol in a
 * few bits each (model.h): a value past them must read as unknown, not as the known one its
 * low bits would name. A site index past 2^20 - 2 is a damaged file's: its call shows no site
 * (its low bits would name site 3), and a SITE record of the index kept for "none" is left
 * out. Timing sources this collprof does not know (12 and 10: their low three bits are
 * PLUGIN's and CUPTI's) read as CPA_TIMING_UNKNOWN (7) and count as neither. */
static void test_load_values_past_the_calls_bits(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    unsigned char buf[512];
    const char *site3[] = {"three+0x3 (x.so)"}, *none[] = {"none+0x1 (x.so)"};
    size_t n = cp_rec_site_build(buf, sizeof buf, 3, 0x403, site3, 1);
    assert_true(n > 0);
    assert_int_equal(cp_trace_writer_append(w, buf), 0);
    n = cp_rec_site_build(buf, sizeof buf, CPA_SITE_NONE, 0x404, none, 1);
    assert_true(n > 0);
    assert_int_equal(cp_trace_writer_append(w, buf), 0);
    const uint32_t sites[] = {3, (1u << 20) + 3, UINT32_MAX, CPA_SITE_NONE};
    const uint8_t timings[] = {CP_TIMING_EVENTS, 12, 10, CP_TIMING_PLUGIN};
    for (int i = 0; i < 4; i++) {
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = CP_OP_ALLREDUCE, .dtype = F32,
                         .flags = CP_CALL_TIMED, .comm_index = 0, .site_index = sites[i],
                         .seq = (uint64_t)i, .count = 256, .stream = 1,
                         .enter_ns = ar_start(i) - 500, .host_ns = 3000, .peer = -1};
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
        put_done_by(w, CP_OP_ALLREDUCE, (uint64_t)i, ar_start(i), ar_start(i) + 10000,
                    timings[i]);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);

    cpa_analysis a;
    analyze_or_fail(dir, &a);
    const cpa_rank *r = &a.model->ranks[0];
    assert_int_equal(r->ncalls, 4);
    assert_string_equal(cpa_call_site(r, &r->calls[0]), "three+0x3 (x.so)");
    for (int i = 1; i < 4; i++)
        assert_null(cpa_call_site(r, &r->calls[i]));
    assert_int_equal(r->calls[0].timing, CP_TIMING_EVENTS);
    assert_int_equal(r->calls[1].timing, CPA_TIMING_UNKNOWN);
    assert_int_equal(r->calls[2].timing, CPA_TIMING_UNKNOWN);
    assert_int_equal(r->calls[3].timing, CP_TIMING_PLUGIN);
    for (int i = 0; i < 4; i++)
        assert_true(r->calls[i].done && r->calls[i].gpu_timed);
    assert_int_equal(a.stats.nrows, 1);
    assert_int_equal(a.stats.rows[0].timed_plugin, 1);
    assert_int_equal(a.stats.rows[0].timed_cupti, 0);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_job),
        cmocka_unit_test(test_load_cut),
        cmocka_unit_test(test_load_empty),
        cmocka_unit_test(test_load_losses),
        cmocka_unit_test(test_sorts_and_selection),
        cmocka_unit_test(test_selection_ends_with_nans),
        cmocka_unit_test(test_match_job),
        cmocka_unit_test(test_match_sparse_sequences),
        cmocka_unit_test(test_comm_index_past_the_table),
        cmocka_unit_test(test_match_partial_and_p2p),
        cmocka_unit_test(test_stats_job),
        cmocka_unit_test(test_stats_percentiles),
        cmocka_unit_test(test_stats_time_of_the_last_arrival),
        cmocka_unit_test(test_stats_grouped_calls_share_the_span),
        cmocka_unit_test(test_stats_rows_by_comm_size_and_exact_size),
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_impossible_sizes_and_counts),
        cmocka_unit_test(test_integrity_by_kind),
        cmocka_unit_test(test_load_nccl_op),
        cmocka_unit_test(test_sites_demangled),
        cmocka_unit_test(test_load_values_past_the_calls_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
