/* exec_wrap: an exec replaces the image without atexit or destructors, so the records still
 * in the rings would be lost with it. Each exec entry point flushes them first, then calls
 * libc's own with the arguments untouched; when exec fails it returns to a job whose trace
 * goes on as before.
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

static void flush_before_exec(void)
{
    if (!cp_trace_open_here())
        return;
    int saved = errno; /* the exec sees the errno the job left */
    cp_writer_flush_now();
    errno = saved;
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
    flush_before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return f ? f(path, argv, envp) : -1;
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[],
                                                   char *const envp[])
{
    flush_before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execvpe");
    return f ? f(file, argv, envp) : -1;
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[],
                                                   char *const envp[])
{
    flush_before_exec();
    cp_fexecve_fn f = (cp_fexecve_fn)real("fexecve");
    return f ? f(fd, argv, envp) : -1;
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    flush_before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execv");
    return f ? f(path, argv) : -1;
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    flush_before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execvp");
    return f ? f(file, argv) : -1;
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
    flush_before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return f ? f(path, argv, environ) : -1;
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
    flush_before_exec();
    cp_execv_fn f = (cp_execv_fn)real("execvp");
    return f ? f(file, argv) : -1;
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
    flush_before_exec();
    cp_execve_fn f = (cp_execve_fn)real("execve");
    return f ? f(path, argv, envp) : -1;
}
