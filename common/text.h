/* text: strings that came from trace files, made safe to show.
 *
 * A hostname, a call site or a path in a trace is whatever bytes the file holds: a hostile
 * or corrupt one may carry terminal escape sequences, NULs or invalid UTF-8, which would
 * garble a terminal or make a strict JSON reader refuse a whole document. Every output
 * (dump, report, the exporters) passes such strings through here first.
 */
#ifndef COLLPROF_TEXT_H
#define COLLPROF_TEXT_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), 0 when it is not one.
 * Overlong forms and surrogates are refused: json-c would pass them through and strict
 * JSON readers (Python's) would then refuse the document. */
size_t cp_utf8_len(const unsigned char *s, size_t n);

/* s (len bytes) into dst (len + 1 bytes) with control characters, NULs, DEL and invalid
 * UTF-8 as '?', NUL-terminated. The same length as s, so it never grows with what a file
 * claims. */
void cp_text_clean(char *dst, const char *s, size_t len);

/* The same into a new string (free it); NULL out of memory. */
char *cp_text_clean_dup(const char *s, size_t len);

#endif
