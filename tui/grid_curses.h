/* tui/grid_curses: a text grid (tui/grid.h) onto an ncurses screen, for the screens' loops
 * (top_screen.c, view_screen.c). */
#ifndef COLLPROF_TUI_GRID_CURSES_H
#define COLLPROF_TUI_GRID_CURSES_H

#include <curses.h>

#include "tui/grid.h"

/* Starts colour when the terminal has it and NO_COLOR (https://no-color.org) is not set,
 * with the terminal's own background as colour -1. 1 when colours are to be used; else the
 * screen picks bold, reverse and dim only. After newterm. */
int cpt_grid_start_colour(void);

/* Copies g onto stdscr from its top left, what fits on the terminal, each cell with
 * role_attr[its role] (A_NORMAL for a role at or past nroles). Does not refresh. */
void cpt_grid_blit(const cpt_grid *g, const chtype *role_attr, int nroles);

#endif
