/* locate: what the cli runs or preloads, found beside its own binary.
 *
 * The same relative layout holds in the build tree (build/bin, build/lib, build/emu) and
 * in an installed prefix (prefix/bin, prefix/lib, prefix/lib/collprof/emu), so a collprof
 * binary finds its own shim and emulation, never one of another version on the path. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* The first of rel (relative to the binary's folder) that exists, resolved; -1 none. */
static int find_beside(const char *const *rel, size_t nrel, int mode, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    for (size_t i = 0; i < nrel; i++) {
        char path[PATH_MAX + 64], real[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", self, rel[i]) >= sizeof path)
            continue;
        if (access(path, mode) == 0 && realpath(path, real) && strlen(real) < cap) {
            memcpy(out, real, strlen(real) + 1);
            return 0;
        }
    }
    return -1;
}

int cli_find_shim(char *out, size_t cap)
{
    static const char *const rel[] = {"../lib/libcollprof.so", "../lib64/libcollprof.so",
                                      "../lib/collprof/libcollprof.so"};
    if (find_beside(rel, sizeof rel / sizeof rel[0], R_OK, out, cap) == 0)
        return 0;
#ifdef COLLPROF_INSTALL_LIBDIR
    snprintf(out, cap, "%s/libcollprof.so", COLLPROF_INSTALL_LIBDIR);
    if (access(out, R_OK) == 0)
        return 0;
#endif
    return -1;
}

int cli_find_sim(char *out, size_t cap)
{
    static const char *const rel[] = {"collprof-sim"};
    return find_beside(rel, 1, X_OK, out, cap);
}

int cli_find_emu_dir(char *out, size_t cap)
{
    static const char *const rel[] = {"../emu/libnccl.so.2", "../lib/collprof/emu/libnccl.so.2",
                                      "../lib64/collprof/emu/libnccl.so.2"};
    if (find_beside(rel, sizeof rel / sizeof rel[0], R_OK, out, cap))
        return -1;
    *strrchr(out, '/') = '\0';
    return 0;
}
