/* tui/view_draw: the screens of `collprof view` drawn into a text grid, with no terminal.
 *
 * Offers the view's state (which screen, selection, scroll, timeline window and zoom,
 * filter), the actions keys stand for (view_screen.c maps ncurses keys onto them), and one
 * function that renders the current screen of an analysis into a grid of characters with
 * an attribute per cell. ncurses only copies the grid out (view_screen.c); tests read the
 * grid as text, so every screen is checked on an analysis built in the test.
 *
 * Screens: 1 summary (the job, the op table), 2 stragglers (ranked, each with a lateness
 * strip over the job's collectives), 3 hangs and mismatches (the field diff per rank, call
 * sites), 4 timeline (rows = ranks, x = job time, scroll and zoom), 5 detail of one
 * collective (each rank's arrival, start, end, wait). Reads the analysis, never files.
 * Strings from the trace are cleaned to printable ASCII before they reach a cell.
 */
#ifndef COLLPROF_TUI_VIEW_DRAW_H
#define COLLPROF_TUI_VIEW_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "analyzer/analyzer.h"
#include "present/present.h"
#include "tui/grid.h"

enum cpv_screen {
    CPV_SUMMARY = 0,
    CPV_STRAGGLERS = 1,
    CPV_PROBLEMS = 2,
    CPV_TIMELINE = 3,
    CPV_DETAIL = 4,
    CPV_NSCREENS = 5,
};

/* Semantic roles of cells; view_screen.c picks colours (or none) for each. */
enum cpv_attr {
    CPV_NORMAL = 0,
    CPV_TITLE,     /* the top bar and section titles */
    CPV_HEADER,    /* column headings */
    CPV_SELECTED,  /* the selected row */
    CPV_BAD,       /* hangs, mismatches, culprits */
    CPV_WARN,      /* stragglers, lost records */
    CPV_LATE,      /* a late arrival (strip and timeline) */
    CPV_WAIT,      /* a rank waiting for the late one */
    CPV_DIM,       /* hints, axis */
    CPV_NATTRS,
};

/* The view draws into the shared grid (tui/grid.h), a role of enum cpv_attr per cell; these
 * are its names for it. */
typedef cpt_grid cpv_grid;
#define cpv_grid_init cpt_grid_init
#define cpv_grid_free cpt_grid_free
#define cpv_grid_row cpt_grid_row

/* What the view precomputes once from the analysis. */
typedef struct cpv_data {
    const cpa_analysis *a;
    const char *title;      /* the trace directory, shown in the top bar */
    size_t *coll_order;     /* matched collectives (complete or not) by latest arrival */
    size_t ncoll;
    size_t *coll_pos;       /* per matched op: its place in coll_order, SIZE_MAX for p2p */
    size_t *p2p_order;      /* matched send/recv pairs by latest arrival: the detail steps */
    size_t np2p;            /* through them when it shows one */
    size_t *rank_order;     /* model rank indexes, most late (sum of op_late_us) first */
    uint64_t *rank_late_n;  /* per model rank: collectives it was the late one in */
    double *rank_late_us;   /* ... and their lateness summed */
    double max_late_us;     /* the worst single lateness of the job */
    double t0_us, t1_us;    /* the timeline's extent, microseconds on the job line: the
                             * calls that took part in an operation, and a margin */
    /* Per rank, per block of CPV_BLOCK_CALLS calls (file order): the earliest start and
     * latest end of their slices (us), so the timeline skips what its window does not
     * show at the cost of 16 bytes a block, whatever order the calls are in. */
    double **blk_lo, **blk_hi;
} cpv_data;

#define CPV_BLOCK_CALLS 256

int cpv_data_init(cpv_data *d, const cpa_analysis *a, const char *title);
void cpv_data_free(cpv_data *d);

#define CPV_FILTER_BYTES 64

typedef struct cpv_state {
    int screen;             /* enum cpv_screen */
    int help;               /* the help overlay is up */
    int plain;              /* text output: no top bar of keys, no footer, no selection */
    size_t sel[CPV_NSCREENS];    /* selected row of each list screen */
    size_t scroll[CPV_NSCREENS]; /* first row shown */
    double view_us;         /* timeline: job time at the left edge */
    double us_per_col;      /* timeline: zoom; 0 = fit the job on the next draw */
    int lane_cols;          /* timeline: columns of time the last draw had */
    size_t detail_op;       /* detail: index into matched.ops; SIZE_MAX none chosen */
    int prev_screen;        /* where Esc/Backspace goes back to from the detail */
    char filter[CPV_FILTER_BYTES]; /* rows whose label holds this (any case); "" all */
} cpv_state;

void cpv_state_init(cpv_state *s);

enum cpv_action {
    CPV_ACT_UP = 1,
    CPV_ACT_DOWN,
    CPV_ACT_PGUP,
    CPV_ACT_PGDN,
    CPV_ACT_HOME,
    CPV_ACT_END,
    CPV_ACT_LEFT,      /* timeline: scroll back in time; detail: the previous collective */
    CPV_ACT_RIGHT,
    CPV_ACT_ZOOM_IN,   /* timeline: '+' */
    CPV_ACT_ZOOM_OUT,  /* '-' */
    CPV_ACT_ZOOM_FIT,  /* '0' */
    CPV_ACT_ENTER,     /* a collective's detail from a timeline, straggler or hang row */
    CPV_ACT_BACK,      /* Esc: leave help, or the detail for the screen it came from */
    CPV_ACT_NEXT,      /* Tab */
    CPV_ACT_HELP,      /* 'h' */
};

/* Applies an action; rows_per_page is what a page key moves (the last draw's list height).
 * Screen keys: cpv_goto(s, CPV_TIMELINE). */
void cpv_act(const cpv_data *d, cpv_state *s, int action, int rows_per_page);
void cpv_goto(cpv_state *s, int screen);

/* Renders the current screen (or the help over it) into g, clamping the selection and
 * scroll to what there is. Returns the number of list rows the screen shows per page. */
int cpv_draw(const cpv_data *d, cpv_state *s, cpv_grid *g);

/* The summary as plain text lines of width w (what `collprof view` prints when stdout is
 * not a terminal): as many lines as it has, trailing blanks cut. NULL out of memory. */
char *cpv_summary_text(const cpv_data *d, int w);

#endif
