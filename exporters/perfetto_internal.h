/* exporters/perfetto_internal.h: what perfetto.c (the events) and perfetto_piece.c (which
 * calls a piece of the job keeps: a window, ranks, a cap on events) share. Internal to the
 * exporters library. */
#ifndef COLLPROF_EXPORTERS_PERFETTO_INTERNAL_H
#define COLLPROF_EXPORTERS_PERFETTO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* One event as perfetto.c lays it out, before a format writes it: the JSON writer
 * (perfetto.c) and the protobuf one (perfetto_proto.c) read the same thing. */
enum pf_arg_kind {
    PA_STR,  /* s, written as it is (escaped for JSON) */
    PA_U64,  /* u */
    PA_I64,  /* i */
    PA_US,   /* i nanoseconds, written as microseconds with three decimals */
    PA_BOOL, /* u */
    PA_NUM3, /* d, three decimals */
    PA_INTS, /* v[0..n) */
};
/* A key's JSON text ("key":) is padded to PF_JKEY_TEXT bytes, copied whole */
#define PF_JKEY_TEXT 32
#define PF_JKEY_MAX (PF_JKEY_TEXT - 3)
typedef struct pf_arg {
    const char *key;
    const char *jkey;    /* "key": then NULs, at least PF_JKEY_TEXT bytes in all */
    uint8_t keylen;      /* strlen(key): keys are literals, written as they are */
    uint8_t kind;
    uint8_t s_static;    /* PA_STR: s lives as long as the program (a name table's): the
                            protobuf writer may intern it by address */
    uint8_t has_sid;     /* PA_STR: sid names s's text: args of one key and one sid have the
                            same text (a comm's id, a site's string in the model), which the
                            protobuf writer then keeps its annotation by */
    uint32_t prelen;     /* PA_STR: pre's length */
    /* the value, by kind: 48 bytes an arg, not 80 (the layout sets 20 of them a call) */
    union {
        const char *s;
        uint64_t u;
        int64_t i;
        double d;
        const int32_t *v;
    };
    uint64_t sid;
    union {
        const char *pre; /* PA_STR: s as the JSON writer writes it (quoted, escaped), made
                            once for many events (a call site's); NULL: made each time */
        size_t n;        /* PA_INTS: v[0..n) */
    };
} pf_arg;
#define PF_MAX_ARGS 40
#define PF_RUN_KEY 24
typedef struct pf_event {
    char ph;             /* 'X' a slice on a stream's track, 'i' an instant on the rank */
    const char *name, *cat; /* cat a literal, and a slice's ('X') name: both writers keep
                               them by address */
    size_t ri;           /* the rank index */
    uint32_t pid, tid;
    int64_t ts, dur;     /* ns since the job's start */
    uint64_t bind_id;    /* flow: the operation + 1; 0 none */
    uint8_t flow_in, flow_out;
    uint8_t is_wait;     /* the wait nested in its call's slice */
    double busbw_gbps;   /* the call's bus bandwidth over its slice (counter); < 0 none */
    /* args[run_from, run_to) are made from run_key alone (a call's size, type and how NCCL
     * ran it: the same for most calls of a job), so a writer may keep what it wrote for them
     * by the key and copy it for the next event of that key (cpx_run_*). run_to == run_from:
     * none; else run_from >= 1 (never the first arg: its text starts after a separator). */
    uint8_t run_from, run_to;
    _Alignas(8) uint8_t run_key[PF_RUN_KEY];
    size_t nargs;
    pf_arg args[PF_MAX_ARGS];
} pf_event;

/* The writers' kept runs (pf_event.run_*): a few dozen keys, each with its output bytes. A
 * slot by the key's hash; a miss is written as any other args and kept after. */
#define PF_RUN_SLOTS 64
#define PF_RUN_BYTES 240
typedef struct pf_run_cache {
    struct {
        uint8_t key[PF_RUN_KEY];
        uint16_t len;     /* 0: empty */
        unsigned char bytes[PF_RUN_BYTES];
    } slot[PF_RUN_SLOTS];
} pf_run_cache;

static inline size_t cpx_run_slot(const uint8_t *key)
{
    uint64_t a, b, c;
    memcpy(&a, key, 8);
    memcpy(&b, key + 8, 8);
    memcpy(&c, key + 16, 8);
    uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full) ^
                 (c * 0x165667b19e3779f9ull);
    return (size_t)(h >> 58) & (PF_RUN_SLOTS - 1);
}

/* The kept bytes of e's run, or NULL (none kept, or no run); *len their length. */
static inline const unsigned char *cpx_run_find(const pf_run_cache *rc, const pf_event *e,
                                                size_t *len)
{
    if (e->run_to <= e->run_from)
        return NULL;
    size_t i = cpx_run_slot(e->run_key);
    if (!rc->slot[i].len || memcmp(rc->slot[i].key, e->run_key, PF_RUN_KEY) != 0)
        return NULL;
    *len = rc->slot[i].len;
    return rc->slot[i].bytes;
}

/* Keeps bytes[0..len) as e's run (nothing when they do not fit). */
static inline void cpx_run_keep(pf_run_cache *rc, const pf_event *e, const void *bytes,
                                size_t len)
{
    if (len == 0 || len > PF_RUN_BYTES)
        return;
    size_t i = cpx_run_slot(e->run_key);
    memcpy(rc->slot[i].key, e->run_key, PF_RUN_KEY);
    memcpy(rc->slot[i].bytes, bytes, len);
    rc->slot[i].len = (uint16_t)len;
}

typedef struct ppw ppw; /* perfetto_proto.c's state */

/* A slot among n (a power of two) for a string kept by its address, salt told apart: a
 * multiplicative hash (literals' addresses lie a few bytes apart; their low bits collided and
 * evicted each other in a tenth of the lookups). Both writers' caches of names use it. */
static inline size_t cpx_addr_slot(const void *s, uint64_t salt, size_t n)
{
    uint64_t h = ((uint64_t)(uintptr_t)s + salt) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (n - 1);
}

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
    /* per operation, what its calls' events say of it (perfetto.c), gathered in one record
     * by one pass over the operations: read from eight arrays, a call's cache misses were an
     * eighth of the layout's samples (perf, the 1024-rank job) */
    struct pw_op *ops;
    uint64_t calls, left_out;
    struct item *items, *items2; /* place_rank's scratch: two per call each */
    int64_t *stack;        /* ... and the ends of the slices enclosing the point reached */
    size_t cap;            /* calls the two hold */
    int first;
    int failed;
    uint64_t events;
    ppw *proto;          /* NULL: JSON */
    /* comm ids' text by id: a rank's calls go to a few comms */
    struct {
        uint64_t id;
        char text[17];   /* "": none made yet */
        char json[18];   /* ... quoted, for the JSON writer */
    } comms[8];
    /* the JSON writer's ,"pid":N,"tid":M by tid % 8: a rank's events come on its few
     * streams, and two numbers made for each event were a tenth of the writer */
    struct {
        uint32_t pid, tid;
        uint8_t len;     /* 0: none made yet */
        char text[40];   /* copied whole */
    } jids[8];
    char *jbuf;          /* the JSON writer's event text */
    pf_run_cache *jruns; /* the JSON writer's kept runs; NULL: none kept (out of memory) */
    size_t jlen, jcap;
    /* names that live as long as the program (ops', dtypes', categories), quoted and
       escaped once, by address */
    struct {
        const char *s;
        uint8_t len;     /* 0: nothing kept (a name longer than text) */
        char text[48];   /* copied whole */
    } jstatic[128];
    /* call sites cleaned for output, by the model's string they come from: a job has few
     * sites and each call would clean its own again (a sixth of the export's time) */
    struct pw_site {
        const char *key;
        char *text;
        char *json;          /* the JSON writer's: text quoted and escaped */
        size_t json_len;
    } sites[64];
    /* the mismatch rows by (comm, seq), sorted: a call finds its own in a binary search */
    struct pw_mm {
        uint64_t comm_id, seq;
        uint32_t row;
    } *mm;
    size_t nmm;
} pw;

/* ---- perfetto_json.c: Chrome's trace-event JSON ----
 * Failure sets p->failed (errno set); each call does nothing after it. */
/* {"displayTimeUnit":"ns","otherData":{...},"traceEvents":[ ; "piece.*" keys nest in
 * otherData.piece */
void cpx_pj_header(pw *p, const pf_arg *args, size_t nargs);
void cpx_pj_event(pw *p, const pf_event *e);
/* A metadata ("M") event of one arg: str, or num where str is NULL. */
void cpx_pj_metadata(pw *p, const char *name, uint32_t pid, uint32_t tid, const char *key,
                     const char *str, int64_t num);
/* Writes what the events left in the buffer and closes the array and the object. */
void cpx_pj_close(pw *p);
/* s as a JSON string (quoted, escaped as the events' strings are), NUL-terminated, *len its
 * length; NULL out of memory. The caller frees it. */
char *cpx_pj_quoted(const char *s, size_t *len);

/* ---- perfetto_proto.c: Perfetto's own format, TracePacket protobuf ----
 * Each call NULL-safe on a failed writer; failure sticks (errno set). */
ppw *cpx_ppw_new(FILE *out);
/* What the JSON's otherData holds: an instant on a "collprof" track at the job's start. */
void cpx_ppw_job(ppw *w, const pf_arg *args, size_t nargs);
void cpx_ppw_process(ppw *w, uint32_t pid, const char *name);
void cpx_ppw_thread(ppw *w, uint32_t pid, uint32_t tid, const char *name);
/* A slice or an instant; a rank's slices are held until cpx_ppw_rank_end writes them in
 * time order (begin and end packets must nest on a track as they come). */
void cpx_ppw_event(ppw *w, const pf_event *e);
void cpx_ppw_rank_end(ppw *w);
/* Events written, and 0, or -1 when anything failed; frees w. */
int cpx_ppw_close(ppw *w, uint64_t *events);


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
