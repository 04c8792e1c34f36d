/* present/prom.c: Prometheus text exposition, written one way by every output that writes
 * it (present.h): the trace's export and `top`'s live figures. */
#include "present/present.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

void cpr_lbl_reset(cpr_labels *l)
{
    l->len = 0;
    l->buf[0] = '\0';
}

void cpr_lbl_add(cpr_labels *l, const char *key, const char *value)
{
    char clean[512];
    cp_text_escape(clean, sizeof clean, value, strlen(value));
    char esc[1100];
    size_t e = 0;
    for (const char *p = clean; *p && e + 3 < sizeof esc; p++) {
        if (*p == '\\' || *p == '"') {
            esc[e++] = '\\';
            esc[e++] = *p;
        } else if (*p == '\n') {
            esc[e++] = '\\';
            esc[e++] = 'n';
        } else {
            esc[e++] = *p;
        }
    }
    esc[e] = '\0';
    int w = snprintf(l->buf + l->len, sizeof l->buf - l->len, "%s%s=\"%s\"", l->len ? "," : "",
                     key, esc);
    if (w > 0 && l->len + (size_t)w < sizeof l->buf)
        l->len += (size_t)w;
    else
        l->buf[l->len] = '\0'; /* no room: the label is left out rather than half written */
}

void cpr_lbl_int(cpr_labels *l, const char *key, int64_t v)
{
    char s[32];
    snprintf(s, sizeof s, "%" PRId64, v);
    cpr_lbl_add(l, key, s);
}

void cpr_prom_family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The shortest %g that reads back as the same double, as Go clients write floats
 * (FormatFloat 'g', -1); infinities and NaN in the spelling Go's ParseFloat reads. */
void cpr_prom_float(char *num, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(num, len, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(num, len, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* Go decides between plain and exponent form as %g does with 6 digits: "20", not
     * "2e+01"; a value needing more digits gets them (%g drops the trailing zeros) */
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(num, len, "%.*g", digits, v);
        if (strtod(num, NULL) == v) {
            snprintf(num, len, "%.*g", digits < 6 ? 6 : digits, v);
            return;
        }
    }
}

void cpr_prom_sample(FILE *out, const char *name, const cpr_labels *l, double v)
{
    char num[48];
    cpr_prom_float(num, sizeof num, v);
    if (l && l->len)
        fprintf(out, "%s{%s} %s\n", name, l->buf, num);
    else
        fprintf(out, "%s %s\n", name, num);
}

void cpr_prom_u64(FILE *out, const char *name, const cpr_labels *l, uint64_t v)
{
    if (l && l->len)
        fprintf(out, "%s{%s} %" PRIu64 "\n", name, l->buf, v);
    else
        fprintf(out, "%s %" PRIu64 "\n", name, v);
}

