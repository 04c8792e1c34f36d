/* real: the NCCL each caller would have reached without the shim.
 *
 * Every object of the job that calls ncclX binds to our preloaded definition, whatever NCCL
 * it was linked against: the preload is in the global scope, which the dynamic linker
 * searches first for every object. Without us the same reference would have bound, in the
 * linker's own order, to:
 *   1. the global scope after us: the main program's dependencies, later preloads, objects
 *      dlopened with RTLD_GLOBAL. dlsym(RTLD_NEXT) searches exactly that, per name, so another
 *      interposer preloaded after us keeps its place.
 *   2. the calling object's local scope, when it was dlopened (or is a dependency of an object
 *      dlopened) with RTLD_LOCAL: itself and its DT_NEEDED tree. That is how PyTorch loads NCCL
 *      (libtorch_cuda.so, a dependency of an extension module Python opens RTLD_LOCAL, needs
 *      libnccl.so.2), and how two copies of NCCL live in one process, each found by the objects
 *      linked to it. dlsym on a handle of the caller (dlopen with RTLD_NOLOAD: nothing is
 *      loaded, one reference taken and given back) searches exactly that scope.
 *   3. neither holds an NCCL (code outside any object, or an object that is not linked to
 *      NCCL but calls a pointer it got from dlsym(RTLD_DEFAULT)): the NCCL already chosen for
 *      another caller, else any loaded object that defines pncclGetVersion itself. Without
 *      the shim such a call could only have reached a loaded NCCL, so we look for one.
 * The caller is the object holding the wrapper's return address. Its text segment is cached
 * (an append-only table, and the last one used in a thread-local), so a call costs a range
 * check and a load; resolution runs once per calling object, and once per name in each NCCL.
 * (An object unloaded and another mapped over its addresses keeps the first one's NCCL: the
 * hot path cannot see unloads, and frameworks do not unload the code that calls NCCL.)
 *
 * Each NCCL found is a cp_nccl_lib, kept open with its own RTLD_NOLOAD reference (it never
 * loads anything): our cached pointers must not outlive it, and NCCL's proxy threads already
 * keep a libnccl from being unloaded safely. Names are looked up as pncclX first, the strong
 * symbol that NCCL's own p-name calls and other profilers reach, so a call the job makes to
 * pncclX is never recorded twice; ncclX is the fallback for an NCCL without the p-names. Our
 * own definitions are never an answer.
 *
 * A name the caller's NCCL lacks (older than our list of entry points) returns
 * ncclInvalidUsage after one WARN: without the shim the call could not have been made (the
 * linker's "symbol lookup error", exit 127), and it is how NCCL fails a feature it does not
 * have, which a caller that checks results handles. The const char * getters return a fixed
 * string instead. A miss in the global scope is not cached: a libnccl dlopened later with
 * RTLD_GLOBAL is found then. docs/ARCHITECTURE.md ("Finding the real NCCL") has the rest.
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "common/log.h"

#define CP_NCCL_LIBS_MAX 16
#define CP_NCCL_CALLERS_MAX 256
/* A caller outside every object (JIT code) gets a window this wide around it, clipped to the
 * gaps between objects, so that its calls hit the cache too. */
#define CP_ANON_WINDOW ((uintptr_t)1 << 20)

struct cp_nccl_lib {
    void *_Atomic fn[CP_NCCL_FN_COUNT];
    _Atomic unsigned char missing[CP_NCCL_FN_COUNT]; /* looked up, absent (objects only) */
    _Atomic unsigned char warned[CP_NCCL_FN_COUNT];
    int global;         /* the global scope after us: names looked up with RTLD_NEXT */
    void *handle;       /* our reference to the object */
    uintptr_t base;     /* the object's load address: its identity */
    char path[256];
};

static const char *const g_names[CP_NCCL_FN_COUNT] = {
#define CP_NAME(ret, name, params, args) #name,
    CP_NCCL_API(CP_NAME) CP_NCCL_API_DEPRECATED(CP_NAME)
#undef CP_NAME
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cp_nccl_lib g_libs[CP_NCCL_LIBS_MAX];
static _Atomic unsigned g_nlibs;
static cp_nccl_caller g_callers[CP_NCCL_CALLERS_MAX];
static _Atomic unsigned g_ncallers;
static _Atomic int g_full_warned, g_none_warned;
static _Atomic uintptr_t g_self_base;

static uintptr_t object_base(const void *p)
{
    Dl_info info;
    return dladdr(p, &info) && info.dli_fbase ? (uintptr_t)info.dli_fbase : 0;
}

static int is_ours(const void *p)
{
    uintptr_t self = atomic_load_explicit(&g_self_base, memory_order_relaxed);
    if (!self) {
        self = object_base((const void *)&object_base);
        atomic_store_explicit(&g_self_base, self, memory_order_relaxed);
    }
    return p && object_base(p) == self;
}

/* pncclX, then ncclX, in a dlsym scope; never our own definition. */
static void *scope_lookup(void *handle, const char *name)
{
    char pname[96] = "p";
    strncat(pname, name, sizeof pname - 2);
    void *p = dlsym(handle, pname);
    if (!p || is_ours(p))
        p = dlsym(handle, name);
    return is_ours(p) ? NULL : p;
}

/* Under g_mu. The lib of the object that defines p, registered at its first sight. */
static cp_nccl_lib *object_lib(void *p)
{
    Dl_info info;
    if (!dladdr(p, &info) || !info.dli_fbase)
        return NULL;
    uintptr_t base = (uintptr_t)info.dli_fbase;
    unsigned n = atomic_load_explicit(&g_nlibs, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++)
        if (!g_libs[i].global && g_libs[i].base == base)
            return &g_libs[i];
    if (n == CP_NCCL_LIBS_MAX)
        return NULL;
    /* The main program's dli_fname is its path, which dlopen would not match: NULL is it. */
    int is_main = object_base((const void *)getauxval(AT_PHDR)) == base;
    void *h = dlopen(is_main ? NULL : info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    cp_nccl_lib *lib = &g_libs[n];
    lib->handle = h;
    lib->base = base;
    snprintf(lib->path, sizeof lib->path, "%s", info.dli_fname ? info.dli_fname : "?");
    atomic_store_explicit(&g_nlibs, n + 1, memory_order_release);
    return lib;
}

/* Under g_mu. */
static cp_nccl_lib *global_lib(void)
{
    unsigned n = atomic_load_explicit(&g_nlibs, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++)
        if (g_libs[i].global)
            return &g_libs[i];
    if (n == CP_NCCL_LIBS_MAX)
        return NULL;
    cp_nccl_lib *lib = &g_libs[n];
    lib->global = 1;
    lib->handle = RTLD_NEXT;
    void *p = scope_lookup(RTLD_NEXT, "ncclGetVersion");
    Dl_info info;
    snprintf(lib->path, sizeof lib->path, "%s",
             p && dladdr(p, &info) && info.dli_fname ? info.dli_fname : "the global scope");
    atomic_store_explicit(&g_nlibs, n + 1, memory_order_release);
    return lib;
}

/* ---- which object called, and its text range ---- */

struct where {
    uintptr_t a;         /* the return address less one: inside the call instruction */
    uintptr_t lo, hi;    /* the segment holding a, or the gap around it */
    int found, is_main, index;
    const char *name;    /* dl_iterate_phdr's: "" for the main program */
};

static int find_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct where *w = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        if (w->a >= s && w->a < e) {
            w->lo = s;
            w->hi = e;
            w->found = 1;
            w->is_main = w->index == 0;
            w->name = info->dlpi_name;
            return 1;
        }
        if (e <= w->a && e > w->lo)
            w->lo = e;
        if (s > w->a && s < w->hi)
            w->hi = s;
    }
    w->index++;
    return 0;
}

/* Any loaded object that defines pncclGetVersion (or ncclGetVersion) itself, among those
 * whose file name says nccl (libnccl.so.2, libnccl.so.2.28.9, a vendor's libnccl-net-less
 * build). Rare: only for a caller that no scope serves. */
struct candidates {
    char names[64][256];
    int n;
};

static int collect_candidates(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct candidates *c = data;
    const char *name = info->dlpi_name;
    if (!name || !*name || c->n == 64)
        return 0;
    const char *slash = strrchr(name, '/');
    if (strstr(slash ? slash + 1 : name, "nccl"))
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
    return 0;
}

/* Under g_mu. */
static cp_nccl_lib *any_loaded_lib(void)
{
    unsigned n = atomic_load_explicit(&g_nlibs, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++)
        if (!g_libs[i].global)
            return &g_libs[i];
    struct candidates *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    dl_iterate_phdr(collect_candidates, c);
    cp_nccl_lib *lib = NULL;
    for (int i = 0; i < c->n && !lib; i++) {
        void *h = dlopen(c->names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        void *p = scope_lookup(h, "ncclGetVersion");
        Dl_info info;
        if (p && dladdr(p, &info) && info.dli_fname && !strcmp(info.dli_fname, c->names[i]))
            lib = object_lib(p);
        dlclose(h);
    }
    free(c);
    return lib;
}

/* Under g_mu: the NCCL the object named by w would have bound to (the order of the header). */
static cp_nccl_lib *choose_lib(const struct where *w)
{
    if (scope_lookup(RTLD_NEXT, "ncclGetVersion"))
        return global_lib();
    if (w->found && !w->is_main && w->name && *w->name) {
        void *h = dlopen(w->name, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            void *p = scope_lookup(h, "ncclGetVersion");
            cp_nccl_lib *lib = p ? object_lib(p) : NULL;
            dlclose(h);
            if (lib)
                return lib;
        }
    }
    return any_loaded_lib();
}

static const cp_nccl_caller *cached_caller(uintptr_t ra)
{
    unsigned n = atomic_load_explicit(&g_ncallers, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        if (ra - g_callers[i].lo < g_callers[i].span)
            return &g_callers[i];
    return NULL;
}

/* The lib for a return address; *cached is its table entry, NULL when the table is full. */
static cp_nccl_lib *lib_of(uintptr_t ra, const cp_nccl_caller **cached)
{
    *cached = cached_caller(ra);
    if (*cached)
        return (*cached)->lib;
    pthread_mutex_lock(&g_mu);
    *cached = cached_caller(ra);
    if (*cached) {
        pthread_mutex_unlock(&g_mu);
        return (*cached)->lib;
    }
    struct where w = {.a = ra - 1, .lo = 0, .hi = UINTPTR_MAX};
    dl_iterate_phdr(find_segment, &w);
    if (!w.found) {
        uintptr_t lo = w.a > CP_ANON_WINDOW ? w.a - CP_ANON_WINDOW : 0;
        uintptr_t hi = w.a < UINTPTR_MAX - CP_ANON_WINDOW ? w.a + CP_ANON_WINDOW : UINTPTR_MAX;
        w.lo = w.lo > lo ? w.lo : lo;
        w.hi = w.hi < hi ? w.hi : hi;
    }
    cp_nccl_lib *lib = choose_lib(&w);
    unsigned n = atomic_load_explicit(&g_ncallers, memory_order_relaxed);
    if (lib && n < CP_NCCL_CALLERS_MAX) {
        /* return addresses ra with ra - 1 in [lo, hi) */
        g_callers[n] = (cp_nccl_caller){.lo = w.lo + 1, .span = w.hi - w.lo, .fn = lib->fn,
                                        .lib = lib};
        atomic_store_explicit(&g_ncallers, n + 1, memory_order_release);
        *cached = &g_callers[n];
    } else if (lib && !atomic_exchange(&g_full_warned, 1)) {
        cp_warn("more than %d objects call NCCL: calls from the newer ones find their NCCL "
                "at every call (slower, still right)", CP_NCCL_CALLERS_MAX);
    }
    pthread_mutex_unlock(&g_mu);
    return lib;
}

cp_nccl_lib *cp_nccl_lib_for(const void *ra)
{
    int saved = errno;
    const cp_nccl_caller *c;
    cp_nccl_lib *lib = lib_of((uintptr_t)ra, &c);
    errno = saved;
    return lib;
}

static void warn_missing(cp_nccl_lib *lib, unsigned idx)
{
    if (atomic_exchange_explicit(&lib->warned[idx], 1, memory_order_relaxed))
        return;
    cp_warn("%s is not in %s: the call returns ncclInvalidUsage, as NCCL answers a feature it "
            "lacks (without collprof the job could not have called it), and is not recorded",
            g_names[idx], lib->path);
}

void *cp_nccl_lib_fn(cp_nccl_lib *lib, unsigned idx)
{
    if (!lib || idx >= CP_NCCL_FN_COUNT)
        return NULL;
    void *p = atomic_load_explicit(&lib->fn[idx], memory_order_acquire);
    if (p)
        return p;
    if (atomic_load_explicit(&lib->missing[idx], memory_order_relaxed))
        return NULL;
    int saved = errno;
    p = scope_lookup(lib->handle, g_names[idx]);
    if (p) {
        atomic_store_explicit(&lib->fn[idx], p, memory_order_release);
    } else {
        if (!lib->global)
            atomic_store_explicit(&lib->missing[idx], 1, memory_order_relaxed);
        warn_missing(lib, idx);
    }
    errno = saved;
    return p;
}

void *cp_nccl_resolve(const void *ra, unsigned idx)
{
    int saved = errno;
    const cp_nccl_caller *c;
    cp_nccl_lib *lib = lib_of((uintptr_t)ra, &c);
    void *p = NULL;
    if (lib) {
        if (c)
            cp_tls.caller = c;
        p = cp_nccl_lib_fn(lib, idx);
    } else if (!atomic_exchange(&g_none_warned, 1)) {
        Dl_info info;
        const char *obj = dladdr((const char *)ra - 1, &info) && info.dli_fname
                              ? info.dli_fname : "code outside any object";
        cp_warn("%s: no NCCL is loaded that its caller (%s) can reach; the call returns "
                "ncclInvalidUsage and is not recorded", g_names[idx < CP_NCCL_FN_COUNT ? idx : 0],
                obj);
    }
    errno = saved;
    return p;
}

cp_nccl_lib *cp_nccl_first_lib(void)
{
    return atomic_load_explicit(&g_nlibs, memory_order_acquire) ? &g_libs[0] : NULL;
}

