/* exporters/perfetto_internal.h: what perfetto.c (the events) and perfetto_piece.c (which
 * calls a piece of the job keeps: a window, ranks, a cap on events) share. Internal to the
 * exporters library. */
#ifndef COLLPROF_EXPORTERS_PERFETTO_INTERNAL_H
#define COLLPROF_EXPORTERS_PERFETTO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "analyzer/analyzer.h"

typedef struct pw {
    FILE *out;
    const cpa_analysis *a;
    uint32_t *pid;      /* per rank index */
    uint32_t *tid_base; /* per rank index: tid of its stream 0 */
    uint32_t tid_end;   /* one past the last tid */
    struct placed *placed; /* per call of the rank being written: where its slices lie */
    /* the piece written (cpx_piece): its window, its ranks, and per operation the first and
     * last arrivals among its calls in the piece (NULL: the whole job's, a->timeline) */
    int64_t t0, t1;
    int start_in;       /* a call is in when it starts in the window (the cap's), not overlaps */
    const uint8_t *rank_keep;
    uint32_t *kfirst, *klast;
    uint64_t calls, left_out;
    struct item *items;    /* place_rank's scratch: two per call */
    int64_t *stack;        /* ... and the ends of the slices enclosing the point reached */
    size_t cap;            /* calls the two hold */
    int first;
    int failed;
    uint64_t events;
    /* Strings every event repeats (op and dtype names, "X", "gpu", ...), each one shared
     * json-c object that events take a reference to instead of a copy; keyed by the
     * address of the static string they come from. */
    struct {
        const char *key;
        json_object *obj;
    } interned[64];
    json_object *yes;
    uint64_t comm_id; /* the last comm id and its string: calls come in runs of one comm */
    json_object *comm;
} pw;

/* A call's measured slice (ns since the job's start) is in the piece: its rank kept, and the
 * slice overlapping the window (under a cap: starting in it). */
static inline int cpx_pw_rank_in_piece(const pw *p, size_t ri)
{
    return !p->rank_keep || p->rank_keep[ri];
}
static inline int cpx_pw_in_piece(const pw *p, size_t ri, int64_t ts, int64_t te)
{
    return cpx_pw_rank_in_piece(p, ri) && (p->start_in ? ts >= p->t0 : te >= p->t0) &&
           ts <= p->t1;
}

/* A piece's selection, before anything is written: under a cap (max_events, 0 none) the
 * window's start moves later until what starts in it fits; unless the job is written whole
 * and uncapped, each operation's first and last arrival in the piece (p->kfirst, p->klast)
 * and *kept, the calls it keeps. 0, or -1 out of memory. */
int cpx_pw_select(pw *p, uint64_t max_events, int whole, int *capped, uint64_t *kept);

#endif
