/* trace_writer: records into a chunk buffer, each full chunk hashed and written whole.
 *
 * A chunk goes to the file in one pwrite(2) of header and payload together, so a process
 * killed at any instant leaves whole chunks and at most one partial one at the end, which
 * the reader recognises as the cut. A failed write is undone (ftruncate back to the last
 * whole chunk) so the next chunk lands where the failed one should have, and the file stays
 * a clean sequence of chunks with a gap in chunk_index where data was lost.
 *
 * The file descriptor is the job's to take: a job that closes every fd (daemons, launchers,
 * data loaders) and opens a file of its own, or dup2s onto a number, must never receive our
 * chunks. So the fd is moved high (F_DUPFD_CLOEXEC from ~1000, where open(2), which hands
 * out the lowest free number, does not reach unless the job holds that many files), and its
 * identity (device and inode, fstat) is checked before every write, ftruncate and close.
 * One that is no longer ours is left alone (it is the job's now): the file is opened again
 * by its path, and only if that is still the same inode does writing go on; otherwise the
 * writer is detached and what it holds counts as lost (write error). A job that closes the
 * fd and reuses its number between the check and the pwrite could still be hit: the window
 * is one system call, at a number the job's own open(2) does not hand out.
 *
 * The file must end with its loss count and END even when the disk is full or the job's
 * RLIMIT_FSIZE is reached, or the reader cannot tell a job that stopped from a file that
 * stopped, nor how much was lost after the last chunk that reached the disk. So the closing
 * chunk (LOST records, CLOCK, END: a few hundred bytes, after cp_trace_writer_closing) has
 * room kept for it: CP_WRITER_RESERVE bytes below the file size limit that data chunks may
 * not use, and the same preallocated past the end of the file (fallocate KEEP_SIZE). A data
 * chunk is written only once its own space and the reserve after it are allocated, so a full
 * disk refuses the data chunk, never the closing one. (A file system that cannot preallocate
 * keeps only the size limit's margin.)
 *
 * Losses are reported twice: the running total in every chunk header (what the reader
 * trusts), and LOST records by cause that the writer itself puts at the head of the next
 * chunk it writes. A LOST record that sits in the chunk buffer has its count raised in
 * place while more drops of its cause arrive, so a burst of drops costs one record.
 *
 * The calls that may sleep on the file system go through a cp_trace_io (trace_io.h). When
 * one stalls (a frozen or hung file system, or only an executor the scheduler has not run
 * yet), its chunk stays in flight in its buffer and the records go on into a second one (the
 * spare, allocated with an io that can stall): the writer never waits, a hiccup costs
 * nothing, and only records that find both buffers taken are counted lost
 * (CP_LOST_WRITE_STALLED), until the call finishes and writing resumes. At close, a writer
 * still stalled queues what it holds and its closing chunk (in a small buffer kept for it)
 * and the close behind the call in flight, and is left allocated: the io reads those
 * buffers after the thaw.
 *
 * Rotation (cp_trace_writer_rotate, COLLPROF_MAX_MB): the chunk write that would take a
 * segment past its size first makes the next segment (header, then a head chunk that repeats
 * what its records may name: trace_kept.h) and deletes the oldest past CP_TRACE_SEGMENTS,
 * counting its records lost (rotated). Its buffers are made when rotation is set up, so a
 * rotation allocates nothing and may happen in the fatal signal's flush. It waits for no
 * call in flight: a rotation due while the io is stalled waits for the next chunk after the
 * thaw. Its own file calls (create, header, head, remove) are made here, not through the io,
 * and an io bound to one file is asked for the next file's (cp_trace_writer_on_segment).
 */
#include "trace/trace_writer.h"
#include "trace/trace_writer_int.h"

#include "common/clock.h"
#include "common/fd_high.h"
#include "trace/trace_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define CP_LIKELY(x) __builtin_expect(!!(x), 1)

/* Writers closed while stalled: never freed, kept reachable (the io reads their buffers
 * whenever the file system answers). One a file at most. */
static cp_trace_writer *g_handed;

void cp_file_header_init(cp_file_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CP_TRACE_MAGIC, sizeof h->magic);
    h->byte_order = CP_TRACE_BYTE_ORDER;
    h->version = CP_TRACE_VERSION;
    h->compat_version = CP_TRACE_VERSION;
    h->header_bytes = CP_TRACE_HEADER_BYTES;
    h->rank = -1;
    h->local_rank = -1;
    h->world_size = -1;
}

cp_trace_writer *cp_trace_writer_open(const char *path, const cp_file_header *header,
                                      size_t chunk_payload_bytes, char *err, size_t errlen)
{
    return cp_trace_writer_open_mode(path, header, chunk_payload_bytes, CP_TRACE_FILE_MODE, err,
                                     errlen);
}

cp_trace_writer *cp_trace_writer_open_mode(const char *path, const cp_file_header *header,
                                           size_t chunk_payload_bytes, unsigned mode, char *err,
                                           size_t errlen)
{
    if (chunk_payload_bytes == 0)
        chunk_payload_bytes = CP_CHUNK_DEFAULT_PAYLOAD;
    if (!path || !header || chunk_payload_bytes % 8 != 0 ||
        chunk_payload_bytes < CP_CHUNK_MIN_PAYLOAD || chunk_payload_bytes > CP_CHUNK_MAX_PAYLOAD) {
        snprintf(err, errlen, "'%s': chunk payload of %zu bytes is not a multiple of 8 in [%u, %u]",
                 path ? path : "(null)", chunk_payload_bytes, CP_CHUNK_MIN_PAYLOAD,
                 CP_CHUNK_MAX_PAYLOAD);
        return NULL;
    }
    cp_trace_writer *w = calloc(1, sizeof *w);
    unsigned char *buf = malloc(CP_CHUNK_HEADER_BYTES + chunk_payload_bytes);
    if (!w || !buf) {
        snprintf(err, errlen, "'%s': out of memory for the trace writer", path);
        free(w);
        free(buf);
        return NULL;
    }
    struct stat st;
    int fd = cp_tw_create_file(path, mode, &st);
    if (fd < 0) {
        snprintf(err, errlen, "'%s': cannot create trace file: %s", path, strerror(errno));
        free(w);
        free(buf);
        return NULL;
    }

    /* The writer owns the format fields: whatever the caller left there, the file it
     * writes is one this version's reader accepts. */
    cp_file_header h = *header;
    memcpy(h.magic, CP_TRACE_MAGIC, sizeof h.magic);
    h.byte_order = CP_TRACE_BYTE_ORDER;
    h.version = CP_TRACE_VERSION;
    h.compat_version = CP_TRACE_VERSION;
    h.header_bytes = CP_TRACE_HEADER_BYTES;
    h.reserved0 = 0;
    memset(h.reserved, 0, sizeof h.reserved);
    h.header_hash = cp_trace_hash(&h, offsetof(cp_file_header, header_hash));
    int wrote;
    if (cp_tw_write_all_at(&cp_trace_io_direct, fd, &h, sizeof h, 0, CP_WRITER_RESERVE, 0, &wrote) != 0) {
        int e = errno;
        snprintf(err, errlen, "'%s': cannot write trace header: %s", path,
                 e ? strerror(e) : "short write");
        cp_tw_close_file(fd);
        cp_tw_remove_file(path);
        free(w);
        free(buf);
        return NULL;
    }

    w->fd = fd;
    w->path = strdup(path);
    w->header = h;
    w->mode = mode;
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    w->buf = buf;
    w->payload = buf + CP_CHUNK_HEADER_BYTES;
    w->cap = chunk_payload_bytes;
    w->file_bytes = sizeof h;
    w->io = &cp_trace_io_direct;
    for (int c = 0; c < CP_LOST_CAUSES; c++)
        w->lost_rec_at[c] = SIZE_MAX;
    return w;
}

/* Puts or refreshes the LOST record of each cause with drops not yet on disk. Called when
 * the buffer has room for them: right after a drop, or with an empty buffer. */
/* The chunk in flight is the buffer itself (no spare): the io's until the call ends. */
static int buffer_in_flight(const cp_trace_writer *w)
{
    return w->flight == CP_FLIGHT_CHUNK && !w->flight_buf;
}

static void place_lost_records(cp_trace_writer *w)
{
    if (buffer_in_flight(w))
        return;
    for (unsigned c = 1; c < CP_LOST_CAUSES; c++) {
        if (!w->pending[c])
            continue;
        if (w->lost_rec_at[c] == SIZE_MAX) {
            if (w->cap - w->used < sizeof(cp_rec_lost))
                continue; /* placed after the next chunk goes out */
            w->lost_rec_at[c] = w->used;
            w->used += sizeof(cp_rec_lost);
            w->count++;
            w->own++;
        }
        cp_rec_lost rec = {.h = {CP_REC_LOST, sizeof(cp_rec_lost)},
                           .cause = c,
                           .count = w->pending[c],
                           .at_ns = w->pending_at_ns[c]};
        memcpy(w->payload + w->lost_rec_at[c], &rec, sizeof rec);
    }
}

static void count_drop(cp_trace_writer *w, unsigned cause, uint64_t records)
{
    w->lost += records;
    w->lost_by[cause] += records;
    w->pending[cause] += records;
    w->pending_at_ns[cause] = cp_mono_ns();
}

/* The buffer starts over, with the LOST records of what is still unreported. */
static void reset_chunk(cp_trace_writer *w)
{
    w->used = 0;
    w->count = 0;
    w->own = 0;
    for (unsigned c = 1; c < CP_LOST_CAUSES; c++)
        w->lost_rec_at[c] = SIZE_MAX;
    place_lost_records(w);
}

/* A chunk's write came back (rc 0 or -1): on failure its caller records join the lost total
 * and its LOST records are owed again. */
static int chunk_done(cp_trace_writer *w, int rc, int wrote, size_t len, uint64_t callers,
                      const uint64_t *placed)
{
    if (rc == 0) {
        w->file_bytes += len;
        w->written += callers;
        w->seg_written[w->segment % CP_TRACE_SEGMENTS] += callers;
        w->seg_data |= callers > 0;
        return 0;
    }
    for (unsigned c = 1; c < CP_LOST_CAUSES; c++)
        w->pending[c] += placed[c];
    /* A partial chunk would read as corruption; cut it off so the next chunk starts at a
     * chunk boundary. If even that fails, the reader resyncs past the debris. The cut also
     * frees the blocks kept past the end for the closing chunk, which are taken again (the
     * cut gave back at least as many). */
    if (wrote) {
        int cut = cp_tw_own_fd(w) == 0 ? w->io->cut(w->io->ctx, w->fd, w->file_bytes, CP_WRITER_RESERVE)
                                 : -1;
        if (cut == CP_IO_STALLED) {
            w->flight = CP_FLIGHT_CUT;
            w->flight_len = len;
        } else if (cut != 0) {
            w->file_bytes += len;
        }
    }
    if (callers)
        count_drop(w, CP_LOST_WRITE_ERROR, callers);
    else
        w->chunk_index--; /* only our LOST records failed: no data gap to show */
    return -1;
}

/* The call in flight, if any, waited for (within the io's bound when block; appends only
 * look, or a stalled file system would cost the bound a record) and settled. 0: nothing in
 * flight any more; -1: still stalled (errno ETIMEDOUT). */
static int settle(cp_trace_writer *w, int block)
{
    if (w->flight == CP_FLIGHT_NONE)
        return 0;
    int wrote = 0;
    int rc = w->io->wait(w->io->ctx, block, &wrote);
    if (rc == CP_IO_STALLED) {
        errno = ETIMEDOUT;
        return -1;
    }
    int e = errno;
    if (w->flight == CP_FLIGHT_CUT) {
        w->flight = CP_FLIGHT_NONE;
        if (rc != 0)
            w->file_bytes += w->flight_len;
        return 0;
    }
    int swapped = w->flight_buf != NULL;
    w->flight = CP_FLIGHT_NONE;
    uint64_t placed[CP_LOST_CAUSES];
    memcpy(placed, w->flight_placed, sizeof placed);
    errno = e;
    chunk_done(w, rc, wrote, w->flight_len, w->flight_callers, placed);
    if (swapped) { /* the records went on into the other buffer: it stays as it is */
        w->spare = w->flight_buf;
        w->flight_buf = NULL;
        place_lost_records(w);
    } else {
        reset_chunk(w); /* free again, even while a cut of the file is in flight */
    }
    return 0;
}

/* Writes the current chunk. 0 (also when it stalled and the records go on into the spare);
 * -1 when its records were lost (counted); -1 with errno ETIMEDOUT when the write stalled
 * and there is no spare: the chunk stays in flight in the buffer (settle). With CP_IO_QUEUE
 * (closing while stalled) the chunk is queued and taken as landed; the buffer is the io's. */
static int write_chunk(cp_trace_writer *w, int flags)
{
    if (w->leaked)
        flags |= CP_IO_QUEUE; /* behind what was queued at closing, whoever flushes */
    /* A data chunk that would take the segment past its size goes to the next one; a
     * segment holds one data chunk at least, whatever its head took. */
    if (w->seg_max && !w->closing && w->seg_data && !(flags & CP_IO_QUEUE) &&
        w->flight == CP_FLIGHT_NONE &&
        w->file_bytes + CP_CHUNK_HEADER_BYTES + w->used + CP_WRITER_RESERVE > w->seg_max)
        cp_tw_next_segment(w);
    cp_chunk_header ch = {
        .magic = CP_CHUNK_MAGIC,
        .payload_bytes = (uint32_t)w->used,
        .chunk_index = w->chunk_index++,
        .lost_records = w->lost,
        .payload_hash = cp_trace_hash(w->payload, w->used),
        .record_count = w->count,
    };
    ch.header_hash = cp_chunk_header_hash(&ch);
    memcpy(w->buf, &ch, sizeof ch);

    /* The LOST counts this chunk carries are on disk once it is: owed again if it fails. */
    uint64_t placed[CP_LOST_CAUSES] = {0};
    for (unsigned c = 1; c < CP_LOST_CAUSES; c++)
        if (w->lost_rec_at[c] != SIZE_MAX) {
            placed[c] = w->pending[c];
            w->pending[c] = 0;
        }
    size_t len = CP_CHUNK_HEADER_BYTES + w->used;
    uint64_t callers = w->count - w->own;
    int wrote = 0;
    int rc = cp_tw_own_fd(w) == 0 ? cp_tw_write_all_at(w->io, w->fd, w->buf, len, w->file_bytes,
                                            w->closing ? 0 : CP_WRITER_RESERVE, flags, &wrote)
                            : -1;
    if (rc == CP_IO_STALLED && (flags & CP_IO_QUEUE)) {
        /* queued behind the call in flight for good (closing): taken as landed */
        w->file_bytes += len;
        w->written += callers;
        w->seg_written[w->segment % CP_TRACE_SEGMENTS] += callers;
        return 0;
    }
    if (rc == CP_IO_STALLED) {
        w->flight = CP_FLIGHT_CHUNK;
        w->flight_len = len;
        w->flight_callers = callers;
        memcpy(w->flight_placed, placed, sizeof placed);
        if (w->spare) {
            w->flight_buf = w->buf;
            w->buf = w->spare;
            w->spare = NULL;
            w->payload = w->buf + CP_CHUNK_HEADER_BYTES;
            reset_chunk(w);
            return 0;
        }
        w->used = w->cap;
        errno = ETIMEDOUT;
        return -1;
    }
    rc = chunk_done(w, rc, wrote, len, callers, placed);
    reset_chunk(w);
    return rc;
}

static int append_slow(cp_trace_writer *w, const void *record, size_t size)
{
    if (size < sizeof(cp_record_header) || size % 8 != 0 || size > w->cap) {
        count_drop(w, CP_LOST_TOO_BIG, 1);
        place_lost_records(w);
        return -1;
    }
    int rc = 0;
    (void)settle(w, 0);
    /* Twice at most: the first write may fail and leave LOST records in the fresh buffer;
     * a second one empties it. Never while a call is in flight, nor once closing while
     * stalled (one closing chunk, queued at close). */
    for (int tries = 0; w->cap - w->used < size && tries < 2 && w->flight == CP_FLIGHT_NONE &&
                        !w->leaked;
         tries++)
        if (write_chunk(w, 0) != 0)
            rc = -1;
    if (w->cap - w->used < size && (w->flight != CP_FLIGHT_NONE || w->leaked)) {
        count_drop(w, CP_LOST_WRITE_STALLED, 1);
        place_lost_records(w);
        return -1;
    }
    if (w->cap - w->used < size) {
        count_drop(w, CP_LOST_WRITE_ERROR, 1);
        place_lost_records(w);
        return -1;
    }
    memcpy(w->payload + w->used, record, size);
    w->used += size;
    w->count++;
    return rc;
}

int cp_trace_writer_append(cp_trace_writer *w, const void *record)
{
    uint16_t size;
    memcpy(&size, (const unsigned char *)record + offsetof(cp_record_header, size), sizeof size);
    /* The hot path: one compare for "well-formed and fits", then a copy. The 64-byte
     * CALL gets a fixed-size copy the compiler turns into a few vector moves. */
    if (CP_LIKELY(size <= w->cap - w->used && size >= sizeof(cp_record_header) &&
                  (size & 7) == 0)) {
        if (size == sizeof(cp_rec_call))
            memcpy(w->payload + w->used, record, sizeof(cp_rec_call));
        else
            memcpy(w->payload + w->used, record, size);
        w->used += size;
        w->count++;
        return 0;
    }
    return append_slow(w, record, size);
}

int cp_trace_writer_append_kept(cp_trace_writer *w, const void *record)
{
    cp_record_header h;
    memcpy(&h, record, sizeof h);
    /* COMM, SITE and KNAME carry their index in the word after the header; without memory,
     * later segments lack the record (their calls name an unknown index), never this one */
    if (w->seg_max && h.size >= sizeof h + sizeof(uint32_t) && h.size % 8 == 0 &&
        h.size <= w->cap)
        (void)cp_kept_put(&w->kept, record);
    return cp_trace_writer_append(w, record);
}

int cp_trace_writer_flush(cp_trace_writer *w)
{
    /* A chunk of nothing but LOST records is written too: a job that loses everything to a
     * full ring must still show it on disk. */
    if (settle(w, 1) != 0)
        return -1;
    if (w->count == 0)
        return 0;
    return write_chunk(w, 0);
}

void cp_trace_writer_count_lost(cp_trace_writer *w, enum cp_lost_cause cause, uint64_t records)
{
    if (!records)
        return;
    count_drop(w, cause >= 1 && cause < CP_LOST_CAUSES ? cause : CP_LOST_RING_FULL, records);
    place_lost_records(w);
}

uint64_t cp_trace_writer_records_written(const cp_trace_writer *w) { return w->written; }

uint64_t cp_trace_writer_records_lost(const cp_trace_writer *w) { return w->lost; }

uint64_t cp_trace_writer_lost_by_cause(const cp_trace_writer *w, enum cp_lost_cause cause)
{
    return cause >= 1 && cause < CP_LOST_CAUSES ? w->lost_by[cause] : 0;
}

void cp_trace_writer_set_io(cp_trace_writer *w, const cp_trace_io *io)
{
    w->io = io ? io : &cp_trace_io_direct;
    if (w->io == &cp_trace_io_direct)
        return;
    /* here, not at the stall: a fatal signal's flush may be the one that stalls. Without
     * them (no memory) a stall drops at once, and a close while stalled loses its END. */
    if (!w->spare)
        w->spare = malloc(CP_CHUNK_HEADER_BYTES + w->cap);
    if (!w->tail)
        w->tail = malloc(CP_CHUNK_HEADER_BYTES + CP_WRITER_RESERVE);
}

int cp_trace_writer_stalled(const cp_trace_writer *w) { return w->flight != CP_FLIGHT_NONE; }

int cp_trace_writer_fd(const cp_trace_writer *w) { return w->fd; }

int cp_trace_writer_closing(cp_trace_writer *w)
{
    int rc = 0;
    if (settle(w, 1) != 0)
        rc = -1;
    else if (w->count > w->own && write_chunk(w, 0) != 0)
        rc = -1;
    w->closing = 1;
    if (w->flight == CP_FLIGHT_NONE || !w->tail)
        return rc;
    /* Still stalled: what the buffer holds is queued behind the call in flight, and the
     * closing records go into the tail buffer, queued at close. Everything is taken as
     * landed, at the offsets it takes if the call in flight lands: if that fails after all,
     * the closing chunk's count misses its records (a gap in chunk_index shows it). */
    w->leaked = 1;
    if (w->flight == CP_FLIGHT_CHUNK) {
        w->file_bytes += w->flight_len;
        w->written += w->flight_callers;
    }
    int in_buf = buffer_in_flight(w);
    w->flight = CP_FLIGHT_NONE;
    if (!in_buf && w->count > w->own) {
        w->queued = w->buf;
        (void)write_chunk(w, CP_IO_QUEUE);
    }
    if (in_buf)
        w->flight_buf = w->buf;
    else if (!w->queued)
        w->spare = w->buf; /* held nothing worth a chunk: kept with the writer */
    w->buf = w->tail;
    w->payload = w->tail + CP_CHUNK_HEADER_BYTES;
    w->cap = CP_WRITER_RESERVE - CP_CHUNK_HEADER_BYTES;
    reset_chunk(w);
    return rc;
}

int cp_trace_writer_close(cp_trace_writer *w)
{
    if (!w)
        return 0;
    int rc = 0;
    if (!w->leaked && settle(w, 1) == 0 && w->count > 0 && write_chunk(w, 0) != 0)
        rc = -1;
    if (!w->leaked && w->flight != CP_FLIGHT_NONE)
        (void)cp_trace_writer_closing(w); /* closed stalled without closing: queued the same */
    if (w->leaked) {
        /* stalled at close: the closing chunk and the close are queued behind the call in
         * flight, and the buffers stay the io's (never freed) */
        if (w->count > 0)
            (void)write_chunk(w, CP_IO_QUEUE);
        (void)w->io->close(w->io->ctx, w->fd);
        w->next_handed = g_handed;
        g_handed = w;
        errno = ETIMEDOUT;
        return -1;
    }
    if (w->flight != CP_FLIGHT_NONE) { /* no tail: what it held is lost with it */
        (void)w->io->close(w->io->ctx, w->fd); /* queued behind it; w->buf stays the io's */
        w->next_handed = g_handed;
        g_handed = w;
        errno = ETIMEDOUT;
        return -1;
    }
    if (cp_tw_own_fd(w) != 0 || w->io->close(w->io->ctx, w->fd) != 0)
        rc = -1;
    free(w->path);
    free(w->alt_path);
    free(w->base);
    free(w->head);
    cp_kept_free(&w->kept);
    free(w->buf);
    free(w->spare);
    free(w->tail);
    free(w);
    return rc;
}
