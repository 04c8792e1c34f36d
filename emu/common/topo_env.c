/* topo_env: the COLLPROF_EMU_* fault and host variables. Each is all-or-nothing: one bad
 * entry makes the whole variable fall back to its default with one WARN line, so a typo never
 * half-applies a fault list. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu/common/emu_log.h"
#include "emu/common/topo_ext.h"

static int parse_long(const char **p, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (end == *p || errno || v < lo || v > hi)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

static int parse_u64(const char **p, uint64_t *out)
{
    if (**p < '0' || **p > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (end == *p || errno)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

static int parse_double(const char **p, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(*p, &end);
    if (end == *p || errno || !isfinite(v))
        return -1;
    *p = end;
    *out = v;
    return 0;
}

static int expect(const char **p, char c)
{
    if (**p != c)
        return -1;
    (*p)++;
    return 0;
}

/* One entry of a list at *p; returns 0 and advances past it, or -1. */
typedef int (*entry_fn)(cpemu_topo *t, const char **p, void *slot);

static int entry_delay(cpemu_topo *t, const char **p, void *slot)
{
    (void)t;
    cpemu_fault_delay *d = slot;
    long r;
    if (parse_long(p, 0, 1 << 30, &r) || expect(p, ':') || parse_double(p, &d->ms) || d->ms < 0)
        return -1;
    d->rank = (int)r;
    return 0;
}

static int entry_hang(cpemu_topo *t, const char **p, void *slot)
{
    (void)t;
    cpemu_fault_hang *h = slot;
    long r;
    if (parse_long(p, 0, 1 << 30, &r) || expect(p, ':'))
        return -1;
    if (strncmp(*p, "init", 4) == 0) {
        *p += 4;
        h->seq = CPEMU_HANG_INIT;
    } else if (parse_u64(p, &h->seq) || h->seq == CPEMU_HANG_INIT) {
        return -1;
    }
    h->rank = (int)r;
    return 0;
}

static int entry_slow(cpemu_topo *t, const char **p, void *slot)
{
    cpemu_fault_link *l = slot;
    long a, b, nglobal = (long)t->hosts * t->ngpus;
    if (parse_long(p, 0, nglobal - 1, &a) || expect(p, '-') || parse_long(p, 0, nglobal - 1, &b) ||
        a == b || expect(p, ':') || parse_double(p, &l->factor) || !(l->factor > 0) ||
        l->factor > 1)
        return -1;
    l->msgs = 0;
    if (**p == ':' && (expect(p, ':') || parse_long(p, 1, 1L << 40, &l->msgs)))
        return -1;
    l->a = (int)a;
    l->b = (int)b;
    return 0;
}

static int entry_clock(cpemu_topo *t, const char **p, void *slot)
{
    cpemu_fault_clock *c = slot;
    long h;
    if (parse_long(p, 0, t->hosts - 1, &h) || expect(p, ':') || parse_double(p, &c->us))
        return -1;
    c->host = (int)h;
    return 0;
}

/* Parses "E[,E...]" into slots (each `size` bytes); the count, or -1 when any entry is bad. */
static int parse_list(cpemu_topo *t, const char *v, entry_fn fn, void *slots, size_t size)
{
    int n = 0;
    const char *p = v;
    for (;;) {
        if (n == CPEMU_MAX_FAULTS)
            return -1;
        if (fn(t, &p, (char *)slots + (size_t)n * size) != 0)
            return -1;
        n++;
        if (*p == '\0')
            return n;
        if (*p != ',')
            return -1;
        p++;
    }
}

static void read_list(cpemu_topo *t, const char *var, const char *format, entry_fn fn,
                      void *slots, size_t size, int *count)
{
    const char *v = getenv(var);
    *count = 0;
    if (!v || !*v)
        return;
    /* Parsed into a scratch copy so a bad value leaves the defaults (none) in place; a union
     * so every kind of entry is aligned in it. */
    union {
        cpemu_fault_delay d;
        cpemu_fault_hang h;
        cpemu_fault_link l;
        cpemu_fault_clock c;
    } scratch[CPEMU_MAX_FAULTS];
    int n = parse_list(t, v, fn, scratch, size);
    if (n < 0) {
        cpemu_warn("%s='%s' is not %s; ignored", var, v, format);
        return;
    }
    memcpy(slots, scratch, (size_t)n * size);
    *count = n;
}

void cpemu_topo_read_env(cpemu_topo *t)
{
    const char *v = getenv("COLLPROF_EMU_HOSTS");
    t->hosts = 1;
    if (v && *v) {
        const char *p = v;
        long h;
        if (parse_long(&p, 1, CPEMU_MAX_HOSTS, &h) || *p)
            cpemu_warn("COLLPROF_EMU_HOSTS='%s' is not a number of hosts in 1..%d; using 1", v,
                       CPEMU_MAX_HOSTS);
        else
            t->hosts = (int)h;
    }
    v = getenv("COLLPROF_EMU_NET");
    t->net_socket = 0;
    if (v && *v) {
        if (strcasecmp(v, "socket") == 0)
            t->net_socket = 1;
        else if (strcasecmp(v, "ib") != 0)
            cpemu_warn("COLLPROF_EMU_NET='%s' is neither ib nor socket; using ib", v);
    }
    read_list(t, "COLLPROF_EMU_DELAY", "RANK:MS[,RANK:MS...] with MS >= 0", entry_delay,
              t->delays, sizeof t->delays[0], &t->ndelays);
    read_list(t, "COLLPROF_EMU_HANG", "RANK:SEQ|init[,RANK:SEQ|init...]", entry_hang, t->hangs,
              sizeof t->hangs[0], &t->nhangs);
    read_list(t, "COLLPROF_EMU_SLOW_LINK",
              "A-B:FACTOR[:MSGS][,...] with A != B global GPU indices, FACTOR in (0,1], MSGS >= 1", entry_slow,
              t->slow, sizeof t->slow[0], &t->nslow);
    read_list(t, "COLLPROF_EMU_CLOCK_OFFSET_US", "HOST:US[,HOST:US...] with HOST < hosts",
              entry_clock, t->clock, sizeof t->clock[0], &t->nclock);
}
