/* trace_hash: the one hash of the trace format (XXH3_64, seed 0).
 *
 * Internal to the trace writer, the reader and their tests. xxHash is used header-only;
 * it is compiled in exactly one place (trace_records.c) so its large inline body is not
 * duplicated in every object that hashes.
 */
#ifndef COLLPROF_TRACE_HASH_H
#define COLLPROF_TRACE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace_format.h"

uint64_t cp_trace_hash(const void *data, size_t len);

/* The chunk header's header_hash: the low 32 bits over the 36 bytes before it. */
static inline uint32_t cp_chunk_header_hash(const void *chunk_header)
{
    return (uint32_t)cp_trace_hash(chunk_header, CP_CHUNK_HEADER_BYTES - 4);
}

#endif
