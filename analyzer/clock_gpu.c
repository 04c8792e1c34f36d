/* analyzer/clock_gpu.c: each rank's GPU time line on the job time line.
 *
 * GPU times reach the trace already on the host clock, through the shim's reference event:
 * gpu = host time of the reference + time elapsed since it on the GPU. Each rank has its own
 * reference, off by about half of however long its record call was held up (measured up
 * to +-27 ms with 8 emulated ranks on 2 busy cores, most often at start-up and exit), and
 * the shim records a new one every second. So each rank's GPU times are a clock of their
 * own, off by a step function, and one bad reference makes a healthy rank look late in every
 * collective. Three steps:
 *  1. Frames. A blocking collective ends together on every rank. Each one whose ranks are all
 *     GPU-timed ties its lowest rank to each other one by the difference of their ends (on
 *     the host clocks already aligned by clock.c). Ties are pooled per pair of ranks and each
 *     rank's constant offset solved as clock_solve.c solves domains: ranks in maximum spanning tree
 *     order, then passes of medians (weighted by the ties behind each pair). The tree is what
 *     matters: ranks that share many collectives (a TP group) agree among themselves whatever
 *     their common error, and only the few that cross groups (DP, world) tell one group's frame
 *     from another's; a median over each rank's own collectives would outvote those.
 *  2. Steps. What is left of each end against where its operation's ends agree, per rank, is a
 *     step function: a new reference is a new level (segments() says how one is told from an
 *     odd end). A level starts at the GPU start of its first operation, since the shim
 *     converts an operation's start and end with one reference.
 *  3. The common constant. Ties fix frames relative to each other only. A kernel never starts
 *     before it was launched, and one launched onto an idle stream starts at once: so each
 *     group of tied ranks is shifted until its tightest calls' GPU start meets their host
 *     entry (a low percentile of start - entry, so that one glitch does not set it), on the
 *     host whose clock the job time line follows (clock_causal.c). A rank tied to no other is
 *     left as the shim wrote it: with its own calls alone, a stream that was never idle would
 *     look like an error.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/clock_internal.h"

#define STEP_TOL_NS CPA_CLK_AGREE_NS /* 50 us: far under any lateness called, over end jitter */
#define STEP_CONFIRM 3
#define FRAME_MAX_PASSES 50
#define FRAME_EPS_NS 0.5

typedef struct pair {
    uint32_t a, b;           /* rank indices, a the operation's lowest */
    size_t first, n;         /* its differences: diffs[first .. first + n) */
    double diff;             /* median end_b - end_a */
} pair;

typedef struct frames {
    const cpa_model *m;
    const cpa_matched *mt;
    const cpa_clock *c;
    const uint8_t *tying;    /* per operation: its ends tie ranks */
    pair *pairs;
    size_t npairs, cap_pairs;
    uint32_t *slot;          /* open addressing over pairs, UINT32_MAX empty */
    size_t nslots;
    float *diffs;
    double *u;               /* per rank: its frame's offset */
    uint32_t *comp;          /* per rank: its group of tied ranks, UINT32_MAX none */
    cpa_clk_fast *fast;      /* per rank, the host map as fixed for the stage; NULL none */
} frames;

static inline uint64_t end_job(const frames *f, const cpa_part *p)
{
    cpa_clk_fast *x = f->fast ? &f->fast[p->rank_idx] : NULL;
    if (x && x->off != CPA_CLK_NOT_CONST)
        return cpa_clk_fast_job(x, p->end_ns, 0);
    return cpa_clock_job_ns(f->m, f->c, p->rank_idx, p->end_ns);
}

/* Differences of job times in integers first: a double holds an epoch in ns only to 256 ns. */
static double diff_ns(uint64_t a, uint64_t b)
{
    return (double)(int64_t)(a - b);
}

static size_t pair_home(const frames *f, uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)b * 0xc2b2ae3d27d4eb4full);
    return (size_t)(h >> 17) & (f->nslots - 1);
}

/* The table of pairs twice as large, every pair placed again; -1 out of memory. */
static int pairs_rehash(frames *f)
{
    size_t n = f->nslots ? 2 * f->nslots : 1024;
    uint32_t *slot = malloc(n * sizeof *slot);
    if (!slot)
        return -1;
    memset(slot, 0xff, n * sizeof *slot);
    free(f->slot);
    f->slot = slot;
    f->nslots = n;
    for (size_t k = 0; k < f->npairs; k++) {
        size_t i = pair_home(f, f->pairs[k].a, f->pairs[k].b);
        while (slot[i] != UINT32_MAX)
            i = (i + 1) & (n - 1);
        slot[i] = (uint32_t)k;
    }
    return 0;
}

/* The pair (a, b), added when new; NULL out of memory. The table grows with the pairs (a
 * job's are a few per rank; sized by the parts, it was megabytes of misses). */
static pair *pair_of(frames *f, uint32_t a, uint32_t b)
{
    if (!f->nslots && pairs_rehash(f))
        return NULL;
    for (size_t i = pair_home(f, a, b);; i = (i + 1) & (f->nslots - 1)) {
        uint32_t s = f->slot[i];
        if (s == UINT32_MAX) {
            if (2 * (f->npairs + 1) > f->nslots) { /* a new pair: room for it first */
                if (pairs_rehash(f))
                    return NULL;
                return pair_of(f, a, b);
            }
            if (cpa_grow((void **)&f->pairs, &f->cap_pairs, f->npairs + 1, sizeof *f->pairs))
                return NULL;
            f->slot[i] = (uint32_t)f->npairs;
            f->pairs[f->npairs] = (pair){.a = a, .b = b};
            return &f->pairs[f->npairs++];
        }
        if (f->pairs[s].a == a && f->pairs[s].b == b)
            return &f->pairs[s];
    }
}

/* Where operations' parts find their pairs: an operation's pairs are nearly always its
 * predecessor's (operations come by communicator, and a communicator's are its same ranks),
 * so the pair found at each part position is kept and taken again while the rank there is
 * the same, instead of a hash lookup a part (a fifth of the clock stage on a 1024-rank
 * job). */
typedef struct pair_walk {
    uint32_t *rank, *pair; /* per part position; rank[0] the operation's lowest */
    uint32_t n;            /* positions valid, all for rank[0] */
} pair_walk;

static void pair_walk_op(pair_walk *w, const cpa_part *p)
{
    if (w->n && w->rank[0] != p[0].rank_idx)
        w->n = 0;
    w->rank[0] = p[0].rank_idx;
}

/* Part k's pair (k >= 1) in *q: 0, 1 when it is the lowest rank's again (no pair), -1 out of
 * memory. */
static inline __attribute__((always_inline)) int pair_walk_at(frames *f, pair_walk *w,
                                                          const cpa_part *p, uint32_t k,
                                                          pair **q)
{
    if (p[k].rank_idx == p[0].rank_idx) {
        w->rank[k] = UINT32_MAX; /* nothing kept here for another op */
        return 1;
    }
    if (k < w->n && w->rank[k] == p[k].rank_idx) {
        *q = &f->pairs[w->pair[k]];
        return 0;
    }
    if (!(*q = pair_of(f, p[0].rank_idx, p[k].rank_idx)))
        return -1;
    w->rank[k] = p[k].rank_idx;
    w->pair[k] = (uint32_t)(*q - f->pairs);
    return 0;
}

static void pair_walk_done(pair_walk *w, uint32_t nparts)
{
    w->n = nparts > w->n ? nparts : w->n;
}

static int pair_walk_init(pair_walk *w, size_t maxp)
{
    w->rank = malloc((maxp ? maxp : 1) * sizeof *w->rank);
    w->pair = malloc((maxp ? maxp : 1) * sizeof *w->pair);
    w->n = 0;
    return w->rank && w->pair ? 0 : -1;
}

static void pair_walk_free(pair_walk *w)
{
    free(w->rank);
    free(w->pair);
}

/* Step 1's data: every pair's differences, and their medians. The differences stay (in
 * f->diffs, pair by pair in operation order) for step 2, which reads them back instead of
 * converting every end again: whole ns below 2^24 ns, exact in a float. */
static int collect_pairs(frames *f, size_t maxp)
{
    const cpa_matched *mt = f->mt;
    pair_walk w;
    if (pair_walk_init(&w, maxp)) {
        pair_walk_free(&w);
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        w.n = 0;
        for (size_t i = 0; i < mt->nops; i++) {
            const cpa_op *o = &mt->ops[i];
            if (!f->tying[i])
                continue;
            const cpa_part *p = &mt->parts[o->first_part];
            pair_walk_op(&w, p);
            uint64_t e0 = pass ? end_job(f, &p[0]) : 0;
            for (uint32_t k = 1; k < o->nparts; k++) {
                pair *q;
                int got = pair_walk_at(f, &w, p, k, &q);
                if (got < 0) {
                    pair_walk_free(&w);
                    return -1;
                }
                if (got)
                    continue;
                if (pass)
                    f->diffs[q->first + q->n] = (float)diff_ns(end_job(f, &p[k]), e0);
                q->n++;
            }
            pair_walk_done(&w, o->nparts);
        }
        if (pass)
            break;
        size_t total = 0;
        for (size_t k = 0; k < f->npairs; k++) {
            f->pairs[k].first = total;
            total += f->pairs[k].n;
            f->pairs[k].n = 0;
        }
        if (!(f->diffs = malloc((total ? total : 1) * sizeof *f->diffs)))
            break;
        cpa_populate(f->diffs, total * sizeof *f->diffs); /* the second pass fills it */
    }
    pair_walk_free(&w);
    if (!f->diffs)
        return -1;
    size_t maxn = 0;
    for (size_t k = 0; k < f->npairs; k++)
        maxn = f->pairs[k].n > maxn ? f->pairs[k].n : maxn;
    double *v = malloc((maxn ? maxn : 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t k = 0; k < f->npairs; k++) {
        pair *q = &f->pairs[k];
        for (size_t j = 0; j < q->n; j++)
            v[j] = f->diffs[q->first + j];
        q->diff = cpa_select(v, q->n, (q->n - 1) / 2);
    }
    free(v);
    return 0;
}

typedef struct wv {
    double v, w;
} wv;

static int cmp_wv(const void *x, const void *y)
{
    const wv *p = x, *q = y;
    return (p->v > q->v) - (p->v < q->v);
}

/* Rank r's offset from its solved partners: their weighted median. Returns how far it moved,
 * or -1 when it has no solved partner. */
static double solve_rank(frames *f, const size_t *adj_first, const uint32_t *adj,
                         const uint8_t *solved, uint32_t r, wv *buf)
{
    size_t n = 0;
    double total = 0;
    for (size_t k = adj_first[r]; k < adj_first[r + 1]; k++) {
        const pair *q = &f->pairs[adj[k]];
        uint32_t o = q->a == r ? q->b : q->a;
        if (!solved[o])
            continue;
        /* equal ends: end_a + u_a = end_b + u_b */
        buf[n] = (wv){q->a == r ? f->u[o] + q->diff : f->u[o] - q->diff, (double)q->n};
        total += buf[n++].w;
    }
    if (!n)
        return -1;
    qsort(buf, n, sizeof *buf, cmp_wv);
    double acc = 0, v = buf[n - 1].v;
    for (size_t k = 0; k < n; k++)
        if ((acc += buf[k].w) >= total / 2) {
            v = buf[k].v;
            break;
        }
    double moved = fabs(v - f->u[r]);
    f->u[r] = v;
    return moved;
}

/* Step 1: constant frame offsets, per group of tied ranks. */
static int solve_frames(frames *f)
{
    size_t nr = f->m->nranks;
    size_t *adj_first = calloc(nr + 1, sizeof *adj_first);
    uint32_t *adj = malloc((f->npairs ? 2 * f->npairs : 1) * sizeof *adj);
    uint8_t *solved = calloc(nr, 1);
    uint32_t *order = malloc(nr * sizeof *order);
    double *links = calloc(nr, sizeof *links);
    size_t *fill = calloc(nr, sizeof *fill);
    wv *buf = malloc((f->npairs ? 2 * f->npairs : 1) * sizeof *buf);
    int rc = -1;
    if (!adj_first || !adj || !solved || !order || !links || !fill || !buf)
        goto out;
    for (size_t k = 0; k < f->npairs; k++) {
        adj_first[f->pairs[k].a + 1]++;
        adj_first[f->pairs[k].b + 1]++;
    }
    for (size_t r = 0; r < nr; r++)
        adj_first[r + 1] += adj_first[r];
    for (size_t k = 0; k < f->npairs; k++) {
        adj[adj_first[f->pairs[k].a] + fill[f->pairs[k].a]++] = (uint32_t)k;
        adj[adj_first[f->pairs[k].b] + fill[f->pairs[k].b]++] = (uint32_t)k;
    }
    size_t norder = 0;
    uint32_t ncomp = 0;
    for (uint32_t root = 0; root < nr; root++) {
        if (solved[root] || adj_first[root + 1] == adj_first[root])
            continue;
        /* A new group: its first rank is its reference; step 3 sets the constant. */
        size_t start = norder;
        uint32_t next = root;
        for (;;) {
            solved[next] = 1;
            f->comp[next] = ncomp;
            order[norder++] = next;
            if (next != root)
                solve_rank(f, adj_first, adj, solved, next, buf);
            for (size_t k = adj_first[next]; k < adj_first[next + 1]; k++) {
                const pair *q = &f->pairs[adj[k]];
                links[q->a == next ? q->b : q->a] += (double)q->n;
            }
            double best = 0;
            for (size_t r = 0; r < nr; r++)
                if (!solved[r] && links[r] > best) {
                    best = links[r];
                    next = (uint32_t)r;
                }
            if (best == 0)
                break;
        }
        for (int pass = 0; pass < FRAME_MAX_PASSES; pass++) {
            double moved = 0;
            for (size_t i = start + 1; i < norder; i++) {
                double d = solve_rank(f, adj_first, adj, solved, order[i], buf);
                moved = d > moved ? d : moved;
            }
            if (moved < FRAME_EPS_NS)
                break;
        }
        ncomp++;
    }
    rc = 0;
out:
    free(adj_first);
    free(adj);
    free(solved);
    free(order);
    free(links);
    free(fill);
    free(buf);
    return rc;
}

typedef struct gsample {
    uint64_t t;
    double r;
} gsample;

static int cmp_gsample(const void *x, const void *y)
{
    const gsample *p = x, *q = y;
    return (p->t > q->t) - (p->t < q->t);
}

/* Step 2: per call, its end's distance from where its operation's ends agree (NAN when none).
 * An operation of two ranks cannot tell which of them moved: it speaks (its calls' bits set
 * in pair_only) only for a rank that has no larger operation to go by. A call is in one
 * operation, so one array holds both kinds (two of them were 40 MB more at the analysis'
 * peak of memory). */
static int residuals(frames *f, size_t maxp, const size_t *call_base, float *res,
                     uint8_t *pair_only)
{
    const cpa_matched *mt = f->mt;
    double *j = malloc((maxp ? maxp : 1) * sizeof *j);
    double *tmp = malloc((maxp ? maxp : 1) * sizeof *tmp);
    uint32_t *taken = calloc(f->npairs ? f->npairs : 1, sizeof *taken); /* per pair */
    pair_walk w;
    int rc = pair_walk_init(&w, maxp);
    if (!j || !tmp || !taken || rc) {
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        if (!f->tying[i])
            continue;
        const cpa_part *p = &mt->parts[o->first_part];
        pair_walk_op(&w, p);
        uint64_t e0 = 0;
        int have_e0 = 0;
        tmp[0] = j[0] = f->u[p[0].rank_idx];
        for (uint32_t k = 1; k < o->nparts; k++) {
            /* the difference step 1 kept, in the order it kept them; converted again only
             * where the float may not hold it (2^24 ns apart or more) or none was kept */
            pair *q;
            int got = pair_walk_at(f, &w, p, k, &q);
            if (got < 0) {
                rc = -1;
                goto out;
            }
            float d = got ? 0 : f->diffs[q->first + taken[q - f->pairs]++];
            double dk = d;
            if (got || !(fabsf(d) < 16777216.0f)) {
                if (!have_e0) {
                    e0 = end_job(f, &p[0]);
                    have_e0 = 1;
                }
                dk = diff_ns(end_job(f, &p[k]), e0);
            }
            tmp[k] = j[k] = dk + f->u[p[k].rank_idx];
        }
        pair_walk_done(&w, o->nparts);
        double e = cpa_clk_consensus(tmp, o->nparts);
        for (uint32_t k = 0; k < o->nparts; k++) {
            size_t at = call_base[p[k].rank_idx] + p[k].call_idx;
            res[at] = (float)(e - j[k]);
            if (o->nparts <= 2)
                pair_only[at / 8] |= (uint8_t)(1u << (at % 8));
        }
    }
out:
    free(j);
    free(tmp);
    free(taken);
    pair_walk_free(&w);
    return rc;
}

/* The level of samples s[a..b) that lie within STEP_TOL_NS of guess: their median. */
static double level_of(const gsample *s, size_t a, size_t b, double guess, double *w)
{
    size_t n = 0;
    for (size_t i = a; i < b; i++)
        if (fabs(s[i].r - guess) <= STEP_TOL_NS)
            w[n++] = s[i].r;
    return n ? cpa_select(w, n, (n - 1) / 2) : guess;
}

/* Step 2's segments for rank r: its offset plus a piecewise constant level. A new level
 * starts where STEP_CONFIRM samples in a row leave the current one by more than STEP_TOL_NS
 * and agree among themselves; a lone sample off the level is an odd end, not a new
 * reference (a running median, tried first, lagged each step by half its window). A step
 * in a rank's last STEP_CONFIRM - 1 samples cannot be told from odd ends and is missed: on
 * the emulation, references the shim records while the processes exit do that. */
static size_t segments(const frames *f, uint32_t r, const float *res, const uint8_t *pair_only,
                       size_t base, gsample *s, double *w, cpa_gseg *out)
{
    const cpa_rank *k = &f->m->ranks[r];
    size_t n = 0, used = 0;
    for (int pairs = 0; pairs < 2 && !n; pairs++)
        for (size_t i = 0; i < k->ncalls; i++) {
            size_t at = base + i;
            if (!isnan(res[at]) && ((pair_only[at / 8] >> (at % 8)) & 1) == pairs)
                s[n++] = (gsample){k->calls[i].gpu_start_ns, res[at]};
        }
    if (!n) {
        out[0] = (cpa_gseg){0, f->u[r], 0};
        return 1;
    }
    size_t sorted = 1; /* file order is nearly always time order already */
    while (sorted < n && s[sorted - 1].t <= s[sorted].t)
        sorted++;
    if (sorted < n)
        qsort(s, n, sizeof *s, cmp_gsample);
    size_t m = n < STEP_CONFIRM ? n : STEP_CONFIRM;
    for (size_t x = 0; x < m; x++)
        w[x] = s[x].r;
    double level = cpa_select(w, m, (m - 1) / 2);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(s[i].r - level) <= STEP_TOL_NS || i + STEP_CONFIRM > n)
            continue;
        double lo = s[i].r, hi = s[i].r;
        size_t x = i;
        for (; x < i + STEP_CONFIRM && fabs(s[x].r - level) > STEP_TOL_NS; x++) {
            lo = s[x].r < lo ? s[x].r : lo;
            hi = s[x].r > hi ? s[x].r : hi;
        }
        if (x < i + STEP_CONFIRM || hi - lo > 2 * STEP_TOL_NS)
            continue;
        out[used++] = (cpa_gseg){start ? s[start].t : 0, level_of(s, start, i, level, w), 0};
        level = (lo + hi) / 2;
        start = i;
    }
    out[used++] = (cpa_gseg){start ? s[start].t : 0, level_of(s, start, n, level, w), 0};
    for (size_t i = 0; i < used; i++)
        out[i].corr += f->u[r];
    return used;
}

int cpa_clk_gpu_frames(const cpa_model *m, const cpa_matched *mt, const uint8_t *tying,
                       cpa_clock *c)
{
    size_t nr = m->nranks, total = 0, most = 0;
    frames f = {.m = m, .mt = mt, .c = c, .tying = tying};
    size_t *call_base = malloc((nr + 1) * sizeof *call_base);
    float *res = NULL;
    uint8_t *pair_only = NULL;
    gsample *s = NULL;
    double *w = NULL;
    int rc = -1;
    f.u = calloc(nr ? nr : 1, sizeof *f.u);
    f.comp = malloc((nr ? nr : 1) * sizeof *f.comp);
    c->map->g_first = calloc(nr + 1, sizeof *c->map->g_first);
    if (!call_base || !f.u || !f.comp || !c->map->g_first)
        goto out;
    if (!nr) {
        rc = 0;
        goto out;
    }
    for (size_t r = 0; r < nr; r++) {
        call_base[r] = total;
        total += m->ranks[r].ncalls;
        most = m->ranks[r].ncalls > most ? m->ranks[r].ncalls : most;
        f.comp[r] = UINT32_MAX;
    }
    call_base[nr] = total;
    size_t maxp = 1;
    for (size_t i = 0; i < mt->nops; i++)
        maxp = mt->ops[i].nparts > maxp ? mt->ops[i].nparts : maxp;
    f.fast = cpa_clk_fast_make(m, c, 0); /* NULL: the general way */
    if (collect_pairs(&f, maxp) || solve_frames(&f))
        goto out;
    res = malloc((total ? total : 1) * sizeof *res);
    pair_only = calloc(total / 8 + 1, 1);
    s = malloc((most ? most : 1) * sizeof *s);
    w = malloc((most ? most : 1) * sizeof *w);
    /* one segment per call at most, and one for a rank with none */
    c->map->gsegs = malloc((total + nr + 1) * sizeof *c->map->gsegs);
    if (!res || !pair_only || !s || !w || !c->map->gsegs)
        goto out;
    cpa_populate(res, total * sizeof *res);
    for (size_t i = 0; i < total; i++)
        res[i] = NAN;
    if (residuals(&f, maxp, call_base, res, pair_only))
        goto out;
    free(f.diffs); /* step 1's, read back: gone before the segments' own arrays */
    f.diffs = NULL;
    free(f.fast);  /* the causal shift moves offsets: no conversion after it */
    f.fast = NULL;
    free(f.slot);
    f.slot = NULL;
    uint32_t ncomp = 0;
    for (size_t r = 0; r < nr; r++)
        if (f.comp[r] != UINT32_MAX && f.comp[r] + 1 > ncomp)
            ncomp = f.comp[r] + 1;
    cpa_clk_causal *cs = cpa_clk_causal_make(m, c, f.comp, ncomp);
    if (!cs)
        goto out;
    size_t used = 0;
    for (size_t r = 0; r < nr; r++) {
        c->map->g_first[r] = used;
        used += segments(&f, (uint32_t)r, res, pair_only, call_base[r], s, w,
                         c->map->gsegs + used);
        c->map->g_first[r + 1] = used;
        cpa_clk_causal_rank(cs, (uint32_t)r, w);
    }
    cpa_clk_unfix(c); /* it moves offsets */
    cpa_clk_causal_shift(cs, c);
    cpa_clk_causal_free(cs);
    rc = 0;
out:
    free(call_base);
    free(res);
    free(pair_only);
    free(s);
    free(w);
    free(f.u);
    free(f.comp);
    free(f.pairs);
    free(f.slot);
    free(f.diffs);
    free(f.fast);
    return rc;
}
