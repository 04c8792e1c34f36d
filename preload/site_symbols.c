/* site_symbols: a new call site's stack, symbolized by the writer into a SITE record.
 *
 * Names come from unwind.c: libunwind's get_proc_name when the machine has it, which reads
 * the ELF symbol table (.symtab) of the object holding the address and so names a job's
 * static functions and the functions of an executable built without -rdynamic — exactly a
 * training script's own call sites; dladdr's dynamic symbols otherwise. dladdr gives the
 * object's file name. Done off the hot path: both may take locks and
 * read files. A return address is looked up one byte back, inside the call instruction,
 * so a call that ends its function is not credited to the next function.
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "trace/trace_writer.h"

static void frame_name(void *pc, char *out, size_t cap)
{
    uintptr_t ip = (uintptr_t)pc - 1;
    Dl_info dl;
    const char *lib = "?";
    if (dladdr((void *)ip, &dl) && dl.dli_fname) {
        const char *slash = strrchr(dl.dli_fname, '/');
        lib = slash ? slash + 1 : dl.dli_fname;
    } else {
        memset(&dl, 0, sizeof dl);
    }
    char name[256];
    uintptr_t off = 0;
    if (cp_unwind_proc_name(ip, name, sizeof name, &off) == 0) {
        snprintf(out, cap, "%s+0x%lx (%s)", name, (unsigned long)off + 1, lib);
    } else {
        snprintf(out, cap, "??+0x%lx (%s)",
                 (unsigned long)((uintptr_t)pc - (uintptr_t)dl.dli_fbase), lib);
    }
}

void cp_site_write(cp_trace_writer *w, uint32_t site)
{
    void *const *pcs;
    uint64_t ra;
    int n = cp_site_stack(site, &pcs, &ra);
    if (n < 0)
        return;
    static char names[64][320];
    const char *frames[64];
    for (int i = 0; i < n && i < 64; i++) {
        frame_name(pcs[i], names[i], sizeof names[i]);
        frames[i] = names[i];
    }
    static unsigned char buf[64 * (2 + 320) + 64];
    size_t size = 0;
    /* A record that cannot hold every frame keeps the innermost ones. */
    for (int keep = n; keep >= 0 && size == 0; keep--)
        size = cp_rec_site_build(buf, sizeof buf, site, ra, frames, (unsigned)keep);
    /* kept by the writer for a rotated trace's later segments: never symbolized twice */
    if (size)
        cp_trace_writer_append_kept(w, buf);
}
