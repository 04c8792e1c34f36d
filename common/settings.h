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
    CP_GPU_TIMING_AUTO = 4,   /* NCCL's profiler plugin, else events under COLLPROF_OVERHEAD */
    CP_GPU_TIMING_PLUGIN = 5, /* NCCL's profiler plugin only: never an event */
};

/* COLLPROF_LIVE_DIR's default: where the stats blocks are made and looked for. */
#define CP_LIVE_DIR_DEFAULT "/dev/shm"
/* COLLPROF_MAX_MB's default and smallest value (MiB): settings.c says why. */
#define CP_MAX_MB_DEFAULT 2048
#define CP_MAX_MB_MIN 0.125
/* COLLPROF_HANG_S's default (seconds): the table's and every reader's without settings. */
#define CP_HANG_S_DEFAULT 60

typedef struct cp_settings {
    char dir[4096];            /* COLLPROF_DIR; empty: the default, chosen by the shim */
    int enable;                /* COLLPROF_ENABLE: 0 pure pass-through */
    int gpu_timing;            /* COLLPROF_GPU_TIMING: enum cp_gpu_timing */
    unsigned gpu_timing_sample_n;
    double overhead_pct;       /* COLLPROF_OVERHEAD: events fallback's share of thread time */
    int stack_depth;           /* COLLPROF_STACK: 0..64, 0 off */
    int unwind_glibc;          /* COLLPROF_UNWIND=glibc: never load libunwind */
    unsigned file_mode;        /* COLLPROF_FILE_MODE: trace files' permission bits */
    int live;                  /* COLLPROF_LIVE */
    char live_dir[4096];       /* COLLPROF_LIVE_DIR: the stats blocks' folder, never empty */
    double hang_s;             /* COLLPROF_HANG_S: > 0 */
    int flush_ms;              /* COLLPROF_FLUSH_MS: 1..600000 */
    int buffer_mb;             /* COLLPROF_BUFFER_MB: 1..4096 */
    unsigned long long max_bytes; /* COLLPROF_MAX_MB in bytes: the trace's cap, 0 none */
    int debug;                 /* COLLPROF_DEBUG: enum cp_log_level */
} cp_settings;

/* Reads every variable from the environment (getenv), warns once per bad value, and sets
 * the log level. Returns the number of bad values found. */
int cp_settings_load(cp_settings *s);
/* The same over a lookup function, for tests (and for an environment that is not ours). */
int cp_settings_load_from(cp_settings *s, const char *(*lookup)(const char *name, void *ctx),
                          void *ctx);
/* Whether `value` is good for the variable `name`: 0, or -1 with *why the shape of a good one
 * (what a command line that sets the variable for its child checks before it starts it). */
int cp_settings_check(const char *name, const char *value, const char **why);
/* The same values as cp_settings_load, without a side effect: no WARN, no log level (for a
 * library's constructor, which must decide before the job's first call and warn at it). */
int cp_settings_peek(cp_settings *s);
/* All defaults, without reading anything. */
void cp_settings_defaults(cp_settings *s);

/* The environment section of --help (plain), or the table of docs/ENVIRONMENT.md (markdown). */
void cp_settings_print_help(FILE *out, int markdown);


#endif
