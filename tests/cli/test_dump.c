/* `collprof dump`: every record of a trace, one a line, as text and as JSON, on traces made
 * here with the writer API; and what it says about cut, lossy, foreign and missing input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "trace/trace_writer.h"
#include "tests/cli/test_cli_util.h"
#include "tests/common/test_text_util.h"

#define COMM_ID 0x9f2c0e1d22aa4b01ull
#define NO_INDEX UINT32_MAX
#define FLOAT32 7
#define FLOAT64 8
#define INT32 2
#define SUM 0

static cp_trace_writer *open_trace(const char *path, int header_rank, size_t chunk_payload)
{
    cp_file_header h;
    cp_file_header_init(&h);
    h.rank = header_rank;
    h.pid = 4242;
    char err[256];
    cp_trace_writer *w = cp_trace_writer_open(path, &h, chunk_payload, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    return w;
}

static void put(cp_trace_writer *w, const void *rec)
{
    assert_int_equal(cp_trace_writer_append(w, rec), 0);
}

static cp_rec_call call(unsigned op, uint32_t comm_index, uint64_t seq, uint64_t count,
                        unsigned dtype, unsigned redop, int32_t peer, uint64_t enter_ns)
{
    cp_rec_call c;
    memset(&c, 0, sizeof c);
    c.h = (cp_record_header){ CP_REC_CALL, sizeof c };
    c.op = (uint8_t)op;
    c.dtype = (uint8_t)dtype;
    c.redop = (uint8_t)redop;
    c.comm_index = comm_index;
    c.site_index = NO_INDEX;
    c.seq = seq;
    c.count = count;
    c.enter_ns = enter_ns;
    c.peer = peer;
    return c;
}

static cp_rec_done done(unsigned op, uint64_t seq, int32_t peer, unsigned timing, uint64_t start,
                        uint64_t end)
{
    cp_rec_done d;
    memset(&d, 0, sizeof d);
    d.h = (cp_record_header){ CP_REC_DONE, sizeof d };
    d.comm_index = 0;
    d.seq = seq;
    d.gpu_start_ns = start;
    d.gpu_end_ns = end;
    d.peer = peer;
    d.op = (uint8_t)op;
    d.timing = (uint8_t)timing;
    return d;
}

/* One rank's trace with every record type. The CALL comes before the COMM that names its
 * communicator and the rank arrives late in a PROCESS record, as in real traces. */
static void write_example(const char *path)
{
    cp_trace_writer *w = open_trace(path, -1, 0);

    cp_rec_call allreduce = call(CP_OP_ALLREDUCE, 0, 41, 1024, FLOAT32, SUM, -1, 1000);
    allreduce.stream = 0x7f00;
    allreduce.host_ns = 50;
    allreduce.flags = CP_CALL_TIMED;
    allreduce.thread = 1;
    put(w, &allreduce);

    cp_rec_comm comm;
    memset(&comm, 0, sizeof comm);
    comm.h = (cp_record_header){ CP_REC_COMM, sizeof comm };
    comm.comm_index = 0;
    comm.comm_id = COMM_ID;
    comm.nranks = 8;
    comm.rank = 3;
    comm.cuda_dev = 3;
    comm.origin = CP_COMM_INIT_RANK;
    put(w, &comm);

    cp_rec_process fixed;
    memset(&fixed, 0, sizeof fixed);
    fixed.rank = 3;
    fixed.local_rank = 3;
    fixed.world_size = 8;
    fixed.nccl_version = 22703;
    fixed.pid = 4242;
    fixed.cuda_driver_version = 12040;
    unsigned char buf[512];
    assert_true(cp_rec_process_build(buf, sizeof buf, &fixed, "node1", "42", "torchrun") > 0);
    put(w, buf);

    cp_rec_done ar_done = done(CP_OP_ALLREDUCE, 41, -1, CP_TIMING_EVENTS, 2000, 5500);
    put(w, &ar_done);

    cp_rec_call bcast = call(CP_OP_BROADCAST, 0, 42, 10, FLOAT64, CP_REDOP_NONE, 2, 1100);
    bcast.host_ns = 7;
    bcast.site_index = 5;
    put(w, &bcast);
    cp_rec_done bcast_done = done(CP_OP_BROADCAST, 42, 2, CP_TIMING_NONE, 0, 0);
    put(w, &bcast_done);

    cp_rec_call send = call(CP_OP_SEND, 0, 0, 4, INT32, CP_REDOP_NONE, 5, 1200);
    send.flags = CP_CALL_IN_GROUP | CP_CALL_TIMED;
    send.group_depth = 1;
    put(w, &send);

    cp_rec_hang hang;
    memset(&hang, 0, sizeof hang);
    hang.h = (cp_record_header){ CP_REC_HANG, sizeof hang };
    hang.seq = 43;
    hang.at_ns = 9000000000ull;
    hang.age_ns = 61500000000ull;
    hang.peer = -1;
    hang.op = CP_OP_ALLREDUCE;
    hang.gpu_state = CP_HANG_GPU_NOT_STARTED;
    put(w, &hang);

    const char *frames[] = { "train_step+0x10 (train.so)", "main+0x20 (python)" };
    assert_true(cp_rec_site_build(buf, sizeof buf, 5, 0x401000, frames, 2) > 0);
    put(w, buf);

    cp_rec_clock clock = { { CP_REC_CLOCK, sizeof clock }, 0, 100, 200 };
    put(w, &clock);

    /* A communicator this file never describes. */
    cp_rec_call orphan = call(CP_OP_ALLGATHER, 7, 1, 2, FLOAT32, CP_REDOP_NONE, -1, 1300);
    put(w, &orphan);

    cp_rec_end end = { { CP_REC_END, sizeof end }, 0, 0, 0, 10000 };
    put(w, &end);
    assert_int_equal(cp_trace_writer_close(w), 0);
}

static const char example_text[] =
    "rank 3 CALL AllReduce comm=9f2c0e1d22aa4b01 seq=41 count=1024 dtype=float32 bytes=4096 "
    "redop=sum stream=0x7f00 host_ns=1000 host_dur_ns=50 result=0 flags=timed thread=1 "
    "group_depth=0\n"
    "rank 3 COMM comm=9f2c0e1d22aa4b01 comm_index=0 nranks=8 comm_rank=3 cuda_dev=3 "
    "origin=init_rank\n"
    "rank 3 PROCESS local_rank=3 world_size=8 pid=4242 nccl_version=22703 "
    "cuda_driver_version=12040 hostname=node1 job_id=42 launcher=torchrun\n"
    "rank 3 DONE AllReduce comm=9f2c0e1d22aa4b01 seq=41 timing=events gpu_start_ns=2000 "
    "gpu_end_ns=5500 dur_us=3.500\n"
    "rank 3 CALL Broadcast comm=9f2c0e1d22aa4b01 seq=42 count=10 dtype=float64 bytes=80 root=2 "
    "stream=0x0 host_ns=1100 host_dur_ns=7 result=0 flags=- site=5 thread=0 group_depth=0\n"
    "rank 3 DONE Broadcast comm=9f2c0e1d22aa4b01 seq=42 root=2 timing=none\n"
    "rank 3 CALL Send comm=9f2c0e1d22aa4b01 seq=0 count=4 dtype=int32 bytes=16 peer=5 "
    "stream=0x0 host_ns=1200 host_dur_ns=0 result=0 flags=in_group,timed thread=0 "
    "group_depth=1\n"
    "rank 3 HANG AllReduce comm=9f2c0e1d22aa4b01 seq=43 at_ns=9000000000 age_ns=61500000000 "
    "age_s=61.500 gpu=not_started\n"
    "rank 3 SITE site=5 return_addr=0x401000 "
    "frames=\"train_step+0x10 (train.so)\",\"main+0x20 (python)\"\n"
    "rank 3 CLOCK mono_ns=100 realtime_ns=200\n"
    "rank 3 CALL AllGather comm=? seq=1 comm_index=7 count=2 dtype=float32 bytes=8 stream=0x0 "
    "host_ns=1300 host_dur_ns=0 result=0 flags=- thread=0 group_depth=0\n"
    "rank 3 END signal=0 exit_code=0 at_ns=10000\n";

struct fixture {
    char *dir;
    char path[1024];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->dir = cli_tmpdir();
    snprintf(f->path, sizeof f->path, "%s/rank3.cptrace", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    cli_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void text_prints_every_record_one_a_line(void **state)
{
    struct fixture *f = *state;
    write_example(f->path);
    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_string_equal(r.err, "");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, example_text);
    cli_result_free(&r);

    /* A directory dumps its files; here the one. */
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, example_text);
    cli_result_free(&r);
}

static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static void assert_str_field(json_object *o, const char *key, const char *want)
{
    json_object *v = field(o, key);
    if (!v || !json_object_is_type(v, json_type_string))
        fail_msg("%s: no string '%s'", json_object_to_json_string(o), key);
    assert_string_equal(json_object_get_string(v), want);
}

static void assert_int_field(json_object *o, const char *key, int64_t want)
{
    json_object *v = field(o, key);
    if (!v || !json_object_is_type(v, json_type_int))
        fail_msg("%s: no number '%s'", json_object_to_json_string(o), key);
    assert_int_equal(json_object_get_int64(v), want);
}

static void assert_no_field(json_object *o, const char *key)
{
    if (json_object_object_get_ex(o, key, NULL))
        fail_msg("%s: has '%s'", json_object_to_json_string(o), key);
}

static void json_lines_carry_the_contract_keys(void **state)
{
    struct fixture *f = *state;
    write_example(f->path);
    struct cli_result r;
    cli_runl(&r, "dump", "--json", f->path, NULL);
    assert_string_equal(r.err, "");
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 12);

    json_object *line[12];
    char *save = NULL, *text = r.out;
    for (int i = 0; i < 12; i++) {
        char *s = strtok_r(i == 0 ? text : NULL, "\n", &save);
        assert_non_null(s);
        line[i] = json_tokener_parse(s);
        if (!line[i] || !json_object_is_type(line[i], json_type_object))
            fail_msg("line %d is not a JSON object: %s", i + 1, s);
        assert_int_field(line[i], "rank", 3);
    }
    static const char *const kinds[12] = { "CALL", "COMM", "PROCESS", "DONE", "CALL", "DONE",
                                           "CALL", "HANG", "SITE", "CLOCK", "CALL", "END" };
    for (int i = 0; i < 12; i++)
        assert_str_field(line[i], "kind", kinds[i]);

    json_object *ar = line[0];
    assert_str_field(ar, "op", "AllReduce");
    assert_str_field(ar, "comm", "9f2c0e1d22aa4b01");
    assert_int_field(ar, "seq", 41);
    assert_int_field(ar, "count", 1024);
    assert_str_field(ar, "dtype", "float32");
    assert_int_field(ar, "bytes", 4096);
    assert_str_field(ar, "redop", "sum");
    assert_int_field(ar, "host_ns", 1000);
    assert_int_field(ar, "host_dur_ns", 50);
    assert_no_field(ar, "root");
    assert_no_field(ar, "peer");

    json_object *ar_done = line[3];
    assert_str_field(ar_done, "op", "AllReduce");
    assert_str_field(ar_done, "comm", "9f2c0e1d22aa4b01");
    assert_int_field(ar_done, "seq", 41);
    assert_int_field(ar_done, "gpu_start_ns", 2000);
    assert_int_field(ar_done, "gpu_end_ns", 5500);
    assert_true(json_object_get_double(field(ar_done, "dur_us")) == 3.5);

    /* Broadcast's peer field is its root. */
    assert_int_field(line[4], "root", 2);
    assert_no_field(line[4], "peer");
    assert_int_field(line[4], "bytes", 80);

    /* An untimed DONE still names its operation, but has no GPU times. */
    json_object *untimed = line[5];
    assert_str_field(untimed, "comm", "9f2c0e1d22aa4b01");
    assert_int_field(untimed, "seq", 42);
    assert_no_field(untimed, "gpu_start_ns");
    assert_no_field(untimed, "gpu_end_ns");

    assert_int_field(line[6], "peer", 5);
    assert_no_field(line[6], "root");
    json_object *flags = field(line[6], "flags");
    assert_int_equal(json_object_array_length(flags), 2);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(flags, 0)), "in_group");

    assert_str_field(line[7], "comm", "9f2c0e1d22aa4b01");
    assert_int_field(line[7], "seq", 43);
    assert_str_field(line[1], "comm", "9f2c0e1d22aa4b01");
    assert_str_field(line[2], "hostname", "node1");
    json_object *frames = field(line[8], "frames");
    assert_int_equal(json_object_array_length(frames), 2);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(frames, 1)),
                        "main+0x20 (python)");

    /* A communicator the file never names: comm is there, and null. */
    assert_true(json_object_object_get_ex(line[10], "comm", NULL));
    assert_null(field(line[10], "comm"));
    assert_int_field(line[10], "seq", 1);

    for (int i = 0; i < 12; i++)
        json_object_put(line[i]);
    cli_result_free(&r);
}

static void a_directory_is_dumped_file_by_file_in_name_order(void **state)
{
    struct fixture *f = *state;
    for (int rank = 1; rank >= 0; rank--) {
        char path[1100];
        snprintf(path, sizeof path, "%s/rank%d.cptrace", f->dir, rank);
        cp_trace_writer *w = open_trace(path, rank, 0);
        cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, (uint64_t)rank, 1, FLOAT32, SUM, -1, 5);
        put(w, &c);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    struct cli_result r;
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 2);
    assert_true(cli_starts_with(r.out, "rank 0 CALL AllReduce comm=? seq=0 "));
    assert_non_null(strstr(r.out, "\nrank 1 CALL AllReduce comm=? seq=1 "));
    cli_result_free(&r);
}

/* A file cut inside a chunk (SIGKILL, a full disk) still gives every whole chunk. */
static void a_cut_trace_prints_whole_chunks_then_one_warning(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 0, 256); /* four CALLs a chunk */
    for (uint64_t i = 0; i < 10; i++) {
        cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, i, 1, FLOAT32, SUM, -1, 100 + i);
        put(w, &c);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(truncate(f->path, st.st_size - 20), 0);

    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 8);
    assert_non_null(strstr(r.out, "seq=7 "));
    assert_null(strstr(r.out, "seq=8 "));
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: WARN '"));
    assert_non_null(strstr(r.err, "cut short"));
    cli_result_free(&r);
}

/* One bad chunk costs that chunk, not the file. */
static void a_corrupt_chunk_is_skipped_with_one_warning(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 0, 256); /* four CALLs a chunk */
    for (uint64_t i = 0; i < 12; i++) {
        cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, i, 1, FLOAT32, SUM, -1, 100 + i);
        put(w, &c);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
    /* A byte in the middle of the second chunk's payload. */
    long at = CP_TRACE_HEADER_BYTES + (CP_CHUNK_HEADER_BYTES + 256) + CP_CHUNK_HEADER_BYTES + 100;
    FILE *fp = fopen(f->path, "r+b");
    assert_non_null(fp);
    fseek(fp, at, SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, at, SEEK_SET);
    fputc(c ^ 0xff, fp);
    fclose(fp);

    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 8);
    assert_non_null(strstr(r.out, "seq=3 "));
    assert_null(strstr(r.out, "seq=4 "));
    assert_non_null(strstr(r.out, "seq=8 "));
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: WARN '"));
    assert_non_null(strstr(r.err, "1 corrupt chunk(s) skipped"));
    cli_result_free(&r);
}

static void lost_records_are_warned_about_by_cause(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 0, 0);
    cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 3);
    cp_trace_writer_count_lost(w, CP_LOST_NO_MEMORY, 1);
    cp_trace_writer_count_lost(w, CP_LOST_AT_END, 2);
    cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, 0, 1, FLOAT32, SUM, -1, 100);
    put(w, &c);
    assert_int_equal(cp_trace_writer_close(w), 0);

    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "rank 0 LOST cause=ring_full count=3 "));
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "collprof: WARN '"));
    assert_non_null(strstr(r.out, "rank 0 LOST cause=no_memory count=1 "));
    assert_non_null(strstr(r.out, "rank 0 LOST cause=at_end count=2 "));
    assert_non_null(
        strstr(r.err, "6 record(s) lost while tracing (3 ring_full, 1 no_memory, 2 at_end)"));
    cli_result_free(&r);
}

/* A call NCCL refused has no sequence (the shim's UINT64_MAX): "seq=none", JSON null, never
 * 18446744073709551615. */
static void a_call_with_no_sequence_says_none(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 0, 0);
    cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, UINT64_MAX, 1, FLOAT32, SUM, -1, 100);
    put(w, &c);
    assert_int_equal(cp_trace_writer_close(w), 0);

    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, " seq=none"));
    assert_null(strstr(r.out, "18446744073709551615"));
    cli_result_free(&r);
    cli_runl(&r, "dump", "--json", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"seq\":null"));
    cli_result_free(&r);
}

/* A call past 2^32 ns prints its whole duration; one at the format's cap says it saturated. */
static void long_host_times_print_whole_and_saturation_says_so(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 0, 0);
    cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, 0, 1, FLOAT32, SUM, -1, 100);
    cp_call_set_host_ns(&c, 5000000123ull);
    put(w, &c);
    cp_call_set_host_ns(&c, CP_HOST_NS_MAX);
    put(w, &c);
    assert_int_equal(cp_trace_writer_close(w), 0);

    struct cli_result r;
    cli_runl(&r, "dump", f->path, NULL);
    assert_int_equal(r.status, 0);
    const char *first = strstr(r.out, " host_dur_ns=5000000123 result=0 ");
    assert_non_null(first);
    assert_non_null(strstr(first, " host_dur_ns=4503599627370495 saturated result=0 "));
    assert_int_equal(strstr(r.out, "saturated") - r.out,
                     strstr(first, "saturated") - r.out); /* the long call is not */
    cli_result_free(&r);
    cli_runl(&r, "dump", "--json", f->path, NULL);
    assert_int_equal(r.status, 0);
    first = strstr(r.out, "\"host_dur_ns\":5000000123,");
    assert_non_null(first);
    assert_non_null(strstr(first, "\"host_dur_ns\":4503599627370495,\"host_dur\":\"saturated\""));
    cli_result_free(&r);
}

static void unknown_record_types_are_shown_and_counted(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 2, 0);
    uint64_t future[2] = { 0, 0x1234 };
    cp_record_header h = { 99, 16 };
    memcpy(future, &h, sizeof h);
    put(w, future);
    assert_int_equal(cp_trace_writer_close(w), 0);

    struct cli_result r;
    cli_runl(&r, "dump", "--json", f->path, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "{\"rank\":2,\"kind\":\"UNKNOWN\",\"type\":99,\"size\":16}\n");
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "does not know"));
    cli_result_free(&r);
}

static void write_file(const char *path, const char *text)
{
    cli_write_file(path, text, strlen(text));
}

static void input_that_is_not_a_trace_is_exit_2(void **state)
{
    struct fixture *f = *state;
    char path[1100];
    struct cli_result r;

    snprintf(path, sizeof path, "%s/notes.txt", f->dir);
    write_file(path, "not a trace, but long enough to be mistaken for one if nobody looked\n");
    cli_runl(&r, "dump", path, NULL);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: dump: '"));
    assert_non_null(strstr(r.err, "not a collprof trace"));
    cli_result_free(&r);

    /* A newer format: the message names both versions. */
    cp_file_header h;
    cp_file_header_init(&h);
    h.version = h.compat_version = CP_TRACE_READ_VERSION + 1;
    snprintf(path, sizeof path, "%s/future.cptrace", f->dir);
    cli_write_file(path, &h, sizeof h);
    cli_runl(&r, "dump", path, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "newer than this collprof reads"));
    cli_result_free(&r);

    /* A directory of nothing but bad files: a WARN for each, then the error. */
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 2);
    assert_true(cli_starts_with(r.err, "collprof: WARN '"));
    assert_non_null(strstr(r.err, "\ncollprof: dump: no readable trace in '"));
    cli_result_free(&r);
}

/* In a directory, one bad file does not hide the good ones. */
static void a_bad_file_in_a_directory_is_skipped_with_a_warning(void **state)
{
    struct fixture *f = *state;
    write_example(f->path);
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/rank0.cptrace", f->dir);
    write_file(bad, "");
    struct cli_result r;
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, example_text);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: WARN '"));
    assert_non_null(strstr(r.err, "rank0.cptrace"));
    assert_non_null(strstr(r.err, "(skipped)"));
    cli_result_free(&r);
}

/* Strings from a hostile file (PROCESS's hostname, job id and launcher, a SITE's frames)
 * and a file name holding escapes reach neither the terminal nor the JSON raw: each
 * control byte is shown as \xNN, in the records and in the warning that names the file. */
static void hostile_strings_are_shown_escaped(void **state)
{
    struct fixture *f = *state;
    cp_trace_writer *w = open_trace(f->path, 3, 0);
    cp_rec_process fixed;
    memset(&fixed, 0, sizeof fixed);
    fixed.rank = 3;
    unsigned char buf[512];
    assert_true(cp_rec_process_build(buf, sizeof buf, &fixed, TX_HOSTILE, TX_HOSTILE,
                                     TX_HOSTILE) > 0);
    put(w, buf);
    const char *frames[] = { TX_HOSTILE, "main" };
    assert_true(cp_rec_site_build(buf, sizeof buf, 5, 0x401000, frames, 2) > 0);
    put(w, buf);
    assert_int_equal(cp_trace_writer_close(w), 0);
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/" TX_HOSTILE ".cptrace", f->dir);
    write_file(bad, "");

    struct cli_result r;
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    tx_assert_terminal_safe("stderr", r.err);
    /* dump's text quotes a value with a backslash in it, and doubles the backslash */
    char q[200], want[700];
    size_t n = 0;
    q[n++] = '"';
    for (const char *p = TX_HOSTILE_SHOWN; *p; p++) {
        if (*p == '\\')
            q[n++] = '\\';
        q[n++] = *p;
    }
    q[n++] = '"';
    q[n] = '\0';
    snprintf(want, sizeof want, " hostname=%s job_id=%s launcher=%s\n", q, q, q);
    assert_non_null(strstr(r.out, want));
    snprintf(want, sizeof want, " frames=%s,main\n", q);
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.err, "/" TX_HOSTILE_SHOWN ".cptrace"));
    cli_result_free(&r);

    cli_runl(&r, "dump", "--json", f->path, NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    char *save = NULL;
    json_object *process = json_tokener_parse(strtok_r(r.out, "\n", &save));
    json_object *site = json_tokener_parse(strtok_r(NULL, "\n", &save));
    assert_non_null(process);
    assert_non_null(site);
    assert_str_field(process, "hostname", TX_HOSTILE_SHOWN);
    assert_str_field(process, "job_id", TX_HOSTILE_SHOWN);
    assert_str_field(process, "launcher", TX_HOSTILE_SHOWN);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(field(site, "frames"), 0)),
                        TX_HOSTILE_SHOWN);
    json_object_put(process);
    json_object_put(site);
    cli_result_free(&r);
}

static void an_empty_directory_or_missing_path_is_exit_2(void **state)
{
    struct fixture *f = *state;
    struct cli_result r;
    cli_runl(&r, "dump", f->dir, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "collprof: dump: no trace files (*.cptrace) in '"));
    cli_result_free(&r);

    char missing[1100];
    snprintf(missing, sizeof missing, "%s/nope", f->dir);
    cli_runl(&r, "dump", missing, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: dump: cannot read '"));
    assert_non_null(strstr(r.err, "No such file or directory"));
    cli_result_free(&r);
}

static void write_big_trace(const char *path, uint64_t calls)
{
    cp_trace_writer *w = open_trace(path, 0, 0);
    for (uint64_t i = 0; i < calls; i++) {
        cp_rec_call c = call(CP_OP_ALLREDUCE, NO_INDEX, i, 1024, FLOAT32, SUM, -1, i);
        put(w, &c);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);
}

/* `collprof dump DIR | head -n1`: the reader leaving is not an error of ours. */
static void a_closed_pipe_ends_the_dump_quietly(void **state)
{
    struct fixture *f = *state;
    write_big_trace(f->path, 20000); /* megabytes of text: far more than a pipe holds */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const char *args[] = { "dump", f->dir, NULL };
    struct cli_result r;

    pid_t reader = fork();
    if (reader == 0) {
        /* head -n1: read one line, then go away. */
        close(fds[1]);
        char c;
        while (read(fds[0], &c, 1) == 1 && c != '\n')
            ;
        _exit(0);
    }
    close(fds[0]);
    cli_run_fd(&r, fds[1], args);
    close(fds[1]);
    assert_int_equal(cli_wait(reader), 0);
    assert_string_equal(r.err, "");
    assert_int_equal(r.status, 0);
    cli_result_free(&r);
}

static void a_full_disk_under_dump_is_exit_2(void **state)
{
    struct fixture *f = *state;
    int full = open("/dev/full", O_WRONLY);
    if (full < 0)
        skip();
    write_big_trace(f->path, 100);
    const char *args[] = { "dump", "--json", f->path, NULL };
    struct cli_result r;
    cli_run_fd(&r, full, args);
    close(full);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "collprof: dump: cannot write to standard output"));
    cli_result_free(&r);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(text_prints_every_record_one_a_line),
        T(json_lines_carry_the_contract_keys),
        T(a_directory_is_dumped_file_by_file_in_name_order),
        T(a_cut_trace_prints_whole_chunks_then_one_warning),
        T(a_corrupt_chunk_is_skipped_with_one_warning),
        T(lost_records_are_warned_about_by_cause),
        T(a_call_with_no_sequence_says_none),
    T(long_host_times_print_whole_and_saturation_says_so),
        T(unknown_record_types_are_shown_and_counted),
        T(input_that_is_not_a_trace_is_exit_2),
        T(a_bad_file_in_a_directory_is_skipped_with_a_warning),
        T(an_empty_directory_or_missing_path_is_exit_2),
        T(hostile_strings_are_shown_escaped),
        T(a_closed_pipe_ends_the_dump_quietly),
        T(a_full_disk_under_dump_is_exit_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
