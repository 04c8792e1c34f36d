/* rendezvous: rank 0's ncclUniqueId reaches every rank, within a bounded time.
 *
 * Two ways, as real jobs do it: a shared directory (rank 0 writes the 128 bytes to a temporary
 * name and renames it, so a reader never sees half an id), or TCP at MASTER_ADDR:MASTER_PORT
 * (rank 0 serves the id to each rank that asks; the others retry until it listens). Either
 * way a missing peer ends in one line and -1 by the timeout, never a silent wait. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "launcher/launcher.h"

#define ID_FILE "nccl-unique-id"
/* Both ends of the TCP exchange start with this, so a stray client or a server of another
 * protocol on the port is told apart from a rank of this job. */
#define WIRE_MAGIC 0x43505349u /* "CPSI" */

struct hello { uint32_t magic, rank, world; };
struct reply { uint32_t magic, world; char id[NCCL_UNIQUE_ID_BYTES]; };

/* Where a message goes: the caller's say and its context, passed down as one. */
struct voice { cp_launcher_say_fn say; void *ctx; };
#define SAY(v, ...) cp_launcher_say((v)->say, (v)->ctx, __VA_ARGS__)

static double now_s(void)
{
    return (double)cp_mono_ns() * 1e-9;
}

static void sleep_us(double us)
{
    if (us <= 0)
        return;
    double whole_s = (double)(time_t)(us / 1e6);
    struct timespec ts = { (time_t)whole_s, (long)((us - whole_s * 1e6) * 1e3) };
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* A socket write must not raise SIGPIPE when the peer went away: that is an error here. */
static int write_all(int fd, const void *buf, size_t len, int is_socket)
{
    const char *p = buf;
    while (len) {
        ssize_t n = is_socket ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes before the deadline; -1 otherwise. */
static int read_all(int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;
    while (len) {
        int ms = (int)((deadline - now_s()) * 1000);
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (ms <= 0 || poll(&pf, 1, ms) <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ECONNRESET;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int dir_publish(const char *dir, const ncclUniqueId *uid, const struct voice *v)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/." ID_FILE ".%ld", dir, (long)getpid());
    snprintf(path, sizeof path, "%s/" ID_FILE, dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, uid->internal, sizeof uid->internal, 0) || fsync(fd) ||
        close(fd) || rename(tmp, path)) {
        SAY(v, "cannot publish the NCCL id in '%s': %s", dir, strerror(errno));
        if (fd >= 0)
            unlink(tmp);
        return -1;
    }
    return 0;
}

static int dir_fetch(const char *dir, double timeout_s, ncclUniqueId *uid,
                     const struct voice *v)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" ID_FILE, dir);
    double deadline = now_s() + timeout_s, pause_us = 1000;
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, uid->internal, sizeof uid->internal);
            close(fd);
            if (n == (ssize_t)sizeof uid->internal)
                return 0;
            SAY(v, "'%s' holds %zd bytes, not an NCCL id of %d", path, n,
                    NCCL_UNIQUE_ID_BYTES);
            return -1;
        }
        if (errno != ENOENT) {
            SAY(v, "cannot read the NCCL id '%s': %s", path, strerror(errno));
            return -1;
        }
        if (now_s() > deadline) {
            SAY(v, "rank 0 did not publish the NCCL id in '%s' within %g s", dir, timeout_s);
            return -1;
        }
        sleep_us(pause_us);
        if (pause_us < 50000)
            pause_us *= 2;
    }
}

/* torchrun's agent already listens on MASTER_PORT (its c10d store), so under torchrun the id
 * goes through the port after it. */
static int tcp_port(const cp_launcher *id)
{
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    int port = id->master_port;
    if (agent && !strcmp(agent, "True") && port < 65535)
        port++;
    return port;
}

static struct addrinfo *resolve(const char *host, int port, int passive)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = passive ? AI_PASSIVE : 0 };
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, service, &hints, &res))
        return NULL;
    return res;
}

static int tcp_listen(const cp_launcher *id, int port, const struct voice *v)
{
    /* MASTER_ADDR is this host's name or address as the others reach it; when it does not
     * name a local interface (a NAT'ed or aliased name), listen on all of them. */
    const char *hosts[2] = { id->master_addr, NULL };
    int err = 0;
    for (int h = 0; h < 2; h++) {
        struct addrinfo *res = resolve(hosts[h], port, 1);
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            int one = 1;
            if (fd < 0)
                continue;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
                freeaddrinfo(res);
                return fd;
            }
            err = errno;
            close(fd);
        }
        if (res)
            freeaddrinfo(res);
        if (err == EADDRINUSE)
            break;
    }
    SAY(v, "cannot listen on %s:%d for the NCCL id: %s", id->master_addr, port,
            strerror(err ? err : EADDRNOTAVAIL));
    return -1;
}

static int tcp_serve(const cp_launcher *id, double timeout_s, const ncclUniqueId *uid,
                     const struct voice *v)
{
    int port = tcp_port(id), lfd = tcp_listen(id, port, v);
    if (lfd < 0)
        return -1;
    char *served = calloc((size_t)id->world, 1);
    int left = id->world - 1;
    double deadline = now_s() + timeout_s;
    struct reply rep = { htonl(WIRE_MAGIC), htonl((uint32_t)id->world), { 0 } };
    memcpy(rep.id, uid->internal, sizeof rep.id);
    while (served && left > 0) {
        int ms = (int)((deadline - now_s()) * 1000);
        struct pollfd pf = { .fd = lfd, .events = POLLIN };
        int ready = ms > 0 ? poll(&pf, 1, ms) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct hello h;
        /* a peer gets a few seconds to say who it is, so a silent stray cannot stall us */
        double hello_deadline = now_s() + 5 < deadline ? now_s() + 5 : deadline;
        if (read_all(fd, &h, sizeof h, hello_deadline) == 0 && ntohl(h.magic) == WIRE_MAGIC) {
            uint32_t r = ntohl(h.rank), w = ntohl(h.world);
            if (w != (uint32_t)id->world || r == 0 || r >= (uint32_t)id->world) {
                SAY(v, "a rank at %s:%d says rank %u of %u, but this job has %d ranks; ignored",
                        id->master_addr, port, r, w, id->world);
            } else {
                if (write_all(fd, &rep, sizeof rep, 1) == 0 && !served[r]) {
                    served[r] = 1;
                    left--;
                }
            }
        }
        close(fd);
    }
    close(lfd);
    free(served);
    if (left > 0) {
        SAY(v, "%d of %d ranks did not fetch the NCCL id from %s:%d within %g s", left,
                id->world - 1, id->master_addr, port, timeout_s);
        return -1;
    }
    return 0;
}

/* connect(2) bounded by the deadline: an unreachable MASTER_ADDR would otherwise hold a rank
 * for the kernel's SYN retries, minutes past --timeout. */
static int connect_by(int fd, const struct sockaddr *addr, socklen_t len, double deadline)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK))
        return -1;
    int rc = connect(fd, addr, len);
    if (rc && errno == EINPROGRESS) {
        int ms = (int)((deadline - now_s()) * 1000), soerr = 0;
        socklen_t sl = sizeof soerr;
        struct pollfd pf = { .fd = fd, .events = POLLOUT };
        if (ms <= 0 || poll(&pf, 1, ms) <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
            errno = soerr ? soerr : errno;
            return -1;
        }
        rc = 0;
    }
    if (rc == 0 && fcntl(fd, F_SETFL, flags))
        return -1;
    return rc;
}

static int tcp_try_fetch(const cp_launcher *id, int port, double deadline,
                         ncclUniqueId *uid, int *err)
{
    struct addrinfo *res = resolve(id->master_addr, port, 0);
    if (!res) {
        *err = EHOSTUNREACH;
        return -1;
    }
    int rc = -1;
    for (struct addrinfo *a = res; a && rc; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        struct hello h = { htonl(WIRE_MAGIC), htonl((uint32_t)id->rank),
                           htonl((uint32_t)id->world) };
        struct reply rep;
        if (connect_by(fd, a->ai_addr, a->ai_addrlen, deadline) == 0 &&
            write_all(fd, &h, sizeof h, 1) == 0 && read_all(fd, &rep, sizeof rep, deadline) == 0) {
            if (ntohl(rep.magic) == WIRE_MAGIC && ntohl(rep.world) == (uint32_t)id->world) {
                memcpy(uid->internal, rep.id, sizeof rep.id);
                rc = 0;
            } else {
                *err = EPROTO;
            }
        } else {
            *err = errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return rc;
}

static int tcp_fetch(const cp_launcher *id, double timeout_s, ncclUniqueId *uid,
                     const struct voice *v)
{
    int port = tcp_port(id), err = 0, telling = 0;
    double deadline = now_s() + timeout_s;
    while (tcp_try_fetch(id, port, deadline, uid, &err)) {
        /* the last try always ends in the deadline's ETIMEDOUT; "refused" says more */
        if (err != ETIMEDOUT)
            telling = err;
        if (now_s() > deadline) {
            SAY(v, "no NCCL id from rank 0 at %s:%d within %g s: %s", id->master_addr, port,
                    timeout_s, strerror(telling ? telling : err));
            return -1;
        }
        sleep_us(50000);
    }
    return 0;
}

int cp_rendezvous(const cp_launcher *id, double timeout_s, ncclUniqueId *uid,
                  cp_launcher_say_fn say, void *ctx)
{
    const struct voice v = { say, ctx };
    if (id->world == 1)
        return 0;
    if (id->rendezvous_dir)
        return id->rank == 0 ? dir_publish(id->rendezvous_dir, uid, &v)
                             : dir_fetch(id->rendezvous_dir, timeout_s, uid, &v);
    return id->rank == 0 ? tcp_serve(id, timeout_s, uid, &v) : tcp_fetch(id, timeout_s, uid, &v);
}
