/* dump_line: text and JSON output of one record (dump_line.h). */
#include "cli/dump_line.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/text.h"

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
    char *clean = cp_text_escape_dup(s, len);
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
    char *clean = cp_text_escape_dup(s, len);
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
