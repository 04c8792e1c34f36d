/* Helpers shared by the ABI tests: fact tables, header scanning, an ELF symbol reader. */
#ifndef COLLPROF_TEST_ABI_UTIL_H
#define COLLPROF_TEST_ABI_UTIL_H

#include <stddef.h>

/* One checkable fact: the expression's text and its value under one set of headers. */
typedef struct cp_test_fact {
    const char *expr;
    long long value;
} cp_test_fact;

/* Compares two tables filled from the same fact list under different headers; prints every
 * difference and fails the current cmocka test if there is any. */
void cp_test_compare_facts(const char *what, const cp_test_fact *real, size_t nreal,
                           const cp_test_fact *ours, size_t nours);

/* Whether `name` occurs as a whole identifier inside some fact's expression text. */
int cp_test_facts_mention(const cp_test_fact *facts, size_t n, const char *name);

/* The whole file, NUL-terminated (malloc'd), or NULL. */
char *cp_test_read_file(const char *path);

/* Calls fn for every name a C header defines with `NAME = value` (an enumerator) or
 * `#define NAME`, whose spelling starts with one of the NULL-terminated prefixes.
 * Comments are skipped. */
void cp_test_header_defined_names(const char *text, const char *const *prefixes,
                                  void (*fn)(const char *name, void *ctx), void *ctx);

/* Every name our header at `path` defines with one of the prefixes (as above), each
 * printed with `shown` (our header's name) when no fact mentions it: how many were not
 * mentioned, or -1 when the file cannot be read; *seen how many names it defines. */
int cp_test_unchecked_names(const char *path, const char *shown, const char *const *prefixes,
                            const cp_test_fact *facts, size_t n, int *seen);

/* Calls fn for every function nccl.h declares: a line starting (after blanks) with one of
 * the NULL-terminated return-type spellings, then blanks, then `nccl...(`.
 * Returns how many were found. */
size_t cp_test_header_nccl_functions(const char *text, const char *const *ret_types,
                                     void (*fn)(const char *name, void *ctx), void *ctx);

/* Calls fn for every defined function symbol in an ELF64 shared object's .dynsym.
 * Returns the number of symbols seen, -1 when the file cannot be read as ELF64. Reads only
 * the headers and the two sections: a libnccl.so.2 is hundreds of MB. */
long cp_test_elf_dynamic_functions(const char *path, void (*fn)(const char *name, void *ctx),
                                   void *ctx);

#endif
