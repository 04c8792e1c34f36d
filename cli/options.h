/* options: command-line options as data (git's parse-options).
 *
 * Offers: each verb declares one `struct cli_command` (usage lines, an option table, how many
 * arguments it takes); cli_parse() parses argv with it and cli_usage() prints `--help` from
 * the very same table, so the help can never drift from what is accepted. Every problem
 * (unknown option, missing or bad value, wrong argument count) is one line on stderr naming
 * the verb, and the verb returns CP_EXIT_USAGE.
 *
 * Accepted forms: `--name`, `--name VALUE`, `--name=VALUE`, `-x`, `-x VALUE`, `-xVALUE`,
 * and `--` to end the options. Options and arguments may be mixed (`dump DIR --json`)
 * unless the command sets CLI_STOP_AT_ARG. `-h` and `--help` are added to every table.
 * Long names are never abbreviated: scripts must not break when an option is added.
 */
#ifndef COLLPROF_CLI_OPTIONS_H
#define COLLPROF_CLI_OPTIONS_H

#include <stdio.h>

enum cli_opt_type {
    CLI_OPT_END = 0,
    CLI_OPT_BOOL,    /* int *: set to 1 */
    CLI_OPT_SET_INT, /* int *: set to `set_to`; another option already set it: a conflict */
    CLI_OPT_INT,     /* long *: a whole number within [min, max] */
    CLI_OPT_DOUBLE,  /* double *: a number within [min, max] */
    CLI_OPT_STRING,  /* const char **: the argument itself (not copied) */
};

struct cli_option {
    enum cli_opt_type type;
    char short_name;       /* 0: none */
    const char *long_name; /* without the dashes; NULL: none */
    void *value;
    const char *argh;      /* the value's name in --help and in messages: "N", "FILE" */
    const char *help;
    int set_to;            /* CLI_OPT_SET_INT */
    double min, max;       /* CLI_OPT_INT, CLI_OPT_DOUBLE */
};

#define CLI_BOOL(s, l, v, h) { CLI_OPT_BOOL, (s), (l), (v), NULL, (h), 1, 0, 0 }
#define CLI_SET_INT(s, l, v, i, h) { CLI_OPT_SET_INT, (s), (l), (v), NULL, (h), (i), 0, 0 }
#define CLI_INT(s, l, v, a, lo, hi, h) { CLI_OPT_INT, (s), (l), (v), (a), (h), 0, (lo), (hi) }
#define CLI_DOUBLE(s, l, v, a, lo, hi, h) \
    { CLI_OPT_DOUBLE, (s), (l), (v), (a), (h), 0, (lo), (hi) }
#define CLI_STRING(s, l, v, a, h) { CLI_OPT_STRING, (s), (l), (v), (a), (h), 0, 0, 0 }
#define CLI_END() { CLI_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, 0 }

enum cli_parse_flags {
    /* Options end at the first argument (`run -- CMD`, `run python --help`): what follows
     * belongs to the child. */
    CLI_STOP_AT_ARG = 1u << 0,
};

struct cli_command {
    const char *verb;
    const char *const *usage; /* NULL-terminated synopses, without "collprof " */
    const char *about;        /* a paragraph after the synopses; may be NULL */
    const struct cli_option *options; /* ends with CLI_END() */
    const char *args;         /* the arguments' name in messages: "DIR", "CMD..." */
    int min_args, max_args;   /* max_args -1: no limit */
    unsigned flags;           /* enum cli_parse_flags */
    const char *notes;        /* text after the options: exit codes, details; may be NULL */
};

/* The verb goes on. Any other return of cli_parse() is the verb's exit status. */
#define CLI_GO_ON (-1)

/* Parses argv[1..argc) (argv[0] is the verb) with c's table. Returns CLI_GO_ON with the
 * arguments moved to the front of argv+1 and their count in *nargs; or CP_EXIT_OK once
 * the help was printed on stdout; or CP_EXIT_USAGE once one line went to stderr. */
int cli_parse(const struct cli_command *c, int argc, char **argv, int *nargs);

/* The `--help` text, generated from c. */
void cli_usage(const struct cli_command *c, FILE *out);

/* One line, `collprof: <verb>: <message> (see 'collprof <verb> --help')`, and returns
 * CP_EXIT_USAGE: for checks a table cannot express (one of three options is required). */
int cli_usage_error(const struct cli_command *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
