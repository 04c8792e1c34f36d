/* dump_line: text and JSON output of one record (dump_line.h). */
#include "cli/dump_line.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when it is not one.
 * Overlong forms and surrogates are refused: json-c would pass them through and strict
 * JSON readers (Python's) would then refuse the whole line. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (len > n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* A NUL-terminated copy of s with control characters, NULs and invalid UTF-8 as '?'.
 * The same length as s, so it never grows with what a file claims. */
static char *sanitize(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_len(u + i, len - i);
        if (n == 0 || (n == 1 && (u[i] < 0x20 || u[i] == 0x7f))) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, u + i, n);
        i += n;
    }
    out[len] = '\0';
    return out;
}

/* Text values are bare when that cannot be misread, else quoted with \" and \\. */
static void put_text_value(FILE *out, const char *s)
{
    int bare = s[0] != '\0';
    for (const char *p = s; *p && bare; p++)
        if (*p == ' ' || *p == '"' || *p == '\\' || *p == ',' || *p == '=')
            bare = 0;
    if (bare) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

static void add(struct dump_line *l, const char *key, json_object *v)
{
    json_object_object_add(l->obj, key, v);
}

void dump_line_begin(struct dump_line *l, int rank, const char *kind)
{
    l->array = NULL;
    l->array_items = 0;
    if (l->json) {
        l->obj = json_object_new_object();
        add(l, "rank", json_object_new_int(rank));
        add(l, "kind", json_object_new_string(kind));
        return;
    }
    if (rank >= 0)
        fprintf(l->out, "rank %d %s", rank, kind);
    else
        fprintf(l->out, "rank ? %s", kind);
}

void dump_line_word(struct dump_line *l, const char *key, const char *word)
{
    if (l->json)
        add(l, key, json_object_new_string(word));
    else
        fprintf(l->out, " %s", word);
}

void dump_line_str(struct dump_line *l, const char *key, const char *s, size_t len)
{
    char *clean = sanitize(s, len);
    if (!clean) {
        dump_line_unknown(l, key);
        return;
    }
    if (l->json) {
        add(l, key, json_object_new_string(clean));
    } else {
        fprintf(l->out, " %s=", key);
        put_text_value(l->out, clean);
    }
    free(clean);
}

void dump_line_u64(struct dump_line *l, const char *key, uint64_t v)
{
    if (l->json)
        add(l, key, json_object_new_uint64(v));
    else
        fprintf(l->out, " %s=%" PRIu64, key, v);
}

void dump_line_i64(struct dump_line *l, const char *key, int64_t v)
{
    if (l->json)
        add(l, key, json_object_new_int64(v));
    else
        fprintf(l->out, " %s=%" PRId64, key, v);
}

void dump_line_id(struct dump_line *l, const char *key, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%016" PRIx64, v);
    if (l->json)
        add(l, key, json_object_new_string(buf));
    else
        fprintf(l->out, " %s=%s", key, buf);
}

void dump_line_addr(struct dump_line *l, const char *key, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    if (l->json)
        add(l, key, json_object_new_string(buf));
    else
        fprintf(l->out, " %s=%s", key, buf);
}

void dump_line_unknown(struct dump_line *l, const char *key)
{
    if (l->json)
        add(l, key, NULL);
    else
        fprintf(l->out, " %s=?", key);
}

void dump_line_fixed3(struct dump_line *l, const char *key, double v)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%.3f", v);
    if (l->json)
        /* json-c would print the double with 17 digits; keep the text we chose. */
        add(l, key, json_object_new_double_s(v, buf));
    else
        fprintf(l->out, " %s=%s", key, buf);
}

void dump_line_array_begin(struct dump_line *l, const char *key)
{
    l->array_items = 0;
    if (l->json) {
        l->array = json_object_new_array();
        add(l, key, l->array);
    } else {
        fprintf(l->out, " %s=", key);
    }
}

void dump_line_array_str(struct dump_line *l, const char *s, size_t len)
{
    char *clean = sanitize(s, len);
    if (l->json) {
        json_object_array_add(l->array, clean ? json_object_new_string(clean) : NULL);
    } else {
        if (l->array_items > 0)
            fputc(',', l->out);
        put_text_value(l->out, clean ? clean : "?");
    }
    l->array_items++;
    free(clean);
}

void dump_line_array_end(struct dump_line *l)
{
    if (!l->json && l->array_items == 0)
        fputc('-', l->out);
    l->array = NULL;
}

int dump_line_end(struct dump_line *l)
{
    if (l->json) {
        const char *s = json_object_to_json_string_ext(
            l->obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        fputs(s ? s : "{}", l->out);
        json_object_put(l->obj);
        l->obj = NULL;
    }
    fputc('\n', l->out);
    return ferror(l->out) ? -1 : 0;
}
