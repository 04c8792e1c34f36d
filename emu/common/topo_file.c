/* topo_file: topology files (format: docs/EMULATION.md, "Topology files").
 *
 * Parsed defensively: every line is checked, every number range-checked, and the first
 * problem is reported with the file and line; nothing partial is ever used. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/topo_ext.h"

int cpemu_parse_pci(const char *s, unsigned *domain, unsigned *bus, unsigned *device,
                    unsigned *function)
{
    unsigned d, b, v, f;
    int used = 0;
    if (!s || sscanf(s, "%x:%x:%x.%x%n", &d, &b, &v, &f, &used) != 4 || s[used] != '\0' ||
        b > 0xff || v > 0x1f || f > 7)
        return -1;
    *domain = d;
    *bus = b;
    *device = v;
    *function = f;
    return 0;
}

#define MAX_TOKENS 16
#define MAX_LINE 1024

typedef struct file_ctx {
    const char *path;
    int line;
    char *err;
    size_t errlen;
} file_ctx;

static int fail(file_ctx *c, const char *fmt, const char *a, const char *b)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    if (c->line > 0)
        snprintf(c->err, c->errlen, "topology file '%s' line %d: %s", c->path, c->line, msg);
    else
        snprintf(c->err, c->errlen, "topology file '%s': %s", c->path, msg);
    return -1;
}

/* Splits a line in place: words separated by blanks, "double quoted" words kept whole. */
static int tokenize(file_ctx *c, char *s, char **tok, int *ntok)
{
    int n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (*s == '\0' || *s == '#')
            break;
        if (n == MAX_TOKENS)
            return fail(c, "more than 16 words", NULL, NULL);
        if (*s == '"') {
            char *close = strchr(s + 1, '"');
            if (!close)
                return fail(c, "unterminated quote", NULL, NULL);
            *close = '\0';
            tok[n++] = s + 1;
            s = close + 1;
            if (*s && *s != ' ' && *s != '\t' && *s != '\r')
                return fail(c, "text right after a closing quote", NULL, NULL);
            continue;
        }
        tok[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r')
            s++;
        if (*s)
            *s++ = '\0';
    }
    *ntok = n;
    return 0;
}

static int num(file_ctx *c, const char *key, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d) || d < lo || d > hi)
        return fail(c, "bad value '%s' for %s", v, key);
    *out = d;
    return 0;
}

static int integer(file_ctx *c, const char *key, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long d = strtol(v, &end, 10);
    if (end == v || *end || errno || d < lo || d > hi)
        return fail(c, "bad value '%s' for %s", v, key);
    *out = (int)d;
    return 0;
}

/* Splits "key=value"; -1 when the word has no '='. */
static int kv(file_ctx *c, char *word, char **key, char **val)
{
    char *eq = strchr(word, '=');
    if (!eq || eq == word)
        return fail(c, "expected key=value, got '%s'", word, NULL);
    *eq = '\0';
    *key = word;
    *val = eq + 1;
    return 0;
}

typedef struct file_state {
    int gpu_seen[CPEMU_MAX_GPUS];
    int link_set[CPEMU_MAX_GPUS][CPEMU_MAX_GPUS];
    int have_default_link;
    int def_kind, def_lanes;
    double def_gbps, def_alpha;
    double copy_alpha[CPEMU_MAX_GPUS];
} file_state;

static int line_gpu(file_ctx *c, cpemu_topo *t, file_state *st, char **tok, int n)
{
    int idx;
    if (n < 3)
        return fail(c, "usage: gpu INDEX \"NAME\" pci=DDDD:BB:DD.F [key=value...]", NULL, NULL);
    if (integer(c, "gpu index", tok[1], 0, CPEMU_MAX_GPUS - 1, &idx))
        return -1;
    if (st->gpu_seen[idx])
        return fail(c, "gpu %s defined twice", tok[1], NULL);
    cpemu_gpu *g = &t->gpus[idx];
    memset(g, 0, sizeof *g);
    if (strlen(tok[2]) == 0 || strlen(tok[2]) >= sizeof g->name)
        return fail(c, "gpu name must be 1..63 characters", NULL, NULL);
    snprintf(g->name, sizeof g->name, "%s", tok[2]);
    g->cc_major = 8;
    g->sm_count = 108;
    g->mem_bytes = 40ULL << 30;
    g->numa_node = -1;
    t->link_gbps[idx][idx] = 500.0;
    st->copy_alpha[idx] = 1.0;
    for (int i = 3; i < n; i++) {
        char *k = NULL, *v = NULL;
        double d;
        unsigned dom, bus, dv, fn;
        if (kv(c, tok[i], &k, &v))
            return -1;
        if (strcmp(k, "pci") == 0) {
            if (cpemu_parse_pci(v, &dom, &bus, &dv, &fn) || strlen(v) >= sizeof g->pci_bus_id ||
                dom > 0xffff)
                return fail(c, "bad pci '%s' (want DDDD:BB:DD.F)", v, NULL);
            snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%04x:%02x:%02x.%x", dom, bus, dv, fn);
        } else if (strcmp(k, "cc") == 0) {
            int maj, min, used = 0;
            if (sscanf(v, "%d.%d%n", &maj, &min, &used) != 2 || v[used] || maj < 1 || maj > 99 ||
                min < 0 || min > 9)
                return fail(c, "bad cc '%s' (want MAJOR.MINOR)", v, NULL);
            g->cc_major = maj;
            g->cc_minor = min;
        } else if (strcmp(k, "sms") == 0) {
            if (integer(c, k, v, 1, 100000, &g->sm_count))
                return -1;
        } else if (strcmp(k, "mem_gib") == 0) {
            if (num(c, k, v, 0.001, 1 << 20, &d))
                return -1;
            g->mem_bytes = (uint64_t)(d * (double)(1ULL << 30));
        } else if (strcmp(k, "numa") == 0) {
            if (integer(c, k, v, -1, 1023, &g->numa_node))
                return -1;
        } else if (strcmp(k, "nvlinks") == 0) {
            if (integer(c, k, v, 0, 64, &g->nvlinks))
                return -1;
        } else if (strcmp(k, "copy_gbps") == 0) {
            if (num(c, k, v, 1e-3, 1e6, &t->link_gbps[idx][idx]))
                return -1;
        } else if (strcmp(k, "alpha_us") == 0) {
            if (num(c, k, v, 0, 1e6, &st->copy_alpha[idx]))
                return -1;
        } else {
            return fail(c, "unknown gpu key '%s'", k, NULL);
        }
    }
    if (!g->pci_bus_id[0])
        return fail(c, "gpu %s has no pci=", tok[1], NULL);
    st->gpu_seen[idx] = 1;
    return 0;
}

static int link_kind(file_ctx *c, const char *s, int *kind)
{
    if (strcmp(s, "nvlink") == 0)
        *kind = CPEMU_LINK_NVLINK;
    else if (strcmp(s, "pcie") == 0)
        *kind = CPEMU_LINK_PCIE;
    else if (strcmp(s, "sys") == 0)
        *kind = CPEMU_LINK_SYS;
    else
        return fail(c, "unknown link kind '%s' (nvlink, pcie, sys)", s, NULL);
    return 0;
}

static int line_link(file_ctx *c, cpemu_topo *t, file_state *st, char **tok, int n)
{
    if (n < 4)
        return fail(c, "usage: link A B nvlink|pcie|sys gbps=G alpha_us=U [lanes=L]", NULL, NULL);
    int all = strcmp(tok[1], "*") == 0 && strcmp(tok[2], "*") == 0;
    int a = 0, b = 0, kind = CPEMU_LINK_SYS, lanes = 0;
    double gbps = -1, alpha = -1;
    if (!all && (integer(c, "gpu index", tok[1], 0, CPEMU_MAX_GPUS - 1, &a) ||
                 integer(c, "gpu index", tok[2], 0, CPEMU_MAX_GPUS - 1, &b)))
        return -1;
    if (!all && a == b)
        return fail(c, "link from gpu %s to itself", tok[1], NULL);
    if (link_kind(c, tok[3], &kind))
        return -1;
    for (int i = 4; i < n; i++) {
        char *k = NULL, *v = NULL;
        if (kv(c, tok[i], &k, &v))
            return -1;
        if (strcmp(k, "gbps") == 0) {
            if (num(c, k, v, 1e-3, 1e6, &gbps))
                return -1;
        } else if (strcmp(k, "alpha_us") == 0) {
            if (num(c, k, v, 0, 1e6, &alpha))
                return -1;
        } else if (strcmp(k, "lanes") == 0) {
            if (integer(c, k, v, 0, 64, &lanes))
                return -1;
        } else {
            return fail(c, "unknown link key '%s'", k, NULL);
        }
    }
    if (gbps < 0 || alpha < 0)
        return fail(c, "link needs gbps= and alpha_us=", NULL, NULL);
    if (kind == CPEMU_LINK_NVLINK && lanes == 0)
        return fail(c, "an nvlink link needs lanes=", NULL, NULL);
    if (kind != CPEMU_LINK_NVLINK)
        lanes = 0;
    if (all) {
        st->have_default_link = 1;
        st->def_kind = kind;
        st->def_lanes = lanes;
        st->def_gbps = gbps;
        st->def_alpha = alpha;
        return 0;
    }
    if (st->link_set[a][b])
        return fail(c, "link %s-%s defined twice", tok[1], tok[2]);
    for (int dir = 0; dir < 2; dir++) {
        int x = dir ? b : a, y = dir ? a : b;
        t->link_kind[x][y] = kind;
        t->link_lanes[x][y] = lanes;
        t->link_gbps[x][y] = gbps;
        t->link_alpha_us[x][y] = alpha;
        st->link_set[x][y] = 1;
    }
    return 0;
}

static int line_nic(file_ctx *c, cpemu_topo *t, char **tok, int n)
{
    if (n < 3)
        return fail(c, "usage: nic NAME ib|roce|eth rate_gbps=R [numa=N] [up=0|1] [ip=A]", NULL,
                    NULL);
    if (t->nnics == CPEMU_MAX_NICS)
        return fail(c, "more than 16 NICs", NULL, NULL);
    cpemu_nic *nic = &t->nics[t->nnics];
    memset(nic, 0, sizeof *nic);
    if (strlen(tok[1]) == 0 || strlen(tok[1]) >= sizeof nic->name)
        return fail(c, "nic name '%s' must be 1..15 characters", tok[1], NULL);
    snprintf(nic->name, sizeof nic->name, "%s", tok[1]);
    if (strcmp(tok[2], "ib") == 0)
        nic->kind = CPEMU_NIC_IB;
    else if (strcmp(tok[2], "roce") == 0)
        nic->kind = CPEMU_NIC_ROCE;
    else if (strcmp(tok[2], "eth") == 0)
        nic->kind = CPEMU_NIC_ETH;
    else
        return fail(c, "unknown nic kind '%s' (ib, roce, eth)", tok[2], NULL);
    nic->up = 1;
    nic->numa_node = -1;
    for (int i = 3; i < n; i++) {
        char *k = NULL, *v = NULL;
        if (kv(c, tok[i], &k, &v))
            return -1;
        if (strcmp(k, "rate_gbps") == 0) {
            if (integer(c, k, v, 1, 100000, &nic->rate_gbps))
                return -1;
        } else if (strcmp(k, "numa") == 0) {
            if (integer(c, k, v, -1, 1023, &nic->numa_node))
                return -1;
        } else if (strcmp(k, "up") == 0) {
            if (integer(c, k, v, 0, 1, &nic->up))
                return -1;
        } else if (strcmp(k, "ip") == 0) {
            if (strlen(v) == 0 || strlen(v) >= sizeof nic->ip)
                return fail(c, "bad ip '%s'", v, NULL);
            snprintf(nic->ip, sizeof nic->ip, "%s", v);
        } else {
            return fail(c, "unknown nic key '%s'", k, NULL);
        }
    }
    if (nic->rate_gbps == 0)
        return fail(c, "nic %s needs rate_gbps=", tok[1], NULL);
    if (!nic->ip[0])
        snprintf(nic->ip, sizeof nic->ip, "10.0.0.%d", t->nnics + 1);
    t->nnics++;
    return 0;
}

static int line_net(file_ctx *c, cpemu_topo *t, char **tok, int n)
{
    for (int i = 1; i < n; i++) {
        char *k = NULL, *v = NULL;
        if (kv(c, tok[i], &k, &v))
            return -1;
        if (strcmp(k, "gbps_per_nic") == 0) {
            if (num(c, k, v, 1e-3, 1e6, &t->net_gbps_per_nic))
                return -1;
        } else if (strcmp(k, "socket_gbps") == 0) {
            if (num(c, k, v, 1e-3, 1e6, &t->socket_gbps))
                return -1;
        } else if (strcmp(k, "alpha_us") == 0) {
            if (num(c, k, v, 0, 1e6, &t->net_alpha_us))
                return -1;
        } else {
            return fail(c, "unknown net key '%s'", k, NULL);
        }
    }
    return 0;
}

static int finish(file_ctx *c, cpemu_topo *t, file_state *st)
{
    int n = 0;
    while (n < CPEMU_MAX_GPUS && st->gpu_seen[n])
        n++;
    for (int i = n; i < CPEMU_MAX_GPUS; i++)
        if (st->gpu_seen[i]) {
            char a[16];
            snprintf(a, sizeof a, "%d", n);
            return fail(c, "gpu indices must be 0..N-1; gpu %s is missing", a, NULL);
        }
    if (n == 0)
        return fail(c, "no gpu lines", NULL, NULL);
    t->ngpus = n;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (a == b) {
                t->link_kind[a][a] = CPEMU_LINK_SELF;
                t->link_lanes[a][a] = 0;
                t->link_alpha_us[a][a] = st->copy_alpha[a];
                continue;
            }
            if (st->link_set[a][b])
                continue;
            if (!st->have_default_link) {
                char x[16], y[16];
                snprintf(x, sizeof x, "%d", a);
                snprintf(y, sizeof y, "%d", b);
                return fail(c, "no link between gpu %s and gpu %s (add one, or link * * ...)", x,
                            y);
            }
            t->link_kind[a][b] = st->def_kind;
            t->link_lanes[a][b] = st->def_lanes;
            t->link_gbps[a][b] = st->def_gbps;
            t->link_alpha_us[a][b] = st->def_alpha;
        }
    return 0;
}

int cpemu_topo_parse_file(cpemu_topo *t, const char *path, char *err, size_t errlen)
{
    file_ctx c = {path, 0, err, errlen};
    FILE *f = fopen(path, "r");
    if (!f) {
        char why[128];
        snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
        return fail(&c, "%s", why, NULL);
    }
    static const file_state zero;
    file_state *st = malloc(sizeof *st);
    if (!st) {
        fclose(f);
        return fail(&c, "out of memory", NULL, NULL);
    }
    *st = zero;
    snprintf(t->preset, sizeof t->preset, "file");
    t->ngpus = 0;
    t->nnics = 0;
    memset(t->gpus, 0, sizeof t->gpus);
    memset(t->nics, 0, sizeof t->nics);
    int rc = 0;
    char buf[MAX_LINE + 2];
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        c.line++;
        size_t len = strlen(buf);
        if (len > 0 && buf[len - 1] == '\n')
            buf[--len] = '\0';
        else if (!feof(f)) {
            rc = fail(&c, "line longer than 1024 characters", NULL, NULL);
            break;
        }
        if (memchr(buf, '\0', len) != NULL || strlen(buf) != len) {
            rc = fail(&c, "NUL byte in line", NULL, NULL);
            break;
        }
        char *tok[MAX_TOKENS];
        int n = 0;
        if ((rc = tokenize(&c, buf, tok, &n)) != 0 || n == 0)
            continue;
        if (strcmp(tok[0], "gpu") == 0)
            rc = line_gpu(&c, t, st, tok, n);
        else if (strcmp(tok[0], "link") == 0)
            rc = line_link(&c, t, st, tok, n);
        else if (strcmp(tok[0], "nic") == 0)
            rc = line_nic(&c, t, tok, n);
        else if (strcmp(tok[0], "net") == 0)
            rc = line_net(&c, t, tok, n);
        else
            rc = fail(&c, "unknown keyword '%s' (gpu, link, nic, net)", tok[0], NULL);
    }
    if (rc == 0 && ferror(f))
        rc = fail(&c, "read error", NULL, NULL);
    fclose(f);
    if (rc == 0) {
        c.line = 0;
        rc = finish(&c, t, st);
    }
    free(st);
    return rc;
}
