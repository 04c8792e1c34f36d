/* analyzer/demangle.c: see demangle.h. */
#include "analyzer/demangle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *n, int *status);

static cxa_demangle_fn g_demangle;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void find_demangler(void)
{
    /* already in the process (a C++ program linked us), else the system's runtime; the
     * handle stays open: the function is used until exit */
    g_demangle = (cxa_demangle_fn)(void (*)(void))dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (g_demangle)
        return;
    void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (h)
        g_demangle = (cxa_demangle_fn)(void (*)(void))dlsym(h, "__cxa_demangle");
}

int cpa_demangle_available(void)
{
    pthread_once(&g_once, find_demangler);
    return g_demangle != NULL;
}

/* "ns::Class::method(int, std::vector<...> const&) const" -> "ns::Class::method(...) const":
 * the name's own parentheses are the first '(' outside template brackets. */
static void shorten_params(char *s)
{
    if (strlen(s) <= CPA_DEMANGLE_MAX_NAME)
        return;
    int angle = 0;
    for (char *p = s; *p; p++) {
        if (*p == '<')
            angle++;
        else if (*p == '>' && angle > 0)
            angle--;
        else if (*p == '(' && angle == 0 && p != s) {
            /* find the matching ')' and keep what follows (const, &&) */
            int depth = 0;
            char *q = p;
            for (; *q; q++) {
                if (*q == '(')
                    depth++;
                else if (*q == ')' && --depth == 0)
                    break;
            }
            if (!*q)
                return;
            memmove(p + 5, q + 1, strlen(q + 1) + 1);
            memcpy(p, "(...)", 5);
            return;
        }
    }
}

size_t cpa_demangle_frame(const char *frame, size_t len, char *out, size_t outlen)
{
    if (!outlen)
        return 0;
    /* the symbol: up to the '+' of "+0x" or the " (" of the object, whichever comes first */
    size_t sym = 0;
    while (sym < len && frame[sym] != ' ' &&
           !(frame[sym] == '+' && sym + 2 < len && frame[sym + 1] == '0' && frame[sym + 2] == 'x'))
        sym++;
    char *name = NULL;
    if (sym > 2 && frame[0] == '_' && frame[1] == 'Z' && sym < 1024 && cpa_demangle_available()) {
        char mangled[1024]; /* longer: left as is (a forged one could nest deep) */
        memcpy(mangled, frame, sym);
        mangled[sym] = '\0';
        int status = -1;
        name = g_demangle(mangled, NULL, NULL, &status);
        if (status != 0) {
            free(name);
            name = NULL;
        }
    }
    int n;
    if (name) {
        shorten_params(name);
        n = snprintf(out, outlen, "%s%.*s", name, (int)(len - sym), frame + sym);
        free(name);
    } else {
        n = snprintf(out, outlen, "%.*s", (int)len, frame);
    }
    if (n < 0) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)n < outlen ? (size_t)n : outlen - 1;
}
