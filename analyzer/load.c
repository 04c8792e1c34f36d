/* analyzer/load.c: every trace file of a directory into the model, one walk per file, the
 * files shared out among a few threads.
 *
 * Each DONE and NCCL_OP record is paired with its call as the file is read (pair_done.h),
 * each kind by a pairer of its own: the order of the two is no promise. The calls
 * array starts at the most CALL records the file's length allows (64 bytes each), and is
 * trimmed to the calls kept once the file is read, so memory is that of the calls kept, not
 * of what the file claims; its pages are mapped in blocks ahead of use.
 *
 * Threads: each file is loaded whole by one thread, into its own slot and with its own list
 * of warnings; after the join the slots and lists are merged in file order, so the model and
 * its warnings are the same whatever the number of threads.
 */
#include "analyzer/demangle.h"
#include "analyzer/model.h"
#include "analyzer/pair_done.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/trace_reader.h"

#define MAX_THREADS 8
/* Calls reserved up front at most (88 MB); past it the array grows geometrically. */
#define MAX_PRESIZE_CALLS (1u << 20)
/* Communicator indexes resolved as calls arrive; the shim numbers them from 0. */
#define DIRECT_COMMS 64

/* What a thread keeps from one file to the next. */
typedef struct load_scratch {
    cpa_done_scratch done; /* the DONE table's memory */
    cpa_done_scratch nccl; /* the NCCL_OP table's */
    size_t page;           /* the page size */
    int no_populate;       /* the kernel refused MADV_POPULATE_WRITE: do not ask again */
} load_scratch;

typedef struct load_ctx {
    cpa_model *m;
    cpa_rank *r;
    load_scratch *s;
    uint32_t *hang_comm_index; /* each HANG's comm_index, resolved to an id after the walk */
    uint32_t last_stream;      /* the stream index the previous call used: calls repeat it */
    size_t call_room;          /* calls may be stored below this index without a check */
    cpa_done_pairer done;      /* the calls still waiting for their DONE */
    cpa_done_pairer nccl;      /* ... for their NCCL_OP, from the file's first one on */
    int nccl_on;               /* an NCCL_OP was seen: the nccl pairer follows the calls */
    /* Each small comm index's COMM record so far (position in r->comms + 1, 0 none), so
     * that a call gets its communicator as it is stored; when a call names one not known
     * yet, or an index is named twice, every call is resolved again after the walk. */
    uint32_t comm_at[DIRECT_COMMS];
    int resolve_again;
    /* The calls counted by comm index for matching (cpa_comm_census), below DIRECT_COMMS;
     * census_top: one past the highest index named; census_off: one past it was named. */
    cpa_comm_census census[DIRECT_COMMS];
    uint32_t census_top;
    int census_off;
    uint64_t lost_in_records;
    uint64_t rotated_in_records; /* of them, LOST records of cause rotated */
    int repeat;      /* a rotated trace's later segment: its head repeats COMM and KNAME */
    int seg_seen;    /* this file's SEGMENT record was read */
    uint32_t seg_last; /* the segment read before */
    int oom;
} load_ctx;

static int on_process(void *ctx, const cp_rec_process *p)
{
    load_ctx *x = ctx;
    if (p->rank >= 0)
        x->r->rank = p->rank;
    if (p->local_rank >= 0)
        x->r->local_rank = p->local_rank;
    if (p->world_size > 0)
        x->r->world_size = p->world_size;
    if (p->nccl_version)
        x->r->nccl_version = p->nccl_version;
    if (p->pid)
        x->r->pid = p->pid;
    size_t pos = 0, len;
    const char *str;
    if (cp_rec_next_string(&p->h, &pos, &str, &len) && len > 0) {
        if (len > CP_HOSTNAME_BYTES)
            len = CP_HOSTNAME_BYTES;
        memcpy(x->r->hostname, str, len);
        x->r->hostname[len] = '\0';
    }
    return 0;
}

/* A communicator (or kernel name) a segment's head repeats: the same index and identity as
 * one already read. */
static int repeated_comm(const load_ctx *x, const cp_rec_comm *c)
{
    const cpa_rank *r = x->r;
    if (c->comm_index < DIRECT_COMMS) {
        uint32_t at = x->comm_at[c->comm_index];
        return at && r->comms[at - 1].comm_id == c->comm_id;
    }
    for (size_t i = 0; i < r->ncomms; i++)
        if (r->comms[i].index == c->comm_index && r->comms[i].comm_id == c->comm_id)
            return 1;
    return 0;
}

static int on_comm(void *ctx, const cp_rec_comm *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (x->repeat && repeated_comm(x, c))
        return 0;
    if (cpa_grow((void **)&r->comms, &r->cap_comms, r->ncomms + 1, sizeof *r->comms)) {
        x->oom = 1;
        return 1;
    }
    r->comms[r->ncomms++] = (cpa_comm){.comm_id = c->comm_id, .parent_id = c->parent_id,
                                       .index = c->comm_index, .nranks = c->nranks,
                                       .rank = c->rank, .cuda_dev = c->cuda_dev};
    if (c->comm_index < DIRECT_COMMS) {
        if (x->comm_at[c->comm_index])
            x->resolve_again = 1;
        else
            x->comm_at[c->comm_index] = (uint32_t)r->ncomms;
    }
    return 0;
}

static inline void saw_time(cpa_rank *r, uint64_t ns)
{
    if (!ns)
        return;
    if (!r->first_ns || ns < r->first_ns)
        r->first_ns = ns;
    if (ns > r->last_ns)
        r->last_ns = ns;
}

/* Streams by index: a job uses a handful, and consecutive calls mostly repeat one. */
static int stream_index_slow(load_ctx *x, uint64_t handle, uint16_t *out)
{
    cpa_rank *r = x->r;
    for (size_t i = 0; i < r->nstreams; i++)
        if (r->streams[i] == handle) {
            x->last_stream = (uint32_t)i;
            *out = (uint16_t)i;
            return 0;
        }
    if (r->nstreams >= UINT16_MAX) { /* a hostile file: the rest share the last index */
        *out = UINT16_MAX - 1;
        return 0;
    }
    if (cpa_grow((void **)&r->streams, &r->cap_streams, r->nstreams + 1, sizeof *r->streams))
        return -1;
    r->streams[r->nstreams] = handle;
    x->last_stream = (uint32_t)r->nstreams;
    *out = (uint16_t)r->nstreams++;
    return 0;
}

static inline int stream_index(load_ctx *x, uint64_t handle, uint16_t *out)
{
    const cpa_rank *r = x->r;
    if (x->last_stream < r->nstreams && r->streams[x->last_stream] == handle) {
        *out = (uint16_t)x->last_stream;
        return 0;
    }
    return stream_index_slow(x, handle, out);
}

/* A site's frames joined into one line, innermost first; the first site record of an
 * index wins. Indexes are small and dense (the shim numbers them from 0); a larger one
 * than the file could plausibly hold is ignored rather than sized for. */
static int on_site(void *ctx, const cp_rec_site *s)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (s->site_index >= CPA_SITE_NONE) /* a call's index of it would not fit cpa_call */
        return 0;
    if (s->site_index >= r->nsites) {
        size_t n = r->nsites ? r->nsites : 16;
        while (n <= s->site_index)
            n *= 2;
        char **p = realloc(r->sites, n * sizeof *p);
        if (!p) {
            x->oom = 1;
            return 1;
        }
        memset(p + r->nsites, 0, (n - r->nsites) * sizeof *p);
        r->sites = p;
        r->nsites = n;
    }
    if (r->sites[s->site_index])
        return 0;
    char line[512];
    size_t used = 0, pos = 0, len;
    const char *str;
    line[0] = '\0';
    for (unsigned f = 0; f < s->frame_count && cp_rec_next_string(&s->h, &pos, &str, &len);
         f++) {
        char frame[256];
        size_t flen = cpa_demangle_frame(str, len, frame, sizeof frame);
        int n = snprintf(line + used, sizeof line - used, "%s%.*s", f ? " < " : "", (int)flen,
                         frame);
        if (n < 0 || (size_t)n >= sizeof line - used)
            break;
        used += (size_t)n;
    }
    if (!used)
        snprintf(line, sizeof line, "0x%llx", (unsigned long long)s->return_addr);
    r->sites[s->site_index] = strdup(line);
    if (!r->sites[s->site_index]) {
        x->oom = 1;
        return 1;
    }
    return 0;
}

/* A clock sample the clocks may use: both times known (0 is unknown) and possible. */
static int clock_usable(cpa_rank *r, uint64_t mono_ns, uint64_t realtime_ns)
{
    if (!mono_ns || !realtime_ns)
        return 0;
    if (mono_ns > CPA_TIME_MAX || realtime_ns > CPA_TIME_MAX) {
        r->bad_clocks++;
        return 0;
    }
    return 1;
}

static int on_clock(void *ctx, const cp_rec_clock *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (!clock_usable(r, c->mono_ns, c->realtime_ns))
        return 0;
    saw_time(r, c->mono_ns); /* the writer's heartbeat: the process lived until then */
    if (cpa_grow((void **)&r->clocks, &r->cap_clocks, r->nclocks + 1, sizeof *r->clocks)) {
        x->oom = 1;
        return 1;
    }
    r->clocks[r->nclocks++] = (cpa_clock_sample){c->mono_ns, c->realtime_ns};
    return 0;
}

static int on_kname(void *ctx, const cp_rec_kname *k)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    for (size_t i = 0; x->repeat && i < r->nknames; i++)
        if (r->knames[i].name_index == k->name_index)
            return 0;
    if (cpa_grow((void **)&r->knames, &r->cap_knames, r->nknames + 1, sizeof *r->knames)) {
        x->oom = 1;
        return 1;
    }
    cp_rec_kname *n = &r->knames[r->nknames++];
    *n = *k;
    n->name[sizeof n->name - 1] = '\0'; /* a hostile file's unterminated name */
    return 0;
}

static int on_kernels(void *ctx, const cp_rec_kernels *k)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (cpa_grow((void **)&r->kernels, &r->cap_kernels, r->nkernels + 1, sizeof *r->kernels)) {
        x->oom = 1;
        return 1;
    }
    cp_rec_kernels *n = &r->kernels[r->nkernels++];
    *n = *k;
    if (n->nkernels > CP_KERNELS_MAX)
        n->nkernels = CP_KERNELS_MAX;
    return 0;
}

static int on_hang(void *ctx, const cp_rec_hang *h)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (h->at_ns > CPA_TIME_MAX) {
        r->bad_times++;
        return 0;
    }
    size_t cap = r->cap_hangs;
    if (cpa_grow((void **)&r->hangs, &r->cap_hangs, r->nhangs + 1, sizeof *r->hangs)) {
        x->oom = 1;
        return 1;
    }
    if (r->cap_hangs != cap) {
        uint32_t *p = realloc(x->hang_comm_index, r->cap_hangs * sizeof *p);
        if (!p) {
            x->oom = 1;
            return 1;
        }
        x->hang_comm_index = p;
    }
    x->hang_comm_index[r->nhangs] = h->comm_index;
    r->hangs[r->nhangs++] = (cpa_hang_seen){.seq = h->seq, .at_ns = h->at_ns,
                                            .age_ns = h->age_ns, .peer = h->peer,
                                            .op = h->op, .gpu_state = h->gpu_state};
    saw_time(r, h->at_ns);
    return 0;
}

/* Makes room for call r->ncalls: grows the array when full, and has the kernel map the
 * next block of it in one go. Faulting in the model's pages one by one is the largest cost
 * of a load after the walk itself (a 1024-rank job keeps 0.9 GB of calls); populating 44
 * pages per system call saves 15-20 % of it. 0, or -1 out of memory. */
#define POPULATE_CALLS 2048
static int call_room(load_ctx *x)
{
    cpa_rank *r = x->r;
    /* call_idx + 1 must fit the table's u32 slots. */
    if (r->ncalls >= UINT32_MAX - 1)
        return -1;
    if (r->ncalls >= r->cap_calls &&
        cpa_grow((void **)&r->calls, &r->cap_calls, r->ncalls + 1, sizeof *r->calls))
        return -1;
    size_t end = r->cap_calls - r->ncalls > POPULATE_CALLS ? r->ncalls + POPULATE_CALLS
                                                          : r->cap_calls;
    if (end > UINT32_MAX - 1)
        end = UINT32_MAX - 1;
#ifdef MADV_POPULATE_WRITE
    if (!x->s->no_populate) {
        const size_t page = x->s->page;
        /* Whole pages inside [ncalls, end) only: the rest of a page may be another's. */
        uintptr_t a = ((uintptr_t)&r->calls[r->ncalls] + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t b = (uintptr_t)&r->calls[end] & ~(uintptr_t)(page - 1);
        if (b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
            x->s->no_populate = 1;
    }
#endif
    x->call_room = end;
    return 0;
}

/* Collectives and Send/Recv are the ops 1..10 (cp_op_is_collective, cp_op_is_p2p): one
 * compare on the hottest path. */
_Static_assert(CP_OP_ALLREDUCE == 1 && CP_OP_SCATTER + 1 == CP_OP_SEND &&
               CP_OP_SEND + 1 == CP_OP_RECV, "collective and p2p ops are 1..CP_OP_RECV");

/* What matching's census needs of a stored call (match.c's call_kind, less what only the
 * COMM record decides). */
static inline void count_call(load_ctx *x, const cp_rec_call *c)
{
    if (c->comm_index >= DIRECT_COMMS) {
        x->census_off = 1;
        return;
    }
    cpa_comm_census *k = &x->census[c->comm_index];
    if (c->comm_index >= x->census_top) {
        for (uint32_t i = x->census_top; i <= c->comm_index; i++)
            x->census[i] = (cpa_comm_census){.first_seq = UINT64_MAX};
        x->census_top = c->comm_index + 1;
    }
    if (c->seq == CPA_SEQ_NONE) {
        k->nnone++;
    } else if (c->op == CP_OP_SEND || c->op == CP_OP_RECV) {
        if (c->peer < 0)
            k->nnone++;
        else
            k->np2p++;
    } else {
        k->gaps |= k->ncoll && c->seq != k->next_seq;
        k->next_seq = c->seq + 1;
        k->ncoll++;
        if (c->seq < k->first_seq)
            k->first_seq = c->seq;
        if (c->seq > k->last_seq)
            k->last_seq = c->seq;
    }
}

static int on_call(void *ctx, const cp_rec_call *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    /* an abort ends the kernels it releases: their DONEs then say nothing of being done */
    if (c->op == CP_OP_COMM_ABORT && c->enter_ns && (!r->abort_ns || c->enter_ns < r->abort_ns))
        r->abort_ns = c->enter_ns;
    if ((unsigned)c->op - CP_OP_ALLREDUCE > (unsigned)(CP_OP_RECV - CP_OP_ALLREDUCE))
        return 0;
    if (c->enter_ns > CPA_TIME_MAX) {
        r->bad_times++;
        return 0;
    }
    if (r->ncalls >= x->call_room && call_room(x)) {
        x->oom = 1;
        return 1;
    }
    uint32_t idx = (uint32_t)r->ncalls;
    uint16_t stream;
    if (stream_index(x, c->stream, &stream)) {
        x->oom = 1;
        return 1;
    }
    cpa_call *k = &r->calls[idx];
    /* its communicator is looked up when read (cpa_call_comm); one not seen yet, or past the
     * direct table, is counted after the walk if it never comes */
    if (!(c->comm_index < DIRECT_COMMS && x->comm_at[c->comm_index]))
        x->resolve_again = 1;
    /* one store of the whole line, not a read-modify-write per bit-field */
    *k = (cpa_call){
        .seq = c->seq,
        .count = c->count,
        .enter_ns = c->enter_ns,
        .comm_index = c->comm_index,
        .host_q = cpa_host_pack(cp_call_host_ns(c)),
        .peer = c->peer,
        .site_index = c->site_index < CPA_SITE_NONE ? c->site_index : CPA_SITE_NONE,
        .stream = stream,
        .op = c->op,
        .dtype = c->dtype,
        .redop = c->redop,
        .flags = c->flags,
        .result = c->result,
    };
    r->ngrouped += (c->flags & CP_CALL_IN_GROUP) != 0;
    r->nrefused += cpa_call_refused(k);
    r->ncalls++;
    count_call(x, c);
    saw_time(r, c->enter_ns + cp_call_host_ns(c));
    saw_time(r, c->enter_ns);
    cpa_done_added(&x->done, r);
    if (x->nccl_on)
        cpa_done_added(&x->nccl, r);
    return 0;
}

static int on_done(void *ctx, const cp_rec_done *d)
{
    load_ctx *x = ctx;
    const cpa_pair_key key = cpa_pair_key_done(d);
    cpa_call *c = cpa_done_find(&x->done, x->r, &key, &x->oom);
    if (x->oom)
        return 1;
    if (!c) {
        x->r->unmatched_done++;
        return 0;
    }
    c->done = 1;
    c->timing = d->timing <= CPA_TIMING_LAST_KNOWN ? d->timing : CPA_TIMING_UNKNOWN;
    if (d->gpu_start_ns > 0 && d->timing != CP_TIMING_NONE && d->timing != CP_TIMING_HOST) {
        /* The call is done all the same (a DONE came); only these times are unbelievable. */
        if (d->gpu_end_ns < d->gpu_start_ns || d->gpu_end_ns > CPA_TIME_MAX) {
            x->r->bad_times++;
        } else {
            c->gpu_timed = 1;
            c->gpu_start_ns = d->gpu_start_ns;
            c->gpu_end_ns = d->gpu_end_ns;
            saw_time(x->r, d->gpu_end_ns);
        }
    }
    cpa_done_marked(&x->done, x->r, c);
    return 0;
}

/* NCCL's seqNumber of call idx, beside the calls (model.h says why); the calls between
 * the last one given a number and this one get none. 0, or -1 out of memory. */
static int keep_nccl_seq(cpa_rank *r, size_t idx, uint64_t nccl_seq)
{
    if (idx >= r->nnccl_seqs) {
        if (cpa_grow((void **)&r->nccl_seqs, &r->cap_nccl_seqs, idx + 1, sizeof *r->nccl_seqs))
            return -1;
        for (size_t i = r->nnccl_seqs; i < idx; i++)
            r->nccl_seqs[i] = CPA_SEQ_NONE;
        r->nnccl_seqs = idx + 1;
    }
    r->nccl_seqs[idx] = nccl_seq;
    return 0;
}

/* What NCCL's profiler plugin said of a call: its own pairer, so that it finds its call
 * before or after that call's DONE (the shim writes it before; the format promises no
 * order). A second one for a call goes to the next call of its key, or is unmatched. An
 * algorithm or protocol this collprof has no name for is kept as unknown ("?"). */
static int on_nccl_op(void *ctx, const cp_rec_nccl_op *n)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (!x->nccl_on) {
        x->nccl_on = 1;
        cpa_done_begin(&x->nccl, r);
    }
    const cpa_pair_key key = cpa_pair_key_nccl_op(n);
    cpa_call *c = cpa_done_find(&x->nccl, r, &key, &x->oom);
    if (x->oom)
        return 1;
    if (!c) {
        r->unmatched_nccl_op++;
        return 0;
    }
    c->algo = n->algo < CP_ALGO_COUNT ? n->algo : CP_ALGO_UNKNOWN;
    c->proto = n->proto < CP_PROTO_COUNT ? n->proto : CP_PROTO_UNKNOWN;
    c->nchannels = n->nchannels;
    c->nccl = CPA_NCCL_SEEN | (n->kernel_started == 0 ? CPA_NCCL_NOT_STARTED : 0);
    if (n->nccl_seq != CPA_SEQ_NONE && keep_nccl_seq(r, (size_t)(c - r->calls), n->nccl_seq)) {
        x->oom = 1;
        return 1;
    }
    cpa_done_marked(&x->nccl, r, c);
    return 0;
}

static int on_lost(void *ctx, const cp_rec_lost *l)
{
    load_ctx *x = ctx;
    cpa_integrity *g = &x->r->integrity;
    x->lost_in_records = cpa_sat_add(x->lost_in_records, l->count);
    /* a number without a name (one kept for a cause to come) reads as unknown: every output
     * names the causes it counts */
    unsigned cause = cp_lost_cause_name(l->cause) ? l->cause : 0;
    g->lost_by_cause[cause] = cpa_sat_add(g->lost_by_cause[cause], l->count);
    if (cause == CP_LOST_ROTATED) {
        /* before the kept span, not a hole in it: the rank's rotated_records says it */
        x->rotated_in_records = cpa_sat_add(x->rotated_in_records, l->count);
        return 0;
    }
    if (l->at_ns && l->at_ns <= CPA_TIME_MAX && (!g->first_gap_ns || l->at_ns < g->first_gap_ns))
        g->first_gap_ns = l->at_ns;
    return 0;
}

static int on_untimed(void *ctx, const cp_rec_untimed *u)
{
    cpa_integrity *g = &((load_ctx *)ctx)->r->integrity;
    unsigned cause = u->cause <= CP_UNTIMED_CAUSE_LAST ? u->cause : 0;
    g->untimed_by_cause[cause] = cpa_sat_add(g->untimed_by_cause[cause], u->count);
    return 0;
}

static int on_end(void *ctx, const cp_rec_end *e)
{
    cpa_rank *r = ((load_ctx *)ctx)->r;
    r->ended = 1;
    r->end_signal = e->signal;
    r->end_exit_code = e->exit_code;
    if (e->at_ns > CPA_TIME_MAX) { /* the clean exit stands; its time is unknown */
        r->bad_times++;
        r->end_ns = 0;
        return 0;
    }
    r->end_ns = e->at_ns;
    saw_time(r, e->at_ns);
    return 0;
}

/* The head of a rotated trace's segment. The first segment read says what was rotated away
 * before it; a later one that does not follow the one before means segments are missing. */
static int on_segment(void *ctx, const cp_rec_segment *sg)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (x->seg_seen) /* a file has one, first: another is no head */
        return 0;
    x->seg_seen = 1;
    if (!r->segments++) {
        r->rotated_records = sg->segment ? sg->records_before : 0;
        r->kept_from_ns = sg->segment && sg->at_ns <= CPA_TIME_MAX ? sg->at_ns : 0;
    } else if (sg->segment != x->seg_last + 1) {
        r->integrity.missing_chunks = cpa_sat_add(r->integrity.missing_chunks, 1);
        cpa_model_warn(x->m, "'%s': segments %u to %u of its rotated trace are missing", r->path,
                       x->seg_last + 1, sg->segment - 1);
    }
    x->seg_last = sg->segment;
    return 0;
}

static int cmp_comm(const void *a, const void *b)
{
    const cpa_comm *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->comm_id < y->comm_id ? -1 : x->comm_id > y->comm_id;
}

/* Sorts the COMM records by index (cpa_call_comm looks them up), warns of an index two of
 * them claim (the first after sorting is the one kept) and, when the walk could not tell
 * (a call came before its COMM record, the shim's order and not the format's promise, or
 * named an index past DIRECT_COMMS), counts the calls that name none. */
static void resolve_comms(cpa_model *m, cpa_rank *r, const uint32_t *hang_comm_index,
                          int again)
{
    if (r->ncomms) /* a file cut to nothing has no array at all: qsort(NULL, 0) is UB */
        qsort(r->comms, r->ncomms, sizeof *r->comms, cmp_comm);
    size_t dup = 0;
    for (size_t i = 1; i < r->ncomms; i++)
        dup += r->comms[i].index == r->comms[i - 1].index &&
               r->comms[i].comm_id != r->comms[i - 1].comm_id;
    if (dup)
        cpa_model_warn(m, "'%s': %zu comm indexes name two communicators; the first kept",
                       r->path, dup);
    /* Every index below the largest (up to DIRECT_COMMS) to its record, for cpa_comm_of:
     * each stage looks a call's communicator up, and a search per call was 6 % of the
     * analysis' instructions. A table that cannot be had leaves the search. */
    size_t top = 0;
    for (size_t i = 0; i < r->ncomms; i++)
        if (r->comms[i].index < DIRECT_COMMS && r->comms[i].index + 1u > top)
            top = r->comms[i].index + 1u;
    if (top && (r->comm_at = calloc(top, sizeof *r->comm_at)) != NULL) {
        for (size_t i = r->ncomms; i-- > 0;) /* of two claiming an index, the first sorted */
            if (r->comms[i].index < top)
                r->comm_at[r->comms[i].index] = (uint32_t)i + 1;
        r->ncomm_at = top;
    }
    uint64_t orphans = 0;
    const cpa_comm *last = NULL;
    for (size_t i = 0; again && i < r->ncalls; i++) {
        const cpa_call *c = &r->calls[i];
        if (!last || last->index != c->comm_index)
            last = cpa_comm_of(r, c->comm_index);
        orphans += !last;
    }
    if (orphans)
        cpa_model_warn(m, "'%s': %" PRIu64 " calls name no known communicator; not matched",
                       r->path, orphans);
    for (size_t i = 0; i < r->nhangs; i++) {
        const cpa_comm *k = cpa_comm_of(r, hang_comm_index[i]);
        r->hangs[i].comm_id = k ? k->comm_id : 0;
    }
}

/* What one file's walk found (a rotated trace: each segment's). */
static void file_warnings(cpa_model *m, const char *path, const cp_walk_result *res)
{
    if (res->stop == CP_WALK_TRUNCATED)
        cpa_model_warn(m, "'%s' is cut at byte %" PRIu64 ": the %" PRIu64
                       " whole chunks before it were read", path, res->first_bad_offset,
                       res->chunks);
    if (res->corrupt_chunks)
        cpa_model_warn(m, "'%s': %" PRIu64 " corrupt chunks skipped (%s)", path,
                       res->corrupt_chunks, res->message);
    if (res->missing_chunks)
        cpa_model_warn(m, "'%s': %" PRIu64 " chunks missing", path, res->missing_chunks);
    if (res->unknown_records)
        cpa_model_warn(m, "'%s': %" PRIu64 " records of a type this collprof does not know "
                       "(from a newer one?) skipped", path, res->unknown_records);
}

static void walk_warnings(cpa_model *m, const cpa_rank *r)
{
    if (r->rotated_records)
        cpa_model_warn(m, "'%s': the trace was rotated (COLLPROF_MAX_MB): its oldest %" PRIu64
                       " records were deleted, %u segments kept", r->path, r->rotated_records,
                       r->segments);
    if (r->lost_records > r->rotated_records)
        cpa_model_warn(m, "'%s': the writer lost %" PRIu64 " records", r->path,
                       r->lost_records - r->rotated_records);
    /* a rotated trace's first DONEs may be of calls in the segments deleted */
    const char *rotated = r->rotated_records ? " (rotation may have deleted their calls)" : "";
    if (r->unmatched_done)
        cpa_model_warn(m, "'%s': %" PRIu64 " DONE records match no CALL%s", r->path,
                       r->unmatched_done, rotated);
    if (r->unmatched_nccl_op)
        cpa_model_warn(m, "'%s': %" PRIu64 " NCCL_OP records match no CALL%s", r->path,
                       r->unmatched_nccl_op, rotated);
    if (r->bad_clocks)
        cpa_model_warn(m, "'%s': %" PRIu64 " clock samples rejected: a time past 2^62 ns",
                       r->path, r->bad_clocks);
    if (r->bad_times)
        cpa_model_warn(m, "'%s': %" PRIu64 " records with an impossible time (past 2^62 ns, or "
                       "a GPU end before its start): CALL and HANG records left out, DONE and "
                       "END times unused", r->path, r->bad_times);
}

/* The most CALL records a file of this length can hold: what the calls array starts at. */
static size_t calls_bound(uint64_t len)
{
    if (len <= CP_TRACE_HEADER_BYTES)
        return 0;
    uint64_t n = (len - CP_TRACE_HEADER_BYTES) / sizeof(cp_rec_call);
    return n < MAX_PRESIZE_CALLS ? (size_t)n : MAX_PRESIZE_CALLS;
}

/* The calls bound of one file to load: a path, or a name and bytes (cpa_model_load_mem). */
static size_t file_bound(const char *path, const cpa_mem_file *mem)
{
    struct stat sb;
    if (mem)
        return calls_bound(mem->len);
    return stat(path, &sb) == 0 && sb.st_size > 0 ? calls_bound((uint64_t)sb.st_size) : 0;
}

static cp_trace_reader *open_file(const char *path, const cpa_mem_file *mem, int *status,
                                  char *err, size_t errlen)
{
    if (mem)
        return cp_trace_reader_open_mem(mem->data, mem->len, path, status, err, errlen);
    return cp_trace_reader_open(path, status, err, errlen);
}

/* The files of one process: one, or a rotated trace's segments in order. */
typedef struct load_files_of {
    char *const *paths;      /* paths, or mem's names */
    const cpa_mem_file *mem; /* NULL: read the paths */
    const int *order;        /* the process's files: indexes into paths and mem */
    int n;
} load_files_of;

/* 0 loaded, 1 skipped with a warning, -1 out of memory. Warnings go to wm, the process's own
 * list; r is its slot; s is the loading thread's scratch. */
static int load_file(cpa_model *wm, cpa_rank *r, const load_files_of *f, load_scratch *s)
{
    int status;
    char err[256];
    int k = 0;
    cp_trace_reader *rd = NULL;
#define F_PATH(k) (f->paths[f->order[k]])
#define F_MEM(k) (f->mem ? &f->mem[f->order[k]] : NULL)
    for (; k < f->n && !rd; k++)
        if (!(rd = open_file(F_PATH(k), F_MEM(k), &status, err, sizeof err)) &&
            cpa_model_warn(wm, "%s: skipped", err))
            return -1;
    if (!rd)
        return 1;
    size_t bound = 0;
    for (int j = k - 1; j < f->n; j++) {
        bound += file_bound(F_PATH(j), F_MEM(j));
        if (bound > MAX_PRESIZE_CALLS)
            bound = MAX_PRESIZE_CALLS;
    }
    const cp_file_header *h = cp_trace_reader_header(rd);
    memset(r, 0, sizeof *r);
    r->path = strdup(F_PATH(k - 1));
    r->rank = h->rank;
    r->local_rank = h->local_rank;
    r->world_size = h->world_size;
    r->pid = h->pid;
    r->file_flags = h->flags;
    r->nccl_version = h->nccl_version;
    r->end_exit_code = -1;
    memcpy(r->hostname, h->hostname, CP_HOSTNAME_BYTES);
    r->hostname[CP_HOSTNAME_BYTES] = '\0';
    memcpy(r->job_id, h->job_id, CP_JOBID_BYTES);
    r->job_id[CP_JOBID_BYTES] = '\0';
    if (clock_usable(r, h->mono_anchor_ns, h->realtime_anchor_ns)) {
        r->clocks = malloc(sizeof *r->clocks);
        if (!r->clocks) {
            cp_trace_reader_close(rd);
            return -1;
        }
        r->clocks[0] = (cpa_clock_sample){h->mono_anchor_ns, h->realtime_anchor_ns};
        r->nclocks = r->cap_clocks = 1;
    }
    load_ctx x = {.m = wm, .r = r, .s = s, .done = {.s = &s->done, .kind = CPA_PAIR_DONE},
                  .nccl = {.s = &s->nccl, .kind = CPA_PAIR_NCCL_OP}};
    if (bound) {
        /* a call a cache line (model.h); malloc's big blocks start 16 bytes into a page, and
         * the trim below shrinks in place */
        r->calls = aligned_alloc(64, bound * sizeof *r->calls);
        r->cap_calls = r->calls ? bound : 0;
    }
    if (bound && !r->calls) {
        cp_trace_reader_close(rd);
        return -1;
    }

    cp_trace_visitor v = {.ctx = &x, .on_process = on_process, .on_comm = on_comm,
                          .on_site = on_site, .on_call = on_call, .on_done = on_done,
                          .on_nccl_op = on_nccl_op, .on_clock = on_clock, .on_lost = on_lost, .on_untimed = on_untimed,
                          .on_hang = on_hang, .on_end = on_end, .on_kname = on_kname,
                          .on_kernels = on_kernels, .on_segment = on_segment};
    /* A rotated trace's segments, one after the other into the same rank: the pairers carry
     * a call's DONE across a segment's end. */
    cp_walk_result res = {0};
    for (int first = 1; rd; first = 0) {
        cp_walk_result one;
        x.seg_seen = 0;
        x.repeat = !first;
        cp_trace_walk(rd, &v, &one);
        cp_trace_reader_close(rd);
        rd = NULL;
        file_warnings(wm, F_PATH(k - 1), &one);
        res.records += one.records;
        res.unknown_records += one.unknown_records;
        res.corrupt_chunks += one.corrupt_chunks;
        res.missing_chunks += one.missing_chunks;
        res.lost_records = one.lost_records; /* the running total: the newest file's */
        res.stop = res.stop == CP_WALK_TRUNCATED ? res.stop : one.stop;
        if (x.oom)
            break;
        for (; k < f->n && !rd; k++)
            if (!(rd = open_file(F_PATH(k), F_MEM(k), &status, err, sizeof err)) &&
                cpa_model_warn(wm, "%s: skipped", err))
                x.oom = 1;
    }
#undef F_PATH
#undef F_MEM
    if (rd)
        cp_trace_reader_close(rd);
    if (x.oom || !r->path) {
        free(x.hang_comm_index);
        return -1;
    }
    /* Trim the calls array to the calls kept: the bound counted every byte as a CALL. */
    if (r->cap_calls > r->ncalls) {
        if (!r->ncalls) {
            free(r->calls);
            r->calls = NULL;
            r->cap_calls = 0;
        } else {
            cpa_call *p = realloc(r->calls, r->ncalls * sizeof *p);
            if (p) {
                r->calls = p;
                r->cap_calls = r->ncalls;
            }
        }
    }
    if (r->cap_nccl_seqs > r->nnccl_seqs) { /* the same for NCCL's numbers */
        uint64_t *p = realloc(r->nccl_seqs, r->nnccl_seqs * sizeof *p);
        if (p) {
            r->nccl_seqs = p;
            r->cap_nccl_seqs = r->nnccl_seqs;
        }
    }
    r->records = res.records;
    r->walk_stop = res.stop;
    cpa_integrity *g = &r->integrity;
    /* Rotation: what the first kept segment says was before it, not the LOST records the kept
     * segments happen to hold (those of the earliest deletions went with later ones). */
    g->lost_by_cause[CP_LOST_ROTATED] = r->rotated_records;
    /* The kept span starts at its oldest call (the segment opened when the writer drained
     * them, a little after): the earliest in the first segment's first chunks. */
    if (r->rotated_records)
        for (size_t i = 0; i < r->ncalls && i < 64; i++)
            if (r->calls[i].enter_ns && r->calls[i].enter_ns < r->kept_from_ns)
                r->kept_from_ns = r->calls[i].enter_ns;
    x.lost_in_records = x.lost_in_records - x.rotated_in_records + r->rotated_records;
    /* The chunk headers' running total counts every cause, but only up to the last whole
     * chunk; LOST records may tell of more in a chunk that survived a later cut. */
    r->lost_records = res.lost_records > x.lost_in_records ? res.lost_records
                                                            : x.lost_in_records;
    g->unknown_records = res.unknown_records;
    g->corrupt_chunks = res.corrupt_chunks;
    g->missing_chunks += res.missing_chunks;
    g->truncated = res.stop == CP_WALK_TRUNCATED;
    /* a cut: the hole starts after the last record read */
    if (g->truncated && r->last_ns && (!g->first_gap_ns || r->last_ns < g->first_gap_ns))
        g->first_gap_ns = r->last_ns;
    cpa_kernels_sort(r);
    if (!x.census_off && x.census_top &&
        (r->census = malloc(x.census_top * sizeof *r->census)) != NULL) {
        memcpy(r->census, x.census, x.census_top * sizeof *r->census);
        r->ncensus = x.census_top;
    }
    resolve_comms(wm, r, x.hang_comm_index, x.resolve_again);
    free(x.hang_comm_index);
    walk_warnings(wm, r);
    return 0;
}

static int cmp_rank(const void *a, const void *b)
{
    const cpa_rank *x = a, *y = b;
    /* Unknown ranks (-1) last, as the report lists them after the named ones. */
    uint32_t rx = (uint32_t)x->rank, ry = (uint32_t)y->rank;
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return strcmp(x->path, y->path);
}

static void free_warnings(cpa_model *w)
{
    for (size_t k = 0; k < w->nwarnings; k++)
        free(w->warnings[k]);
    free(w->warnings);
}

/* The files of one directory (or in memory), shared out: each thread takes the next process
 * not yet taken (a file, or a rotated trace's segments). */
typedef struct load_job {
    char **paths;      /* paths, or the names of mem's files */
    const cpa_mem_file *mem; /* NULL: read the paths */
    int *order;        /* the files, each process's together, its segments in order */
    int *first;        /* process i's files: order[first[i] .. first[i + 1]) */
    int n;             /* processes */
    cpa_rank *ranks;   /* slot per process */
    cpa_model *warn;   /* warning list per process */
    int *rc;           /* load_file's answer per process */
    atomic_int next;
    atomic_int failed; /* out of memory somewhere: take no more files */
} load_job;

static void *load_worker(void *arg)
{
    load_job *j = arg;
    long page = sysconf(_SC_PAGESIZE);
    load_scratch s = {.page = page > 0 ? (size_t)page : 4096};
    int i;
    while (!atomic_load_explicit(&j->failed, memory_order_relaxed) &&
           (i = atomic_fetch_add(&j->next, 1)) < j->n) {
        load_files_of f = {.paths = j->paths, .mem = j->mem, .order = j->order + j->first[i],
                           .n = j->first[i + 1] - j->first[i]};
        j->rc[i] = load_file(&j->warn[i], &j->ranks[i], &f, &s);
        if (j->rc[i] < 0)
            atomic_store(&j->failed, 1);
    }
    free(s.done.slots);
    free(s.nccl.slots);
    return NULL;
}

/* Orders the files so that a rotated trace's segments (cp_trace_segment_of) follow each
 * other, oldest first, after the file of its segment 0 where that is still there. */
typedef struct seg_key {
    const char *name;
    size_t family;
    long segment;
    int index;
} seg_key;

static int cmp_seg_key(const void *a, const void *b)
{
    const seg_key *x = a, *y = b;
    size_t n = x->family < y->family ? x->family : y->family;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    if (x->family != y->family)
        return x->family < y->family ? -1 : 1;
    if (x->segment != y->segment)
        return x->segment < y->segment ? -1 : 1;
    return x->index - y->index;
}

/* Fills order (n) and first (processes + 1); returns the number of processes, -1 no memory. */
static int group_segments(char **paths, int n, int *order, int *first)
{
    seg_key *k = malloc((size_t)n * sizeof *k);
    if (!k)
        return -1;
    for (int i = 0; i < n; i++) {
        k[i].name = paths[i];
        k[i].segment = cp_trace_segment_of(paths[i], &k[i].family);
        k[i].index = i;
    }
    qsort(k, (size_t)n, sizeof *k, cmp_seg_key);
    int groups = 0;
    for (int i = 0; i < n; i++) {
        order[i] = k[i].index;
        if (i == 0 || k[i].family != k[i - 1].family ||
            memcmp(k[i].name, k[i - 1].name, k[i].family) != 0)
            first[groups++] = i;
    }
    first[groups] = n;
    free(k);
    return groups;
}

static unsigned online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* Runs the job on `threads` threads, the caller's among them; fewer when a thread cannot
 * be started (the answer is the same, only slower). */
static void run_load(load_job *j, unsigned threads)
{
    pthread_t tid[MAX_THREADS];
    unsigned started = 0;
    for (unsigned t = 1; t < threads && t < MAX_THREADS; t++)
        if (pthread_create(&tid[started], NULL, load_worker, j) == 0)
            started++;
    load_worker(j);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}

/* Loads the n files of paths (mem: their bytes) into *out on `threads` threads (0: one per
 * CPU); where says what they are in messages. Frees paths. */
static int load_files(char **paths, const cpa_mem_file *mem, int n, unsigned threads,
                      const char *where, cpa_model **out, char *err, size_t errlen)
{
    load_job j = {.paths = paths, .mem = mem};
    j.order = malloc((size_t)n * sizeof *j.order);
    j.first = malloc(((size_t)n + 1) * sizeof *j.first);
    if (!j.order || !j.first || (j.n = group_segments(paths, n, j.order, j.first)) < 0) {
        free(j.order);
        free(j.first);
        cp_trace_dir_free(paths, n);
        snprintf(err, errlen, "out of memory loading '%s'", where);
        return -1;
    }
    if (j.n >= CPA_MAX_RANKS) {
        snprintf(err, errlen, "%d trace files in '%s': at most %d can be analysed together",
                 j.n, where, CPA_MAX_RANKS - 1);
        free(j.order);
        free(j.first);
        cp_trace_dir_free(paths, n);
        return -1;
    }
    int nfiles = n;
    n = j.n;
    cpa_model *m = calloc(1, sizeof *m);
    if (m)
        m->ranks = calloc((size_t)n, sizeof *m->ranks);
    j.ranks = m ? m->ranks : NULL;
    j.warn = calloc((size_t)n, sizeof *j.warn);
    j.rc = malloc((size_t)n * sizeof *j.rc);
    if (!m || !m->ranks || !j.warn || !j.rc)
        goto oom;
    for (int i = 0; i < n; i++)
        j.rc[i] = 1;
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    if (!threads)
        threads = online_cpus() < MAX_THREADS ? online_cpus() : MAX_THREADS;
    if (threads > (unsigned)n)
        threads = (unsigned)n;
    run_load(&j, threads);
    if (atomic_load(&j.failed))
        goto oom;

    /* In file order: the loaded slots packed to the front, their warnings after each other. */
    for (int i = 0; i < n; i++) {
        const cpa_model *w = &j.warn[i];
        for (size_t k = 0; k < w->nwarnings; k++)
            if (cpa_model_warn(m, "%s", w->warnings[k]))
                goto oom;
        m->dropped_warnings += w->dropped_warnings;
        if (j.rc[i] == 0) {
            cpa_rank *r = &m->ranks[m->nranks];
            if (r != &m->ranks[i]) {
                *r = m->ranks[i];
                memset(&m->ranks[i], 0, sizeof m->ranks[i]);
            }
            m->records += r->records;
            m->lost_records = cpa_sat_add(m->lost_records, r->lost_records);
            cpa_integrity *g = &m->integrity;
            const cpa_integrity *rg = &r->integrity;
            for (unsigned c = 0; c <= CP_LOST_CAUSE_LAST; c++)
                g->lost_by_cause[c] = cpa_sat_add(g->lost_by_cause[c], rg->lost_by_cause[c]);
            g->unknown_records = cpa_sat_add(g->unknown_records, rg->unknown_records);
            for (unsigned c = 0; c <= CP_UNTIMED_CAUSE_LAST; c++)
                g->untimed_by_cause[c] =
                    cpa_sat_add(g->untimed_by_cause[c], rg->untimed_by_cause[c]);
            g->corrupt_chunks = cpa_sat_add(g->corrupt_chunks, rg->corrupt_chunks);
            g->missing_chunks = cpa_sat_add(g->missing_chunks, rg->missing_chunks);
            g->truncated += rg->truncated;
            m->ranks_with_holes += cpa_rank_has_holes(r) != 0;
            m->rotated_records = cpa_sat_add(m->rotated_records, r->rotated_records);
            m->ranks_rotated += r->rotated_records != 0;
            m->nranks++;
        }
    }
    for (int i = 0; i < n; i++)
        free_warnings(&j.warn[i]);
    free(j.warn);
    free(j.rc);
    free(j.order);
    free(j.first);
    cp_trace_dir_free(paths, nfiles);
    if (m->nranks == 0) {
        snprintf(err, errlen, "no readable trace file in '%s' (%s)", where,
                 m->nwarnings ? m->warnings[0] : "?");
        cpa_model_free(m);
        return -1;
    }
    qsort(m->ranks, m->nranks, sizeof *m->ranks, cmp_rank);
    for (size_t i = 1; i < m->nranks; i++)
        if (m->ranks[i].rank >= 0 && m->ranks[i].rank == m->ranks[i - 1].rank)
            cpa_model_warn(m, "'%s' and '%s' both say rank %d", m->ranks[i - 1].path,
                           m->ranks[i].path, (int)m->ranks[i].rank);
    *out = m;
    return 0;
oom:
    if (j.warn)
        for (int i = 0; i < n; i++)
            free_warnings(&j.warn[i]);
    free(j.warn);
    free(j.rc);
    free(j.order);
    free(j.first);
    cp_trace_dir_free(paths, nfiles);
    if (m && m->ranks)
        m->nranks = (size_t)n; /* every slot: free sees what each file had allocated */
    cpa_model_free(m);
    snprintf(err, errlen, "out of memory loading '%s'", where);
    return -1;
}

int cpa_model_load_threads(const char *dir, unsigned threads, cpa_model **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    char **paths = NULL;
    int n = cp_trace_dir_list(dir, &paths, err, errlen);
    if (n < 0)
        return -1;
    if (n == 0) {
        snprintf(err, errlen, "no trace file (*%s) in '%s'", CP_TRACE_FILE_SUFFIX, dir);
        cp_trace_dir_free(paths, n);
        return -1;
    }
    return load_files(paths, NULL, n, threads, dir, out, err, errlen);
}

int cpa_model_load_mem(const cpa_mem_file *files, size_t n, cpa_model **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    if (n == 0 || n > INT_MAX) {
        snprintf(err, errlen, "no trace file in memory");
        return -1;
    }
    /* As cp_trace_dir_list would list them: the names, each its own allocation. */
    char **names = calloc(n, sizeof *names);
    for (size_t i = 0; names && i < n; i++)
        if (!(names[i] = strdup(files[i].name))) {
            cp_trace_dir_free(names, (int)i);
            names = NULL;
        }
    if (!names) {
        snprintf(err, errlen, "out of memory loading 'memory'");
        return -1;
    }
    return load_files(names, files, (int)n, 1, "memory", out, err, errlen);
}

int cpa_model_load(const char *dir, cpa_model **out, char *err, size_t errlen)
{
    return cpa_model_load_threads(dir, 0, out, err, errlen);
}
