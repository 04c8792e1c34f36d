/* trace_io: the direct calls (trace_io.h). */
#include "trace/trace_io.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int direct_write_at(void *ctx, int fd, const void *data, size_t len, uint64_t off,
                           size_t keep, int flags, int *wrote)
{
    (void)ctx;
    (void)flags; /* nothing is ever in flight: the call is done when it returns */
    const unsigned char *p = data;
    *wrote = 0;
    if (keep && fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)(len + keep)) != 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
        return -1; /* no room for this and the closing chunk after it: ENOSPC */
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        *wrote = 1;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int direct_wait(void *ctx, int block, int *wrote)
{
    (void)ctx;
    (void)block;
    *wrote = 0;
    return 0;
}

static int direct_cut(void *ctx, int fd, uint64_t len, size_t keep)
{
    (void)ctx;
    if (ftruncate(fd, (off_t)len) != 0)
        return -1;
    if (keep)
        (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)len, (off_t)keep);
    return 0;
}

static int direct_close(void *ctx, int fd)
{
    (void)ctx;
    return close(fd);
}

const cp_trace_io cp_trace_io_direct = {direct_write_at, direct_wait, direct_cut, direct_close,
                                        NULL};
