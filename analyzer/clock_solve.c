/* analyzer/clock_solve.c: clock domains' offsets and drift from the ties between them
 * (clock.c collects the ties, from blocking collectives' ends; see there).
 *
 * Offsets are solved as medians of ties: domains in the order of a maximum spanning tree
 * from the reference (the next domain is the one with most ties to those already solved,
 * so a domain tied only through another is still reached), then Gauss-Seidel passes that
 * re-solve each domain from all its ties until nothing moves.
 * Drift: when a domain's ties span at least DRIFT_MIN_SPAN_NS and DRIFT_MIN_TIES, a robust
 * line (medians of the first and last thirds) is fitted; it is kept only when the change
 * it predicts over the span is at least DRIFT_MIN_NS and 4 times the spread the line leaves
 * (otherwise a noisy slope would add error instead of removing it). Outside its ties' span
 * a drift is held at its end value: a line extrapolated past its data is a guess.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/clock_internal.h"

#define DRIFT_MIN_SPAN_NS 10000000000ull /* 10 s: shorter traces cannot tell drift from noise */
#define DRIFT_MIN_TIES 30              /* 10 per third of the line fit */
#define DRIFT_MIN_NS 1000.0            /* a drift that moves the offset by < 1 us is noise */
#define SOLVE_MAX_PASSES 50
#define SOLVE_EPS_NS 0.5

static double median(double *v, size_t n)
{
    return cpa_select(v, n, (n - 1) / 2);
}

typedef struct solver {
    cpa_clock *c;
    const cpa_tie *t;
    size_t nt;
    size_t *adj_first;   /* CSR: domain d's ties are adj[adj_first[d] .. adj_first[d + 1]) */
    size_t *adj;         /* ... sorted by d's local time */
    uint8_t *solved;
    uint8_t *drifts;     /* domains allowed a drift */
    double *y, *tmp;     /* scratch, one per tie of a domain */
    uint64_t *ts;
} solver;

static uint64_t tie_t(const cpa_tie *t, uint32_t d)
{
    return t->a == d ? t->ta : t->tb;
}

/* What domain d's correction should be at each of its ties whose other side is solved:
 * equal corrected ends. Returns how many; y[] and ts[] in local time order. */
static size_t targets(solver *s, uint32_t d)
{
    size_t n = 0;
    for (size_t k = s->adj_first[d]; k < s->adj_first[d + 1]; k++) {
        const cpa_tie *t = &s->t[s->adj[k]];
        uint32_t o = t->a == d ? t->b : t->a;
        if (!s->solved[o])
            continue;
        const cpa_clock_domain *od = &s->c->domains[o];
        const cpa_dmap *om = &s->c->map->d[o];
        if (t->a == d) {
            s->y[n] = cpa_clk_corr_at(od, om, t->tb) + (double)t->diff;
            s->ts[n] = t->ta;
        } else {
            s->y[n] = cpa_clk_corr_at(od, om, t->ta) - (double)t->diff;
            s->ts[n] = t->tb;
        }
        n++;
    }
    return n;
}

typedef struct fit {
    double offset, drift, spread; /* spread: p90 of |target - fit| */
} fit;

static fit fit_const(solver *s, size_t n)
{
    memcpy(s->tmp, s->y, n * sizeof *s->tmp);
    fit f = {.offset = median(s->tmp, n)};
    for (size_t i = 0; i < n; i++)
        s->tmp[i] = fabs(s->y[i] - f.offset);
    f.spread = cpa_clk_p90(s->tmp, n);
    return f;
}

/* A line through the medians of the first and last thirds (robust to outlying ties, and
 * linear in time unlike Theil-Sen), its offset the median at t0. */
static fit fit_line(solver *s, size_t n, uint64_t t0)
{
    size_t k = n / 3;
    memcpy(s->tmp, s->y, k * sizeof *s->tmp);
    double y1 = median(s->tmp, k);
    memcpy(s->tmp, s->y + n - k, k * sizeof *s->tmp);
    double y3 = median(s->tmp, k);
    uint64_t t1 = s->ts[(k - 1) / 2], t3 = s->ts[n - k + (k - 1) / 2];
    fit f = {0};
    f.drift = t3 > t1 ? (y3 - y1) / (double)(t3 - t1) : 0;
    for (size_t i = 0; i < n; i++)
        s->tmp[i] = s->y[i] - f.drift * ((double)s->ts[i] - (double)t0);
    f.offset = median(s->tmp, n);
    for (size_t i = 0; i < n; i++)
        s->tmp[i] = fabs(s->y[i] - f.offset - f.drift * ((double)s->ts[i] - (double)t0));
    f.spread = cpa_clk_p90(s->tmp, n);
    return f;
}

static int drift_pays(solver *s, size_t n, const cpa_dmap *dm, fit *out)
{
    if (n < DRIFT_MIN_TIES || dm->hi - dm->lo < DRIFT_MIN_SPAN_NS)
        return 0;
    fit f = fit_line(s, n, dm->lo);
    double change = fabs(f.drift) * (double)(dm->hi - dm->lo);
    if (change < DRIFT_MIN_NS || change < 4 * f.spread)
        return 0;
    *out = f;
    return 1;
}

/* Re-solves domain d from its solved neighbours; returns how far its correction moved. */
static double solve_one(solver *s, uint32_t d)
{
    size_t n = targets(s, d);
    if (!n)
        return 0;
    cpa_clock_domain *dom = &s->c->domains[d];
    const cpa_dmap *dm = &s->c->map->d[d];
    fit f;
    if (!s->drifts[d] || !drift_pays(s, n, dm, &f)) {
        f = fit_const(s, n);
        f.drift = 0;
    }
    double span = (double)(dm->hi - dm->lo);
    double moved = fabs(f.offset - dom->offset_ns) + fabs(f.drift - dom->drift) * span;
    dom->offset_ns = f.offset;
    dom->drift = f.drift;
    dom->drift_t0_ns = dm->lo;
    return moved;
}

static void passes(solver *s, const uint32_t *order, size_t norder)
{
    for (int pass = 0; pass < SOLVE_MAX_PASSES; pass++) {
        double moved = 0;
        for (size_t i = 1; i < norder; i++) {
            double d = solve_one(s, order[i]);
            if (d > moved)
                moved = d;
        }
        if (moved < SOLVE_EPS_NS)
            break;
    }
}

int cpa_clk_solve(cpa_clock *c, const cpa_tie *t, size_t nt)
{
    size_t nd = c->ndomains;
    solver s = {.c = c, .t = t, .nt = nt};
    s.adj_first = calloc(nd + 1, sizeof *s.adj_first);
    s.adj = malloc((nt ? 2 * nt : 1) * sizeof *s.adj);
    s.solved = calloc(nd, 1);
    s.drifts = calloc(nd, 1);
    uint32_t *order = malloc(nd * sizeof *order);
    size_t *links = calloc(nd, sizeof *links);
    size_t maxdeg = 0;
    int rc = -1;
    if (!s.adj_first || !s.adj || !s.solved || !s.drifts || !order || !links)
        goto out;
    for (size_t i = 0; i < nt; i++) {
        s.adj_first[t[i].a + 1]++;
        s.adj_first[t[i].b + 1]++;
    }
    for (size_t d = 0; d < nd; d++) {
        if (s.adj_first[d + 1] > maxdeg)
            maxdeg = s.adj_first[d + 1];
        s.adj_first[d + 1] += s.adj_first[d];
    }
    {
        size_t *fill = links; /* reused as a cursor before it counts links */
        for (size_t i = 0; i < nt; i++) {
            s.adj[s.adj_first[t[i].a] + fill[t[i].a]++] = i;
            s.adj[s.adj_first[t[i].b] + fill[t[i].b]++] = i;
        }
        memset(links, 0, nd * sizeof *links);
    }
    /* Each domain's ties in its local time order (the drift fit's thirds), sorted by value
     * rather than through the ties: the reference domain holds nearly all of them (half a
     * million on a 1024-rank job: a stable radix sort, where qsort's comparator calls were
     * the solver's largest cost). */
    cpa_kv *keys = malloc(2 * (maxdeg ? maxdeg : 1) * sizeof *keys);
    if (!keys)
        goto out;
    for (size_t d = 0; d < nd; d++) {
        size_t *a = s.adj + s.adj_first[d], n = s.adj_first[d + 1] - s.adj_first[d];
        for (size_t k = 0; k < n; k++)
            keys[k] = (cpa_kv){tie_t(&t[a[k]], (uint32_t)d), a[k]};
        cpa_sort_kv(keys, keys + n, n);
        for (size_t k = 0; k < n; k++)
            a[k] = (size_t)keys[k].val;
        cpa_dmap *dm = &c->map->d[d];
        if (s.adj_first[d + 1] > s.adj_first[d]) {
            dm->lo = tie_t(&t[s.adj[s.adj_first[d]]], (uint32_t)d);
            dm->hi = tie_t(&t[s.adj[s.adj_first[d + 1] - 1]], (uint32_t)d);
        }
    }
    free(keys);
    s.y = malloc((maxdeg ? maxdeg : 1) * sizeof *s.y);
    s.tmp = malloc((maxdeg ? maxdeg : 1) * sizeof *s.tmp);
    s.ts = malloc((maxdeg ? maxdeg : 1) * sizeof *s.ts);
    if (!s.y || !s.tmp || !s.ts)
        goto out;

    /* Maximum spanning tree order from the reference: each next domain is the one with the
     * most ties to those solved, and is solved from them alone. */
    size_t norder = 0;
    uint32_t next = 0;
    for (;;) {
        s.solved[next] = 1;
        order[norder++] = next;
        if (next)
            solve_one(&s, next);
        for (size_t k = s.adj_first[next]; k < s.adj_first[next + 1]; k++) {
            const cpa_tie *x = &t[s.adj[k]];
            links[x->a == next ? x->b : x->a]++;
        }
        size_t best = 0;
        for (size_t d = 0; d < nd; d++)
            if (!s.solved[d] && links[d] > best) {
                best = links[d];
                next = (uint32_t)d;
            }
        if (!best)
            break;
    }
    passes(&s, order, norder);
    /* Drift is weighed once the offsets have settled, against settled neighbours. */
    int any = 0;
    for (size_t i = 1; i < norder; i++) {
        fit f;
        size_t n = targets(&s, order[i]);
        if (drift_pays(&s, n, &c->map->d[order[i]], &f))
            s.drifts[order[i]] = 1, any = 1;
    }
    if (any)
        passes(&s, order, norder);
    for (size_t d = 0; d < nd; d++)
        c->domains[d].refined = s.solved[d];
    rc = 0;
out:
    free(s.adj_first);
    free(s.adj);
    free(s.solved);
    free(s.drifts);
    free(s.y);
    free(s.tmp);
    free(s.ts);
    free(order);
    free(links);
    return rc;
}
