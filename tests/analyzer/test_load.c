/* Loading a trace directory into the model (analyzer/load.c), over analyzer_job.h's job and
 * files written for each case: what is kept of each record, what a cut, lost or corrupt
 * trace leaves, and how values past what the model holds read. */
#include "tests/analyzer/analyzer_job.h"

#include <sys/stat.h>
#include <unistd.h>

#include "analyzer/demangle.h"

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

/* Host times past 32 bits of ns reach the model within its 65.5 us steps (32.8 us off at
 * most), below 2^31 ns exactly; one past 2^47 ns reads as 39 hours; the rank's last time is
 * the file's exact end. */
static void test_load_long_host_times(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_rank(dir, 0, 0, "node-a", 0);
    put_comm(w, 0, COMM_ID, 1, 0);
    static const uint64_t host[] = {(1ull << 31) - 1, 1ull << 31, 2000000000ull, 3000000000ull,
                                    UINT32_MAX, 5000000000ull, 3600000000000ull * 30,
                                    CP_HOST_NS_MAX};
    enum { N = sizeof host / sizeof host[0] };
    uint64_t end = 0;
    for (int i = 0; i < N; i++) {
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = CP_OP_ALLREDUCE, .dtype = F32,
                         .comm_index = 0, .site_index = UINT32_MAX, .seq = (uint64_t)i,
                         .count = 256, .stream = 1, .enter_ns = ar_start(i), .peer = -1};
        cp_call_set_host_ns(&c, host[i]);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
        if (ar_start(i) + host[i] > end)
            end = ar_start(i) + host[i];
    }
    assert_int_equal(cp_trace_writer_close(w), 0);

    cpa_analysis a;
    analyze_or_fail(dir, &a);
    const cpa_rank *r = &a.model->ranks[0];
    assert_int_equal(r->ncalls, N);
    for (int i = 0; i < N; i++) {
        uint64_t got = cpa_call_host_ns(&r->calls[i]), want = host[i];
        if (want < (1ull << 31))
            assert_int_equal(got, want);
        else if (want <= (1ull << 47))
            assert_true(got + (1u << 15) >= want && got <= want + (1u << 15));
        else
            assert_int_equal(got, (1ull << 47) - (1ull << CPA_HOST_SHIFT));
    }
    assert_int_equal(r->last_ns, end);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* Two ranks of one communicator, each capped (8 segments of 4 KiB): rank 1 writes a CLOCK
 * between calls, so its rotation deletes more of its calls than rank 0's. The loader joins
 * each rank's segments into one rank (not 8), counts what rotation deleted as lost (cause
 * rotated) from the oldest kept segment, and the operations only rank 0 kept are no hang,
 * no mismatch and no straggler. A segment deleted by hand in the middle is a hole. */
static void test_load_rotated_segments(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    const int n = 600;
    uint64_t rotated[2];
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = open_rank(dir, r, r, "node-a", 512);
        assert_int_equal(cp_trace_writer_rotate(w, 8 * 4096), 0);
        cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = 0, .comm_id = COMM_ID,
                         .nranks = 2, .rank = r, .cuda_dev = r, .origin = CP_COMM_INIT_RANK};
        assert_int_equal(cp_trace_writer_append_kept(w, &c), 0);
        for (int i = 0; i < n; i++) {
            uint64_t at = BASE_NS + (uint64_t)i * 100000;
            put_call(w, CP_OP_ALLREDUCE, (uint64_t)i, 256, -1, at + (uint64_t)r * 10, 1);
            put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, at + 1000, at + 11000);
            cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = at + 20000,
                              .realtime_ns = at + 20000};
            if (r == 1)
                assert_int_equal(cp_trace_writer_append(w, &k), 0);
        }
        rotated[r] = cp_trace_writer_records_rotated(w);
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = -1,
                        .at_ns = BASE_NS + (uint64_t)n * 100000};
        assert_int_equal(cp_trace_writer_closing(w), 0);
        assert_int_equal(cp_trace_writer_append(w, &e), 0);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    assert_true(rotated[0] > 0 && rotated[1] > rotated[0]);

    cpa_analysis a;
    char err[256] = "";
    assert_int_equal(cpa_analyze(dir, &a, NULL, NULL, err, sizeof err), 0);
    const cpa_model *m = a.model;
    assert_int_equal(m->nranks, 2);
    assert_int_equal(m->rotated_records, rotated[0] + rotated[1]);
    assert_int_equal(m->ranks_rotated, 2);
    assert_int_equal(m->integrity.lost_by_cause[CP_LOST_ROTATED], rotated[0] + rotated[1]);
    assert_int_equal(m->integrity.missing_chunks, 0);
    assert_int_equal(m->integrity.unknown_records, 0);
    for (int r = 0; r < 2; r++) {
        const cpa_rank *k = &m->ranks[r];
        assert_int_equal(k->rank, r);
        assert_true(k->segments >= 2 && k->segments <= CP_TRACE_SEGMENTS);
        assert_int_equal(k->rotated_records, rotated[r]);
        assert_int_equal(k->lost_records, rotated[r]);
        assert_int_equal(k->ncomms, 1); /* the heads' repeats are one communicator */
        assert_true(k->ended);
        assert_int_equal(k->integrity.first_gap_ns, 0); /* before the kept span: no hole in it */
        /* the newest calls, in order, none twice; the kept span starts at the first */
        assert_true(k->ncalls > 10 && k->ncalls < (size_t)n);
        for (size_t i = 0; i < k->ncalls; i++)
            assert_int_equal(k->calls[i].seq, (uint64_t)n - k->ncalls + i);
        assert_int_equal(k->kept_from_ns, k->calls[0].enter_ns);
    }
    assert_true(m->ranks[1].ncalls < m->ranks[0].ncalls);
    assert_int_equal(a.hangs.nrows, 0);
    assert_int_equal(a.mismatches.nrows, 0);
    assert_int_equal(a.stragglers.nrows, 0);
    cpa_analysis_free(&a);

    /* rank 0's second kept segment gone: a hole, said */
    char **paths;
    int files = cp_trace_dir_list(dir, &paths, err, sizeof err);
    assert_true(files > 4);
    assert_int_equal(unlink(paths[1]), 0);
    cp_trace_dir_free(paths, files);
    cpa_model *mm = NULL;
    assert_int_equal(cpa_model_load(dir, &mm, err, sizeof err), 0);
    assert_int_equal(mm->nranks, 2);
    assert_int_equal(mm->ranks[0].integrity.missing_chunks, 1);
    int said = 0;
    for (size_t i = 0; i < mm->nwarnings; i++)
        said |= strstr(mm->warnings[i], "of its rotated trace are missing") != NULL;
    assert_true(said);
    cpa_model_free(mm);
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
        cmocka_unit_test(test_integrity_by_kind),
        cmocka_unit_test(test_load_nccl_op),
        cmocka_unit_test(test_sites_demangled),
        cmocka_unit_test(test_load_values_past_the_calls_bits),
        cmocka_unit_test(test_load_long_host_times),
        cmocka_unit_test(test_load_rotated_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
