/* selftest_json: `collprof selftest --json` — the contract's keys (version, verdict, topology,
 * checks; ../shared/INTERFACES.md) and, beside them, every measured point ("ops"), the run
 * ("run"), the pairwise matrix ("p2p") and the rail pairs between hosts ("net_pairs"). */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "selftest/selftest.h"

static int add(json_object *o, const char *key, json_object *v)
{
    if (!v)
        return -1;
    if (json_object_object_add(o, key, v)) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

/* Names, hosts and NCCL's words come from the driver, sysfs and NCCL's log: escaped, so the
 * document stays valid UTF-8 and nothing in it drives the terminal it is printed on. */
static json_object *text(const char *s)
{
    char *e = cp_text_escape_dup(s, strlen(s));
    json_object *o = e ? json_object_new_string(e) : NULL;
    free(e);
    return o;
}

/* NaN and infinities are not JSON: null. Figures are rounded to 0.01 so the output is stable
 * and readable; the measurement is nowhere near that precise. */
static json_object *num(double v)
{
    if (isnan(v) || isinf(v))
        return NULL; /* json-c writes a NULL member as null */
    return json_object_new_double(round(v * 100) / 100);
}

static int add_num(json_object *o, const char *key, double v)
{
    json_object *x = num(v);
    if (!x && !(isnan(v) || isinf(v)))
        return -1;
    if (json_object_object_add(o, key, x)) {
        json_object_put(x);
        return -1;
    }
    return 0;
}

/* Whole rates as integers ("rate_gbps": 400, as the contract shows), others as they are. */
static json_object *rate(double v)
{
    if (v == floor(v) && v < 1e15)
        return json_object_new_int64((int64_t)v);
    return json_object_new_double(v);
}

json_object *cps_topo_json(const cps_topology *t)
{
    json_object *top = json_object_new_object();
    json_object *gpus = json_object_new_array();
    json_object *links = json_object_new_array();
    json_object *nics = json_object_new_array();
    int bad = !top || add(top, "gpus", gpus) || add(top, "links", links) || add(top, "nics", nics);
    for (int i = 0; i < t->n_gpus && !bad; i++) {
        json_object *g = json_object_new_object();
        bad = !g || json_object_array_add(gpus, g) ||
              add(g, "index", json_object_new_int(t->gpus[i].index)) ||
              add(g, "name", text(t->gpus[i].name)) ||
              add(g, "pci", text(t->gpus[i].pci)) ||
              add(g, "numa", json_object_new_int(t->gpus[i].numa));
    }
    for (int i = 0; i < t->n_links && !bad; i++) {
        json_object *l = json_object_new_object();
        bad = !l || json_object_array_add(links, l) ||
              add(l, "a", json_object_new_int(t->links[i].a)) ||
              add(l, "b", json_object_new_int(t->links[i].b)) ||
              add(l, "kind", json_object_new_string(cps_link_kind_name(t->links[i].kind))) ||
              add(l, "lanes", json_object_new_int(t->links[i].lanes));
    }
    for (int i = 0; i < t->n_nics && !bad; i++) {
        json_object *n = json_object_new_object();
        bad = !n || json_object_array_add(nics, n) ||
              add(n, "name", text(t->nics[i].name)) ||
              add(n, "kind", json_object_new_string(cps_nic_kind_name(t->nics[i].kind))) ||
              add(n, "rate_gbps", rate(t->nics[i].rate_gbps));
    }
    if (bad) {
        json_object_put(top);
        return NULL;
    }
    return top;
}

static int add_checks(json_object *top, const cps_report *rep)
{
    json_object *arr = json_object_new_array();
    if (add(top, "checks", arr))
        return -1;
    for (int i = 0; i < rep->nchecks; i++) {
        const cps_check *c = &rep->checks[i];
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(arr, o) ||
            add(o, "name", json_object_new_string(c->name)) ||
            add(o, "status", json_object_new_string(cps_status_name(c->status))) ||
            add_num(o, "measured", c->measured) || add_num(o, "expected", c->expected) ||
            add(o, "unit", json_object_new_string(c->unit)) ||
            add(o, "detail", text(c->detail)))
            return -1;
    }
    return 0;
}

static int add_ops(json_object *top, const cps_report *rep)
{
    const cps_run *r = rep->run;
    json_object *arr = json_object_new_array();
    if (add(top, "ops", arr))
        return -1;
    for (int i = 0; i < r->npoints; i++) {
        const cps_point *p = &r->points[i];
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(arr, o) ||
            add(o, "op", json_object_new_string(cps_op_title(p->op))) ||
            add(o, "bytes", json_object_new_int64((int64_t)p->bytes)) ||
            add(o, "count", json_object_new_int64((int64_t)p->count)) ||
            add_num(o, "time_us", p->time_us) || add_num(o, "algbw_gbps", p->algbw_gbps) ||
            add_num(o, "busbw_gbps", p->busbw_gbps) ||
            add_num(o, "expected_busbw_gbps",
                    r->nranks > 1 ? cps_expect_busbw(&rep->ring, p->op, p->bytes, r->nranks)
                                  : NAN))
            return -1;
    }
    return 0;
}

static int add_run(json_object *top, const cps_report *rep)
{
    const cps_run *r = rep->run;
    json_object *o = json_object_new_object();
    if (add(top, "run", o) || add(o, "ranks", json_object_new_int(r->nranks)) ||
        add(o, "hosts", json_object_new_int(r->nhosts)) ||
        add(o, "multi_process", json_object_new_boolean(r->multi_process)) ||
        add(o, "partial", json_object_new_boolean(r->stopped[0] != '\0')) ||
        add(o, "nccl_version", json_object_new_int(r->nccl_version)) ||
        add(o, "cuda_driver_version", json_object_new_int(r->cuda_driver_version)) ||
        add_num(o, "expected_bus_gbps", rep->ring.bus_gbps > 0 ? rep->ring.bus_gbps : NAN) ||
        add(o, "expected_basis", json_object_new_string(rep->ring.basis)) ||
        add(o, "network", text(r->log.network)))
        return -1;
    json_object *tr = json_object_new_object();
    if (add(o, "connections", tr))
        return -1;
    for (int k = 0; k < CPS_TR_NKINDS; k++)
        if (add(tr, cps_transport_name(k), json_object_new_int(r->log.count[k])))
            return -1;
    return 0;
}

static int add_p2p(json_object *top, const cps_report *rep)
{
    const cps_run *r = rep->run;
    if (r->p2p_n < 2)
        return 0;
    json_object *o = json_object_new_object(), *gpus = json_object_new_array(),
                *rows = json_object_new_array();
    if (add(top, "p2p", o) || add(o, "bytes", json_object_new_int64((int64_t)r->p2p_bytes)) ||
        add(o, "gpus", gpus) || add(o, "gbps", rows))
        return -1;
    for (int i = 0; i < r->p2p_n; i++) {
        int rank = r->p2p_rank[i];
        int t = rank >= 0 && rank < r->nranks ? rep->map[rank] : -1;
        if (json_object_array_add(gpus, json_object_new_int(t)))
            return -1;
        json_object *row = json_object_new_array();
        if (!row || json_object_array_add(rows, row))
            return -1;
        for (int j = 0; j < r->p2p_n; j++) {
            double v = i != j && r->p2p_gbps[i][j] > 0 ? r->p2p_gbps[i][j] : NAN;
            json_object *x = num(v);
            if (json_object_array_add(row, x)) {
                json_object_put(x);
                return -1;
            }
        }
    }
    return 0;
}

/* Under a launcher with 2+ hosts, every host's matrix as the ranks agreed it: [{host, ranks
 * (NCCL ranks by local index), gbps (row sends to column; null on the diagonal and where
 * not measured)}], hosts in the order of their first rank. */
static int add_p2p_hosts(json_object *top, const cps_report *rep)
{
    const cps_run *r = rep->run;
    int w = r->p2p_widest;
    if (!r->p2p_job || w < 2 || r->nhosts < 2)
        return 0;
    json_object *arr = json_object_new_array();
    if (add(top, "p2p_hosts", arr))
        return -1;
    for (int first = 0; first < r->nranks; first++) {
        int on[CPS_MAX_GPUS], n = cps_run_host_ranks(r, first, on);
        if (!n || on[0] != first)
            continue; /* not its host's first rank */
        n = n < w ? n : w;
        json_object *o = json_object_new_object(), *ranks = json_object_new_array(),
                    *rows = json_object_new_array();
        if (!o || json_object_array_add(arr, o) || add(o, "host", text(r->gpus[first].host)) ||
            add(o, "ranks", ranks) || add(o, "gbps", rows))
            return -1;
        for (int i = 0; i < n; i++) {
            json_object *row = json_object_new_array();
            if (json_object_array_add(ranks, json_object_new_int(on[i])) || !row ||
                json_object_array_add(rows, row))
                return -1;
            for (int j = 0; j < n; j++) {
                double v = r->p2p_job[(size_t)on[i] * (size_t)w + (size_t)j];
                json_object *x = num(i != j && v > 0 ? v : NAN);
                if (json_object_array_add(row, x)) {
                    json_object_put(x);
                    return -1;
                }
            }
        }
    }
    return 0;
}

static int add_net(json_object *top, const cps_report *rep)
{
    const cps_run *r = rep->run;
    if (r->n_net_pairs < 1 || !r->net_pairs)
        return 0;
    json_object *arr = json_object_new_array();
    if (add(top, "net_pairs", arr))
        return -1;
    for (int i = 0; i < r->n_net_pairs; i++) {
        const cps_net_pair *p = &r->net_pairs[i];
        int ok = p->a >= 0 && p->b >= 0 && p->a < r->nranks && p->b < r->nranks;
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(arr, o) || add(o, "a", json_object_new_int(p->a)) ||
            add(o, "b", json_object_new_int(p->b)) ||
            add(o, "host_a", text(ok ? r->gpus[p->a].host : "")) ||
            add(o, "host_b", text(ok ? r->gpus[p->b].host : "")) ||
            add_num(o, "gbps_ab", p->gbps_ab > 0 ? p->gbps_ab : NAN) ||
            add_num(o, "gbps_ba", p->gbps_ba > 0 ? p->gbps_ba : NAN))
            return -1;
    }
    return 0;
}

json_object *cps_report_json(const cps_report *rep)
{
    json_object *top = json_object_new_object();
    if (!top || add(top, "version", json_object_new_int(1)) ||
        add(top, "verdict", json_object_new_string(cps_status_name(rep->verdict))) ||
        add(top, "topology", cps_topo_json(rep->topo)) || add_checks(top, rep) ||
        add_ops(top, rep) || add_run(top, rep) || add_p2p(top, rep) ||
        add_p2p_hosts(top, rep) || add_net(top, rep)) {
        json_object_put(top);
        return NULL;
    }
    return top;
}
