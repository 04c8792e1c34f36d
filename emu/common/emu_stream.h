/* emu_stream: what the emulated CUDA driver (libcuda.so.1) offers the emulated NCCL
 * (libnccl.so.2) beyond the driver API: a way to put work on a stream, and time.
 *
 * Streams are real asynchronous queues: one worker thread per stream runs its items in
 * order. Time is modelled, not only elapsed: each stream keeps a virtual clock `vtime`
 * (CLOCK_MONOTONIC ns) at which it becomes free. An item starts at
 *     start = max(stream vtime, the wall time the item was enqueued)
 * and its run function returns when it ends in model time; the worker then sleeps until that
 * moment if the CPU finished earlier (so the host sees the model's durations), and an event
 * recorded after the item is stamped with the stream's vtime (so GPU times are the model's
 * even when the CPU was slower than the modelled GPU). These symbols are exported by
 * libcuda.so.1 with the `cpemu_` prefix and are not part of any real driver.
 */
#ifndef COLLPROF_EMU_STREAM_H
#define COLLPROF_EMU_STREAM_H

#include <stdint.h>

#include "abi/cuda_abi.h"

/* Runs on the stream's worker thread. start_ns is the item's model start time. Returns the
 * model end time (>= start_ns). `abort_flag`, when set non-zero by another thread, asks a
 * waiting item to give up as soon as it can (ncclCommAbort). */
typedef uint64_t (*cpemu_work_fn)(void *arg, uint64_t start_ns);

/* Enqueues fn(arg) on stream s (NULL: the current context's default stream). free_fn(arg),
 * when given, is called on the worker after the item ran. CUDA_SUCCESS, or an error for an
 * invalid stream. Under capture (cuStreamBeginCapture) the item is not run: it is dropped and
 * free_fn called, as a captured NCCL kernel would wait for a graph launch. */
CUresult cpemu_stream_enqueue(CUstream s, cpemu_work_fn fn, void *arg, void (*free_fn)(void *));

/* The same for a kernel: `name` (static, or living as long as the process) is what CUPTI
 * reports for it. With the emulated libcupti's hooks installed, the launch is announced on
 * the calling thread and the kernel's model start and end once it ran (cpemu_activity). */
CUresult cpemu_stream_enqueue_kernel(CUstream s, const char *name, cpemu_work_fn fn, void *arg,
                                     void (*free_fn)(void *));

/* Kernel activity, for the emulated CUPTI (emu/cupti), which installs these once it is asked
 * for kernel records. launch runs on the launching thread inside the launch call, as CUPTI's
 * API-side work does, and returns the kernel's correlation id; done runs on the stream's
 * worker after the kernel ended, with its model times (CLOCK_MONOTONIC ns) and CUPTI's ids
 * of its device, context and stream. NULL uninstalls. */
typedef struct cpemu_activity_hooks {
    uint32_t (*launch)(const char *name);
    void (*done)(uint32_t correlation, const char *name, uint64_t start_ns, uint64_t end_ns,
                 uint32_t device, uint32_t context_id, uint32_t stream_id);
} cpemu_activity_hooks;
void cpemu_activity_set_hooks(const cpemu_activity_hooks *hooks);

/* COLLPROF_EMU_DELAY: the stream spends ns more right before the work about to be enqueued,
 * as a kernel running late would: the work starts no earlier than ns after this call. When
 * the last item enqueued on the stream is an event record (a profiler's start event), the
 * delay goes before that record: the record's stamp moves to the hold's end, so the late
 * start shows in the events around the collective. (With sampled timing, or a job's own
 * event, the trailing record may be an older one; it then moves too, and the delay still
 * counts from this call: an idle stream does not absorb it.) Model time and wall time both. */
CUresult cpemu_stream_delay(CUstream s, uint64_t ns);

/* COLLPROF_EMU_HANG: as cpemu_stream_delay, but the stream is held until *until becomes
 * non-zero (an abort), so a start event recorded just before stays incomplete: to a profiler
 * the rank's GPU never began the operation. */
CUresult cpemu_stream_block(CUstream s, const _Atomic uint32_t *until);

/* The device ordinal of a stream's context (NULL: the current context's device), or -1. */
int cpemu_stream_device(CUstream s);

/* The device whose context is current on this thread, or -1 when none. */
int cpemu_current_device(void);

#endif
