/* selftest/topology_json.c: the contract's "topology" object (../shared/INTERFACES.md). */
#include "selftest/topology.h"

#include <json-c/json.h>
#include <math.h>

/* Whole rates as integers ("rate_gbps": 400, as the contract shows), others as they are. */
static json_object *rate(double v)
{
    if (v == floor(v) && v < 1e15)
        return json_object_new_int64((int64_t)v);
    return json_object_new_double(v);
}

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
              add(g, "name", json_object_new_string(t->gpus[i].name)) ||
              add(g, "pci", json_object_new_string(t->gpus[i].pci)) ||
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
              add(n, "name", json_object_new_string(t->nics[i].name)) ||
              add(n, "kind", json_object_new_string(cps_nic_kind_name(t->nics[i].kind))) ||
              add(n, "rate_gbps", rate(t->nics[i].rate_gbps));
    }
    if (bad) {
        json_object_put(top);
        return NULL;
    }
    return top;
}
