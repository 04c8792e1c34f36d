/* debug_log: NCCL's own log, line for line (src/debug.cc of NCCL 2.28).
 *
 * Tools parse these lines (collprof's selftest reads the transports from them), so the
 * shape is NCCL's exactly: `<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>` on stdout or
 * NCCL_DEBUG_FILE (%h, %p, %% expanded), WARN lines preceded by an empty line and a
 * timestamp, subsystems filtered by NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV). The host
 * is the emulated one, so ranks of different emulated hosts log different names. Every
 * WARN is also kept, whatever the level, for ncclGetLastError (one process-wide buffer, as
 * NCCL has).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emu/common/emu_stream.h"
#include "emu/nccl/nccl_emu.h"

#define CPN_VERSION_STRING_FMT "NCCL version %d.%d.%d+cuda%d.%d"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1;              /* -1: not read yet */
static unsigned long log_mask;
static unsigned ts_levels;
static char ts_format[256];
static char hostname[256];
static FILE *log_file;
static char last_error[1024];
static _Thread_local int my_tid = -1;
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static unsigned long subsys_bit(const char *s)
{
    static const struct { const char *name; unsigned long bit; } t[] = {
        {"INIT", CPN_INIT}, {"COLL", CPN_COLL}, {"P2P", CPN_P2P}, {"SHM", CPN_SHM},
        {"NET", CPN_NET}, {"GRAPH", CPN_GRAPH}, {"TUNING", CPN_TUNING}, {"ENV", CPN_ENV},
        {"ALLOC", CPN_ALLOC}, {"CALL", CPN_CALL}, {"PROXY", CPN_PROXY}, {"NVLS", CPN_NVLS},
        {"BOOTSTRAP", CPN_BOOTSTRAP}, {"REG", CPN_REG}, {"PROFILE", CPN_PROFILE},
        {"RAS", CPN_RAS}, {"ALL", (unsigned long)CPN_ALL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcasecmp(s, t[i].name) == 0)
            return t[i].bit;
    return 0;   /* NCCL ignores a name it does not know */
}

static void parse_list(const char *env, unsigned long *mask, unsigned long (*bit)(const char *))
{
    int invert = env[0] == '^';
    if (invert)
        env++;
    *mask = invert ? ~0ul : 0ul;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long m = bit(tok);
        if (invert)
            *mask &= ~m;
        else
            *mask |= m;
    }
}

static unsigned long level_bit(const char *s)
{
    static const char *names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
    if (strcasecmp(s, "ALL") == 0)
        return ~0ul;
    for (int i = 1; i < 6; i++)
        if (strcasecmp(s, names[i]) == 0)
            return 1ul << i;
    return 0;
}

/* A rank forked by a process that already logged (collprof-sim --launch, a test's
 * launcher) is a rank of its own: its own pid in the file name and the lines, its own
 * emulated host, its own tid. Real ranks are exec'd and start afresh; so do these. */
static void log_atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    log_lock = fresh;
    log_level = -1;
    my_tid = -1;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, log_atfork_child); }

/* Called with log_lock held. */
static void log_init_locked(void)
{
    pthread_once(&atfork_once, register_atfork);
    const char *d = getenv("NCCL_DEBUG");
    int level = CPN_LOG_NONE;
    if (d) {
        if (strcasecmp(d, "VERSION") == 0) level = CPN_LOG_VERSION;
        else if (strcasecmp(d, "WARN") == 0) level = CPN_LOG_WARN;
        else if (strcasecmp(d, "INFO") == 0) level = CPN_LOG_INFO;
        else if (strcasecmp(d, "ABORT") == 0) level = CPN_LOG_ABORT;
        else if (strcasecmp(d, "TRACE") == 0) level = CPN_LOG_TRACE;
    }
    log_mask = CPN_INIT | CPN_BOOTSTRAP | CPN_ENV;
    const char *sub = getenv("NCCL_DEBUG_SUBSYS");
    if (sub)
        parse_list(sub, &log_mask, subsys_bit);
    unsigned long lv = 1ul << CPN_LOG_WARN;
    const char *tsl = getenv("NCCL_DEBUG_TIMESTAMP_LEVELS");
    if (tsl)
        parse_list(tsl, &lv, level_bit);
    ts_levels = (unsigned)lv;
    const char *tsf = getenv("NCCL_DEBUG_TIMESTAMP_FORMAT");
    snprintf(ts_format, sizeof ts_format, "%s",
             tsf && strlen(tsf) < sizeof ts_format ? tsf : "[%F %T] ");
    for (char *p = ts_format; *p; p++)
        if (*p == '_')
            *p = ' ';   /* NCCL's way to get spaces through a command line */

    /* NCCL cuts the hostname at the first '.'; ours is the emulated host's */
    cpemu_host_name(-1, hostname, sizeof hostname);
    hostname[strcspn(hostname, ".")] = '\0';

    if (log_file && log_file != stdout)
        fclose(log_file);
    log_file = stdout;
    const char *fn = getenv("NCCL_DEBUG_FILE");
    if (level > CPN_LOG_VERSION && fn) {
        char path[PATH_MAX];
        size_t o = 0;
        for (const char *c = fn; *c && o < sizeof path - 1; c++) {
            if (*c != '%') {
                path[o++] = *c;
                continue;
            }
            c++;
            if (*c == '%') {
                path[o++] = '%';
            } else if (*c == 'h') {
                o += (size_t)snprintf(path + o, sizeof path - o, "%s", hostname);
            } else if (*c == 'p') {
                o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
            } else {
                path[o++] = '%';   /* NCCL echoes what it does not understand */
                if (!*c)
                    break;
                if (o < sizeof path - 1)
                    path[o++] = *c;
            }
            if (o > sizeof path - 1)
                o = sizeof path - 1;
        }
        path[o] = '\0';
        FILE *f = path[0] ? fopen(path, "w") : NULL;
        if (f) {
            setlinebuf(f);
            log_file = f;
        }
    }
    log_level = level;
}

int cpn_log_level(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_level < 0)
        log_init_locked();
    int l = log_level;
    pthread_mutex_unlock(&log_lock);
    return l;
}

void cpn_log_reset(void)
{
    pthread_mutex_lock(&log_lock);
    log_level = -1;   /* the next line reads the environment again */
    pthread_mutex_unlock(&log_lock);
}

/* Formats and writes one line; called with log_lock held and the level already checked. */
static void emit_locked(int level, int dev, const char *file, int line, const char *fmt,
                        va_list ap)
{
    if (my_tid == -1)
        my_tid = (int)syscall(SYS_gettid);
    char buf[1024];
    size_t len = 0;
    if (level == CPN_LOG_WARN)
        buf[len++] = '\n';
    if (ts_levels & (1u << level)) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        len += strftime(buf + len, sizeof buf - len, ts_format, &tm);
    }
    if (level != CPN_LOG_VERSION)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s:%d:%d ", hostname,
                                (int)getpid(), my_tid);
    if (len > sizeof buf - 1)
        len = sizeof buf - 1;
    if (dev < 0)
        dev = cpn_current_dev();
    if (level == CPN_LOG_WARN) {
        const char *base = strrchr(file, '/');
        len += (size_t)snprintf(buf + len, sizeof buf - len, "[%d] %s:%d NCCL WARN ", dev,
                                base ? base + 1 : file, line);
    } else if (level == CPN_LOG_INFO) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "[%d] NCCL INFO ", dev);
    }
    if (len > sizeof buf - 1)
        len = sizeof buf - 1;
    len += (size_t)vsnprintf(buf + len, sizeof buf - len, fmt, ap);
    if (len > sizeof buf - 1)
        len = sizeof buf - 1;
    buf[len++] = '\n';
    fwrite(buf, 1, len, log_file);
    fflush(log_file);   /* ranks are separate processes: a line must not wait in a buffer */
}

void cpn_info(unsigned long flags, int dev, const char *fmt, ...)
{
    pthread_mutex_lock(&log_lock);
    if (log_level < 0)
        log_init_locked();
    if (log_level >= CPN_LOG_INFO && (flags & log_mask)) {
        va_list ap;
        va_start(ap, fmt);
        emit_locked(CPN_LOG_INFO, dev, "", 0, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&log_lock);
}

void cpn_warn_at(const char *file, int line, const char *fmt, ...)
{
    pthread_mutex_lock(&log_lock);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (log_level < 0)
        log_init_locked();
    if (log_level >= CPN_LOG_WARN) {
        va_start(ap, fmt);
        emit_locked(CPN_LOG_WARN, -1, file, line, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&log_lock);
}

void cpn_log_v(int level, unsigned long flags, const char *file, int line, const char *fmt,
               va_list ap)
{
    if (level < CPN_LOG_VERSION || level > CPN_LOG_TRACE)
        return;   /* a plugin's bad level: nothing to print */
    pthread_mutex_lock(&log_lock);
    if (log_level < 0)
        log_init_locked();
    if (level == CPN_LOG_WARN) {
        va_list aq;
        va_copy(aq, ap);
        vsnprintf(last_error, sizeof last_error, fmt, aq);
        va_end(aq);
    }
    int subsys_ok = level == CPN_LOG_WARN || level == CPN_LOG_VERSION || (flags & log_mask);
    if (log_level >= level && subsys_ok)
        emit_locked(level, -1, file, line, fmt, ap);
    pthread_mutex_unlock(&log_lock);
}

const char *cpn_last_error(void)
{
    /* NCCL hands out its buffer itself; a concurrent WARN may rewrite it, as in NCCL */
    return last_error;
}

static void show_version(void)
{
    char v[64];
    snprintf(v, sizeof v, CPN_VERSION_STRING_FMT, CP_NCCL_ABI_MAJOR, CP_NCCL_ABI_MINOR,
             CPN_NCCL_PATCH, CP_CUDA_ABI_VERSION / 1000, (CP_CUDA_ABI_VERSION % 1000) / 10);
    int level = cpn_log_level();
    if (level == CPN_LOG_VERSION || level == CPN_LOG_WARN) {
        /* a VERSION line is the bare text, no host/pid/tid */
        pthread_mutex_lock(&log_lock);
        fprintf(log_file, "%s\n", v);
        fflush(log_file);
        pthread_mutex_unlock(&log_lock);
    } else {
        cpn_info((unsigned long)CPN_ALL, -1, "%s", v);
    }
}

void cpn_log_version_once(int myrank)
{
    int level = cpn_log_level();
    if (level > CPN_LOG_WARN || (level != CPN_LOG_NONE && myrank == 0))
        pthread_once(&version_once, show_version);
}

int cpn_current_dev(void)
{
    int d = cpemu_current_device();
    return d < 0 ? 0 : d;   /* cudaGetDevice: device 0 until the thread picks one */
}
