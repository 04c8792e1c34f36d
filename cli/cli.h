/* cli: what the verbs of the `collprof` command share.
 *
 * Offers: the exit codes, the verb signature, and the one-line message helpers. A verb
 * returns a status; only the dispatcher (main.c) turns it into the process's exit code, and
 * only the dispatcher touches stdout's fate at exit (flush, check, EPIPE). A verb must not
 * call exit(): the dispatcher's stdout check would be skipped.
 */
#ifndef COLLPROF_CLI_H
#define COLLPROF_CLI_H

#include <stdio.h>

/* The contract's exit codes (INTERFACES.md). */
enum cp_exit {
    CP_EXIT_OK = 0,
    CP_EXIT_BAD_NEWS = 1,   /* the answer is bad news: a hang, a mismatch, a FAIL */
    CP_EXIT_USAGE = 2,      /* usage or input error, one line on stderr */
    CP_EXIT_CANNOT_RUN = 3, /* no GPU, no NCCL, no driver */
};

/* Flag bits of a verb: shared set-up the dispatcher does (or skips) once for it. */
enum cli_verb_flags {
    /* The verb execs a child job: leave SIGPIPE at its default, because an ignored
     * signal stays ignored across exec and would change how the job behaves. */
    CLI_KEEP_SIGPIPE = 1u << 0,
};

/* argv[0] is the verb's name; argv[argc] is NULL. */
typedef int (*cli_verb_fn)(int argc, char **argv);

struct cli_verb {
    const char *name;
    cli_verb_fn run;
    unsigned flags;       /* enum cli_verb_flags */
    const char *summary;  /* one line for `collprof --help` */
};

/* `collprof: <verb>: <message>` as one line on stderr; returns status so a verb can write
 * `return cli_error("dump", CP_EXIT_USAGE, "no trace files in '%s'", dir);`.
 * Not named error(): that would interpose glibc's error(3) for every library. */
int cli_error(const char *verb, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* `collprof: WARN <message>` as one line on stderr: data was lost or skipped, the verb
 * goes on. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* `collprof: <message>` as one line on stderr: what a verb tells beside its output (where
 * `run` left the trace). Like cli_error and cli_warn, it escapes what the message echoes
 * (common/text.h): a path or a string from a file cannot drive the terminal. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* s as one word a POSIX shell reads back as s, for a command line a user pastes: bare when
 * it holds only characters no shell treats specially, else in single quotes ('\'' for a
 * quote); "./" before a leading '-'. malloc'd (free it); NULL out of memory. */
char *cli_shell_quote(const char *s);

/* Beside the collprof binary (build tree or installed prefix): the shim, collprof-sim, the
 * folder of the emulation's libraries. 0 and the absolute path in out, or -1. */
int cli_find_shim(char *out, size_t cap);
int cli_find_sim(char *out, size_t cap);
int cli_find_emu_dir(char *out, size_t cap);

/* verbs.c: the verbs in the order `--help` lists them, and one by name (NULL: none). */
extern const struct cli_verb cli_verbs[];
extern const size_t cli_nverbs;
const struct cli_verb *cli_find_verb(const char *name);

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_demo(int argc, char **argv);

#endif
