/* text: strings that came from files made safe to show.
 *
 * A hostname, a job id, a call site or a path in a trace or a stats block is whatever bytes
 * the file holds: a hostile or corrupt one may carry terminal escape sequences (ESC[2J
 * clears the screen; 0x9b, or U+009B in UTF-8, is the one-byte CSI), NULs or invalid UTF-8,
 * which would drive the terminal of whoever reads it (root, running `top`) or make a strict
 * JSON reader refuse a whole document. Every output (dump, report, export, top, view,
 * selftest, the one-line messages) passes such strings through cp_text_escape first.
 */
#ifndef COLLPROF_TEXT_H
#define COLLPROF_TEXT_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), 0 when it is not one.
 * Overlong forms and surrogates are refused: json-c would pass them through and strict
 * JSON readers (Python's) would then refuse the document. */
size_t cp_utf8_len(const unsigned char *s, size_t n);

/* s (len bytes) with each byte of a control character (C0 and NUL, DEL, C1 whether a raw
 * byte or UTF-8 encoded) and each byte of invalid UTF-8 written as \xNN (two lowercase
 * hex digits); the rest, valid UTF-8, kept. A backslash is kept as it is, so escaping
 * twice changes nothing. Into dst (size bytes, size >= 1), NUL-terminated and cut at a
 * whole character or escape. Returns the length of the whole escaped text, as snprintf
 * does: a result >= size means dst holds only its head. */
size_t cp_text_escape(char *dst, size_t size, const char *s, size_t len);

/* The whole escaped text in a new string (free it); NULL out of memory. */
char *cp_text_escape_dup(const char *s, size_t len);

#endif
