#include "emu/common/emu_log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define SEEN_SLOTS 64
static uint64_t g_seen[SEEN_SLOTS]; /* hashes of the lines printed; 0 marks a free slot */

static __thread int t_dedupe;

void cpemu_warn_dedupe(int on) { t_dedupe = on; }

/* 1 when the line hashed h was printed before (and records it otherwise). Exported on purpose:
 * every emulated library carries a copy of this file, and all of them ask the first copy the
 * dynamic linker finds, so the process has one table. A function, not a shared variable: a
 * variable defined in several libraries is an ODR violation to AddressSanitizer. */
__attribute__((visibility("default"))) int cpemu_warn_seen_before(uint64_t h);
int cpemu_warn_seen_before(uint64_t h)
{
    for (int i = 0; i < SEEN_SLOTS; i++) {
        uint64_t cur = __atomic_load_n(&g_seen[i], __ATOMIC_ACQUIRE);
        if (cur == h)
            return 1;
        if (cur == 0) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&g_seen[i], &expected, h, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return 0;
            if (expected == h)
                return 1;
        }
    }
    return 0; /* table full: print rather than lose a warning */
}

typedef int (*seen_fn)(uint64_t);
static seen_fn g_seen_fn;
static pthread_once_t g_seen_once = PTHREAD_ONCE_INIT;

static void resolve_seen(void)
{
    /* RTLD_DEFAULT misses a library dlopen'ed RTLD_LOCAL: then this copy keeps its own. */
    g_seen_fn = (seen_fn)dlsym(RTLD_DEFAULT, "cpemu_warn_seen_before");
    if (!g_seen_fn)
        g_seen_fn = cpemu_warn_seen_before;
}

static int seen_before(const char *line, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)line[i];
        h *= 0x100000001b3ULL;
    }
    pthread_once(&g_seen_once, resolve_seen);
    return g_seen_fn(h | 1);
}

void cpemu_warn(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "collprof-emu: WARN ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    while (len > 0 && line[len - 1] == '\n')
        len--;
    if (t_dedupe && seen_before(line, len))
        return;
    line[len++] = '\n';
    ssize_t rc = write(STDERR_FILENO, line, len);
    (void)rc;
}
