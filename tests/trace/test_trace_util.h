/* test_trace_util: what the trace tests share: a scratch directory, whole-file reads, a
 * deterministic record generator, a visitor that keeps every record it is handed, and a
 * chunk builder for hand-made (hostile) files. Header-only so each test stays one program. */
#ifndef COLLPROF_TEST_TRACE_UTIL_H
#define COLLPROF_TEST_TRACE_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common/test_tree_util.h"

#include "trace/trace_format.h"
#include "trace/trace_hash.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"

/* A fresh directory under $TMPDIR (or /tmp); tt_rmtree removes it and what it holds. */
static inline char *tt_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/collprof-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        perror("mkdtemp");
        abort();
    }
    return strdup(dir);
}

static inline void tt_rmtree(const char *dir)
{
    tc_rmtree(dir);
}

static inline unsigned char *tt_read_file(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static inline void tt_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        perror(path);
        abort();
    }
    fclose(f);
}

/* A CALL record whose every field depends on i, reserved left zero as the format says. */
static inline cp_rec_call tt_call(uint64_t i)
{
    cp_rec_call c;
    memset(&c, 0, sizeof c);
    c.h.type = CP_REC_CALL;
    c.h.size = sizeof c;
    c.op = (uint8_t)(1 + i % 10);
    c.dtype = (uint8_t)(i % 12);
    c.redop = (uint8_t)(i % 5);
    c.flags = (uint8_t)(i % 32);
    c.comm_index = (uint32_t)(i % 7);
    c.site_index = (uint32_t)(i % 13);
    c.seq = i * 3 + 1;
    c.count = (i * 2654435761u) % (1u << 30);
    c.stream = 0x7f0000000000ull + (i % 4) * 0x100;
    c.enter_ns = 1000000000ull + i * 1013;
    c.host_ns = (uint32_t)(i * 7 % 100000);
    c.peer = (int32_t)(i % 9) - 1;
    c.result = (int8_t)(i % 3 == 0 ? 0 : i % 8);
    c.group_depth = (uint8_t)(i % 4);
    c.thread = (uint16_t)(i % 5);
    return c;
}

/* Every record a walk handed out, copied, with its file offset. */
typedef struct tt_seen {
    size_t n, cap;
    unsigned char *bytes; /* records back to back */
    size_t used, bytes_cap;
    uint64_t *offset;
    size_t *at; /* where record k starts in bytes */
    uint64_t by_type[CP_REC_TYPE_MAX_KNOWN + 1];
    uint64_t unknown_calls;
} tt_seen;

static inline int tt_keep(void *ctx, const cp_record_header *rec, uint64_t file_offset)
{
    tt_seen *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->offset = realloc(s->offset, s->cap * sizeof *s->offset);
        s->at = realloc(s->at, s->cap * sizeof *s->at);
    }
    if (s->used + rec->size > s->bytes_cap) {
        s->bytes_cap = (s->bytes_cap + rec->size) * 2;
        s->bytes = realloc(s->bytes, s->bytes_cap);
    }
    memcpy(s->bytes + s->used, rec, rec->size);
    s->offset[s->n] = file_offset;
    s->at[s->n] = s->used;
    s->used += rec->size;
    s->n++;
    if (rec->type <= CP_REC_TYPE_MAX_KNOWN)
        s->by_type[rec->type]++;
    return 0;
}

static inline int tt_count_unknown(void *ctx, const cp_record_header *rec)
{
    (void)rec;
    ((tt_seen *)ctx)->unknown_calls++;
    return 0;
}

static inline void tt_seen_free(tt_seen *s)
{
    free(s->bytes);
    free(s->offset);
    free(s->at);
    memset(s, 0, sizeof *s);
}

static inline const cp_record_header *tt_seen_rec(const tt_seen *s, size_t k)
{
    return (const cp_record_header *)(s->bytes + s->at[k]);
}

/* Opens a trace held in memory and walks it, keeping every record; the status of the open
 * is returned, and on success *res and *seen are filled. */
static inline int tt_walk_mem(const void *data, size_t len, cp_walk_result *res, tt_seen *seen,
                              char *err, size_t errlen)
{
    int status = -1;
    memset(seen, 0, sizeof *seen);
    memset(res, 0, sizeof *res);
    cp_trace_reader *r = cp_trace_reader_open_mem(data, len, "t.cptrace", &status, err, errlen);
    if (!r)
        return status;
    cp_trace_visitor v = {.ctx = seen, .on_record = tt_keep, .on_unknown = tt_count_unknown};
    if (cp_trace_walk(r, &v, res) != 0)
        abort();
    cp_trace_reader_close(r);
    return status;
}

/* A valid file header in buf (512 bytes), hashed. */
static inline void tt_header(void *buf)
{
    cp_file_header h;
    cp_file_header_init(&h);
    h.pid = 4242;
    h.rank = 3;
    snprintf(h.hostname, sizeof h.hostname, "node07");
    h.header_hash = cp_trace_hash(&h, offsetof(cp_file_header, header_hash));
    memcpy(buf, &h, sizeof h);
}

static inline void tt_rehash_header(void *buf)
{
    cp_file_header *h = buf;
    h->header_hash = cp_trace_hash(h, offsetof(cp_file_header, header_hash));
}

/* Appends a chunk (header + payload) at buf+*len with correct hashes; the caller may then
 * spoil any field and call tt_rehash_chunk to make the header hash hold again. */
static inline size_t tt_chunk(unsigned char *buf, size_t *len, uint64_t index, uint64_t lost,
                              const void *payload, uint32_t payload_bytes, uint32_t records)
{
    cp_chunk_header ch = {
        .magic = CP_CHUNK_MAGIC,
        .payload_bytes = payload_bytes,
        .chunk_index = index,
        .lost_records = lost,
        .payload_hash = cp_trace_hash(payload, payload_bytes),
        .record_count = records,
    };
    ch.header_hash = cp_chunk_header_hash(&ch);
    size_t at = *len;
    memcpy(buf + at, &ch, sizeof ch);
    memcpy(buf + at + sizeof ch, payload, payload_bytes);
    *len += sizeof ch + payload_bytes;
    return at;
}

static inline void tt_rehash_chunk(unsigned char *chunk)
{
    cp_chunk_header ch;
    memcpy(&ch, chunk, sizeof ch);
    ch.header_hash = cp_chunk_header_hash(&ch);
    memcpy(chunk, &ch, sizeof ch);
}

/* The chunks of a well-formed file, by parsing their headers directly: the tests' own view
 * of where chunks end, independent of the reader. Returns the count. */
static inline size_t tt_chunk_ends(const unsigned char *file, size_t len, size_t *ends,
                                   uint32_t *counts, size_t max)
{
    size_t off = CP_TRACE_HEADER_BYTES, n = 0;
    while (off + CP_CHUNK_HEADER_BYTES <= len && n < max) {
        cp_chunk_header ch;
        memcpy(&ch, file + off, sizeof ch);
        off += CP_CHUNK_HEADER_BYTES + ch.payload_bytes;
        ends[n] = off;
        counts[n] = ch.record_count;
        n++;
    }
    return n;
}

/* A small trace made by the writer with 512-byte chunks: one record of every type (a LOST
 * record from a count_lost) among `calls` CALLs, so it spans several chunks. Returns the
 * file's bytes (malloc'd). */
static inline unsigned char *tt_small_trace(unsigned calls, size_t *len)
{
    char *dir = tt_tmpdir();
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/small.cptrace", dir);
    cp_file_header h;
    cp_file_header_init(&h);
    h.rank = 1;
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 512, err, sizeof err);
    if (!w) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    unsigned char rec[512];
    cp_rec_process p = {.rank = 1, .world_size = 2, .pid = 7};
    if (!cp_rec_process_build(rec, sizeof rec, &p, "h", "j", NULL))
        abort();
    cp_trace_writer_append(w, rec);
    cp_rec_comm comm = {.h = {CP_REC_COMM, sizeof comm}, .comm_id = 99, .nranks = 2, .rank = 1};
    cp_trace_writer_append(w, &comm);
    const char *frames[] = {"f+0x1 (a.so)", "g+0x2 (b.so)"};
    if (!cp_rec_site_build(rec, sizeof rec, 0, 0x1234, frames, 2))
        abort();
    cp_trace_writer_append(w, rec);
    for (unsigned i = 0; i < calls; i++) {
        cp_rec_call c = tt_call(i);
        cp_trace_writer_append(w, &c);
        if (i == calls / 2) {
            cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .seq = i, .gpu_end_ns = 5};
            cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = 1, .realtime_ns = 2};
            cp_rec_hang g = {.h = {CP_REC_HANG, sizeof g}, .seq = i, .age_ns = 9};
            cp_trace_writer_append(w, &d);
            cp_trace_writer_append(w, &k);
            cp_trace_writer_append(w, &g);
            cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 3);
        }
    }
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = -1};
    cp_trace_writer_append(w, &e);
    if (cp_trace_writer_close(w) != 0)
        abort();
    unsigned char *data = tt_read_file(path, len);
    tt_rmtree(dir);
    free(dir);
    return data;
}

#endif
