/* Loading and matching at scale: the loader's threads and the matcher's counting are only
 * faster, never different. A directory of 16 synthetic rank files, some of them damaged in
 * the ways that give warnings, loads into the same model (a digest of every field and every
 * warning, in order) on 1, 2, 5 and 16 threads; operations come out the same whether
 * collectives are placed by counting or, for sparse sequence numbers, by sorting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "trace/trace_writer.h"
#include "tests/trace/test_trace_util.h"

#define NFILES 16
#define WORLD 0x5eed000000000001ull
#define HALF 0x5eed000000000100ull /* + 0 / + 1: the two halves of a split, keys reversed */
#define BASE_NS 2000000000ull

static cp_trace_writer *open_file(const char *dir, int file_no, int rank, const char *host)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/r%02d%s", dir, file_no, CP_TRACE_FILE_SUFFIX);
    cp_file_header h;
    cp_file_header_init(&h);
    h.rank = rank;
    h.pid = 500 + (uint32_t)file_no;
    h.flags = CP_FILE_GPU_TIMING;
    h.mono_anchor_ns = BASE_NS + (uint64_t)file_no;
    h.realtime_anchor_ns = 1700000000000000000ull + (uint64_t)file_no * 1000;
    snprintf(h.hostname, sizeof h.hostname, "%s", host);
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 4096, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    return w;
}

static void put(cp_trace_writer *w, const void *rec)
{
    assert_int_equal(cp_trace_writer_append(w, rec), 0);
}

static void put_comm(cp_trace_writer *w, uint32_t index, uint64_t id, int n, int rank)
{
    cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                     .nranks = n, .rank = rank, .cuda_dev = rank % 8,
                     .origin = CP_COMM_INIT_RANK};
    put(w, &c);
}

static void put_call(cp_trace_writer *w, uint32_t comm_index, uint8_t op, uint64_t seq,
                     int peer, uint64_t enter_ns, uint64_t stream)
{
    cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = 7, .redop = 0,
                     .flags = CP_CALL_TIMED, .comm_index = comm_index,
                     .site_index = (uint32_t)(seq % 3), .seq = seq,
                     .count = 1024 + seq * 7, .stream = stream, .enter_ns = enter_ns,
                     .host_ns = 1500 + (uint32_t)(seq % 11), .peer = peer,
                     .thread = (uint16_t)(seq % 2)};
    put(w, &c);
}

static void put_done(cp_trace_writer *w, uint32_t comm_index, uint8_t op, uint64_t seq,
                     int peer, uint64_t start)
{
    cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = comm_index, .seq = seq,
                     .gpu_start_ns = start, .gpu_end_ns = start + 5000 + seq, .peer = peer,
                     .op = op, .timing = CP_TIMING_EVENTS};
    put(w, &d);
}

/* File f: world rank f (files 14 and 15 both say rank 13; file 3's header does not know).
 * On the world comm, 300 AllReduces with DONEs trailing by f % 5 calls, then the split
 * halves (rank order reversed within each) with 50 AllGathers, sends around a ring, a site,
 * a clock and a hang; damage by file number. */
static void write_file(const char *dir, int f)
{
    int rank = f >= 14 ? 13 : f;
    cp_trace_writer *w = open_file(dir, f, f == 3 ? -1 : rank, f < 8 ? "node-a" : "node-b");
    if (f == 3) {
        unsigned char buf[256];
        cp_rec_process p = {.rank = 3, .local_rank = 3, .world_size = NFILES, .pid = 77};
        size_t n = cp_rec_process_build(buf, sizeof buf, &p, "node-a", "job", "none");
        assert_true(n > 0);
        put(w, buf);
    }
    const char *frames[2] = {"step+0x10 (a.py)", "main+0x20 (a.py)"};
    unsigned char sbuf[256];
    for (uint32_t s = 0; s < 3; s++) {
        size_t n = cp_rec_site_build(sbuf, sizeof sbuf, s, 0x1000 + s, frames, 2 - s % 2);
        assert_true(n > 0);
        put(w, sbuf);
    }
    put_comm(w, 0, WORLD, NFILES, rank);
    int half = rank < 8 ? 0 : 1;
    if (f != 7) /* file 7 names it only after its first call on it */
        put_comm(w, 1, HALF + (uint64_t)half, 8, 7 - rank % 8);
    if (f == 9) /* a second communicator under index 1: a warning */
        put_comm(w, 1, HALF + 7, 8, 0);
    const int lag = f % 5;
    for (int i = 0; i < 300; i++) {
        uint64_t t = BASE_NS + (uint64_t)i * 100000 + (uint64_t)f * 13;
        put_call(w, 0, CP_OP_ALLREDUCE, (uint64_t)i, -1, t, 0x7f00 + (uint64_t)(i % 2));
        if (i >= lag)
            put_done(w, 0, CP_OP_ALLREDUCE, (uint64_t)(i - lag), -1, t - 1000);
        if (i % 100 == 0) {
            cp_rec_clock c = {.h = {CP_REC_CLOCK, sizeof c}, .mono_ns = t,
                              .realtime_ns = t + 1700000000000000000ull};
            put(w, &c);
        }
    }
    for (int i = 300 - lag; i < 300; i++)
        put_done(w, 0, CP_OP_ALLREDUCE, (uint64_t)i, -1, BASE_NS + (uint64_t)i * 100000);
    for (int i = 0; i < 50; i++) {
        if (f == 7 && i == 1)
            put_comm(w, 1, HALF + (uint64_t)half, 8, 7 - rank % 8);
        put_call(w, 1, CP_OP_ALLGATHER, (uint64_t)i, -1, BASE_NS + 40000000ull + (uint64_t)i * 1000,
                 0x9000);
        if (f != 6 || i < 40) /* file 6's last AllGathers never finish */
            put_done(w, 1, CP_OP_ALLGATHER, (uint64_t)i, -1, BASE_NS + 40000000ull + (uint64_t)i * 1000);
    }
    /* A ring of sends, each rank receiving from the one before. */
    put_call(w, 0, CP_OP_SEND, 0, (rank + 1) % NFILES, BASE_NS + 50000000ull, 0x9100);
    put_call(w, 0, CP_OP_RECV, 0, (rank + NFILES - 1) % NFILES, BASE_NS + 50000100ull, 0x9100);
    put_done(w, 0, CP_OP_RECV, 0, (rank + NFILES - 1) % NFILES, BASE_NS + 50000200ull);
    put_done(w, 0, CP_OP_SEND, 0, (rank + 1) % NFILES, BASE_NS + 50000200ull);
    if (f == 5) /* a DONE with no CALL, and a call on a communicator never named */
        put_done(w, 0, CP_OP_BROADCAST, 99, 0, BASE_NS);
    if (f == 5)
        put_call(w, 4, CP_OP_REDUCE, 0, 0, BASE_NS + 60000000ull, 0x9200);
    if (f == 11) {
        cp_rec_hang h = {.h = {CP_REC_HANG, sizeof h}, .comm_index = 1, .seq = 49,
                         .at_ns = BASE_NS + 70000000ull, .age_ns = 5000000000ull, .peer = -1,
                         .op = CP_OP_ALLGATHER, .gpu_state = CP_HANG_GPU_STARTED};
        put(w, &h);
    }
    if (f == 12)
        cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 3);
    if (f != 10) {
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0,
                        .at_ns = BASE_NS + 80000000ull};
        put(w, &e);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
    if (f == 10) { /* killed: its last chunk cut */
        char path[1024];
        snprintf(path, sizeof path, "%s/r%02d%s", dir, f, CP_TRACE_FILE_SUFFIX);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(truncate(path, sb.st_size - 200), 0);
    }
}

static char *write_dir(void)
{
    char *dir = tt_tmpdir();
    for (int f = 0; f < NFILES; f++)
        if (f != 2) /* file 2 is not a trace at all */
            write_file(dir, f);
    char path[1024];
    snprintf(path, sizeof path, "%s/r02%s", dir, CP_TRACE_FILE_SUFFIX);
    tt_write_file(path, "COLLPROF but not really", 23);
    return dir;
}

/* ---- a digest of everything the model holds ---- */

typedef struct digest {
    uint64_t h;
} digest;

static void mix(digest *d, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        d->h ^= b[i];
        d->h *= 0x100000001b3ull;
    }
}
#define MIX(d, v)                                                                                  \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        mix((d), &v_, sizeof v_);                                                                  \
    } while (0)

static void mix_str(digest *d, const char *s)
{
    if (s)
        mix(d, s, strlen(s) + 1);
    else
        MIX(d, (uint8_t)0xff);
}

static uint64_t model_digest(const cpa_model *m)
{
    digest d = {0xcbf29ce484222325ull};
    MIX(&d, m->nranks);
    MIX(&d, m->records);
    MIX(&d, m->lost_records);
    MIX(&d, m->nwarnings);
    MIX(&d, m->dropped_warnings);
    for (size_t i = 0; i < m->nwarnings; i++)
        mix_str(&d, m->warnings[i]);
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        mix_str(&d, r->path);
        MIX(&d, r->rank);
        MIX(&d, r->local_rank);
        MIX(&d, r->world_size);
        MIX(&d, r->pid);
        MIX(&d, r->file_flags);
        MIX(&d, r->nccl_version);
        mix_str(&d, r->hostname);
        mix_str(&d, r->job_id);
        MIX(&d, r->first_ns);
        MIX(&d, r->last_ns);
        MIX(&d, r->end_signal);
        MIX(&d, r->end_exit_code);
        MIX(&d, r->end_ns);
        MIX(&d, r->records);
        MIX(&d, r->lost_records);
        MIX(&d, r->unmatched_done);
        MIX(&d, r->walk_stop);
        MIX(&d, r->ended);
        MIX(&d, r->nclocks);
        for (size_t k = 0; k < r->nclocks; k++) {
            MIX(&d, r->clocks[k].mono_ns);
            MIX(&d, r->clocks[k].realtime_ns);
        }
        MIX(&d, r->nstreams);
        for (size_t k = 0; k < r->nstreams; k++)
            MIX(&d, r->streams[k]);
        MIX(&d, r->nsites);
        for (size_t k = 0; k < r->nsites; k++)
            mix_str(&d, r->sites[k]);
        MIX(&d, r->nhangs);
        for (size_t k = 0; k < r->nhangs; k++) {
            const cpa_hang_seen *h = &r->hangs[k];
            MIX(&d, h->comm_id);
            MIX(&d, h->seq);
            MIX(&d, h->at_ns);
            MIX(&d, h->age_ns);
            MIX(&d, h->peer);
            MIX(&d, h->op);
            MIX(&d, h->gpu_state);
        }
        MIX(&d, r->ncomms);
        for (size_t k = 0; k < r->ncomms; k++) {
            const cpa_comm *c = &r->comms[k];
            MIX(&d, c->comm_id);
            MIX(&d, c->parent_id);
            MIX(&d, c->index);
            MIX(&d, c->nranks);
            MIX(&d, c->rank);
            MIX(&d, c->cuda_dev);
        }
        MIX(&d, r->ncalls);
        for (size_t k = 0; k < r->ncalls; k++) {
            const cpa_call *c = &r->calls[k];
            MIX(&d, cpa_call_comm_id(r, c));
            MIX(&d, c->seq);
            MIX(&d, c->count);
            MIX(&d, c->enter_ns);
            MIX(&d, c->gpu_start_ns);
            MIX(&d, c->gpu_end_ns);
            MIX(&d, c->comm_index);
            MIX(&d, c->host_q);
            MIX(&d, (uint32_t)c->site_index);
            MIX(&d, c->peer);
            MIX(&d, cpa_call_nranks(r, c));
            MIX(&d, cpa_call_comm_rank(r, c));
            MIX(&d, c->stream);
            MIX(&d, c->op);
            MIX(&d, c->dtype);
            MIX(&d, c->redop);
            MIX(&d, c->flags);
            MIX(&d, (uint32_t)c->done);
            MIX(&d, (uint32_t)c->gpu_timed);
            MIX(&d, (uint32_t)c->timing);
        }
    }
    return d.h;
}

static uint64_t matched_digest(const cpa_matched *mt)
{
    digest d = {0xcbf29ce484222325ull};
    MIX(&d, mt->nops);
    MIX(&d, mt->nparts);
    MIX(&d, mt->unmatchable);
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        MIX(&d, o->comm_id);
        MIX(&d, o->seq);
        MIX(&d, o->first_part);
        MIX(&d, o->nparts);
        MIX(&d, o->nranks);
        MIX(&d, o->sender);
        MIX(&d, o->receiver);
        MIX(&d, o->op);
        MIX(&d, o->complete);
    }
    for (size_t i = 0; i < mt->nparts; i++) {
        MIX(&d, (uint32_t)mt->parts[i].rank_idx);
        MIX(&d, mt->parts[i].call_idx);
        MIX(&d, mt->parts[i].arrival_ns);
        MIX(&d, mt->parts[i].end_ns);
    }
    return d.h;
}

static cpa_model *load(const char *dir, unsigned threads)
{
    cpa_model *m = NULL;
    char err[256] = "";
    if (cpa_model_load_threads(dir, threads, &m, err, sizeof err))
        fail_msg("%u threads: %s", threads, err);
    return m;
}

static int has_warning(const cpa_model *m, const char *needle)
{
    for (size_t i = 0; i < m->nwarnings; i++)
        if (strstr(m->warnings[i], needle))
            return 1;
    return 0;
}

/* The same model, warnings in the same order, on any number of threads; the damage shows. */
static void test_threads_load_the_same_model(void **state)
{
    (void)state;
    char *dir = write_dir();
    cpa_model *one = load(dir, 1);
    const uint64_t want = model_digest(one);
    assert_int_equal(one->nranks, NFILES - 1);
    assert_true(has_warning(one, "r02.cptrace"));                       /* not a trace */
    assert_true(has_warning(one, "is cut at byte"));                    /* file 10 */
    assert_true(has_warning(one, "1 DONE records match no CALL"));      /* file 5 */
    assert_true(has_warning(one, "name no known communicator"));       /* file 5 */
    assert_true(has_warning(one, "name two communicators"));            /* file 9 */
    assert_true(has_warning(one, "lost 3 records"));                    /* file 12 */
    assert_true(has_warning(one, "both say rank 13"));                  /* files 14, 15 */
    /* A call's communicator is looked up (cpa_call_comm): file 9's index 1 is the record that
     * sorts first (the lower id), file 7's the one its file names only after a call on it. */
    size_t looked_up[2] = {0, 0};
    for (size_t i = 0; i < one->nranks; i++) {
        const cpa_rank *r = &one->ranks[i];
        int f9 = strstr(r->path, "r09") != NULL, f7 = strstr(r->path, "r07") != NULL;
        for (size_t k = 0; (f9 || f7) && k < r->ncalls; k++) {
            const cpa_call *c = &r->calls[k];
            if (c->comm_index != 1)
                continue;
            assert_int_equal(cpa_call_comm_id(r, c), f9 ? HALF + 1 : HALF);
            assert_int_equal(cpa_call_comm_rank(r, c), f9 ? 6 : 0);
            assert_int_equal(cpa_call_nranks(r, c), 8);
            looked_up[f9]++;
        }
    }
    assert_int_equal(looked_up[0], 50);
    assert_int_equal(looked_up[1], 50);
    /* Every DONE found its call, however far behind it came (up to 4 calls here). */
    for (size_t i = 0; i < one->nranks; i++) {
        const cpa_rank *r = &one->ranks[i];
        size_t undone = 0;
        for (size_t k = 0; k < r->ncalls; k++)
            undone += !r->calls[k].done;
        size_t want_undone = strstr(r->path, "r06") ? 10 : strstr(r->path, "r05") ? 1 : 0;
        if (!strstr(r->path, "r10"))
            assert_int_equal(undone, want_undone);
    }
    static const unsigned threads[] = {2, 5, 16, 0};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        cpa_model *m = load(dir, threads[t]);
        assert_int_equal(m->nwarnings, one->nwarnings);
        for (size_t i = 0; i < m->nwarnings; i++)
            assert_string_equal(m->warnings[i], one->warnings[i]);
        if (model_digest(m) != want)
            fail_msg("%u threads give another model", threads[t]);
        cpa_model_free(m);
    }
    /* cpa_model_load is the same again. */
    cpa_model *m = NULL;
    char err[256];
    assert_int_equal(cpa_model_load(dir, &m, err, sizeof err), 0);
    assert_true(model_digest(m) == want);
    cpa_model_free(m);
    /* And so is loading the same bytes from memory under the same names. */
    char **paths = NULL;
    int n = cp_trace_dir_list(dir, &paths, err, sizeof err);
    assert_true(n == NFILES);
    cpa_mem_file files[NFILES];
    for (int i = 0; i < n; i++) {
        files[i].name = paths[i];
        files[i].data = tt_read_file(paths[i], &files[i].len);
        assert_non_null(files[i].data);
    }
    assert_int_equal(cpa_model_load_mem(files, (size_t)n, &m, err, sizeof err), 0);
    for (size_t i = 0; i < m->nwarnings; i++)
        assert_string_equal(m->warnings[i], one->warnings[i]);
    assert_true(model_digest(m) == want);
    cpa_model_free(m);
    for (int i = 0; i < n; i++)
        free((void *)files[i].data);
    cp_trace_dir_free(paths, n);
    cpa_model_free(one);
    tt_rmtree(dir);
    free(dir);
}

/* The split halves number their ranks against the job's order: each operation's parts are
 * still by communicator rank. */
static void test_match_parts_by_comm_rank(void **state)
{
    (void)state;
    char *dir = write_dir();
    cpa_model *m = load(dir, 0);
    cpa_matched mt;
    char err[256];
    assert_int_equal(cpa_match(m, &mt, err, sizeof err), 0);
    size_t halves = 0;
    for (size_t i = 0; i < mt.nops; i++) {
        const cpa_op *o = &mt.ops[i];
        if (i > 0 && o->sender < 0 && mt.ops[i - 1].sender < 0)
            assert_true(mt.ops[i - 1].comm_id < o->comm_id ||
                        (mt.ops[i - 1].comm_id == o->comm_id && mt.ops[i - 1].seq < o->seq));
        if (o->comm_id != HALF && o->comm_id != HALF + 1)
            continue;
        halves++;
        /* Half 0 is files 0..7 but 2 (not a trace), file 7's first call included. */
        if (o->comm_id == HALF)
            assert_int_equal(o->nparts, 7);
        /* Files 13, 14 and 15 all say rank 13 (comm rank 2): then by rank index. */
        int32_t prev = -1;
        uint32_t prev_idx = 0;
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *p = &mt.parts[o->first_part + k];
            const cpa_rank *pr = &m->ranks[p->rank_idx];
            const cpa_call *c = &pr->calls[p->call_idx];
            int32_t cr = cpa_call_comm_rank(pr, c);
            assert_true(cr > prev || (cr == prev && p->rank_idx > prev_idx));
            assert_int_equal(c->seq, o->seq);
            prev = cr;
            prev_idx = p->rank_idx;
        }
    }
    assert_int_equal(halves, 2 * 50);
    cpa_matched_free(&mt);
    cpa_model_free(m);
    tt_rmtree(dir);
    free(dir);
}

/* One call far out in sequence numbers makes counting too costly: the matcher sorts
 * instead, and the operations are the same as the counted ones of the same job, plus that
 * call's. */
static void test_match_sparse_sequences_sort(void **state)
{
    (void)state;
    char *dense = tt_tmpdir(), *sparse = tt_tmpdir();
    for (int pass = 0; pass < 2; pass++) {
        const char *dir = pass ? sparse : dense;
        for (int r = 0; r < 4; r++) {
            cp_trace_writer *w = open_file(dir, r, r, "node-a");
            put_comm(w, 0, WORLD, 4, 3 - r);
            put_comm(w, 1, HALF, 4, r);
            for (int i = 0; i < 200; i++) {
                if (r == 1 && i == 7)
                    continue; /* a rank that missed one */
                put_call(w, (uint32_t)(i % 2), CP_OP_ALLREDUCE, (uint64_t)(i / 2), -1,
                         BASE_NS + (uint64_t)i * 1000, 1);
            }
            if (pass)
                put_call(w, 1, CP_OP_ALLREDUCE, 1ull << 40, -1, BASE_NS + 900000, 1);
            assert_int_equal(cp_trace_writer_close(w), 0);
        }
    }
    cpa_model *md = load(dense, 0), *ms = load(sparse, 0);
    cpa_matched a, b;
    char err[256];
    assert_int_equal(cpa_match(md, &a, err, sizeof err), 0);
    assert_int_equal(cpa_match(ms, &b, err, sizeof err), 0);
    assert_int_equal(a.nops, 200);
    assert_int_equal(b.nops, a.nops + 1);
    /* WORLD < HALF: the world's operations first, then the split's, the far one last. */
    assert_int_equal(a.ops[0].comm_id, WORLD);
    assert_int_equal(b.ops[b.nops - 1].comm_id, HALF);
    assert_int_equal(b.ops[b.nops - 1].seq, 1ull << 40);
    assert_int_equal(b.ops[b.nops - 1].nparts, 4);
    for (size_t i = 0; i < a.nops; i++) {
        assert_int_equal(a.ops[i].comm_id, b.ops[i].comm_id);
        assert_int_equal(a.ops[i].seq, b.ops[i].seq);
        assert_int_equal(a.ops[i].nparts, b.ops[i].nparts);
        assert_int_equal(a.ops[i].complete, b.ops[i].complete);
        assert_int_equal(a.ops[i].first_part, b.ops[i].first_part);
        for (uint32_t k = 0; k < a.ops[i].nparts; k++) {
            const cpa_part *p = &a.parts[a.ops[i].first_part + k];
            const cpa_part *q = &b.parts[b.ops[i].first_part + k];
            assert_int_equal(p->rank_idx, q->rank_idx);
            assert_int_equal(p->call_idx, q->call_idx);
            assert_int_equal(p->arrival_ns, q->arrival_ns);
        }
        /* The world numbers the job's ranks backwards: rank 3 first. */
        if (a.ops[i].comm_id == WORLD)
            assert_int_equal(md->ranks[a.parts[a.ops[i].first_part].rank_idx].rank, 3);
    }
    /* Rank 1 missed the split's seq 3 (its call 7): three parts, incomplete. */
    assert_int_equal(a.ops[100 + 3].comm_id, HALF);
    assert_int_equal(a.ops[100 + 3].seq, 3);
    assert_int_equal(a.ops[100 + 3].nparts, 3);
    assert_false(a.ops[100 + 3].complete);
    uint64_t da = matched_digest(&a);
    cpa_matched_free(&a);
    assert_int_equal(cpa_match(md, &a, err, sizeof err), 0);
    assert_true(matched_digest(&a) == da); /* and it is deterministic */
    cpa_matched_free(&a);
    cpa_matched_free(&b);
    cpa_model_free(md);
    cpa_model_free(ms);
    tt_rmtree(dense);
    tt_rmtree(sparse);
    free(dense);
    free(sparse);
}

/* ---- DONE to CALL: the oldest call with the key still waiting, however far back ---- */

static uint64_t rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

typedef struct ref_call {
    uint32_t comm_index;
    uint8_t op;
    int32_t peer;
    uint64_t seq;
    int done;
    uint64_t gpu_start_ns;
} ref_call;

/* 3000 calls over few keys (so keys repeat), a third not timed; DONEs come late by 0 to 200
 * calls, some in bursts newest first, some for keys no call has: the loader must pair each
 * as the rule says, which the test works out the slow way. */
static void test_done_goes_to_oldest_waiting_call(void **state)
{
    (void)state;
    enum { N = 3000 };
    char *dir = tt_tmpdir();
    cp_trace_writer *w = open_file(dir, 0, 0, "node-a");
    put_comm(w, 0, WORLD, 1, 0);
    put_comm(w, 1, HALF, 1, 0);
    static ref_call ref[N];
    size_t nref = 0;
    uint64_t seed = 42, unmatched = 0, gpu = BASE_NS;
    /* DONEs due: (index into ref, or a key with no call), written when their time comes. */
    typedef struct due {
        size_t call;   /* SIZE_MAX: a stray key */
        size_t at;     /* written after the call with this index */
    } due;
    static due pending[2 * N];
    size_t npending = 0;
    for (size_t i = 0; i < N; i++) {
        ref_call *c = &ref[nref++];
        c->comm_index = (uint32_t)(rng(&seed) % 2);
        c->op = rng(&seed) % 4 ? CP_OP_ALLREDUCE : CP_OP_SEND;
        c->peer = c->op == CP_OP_SEND ? (int32_t)(rng(&seed) % 3) : -1;
        c->seq = rng(&seed) % 40; /* about 75 calls per key over the file */
        int timed = rng(&seed) % 3 != 0;
        cp_rec_call rc = {.h = {CP_REC_CALL, sizeof rc}, .op = c->op, .dtype = 7,
                          .flags = timed ? CP_CALL_TIMED : 0, .comm_index = c->comm_index,
                          .site_index = UINT32_MAX, .seq = c->seq, .count = 1,
                          .stream = 1 + rng(&seed) % 3, .enter_ns = BASE_NS + i * 1000,
                          .host_ns = 10, .peer = c->peer};
        put(w, &rc);
        unsigned kind = (unsigned)(rng(&seed) % 20);
        size_t lag = kind < 12 ? rng(&seed) % 4 : kind < 17 ? rng(&seed) % 200 : 0;
        if (timed || kind == 19) /* now and then a DONE for an untimed call too */
            pending[npending++] = (due){i, i + lag};
        if (kind == 18)
            pending[npending++] = (due){SIZE_MAX, i};
        /* Write what is due; every 500 calls, the whole backlog newest first. */
        int burst = i % 500 == 499 || i == N - 1;
        for (size_t k = npending; k-- > 0;) {
            if (!burst && pending[k].at > i)
                continue;
            gpu++;
            cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .gpu_start_ns = gpu,
                             .gpu_end_ns = gpu + 5, .timing = CP_TIMING_EVENTS};
            if (pending[k].call == SIZE_MAX) {
                d.comm_index = 7;
                d.op = CP_OP_BROADCAST;
                d.peer = -1;
            } else {
                const ref_call *t = &ref[pending[k].call];
                d.comm_index = t->comm_index;
                d.op = t->op;
                d.peer = t->peer;
                d.seq = t->seq;
            }
            put(w, &d);
            /* The rule, the slow way: the oldest call so far with the key and no DONE. */
            ref_call *match = NULL;
            for (size_t q = 0; q < nref && !match; q++)
                if (!ref[q].done && ref[q].comm_index == d.comm_index && ref[q].op == d.op &&
                    ref[q].peer == d.peer && ref[q].seq == d.seq)
                    match = &ref[q];
            if (match) {
                match->done = 1;
                match->gpu_start_ns = d.gpu_start_ns;
            } else {
                unmatched++;
            }
            pending[k] = pending[--npending];
        }
    }
    assert_int_equal(cp_trace_writer_close(w), 0);

    for (unsigned threads = 1; threads <= 2; threads++) {
        cpa_model *m = load(dir, threads);
        const cpa_rank *r = &m->ranks[0];
        assert_int_equal(r->ncalls, N);
        assert_int_equal(r->unmatched_done, unmatched);
        size_t done = 0;
        for (size_t i = 0; i < N; i++) {
            if (r->calls[i].done != ref[i].done || r->calls[i].gpu_start_ns != ref[i].gpu_start_ns)
                fail_msg("call %zu: done %d at %llu, the rule says %d at %llu", i,
                         r->calls[i].done, (unsigned long long)r->calls[i].gpu_start_ns,
                         ref[i].done, (unsigned long long)ref[i].gpu_start_ns);
            done += ref[i].done;
        }
        assert_true(done > N / 2 && unmatched > 0); /* the test tests something */
        cpa_model_free(m);
    }
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_load_the_same_model),
        cmocka_unit_test(test_match_parts_by_comm_rank),
        cmocka_unit_test(test_match_sparse_sequences_sort),
        cmocka_unit_test(test_done_goes_to_oldest_waiting_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
