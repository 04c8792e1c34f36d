/* options: one parser and one help printer over each verb's option table (options.h). */
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Where the help column starts, as in git's usage_with_options. */
#define HELP_COLUMN 28

static int takes_value(const struct cli_option *o)
{
    return o->type == CLI_OPT_INT || o->type == CLI_OPT_DOUBLE || o->type == CLI_OPT_STRING;
}

int cli_usage_error(const struct cli_command *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cli_error(c->verb, CP_EXIT_USAGE, "%s (see 'collprof %s --help')", msg, c->verb);
}

/* The option as the user spelt it, for messages: "--top" or "-d". */
static void spelling(char *buf, size_t len, const struct cli_option *o, int as_long)
{
    if (as_long)
        snprintf(buf, len, "--%s", o->long_name);
    else
        snprintf(buf, len, "-%c", o->short_name);
}

static int parse_whole(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_real(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* An exclusive choice (export's --perfetto|--csv|--prometheus) is several SET_INT options
 * sharing one int: name the one that set it first. */
static const struct cli_option *setter_of(const struct cli_command *c, const void *value,
                                          int set_to)
{
    for (const struct cli_option *o = c->options; o && o->type != CLI_OPT_END; o++)
        if (o->type == CLI_OPT_SET_INT && o->value == value && o->set_to == set_to)
            return o;
    return NULL;
}

static int apply(const struct cli_command *c, const struct cli_option *o, const char *name,
                 const char *arg)
{
    if (takes_value(o) && arg[0] == '\0')
        return cli_usage_error(c, "empty value for %s", name);
    switch (o->type) {
    case CLI_OPT_BOOL:
        *(int *)o->value = 1;
        return CLI_GO_ON;
    case CLI_OPT_SET_INT: {
        int *p = o->value;
        if (*p != 0 && *p != o->set_to) {
            const struct cli_option *first = setter_of(c, p, *p);
            char other[64] = "another option";
            if (first && first->long_name)
                spelling(other, sizeof other, first, 1);
            return cli_usage_error(c, "%s cannot be used with %s", name, other);
        }
        *p = o->set_to;
        return CLI_GO_ON;
    }
    case CLI_OPT_INT: {
        long long v;
        if (parse_whole(arg, &v) != 0 || (double)v < o->min || (double)v > o->max)
            return cli_usage_error(c, "bad value '%s' for %s: wants a whole number from %.0f to %.0f",
                                   arg, name, o->min, o->max);
        *(long *)o->value = (long)v;
        return CLI_GO_ON;
    }
    case CLI_OPT_DOUBLE: {
        double v;
        if (parse_real(arg, &v) != 0 || v < o->min || v > o->max)
            return cli_usage_error(c, "bad value '%s' for %s: wants a number from %g to %g", arg,
                                   name, o->min, o->max);
        *(double *)o->value = v;
        return CLI_GO_ON;
    }
    case CLI_OPT_STRING:
        *(const char **)o->value = arg;
        return CLI_GO_ON;
    case CLI_OPT_END:
        break;
    }
    return cli_usage_error(c, "internal: bad option table entry for %s", name);
}

static const struct cli_option *find_long(const struct cli_command *c, const char *name, size_t len)
{
    for (const struct cli_option *o = c->options; o && o->type != CLI_OPT_END; o++)
        if (o->long_name && strlen(o->long_name) == len && memcmp(o->long_name, name, len) == 0)
            return o;
    return NULL;
}

static const struct cli_option *find_short(const struct cli_command *c, char ch)
{
    for (const struct cli_option *o = c->options; o && o->type != CLI_OPT_END; o++)
        if (o->short_name == ch)
            return o;
    return NULL;
}

/* One option word at argv[*i]; may consume the next word as its value. */
static int parse_one(const struct cli_command *c, int argc, char **argv, int *i)
{
    const char *word = argv[*i];
    const struct cli_option *o;
    const char *inline_value = NULL;
    char name[80];

    if (word[1] == '-') {
        const char *long_name = word + 2;
        const char *eq = strchr(long_name, '=');
        size_t len = eq ? (size_t)(eq - long_name) : strlen(long_name);
        snprintf(name, sizeof name, "--%.*s", (int)(len > 60 ? 60 : len), long_name);
        if (len == 4 && memcmp(long_name, "help", 4) == 0 && !eq) {
            cli_usage(c, stdout);
            return CP_EXIT_OK;
        }
        o = find_long(c, long_name, len);
        if (!o)
            return cli_usage_error(c, "unknown option '%s'", name);
        if (eq) {
            if (!takes_value(o))
                return cli_usage_error(c, "%s takes no value", name);
            inline_value = eq + 1;
        }
    } else {
        snprintf(name, sizeof name, "-%c", word[1]);
        if (word[1] == 'h' && word[2] == '\0') {
            cli_usage(c, stdout);
            return CP_EXIT_OK;
        }
        o = find_short(c, word[1]);
        if (!o || (!takes_value(o) && word[2] != '\0'))
            return cli_usage_error(c, "unknown option '%.60s'", word);
        if (word[2] != '\0')
            inline_value = word + 2;
    }

    if (!takes_value(o))
        return apply(c, o, name, "");
    if (!inline_value) {
        if (*i + 1 >= argc)
            return cli_usage_error(c, "missing %s after %s", o->argh ? o->argh : "a value", name);
        inline_value = argv[++*i];
    }
    return apply(c, o, name, inline_value);
}

int cli_parse(const struct cli_command *c, int argc, char **argv, int *nargs)
{
    int n = 0, options_done = 0;

    for (int i = 1; i < argc; i++) {
        char *word = argv[i];
        if (options_done || word[0] != '-' || word[1] == '\0') {
            /* Compacting in place is safe: n never passes i. */
            argv[1 + n++] = word;
            if (c->flags & CLI_STOP_AT_ARG)
                options_done = 1;
            continue;
        }
        if (strcmp(word, "--") == 0) {
            options_done = 1;
            continue;
        }
        int rc = parse_one(c, argc, argv, &i);
        if (rc != CLI_GO_ON)
            return rc;
    }
    argv[1 + n] = NULL;

    if (n < c->min_args)
        return cli_usage_error(c, "missing %s", c->args ? c->args : "argument");
    if (c->max_args >= 0 && n > c->max_args) {
        if (c->max_args == 0)
            return cli_usage_error(c, "unexpected argument '%s'", argv[1]);
        return cli_usage_error(c, "unexpected argument '%s' after %s", argv[1 + c->max_args],
                               c->args ? c->args : "the arguments");
    }
    *nargs = n;
    return CLI_GO_ON;
}

/* Prints `text` with every line after the first indented to `column`. */
static void print_wrapped(FILE *out, const char *text, int column)
{
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "%.*s\n", (int)len, p);
        if (!nl)
            return;
        p = nl + 1;
        if (*p)
            fprintf(out, "%*s", column, "");
    }
}

static void print_option(FILE *out, char short_name, const char *long_name, const char *argh,
                         const char *help)
{
    char left[128];
    int n = snprintf(left, sizeof left, "    ");
    if (short_name)
        n += snprintf(left + n, sizeof left - (size_t)n, "-%c%s", short_name,
                      long_name ? ", " : "");
    if (long_name)
        n += snprintf(left + n, sizeof left - (size_t)n, "--%s", long_name);
    if (argh)
        snprintf(left + n, sizeof left - (size_t)n, " %s", argh);

    int width = (int)strlen(left);
    if (width + 2 > HELP_COLUMN)
        fprintf(out, "%s\n%*s", left, HELP_COLUMN, "");
    else
        fprintf(out, "%-*s", HELP_COLUMN, left);
    print_wrapped(out, help ? help : "", HELP_COLUMN);
}

void cli_usage(const struct cli_command *c, FILE *out)
{
    for (int i = 0; c->usage && c->usage[i]; i++)
        fprintf(out, "%s collprof %s\n", i == 0 ? "usage:" : "   or:", c->usage[i]);
    if (c->about)
        fprintf(out, "\n%s\n", c->about);
    fputc('\n', out);
    for (const struct cli_option *o = c->options; o && o->type != CLI_OPT_END; o++)
        print_option(out, o->short_name, o->long_name, takes_value(o) ? o->argh : NULL, o->help);
    print_option(out, 'h', "help", NULL, "show this help");
    if (c->notes)
        fprintf(out, "\n%s\n", c->notes);
}
