/* trace_kept: the records a rotated trace's segment heads repeat (trace_kept.h). A handful to a
 * few thousand (communicators, call sites, kernel names): a linear search on the rare put
 * costs less than an index would. */
#include "trace/trace_kept.h"

#include <stdlib.h>
#include <string.h>

#include "trace/trace_format.h"

static uint16_t size_at(const cp_kept_set *k, size_t off)
{
    uint16_t size;
    memcpy(&size, k->bytes + off + offsetof(cp_record_header, size), sizeof size);
    return size;
}

void cp_kept_forget(cp_kept_set *k, unsigned type, uint32_t index)
{
    for (size_t off = 0; off < k->len;) {
        cp_record_header h;
        uint32_t idx;
        memcpy(&h, k->bytes + off, sizeof h);
        memcpy(&idx, k->bytes + off + sizeof h, sizeof idx);
        if (h.type == type && (type == CP_REC_PROCESS || idx == index)) {
            memmove(k->bytes + off, k->bytes + off + h.size, k->len - off - h.size);
            k->len -= h.size;
            return;
        }
        off += h.size;
    }
}

int cp_kept_put(cp_kept_set *k, const void *record)
{
    cp_record_header h;
    uint32_t index;
    memcpy(&h, record, sizeof h);
    memcpy(&index, (const unsigned char *)record + sizeof h, sizeof index);
    cp_kept_forget(k, h.type, index);
    if (k->len + h.size > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 4096;
        while (cap < k->len + h.size)
            cap *= 2;
        unsigned char *p = realloc(k->bytes, cap);
        if (!p)
            return -1;
        k->bytes = p;
        k->cap = cap;
    }
    memcpy(k->bytes + k->len, record, h.size);
    k->len += h.size;
    return 0;
}

const void *cp_kept_next(const cp_kept_set *k, size_t *off)
{
    if (*off >= k->len)
        return NULL;
    const void *rec = k->bytes + *off;
    *off += size_at(k, *off);
    return rec;
}

void cp_kept_free(cp_kept_set *k)
{
    free(k->bytes);
    memset(k, 0, sizeof *k);
}
