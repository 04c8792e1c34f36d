/* sites: call sites keyed by the caller's return address.
 *
 * A fixed table of CP_SITES_MAX atomics, open addressing with a short linear probe; a
 * site's index is its slot, so a known site costs one hash and one load, and never a
 * lock. A new site (rare: a job has a handful) claims its slot with a CAS and captures the
 * stack right there, in the calling thread, because only that thread's stack is the site's
 * (libunwind's unw_backtrace: a frame-pointer-free unwinder, no allocation after its first
 * use, unlike glibc's backtrace() which dlopens libgcc_s). The raw PCs are kept; the slot
 * becomes ready, and a ring slot asks the writer to symbolize it into a SITE record off
 * the hot path. Another thread that meets the site before it is ready uses the index too:
 * its CALL may then precede the SITE record in the file (a reader maps indexes at the end).
 * Full table or a long probe: CP_SITE_UNKNOWN.
 */
#include "preload/shim.h"

#include <stdlib.h>

#include "common/settings.h"

#define CP_SITE_PROBES 8

struct site {
    _Atomic uintptr_t key;  /* the return address; 0 free */
    _Atomic int ready;      /* stack captured */
    uint16_t nframes;
    void **pcs;
};

static struct site g_sites[CP_SITES_MAX];

static inline uint32_t site_hash(uintptr_t ra)
{
    return (uint32_t)((ra * 0x9e3779b97f4a7c15ull) >> 52) & (CP_SITES_MAX - 1);
}

/* The calling thread's stack from the frame that returns to ra (the job's) outward. */
static __attribute__((noinline)) void capture(struct site *s, uintptr_t ra, int depth)
{
    void *raw[64 + 16];
    int n = cp_unwind_backtrace(raw, depth + 16);
    int first = 0;
    while (first < n && (uintptr_t)raw[first] != ra)
        first++;
    if (first == n) /* an unwinder that reports pc-1 or missed our frames: keep them all */
        first = 0;
    int keep = n - first < depth ? n - first : depth;
    s->pcs = keep > 0 ? malloc((size_t)keep * sizeof(void *)) : NULL;
    if (s->pcs) {
        for (int i = 0; i < keep; i++)
            s->pcs[i] = raw[first + i];
        s->nframes = (uint16_t)keep;
    } else {
        s->nframes = 0;
    }
}

static uint32_t site_new(struct site *s, uint32_t idx, uintptr_t ra)
{
    int depth = cp_settings_get()->stack_depth;
    capture(s, ra, depth > 64 ? 64 : depth);
    atomic_store_explicit(&s->ready, 1, memory_order_release);
    cp_ring *r = cp_tls.ring ? cp_tls.ring : cp_thread_attach();
    cp_site_slot *slot = r ? cp_ring_reserve(r) : NULL;
    if (slot) {
        *slot = (cp_site_slot){.h = {CP_REC_SHIM_SITE, sizeof(cp_site_slot)}, .site = idx};
        cp_ring_commit(r);
    }
    return idx;
}

uint32_t cp_site_of(void *return_addr)
{
    uintptr_t ra = (uintptr_t)return_addr;
    uint32_t h = site_hash(ra);
    uintptr_t k = atomic_load_explicit(&g_sites[h].key, memory_order_relaxed);
    if (CP_LIKELY(k == ra))
        return h;
    if (cp_settings_get()->stack_depth == 0 || ra == 0)
        return CP_SITE_UNKNOWN;
    for (uint32_t i = 0; i < CP_SITE_PROBES; i++) {
        uint32_t idx = (h + i) & (CP_SITES_MAX - 1);
        struct site *s = &g_sites[idx];
        k = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (k == ra)
            return idx;
        if (k == 0) {
            uintptr_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&s->key, &expected, ra,
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed))
                return site_new(s, idx, ra);
            if (expected == ra)
                return idx;
        }
    }
    return CP_SITE_UNKNOWN;
}

int cp_site_stack(uint32_t site, void *const **pcs, uint64_t *return_addr)
{
    struct site *s = &g_sites[site & (CP_SITES_MAX - 1)];
    if (!atomic_load_explicit(&s->ready, memory_order_acquire))
        return -1;
    *pcs = s->pcs;
    *return_addr = atomic_load_explicit(&s->key, memory_order_relaxed);
    return s->nframes;
}
