/* driver: the CUDA driver, loaded at run time, and where the linked libnccl.so.2 came from.
 *
 * The driver collprof-sim uses must be the one NCCL uses: streams and contexts of one driver
 * mean nothing to another. Our RUNPATH names the emulation's directory (so the build tree runs
 * without LD_LIBRARY_PATH), and dlopen searches a caller's RUNPATH before the system's
 * ld.so.cache. So with a real libnccl.so.2 (LD_LIBRARY_PATH=/usr/local/cuda/lib64) a plain
 * dlopen("libcuda.so.1") would pick the emulated driver, and once loaded under that soname it
 * would be handed to NCCL's own dlopen too. Hence the order below, and the test for "the
 * emulation's directory": one whose libcuda.so.1 is the emulated driver (the emulated NCCL and
 * its per-host library are always built beside it). */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/sim/sim.h"

/* The emulated driver exports cpemu_stream_enqueue (emu/common/emu_stream.h), which no real
 * driver has; its name sits in the dynamic string table, near the start of the file. */
#define EMU_MARK "cpemu_stream_enqueue"
#define SCAN_BYTES (8u << 20)

static int file_has(const char *path, const char *mark)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t ml = strlen(mark), have = 0, scanned = 0;
    char buf[65536];
    int found = 0;
    while (!found && scanned < SCAN_BYTES) {
        size_t got = fread(buf + have, 1, sizeof buf - have, f);
        if (got == 0)
            break;
        have += got;
        scanned += got;
        found = memmem(buf, have, mark, ml) != NULL;
        /* keep the tail, in case the mark straddles two reads */
        size_t keep = have < ml ? have : ml - 1;
        memmove(buf, buf + have - keep, keep);
        have = keep;
    }
    fclose(f);
    return found;
}

int sim_dir_is_emulation(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/libcuda.so.1", dir) >= (int)sizeof path)
        return 0;
    return file_has(path, EMU_MARK);
}

static void dir_of(const char *file, char *out, size_t cap)
{
    snprintf(out, cap, "%s", file);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(out, cap, ".");
}

int sim_nccl_path(char *out, size_t cap)
{
    /* Ask the library itself, not the global scope: an LD_PRELOADed profiler exports
     * ncclGetVersion too, and dladdr on its copy would name the profiler. */
    void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return -1;
    void *fn = dlsym(h, "ncclGetVersion");
    Dl_info info;
    int ok = fn && dladdr(fn, &info) && info.dli_fname && *info.dli_fname;
    char real[PATH_MAX];
    if (ok)
        snprintf(out, cap, "%s", realpath(info.dli_fname, real) ? real : info.dli_fname);
    dlclose(h);
    return ok ? 0 : -1;
}

static void *open_path(const char *path, char *why, size_t cap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(why, cap, "%s", dlerror());
    return h;
}

/* The real driver: the main program's own search path (LD_LIBRARY_PATH, RUNPATH, the system
 * directories) walked here so that the emulation's directory can be skipped, then the
 * ld.so.cache through a plain dlopen when that cannot reach the emulation. */
static void *open_real_driver(const char *nccl_dir, char *why, size_t cap)
{
    void *self = dlopen(NULL, RTLD_LAZY);
    Dl_serinfo size;
    char skipped[PATH_MAX] = "";
    Dl_serinfo *si = NULL;
    if (self && dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0 &&
        (si = malloc(size.dls_size)) != NULL) {
        si->dls_size = size.dls_size;
        si->dls_cnt = size.dls_cnt;
        if (dlinfo(self, RTLD_DI_SERINFO, si))
            si->dls_cnt = 0;
    }
    for (unsigned i = 0; si && i < si->dls_cnt; i++) {
        const char *dir = si->dls_serpath[i].dls_name;
        char path[PATH_MAX];
        if (!*dir || snprintf(path, sizeof path, "%s/libcuda.so.1", dir) >= (int)sizeof path ||
            access(path, F_OK))
            continue;
        if (sim_dir_is_emulation(dir)) {
            snprintf(skipped, sizeof skipped, "%s", dir);
            continue;
        }
        free(si);
        return open_path(path, why, cap);
    }
    free(si);
    if (!*skipped)
        return open_path("libcuda.so.1", why, cap);
    sim_format(why, cap, "libcuda.so.1 was found only in '%s', the emulation's, which cannot "
               "drive the real libnccl.so.2 in '%s'; put the real driver's directory in "
               "LD_LIBRARY_PATH", skipped, nccl_dir);
    return NULL;
}

static void *open_driver(char *why, size_t cap)
{
    /* Already loaded (by the emulated NCCL, which links it, or by a profiler): NCCL's own. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h)
        return h;
    char nccl[PATH_MAX], dir[PATH_MAX];
    if (sim_nccl_path(nccl, sizeof nccl)) {
        snprintf(nccl, sizeof nccl, "libnccl.so.2");
        snprintf(dir, sizeof dir, "?");
    } else {
        dir_of(nccl, dir, sizeof dir);
    }
    if (sim_dir_is_emulation(dir)) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%.*s/libcuda.so.1", (int)(sizeof path - 16), dir);
        return open_path(path, why, cap);
    }
    return open_real_driver(dir, why, cap);
}

int sim_cuda_load(struct sim_cuda *cu, char *why, size_t cap)
{
    memset(cu, 0, sizeof *cu);
    char err[1024] = "";
    cu->lib = open_driver(err, sizeof err);
    if (!cu->lib) {
        snprintf(why, cap, "no CUDA driver: %s", err);
        return -1;
    }
    struct link_map *lm = NULL;
    if (dlinfo(cu->lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
        snprintf(cu->path, sizeof cu->path, "%s", lm->l_name);
#define SIM_CUDA_RESOLVE(ret, api, sym, params, args) \
    cu->api = (ret (*) params)dlsym(cu->lib, #sym);
    CP_CUDA_API(SIM_CUDA_RESOLVE)
#undef SIM_CUDA_RESOLVE
    /* Drivers before CUDA 12.8 export only the older name, with the same signature. */
#define SIM_CUDA_OLDER(api, older, older_version, version) \
    if (!cu->api)                                          \
        cu->api = (__typeof__(cu->api))dlsym(cu->lib, #older);
    CP_CUDA_API_OLDER(SIM_CUDA_OLDER)
#undef SIM_CUDA_OLDER
    /* What collprof-sim calls; the rest of the list may be absent on an old driver. */
    const struct { const char *name; int present; } need[] = {
#define N(api) { #api, cu->api != NULL }
        N(cuInit), N(cuGetErrorName), N(cuGetErrorString), N(cuDeviceGetCount), N(cuDeviceGet),
        N(cuDevicePrimaryCtxRetain), N(cuDevicePrimaryCtxRelease), N(cuCtxSetCurrent),
        N(cuStreamCreate), N(cuStreamDestroy), N(cuStreamSynchronize), N(cuStreamWaitEvent),
        N(cuEventCreate), N(cuEventRecord), N(cuEventQuery), N(cuEventSynchronize),
        N(cuEventElapsedTime), N(cuEventDestroy), N(cuMemAlloc), N(cuMemFree),
        N(cuMemcpyHtoD), N(cuMemcpyDtoH), N(cuMemsetD8),
#undef N
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        if (!need[i].present) {
            snprintf(why, cap, "the CUDA driver '%s' lacks %s", cu->path, need[i].name);
            return -1;
        }
    }
    return 0;
}

void sim_cuda_result(const struct sim_cuda *cu, CUresult r, char *out, size_t cap)
{
    const char *name = NULL, *text = NULL;
    if (cu->cuGetErrorName && cu->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (cu->cuGetErrorString && cu->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name || !text)
        cp_cu_result_fallback(r, &name, &text);
    if (name)
        snprintf(out, cap, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(out, cap, "CUresult %d (%s)", (int)r, text ? text : "no description");
}
