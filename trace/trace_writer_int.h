/* trace_writer_int: the trace writer's state, shared by its two files and no one else.
 *
 * trace_writer.c appends, writes chunks (through the io, trace_io.h) and closes;
 * trace_segment.c rotates a capped trace into segments (COLLPROF_MAX_MB). Everything else
 * sees the writer only through trace_writer.h.
 */
#ifndef COLLPROF_TRACE_WRITER_INT_H
#define COLLPROF_TRACE_WRITER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "trace/trace_format.h"
#include "trace/trace_io.h"
#include "trace/trace_kept.h"
#include "trace/trace_writer.h"

/* Small enough for the tests' many-chunk traces, large enough for the LOST records of all
 * causes plus the largest fixed-size record. */
#define CP_CHUNK_MIN_PAYLOAD 256u
#define CP_LOST_CAUSES (CP_LOST_CAUSE_LAST + 1) /* enum cp_lost_cause values start at 1 */
/* Room for the closing chunk: its header, a LOST record per cause, CLOCK and END. */
#define CP_WRITER_RESERVE 1024u

struct cp_trace_writer {
    /* Hot fields first: append touches only these. */
    unsigned char *payload; /* == buf + CP_CHUNK_HEADER_BYTES */
    size_t used;            /* payload bytes in the current chunk */
    size_t cap;             /* chunk payload capacity */
    uint32_t count;         /* records in the current chunk */
    uint32_t own;           /* of them, LOST records the writer put there itself */
    int closing;            /* the closing chunk: may use the reserve */

    int fd;                /* -1 once detached: the file is no longer reachable as ours */
    char *path;            /* to open the file again when the job took the fd */
    dev_t dev;             /* the file's identity, checked before every use of fd */
    ino_t ino;
    unsigned char *buf;    /* chunk header + payload, written in one call */
    uint64_t file_bytes;   /* end of the last whole chunk in the file */
    uint64_t chunk_index;
    uint64_t written;      /* records in chunks that reached the file */
    uint64_t lost;         /* records dropped, every cause */
    /* Per cause: drops not yet in a LOST record on disk, and where the LOST record that
     * will carry them sits in the current chunk (SIZE_MAX: none there yet). */
    uint64_t pending[CP_LOST_CAUSES];
    uint64_t pending_at_ns[CP_LOST_CAUSES];
    size_t lost_rec_at[CP_LOST_CAUSES];
    uint64_t lost_by[CP_LOST_CAUSES]; /* totals by cause */

    const cp_trace_io *io;
    /* A call in flight (CP_IO_STALLED): a chunk (its length, caller records, and the LOST
     * counts it carries) in flight_buf, or the cut of a failed one. Without a spare the
     * chunk stays in buf (flight_buf NULL) with used == cap, so that every append takes the
     * slow path, which drops. */
    enum { CP_FLIGHT_NONE, CP_FLIGHT_CHUNK, CP_FLIGHT_CUT } flight;
    size_t flight_len;
    uint64_t flight_callers;
    uint64_t flight_placed[CP_LOST_CAUSES];
    unsigned char *flight_buf;
    unsigned char *spare; /* the second chunk buffer (an io that can stall), NULL in flight */
    unsigned char *tail;  /* room for the closing chunk of a writer closed while stalled */
    unsigned char *queued; /* a data chunk queued at close behind the call in flight */
    int leaked; /* buffers handed to the io for good (closing while stalled) */
    cp_trace_writer *next_handed; /* on g_handed: the io may read them after the thaw */

    /* Rotation (cp_trace_writer_rotate): off while seg_max is 0. */
    uint64_t seg_max;       /* a segment's bytes past which the next data chunk starts another */
    unsigned mode;          /* the files' mode, for the segments to come */
    cp_file_header header;  /* every segment starts with it */
    uint32_t segment;       /* the current one */
    int seg_data;           /* the current segment holds a data chunk (not just its head) */
    uint64_t seg_written[CP_TRACE_SEGMENTS]; /* caller records in each live segment */
    uint64_t records_before; /* caller records in the segments before the current one */
    uint64_t rotated;       /* caller records in segments deleted */
    size_t path_cap;        /* path and alt_path: room for any segment's name */
    char *alt_path;         /* the next segment's name is made here, then swapped with path */
    char *base;             /* segment 0's name, which names the others */
    unsigned char *head;    /* a segment's head chunk is built here (header + cap) */
    cp_kept_set kept;       /* the records a segment's head repeats (append_kept) */
    int (*seg_io)(void *ctx, int fd); /* cp_trace_writer_on_segment */
    void *seg_io_ctx;
};

/* trace_file.c: the writer's file calls, each in one place (trace_writer.c's header says why
 * each is as it is). */
int cp_tw_own_fd(cp_trace_writer *w);
int cp_tw_write_all_at(const cp_trace_io *io, int fd, const void *data, size_t len,
                       uint64_t off, size_t keep, int flags, int *wrote);
int cp_tw_create_file(const char *path, unsigned mode, struct stat *st);
int cp_tw_close_file(int fd);
int cp_tw_remove_file(const char *path);

/* trace_segment.c: ends the current segment and starts the next (rotation on, no write in
 * flight). */
void cp_tw_next_segment(cp_trace_writer *w);

#endif
