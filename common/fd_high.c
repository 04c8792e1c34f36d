/* fd_high: the shim's fds above the job's (see fd_high.h). */
#include "common/fd_high.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

int cp_fd_high_base(void)
{
    /* high enough that a job's open(2) does not get there, low enough to stay under
     * RLIMIT_NOFILE (often 1024) without growing the kernel's fd table much */
    struct rlimit rl;
    long base = 1000;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)base + 24 > rl.rlim_cur)
        base = rl.rlim_cur > 64 + 24 ? (long)rl.rlim_cur - 24 : 3;
    return (int)base;
}

int cp_fd_move_high(int fd)
{
    int saved = errno;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, cp_fd_high_base());
    if (hi >= 0)
        close(fd);
    errno = saved;
    return hi >= 0 ? hi : fd;
}

void cp_fd_with_low_numbers_held(void (*fn)(void *arg), void *arg)
{
    int saved = errno;
    int base = cp_fd_high_base();
    int src = open("/dev/null", O_RDONLY | O_CLOEXEC);
    static int held[1024]; /* callers run this once (under their pthread_once) */
    int n = 0;
    if (src >= 0 && src < base) {
        int fd;
        while (n < (int)(sizeof held / sizeof held[0]) &&
               (fd = fcntl(src, F_DUPFD_CLOEXEC, 0)) >= 0) {
            if (fd >= base) {
                close(fd);
                break;
            }
            held[n++] = fd;
        }
    }
    errno = saved;
    fn(arg);
    saved = errno;
    while (n > 0)
        close(held[--n]);
    if (src >= 0)
        close(src);
    errno = saved;
}
