/* settings: the COLLPROF_* environment variables, as one table.
 *
 * Offers: the table (name, type, default, help) that parses the environment in one place,
 * prints the environment section of `--help`, and generates docs/ENVIRONMENT.md. A bad value
 * gives one `collprof: WARN` line and the default, never an error: the shim must not take
 * a job down over a typo.
 */
#ifndef COLLPROF_SETTINGS_H
#define COLLPROF_SETTINGS_H

#include <stdio.h>

enum cp_gpu_timing {
    CP_GPU_TIMING_EVENTS = 0, /* CUDA events around each call */
    CP_GPU_TIMING_CUPTI = 1,  /* kernel activity records */
    CP_GPU_TIMING_OFF = 2,    /* host times only */
    CP_GPU_TIMING_SAMPLE = 3, /* events on every Nth call (gpu_timing_sample_n) */
};

typedef struct cp_settings {
    char dir[4096];            /* COLLPROF_DIR; empty: the default, chosen by the shim */
    int enable;                /* COLLPROF_ENABLE: 0 pure pass-through */
    int gpu_timing;            /* COLLPROF_GPU_TIMING: enum cp_gpu_timing */
    unsigned gpu_timing_sample_n;
    int stack_depth;           /* COLLPROF_STACK: 0..64, 0 off */
    int unwind_glibc;          /* COLLPROF_UNWIND=glibc: never load libunwind */
    unsigned file_mode;        /* COLLPROF_FILE_MODE: trace files' permission bits */
    int live;                  /* COLLPROF_LIVE */
    double hang_s;             /* COLLPROF_HANG_S: > 0 */
    int flush_ms;              /* COLLPROF_FLUSH_MS: 1..600000 */
    int buffer_mb;             /* COLLPROF_BUFFER_MB: 1..4096 */
    int debug;                 /* COLLPROF_DEBUG: enum cp_log_level */
} cp_settings;

/* Reads every variable from the environment (getenv), warns once per bad value, and sets
 * the log level. Returns the number of bad values found. */
int cp_settings_load(cp_settings *s);
/* The same over a lookup function, for tests (and for an environment that is not ours). */
int cp_settings_load_from(cp_settings *s, const char *(*lookup)(const char *name, void *ctx),
                          void *ctx);
/* All defaults, without reading anything. */
void cp_settings_defaults(cp_settings *s);

/* The environment section of --help (plain), or the table of docs/ENVIRONMENT.md (markdown). */
void cp_settings_print_help(FILE *out, int markdown);

/* "events", "cupti", "off", "sample" (the N is in gpu_timing_sample_n) */
const char *cp_gpu_timing_name(int mode);

#endif
