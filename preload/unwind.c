/* unwind: a call site's stack and the names of its frames, with what the machine has.
 *
 * libunwind (libunwind.so.8) is opened at run time with RTLD_LOCAL, never linked: a GPU
 * image often lacks it, and ld.so silently drops a preload whose dependency is missing, so
 * the job would run unprofiled. Linking it had a second cost: a preloaded library's
 * dependencies join the global scope ahead of libgcc_s, and libunwind.so.8 exports
 * _Unwind_RaiseException and the rest of the C++ unwinding ABI, so every exception the job
 * threw went through libunwind instead of the unwinder the job was built with. Opened
 * RTLD_LOCAL, its names are ours alone.
 *
 * With libunwind: unw_backtrace (allocation-free after its first use) and the accessors'
 * get_proc_name, which reads the ELF .symtab and so names a job's static functions and an
 * executable's own functions that dladdr (dynamic symbols only) leaves nameless. Without it:
 * glibc's backtrace() (the unwinder libgcc_s.so.1 offers every C++ job) and dladdr's names.
 * No libunwind header is needed to build: the few entry points are declared here, by the
 * symbol names libunwind's header maps them to (the architecture is part of the name).
 */
#include "preload/shim.h"

#include "common/fd_high.h"
#include "common/settings.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#define CP_UNW_ARCH "x86_64"
#elif defined(__aarch64__)
#define CP_UNW_ARCH "aarch64"
#endif

/* libunwind's unw_accessors_t begins with these eight members (stable since 0.99). */
typedef int (*cp_unw_get_proc_name_fn)(void *as, uintptr_t ip, char *buf, size_t len,
                                       uintptr_t *off, void *arg);
typedef struct cp_unw_accessors {
    void *find_proc_info, *put_unwind_info, *get_dyn_info_list_addr, *access_mem, *access_reg,
        *access_fpreg, *resume;
    cp_unw_get_proc_name_fn get_proc_name;
} cp_unw_accessors;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int (*g_backtrace)(void **, int);
static cp_unw_get_proc_name_fn g_proc_name;
static void *g_addr_space;

/* libunwind's init (tdep_init, at its first use) opens a pipe it keeps for good: its memory
 * validation writes a byte of an address into it to learn whether the address is readable
 * (src/x86_64/Ginit.c: open_pipe, write_validate; 1.6 and later). pipe2 takes the lowest
 * free numbers, which are the job's: its next open(2) got 5 instead of 3. So the whole
 * init runs here, at once, while the low numbers are held (common/fd_high.h): the pipe
 * lands high, beside the trace's fd. */
static void load_held(void *arg);

static void load(void)
{
    if (cp_settings_get()->unwind_glibc)
        return;
    cp_fd_with_low_numbers_held(load_held, NULL);
}

static void load_held(void *arg)
{
    (void)arg;
    void *h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&g_backtrace = dlsym(h, "unw_backtrace");
#ifdef CP_UNW_ARCH
    cp_unw_accessors *(*get_accessors)(void *) = NULL;
    *(void **)&get_accessors = dlsym(h, "_U" CP_UNW_ARCH "_get_accessors");
    void **as = dlsym(h, "_UL" CP_UNW_ARCH "_local_addr_space");
    cp_unw_accessors *acc = get_accessors && as ? get_accessors(*as) : NULL;
    if (acc && acc->get_proc_name) {
        g_addr_space = *as;
        g_proc_name = acc->get_proc_name;
    }
#endif
    if (g_backtrace) { /* its init, if get_accessors did not run it */
        void *pcs[2];
        g_backtrace(pcs, 2);
    }
}

void cp_unwind_load(void)
{
    pthread_once(&g_once, load);
}

int cp_unwind_backtrace(void **pcs, int max)
{
    cp_unwind_load();
    return g_backtrace ? g_backtrace(pcs, max) : backtrace(pcs, max);
}

int cp_unwind_proc_name(uintptr_t ip, char *buf, size_t len, uintptr_t *off)
{
    cp_unwind_load();
    if (g_proc_name && g_proc_name(g_addr_space, ip, buf, len, off, NULL) == 0)
        return 0;
    Dl_info dl;
    if (dladdr((void *)ip, &dl) && dl.dli_sname) {
        snprintf(buf, len, "%s", dl.dli_sname);
        *off = ip - (uintptr_t)dl.dli_saddr;
        return 0;
    }
    return -1;
}

static int start_hook(const cp_start_info *s)
{
    if (s->settings->stack_depth > 0)
        cp_unwind_load();
    return 0;
}

const cp_module cp_module_unwind = {.name = "unwind", .start = start_hook};
