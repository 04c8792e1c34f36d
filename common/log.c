#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

static int g_level = CP_LOG_WARN;

static const char *const level_names[] = {"WARN", "INFO", "TRACE"};

void cp_log_set_level(int level)
{
    if (level >= CP_LOG_WARN && level <= CP_LOG_TRACE)
        g_level = level;
}

int cp_log_level(void) { return g_level; }

int cp_log_level_parse(const char *s)
{
    for (int i = 0; i <= CP_LOG_TRACE; i++)
        if (s && strcasecmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

const char *cp_log_level_name(int level)
{
    return level >= CP_LOG_WARN && level <= CP_LOG_TRACE ? level_names[level] : "?";
}

void cp_log(int level, const char *fmt, ...)
{
    if (level > g_level)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "collprof: %s ", cp_log_level_name(level));
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* cut, but still one whole line */
    while (len > 0 && line[len - 1] == '\n')
        len--;
    line[len++] = '\n';
    /* One write(2): stdio would split long lines and interleave with other ranks. */
    ssize_t rc = write(STDERR_FILENO, line, len);
    (void)rc;
}
