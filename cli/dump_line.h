/* dump_line: one output line of `collprof dump`, as text or as JSON, from the same calls.
 *
 * Each record type has one formatter (cmd_dump.c) that adds its fields here; this file
 * decides how they look. So the text and the --json output carry the same fields under
 * the same names and cannot drift apart:
 *
 *   text:  rank 3 CALL AllReduce comm=9f2c0e1d22aa4b01 seq=41 count=1024 ...
 *   json:  {"rank":3,"kind":"CALL","op":"AllReduce","comm":"9f2c0e1d22aa4b01","seq":41,...}
 *
 * Strings come from files that may be hostile: each byte of a control character or of
 * invalid UTF-8 becomes \xNN (common/text.h), so a line stays one line, nothing reaches the
 * terminal that would drive it, and the JSON stays valid UTF-8.
 */
#ifndef COLLPROF_CLI_DUMP_LINE_H
#define COLLPROF_CLI_DUMP_LINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_object;

struct dump_line {
    int json;
    FILE *out;
    struct json_object *obj;   /* JSON: the line being built */
    struct json_object *array; /* JSON: the array being built, between array_begin/end */
    int array_items;           /* text: items so far in the current array */
};

/* `rank` -1 when unknown. */
void dump_line_begin(struct dump_line *l, int rank, const char *kind);
/* Text: a bare word after the kind (the op's name); JSON: key: word. */
void dump_line_word(struct dump_line *l, const char *key, const char *word);
void dump_line_str(struct dump_line *l, const char *key, const char *s, size_t len);
void dump_line_u64(struct dump_line *l, const char *key, uint64_t v);
void dump_line_i64(struct dump_line *l, const char *key, int64_t v);
/* A 64-bit identity as exactly 16 lowercase hex digits (a comm id): a string in JSON,
 * because a JSON number loses the low bits past 2^53 in most readers. */
void dump_line_id(struct dump_line *l, const char *key, uint64_t v);
/* An address or handle, "0x7f...", a string in JSON for the same reason. */
void dump_line_addr(struct dump_line *l, const char *key, uint64_t v);
/* A value that should be there but is not known: `key=?`, JSON null. */
void dump_line_unknown(struct dump_line *l, const char *key);
/* A number with three decimals (microseconds). */
void dump_line_fixed3(struct dump_line *l, const char *key, double v);
/* A list of strings: text `key=a,b,"c d"` (`key=-` when empty), JSON an array. */
void dump_line_array_begin(struct dump_line *l, const char *key);
void dump_line_array_str(struct dump_line *l, const char *s, size_t len);
void dump_line_array_end(struct dump_line *l);
/* Writes the line. Returns 0, or -1 when stdout has failed (the caller stops). */
int dump_line_end(struct dump_line *l);

#endif
