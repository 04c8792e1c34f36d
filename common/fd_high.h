/* fd_high: where the shim's own file descriptors live.
 *
 * open(2), pipe(2) and socket(2) hand out the lowest free number, and a job may count on
 * it (a daemon that closes everything and expects its next open to be 3, a data loader that
 * dup2s onto a number it chose). Every fd the shim keeps is therefore moved to a number from
 * cp_fd_high_base() up, where a job's own opens do not reach unless it holds that many files.
 */
#ifndef COLLPROF_FD_HIGH_H
#define COLLPROF_FD_HIGH_H

/* The lowest number the shim's fds take: 1000, or less under a low RLIMIT_NOFILE (24 below
 * the limit, so the shim's few fit under it). */
int cp_fd_high_base(void);
/* fd moved to a high number, close-on-exec (the original closed), or fd itself when no high
 * number is free. errno is left as it was. */
int cp_fd_move_high(int fd);

/* Runs fn(arg) while every free number below cp_fd_high_base() is held, so that an fd a
 * library opens inside fn and keeps (libunwind's pipe) lands high. The numbers are held by
 * dups of one /dev/null fd, closed again before returning; a job's thread that opens a file
 * during that window (well under a millisecond, once) gets a high number too. Without
 * /dev/null, fn runs as is. errno is left as it was. */
void cp_fd_with_low_numbers_held(void (*fn)(void *arg), void *arg);

#endif
