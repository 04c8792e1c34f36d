/* io_exec: the I/O executor answers within its bound whatever the file system does, gives the
 * answer of a hung call once it comes, never shows up in the job's wait(), never keeps the
 * job's files open, and exits with the job.
 *
 * A hung call is made with userfaultfd: the data of a write sits on a page that is missing
 * until the test supplies it, so the executor's pwrite sleeps in the kernel exactly as on a
 * frozen file system (tests/cli/test_fault_matrix.c freezes a real one). Skipped, with the
 * reason, where userfaultfd is refused (not root and vm.unprivileged_userfaultfd=0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload/io_exec.h"

/* What a loaded machine may add to a bound (one documented slack, as everywhere). */
#define SLACK_MS 500

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static char g_path[256];

static int open_tmp(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_path, sizeof g_path, "%s/io_exec_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(g_path);
    assert_true(fd >= 0);
    return fd;
}

static void a_hung_call_returns_within_the_bound_and_its_answer_comes_after(void **state)
{
    (void)state;
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0) {
        printf("skipped: userfaultfd refused (%s): no way to hang a call without root\n",
               strerror(errno));
        skip();
    }
    struct uffdio_api api = {.api = UFFD_API};
    assert_int_equal(ioctl(uffd, UFFDIO_API, &api), 0);
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *hang = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(hang != MAP_FAILED);
    struct uffdio_register reg = {.range = {(uintptr_t)hang, (uint64_t)page},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    assert_int_equal(ioctl(uffd, UFFDIO_REGISTER, &reg), 0);

    int fd = open_tmp();
    char why[256];
    cp_io_exec *x = cp_io_exec_start(fd, CP_IO_BOUND_MS, why, sizeof why);
    assert_non_null(x);
    const cp_trace_io *io = cp_io_exec_io(x);
    pid_t pid = cp_io_exec_pid(x);
    char comm_path[64], comm[32] = {0};
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)pid);
    for (int i = 0; i < 1000 && strncmp(comm, "collprof-io", 11) != 0; i++) {
        FILE *f = fopen(comm_path, "r");
        if (f) {
            (void)!fgets(comm, sizeof comm, f);
            fclose(f);
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    assert_memory_equal(comm, "collprof-io", 11);
    /* exit signal 0: the job's own wait() never sees it */
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);

    int wrote = 0;
    assert_int_equal(io->write_at(io->ctx, fd, "head", 4, 0, 0, 0, &wrote), 0);
    assert_int_equal(wrote, 1);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(io->write_at(io->ctx, fd, hang, (size_t)page, 4, 0, 0, &wrote),
                     CP_IO_STALLED);
    assert_true(ms_since(&t0) < CP_IO_BOUND_MS + SLACK_MS);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(io->wait(io->ctx, 1, &wrote), CP_IO_STALLED);
    assert_true(ms_since(&t0) < CP_IO_BOUND_MS + SLACK_MS);
    assert_int_equal(io->wait(io->ctx, 0, &wrote), CP_IO_STALLED);

    /* the executor's pwrite is the one hanging on the page: the "thaw" */
    struct pollfd p = {.fd = uffd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    struct uffd_msg msg;
    assert_int_equal(read(uffd, &msg, sizeof msg), (ssize_t)sizeof msg);
    assert_int_equal(msg.event, UFFD_EVENT_PAGEFAULT);
    unsigned char *src = malloc((size_t)page);
    memset(src, 'x', (size_t)page);
    struct uffdio_copy cp = {.dst = (uintptr_t)hang, .src = (uintptr_t)src, .len = (uint64_t)page};
    assert_int_equal(ioctl(uffd, UFFDIO_COPY, &cp), 0);
    int rc = CP_IO_STALLED;
    for (int i = 0; i < 500 && rc == CP_IO_STALLED; i++)
        rc = io->wait(io->ctx, 1, &wrote);
    assert_int_equal(rc, 0);
    assert_int_equal(wrote, 1);
    unsigned char *back = malloc((size_t)page);
    assert_int_equal(pread(fd, back, (size_t)page, 4), page);
    assert_memory_equal(back, src, (size_t)page);

    /* the close is queued; release reaps it, and the pid is gone */
    assert_int_equal(io->close(io->ctx, fd), 0);
    cp_io_exec_release(x);
    int gone = 0;
    for (int i = 0; i < 5000 && !gone; i++) {
        gone = kill(pid, 0) != 0 && errno == ESRCH;
        if (!gone)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    assert_true(gone);
    unlink(g_path);
    free(src);
    free(back);
    close(uffd);
    munmap(hang, (size_t)page);
}

/* A job (a fork child) with a pipe to its parent starts an executor and exits, or is
 * SIGKILLed: the parent reads EOF at once (the executor closed its copy of the pipe) and the
 * executor exits with the job (the test is the subreaper that inherits it). */
static void job_ends_with_executor(int killed)
{
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int out[2], pidpipe[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(pidpipe), 0);
    pid_t job = fork();
    assert_true(job >= 0);
    if (job == 0) {
        close(out[0]);
        close(pidpipe[0]);
        int fd = open_tmp();
        char why[256];
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        cp_io_exec *x = cp_io_exec_start(fd, CP_IO_BOUND_MS, why, sizeof why);
        sigprocmask(SIG_SETMASK, &old, NULL);
        pid_t pid = x ? cp_io_exec_pid(x) : -1;
        (void)!write(pidpipe[1], &pid, sizeof pid);
        unlink(g_path);
        if (x && killed)
            raise(SIGKILL);
        _exit(x ? 0 : 1); /* no release: the exit closes the wake socket */
    }
    close(out[1]);
    close(pidpipe[1]);
    pid_t exec_pid = -1;
    assert_int_equal(read(pidpipe[0], &exec_pid, sizeof exec_pid), (ssize_t)sizeof exec_pid);
    assert_true(exec_pid > 0);
    int status;
    assert_int_equal(waitpid(job, &status, 0), job);
    if (killed)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char c;
    assert_int_equal(read(out[0], &c, 1), 0); /* EOF: the executor holds no copy */
    assert_true(ms_since(&t0) < SLACK_MS);
    /* orphaned, it came to us: it exits (and is reaped) once the job is gone */
    assert_int_equal(waitpid(exec_pid, &status, __WALL), exec_pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(ms_since(&t0) < SLACK_MS);
    close(out[0]);
    close(pidpipe[0]);
}

static void the_executor_keeps_no_job_file_open_and_ends_with_the_job(void **state)
{
    (void)state;
    job_ends_with_executor(0);
}

static void the_executor_ends_with_a_sigkilled_job(void **state)
{
    (void)state;
    job_ends_with_executor(1);
}

/* A job that closes every fd closes the executor's wake socket too, and may open its own files
 * at those numbers: the executor exits, no byte of ours reaches the job's file, and the calls
 * are made directly on the trace's descriptor from then on. */
static void a_job_that_closes_every_fd_gets_direct_calls(void **state)
{
    (void)state;
    int fd = open_tmp();
    char trace_path[256];
    snprintf(trace_path, sizeof trace_path, "%s", g_path);
    char why[256];
    cp_io_exec *x = cp_io_exec_start(fd, CP_IO_BOUND_MS, why, sizeof why);
    assert_non_null(x);
    const cp_trace_io *io = cp_io_exec_io(x);
    pid_t pid = cp_io_exec_pid(x);
    int wrote;
    assert_int_equal(io->write_at(io->ctx, fd, "ab", 2, 0, 0, 0, &wrote), 0);
    for (int n = 3; n < 4096; n++)
        if (n != fd)
            close(n);
    int status;
    assert_int_equal(waitpid(pid, &status, __WALL), pid); /* EOF: it exits */
    int job = open_tmp(); /* the job's own file, at every number the shim had */
    for (int n = 3; n < 1100; n++)
        if (n != fd && n != job)
            dup2(job, n);
    assert_int_equal(io->write_at(io->ctx, fd, "cd", 2, 2, 0, 0, &wrote), 0);
    assert_int_equal(wrote, 1);
    char back[8] = {0};
    assert_int_equal(pread(fd, back, sizeof back, 0), 4);
    assert_memory_equal(back, "abcd", 4);
    struct stat st;
    assert_int_equal(fstat(job, &st), 0);
    assert_int_equal(st.st_size, 0);
    for (int n = 3; n < 1100; n++)
        if (n != fd)
            close(n);
    unlink(g_path);
    unlink(trace_path);
    assert_int_equal(io->close(io->ctx, fd), 0);
    cp_io_exec_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_hung_call_returns_within_the_bound_and_its_answer_comes_after),
        cmocka_unit_test(the_executor_keeps_no_job_file_open_and_ends_with_the_job),
        cmocka_unit_test(the_executor_ends_with_a_sigkilled_job),
        cmocka_unit_test(a_job_that_closes_every_fd_gets_direct_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
