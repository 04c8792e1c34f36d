/* fuzz_trace_reader: libFuzzer target for the trace reader.
 *
 * Opens the input as a trace and walks it with every callback set, each reading every
 * field of its record and every byte of every string, so that AddressSanitizer sees any
 * read the reader's checks let past. It also asserts the reader's promises: records handed
 * out are at least their type's size and lie inside the input, the walk's counts are bounded
 * by the input's size, and messages are one NUL-terminated line.
 * Built with -fsanitize=fuzzer under COLLPROF_FUZZ; test_trace_fuzz_replay runs it over the
 * seed corpus in every normal test run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_ctx {
    uint64_t acc;
    size_t input_size;
    uint64_t records;
} fuzz_ctx;

static volatile uint64_t g_sink;

#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!(cond))                                                                        \
            abort();                                                                        \
    } while (0)

static void mix(fuzz_ctx *c, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        c->acc = c->acc * 31 + b[i];
}

static void mix_strings(fuzz_ctx *c, const cp_record_header *rec, unsigned want)
{
    size_t pos = 0, len = 0;
    const char *str = NULL;
    unsigned n = 0;
    while (cp_rec_next_string(rec, &pos, &str, &len)) {
        REQUIRE(str >= (const char *)rec && str + len <= (const char *)rec + rec->size);
        mix(c, str, len);
        n++;
    }
    REQUIRE(n == want); /* the walk checked that every string fits */
}

static int on_record(void *ctx, const cp_record_header *rec, uint64_t file_offset)
{
    fuzz_ctx *c = ctx;
    REQUIRE(rec->size >= 8 && rec->size % 8 == 0);
    REQUIRE(file_offset + rec->size <= c->input_size);
    mix(c, rec, rec->size);
    c->records++;
    return 0;
}

#define FIXED(name, rec_struct, expect_type)                                                \
    static int name(void *ctx, const rec_struct *rec)                                       \
    {                                                                                       \
        REQUIRE(rec->h.type == (expect_type) && rec->h.size >= sizeof *rec);                \
        mix(ctx, rec, sizeof *rec);                                                         \
        return 0;                                                                           \
    }
FIXED(on_comm, cp_rec_comm, CP_REC_COMM)
FIXED(on_call, cp_rec_call, CP_REC_CALL)
FIXED(on_done, cp_rec_done, CP_REC_DONE)
FIXED(on_clock, cp_rec_clock, CP_REC_CLOCK)
FIXED(on_lost, cp_rec_lost, CP_REC_LOST)
FIXED(on_hang, cp_rec_hang, CP_REC_HANG)
FIXED(on_end, cp_rec_end, CP_REC_END)
FIXED(on_nccl_op, cp_rec_nccl_op, CP_REC_NCCL_OP)
FIXED(on_kname, cp_rec_kname, CP_REC_KNAME)
FIXED(on_kernels, cp_rec_kernels, CP_REC_KERNELS)
FIXED(on_segment, cp_rec_segment, CP_REC_SEGMENT)

static int on_site(void *ctx, const cp_rec_site *rec)
{
    REQUIRE(rec->h.type == CP_REC_SITE && rec->h.size >= sizeof *rec);
    mix(ctx, rec, sizeof *rec);
    mix_strings(ctx, &rec->h, rec->frame_count);
    return 0;
}

static int on_process(void *ctx, const cp_rec_process *rec)
{
    REQUIRE(rec->h.type == CP_REC_PROCESS && rec->h.size >= sizeof *rec);
    mix(ctx, rec, sizeof *rec);
    mix_strings(ctx, &rec->h, rec->string_count);
    return 0;
}

static int on_unknown(void *ctx, const cp_record_header *rec)
{
    REQUIRE(rec->type == 0 || rec->type > CP_REC_TYPE_MAX_KNOWN);
    mix(ctx, rec, rec->size);
    return 0;
}

static void require_one_line(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    REQUIRE(n < cap);
    REQUIRE(!memchr(s, '\n', n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    int status = -1;
    err[0] = '\0';
    cp_trace_reader *r = cp_trace_reader_open_mem(data, size, "fuzz.cptrace", &status, err, sizeof err);
    require_one_line(err, sizeof err);
    if (!r) {
        REQUIRE(status != CP_READ_OK && err[0] != '\0');
        return 0;
    }
    REQUIRE(status == CP_READ_OK);
    fuzz_ctx c = {.input_size = size};
    mix(&c, cp_trace_reader_header(r), sizeof(cp_file_header));
    cp_trace_visitor v = {
        .ctx = &c,           .on_record = on_record, .on_process = on_process,
        .on_comm = on_comm,  .on_site = on_site,     .on_call = on_call,
        .on_done = on_done,  .on_clock = on_clock,   .on_lost = on_lost,
        .on_hang = on_hang,  .on_end = on_end,       .on_unknown = on_unknown, .on_segment = on_segment,
        .on_nccl_op = on_nccl_op, .on_kname = on_kname, .on_kernels = on_kernels,
    };
    cp_walk_result res;
    REQUIRE(cp_trace_walk(r, &v, &res) == 0);
    REQUIRE(res.records == c.records);
    REQUIRE(res.records <= size / 8 && res.unknown_records <= res.records);
    REQUIRE(res.chunks <= size / CP_CHUNK_HEADER_BYTES);
    REQUIRE(res.corrupt_chunks <= size / 8);
    REQUIRE(res.valid_bytes <= size);
    REQUIRE(res.stop == CP_WALK_END || res.stop == CP_WALK_TRUNCATED);
    require_one_line(res.message, sizeof res.message);
    REQUIRE((res.message[0] != '\0') ==
            (res.corrupt_chunks || res.missing_chunks || res.stop == CP_WALK_TRUNCATED));
    cp_trace_reader_close(r);
    g_sink = c.acc;
    return 0;
}
