/* A trace written by the writer reads back record for record: a million CALLs with every
 * field varied, and every other record type among them, in order, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_trace_util.h"

/* 70 MB of trace: past the 64 MiB up to which the reader reads a file into memory, so the
 * round trip goes through the mapping; the other tests' small files go through read(2). */
#define N_CALLS 1100000u
#define LOST_AT 500000u /* the ring-full report lands just before this CALL */

/* The caller's records, in order, regenerated identically on the reading side: a PROCESS,
 * two COMMs, two SITEs, then the CALLs, each 97th followed by a DONE, each 100000th by a
 * CLOCK and the 300000th by a HANG, and an END last. */
typedef struct seq {
    uint64_t k;     /* records produced */
    uint64_t calls; /* of them CALLs */
    unsigned owed;  /* bits: (1 << type) still due after the last CALL */
    int ended;
    unsigned char buf[1024];
} seq;

/* The next record into s->buf; returns its size, 0 at the end. */
static size_t next_record(seq *s)
{
    memset(s->buf, 0, sizeof s->buf);
    uint64_t k = s->k++, last = s->calls - 1;
    if (k == 0) {
        cp_rec_process p = {.rank = 3, .local_rank = 1, .world_size = 8, .nccl_version = 22703,
                            .pid = 4242, .cuda_driver_version = 12040};
        return cp_rec_process_build(s->buf, sizeof s->buf, &p, "node07", "job-17", "torchrun");
    }
    if (k <= 2) {
        cp_rec_comm *c = (cp_rec_comm *)s->buf;
        *c = (cp_rec_comm){.h = {CP_REC_COMM, sizeof *c}, .comm_index = (uint32_t)k - 1,
                           .comm_id = 0x9f2c000000000000ull + k, .parent_id = k == 2 ? 1 : 0,
                           .nranks = 8, .rank = 3, .cuda_dev = 1, .color = (int32_t)k, .key = 5,
                           .origin = k == 1 ? CP_COMM_INIT_RANK : CP_COMM_SPLIT};
        return sizeof *c;
    }
    if (k <= 4) {
        const char *frames[] = {"train_step+0x1a (train.so)", "main+0x44 (python3)", ""};
        return cp_rec_site_build(s->buf, sizeof s->buf, (uint32_t)k - 3, 0x401000 + k, frames,
                                 k == 3 ? 3 : 1);
    }
    if (s->owed & (1u << CP_REC_DONE)) {
        s->owed &= ~(1u << CP_REC_DONE);
        cp_rec_done *d = (cp_rec_done *)s->buf;
        *d = (cp_rec_done){.h = {CP_REC_DONE, sizeof *d}, .comm_index = (uint32_t)(last % 7),
                           .seq = last * 3 + 1, .gpu_start_ns = last * 10,
                           .gpu_end_ns = last * 10 + 5, .peer = -1,
                           .op = (uint8_t)(1 + last % 10), .timing = CP_TIMING_EVENTS};
        return sizeof *d;
    }
    if (s->owed & (1u << CP_REC_CLOCK)) {
        s->owed &= ~(1u << CP_REC_CLOCK);
        cp_rec_clock *c = (cp_rec_clock *)s->buf;
        *c = (cp_rec_clock){.h = {CP_REC_CLOCK, sizeof *c}, .mono_ns = last,
                            .realtime_ns = last + 1700000000000000000ull};
        return sizeof *c;
    }
    if (s->owed & (1u << CP_REC_HANG)) {
        s->owed &= ~(1u << CP_REC_HANG);
        cp_rec_hang *h = (cp_rec_hang *)s->buf;
        *h = (cp_rec_hang){.h = {CP_REC_HANG, sizeof *h}, .comm_index = 1, .seq = 41, .at_ns = 7,
                           .age_ns = 60000000000ull, .peer = -1, .op = CP_OP_ALLREDUCE};
        return sizeof *h;
    }
    if (s->calls < N_CALLS) {
        cp_rec_call c = tt_call(s->calls++);
        memcpy(s->buf, &c, sizeof c);
        s->owed = (s->calls % 97 == 0 ? 1u << CP_REC_DONE : 0) |
                  (s->calls % 100000 == 0 ? 1u << CP_REC_CLOCK : 0) |
                  (s->calls == 300000 ? 1u << CP_REC_HANG : 0);
        return sizeof c;
    }
    if (!s->ended) {
        s->ended = 1;
        cp_rec_end *e = (cp_rec_end *)s->buf;
        *e = (cp_rec_end){.h = {CP_REC_END, sizeof *e}, .signal = 0, .exit_code = 0, .at_ns = 99};
        return sizeof *e;
    }
    return 0;
}

typedef struct check_ctx {
    seq s;
    size_t records, lost_seen, mismatches;
    uint64_t per_type[CP_REC_TYPE_MAX_KNOWN + 1];
    uint64_t calls_seen;
    uint64_t last_call_seq;
} check_ctx;

static int check_record(void *p, const cp_record_header *rec, uint64_t file_offset)
{
    check_ctx *c = p;
    (void)file_offset;
    c->records++;
    c->per_type[rec->type]++;
    if (rec->type == CP_REC_LOST) {
        /* Placed by the writer right where count_lost was called: before CALL LOST_AT. */
        const cp_rec_lost *l = (const cp_rec_lost *)rec;
        if (c->s.calls != LOST_AT || c->s.owed || l->cause != CP_LOST_RING_FULL || l->count != 7)
            c->mismatches++;
        c->lost_seen++;
        return 0;
    }
    size_t size = next_record(&c->s);
    if (size != rec->size || memcmp(rec, c->s.buf, size) != 0)
        c->mismatches++;
    return 0;
}

/* The typed callbacks must see exactly the records of their type, as their struct. */
static int check_call(void *p, const cp_rec_call *rec)
{
    check_ctx *c = p;
    cp_rec_call want = tt_call(c->calls_seen++);
    if (rec->op != want.op || rec->dtype != want.dtype || rec->redop != want.redop ||
        rec->flags != want.flags || rec->comm_index != want.comm_index ||
        rec->site_index != want.site_index || rec->seq != want.seq || rec->count != want.count ||
        rec->stream != want.stream || rec->enter_ns != want.enter_ns ||
        rec->host_ns != want.host_ns || rec->peer != want.peer || rec->result != want.result ||
        rec->group_depth != want.group_depth || rec->thread != want.thread || rec->host_hi != want.host_hi)
        c->mismatches++;
    return 0;
}

static int check_site(void *p, const cp_rec_site *rec)
{
    check_ctx *c = p;
    size_t pos = 0, len = 0, n = 0;
    const char *str = NULL;
    while (cp_rec_next_string(&rec->h, &pos, &str, &len))
        n++;
    if (n != rec->frame_count)
        c->mismatches++;
    if (rec->site_index == 0) {
        pos = 0;
        assert_int_equal(cp_rec_next_string(&rec->h, &pos, &str, &len), 1);
        assert_int_equal(len, strlen("train_step+0x1a (train.so)"));
        assert_memory_equal(str, "train_step+0x1a (train.so)", len);
    }
    return 0;
}

static int check_process(void *p, const cp_rec_process *rec)
{
    (void)p;
    const char *want[] = {"node07", "job-17", "torchrun"};
    size_t pos = 0, len = 0, n = 0;
    const char *str = NULL;
    while (cp_rec_next_string(&rec->h, &pos, &str, &len)) {
        assert_true(n < 3);
        assert_int_equal(len, strlen(want[n]));
        assert_memory_equal(str, want[n], len);
        n++;
    }
    assert_int_equal(n, 3);
    assert_int_equal(rec->rank, 3);
    assert_int_equal(rec->cuda_driver_version, 12040);
    return 0;
}

static void round_trip_of_a_million_calls_and_every_record_type(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char path[600], err[256] = "";
    snprintf(path, sizeof path, "%s/rank3.cptrace", dir);

    cp_file_header h;
    cp_file_header_init(&h);
    h.pid = 4242;
    h.rank = 3;
    h.mono_anchor_ns = 123;
    snprintf(h.hostname, sizeof h.hostname, "node07");
    snprintf(h.launcher, sizeof h.launcher, "torchrun");
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 0, err, sizeof err);
    assert_non_null(w);

    seq *s = calloc(1, sizeof *s);
    size_t appended = 0;
    while (next_record(s) != 0) {
        /* The ring-full report comes just before CALL number LOST_AT. */
        if (s->calls == LOST_AT + 1 && ((cp_record_header *)s->buf)->type == CP_REC_CALL)
            cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 7);
        assert_int_equal(cp_trace_writer_append(w, s->buf), 0);
        appended++;
    }
    free(s);
    const size_t n_records = 5 + N_CALLS + N_CALLS / 97 + N_CALLS / 100000 + 1 + 1;
    assert_int_equal(appended, n_records);
    assert_int_equal(cp_trace_writer_records_lost(w), 7);
    assert_int_equal(cp_trace_writer_close(w), 0);

    int status = -1;
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, sizeof err);
    assert_non_null(r);
    assert_int_equal(status, CP_READ_OK);
    const cp_file_header *rh = cp_trace_reader_header(r);
    assert_int_equal(rh->rank, 3);
    assert_int_equal(rh->pid, 4242);
    assert_int_equal(rh->mono_anchor_ns, 123);
    assert_string_equal(rh->hostname, "node07");
    assert_string_equal(rh->launcher, "torchrun");
    assert_string_equal(cp_trace_reader_path(r), path);

    check_ctx *c = calloc(1, sizeof *c);
    cp_trace_visitor v = {.ctx = c, .on_record = check_record, .on_call = check_call,
                          .on_site = check_site, .on_process = check_process};
    cp_walk_result res;
    assert_int_equal(cp_trace_walk(r, &v, &res), 0);
    cp_trace_reader_close(r);

    assert_int_equal(c->mismatches, 0);
    assert_int_equal(c->lost_seen, 1);
    assert_int_equal(res.records, n_records + 1);
    assert_int_equal(c->records, n_records + 1);
    assert_int_equal(c->calls_seen, N_CALLS);
    assert_int_equal(c->per_type[CP_REC_CALL], N_CALLS);
    assert_int_equal(c->per_type[CP_REC_DONE], N_CALLS / 97);
    assert_int_equal(c->per_type[CP_REC_CLOCK], N_CALLS / 100000);
    assert_int_equal(c->per_type[CP_REC_HANG], 1);
    assert_int_equal(c->per_type[CP_REC_END], 1);
    assert_int_equal(c->per_type[CP_REC_COMM], 2);
    assert_int_equal(c->per_type[CP_REC_SITE], 2);
    assert_int_equal(c->per_type[CP_REC_PROCESS], 1);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.unknown_records, 0);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.missing_chunks, 0);
    assert_int_equal(res.lost_records, 7);
    assert_int_equal(res.first_bad_offset, 0);
    assert_string_equal(res.message, "");

    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > ((off_t)64 << 20));
    assert_int_equal(res.valid_bytes, (uint64_t)sb.st_size);
    /* Whole 64 KiB chunks: the chunk count follows from the file size. */
    assert_true(res.chunks >= (uint64_t)sb.st_size / (CP_CHUNK_DEFAULT_PAYLOAD + CP_CHUNK_HEADER_BYTES));
    assert_true(res.chunks <= (uint64_t)sb.st_size / CP_CHUNK_DEFAULT_PAYLOAD + 1);
    free(c);
    tt_rmtree(dir);
    free(dir);
}

static int stop_after_ten(void *ctx, const cp_rec_call *rec)
{
    (void)rec;
    return ++*(int *)ctx == 10;
}

static void a_callback_that_returns_nonzero_stops_the_walk(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/stop.cptrace", dir);
    cp_file_header h;
    cp_file_header_init(&h);
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 512, err, sizeof err);
    assert_non_null(w);
    for (uint64_t i = 0; i < 100; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    assert_int_equal(cp_trace_writer_records_written(w), 96); /* 12 full chunks of 8 */
    assert_int_equal(cp_trace_writer_close(w), 0);

    int calls = 0, status;
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, sizeof err);
    assert_non_null(r);
    cp_trace_visitor v = {.ctx = &calls, .on_call = stop_after_ten};
    cp_walk_result res;
    assert_int_equal(cp_trace_walk(r, &v, &res), 0);
    assert_int_equal(res.stop, CP_WALK_STOPPED);
    assert_int_equal(res.records, 10);
    assert_int_equal(calls, 10);
    /* A second walk starts over. */
    calls = -1000;
    assert_int_equal(cp_trace_walk(r, &v, &res), 0);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.records, 100);
    assert_int_equal(res.chunks, 13);
    assert_int_equal(cp_trace_walk(NULL, &v, &res), -1);
    cp_trace_reader_close(r);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_of_a_million_calls_and_every_record_type),
        cmocka_unit_test(a_callback_that_returns_nonzero_stops_the_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
