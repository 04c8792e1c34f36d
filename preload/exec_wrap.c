/* exec_wrap: an exec replaces the image without atexit or destructors, so the records still
 * in the rings would be lost with it. Each exec entry point flushes them first, then calls
 * libc's own with the arguments untouched; when exec fails it returns to a job whose trace
 * goes on as before.
 *
 * The live stats block is named by the pid, which the new image keeps: it is unlinked before
 * the exec (and put back if the exec fails), so `top` never shows the new program as this
 * one with its last collective in flight.
 *
 * No END is written: the pid lives on as another program. A new image that preloads the
 * shim and calls NCCL starts a file of its own (cp_trace_writer_open refuses to reuse the
 * same name, so it WARNs and runs untraced: the first image's file is never overwritten).
 *
 * Nothing here allocates or takes a lock when no trace is open in this very pid: a vfork
 * child (which shares the parent's memory, writer included) execs with no work from us.
 * posix_spawn calls execve inside libc, never through this symbol, and is not seen at all.
 */
#include "preload/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

extern char **environ;

/* Everything to disk, the writer parked, the live block unnamed (stats_live.c says why).
 * Returns what after_failed_exec needs: 0 when nothing was done (no trace here, or a vfork
 * child, which shares the parent's memory and must leave it alone). */
static int before_exec(void)
{
    if (!cp_trace_open_here())
        return 0;
    int saved = errno; /* the exec sees the errno the job left */
    cp_writer_flush_now();
    int held = cp_writer_hold_for_fork();
    cp_live_before_exec();
    errno = saved;
    return held ? 2 : 1;
}

/* Only reached when the exec failed: the job goes on, traced as before. */
static int after_failed_exec(int state, int rc)
{
    if (state) {
        int saved = errno; /* the exec's own errno is what the job reads */
        cp_live_after_failed_exec();
        cp_writer_release_after_fork(state == 2);
        errno = saved;
    }
    return rc;
}

typedef int (*cp_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*cp_execv_fn)(const char *, char *const[]);
typedef int (*cp_fexecve_fn)(int, char *const[], char *const[]);

/* Looked up at each call: exec is rare, and a cached pointer would need a constructor,
 * which the shim does not run at load. */
static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f)
        errno = ENOSYS;
    return f;
}

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[],
                                                  char *const envp[])
{
    int state = before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return after_failed_exec(state, f ? f(path, argv, envp) : -1);
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[],
                                                   char *const envp[])
{
    int state = before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execvpe");
    return after_failed_exec(state, f ? f(file, argv, envp) : -1);
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[],
                                                   char *const envp[])
{
    int state = before_exec();
    cp_fexecve_fn f = (cp_fexecve_fn)real("fexecve");
    return after_failed_exec(state, f ? f(fd, argv, envp) : -1);
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    int state = before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execv");
    return after_failed_exec(state, f ? f(path, argv) : -1);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    int state = before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execvp");
    return after_failed_exec(state, f ? f(file, argv) : -1);
}

/* The list forms: argv is built on the stack (no malloc, as in a vfork child), then handed
 * to the vector form libc would use itself. */
static size_t count_args(const char *arg, va_list ap)
{
    size_t n = 1;
    if (arg)
        while (va_arg(ap, const char *))
            n++;
    return n;
}

/* Leaves *ap past the NULL that ends the list, where execle's envp is. */
static void build_argv(char **argv, size_t n, const char *arg, va_list *ap)
{
    argv[0] = (char *)arg;
    if (!arg) {
        argv[1] = NULL;
        return;
    }
    for (size_t i = 1; i <= n; i++)
        argv[i] = va_arg(*ap, char *); /* argv[n] is the NULL */
}

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    va_end(ap);
    char *argv[n + 1];
    va_start(ap, arg);
    build_argv(argv, n, arg, &ap);
    va_end(ap);
    int state = before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return after_failed_exec(state, f ? f(path, argv, environ) : -1);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    va_end(ap);
    char *argv[n + 1];
    va_start(ap, arg);
    build_argv(argv, n, arg, &ap);
    va_end(ap);
    int state = before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execvp");
    return after_failed_exec(state, f ? f(file, argv) : -1);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    va_end(ap);
    char *argv[n + 1];
    va_start(ap, arg);
    build_argv(argv, n, arg, &ap);
    char *const *envp = va_arg(ap, char *const *); /* after the NULL that ends the list */
    va_end(ap);
    int state = before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return after_failed_exec(state, f ? f(path, argv, envp) : -1);
}
