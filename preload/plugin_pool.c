/* plugin_pool: free indices handed between threads (see plugin_pool.h). */
#include "preload/plugin_pool.h"

#include <stddef.h>
#include <sys/mman.h>

static void *map_zero(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int cp_ipool_make(cp_ipool *p, uint32_t max, int with_magazines)
{
    p->max = max;
    p->next = map_zero(max * sizeof(uint32_t));
    if (!p->next)
        return -1;
    if (!with_magazines)
        return 0;
    /* every index in a full magazine, and one more for each thread's and the filler's */
    p->nmag = max / CP_MAG_N + 256;
    p->mag_next = map_zero(p->nmag * sizeof(uint32_t));
    p->mags = map_zero(p->nmag * sizeof *p->mags);
    return p->mag_next && p->mags ? 0 : -1;
}

/* A tagged stack of indices + 1 linked through links[]: the tag defeats ABA. */
static uint32_t stack_pop(_Atomic uint64_t *top, const uint32_t *links)
{
    uint64_t t = atomic_load_explicit(top, memory_order_acquire);
    while ((uint32_t)t != 0) {
        uint32_t i = (uint32_t)t - 1;
        uint64_t n = ((t >> 32) + 1) << 32 | links[i];
        if (atomic_compare_exchange_weak_explicit(top, &t, n, memory_order_acquire,
                                                  memory_order_acquire))
            return i + 1;
    }
    return 0;
}

static void stack_push(_Atomic uint64_t *top, uint32_t *links, uint32_t i)
{
    uint64_t t = atomic_load_explicit(top, memory_order_relaxed);
    do {
        links[i] = (uint32_t)t;
    } while (!atomic_compare_exchange_weak_explicit(top, &t, ((t >> 32) + 1) << 32 | (i + 1),
                                                    memory_order_release, memory_order_relaxed));
}

int cp_ipool_get(cp_ipool *p, int *fresh)
{
    uint32_t i = stack_pop(&p->top, p->next);
    if (i) {
        *fresh = 0;
        return (int)i - 1;
    }
    uint32_t f = atomic_fetch_add_explicit(&p->fresh, 1, memory_order_relaxed);
    if (f >= p->max)
        return -1;
    *fresh = 1;
    return (int)f;
}

void cp_ipool_put(cp_ipool *p, uint32_t i) { stack_push(&p->top, p->next, i); }

int cp_ipool_get_cached(cp_ipool *p, cp_ipool_cache *c, int *fresh, int *next)
{
    *next = -1;
    if (c->mag && c->pos >= c->n) {
        stack_push(&p->mag_empty, p->mag_next, c->mag - 1);
        c->mag = 0;
    }
    if (!c->mag) {
        uint32_t m = stack_pop(&p->mag_full, p->mag_next);
        if (!m)
            return cp_ipool_get(p, fresh);
        c->mag = m;
        c->pos = 0;
        c->n = (uint8_t)p->mags[m - 1][0];
        if (!c->n) { /* not possible (only full or flushed ones are published): be safe */
            stack_push(&p->mag_empty, p->mag_next, m - 1);
            c->mag = 0;
            return cp_ipool_get(p, fresh);
        }
    }
    const uint32_t *m = p->mags[c->mag - 1];
    int i = (int)m[1 + c->pos++];
    if (c->pos < c->n)
        *next = (int)m[1 + c->pos];
    *fresh = 0;
    return i;
}

static uint32_t mag_new(cp_ipool *p)
{
    uint32_t m = stack_pop(&p->mag_empty, p->mag_next);
    if (m)
        return m;
    uint32_t f = atomic_fetch_add_explicit(&p->mag_fresh, 1, memory_order_relaxed);
    return f < p->nmag ? f + 1 : 0;
}

void cp_ipool_put_batched(cp_ipool *p, uint32_t i)
{
    if (!p->mags) {
        cp_ipool_put(p, i);
        return;
    }
    if (!p->fill) {
        p->fill = mag_new(p);
        if (!p->fill) { /* every magazine out (threads gone with theirs): one at a time */
            cp_ipool_put(p, i);
            return;
        }
        p->mags[p->fill - 1][0] = 0;
    }
    uint32_t *m = p->mags[p->fill - 1];
    m[1 + m[0]++] = i;
    if (m[0] == CP_MAG_N)
        cp_ipool_flush(p);
}

void cp_ipool_flush(cp_ipool *p)
{
    if (!p->fill)
        return;
    stack_push(&p->mag_full, p->mag_next, p->fill - 1);
    p->fill = 0;
}
