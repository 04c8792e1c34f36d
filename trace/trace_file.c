/* trace_file: the trace writer's own file calls (trace_writer_int.h lists them), each in one
 * place: the chunk write with its size limit and reserve, the fd's identity check, and the
 * creation, close and removal of a trace file or segment. trace_writer.c's header says why
 * each is as it is (the high fd, the reserve for the closing chunk, RLIMIT_FSIZE).
 */
#include "trace/trace_writer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_high.h"

/* A write that would take the file past the soft RLIMIT_FSIZE makes the kernel send
 * SIGXFSZ, whose default action kills the job: `ulimit -f` meant for the job's own files
 * must not take it down because of ours. So such a write is refused here, before the
 * kernel sees it, and fails like any other (EFBIG). The limit is read at every write, not
 * once at open, because the job may lower it at any time; a chunk write is rare enough
 * that one getrlimit(2) beside the pwrite(2) costs nothing. */
static int past_fsize_limit(uint64_t end)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    return end > (uint64_t)rl.rlim_cur;
}

/* Writes all of [data, data+len) at `off`, going on after a short write (a signal, a file
 * that reached a limit mid-way) until the kernel refuses outright; *wrote says whether any
 * byte reached the file. `keep` bytes below the file size limit, and past the end of what
 * is written, stay free: allocated before anything is written (when the file system can). */
int cp_tw_write_all_at(const cp_trace_io *io, int fd, const void *data, size_t len,
                        uint64_t off, size_t keep, int flags, int *wrote)
{
    *wrote = 0;
    /* here, not in the io: the limit is this process's, and the job may lower it any time */
    if (past_fsize_limit(off + len + keep)) {
        errno = EFBIG;
        return -1;
    }
    return io->write_at(io->ctx, fd, data, len, off, keep, flags, wrote);
}

/* 0 when w->fd is still our file, opening it again when the job took the number; -1 when
 * the file cannot be reached as ours (errno EBADF). */
int cp_tw_own_fd(cp_trace_writer *w)
{
    struct stat st;
    if (w->fd >= 0 && fstat(w->fd, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino)
        return 0;
    w->fd = -1; /* never closed: that number is the job's now */
    int fd = w->path ? open(w->path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino) {
        w->fd = cp_fd_move_high(fd);
        return 0;
    }
    if (fd >= 0)
        close(fd);
    errno = EBADF;
    return -1;
}

/* The file system calls that open, close and remove a file, each in one place. */

/* Creates path (never an existing file, never through a symlink) with exactly `mode`,
 * moved to a high fd; -1 with errno on failure (nothing left behind). */
int cp_tw_create_file(const char *path, unsigned mode, struct stat *st)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
        return -1;
    }
    /* the mode asked for, whatever the umask: a wider one is a choice (COLLPROF_FILE_MODE) */
    (void)fchmod(fd, mode & 0777); /* on a file system without modes, the open's stands */
    return cp_fd_move_high(fd);
}

int cp_tw_close_file(int fd) { return close(fd); }

/* 0 when path is gone (or was never there). */
int cp_tw_remove_file(const char *path) { return unlink(path) == 0 || errno == ENOENT ? 0 : -1; }
