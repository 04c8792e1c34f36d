/* trace_io: the seam through which the trace writer's blocking file calls pass.
 *
 * Offers: cp_trace_io, the three calls that may sleep on a file system (a chunk's write, the
 * cut that undoes a failed one, the close), and cp_trace_io_direct, which makes each one a
 * plain system call (the CLI, the tests, and the shim when it cannot start its executor).
 * The shim's executor (preload/io_exec.h) runs them in a process of their own and answers
 * within a bound: a call it has not finished by then comes back CP_IO_STALLED and stays in
 * flight, and the writer counts what it cannot buffer meanwhile as lost (write_stalled).
 */
#ifndef COLLPROF_TRACE_IO_H
#define COLLPROF_TRACE_IO_H

#include <stddef.h>
#include <stdint.h>

/* The call did not finish within the io's bound; it runs on, and its memory stays its own
 * until `wait` reports it done. */
#define CP_IO_STALLED (-2)

/* For write_at: queue the call and return CP_IO_STALLED at once (the closing chunk of a
 * writer whose file system hangs: its buffer is never freed). */
#define CP_IO_QUEUE 1

typedef struct cp_trace_io {
    /* When keep: fallocate(KEEP_SIZE) [off, off+len+keep); then all of data at off (pwrite,
     * going on after short writes). 0; -1 with errno; CP_IO_STALLED. *wrote: whether any
     * byte reached the file (valid when 0 or -1). */
    int (*write_at)(void *ctx, int fd, const void *data, size_t len, uint64_t off, size_t keep,
                    int flags, int *wrote);
    /* The call in flight (the last that returned CP_IO_STALLED): CP_IO_STALLED while it runs,
     * else its result as it would have returned it. block: wait up to the io's bound (else
     * only look). */
    int (*wait)(void *ctx, int block, int *wrote);
    /* ftruncate(fd, len), then fallocate(KEEP_SIZE) keep bytes past it when keep (its
     * failure ignored). 0; -1 with errno; CP_IO_STALLED. */
    int (*cut)(void *ctx, int fd, uint64_t len, size_t keep);
    /* Closes fd (after any call still queued). 0 or -1; never waits past the bound. */
    int (*close)(void *ctx, int fd);
    void *ctx;
} cp_trace_io;

extern const cp_trace_io cp_trace_io_direct;

#endif
