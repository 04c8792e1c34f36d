/* A text grid onto the terminal (grid_curses.h). */
#include "tui/grid_curses.h"

#include <stdlib.h>

int cpt_grid_start_colour(void)
{
    const char *nc = getenv("NO_COLOR");
    if ((nc && nc[0]) || !has_colors() || start_color() != OK)
        return 0;
    use_default_colors();
    return 1;
}

void cpt_grid_blit(const cpt_grid *g, const chtype *role_attr, int nroles)
{
    for (int y = 0; y < g->h && y < LINES; y++) {
        const char *cells = g->cells + (size_t)y * (size_t)g->w;
        const unsigned char *attrs = g->attrs + (size_t)y * (size_t)g->w;
        int w = g->w < COLS ? g->w : COLS;
        /* a run of one role at a time */
        for (int x = 0; x < w;) {
            int e = x;
            while (e < w && attrs[e] == attrs[x])
                e++;
            attrset(attrs[x] < nroles ? role_attr[attrs[x]] : A_NORMAL);
            /* the bottom-right cell cannot be written without scrolling: curses keeps it in
             * place and says ERR, which is fine */
            mvaddnstr(y, x, cells + x, e - x);
            x = e;
        }
    }
    attrset(A_NORMAL);
}
