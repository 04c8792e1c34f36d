/* analyzer/hang_internal.h: what the hang finder's files share (hang.c the collectives and
 * the driver, hang_view.c the per-comm views, hang_row.c the rows, hang_p2p.c send/recv
 * pairs, hang_cascade.c hangs that follow from others), and the scan of a send/recv
 * pair-direction for its unmatched side, which mismatch.c uses too. Internal to the analyzer
 * library, not part of analyzer.h's API: nothing outside analyzer/ includes it.
 */
#ifndef COLLPROF_ANALYZER_HANG_INTERNAL_H
#define COLLPROF_ANALYZER_HANG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "analyzer/analyzer.h"

typedef struct member {
    uint64_t comm_id;
    int32_t comm_rank;
    int32_t nranks;
    uint32_t rank_idx;
    uint64_t last1;         /* last collective seq it called on the comm, + 1; 0 none */
    uint64_t done1;         /* last seq it finished, + 1; 0 none */
    uint64_t done_enter_ns; /* when it entered that one */
} member;

typedef struct seen {
    uint64_t comm_id, seq, at_ns, age_ns;
    uint32_t rank_idx;
    int32_t peer;
    uint8_t op, gpu_state;
} seen;

struct by_idx {
    uint32_t rank_idx;
    uint32_t k;             /* into the comm's mem */
};

typedef struct comm_view {
    uint64_t comm_id;
    member *mem;            /* by comm rank */
    size_t nmem;
    struct by_idx *by_idx;  /* mem's entries ordered by model rank */
    int32_t nranks;         /* the largest any member's COMM record said */
    const cpa_op *ops;      /* its collectives, by seq */
    size_t nops;
    const seen *hs;         /* HANG records naming it, by seq */
    size_t nhs;
    int identity;           /* world-sized, comm rank == global rank for every member */
} comm_view;

typedef struct finder {
    const cpa_model *m;
    const cpa_matched *mt;
    cpa_hangs *out;
    size_t cap;
    member *mem;
    size_t nmem;
    seen *hs;
    size_t nhs;
    comm_view *views;
    size_t nviews;
    size_t ncoll;           /* mt->ops[0 .. ncoll) are the collectives */
    int32_t *missing, *waiting; /* scratch lists of global ranks */
    size_t cap_missing;
    uint8_t *flag;          /* scratch, per member of one comm */
    uint8_t *kinds;         /* per row: enum row_kind */
    size_t cap_kinds;
} finder;

/* What made a row's missing ranks missing: whether they can be explained by another hang. */
enum row_kind { ROW_NO_CALL = 1, ROW_GPU = 2, ROW_DEATH = 3, ROW_OTHER = 4 };

static inline int32_t global_rank(const finder *f, uint32_t rank_idx)
{
    return f->m->ranks[rank_idx].rank;
}

static inline const cpa_call *call_of(const finder *f, const cpa_part *p)
{
    return &f->m->ranks[p->rank_idx].calls[p->call_idx];
}

/* The rank the part's call has in its communicator (-1 unknown). */
static inline int32_t comm_rank_of(const finder *f, const cpa_part *p)
{
    return cpa_call_comm_rank(&f->m->ranks[p->rank_idx], call_of(f, p));
}

static inline int unclean_end(const cpa_rank *r)
{
    return !r->ended || r->end_signal != 0;
}

/* ---- hang_view.c ---- */

/* Fills f's members, HANG records and one view per comm from f->m and f->mt, and the
 * scratch lists sized by them. 0, or -1 out of memory (cpa_hg_finder_free still frees). */
int cpa_hg_build(finder *f);
void cpa_hg_finder_free(finder *f);
/* The member of cv with this comm rank and model rank (UINT32_MAX: any), or NULL. */
member *cpa_hg_find_member(const comm_view *cv, int32_t comm_rank, uint32_t rank_idx);
/* The first member (by comm rank) that is this model rank, or -1. */
long cpa_hg_member_of_idx(const comm_view *cv, uint32_t rank_idx);
comm_view *cpa_hg_view_of(finder *f, uint64_t comm_id);
/* Index of the first collective of cv with seq >= seq. */
size_t cpa_hg_op_lower(const comm_view *cv, uint64_t seq);
/* Index of the first HANG record of cv with seq >= seq. */
size_t cpa_hg_seen_lower(const comm_view *cv, uint64_t seq);

/* ---- hang_row.c ---- */

/* One line on call c of rank r: op, peer or seq, comm, and whether it finished. */
void cpa_hg_describe_call(char *buf, size_t len, const cpa_rank *r, const cpa_call *c);
/* What a rank that never called the operation did last. */
void cpa_hg_say_last_call(char *out, size_t len, const cpa_rank *r);
/* What the GPU of a rank that called the operation but never started it finished last. */
void cpa_hg_say_last_finished(char *out, size_t len, const cpa_rank *r, const cpa_call *hung);
/* Appends a row of kind (enum row_kind) with f->missing[0, nmissing) and
 * f->waiting[0, nwaiting), sorted and made unique (both are reordered). 0, or -1 out of
 * memory. */
int cpa_hg_add_row(finder *f, int kind, uint64_t comm_id, uint64_t seq, uint8_t op,
                   int verdict, size_t nmissing, size_t nwaiting, double age_s,
                   const char *last);

/* ---- hang_p2p.c ---- */

/* A row for the send/recv pair-direction ops mt->ops[lo, hi) when it ends in a hang. 0, or
 * -1 out of memory. */
int cpa_hg_judge_pair(finder *f, size_t lo, size_t hi);

/* ---- hang_cascade.c ---- */

/* Says in each row's `last` where another hang holds its missing ranks, and sorts the rows:
 * causes first, then more waiting ranks, then (comm, seq). 0, or -1 out of memory. */
int cpa_hg_order(finder *f);

/* ---- send/recv pair-directions (hang_p2p.c; mismatch.c too) ---- */

/* The end of the pair-direction (comm, sender, receiver) that starts at the p2p op
 * mt->ops[i]: the first op after it of another one, or mt->nops. */
size_t cpa_pair_end(const cpa_matched *mt, size_t i);
/* How many of op o's parts are Sends, and how many Recvs. */
void cpa_pair_sides(const cpa_model *m, const cpa_matched *mt, const cpa_op *o, int *sends,
                    int *recvs);
/* The first op of the pair-direction mt->ops[lo, hi) with one side only whose other side
 * made no call at that seq or later (when it did, its record here was lost), or hi when
 * none; *send_side says the side present is the Send. */
size_t cpa_pair_dangling(const cpa_model *m, const cpa_matched *mt, size_t lo, size_t hi,
                         int *send_side);

#endif
