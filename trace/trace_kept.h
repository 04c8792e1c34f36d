/* trace_kept: the records a rotated trace's every segment repeats at its head (trace_writer's
 * private helper): the newest PROCESS, and one COMM, SITE or KNAME per index (the u32 after
 * the header), as bytes back to back. Memory only: no file, no lock. */
#ifndef COLLPROF_TRACE_KEPT_H
#define COLLPROF_TRACE_KEPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct cp_kept_set {
    unsigned char *bytes;
    size_t len, cap;
} cp_kept_set;

/* Keeps a copy of record (size from its header, at least 12 and a multiple of 8), replacing
 * the kept one of its type and index. 0, or -1 (nothing kept, the old one gone) without
 * memory. */
int cp_kept_put(cp_kept_set *k, const void *record);
/* Drops the kept record of this type and index (PROCESS: the one there is), if any. */
void cp_kept_forget(cp_kept_set *k, unsigned type, uint32_t index);
/* The kept record at *off, advancing *off past it; NULL past the last. */
const void *cp_kept_next(const cp_kept_set *k, size_t *off);
void cp_kept_free(cp_kept_set *k);

#endif
