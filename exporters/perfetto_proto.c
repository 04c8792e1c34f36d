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
 * Times are ns since the job's start. A track's begin and end packets must come in time order
 * and nest, so a rank's slices are held (encoded, with their time) and written sorted at the
 * rank's end: ends before begins at one instant, the outer begin first, the inner end first.
 *
 * The encoding is a small writer of our own rather than protobuf-c (in Debian): we write
 * six message types and read none, protobuf-c would need the generated code of Perfetto's
 * schema (thousands of messages; or a copy of the subset) and a build-time protoc-c, and it
 * builds each message as a struct before packing it, the per-event cost we are removing
 * from the JSON writer. Nested lengths take four bytes, a redundant varint as Perfetto's own
 * protozero writes them, so a message is written in one pass. tests/exporters/perfetto.proto
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
    TP_TIMESTAMP = 8, TP_SEQUENCE_ID = 10, TP_TRACK_EVENT = 11, TP_SEQUENCE_FLAGS = 13,
    TP_TRACK_DESCRIPTOR = 60,
    TE_DEBUG_ANNOTATIONS = 4, TE_TYPE = 9, TE_TRACK_UUID = 11, TE_CATEGORIES = 22, TE_NAME = 23,
    TE_DOUBLE_COUNTER_VALUE = 44, TE_FLOW_IDS = 47, TE_TERMINATING_FLOW_IDS = 48,
    TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT_UUID = 5, TD_COUNTER = 8,
    PD_PID = 1, PD_PROCESS_NAME = 6,
    THD_PID = 1, THD_TID = 2, THD_THREAD_NAME = 5,
    CD_UNIT_NAME = 6,
    DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6, DA_NAME = 10,
    DA_ARRAY_VALUES = 12,
};
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };
#define SEQ_INCREMENTAL_STATE_CLEARED 1

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

struct ppw {
    FILE *out;
    int failed;
    int first;
    uint64_t events;
    buf pkt;            /* the packet being made */
    size_t stack[8];    /* offsets of the open messages' length fields */
    int depth;
    buf held;           /* the rank's packets, encoded */
    held_packet *hp;
    size_t nhp, caphp;
    uint64_t order;
};

static int grow(ppw *w, buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *n = realloc(b->b, cap);
    if (!n) {
        w->failed = 1;
        errno = ENOMEM;
        return -1;
    }
    b->b = n;
    b->cap = cap;
    return 0;
}

static void put_varint(ppw *w, uint64_t v)
{
    if (grow(w, &w->pkt, 10) != 0)
        return;
    unsigned char *q = w->pkt.b + w->pkt.len;
    while (v >= 0x80) {
        *q++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *q++ = (unsigned char)v;
    w->pkt.len = (size_t)(q - w->pkt.b);
}

static void put_tag(ppw *w, unsigned field, unsigned wt) { put_varint(w, (uint64_t)field << 3 | wt); }

static void put_uint(ppw *w, unsigned field, uint64_t v)
{
    put_tag(w, field, WT_VARINT);
    put_varint(w, v);
}

static void put_fixed64(ppw *w, unsigned field, uint64_t v)
{
    put_tag(w, field, WT_I64);
    if (grow(w, &w->pkt, 8) != 0)
        return;
    for (int i = 0; i < 8; i++)
        w->pkt.b[w->pkt.len++] = (unsigned char)(v >> (8 * i));
}

static void put_double(ppw *w, unsigned field, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_fixed64(w, field, v);
}

static void put_bytes(ppw *w, unsigned field, const void *s, size_t n)
{
    put_tag(w, field, WT_LEN);
    put_varint(w, n);
    if (grow(w, &w->pkt, n) != 0)
        return;
    memcpy(w->pkt.b + w->pkt.len, s, n);
    w->pkt.len += n;
}

static void put_string(ppw *w, unsigned field, const char *s) { put_bytes(w, field, s, strlen(s)); }

/* A nested message: its length is filled in at its end, in four bytes. */
static void open_msg(ppw *w, unsigned field)
{
    put_tag(w, field, WT_LEN);
    if (grow(w, &w->pkt, 4) != 0 || w->depth >= (int)(sizeof w->stack / sizeof w->stack[0])) {
        w->failed = 1;
        return;
    }
    w->stack[w->depth++] = w->pkt.len;
    w->pkt.len += 4;
}

static void close_msg(ppw *w)
{
    if (w->failed || w->depth <= 0)
        return;
    size_t at = w->stack[--w->depth];
    size_t n = w->pkt.len - at - 4;
    if (n >= 1u << 28) {
        w->failed = 1;
        errno = EFBIG;
        return;
    }
    for (int i = 0; i < 4; i++)
        w->pkt.b[at + i] = (unsigned char)(((n >> (7 * i)) & 0x7f) | (i < 3 ? 0x80 : 0));
}

/* A TracePacket (the Trace's field 1) opened in w->pkt, which starts empty. */
static void packet_begin(ppw *w, int64_t ts)
{
    w->pkt.len = 0;
    w->depth = 0;
    open_msg(w, TRACE_PACKET);
    if (ts >= 0)
        put_uint(w, TP_TIMESTAMP, (uint64_t)ts);
    put_uint(w, TP_SEQUENCE_ID, 1);
    if (w->first) {
        put_uint(w, TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        w->first = 0;
    }
}

static void packet_write(ppw *w)
{
    close_msg(w);
    if (!w->failed && fwrite(w->pkt.b, 1, w->pkt.len, w->out) != w->pkt.len)
        w->failed = 1;
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

static void annotation(ppw *w, const pf_arg *a)
{
    open_msg(w, TE_DEBUG_ANNOTATIONS);
    put_string(w, DA_NAME, a->key);
    char us[32];
    switch (a->kind) {
    case PA_STR: put_string(w, DA_STRING, a->s); break;
    case PA_U64: put_uint(w, DA_UINT, a->u); break;
    case PA_I64: put_uint(w, DA_INT, (uint64_t)a->i); break;
    /* the JSON's microseconds with three decimals, as the same text: a double would not
     * keep every nanosecond of a long job's times */
    case PA_US: put_string(w, DA_STRING, cpr_fmt_ns_us(us, a->i)); break;
    case PA_BOOL: put_uint(w, DA_BOOL, a->u != 0); break;
    case PA_NUM3: put_double(w, DA_DOUBLE, a->d); break;
    case PA_INTS:
        for (size_t i = 0; i < a->n; i++) {
            open_msg(w, DA_ARRAY_VALUES);
            put_uint(w, DA_INT, (uint64_t)(int64_t)a->v[i]);
            close_msg(w);
        }
        break;
    }
    close_msg(w);
}

void cpx_ppw_job(ppw *w, const pf_arg *args, size_t nargs)
{
    if (!w || w->failed)
        return;
    packet_begin(w, -1);
    open_msg(w, TP_TRACK_DESCRIPTOR);
    put_uint(w, TD_UUID, UUID_JOB);
    put_string(w, TD_NAME, "collprof");
    close_msg(w);
    packet_write(w);
    packet_begin(w, 0);
    open_msg(w, TP_TRACK_EVENT);
    put_uint(w, TE_TYPE, TYPE_INSTANT);
    put_uint(w, TE_TRACK_UUID, UUID_JOB);
    put_string(w, TE_CATEGORIES, "collprof");
    put_string(w, TE_NAME, "job");
    for (size_t i = 0; i < nargs; i++)
        annotation(w, &args[i]);
    close_msg(w);
    packet_write(w);
}

void cpx_ppw_process(ppw *w, uint32_t pid, const char *name)
{
    if (!w || w->failed)
        return;
    packet_begin(w, -1);
    open_msg(w, TP_TRACK_DESCRIPTOR);
    put_uint(w, TD_UUID, uuid_process(pid));
    open_msg(w, TD_PROCESS);
    put_uint(w, PD_PID, pid);
    put_string(w, PD_PROCESS_NAME, name);
    close_msg(w);
    close_msg(w);
    packet_write(w);
}

void cpx_ppw_thread(ppw *w, uint32_t pid, uint32_t tid, const char *name)
{
    if (!w || w->failed)
        return;
    packet_begin(w, -1);
    open_msg(w, TP_TRACK_DESCRIPTOR);
    put_uint(w, TD_UUID, uuid_thread(tid));
    put_uint(w, TD_PARENT_UUID, uuid_process(pid));
    open_msg(w, TD_THREAD);
    put_uint(w, THD_PID, pid);
    put_uint(w, THD_TID, tid);
    put_string(w, THD_THREAD_NAME, name);
    close_msg(w);
    close_msg(w);
    packet_write(w);
    char cname[320];
    snprintf(cname, sizeof cname, "%s busbw GB/s", name);
    packet_begin(w, -1);
    open_msg(w, TP_TRACK_DESCRIPTOR);
    put_uint(w, TD_UUID, uuid_counter(tid));
    put_uint(w, TD_PARENT_UUID, uuid_process(pid));
    put_string(w, TD_NAME, cname);
    open_msg(w, TD_COUNTER);
    put_string(w, CD_UNIT_NAME, "GB/s");
    close_msg(w);
    close_msg(w);
    packet_write(w);
}

/* The packet in w->pkt kept for the rank's sorted write. */
static void hold(ppw *w, int64_t ts, uint8_t phase, int64_t key2, int64_t key3)
{
    close_msg(w);
    if (w->failed)
        return;
    if (w->nhp == w->caphp) {
        size_t cap = w->caphp ? 2 * w->caphp : 1024;
        held_packet *n = realloc(w->hp, cap * sizeof *n);
        if (!n) {
            w->failed = 1;
            errno = ENOMEM;
            return;
        }
        w->hp = n;
        w->caphp = cap;
    }
    if (grow(w, &w->held, w->pkt.len) != 0)
        return;
    memcpy(w->held.b + w->held.len, w->pkt.b, w->pkt.len);
    w->hp[w->nhp++] = (held_packet){ts, key2, key3, phase, w->held.len, w->pkt.len, w->order++};
    w->held.len += w->pkt.len;
}

static void counter(ppw *w, const pf_event *e, int64_t ts, double v, uint8_t phase)
{
    packet_begin(w, ts);
    open_msg(w, TP_TRACK_EVENT);
    put_uint(w, TE_TYPE, TYPE_COUNTER);
    put_uint(w, TE_TRACK_UUID, uuid_counter(e->tid));
    put_double(w, TE_DOUBLE_COUNTER_VALUE, v);
    close_msg(w);
    hold(w, ts, phase, phase ? -(ts + e->dur) : -e->ts, 2);
}

void cpx_ppw_event(ppw *w, const pf_event *e)
{
    if (!w || w->failed)
        return;
    int instant = e->ph == 'i';
    packet_begin(w, e->ts);
    open_msg(w, TP_TRACK_EVENT);
    put_uint(w, TE_TYPE, instant ? TYPE_INSTANT : TYPE_SLICE_BEGIN);
    put_uint(w, TE_TRACK_UUID, instant ? uuid_process(e->pid) : uuid_thread(e->tid));
    put_string(w, TE_CATEGORIES, e->cat);
    put_string(w, TE_NAME, e->name);
    for (size_t i = 0; i < e->nargs; i++)
        annotation(w, &e->args[i]);
    if (e->bind_id)
        put_fixed64(w, e->flow_out ? TE_FLOW_IDS : TE_TERMINATING_FLOW_IDS, e->bind_id);
    close_msg(w);
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
    packet_begin(w, te);
    open_msg(w, TP_TRACK_EVENT);
    put_uint(w, TE_TYPE, TYPE_SLICE_END);
    put_uint(w, TE_TRACK_UUID, uuid_thread(e->tid));
    close_msg(w);
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

void cpx_ppw_rank_end(ppw *w)
{
    if (!w || w->failed)
        return;
    if (w->nhp)
        qsort(w->hp, w->nhp, sizeof *w->hp, cmp_held);
    for (size_t i = 0; i < w->nhp && !w->failed; i++)
        if (fwrite(w->held.b + w->hp[i].off, 1, w->hp[i].len, w->out) != w->hp[i].len)
            w->failed = 1;
    w->nhp = 0;
    w->held.len = 0;
}

int cpx_ppw_close(ppw *w, uint64_t *events)
{
    *events = 0;
    if (!w)
        return -1;
    cpx_ppw_rank_end(w);
    int rc = w->failed ? -1 : 0;
    *events = w->events;
    free(w->pkt.b);
    free(w->held.b);
    free(w->hp);
    free(w);
    return rc;
}
