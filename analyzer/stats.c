/* analyzer/stats.c: rows of operations (by op, communicator size and S, exact or
 * bucketed), what nccl-tests would print. The formulas are in analyzer.h's header comment.
 *
 * An operation counts once, whatever number of ranks took part. One that some rank had
 * timed but never finished (no DONE: in flight when the trace ended, or hung) has no known
 * duration and is left out, rather than counted with the host's enqueue time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"

/* a * b, or UINT64_MAX (no size can be that: it is the "does not fit" answer) */
static uint64_t mul_or_max(uint64_t a, uint64_t b)
{
    uint64_t p;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

uint64_t cpa_elem_bytes(uint64_t count, unsigned dtype)
{
    return mul_or_max(count, cp_dtype_size(dtype));
}

uint64_t cpa_op_bytes(unsigned op, uint64_t count, unsigned dtype, int nranks)
{
    uint64_t s = cpa_elem_bytes(count, dtype);
    switch (op) {
    case CP_OP_ALLGATHER:
    case CP_OP_REDUCESCATTER:
    case CP_OP_ALLTOALL:
    case CP_OP_GATHER:
    case CP_OP_SCATTER:
        return s == UINT64_MAX ? s : mul_or_max(s, (uint64_t)(nranks > 0 ? nranks : 1));
    default:
        return s;
    }
}

double cpa_busbw_factor(unsigned op, int nranks)
{
    if (nranks <= 0)
        return 1.0;
    double n = nranks;
    switch (op) {
    case CP_OP_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case CP_OP_ALLGATHER:
    case CP_OP_REDUCESCATTER:
    case CP_OP_ALLTOALL:
    case CP_OP_GATHER:
    case CP_OP_SCATTER:
        return (n - 1) / n;
    default: /* Broadcast, Reduce, Send/Recv */
        return 1.0;
    }
}

/* An operation's parts summed as they are read (accumulate, below). */
enum { ACC_GPU = 1, ACC_UNFINISHED = 2, ACC_ABORTED = 4, ACC_SEEN = 8, ACC_AGAIN = 16 };

typedef struct opacc {
    double gpu;         /* the shortest share-weighted GPU time (ACC_GPU) */
    uint64_t host;      /* host times' sum: exact */
    uint32_t nhost;
    uint8_t state;      /* ACC_* */
    uint8_t source, nchannels, algo, proto;
} opacc;

/* An operation's row sample. Until it is made, its place holds its parts' sum (acc): one
 * array for both, where two were the analysis' peak of memory. */
typedef struct sample {
    union {
        struct {
            /* the row's key, by the kind of rows: fields a kind does not key on are 0 */
            uint64_t key_size;
            int32_t key_root;
            uint8_t key_dtype, key_redop;
            uint8_t op;
            int32_t nranks;
            /* the operation's own */
            uint64_t bytes;
            int32_t root;
            uint8_t dtype, redop;
            uint32_t calls;
            double time_ns;
            double bus_bytes;
            uint8_t source;   /* 0 host, 1 events (or CUPTI), 2 plugin: the DONE's timing */
            uint8_t algo, proto, nchannels;
        };
        opacc acc;
    };
} sample;

static int cmp_key(const sample *p, const sample *q)
{
    if (p->op != q->op)
        return p->op < q->op ? -1 : 1;
    if (p->nranks != q->nranks)
        return p->nranks < q->nranks ? -1 : 1;
    if (p->key_size != q->key_size)
        return p->key_size < q->key_size ? -1 : 1;
    if (p->key_dtype != q->key_dtype)
        return p->key_dtype < q->key_dtype ? -1 : 1;
    if (p->key_redop != q->key_redop)
        return p->key_redop < q->key_redop ? -1 : 1;
    return (p->key_root > q->key_root) - (p->key_root < q->key_root);
}

static int cmp_sample(const void *x, const void *y)
{
    const sample *p = x, *q = y;
    int k = cmp_key(p, q);
    if (k)
        return k;
    return (p->time_ns > q->time_ns) - (p->time_ns < q->time_ns);
}

/* Row keys seen: an open-addressing table of indices into the samples (a key's first
 * sample stands for it). */
typedef struct keyset {
    uint32_t *slot;      /* sample index + 1, 0 empty */
    size_t mask;
} keyset;

static uint64_t key_hash(const sample *x)
{
    uint64_t h = x->key_size * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)x->op << 56) ^ ((uint64_t)(uint32_t)x->nranks << 24) ^
         ((uint64_t)x->key_dtype << 16) ^ ((uint64_t)x->key_redop << 8) ^
         (uint64_t)(uint32_t)x->key_root * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return h * 0xbf58476d1ce4e5b9ull;
}

static int cmp_first(const void *a, const void *b, void *ctx)
{
    const sample *s = ctx;
    return cmp_key(&s[*(const uint32_t *)a], &s[*(const uint32_t *)b]);
}

/* The samples' order by row key, then time, equal ones in their order (qsort with
 * cmp_sample, stable, gave the same): in *order, each entry's val a sample's index and its
 * key the place of that sample's row key among the distinct ones (equal keys: one row). Two
 * stable radix sorts, by time and then by the rank of the row key among the few distinct
 * ones, instead of n log n calls to cmp_sample (a tenth of a 1024-rank job's analysis). The
 * samples themselves stay where they are: moving them into that order, cycle by cycle, was
 * a chain of dependent cache misses and half of the statistics' time; the rows read them
 * through the order instead, each read independent of the last. 0, or -1 out of memory. */
static int sort_samples(sample *s, size_t ns, cpa_kv **order)
{
    cpa_kv *kv = malloc((ns ? ns : 1) * sizeof *kv);
    if (!(*order = kv))
        return -1;
    if (ns < 2 || ns >= UINT32_MAX) {
        if (ns >= 2)
            qsort(s, ns, sizeof *s, cmp_sample);
        for (size_t i = 0; i < ns; i++)
            kv[i] = (cpa_kv){i ? kv[i - 1].key + (cmp_key(&s[i - 1], &s[i]) != 0) : 0, i};
        return 0;
    }
    int rc = -1;
    size_t nslot = 16;
    while (nslot < 2 * ns)
        nslot *= 2;
    keyset ks = {.slot = calloc(nslot, sizeof *ks.slot), .mask = nslot - 1};
    uint32_t *group = malloc(ns * sizeof *group), *firsts = malloc(ns * sizeof *firsts);
    uint32_t *rank = NULL;
    cpa_kv *tmp = malloc(ns * sizeof *tmp);
    if (!ks.slot || !group || !firsts || !tmp)
        goto done;
    cpa_populate(kv, ns * sizeof *kv); /* both sorts' arrays are written end to end */
    cpa_populate(tmp, ns * sizeof *tmp);
    size_t ngroups = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t h = (size_t)key_hash(&s[i]) & ks.mask;
        while (ks.slot[h] && cmp_key(&s[ks.slot[h] - 1], &s[i]) != 0)
            h = (h + 1) & ks.mask;
        if (!ks.slot[h]) {
            ks.slot[h] = (uint32_t)i + 1;
            group[i] = (uint32_t)ngroups;
            firsts[ngroups++] = (uint32_t)i;
        } else {
            group[i] = group[ks.slot[h] - 1];
        }
    }
    /* The groups in key order: rank[g] is group g's place. */
    qsort_r(firsts, ngroups, sizeof *firsts, cmp_first, s);
    if (!(rank = malloc(ngroups * sizeof *rank)))
        goto done;
    for (size_t k = 0; k < ngroups; k++)
        rank[group[firsts[k]]] = (uint32_t)k;
    for (size_t i = 0; i < ns; i++)
        kv[i] = (cpa_kv){cpa_key_of_double(s[i].time_ns), i};
    cpa_sort_kv(kv, tmp, ns);
    for (size_t i = 0; i < ns; i++)
        kv[i].key = rank[group[kv[i].val]];
    cpa_sort_kv(kv, tmp, ns);
    rc = 0;
done:
    free(ks.slot);
    free(group);
    free(firsts);
    free(rank);
    free(tmp);
    if (rc) {
        free(kv);
        *order = NULL;
    }
    return rc;
}

static uint64_t pow2_floor(uint64_t v)
{
    if (!v)
        return 0;
    return 1ull << (63 - __builtin_clzll(v));
}

/* Grouped calls. NCCL runs a group's work as one launch at the outermost ncclGroupEnd, so
 * the shim gives every member of a group the span of the whole group on its stream: eight
 * coalesced AllGathers would each show the time of all eight. A member's time is its share
 * of that span, in proportion to the bus bytes it moves among the members of its kind
 * (collectives, sends, receives: the two directions run at once); each member then shows the
 * group's bus bandwidth, which is what the links delivered. share[r][i] for call i of rank r;
 * NULL for a rank without grouped calls (every share 1). */
typedef struct grouped {
    uint64_t start, end;
    uint16_t stream;
    uint8_t kind;  /* 0 collective, 1 send, 2 receive */
    uint32_t call;
    double bus;
} grouped;

static int cmp_grouped(const void *x, const void *y)
{
    const grouped *a = x, *b = y;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return (a->kind > b->kind) - (a->kind < b->kind);
}

static int rank_shares(const cpa_rank *rk, float **out)
{
    *out = NULL;
    size_t n = 0;
    if (rk->ngrouped < 2) /* the loader's count: no pass over a gigabyte of calls for none */
        return 0;
    for (size_t i = 0; i < rk->ncalls; i++)
        n += (rk->calls[i].flags & CP_CALL_IN_GROUP) && rk->calls[i].gpu_timed;
    if (n < 2)
        return 0;
    grouped *g = malloc(n * sizeof *g);
    float *share = malloc(rk->ncalls * sizeof *share);
    if (!g || !share) {
        free(g);
        free(share);
        return -1;
    }
    n = 0;
    for (size_t i = 0; i < rk->ncalls; i++) {
        const cpa_call *c = &rk->calls[i];
        share[i] = 1.0f;
        if (!((c->flags & CP_CALL_IN_GROUP) && c->gpu_timed))
            continue;
        int32_t cn = cpa_call_nranks(rk, c);
        int nr = cn > 0 ? cn : 1;
        uint64_t bytes = cpa_op_bytes(c->op, c->count, c->dtype, nr);
        /* A member of no size (left out of the rows) takes no share from the others. */
        g[n++] = (grouped){.start = c->gpu_start_ns, .end = c->gpu_end_ns, .stream = c->stream,
                           .kind = c->op == CP_OP_SEND ? 1 : c->op == CP_OP_RECV ? 2 : 0,
                           .call = (uint32_t)i,
                           .bus = bytes == UINT64_MAX
                                      ? 0
                                      : (double)bytes * cpa_busbw_factor(c->op, nr)};
    }
    qsort(g, n, sizeof *g, cmp_grouped);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double bus = 0;
        for (; j < n && cmp_grouped(&g[i], &g[j]) == 0; j++)
            bus += g[j].bus;
        for (size_t k = i; k < j; k++)
            share[g[k].call] = bus > 0 ? (float)(g[k].bus / bus) : 1.0f / (float)(j - i);
        i = j;
    }
    free(g);
    *out = share;
    return 0;
}

static void free_shares(float **shares, size_t n)
{
    for (size_t r = 0; shares && r < n; r++)
        free(shares[r]);
    free(shares);
}

/* Nearest rank: the ceil(pct/100 * n)-th smallest, in integers so that 99% of 100 is 99. */
static double percentile(const sample *s, const cpa_kv *at, size_t n, unsigned pct)
{
    size_t k = (size_t)(((uint64_t)pct * n + 99) / 100);
    return s[at[k ? k - 1 : 0].val].time_ns;
}

static int is_rooted(unsigned op)
{
    return op == CP_OP_BROADCAST || op == CP_OP_REDUCE || op == CP_OP_GATHER ||
           op == CP_OP_SCATTER;
}

static void set_key(sample *x, cpa_rows kind)
{
    x->key_size = kind == CPA_ROWS_BUCKETS ? pow2_floor(x->bytes) : x->bytes;
    if (kind == CPA_ROWS_NCCL_TESTS) {
        x->key_dtype = x->dtype;
        x->key_redop = x->redop;
        x->key_root = x->root;
    }
}

/* One row from the samples s[at[0..n).val], which share a key, in time order. */
static void fill_row(cpa_stat *row, const sample *s, const cpa_kv *at, size_t n)
{
    double t = 0, bus = 0;
    uint64_t bytes = 0, calls = 0;
    const sample *s0 = &s[at[0].val];
    *row = (cpa_stat){.op = s0->op, .nranks = s0->nranks, .size = s0->key_size,
                      .dtype = s0->dtype, .redop = s0->redop, .root = s0->root, .ops = n};
    for (size_t k = 0; k < n; k++) {
        const sample *x = &s[at[k].val];
        if (k + 8 < n)
            __builtin_prefetch(&s[at[k + 8].val]);
        t += x->time_ns;
        bus += x->bus_bytes;
        bytes = cpa_sat_add(bytes, x->bytes);
        calls += x->calls;
        if (x->dtype != row->dtype)
            row->dtype = CPA_MIXED;
        if (x->redop != row->redop)
            row->redop = CPA_MIXED;
        if (x->root != row->root)
            row->root = CPA_ROOT_MIXED;
        row->timed_plugin += x->source == 2;
        row->timed_events += x->source == 1;
        row->timed_host += x->source == 0;
        row->timed_cupti += x->source == 3;
        if (x->algo < CP_ALGO_COUNT && x->proto < CP_PROTO_COUNT && (x->algo || x->proto) &&
            row->algo_proto[x->algo][x->proto] < UINT32_MAX)
            row->algo_proto[x->algo][x->proto]++;
        if (x->nchannels > row->channels_max)
            row->channels_max = x->nchannels;
    }
    /* bytes per ns is GB/s (1e9 B/s). A row of zero-time operations has no rate. */
    row->calls = calls;
    row->bytes = bytes;
    row->time_us_total = t / 1e3;
    row->time_us_p50 = percentile(s, at, n, 50) / 1e3;
    row->time_us_p99 = percentile(s, at, n, 99) / 1e3;
    row->algbw_gbps = t > 0 ? (double)bytes / t : 0;
    row->busbw_gbps = t > 0 ? bus / t : 0;
}

/* The op's time: GPU times preferred, and of them the shortest, which is the duration on the
 * rank that arrived last. Every other rank's GPU time also holds its wait for that rank:
 * with the mean, one straggler would halve the busbw of every collective it joins, and the
 * bandwidth question ("do my links deliver?") would get the straggler question's answer.
 * nccl-tests averages over ranks that a barrier has just lined up, which is the same thing.
 * Host times (no GPU) are the mean. -1 when the op has no time, -2 when an abort ended it.
 *
 * op_time_ns of every operation at once, its parts' calls read rank by rank in memory order
 * (through call_op) instead of operation by operation across the ranks, a cache miss a
 * part. Everything op_time_ns takes from the parts is a minimum, maximum, sum or flag, the
 * same in any order, except the algorithm and protocol, which the last part NCCL described
 * gives: an operation whose parts disagree on them (never seen from NCCL) is flagged and
 * left to op_time_ns. */
/* One part's call into its operation's opacc. in_order: the parts come in their order, and
 * the last one NCCL described gives the algorithm and protocol; else a second that differs
 * from the first flags the operation (ACC_AGAIN). */
static void acc_add(opacc *a, const cpa_rank *k, const cpa_call *c, float share, int in_order)
{
    if (c->nccl & CPA_NCCL_SEEN) {
        if (in_order || !(a->state & ACC_SEEN)) {
            a->state |= ACC_SEEN;
            a->algo = c->algo;
            a->proto = c->proto;
        } else if (a->algo != c->algo || a->proto != c->proto) {
            a->state |= ACC_AGAIN;
        }
        if (c->nchannels > a->nchannels)
            a->nchannels = c->nchannels;
    }
    if (cpa_call_aborted(k, c)) {
        a->state |= ACC_ABORTED; /* ended by an abort: no duration */
    } else if (c->gpu_timed) {
        /* the DONE says whose times these are: an NCCL_OP may come beside an events DONE
         * (auto mode times some calls by events while NCCL's plugin runs) */
        uint8_t src = c->timing == CP_TIMING_CUPTI    ? 3
                      : c->timing == CP_TIMING_PLUGIN ? 2
                                                      : 1;
        if (src > a->source)
            a->source = src;
        double d = (double)(c->gpu_end_ns - c->gpu_start_ns) * share;
        if (!(a->state & ACC_GPU) || d < a->gpu)
            a->gpu = d;
        a->state |= ACC_GPU;
    } else if ((c->flags & CP_CALL_TIMED) && !c->done) {
        a->state |= ACC_UNFINISHED; /* no time, but another part may show an abort ended it */
    } else {
        a->host += cpa_call_host_ns(c);
        a->nhost++;
    }
}

static void accumulate(const cpa_model *m, const cpa_matched *mt, float *const *shares,
                       sample *acc)
{
    for (size_t r = 0; r < m->nranks; r++) {
        const cpa_rank *k = &m->ranks[r];
        const uint32_t *op_of = mt->call_op[r];
        for (size_t ci = 0; ci < k->ncalls; ci++)
            if (op_of[ci] < mt->nops)
                acc_add(&acc[op_of[ci]].acc, k, &k->calls[ci],
                        shares[r] ? shares[r][ci] : 1.0f, 0);
    }
}

/* op_time_ns from an operation's opacc. */
static double acc_time_ns(const opacc *a, sample *smp)
{
    if (a->state & ACC_ABORTED)
        return -2;
    smp->source = a->source;
    smp->nchannels = a->nchannels;
    if (a->state & ACC_SEEN) {
        smp->algo = a->algo;
        smp->proto = a->proto;
    }
    if (a->state & ACC_UNFINISHED)
        return -1;
    if (a->state & ACC_GPU)
        return a->gpu;
    return a->nhost ? (double)a->host / a->nhost : -1;
}

/* An operation whose parts disagree on NCCL's algorithm or protocol, part by part in order. */
static double op_time_ns(const cpa_model *m, const cpa_matched *mt, const cpa_op *o,
                         float *const *shares, sample *smp)
{
    opacc a = {0};
    for (uint32_t i = 0; i < o->nparts; i++) {
        const cpa_part *p = &mt->parts[o->first_part + i];
        const float *sh = shares[p->rank_idx];
        acc_add(&a, &m->ranks[p->rank_idx], &m->ranks[p->rank_idx].calls[p->call_idx],
                sh ? sh[p->call_idx] : 1.0f, 1);
    }
    return acc_time_ns(&a, smp);
}

int cpa_stats_compute(const cpa_model *m, const cpa_matched *mt, cpa_rows kind, cpa_stats *out,
                      char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    sample *s = calloc(mt->nops ? mt->nops : 1, sizeof *s); /* each op's acc zeroed */
    float **shares = calloc(m->nranks ? m->nranks : 1, sizeof *shares);
    cpa_kv *order = NULL;
    if (!s || !shares)
        goto oom;
    cpa_populate(s, mt->nops * sizeof *s); /* every op's acc is written, in rank order */
    for (size_t r = 0; r < m->nranks; r++)
        if (rank_shares(&m->ranks[r], &shares[r]))
            goto oom;
    accumulate(m, mt, shares, s);
    size_t ns = 0; /* samples made, in s[0, ns): none past op i, whose acc is read first */
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        if (!o->nparts)
            continue;
        opacc acc = s[i].acc;
        sample one = {0};
        double t = acc.state & ACC_AGAIN ? op_time_ns(m, mt, o, shares, &one)
                                         : acc_time_ns(&acc, &one);
        if (t == -2)
            out->aborted++;
        if (t < 0)
            continue;
        int n = o->nranks > 0 ? o->nranks : (int)o->nparts;
        uint64_t bytes = cpa_op_bytes(o->op, o->count, o->dtype, n); /* its first call's */
        if (bytes == UINT64_MAX) { /* no size: no row, no bandwidth */
            out->oversized++;
            continue;
        }
        int reduces = o->op == CP_OP_ALLREDUCE || o->op == CP_OP_REDUCE ||
                      o->op == CP_OP_REDUCESCATTER;
        sample *x = &s[ns++];
        *x = (sample){.op = o->op, .nranks = n, .bytes = bytes, .time_ns = t,
                      .root = is_rooted(o->op) ? o->peer : CPA_ROOT_NONE, .dtype = o->dtype,
                      .redop = reduces ? o->redop : CP_REDOP_NONE, .calls = o->nparts,
                      .bus_bytes = (double)bytes * cpa_busbw_factor(o->op, n),
                      .source = one.source, .algo = one.algo, .proto = one.proto,
                      .nchannels = one.nchannels};
        set_key(x, kind);
    }
    free_shares(shares, m->nranks); /* before the sort's scratch: near the peak of memory */
    shares = NULL;
    if (sort_samples(s, ns, &order))
        goto oom;
    size_t cap = 0;
    for (size_t i = 0; i < ns;) {
        size_t j = i + 1;
        while (j < ns && order[j].key == order[i].key)
            j++;
        if (cpa_grow((void **)&out->rows, &cap, out->nrows + 1, sizeof *out->rows))
            goto oom;
        fill_row(&out->rows[out->nrows++], s, order + i, j - i);
        i = j;
    }
    free(order);
    free(s);
    return 0;
oom:
    free(order);
    free(s);
    free_shares(shares, m->nranks);
    cpa_stats_free(out);
    snprintf(err, errlen, "out of memory computing statistics");
    return -1;
}

void cpa_stats_free(cpa_stats *st)
{
    if (!st)
        return;
    free(st->rows);
    memset(st, 0, sizeof *st);
}
