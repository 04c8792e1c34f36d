/* test_port_util: a TCP port for a test's launcher (MASTER_PORT). Header-only; needs cmocka
 * included before it. */
#ifndef COLLPROF_TEST_PORT_UTIL_H
#define COLLPROF_TEST_PORT_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A port nobody listens on now: the kernel's pick for a socket bound to port 0. */
static inline int tp_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#endif
