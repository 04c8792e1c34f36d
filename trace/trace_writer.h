/* trace_writer: appends records to one rank's trace file in whole, hashed chunks.
 *
 * Offers: open (writes the file header), append a record, flush, close, and the loss
 * counter that rides in every chunk header. One writer is used by one thread at a time
 * (the shim's writer thread); it never blocks on anything but its own file calls, and not on
 * those either when they go through an io that answers within a bound (trace_io.h).
 * A failed write drops that chunk's records, counts them as lost (CP_LOST_WRITE_ERROR)
 * and keeps going, so a disk that fills and empties again loses only what it had to.
 * The writer itself reports every loss as a LOST record (by cause) at the head of the next
 * chunk it writes: callers report drops through cp_trace_writer_count_lost only, and never
 * write LOST records of their own.
 */
#ifndef COLLPROF_TRACE_WRITER_H
#define COLLPROF_TRACE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace_format.h"

typedef struct cp_trace_writer cp_trace_writer;

/* Fills magic, version, byte order and header size; zeroes the rest, sets rank,
 * local_rank and world_size to -1. The caller then sets the identity fields. */
void cp_file_header_init(cp_file_header *h);

/* The default mode of a trace file: it holds host names, job ids and call stacks. */
#define CP_TRACE_FILE_MODE 0600u

/* Creates `path` (O_CREAT|O_EXCL|O_NOFOLLOW, mode CP_TRACE_FILE_MODE) and writes `header` (its
 * header_hash is computed here; the format fields and reserved bytes are set by the writer,
 * whatever the caller left there). chunk_payload_bytes 0 means CP_CHUNK_DEFAULT_PAYLOAD;
 * otherwise a multiple of 8 from 256 to CP_CHUNK_MAX_PAYLOAD.
 * Returns NULL with a one-line reason in err (the path in quotes) on failure. */
cp_trace_writer *cp_trace_writer_open(const char *path, const cp_file_header *header,
                                      size_t chunk_payload_bytes, char *err, size_t errlen);
/* The same with the file's mode (its permission bits exactly, whatever the umask). The fd is
 * kept high and checked before each use: trace_writer.c says why. */
cp_trace_writer *cp_trace_writer_open_mode(const char *path, const cp_file_header *header,
                                           size_t chunk_payload_bytes, unsigned mode, char *err,
                                           size_t errlen);

/* Copies one record (its size from rec->size) into the current chunk, writing the chunk
 * out first when the record does not fit. Returns 0, or -1 when this call dropped records:
 * this one (size not a multiple of 8, under 8, or larger than a chunk: CP_LOST_TOO_BIG), or
 * the full chunk it had to write out (CP_LOST_WRITE_ERROR); drops are counted. */
int cp_trace_writer_append(cp_trace_writer *w, const void *record);

/* Writes the current chunk if it holds any record (LOST records included). 0 or -1
 * (records counted as lost); -1 with errno ETIMEDOUT while a call of the io is stalled (the
 * records stay buffered). */
int cp_trace_writer_flush(cp_trace_writer *w);

/* Records dropped before they reached the writer (a full ring, a failed allocation, a
 * process ended by a signal), by cause: added to the running total carried in each
 * following chunk header. A cause out of range counts as CP_LOST_RING_FULL. */
void cp_trace_writer_count_lost(cp_trace_writer *w, enum cp_lost_cause cause, uint64_t records);

/* Running totals: the caller's records in chunks that were written (the writer's own LOST
 * records are not counted), and records lost (every cause, count_lost's included). */
uint64_t cp_trace_writer_records_written(const cp_trace_writer *w);
uint64_t cp_trace_writer_records_lost(const cp_trace_writer *w);
/* Of them, those of one cause (enum cp_lost_cause); 0 for a cause out of range. */
uint64_t cp_trace_writer_lost_by_cause(const cp_trace_writer *w, enum cp_lost_cause cause);

/* The calls that may sleep on the file system go through io (trace_io.h; NULL: the direct
 * ones, the default). Set before the first append; io must outlive the writer. */
struct cp_trace_io;
void cp_trace_writer_set_io(cp_trace_writer *w, const struct cp_trace_io *io);
/* 1 while a call of the io is in flight past its bound (the file system does not answer):
 * what cannot be buffered meanwhile is counted lost as CP_LOST_WRITE_STALLED. */
int cp_trace_writer_stalled(const cp_trace_writer *w);
/* The file's descriptor (-1 once detached), for an io that needs its own copy. */
int cp_trace_writer_fd(const cp_trace_writer *w);

/* The records that follow close the file (LOST, CLOCK, END): the data still buffered is
 * written first (0, or -1 with its records counted lost), then the closing chunk may use the
 * room kept for it (trace_writer.c), so that a full disk or RLIMIT_FSIZE still ends the file
 * with END and an exact loss count. Append them, then close. */
int cp_trace_writer_closing(cp_trace_writer *w);

/* Flushes, closes and frees. Returns 0, or -1 if the last flush or close failed. While a call
 * of the io is stalled it returns at once, -1 with errno ETIMEDOUT: what it holds (closing
 * chunk included) and the close are queued behind that call, and the writer is never freed
 * (the io reads its buffers whenever the file system answers). */
int cp_trace_writer_close(cp_trace_writer *w);

/* Rotation (COLLPROF_MAX_MB): the trace is written in up to CP_TRACE_SEGMENTS files of
 * max_bytes / CP_TRACE_SEGMENTS bytes each; a data chunk that would take a segment past that
 * starts the next one (named by cp_trace_segment_path), and the oldest is deleted, its
 * records counted lost (CP_LOST_ROTATED). Each segment starts with the file header, a
 * SEGMENT record and the records append_kept keeps, so it reads on its own. Called once,
 * right after open and before any append; -1 (nothing changed) when max_bytes leaves a
 * segment less than two chunks, or on a second call or no memory. The segment's files are
 * made, closed and deleted while appending (in the chunk write that crosses the size), with
 * no allocation: safe where appending is. */
int cp_trace_writer_rotate(cp_trace_writer *w, uint64_t max_bytes);
/* append, and with rotation on, keeps a copy that every later segment's head repeats: the
 * newest PROCESS, and one COMM, SITE or KNAME per index (the word after the header). Not
 * from a signal handler (it may allocate); a copy that cannot be kept is left out of later
 * heads, never out of this segment. */
int cp_trace_writer_append_kept(cp_trace_writer *w, const void *record);
/* Later heads leave out the kept record of this type and index (a destroyed communicator). */
void cp_trace_writer_forget(cp_trace_writer *w, unsigned type, uint32_t index);
/* Records in segments deleted so far (part of records_lost). */
uint64_t cp_trace_writer_records_rotated(const cp_trace_writer *w);
/* With rotation and an io bound to one file (cp_trace_writer_set_io): seg_io is called with a
 * new segment's fd once its header is written and before anything else is; it sets the io
 * for that file (0), or refuses (-1: the new file is removed and writing goes on in the
 * current segment). */
void cp_trace_writer_on_segment(cp_trace_writer *w, int (*seg_io)(void *ctx, int fd), void *ctx);

/* Variable-size records (SITE, PROCESS): fixed part then u16-length strings, padded to 8.
 * Each builds into buf (capacity cap) and returns the record size, or 0 when it cannot fit
 * in cap or in a record's u16 size. Strings longer than CP_STRING_MAX are cut there. */
#define CP_STRING_MAX 1024
size_t cp_rec_site_build(void *buf, size_t cap, uint32_t site_index, uint64_t return_addr,
                         const char *const *frames, unsigned frame_count);
size_t cp_rec_process_build(void *buf, size_t cap, const cp_rec_process *fixed,
                            const char *hostname, const char *job_id, const char *launcher);

#endif
