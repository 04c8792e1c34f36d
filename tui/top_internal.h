/* tui/top_internal: what the files drawing `collprof top` share (top_fmt.c, top_draw.c,
 * top_detail.c, and snapshot.c, whose text names and formats its columns as the screen
 * does); not for other parts. */
#ifndef COLLPROF_TUI_TOP_INTERNAL_H
#define COLLPROF_TUI_TOP_INTERNAL_H

#include <stddef.h>

#include "tui/top_draw.h"

/* "+1.20ms", "-250us", "0us" */
void cpt_fmt_late(char *buf, size_t len, double us);
/* "arrives 1.20ms after", "arrives 250us before", "arrives with" */
void cpt_fmt_arrives(char *buf, size_t len, double us);
/* calls/s: "1500", "123.5k", "1.2M" */
void cpt_fmt_rate(char *buf, size_t len, double v);
/* GB/s in 5 columns: "12.34", "123.4", "1234" */
void cpt_fmt_gbps(char *buf, size_t len, double gbps);

/* CPT_BAD (hung or past hang_s), CPT_WARN (past its typical time), CPT_DIM (exited), else
 * CPT_NORMAL: the role of a rank's in-flight cell. */
int cpt_in_flight_attr(const cpt_rank *r, double hang_s);

int cpt_draw_detail(const cpt_live *l, cpt_state *s, cpt_grid *g);
int cpt_draw_help(cpt_grid *g);

#endif
