/* tui/top_draw: the screens of `collprof top` drawn into a text grid, with no terminal.
 *
 * Offers the top's state (screen, sort, selection, scroll, filter), what each key does to it
 * (top_keys.c; top_screen.c maps ncurses keys onto enum cpt_key), and one function that renders
 * the current screen of a live model (tui/live.h) into a grid of printable ASCII with a
 * semantic role per cell (tui/grid.h). ncurses only copies the grid out (top_screen.c), so
 * every screen is tested on a model built in the test.
 *
 * Screens: the table (top_draw.c: a header with totals and the node's slowest rank, one row
 * per rank), a rank's detail (top_detail.c: its recent collectives) and the key help.
 */
#ifndef COLLPROF_TUI_TOP_DRAW_H
#define COLLPROF_TUI_TOP_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "tui/grid.h"
#include "tui/live.h"

/* Semantic roles of cells, the roles of the grid (tui/grid.h) top draws into; top_screen.c
 * picks colours (or none, NO_COLOR) for each. */
enum cpt_attr {
    CPT_NORMAL = 0,
    CPT_TITLE,     /* the header lines */
    CPT_HEADER,    /* column headings */
    CPT_SORTED,    /* the heading of the sort column */
    CPT_SELECTED,  /* the selected row */
    CPT_WARN,      /* a collective in flight past its typical time */
    CPT_BAD,       /* a collective in flight past COLLPROF_HANG_S, or reported hung */
    CPT_DIM,       /* exited ranks, hints */
    CPT_NATTRS,
};

enum cpt_screen { CPT_TABLE = 0, CPT_DETAIL, CPT_HELP };

/* Sort columns, in the order `s` cycles through them. Rank and host sort ascending, the
 * measures descending (the worst first); ties go by rank, then pid. */
enum cpt_sort {
    CPT_SORT_RANK = 0,
    CPT_SORT_HOST,
    CPT_SORT_CALLS,
    CPT_SORT_GBPS,
    CPT_SORT_NCCL,
    CPT_SORT_P50,
    CPT_SORT_AGE,
    CPT_SORT_LATE,
    CPT_NSORTS,
};

#define CPT_FILTER_BYTES 64

typedef struct cpt_state {
    int screen;              /* enum cpt_screen */
    int prev_screen;         /* where help goes back to */
    int sort;                /* enum cpt_sort */
    size_t sel;              /* index of the selected row among the shown ones */
    size_t scroll;           /* first row shown */
    char sel_path[CP_STATS_PATH_BYTES]; /* the selected rank's block: the selection follows it
                                           across scans and sorts */
    size_t detail_scroll;    /* first recent collective shown in the detail */
    char filter[CPT_FILTER_BYTES]; /* rows whose host or rank holds this; "" all */
    int editing;             /* the filter is being typed */
    double hang_s;           /* COLLPROF_HANG_S */
    const char *error;       /* the last scan's failure, shown in place of the rows; NULL none */
    double delay_s;          /* shown in the header */
} cpt_state;

void cpt_state_init(cpt_state *s, double hang_s, double delay_s);

/* Keys, as top_screen.c hands them over: printable ASCII as itself, the others from here. */
enum cpt_key {
    CPT_KEY_UP = 0x100,
    CPT_KEY_DOWN,
    CPT_KEY_PGUP,
    CPT_KEY_PGDN,
    CPT_KEY_HOME,
    CPT_KEY_END,
    CPT_KEY_ENTER,
    CPT_KEY_ESC,
    CPT_KEY_BACKSPACE,
};

enum cpt_result { CPT_KEEP = 0, CPT_REDRAW = 1, CPT_QUIT = 2 };

/* Applies a key; rows_per_page is what a page key moves (the last draw's return). */
int cpt_key(const cpt_live *l, cpt_state *s, int key, int rows_per_page);

/* The rows the table shows: indexes into l->ranks, filtered and sorted. Returns how many
 * (at most cap). */
size_t cpt_rows(const cpt_live *l, const cpt_state *s, size_t *idx, size_t cap);

/* The selected row among idx[0..n) (cpt_rows): the row of sel_path when it is there, else
 * sel clamped; sel and sel_path are updated to it. */
size_t cpt_settle(const cpt_live *l, cpt_state *s, const size_t *idx, size_t n);

/* Renders the current screen into g, clamping selection and scroll to what there is.
 * Returns the number of list rows per page. */
int cpt_draw(const cpt_live *l, cpt_state *s, cpt_grid *g);

/* Short formats the table uses (exposed for the text snapshot): "850us", "1.23ms", "12.3s". */
void cpt_fmt_us(char *buf, size_t len, double us);
/* "512B", "64.0K", "1.00M", "2.00G" (binary units). */
void cpt_fmt_bytes(char *buf, size_t len, uint64_t bytes);

#endif
