/* tests/exporters/perfetto_check.h: what every test of a Perfetto export checks, on the
 * synthetic job (test_perfetto.c) and on every emulated scenario (test_analyzer_emu.c):
 * strict JSON, and no two slices of one track partly overlapping. Include after cmocka.h. */
#ifndef COLLPROF_TESTS_PERFETTO_CHECK_H
#define COLLPROF_TESTS_PERFETTO_CHECK_H

#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/test_json_util.h"

static inline json_object *pj_parse_strict(const char *s)
{
    return tj_parse_strict(s, "Perfetto JSON");
}

static inline json_object *pj_field(json_object *o, const char *key)
{
    json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

static inline const char *pj_str(json_object *o, const char *key)
{
    json_object *v = pj_field(o, key);
    return v ? json_object_get_string(v) : "";
}

/* No two slices of one track partly overlap (in integer nanoseconds, as Perfetto reads
 * them): they nest, or one ends before the next starts; a viewer mis-nests the others. */
typedef struct pj_span {
    int64_t pid, tid, s, e;
} pj_span;

static inline int pj_cmp_span(const void *x, const void *y)
{
    const pj_span *a = x, *b = y;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->s != b->s)
        return a->s < b->s ? -1 : 1;
    return (a->e < b->e) - (a->e > b->e); /* the longer first: it is the parent */
}

static inline void assert_no_partial_overlap(json_object *events)
{
    size_t n = json_object_array_length(events), k = 0;
    pj_span *v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        if (strcmp(pj_str(ev, "ph"), "X") != 0)
            continue;
        int64_t s = llround(json_object_get_double(pj_field(ev, "ts")) * 1000);
        v[k++] = (pj_span){json_object_get_int64(pj_field(ev, "pid")),
                           json_object_get_int64(pj_field(ev, "tid")), s,
                           s + llround(json_object_get_double(pj_field(ev, "dur")) * 1000)};
    }
    qsort(v, k, sizeof *v, pj_cmp_span);
    pj_span stack[64];
    size_t depth = 0;
    for (size_t i = 0; i < k; i++) {
        if (i && (v[i].pid != v[i - 1].pid || v[i].tid != v[i - 1].tid))
            depth = 0;
        while (depth && stack[depth - 1].e <= v[i].s)
            depth--;
        if (depth && v[i].e > stack[depth - 1].e)
            fail_msg("pid %lld tid %lld: [%lld, %lld] ns starts inside [%lld, %lld] and ends "
                     "after it", (long long)v[i].pid, (long long)v[i].tid, (long long)v[i].s,
                     (long long)v[i].e, (long long)stack[depth - 1].s,
                     (long long)stack[depth - 1].e);
        if (depth < 64)
            stack[depth++] = v[i];
    }
    free(v);
}

#endif
