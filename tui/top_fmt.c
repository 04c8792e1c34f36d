/* The short formats the screens of `collprof top` and its text snapshot share (top_draw.h,
 * top_internal.h). */
#include "tui/top_internal.h"

#include <stdio.h>

void cpt_fmt_us(char *buf, size_t len, double us)
{
    const char *sign = us < 0 ? "-" : "";
    double a = us < 0 ? -us : us;
    if (a < 999.5)
        snprintf(buf, len, "%s%.0fus", sign, a);
    else if (a < 9995)
        snprintf(buf, len, "%s%.2fms", sign, a / 1e3);
    else if (a < 99950)
        snprintf(buf, len, "%s%.1fms", sign, a / 1e3);
    else if (a < 999500)
        snprintf(buf, len, "%s%.0fms", sign, a / 1e3);
    else if (a < 9995000)
        snprintf(buf, len, "%s%.2fs", sign, a / 1e6);
    else if (a < 99950000)
        snprintf(buf, len, "%s%.1fs", sign, a / 1e6);
    else
        snprintf(buf, len, "%s%.0fs", sign, a / 1e6);
}

void cpt_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
    static const char units[] = "KMGTPE";
    if (bytes < 1024) {
        snprintf(buf, len, "%uB", (unsigned)bytes);
        return;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1023.995 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, v < 9.995 ? "%.2f%c" : v < 99.95 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* A signed lateness: "+1.20ms", "-250us", "0us" (no sign on what rounds to nothing). */
void cpt_fmt_late(char *buf, size_t len, double us)
{
    char t[32];
    if (us > -0.5 && us < 0.5) {
        snprintf(buf, len, "0us");
        return;
    }
    cpt_fmt_us(t, sizeof t, us);
    snprintf(buf, len, "%s%s", us > 0 ? "+" : "", t);
}

/* "arrives 1.20ms after" / "arrives 250us before" its peers. */
void cpt_fmt_arrives(char *buf, size_t len, double us)
{
    char t[32];
    cpt_fmt_us(t, sizeof t, us < 0 ? -us : us);
    if (us > -0.5 && us < 0.5)
        snprintf(buf, len, "arrives with");
    else
        snprintf(buf, len, "arrives %s %s", t, us > 0 ? "after" : "before");
}

void cpt_fmt_gbps(char *buf, size_t len, double gbps)
{
    snprintf(buf, len, gbps < 99.995 ? "%.2f" : gbps < 999.95 ? "%.1f" : "%.0f", gbps);
}

void cpt_fmt_rate(char *buf, size_t len, double v)
{
    if (v < 9999.5)
        snprintf(buf, len, "%.0f", v);
    else if (v < 999950)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else
        snprintf(buf, len, "%.1fM", v / 1e6);
}

int cpt_in_flight_attr(const cpt_rank *r, double hang_s)
{
    if (r->state == CPT_EXITED)
        return CPT_DIM;
    if (r->inflight_op == CP_OP_NONE)
        return r->hang ? CPT_BAD : CPT_NORMAL;
    if (r->hang || r->inflight_age_s >= hang_s)
        return CPT_BAD;
    if (r->typical_us > 0 && r->inflight_age_s * 1e6 > r->typical_us)
        return CPT_WARN;
    return CPT_NORMAL;
}
