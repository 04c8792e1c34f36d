/* tui/top: the interactive screen of `collprof top` (ncurses). The text snapshot (--once,
 * --json, no TTY) is cli/cmd_top.c's; both read the live model of tui/live.h.
 */
#ifndef COLLPROF_TUI_TOP_H
#define COLLPROF_TUI_TOP_H

#include <sys/types.h>

#include "common/settings.h"

/* Runs the screen on the terminal until q (or SIGINT, SIGTERM, SIGHUP), scanning the
 * settings' live_dir for the blocks uid may read (0: all) every delay_s seconds, marking as
 * hung what their hang_s says (the caller has read them, and warned of a bad value once).
 * The terminal is restored on every way out. Returns 0, or 3 when the terminal cannot be
 * used (one line on stderr). */
int cpt_top_run(const cp_settings *set, uid_t uid, double delay_s);

#endif
