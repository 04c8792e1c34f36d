/* trace_reader: reads trace files, treating each one as hostile.
 *
 * Offers: open a file (mmap) or a memory buffer, its header, and one walk over its records
 * that calls back per record type (perf's `struct perf_tool`): dump, the analyzer and the
 * exporters plug into the same engine. A truncated, corrupt, wrong-version, oversized or
 * random file gives a clear error or the valid records, never a crash, a hang or an
 * allocation that grows with what the file claims. Every record handed to a callback has
 * been bounds- and size-checked: a callback may read its whole struct.
 */
#ifndef COLLPROF_TRACE_READER_H
#define COLLPROF_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace_format.h"

enum cp_read_status {
    CP_READ_OK = 0,
    CP_READ_IO = 1,       /* open, stat or mmap failed */
    CP_READ_FORMAT = 2,   /* not a collprof trace (magic, byte order, too short) */
    CP_READ_VERSION = 3,  /* a newer format than this reader knows */
    CP_READ_CORRUPT = 4,  /* the file header fails its hash or its own limits */
};

typedef struct cp_trace_reader cp_trace_reader;

/* Opens and validates the file header. On failure returns NULL, *status says why and err
 * holds one line naming the file in quotes (and, for CP_READ_VERSION, both versions). */
cp_trace_reader *cp_trace_reader_open(const char *path, int *status, char *err, size_t errlen);
/* The same over a caller's buffer (copied), for tests and the fuzz target. */
cp_trace_reader *cp_trace_reader_open_mem(const void *data, size_t len, const char *name,
                                          int *status, char *err, size_t errlen);
const cp_file_header *cp_trace_reader_header(const cp_trace_reader *r);
const char *cp_trace_reader_path(const cp_trace_reader *r);
void cp_trace_reader_close(cp_trace_reader *r);

/* Callbacks return 0 to go on, non-zero to stop the walk (CP_WALK_STOPPED). NULL ones are
 * skipped. on_record, when set, sees every valid record first, known type or not. */
typedef struct cp_trace_visitor {
    void *ctx;
    int (*on_record)(void *ctx, const cp_record_header *rec, uint64_t file_offset);
    int (*on_process)(void *ctx, const cp_rec_process *rec);
    int (*on_comm)(void *ctx, const cp_rec_comm *rec);
    int (*on_site)(void *ctx, const cp_rec_site *rec);
    int (*on_call)(void *ctx, const cp_rec_call *rec);
    int (*on_done)(void *ctx, const cp_rec_done *rec);
    int (*on_clock)(void *ctx, const cp_rec_clock *rec);
    int (*on_lost)(void *ctx, const cp_rec_lost *rec);
    int (*on_hang)(void *ctx, const cp_rec_hang *rec);
    int (*on_end)(void *ctx, const cp_rec_end *rec);
    int (*on_nccl_op)(void *ctx, const cp_rec_nccl_op *rec);
    /* A KNAME's name is NUL-terminated only if the writer was right: use strnlen. */
    int (*on_kname)(void *ctx, const cp_rec_kname *rec);
    int (*on_kernels)(void *ctx, const cp_rec_kernels *rec);
    int (*on_untimed)(void *ctx, const cp_rec_untimed *rec);
    int (*on_segment)(void *ctx, const cp_rec_segment *rec);
    int (*on_unknown)(void *ctx, const cp_record_header *rec);
} cp_trace_visitor;

enum cp_walk_stop {
    CP_WALK_END = 0,       /* every byte read, all chunks whole */
    CP_WALK_TRUNCATED = 1, /* the file ends inside a chunk (a cut): all before it was read */
    CP_WALK_STOPPED = 2,   /* a callback asked to stop */
};

typedef struct cp_walk_result {
    int stop;                  /* enum cp_walk_stop */
    uint64_t chunks;           /* whole, valid chunks read */
    uint64_t records;          /* valid records handed out, unknown types included */
    uint64_t unknown_records;  /* of them, of a type this reader does not know (on_unknown) */
    uint64_t corrupt_chunks;   /* failed their checks; the walk resynced past them */
    uint64_t missing_chunks;   /* gaps in chunk_index (corrupt, or never written) */
    uint64_t lost_records;     /* the writer's loss total in the last valid chunk */
    uint64_t valid_bytes;      /* offset just past the last valid chunk */
    uint64_t first_bad_offset; /* where the first corruption or the cut was found, 0 none */
    char message[192];         /* empty when clean, else one line: what and where */
} cp_walk_result;

/* Walks every chunk in file order. A chunk that fails its checks is counted, and the walk
 * resumes at the next valid chunk header. Returns 0 when the walk ran (whatever it found;
 * see res), -1 only for invalid arguments. */
int cp_trace_walk(cp_trace_reader *r, const cp_trace_visitor *v, cp_walk_result *res);

/* Strings of a SITE or PROCESS record: call with *pos = 0 first; each call yields the next
 * string (not NUL-terminated) and returns 1, or returns 0 when there is none left. */
int cp_rec_next_string(const cp_record_header *rec, size_t *pos, const char **str, size_t *len);

/* The trace files of a directory (names ending in CP_TRACE_FILE_SUFFIX), sorted by name.
 * Returns the count and a malloc'd array of malloc'd paths, or -1 with err set. */
int cp_trace_dir_list(const char *dir, char ***paths, char *err, size_t errlen);
void cp_trace_dir_free(char **paths, int count);

#endif
