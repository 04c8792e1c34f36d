/* libcollprof-emuhost.so: preloaded by the launchers into the ranks of emulated host k
 * (COLLPROF_EMU_HOST_ID=k), it gives them that host's name and wall clock:
 *   gethostname, uname          "<real hostname>-emu<k>"
 *   clock_gettime               CLOCK_REALTIME and CLOCK_REALTIME_COARSE shifted by the
 *                               host's COLLPROF_EMU_CLOCK_OFFSET_US; other clocks untouched
 *   gettimeofday, time          the same shifted wall clock
 * so neither the shim nor the analyzer can tell the ranks share one machine. Without
 * COLLPROF_EMU_HOST_ID (or with a bad one) every call is passed through unchanged.
 *
 * The real functions come from dlsym(RTLD_NEXT); the settings are read once, on first use
 * (a constructor could run after another library's constructor already asked the time). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "emu/common/topo.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef int (*uname_fn)(struct utsname *);
typedef int (*gethostname_fn)(char *, size_t);

static struct {
    clock_gettime_fn clock_gettime;
    gettimeofday_fn gettimeofday;
    uname_fn uname;
    gethostname_fn gethostname;
    int host;              /* -1: pass everything through */
    int64_t offset_ns;
    char name[72];
} g;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init(void)
{
    g.clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    g.gettimeofday = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
    g.uname = (uname_fn)dlsym(RTLD_NEXT, "uname");
    g.gethostname = (gethostname_fn)dlsym(RTLD_NEXT, "gethostname");
    g.host = cpemu_process_host();
    if (g.host < 0)
        return;
    g.offset_ns = (int64_t)cpemu_clock_offset_ns(cpemu_topo_get(), g.host);
    cpemu_host_name(g.host, g.name, sizeof g.name);
}

static void shift(struct timespec *ts)
{
    int64_t ns = (int64_t)ts->tv_nsec + g.offset_ns % 1000000000;
    time_t sec = ts->tv_sec + (time_t)(g.offset_ns / 1000000000);
    if (ns < 0) {
        ns += 1000000000;
        sec--;
    } else if (ns >= 1000000000) {
        ns -= 1000000000;
        sec++;
    }
    ts->tv_sec = sec;
    ts->tv_nsec = (long)ns;
}

EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
    pthread_once(&g_once, init);
    if (!g.clock_gettime) {
        errno = ENOSYS;
        return -1;
    }
    int rc = g.clock_gettime(clk, ts);
    if (rc == 0 && g.host >= 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE))
        shift(ts);
    return rc;
}

/* glibc declares the second parameter `void *restrict` (struct timezone * before 2.31). */
EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    pthread_once(&g_once, init);
    if (g.host < 0)
        return g.gettimeofday ? g.gettimeofday(tv, tz) : (errno = ENOSYS, -1);
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    if (tz && g.gettimeofday) {
        struct timeval ignored;
        g.gettimeofday(&ignored, tz); /* the (obsolete) time zone, from the real call */
    }
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

EXPORT time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

EXPORT int uname(struct utsname *buf)
{
    pthread_once(&g_once, init);
    if (!g.uname) {
        errno = ENOSYS;
        return -1;
    }
    int rc = g.uname(buf);
    if (rc == 0 && g.host >= 0) {
        size_t n = strlen(g.name);
        if (n >= sizeof buf->nodename)
            n = sizeof buf->nodename - 1;
        memcpy(buf->nodename, g.name, n);
        buf->nodename[n] = '\0';
    }
    return rc;
}

EXPORT int gethostname(char *name, size_t len)
{
    pthread_once(&g_once, init);
    if (g.host < 0)
        return g.gethostname ? g.gethostname(name, len) : (errno = ENOSYS, -1);
    size_t n = strlen(g.name);
    /* glibc's behaviour when the buffer is short: as much as fits, and ENAMETOOLONG. */
    if (len > 0) {
        size_t copy = n < len ? n + 1 : len;
        memcpy(name, g.name, copy);
    }
    if (n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
