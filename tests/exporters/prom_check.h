/* tests/exporters/prom_check.h: a Prometheus text-format checker written after promtool's
 * rules (`promtool check metrics`: the text format parser plus its lint) and what
 * node_exporter's textfile collector accepts, for every output that writes the format (the
 * trace's export, `top --prometheus`). test_prometheus.c tests the checker itself on inputs
 * each rule must refuse. Include after cmocka.h. */
#ifndef COLLPROF_TESTS_PROM_CHECK_H
#define COLLPROF_TESTS_PROM_CHECK_H

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FAMILIES 256
#define MAX_SERIES 4096

typedef struct family {
    char name[128];
    char type[16];
    int help, typed, samples, closed;
} family;

typedef struct checker {
    family fam[MAX_FAMILIES];
    size_t nfam;
    char *series[MAX_SERIES];
    size_t nseries;
    family *current;
    char err[512];
} checker;

static inline int bad(checker *c, int line, const char *fmt, const char *what)
{
    /* a quoted line is cut to 200 bytes: the message must fit, whatever the input */
    char w[201], msg[400];
    size_t n = strnlen(what, sizeof w - 1);
    memcpy(w, what, n);
    w[n] = '\0';
    snprintf(msg, sizeof msg, fmt, w);
    snprintf(c->err, sizeof c->err, "line %d: %s", line, msg);
    return -1;
}

static inline int is_metric_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
            return 0;
    return 1;
}

static inline int is_label_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    if (n >= 2 && s[0] == '_' && s[1] == '_')
        return 0; /* reserved for Prometheus itself */
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* Go's strconv.ParseFloat as the text format uses it: decimal or exponent forms, +Inf,
 * -Inf, NaN; no hex, no spaces. */
static inline int is_float(const char *s, double *v)
{
    if (!strcmp(s, "+Inf") || !strcmp(s, "Inf")) {
        *v = INFINITY;
        return 1;
    }
    if (!strcmp(s, "-Inf")) {
        *v = -INFINITY;
        return 1;
    }
    if (!strcmp(s, "NaN")) {
        *v = NAN;
        return 1;
    }
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    int digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            digits++;
    if (!digits)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p)
        return 0;
    *v = strtod(s, NULL);
    return 1;
}

static inline family *find_family(checker *c, const char *name, size_t n)
{
    for (size_t i = 0; i < c->nfam; i++)
        if (strlen(c->fam[i].name) == n && !memcmp(c->fam[i].name, name, n))
            return &c->fam[i];
    return NULL;
}

static inline int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* "# HELP name text" or "# TYPE name type" */
static inline int meta_line(checker *c, int ln, const char *line)
{
    int help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
    if (!help && !type)
        return 0; /* any other comment is allowed */
    const char *name = line + 7;
    size_t n = strcspn(name, " ");
    if (!is_metric_name(name, n))
        return bad(c, ln, "bad metric name in '%s'", line);
    if (name[n] != ' ')
        return bad(c, ln, "no text after the name in '%s'", line);
    const char *rest = name + n + 1;
    family *f = find_family(c, name, n);
    if (f && (f->closed || f->samples))
        return bad(c, ln, "HELP or TYPE after the family's samples: '%s'", line);
    if (!f) {
        if (c->current)
            c->current->closed = 1;
        if (c->nfam == MAX_FAMILIES)
            return bad(c, ln, "%s", "too many families");
        f = &c->fam[c->nfam++];
        memset(f, 0, sizeof *f);
        memcpy(f->name, name, n < sizeof f->name ? n : sizeof f->name - 1);
        c->current = f;
    }
    if (help) {
        if (f->help++)
            return bad(c, ln, "second HELP: '%s'", line);
        if (!*rest)
            return bad(c, ln, "empty help text: '%s'", line);
        for (const char *p = rest; *p; p++)
            if (*p == '\\' && p[1] != '\\' && p[1] != 'n')
                return bad(c, ln, "bad escape in help text: '%s'", line);
            else if (*p == '\\')
                p++;
        return 0;
    }
    if (f->typed++)
        return bad(c, ln, "second TYPE: '%s'", line);
    if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") &&
        strcmp(rest, "summary") && strcmp(rest, "untyped"))
        return bad(c, ln, "unknown type in '%s'", line);
    snprintf(f->type, sizeof f->type, "%s", rest);
    /* promtool's lint */
    if (!strcmp(rest, "counter") && !ends_with(f->name, "_total"))
        return bad(c, ln, "counter without the _total suffix: '%s'", line);
    if (strcmp(rest, "counter") && ends_with(f->name, "_total"))
        return bad(c, ln, "non-counter with the _total suffix: '%s'", line);
    if (strcmp(rest, "histogram") && strcmp(rest, "summary") &&
        (ends_with(f->name, "_count") || ends_with(f->name, "_sum") ||
         ends_with(f->name, "_bucket")))
        return bad(c, ln, "reserved suffix on a non-histogram, non-summary: '%s'", line);
    for (const char *p = f->name; *p; p++)
        if (isupper((unsigned char)*p))
            return bad(c, ln, "not snake_case: '%s'", line);
    if (strstr(f->name, "milliseconds") || strstr(f->name, "microseconds") ||
        strstr(f->name, "nanoseconds") || strstr(f->name, "kilobytes") ||
        strstr(f->name, "megabytes") || strstr(f->name, "gigabytes"))
        return bad(c, ln, "not a base unit: '%s'", line);
    return 0;
}

typedef struct label {
    char name[64];
    char value[600];
} label;

static inline int cmp_label(const void *a, const void *b)
{
    return strcmp(((const label *)a)->name, ((const label *)b)->name);
}

static inline int sample_line(checker *c, int ln, const char *line)
{
    size_t n = strcspn(line, "{ ");
    if (!is_metric_name(line, n))
        return bad(c, ln, "bad metric name in '%s'", line);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)n, line);
    label labels[16];
    size_t nl = 0;
    const char *p = line + n;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            size_t k = strcspn(p, "=");
            if (!is_label_name(p, k) || p[k] != '=' || p[k + 1] != '"')
                return bad(c, ln, "bad label in '%s'", line);
            if (nl == 16)
                return bad(c, ln, "too many labels in '%s'", line);
            label *l = &labels[nl++];
            snprintf(l->name, sizeof l->name, "%.*s", (int)k, p);
            p += k + 2;
            size_t v = 0;
            while (*p != '"') {
                if (*p == '\0' || *p == '\n')
                    return bad(c, ln, "unterminated label value in '%s'", line);
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        return bad(c, ln, "bad escape in a label value: '%s'", line);
                    p++;
                }
                if (v + 1 < sizeof l->value)
                    l->value[v++] = *p;
                p++;
            }
            l->value[v] = '\0';
            p++;
            if (*p == ',') {
                p++;
                if (*p == '}')
                    return bad(c, ln, "trailing comma in '%s'", line);
            } else if (*p != '}') {
                return bad(c, ln, "bad label list in '%s'", line);
            }
        }
        p++;
    }
    if (*p != ' ')
        return bad(c, ln, "no value in '%s'", line);
    p++;
    if (strchr(p, ' '))
        return bad(c, ln, "a timestamp (the textfile collector refuses them): '%s'", line);
    double value;
    if (!is_float(p, &value))
        return bad(c, ln, "bad value in '%s'", line);
    qsort(labels, nl, sizeof *labels, cmp_label);
    for (size_t i = 1; i < nl; i++)
        if (!strcmp(labels[i].name, labels[i - 1].name))
            return bad(c, ln, "a label twice in '%s'", line);

    /* Which family: its own name, or a summary's/histogram's _sum, _count, _bucket. */
    family *f = c->current;
    if (!f)
        return bad(c, ln, "a sample before any HELP/TYPE: '%s'", line);
    int is_summary = !strcmp(f->type, "summary"), is_hist = !strcmp(f->type, "histogram");
    const char *suffix = name + strlen(f->name);
    if (strncmp(name, f->name, strlen(f->name)) ||
        !(*suffix == '\0' || ((is_summary || is_hist) && (!strcmp(suffix, "_sum") ||
                                                          !strcmp(suffix, "_count"))) ||
          (is_hist && !strcmp(suffix, "_bucket"))))
        return bad(c, ln, "a sample outside its family's group (or with no HELP/TYPE): '%s'",
                   line);
    if (!f->help || !f->typed)
        return bad(c, ln, "a family without HELP and TYPE: '%s'", line);
    int has_quantile = 0;
    for (size_t i = 0; i < nl; i++)
        if (!strcmp(labels[i].name, "quantile")) {
            double q;
            if (!is_float(labels[i].value, &q))
                return bad(c, ln, "bad quantile in '%s'", line);
            has_quantile = 1;
        }
    if (is_summary && (*suffix == '\0') != has_quantile)
        return bad(c, ln, "a summary's quantile label wrong in '%s'", line);
    if (!strcmp(f->type, "counter") && (value < 0 || isnan(value)))
        return bad(c, ln, "a counter below zero or NaN: '%s'", line);
    f->samples++;

    char key[2048];
    size_t kl = (size_t)snprintf(key, sizeof key, "%s", name);
    for (size_t i = 0; i < nl && kl < sizeof key; i++)
        kl += (size_t)snprintf(key + kl, sizeof key - kl, "|%s=%s", labels[i].name,
                               labels[i].value);
    for (size_t i = 0; i < c->nseries; i++)
        if (!strcmp(c->series[i], key))
            return bad(c, ln, "a series twice: '%s'", line);
    if (c->nseries == MAX_SERIES)
        return bad(c, ln, "%s", "too many series");
    c->series[c->nseries++] = strdup(key);
    return 0;
}

/* NULL when text is a valid exposition, else why not (static storage). */
static inline const char *check_exposition(const char *text)
{
    static checker c;
    for (size_t i = 0; i < c.nseries; i++)
        free(c.series[i]);
    memset(&c, 0, sizeof c);
    size_t len = strlen(text);
    if (len == 0)
        return "empty";
    if (text[len - 1] != '\n')
        return "no newline at the end";
    int ln = 0, rc = 0;
    for (const char *p = text; *p && !rc;) {
        const char *nl = strchr(p, '\n');
        char line[2048];
        size_t n = (size_t)(nl - p);
        if (n >= sizeof line)
            return "line too long";
        memcpy(line, p, n);
        line[n] = '\0';
        ln++;
        if (memchr(line, '\r', n))
            rc = bad(&c, ln, "%s", "a carriage return");
        else if (n == 0)
            rc = bad(&c, ln, "%s", "an empty line");
        else if (line[0] == '#')
            rc = meta_line(&c, ln, line);
        else
            rc = sample_line(&c, ln, line);
        p = nl + 1;
    }
    for (size_t i = 0; !rc && i < c.nfam; i++)
        if (!c.fam[i].help || !c.fam[i].typed)
            rc = bad(&c, 0, "family %s without HELP or TYPE", c.fam[i].name);
    return rc ? c.err : NULL;
}

/* promtool itself (Debian's prometheus package, which `make deps` installs), when it is on
 * the PATH: `promtool check metrics` on text. 0 accepted, 1 refused (why printed), -1 no
 * promtool here. */
static inline int promtool_check(const char *text)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "promtool not found: its own check skipped (make deps installs it)\n");
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    char in[4200];
    snprintf(in, sizeof in, "%s/collprof-promtool-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(in);
    if (fd < 0)
        return 1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 1>&2", in);
    int rc = (w == (ssize_t)len) ? system(cmd) : 1;
    unlink(in);
    return rc == 0 ? 0 : 1;
}

#endif
