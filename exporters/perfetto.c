/* perfetto: the analysis as a Perfetto trace, in Chrome's trace-event JSON (the "JSON Object
 * Format" of the Trace Event Format; ui.perfetto.dev and chrome://tracing open it) or in
 * Perfetto's own protobuf (perfetto_proto.c), which Perfetto UI opens at sizes its JSON
 * importer cannot.
 *
 * Layout (docs/REPORT.md): a process per rank (pid = the rank), a thread per CUDA stream
 * of that rank, each collective or send/recv call a complete ("X") slice with its args, a
 * nested "wait" slice from the rank's arrival to the last arrival, flow arrows joining the
 * slices of one operation across ranks, and an instant event on each rank of a hang.
 *
 * Streamed: each event is laid out (pf_event), written and forgotten before the next, so
 * memory stays at one event (plus a 4-byte index per call for the timeline), whatever the
 * size of the trace. The JSON (perfetto_json.c) is written as text straight from the
 * event: building a json-c object per event, the first way, was most of the export's time
 * (0.26-0.30 M events/s on a 20 M-event job); json-c still writes the header's one object.
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

#include "common/search.h"
#include "common/text.h"
#include "present/present.h"
#include "exporters/exporters.h"
#include "exporters/perfetto_internal.h"

#ifndef COLLPROF_VERSION
#define COLLPROF_VERSION "unknown"
#endif

/* ---- events ---- */
static void emit(pw *p, const pf_event *e)
{
    if (p->failed)
        return;
    if (p->proto)
        cpx_ppw_event(p->proto, e);
    else
        cpx_pj_event(p, e);
}

/* The event's fields set, its args none: the args array (2.5 KB) is filled as it goes, not
 * zeroed (a zeroing initializer of the struct was a tenth of the export's time). */
static pf_event *event_init(pf_event *e, char ph, const char *name, const char *cat, size_t ri,
                            uint32_t pid, uint32_t tid, int64_t ts, int64_t dur)
{
    e->ph = ph;
    e->name = name;
    e->cat = cat;
    e->ri = ri;
    e->pid = pid;
    e->tid = tid;
    e->ts = ts;
    e->dur = dur;
    e->bind_id = 0;
    e->flow_in = e->flow_out = e->is_wait = 0;
    e->busbw_gbps = -1;
    e->run_from = e->run_to = 0;
    e->nargs = 0;
    return e;
}

static pf_arg *arg(pf_event *e, const char *key, size_t keylen, const char *jkey, uint8_t kind)
{
    pf_arg *a = &e->args[e->nargs < PF_MAX_ARGS ? e->nargs++ : PF_MAX_ARGS - 1];
    /* what every writer reads of any arg; the value is the caller's, and sid and pre are
     * read only where has_sid and (PA_STR) pre say (zeroing the whole arg, 48 bytes, was
     * a twentieth of the JSON export) */
    a->key = key;
    a->jkey = jkey;
    a->keylen = (uint8_t)keylen;
    a->kind = kind;
    a->s_static = 0;
    a->has_sid = 0;
    a->pre = NULL;
    return a;
}
/* Keys are string literals (KEY fails to compile on anything else, or on a key longer than
 * PF_JKEY_MAX): their length is known and they need no escaping, so the JSON writer copies
 * them as they are, "key": with its padding in one fixed-size copy. */
#define PF_JKEY_PAD "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
#define KEY(k)                                                                                 \
    ("" k ""), sizeof(k) - 1 + 0 * sizeof(char[sizeof(k) - 1 <= PF_JKEY_MAX ? 1 : -1]),       \
        ("\"" k "\":" PF_JKEY_PAD)
#define arg_str(e, k, v) (arg((e), KEY(k), PA_STR)->s = (v))
/* ... a string of the program's own tables or a literal, never freed or rewritten */
#define arg_name(e, k, v)                                                                      \
    do {                                                                                       \
        pf_arg *a_ = arg((e), KEY(k), PA_STR);                                                 \
        a_->s = (v);                                                                           \
        a_->s_static = 1;                                                                      \
    } while (0)
#define arg_u64(e, k, v) (arg((e), KEY(k), PA_U64)->u = (v))
#define arg_i64(e, k, v) (arg((e), KEY(k), PA_I64)->i = (v))
#define arg_us(e, k, v) (arg((e), KEY(k), PA_US)->i = (v))
#define arg_bool(e, k, v) (arg((e), KEY(k), PA_BOOL)->u = (v) != 0)
#define arg_num3(e, k, v) (arg((e), KEY(k), PA_NUM3)->d = (v))
#define arg_ints(e, k, vals, count)                                                              \
    do {                                                                                       \
        pf_arg *a_ = arg((e), KEY(k), PA_INTS);                                                \
        a_->v = (vals);                                                                        \
        a_->n = (count);                                                                       \
    } while (0)

/* The site's cleaned text, cached by the model's pointer, and for the JSON writer that text
 * quoted and escaped (a call site is most of a call's JSON event, escaped anew for every call
 * it was); the cache slot, NULL out of memory. */
static const struct pw_site *site_text(pw *p, const char *site)
{
    size_t n = sizeof p->sites / sizeof p->sites[0];
    size_t i = ((uintptr_t)site >> 4) % n;
    struct pw_site *e = &p->sites[i];
    if (e->key == site)
        return e;
    char *t = cp_text_escape_dup(site, strlen(site)), *j = NULL;
    size_t jl = 0;
    if (!t || (!p->proto && !(j = cpx_pj_quoted(t, &jl)))) {
        free(t);
        return NULL;
    }
    free(e->text);
    free(e->json);
    *e = (struct pw_site){site, t, j, jl};
    return e;
}

static int cmp_mm(const void *x, const void *y)
{
    const struct pw_mm *a = x, *b = y;
    if (a->comm_id != b->comm_id)
        return a->comm_id < b->comm_id ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

/* The mismatch rows' index (p->mm); 0, or -1 out of memory. */
static int index_mismatches(pw *p)
{
    const cpa_mismatches *x = &p->a->mismatches;
    if (!x->nrows)
        return 0;
    p->mm = malloc(x->nrows * sizeof *p->mm);
    if (!p->mm)
        return -1;
    for (size_t i = 0; i < x->nrows; i++)
        p->mm[i] = (struct pw_mm){x->rows[i].comm_id, x->rows[i].seq, (uint32_t)i};
    p->nmm = x->nrows;
    qsort(p->mm, p->nmm, sizeof *p->mm, cmp_mm);
    return 0;
}

static void pw_release(pw *p)
{
    free(p->mm);
    for (size_t i = 0; i < sizeof p->sites / sizeof p->sites[0]; i++) {
        free(p->sites[i].text);
        free(p->sites[i].json);
    }
    free(p->pid);
    free(p->tid_base);
    free(p->placed);
    free(p->kfirst);
    free(p->klast);
    free(p->ops);
    free(p->items);
    free(p->items2);
    free(p->stack);
    free(p->jbuf);
    free(p->jruns);
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

/* What a call's events say of its operation. flow_first, flow_last: the piece's own first and
 * last arrivals (kfirst, klast), or the whole job's (the timeline's), as rank index << 32 |
 * call index; a part index out of range (none in the piece) is no call. */
typedef struct pw_op {
    uint64_t latest_ns;  /* the job's last arrival, job time (timeline.latest_ns) */
    uint64_t flow_first, flow_last;
    int64_t late_ns;     /* the late rank's lateness, whole ns */
    uint32_t nparts;
    int32_t wait_for;    /* the rank of the job's last arrival, whom a wait is for */
    int32_t late_rank;   /* the straggler analysis' late rank (its number); late: there is one */
    uint8_t late, cause;
} pw_op;

/* Where a call's slice and its wait lie on the stream's track, in integer nanoseconds since
 * the job's start (exact, and cheap to print). */
typedef struct placed {
    int64_t ts, te;     /* the call's slice */
    int64_t clipped;    /* how much later than measured it starts */
    int64_t ws, we;     /* its wait, nested in it; we <= ws: none */
    int64_t wait;       /* how long it waited within its slice, as measured */
    int64_t arrival;    /* the call's arrival */
    int64_t enter;      /* its host entry */
    int64_t wait_ns;    /* cpa_call_wait_ns's */
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

/* Sorts rank ri's ni items by cmp_item (a total order: the result is qsort's): by track
 * (stream) first, counting, which keeps each track's items in call order; a track's calls
 * nearly always come in time order, so its run is only checked, and sorted where not (a
 * qsort of each rank's items was a tenth of the export). */
static int sort_items(pw *p, size_t ri, size_t ni)
{
    const cpa_rank *r = &p->a->model->ranks[ri];
    size_t nt = r->nstreams ? r->nstreams : 1;
    size_t *at = calloc(nt + 1, sizeof *at);
    if (!at)
        return -1;
    for (size_t i = 0; i < ni; i++)
        at[p->items[i].tid - p->tid_base[ri] + 1]++;
    for (size_t t = 0; t < nt; t++)
        at[t + 1] += at[t];
    for (size_t i = 0; i < ni; i++)
        p->items2[at[p->items[i].tid - p->tid_base[ri]]++] = p->items[i];
    item *sorted = p->items2;
    p->items2 = p->items;
    p->items = sorted;
    for (size_t t = 0, lo = 0; t < nt; lo = at[t++]) {
        size_t hi = at[t], i = lo + 1;
        while (i < hi && cmp_item(&sorted[i - 1], &sorted[i]) < 0)
            i++;
        if (i < hi)
            qsort(sorted + lo, hi - lo, sizeof *sorted, cmp_item);
    }
    free(at);
    return 0;
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
        item *it2 = realloc(p->items2, 2 * cap * sizeof *it2);
        if (it2)
            p->items2 = it2;
        int64_t *st = realloc(p->stack, 2 * cap * sizeof *st);
        if (st)
            p->stack = st;
        if (!pl || !it || !it2 || !st)
            return -1;
        p->cap = cap;
    }
    size_t ni = 0;
    for (size_t ci = 0; ci < n; ci++) {
        const cpa_call *c = &r->calls[ci];
        placed *q = &p->placed[ci];
        uint64_t start, end, enter;
        cpa_call_times_job_ns(a, ri, c, &start, &end, &enter, &q->unfinished);
        q->ts = (int64_t)(start - a->start_ns);
        q->te = (int64_t)(end - a->start_ns);
        q->clipped = 0;
        /* A call's arrival is its slice's start (GPU start, else host entry): the
         * conversions are made once here, for the args too (cpa_call_arrival_job_ns,
         * cpa_call_wait_ns and the entry's would each make them again). */
        q->arrival = q->ts;
        q->enter = (int64_t)(enter - a->start_ns);
        q->op = cpa_call_op(a, ri, ci);
        q->wait_ns = -1;
        const pw_op *po = q->op != CPA_NO_OP ? &p->ops[q->op] : NULL;
        if (po && po->nparts >= 2) {
            uint64_t latest = po->latest_ns;
            if (c->gpu_timed && latest > end)
                latest = end;
            q->wait_ns = latest > start ? (int64_t)(latest - start) : 0;
        }
        q->ws = q->we = 0;
        q->kept = cpx_pw_in_piece(p, ri, q->ts, q->te);
        uint32_t tid = call_tid(p, ri, c);
        p->items[ni++] = (item){tid, (uint32_t)ci, q->ts, q->te, 0};
        /* The wait, from arrival to the last rank's; where the slice is the host's short
         * enqueue (an untimed call) the wait does not fit in it and stays in the args. */
        if (po && po->nparts >= 2 && q->arrival >= q->ts) {
            int64_t latest = (int64_t)(po->latest_ns - a->start_ns);
            int64_t we = latest < q->te ? latest : q->te;
            q->wait = we - q->arrival;
            if (we > q->arrival)
                p->items[ni++] = (item){tid, (uint32_t)ci, q->arrival, we, 1};
        }
    }
    if (sort_items(p, ri, ni))
        return -1;
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
    if (p->proto) {
        cpx_ppw_process(p->proto, p->pid[ri], name);
    } else {
        cpx_pj_metadata(p, "process_name", p->pid[ri], p->pid[ri], "name", name, 0);
        cpx_pj_metadata(p, "process_sort_index", p->pid[ri], p->pid[ri], "sort_index", NULL,
                      p->pid[ri]);
    }
    size_t ns = r->nstreams ? r->nstreams : 1;
    for (size_t s = 0; s < ns && !p->failed; s++) {
        if (r->nstreams)
            snprintf(name, sizeof name, "stream %zu (0x%" PRIx64 ")", s, r->streams[s]);
        else
            snprintf(name, sizeof name, "stream ?");
        uint32_t tid = p->tid_base[ri] + (uint32_t)s;
        if (p->proto) {
            cpx_ppw_thread(p->proto, p->pid[ri], tid, name);
        } else {
            cpx_pj_metadata(p, "thread_name", p->pid[ri], tid, "name", name, 0);
            cpx_pj_metadata(p, "thread_sort_index", p->pid[ri], tid, "sort_index", NULL,
                          (int64_t)s);
        }
    }
}

static void mismatch_instants(pw *p, size_t ri, const cpa_call *c, int64_t ts);

static int op_records(pw *p)
{
    const cpa_analysis *a = p->a;
    const cpa_matched *mt = &a->matched;
    size_t n = mt->nops ? mt->nops : 1;
    p->ops = malloc(n * sizeof *p->ops);
    if (!p->ops)
        return -1;
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        pw_op *w = &p->ops[i];
        uint32_t fk = p->kfirst ? p->kfirst[i] : a->timeline.first_part[i];
        uint32_t lk = p->klast ? p->klast[i] : a->timeline.last_part[i];
        w->latest_ns = a->timeline.latest_ns[i];
        w->flow_first = w->flow_last = UINT64_MAX;
        w->nparts = o->nparts;
        w->wait_for = -1;
        if (a->timeline.last_part[i] < o->nparts)
            w->wait_for =
                a->model->ranks[mt->parts[o->first_part + a->timeline.last_part[i]].rank_idx].rank;
        if (fk < o->nparts) {
            const cpa_part *fp = &mt->parts[o->first_part + fk];
            w->flow_first = (uint64_t)fp->rank_idx << 32 | fp->call_idx;
        }
        if (lk < o->nparts) {
            const cpa_part *lp = &mt->parts[o->first_part + lk];
            w->flow_last = (uint64_t)lp->rank_idx << 32 | lp->call_idx;
        }
        int32_t late = cpa_op_late_rank_idx(a, i);
        w->late = late >= 0;
        w->late_rank = late >= 0 ? a->model->ranks[late].rank : -1;
        w->late_ns = late >= 0 ? cpa_round_i64(cpa_op_late_us(a, i) * 1e3) : 0;
        w->cause = late >= 0 && a->stragglers.op_cause ? a->stragglers.op_cause[i] : 0;
    }
    return 0;
}

/* The fields args[run_from, run_to) of a call's slice are made from (call_events), packed:
 * two calls of one key have the same args there. */
static void run_key(pf_event *e, const cpa_call *c)
{
    /* made in three words and stored whole: a struct of bytes stored one by one and read
     * back as words stalled on the store forwarding (a tenth of the layout's time) */
    int seen = (c->nccl & CPA_NCCL_SEEN) != 0;
    uint64_t k[3];
    _Static_assert(sizeof k == PF_RUN_KEY, "the run key's fields fill it");
    k[0] = c->count;
    k[1] = (uint64_t)(uint32_t)(is_rooted(c->op) || cp_op_is_p2p(c->op) ? c->peer : 0) |
           (uint64_t)(uint32_t)(seen ? c->nchannels : 0) << 32;
    k[2] = (uint64_t)c->op | (uint64_t)c->dtype << 8 | (uint64_t)c->redop << 16 |
           (uint64_t)(c->gpu_timed != 0) << 24 | (uint64_t)seen << 32 |
           (uint64_t)(seen ? c->algo : 0) << 40 | (uint64_t)(seen ? c->proto : 0) << 48;
    memcpy(e->run_key, k, sizeof k);
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
    const pw_op *o = oi != CPA_NO_OP ? &p->ops[oi] : NULL;
    int64_t ts = q->ts, te = q->te;
    pf_event ev;
    pf_event *e = event_init(&ev, 'X', cp_op_name(c->op), cp_op_is_p2p(c->op) ? "p2p" : "collective",
                             ri, p->pid[ri], call_tid(p, ri, c), ts, te > ts ? te - ts : 0);
    arg_name(e, "op", cp_op_name(c->op));
    uint64_t comm_id = cpa_call_comm_id(r, c);
    size_t ck = (size_t)((comm_id * 0x9e3779b97f4a7c15ull) >> 61); /* of 8 */
    if (p->comms[ck].id != comm_id || !p->comms[ck].text[0]) {
        cpr_fmt_comm(p->comms[ck].text, comm_id);
        p->comms[ck].id = comm_id;
        p->comms[ck].json[0] = '"'; /* hex digits: nothing to escape */
        memcpy(p->comms[ck].json + 1, p->comms[ck].text, 16);
        p->comms[ck].json[17] = '"';
    }
    pf_arg *ca = arg(e, KEY("comm"), PA_STR);
    ca->s = p->comms[ck].text;
    ca->pre = p->comms[ck].json;
    ca->prelen = sizeof p->comms[ck].json;
    ca->has_sid = 1;
    ca->sid = comm_id;
    if (c->seq != CPA_SEQ_NONE) /* a call NCCL refused has none */
        arg_u64(e, "seq", c->seq);
    e->run_from = (uint8_t)e->nargs; /* from count to channels: run_key's fields alone */
    arg_u64(e, "count", c->count);
    arg_name(e, "dtype", cp_dtype_name(c->dtype));
    uint64_t bytes = cpa_elem_bytes(c->count, c->dtype);
    if (bytes != UINT64_MAX) /* a size that does not fit 64 bits is no size at all */
        arg_u64(e, "bytes", bytes);
    if (c->redop != CP_REDOP_NONE)
        arg_name(e, "redop", cp_redop_name(c->redop));
    if (is_rooted(c->op))
        arg_i64(e, "root", c->peer);
    else if (cp_op_is_p2p(c->op))
        arg_i64(e, "peer", c->peer);
    arg_name(e, "timing", c->gpu_timed ? "gpu" : "host");
    if (c->nccl & CPA_NCCL_SEEN) { /* what NCCL's profiler plugin said it ran it with */
        if (c->algo)
            arg_name(e, "algo", cp_algo_name(c->algo));
        if (c->proto)
            arg_name(e, "proto", cp_proto_name(c->proto));
        arg_i64(e, "channels", c->nchannels);
        e->run_to = (uint8_t)e->nargs;
        uint64_t nseq = cpa_call_nccl_seq(r, c); /* NCCL's own, per comm and function */
        if (nseq != CPA_SEQ_NONE)
            arg_u64(e, "nccl_seq", nseq);
    }
    if (!e->run_to)
        e->run_to = (uint8_t)e->nargs;
    run_key(e, c);
    if (q->unfinished)
        arg_bool(e, "unfinished", 1);
    if (q->clipped)
        arg_us(e, "clipped_us", q->clipped);
    if (cpa_call_aborted(r, c)) /* its span ends at the abort, not at a completion */
        arg_bool(e, "aborted", 1);
    if (cpa_call_refused(c)) { /* NCCL returned an error: it enqueued nothing */
        arg_bool(e, "refused", 1);
        arg_str(e, "result", cpr_result_id(cpa_refused_slot(c->result)));
    }
    arg_us(e, "host_enter_us", q->enter);
    arg_us(e, "host_us", cpa_call_host_ns(c));

    int flow = o && o->nparts >= 2;
    if (flow) {
        arg_us(e, "arrival_us", q->arrival);
        arg_us(e, "wait_us", q->wait_ns);
        arg_i64(e, "ranks", o->nparts);
        if (o->late) {
            arg_i64(e, "late_rank", o->late_rank);
            arg_us(e, "late_us", o->late_ns);
            if (o->cause) /* a name of the program's: interned by address */
                arg_name(e, "late_cause", cpa_late_cause_name(o->cause));
        }
        /* the bus bandwidth of this rank's slice, for the protobuf's counter track */
        uint64_t s = cpa_op_bytes(c->op, c->count, c->dtype, (int)o->nparts);
        if (c->gpu_timed && !q->unfinished && te > ts && s != UINT64_MAX)
            e->busbw_gbps = (double)s / (double)(te - ts) * cpa_busbw_factor(c->op, (int)o->nparts);
    }
    /* strings from the trace, cleaned (cp_text_escape_dup: NULL only out of memory) */
    char *kernels_text = NULL;
    const char *site = cpa_call_site(r, c);
    const struct pw_site *clean_site;
    if (site) {
        if (!(clean_site = site_text(p, site))) {
            p->failed = 1;
            errno = ENOMEM;
        } else {
            pf_arg *sa = arg(e, KEY("site"), PA_STR);
            sa->s = clean_site->text;
            sa->pre = clean_site->json;
            sa->prelen = (uint32_t)clean_site->json_len; /* a site is a few KB at most */
            sa->has_sid = 1;
            sa->sid = (uintptr_t)site; /* the model's string: lives through the export */
        }
    }
    char kernels[3 * (CP_KNAME_MAX + 40)];
    const cp_rec_kernels *kb = r->nkernels ? cpa_kernels_of(r, c) : NULL;
    if (kb && kb->nkernels) { /* cupti: what the GPU ran before it, longest first */
        size_t n = 0;
        for (unsigned i = 0; i < kb->nkernels && n < sizeof kernels; i++) {
            const char *name = cpa_kname_of(r, kb->k[i].name_index);
            n += (size_t)snprintf(kernels + n, sizeof kernels - n, "%s%s %.3f ms x%u",
                                  i ? ", " : "", name ? name : "?",
                                  (double)kb->k[i].total_ns / 1e6, (unsigned)kb->k[i].count);
        }
        if (!(kernels_text = cp_text_escape_dup(kernels, strlen(kernels))))
            p->failed = 1;
        else
            arg_str(e, "kernels_before", kernels_text);
    }
    if (flow) {
        /* the arrows join the piece's own first and last arrivals */
        uint64_t me = (uint64_t)ri << 32 | ci;
        e->bind_id = (uint64_t)oi + 1;
        e->flow_in = o->flow_first != me;
        e->flow_out = o->flow_last != me;
    }
    emit(p, e);
    free(kernels_text);

    if (flow && q->we > q->ws) { /* the wait, nested in the call's slice (place_rank) */
        pf_event w;
        event_init(&w, 'X', "wait", "wait", ri, ev.pid, ev.tid, q->ws, q->we - q->ws);
        w.is_wait = 1;
        arg_i64(&w, "for_rank", o->wait_for);
        arg_us(&w, "wait_us", q->wait);
        emit(p, &w);
    }
    mismatch_instants(p, ri, c, ts);
}

/* A mismatch at this collective call: an instant on its rank where the call starts, holding
 * the field, this rank's value and whether it is a culprit. Collectives only: a send/recv
 * pair's seq is per peer, and a rank's send and receive of one seq are two pairs. */
static void mismatch_instants(pw *p, size_t ri, const cpa_call *c, int64_t ts)
{
    const cpa_analysis *a = p->a;
    const cpa_mismatches *x = &a->mismatches;
    if (!p->nmm || cp_op_is_p2p(c->op) || c->seq == CPA_SEQ_NONE)
        return;
    uint64_t comm_id = cpa_call_comm_id(&a->model->ranks[ri], c);
    size_t lo; /* the first key at or after (comm, seq) */
    CP_LOWER_BOUND(lo, p->nmm, i,
                   p->mm[i].comm_id < comm_id ||
                       (p->mm[i].comm_id == comm_id && p->mm[i].seq < c->seq));
    int32_t rank = a->model->ranks[ri].rank;
    for (size_t i = lo; i < p->nmm && p->mm[i].comm_id == comm_id && p->mm[i].seq == c->seq;
         i++) {
        const cpa_mismatch *mm = &x->rows[p->mm[i].row];
        if (mm->field == CPA_FIELD_PEER)
            continue;
        const cpa_mismatch_value *v = NULL;
        for (size_t k = 0; k < mm->nvalues && !v; k++)
            if (mm->values[k].rank == rank)
                v = &mm->values[k];
        if (!v)
            continue;
        int culprit = 0;
        for (size_t k = 0; k < mm->nculprits; k++)
            culprit |= mm->culprit_ranks[k] == rank;
        char name[128], comm[17];
        snprintf(name, sizeof name, "mismatch: %s at %s seq %" PRIu64,
                 cpa_field_name(mm->field), cp_op_name(c->op), mm->seq);
        cpr_fmt_comm(comm, mm->comm_id);
        pf_event ev;
        event_init(&ev, 'i', name, "mismatch", ri, p->pid[ri], p->tid_base[ri], ts, 0);
        arg_str(&ev, "field", cpa_field_name(mm->field));
        arg_str(&ev, "comm", comm);
        arg_u64(&ev, "seq", mm->seq);
        unsigned u = v->value >= 0 && v->value <= 255 ? (unsigned)v->value : 255;
        switch (mm->field) { /* as the report's JSON says them */
        case CPA_FIELD_OP: arg_str(&ev, "value", u < 255 ? cp_op_name(u) : "?"); break;
        case CPA_FIELD_DTYPE: arg_str(&ev, "value", u < 255 ? cp_dtype_name(u) : "?"); break;
        case CPA_FIELD_REDOP: arg_str(&ev, "value", u < 255 ? cp_redop_name(u) : "?"); break;
        case CPA_FIELD_COUNT: arg_u64(&ev, "value", (uint64_t)v->value); break;
        default: arg_i64(&ev, "value", v->value); break;
        }
        arg_bool(&ev, "culprit", culprit);
        emit(p, &ev);
    }
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
    char name[96], comm[17];
    char *last_text = NULL;
    snprintf(name, sizeof name, "hang: %s %s seq %" PRIu64, cpa_hang_verdict_name(h->verdict),
             cp_op_name(h->op), h->seq);
    pf_event ev;
    event_init(&ev, 'i', name, "hang", (size_t)ri, p->pid[ri], p->tid_base[ri],
               (int64_t)(last - a->start_ns), 0);
    cpr_fmt_comm(comm, h->comm_id);
    arg_str(&ev, "verdict", cpa_hang_verdict_name(h->verdict));
    arg_str(&ev, "role", role);
    arg_str(&ev, "comm", comm);
    arg_u64(&ev, "seq", h->seq);
    arg_str(&ev, "op", cp_op_name(h->op));
    arg_ints(&ev, "missing_ranks", h->missing_ranks, h->nmissing);
    arg_ints(&ev, "waiting_ranks", h->waiting_ranks, h->nwaiting);
    if (h->last[0]) {
        if (!(last_text = cp_text_escape_dup(h->last, strlen(h->last))))
            p->failed = 1;
        else
            arg_str(&ev, "last", last_text);
    }
    emit(p, &ev);
    free(last_text);
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
    char what[400], name[440];
    cpa_integrity_text(what, sizeof what, &r->integrity, r->lost_records);
    snprintf(name, sizeof name, "trace hole: %s", what);
    pf_event ev;
    event_init(&ev, 'i', name, "integrity", ri, p->pid[ri], p->tid_base[ri],
               (int64_t)(job - a->start_ns), 0);
    arg_u64(&ev, "lost_records", r->lost_records);
    arg_u64(&ev, "missing_chunks", r->integrity.missing_chunks);
    arg_u64(&ev, "unknown_records", r->integrity.unknown_records);
    arg_bool(&ev, "cut_short", r->integrity.truncated != 0);
    arg_bool(&ev, "first_hole_known", r->integrity.first_gap_ns != 0);
    emit(p, &ev);
}

/* What the trace as a whole says (JSON: otherData; protobuf: the "collprof" track), and
 * what a piece holds and leaves out, where a reader of the file looks first. */
typedef struct job_info {
    pf_event ev;
    char start[32], holes[512];
} job_info;

static void job_args(const pw *p, job_info *j, const cpx_piece *piece, int capped,
                     uint64_t left_out)
{
    const cpa_analysis *a = p->a;
    const cpa_model *m = a->model;
    pf_event *e = &j->ev;
    e->nargs = 0;
    if (piece) {
        if (p->t0 != INT64_MIN)
            arg_num3(e, "piece.from_s", (double)p->t0 / 1e9);
        if (p->t1 != INT64_MAX)
            arg_num3(e, "piece.to_s", (double)p->t1 / 1e9);
        size_t kept = 0;
        for (size_t ri = 0; ri < m->nranks; ri++)
            kept += (size_t)cpx_pw_rank_in_piece(p, ri);
        arg_u64(e, "piece.ranks_kept", kept);
        arg_u64(e, "piece.calls_left_out", left_out);
        arg_bool(e, "piece.capped", capped);
        if (capped)
            arg_str(e, "piece.why",
                    "the whole job is more events than the cap (by default what Perfetto UI "
                    "opens comfortably): this is its end; collprof export --perfetto --window "
                    "T0:T1 --ranks R for another piece, --all for all");
    }
    arg_str(e, "generator", "collprof " COLLPROF_VERSION);
    arg_u64(e, "ranks", m->nranks);
    arg_bool(e, "clock_aligned", a->clock.aligned != 0);
    arg_num3(e, "clock_error_us", a->clock.error_us);
    snprintf(j->start, sizeof j->start, "%" PRIu64, a->start_ns);
    arg_str(e, "start_unix_ns", j->start);
    cpr_holes_text(j->holes, sizeof j->holes, a, NULL, NULL);
    arg_u64(e, "lost_records", m->lost_records);
    arg_str(e, "holes", j->holes[0] ? j->holes : "none");
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
    if (assign_ids(&p) != 0 || index_mismatches(&p) != 0 ||
        (piece && cpx_pw_select(&p, piece->max_events, whole, &capped, &kept) != 0) ||
        (piece && piece->proto && !(p.proto = cpx_ppw_new(out)))) {
        pw_release(&p);
        errno = ENOMEM;
        return -1;
    }
    /* kept runs speed the JSON writer up; without the memory, every run is written */
    if (!p.proto)
        p.jruns = calloc(1, sizeof *p.jruns);
    if (op_records(&p) != 0) {
        pw_release(&p);
        errno = ENOMEM;
        return -1;
    }
    static job_info j; /* 20 KB: off the stack; one export at a time */
    job_args(&p, &j, whole && !capped ? NULL : piece, capped, total - kept);
    if (p.proto)
        cpx_ppw_job(p.proto, j.ev.args, j.ev.nargs);
    else
        cpx_pj_header(&p, j.ev.args, j.ev.nargs);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++)
        if (cpx_pw_rank_in_piece(&p, ri))
            rank_metadata(&p, ri);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++)
        hole_instant(&p, ri);
    for (size_t ri = 0; ri < m->nranks && !p.failed; ri++) {
        if (place_rank(&p, ri) != 0) {
            p.failed = 1;
            errno = ENOMEM;
            break;
        }
        for (size_t ci = 0; ci < m->ranks[ri].ncalls && !p.failed; ci++)
            call_events(&p, ri, ci);
        if (p.proto)
            cpx_ppw_rank_end(p.proto);
    }
    for (size_t i = 0; i < a->hangs.nrows && !p.failed; i++) {
        const cpa_hang *h = &a->hangs.rows[i];
        for (size_t k = 0; k < h->nwaiting; k++)
            hang_instant(&p, h, h->waiting_ranks[k], "waiting");
        for (size_t k = 0; k < h->nmissing; k++)
            hang_instant(&p, h, h->missing_ranks[k], "missing");
    }
    if (p.proto) {
        if (cpx_ppw_close(p.proto, &p.events) != 0)
            p.failed = 1;
    } else {
        cpx_pj_close(&p);
    }
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
