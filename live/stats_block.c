/* stats_block: the reader's side of the live stats block (stats_block.h). */
#include "live/stats_block.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A writer holds the seqlock odd for a few microseconds every writer tick: a reader that
 * loses this many races in a row is facing something else (a writer stuck mid-update). */
#define CP_STATS_TRIES 1000

struct cp_stats_handle {
    int fd;
    char path[CP_STATS_PATH_BYTES];
};

void cp_stats_path(char *out, size_t len, const char *dir, unsigned uid, unsigned pid)
{
    snprintf(out, len, "%s/" CP_STATS_PREFIX "%u-%u", dir && *dir ? dir : CP_LIVE_DIR_DEFAULT,
             uid, pid);
}

static int read_all(int fd, void *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* Checks the fixed header fields of a copy: 0, or -1 with the reason. */
static int check_header(const cp_stats_block *b, const char *path, char *err, size_t errlen)
{
    if (memcmp(b->magic, CP_STATS_MAGIC, sizeof b->magic) != 0) {
        snprintf(err, errlen, "'%s' is not a collprof stats block (bad magic)", path);
        return -1;
    }
    if (b->version != CP_STATS_VERSION) {
        snprintf(err, errlen, "'%s' is a stats block of version %u; this collprof reads %u",
                 path, b->version, CP_STATS_VERSION);
        return -1;
    }
    if (b->total_bytes != CP_STATS_BYTES) {
        snprintf(err, errlen, "'%s' claims %u bytes; a version %u block has %u", path,
                 b->total_bytes, CP_STATS_VERSION, CP_STATS_BYTES);
        return -1;
    }
    return 0;
}

cp_stats_handle *cp_stats_open_as(const char *path, uid_t uid, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO planted under the name must not hang the reader in open. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path,
                 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = NULL;
    char buf[96];
    if (fstat(fd, &st) != 0) {
        why = strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        why = "not a regular file";
    } else if (uid != 0 && st.st_uid != uid) {
        snprintf(buf, sizeof buf, "owned by uid %u, not by uid %u", (unsigned)st.st_uid,
                 (unsigned)uid);
        why = buf;
    } else if (st.st_size < (off_t)offsetof(cp_stats_block, seqlock)) {
        snprintf(buf, sizeof buf, "%lld bytes, too short for a stats block",
                 (long long)st.st_size);
        why = buf;
    }
    if (why) {
        snprintf(err, errlen, "'%s' is refused: %s", path, why);
        close(fd);
        return NULL;
    }
    cp_stats_block head;
    if (read_all(fd, &head, offsetof(cp_stats_block, seqlock), 0) != 0) {
        snprintf(err, errlen, "cannot read '%s'", path);
        close(fd);
        return NULL;
    }
    if (check_header(&head, path, err, errlen) != 0) {
        close(fd);
        return NULL;
    }
    if (st.st_size != CP_STATS_BYTES) {
        snprintf(err, errlen, "'%s' is %lld bytes; a stats block has %u", path,
                 (long long)st.st_size, CP_STATS_BYTES);
        close(fd);
        return NULL;
    }
    cp_stats_handle *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        close(fd);
        return NULL;
    }
    h->fd = fd;
    snprintf(h->path, sizeof h->path, "%s", path);
    return h;
}

cp_stats_handle *cp_stats_open(const char *path, char *err, size_t errlen)
{
    return cp_stats_open_as(path, geteuid(), err, errlen);
}

void cp_stats_close(cp_stats_handle *h)
{
    if (!h)
        return;
    close(h->fd);
    free(h);
}

static int read_seq(int fd, uint64_t *s)
{
    return read_all(fd, s, sizeof *s, (off_t)offsetof(cp_stats_block, seqlock));
}

int cp_stats_snapshot(cp_stats_handle *h, cp_stats_block *out)
{
    char err[1280]; /* the reason is dropped (errno says EINVAL), but a path fits */
    for (int i = 0; i < CP_STATS_TRIES; i++) {
        /* Each pread is a system call of its own: the seq read before, the copy and the seq
         * read after cannot be reordered against each other. */
        uint64_t s1, s2;
        if (read_seq(h->fd, &s1) != 0)
            return -1;
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        if (read_all(h->fd, out, sizeof *out, 0) != 0 || read_seq(h->fd, &s2) != 0)
            return -1; /* truncated under us */
        if (s1 == s2) {
            if (check_header(out, h->path, err, sizeof err) != 0) {
                errno = EINVAL;
                return -1;
            }
            return 0;
        }
        sched_yield();
    }
    errno = EAGAIN;
    return -1;
}

/* "collprof-<digits>-<digits>" and nothing more. */
static int is_block_name(const char *name)
{
    size_t n = strlen(CP_STATS_PREFIX);
    if (strncmp(name, CP_STATS_PREFIX, n) != 0)
        return 0;
    const char *p = name + n;
    for (int part = 0; part < 2; part++) {
        const char *start = p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == start || p - start > 10)
            return 0;
        if (part == 0 && *p++ != '-')
            return 0;
    }
    return *p == '\0';
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cp_stats_list(const char *dir, char ***paths)
{
    *paths = NULL;
    if (!dir || !*dir)
        dir = CP_LIVE_DIR_DEFAULT;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_block_name(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if ((v[n] = malloc(len)) == NULL)
            break;
        snprintf(v[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_str);
    *paths = v;
    return n;
}

void cp_stats_list_free(char **paths, int n)
{
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}
