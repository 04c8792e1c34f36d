/* nccl_log: NCCL's INFO log (NCCL_DEBUG=INFO into NCCL_DEBUG_FILE) read back into which
 * transport each connection uses, which network NCCL chose, the IB devices and socket
 * interfaces it found, NVLS and a net plugin that failed. The line forms are REFERENCE.md's and
 * NCCL 2.28's format strings (transport/{p2p,shm,net}.cc, plugin/net.cc, plugin_open.cc).
 *
 * A connection is counted once per distinct (from rank, to rank, kind): NCCL logs one line per
 * channel, so 16 channels over one hop are one connection, and a network hop is logged by both
 * ends ([send] and [receive]), which are one connection too.
 *
 * The log is text that anything may have written to: lines longer than LINE_MAX_BYTES (NCCL's
 * own buffer is far smaller) are skipped whole, NUL bytes read as spaces, a missing last
 * newline is fine.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "selftest/selftest.h"

#define LINE_MAX_BYTES 4096
/* conns and their lookup table share one allocation: CONN_CAP0 << k connections, then twice
 * as many int slots (open addressing, -1 empty), so a log of many hops stays linear to read
 * without a field in cps_nccl_log for the table. The capacity follows from nconns. */
#define CONN_CAP0 64

static const char *const kind_names[CPS_TR_NKINDS] = {
    [CPS_TR_P2P] = "P2P",          [CPS_TR_SHM] = "SHM",         [CPS_TR_NET_IB] = "NET/IB",
    [CPS_TR_NET_SOCKET] = "NET/Socket", [CPS_TR_NET_OTHER] = "NET/other",
    [CPS_TR_COLLNET] = "CollNet",  [CPS_TR_NVLS] = "NVLS",
};

const char *cps_transport_name(int kind)
{
    return kind >= 0 && kind < CPS_TR_NKINDS ? kind_names[kind] : "unknown";
}

void cps_nccl_log_init(cps_nccl_log *log)
{
    memset(log, 0, sizeof *log);
    log->ib_found = -1;
    log->nvls = -1;
}

void cps_nccl_log_free(cps_nccl_log *log)
{
    if (!log)
        return;
    free(log->conns);
    cps_nccl_log_init(log);
}

/* ---- connections -------------------------------------------------------------------------- */

static size_t conn_cap(int n)
{
    size_t cap = CONN_CAP0;
    while (cap < (size_t)n)
        cap *= 2;
    return cap;
}

static int *conn_slots(cps_conn *conns, size_t cap)
{
    return (int *)(void *)(conns + cap);
}

static size_t conn_hash(const cps_conn *c, size_t mask)
{
    unsigned h = (unsigned)c->from_rank * 2654435761u ^ (unsigned)c->to_rank * 40503u ^
                 (unsigned)c->kind * 97u;
    h ^= h >> 15;
    return (size_t)h & mask;
}

static int conn_same(const cps_conn *a, const cps_conn *b)
{
    return a->from_rank == b->from_rank && a->to_rank == b->to_rank && a->kind == b->kind;
}

static void slots_insert(int *slots, size_t nslots, const cps_conn *conns, int i)
{
    const cps_conn *c = &conns[i];
    size_t mask = nslots - 1;
    size_t h = conn_hash(c, mask);
    while (slots[h] >= 0)
        h = (h + 1) & mask;
    slots[h] = i;
}

static void add_conn(cps_nccl_log *log, const cps_conn *c)
{
    size_t cap = log->conns ? conn_cap(log->nconns) : 0;
    if (log->conns) {
        size_t mask = 2 * cap - 1;
        size_t h = conn_hash(c, mask);
        int *slots = conn_slots(log->conns, cap);
        for (; slots[h] >= 0; h = (h + 1) & mask)
            if (conn_same(&log->conns[slots[h]], c))
                return;
    }
    if (log->nconns >= (1 << 24))
        return;   /* no NCCL log has that many hops: keep memory bounded on junk */
    if (!log->conns || (size_t)log->nconns == cap) {
        size_t ncap = log->conns ? cap * 2 : CONN_CAP0;
        cps_conn *n = realloc(log->conns, ncap * sizeof *n + 2 * ncap * sizeof(int));
        if (!n)
            return;   /* out of memory: this connection goes uncounted */
        int *slots = conn_slots(n, ncap);
        memset(slots, 0xff, 2 * ncap * sizeof(int));
        for (int i = 0; i < log->nconns; i++)
            slots_insert(slots, 2 * ncap, n, i);
        log->conns = n;
        cap = ncap;
    }
    log->conns[log->nconns] = *c;
    slots_insert(conn_slots(log->conns, cap), 2 * cap, log->conns, log->nconns);
    log->nconns++;
    log->count[c->kind]++;
}

/* ---- small readers over a NUL-terminated line ------------------------------------------- */

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* A decimal number of at most 9 digits; NULL when there is none. */
static const char *read_int(const char *p, int *v)
{
    int n = 0, d = 0;
    while (isdigit((unsigned char)p[d]) && d < 9)
        n = n * 10 + (p[d++] - '0');
    if (d == 0 || isdigit((unsigned char)p[d]))
        return NULL;
    *v = n;
    return p + d;
}

/* Copy src[0..n) to dst (size dstn), trailing blanks trimmed. */
static void copy_trim(char *dst, size_t dstn, const char *src, size_t n)
{
    while (n > 0 && (src[n - 1] == ' ' || src[n - 1] == '\t' || src[n - 1] == '\r'))
        n--;
    if (n >= dstn)
        n = dstn - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Append word to a space-separated list unless it is there already (every rank of a process
 * logs the same devices). */
static void list_add(char *list, size_t listn, const char *word, size_t wn)
{
    if (wn == 0)
        return;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == wn && memcmp(p, word, wn) == 0)
            return;
        p += len + (e != NULL);
    }
    size_t have = strlen(list);
    if (have + (have > 0) + wn >= listn)
        return;   /* full: the first devices are the ones worth naming */
    if (have > 0)
        list[have++] = ' ';
    memcpy(list + have, word, wn);
    list[have + wn] = '\0';
}

/* ---- the line prefix ---------------------------------------------------------------------- */

/* The host of the last "<host>:<pid>:<tid> [<dev>]" in [line, end), after any launcher
 * prefix ("[1,3]<stdout>:", "[rank3]:") or timestamp; "" when there is none. */
static void read_prefix(const char *line, const char *end, char *host, size_t hostn)
{
    host[0] = '\0';
    for (const char *p = end - 1; p > line; p--) {
        if (p[0] != '[' || p[-1] != ' ')
            continue;
        int d;
        const char *q = read_int(p + 1, &d);
        if (!q || *q != ']')
            continue;
        /* backwards from the blank: tid digits, ':', pid digits, ':', the host */
        const char *b = p - 1;
        int ok = 1;
        for (int field = 0; field < 2 && ok; field++) {
            const char *digits_end = b;
            while (b > line && isdigit((unsigned char)b[-1]))
                b--;
            ok = b < digits_end && b > line && b[-1] == ':';
            b--;
        }
        if (!ok)
            continue;
        const char *h = b;
        while (h > line && !strchr(" \t:[]<>", h[-1]))
            h--;
        if (h == b)
            continue;
        copy_trim(host, hostn, h, (size_t)(b - h));
        return;
    }
}

/* ---- messages ------------------------------------------------------------------------------ */

/* "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE/SHARP [RO]" or "[0]ens3:172.31.12.210<0>" up to stop:
 * each "[n]name" without its index (and without "<n>" when strip_angle); returns how many. */
static int read_devices(const char *p, const char *stop, char *list, size_t listn,
                        int strip_angle)
{
    int n = 0;
    while (p < stop) {
        p = skip_spaces(p);
        if (p >= stop)
            break;
        const char *e = p;
        while (e < stop && *e != ' ' && *e != '\t')
            e++;
        int idx;
        const char *q = p[0] == '[' ? read_int(p + 1, &idx) : NULL;
        if (q && *q == ']' && q + 1 < e) {
            const char *name = q + 1, *ne = e;
            if (strip_angle) {
                const char *a = memchr(name, '<', (size_t)(e - name));
                if (a)
                    ne = a;
            }
            list_add(list, listn, name, (size_t)(ne - name));
            n++;
        }
        p = e;
    }
    return n;
}

/* "NCCL_NET_PLUGIN"-style names NCCL looked for and did not find: only the default
 * libnccl-net.so missing is normal (no plugin installed). */
static int plugin_missing_is_error(const char *list)
{
    const char *stop = strstr(list, ". ");
    size_t n = stop ? (size_t)(stop - list) : strlen(list);
    const char *p = list, *end = list + n;
    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        const char *e = p;
        while (e < end && *e != ' ')
            e++;
        size_t len = (size_t)(e - p);
        if (len > 0 && p[len - 1] == '.')
            len--;
        if (len > 0 && !(len == strlen("libnccl-net.so") && memcmp(p, "libnccl-net.so", len) == 0))
            return 1;
        p = e;
    }
    return 0;
}

static int is_plugin_error(const char *msg)
{
    if (starts(msg, "NET/Plugin")) {
        const char *p = skip_spaces(msg + strlen("NET/Plugin"));
        if (*p == ':')
            p = skip_spaces(p + 1);
        /* what NCCL says when all is well: a plugin loaded, or none installed */
        if (starts(p, "Loaded") || strstr(p, "No plugin found") || starts(p, "Using internal"))
            return 0;
        if (starts(p, "Could not find:"))
            return plugin_missing_is_error(p + strlen("Could not find:"));
        return *p != '\0';
    }
    if (starts(msg, "External network plugin") && strstr(msg, "is unsupported"))
        return 1;
    if (starts(msg, "Failed to initialize any NET plugin"))
        return 1;
    if (starts(msg, "Failed to initialize NET plugin ")) {
        /* the internal IB transport "fails" whenever it finds no HCA: that is ib_found */
        const char *name = msg + strlen("Failed to initialize NET plugin ");
        return strcmp(name, "IB") != 0 && strcmp(name, "Socket") != 0;
    }
    return 0;
}

static int kind_of_via(const char *via)
{
    if (strncasecmp(via, "COLLNET", 7) == 0)
        return CPS_TR_COLLNET;
    if (starts(via, "P2P"))
        return CPS_TR_P2P;
    if (starts(via, "SHM"))
        return CPS_TR_SHM;
    if (starts(via, "NVLS"))
        return CPS_TR_NVLS;   /* NCCL 2.28 logs NVLS only as "NVLS multicast support ..." */
    if (starts(via, "NET/")) {
        const char *name = via + 4, *e = strchr(name, '/');
        size_t n = e ? (size_t)(e - name) : strlen(name);
        if (n == 6 && memcmp(name, "Socket", 6) == 0)
            return CPS_TR_NET_SOCKET;
        if (n >= 2 && memcmp(name, "IB", 2) == 0)   /* IB, and IBext_vN of the SHARP plugin */
            return CPS_TR_NET_IB;
        return CPS_TR_NET_OTHER;
    }
    return -1;
}

/* "3", "3[1]", or "3[1b000]" (some versions give the PCI bus id: the device is then unknown). */
static const char *read_rank_dev(const char *p, int *rank, int *dev)
{
    p = read_int(p, rank);
    if (!p)
        return NULL;
    *dev = -1;
    if (*p == '[') {
        const char *e = strchr(p, ']');
        if (!e || e - p > 20)
            return NULL;
        int d;
        const char *q = read_int(p + 1, &d);
        if (q == e && e - p <= 4 && d < 256)
            *dev = d;
        p = e + 1;
    }
    return p;
}

/* "Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA", "Channel 00 : 0[0] -> 4[4] via
 * SHM/direct/direct", "Ring 00 : 7 -> 8 [send] via NET/Socket/0", "CollNet 00/0 : 3 [send] via
 * COLLNET/SHARP/0/GDRDMA" (one rank). Ring listings without "via" are not connections. */
static void read_connection(const char *msg, const char *host, cps_nccl_log *log)
{
    int collnet = starts(msg, "CollNet ");
    const char *p = strchr(msg, ' ') + 1;
    int ch;
    if (!(p = read_int(p, &ch)))
        return;
    if (*p == '/' && !(p = read_int(p + 1, &ch)))
        return;
    p = skip_spaces(p);
    if (*p != ':')
        return;
    p = skip_spaces(p + 1);
    cps_conn c;
    memset(&c, 0, sizeof c);
    if (!(p = read_rank_dev(p, &c.from_rank, &c.from_dev)))
        return;
    p = skip_spaces(p);
    if (starts(p, "->")) {
        if (!(p = read_rank_dev(skip_spaces(p + 2), &c.to_rank, &c.to_dev)))
            return;
    } else if (collnet) {
        c.to_rank = -1;
        c.to_dev = -1;
    } else {
        return;
    }
    const char *via = strstr(p, " via ");
    if (!via)
        return;
    via = skip_spaces(via + 5);
    c.kind = collnet ? CPS_TR_COLLNET : kind_of_via(via);
    if (c.kind < 0)
        return;
    copy_trim(c.via, sizeof c.via, via, strlen(via));
    snprintf(c.host, sizeof c.host, "%s", host);
    add_conn(log, &c);
}

static void read_message(const char *msg, const char *host, cps_nccl_log *log)
{
    if (starts(msg, "Channel ") || starts(msg, "Ring ") || starts(msg, "CollNet ")) {
        read_connection(msg, host, log);
        return;
    }
    if (starts(msg, "Using network ")) {
        const char *v = skip_spaces(msg + strlen("Using network "));
        copy_trim(log->network, sizeof log->network, v, strlen(v));
        return;
    }
    if (starts(msg, "NET/IB")) {
        const char *p = skip_spaces(msg + 6);
        if (*p != ':')
            return;
        p = skip_spaces(p + 1);
        if (starts(p, "No device found")) {
            if (log->ib_found < 0)
                log->ib_found = 0;
        } else if (starts(p, "Using")) {
            const char *stop = strchr(p, ';');
            int n = read_devices(p + 5, stop ? stop : p + strlen(p), log->ib_devices,
                                 sizeof log->ib_devices, 0);
            if (n > 0 && n > log->ib_found)
                log->ib_found = n;
        }
        return;
    }
    if (starts(msg, "NET/Socket")) {
        const char *p = skip_spaces(msg + 10);
        if (*p == ':' && starts(skip_spaces(p + 1), "Using"))
            read_devices(skip_spaces(p + 1) + 5, p + strlen(p), log->socket_ifs,
                         sizeof log->socket_ifs, 1);
        return;
    }
    if (starts(msg, "NVLS multicast support is ")) {
        const char *p = msg + strlen("NVLS multicast support is ");
        /* one GPU without it is enough to say NVLS is not there for the whole job */
        if (starts(p, "not available"))
            log->nvls = 0;
        else if (starts(p, "available") && log->nvls < 0)
            log->nvls = 1;
        return;
    }
    if (!log->plugin_error[0] && is_plugin_error(msg))
        copy_trim(log->plugin_error, sizeof log->plugin_error, msg, strlen(msg));
}

void cps_nccl_log_parse_line(const char *line, cps_nccl_log *log)
{
    if (!line || !log)
        return;
    size_t len = strnlen(line, LINE_MAX_BYTES + 1);
    if (len > LINE_MAX_BYTES)
        return;
    const char *m = strstr(line, "NCCL INFO ");
    int info = m != NULL;
    if (!m)
        m = strstr(line, "NCCL WARN ");   /* plugin failures also come as warnings */
    if (!m)
        return;
    char host[CPS_HOST_BYTES];
    read_prefix(line, m, host, sizeof host);
    if (info)
        log->lines++;
    char msg[LINE_MAX_BYTES + 1];
    const char *s = skip_spaces(m + 10);
    copy_trim(msg, sizeof msg, s, strcspn(s, "\r\n"));
    if (info)
        read_message(msg, host, log);
    else if (!log->plugin_error[0] && is_plugin_error(msg))
        copy_trim(log->plugin_error, sizeof log->plugin_error, msg, strlen(msg));
}

int cps_nccl_log_parse_file(const char *path, cps_nccl_log *log)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        cps_nccl_log_init(log);
        return -1;
    }
    int rc = cps_nccl_log_parse_stream(f, log);
    fclose(f);
    return rc;
}

int cps_nccl_log_parse_stream(FILE *f, cps_nccl_log *log)
{
    cps_nccl_log_init(log);
    char line[LINE_MAX_BYTES + 1], buf[65536];
    size_t len = 0, got;
    int skipping = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++) {
            char c = buf[i];
            if (c == '\n') {
                if (!skipping) {
                    line[len] = '\0';
                    cps_nccl_log_parse_line(line, log);
                }
                len = 0;
                skipping = 0;
            } else if (!skipping) {
                if (len == LINE_MAX_BYTES) {
                    skipping = 1;   /* not NCCL's: skipped to its end */
                    len = 0;
                } else {
                    line[len++] = c ? c : ' ';
                }
            }
        }
    }
    if (ferror(f)) {
        cps_nccl_log_free(log);   /* a directory, an I/O error: nothing read is trusted */
        return -1;
    }
    if (len > 0 && !skipping) {
        line[len] = '\0';
        cps_nccl_log_parse_line(line, log);
    }
    return 0;
}
