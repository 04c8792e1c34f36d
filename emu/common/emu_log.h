/* emu_log: the emulation's own diagnostics, `collprof-emu: WARN message` on stderr.
 *
 * A separate prefix from collprof's (`collprof:`) so a test, or a person, can tell the
 * emulated hardware's complaints from the profiler's. One write(2) per line, like common/log.c,
 * so lines of ranks sharing a terminal never interleave mid-line.
 */
#ifndef COLLPROF_EMU_LOG_H
#define COLLPROF_EMU_LOG_H

void cpemu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* While set (per thread), cpemu_warn prints a given line at most once per process, however
 * many of the emulated libraries (each with its own copy of emu_common) say it: the process
 * loads libcuda, libnccl, libnvidia-ml and the host preload, and each reads the same bad
 * COLLPROF_EMU_* value. */
void cpemu_warn_dedupe(int on);

#endif
