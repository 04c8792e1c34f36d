/* test_cli_util: runs the built `collprof` as a user would and keeps what it said.
 * Header-only so each test stays one program. */
#ifndef COLLPROF_TEST_CLI_UTIL_H
#define COLLPROF_TEST_CLI_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/test_tree_util.h"

struct cli_result {
    int status; /* the exit code, or 128 + the signal that ended it */
    char *out;  /* stdout (empty when it went elsewhere), NUL-terminated */
    char *err;  /* stderr */
};

static inline const char *cli_binary(void)
{
    static char path[4096];
    const char *build = getenv("COLLPROF_BUILD_DIR");
    if (!build) {
        fprintf(stderr, "COLLPROF_BUILD_DIR is not set: run this test through ctest\n");
        abort();
    }
    snprintf(path, sizeof path, "%s/bin/collprof", build);
    return path;
}

static inline char *cli_slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    buf[got] = '\0';
    return buf;
}

static inline int cli_wait(pid_t pid)
{
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* Runs collprof with args (NULL-terminated, without argv[0]). stdout goes to a file kept
 * in r->out, or to stdout_fd when it is >= 0 (/dev/full, a pipe). */
static inline void cli_run_fd(struct cli_result *r, int stdout_fd, const char *const *args)
{
    const char *argv[64] = { "collprof" };
    size_t n = 1;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;

    FILE *out = tmpfile(), *err = tmpfile();
    if (!out || !err)
        abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        dup2(stdout_fd >= 0 ? stdout_fd : fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        execv(cli_binary(), (char *const *)argv);
        _exit(127);
    }
    r->status = cli_wait(pid);
    r->out = cli_slurp(out);
    r->err = cli_slurp(err);
    fclose(out);
    fclose(err);
}

static inline void cli_run(struct cli_result *r, const char *const *args)
{
    cli_run_fd(r, -1, args);
}

/* The same as a list: cli_runl(&r, "dump", "--json", dir, NULL). */
static inline void cli_runl(struct cli_result *r, const char *first, ...)
{
    const char *args[64];
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    cli_run(r, args);
}

static inline void cli_result_free(struct cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static inline int cli_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static inline int cli_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A fresh directory under $TMPDIR (or /tmp); cli_rmtree removes it and what it holds. */
static inline char *cli_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/collprof-cli-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpl))
        abort();
    return strdup(tmpl);
}

static inline void cli_rmtree(const char *dir)
{
    tc_rmtree(dir);
}

static inline void cli_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len)
        abort();
    fclose(f);
}

#endif
