/* trace_segment: a capped trace's rotation into segments (cp_trace_writer_rotate,
 * COLLPROF_MAX_MB; trace_writer.h says what it offers, trace_writer.c's header how it fits
 * the writer).
 *
 * A segment starts with the file header, a SEGMENT record, the LOST record of what its
 * opening deleted, and every record its data may name (trace_kept.h), so it reads alone.
 * Everything here may run in a fatal signal's handler (the exit flush): no allocation, no
 * stdio; the buffers are made by cp_trace_writer_rotate. Its file calls are the writer's
 * own direct ones, not the io's: a segment's head must land before the data the io writes
 * after it.
 */
#include "trace/trace_writer_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "trace/trace_hash.h"

/* Writes one chunk of a segment's head (`used` payload bytes, `count` records, from buf, its
 * header made here) at the end of the file, directly (rotation's own calls: see the top):
 * 0 and the file's end and chunk index advanced, or -1. */
static int emit_chunk(cp_trace_writer *w, unsigned char *buf, size_t used, uint32_t count)
{
    cp_chunk_header ch = {
        .magic = CP_CHUNK_MAGIC,
        .payload_bytes = (uint32_t)used,
        .chunk_index = w->chunk_index,
        .lost_records = w->lost,
        .payload_hash = cp_trace_hash(buf + CP_CHUNK_HEADER_BYTES, used),
        .record_count = count,
    };
    ch.header_hash = cp_chunk_header_hash(&ch);
    memcpy(buf, &ch, sizeof ch);
    size_t len = CP_CHUNK_HEADER_BYTES + used;
    int wrote = 0;
    if (cp_tw_own_fd(w) != 0 || cp_tw_write_all_at(&cp_trace_io_direct, w->fd, buf, len, w->file_bytes,
                                       CP_WRITER_RESERVE, 0, &wrote) != 0)
        return -1;
    w->file_bytes += len;
    w->chunk_index++;
    return 0;
}

/* Appends rec to the head chunk being built at w->head (*used, *count), writing it out first
 * when rec does not fit. */
static void head_put(cp_trace_writer *w, const void *rec, size_t size, size_t *used,
                     uint32_t *count)
{
    if (*used + size > w->cap && *count) {
        (void)emit_chunk(w, w->head, *used, *count);
        *used = 0;
        *count = 0;
    }
    if (size > w->cap)
        return; /* never: append_kept keeps only records a chunk holds */
    memcpy(w->head + CP_CHUNK_HEADER_BYTES + *used, rec, size);
    *used += size;
    (*count)++;
}

/* A segment's head: SEGMENT, what rotation dropped as it opened (LOST rotated), then every
 * record the data may name (append_kept's). Its failure costs no data record: a segment
 * whose head is missing still reads, with calls naming communicators it does not know. */
static void write_head(cp_trace_writer *w, uint64_t rotated_now)
{
    size_t used = 0;
    uint32_t count = 0;
    uint64_t now = cp_mono_ns();
    cp_rec_segment seg = {.h = {CP_REC_SEGMENT, sizeof seg}, .segment = w->segment,
                          .records_before = w->records_before, .at_ns = now,
                          .lost_before = w->lost - rotated_now};
    head_put(w, &seg, sizeof seg, &used, &count);
    if (rotated_now) {
        cp_rec_lost lost = {.h = {CP_REC_LOST, sizeof lost}, .cause = CP_LOST_ROTATED,
                            .count = rotated_now, .at_ns = now};
        head_put(w, &lost, sizeof lost, &used, &count);
    }
    size_t off = 0;
    for (const void *rec; (rec = cp_kept_next(&w->kept, &off)) != NULL;) {
        uint16_t size;
        memcpy(&size, (const unsigned char *)rec + offsetof(cp_record_header, size), sizeof size);
        head_put(w, rec, size, &used, &count);
    }
    if (count)
        (void)emit_chunk(w, w->head, used, count);
}

/* Ends the current segment and starts the next, deleting the oldest past
 * CP_TRACE_SEGMENTS. When the next cannot be made, writing goes on in the current one (the
 * size bound is then exceeded, never a record lost to it) and the next chunk tries again. */
void cp_tw_next_segment(cp_trace_writer *w)
{
    uint32_t next = w->segment + 1;
    if (cp_trace_segment_path(w->alt_path, w->path_cap, w->base, next) != 0)
        return;
    struct stat st;
    int fd = cp_tw_create_file(w->alt_path, w->mode, &st);
    if (fd < 0)
        return;
    int wrote;
    if (cp_tw_write_all_at(&cp_trace_io_direct, fd, &w->header, sizeof w->header, 0, CP_WRITER_RESERVE,
                     0, &wrote) != 0 ||
        (w->seg_io && w->seg_io(w->seg_io_ctx, fd) != 0)) {
        cp_tw_close_file(fd);
        cp_tw_remove_file(w->alt_path);
        return;
    }
    if (cp_tw_own_fd(w) == 0)
        (void)cp_tw_close_file(w->fd);
    w->fd = fd;
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    char *old = w->path;
    w->path = w->alt_path;
    w->alt_path = old;
    w->file_bytes = sizeof w->header;
    w->chunk_index = 0;
    w->records_before += w->seg_written[w->segment % CP_TRACE_SEGMENTS];
    w->segment = next;
    w->seg_data = 0;
    /* the slot of the segment that leaves now is the new one's */
    uint64_t rotated_now = 0;
    if (next >= CP_TRACE_SEGMENTS) {
        if (cp_trace_segment_path(w->alt_path, w->path_cap, w->base,
                                  next - CP_TRACE_SEGMENTS) == 0 &&
            cp_tw_remove_file(w->alt_path) == 0) {
            rotated_now = w->seg_written[next % CP_TRACE_SEGMENTS];
            w->rotated += rotated_now;
            w->lost += rotated_now;
            w->lost_by[CP_LOST_ROTATED] += rotated_now;
        }
    }
    w->seg_written[next % CP_TRACE_SEGMENTS] = 0;
    write_head(w, rotated_now);
}

int cp_trace_writer_rotate(cp_trace_writer *w, uint64_t max_bytes)
{
    uint64_t seg = max_bytes / CP_TRACE_SEGMENTS;
    if (w->seg_max || w->chunk_index || w->used || seg < CP_TRACE_HEADER_BYTES + 2 * w->cap)
        return -1;
    size_t n = strlen(w->path);
    w->path_cap = n + 16; /* ".s" and up to 10 digits */
    char *path = malloc(w->path_cap);
    w->alt_path = malloc(w->path_cap);
    w->base = strdup(w->path);
    w->head = malloc(CP_CHUNK_HEADER_BYTES + w->cap);
    if (!path || !w->alt_path || !w->base || !w->head) {
        free(path);
        free(w->alt_path);
        free(w->base);
        free(w->head);
        w->alt_path = w->base = NULL;
        w->head = NULL;
        return -1;
    }
    memcpy(path, w->path, n + 1);
    free(w->path);
    w->path = path;
    w->seg_max = seg;
    cp_rec_segment first = {.h = {CP_REC_SEGMENT, sizeof first}, .at_ns = cp_mono_ns()};
    memcpy(w->payload, &first, sizeof first);
    w->used = sizeof first;
    w->count = 1;
    w->own = 1;
    return 0;
}

void cp_trace_writer_forget(cp_trace_writer *w, unsigned type, uint32_t index)
{
    cp_kept_forget(&w->kept, type, index);
}

uint64_t cp_trace_writer_records_rotated(const cp_trace_writer *w) { return w->rotated; }

void cp_trace_writer_on_segment(cp_trace_writer *w, int (*seg_io)(void *ctx, int fd), void *ctx)
{
    w->seg_io = seg_io;
    w->seg_io_ctx = ctx;
}
