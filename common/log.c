#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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

/* ---- where a line goes (log.h: cp_log_guard_stderr) ---- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_guarded;      /* 1: fd 2 is checked before each line */
static int g_err_known;    /* fd 2 was open at the guard */
static struct stat g_err;  /* its identity then */
static int (*g_open_side)(void);
static int g_side_fd = -1;
static struct stat g_side;  /* the side log's identity */
static char g_pending[4096];
static size_t g_pending_len;
static unsigned g_dropped, g_dropped_said;

void cp_log_guard_stderr(void)
{
    int saved = errno;
    pthread_mutex_lock(&g_mu);
    g_err_known = fstat(STDERR_FILENO, &g_err) == 0;
    g_guarded = 1;
    pthread_mutex_unlock(&g_mu);
    errno = saved;
}

static int stderr_is_ours(void)
{
    struct stat st;
    if (!g_guarded)
        return 1;
    return g_err_known && fstat(STDERR_FILENO, &st) == 0 && st.st_dev == g_err.st_dev &&
           st.st_ino == g_err.st_ino && st.st_rdev == g_err.st_rdev &&
           (st.st_mode & S_IFMT) == (g_err.st_mode & S_IFMT);
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

/* Under g_mu: the side log's fd, opened at its first need; -1 none. */
static int side_fd(void)
{
    struct stat st;
    /* a number the job closed and took again is the job's now: left alone, opened anew */
    if (g_side_fd >= 0 && (fstat(g_side_fd, &st) != 0 || st.st_dev != g_side.st_dev ||
                           st.st_ino != g_side.st_ino))
        g_side_fd = -1;
    if (g_side_fd < 0 && g_open_side) {
        g_side_fd = g_open_side();
        if (g_side_fd >= 0 && fstat(g_side_fd, &g_side) != 0) {
            close(g_side_fd);
            g_side_fd = -1;
        }
    }
    if (g_side_fd < 0)
        return -1;
    if (g_pending_len) {
        write_all(g_side_fd, g_pending, g_pending_len);
        g_pending_len = 0;
    }
    if (g_dropped != g_dropped_said) {
        char note[128];
        int n = snprintf(note, sizeof note,
                         "collprof: WARN %u earlier lines of collprof were lost: stderr was "
                         "not the job's and the trace not open yet\n",
                         g_dropped - g_dropped_said);
        write_all(g_side_fd, note, (size_t)n);
        g_dropped_said = g_dropped;
    }
    return g_side_fd;
}

void cp_log_after_fork_child(void)
{
    int saved = errno;
    pthread_mutex_init(&g_mu, NULL); /* a parent's thread may have held it across the fork */
    if (g_side_fd >= 0)
        close(g_side_fd);
    g_side_fd = -1;
    g_open_side = NULL;
    g_pending_len = 0;
    errno = saved;
}

void cp_log_set_side(int (*open_side)(void))
{
    int saved = errno;
    pthread_mutex_lock(&g_mu);
    g_open_side = open_side;
    if (open_side && (g_pending_len || g_dropped != g_dropped_said))
        side_fd(); /* what waited for it */
    pthread_mutex_unlock(&g_mu);
    errno = saved;
}

static void cp_log_emit(const char *line, size_t len)
{
    int saved = errno;
    pthread_mutex_lock(&g_mu);
    if (stderr_is_ours()) {
        /* One write(2): stdio would split long lines and interleave with other ranks. */
        ssize_t rc = write(STDERR_FILENO, line, len);
        (void)rc;
    } else {
        int fd = side_fd();
        if (fd >= 0) {
            write_all(fd, line, len);
        } else if (g_pending_len + len <= sizeof g_pending) {
            memcpy(g_pending + g_pending_len, line, len);
            g_pending_len += len;
        } else {
            g_dropped++;
        }
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
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
    cp_log_emit(line, len);
}
