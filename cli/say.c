/* say: the verbs' one-line messages on stderr and the shell quoting of a command line they
 * print (cli.h), below every verb. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/text.h"

/* Each message is formatted first and written with one call, so lines of several
 * processes sharing a terminal do not interleave mid-line. What a message echoes (a path
 * from a directory listing, a string from a trace) is escaped here, in one place: nothing
 * in it drives the terminal or breaks the one line. */
static void put_line(const char *prefix, const char *fmt, va_list ap)
{
    /* room for a path as long as the kernel takes (PATH_MAX) and the words around it */
    char msg[8192], line[8192];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int n = snprintf(line, sizeof line, "collprof: %s", prefix);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    /* one byte short, to keep room for the newline */
    cp_text_escape(line + n, sizeof line - 1 - (size_t)n, msg, strlen(msg));
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

int cli_error(const char *verb, int status, const char *fmt, ...)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", verb);
    va_list ap;
    va_start(ap, fmt);
    put_line(prefix, fmt, ap);
    va_end(ap);
    return status;
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_line("WARN ", fmt, ap);
    va_end(ap);
}

void cli_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_line("", fmt, ap);
    va_end(ap);
}

char *cli_shell_quote(const char *s)
{
    static const char bare[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_@%+=:,./-";
    /* a word that begins with '-' would be read as an option: "./-x" names the same file */
    const char *lead = s[0] == '-' ? "./" : "";
    if (s[0] && s[strspn(s, bare)] == '\0') {
        char *q = malloc(strlen(lead) + strlen(s) + 1);
        if (q)
            sprintf(q, "%s%s", lead, s);
        return q;
    }
    /* in single quotes nothing is special but the quote itself, written '\'' */
    size_t n = strlen(lead) + 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q)
        return NULL;
    *o++ = '\'';
    o += sprintf(o, "%s", lead);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}
