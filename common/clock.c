#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cp_mono_ns(void) { return read_ns(CLOCK_MONOTONIC); }

uint64_t cp_realtime_ns(void) { return read_ns(CLOCK_REALTIME); }

cp_clock_anchor cp_clock_anchor_now(void)
{
    /* A preemption between the two reads would skew the pair by a scheduler slice;
     * the narrowest of a few brackets bounds that error to about one clock read. */
    cp_clock_anchor best = {0, 0};
    uint64_t best_width = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = cp_mono_ns();
        uint64_t real = cp_realtime_ns();
        uint64_t after = cp_mono_ns();
        if (after - before < best_width) {
            best_width = after - before;
            best.mono_ns = before + (after - before) / 2;
            best.realtime_ns = real;
        }
    }
    return best;
}

int cp_ticks_are_tsc;

/* The kernel demotes the TSC from clocksource when it finds it unstable or unsynchronised
 * across CPUs; using it only while the kernel does keeps us as right as CLOCK_MONOTONIC. */
void cp_ticks_init(const char *sysfs_root)
{
    int tsc = 0;
#if defined(__x86_64__)
    char path[512];
    snprintf(path, sizeof path, "%s/sys/devices/system/clocksource/clocksource0/current_clocksource",
             sysfs_root ? sysfs_root : "");
    FILE *f = fopen(path, "re");
    if (f) {
        char line[64] = "";
        if (fgets(line, sizeof line, f))
            tsc = strncmp(line, "tsc", 3) == 0 && (line[3] == '\n' || line[3] == '\0');
        fclose(f);
    }
#else
    (void)sysfs_root;
#endif
    cp_ticks_are_tsc = tsc;
}

/* A tick reading bracketed by two monotonic reads; the narrowest of a few brackets. */
static void tick_pair(uint64_t *tick, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 4; i++) {
        uint64_t a = cp_mono_ns();
        uint64_t t = cp_ticks();
        uint64_t b = cp_mono_ns();
        if (b - a < best) {
            best = b - a;
            *tick = t;
            *ns = a + (b - a) / 2;
        }
    }
}

void cp_tick_calib_init(cp_tick_calib *c, uint64_t settle_ns)
{
    tick_pair(&c->tick0, &c->ns0);
    c->tick_ref = c->tick0;
    c->ns_ref = c->ns0;
    c->ns_per_tick = 1.0;
    if (!cp_ticks_are_tsc)
        return;
    struct timespec ts = {(time_t)(settle_ns / 1000000000u), (long)(settle_ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    cp_tick_calib_refresh(c);
}

void cp_tick_calib_refresh(cp_tick_calib *c)
{
    if (!cp_ticks_are_tsc)
        return;
    uint64_t t = 0, n = 0;
    tick_pair(&t, &n);
    if (t > c->tick0 && n > c->ns0)
        c->ns_per_tick = (double)(n - c->ns0) / (double)(t - c->tick0);
    c->tick_ref = t;
    c->ns_ref = n;
}

uint64_t cp_ticks_to_ns(const cp_tick_calib *c, uint64_t ticks)
{
    if (!cp_ticks_are_tsc)
        return ticks;
    /* Signed: a record stamped before the latest pair lies behind the reference. */
    double d = (double)(int64_t)(ticks - c->tick_ref) * c->ns_per_tick;
    int64_t ns = (int64_t)c->ns_ref + (int64_t)d;
    return ns < 0 ? 0 : (uint64_t)ns;
}

uint64_t cp_tick_span_to_ns(const cp_tick_calib *c, uint64_t ticks)
{
    return cp_ticks_are_tsc ? (uint64_t)((double)ticks * c->ns_per_tick) : ticks;
}
