/* perfetto_json: perfetto.c's events as Chrome's trace-event JSON (the JSON Object Format),
 * written as text straight from each event, as json-c printed the objects it used to build
 * for them (byte for byte; json-c still writes the header's one object). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "present/present.h"
#include "exporters/perfetto_internal.h"

/* Events' text is made in p->jbuf, one after another, and written a few hundred KB at a
 * time: a write (two stdio calls) per event was a tenth of the export. */
#define JFLUSH_AT (256 * 1024)

/* The buffer keeps JSLACK bytes of room past whatever a check made room for, so that the
 * short pieces of an event (keys, numbers, cached names: at most 40 args of a key's 33 bytes
 * and a value's 64, and the head, under 5 KB in all) are written without a check each
 * (twenty checks an event were a twentieth of the writer). Each event begins with a check,
 * and so does each piece of no fixed bound (a string made in place, a site's text, an array);
 * a failed check writes nothing, so the slack is never overrun. */
#define JSLACK (16 * 1024)

static int jgrow(pw *p, size_t more)
{
    if (cpa_grow((void **)&p->jbuf, &p->jcap, p->jlen + more, 1) == 0)
        return 0;
    p->failed = 1;
    errno = ENOMEM;
    return -1;
}

/* Room for more bytes, and the slack after them. */
static inline int jreserve(pw *p, size_t more)
{
    more += JSLACK;
    return p->jlen + more <= p->jcap ? 0 : jgrow(p, more);
}

/* A short piece, within the slack. */
static inline void jput(pw *p, const char *s, size_t n)
{
    memcpy(p->jbuf + p->jlen, s, n);
    p->jlen += n;
}
#define JLIT(p, lit) jput(p, lit, sizeof lit - 1)

/* A piece of any length. */
static inline void jraw(pw *p, const char *s, size_t n)
{
    if (jreserve(p, n) == 0)
        jput(p, s, n);
}

/* Bytes json-c escapes: control characters, '"' and '\\'. */
static const unsigned char json_escaped[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, ['\\'] = 1,
};

/* Whether any byte of the 8 in w needs escaping: below 0x20, '"' or '\\' (the classic tests
 * for a byte below n, and for a zero byte in w ^ c: exact as to whether there is one). */
static inline int word_escaped(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return ((((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high) != 0;
}

/* s[0..n) as a JSON string at q (room for 2 + 6 n bytes), escaped as json-c escapes it
 * (JSON_C_TO_STRING_NOSLASHESCAPE); returns the end. Eight bytes at a time while none needs
 * escaping: most of every string (a byte at a time, strings were a fifth of the export). */
static char *quote_at(char *q, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    *q++ = '"';
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!word_escaped(w)) {
                memcpy(q, &w, 8);
                q += 8;
                i += 8;
                continue;
            }
        }
        unsigned char c = (unsigned char)s[i++];
        if (!json_escaped[c]) {
            *q++ = (char)c;
            continue;
        }
        switch (c) {
        case '\b': *q++ = '\\'; *q++ = 'b'; break;
        case '\n': *q++ = '\\'; *q++ = 'n'; break;
        case '\r': *q++ = '\\'; *q++ = 'r'; break;
        case '\t': *q++ = '\\'; *q++ = 't'; break;
        case '\f': *q++ = '\\'; *q++ = 'f'; break;
        case '"': *q++ = '\\'; *q++ = '"'; break;
        case '\\': *q++ = '\\'; *q++ = '\\'; break;
        default:
            memcpy(q, "\\u00", 4);
            q[4] = hex[c >> 4];
            q[5] = hex[c & 15];
            q += 6;
        }
    }
    *q++ = '"';
    return q;
}

static void jstr(pw *p, const char *s)
{
    size_t n = strlen(s);
    if (jreserve(p, 2 + 6 * n) == 0)
        p->jlen = (size_t)(quote_at(p->jbuf + p->jlen, s, n) - p->jbuf);
}

char *cpx_pj_quoted(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *t = malloc(2 + 6 * n + 1);
    if (!t)
        return NULL;
    char *e = quote_at(t, s, n);
    *e = '\0';
    *len = (size_t)(e - t);
    return t;
}

/* A name that lives as long as the program (pf_arg's s_static; a slice's name, a category):
 * its text made by jstr once and copied after (escaping the same few names for every event
 * was a sixth of the writer). */
static void jstr_static(pw *p, const char *s)
{
    size_t n = sizeof p->jstatic / sizeof p->jstatic[0];
    size_t i = cpx_addr_slot(s, 0, n);
    if (p->jstatic[i].s == s && p->jstatic[i].len) {
        memcpy(p->jbuf + p->jlen, p->jstatic[i].text, sizeof p->jstatic[i].text);
        p->jlen += p->jstatic[i].len;
        return;
    }
    size_t at = p->jlen;
    jstr(p, s);
    size_t len = p->jlen - at;
    if (p->failed || len > sizeof p->jstatic[i].text)
        return; /* made each time */
    memcpy(p->jstatic[i].text, p->jbuf + at, len);
    p->jstatic[i].s = s;
    p->jstatic[i].len = (uint8_t)len;
}

static void ju64(pw *p, uint64_t v)
{
    p->jlen = (size_t)(cpr_put_u64(p->jbuf + p->jlen, v) - p->jbuf);
}

static void ji64(pw *p, int64_t v)
{
    char *q = p->jbuf + p->jlen;
    if (v < 0)
        *q++ = '-';
    p->jlen = (size_t)(cpr_put_u64(q, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v) - p->jbuf);
}

/* ns as microseconds with three decimals: cpr_fmt_ns_us's text, made in place. */
static void jus(pw *p, int64_t ns)
{
    p->jlen = (size_t)(cpr_put_ns_us(p->jbuf + p->jlen, ns) - p->jbuf);
}

static void jnum3(pw *p, double v)
{
    char b[64];
    if (!isfinite(v))
        v = 0;
    int n = snprintf(b, sizeof b, "%.3f", v);
    jput(p, b, n < 0 ? 0 : n < (int)sizeof b ? (size_t)n : sizeof b - 1);
}

/* A key: one of perfetto.c's literals, which need no escaping. */
static void jkey(pw *p, const char *key, size_t len, int first)
{
    char *q = p->jbuf + p->jlen;
    if (!first)
        *q++ = ',';
    *q++ = '"';
    memcpy(q, key, len);
    q += len;
    *q++ = '"';
    *q++ = ':';
    p->jlen = (size_t)(q - p->jbuf);
}

/* An arg's key, from its padded text (pf_arg.jkey). */
static inline void jkey_arg(pw *p, const pf_arg *a, int first)
{
    char *q = p->jbuf + p->jlen;
    *q = ',';
    q += !first;
    memcpy(q, a->jkey, PF_JKEY_TEXT);
    p->jlen = (size_t)(q + a->keylen + 3 - p->jbuf);
}

static void jarg(pw *p, const pf_arg *a)
{
    switch (a->kind) {
    case PA_STR:
        if (a->pre)
            jraw(p, a->pre, a->prelen);
        else
            a->s_static ? jstr_static(p, a->s) : jstr(p, a->s);
        break;
    case PA_U64: ju64(p, a->u); break;
    case PA_I64: ji64(p, a->i); break;
    case PA_US: jus(p, a->i); break;
    case PA_BOOL: a->u ? JLIT(p, "true") : JLIT(p, "false"); break;
    case PA_NUM3: jnum3(p, a->d); break;
    case PA_INTS:
        if (jreserve(p, 2 + 22 * a->n) != 0)
            break;
        JLIT(p, "[");
        for (size_t i = 0; i < a->n; i++) {
            if (i)
                JLIT(p, ",");
            ji64(p, a->v[i]);
        }
        JLIT(p, "]");
        break;
    }
}

static void jwrite(pw *p)
{
    if (!p->failed && p->jlen && fwrite(p->jbuf, 1, p->jlen, p->out) != p->jlen)
        p->failed = 1;
    p->jlen = 0;
}

/* An event's text is complete: counted, and the buffer written when full. */
static void jflush(pw *p)
{
    if (!p->failed)
        p->events++;
    p->first = 0;
    if (p->jlen >= JFLUSH_AT)
        jwrite(p);
}

/* Each event on a line of its own, after a comma but the first. */
/* ph: one of perfetto.c's letters, which need no escaping; a slice's name is an op's or
 * "wait", a literal. */
static void jhead(pw *p, const char *name, char ph, uint32_t pid, uint32_t tid)
{
    if (p->first)
        JLIT(p, "\n{\"name\":");
    else
        JLIT(p, ",\n{\"name\":");
    ph == 'X' ? jstr_static(p, name) : jstr(p, name);
    char phs[] = ",\"ph\":\"?\"";
    phs[7] = ph;
    jput(p, phs, sizeof phs - 1);
    size_t k = tid % (sizeof p->jids / sizeof p->jids[0]);
    if (p->jids[k].len && p->jids[k].pid == pid && p->jids[k].tid == tid) {
        memcpy(p->jbuf + p->jlen, p->jids[k].text, sizeof p->jids[k].text);
        p->jlen += p->jids[k].len;
        return;
    }
    size_t at = p->jlen;
    JLIT(p, ",\"pid\":");
    ju64(p, pid);
    JLIT(p, ",\"tid\":");
    ju64(p, tid);
    p->jids[k].pid = pid;
    p->jids[k].tid = tid;
    p->jids[k].len = (uint8_t)(p->jlen - at); /* at most 34 */
    memcpy(p->jids[k].text, p->jbuf + at, p->jids[k].len);
}

void cpx_pj_event(pw *p, const pf_event *e)
{
    if (jreserve(p, 0) != 0)
        return;
    jhead(p, e->name, e->ph, e->pid, e->tid);
    if (e->ph == 'i')
        JLIT(p, ",\"s\":\"p\"");
    JLIT(p, ",\"cat\":");
    jstr_static(p, e->cat);
    JLIT(p, ",\"ts\":");
    jus(p, e->ts);
    if (e->ph == 'X') {
        JLIT(p, ",\"dur\":");
        jus(p, e->dur);
    }
    JLIT(p, ",\"args\":{");
    size_t run_len = 0, run_at = 0;
    const unsigned char *run = p->jruns ? cpx_run_find(p->jruns, e, &run_len) : NULL;
    for (size_t i = 0; i < e->nargs; i++) {
        if (i == e->run_from && e->run_to > e->run_from) {
            if (run) { /* at most PF_RUN_BYTES: inside the room jreserve keeps */
                memcpy(p->jbuf + p->jlen, run, run_len);
                p->jlen += run_len;
                i = e->run_to - 1;
                continue;
            }
            run_at = p->jlen;
        }
        jkey_arg(p, &e->args[i], i == 0);
        jarg(p, &e->args[i]);
        if (i + 1 == e->run_to && p->jruns && !p->failed)
            cpx_run_keep(p->jruns, e, p->jbuf + run_at, p->jlen - run_at);
    }
    JLIT(p, "}");
    if (e->bind_id) {
        JLIT(p, ",\"bind_id\":");
        ju64(p, e->bind_id);
        if (e->flow_in)
            JLIT(p, ",\"flow_in\":true");
        if (e->flow_out)
            JLIT(p, ",\"flow_out\":true");
    }
    JLIT(p, "}");
    jflush(p);
}

void cpx_pj_close(pw *p)
{
    if (jreserve(p, 0) != 0)
        return;
    JLIT(p, "\n]}\n");
    jwrite(p);
}

void cpx_pj_metadata(pw *p, const char *name, uint32_t pid, uint32_t tid, const char *key,
                          const char *str, int64_t num)
{
    if (jreserve(p, 0) != 0)
        return;
    jhead(p, name, 'M', pid, tid);
    JLIT(p, ",\"args\":{");
    jkey(p, key, strlen(key), 1);
    if (str)
        jstr(p, str);
    else
        ji64(p, num);
    JLIT(p, "}}");
    jflush(p);
}

/* The JSON's header: otherData as one json-c object (a "piece" object inside for the
 * piece's keys), then the event array opened. */
void cpx_pj_header(pw *p, const pf_arg *args, size_t nargs)
{
    json_object *other = json_object_new_object(), *piece = NULL;
    int oom = !other;
    for (size_t i = 0; i < nargs && !oom; i++) {
        const pf_arg *a = &args[i];
        json_object *v = NULL;
        char b[64];
        switch (a->kind) {
        case PA_STR: v = json_object_new_string(a->s); break;
        case PA_U64: v = json_object_new_uint64(a->u); break;
        case PA_BOOL: v = json_object_new_boolean(a->u != 0); break;
        case PA_NUM3:
            snprintf(b, sizeof b, "%.3f", isfinite(a->d) ? a->d : 0);
            v = json_object_new_double_s(isfinite(a->d) ? a->d : 0, b);
            break;
        default: break;
        }
        json_object *into = other;
        const char *key = a->key;
        if (!strncmp(key, "piece.", 6)) {
            if (!piece && (!(piece = json_object_new_object()) ||
                           json_object_object_add(other, "piece", piece) != 0))
                oom = 1;
            into = piece;
            key += 6;
        }
        if (!v || oom || json_object_object_add(into, key, v) != 0) {
            json_object_put(v);
            oom = 1;
        }
    }
    if (oom) {
        json_object_put(other);
        p->failed = 1;
        errno = ENOMEM;
        return;
    }
    const char *s = json_object_to_json_string_ext(other, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s || fprintf(p->out, "{\"displayTimeUnit\":\"ns\",\"otherData\":%s,\"traceEvents\":[",
                      s) < 0)
        p->failed = 1;
    json_object_put(other);
}

