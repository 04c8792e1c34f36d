/* netinfo: the network interfaces NCCL would find on an emulated host, and its choice
 * between them (src/misc/socket.cc's ncclFindInterfaces, src/bootstrap.cc, the IB and
 * Socket plugins' init).
 *
 * An emulated host has the topology's Ethernet ports (a synthesized eth0 when the
 * topology lists only HCAs: every real node has a management port) and lo; host h's
 * addresses are the topology's with h added, so hosts differ as real ones do. Its HCAs are
 * the topology's IB/RoCE NICs that are up. NCCL_SOCKET_IFNAME picks interfaces as NCCL does
 * (prefixes, `^` to exclude, `=` for exact names); without it NCCL prefers ib*, then
 * anything but docker/lo/virbr, then docker, lo, virbr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

typedef struct iface { char name[16]; char ip[40]; } iface;
_Static_assert(sizeof(((iface *)0)->name) == sizeof(((cpn_netinfo *)0)->oob_if), "name size");
_Static_assert(sizeof(((iface *)0)->ip) == sizeof(((cpn_netinfo *)0)->oob_ip), "ip size");

static void host_ip(const char *base, int host, char *out, size_t cap)
{
    unsigned a, b, c, d;
    if (sscanf(base, "%u.%u.%u.%u", &a, &b, &c, &d) == 4) {
        d += (unsigned)host;
        c += d / 255;
        d = d % 255;
        snprintf(out, cap, "%u.%u.%u.%u", a, b, c, d);
    } else {
        snprintf(out, cap, "%s", base);
    }
}

static int host_ifaces(int host, iface *out, int cap)
{
    const cpemu_topo *t = cpemu_topo_get();
    int n = 0;
    for (int i = 0; i < t->nnics && n < cap - 1; i++) {
        if (t->nics[i].kind != CPEMU_NIC_ETH || !t->nics[i].up)
            continue;
        snprintf(out[n].name, sizeof out[n].name, "%s", t->nics[i].name);
        host_ip(t->nics[i].ip[0] ? t->nics[i].ip : "10.0.0.1", host, out[n].ip, sizeof out[n].ip);
        n++;
    }
    if (n == 0) {
        snprintf(out[n].name, sizeof out[n].name, "eth0");
        host_ip("10.0.0.1", host, out[n].ip, sizeof out[n].ip);
        n++;
    }
    snprintf(out[n].name, sizeof out[n].name, "lo");
    snprintf(out[n].ip, sizeof out[n].ip, "127.0.0.1");
    return n + 1;
}

/* NCCL's matchIfList: prefixes (exact with '='), the list negated with '^'. */
static int find(const char *list, const iface *all, int nall, iface *found, int max)
{
    int neg = list[0] == '^';
    if (neg)
        list++;
    int exact = list[0] == '=';
    if (exact)
        list++;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *pref[32];
    int np = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && np < 32; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');   /* "eth0:port": the port is not ours to check */
        if (colon)
            *colon = '\0';
        pref[np++] = tok;
    }
    int n = 0;
    for (int i = 0; i < nall && n < max; i++) {
        int match = np == 0;
        for (int p = 0; p < np && !match; p++)
            match = exact ? strcmp(all[i].name, pref[p]) == 0
                          : strncmp(all[i].name, pref[p], strlen(pref[p])) == 0;
        if (match ^ neg)
            found[n++] = all[i];
    }
    return n;
}

static int find_interfaces(int host, iface *found, int max)
{
    iface all[CPEMU_MAX_NICS + 2];
    int nall = host_ifaces(host, all, CPEMU_MAX_NICS + 2);
    const char *env = getenv("NCCL_SOCKET_IFNAME");
    if (env && strlen(env) > 1)
        return find(env, all, nall, found, max);
    static const char *order[] = {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int n = find(order[i], all, nall, found, max);
        if (n > 0)
            return n;
    }
    return 0;
}

void cpn_netinfo_get(int host, cpn_netinfo *ni)
{
    memset(ni, 0, sizeof *ni);
    if (host < 0)
        host = 0;
    iface f[CPEMU_MAX_NICS];
    int n = find_interfaces(host, f, CPEMU_MAX_NICS);
    ni->ok = n > 0;
    if (n > 0) {
        memcpy(ni->oob_if, f[0].name, sizeof ni->oob_if);
        memcpy(ni->oob_ip, f[0].ip, sizeof ni->oob_ip);
    }
    ni->nsock = n;
    for (int i = 0; i < n; i++) {
        /* same sizes: iface mirrors the netinfo fields */
        memcpy(ni->sock_if[i], f[i].name, sizeof ni->sock_if[i]);
        memcpy(ni->sock_ip[i], f[i].ip, sizeof ni->sock_ip[i]);
    }
    const cpemu_topo *t = cpemu_topo_get();
    int ib_disabled = cpn_env_int("NCCL_IB_DISABLE", 0) == 1;
    for (int i = 0; i < t->nnics && !ib_disabled; i++) {
        if (t->nics[i].kind == CPEMU_NIC_ETH || !t->nics[i].up)
            continue;
        snprintf(ni->ib_name[ni->nib], sizeof ni->ib_name[ni->nib], "%s", t->nics[i].name);
        ni->ib_roce[ni->nib++] = t->nics[i].kind == CPEMU_NIC_ROCE;
    }
    ni->ib_disabled = ib_disabled;
    ni->use_socket = t->net_socket || ib_disabled || ni->nib == 0;
}

static pthread_mutex_t boot_lock = PTHREAD_MUTEX_INITIALIZER;
static int boot_done;

ncclResult_t cpn_bootstrap_net_init(int dev)
{
    pthread_mutex_lock(&boot_lock);
    if (!boot_done) {
        cpn_netinfo ni;
        cpn_netinfo_get(cpemu_process_host(), &ni);
        if (!ni.ok) {
            pthread_mutex_unlock(&boot_lock);
            cpn_warn("Bootstrap : no socket interface found");
            return ncclInvalidUsage;
        }
        const char *env = getenv("NCCL_SOCKET_IFNAME");
        if (env && strlen(env) > 1) {
            cpn_info(CPN_ENV, dev, "NCCL_SOCKET_IFNAME set by environment to %s", env);
            cpn_info(CPN_NET, dev, "NCCL_SOCKET_IFNAME set to %s", env);
        }
        cpn_info(CPN_BOOTSTRAP, dev, "Bootstrap: Using %s:%s<0>", ni.oob_if, ni.oob_ip);
        boot_done = 1;
    }
    pthread_mutex_unlock(&boot_lock);
    return ncclSuccess;
}
