/* exporters: an analysis (analyzer.h's cpa_analysis) written out for people and for tools.
 *
 * Offers one function per format, each a pure function of the analysis it is given: it
 * reads the model, the matched operations and every finding, never the trace files, and
 * writes to a stdio stream. So each can be tested on an analysis built by hand, and the
 * CLI (`collprof report`, `collprof export`) only picks a format and a destination.
 *
 *   cpx_report_text        the one-screen summary `collprof report` prints
 *   cpx_report_json        the contract's JSON object (shared/INTERFACES.md) and more keys
 *   cpx_report_nccl_tests  the operations in nccl-tests' table (`report --table nccl-tests`)
 *   cpx_export_perfetto    Chrome / Perfetto trace-event JSON, streamed event by event
 *   cpx_export_csv         one row per collective per rank (RFC 4180 quoting)
 *   cpx_export_prometheus  text exposition format for node_exporter's textfile collector
 *
 * docs/REPORT.md describes every output. Strings from the trace (hostnames, call sites,
 * paths) are cleaned of control characters and invalid UTF-8 (common/text.h) in every one.
 * Times are on the analysis' job time line (cpa_clock_job_ns), relative to its start.
 *
 * Each returns 0, or -1 when the stream failed (ferror: a full disk, a closed pipe) or
 * memory ran out (errno ENOMEM); a writer stops at the first failure it sees, so nothing
 * is formatted for a reader that went away. Must not touch: the trace files, the analysis
 * (const), the process' exit status or stdout's fate (the CLI's).
 */
#ifndef COLLPROF_EXPORTERS_H
#define COLLPROF_EXPORTERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyzer/analyzer.h"

struct json_object;

#define CPX_TOP_DEFAULT 10 /* rows per table of the text report when not told */

typedef struct cpx_text_options {
    size_t top;        /* rows per table (ops, stragglers, hangs, mismatches); 0: default */
    int color;         /* ANSI colour and bold: the caller decides (cpx_want_color) */
    const char *title; /* shown in the heading (the trace directory); NULL: none */
    cpa_rows rows;     /* the op table's rows: CPA_ROWS_EXACT (0, the analysis' own) or
                        * another cut (CPA_ROWS_BUCKETS: `report --buckets`) */
} cpx_text_options;

/* The one-screen summary; fits 80 columns. */
int cpx_report_text(FILE *out, const cpa_analysis *a, const cpx_text_options *o);

/* Whether text for the terminal on fd should be coloured: fd is a TTY, NO_COLOR is unset
 * or empty (no-color.org) and TERM is not "dumb". */
int cpx_want_color(int fd);

/* The report as a json-c object (release it with json_object_put), with arrays cut to top
 * rows each (0: every row). NULL when memory ran out. */
struct json_object *cpx_report_json_object(const cpa_analysis *a, size_t top);
/* The same, printed as one document and a newline. */
int cpx_report_json(FILE *out, const cpa_analysis *a, size_t top);

/* Every operation with a known duration in nccl-tests' rows and columns, one block per op
 * and communicator size; title (the trace directory) in the first '#' line, NULL: none. */
int cpx_report_nccl_tests(FILE *out, const cpa_analysis *a, const char *title);

int cpx_export_perfetto(FILE *out, const cpa_analysis *a);

/* A piece of a job for the Perfetto export (issue 20): big traces are more than Perfetto UI
 * opens comfortably. A call is in the piece when its rank is kept and its slice overlaps
 * [t0_ns, t1_ns] (job time since the job's start); flows then join the piece's own first and
 * last arrivals, and instants outside it are left out. With max_events, the window's start
 * moves later until the piece holds about that many events: the end of a job is where a hang
 * is, and any stretch of a healthy one shows its pattern. */
typedef struct cpx_piece {
    int64_t t0_ns, t1_ns;     /* INT64_MIN, INT64_MAX: open */
    const uint8_t *rank_keep; /* per model rank index, 1 kept; NULL: every rank */
    uint64_t max_events;      /* 0: no cap */
    int proto;                /* Perfetto's protobuf (perfetto_proto.c), not JSON */
} cpx_piece;

typedef struct cpx_piece_said {
    uint64_t events;          /* trace events written */
    uint64_t calls;           /* calls written */
    uint64_t calls_left_out;  /* calls of the trace not written */
    int capped;               /* max_events moved the start: t0_ns is where */
    int64_t t0_ns, t1_ns;     /* the window used (job time since the start) */
} cpx_piece_said;

/* The events a piece holds before any cap (its calls and their waits): what decides
 * between JSON and protobuf. */
uint64_t cpx_perfetto_piece_events(const cpa_analysis *a, const cpx_piece *piece);
/* 0, or -1 (errno: ENOMEM, or the stream's). piece NULL: the whole job. */
int cpx_export_perfetto_piece(FILE *out, const cpa_analysis *a, const cpx_piece *piece,
                              cpx_piece_said *said);
/* The same, counting the trace events written into *events (throughput figures). */
int cpx_export_perfetto_events(FILE *out, const cpa_analysis *a, uint64_t *events);
int cpx_export_csv(FILE *out, const cpa_analysis *a);
int cpx_export_prometheus(FILE *out, const cpa_analysis *a);

#endif
