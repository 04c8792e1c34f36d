/* tui/grid: the text grid every screen of tui/ draws into, with no terminal.
 *
 * A fixed-size grid of cells, each a printable ASCII character and a role: a small integer
 * whose meaning is the drawing screen's own (enum cpt_attr for `collprof top`, enum cpv_attr
 * for `collprof view`; 0 is plain everywhere). Writers clip to the grid and turn what is not
 * printable ASCII into '?', so nothing a stats block or a trace holds can move the terminal.
 * Tests read rows back as text; tui/grid_curses.h copies a grid onto an ncurses screen.
 */
#ifndef COLLPROF_TUI_GRID_H
#define COLLPROF_TUI_GRID_H

typedef struct cpt_grid {
    int w, h;
    char *cells;          /* w * h printable ASCII */
    unsigned char *attrs; /* w * h roles */
} cpt_grid;

/* 0, or -1 out of memory. Width and height below 1 are taken as 1. All blank, role 0. */
int cpt_grid_init(cpt_grid *g, int w, int h);
void cpt_grid_free(cpt_grid *g);
/* Row y as a string without its trailing blanks (buf: at least w + 1 bytes). */
void cpt_grid_row(const cpt_grid *g, int y, char *buf);

/* Every cell blank with role 0. */
void cpt_grid_clear(cpt_grid *g);
/* Row y blank, with role. */
void cpt_grid_fill_row(cpt_grid *g, int y, int role);
/* Row y's role, its characters kept. */
void cpt_grid_row_role(cpt_grid *g, int y, int role);
/* One cell; nothing outside the grid. */
void cpt_grid_cell(cpt_grid *g, int x, int y, char c, int role);

/* s from (x, y), clipped, a cell per byte. Returns x plus the cells s took, clipped or not. */
int cpt_grid_put(cpt_grid *g, int x, int y, int role, const char *s);
int cpt_grid_putf(cpt_grid *g, int x, int y, int role, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The same, a cell per UTF-8 character (one '?' for a multi-byte one), for text that went
 * through cp_text_escape (common/text.h). */
int cpt_grid_put_utf8(cpt_grid *g, int x, int y, int role, const char *s);
int cpt_grid_putf_utf8(cpt_grid *g, int x, int y, int role, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
