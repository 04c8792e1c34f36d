/* main: the `collprof` command's dispatcher over the table of verbs (verbs.c; git.c, perf.c).
 *
 * The dispatcher does what every verb needs once: SIGPIPE, `--help`/`--version`, the
 * unknown-verb message, and at exit the check of stdout. Verbs only return a status.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/settings.h"

#ifndef COLLPROF_VERSION
#define COLLPROF_VERSION "unknown"
#endif

static void print_help(FILE *out)
{
    fputs("usage: collprof <command> [<args>]\n"
          "       collprof --help | --version | <command> --help | help <command>\n"
          "\ncommands:\n",
          out);
    for (size_t i = 0; i < cli_nverbs; i++)
        fprintf(out, "    %-10s %s\n", cli_verbs[i].name, cli_verbs[i].summary);
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
        const struct cli_verb *v = cli_find_verb(argv[2]);
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

    const struct cli_verb *v = cli_find_verb(first);
    if (!v)
        return unknown_verb(first);
    return run_verb(v, argc - 1, argv + 1);
}
