/* io_exec: the I/O executor (io_exec.h). The job's side first, then the executor's, which
 * touches no libc, no TLS, no errno: raw system calls only. */
#include "preload/io_exec.h"

#include "common/fd_high.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CP_IO_SLOTS 8
#define CP_IO_STACK (64 * 1024)

enum { SLOT_FREE, SLOT_QUEUED, SLOT_DONE };
enum { OP_WRITE, OP_CUT, OP_CLOSE };

typedef struct cp_io_slot {
    _Atomic uint32_t state; /* futex word */
    int op;
    int detached; /* nobody collects the answer: the executor frees the slot */
    const void *data;
    size_t len;
    uint64_t off;
    size_t keep;
    long rc;  /* 0 or -errno */
    int wrote;
} cp_io_slot;

struct cp_io_exec {
    cp_trace_io io;
    cp_io_slot slot[CP_IO_SLOTS];
    unsigned head;  /* job side: the next slot to fill */
    int last;       /* job side: the slot in flight past the bound, -1 none */
    unsigned bound_ms;
    int fd;         /* the trace file (the executor's own copy after the clone) */
    int wake_rd, wake_wr; /* a socket pair: send(MSG_NOSIGNAL) never raises SIGPIPE in the
                           * job, and the executor reads EOF once every job end is closed */
    pid_t pid;
    dev_t wake_dev; /* the job end's identity: the job may close it and reuse the number */
    ino_t wake_ino;
    int lost;       /* job side: the executor is gone; the calls are made directly */
    int wake_ok;    /* job side: wake_wr was found ours by the last executor_lost */
    void *stack;
    _Atomic uint32_t gone; /* the executor is past its last memory access */
};

/* ---------------------------------------------------------------- the executor's side */

#define CP_NOINSTR __attribute__((no_sanitize("address", "undefined"), no_stack_protector))
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ < 11)
#undef CP_NOINSTR
#define CP_NOINSTR __attribute__((no_sanitize("address", "undefined")))
#endif

#if defined(__x86_64__)
CP_NOINSTR static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
CP_NOINSTR static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#else
#define CP_IO_EXEC_UNSUPPORTED 1
#endif

#ifndef CP_IO_EXEC_UNSUPPORTED
#define RAW(n, a, b, c, d) raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

CP_NOINSTR static void run(cp_io_exec *x, cp_io_slot *s)
{
    long rc = 0;
    int wrote = 0;
    if (s->op == OP_WRITE) {
        if (s->keep) {
            rc = RAW(SYS_fallocate, x->fd, FALLOC_FL_KEEP_SIZE, s->off, s->len + s->keep);
            if (rc == -EOPNOTSUPP || rc == -ENOSYS || rc == -EINVAL)
                rc = 0; /* no preallocation on this file system: the size limit's margin only */
        }
        const unsigned char *p = s->data;
        size_t len = s->len;
        uint64_t off = s->off;
        while (rc == 0 && len > 0) {
            long n = RAW(SYS_pwrite64, x->fd, p, len, off);
            if (n == -EINTR)
                continue;
            if (n <= 0) {
                rc = n < 0 ? n : -EIO;
                break;
            }
            wrote = 1;
            p += n;
            len -= (size_t)n;
            off += (uint64_t)n;
        }
    } else if (s->op == OP_CUT) {
        rc = RAW(SYS_ftruncate, x->fd, s->off, 0, 0);
        if (rc == 0 && s->keep)
            (void)RAW(SYS_fallocate, x->fd, FALLOC_FL_KEEP_SIZE, s->off, s->keep);
    } else {
        rc = RAW(SYS_close, x->fd, 0, 0, 0);
        x->fd = -1;
    }
    s->rc = rc;
    s->wrote = wrote;
    if (s->detached) {
        atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
    } else {
        atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
        (void)RAW(SYS_futex, &s->state, FUTEX_WAKE, 1, 0);
    }
}

/* Its copy of the job's fd table, but for the two it uses: the job's files, pipes and
 * sockets must not stay open because the executor waits on a file system. */
CP_NOINSTR static void close_others(int a, int b)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;
    if (RAW(SYS_close_range, 0, lo - 1, 0, 0) == 0 || lo == 0) {
        if (hi > lo + 1)
            (void)RAW(SYS_close_range, lo + 1, hi - 1, 0, 0);
        (void)RAW(SYS_close_range, hi + 1, ~0u, 0, 0);
        return;
    }
    for (int fd = 0; fd < 65536; fd++) /* a kernel before 5.9 */
        if (fd != a && fd != b)
            (void)RAW(SYS_close, fd, 0, 0, 0);
}

CP_NOINSTR static int exec_main(void *arg)
{
    cp_io_exec *x = arg;
    static const char name[16] = "collprof-io";
    (void)RAW(SYS_prctl, PR_SET_NAME, name, 0, 0);
    /* A group of its own: a kill aimed at the job's group once the job has ended (a
     * launcher's cleanup) must not cut off the END it still has to write after a thaw. It
     * exits by itself once the job is gone and its queue done. */
    (void)RAW(SYS_setpgid, 0, 0, 0, 0);
    close_others(x->fd, x->wake_rd);
    long parent = RAW(SYS_getppid, 0, 0, 0, 0);
    unsigned next = 0;
    for (;;) {
        cp_io_slot *s = &x->slot[next % CP_IO_SLOTS];
        if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_QUEUED) {
            run(x, s);
            next++;
            continue;
        }
        /* The wake socket's EOF says the job let go; a look at the parent every second
         * besides, so that nothing (a socket the job's fork child still holds) keeps an
         * executor of a gone job idle for ever. */
        struct pollfd p = {.fd = x->wake_rd, .events = POLLIN};
        struct timespec second = {1, 0};
        long n = RAW(SYS_ppoll, &p, 1, &second, 0);
        if (n < 0 && n != -EINTR)
            break;
        if (n == 0) {
            if (RAW(SYS_getppid, 0, 0, 0, 0) != parent)
                break; /* nothing queued (checked above) and the job is gone */
            continue;
        }
        char buf[64];
        long got = RAW(SYS_read, x->wake_rd, buf, sizeof buf, 0);
        if (got == 0 &&
            atomic_load_explicit(&x->slot[next % CP_IO_SLOTS].state, memory_order_acquire) !=
                SLOT_QUEUED)
            break; /* every write end is closed (release, exit, exec) and nothing is queued */
    }
    if (x->fd >= 0)
        (void)RAW(SYS_close, x->fd, 0, 0, 0);
    (void)RAW(SYS_close, x->wake_rd, 0, 0, 0);
    atomic_store_explicit(&x->gone, 1, memory_order_release);
    (void)RAW(SYS_futex, &x->gone, FUTEX_WAKE, 1, 0);
    for (;;)
        (void)RAW(SYS_exit, 0, 0, 0, 0);
    return 0;
}
#endif

/* ---------------------------------------------------------------- the job's side */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Waits for *word to leave `value`, at most ms. 1 when it did. */
static int wait_word(_Atomic uint32_t *word, uint32_t value, unsigned ms)
{
    uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
    while (atomic_load_explicit(word, memory_order_acquire) == value) {
        uint64_t t = now_ns();
        if (t >= end)
            return 0;
        struct timespec left = {(time_t)((end - t) / 1000000000u), (long)((end - t) % 1000000000u)};
        (void)syscall(SYS_futex, word, FUTEX_WAIT, value, &left, NULL, 0);
    }
    return 1;
}

/* The answer of a done slot, which is freed. */
static int collect(cp_io_slot *s, int *wrote)
{
    int rc = s->rc == 0 ? 0 : -1;
    int e = (int)-s->rc;
    if (wrote)
        *wrote = s->wrote;
    atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
    if (rc)
        errno = e;
    return rc;
}

static cp_io_slot *submit(cp_io_exec *x, int op, const void *data, size_t len, uint64_t off,
                          size_t keep, int detached)
{
    cp_io_slot *s = &x->slot[x->head % CP_IO_SLOTS];
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FREE)
        return NULL; /* CP_IO_SLOTS calls stuck: never with the writer's one call in flight */
    s->op = op;
    s->detached = detached;
    s->data = data;
    s->len = len;
    s->off = off;
    s->keep = keep;
    s->rc = 0;
    s->wrote = 0;
    atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_release);
    x->head++;
    int saved = errno;
    if (x->wake_ok) /* a full one already wakes it */
        (void)send(x->wake_wr, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    errno = saved;
    return s;
}

/* Submitted: the answer within the bound, or CP_IO_STALLED (the slot stays in flight). */
static int answer(cp_io_exec *x, cp_io_slot *s, int *wrote)
{
    if (!s) {
        errno = EBUSY;
        return -1;
    }
    if (!wait_word(&s->state, SLOT_QUEUED, x->bound_ms)) {
        x->last = (int)(s - x->slot);
        return CP_IO_STALLED;
    }
    return collect(s, wrote);
}

/* Whether the executor went away with nothing in flight: it exited (a job that closed every
 * fd closed its wake socket too), or the wake socket's number is no longer ours (never
 * written then: it may be a file of the job's). Then the calls are made directly, on the
 * writer's own descriptor, as without an executor. */
static int executor_lost(cp_io_exec *x)
{
    if (x->lost)
        return 1;
    struct stat st;
    int saved = errno;
    int ours = fstat(x->wake_wr, &st) == 0 && st.st_dev == x->wake_dev &&
               st.st_ino == x->wake_ino;
    errno = saved;
    x->wake_ok = ours;
    if (x->last < 0 && (!ours || atomic_load_explicit(&x->gone, memory_order_acquire)))
        x->lost = 1;
    return x->lost;
}

static int exec_write_at(void *ctx, int fd, const void *data, size_t len, uint64_t off,
                         size_t keep, int flags, int *wrote)
{
    cp_io_exec *x = ctx;
    *wrote = 0;
    if (executor_lost(x))
        return cp_trace_io_direct.write_at(NULL, fd, data, len, off, keep, flags, wrote);
    /* otherwise fd is not used: the executor's copy of the file is the one it writes */
    if (flags & CP_IO_QUEUE) {
        if (!submit(x, OP_WRITE, data, len, off, keep, 1)) {
            errno = EBUSY;
            return -1;
        }
        return CP_IO_STALLED;
    }
    return answer(x, submit(x, OP_WRITE, data, len, off, keep, 0), wrote);
}

static int exec_wait(void *ctx, int block, int *wrote)
{
    cp_io_exec *x = ctx;
    *wrote = 0;
    if (x->last < 0)
        return 0;
    cp_io_slot *s = &x->slot[x->last];
    if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_QUEUED &&
        (!block || !wait_word(&s->state, SLOT_QUEUED, x->bound_ms)))
        return CP_IO_STALLED;
    x->last = -1;
    return collect(s, wrote);
}

static int exec_cut(void *ctx, int fd, uint64_t len, size_t keep)
{
    cp_io_exec *x = ctx;
    if (executor_lost(x))
        return cp_trace_io_direct.cut(NULL, fd, len, keep);
    return answer(x, submit(x, OP_CUT, NULL, 0, len, keep, 0), NULL);
}

static int exec_close(void *ctx, int fd)
{
    cp_io_exec *x = ctx;
    /* The job's copy first: the executor still holds the file, so this close is never the
     * last one and never waits on the file system. */
    int rc = fd >= 0 ? close(fd) : 0;
    if (executor_lost(x))
        return rc; /* its copy went with it */
    if (!submit(x, OP_CLOSE, NULL, 0, 0, 0, 1))
        return -1;
    return rc;
}


cp_io_exec *cp_io_exec_start(int fd, unsigned bound_ms, char *why, size_t whylen)
{
#ifdef CP_IO_EXEC_UNSUPPORTED
    (void)fd;
    (void)bound_ms;
    snprintf(why, whylen, "no I/O executor on this architecture");
    return NULL;
#else
    cp_io_exec *x = calloc(1, sizeof *x);
    int p[2];
    if (!x || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
        snprintf(why, whylen, "no I/O executor (%s)", strerror(errno));
        free(x);
        return NULL;
    }
    x->io = (cp_trace_io){exec_write_at, exec_wait, exec_cut, exec_close, x};
    x->last = -1;
    x->bound_ms = bound_ms;
    x->fd = fd;
    x->wake_rd = cp_fd_move_high(p[0]);
    x->wake_wr = cp_fd_move_high(p[1]);
    struct stat st;
    if (fstat(x->wake_wr, &st) == 0) {
        x->wake_dev = st.st_dev;
        x->wake_ino = st.st_ino;
    }
    x->stack = mmap(NULL, CP_IO_STACK, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (x->stack == MAP_FAILED) {
        snprintf(why, whylen, "no I/O executor (no stack: %s)", strerror(errno));
        goto fail;
    }
    /* CLONE_VM without CLONE_THREAD: a process of its own sharing the job's memory; exit
     * signal 0: no SIGCHLD, and wait()/waitpid(-1) without __WALL never report it. No
     * CLONE_FILES: its fd table is a copy, which it empties (close_others). */
    x->pid = clone(exec_main, (char *)x->stack + CP_IO_STACK, CLONE_VM, x);
    if (x->pid < 0) {
        snprintf(why, whylen, "cannot start the I/O executor (clone: %s)", strerror(errno));
        munmap(x->stack, CP_IO_STACK);
        goto fail;
    }
    /* The executor's copy of wake_rd is its own; the job's is closed. wake_rd itself stays
     * as it is: the executor reads it from the memory both share. */
    close(x->wake_rd);
    return x;
fail:
    close(x->wake_rd);
    close(x->wake_wr);
    free(x);
    return NULL;
#endif
}

const cp_trace_io *cp_io_exec_io(cp_io_exec *x) { return &x->io; }

pid_t cp_io_exec_pid(const cp_io_exec *x) { return x->pid; }

void cp_io_exec_release(cp_io_exec *x)
{
    if (!x)
        return;
    int saved = errno;
    close(x->wake_wr);
    x->wake_wr = -1;
    /* done within the bound: reaped (it is this process's child) and freed; else it finishes
     * on its own, the reaping left to whoever inherits it */
    if (wait_word(&x->gone, 0, x->bound_ms)) {
        for (int i = 0; i < 100; i++) {
            pid_t r = waitpid(x->pid, NULL, __WALL | WNOHANG);
            if (r == x->pid || (r < 0 && errno != EINTR)) {
                munmap(x->stack, CP_IO_STACK);
                free(x);
                break;
            }
            nanosleep(&(struct timespec){0, 100000}, NULL);
        }
    }
    errno = saved;
}

void cp_io_exec_forget(cp_io_exec *x)
{
    if (x && x->wake_wr >= 0) {
        close(x->wake_wr);
        x->wake_wr = -1;
    }
}
