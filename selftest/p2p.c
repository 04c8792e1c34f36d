/* p2p: the pairwise send/recv matrix between this process's ranks.
 *
 * Each ordered pair (a, b) alone: one group with ncclSend on a's communicator to b and the
 * matching ncclRecv on b's, timed with events on both streams (the longer span counts, as the
 * transfer is done only when b has it). One pair at a time, so no other traffic shares a link
 * and a slow link shows as its own pair's figure, not as everybody's.
 *
 * A pair's time is the median of its calls, each timed with events of its own: a verdict
 * names a slow link from this figure, so one host stall while the calls were issued (which
 * delays one call on the GPU) must not make a healthy link look slow.
 *
 * Under a launcher each process drives one rank, and a pair is two processes of one host.
 * Every rank walks the same steps, a pair of local indices (a, b); at each, on every host at
 * once, the rank of local index a sends and the one of b receives, the others skip (hosts share
 * no link a pair uses). The two swap their per-call times, so both know each call's longer
 * span; the figures of every pair reach every rank by one all-reduce at the end.
 *
 * Rail pairs (under a launcher with 2+ hosts): the matrix never leaves a host, so a slow NIC,
 * cable or switch port between hosts would go unnamed. For each local index i every host has
 * (a rail), host h's rank i sends to host h+1's rank i and back (hosts in the order of their
 * first rank; a ring of hosts, one pair per rail with two hosts). One step at a time over the
 * whole job, so no other pair shares a NIC or the fabric; the same per-call median, the same
 * swap and one all-reduce at the end.
 *
 * A second look: after each pass every pair below 3/4 of the pass's median (the verdict's
 * PASS line, verdict.c) is measured once more, and keeps the faster of its two figures. A
 * link is named slow only when it was slow twice, minutes apart: a host busy with something
 * else for a few seconds (a loaded CI machine, the emulation beside another job) slowed a
 * healthy pair's every call once and a verdict named it. The median is over every pair of
 * the pass, so a kind of link slower than the rest (PCIe beside NVLink, NET beside both) is
 * measured twice too: that costs time, never a verdict. Under a launcher every rank derives
 * the same second list from the figures the all-reduce gave them all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/sweep_internal.h"

/* The progress line of a step: "p2p 1->3 16 MiB", " again" on the second look (which no
 * total counted ahead, so it is no step more). */
static void say_step(struct cps_progress *pr, int pass, const char *kind, int from, int to,
                     const char *size)
{
    char what[96];
    snprintf(what, sizeof what, "%s %d->%d %s%s", kind, from, to, size, pass ? " again" : "");
    if (pass)
        cps_progress_note(pr, what);
    else
        cps_progress_step(pr, what);
}

/* Below this share of the pass's median a pair is measured again (verdict.c's PASS_RATIO). */
#define AGAIN_BELOW 0.75

/* The figure under which a pair of fig[0..n) is measured again: AGAIN_BELOW of the median of
 * the measured (positive) figures; 0 when none was measured or memory ran out (no second
 * look then, the first figures stand). */
static double again_below(const double *fig, size_t n)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    int m = 0;
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fig[i] > 0)
            v[m++] = fig[i];
    double cut = m ? AGAIN_BELOW * cps_median(v, m) : 0;
    free(v);
    return cut;
}

struct pair_call {
    int a, b;
    size_t count;
};

static int issue_pair(struct cps_world *w, void *arg, char *why, size_t whyn)
{
    const struct pair_call *c = arg;
    const struct cps_lib *L = w->L;
    const struct cps_rank *a = &w->r[c->a], *b = &w->r[c->b];
    ncclResult_t rc = L->ncclGroupStart();
    const char *call = "ncclGroupStart";
    ncclComm_t comm = NULL;
    if (rc == ncclSuccess) {
        call = "ncclSend";
        comm = a->comm;
        rc = L->ncclSend((void *)(uintptr_t)a->send, c->count, ncclFloat32, b->rank, a->comm,
                         a->stream);
    }
    if (rc == ncclSuccess) {
        call = "ncclRecv";
        comm = b->comm;
        rc = L->ncclRecv((void *)(uintptr_t)b->recv, c->count, ncclFloat32, a->rank, b->comm,
                         b->stream);
    }
    ncclResult_t end = L->ncclGroupEnd();
    if (rc == ncclSuccess && end != ncclSuccess) {
        rc = end;
        call = "ncclGroupEnd";
        comm = NULL;
    }
    if (rc == ncclSuccess)
        return 0;
    char e[384];
    cps_nccl_error(L, rc, comm, e, sizeof e);
    snprintf(why, whyn, "p2p %d->%d: %s failed: %s", a->rank, b->rank, call, e);
    cps_one_line(why);
    return -1;
}

/* ---- one rank per process ------------------------------------------------------------ */

/* The most ranks any host has: every rank counts the same from the same gpus[]. */
static int widest_host(const cps_run *r)
{
    int most = 0, mine[CPS_MAX_GPUS];
    for (int i = 0; i < r->nranks; i++) {
        int n = cps_run_host_ranks(r, i, mine);
        most = n > most ? n : most;
    }
    return most;
}

int cps_p2p_steps(const struct cps_world *w, const cps_run *r)
{
    int n = w->n < w->nranks ? widest_host(r) : w->n;
    return n * (n - 1);
}

/* This rank's half of a pair: a send to peer, or a receive from it. */
struct half_call {
    int send, peer;
    size_t count;
};

static int issue_half(struct cps_world *w, void *arg, char *why, size_t whyn)
{
    const struct half_call *c = arg;
    const struct cps_lib *L = w->L;
    const struct cps_rank *k = &w->r[0];
    ncclResult_t rc =
        c->send ? L->ncclSend((void *)(uintptr_t)k->send, c->count, ncclFloat32, c->peer,
                              k->comm, k->stream)
                : L->ncclRecv((void *)(uintptr_t)k->recv, c->count, ncclFloat32, c->peer,
                              k->comm, k->stream);
    if (rc == ncclSuccess)
        return 0;
    char e[384];
    cps_nccl_error(L, rc, k->comm, e, sizeof e);
    snprintf(why, whyn, "p2p %d->%d: %s failed: %s", c->send ? k->rank : c->peer,
             c->send ? c->peer : k->rank, c->send ? "ncclSend" : "ncclRecv", e);
    cps_one_line(why);
    return -1;
}

/* The two ranks of a pair swap their per-call spans (iters doubles each way) through the
 * exchange buffer; mine[k] becomes the longer of the two. */
static int swap_spans(struct cps_world *w, int peer, double *mine, int iters, double *theirs,
                      const char *what, char *why, size_t whyn)
{
    const struct cps_lib *L = w->L;
    struct cps_rank *k = &w->r[0];
    size_t bytes = (size_t)iters * sizeof(double);
    if (cps_world_xchg(w, 0, 2 * bytes, why, whyn) || cps_world_use(w, 0, why, whyn))
        return -1;
    CPS_CU(L->cuMemcpyHtoD(k->xchg, mine, bytes), "cuMemcpyHtoD");
    CPS_CU(L->cuCtxSynchronize(), "cuCtxSynchronize");
    char *p = (char *)(uintptr_t)k->xchg;
    ncclResult_t rc = L->ncclGroupStart();
    if (rc == ncclSuccess)
        rc = L->ncclSend(p, bytes, ncclUint8, peer, k->comm, k->stream);
    if (rc == ncclSuccess)
        rc = L->ncclRecv(p + bytes, bytes, ncclUint8, peer, k->comm, k->stream);
    ncclResult_t end = L->ncclGroupEnd();
    if (rc == ncclSuccess)
        rc = end;
    if (rc != ncclSuccess) {
        char e[384];
        cps_nccl_error(L, rc, k->comm, e, sizeof e);
        snprintf(why, whyn, "%s: swapping times with rank %d failed: %s", what, peer, e);
        cps_one_line(why);
        return -1;
    }
    if (cps_world_drain(w, 1, what, why, whyn))
        return -1;
    CPS_CU(L->cuMemcpyDtoH(theirs, k->xchg + bytes, bytes), "cuMemcpyDtoH");
    for (int i = 0; i < iters; i++)
        mine[i] = theirs[i] > mine[i] ? theirs[i] : mine[i];
    return 0;
}

/* This rank's half of one step (a send to peer, or a receive from it), timed; *gbps is the
 * median over the calls of the longer span of the two ends. us and theirs: iters doubles. */
static int time_half(struct cps_world *w, int send, int peer, size_t count, int warmup,
                     int iters, const char *what, double *us, double *theirs, double *gbps,
                     char *why, size_t whyn)
{
    struct half_call c = {send, peer, count};
    if (cps_time_each(w, 1, issue_half, &c, warmup, iters, 0, what, us, why, whyn) ||
        swap_spans(w, peer, us, iters, theirs, what, why, whyn))
        return -1;
    double t = cps_median(us, iters);
    *gbps = t > 0 ? (double)(count * sizeof(float)) / (t * 1e3) : 0;
    return 0;
}

/* Whether step (a, b) of the launcher's matrix is measured again: some host's pair of local
 * indices a -> b (fig[rank * widest + b], local[rank] == a) is under cut. Every rank reads
 * the same agreed figures, so every rank walks the same steps. */
static int again_step(const double *fig, const int *local, int n, int widest, int a, int b,
                      double cut)
{
    for (int s = 0; s < n; s++) {
        double f = fig[(size_t)s * (size_t)widest + (size_t)b];
        if (local[s] == a && f > 0 && f < cut)
            return 1;
    }
    return 0;
}

static int launcher_matrix(struct cps_world *w, size_t count, int warmup, int iters,
                           struct cps_progress *pr, cps_run *r, char *why, size_t whyn)
{
    int mine[CPS_MAX_GPUS], nmine = cps_run_host_ranks(r, w->world_rank, mine), me = 0;
    int widest = widest_host(r), n = w->nranks;
    for (int i = 0; i < nmine; i++)
        if (mine[i] == w->world_rank)
            me = i;
    r->p2p_n = nmine;
    for (int i = 0; i < nmine; i++)
        r->p2p_rank[i] = mine[i];
    /* fig[s * widest + b]: GB/s from rank s to local index b of its host; 0 elsewhere */
    double *fig = calloc((size_t)n * (size_t)widest + 1, sizeof *fig);
    double *us = calloc((size_t)iters, sizeof *us), *theirs = calloc((size_t)iters, sizeof *us);
    int *local = calloc((size_t)n + 1, sizeof *local); /* each rank's index on its host */
    int rc = -1;
    if (!fig || !us || !theirs || !local) {
        snprintf(why, whyn, "p2p: out of memory");
        goto out;
    }
    for (int s = 0; s < n; s++)
        for (int i = 0; i < s; i++)
            local[s] += strcmp(r->gpus[i].host, r->gpus[s].host) == 0;
    char size[32];
    cps_bytes_text(r->p2p_bytes, size, sizeof size);
    size_t nfig = (size_t)n * (size_t)widest;
    /* pass 0 measures every step; pass 1 those of a figure under cut, keeping the faster */
    for (int pass = 0; pass < 2; pass++) {
        double cut = pass ? again_below(fig, nfig) : 0;
        if (pass && !(cut > 0))
            break;
        for (int a = 0; a < widest; a++)
            for (int b = 0; b < widest; b++) {
                if (a == b)
                    continue;
                if (pass && !again_step(fig, local, n, widest, a, b, cut))
                    continue;
                say_step(pr, pass, "p2p", a, b, size);
                int send = me == a && b < nmine, recv = me == b && a < nmine;
                if (!send && !recv)
                    continue;
                char what[96];
                snprintf(what, sizeof what, "p2p %d->%d %s", mine[a], mine[b], size);
                double g;
                if (time_half(w, send, mine[send ? b : a], count, warmup, iters, what, us,
                              theirs, &g, why, whyn))
                    goto out;
                double *f = &fig[mine[a] * widest + b];
                *f = g > *f ? g : *f;
            }
        if (cps_world_agree(w, fig, nfig, ncclMax, "the p2p matrix", why, whyn))
            goto out;
    }
    for (int a = 0; a < nmine; a++)
        for (int b = 0; b < nmine; b++)
            r->p2p_gbps[a][b] = a == b ? 0 : fig[mine[a] * widest + b];
    free(r->p2p_job);
    r->p2p_job = fig;
    r->p2p_widest = widest;
    fig = NULL;
    rc = 0;
out:
    free(fig);
    free(us);
    free(theirs);
    free(local);
    return rc;
}

int cps_p2p_matrix(struct cps_world *w, uint64_t bytes, int warmup, int iters,
                   struct cps_progress *pr, cps_run *r, char *why, size_t whyn)
{
    if (w->n < w->nranks) {
        size_t count = (size_t)(bytes / sizeof(float));
        count = count ? count : 1;
        r->p2p_bytes = (uint64_t)count * sizeof(float);
        return launcher_matrix(w, count, warmup, iters < 1 ? 1 : iters, pr, r, why, whyn);
    }
    size_t count = (size_t)(bytes / sizeof(float));
    if (count == 0)
        count = 1;
    r->p2p_n = w->n;
    r->p2p_bytes = (uint64_t)count * sizeof(float);
    for (int a = 0; a < w->n; a++)
        r->p2p_rank[a] = w->r[a].rank;
    if (iters < 1)
        iters = 1;
    double *us = calloc((size_t)iters, sizeof *us);
    if (!us) {
        snprintf(why, whyn, "p2p: out of memory");
        return -1;
    }
    char size[32];
    cps_bytes_text(r->p2p_bytes, size, sizeof size);
    /* pass 0 measures every pair; pass 1 those under cut, keeping the faster figure */
    for (int pass = 0; pass < 2; pass++) {
        double cut = pass ? again_below(&r->p2p_gbps[0][0], sizeof r->p2p_gbps / sizeof(double))
                          : 0;
        if (pass && !(cut > 0))
            break;
        for (int a = 0; a < w->n; a++)
            for (int b = 0; b < w->n; b++) {
                double *f = &r->p2p_gbps[a][b];
                if (a == b || (pass && !(*f > 0 && *f < cut)))
                    continue;
                struct pair_call c = {a, b, count};
                char what[96];
                snprintf(what, sizeof what, "p2p %d->%d %s", w->r[a].rank, w->r[b].rank,
                         size);
                say_step(pr, pass, "p2p", w->r[a].rank, w->r[b].rank, size);
                if (cps_time_each(w, (1u << a) | (1u << b), issue_pair, &c, warmup, iters, 0,
                                  what, us, why, whyn)) {
                    free(us);
                    return -1;
                }
                double t = cps_median(us, iters);
                double g = t > 0 ? (double)r->p2p_bytes / (t * 1e3) : 0;
                *f = pass && *f > g ? *f : g;
            }
    }
    free(us);
    return 0;
}

/* ---- rail pairs between hosts ------------------------------------------------------------ */

/* The rail pairs every rank derives alike from r->gpus: *at (to free) holds the ranks of
 * host h at at[h * CPS_MAX_GPUS + local index]; pair p of rail i, host step k (k = p mod hp)
 * is at[k][i] -> at[(k + 1) mod nhosts][i]. Returns the number of pairs (0 with one host or
 * one process over every rank), or -1 when memory ran out. */
struct rail_plan {
    int *at;
    int nhosts, nrails, hp; /* hp: host pairs per rail (1 with two hosts, else nhosts) */
};

static int rail_plan(const struct cps_world *w, const cps_run *r, struct rail_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    if (w->n >= w->nranks || r->nranks < 2 || !r->gpus)
        return 0;
    int n = r->nranks;
    int *host = calloc((size_t)n, sizeof *host), *count = calloc((size_t)n, sizeof *count);
    pl->at = calloc((size_t)n * CPS_MAX_GPUS, sizeof *pl->at);
    if (!host || !count || !pl->at) {
        free(host);
        free(count);
        free(pl->at);
        pl->at = NULL;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        host[i] = -1;
        for (int j = 0; j < i && host[i] < 0; j++)
            if (strcmp(r->gpus[i].host, r->gpus[j].host) == 0)
                host[i] = host[j];
        if (host[i] < 0)
            host[i] = pl->nhosts++;
        /* exchange_gpus refused a host of more than CPS_MAX_GPUS ranks */
        if (count[host[i]] < CPS_MAX_GPUS)
            pl->at[host[i] * CPS_MAX_GPUS + count[host[i]]++] = i;
    }
    pl->nrails = CPS_MAX_GPUS;
    for (int h = 0; h < pl->nhosts; h++)
        pl->nrails = count[h] < pl->nrails ? count[h] : pl->nrails;
    free(host);
    free(count);
    if (pl->nhosts < 2) {
        free(pl->at);
        memset(pl, 0, sizeof *pl);
        return 0;
    }
    pl->hp = pl->nhosts == 2 ? 1 : pl->nhosts;
    return pl->nrails * pl->hp;
}

static void rail_pair(const struct rail_plan *pl, int p, int *a, int *b)
{
    int i = p / pl->hp, k = p % pl->hp;
    *a = pl->at[k * CPS_MAX_GPUS + i];
    *b = pl->at[(k + 1) % pl->nhosts * CPS_MAX_GPUS + i];
}

int cps_net_steps(const struct cps_world *w, const cps_run *r)
{
    struct rail_plan pl;
    int np = rail_plan(w, r, &pl);
    free(pl.at);
    return np > 0 ? 2 * np : 0;
}

int cps_net_pairs(struct cps_world *w, uint64_t bytes, int warmup, int iters,
                  struct cps_progress *pr, cps_run *r, char *why, size_t whyn)
{
    struct rail_plan pl;
    int np = rail_plan(w, r, &pl);
    if (np < 0) {
        snprintf(why, whyn, "rail pairs: out of memory");
        return -1;
    }
    if (np == 0)
        return 0;
    size_t count = (size_t)(bytes / sizeof(float));
    count = count ? count : 1;
    r->p2p_bytes = (uint64_t)count * sizeof(float);
    iters = iters < 1 ? 1 : iters;
    /* fig[2p]: pair p's first rank to its second, fig[2p + 1] back; 0 where not measured */
    double *fig = calloc((size_t)np * 2, sizeof *fig);
    double *us = calloc((size_t)iters, sizeof *us), *theirs = calloc((size_t)iters, sizeof *us);
    r->net_pairs = calloc((size_t)np, sizeof *r->net_pairs);
    int rc = -1;
    if (!fig || !us || !theirs || !r->net_pairs) {
        snprintf(why, whyn, "rail pairs: out of memory");
        goto out;
    }
    char size[32];
    cps_bytes_text(r->p2p_bytes, size, sizeof size);
    /* pass 0 measures every step; pass 1 those under cut, keeping the faster figure */
    for (int pass = 0; pass < 2; pass++) {
        double cut = pass ? again_below(fig, (size_t)np * 2) : 0;
        if (pass && !(cut > 0))
            break;
        for (int s = 0; s < 2 * np; s++) {
            if (pass && !(fig[s] > 0 && fig[s] < cut))
                continue;
            int a, b;
            rail_pair(&pl, s / 2, &a, &b);
            int from = s % 2 ? b : a, to = s % 2 ? a : b;
            char what[96];
            snprintf(what, sizeof what, "net %d->%d %s", from, to, size);
            say_step(pr, pass, "net", from, to, size);
            int me = w->world_rank;
            if (me != from && me != to)
                continue;
            double g;
            if (time_half(w, me == from, me == from ? to : from, count, warmup, iters, what,
                          us, theirs, &g, why, whyn))
                goto out;
            fig[s] = g > fig[s] ? g : fig[s];
        }
        if (cps_world_agree(w, fig, (size_t)np * 2, ncclMax, "the rail pairs", why, whyn))
            goto out;
    }
    for (int p = 0; p < np; p++) {
        int a, b;
        rail_pair(&pl, p, &a, &b);
        cps_net_pair *q = &r->net_pairs[p];
        int keep = a < b;
        q->a = keep ? a : b;
        q->b = keep ? b : a;
        q->gbps_ab = fig[2 * p + !keep];
        q->gbps_ba = fig[2 * p + keep];
    }
    r->n_net_pairs = np;
    rc = 0;
out:
    if (rc) {
        free(r->net_pairs);
        r->net_pairs = NULL;
    }
    free(pl.at);
    free(fig);
    free(us);
    free(theirs);
    return rc;
}
