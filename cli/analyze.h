/* analyze: what the verbs that read a whole trace directory share (report, export).
 *
 * Offers: the analysis of DIR with its one-line error, a progress line on a terminal when
 * it takes a while, and the trace's warnings as `collprof: WARN` lines for outputs that
 * have no room for them (JSON, the export formats).
 */
#ifndef COLLPROF_CLI_ANALYZE_H
#define COLLPROF_CLI_ANALYZE_H

#include <stddef.h>

#include "analyzer/analyzer.h"

/* Analyses dir into *a. Returns CLI_GO_ON, or the exit status once one line went to stderr
 * (CP_EXIT_USAGE: nothing readable there; CP_EXIT_CANNOT_RUN: out of memory). While it
 * runs, stderr shows a "\r" progress line when it is a terminal and more than two seconds
 * have passed; the line is cleared before this returns. */
int cli_analyze(const char *verb, const char *dir, cpa_analysis *a);

/* The model's warnings as WARN lines on stderr, at most max of them and then a count. */
void cli_warn_trace(const cpa_analysis *a, size_t max);

#endif
