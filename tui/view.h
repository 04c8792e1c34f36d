/* tui/view: `collprof view DIR` on a terminal, over an analysis (analyzer.h) already made.
 *
 * Screens, keys and the drawing itself are view_draw.h's; this is the loop that reads keys
 * and paints with ncurses. Must not touch: the trace files, stdout's fate (the CLI's).
 */
#ifndef COLLPROF_TUI_VIEW_H
#define COLLPROF_TUI_VIEW_H

#include "analyzer/analyzer.h"

/* Runs the view until 'q'; the terminal is restored before it returns. 0, or -1 when the
 * terminal could not be set up or memory ran out. dir titles the screens. */
int cpt_view_run(const cpa_analysis *a, const char *dir);

#endif
