/* summary: the one-screen text of `collprof selftest` — the node, what it should give, a row
 * per op at its largest size, the pairwise matrix, the rail pairs between hosts, the checks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "selftest/selftest.h"

static void time_text(double us, char *out, size_t n)
{
    if (us >= 1e6)
        snprintf(out, n, "%.2f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(out, n, "%.2f ms", us / 1e3);
    else
        snprintf(out, n, "%.1f us", us);
}

static void version_text(int code, char *out, size_t n)
{
    /* NCCL >= 2.9: X*10000 + Y*100 + Z; before: X*1000 + Y*100 + Z */
    if (code >= 10000)
        snprintf(out, n, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
    else if (code > 0)
        snprintf(out, n, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
    else
        snprintf(out, n, "?");
}

/* The text a hostile hostname, GPU or NIC name would bring to a terminal is escaped first
 * (a buffer of 4 times the source's size holds all of it). */
static const char *clean(const char *s, char *buf, size_t n)
{
    cp_text_escape(buf, n, s, strlen(s));
    return buf;
}

/* Whether topology GPU g is one the run tested (rep->map holds the run's GPUs on this host). */
static int tested(const cps_report *rep, int g)
{
    for (int i = 0; i < rep->run->nranks; i++)
        if (rep->map && rep->map[i] == g)
            return 1;
    return 0;
}

/* The links between the GPUs tested: two GPUs of eight under CUDA_VISIBLE_DEVICES have one
 * pair between them, not the node's 28. */
static void print_links(FILE *out, const cps_report *rep)
{
    const cps_topology *t = rep->topo;
    int count[3] = {0, 0, 0}, lanes_min[3] = {0, 0, 0}, lanes_max[3] = {0, 0, 0};
    for (int i = 0; i < t->n_links; i++) {
        const cps_link *l = &t->links[i];
        if (l->kind < 0 || l->kind > 2 || !tested(rep, l->a) || !tested(rep, l->b))
            continue;
        int k = l->kind;
        if (!count[k] || l->lanes < lanes_min[k])
            lanes_min[k] = l->lanes;
        if (!count[k] || l->lanes > lanes_max[k])
            lanes_max[k] = l->lanes;
        count[k]++;
    }
    fprintf(out, "  links     ");
    int any = 0;
    for (int k = 0; k < 3; k++) {
        if (!count[k])
            continue;
        fprintf(out, "%s%s %d pair%s", any ? ", " : "", cps_link_kind_name(k), count[k],
                count[k] == 1 ? "" : "s");
        if (lanes_max[k] > 0) {
            if (lanes_min[k] == lanes_max[k])
                fprintf(out, " x%d", lanes_max[k]);
            else
                fprintf(out, " x%d-%d", lanes_min[k], lanes_max[k]);
        }
        any = 1;
    }
    fprintf(out, "%s\n", any ? "" : "none (one GPU)");
    /* NICs alike (kind, rate, state) on one line each: "8 × IB 400G (mlx5_0 .. mlx5_7)" */
    fprintf(out, "  nics      ");
    if (!t->n_nics)
        fprintf(out, "none found");
    int shown = 0;
    for (int i = 0; i < t->n_nics; i++) {
        const cps_nic *n = &t->nics[i];
        int seen = 0, count = 0, last = i;
        for (int j = 0; j < i && !seen; j++)
            seen = t->nics[j].kind == n->kind && t->nics[j].rate_gbps == n->rate_gbps &&
                   t->nics[j].up == n->up;
        if (seen)
            continue;
        for (int j = i; j < t->n_nics; j++)
            if (t->nics[j].kind == n->kind && t->nics[j].rate_gbps == n->rate_gbps &&
                t->nics[j].up == n->up) {
                count++;
                last = j;
            }
        char a[4 * CPS_NAME_BYTES], b[4 * CPS_NAME_BYTES];
        fprintf(out, "%s%d × %s", shown++ ? ", " : "", count, cps_nic_kind_name(n->kind));
        if (n->rate_gbps > 0)
            fprintf(out, " %.0fG", n->rate_gbps);
        if (!n->up)
            fprintf(out, " DOWN");
        if (count == 1)
            fprintf(out, " (%s)", clean(n->name, a, sizeof a));
        else
            fprintf(out, " (%s .. %s)", clean(n->name, a, sizeof a),
                    clean(t->nics[last].name, b, sizeof b));
    }
    fprintf(out, "\n");
}

static const cps_check *check_named(const cps_report *rep, const char *name)
{
    for (int i = 0; i < rep->nchecks; i++)
        if (strcmp(rep->checks[i].name, name) == 0)
            return &rep->checks[i];
    return NULL;
}

static void print_ops(FILE *out, const cps_report *rep, int all_sizes)
{
    const cps_run *r = rep->run;
    if (!all_sizes)
        fprintf(out, "\n  %-14s %9s %10s %9s %9s %9s %-5s %s\n", "op", "size", "time",
                "algbw", "busbw", "expected", "", "smallest size");
    for (int op = 0; op < CPS_NOPS; op++) {
        const cps_point *small = NULL, *big = NULL;
        for (int i = 0; i < r->npoints; i++) {
            const cps_point *p = &r->points[i];
            if (p->op != op)
                continue;
            if (!small || p->bytes < small->bytes)
                small = p;
            if (!big || p->bytes > big->bytes)
                big = p;
        }
        if (!big)
            continue;
        char sz[32], tm[32], ssz[32], stm[32], name[CPS_CHECK_NAME];
        snprintf(name, sizeof name, "%s.busbw", cps_op_name(op));
        const cps_check *c = check_named(rep, name);
        if (all_sizes) {
            fprintf(out, "\n  %s\n  %10s %12s %12s %9s %9s %9s\n", cps_op_title(op), "size",
                    "count", "time", "algbw", "busbw", "expected");
            for (int i = 0; i < r->npoints; i++) {
                const cps_point *p = &r->points[i];
                if (p->op != op)
                    continue;
                cps_bytes_text(p->bytes, sz, sizeof sz);
                time_text(p->time_us, tm, sizeof tm);
                fprintf(out, "  %10s %12llu %12s %9.2f %9.2f %9.2f\n", sz,
                        (unsigned long long)p->count, tm, p->algbw_gbps, p->busbw_gbps,
                        cps_expect_busbw(&rep->ring, op, p->bytes, r->nranks));
            }
            continue;
        }
        cps_bytes_text(big->bytes, sz, sizeof sz);
        time_text(big->time_us, tm, sizeof tm);
        cps_bytes_text(small->bytes, ssz, sizeof ssz);
        time_text(small->time_us, stm, sizeof stm);
        fprintf(out, "  %-14s %9s %10s %9.1f %9.1f ", cps_op_title(op), sz, tm, big->algbw_gbps,
                big->busbw_gbps);
        if (c && !isnan(c->expected))
            fprintf(out, "%9.1f %-5s", c->expected, cps_status_name(c->status));
        else
            fprintf(out, "%9s %-5s", "-", "");
        fprintf(out, " %s in %s\n", ssz, stm);
    }
    if (!all_sizes)
        fprintf(out, "  (GB/s; busbw as nccl-tests computes it)\n");
}

static void print_p2p(FILE *out, const cps_report *rep)
{
    const cps_run *r = rep->run;
    int n = r->p2p_n;
    if (n < 2)
        return;
    char sz[32];
    cps_bytes_text(r->p2p_bytes, sz, sizeof sz);
    fprintf(out, "\n  send/recv GB/s at %s (row sends to column; GPU numbers as nvidia-smi)\n"
                 "  %4s", sz, "");
    for (int j = 0; j < n; j++) {
        int t = r->p2p_rank[j] >= 0 && r->p2p_rank[j] < r->nranks ? rep->map[r->p2p_rank[j]] : -1;
        fprintf(out, " %6d", t);
    }
    fprintf(out, "\n");
    for (int i = 0; i < n; i++) {
        int t = r->p2p_rank[i] >= 0 && r->p2p_rank[i] < r->nranks ? rep->map[r->p2p_rank[i]] : -1;
        fprintf(out, "  %4d", t);
        for (int j = 0; j < n; j++) {
            if (i == j || !(r->p2p_gbps[i][j] > 0))
                fprintf(out, " %6s", "-");
            else
                fprintf(out, " %6.1f", r->p2p_gbps[i][j]);
        }
        fprintf(out, "\n");
    }
}

/* The rail pairs: each rank as host:CUDA device, both directions. */
static void print_net(FILE *out, const cps_report *rep)
{
    const cps_run *r = rep->run;
    if (r->n_net_pairs < 1 || !r->net_pairs)
        return;
    char sz[32];
    cps_bytes_text(r->p2p_bytes, sz, sizeof sz);
    fprintf(out, "\n  rail pairs between hosts, send/recv GB/s at %s (rank host:CUDA device)\n",
            sz);
    for (int i = 0; i < r->n_net_pairs; i++) {
        const cps_net_pair *p = &r->net_pairs[i];
        if (p->a < 0 || p->b < 0 || p->a >= r->nranks || p->b >= r->nranks)
            continue;
        char ha[4 * CPS_HOST_BYTES], hb[4 * CPS_HOST_BYTES];
        fprintf(out, "  %4d %s:%d -> %d %s:%d  %.1f, back %.1f\n", p->a,
                clean(r->gpus[p->a].host, ha, sizeof ha), r->gpus[p->a].cuda_index, p->b,
                clean(r->gpus[p->b].host, hb, sizeof hb), r->gpus[p->b].cuda_index, p->gbps_ab,
                p->gbps_ba);
    }
}

/* A count as a count ("8 GPUs", not "8.0 GPUs"), a rate with its one decimal. */
static const char *figure(char *buf, size_t len, double v)
{
    if (v == (double)(long long)v && fabs(v) < 1e15)
        snprintf(buf, len, "%lld", (long long)v);
    else
        snprintf(buf, len, "%.1f", v);
    return buf;
}

void cps_summary_print(FILE *out, const cps_report *rep, int all_sizes)
{
    const cps_run *r = rep->run;
    char nccl[32], host[4 * CPS_HOST_BYTES], gpu[4 * CPS_NAME_BYTES];
    version_text(r->nccl_version, nccl, sizeof nccl);
    fprintf(out, "collprof selftest: %s\n", cps_status_name(rep->verdict));
    fprintf(out, "  node      %s: %d GPU%s (%s), CUDA driver %d.%d, NCCL %s",
            clean(r->nranks ? r->gpus[0].host : "?", host, sizeof host), r->nranks,
            r->nranks == 1 ? "" : "s", clean(r->nranks ? r->gpus[0].name : "?", gpu, sizeof gpu),
            r->cuda_driver_version / 1000, r->cuda_driver_version % 1000 / 10, nccl);
    if (r->nhosts > 1)
        fprintf(out, ", %d hosts", r->nhosts);
    fprintf(out, "\n");
    print_links(out, rep);
    if (rep->ring.bus_gbps > 0)
        fprintf(out, "  expected  %.1f GB/s bus bandwidth: %s\n", rep->ring.bus_gbps,
                rep->ring.basis);
    if (rep->sources[0])
        fprintf(out, "  sources   %s\n", rep->sources);
    print_ops(out, rep, all_sizes);
    print_p2p(out, rep);
    print_net(out, rep);
    fprintf(out, "\n  checks\n");
    int busbw_pass = 0;
    for (int i = 0; i < rep->nchecks; i++) {
        const cps_check *c = &rep->checks[i];
        /* a passing busbw check is its row of the op table; --json has its detail */
        size_t len = strlen(c->name);
        if (c->status == CPS_PASS && len > 6 && strcmp(c->name + len - 6, ".busbw") == 0) {
            busbw_pass++;
            continue;
        }
        char detail[4 * sizeof c->detail], m[32], e[32];
        fprintf(out, "  %-5s %-20s ", cps_status_name(c->status), c->name);
        if (!isnan(c->measured)) {
            fprintf(out, "%s", figure(m, sizeof m, c->measured));
            /* an expectation of 0 (no wrong element; no figure to hold a rate to) is not one
             * to print: "0 / 0 elements" says nothing */
            if (!isnan(c->expected) && c->expected != 0)
                fprintf(out, " / %s", figure(e, sizeof e, c->expected));
            fprintf(out, " %s: ", c->unit);
        }
        fprintf(out, "%s\n", clean(c->detail, detail, sizeof detail));
    }
    if (busbw_pass)
        fprintf(out, "  PASS  %-20s %d op%s at or above 75%% of expected (the table above)\n",
                "<op>.busbw", busbw_pass, busbw_pass == 1 ? "" : "s");
}
