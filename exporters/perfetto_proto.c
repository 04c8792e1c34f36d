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
 * from the JSON writer. A nested message keeps the bytes its length will most likely take
 * (one for an annotation, two for a slice's begin) and is written in one pass; at its end
 * the length takes the bytes it needs, the content moved only when that is not what was kept
 * (four bytes each, as Perfetto's protozero keeps, were a fifth of the file). The rank's
 * packets are encoded where they are held, and the hot ones (annotations, a slice's end, a
 * counter) through a cursor after one check of the room. tests/exporters/perfetto.proto has
 * the fields used, with Perfetto's numbers; test_perfetto decodes the output with protoc.
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
    TE_TRACK_UUID = 11, TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS = 45,
    TE_EXTRA_DOUBLE_COUNTER_VALUES = 46, TE_FLOW_IDS = 47,
    TE_TERMINATING_FLOW_IDS = 48,
    TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT_UUID = 5, TD_COUNTER = 8,
    PD_PID = 1, PD_PROCESS_NAME = 6,
    THD_PID = 1, THD_TID = 2, THD_THREAD_NAME = 5,
    CD_UNIT_NAME = 6,
    DA_NAME_IID = 1, DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6,
    DA_ARRAY_VALUES = 12, DA_STRING_IID = 17,
};
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2

/* Track uuids: the job's track, a rank's process, a stream's thread and its counter, told
 * apart by their value mod 4. Small numbers: a slice names its track twice and its counter
 * twice, and a uuid with the kind in bit 33 took five bytes each time. */
#define UUID_JOB 1ull
static uint64_t uuid_process(uint32_t pid) { return 4 * (uint64_t)pid + 4; }
static uint64_t uuid_thread(uint32_t tid) { return 4 * (uint64_t)tid + 2; }
static uint64_t uuid_counter(uint32_t tid) { return 4 * (uint64_t)tid + 3; }

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

/* A message being encoded: its bytes and, per open nested message, where its length goes
 * and the bytes kept for it. */
typedef struct enc {
    buf b;
    struct {
        size_t at;
        uint8_t kept;
    } stack[8];
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
    enc pkt;            /* the rank's packets, held (encoded in place, from `pstart` the one
                           being made): a packet written as it comes leaves it at its end */
    size_t pstart;
    enc news;           /* the InternedData its new strings go into, written before it */
    int nnews;
    interned *tab;      /* open addressing, a power of two */
    size_t ntab, captab;
    uint32_t next_iid[IK_KINDS];
    struct {
        const char *s;
        uint32_t iid;
        uint8_t kind;
    } by_addr[1024];
    /* the last slots of `tab` that strings at these addresses found: a call's comm and site
       come from a few buffers whose text seldom changes (hashing them was a tenth of the
       export); the text is compared before the slot is taken */
    struct {
        const char *s;
        size_t slot;
    } by_text_addr[64];
    /* whole annotations of a key and a static name (op, dtype, timing: the same bytes in
       most events) or a string its sid names (comm, site), and the name part of each key's
       others: made once (interning lookups, two an annotation, and the strcmp of a site's
       text were a sixth of the writer) */
    struct {
        const char *key;
        uint64_t ident;          /* the static name's address, or the arg's sid */
        uint8_t by_sid;
        uint8_t len;
        unsigned char bytes[16]; /* copied whole */
    } by_pair[64];
    struct {
        const char *key;
        uint8_t len;
        unsigned char bytes[8];  /* DA_NAME_IID's tag and iid; copied whole */
    } by_key[64];
    pf_run_cache runs;  /* the annotations of a call's runs (pf_event.run_*), kept whole */
    buf ob;             /* what is to be written: a quarter MB at a time (a write a packet
                           was a tenth of the export) */
    held_packet *hp;
    size_t nhp, caphp;
    cpa_kv *kv;         /* the held packets' sort keys, with room for twice as many: kept
                           from rank to rank (a fresh mapping each rank was faulted in page by
                           page) */
    size_t capkv;
    uint64_t order;
    /* a call's end, held after the wait nested in it (when one follows): a rank's packets are
       then held nearly in the order written, and written from where they are held, in runs */
    struct {
        int set;
        int64_t ts, key2, key3;
        uint64_t track, counter;
        uint8_t phase;
    } pend;
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

/* A run of bytes of any size: a long one written from where it is, after what is gathered. */
static void out_run(ppw *w, const void *p, size_t n)
{
    if (n < 64 * 1024) {
        out_bytes(w, p, n);
        return;
    }
    out_flush(w);
    if (!w->failed && fwrite(p, 1, n, w->out) != n)
        w->failed = 1;
}

/* The hot paths grow the buffer once for what they write and then write through a cursor. */
static inline unsigned char *wr_varint(unsigned char *q, uint64_t v)
{
    while (v >= 0x80) {
        *q++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *q++ = (unsigned char)v;
    return q;
}

static inline size_t varint_len(uint64_t v)
{
    size_t k = 1;
    for (; v >= 0x80; v >>= 7)
        k++;
    return k;
}

/* Little-endian, as protobuf's fixed64 is: one store where the machine is (gcc -O2 left
 * the byte loop a loop: a fiftieth of the export). */
static inline unsigned char *wr_fixed64(unsigned char *q, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(q, &v, 8);
    return q + 8;
#else
    for (int i = 0; i < 8; i++)
        *q++ = (unsigned char)(v >> (8 * i));
    return q;
#endif
}

static inline void put_varint(ppw *w, enc *e, uint64_t v)
{
    if (grow(w, &e->b, 10) != 0)
        return;
    e->b.len = (size_t)(wr_varint(e->b.b + e->b.len, v) - e->b.b);
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
    e->b.len = (size_t)(wr_fixed64(e->b.b + e->b.len, v) - e->b.b);
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

/* A nested message: `kept` bytes are kept for its length, which is known at its end and
 * takes the bytes it needs there (the content moved when that is not what was kept: four
 * bytes each, as Perfetto's protozero keeps, were a fifth of the file, and moving every
 * message's content back was a tenth of the export). */
static void open_msg_kept(ppw *w, enc *e, unsigned field, uint8_t kept)
{
    if (grow(w, &e->b, 5 + kept) != 0 || e->depth >= (int)(sizeof e->stack / sizeof e->stack[0])) {
        w->failed = 1;
        return;
    }
    e->b.len = (size_t)(wr_varint(e->b.b + e->b.len, (uint64_t)field << 3 | WT_LEN) - e->b.b);
    e->stack[e->depth].at = e->b.len;
    e->stack[e->depth++].kept = kept;
    e->b.len += kept;
}

static void open_msg(ppw *w, enc *e, unsigned field)
{
    open_msg_kept(w, e, field, 1);
}

/* The length of the content at at + kept, in the bytes it needs; 0, or -1 (failed). */
static int set_len_slow(ppw *w, enc *e, size_t at, size_t kept)
{
    size_t n = e->b.len - at - kept;
    if (n >= 1u << 28) {
        w->failed = 1;
        errno = EFBIG;
        return -1;
    }
    size_t k = varint_len(n);
    if (k != kept) {
        if (k > kept && grow(w, &e->b, k - kept) != 0)
            return -1;
        memmove(e->b.b + at + k, e->b.b + at + kept, n);
        e->b.len = e->b.len + k - kept;
    }
    wr_varint(e->b.b + at, n);
    return 0;
}

static inline int set_len(ppw *w, enc *e, size_t at, size_t kept)
{
    size_t n = e->b.len - at - kept;
    if (kept == 1 && n < 0x80) { /* most: an annotation */
        e->b.b[at] = (unsigned char)n;
        return 0;
    }
    if (kept == 2 && n >= 0x80 && n < 0x4000) { /* a slice's begin */
        e->b.b[at] = (unsigned char)(n | 0x80);
        e->b.b[at + 1] = (unsigned char)(n >> 7);
        return 0;
    }
    return set_len_slow(w, e, at, kept);
}

static void close_msg(ppw *w, enc *e)
{
    if (w->failed || e->depth <= 0)
        return;
    e->depth--;
    set_len(w, e, e->stack[e->depth].at, e->stack[e->depth].kept);
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
    memset(w->by_text_addr, 0, sizeof w->by_text_addr); /* the slots moved */
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
static uint32_t intern_static_slow(ppw *w, uint8_t kind, const char *s, size_t i);

static inline uint32_t intern_static(ppw *w, uint8_t kind, const char *s)
{
    size_t i = cpx_addr_slot(s, kind, sizeof w->by_addr / sizeof w->by_addr[0]);
    if (w->by_addr[i].s == s && w->by_addr[i].kind == kind)
        return w->by_addr[i].iid;
    return intern_static_slow(w, kind, s, i);
}

static uint32_t intern_static_slow(ppw *w, uint8_t kind, const char *s, size_t i)
{
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
    size_t ai = cpx_addr_slot(s, kind, sizeof w->by_text_addr / sizeof w->by_text_addr[0]);
    if (w->by_text_addr[ai].s == s) {
        const interned *t = &w->tab[w->by_text_addr[ai].slot];
        if (t->s && t->kind == kind && !strcmp(t->s, s))
            return t->iid;
    }
    uint64_t h = str_hash(s, kind);
    size_t k = h & (w->captab - 1);
    for (; w->tab[k].s; k = (k + 1) & (w->captab - 1))
        if (w->tab[k].hash == h && w->tab[k].kind == kind && !strcmp(w->tab[k].s, s)) {
            w->by_text_addr[ai].s = s;
            w->by_text_addr[ai].slot = k;
            return w->tab[k].iid;
        }
    char *copy = strdup(s);
    if (!copy) {
        w->failed = 1;
        errno = ENOMEM;
        return 0;
    }
    uint32_t iid = ++w->next_iid[kind];
    w->tab[k] = (interned){copy, h, iid, kind};
    w->ntab++;
    w->by_text_addr[ai].s = s;
    w->by_text_addr[ai].slot = k;
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

/* A packet's own fields after its opening, at q (16 bytes of room): its time (none when ts <
 * 0), the sequence, and the sequence's flags: the first packet starts a sequence whose
 * interned strings start there, one that interns needs that state. Returns the end. */
static inline unsigned char *wr_packet_fields(ppw *w, unsigned char *q, int64_t ts,
                                              int interning)
{
    if (ts >= 0) {
        *q++ = TP_TIMESTAMP << 3 | WT_VARINT;
        q = wr_varint(q, (uint64_t)ts);
    }
    *q++ = TP_SEQUENCE_ID << 3 | WT_VARINT;
    *q++ = 1;
    if (w->first || interning) {
        *q++ = TP_SEQUENCE_FLAGS << 3 | WT_VARINT;
        *q++ = w->first ? SEQ_INCREMENTAL_STATE_CLEARED : SEQ_NEEDS_INCREMENTAL_STATE;
        w->first = 0;
    }
    return q;
}

/* A TrackEvent's type and track at q (13 bytes of room); returns the end. */
static inline unsigned char *wr_track_fields(unsigned char *q, unsigned type, uint64_t track)
{
    *q++ = TE_TYPE << 3 | WT_VARINT;
    *q++ = (unsigned char)type;
    *q++ = TE_TRACK_UUID << 3 | WT_VARINT;
    return wr_varint(q, track);
}

/* A TracePacket (the Trace's field 1) opened at the end of w->pkt. A packet that interns
 * (a slice's begin, an instant) is a hundred bytes or more: two bytes are kept for its
 * length; one for the others. */
static void packet_begin(ppw *w, int64_t ts, int interning)
{
    enc *e = &w->pkt;
    e->depth = 0;
    w->pstart = e->b.len;
    open_msg_kept(w, e, TRACE_PACKET, interning ? 2 : 1);
    if (grow(w, &e->b, 16) != 0)
        return;
    e->b.len = (size_t)(wr_packet_fields(w, e->b.b + e->b.len, ts, interning) - e->b.b);
}

/* The packet made, written now (after the strings it interned), not held. */
static void packet_write(ppw *w)
{
    close_msg(w, &w->pkt);
    write_news(w);
    out_bytes(w, w->pkt.b.b + w->pstart, w->pkt.b.len - w->pstart);
    w->pkt.b.len = w->pstart;
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

static void annotation_made(ppw *w, const pf_arg *a);

/* A DebugAnnotation: copied whole when a pair of by_pair holds it, else made. */
static void annotation(ppw *w, const pf_arg *a)
{
    enc *e = &w->pkt;
    size_t n = sizeof w->by_pair / sizeof w->by_pair[0];
    if (a->kind == PA_STR && (a->s_static || a->has_sid)) {
        uint64_t ident = a->s_static ? (uint64_t)(uintptr_t)a->s : a->sid;
        uint8_t by_sid = !a->s_static;
        size_t k = cpx_addr_slot(a->key, ident * 0x9e3779b97f4a7c15ull + by_sid, n);
        if (w->by_pair[k].key == a->key && w->by_pair[k].ident == ident &&
            w->by_pair[k].by_sid == by_sid) {
            if (grow(w, &e->b, sizeof w->by_pair[k].bytes) != 0)
                return;
            memcpy(e->b.b + e->b.len, w->by_pair[k].bytes, sizeof w->by_pair[k].bytes);
            e->b.len += w->by_pair[k].len;
            return;
        }
        size_t at = e->b.len;
        annotation_made(w, a);
        size_t len = e->b.len - at;
        if (!w->failed && len <= sizeof w->by_pair[k].bytes) {
            w->by_pair[k].key = a->key;
            w->by_pair[k].ident = ident;
            w->by_pair[k].by_sid = by_sid;
            w->by_pair[k].len = (uint8_t)len;
            memcpy(w->by_pair[k].bytes, e->b.b + at, len);
        }
        return;
    }
    annotation_made(w, a);
}

/* An annotation's name: DA_NAME_IID's tag and the key's iid, kept by the key's address
 * (the entry, whose bytes are copied whole). */
static const unsigned char *annotation_name(ppw *w, const char *key, size_t *len)
{
    size_t k = cpx_addr_slot(key, 0, sizeof w->by_key / sizeof w->by_key[0]);
    if (w->by_key[k].key != key) {
        unsigned char *b = w->by_key[k].bytes;
        b[0] = DA_NAME_IID << 3 | WT_VARINT;
        w->by_key[k].len =
            (uint8_t)(wr_varint(b + 1, intern_static(w, IK_ANNOTATION_NAME, key)) - b);
        w->by_key[k].key = w->failed ? NULL : key;
    }
    *len = w->by_key[k].len;
    return w->by_key[k].bytes;
}

/* A DebugAnnotation made: written through a cursor after one grow (it was a nested message
 * of puts, each checking the room left: a quarter of the export). Its length almost always
 * takes one byte. */
static void annotation_made(ppw *w, const pf_arg *a)
{
    enc *e = &w->pkt;
    size_t nlen;
    const unsigned char *name = annotation_name(w, a->key, &nlen); /* interned first */
    uint32_t sv = 0;
    const char *text = NULL;
    size_t tlen = 0;
    switch (a->kind) {
    case PA_STR:
        if (a->s_static)
            sv = intern_static(w, IK_STRING_VALUE, a->s);
        else if (repeats(a))
            sv = intern_text(w, IK_STRING_VALUE, a->s);
        else
            tlen = strlen(text = a->s);
        break;
    default: break;
    }
    /* tag and length (2), name (6), a value: a tag (2) and a varint or fixed64 (10), or a
     * text's tag, length (11) and bytes (a time's at most 21); each array value (13) */
    size_t need = 48 + tlen + (a->kind == PA_INTS ? 13 * a->n : 0);
    if (grow(w, &e->b, need) != 0)
        return;
    unsigned char *q = e->b.b + e->b.len, *lp;
    *q++ = TE_DEBUG_ANNOTATIONS << 3 | WT_LEN;
    lp = q++;
    memcpy(q, name, sizeof w->by_key[0].bytes);
    q += nlen;
    switch (a->kind) {
    case PA_STR:
        if (!text) {
            q = wr_varint(q, DA_STRING_IID << 3 | WT_VARINT);
            q = wr_varint(q, sv);
        } else {
            *q++ = DA_STRING << 3 | WT_LEN;
            q = wr_varint(q, tlen);
            memcpy(q, text, tlen);
            q += tlen;
        }
        break;
    /* the JSON's microseconds with three decimals, as the same text: a double would not
     * keep every nanosecond of a long job's times */
    case PA_US: {
        *q++ = DA_STRING << 3 | WT_LEN;
        unsigned char *sl = q++;
        q = (unsigned char *)cpr_put_ns_us((char *)q, a->i);
        *sl = (unsigned char)(q - sl - 1); /* at most 25 */
        break;
    }
    case PA_U64: *q++ = DA_UINT << 3 | WT_VARINT; q = wr_varint(q, a->u); break;
    case PA_I64: *q++ = DA_INT << 3 | WT_VARINT; q = wr_varint(q, (uint64_t)a->i); break;
    case PA_BOOL: *q++ = DA_BOOL << 3 | WT_VARINT; *q++ = a->u != 0; break;
    case PA_NUM3: {
        uint64_t v;
        memcpy(&v, &a->d, sizeof v);
        *q++ = DA_DOUBLE << 3 | WT_I64;
        q = wr_fixed64(q, v);
        break;
    }
    case PA_INTS:
        for (size_t i = 0; i < a->n; i++) {
            *q++ = DA_ARRAY_VALUES << 3 | WT_LEN;
            unsigned char *vl = q++;
            *q++ = DA_INT << 3 | WT_VARINT;
            q = wr_varint(q, (uint64_t)(int64_t)a->v[i]);
            *vl = (unsigned char)(q - vl - 1); /* at most 11 */
        }
        break;
    }
    e->b.len = (size_t)(q - e->b.b);
    set_len(w, e, (size_t)(lp - e->b.b), 1);
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
    close_msg(w, &w->pkt); /* nothing when it was written closed */
    write_news(w);
    if (w->failed)
        return;
    if ((w->nhp == w->caphp &&
         cpa_grow((void **)&w->hp, &w->caphp, w->nhp + 1, sizeof *w->hp) != 0) ||
        (2 * w->nhp + 2 > w->capkv &&
         cpa_grow((void **)&w->kv, &w->capkv, 2 * w->nhp + 2, sizeof *w->kv) != 0)) {
        w->failed = 1;
        errno = ENOMEM;
        return;
    }
    /* its sort key made now, while the packet is at hand (a pass over the rank's packets
       at its end read them back from memory) */
    w->kv[w->nhp] = (cpa_kv){(uint64_t)ts ^ (1ull << 63), w->nhp};
    w->hp[w->nhp++] = (held_packet){ts, key2, key3, phase, w->pstart,
                                    w->pkt.b.len - w->pstart, w->order++};
}

/* A TrackEvent of this type on this track opened in the packet. */
static void track_event(ppw *w, unsigned type, uint64_t track, uint8_t kept)
{
    enc *e = &w->pkt;
    open_msg_kept(w, e, TP_TRACK_EVENT, kept);
    if (grow(w, &e->b, 16) != 0)
        return;
    e->b.len = (size_t)(wr_track_fields(e->b.b + e->b.len, type, track) - e->b.b);
}

/* A counter's value v on track counter, as a TrackEvent's extra counter (Perfetto's way to
 * give counters a value at a slice's begin and end without packets of their own), written at
 * q; returns the end (22 bytes at most: two-byte tags). */
static unsigned char *wr_extra_counter(unsigned char *q, uint64_t counter, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    q = wr_varint(q, TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS << 3 | WT_VARINT);
    q = wr_varint(q, counter);
    q = wr_varint(q, TE_EXTRA_DOUBLE_COUNTER_VALUES << 3 | WT_I64);
    return wr_fixed64(q, bits);
}

/* A slice's end, held: a packet of under 128 bytes that interns nothing, written in one go
 * (through packet_begin, track_event and the puts, each of the two a call cost what a slice's
 * begin with its annotations did). counter: the track given v at the end (0: none). */
static void small_packet(ppw *w, int64_t ts, unsigned type, uint64_t track, uint64_t counter,
                         double v, uint8_t phase, int64_t key2, int64_t key3)
{
    enc *e = &w->pkt;
    if (w->first || ts < 0) { /* not on this path: the first packet flags the sequence */
        packet_begin(w, ts, 0);
        track_event(w, type, track, 1);
        if (counter && grow(w, &e->b, 24) == 0)
            e->b.len = (size_t)(wr_extra_counter(e->b.b + e->b.len, counter, v) - e->b.b);
        close_msg(w, e);
        hold(w, ts, phase, key2, key3);
        return;
    }
    /* framing 8, a time and a track 22, an extra counter 22: 52 at most */
    if (grow(w, &e->b, 64) != 0)
        return;
    w->pstart = e->b.len;
    e->depth = 0;
    unsigned char *p0 = e->b.b + e->b.len, *q = p0;
    *q++ = TRACE_PACKET << 3 | WT_LEN;
    unsigned char *plen = q++;
    q = wr_packet_fields(w, q, ts, 0);
    *q++ = TP_TRACK_EVENT << 3 | WT_LEN;
    unsigned char *tlen = q++;
    q = wr_track_fields(q, type, track);
    if (counter)
        q = wr_extra_counter(q, counter, v);
    *tlen = (unsigned char)(q - tlen - 1); /* each under 64 */
    *plen = (unsigned char)(q - plen - 1);
    e->b.len += (size_t)(q - p0);
    hold(w, ts, phase, key2, key3);
}

/* A TracePacket and its TrackEvent opened at the end of w->pkt, up to the event's name, in
 * one go (packet_begin, track_event and event_names' puts each checked the room and kept the
 * length: a fifth of the writer); kept: the bytes kept for each of the two lengths. */
static void event_head(ppw *w, int64_t ts, unsigned type, uint64_t track, uint32_t cat,
                       uint32_t name, uint8_t kept)
{
    enc *e = &w->pkt;
    e->depth = 0;
    w->pstart = e->b.len;
    /* framing 2 x 3, a time 11, the sequence 4, type and track 13, names 12 */
    if (grow(w, &e->b, 64) != 0)
        return;
    unsigned char *b = e->b.b, *q = b + e->b.len;
    *q++ = TRACE_PACKET << 3 | WT_LEN;
    e->stack[0].at = (size_t)(q - b);
    e->stack[0].kept = kept;
    q += kept;
    q = wr_packet_fields(w, q, ts, 1);
    *q++ = TP_TRACK_EVENT << 3 | WT_LEN;
    e->stack[1].at = (size_t)(q - b);
    e->stack[1].kept = kept;
    q += kept;
    q = wr_track_fields(q, type, track);
    *q++ = TE_CATEGORY_IIDS << 3 | WT_VARINT;
    q = wr_varint(q, cat);
    *q++ = TE_NAME_IID << 3 | WT_VARINT;
    q = wr_varint(q, name);
    e->depth = 2;
    e->b.len = (size_t)(q - b);
}

/* The call's end kept back for its wait, held now. */
static void pend_hold(ppw *w)
{
    if (!w->pend.set)
        return;
    w->pend.set = 0;
    small_packet(w, w->pend.ts, TYPE_SLICE_END, w->pend.track, w->pend.counter, 0,
                 w->pend.phase, w->pend.key2, w->pend.key3);
}

void cpx_ppw_event(ppw *w, const pf_event *e)
{
    if (!w || w->failed)
        return;
    if (!e->is_wait) /* no wait followed the call before */
        pend_hold(w);
    int instant = e->ph == 'i';
    enc *p = &w->pkt;
    uint32_t cat = intern_static(w, IK_CATEGORY, e->cat);
    uint32_t name = instant ? intern_text(w, IK_EVENT_NAME, e->name)
                            : intern_static(w, IK_EVENT_NAME, e->name);
    /* a call's slice, a hundred bytes and more, keeps two bytes for each length; a wait or
     * an instant of a few args one (keeping two, each of their lengths moved its content) */
    event_head(w, e->ts, instant ? TYPE_INSTANT : TYPE_SLICE_BEGIN,
               instant ? uuid_process(e->pid) : uuid_thread(e->tid), cat, name,
               e->nargs > 4 ? 2 : 1);
    size_t run_len = 0, run_at = 0;
    const unsigned char *run = cpx_run_find(&w->runs, e, &run_len);
    for (size_t i = 0; i < e->nargs; i++) {
        if (i == e->run_from && e->run_to > e->run_from) {
            if (run) { /* annotations stand alone: their bytes fit anywhere in an event */
                if (grow(w, &p->b, run_len) != 0)
                    return;
                memcpy(p->b.b + p->b.len, run, run_len);
                p->b.len += run_len;
                i = e->run_to - 1;
                continue;
            }
            run_at = p->b.len;
        }
        annotation(w, &e->args[i]);
        if (i + 1 == e->run_to && !w->failed)
            cpx_run_keep(&w->runs, e, p->b.b + run_at, p->b.len - run_at);
    }
    if (e->bind_id)
        put_fixed64(w, p, e->flow_out ? TE_FLOW_IDS : TE_TERMINATING_FLOW_IDS, e->bind_id);
    /* the stream's bandwidth counter: the slice's busbw from its begin, 0 from its end */
    uint64_t counter = !instant && e->busbw_gbps >= 0 ? uuid_counter(e->tid) : 0;
    if (counter && grow(w, &p->b, 24) == 0)
        p->b.len = (size_t)(wr_extra_counter(p->b.b + p->b.len, counter, e->busbw_gbps) - p->b.b);
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
    uint8_t phase = e->dur ? 0 : 1;
    int64_t key2 = e->dur ? -e->ts : -te, key3 = e->dur ? !e->is_wait : 5 + 2 * (int64_t)id;
    if (e->is_wait) { /* its own end, then its call's */
        small_packet(w, te, TYPE_SLICE_END, uuid_thread(e->tid), counter, 0, phase, key2, key3);
        pend_hold(w);
    } else {
        w->pend.ts = te;
        w->pend.track = uuid_thread(e->tid);
        w->pend.counter = counter;
        w->pend.phase = phase;
        w->pend.key2 = key2;
        w->pend.key3 = key3;
        w->pend.set = 1;
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

static inline int held_before(const held_packet *hp, const cpa_kv *x, const cpa_kv *y)
{
    return x->key != y->key ? x->key < y->key : cmp_held(&hp[x->val], &hp[y->val]) < 0;
}

/* kv[0..n) (time key, held index) in cmp_held's order, a total order. A rank's packets come
 * nearly sorted (a call's end and counters before its wait's begin, a track's calls one after
 * another): insertion, while it moves under four entries a packet; else a stable radix sort by
 * time (the packets were held in `order`, the last tie-break) and each run of one instant by
 * insertion through cmp_held, or qsort past 32 (a crowded instant: a damaged trace's calls all
 * at one time must not take quadratic time). The radix for every rank was a seventh of the
 * export, and qsort through cmp_held before it a tenth. */
static void sort_held(const held_packet *hp, cpa_kv *kv, cpa_kv *tmp, size_t n)
{
    size_t moves = 0, budget = 4 * n;
    for (size_t i = 1; i < n && moves <= budget; i++) {
        cpa_kv v = kv[i];
        size_t j = i;
        for (; j > 0 && held_before(hp, &v, &kv[j - 1]); j--)
            kv[j] = kv[j - 1];
        moves += i - j;
        kv[j] = v;
    }
    if (moves <= budget)
        return;
    for (size_t i = 0; i < n; i++)
        kv[i] = (cpa_kv){(uint64_t)hp[i].ts ^ (1ull << 63), i};
    cpa_sort_kv(kv, tmp, n);
    held_packet *crowd = NULL;
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && kv[hi].key == kv[lo].key; hi++)
            ;
        if (hi - lo > 32 && (crowd || (crowd = malloc(n * sizeof *crowd)) != NULL)) {
            for (size_t i = lo; i < hi; i++)
                crowd[i - lo] = hp[kv[i].val];
            qsort(crowd, hi - lo, sizeof *crowd, cmp_held);
            for (size_t i = lo; i < hi; i++) /* held in `order`: its index from it */
                kv[i].val = crowd[i - lo].order - hp[0].order;
            continue;
        }
        for (size_t i = lo + 1; i < hi; i++) {
            cpa_kv v = kv[i];
            size_t j = i;
            for (; j > lo && held_before(hp, &v, &kv[j - 1]); j--)
                kv[j] = kv[j - 1];
            kv[j] = v;
        }
    }
    free(crowd);
}

void cpx_ppw_rank_end(ppw *w)
{
    if (!w || w->failed)
        return;
    pend_hold(w);
    size_t n = w->nhp;
    cpa_kv *kv = w->kv; /* the keys hold made, room for twice as many */
    if (n)
        sort_held(w->hp, kv, kv + n, n);
    /* packets held one after another go out as one run, from where they are held */
    for (size_t i = 0, j; i < n && !w->failed; i = j) {
        for (j = i + 1; j < n && kv[j].val == kv[j - 1].val + 1; j++)
            ;
        const held_packet *first = &w->hp[kv[i].val], *last = &w->hp[kv[j - 1].val];
        out_run(w, w->pkt.b.b + first->off, last->off + last->len - first->off);
    }
    w->nhp = 0;
    w->pkt.b.len = 0;
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
    free(w->ob.b);
    free(w->hp);
    free(w->kv);
    free(w);
    return rc;
}
