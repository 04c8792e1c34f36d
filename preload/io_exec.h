/* io_exec: the shim's I/O executor, a process of its own that makes the trace file's
 * blocking calls (trace/trace_io.h) so that no thread of the job ever sleeps on the trace's
 * file system.
 *
 * Why a process and not a thread: a write to a frozen or hung file system sleeps in
 * uninterruptible (D) state until the file system answers, and a process any thread of which
 * is in D state is not reaped by its parent until that thread returns: a writer *thread*
 * stuck in pwrite holds the job's exit until the thaw, pthread_join or not. The executor is
 * cloned (CLONE_VM, exit signal 0: the job's wait() never sees it) with a copy of the fd table
 * that it empties but for the trace file and its wake socket; it shares memory, so requests are
 * plain slots and the job side waits for an answer on a futex, at most CP_IO_BOUND_MS. The
 * executor runs on the TLS of the thread that cloned it, which may be gone: its code uses no
 * libc, only raw system calls, and is built without sanitizers or stack protector.
 *
 * It exits once the job side lets go (cp_io_exec_release, or the job's exit or exec closing
 * the wake socket's job end: a SIGKILLed job included) and its queue is done. While a call hangs
 * it holds the job's memory (the address space it shares) and the trace file until the file
 * system answers; then it finishes what was queued (the closing chunk with END) and exits.
 */
#ifndef COLLPROF_IO_EXEC_H
#define COLLPROF_IO_EXEC_H

#include <stddef.h>
#include <sys/types.h>

#include "trace/trace_io.h"

/* How long the job side waits for a call before it counts as stalled: long enough for any
 * healthy local or network write of a chunk, short enough that a finalize, a destroy or the
 * exit that meets a hung file system is late by tens of ms, not by the hang. */
#define CP_IO_BOUND_MS 20

typedef struct cp_io_exec cp_io_exec;

/* Starts an executor for the file at fd (its copy of fd is the one it writes through,
 * whatever fd the calls name). NULL with a one-line reason in why when it cannot (clone
 * refused by a seccomp filter, no memory): the caller then makes the calls itself. The
 * caller blocks every signal around this call: the executor keeps the mask. */
cp_io_exec *cp_io_exec_start(int fd, unsigned bound_ms, char *why, size_t whylen);

/* The calls, answered within the bound. Valid until cp_io_exec_release. */
const cp_trace_io *cp_io_exec_io(cp_io_exec *x);

pid_t cp_io_exec_pid(const cp_io_exec *x);

/* The job side lets go: the executor finishes its queue and exits. Reaped and freed when it
 * is done within the bound; otherwise left to finish (what it uses stays allocated). */
void cp_io_exec_release(cp_io_exec *x);

/* In a fork child: the parent's executor is not this process's. Closes the child's copy of
 * the wake socket (else the executor would wait for the child too); frees nothing. */
void cp_io_exec_forget(cp_io_exec *x);

#endif
