/* perfetto: the analysis as Chrome / Perfetto trace-event JSON (the "JSON Object Format"
 * of the Trace Event Format; ui.perfetto.dev and chrome://tracing open it).
 *
 * Layout (docs/REPORT.md): a process per rank (pid = the rank), a thread per CUDA stream
 * of that rank, each collective or send/recv call a complete ("X") slice with its args, a
 * nested "wait" slice from the rank's arrival to the last arrival, flow arrows joining the
 * slices of one operation across ranks, and an instant event on each rank of a hang.
 *
 * Streamed: each event is built as a json-c object, serialized, written and freed before
 * the next, so memory stays at one event (plus a 4-byte index per call for the timeline),
 * whatever the size of the trace.
 *
 * Flows use the v2 form (bind_id with flow_out / flow_in on the X slices themselves)
 * rather than separate "s"/"t"/"f" events: a v1 flow event binds to whatever slice
 * encloses its timestamp on its thread, which for a collective is ambiguous (the nested
 * wait slice starts at the same instant), while bind_id names the slice itself. The slices
 * of an operation are chained in arrival order, so the chain ends at the last arrival.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"
#include "exporters/perfetto_internal.h"

#ifndef COLLPROF_VERSION
#define COLLPROF_VERSION "unknown"
#endif


/* json-c's allocation failures surface as NULLs; one flag per event catches them all. */
static json_object *chk(int *oom, json_object *o)
{
    if (!o)
        *oom = 1;
    return o;
}

/* Keys are string literals, each added once per object: json-c need neither copy them nor
 * look for an existing one (the per-event cost of a large export is mostly such calls). */
static void put(int *oom, json_object *obj, const char *key, json_object *v)
{
    if (!obj || !v ||
        json_object_object_add_ex(obj, key, v,
                                  JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY))
    {
        *oom = 1;
        json_object_put(v);
    }
}

/* Microseconds with three decimals, exactly (json-c would print 17 digits of the double). */
static json_object *ns_us(int *oom, int64_t ns)
{
    char buf[32];
    return chk(oom, json_object_new_double_s((double)ns / 1e3, cpr_fmt_ns_us(buf, ns)));
}

static json_object *num3(int *oom, double v)
{
    char buf[64];
    if (!isfinite(v))
        v = 0;
    snprintf(buf, sizeof buf, "%.3f", v);
    return chk(oom, json_object_new_double_s(v, buf));
}

static json_object *clean_str(int *oom, const char *s)
{
    char *c = cp_text_escape_dup(s, strlen(s));
    if (!c)
        return chk(oom, NULL);
    json_object *o = chk(oom, json_object_new_string(c));
    free(c);
    return o;
}

/* Writes and frees ev; an event that could not be built is dropped and fails the export. */
static void emit(pw *p, json_object *ev, int oom)
{
    if (!p->failed && (oom || !ev)) {
        p->failed = 1;
        errno = ENOMEM;
    }
    if (!p->failed) {
        size_t len = 0;
        const char *s = json_object_to_json_string_length(
            ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!s || fputs(p->first ? "\n" : ",\n", p->out) < 0 ||
            fwrite(s, 1, len, p->out) != len)
            p->failed = 1;
        else
            p->events++;
        p->first = 0;
    }
    json_object_put(ev);
}

/* A reference to the shared object for a static string (a literal, cp_op_name's ...). */
static json_object *sstr(pw *p, int *oom, const char *s)
{
    size_t n = sizeof p->interned / sizeof p->interned[0];
    size_t i = ((uintptr_t)s >> 3) % n;
    for (size_t k = 0; k < n; k++, i = (i + 1) % n) {
        if (p->interned[i].key == s)
            return json_object_get(p->interned[i].obj);
        if (!p->interned[i].key) {
            json_object *o = json_object_new_string(s);
            if (!o)
                return chk(oom, NULL);
            p->interned[i].key = s;
            p->interned[i].obj = o;
            return json_object_get(o);
        }
    }
    return chk(oom, json_object_new_string(s)); /* table full: a copy of its own */
}

static json_object *yes(pw *p, int *oom)
{
    if (!p->yes && !(p->yes = json_object_new_boolean(1)))
        return chk(oom, NULL);
    return json_object_get(p->yes);
}

static json_object *comm_of(pw *p, int *oom, uint64_t comm_id)
{
    if (!p->comm || p->comm_id != comm_id) {
        char hex[17];
        cpr_fmt_comm(hex, comm_id);
        json_object *o = json_object_new_string(hex);
        if (!o)
            return chk(oom, NULL);
        json_object_put(p->comm);
        p->comm = o;
        p->comm_id = comm_id;
    }
    return json_object_get(p->comm);
}

static void pw_release(pw *p)
{
    for (size_t i = 0; i < sizeof p->interned / sizeof p->interned[0]; i++)
        json_object_put(p->interned[i].obj);
    json_object_put(p->yes);
    json_object_put(p->comm);
    free(p->pid);
    free(p->tid_base);
    free(p->placed);
    free(p->kfirst);
    free(p->klast);
    free(p->items);
    free(p->stack);
}

static json_object *event_named(pw *p, int *oom, json_object *name, const char *ph,
                                uint32_t pid, uint32_t tid)
{
    json_object *ev = chk(oom, json_object_new_object());
    put(oom, ev, "name", name);
    put(oom, ev, "ph", sstr(p, oom, ph));
    put(oom, ev, "pid", chk(oom, json_object_new_int64(pid)));
    put(oom, ev, "tid", chk(oom, json_object_new_int64(tid)));
    return ev;
}

/* name must be a static string (it is interned). */
static json_object *event(pw *p, int *oom, const char *name, const char *ph, uint32_t pid,
                          uint32_t tid)
{
    return event_named(p, oom, sstr(p, oom, name), ph, pid, tid);
}

static void metadata(pw *p, const char *name, uint32_t pid, uint32_t tid, const char *key,
                     json_object *value)
{
    int oom = 0;
    json_object *ev = event(p, &oom, name, "M", pid, tid);
    json_object *args = chk(&oom, json_object_new_object());
    put(&oom, args, key, chk(&oom, value));
    put(&oom, ev, "args", args);
    emit(p, ev, oom);
}

/* pid = the rank; a file with no rank, or a rank two files claim, gets one past all ranks,
 * so no two processes share a pid. tids are unique across the whole trace and above every
 * pid: Perfetto keys threads by tid, and a pid doubles as its main thread's tid. */
static int assign_ids(pw *p)
{
    const cpa_model *m = p->a->model;
    size_t n = m->nranks ? m->nranks : 1;
    p->pid = malloc(n * sizeof *p->pid);
    p->tid_base = malloc(n * sizeof *p->tid_base);
    if (!p->pid || !p->tid_base)
        return -1;
    uint32_t max_pid = 0;
    for (size_t i = 0; i < m->nranks; i++)
        if (m->ranks[i].rank >= 0 && (uint32_t)m->ranks[i].rank > max_pid)
            max_pid = (uint32_t)m->ranks[i].rank;
    uint32_t spare = max_pid + 1;
    for (size_t i = 0; i < m->nranks; i++) {
        int32_t r = m->ranks[i].rank;
        int dup = i > 0 && m->ranks[i - 1].rank == r;
        p->pid[i] = r >= 0 && !dup ? (uint32_t)r : spare++;
    }
    uint32_t tid = spare;
    for (size_t i = 0; i < m->nranks; i++) {
        p->tid_base[i] = tid;
        tid += (uint32_t)(m->ranks[i].nstreams ? m->ranks[i].nstreams : 1);
    }
    p->tid_end = tid;
    return 0;
}

static void rank_metadata(pw *p, size_t ri)
{
    const cpa_rank *r = &p->a->model->ranks[ri];
    char name[320], host[4 * CP_HOSTNAME_BYTES];
    cp_text_escape(host, sizeof host, r->hostname, strlen(r->hostname));
    const char *holes = cpa_rank_has_holes(r) ? ", trace has holes" : "";
    if (r->rank >= 0)
        snprintf(name, sizeof name, "rank %d (%s%s)", (int)r->rank, host[0] ? host : "?", holes);
    else
        snprintf(name, sizeof name, "rank ? (%s, pid %u%s)", host[0] ? host : "?", r->pid, holes);
    metadata(p, "process_name", p->pid[ri], p->pid[ri], "name", json_object_new_string(name));
    metadata(p, "process_sort_index", p->pid[ri], p->pid[ri], "sort_index",
             json_object_new_int64(p->pid[ri]));
    size_t ns = r->nstreams ? r->nstreams : 1;
    for (size_t s = 0; s < ns; s++) {
        if (r->nstreams)
            snprintf(name, sizeof name, "stream %zu (0x%" PRIx64 ")", s, r->streams[s]);
        else
            snprintf(name, sizeof name, "stream ?");
        uint32_t tid = p->tid_base[ri] + (uint32_t)s;
        metadata(p, "thread_name", p->pid[ri], tid, "name", json_object_new_string(name));
        metadata(p, "thread_sort_index", p->pid[ri], tid, "sort_index",
                 json_object_new_int64((int64_t)s));
    }
}

static int is_rooted(unsigned op)
{
    return op == CP_OP_BROADCAST || op == CP_OP_REDUCE || op == CP_OP_GATHER ||
           op == CP_OP_SCATTER;
}

static uint32_t call_tid(const pw *p, size_t ri, const cpa_call *c)
{
    const cpa_rank *r = &p->a->model->ranks[ri];
    return p->tid_base[ri] + (c->stream < r->nstreams ? c->stream : 0);
}

/* Where a call's slice and its wait lie on the stream's track, in integer nanoseconds since
 * the job's start (exact, and cheap to print). */
typedef struct placed {
    int64_t ts, te;     /* the call's slice */
    int64_t clipped;    /* how much later than measured it starts */
    int64_t ws, we;     /* its wait, nested in it; we <= ws: none */
    int64_t wait;       /* how long it waited within its slice, as measured */
    int64_t arrival;    /* the call's arrival */
    uint32_t op;        /* its operation, CPA_NO_OP none */
    int unfinished;
    int kept;           /* in the piece written */
} placed;

typedef struct item {
    uint32_t tid;
    uint32_t call;
    int64_t s, e;
    int wait;           /* the call's wait, not the call */
} item;

static int cmp_item(const void *x, const void *y)
{
    const item *a = x, *b = y;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->s != b->s)
        return a->s < b->s ? -1 : 1;
    if (a->e != b->e)
        return a->e > b->e ? -1 : 1; /* the longer first: it is the parent */
    if (a->call != b->call)
        return a->call < b->call ? -1 : 1;
    return a->wait - b->wait;
}

/* A stream runs its operations one after another, but measured times can overlap a little
 * (events and NCCL's plugin timers, clock conversions: 309 overlaps of up to 6 ns in one
 * emulated job; 8 us seen before), and calls still in flight when the trace ended all run
 * to its last record; a viewer mis-nests a slice that starts inside another and ends after
 * it. So each track's slices are laid out in order of their measured start, each starting
 * no earlier than the one before it and, where it would end past the slice it starts in,
 * where that one ends (clipped says by how much): every two then nest or touch. A wait
 * lies inside its call's slice. Kept: which slices enclose the point reached (a stack). */
static int place_rank(pw *p, size_t ri)
{
    const cpa_analysis *a = p->a;
    const cpa_rank *r = &a->model->ranks[ri];
    size_t n = r->ncalls;
    if (n > p->cap) {
        size_t cap = n > 2 * p->cap ? n : 2 * p->cap;
        placed *pl = realloc(p->placed, cap * sizeof *pl);
        if (pl)
            p->placed = pl;
        item *it = realloc(p->items, 2 * cap * sizeof *it);
        if (it)
            p->items = it;
        int64_t *st = realloc(p->stack, 2 * cap * sizeof *st);
        if (st)
            p->stack = st;
        if (!pl || !it || !st)
            return -1;
        p->cap = cap;
    }
    size_t ni = 0;
    for (size_t ci = 0; ci < n; ci++) {
        const cpa_call *c = &r->calls[ci];
        placed *q = &p->placed[ci];
        uint64_t start, end;
        cpa_call_span_job_ns(a, ri, c, &start, &end, &q->unfinished);
        q->ts = (int64_t)(start - a->start_ns);
        q->te = (int64_t)(end - a->start_ns);
        q->clipped = 0;
        q->arrival = (int64_t)(cpa_call_arrival_job_ns(a, ri, c) - a->start_ns);
        q->op = cpa_call_op(a, ri, ci);
        q->ws = q->we = 0;
        q->kept = cpx_pw_in_piece(p, ri, q->ts, q->te);
        uint32_t tid = call_tid(p, ri, c);
        p->items[ni++] = (item){tid, (uint32_t)ci, q->ts, q->te, 0};
        /* The wait, from arrival to the last rank's; where the slice is the host's short
         * enqueue (an untimed call) the wait does not fit in it and stays in the args. */
        if (q->op != CPA_NO_OP && a->matched.ops[q->op].nparts >= 2 && q->arrival >= q->ts) {
            int64_t latest = (int64_t)(a->timeline.latest_ns[q->op] - a->start_ns);
            int64_t we = latest < q->te ? latest : q->te;
            q->wait = we - q->arrival;
            if (we > q->arrival)
                p->items[ni++] = (item){tid, (uint32_t)ci, q->arrival, we, 1};
        }
    }
    if (ni)
        qsort(p->items, ni, sizeof *p->items, cmp_item);
    int64_t *stack = p->stack;
    size_t depth = 0;
    int64_t cur = INT64_MIN;
    for (size_t i = 0; i < ni; i++) {
        item *it = &p->items[i];
        placed *q = &p->placed[it->call];
        if (i == 0 || it->tid != p->items[i - 1].tid) {
            depth = 0;
            cur = INT64_MIN;
        }
        int64_t s = it->s > cur ? it->s : cur, e = it->e;
        if (it->wait && s < q->ts) /* inside its call, wherever that was laid */
            s = q->ts;
        if (it->wait && e > q->te)
            e = q->te;
        while (depth && stack[depth - 1] <= s)
            depth--;
        while (depth && e > stack[depth - 1]) {
            s = stack[--depth];
            while (depth && stack[depth - 1] <= s)
                depth--;
        }
        if (e < s)
            e = s;
        if (it->wait) {
            q->ws = s;
            q->we = e;
        } else {
            q->clipped = s - it->s;
            q->ts = s;
            q->te = e;
        }
        stack[depth++] = e;
        cur = s;
    }
    return 0;
}

static void call_events(pw *p, size_t ri, size_t ci)
{
    const cpa_analysis *a = p->a;
    const cpa_rank *r = &a->model->ranks[ri];
    const cpa_call *c = &r->calls[ci];
    const placed *q = &p->placed[ci];
    if (!q->kept) {
        p->left_out++;
        return;
    }
    p->calls++;
    uint32_t oi = q->op;
    const cpa_op *o = oi != CPA_NO_OP ? &a->matched.ops[oi] : NULL;
    int oom = 0;
    int64_t ts = q->ts, te = q->te;
    uint32_t pid = p->pid[ri], tid = call_tid(p, ri, c);

    json_object *ev = event(p, &oom, cp_op_name(c->op), "X", pid, tid);
    put(&oom, ev, "cat", sstr(p, &oom, cp_op_is_p2p(c->op) ? "p2p" : "collective"));
    put(&oom, ev, "ts", ns_us(&oom, ts));
    put(&oom, ev, "dur", ns_us(&oom, te > ts ? te - ts : 0));

    json_object *args = chk(&oom, json_object_new_object());
    put(&oom, args, "op", sstr(p, &oom, cp_op_name(c->op)));
    put(&oom, args, "comm", comm_of(p, &oom, c->comm_id));
    if (c->seq != CPA_SEQ_NONE) /* a call NCCL refused has none */
        put(&oom, args, "seq", chk(&oom, json_object_new_uint64(c->seq)));
    put(&oom, args, "count", chk(&oom, json_object_new_uint64(c->count)));
    put(&oom, args, "dtype", sstr(p, &oom, cp_dtype_name(c->dtype)));
    uint64_t bytes = cpa_elem_bytes(c->count, c->dtype);
    if (bytes != UINT64_MAX) /* a size that does not fit 64 bits is no size at all */
        put(&oom, args, "bytes", chk(&oom, json_object_new_uint64(bytes)));
    if (c->redop != CP_REDOP_NONE)
        put(&oom, args, "redop", sstr(p, &oom, cp_redop_name(c->redop)));
    if (is_rooted(c->op))
        put(&oom, args, "root", chk(&oom, json_object_new_int(c->peer)));
    else if (cp_op_is_p2p(c->op))
        put(&oom, args, "peer", chk(&oom, json_object_new_int(c->peer)));
    put(&oom, args, "timing", sstr(p, &oom, c->gpu_timed ? "gpu" : "host"));
    if (c->nccl & CPA_NCCL_SEEN) { /* what NCCL's profiler plugin said it ran it with */
        if (c->algo)
            put(&oom, args, "algo", sstr(p, &oom, cp_algo_name(c->algo)));
        if (c->proto)
            put(&oom, args, "proto", sstr(p, &oom, cp_proto_name(c->proto)));
        put(&oom, args, "channels", chk(&oom, json_object_new_int(c->nchannels)));
        uint64_t nseq = cpa_call_nccl_seq(r, c); /* NCCL's own, per comm and function */
        if (nseq != CPA_SEQ_NONE)
            put(&oom, args, "nccl_seq", chk(&oom, json_object_new_uint64(nseq)));
    }
    if (q->unfinished)
        put(&oom, args, "unfinished", yes(p, &oom));
    if (q->clipped)
        put(&oom, args, "clipped_us", ns_us(&oom, q->clipped));
    if (cpa_call_aborted(r, c)) /* its span ends at the abort, not at a completion */
        put(&oom, args, "aborted", yes(p, &oom));
    if (cpa_call_refused(c)) { /* NCCL returned an error: it enqueued nothing */
        put(&oom, args, "refused", yes(p, &oom));
        put(&oom, args, "result", sstr(p, &oom, cpr_result_id(cpa_refused_slot(c->result))));
    }
    uint64_t enter = cpa_clock_job_ns(a->model, &a->clock, ri, c->enter_ns);
    put(&oom, args, "host_enter_us", ns_us(&oom, (int64_t)(enter - a->start_ns)));
    put(&oom, args, "host_us", ns_us(&oom, c->host_ns));

    int flow = o && o->nparts >= 2;
    if (flow) {
        put(&oom, args, "arrival_us", ns_us(&oom, q->arrival));
        put(&oom, args, "wait_us", ns_us(&oom, cpa_call_wait_ns(a, ri, ci)));
        put(&oom, args, "ranks", chk(&oom, json_object_new_int64(o->nparts)));
        int32_t late = cpa_op_late_rank_idx(a, oi);
        if (late >= 0) {
            put(&oom, args, "late_rank", chk(&oom, json_object_new_int(a->model->ranks[late].rank)));
            put(&oom, args, "late_us", ns_us(&oom, cpa_round_i64(cpa_op_late_us(a, oi) * 1e3)));
            if (a->stragglers.op_cause && a->stragglers.op_cause[oi])
                put(&oom, args, "late_cause",
                    sstr(p, &oom, cpa_late_cause_name(a->stragglers.op_cause[oi])));
        }
    }
    const char *site = cpa_call_site(r, c);
    if (site)
        put(&oom, args, "site", clean_str(&oom, site));
    const cp_rec_kernels *kb = r->nkernels ? cpa_kernels_of(r, c) : NULL;
    if (kb && kb->nkernels) { /* cupti: what the GPU ran before it, longest first */
        char text[3 * (CP_KNAME_MAX + 40)];
        size_t n = 0;
        for (unsigned i = 0; i < kb->nkernels && n < sizeof text; i++) {
            const char *name = cpa_kname_of(r, kb->k[i].name_index);
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s %.3f ms x%u",
                                  i ? ", " : "", name ? name : "?",
                                  (double)kb->k[i].total_ns / 1e6, (unsigned)kb->k[i].count);
        }
        put(&oom, args, "kernels_before", clean_str(&oom, text));
    }
    put(&oom, ev, "args", args);

    if (flow) {
        /* the arrows join the piece's own first and last arrivals */
        uint32_t fk = p->kfirst ? p->kfirst[oi] : a->timeline.first_part[oi];
        uint32_t lk = p->klast ? p->klast[oi] : a->timeline.last_part[oi];
        const cpa_part *fp = &a->matched.parts[o->first_part + fk];
        const cpa_part *lp = &a->matched.parts[o->first_part + lk];
        put(&oom, ev, "bind_id", chk(&oom, json_object_new_uint64((uint64_t)oi + 1)));
        if (!(fp->rank_idx == ri && fp->call_idx == ci))
            put(&oom, ev, "flow_in", yes(p, &oom));
        if (!(lp->rank_idx == ri && lp->call_idx == ci))
            put(&oom, ev, "flow_out", yes(p, &oom));
    }
    emit(p, ev, oom);

    if (flow && q->we > q->ws) { /* the wait, nested in the call's slice (place_rank) */
        oom = 0;
        json_object *w = event(p, &oom, "wait", "X", pid, tid);
        put(&oom, w, "cat", sstr(p, &oom, "wait"));
        put(&oom, w, "ts", ns_us(&oom, q->ws));
        put(&oom, w, "dur", ns_us(&oom, q->we - q->ws));
        json_object *wargs = chk(&oom, json_object_new_object());
        const cpa_part *lastp = &a->matched.parts[o->first_part + a->timeline.last_part[oi]];
        put(&oom, wargs, "for_rank",
            chk(&oom, json_object_new_int(a->model->ranks[lastp->rank_idx].rank)));
        put(&oom, wargs, "wait_us", ns_us(&oom, q->wait));
        put(&oom, w, "args", wargs);
        emit(p, w, oom);
    }
}

static json_object *int_array(int *oom, const int32_t *v, size_t n)
{
    json_object *arr = chk(oom, json_object_new_array());
    for (size_t i = 0; i < n; i++)
        if (!arr || json_object_array_add(arr, chk(oom, json_object_new_int(v[i]))) != 0)
            *oom = 1;
    return arr;
}

static void hang_instant(pw *p, const cpa_hang *h, int32_t rank, const char *role)
{
    const cpa_analysis *a = p->a;
    long ri = cpa_rank_index(a->model, rank);
    if (ri < 0)
        return; /* a rank with no trace file has no process to mark */
    const cpa_rank *r = &a->model->ranks[ri];
    uint64_t last = cpa_clock_job_ns(a->model, &a->clock, (size_t)ri, r->last_ns);
    if (!cpx_pw_in_piece(p, (size_t)ri, (int64_t)(last - a->start_ns), (int64_t)(last - a->start_ns)))
        return;
    int oom = 0;
    char name[96];
    snprintf(name, sizeof name, "hang: %s %s seq %" PRIu64, cpa_hang_verdict_name(h->verdict),
             cp_op_name(h->op), h->seq);
    json_object *ev = event_named(p, &oom, chk(&oom, json_object_new_string(name)), "i",
                                  p->pid[ri], p->tid_base[ri]);
    put(&oom, ev, "s", chk(&oom, json_object_new_string("p")));
    put(&oom, ev, "cat", chk(&oom, json_object_new_string("hang")));
    put(&oom, ev, "ts", ns_us(&oom, (int64_t)(last - a->start_ns)));
    json_object *args = chk(&oom, json_object_new_object());
    char comm[17];
    cpr_fmt_comm(comm, h->comm_id);
    put(&oom, args, "verdict", chk(&oom, json_object_new_string(cpa_hang_verdict_name(h->verdict))));
    put(&oom, args, "role", chk(&oom, json_object_new_string(role)));
    put(&oom, args, "comm", chk(&oom, json_object_new_string(comm)));
    put(&oom, args, "seq", chk(&oom, json_object_new_uint64(h->seq)));
    put(&oom, args, "op", chk(&oom, json_object_new_string(cp_op_name(h->op))));
    put(&oom, args, "missing_ranks", int_array(&oom, h->missing_ranks, h->nmissing));
    put(&oom, args, "waiting_ranks", int_array(&oom, h->waiting_ranks, h->nwaiting));
    if (h->last[0])
        put(&oom, args, "last", clean_str(&oom, h->last));
    put(&oom, ev, "args", args);
    emit(p, ev, oom);
}

/* A rank whose trace has a hole: an instant on its process where the first hole is known
 * (else at its first record), holding what it lacks; Perfetto shows the rank's slices as if
 * complete, so the mark is where a reader looks. */
static void hole_instant(pw *p, size_t ri)
{
    const cpa_analysis *a = p->a;
    const cpa_rank *r = &a->model->ranks[ri];
    if (!cpa_rank_has_holes(r))
        return;
    uint64_t at = r->integrity.first_gap_ns ? r->integrity.first_gap_ns : r->first_ns;
    uint64_t job = cpa_clock_job_ns(a->model, &a->clock, ri, at);
    if (!cpx_pw_in_piece(p, ri, (int64_t)(job - a->start_ns), (int64_t)(job - a->start_ns)))
        return;
    int oom = 0;
    char what[400], name[440];
    cpa_integrity_text(what, sizeof what, &r->integrity, r->lost_records);
    snprintf(name, sizeof name, "trace hole: %s", what);
    json_object *ev = event_named(p, &oom, chk(&oom, json_object_new_string(name)), "i",
                                  p->pid[ri], p->tid_base[ri]);
    put(&oom, ev, "s", chk(&oom, json_object_new_string("p")));
    put(&oom, ev, "cat", chk(&oom, json_object_new_string("integrity")));
    put(&oom, ev, "ts", ns_us(&oom, (int64_t)(job - a->start_ns)));
    json_object *args = chk(&oom, json_object_new_object());
    put(&oom, args, "lost_records", chk(&oom, json_object_new_uint64(r->lost_records)));
    put(&oom, args, "missing_chunks", chk(&oom, json_object_new_uint64(r->integrity.missing_chunks)));
    put(&oom, args, "unknown_records",
        chk(&oom, json_object_new_uint64(r->integrity.unknown_records)));
    put(&oom, args, "cut_short", chk(&oom, json_object_new_boolean(r->integrity.truncated != 0)));
    put(&oom, args, "first_hole_known", chk(&oom, json_object_new_boolean(r->integrity.first_gap_ns != 0)));
    put(&oom, ev, "args", args);
    emit(p, ev, oom);
}

/* What a piece holds and leaves out, where a reader of the file looks first. */
static json_object *piece_json(const pw *p, int *oom, int capped, uint64_t left_out)
{
    const cpa_model *m = p->a->model;
    json_object *o = chk(oom, json_object_new_object());
    if (p->t0 != INT64_MIN)
        put(oom, o, "from_s", num3(oom, (double)p->t0 / 1e9));
    if (p->t1 != INT64_MAX)
        put(oom, o, "to_s", num3(oom, (double)p->t1 / 1e9));
    size_t kept = 0;
    for (size_t ri = 0; ri < m->nranks; ri++)
        kept += (size_t)cpx_pw_rank_in_piece(p, ri);
    put(oom, o, "ranks_kept", chk(oom, json_object_new_uint64(kept)));
    put(oom, o, "calls_left_out", chk(oom, json_object_new_uint64(left_out)));
    put(oom, o, "capped", chk(oom, json_object_new_boolean(capped)));
    if (capped)
        put(oom, o, "why", chk(oom, json_object_new_string(
                               "the whole job is more events than the cap (by default what "
                               "Perfetto UI opens comfortably): this is its end; collprof "
                               "export --perfetto --window T0:T1 --ranks R for another piece, "
                               "--all for all")));
    return o;
}

static void header(pw *p, const cpx_piece *piece, int capped, uint64_t left_out)
{
    const cpa_analysis *a = p->a;
    int oom = 0;
    json_object *other = chk(&oom, json_object_new_object());
    if (piece)
        put(&oom, other, "piece", piece_json(p, &oom, capped, left_out));
    put(&oom, other, "generator", chk(&oom, json_object_new_string("collprof " COLLPROF_VERSION)));
    put(&oom, other, "ranks", chk(&oom, json_object_new_uint64(a->model->nranks)));
    put(&oom, other, "clock_aligned", chk(&oom, json_object_new_boolean(a->clock.aligned != 0)));
    put(&oom, other, "clock_error_us", num3(&oom, a->clock.error_us));
    char start[32];
    snprintf(start, sizeof start, "%" PRIu64, a->start_ns);
    put(&oom, other, "start_unix_ns", chk(&oom, json_object_new_string(start)));
    /* what the trace lacks, where a reader of the file looks first */
    char holes[512];
    cpr_holes_text(holes, sizeof holes, a, NULL, NULL);
    put(&oom, other, "lost_records", chk(&oom, json_object_new_uint64(a->model->lost_records)));
    put(&oom, other, "holes", chk(&oom, json_object_new_string(holes[0] ? holes : "none")));
    if (oom) {
        json_object_put(other);
        p->failed = 1;
        errno = ENOMEM;
        return;
    }
    const char *s = json_object_to_json_string_ext(other, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s || fprintf(p->out, "{\"displayTimeUnit\":\"ns\",\"otherData\":%s,\"traceEvents\":[",
                      s) < 0)
        p->failed = 1;
    json_object_put(other);
}

int cpx_export_perfetto(FILE *out, const cpa_analysis *a)
{
    uint64_t events;
    return cpx_export_perfetto_events(out, a, &events);
}

int cpx_export_perfetto_events(FILE *out, const cpa_analysis *a, uint64_t *events)
{
    cpx_piece_said said;
    int rc = cpx_export_perfetto_piece(out, a, NULL, &said);
    *events = said.events;
    return rc;
}

int cpx_export_perfetto_piece(FILE *out, const cpa_analysis *a, const cpx_piece *piece,
                              cpx_piece_said *said)
{
    pw p = { .out = out, .a = a, .first = 1, .t0 = INT64_MIN, .t1 = INT64_MAX };
    memset(said, 0, sizeof *said);
    const cpa_model *m = a->model;
    int capped = 0;
    if (piece) {
        p.t0 = piece->t0_ns;
        p.t1 = piece->t1_ns;
        p.rank_keep = piece->rank_keep;
    }
    int whole = !piece || (p.t0 == INT64_MIN && p.t1 == INT64_MAX && !p.rank_keep);
    uint64_t total = 0;
    for (size_t ri = 0; ri < m->nranks; ri++)
        total += m->ranks[ri].ncalls;
    /* the header says what the piece leaves out: counted before anything is written */
    uint64_t kept = total;
    if (assign_ids(&p) != 0 ||
        (piece && cpx_pw_select(&p, piece->max_events, whole, &capped, &kept) != 0)) {
        pw_release(&p);
        errno = ENOMEM;
        return -1;
    }
    header(&p, whole && !capped ? NULL : piece, capped, total - kept);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++)
        if (cpx_pw_rank_in_piece(&p, ri))
            rank_metadata(&p, ri);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++)
        hole_instant(&p, ri);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++) {
        if (place_rank(&p, ri) != 0) {
            pw_release(&p);
            errno = ENOMEM;
            return -1;
        }
        for (size_t ci = 0; ci < m->ranks[ri].ncalls && !p.failed; ci++)
            call_events(&p, ri, ci);
    }
    for (size_t i = 0; i < a->hangs.nrows && !p.failed; i++) {
        const cpa_hang *h = &a->hangs.rows[i];
        for (size_t k = 0; k < h->nwaiting; k++)
            hang_instant(&p, h, h->waiting_ranks[k], "waiting");
        for (size_t k = 0; k < h->nmissing; k++)
            hang_instant(&p, h, h->missing_ranks[k], "missing");
    }
    if (!p.failed && fputs("\n]}\n", out) < 0)
        p.failed = 1;
    pw_release(&p);
    if (fflush(out) != 0 || ferror(out))
        p.failed = 1;
    said->events = p.events;
    said->calls = p.calls;
    said->calls_left_out = p.left_out;
    said->capped = capped;
    said->t0_ns = p.t0;
    said->t1_ns = p.t1;
    return p.failed ? -1 : 0;
}
