/* verdict: a finished run judged against what the topology should give.
 *
 * The checks, in this order: gpus, correctness, transport, <op>.busbw for each op swept, p2p
 * (the matrix as a whole) and p2p.<a>-<b> for each slow pair, net (the rail pairs between
 * hosts) and net.<a>-<b> for each slow one, nic.<name> for an IB/RoCE port that is down.
 * Bandwidth ratios measured/expected: PASS from 0.75, WARN from 0.50, FAIL below. A pair is
 * slow against its peers of the same link kind, a rail pair against the other rail pairs
 * (their median, or their best when fewer than three): WARN under 0.75 of it, FAIL under
 * 0.50. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "selftest/selftest.h"

#define PASS_RATIO 0.75
#define WARN_RATIO 0.50

static cps_check *add(cps_report *rep, const char *name, int status)
{
    cps_check *p = realloc(rep->checks, (size_t)(rep->nchecks + 1) * sizeof *p);
    if (!p)
        return NULL;
    rep->checks = p;
    cps_check *c = &p[rep->nchecks++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->status = status;
    c->measured = NAN;
    c->expected = NAN;
    return c;
}

static int ratio_status(double measured, double expected)
{
    if (!(expected > 0))
        return CPS_PASS;
    double r = measured / expected;
    return r >= PASS_RATIO ? CPS_PASS : r >= WARN_RATIO ? CPS_WARN : CPS_FAIL;
}

static int check_gpus(cps_report *rep)
{
    const cps_run *r = rep->run;
    int local = 0, visible_topo = rep->topo->n_gpus;
    for (int i = 0; i < r->nranks; i++)
        local += rep->map[i] >= 0;
    const char *name = r->nranks > 0 ? r->gpus[0].name : "";
    int same = 1;
    for (int i = 1; i < r->nranks; i++)
        same &= strcmp(r->gpus[i].name, name) == 0;
    int status = CPS_PASS;
    cps_check *c = add(rep, "gpus", status);
    if (!c)
        return -1;
    c->measured = r->nranks;
    c->expected = r->nranks;
    snprintf(c->unit, sizeof c->unit, "GPUs");
    char hosts[48] = "";
    if (r->nhosts > 1)
        snprintf(hosts, sizeof hosts, " on %d hosts", r->nhosts);
    snprintf(c->detail, sizeof c->detail, "%d × %s%s%s", r->nranks, same ? name : "mixed GPUs",
             hosts, r->nranks == 1 ? "; one GPU: no collective crosses a link" : "");
    /* The node shows more GPUs than the driver gave us: hidden by CUDA_VISIBLE_DEVICES (fine),
     * or lost to the driver (Xid, fallen off the bus). */
    if (!r->multi_process && local < visible_topo && !getenv("CUDA_VISIBLE_DEVICES")) {
        c->status = CPS_WARN;
        c->expected = visible_topo;
        size_t used = strlen(c->detail);
        snprintf(c->detail + used, sizeof c->detail - used,
                 "; the node shows %d GPUs but CUDA only %d", visible_topo, local);
    }
    return 0;
}

static int check_correctness(cps_report *rep)
{
    const cps_run *r = rep->run;
    long wrong = 0;
    int checked = 0;
    char bad[256] = "";
    for (int op = 0; op < CPS_NOPS; op++) {
        if (r->wrong[op] < 0)
            continue;
        checked++;
        wrong += r->wrong[op];
        if (r->wrong[op] > 0) {
            size_t used = strlen(bad);
            snprintf(bad + used, sizeof bad - used, "%s%s %ld", used ? ", " : "",
                     cps_op_title(op), r->wrong[op]);
        }
    }
    if (!checked)
        return 0;
    cps_check *c = add(rep, "correctness", wrong ? CPS_FAIL : CPS_PASS);
    if (!c)
        return -1;
    c->measured = (double)wrong;
    c->expected = 0;
    snprintf(c->unit, sizeof c->unit, "wrong elements");
    char size[32];
    cps_bytes_text(r->check_bytes, size, sizeof size);
    if (wrong)
        snprintf(c->detail, sizeof c->detail, "wrong elements at %s: %s", size, bad);
    else
        snprintf(c->detail, sizeof c->detail, "%d op%s checked at %s: every element exact",
                 checked, checked == 1 ? "" : "s", size);
    return 0;
}

static int check_transport(cps_report *rep, char *const *env)
{
    const cps_run *r = rep->run;
    /* This process's CUDA indices on this host, to the topology. */
    int dev_to_topo[CPS_MAX_GPUS];
    for (int i = 0; i < CPS_MAX_GPUS; i++)
        dev_to_topo[i] = -1;
    int ndev = 0;
    for (int i = 0; i < r->nranks; i++) {
        int d = r->gpus[i].cuda_index;
        if (rep->map[i] < 0 || d < 0 || d >= CPS_MAX_GPUS)
            continue;
        dev_to_topo[d] = rep->map[i];
        if (d + 1 > ndev)
            ndev = d + 1;
    }
    cps_check *c = add(rep, "transport", CPS_PASS);
    if (!c)
        return -1;
    cps_check_transport(rep->topo, &r->log, dev_to_topo, ndev, env, c);
    return 0;
}

static const cps_point *largest(const cps_run *r, int op)
{
    const cps_point *best = NULL;
    for (int i = 0; i < r->npoints; i++)
        if (r->points[i].op == op && (!best || r->points[i].bytes > best->bytes))
            best = &r->points[i];
    return best;
}

static int check_busbw(cps_report *rep)
{
    const cps_run *r = rep->run;
    if (r->nranks < 2)
        return 0;
    for (int op = 0; op < CPS_NOPS; op++) {
        const cps_point *p = largest(r, op);
        if (!p)
            continue;
        double want = cps_expect_busbw(&rep->ring, op, p->bytes, r->nranks);
        char name[CPS_CHECK_NAME];
        snprintf(name, sizeof name, "%s.busbw", cps_op_name(op));
        cps_check *c = add(rep, name, ratio_status(p->busbw_gbps, want));
        if (!c)
            return -1;
        c->measured = p->busbw_gbps;
        c->expected = want;
        snprintf(c->unit, sizeof c->unit, "GB/s");
        char size[32];
        cps_bytes_text(p->bytes, size, sizeof size);
        snprintf(c->detail, sizeof c->detail, "at %s: %.1f us, algbw %.1f GB/s, %.0f%% of "
                 "expected (%s)", size, p->time_us, p->algbw_gbps,
                 want > 0 ? 100.0 * p->busbw_gbps / want : 0.0, rep->ring.basis);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v (m > 0; reordered), or its best when fewer than three: with two figures a
 * median is their mean, and one slow figure would drag it halfway down. */
static double reference(double *v, int m)
{
    qsort(v, (size_t)m, sizeof v[0], cmp_double);
    return m >= 3 ? (m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2) : v[m - 1];
}

/* Which ranks share a host. The launcher's hostnames say it under torchrun; in one process
 * every GPU has this host's name, yet NCCL may still reach some over the network (a node
 * whose NVLink/PCIe path is missing, or the emulation's hosts): then the log's P2P and SHM
 * connections join ranks into hosts, and a rank reached only over NET is a host of its own. */
static void host_groups(const cps_run *r, int *group)
{
    const cps_nccl_log *log = &r->log;
    int net = 0;
    for (int i = 0; i < log->nconns; i++)
        net |= log->conns[i].kind == CPS_TR_NET_IB || log->conns[i].kind == CPS_TR_NET_SOCKET ||
               log->conns[i].kind == CPS_TR_NET_OTHER || log->conns[i].kind == CPS_TR_COLLNET;
    for (int i = 0; i < r->nranks; i++) {
        group[i] = i;
        for (int j = 0; j < i && group[i] == i; j++)
            if (strcmp(r->gpus[i].host, r->gpus[j].host) == 0)
                group[i] = group[j];
    }
    if (r->multi_process || !net)
        return;
    for (int i = 0; i < r->nranks; i++)
        group[i] = i;
    /* union of P2P/SHM/NVLS edges, smallest rank as the name, until nothing changes */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < log->nconns; i++) {
            const cps_conn *c = &log->conns[i];
            if (c->kind != CPS_TR_P2P && c->kind != CPS_TR_SHM && c->kind != CPS_TR_NVLS)
                continue;
            int a = c->from_rank, b = c->to_rank;
            if (a < 0 || b < 0 || a >= r->nranks || b >= r->nranks || group[a] == group[b])
                continue;
            int lo = group[a] < group[b] ? group[a] : group[b];
            int hi = group[a] < group[b] ? group[b] : group[a];
            for (int k = 0; k < r->nranks; k++)
                if (group[k] == hi)
                    group[k] = lo;
            changed = 1;
        }
    }
}

#define KIND_NET 3
#define KIND_UNKNOWN 4 /* another host's GPU this host's topology does not show */
#define NKINDS 5

static const char *pair_kind_name(int k)
{
    return k == KIND_NET ? "NET" : k == KIND_UNKNOWN ? "unknown" : cps_link_kind_name(k);
}

/* A pair's figure is its slower direction; a, b: topology numbers (a < b) on the judging
 * host, or (another host's GPU unknown here) local indices. */
typedef struct pair { int a, b, kind; double gbps, expect; } pair;

/* What the matrices of every host add up to, for the summary check. */
struct p2p_sum {
    int worst, slow, npairs, nhosts;
    double slowest_ratio, slowest_gbps, slowest_ref;
    /* "NVLINK median 362.0 GB/s (expected 370.0)" for this host's kinds, "on host-b: ..."
     * for another's that falls short */
    char kinds[360];
};

/* Judges one host's pairs against that host's own pairs of their kind: a check for each slow
 * one (named "p2p.<a>-<b>", and "@<host>" when host is another host's name), the kinds'
 * medians against their expected figures into s. Returns 0, or -1 when memory ran out. */
static int judge_host(cps_report *rep, const pair *pairs, int np, const char *host,
                      struct p2p_sum *s)
{
    double ref[NKINDS] = {0}, expect[NKINDS] = {0};
    for (int k = 0; k < NKINDS; k++) {
        double v[CPS_MAX_GPUS * CPS_MAX_GPUS];
        int m = 0;
        for (int i = 0; i < np; i++)
            if (pairs[i].kind == k) {
                v[m++] = pairs[i].gbps;
                expect[k] = pairs[i].expect;
            }
        if (m == 0)
            continue;
        ref[k] = reference(v, m);
        int st = ratio_status(ref[k], expect[k]);
        s->worst = st > s->worst ? st : s->worst;
        if (host && st == CPS_PASS)
            continue; /* another host's kinds are told only when they fall short */
        size_t used = strlen(s->kinds);
        snprintf(s->kinds + used, sizeof s->kinds - used, "%s%s%.40s%s%s median %.1f GB/s "
                 "(expected %.1f)", used ? "; " : "", host ? "on " : "", host ? host : "",
                 host ? ": " : "", pair_kind_name(k), ref[k], expect[k]);
    }
    s->npairs += np;
    s->nhosts += np > 0;
    for (int i = 0; i < np; i++) {
        const pair *p = &pairs[i];
        double rr = ref[p->kind] > 0 ? p->gbps / ref[p->kind] : 1;
        if (rr < s->slowest_ratio) {
            s->slowest_ratio = rr;
            s->slowest_gbps = p->gbps;
            s->slowest_ref = ref[p->kind];
        }
        int st = rr >= PASS_RATIO ? CPS_PASS : rr >= WARN_RATIO ? CPS_WARN : CPS_FAIL;
        if (st == CPS_PASS)
            continue;
        s->slow++;
        s->worst = st > s->worst ? st : s->worst;
        char name[CPS_CHECK_NAME], on[80] = "";
        snprintf(name, sizeof name, "p2p.%d-%d%s%.30s", p->a, p->b, host ? "@" : "",
                 host ? host : "");
        if (host)
            snprintf(on, sizeof on, " on %.60s", host);
        cps_check *c = add(rep, name, st);
        if (!c)
            return -1;
        c->measured = p->gbps;
        c->expected = ref[p->kind];
        snprintf(c->unit, sizeof c->unit, "GB/s");
        snprintf(c->detail, sizeof c->detail, "GPU %d-%d%s over %s: %.1f GB/s, %.0f%% of the "
                 "other %s pairs' %.1f GB/s: a slow link", p->a, p->b, on,
                 pair_kind_name(p->kind), p->gbps, 100 * rr, pair_kind_name(p->kind),
                 ref[p->kind]);
    }
    return 0;
}

/* This host's topology number of rank's GPU, by its PCI id: another host of the same make
 * shows the same ids; -1 when this host has no such GPU. */
static int topo_by_pci(const cps_report *rep, int rank)
{
    for (int k = 0; k < rep->topo->n_gpus; k++)
        if (strcasecmp(rep->topo->gpus[k].pci, rep->run->gpus[rank].pci) == 0)
            return k;
    return -1;
}

/* The pairs of another host from the job's agreed matrix: ranks on[0..n) (local indices in
 * order). Kinds and expected figures from this host's topology for the same PCI ids (the
 * hosts of one job are of one make, as a rule); a GPU it does not show makes the pair's
 * kind unknown, judged against the host's other unknown pairs. Returns the count. */
static int other_host_pairs(const cps_report *rep, const int *on, int n, pair *pairs)
{
    const cps_run *r = rep->run;
    int np = 0, w = r->p2p_widest;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double ab = r->p2p_job[(size_t)on[i] * (size_t)w + (size_t)j];
            double ba = r->p2p_job[(size_t)on[j] * (size_t)w + (size_t)i];
            if (!(ab > 0) && !(ba > 0))
                continue;
            int ti = topo_by_pci(rep, on[i]), tj = topo_by_pci(rep, on[j]);
            pair *p = &pairs[np++];
            p->gbps = ab > 0 && ba > 0 ? (ab < ba ? ab : ba) : (ab > 0 ? ab : ba);
            if (ti >= 0 && tj >= 0 && ti != tj) {
                cps_expect e;
                p->expect = cps_expect_pair(rep->topo, ti, tj, &e);
                p->kind = e.link_kind;
            } else {
                ti = i;
                tj = j;
                p->expect = 0;
                p->kind = KIND_UNKNOWN;
            }
            p->a = ti < tj ? ti : tj;
            p->b = ti < tj ? tj : ti;
        }
    return np;
}

/* Under a launcher with 2+ hosts every rank holds every host's matrix: the other hosts' are
 * judged here too, so rank 0's report (the one printed) and every rank's exit status speak
 * for the whole job, not for rank 0's host alone. */
static int judge_other_hosts(cps_report *rep, struct p2p_sum *s)
{
    const cps_run *r = rep->run;
    if (!r->p2p_job || r->p2p_widest < 2 || r->world_rank < 0 || r->world_rank >= r->nranks)
        return 0;
    const char *mine = r->gpus[r->world_rank].host;
    pair pairs[CPS_MAX_GPUS * (CPS_MAX_GPUS - 1) / 2];
    for (int first = 0; first < r->nranks; first++) {
        int on[CPS_MAX_GPUS], n = cps_run_host_ranks(r, first, on);
        const char *host = r->gpus[first].host;
        if (!n || on[0] != first || strcmp(host, mine) == 0)
            continue; /* not a host's first rank, or this host's */
        n = n < r->p2p_widest ? n : r->p2p_widest;
        if (judge_host(rep, pairs, other_host_pairs(rep, on, n, pairs), host, s))
            return -1;
    }
    return 0;
}

static int check_p2p(cps_report *rep)
{
    const cps_run *r = rep->run;
    int n = r->p2p_n;
    if (n < 2)
        return 0;
    int *group = calloc((size_t)r->nranks + 1, sizeof *group);
    if (!group)
        return -1;
    host_groups(r, group);
    cps_expect netx;
    cps_expect_net_pair(rep->topo, &netx);
    pair pairs[CPS_MAX_GPUS * (CPS_MAX_GPUS - 1) / 2];
    int np = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double ab = r->p2p_gbps[i][j], ba = r->p2p_gbps[j][i];
            if (!(ab > 0) && !(ba > 0))
                continue;
            int ri = r->p2p_rank[i], rj = r->p2p_rank[j];
            int ok = ri >= 0 && ri < r->nranks && rj >= 0 && rj < r->nranks;
            int ti = ok ? rep->map[ri] : -1;
            int tj = ok ? rep->map[rj] : -1;
            pair *p = &pairs[np++];
            p->a = ti < tj ? ti : tj;
            p->b = ti < tj ? tj : ti;
            p->gbps = ab > 0 && ba > 0 ? (ab < ba ? ab : ba) : (ab > 0 ? ab : ba);
            if (ok && group[ri] != group[rj]) {
                p->kind = KIND_NET;
                p->expect = netx.bus_gbps;
            } else {
                cps_expect e;
                p->expect = cps_expect_pair(rep->topo, ti, tj, &e);
                p->kind = e.link_kind;
            }
        }
    free(group);
    if (np == 0)
        return 0;
    /* The summary first, then each slow pair: this host's, then the other hosts'. */
    if (!add(rep, "p2p", CPS_PASS))
        return -1;
    int sum_index = rep->nchecks - 1;
    struct p2p_sum s = {.worst = CPS_PASS, .slowest_ratio = 2};
    if (judge_host(rep, pairs, np, NULL, &s) || judge_other_hosts(rep, &s))
        return -1;
    cps_check *sum = &rep->checks[sum_index]; /* add() may have moved it */
    sum->status = s.worst;
    snprintf(sum->unit, sizeof sum->unit, "GB/s");
    if (s.slowest_ratio < 2) {
        sum->measured = s.slowest_gbps;
        sum->expected = s.slowest_ref;
    }
    char size[32], hosts[48] = "";
    cps_bytes_text(r->p2p_bytes, size, sizeof size);
    if (s.nhosts > 1)
        snprintf(hosts, sizeof hosts, " on %d hosts", s.nhosts);
    snprintf(sum->detail, sizeof sum->detail, "%d pairs%s at %s, %d slow; %s", s.npairs, hosts,
             size, s.slow, s.kinds);
    return 0;
}

/* "host-b (GPU 3, CUDA 1, 0000:19:00.0)": the topology number only for this host's GPUs. The
 * host is cut at 56 characters so that two of these and the figures fit a check's detail
 * (--json's net_pairs has the whole name). */
static void rank_text(const cps_report *rep, int rank, char *out, size_t n)
{
    const cps_cuda_gpu *g = &rep->run->gpus[rank];
    char topo[24] = "";
    if (rep->map[rank] >= 0)
        snprintf(topo, sizeof topo, "GPU %d, ", rep->map[rank]);
    snprintf(out, n, "%.56s (%sCUDA %d, %.16s)", g->host, topo, g->cuda_index, g->pci);
}

static int check_net(cps_report *rep)
{
    const cps_run *r = rep->run;
    int np = r->n_net_pairs;
    if (!r->multi_process || r->nhosts < 2 || np < 1 || !r->net_pairs)
        return 0;
    double *v = calloc((size_t)np, sizeof *v), *gbps = calloc((size_t)np, sizeof *gbps);
    if (!v || !gbps) {
        free(v);
        free(gbps);
        return -1;
    }
    /* A pair's figure is its slower direction, as in the matrix. */
    int slowest = -1, m = 0;
    for (int i = 0; i < np; i++) {
        double ab = r->net_pairs[i].gbps_ab, ba = r->net_pairs[i].gbps_ba;
        gbps[i] = ab > 0 && ba > 0 ? (ab < ba ? ab : ba) : (ab > 0 ? ab : ba > 0 ? ba : 0);
        if (gbps[i] > 0)
            v[m++] = gbps[i];
        if (slowest < 0 || gbps[i] < gbps[slowest])
            slowest = i;
    }
    double ref = m > 0 ? reference(v, m) : 0;
    free(v);
    cps_expect netx;
    double want = cps_expect_net_pair(rep->topo, &netx);
    int worst = ref > 0 ? ratio_status(ref, want) : CPS_FAIL, slow = 0;
    cps_check *sum = add(rep, "net", worst);
    if (!sum) {
        free(gbps);
        return -1;
    }
    int sum_index = rep->nchecks - 1;
    for (int i = 0; i < np; i++) {
        const cps_net_pair *p = &r->net_pairs[i];
        double rr = ref > 0 ? gbps[i] / ref : 0;
        int st = rr >= PASS_RATIO ? CPS_PASS : rr >= WARN_RATIO ? CPS_WARN : CPS_FAIL;
        if (st == CPS_PASS || p->a < 0 || p->b < 0 || p->a >= r->nranks || p->b >= r->nranks)
            continue;
        slow++;
        worst = st > worst ? st : worst;
        char name[CPS_CHECK_NAME], ta[120], tb[120];
        snprintf(name, sizeof name, "net.%d-%d", p->a, p->b);
        cps_check *c = add(rep, name, st);
        if (!c) {
            free(gbps);
            return -1;
        }
        c->measured = gbps[i];
        c->expected = ref;
        snprintf(c->unit, sizeof c->unit, "GB/s");
        rank_text(rep, p->a, ta, sizeof ta);
        rank_text(rep, p->b, tb, sizeof tb);
        snprintf(c->detail, sizeof c->detail, "rank %d on %s to rank %d on %s: %.1f / %.1f GB/s, "
                 "%.0f%% of the rail pairs' %s %.1f GB/s: a slow inter-host path (NIC, cable "
                 "or switch port)", p->a, ta, p->b, tb, p->gbps_ab, p->gbps_ba, 100 * rr,
                 m >= 3 ? "median" : "best", ref);
    }
    sum = &rep->checks[sum_index]; /* add() may have moved it */
    sum->status = worst;
    sum->measured = slowest >= 0 ? gbps[slowest] : NAN;
    sum->expected = ref;
    snprintf(sum->unit, sizeof sum->unit, "GB/s");
    char size[32];
    cps_bytes_text(r->p2p_bytes, size, sizeof size);
    snprintf(sum->detail, sizeof sum->detail, "%d rail pair%s between %d hosts at %s, %d slow; "
             "%s %.1f GB/s (expected %.1f: %s)", np, np == 1 ? "" : "s", r->nhosts, size,
             slow, m >= 3 ? "median" : "best", ref, want, netx.basis);
    free(gbps);
    return 0;
}

static int check_nics(cps_report *rep)
{
    for (int i = 0; i < rep->topo->n_nics; i++) {
        const cps_nic *n = &rep->topo->nics[i];
        if (n->kind == CPS_NIC_ETH || n->up)
            continue;
        char name[CPS_CHECK_NAME];
        snprintf(name, sizeof name, "nic.%.40s", n->name);
        cps_check *c = add(rep, name, CPS_WARN);
        if (!c)
            return -1;
        c->measured = 0;
        c->expected = n->rate_gbps;
        snprintf(c->unit, sizeof c->unit, "Gb/s");
        snprintf(c->detail, sizeof c->detail, "%s port %s is not active: NCCL will not use it",
                 cps_nic_kind_name(n->kind), n->name);
    }
    return 0;
}

/* A sweep that stopped part-way: what stopped it, beside the figures measured before. */
static int check_sweep(cps_report *rep)
{
    const cps_run *r = rep->run;
    if (!r->stopped[0])
        return 0;
    cps_check *c = add(rep, "sweep", CPS_FAIL);
    if (!c)
        return -1;
    c->measured = r->npoints;
    snprintf(c->unit, sizeof c->unit, "sizes measured");
    snprintf(c->detail, sizeof c->detail, "stopped: %s", r->stopped);
    return 0;
}

int cps_judge(cps_report *rep, char *const *env)
{
    const cps_run *r = rep->run;
    const cps_nccl_log *log = &r->log;
    rep->net = r->nhosts > 1 || log->count[CPS_TR_NET_IB] + log->count[CPS_TR_NET_SOCKET] +
                                        log->count[CPS_TR_NET_OTHER] +
                                        log->count[CPS_TR_COLLNET] > 0;
    cps_expect_ring(rep->topo, r, rep->map, rep->net, &rep->ring);
    if (check_sweep(rep) || check_gpus(rep) || check_correctness(rep) || check_transport(rep, env) ||
        check_busbw(rep) || check_p2p(rep) || check_net(rep) || check_nics(rep))
        return -1;
    rep->verdict = CPS_PASS;
    for (int i = 0; i < rep->nchecks; i++)
        if (rep->checks[i].status > rep->verdict)
            rep->verdict = rep->checks[i].status;
    return 0;
}

void cps_report_free_checks(cps_report *rep)
{
    free(rep->checks);
    rep->checks = NULL;
    rep->nchecks = 0;
}
