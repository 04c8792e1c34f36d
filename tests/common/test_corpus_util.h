/* tests/common/test_corpus_util.h: a fuzz corpus (tests/fuzzdata/NAME) replayed through its
 * fuzz target's own function, so that every normal and sanitizer test run re-checks every
 * input the fuzzer kept or crashed on; each replay test then checks its seeds its own way.
 * Include after cmocka.h. */
#ifndef COLLPROF_TESTS_CORPUS_UTIL_H
#define COLLPROF_TESTS_CORPUS_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Each file of the corpus (dotfiles skipped), read whole, goes through target, which must
 * return 0, and then to fn when it is not NULL (its name, path and bytes); returns how many
 * files there were. The corpus is found under $COLLPROF_SOURCE_DIR. */
static inline int tc_replay_corpus(const char *corpus, int (*target)(const uint8_t *, size_t),
                                   void (*fn)(const char *name, const char *path,
                                              const unsigned char *data, size_t len, void *ctx),
                                   void *ctx)
{
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzzdata/%s", src, corpus);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char *data = NULL;
        size_t len = 0, cap = 0, n;
        do {
            if (len == cap) {
                cap = cap ? 2 * cap : 65536;
                data = realloc(data, cap);
                assert_non_null(data);
            }
            n = fread(data + len, 1, cap - len, f);
            len += n;
        } while (n > 0);
        assert_false(ferror(f));
        fclose(f);
        print_message("replay %s (%zu bytes)\n", e->d_name, len);
        assert_int_equal(target(data, len), 0);
        if (fn)
            fn(e->d_name, path, data, len, ctx);
        free(data);
        files++;
    }
    closedir(d);
    return files;
}

#endif
