/* analyzer/load.c: every trace file of a directory into the model, one walk per file.
 *
 * A DONE is matched to its CALL through a per-file open-addressing table keyed by
 * (comm_index, op, peer, seq), built as CALLs arrive: DONE records follow their CALL by an
 * unbounded distance (a slow GPU, a long group), so no window of recent calls would do, and
 * the table costs 8 bytes per kept call only while the file is read.
 */
#include "analyzer/model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace_reader.h"

typedef struct load_ctx {
    cpa_model *m;
    cpa_rank *r;
    uint32_t *hang_comm_index; /* each HANG's comm_index, resolved to an id after the walk */
    uint32_t last_stream;      /* the stream index the previous call used: calls repeat it */
    uint32_t *slots;   /* call index + 1; 0 empty */
    size_t nslots;     /* power of two */
    size_t used;
    uint64_t lost_in_records;
    int oom;
} load_ctx;

static uint64_t key_hash(uint32_t comm_index, uint8_t op, int32_t peer, uint64_t seq)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)comm_index << 32 | (uint32_t)peer) * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)op * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

static int same_key(const cpa_call *c, uint32_t comm_index, uint8_t op, int32_t peer,
                    uint64_t seq)
{
    return c->comm_index == comm_index && c->op == op && c->peer == peer && c->seq == seq;
}

static void slot_put(load_ctx *x, uint32_t call_idx)
{
    const cpa_call *c = &x->r->calls[call_idx];
    size_t mask = x->nslots - 1;
    size_t i = key_hash(c->comm_index, c->op, c->peer, c->seq) & mask;
    while (x->slots[i])
        i = (i + 1) & mask;
    x->slots[i] = call_idx + 1;
}

static int index_call(load_ctx *x, uint32_t call_idx)
{
    if ((x->used + 1) * 2 > x->nslots) {
        size_t n = x->nslots ? x->nslots * 2 : 1024;
        uint32_t *s = calloc(n, sizeof *s);
        if (!s)
            return -1;
        free(x->slots);
        x->slots = s;
        x->nslots = n;
        /* Rehash from the calls themselves: every indexed call is one of them. */
        for (uint32_t i = 0; i < call_idx; i++)
            slot_put(x, i);
    }
    slot_put(x, call_idx);
    x->used++;
    return 0;
}

/* The first call with this key that has no DONE yet: a key seen twice (a hostile or
 * restarted writer) then pairs its DONEs in order. */
static cpa_call *find_call(load_ctx *x, const cp_rec_done *d)
{
    if (!x->nslots)
        return NULL;
    size_t mask = x->nslots - 1;
    for (size_t i = key_hash(d->comm_index, d->op, d->peer, d->seq) & mask; x->slots[i];
         i = (i + 1) & mask) {
        cpa_call *c = &x->r->calls[x->slots[i] - 1];
        if (!c->done && same_key(c, d->comm_index, d->op, d->peer, d->seq))
            return c;
    }
    return NULL;
}

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

static int on_comm(void *ctx, const cp_rec_comm *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (cpa_grow((void **)&r->comms, &r->cap_comms, r->ncomms + 1, sizeof *r->comms)) {
        x->oom = 1;
        return 1;
    }
    r->comms[r->ncomms++] = (cpa_comm){.comm_id = c->comm_id, .parent_id = c->parent_id,
                                       .index = c->comm_index, .nranks = c->nranks,
                                       .rank = c->rank, .cuda_dev = c->cuda_dev};
    return 0;
}

static void saw_time(cpa_rank *r, uint64_t ns)
{
    if (!ns)
        return;
    if (!r->first_ns || ns < r->first_ns)
        r->first_ns = ns;
    if (ns > r->last_ns)
        r->last_ns = ns;
}

/* Streams by index: a job uses a handful, and consecutive calls mostly repeat one. */
static int stream_index(load_ctx *x, uint64_t handle, uint16_t *out)
{
    cpa_rank *r = x->r;
    if (x->last_stream < r->nstreams && r->streams[x->last_stream] == handle) {
        *out = (uint16_t)x->last_stream;
        return 0;
    }
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

/* A site's frames joined into one line, innermost first; the first site record of an
 * index wins. Indexes are small and dense (the shim numbers them from 0); a larger one
 * than the file could plausibly hold is ignored rather than sized for. */
static int on_site(void *ctx, const cp_rec_site *s)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (s->site_index >= (1u << 20))
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
        int n = snprintf(line + used, sizeof line - used, "%s%.*s", f ? " < " : "", (int)len,
                         str);
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

static int on_clock(void *ctx, const cp_rec_clock *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (!c->mono_ns || !c->realtime_ns)
        return 0;
    if (cpa_grow((void **)&r->clocks, &r->cap_clocks, r->nclocks + 1, sizeof *r->clocks)) {
        x->oom = 1;
        return 1;
    }
    r->clocks[r->nclocks++] = (cpa_clock_sample){c->mono_ns, c->realtime_ns};
    return 0;
}

static int on_hang(void *ctx, const cp_rec_hang *h)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
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

static int on_call(void *ctx, const cp_rec_call *c)
{
    load_ctx *x = ctx;
    cpa_rank *r = x->r;
    if (!cp_op_is_collective(c->op) && !cp_op_is_p2p(c->op))
        return 0;
    /* call_idx + 1 must fit the table's u32 slots. */
    if (r->ncalls >= UINT32_MAX - 1 ||
        cpa_grow((void **)&r->calls, &r->cap_calls, r->ncalls + 1, sizeof *r->calls)) {
        x->oom = 1;
        return 1;
    }
    uint32_t idx = (uint32_t)r->ncalls;
    uint16_t stream;
    if (stream_index(x, c->stream, &stream)) {
        x->oom = 1;
        return 1;
    }
    r->calls[idx] = (cpa_call){.seq = c->seq, .count = c->count, .enter_ns = c->enter_ns,
                               .comm_index = c->comm_index, .host_ns = c->host_ns,
                               .site_index = c->site_index, .peer = c->peer, .nranks = -1,
                               .comm_rank = -1, .stream = stream, .thread = c->thread,
                               .op = c->op, .dtype = c->dtype, .redop = c->redop,
                               .flags = c->flags};
    r->ncalls++;
    saw_time(r, c->enter_ns + c->host_ns);
    saw_time(r, c->enter_ns);
    if (index_call(x, idx)) {
        x->oom = 1;
        return 1;
    }
    return 0;
}

static int on_done(void *ctx, const cp_rec_done *d)
{
    load_ctx *x = ctx;
    cpa_call *c = find_call(x, d);
    if (!c) {
        x->r->unmatched_done++;
        return 0;
    }
    c->done = 1;
    if (d->gpu_start_ns > 0 && d->gpu_end_ns >= d->gpu_start_ns &&
        d->timing != CP_TIMING_NONE && d->timing != CP_TIMING_HOST) {
        c->gpu_timed = 1;
        c->gpu_start_ns = d->gpu_start_ns;
        c->gpu_end_ns = d->gpu_end_ns;
        saw_time(x->r, d->gpu_end_ns);
    }
    return 0;
}

static int on_lost(void *ctx, const cp_rec_lost *l)
{
    load_ctx *x = ctx;
    x->lost_in_records += l->count;
    return 0;
}

static int on_end(void *ctx, const cp_rec_end *e)
{
    cpa_rank *r = ((load_ctx *)ctx)->r;
    r->ended = 1;
    r->end_signal = e->signal;
    r->end_exit_code = e->exit_code;
    r->end_ns = e->at_ns;
    saw_time(r, e->at_ns);
    return 0;
}

static int cmp_comm(const void *a, const void *b)
{
    const cpa_comm *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->comm_id < y->comm_id ? -1 : x->comm_id > y->comm_id;
}

static const cpa_comm *comm_of(const cpa_rank *r, uint32_t index)
{
    size_t lo = 0, hi = r->ncomms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->comms[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->ncomms && r->comms[lo].index == index ? &r->comms[lo] : NULL;
}

/* Gives each call its communicator's identity. Done after the walk, so the model does not
 * depend on COMM records preceding the CALLs that name them (the shim's order, not the
 * format's promise). */
static void resolve_comms(cpa_model *m, cpa_rank *r, const uint32_t *hang_comm_index)
{
    qsort(r->comms, r->ncomms, sizeof *r->comms, cmp_comm);
    size_t dup = 0;
    for (size_t i = 1; i < r->ncomms; i++)
        dup += r->comms[i].index == r->comms[i - 1].index &&
               r->comms[i].comm_id != r->comms[i - 1].comm_id;
    if (dup)
        cpa_model_warn(m, "'%s': %zu comm indexes name two communicators; the first kept",
                       r->path, dup);
    uint64_t orphans = 0;
    const cpa_comm *last = NULL;
    for (size_t i = 0; i < r->ncalls; i++) {
        cpa_call *c = &r->calls[i];
        if (!last || last->index != c->comm_index)
            last = comm_of(r, c->comm_index);
        if (!last) {
            orphans++;
            continue;
        }
        c->comm_id = last->comm_id;
        c->nranks = last->nranks;
        c->comm_rank = last->rank;
    }
    if (orphans)
        cpa_model_warn(m, "'%s': %" PRIu64 " calls name no known communicator; not matched",
                       r->path, orphans);
    for (size_t i = 0; i < r->nhangs; i++) {
        const cpa_comm *k = comm_of(r, hang_comm_index[i]);
        r->hangs[i].comm_id = k ? k->comm_id : 0;
    }
}

static void walk_warnings(cpa_model *m, const cpa_rank *r, const cp_walk_result *res)
{
    if (res->stop == CP_WALK_TRUNCATED)
        cpa_model_warn(m, "'%s' is cut at byte %" PRIu64 ": the %" PRIu64
                       " whole chunks before it were read", r->path, res->first_bad_offset,
                       res->chunks);
    if (res->corrupt_chunks)
        cpa_model_warn(m, "'%s': %" PRIu64 " corrupt chunks skipped (%s)", r->path,
                       res->corrupt_chunks, res->message);
    if (res->missing_chunks)
        cpa_model_warn(m, "'%s': %" PRIu64 " chunks missing", r->path, res->missing_chunks);
    if (r->lost_records)
        cpa_model_warn(m, "'%s': the writer lost %" PRIu64 " records", r->path,
                       r->lost_records);
    if (r->unmatched_done)
        cpa_model_warn(m, "'%s': %" PRIu64 " DONE records match no CALL", r->path,
                       r->unmatched_done);
}

/* 0 loaded, 1 skipped with a warning, -1 out of memory. */
static int load_file(cpa_model *m, cpa_rank *r, const char *path)
{
    int status;
    char err[256];
    cp_trace_reader *rd = cp_trace_reader_open(path, &status, err, sizeof err);
    if (!rd)
        return cpa_model_warn(m, "%s: skipped", err) ? -1 : 1;
    const cp_file_header *h = cp_trace_reader_header(rd);
    memset(r, 0, sizeof *r);
    r->path = strdup(path);
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
    if (h->mono_anchor_ns && h->realtime_anchor_ns) {
        r->clocks = malloc(sizeof *r->clocks);
        if (!r->clocks) {
            cp_trace_reader_close(rd);
            return -1;
        }
        r->clocks[0] = (cpa_clock_sample){h->mono_anchor_ns, h->realtime_anchor_ns};
        r->nclocks = r->cap_clocks = 1;
    }

    load_ctx x = {.m = m, .r = r};
    cp_trace_visitor v = {.ctx = &x, .on_process = on_process, .on_comm = on_comm,
                          .on_site = on_site, .on_call = on_call, .on_done = on_done,
                          .on_clock = on_clock, .on_lost = on_lost, .on_hang = on_hang,
                          .on_end = on_end};
    cp_walk_result res;
    cp_trace_walk(rd, &v, &res);
    cp_trace_reader_close(rd);
    free(x.slots);
    if (x.oom || !r->path) {
        free(x.hang_comm_index);
        return -1;
    }
    r->records = res.records;
    r->walk_stop = res.stop;
    /* The chunk headers' running total counts every cause, but only up to the last whole
     * chunk; LOST records may tell of more in a chunk that survived a later cut. */
    r->lost_records = res.lost_records > x.lost_in_records ? res.lost_records
                                                            : x.lost_in_records;
    resolve_comms(m, r, x.hang_comm_index);
    free(x.hang_comm_index);
    walk_warnings(m, r, &res);
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

int cpa_model_load(const char *dir, cpa_model **out, char *err, size_t errlen)
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
    cpa_model *m = calloc(1, sizeof *m);
    if (m)
        m->ranks = calloc((size_t)n, sizeof *m->ranks);
    if (!m || !m->ranks)
        goto oom;
    for (int i = 0; i < n; i++) {
        int rc = load_file(m, &m->ranks[m->nranks], paths[i]);
        if (rc < 0) {
            m->nranks++; /* so that free sees what this file had allocated */
            goto oom;
        }
        if (rc == 0) {
            m->records += m->ranks[m->nranks].records;
            m->lost_records += m->ranks[m->nranks].lost_records;
            m->nranks++;
        }
    }
    cp_trace_dir_free(paths, n);
    paths = NULL;
    if (m->nranks == 0) {
        snprintf(err, errlen, "no readable trace file in '%s' (%s)", dir,
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
    cp_trace_dir_free(paths, n);
    cpa_model_free(m);
    snprintf(err, errlen, "out of memory loading '%s'", dir);
    return -1;
}
