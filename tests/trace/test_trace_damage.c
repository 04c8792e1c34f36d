/* A trace damaged the two ways life damages files: cut short (SIGKILL, a full disk) at any
 * byte, and one bit flipped anywhere. The reader must hand out exactly the undamaged
 * records, byte for byte, and say that something was wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_trace_util.h"

#define MAX_CHUNKS 64

/* Every record handed out must be the original's bytes at the same offset. */
static void assert_records_are_originals(const tt_seen *seen, const unsigned char *orig,
                                         size_t orig_len)
{
    for (size_t k = 0; k < seen->n; k++) {
        const cp_record_header *rec = tt_seen_rec(seen, k);
        assert_true(seen->offset[k] + rec->size <= orig_len);
        assert_memory_equal(rec, orig + seen->offset[k], rec->size);
    }
}

static void a_trace_cut_at_every_byte_reads_its_whole_chunks(void **state)
{
    (void)state;
    size_t len;
    unsigned char *file = tt_small_trace(40, &len);
    size_t ends[MAX_CHUNKS];
    uint32_t counts[MAX_CHUNKS];
    size_t chunks = tt_chunk_ends(file, len, ends, counts, MAX_CHUNKS);
    assert_true(chunks >= 3);
    assert_int_equal(ends[chunks - 1], len);

    char err[256];
    cp_walk_result res;
    tt_seen seen;
    for (size_t cut = 0; cut <= len; cut++) {
        int status = tt_walk_mem(file, cut, &res, &seen, err, sizeof err);
        if (cut < CP_TRACE_HEADER_BYTES) {
            assert_int_equal(status, CP_READ_FORMAT);
            assert_non_null(strstr(err, "too short"));
            continue;
        }
        assert_int_equal(status, CP_READ_OK);
        uint64_t want_records = 0, whole = 0;
        size_t boundary = CP_TRACE_HEADER_BYTES;
        for (size_t c = 0; c < chunks && ends[c] <= cut; c++) {
            want_records += counts[c];
            whole++;
            boundary = ends[c];
        }
        assert_int_equal(res.records, want_records);
        assert_int_equal(seen.n, want_records);
        assert_int_equal(res.chunks, whole);
        assert_int_equal(res.valid_bytes, boundary);
        assert_int_equal(res.corrupt_chunks, 0);
        assert_int_equal(res.missing_chunks, 0);
        assert_records_are_originals(&seen, file, len);
        if (cut == boundary) {
            assert_int_equal(res.stop, CP_WALK_END);
            assert_string_equal(res.message, "");
        } else {
            assert_int_equal(res.stop, CP_WALK_TRUNCATED);
            assert_int_equal(res.first_bad_offset, boundary);
            assert_non_null(strstr(res.message, "ends inside a chunk"));
        }
        tt_seen_free(&seen);
    }
    free(file);
}

/* Each bit of the file flipped on its own: no crash, only original records, and the
 * damage always noticed (the header refused, or a chunk counted corrupt). */
static void every_flipped_bit_is_detected(void **state)
{
    (void)state;
    size_t len;
    unsigned char *orig = tt_small_trace(20, &len);
    unsigned char *file = malloc(len);
    memcpy(file, orig, len);
    char err[256];
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(tt_walk_mem(orig, len, &res, &seen, err, sizeof err), CP_READ_OK);
    const uint64_t all_records = res.records;
    assert_int_equal(res.corrupt_chunks, 0);
    assert_true(res.chunks >= 3);
    tt_seen_free(&seen);

    size_t refused = 0, corrupt = 0;
    for (size_t bit = 0; bit < len * 8; bit++) {
        file[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        int status = tt_walk_mem(file, len, &res, &seen, err, sizeof err);
        if (status != CP_READ_OK) {
            assert_true(bit < CP_TRACE_HEADER_BYTES * 8);
            assert_true(status == CP_READ_FORMAT || status == CP_READ_VERSION ||
                        status == CP_READ_CORRUPT);
            assert_non_null(strstr(err, "t.cptrace"));
            refused++;
        } else {
            assert_true(bit >= CP_TRACE_HEADER_BYTES * 8);
            assert_records_are_originals(&seen, orig, len);
            assert_true(res.corrupt_chunks > 0);
            assert_true(res.records < all_records);
            assert_true(res.first_bad_offset >= CP_TRACE_HEADER_BYTES);
            assert_true(res.message[0] != '\0');
            assert_null(strchr(res.message, '\n'));
            corrupt++;
        }
        tt_seen_free(&seen);
        file[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    assert_int_equal(refused, CP_TRACE_HEADER_BYTES * 8);
    assert_int_equal(corrupt, (len - CP_TRACE_HEADER_BYTES) * 8);
    free(file);
    free(orig);
}

/* A corrupt chunk in the middle costs that chunk only; the message says where. */
static void a_corrupt_chunk_costs_only_itself(void **state)
{
    (void)state;
    size_t len;
    unsigned char *file = tt_small_trace(40, &len);
    size_t ends[MAX_CHUNKS];
    uint32_t counts[MAX_CHUNKS];
    size_t chunks = tt_chunk_ends(file, len, ends, counts, MAX_CHUNKS);
    assert_true(chunks >= 6);
    uint64_t total = 0;
    for (size_t c = 0; c < chunks; c++)
        total += counts[c];

    char err[256], want[64];
    cp_walk_result res;
    tt_seen seen;
    /* A payload byte of chunk 2: its header still holds, so the walk skips exactly it. */
    file[ends[1] + CP_CHUNK_HEADER_BYTES + 9] ^= 0x40;
    assert_int_equal(tt_walk_mem(file, len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, total - counts[2]);
    assert_int_equal(res.corrupt_chunks, 1);
    assert_int_equal(res.missing_chunks, 1);
    assert_int_equal(res.chunks, chunks - 1);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.first_bad_offset, ends[1]);
    snprintf(want, sizeof want, "at byte %zu (chunk 2)", ends[1]);
    assert_non_null(strstr(res.message, "payload fails its hash"));
    assert_non_null(strstr(res.message, want));
    tt_seen_free(&seen);
    file[ends[1] + CP_CHUNK_HEADER_BYTES + 9] ^= 0x40;

    /* Chunk 2's header smashed: the walk scans forward to chunk 3's header. */
    memset(file + ends[1], 0xee, 24);
    assert_int_equal(tt_walk_mem(file, len, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.records, total - counts[2]);
    assert_int_equal(res.corrupt_chunks, 1);
    assert_int_equal(res.missing_chunks, 1);
    snprintf(want, sizeof want, "no chunk magic at byte %zu (after chunk 1)", ends[1]);
    assert_non_null(strstr(res.message, want));
    tt_seen_free(&seen);

    /* Two chunks bad and the file cut: all three said in one line. */
    memset(file + ends[2] + CP_CHUNK_HEADER_BYTES, 0, 8);
    assert_int_equal(tt_walk_mem(file, len - 3, &res, &seen, err, sizeof err), CP_READ_OK);
    assert_int_equal(res.corrupt_chunks, 2);
    assert_int_equal(res.stop, CP_WALK_TRUNCATED);
    assert_non_null(strstr(res.message, "1 more corrupt chunk"));
    assert_non_null(strstr(res.message, "2 chunks missing"));
    assert_non_null(strstr(res.message, "the file ends inside a chunk"));
    tt_seen_free(&seen);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_trace_cut_at_every_byte_reads_its_whole_chunks),
        cmocka_unit_test(every_flipped_bit_is_detected),
        cmocka_unit_test(a_corrupt_chunk_costs_only_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
