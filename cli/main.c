/* main: the `collprof` command. One table of verbs, one dispatcher (git.c, perf.c).
 *
 * The dispatcher does what every verb needs once: SIGPIPE, `--help`/`--version`, the
 * unknown-verb message, and at exit the check of stdout. Verbs only return a status.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/settings.h"
#include "common/text.h"

#ifndef COLLPROF_VERSION
#define COLLPROF_VERSION "unknown"
#endif

static const struct cli_verb verbs[] = {
    { "run", cmd_run, CLI_KEEP_SIGPIPE, "profile a job: sets COLLPROF_* and LD_PRELOAD, runs CMD" },
    { "report", cmd_report, 0, "text report of a trace directory (or --json)" },
    { "dump", cmd_dump, 0, "every record of a trace, one a line (like `perf script`)" },
    { "view", cmd_view, 0, "interactive view (TUI) over a trace" },
    { "top", cmd_top, 0, "live view of the profiled ranks on this node" },
    { "export", cmd_export, 0, "a trace as Perfetto JSON, CSV or Prometheus text" },
    { "selftest", cmd_selftest, 0, "checks this node: topology, every collective's bandwidth" },
    { "demo", cmd_demo, 0, "an emulated job with a straggler, then its report" },
};

static const struct cli_verb *find_verb(const char *name)
{
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

/* Each message is formatted first and written with one call, so lines of several
 * processes sharing a terminal do not interleave mid-line. What a message echoes (a path
 * from a directory listing, a string from a trace) is escaped here, in one place: nothing
 * in it drives the terminal or breaks the one line. */
static void put_line(const char *prefix, const char *fmt, va_list ap)
{
    /* room for a path as long as the kernel takes (PATH_MAX) and the words around it */
    char msg[8192], line[8192];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int n = snprintf(line, sizeof line, "collprof: %s", prefix);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    /* one byte short, to keep room for the newline */
    cp_text_escape(line + n, sizeof line - 1 - (size_t)n, msg, strlen(msg));
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

int cli_error(const char *verb, int status, const char *fmt, ...)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", verb);
    va_list ap;
    va_start(ap, fmt);
    put_line(prefix, fmt, ap);
    va_end(ap);
    return status;
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_line("WARN ", fmt, ap);
    va_end(ap);
}

void cli_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_line("", fmt, ap);
    va_end(ap);
}

char *cli_shell_quote(const char *s)
{
    static const char bare[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_@%+=:,./-";
    /* a word that begins with '-' would be read as an option: "./-x" names the same file */
    const char *lead = s[0] == '-' ? "./" : "";
    if (s[0] && s[strspn(s, bare)] == '\0') {
        char *q = malloc(strlen(lead) + strlen(s) + 1);
        if (q)
            sprintf(q, "%s%s", lead, s);
        return q;
    }
    /* in single quotes nothing is special but the quote itself, written '\'' */
    size_t n = strlen(lead) + 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q)
        return NULL;
    *o++ = '\'';
    o += sprintf(o, "%s", lead);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

static void print_help(FILE *out)
{
    fputs("usage: collprof <command> [<args>]\n"
          "       collprof --help | --version | <command> --help | help <command>\n"
          "\ncommands:\n",
          out);
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        fprintf(out, "    %-10s %s\n", verbs[i].name, verbs[i].summary);
    fputs("\nexit codes:\n"
          "    0  ok\n"
          "    1  the answer is bad news (report --fail-on found a hang or mismatch; selftest FAIL)\n"
          "    2  usage or input error (one line on stderr saying what and where)\n"
          "    3  could not run (no GPU, no NCCL, no driver), with the reason\n\n",
          out);
    cp_settings_print_help(out, 0);
}

/* A full disk must not pass silently; a reader that went away (`| head`) is not an error
 * of ours. With SIGPIPE ignored, a closed pipe shows up here as EPIPE (or as a write error
 * already latched on stdout, whose errno is long gone: then the kind of file decides, as
 * git does). */
static int finish_stdout(const char *verb, int status)
{
    int err = 0;
    if (fflush(stdout) != 0)
        err = errno;
    else if (ferror(stdout))
        err = -1;
    else if (fclose(stdout) != 0)
        err = errno;
    if (err == 0 || err == EPIPE)
        return status;
    if (err == -1) {
        struct stat st;
        if (fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
            return status;
        return cli_error(verb, CP_EXIT_USAGE, "cannot write to standard output");
    }
    return cli_error(verb, CP_EXIT_USAGE, "cannot write to standard output: %s", strerror(err));
}

static int unknown_verb(const char *name)
{
    fprintf(stderr, "collprof: '%s' is not a collprof command. See 'collprof --help'.\n", name);
    return CP_EXIT_USAGE;
}

static int run_verb(const struct cli_verb *v, int argc, char **argv)
{
    if (!(v->flags & CLI_KEEP_SIGPIPE))
        signal(SIGPIPE, SIG_IGN);
    return finish_stdout(v->name, v->run(argc, argv));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        /* Nothing asked: the help, but a script that lost its verb must notice. */
        signal(SIGPIPE, SIG_IGN);
        print_help(stdout);
        return finish_stdout("help", CP_EXIT_USAGE);
    }

    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0 ||
        (strcmp(first, "help") == 0 && argc == 2)) {
        signal(SIGPIPE, SIG_IGN);
        print_help(stdout);
        return finish_stdout("help", CP_EXIT_OK);
    }
    if (strcmp(first, "--version") == 0) {
        signal(SIGPIPE, SIG_IGN);
        printf("collprof %s\n", COLLPROF_VERSION);
        return finish_stdout("version", CP_EXIT_OK);
    }
    if (strcmp(first, "help") == 0) {
        const struct cli_verb *v = find_verb(argv[2]);
        if (!v)
            return unknown_verb(argv[2]);
        char help_word[] = "--help";
        char *help_argv[] = { argv[2], help_word, NULL };
        return run_verb(v, 2, help_argv);
    }
    if (first[0] == '-') {
        fprintf(stderr, "collprof: unknown option '%s'. See 'collprof --help'.\n", first);
        return CP_EXIT_USAGE;
    }

    const struct cli_verb *v = find_verb(first);
    if (!v)
        return unknown_verb(first);
    return run_verb(v, argc - 1, argv + 1);
}
