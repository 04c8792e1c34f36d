/* The text grid the screens draw into (grid.h). */
#include "tui/grid.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cpt_grid_init(cpt_grid *g, int w, int h)
{
    g->w = w < 1 ? 1 : w;
    g->h = h < 1 ? 1 : h;
    size_t n = (size_t)g->w * (size_t)g->h;
    g->cells = malloc(n);
    g->attrs = malloc(n);
    if (!g->cells || !g->attrs) {
        cpt_grid_free(g);
        return -1;
    }
    cpt_grid_clear(g);
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

void cpt_grid_clear(cpt_grid *g)
{
    memset(g->cells, ' ', (size_t)g->w * (size_t)g->h);
    memset(g->attrs, 0, (size_t)g->w * (size_t)g->h);
}

void cpt_grid_fill_row(cpt_grid *g, int y, int role)
{
    if (y < 0 || y >= g->h)
        return;
    memset(g->cells + (size_t)y * (size_t)g->w, ' ', (size_t)g->w);
    memset(g->attrs + (size_t)y * (size_t)g->w, role, (size_t)g->w);
}

void cpt_grid_row_role(cpt_grid *g, int y, int role)
{
    if (y >= 0 && y < g->h)
        memset(g->attrs + (size_t)y * (size_t)g->w, role, (size_t)g->w);
}

void cpt_grid_cell(cpt_grid *g, int x, int y, char c, int role)
{
    if (x < 0 || y < 0 || x >= g->w || y >= g->h)
        return;
    size_t i = (size_t)y * (size_t)g->w + (size_t)x;
    g->cells[i] = c >= 0x20 && c < 0x7f ? c : '?';
    g->attrs[i] = (unsigned char)role;
}

int cpt_grid_put(cpt_grid *g, int x, int y, int role, const char *s)
{
    for (; *s; s++)
        cpt_grid_cell(g, x++, y, *s, role);
    return x;
}

int cpt_grid_put_utf8(cpt_grid *g, int x, int y, int role, const char *s)
{
    for (; *s; s++) {
        /* continuation bytes take no column of their own */
        if (((unsigned char)*s & 0xc0) == 0x80)
            continue;
        cpt_grid_cell(g, x++, y, *s, role);
    }
    return x;
}

int cpt_grid_putf(cpt_grid *g, int x, int y, int role, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cpt_grid_put(g, x, y, role, buf);
}

int cpt_grid_putf_utf8(cpt_grid *g, int x, int y, int role, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cpt_grid_put_utf8(g, x, y, role, buf);
}
