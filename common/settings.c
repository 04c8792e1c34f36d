#include "common/settings.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

#define CP_STR(x) #x
#define CP_XSTR(x) CP_STR(x)

/* One row per variable. `parse` returns 0 and stores the value, or returns -1 and leaves
 * `why` saying what a good value looks like; the caller then warns and keeps the default. */
typedef struct setting {
    const char *name;
    const char *values;   /* the shape of a good value, for --help and the docs */
    const char *fallback; /* the default, as text */
    const char *help;
    int (*parse)(cp_settings *s, const char *text, const char **why);
} setting;

static int parse_long(const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(text, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_dir(cp_settings *s, const char *text, const char **why)
{
    if (strlen(text) >= sizeof s->dir) {
        *why = "a path shorter than 4096 bytes";
        return -1;
    }
    strcpy(s->dir, text);
    return 0;
}

static int parse_live_dir(cp_settings *s, const char *text, const char **why)
{
    if (strlen(text) >= sizeof s->live_dir) {
        *why = "a path shorter than 4096 bytes";
        return -1;
    }
    strcpy(s->live_dir, text);
    return 0;
}

static int parse_enable(cp_settings *s, const char *text, const char **why)
{
    *why = "0 or 1";
    return parse_bool(text, &s->enable);
}

static int parse_live(cp_settings *s, const char *text, const char **why)
{
    *why = "0 or 1";
    return parse_bool(text, &s->live);
}

static int parse_gpu_timing(cp_settings *s, const char *text, const char **why)
{
    *why = "auto, plugin, events, cupti, off or sample:N with N >= 1";
    if (strcasecmp(text, "auto") == 0)
        return s->gpu_timing = CP_GPU_TIMING_AUTO, 0;
    if (strcasecmp(text, "plugin") == 0)
        return s->gpu_timing = CP_GPU_TIMING_PLUGIN, 0;
    if (strcasecmp(text, "events") == 0)
        return s->gpu_timing = CP_GPU_TIMING_EVENTS, 0;
    if (strcasecmp(text, "cupti") == 0)
        return s->gpu_timing = CP_GPU_TIMING_CUPTI, 0;
    if (strcasecmp(text, "off") == 0)
        return s->gpu_timing = CP_GPU_TIMING_OFF, 0;
    long n;
    if (strncasecmp(text, "sample:", 7) == 0 && parse_long(text + 7, 1, INT_MAX, &n) == 0) {
        s->gpu_timing = CP_GPU_TIMING_SAMPLE;
        s->gpu_timing_sample_n = (unsigned)n;
        return 0;
    }
    return -1;
}

static int parse_overhead(cp_settings *s, const char *text, const char **why)
{
    *why = "a percentage above 0 and at most 100";
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v > 0 && v <= 100))
        return -1;
    while (*end == ' ')
        end++;
    if (*end == '%')
        end++;
    if (*end)
        return -1;
    s->overhead_pct = v;
    return 0;
}

static int parse_stack(cp_settings *s, const char *text, const char **why)
{
    long v;
    *why = "an integer from 0 to 64";
    if (parse_long(text, 0, 64, &v))
        return -1;
    s->stack_depth = (int)v;
    return 0;
}

static int parse_unwind(cp_settings *s, const char *text, const char **why)
{
    *why = "auto or glibc";
    if (strcasecmp(text, "auto") == 0)
        return s->unwind_glibc = 0, 0;
    if (strcasecmp(text, "glibc") == 0)
        return s->unwind_glibc = 1, 0;
    return -1;
}

static int parse_file_mode(cp_settings *s, const char *text, const char **why)
{
    *why = "octal permission bits from 0400 to 0777, with the owner's read and write";
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 8);
    /* the owner must keep read and write: the shim writes the file, collprof reads it */
    if (errno || end == text || *end != '\0' || v > 0777 || (v & 0600) != 0600)
        return -1;
    s->file_mode = (unsigned)v;
    return 0;
}

static int parse_hang(cp_settings *s, const char *text, const char **why)
{
    *why = "a number of seconds above 0 and at most 1000000";
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v <= 0 || v > 1e6)
        return -1;
    s->hang_s = v;
    return 0;
}

static int parse_flush(cp_settings *s, const char *text, const char **why)
{
    long v;
    *why = "an integer from 1 to 600000 (milliseconds)";
    if (parse_long(text, 1, 600000, &v))
        return -1;
    s->flush_ms = (int)v;
    return 0;
}

static int parse_buffer(cp_settings *s, const char *text, const char **why)
{
    long v;
    *why = "an integer from 1 to 4096 (MiB)";
    if (parse_long(text, 1, 4096, &v))
        return -1;
    s->buffer_mb = (int)v;
    return 0;
}

/* A rank's trace past this is rotated (trace_writer.h). 2 GiB holds about 16 million calls
 * (some 130 bytes a call with its DONE): days of a training job's few hundred calls a step,
 * hours of the busiest, and still a disk's share per rank that a node of 8 ranks and a
 * parallel file system both take. Fractions of a MiB down to 1/8 are for tests. */
static int parse_max_mb(cp_settings *s, const char *text, const char **why)
{
    *why = "a number of MiB from " CP_XSTR(CP_MAX_MB_MIN) " to 16777216, or 0 or unlimited for "
           "no cap";
    if (strcasecmp(text, "unlimited") == 0)
        return s->max_bytes = 0, 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v < 0 || v > 16777216.0 ||
        (v > 0 && v < CP_MAX_MB_MIN))
        return -1;
    s->max_bytes = (unsigned long long)(v * 1048576.0);
    return 0;
}

static int parse_debug(cp_settings *s, const char *text, const char **why)
{
    *why = "WARN, INFO or TRACE";
    int level = cp_log_level_parse(text);
    if (level < 0)
        return -1;
    s->debug = level;
    return 0;
}

/* COLLPROF_DEBUG comes first so that the level is set before the others are read. */
static const setting table[] = {
    {"COLLPROF_DEBUG", "WARN|INFO|TRACE", "WARN",
     "lines on stderr, prefixed `collprof:`, up to this level", parse_debug},
    {"COLLPROF_DIR", "PATH", "./collprof-<jobid>",
     "trace directory of the job, one file per rank; jobid from TORCHELASTIC_RUN_ID, "
     "SLURM_JOB_ID, PBS_JOBID, OMPI's jobid, else the start time; a relative one (and the "
     "default) is taken against the working directory at the trace's start (the first "
     "recorded call), so a later `cd` changes nothing",
     parse_dir},
    {"COLLPROF_ENABLE", "0|1", "1", "0 turns the shim into a pure pass-through", parse_enable},
    {"COLLPROF_FILE_MODE", "OCTAL", "0600",
     "trace files' permission bits (they hold host names, job ids, call stacks); a directory "
     "the shim creates gets the same, with x where r is",
     parse_file_mode},
    {"COLLPROF_GPU_TIMING", "auto|plugin|events|cupti|off|sample:N", "auto",
     "how GPU start/end times are taken: auto takes them from NCCL's profiler plugin (the shim "
     "is one) and falls back to CUDA events, within COLLPROF_OVERHEAD, where NCCL gives none; "
     "plugin never records an event; events times every call; sample:N every Nth; cupti "
     "takes them from CUPTI's kernel records (libcupti beside the job's CUDA, opened at run "
     "time; events if there is none)",
     parse_gpu_timing},
    {"COLLPROF_OVERHEAD", "PERCENT", "0.5",
     "auto mode: the events fallback's added host time stays under this share of each "
     "thread's time (the first calls of each op, size and communicator are always timed)",
     parse_overhead},
    {"COLLPROF_STACK", "0..64", "8", "call-site stack depth (0 = off)", parse_stack},
    {"COLLPROF_UNWIND", "auto|glibc", "auto",
     "call-site stacks: auto opens libunwind.so.8 when the machine has it (it names static "
     "functions), else uses glibc's backtrace and dladdr; glibc never loads libunwind",
     parse_unwind},
    {"COLLPROF_LIVE", "0|1", "1", "0 disables the /dev/shm stats block that `collprof top` reads",
     parse_live},
    {"COLLPROF_LIVE_DIR", "PATH", CP_LIVE_DIR_DEFAULT,
     "the folder of the live stats blocks: the shim makes its block there and `collprof top` "
     "reads it (for tests, and for tools that must not touch the real /dev/shm)",
     parse_live_dir},
    {"COLLPROF_HANG_S", "SECONDS", CP_XSTR(CP_HANG_S_DEFAULT),
     "a collective in flight this long is reported as a suspected hang", parse_hang},
    {"COLLPROF_FLUSH_MS", "1..600000", "200",
     "the trace on disk is never further behind than this", parse_flush},
    {"COLLPROF_BUFFER_MB", "1..4096", "16",
     "per-process ring size; when full, records are counted as lost, never block", parse_buffer},
    {"COLLPROF_MAX_MB", "MIB|0|unlimited", CP_XSTR(CP_MAX_MB_DEFAULT),
     "a process's trace past this many MiB keeps its newest records: it is written in 8 "
     "segment files (name.sNNNNNN.cptrace after the first), the oldest deleted as the next "
     "starts, and the records it held counted lost (cause rotated); fractions down to "
     CP_XSTR(CP_MAX_MB_MIN) "; 0 or unlimited: no cap",
     parse_max_mb},
};

#define TABLE_LEN (sizeof table / sizeof table[0])

int cp_settings_check(const char *name, const char *value, const char **why)
{
    *why = "a variable collprof does not know";
    for (size_t i = 0; i < TABLE_LEN; i++) {
        if (strcmp(table[i].name, name) == 0) {
            cp_settings scratch;
            memset(&scratch, 0, sizeof scratch);
            return table[i].parse(&scratch, value, why);
        }
    }
    return -1;
}

void cp_settings_defaults(cp_settings *s)
{
    memset(s, 0, sizeof *s);
    const char *why;
    for (size_t i = 0; i < TABLE_LEN; i++)
        if (table[i].parse != parse_dir && table[i].parse(s, table[i].fallback, &why) != 0)
            abort(); /* a default that its own parser refuses is a bug in this table */
}

static const char *getenv_lookup(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

/* warn: one WARN a bad value and COLLPROF_DEBUG's level set; else nothing but *s changes. */
static int load_from(cp_settings *s, const char *(*lookup)(const char *name, void *ctx),
                     void *ctx, int warn)
{
    cp_settings_defaults(s);
    int bad = 0;
    for (size_t i = 0; i < TABLE_LEN; i++) {
        const char *text = lookup(table[i].name, ctx);
        if (!text || !*text) /* unset and empty mean the same, as in NCCL */
            continue;
        const char *why = "a valid value";
        cp_settings trial = *s;
        if (table[i].parse(&trial, text, &why) == 0) {
            *s = trial;
        } else {
            bad++;
            if (warn)
                cp_warn("%s='%.200s' is not %s; using %s", table[i].name, text, why,
                        table[i].fallback);
        }
        if (warn && table[i].parse == parse_debug)
            cp_log_set_level(s->debug);
    }
    return bad;
}

int cp_settings_load_from(cp_settings *s, const char *(*lookup)(const char *name, void *ctx),
                          void *ctx)
{
    return load_from(s, lookup, ctx, 1);
}

int cp_settings_peek(cp_settings *s) { return load_from(s, getenv_lookup, NULL, 0); }

int cp_settings_load(cp_settings *s) { return cp_settings_load_from(s, getenv_lookup, NULL); }

/* A '|' inside a markdown table cell ends the cell, even inside backticks. */
static void put_md_cell(FILE *out, const char *text)
{
    for (; *text; text++) {
        if (*text == '|')
            fputc('\\', out);
        fputc(*text, out);
    }
}

void cp_settings_print_help(FILE *out, int markdown)
{
    if (markdown) {
        fputs("| variable | values | default | meaning |\n|---|---|---|---|\n", out);
        for (size_t i = 0; i < TABLE_LEN; i++) {
            fprintf(out, "| %s | `", table[i].name);
            put_md_cell(out, table[i].values);
            fprintf(out, "` | `%s` | ", table[i].fallback);
            put_md_cell(out, table[i].help);
            fputs(" |\n", out);
        }
        return;
    }
    fputs("Environment (a bad value gives one warning and the default):\n", out);
    for (size_t i = 0; i < TABLE_LEN; i++)
        fprintf(out, "  %-20s %s (default %s)\n  %-20s   %s\n", table[i].name, table[i].values,
                table[i].fallback, "", table[i].help);
}

