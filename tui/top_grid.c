/* The text grid the screens of `collprof top` draw into, and the short formats they share
 * (top_draw.h, top_internal.h). */
#include "tui/top_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cpt_grid_init(cpt_grid *g, int w, int h)
{
    if (w < 1)
        w = 1;
    if (h < 1)
        h = 1;
    g->cells = malloc((size_t)w * (size_t)h);
    g->attrs = malloc((size_t)w * (size_t)h);
    if (!g->cells || !g->attrs) {
        free(g->cells);
        free(g->attrs);
        g->cells = NULL;
        g->attrs = NULL;
        return -1;
    }
    g->w = w;
    g->h = h;
    memset(g->cells, ' ', (size_t)w * (size_t)h);
    memset(g->attrs, CPT_NORMAL, (size_t)w * (size_t)h);
    return 0;
}

void cpt_grid_free(cpt_grid *g)
{
    free(g->cells);
    free(g->attrs);
    g->cells = NULL;
    g->attrs = NULL;
}

void cpt_grid_row(const cpt_grid *g, int y, char *buf)
{
    int n = 0;
    if (y >= 0 && y < g->h) {
        memcpy(buf, g->cells + (size_t)y * (size_t)g->w, (size_t)g->w);
        n = g->w;
        while (n > 0 && buf[n - 1] == ' ')
            n--;
    }
    buf[n] = '\0';
}

/* Writes s at (x, y), clipped to the grid; bytes that are not printable ASCII (a hostname is
 * whatever the block holds) become '?', so nothing a block says can move the terminal. */
int cpt_put(cpt_grid *g, int y, int x, const char *s, int attr)
{
    if (y < 0 || y >= g->h)
        return x;
    for (; *s; s++, x++) {
        if (x < 0)
            continue;
        if (x >= g->w)
            break;
        unsigned char c = (unsigned char)*s;
        g->cells[(size_t)y * (size_t)g->w + (size_t)x] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        g->attrs[(size_t)y * (size_t)g->w + (size_t)x] = (unsigned char)attr;
    }
    return x;
}

int cpt_putf(cpt_grid *g, int y, int x, int attr, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cpt_put(g, y, x, buf, attr);
}

void cpt_fill_row(cpt_grid *g, int y, int attr)
{
    if (y < 0 || y >= g->h)
        return;
    memset(g->cells + (size_t)y * (size_t)g->w, ' ', (size_t)g->w);
    memset(g->attrs + (size_t)y * (size_t)g->w, attr, (size_t)g->w);
}

void cpt_clear(cpt_grid *g)
{
    for (int y = 0; y < g->h; y++)
        cpt_fill_row(g, y, CPT_NORMAL);
}

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

void cpt_fmt_rate(char *buf, size_t len, double v)
{
    if (v < 9999.5)
        snprintf(buf, len, "%.0f", v);
    else if (v < 999950)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else
        snprintf(buf, len, "%.1fM", v / 1e6);
}
