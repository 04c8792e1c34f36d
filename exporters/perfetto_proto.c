/* perfetto_proto: the events perfetto.c lays out, as Perfetto's own format: a Trace of
 * TracePackets (protos/perfetto/trace/trace_packet.proto in google/perfetto), which Perfetto
 * UI and trace_processor read natively and far past the sizes their JSON importer takes.
 *
 * What is written, each TracePacket on sequence 1:
 *   - a TrackDescriptor per rank (a process: pid, name) and per stream (a thread: pid, tid,
 *     name), and per stream a counter track "busbw GB/s" under its rank;
 *   - a slice as a TrackEvent SLICE_BEGIN (name, category, the JSON's args as
 *     debug_annotations, flow_ids) and a SLICE_END; the operation's flow id on each of its
 *     slices joins them across ranks, terminating at its last arrival's;
 *   - the call's bus bandwidth over its slice as a COUNTER at its begin (0 at its end);
 *   - hang and trace-hole instants on the rank's process track, and the job's own facts (the
 *     JSON's otherData: generator, clock, holes, what a piece left out) as an instant on a
 *     "collprof" track at time 0.
 * Names, categories, annotation names and repeated string values are interned (InternedData
 * written just ahead of the first packet that names them; sequence flags as Perfetto's own
 * writers set them). Times are ns since the job's start. A track's begin and end packets must come in time order
 * and nest, so a rank's slices are held (encoded, with their time) and written sorted at the
 * rank's end: ends before begins at one instant, the outer begin first, the inner end first.
 *
 * The encoding is a small writer of our own rather than protobuf-c (in Debian): we write
 * six message types and read none, protobuf-c would need the generated code of Perfetto's
 * schema (thousands of messages; or a copy of the subset) and a build-time protoc-c, and it
 * builds each message as a struct before packing it, the per-event cost we are removing
 * from the JSON writer. A nested message keeps four bytes for its length, as Perfetto's own
 * protozero does, so it is written in one pass; at its end the length takes the bytes it
 * needs and the content moves back (a fifth of the file was padding). tests/exporters/perfetto.proto
 * has the fields used, with Perfetto's numbers; test_perfetto decodes the output with protoc.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "present/present.h"
#include "exporters/perfetto_internal.h"

/* field numbers (Perfetto's schema) */
enum {
    TRACE_PACKET = 1,
    TP_TIMESTAMP = 8, TP_SEQUENCE_ID = 10, TP_TRACK_EVENT = 11, TP_INTERNED_DATA = 12,
    TP_SEQUENCE_FLAGS = 13, TP_TRACK_DESCRIPTOR = 60,
    TE_CATEGORY_IIDS = 3, TE_DEBUG_ANNOTATIONS = 4, TE_TYPE = 9, TE_NAME_IID = 10,
    TE_TRACK_UUID = 11, TE_DOUBLE_COUNTER_VALUE = 44, TE_FLOW_IDS = 47,
    TE_TERMINATING_FLOW_IDS = 48,
    TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT_UUID = 5, TD_COUNTER = 8,
    PD_PID = 1, PD_PROCESS_NAME = 6,
    THD_PID = 1, THD_TID = 2, THD_THREAD_NAME = 5,
    CD_UNIT_NAME = 6,
    DA_NAME_IID = 1, DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6,
    DA_ARRAY_VALUES = 12, DA_STRING_IID = 17,
};
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2

/* Track uuids: a rank's process, a stream's thread, a stream's counter, the job's track. */
#define UUID_JOB 1ull
static uint64_t uuid_process(uint32_t pid) { return 0x100000000ull | pid; }
static uint64_t uuid_thread(uint32_t tid) { return 0x200000000ull | tid; }
static uint64_t uuid_counter(uint32_t tid) { return 0x300000000ull | tid; }

typedef struct buf {
    unsigned char *b;
    size_t len, cap;
} buf;

/* a held packet of the rank being written: where it lies in `held` and when it sorts */
typedef struct held_packet {
    int64_t ts;
    int64_t key2, key3; /* ends: -begin, inner first; begins: -end, outer first */
    uint8_t phase;      /* 0 end, 1 begin (ends first at one instant) */
    size_t off, len;
    uint64_t order;     /* the order made: last tie-break */
} held_packet;

/* A message being encoded: its bytes and the offsets of its open nested messages' lengths. */
typedef struct enc {
    buf b;
    size_t stack[8];
    int depth;
} enc;

/* Interned strings (InternedData), by kind and content: their iid. */
enum { IK_CATEGORY, IK_EVENT_NAME, IK_ANNOTATION_NAME, IK_STRING_VALUE, IK_KINDS };
typedef struct interned {
    char *s;
    uint64_t hash;
    uint32_t iid;
    uint8_t kind;
} interned;

struct ppw {
    FILE *out;
    int failed;
    int first;
    uint64_t events;
    enc pkt;            /* the packet being made */
    enc news;           /* the InternedData its new strings go into, written before it */
    int nnews;
    interned *tab;      /* open addressing, a power of two */
    size_t ntab, captab;
    uint32_t next_iid[IK_KINDS];
    struct {
        const char *s;
        uint32_t iid;
        uint8_t kind;
    } by_addr[256];
    buf held;           /* the rank's packets, encoded */
    buf ob;             /* what is to be written: a quarter MB at a time (a write a packet
                           was a tenth of the export) */
    held_packet *hp;
    size_t nhp, caphp;
    uint64_t order;
};

static int grow_slow(ppw *w, buf *b, size_t more)
{
    if (cpa_grow((void **)&b->b, &b->cap, b->len + more, 1) == 0)
        return 0;
    w->failed = 1;
    errno = ENOMEM;
    return -1;
}

static inline int grow(ppw *w, buf *b, size_t more)
{
    return b->len + more <= b->cap ? 0 : grow_slow(w, b, more);
}

/* Bytes for the output, written when a quarter MB is gathered (and at the end). */
static void out_flush(ppw *w)
{
    if (!w->failed && w->ob.len && fwrite(w->ob.b, 1, w->ob.len, w->out) != w->ob.len)
        w->failed = 1;
    w->ob.len = 0;
}

static void out_bytes(ppw *w, const void *p, size_t n)
{
    if (w->failed || grow(w, &w->ob, n) != 0)
        return;
    memcpy(w->ob.b + w->ob.len, p, n);
    w->ob.len += n;
    if (w->ob.len >= 256 * 1024)
        out_flush(w);
}

static inline void put_varint(ppw *w, enc *e, uint64_t v)
{
    if (grow(w, &e->b, 10) != 0)
        return;
    unsigned char *q = e->b.b + e->b.len;
    while (v >= 0x80) {
        *q++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *q++ = (unsigned char)v;
    e->b.len = (size_t)(q - e->b.b);
}

static inline void put_tag(ppw *w, enc *e, unsigned field, unsigned wt)
{
    put_varint(w, e, (uint64_t)field << 3 | wt);
}

static inline void put_uint(ppw *w, enc *e, unsigned field, uint64_t v)
{
    put_tag(w, e, field, WT_VARINT);
    put_varint(w, e, v);
}

static void put_fixed64(ppw *w, enc *e, unsigned field, uint64_t v)
{
    put_tag(w, e, field, WT_I64);
    if (grow(w, &e->b, 8) != 0)
        return;
    for (int i = 0; i < 8; i++)
        e->b.b[e->b.len++] = (unsigned char)(v >> (8 * i));
}

static void put_double(ppw *w, enc *e, unsigned field, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_fixed64(w, e, field, v);
}

static void put_bytes(ppw *w, enc *e, unsigned field, const void *s, size_t n)
{
    put_tag(w, e, field, WT_LEN);
    put_varint(w, e, n);
    if (grow(w, &e->b, n) != 0)
        return;
    memcpy(e->b.b + e->b.len, s, n);
    e->b.len += n;
}

static void put_string(ppw *w, enc *e, unsigned field, const char *s)
{
    put_bytes(w, e, field, s, strlen(s));
}

/* A nested message: four bytes are kept for its length, filled in at its end in as few as
 * it needs (the content moved back: most are an annotation of a few bytes, and four-byte
 * lengths were a fifth of the file). */
static void open_msg(ppw *w, enc *e, unsigned field)
{
    put_tag(w, e, field, WT_LEN);
    if (grow(w, &e->b, 4) != 0 || e->depth >= (int)(sizeof e->stack / sizeof e->stack[0])) {
        w->failed = 1;
        return;
    }
    e->stack[e->depth++] = e->b.len;
    e->b.len += 4;
}

static void close_msg(ppw *w, enc *e)
{
    if (w->failed || e->depth <= 0)
        return;
    size_t at = e->stack[--e->depth];
    size_t n = e->b.len - at - 4;
    if (n >= 1u << 28) {
        w->failed = 1;
        errno = EFBIG;
        return;
    }
    size_t k = n < 1u << 7 ? 1 : n < 1u << 14 ? 2 : n < 1u << 21 ? 3 : 4;
    for (size_t i = 0; i < k; i++)
        e->b.b[at + i] = (unsigned char)(((n >> (7 * i)) & 0x7f) | (i + 1 < k ? 0x80 : 0));
    if (k < 4) {
        memmove(e->b.b + at + k, e->b.b + at + 4, n);
        e->b.len -= 4 - k;
    }
}

/* ---- interning: a string said once on the sequence, then its iid ---- */
static uint64_t str_hash(const char *s, uint8_t kind)
{
    uint64_t h = 1469598103934665603ull ^ kind;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int tab_grow(ppw *w)
{
    size_t cap = w->captab ? 2 * w->captab : 1024;
    interned *t = calloc(cap, sizeof *t);
    if (!t) {
        w->failed = 1;
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < w->captab; i++) {
        if (!w->tab[i].s)
            continue;
        size_t k = w->tab[i].hash & (cap - 1);
        while (t[k].s)
            k = (k + 1) & (cap - 1);
        t[k] = w->tab[i];
    }
    free(w->tab);
    w->tab = t;
    w->captab = cap;
    return 0;
}

/* The fields of InternedData for each kind, and of the entry's string. */
static const unsigned intern_field[IK_KINDS] = {1, 2, 3, 29};

/* s's iid among its kind; a new one goes into w->news, which is written before the packet
 * that names it. 0 when it could not be interned (out of memory: failed). */
static uint32_t intern_text(ppw *w, uint8_t kind, const char *s);

/* Annotation names and categories are literals, and a slice's name is an op's static name
 * or "wait": their iids are also kept by address, which spares hashing the text each time
 * (15 names an event). */
static uint32_t intern_static(ppw *w, uint8_t kind, const char *s)
{
    size_t n = sizeof w->by_addr / sizeof w->by_addr[0];
    size_t i = (((uintptr_t)s >> 3) ^ kind) % n;
    if (w->by_addr[i].s == s && w->by_addr[i].kind == kind)
        return w->by_addr[i].iid;
    uint32_t iid = intern_text(w, kind, s);
    w->by_addr[i].s = s;
    w->by_addr[i].kind = kind;
    w->by_addr[i].iid = iid;
    return iid;
}

static uint32_t intern_text(ppw *w, uint8_t kind, const char *s)
{
    if (2 * (w->ntab + 1) > w->captab && tab_grow(w) != 0)
        return 0;
    uint64_t h = str_hash(s, kind);
    size_t k = h & (w->captab - 1);
    for (; w->tab[k].s; k = (k + 1) & (w->captab - 1))
        if (w->tab[k].hash == h && w->tab[k].kind == kind && !strcmp(w->tab[k].s, s))
            return w->tab[k].iid;
    char *copy = strdup(s);
    if (!copy) {
        w->failed = 1;
        errno = ENOMEM;
        return 0;
    }
    uint32_t iid = ++w->next_iid[kind];
    w->tab[k] = (interned){copy, h, iid, kind};
    w->ntab++;
    if (!w->nnews++) {
        w->news.b.len = 0;
        w->news.depth = 0;
        open_msg(w, &w->news, TRACE_PACKET);
        put_uint(w, &w->news, TP_SEQUENCE_ID, 1);
        put_uint(w, &w->news, TP_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        open_msg(w, &w->news, TP_INTERNED_DATA);
    }
    open_msg(w, &w->news, intern_field[kind]);
    put_uint(w, &w->news, 1, iid); /* EventCategory, EventName, DebugAnnotationName, InternedString: iid */
    put_string(w, &w->news, 2, s); /* ... name, name, name, str */
    close_msg(w, &w->news);
    return iid;
}

/* The strings the packet made in w->pkt interned first: written now, ahead of it. */
static void write_news(ppw *w)
{
    if (!w->nnews)
        return;
    w->nnews = 0;
    close_msg(w, &w->news);
    close_msg(w, &w->news);
    out_bytes(w, w->news.b.b, w->news.b.len);
}

/* A TracePacket (the Trace's field 1) opened in w->pkt, which starts empty. */
static void packet_begin(ppw *w, int64_t ts, int interning)
{
    enc *e = &w->pkt;
    e->b.len = 0;
    e->depth = 0;
    open_msg(w, e, TRACE_PACKET);
    if (ts >= 0)
        put_uint(w, e, TP_TIMESTAMP, (uint64_t)ts);
    put_uint(w, e, TP_SEQUENCE_ID, 1);
    if (w->first) {
        /* the first packet: a sequence whose interned strings start here */
        put_uint(w, e, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        w->first = 0;
    } else if (interning) {
        put_uint(w, e, TP_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
    }
}

static void packet_write(ppw *w)
{
    close_msg(w, &w->pkt);
    write_news(w);
    out_bytes(w, w->pkt.b.b, w->pkt.b.len);
}

ppw *cpx_ppw_new(FILE *out)
{
    ppw *w = calloc(1, sizeof *w);
    if (w) {
        w->out = out;
        w->first = 1;
    }
    return w;
}

/* Strings that repeat across events are interned; these are one call's own. */
static int repeats(const pf_arg *a)
{
#define IS_KEY(a, lit) ((a)->keylen == sizeof(lit) - 1 && !memcmp((a)->key, lit, sizeof(lit) - 1))
    return !IS_KEY(a, "kernels_before") && !IS_KEY(a, "last");
#undef IS_KEY
}

static void annotation(ppw *w, const pf_arg *a)
{
    enc *e = &w->pkt;
    open_msg(w, e, TE_DEBUG_ANNOTATIONS);
    put_uint(w, e, DA_NAME_IID, intern_static(w, IK_ANNOTATION_NAME, a->key));
    char us[32];
    switch (a->kind) {
    case PA_STR:
        if (a->s_static)
            put_uint(w, e, DA_STRING_IID, intern_static(w, IK_STRING_VALUE, a->s));
        else if (repeats(a))
            put_uint(w, e, DA_STRING_IID, intern_text(w, IK_STRING_VALUE, a->s));
        else
            put_string(w, e, DA_STRING, a->s);
        break;
    case PA_U64: put_uint(w, e, DA_UINT, a->u); break;
    case PA_I64: put_uint(w, e, DA_INT, (uint64_t)a->i); break;
    /* the JSON's microseconds with three decimals, as the same text: a double would not
     * keep every nanosecond of a long job's times */
    case PA_US: put_string(w, e, DA_STRING, cpr_fmt_ns_us(us, a->i)); break;
    case PA_BOOL: put_uint(w, e, DA_BOOL, a->u != 0); break;
    case PA_NUM3: put_double(w, e, DA_DOUBLE, a->d); break;
    case PA_INTS:
        for (size_t i = 0; i < a->n; i++) {
            open_msg(w, e, DA_ARRAY_VALUES);
            put_uint(w, e, DA_INT, (uint64_t)(int64_t)a->v[i]);
            close_msg(w, e);
        }
        break;
    }
    close_msg(w, e);
}

/* A track event's name and category, interned; name_static: the name is a literal. */
static void event_names(ppw *w, const char *name, const char *cat, int name_static)
{
    put_uint(w, &w->pkt, TE_CATEGORY_IIDS, intern_static(w, IK_CATEGORY, cat));
    put_uint(w, &w->pkt, TE_NAME_IID, name_static ? intern_static(w, IK_EVENT_NAME, name)
                                                  : intern_text(w, IK_EVENT_NAME, name));
}

void cpx_ppw_job(ppw *w, const pf_arg *args, size_t nargs)
{
    if (!w || w->failed)
        return;
    enc *e = &w->pkt;
    packet_begin(w, -1, 0);
    open_msg(w, e, TP_TRACK_DESCRIPTOR);
    put_uint(w, e, TD_UUID, UUID_JOB);
    put_string(w, e, TD_NAME, "collprof");
    close_msg(w, e);
    packet_write(w);
    packet_begin(w, 0, 1);
    open_msg(w, e, TP_TRACK_EVENT);
    put_uint(w, e, TE_TYPE, TYPE_INSTANT);
    put_uint(w, e, TE_TRACK_UUID, UUID_JOB);
    event_names(w, "job", "collprof", 1);
    for (size_t i = 0; i < nargs; i++)
        annotation(w, &args[i]);
    close_msg(w, e);
    packet_write(w);
}

void cpx_ppw_process(ppw *w, uint32_t pid, const char *name)
{
    if (!w || w->failed)
        return;
    enc *e = &w->pkt;
    packet_begin(w, -1, 0);
    open_msg(w, e, TP_TRACK_DESCRIPTOR);
    put_uint(w, e, TD_UUID, uuid_process(pid));
    open_msg(w, e, TD_PROCESS);
    put_uint(w, e, PD_PID, pid);
    put_string(w, e, PD_PROCESS_NAME, name);
    close_msg(w, e);
    close_msg(w, e);
    packet_write(w);
}

void cpx_ppw_thread(ppw *w, uint32_t pid, uint32_t tid, const char *name)
{
    if (!w || w->failed)
        return;
    enc *e = &w->pkt;
    packet_begin(w, -1, 0);
    open_msg(w, e, TP_TRACK_DESCRIPTOR);
    put_uint(w, e, TD_UUID, uuid_thread(tid));
    put_uint(w, e, TD_PARENT_UUID, uuid_process(pid));
    open_msg(w, e, TD_THREAD);
    put_uint(w, e, THD_PID, pid);
    put_uint(w, e, THD_TID, tid);
    put_string(w, e, THD_THREAD_NAME, name);
    close_msg(w, e);
    close_msg(w, e);
    packet_write(w);
    char cname[320];
    snprintf(cname, sizeof cname, "%s busbw GB/s", name);
    packet_begin(w, -1, 0);
    open_msg(w, e, TP_TRACK_DESCRIPTOR);
    put_uint(w, e, TD_UUID, uuid_counter(tid));
    put_uint(w, e, TD_PARENT_UUID, uuid_process(pid));
    put_string(w, e, TD_NAME, cname);
    open_msg(w, e, TD_COUNTER);
    put_string(w, e, CD_UNIT_NAME, "GB/s");
    close_msg(w, e);
    close_msg(w, e);
    packet_write(w);
}

/* The packet in w->pkt kept for the rank's sorted write (its interned strings written now,
 * ahead of it). */
static void hold(ppw *w, int64_t ts, uint8_t phase, int64_t key2, int64_t key3)
{
    close_msg(w, &w->pkt);
    write_news(w);
    if (w->failed)
        return;
    if (cpa_grow((void **)&w->hp, &w->caphp, w->nhp + 1, sizeof *w->hp) != 0) {
        w->failed = 1;
        errno = ENOMEM;
        return;
    }
    if (grow(w, &w->held, w->pkt.b.len) != 0)
        return;
    memcpy(w->held.b + w->held.len, w->pkt.b.b, w->pkt.b.len);
    w->hp[w->nhp++] = (held_packet){ts, key2, key3, phase, w->held.len, w->pkt.b.len, w->order++};
    w->held.len += w->pkt.b.len;
}

static void counter(ppw *w, const pf_event *e, int64_t ts, double v, uint8_t phase)
{
    packet_begin(w, ts, 0);
    open_msg(w, &w->pkt, TP_TRACK_EVENT);
    put_uint(w, &w->pkt, TE_TYPE, TYPE_COUNTER);
    put_uint(w, &w->pkt, TE_TRACK_UUID, uuid_counter(e->tid));
    put_double(w, &w->pkt, TE_DOUBLE_COUNTER_VALUE, v);
    close_msg(w, &w->pkt);
    hold(w, ts, phase, phase ? -(ts + e->dur) : -e->ts, 2);
}

void cpx_ppw_event(ppw *w, const pf_event *e)
{
    if (!w || w->failed)
        return;
    int instant = e->ph == 'i';
    enc *p = &w->pkt;
    packet_begin(w, e->ts, 1);
    open_msg(w, p, TP_TRACK_EVENT);
    put_uint(w, p, TE_TYPE, instant ? TYPE_INSTANT : TYPE_SLICE_BEGIN);
    put_uint(w, p, TE_TRACK_UUID, instant ? uuid_process(e->pid) : uuid_thread(e->tid));
    event_names(w, e->name, e->cat, !instant);
    for (size_t i = 0; i < e->nargs; i++)
        annotation(w, &e->args[i]);
    if (e->bind_id)
        put_fixed64(w, p, e->flow_out ? TE_FLOW_IDS : TE_TERMINATING_FLOW_IDS, e->bind_id);
    close_msg(w, p);
    if (instant) { /* nothing nests in an instant: written as it comes */
        packet_write(w);
        if (!w->failed)
            w->events++;
        return;
    }
    /* begins: the longer first, a call before its wait; ends: the reverse. A slice of no
     * length sorts as a begin with its end right after it (ends come before begins). */
    int64_t te = e->ts + e->dur;
    uint64_t id = w->order;
    hold(w, e->ts, 1, -te, e->dur ? e->is_wait : 4 + 2 * (int64_t)id);
    packet_begin(w, te, 0);
    open_msg(w, p, TP_TRACK_EVENT);
    put_uint(w, p, TE_TYPE, TYPE_SLICE_END);
    put_uint(w, p, TE_TRACK_UUID, uuid_thread(e->tid));
    close_msg(w, p);
    if (e->dur)
        hold(w, te, 0, -e->ts, !e->is_wait);
    else
        hold(w, te, 1, -te, 5 + 2 * (int64_t)id);
    if (e->busbw_gbps >= 0) {
        counter(w, e, e->ts, e->busbw_gbps, 1);
        counter(w, e, e->ts + e->dur, 0, 0);
    }
    if (!w->failed)
        w->events++;
}

static int cmp_held(const void *x, const void *y)
{
    const held_packet *a = x, *b = y;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->phase != b->phase)
        return a->phase < b->phase ? -1 : 1;
    if (a->key2 != b->key2)
        return a->key2 < b->key2 ? -1 : 1;
    if (a->key3 != b->key3)
        return a->key3 < b->key3 ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* The rank's held packets in cmp_held's order: a stable radix sort by time (they were held
 * in `order`, the last tie-break), then each run of one instant, a few packets, by the rest
 * of the key (qsort through cmp_held was a tenth of the protobuf export). */
static int sort_held(ppw *w)
{
    size_t n = w->nhp;
    cpa_kv *kv = malloc(2 * n * sizeof *kv);
    if (!kv)
        return -1;
    for (size_t i = 0; i < n; i++)
        kv[i] = (cpa_kv){(uint64_t)w->hp[i].ts ^ (1ull << 63), i};
    cpa_sort_kv(kv, kv + n, n);
    held_packet *sorted = malloc(n * sizeof *sorted);
    if (!sorted) {
        free(kv);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = w->hp[kv[i].val];
    free(kv);
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && sorted[hi].ts == sorted[lo].ts; hi++)
            ;
        if (hi - lo > 32) { /* a crowded instant: not one for insertion */
            qsort(sorted + lo, hi - lo, sizeof *sorted, cmp_held);
            continue;
        }
        for (size_t i = lo + 1; i < hi; i++) {
            held_packet v = sorted[i];
            size_t j = i;
            for (; j > lo && cmp_held(&sorted[j - 1], &v) > 0; j--)
                sorted[j] = sorted[j - 1];
            sorted[j] = v;
        }
    }
    free(w->hp);
    w->hp = sorted;
    w->caphp = n;
    return 0;
}

void cpx_ppw_rank_end(ppw *w)
{
    if (!w || w->failed)
        return;
    if (w->nhp && sort_held(w) != 0)
        qsort(w->hp, w->nhp, sizeof *w->hp, cmp_held); /* out of memory for the radix's */
    for (size_t i = 0; i < w->nhp && !w->failed; i++)
        out_bytes(w, w->held.b + w->hp[i].off, w->hp[i].len);
    w->nhp = 0;
    w->held.len = 0;
}

int cpx_ppw_close(ppw *w, uint64_t *events)
{
    *events = 0;
    if (!w)
        return -1;
    cpx_ppw_rank_end(w);
    out_flush(w);
    int rc = w->failed ? -1 : 0;
    *events = w->events;
    for (size_t i = 0; i < w->captab; i++)
        free(w->tab[i].s);
    free(w->tab);
    free(w->pkt.b.b);
    free(w->news.b.b);
    free(w->held.b);
    free(w->ob.b);
    free(w->hp);
    free(w);
    return rc;
}
