/* Files that are not what they claim: other versions, other byte orders, random bytes,
 * nothing at all, and chunks whose sizes and counts lie. Each gets a clear status and
 * message, or the records that are sound, and the reader stays within its bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_trace_util.h"

static char err[256];

/* A file header plus room for hand-made chunks. */
typedef struct file {
    unsigned char b[8192];
    size_t len;
} file;

static void file_init(file *f)
{
    memset(f, 0, sizeof *f);
    tt_header(f->b);
    f->len = CP_TRACE_HEADER_BYTES;
}

static size_t calls_payload(unsigned char *p, unsigned n, uint64_t first)
{
    for (unsigned i = 0; i < n; i++) {
        cp_rec_call c = tt_call(first + i);
        memcpy(p + i * sizeof c, &c, sizeof c);
    }
    return n * sizeof(cp_rec_call);
}

static int open_status(const void *data, size_t len)
{
    int status = -1;
    err[0] = '\0';
    cp_trace_reader *r = cp_trace_reader_open_mem(data, len, "f.cptrace", &status, err, sizeof err);
    cp_trace_reader_close(r);
    return status;
}

static void a_newer_version_is_refused_naming_both_versions(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    cp_file_header *h = (cp_file_header *)f.b;
    h->version = 2;
    h->compat_version = 2;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_VERSION);
    assert_string_equal(err, "'f.cptrace': trace format version 2 is newer than this collprof "
                             "reads (version 1)");
    /* A newer header layout may not hash the way this one does: still a version error. */
    h->header_hash ^= 1;
    assert_int_equal(open_status(f.b, f.len), CP_READ_VERSION);

    h->version = 5;
    h->compat_version = 3;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_VERSION);
    assert_non_null(strstr(err, "version 5 (readable from version 3)"));
    assert_non_null(strstr(err, "(version 1)"));
}

static void a_newer_writer_that_stays_compatible_is_read(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    cp_file_header *h = (cp_file_header *)f.b;
    h->version = 4;
    h->compat_version = 1;
    tt_rehash_header(f.b);
    unsigned char p[256];
    size_t n = calls_payload(p, 3, 0);
    tt_chunk(f.b, &f.len, 0, 0, p, (uint32_t)n, 3);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, 3);
    tt_seen_free(&seen);
}

static void byte_swapped_and_foreign_headers_are_refused(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    ((cp_file_header *)f.b)->byte_order = 0x04030201u;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_FORMAT);
    assert_non_null(strstr(err, "byte-swapped"));

    file_init(&f);
    ((cp_file_header *)f.b)->byte_order = 0x01020305u;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_CORRUPT);

    file_init(&f);
    f.b[300] ^= 1; /* a reserved byte: covered by the header hash */
    assert_int_equal(open_status(f.b, f.len), CP_READ_CORRUPT);
    assert_string_equal(err, "'f.cptrace': corrupt file header: it fails its hash");

    file_init(&f);
    ((cp_file_header *)f.b)->header_bytes = 100000;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_CORRUPT);
    assert_non_null(strstr(err, "header_bytes 100000 out of range"));

    file_init(&f);
    ((cp_file_header *)f.b)->compat_version = 0;
    tt_rehash_header(f.b);
    assert_int_equal(open_status(f.b, f.len), CP_READ_CORRUPT);
}

static void random_bytes_and_short_files_are_not_traces(void **state)
{
    (void)state;
    unsigned char junk[4096];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    assert_int_equal(open_status(junk, sizeof junk), CP_READ_FORMAT);
    assert_non_null(strstr(err, "not a collprof trace"));
    assert_int_equal(open_status(junk, 0), CP_READ_FORMAT);
    assert_non_null(strstr(err, "too short"));
    assert_int_equal(open_status("COLLPROF", 8), CP_READ_FORMAT);
    assert_non_null(strstr(err, "too short"));

    /* The magic followed by noise: refused by the header hash. */
    memcpy(junk, CP_TRACE_MAGIC, 8);
    assert_int_equal(open_status(junk, sizeof junk), CP_READ_CORRUPT);

    /* A sound header followed by noise: no records, one corrupt region, no crash. */
    file f;
    file_init(&f);
    memcpy(f.b + f.len, junk, sizeof junk);
    f.len += sizeof junk;
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, 0);
    assert_int_equal(res.corrupt_chunks, 1);
    assert_int_equal(res.first_bad_offset, CP_TRACE_HEADER_BYTES);
    assert_non_null(strstr(res.message, "no chunk magic at byte 512 (first chunk)"));
    tt_seen_free(&seen);
}

static void files_on_disk_missing_empty_or_not_regular(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char path[600];
    int status = -1;
    snprintf(path, sizeof path, "%s/empty.cptrace", dir);
    tt_write_file(path, "", 0);
    assert_null(cp_trace_reader_open(path, &status, err, sizeof err));
    assert_int_equal(status, CP_READ_FORMAT);
    assert_non_null(strstr(err, "too short"));
    assert_non_null(strstr(err, path));

    snprintf(path, sizeof path, "%s/short.cptrace", dir);
    tt_write_file(path, "COLLPROF and then it stops", 26);
    assert_null(cp_trace_reader_open(path, &status, err, sizeof err));
    assert_int_equal(status, CP_READ_FORMAT);
    assert_non_null(strstr(err, "too short"));

    snprintf(path, sizeof path, "%s/absent.cptrace", dir);
    assert_null(cp_trace_reader_open(path, &status, err, sizeof err));
    assert_int_equal(status, CP_READ_IO);
    assert_non_null(strstr(err, "No such file"));

    assert_null(cp_trace_reader_open(dir, &status, err, sizeof err));
    assert_int_equal(status, CP_READ_IO);
    assert_non_null(strstr(err, "not a regular file"));
    tt_rmtree(dir);
    free(dir);
}

static void a_chunk_claiming_a_giant_payload_is_corrupt_not_followed(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    unsigned char p[512];
    size_t n = calls_payload(p, 2, 0);
    size_t at = tt_chunk(f.b, &f.len, 0, 0, p, (uint32_t)n, 2);
    cp_chunk_header *ch = (cp_chunk_header *)(f.b + at);
    ch->payload_bytes = 1u << 30;
    tt_rehash_chunk(f.b + at);
    tt_chunk(f.b, &f.len, 1, 0, p, (uint32_t)n, 2);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.corrupt_chunks, 1);
    assert_int_equal(res.records, 2); /* chunk 1, found by the resync */
    assert_int_equal(res.missing_chunks, 1);
    assert_non_null(strstr(res.message, "payload size out of range"));
    tt_seen_free(&seen);

    /* Within the limit but beyond the file: that is a cut. */
    ch->payload_bytes = CP_CHUNK_MAX_PAYLOAD;
    tt_rehash_chunk(f.b + at);
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.stop, CP_WALK_TRUNCATED);
    assert_int_equal(res.records, 0);
    tt_seen_free(&seen);
}

/* A chunk with one spoilt record: correct hashes, so only the record checks catch it. */
static void expect_bad_record(const void *payload, uint32_t bytes, uint32_t records,
                              const char *why)
{
    file f;
    file_init(&f);
    unsigned char p[256];
    size_t n = calls_payload(p, 2, 0);
    tt_chunk(f.b, &f.len, 0, 0, payload, bytes, records);
    tt_chunk(f.b, &f.len, 1, 0, p, (uint32_t)n, 2);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.corrupt_chunks, 1);
    assert_int_equal(res.records, 2);
    assert_int_equal(seen.n, 2);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_non_null(strstr(res.message, why));
    tt_seen_free(&seen);
}

static void records_with_lying_sizes_make_their_chunk_corrupt(void **state)
{
    (void)state;
    unsigned char p[512];
    /* Size 0 (it would never advance) after a good record: the good one is not handed out. */
    memset(p, 0, sizeof p);
    calls_payload(p, 1, 0);
    expect_bad_record(p, 72, 2, "not a multiple of 8");

    calls_payload(p, 2, 0);
    ((cp_record_header *)(p + 64))->size = 12;
    expect_bad_record(p, 128, 2, "not a multiple of 8");

    calls_payload(p, 2, 0);
    ((cp_record_header *)(p + 64))->size = 128; /* past the payload's end */
    expect_bad_record(p, 128, 2, "runs past the end of its chunk");

    calls_payload(p, 2, 0);
    ((cp_record_header *)p)->size = 32; /* a CALL shorter than a CALL */
    ((cp_record_header *)(p + 32))->type = 200;
    ((cp_record_header *)(p + 32))->size = 32;
    expect_bad_record(p, 128, 3, "shorter than its type");

    calls_payload(p, 2, 0);
    expect_bad_record(p, 128, 3, "record count does not match");

    /* SITE strings: a length running past the record. */
    const char *frames[] = {"abc", "defgh"};
    size_t n = cp_rec_site_build(p, sizeof p, 1, 2, frames, 2);
    assert_int_equal(n, 40);
    uint16_t big = 30;
    memcpy(p + 24 + 5, &big, 2);
    expect_bad_record(p, (uint32_t)n, 1, "SITE record's strings");
    n = cp_rec_site_build(p, sizeof p, 1, 2, frames, 2);
    ((cp_rec_site *)p)->frame_count = 9; /* more strings than bytes */
    expect_bad_record(p, (uint32_t)n, 1, "SITE record's strings");

    cp_rec_process proc = {.rank = 1};
    n = cp_rec_process_build(p, sizeof p, &proc, "host", NULL, NULL);
    ((cp_rec_process *)p)->string_count = 5; /* zero padding reads as one "" at most */
    expect_bad_record(p, (uint32_t)n, 1, "PROCESS record's strings");
}

static void an_unknown_record_type_is_skipped_and_counted(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    unsigned char p[512];
    calls_payload(p, 3, 0);
    /* A future type between two CALLs, 24 bytes. */
    memmove(p + 88, p + 64, 64);
    memset(p + 64, 0x5a, 24);
    ((cp_record_header *)(p + 64))->type = 77;
    ((cp_record_header *)(p + 64))->size = 24;
    tt_chunk(f.b, &f.len, 0, 0, p, 152, 3);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.chunks, 1);
    assert_int_equal(res.records, 3);
    assert_int_equal(res.unknown_records, 1);
    assert_int_equal(seen.unknown_calls, 1);
    assert_int_equal(seen.by_type[CP_REC_CALL], 2);
    assert_int_equal(tt_seen_rec(&seen, 1)->type, 77);
    assert_int_equal(seen.offset[1], CP_TRACE_HEADER_BYTES + CP_CHUNK_HEADER_BYTES + 64);
    assert_string_equal(res.message, "");
    tt_seen_free(&seen);
}

static void a_gap_in_chunk_indexes_counts_missing_chunks(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    unsigned char p[256];
    size_t n = calls_payload(p, 2, 0);
    tt_chunk(f.b, &f.len, 0, 0, p, (uint32_t)n, 2);
    tt_chunk(f.b, &f.len, 1, 0, p, (uint32_t)n, 2);
    size_t at = tt_chunk(f.b, &f.len, 4, 17, p, (uint32_t)n, 2);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, 6);
    assert_int_equal(res.chunks, 3);
    assert_int_equal(res.missing_chunks, 2);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.lost_records, 17);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.first_bad_offset, 0);
    char want[96];
    snprintf(want, sizeof want, "chunk index gap (chunks the writer could not write) at byte %zu "
             "(chunk 4); 2 chunks missing", at);
    assert_non_null(strstr(res.message, want));
    tt_seen_free(&seen);
}

/* Indexes a hostile file puts at the top of the range: the missing count saturates instead
 * of wrapping to zero under a message that says chunks are missing (found by the fuzzer). */
static void chunk_indexes_near_the_top_do_not_wrap(void **state)
{
    (void)state;
    file f;
    file_init(&f);
    unsigned char p[256];
    size_t n = calls_payload(p, 1, 0);
    tt_chunk(f.b, &f.len, UINT64_MAX - 1, 0, p, (uint32_t)n, 1);
    tt_chunk(f.b, &f.len, UINT64_MAX, 0, p, (uint32_t)n, 1);
    tt_chunk(f.b, &f.len, 1, 0, p, (uint32_t)n, 1);
    tt_chunk(f.b, &f.len, 5, 0, p, (uint32_t)n, 1);
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(f.b, f.len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, 4);
    /* 2^64 - 2 before the first, then 3 between 1 and 5: more than a count can hold */
    assert_int_equal(res.missing_chunks, UINT64_MAX);
    assert_non_null(strstr(res.message, "chunk index gap"));
    assert_non_null(strstr(res.message, "chunks missing"));
    tt_seen_free(&seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_newer_version_is_refused_naming_both_versions),
        cmocka_unit_test(a_newer_writer_that_stays_compatible_is_read),
        cmocka_unit_test(byte_swapped_and_foreign_headers_are_refused),
        cmocka_unit_test(random_bytes_and_short_files_are_not_traces),
        cmocka_unit_test(files_on_disk_missing_empty_or_not_regular),
        cmocka_unit_test(a_chunk_claiming_a_giant_payload_is_corrupt_not_followed),
        cmocka_unit_test(records_with_lying_sizes_make_their_chunk_corrupt),
        cmocka_unit_test(an_unknown_record_type_is_skipped_and_counted),
        cmocka_unit_test(a_gap_in_chunk_indexes_counts_missing_chunks),
        cmocka_unit_test(chunk_indexes_near_the_top_do_not_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
