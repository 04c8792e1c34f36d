/* view_internal: what the view's drawing files share; not part of tui/'s API. One way:
 * view_draw.c (state, actions, summary) calls the screens of view_lanes.c and
 * view_problems.c, and all take the filter test, the list window and the rank rows from
 * view_rows.c. */
#ifndef COLLPROF_TUI_VIEW_INTERNAL_H
#define COLLPROF_TUI_VIEW_INTERNAL_H

#include "tui/view_draw.h"

/* Whether label holds the state's filter, ignoring case ("" holds everything). */
int cpv_match(const cpv_state *s, const char *label);

/* Clamps the screen's selection to n rows and scrolls so it shows in a window of page
 * rows. Returns the first row to draw. */
size_t cpv_window(cpv_state *s, int screen, size_t n, int page);

/* "rank 3  node-a" for rank index i (host cut to fit width). */
void cpv_rank_label(const cpv_data *d, size_t i, char *buf, size_t len, int host_cols);

/* The screens in view_lanes.c and view_problems.c; each draws rows y0..y1 inclusive and
 * returns its page. */
int cpv_draw_stragglers(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1);
int cpv_draw_timeline(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1);
int cpv_draw_detail(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1);
/* view_problems.c: screen 3, and the collective of its line (SIZE_MAX none). */
int cpv_draw_problems(const cpv_data *d, cpv_state *s, cpv_grid *g, int y0, int y1);
size_t cpv_problems_op(const cpv_data *d, const cpv_state *s, size_t line);

/* The actions of the timeline and detail screens (view_lanes.c): 1 when handled. */
int cpv_lanes_act(const cpv_data *d, cpv_state *s, int action);
/* The collective Enter opens from the selected row of the stragglers or timeline screen;
 * SIZE_MAX none. */
size_t cpv_enter_op(const cpv_data *d, const cpv_state *s);
/* The rows the timeline and stragglers list, filtered: model rank indexes into out (nranks
 * room). */
size_t cpv_rank_rows(const cpv_data *d, const cpv_state *s, int by_lateness, size_t *out);

#endif
