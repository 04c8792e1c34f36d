/* tui/live: the live model of `collprof top` (live.h), built from the stats blocks. */
#include "tui/live.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/settings.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add_note(cpt_live *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(cpt_live *l, const char *fmt, ...)
{
    char buf[CP_STATS_PATH_BYTES + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nv = realloc(l->notes, (l->nnotes + 1) * sizeof *nv);
    if (!nv)
        return;
    l->notes = nv;
    if ((nv[l->nnotes] = strdup(buf)) != NULL)
        l->nnotes++;
}

static void clear_notes(cpt_live *l)
{
    for (size_t i = 0; i < l->nnotes; i++)
        free(l->notes[i]);
    free(l->notes);
    l->notes = NULL;
    l->nnotes = 0;
}

void cpt_live_free(cpt_live *l)
{
    clear_notes(l);
    free(l->ranks);
    free(l->gone);
    memset(l, 0, sizeof *l);
}

int cpt_rank_hung(const cpt_live *l, const cpt_rank *r)
{
    double hang_s = l->hang_s > 0 ? l->hang_s : CP_HANG_S_DEFAULT;
    return r->state != CPT_EXITED &&
           (r->hang || (r->inflight_op != CP_OP_NONE && r->inflight_age_s >= hang_s));
}

size_t cpt_rank_nrecent(const cpt_rank *r)
{
    return r->snap.recent_count <= CP_STATS_RECENT ? r->snap.recent_count : CP_STATS_RECENT;
}

const cp_stats_entry *cpt_rank_recent(const cpt_rank *r, size_t i)
{
    if (i >= cpt_rank_nrecent(r))
        return NULL;
    return &r->snap.recent[(r->snap.recent_total - 1 - i) % CP_STATS_RECENT];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median GPU duration of the recent entries of op (CP_OP_NONE: every op), in us; 0 none. */
static double recent_p50_us(const cp_stats_block *b, unsigned op)
{
    uint64_t v[CP_STATS_RECENT];
    size_t n = 0;
    uint32_t cnt = b->recent_count <= CP_STATS_RECENT ? b->recent_count : CP_STATS_RECENT;
    for (uint32_t i = 0; i < cnt; i++) {
        const cp_stats_entry *e = &b->recent[i];
        if (!e->gpu_start_ns || e->gpu_end_ns < e->gpu_start_ns)
            continue;
        if (op != CP_OP_NONE && e->op != op)
            continue;
        v[n++] = e->gpu_end_ns - e->gpu_start_ns;
    }
    if (!n)
        return 0;
    qsort(v, n, sizeof v[0], cmp_u64);
    return (double)v[n / 2] / 1e3;
}

static void sum_ops(const cp_stats_block *b, uint64_t *calls, uint64_t *bytes, uint64_t *busy)
{
    uint64_t c = 0, by = 0, gpu = 0, host = 0;
    for (int i = 0; i < CP_STATS_OPS; i++) {
        c += b->ops[i].calls;
        by += b->ops[i].bytes;
        gpu += b->ops[i].gpu_ns;
        host += b->ops[i].host_ns;
    }
    *calls = c;
    *bytes = by;
    *busy = (b->flags & CP_STATS_GPU_TIMING) ? gpu : host;
}

static int pid_gone(uint32_t pid)
{
    return pid != 0 && kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/* The pid a block's name carries (collprof-<uid>-<pid>, cp_stats_path), 0 when it carries
 * none: what is left to judge a block by when its writer died inside an update. */
static uint32_t name_pid(const char *path)
{
    const char *base = strrchr(path, '/');
    unsigned uid, pid;
    char end;
    base = base ? base + 1 : path;
    if (sscanf(base, CP_STATS_PREFIX "%u-%u%c", &uid, &pid, &end) != 2)
        return 0;
    return pid;
}

/* Fills r from its new snapshot (r->snap), with prev the same process one scan ago (NULL
 * on its first). */
static void derive(cpt_rank *r, const cpt_rank *prev, uint64_t now)
{
    const cp_stats_block *b = &r->snap;
    snprintf(r->hostname, sizeof r->hostname, "%.*s", (int)sizeof b->hostname - 1, b->hostname);
    snprintf(r->job_id, sizeof r->job_id, "%.*s", (int)sizeof b->job_id - 1, b->job_id);
    r->pid = b->pid;
    r->uid = b->uid;
    r->rank = b->rank;
    r->local_rank = b->local_rank;
    r->world_size = b->world_size;
    r->cuda_dev = b->cuda_dev;
    r->start_mono_ns = b->start_mono_ns;
    r->lost_records = b->lost_records;
    r->gpu_timing = !!(b->flags & CP_STATS_GPU_TIMING);
    uint64_t busy;
    sum_ops(b, &r->calls, &r->bytes, &busy);

    r->calls_per_s = r->gbps = r->nccl_share = 0;
    double host_call_us = 0;
    if (prev) {
        uint64_t pcalls, pbytes, pbusy;
        sum_ops(&prev->snap, &pcalls, &pbytes, &pbusy);
        /* Counters are as of update_ns; the scan's own interval stands in when the writer
         * has not ticked in between (then nothing moved and the rates are 0 anyway). */
        uint64_t dt = b->update_ns > prev->snap.update_ns ? b->update_ns - prev->snap.update_ns
                                                           : 0;
        if (dt && r->calls >= pcalls && r->bytes >= pbytes && busy >= pbusy) {
            double s = (double)dt / 1e9;
            r->calls_per_s = (double)(r->calls - pcalls) / s;
            r->gbps = (double)(r->bytes - pbytes) / (double)dt;
            r->nccl_share = (double)(busy - pbusy) / (double)dt;
            if (r->nccl_share > 1)
                r->nccl_share = 1; /* overlapping streams can sum past the wall time */
            if (!r->gpu_timing && r->calls > pcalls)
                host_call_us = (double)(busy - pbusy) / 1e3 / (double)(r->calls - pcalls);
        }
    }
    /* Without GPU times, the mean host time of a call over the interval is the best
     * latency there is. */
    r->p50_us = r->gpu_timing ? recent_p50_us(b, CP_OP_NONE) : host_call_us;

    r->inflight_op = b->inflight.op;
    r->inflight_comm = b->inflight.comm_id;
    r->inflight_seq = b->inflight.seq;
    r->inflight_bytes = b->inflight.bytes;
    r->inflight_age_s = 0;
    r->typical_us = 0;
    r->hang = 0;
    if (r->inflight_op != CP_OP_NONE && r->state == CPT_RUNNING) {
        /* Same host, same CLOCK_MONOTONIC: the age is now's, not the writer's last tick. */
        uint64_t age = now >= b->inflight.since_ns ? now - b->inflight.since_ns
                                                   : b->inflight.age_ns;
        r->inflight_age_s = (double)age / 1e9;
        r->typical_us = recent_p50_us(b, r->inflight_op);
        /* The flag stays once set: it is this rank's state only while the hung operation,
         * or one queued behind it on its comm, is still in flight. */
        r->hang = (b->flags & CP_STATS_HANG) && b->hang.comm_id == b->inflight.comm_id;
    } else if (r->inflight_op != CP_OP_NONE) {
        r->inflight_age_s = (double)b->inflight.age_ns / 1e9;
    }
}

/* ---- lateness against the local peers ---- */

typedef struct arrival {
    uint64_t comm, seq, start;
    uint32_t host, rank; /* host: index of the rank's hostname; rank: index in the model */
} arrival;

static int cmp_arrival(const void *a, const void *b)
{
    const arrival *x = a, *y = b;
    if (x->host != y->host)
        return x->host < y->host ? -1 : 1;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

typedef struct group {
    size_t first, n;
    uint64_t median;
} group;

static int cmp_group_newest(const void *a, const void *b)
{
    const group *x = a, *y = b;
    return x->median > y->median ? -1 : x->median < y->median;
}

static void lateness(cpt_live *l)
{
    for (size_t i = 0; i < l->nranks; i++) {
        l->ranks[i].late_us_p50 = 0;
        l->ranks[i].late_count = 0;
        l->ranks[i].late_judged = 0;
    }
    l->slowest = -1;
    if (l->nranks < 2)
        return;
    size_t cap = 0;
    for (size_t i = 0; i < l->nranks; i++)
        cap += cpt_rank_nrecent(&l->ranks[i]);
    arrival *a = malloc((cap ? cap : 1) * sizeof *a);
    group *g = malloc((cap ? cap : 1) * sizeof *g);
    double *late = malloc(l->nranks * CPT_RECENT_LATE * sizeof *late);
    if (!a || !g || !late)
        goto out;
    size_t n = 0;
    for (size_t i = 0; i < l->nranks; i++) {
        const cpt_rank *r = &l->ranks[i];
        uint32_t host = (uint32_t)i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(l->ranks[j].hostname, r->hostname) == 0) {
                host = (uint32_t)j;
                break;
            }
        size_t cnt = cpt_rank_nrecent(r);
        for (size_t k = 0; k < cnt; k++) {
            const cp_stats_entry *e = &r->snap.recent[k];
            if (e->comm_id && e->gpu_start_ns)
                a[n++] = (arrival){e->comm_id, e->seq, e->gpu_start_ns, host, (uint32_t)i};
        }
    }
    qsort(a, n, sizeof *a, cmp_arrival);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && a[j].host == a[i].host && a[j].comm == a[i].comm && a[j].seq == a[i].seq)
            j++;
        if (j - i >= 2) {
            size_t m = j - i; /* sorted by start: the median is the middle one (or mean of two) */
            uint64_t med = m % 2 ? a[i + m / 2].start
                                 : a[i + m / 2 - 1].start / 2 + a[i + m / 2].start / 2;
            g[ng++] = (group){i, m, med};
        }
        i = j;
    }
    qsort(g, ng, sizeof *g, cmp_group_newest);
    for (size_t k = 0; k < ng; k++) {
        for (size_t t = 0; t < g[k].n; t++) {
            const arrival *x = &a[g[k].first + t];
            cpt_rank *r = &l->ranks[x->rank];
            if (r->late_judged >= CPT_RECENT_LATE)
                continue;
            double us = ((double)x->start - (double)g[k].median) / 1e3;
            late[(size_t)x->rank * CPT_RECENT_LATE + (size_t)r->late_judged++] = us;
            if (t == g[k].n - 1 && us > CPT_LATE_US)
                r->late_count++;
        }
    }
    for (size_t i = 0; i < l->nranks; i++) {
        cpt_rank *r = &l->ranks[i];
        if (!r->late_judged)
            continue;
        double *v = &late[i * CPT_RECENT_LATE];
        qsort(v, (size_t)r->late_judged, sizeof *v, cmp_dbl);
        size_t m = (size_t)r->late_judged;
        r->late_us_p50 = m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
        if (l->slowest < 0 || r->late_us_p50 > l->ranks[l->slowest].late_us_p50)
            l->slowest = (int)i;
    }
out:
    free(a);
    free(g);
    free(late);
}

/* ---- the scan ---- */

static int cmp_rank(const void *a, const void *b)
{
    const cpt_rank *x = a, *y = b;
    /* the live ranks first: exited ones must not push them off a screen */
    if (x->state != y->state)
        return x->state == CPT_RUNNING ? -1 : 1;
    /* unknown ranks (-1) after the known ones */
    uint32_t rx = (uint32_t)x->rank, ry = (uint32_t)y->rank;
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int is_gone(const cpt_live *l, const char *path, uint64_t start)
{
    for (size_t i = 0; i < l->ngone; i++)
        if (l->gone[i].start_mono_ns == start && strcmp(l->gone[i].path, path) == 0)
            return 1;
    return 0;
}

static void add_gone(cpt_live *l, const cpt_rank *r)
{
    if (l->ngone == l->gone_cap) {
        size_t cap = l->gone_cap ? 2 * l->gone_cap : 8;
        struct cpt_gone *ng = realloc(l->gone, cap * sizeof *ng);
        if (!ng)
            return;
        l->gone = ng;
        l->gone_cap = cap;
    }
    struct cpt_gone *e = &l->gone[l->ngone++];
    snprintf(e->path, sizeof e->path, "%s", r->path);
    e->start_mono_ns = r->start_mono_ns;
}

/* The dropped processes whose block has since disappeared need no remembering. */
static void prune_gone(cpt_live *l, char **paths, int npaths)
{
    size_t w = 0;
    for (size_t i = 0; i < l->ngone; i++) {
        int seen = 0;
        for (int k = 0; k < npaths && !seen; k++)
            seen = strcmp(paths[k], l->gone[i].path) == 0;
        if (seen)
            l->gone[w++] = l->gone[i];
    }
    l->ngone = w;
}

static int listed(char **paths, int npaths, const char *path)
{
    for (int k = 0; k < npaths; k++)
        if (strcmp(paths[k], path) == 0)
            return 1;
    return 0;
}

/* A rank listed one scan ago whose block is gone now (a clean exit unlinks it): listed on as
 * exited, with what it last published, for the scans an exited rank stays. */
static size_t keep_vanished(cpt_live *l, const cpt_rank *prev, size_t nprev, char **paths,
                            int npaths, cpt_rank *cur, size_t n)
{
    for (size_t i = 0; i < nprev; i++) {
        const cpt_rank *p = &prev[i];
        if (listed(paths, npaths, p->path) || p->exited_scans >= CPT_EXITED_KEEP ||
            is_gone(l, p->path, p->start_mono_ns))
            continue;
        cpt_rank *r = &cur[n++];
        *r = *p;
        r->state = CPT_EXITED;
        r->exited_scans = p->exited_scans + 1;
        r->calls_per_s = r->gbps = r->nccl_share = 0;
        r->inflight_op = CP_OP_NONE;
    }
    return n;
}

static const cpt_rank *find_prev(const cpt_rank *prev, size_t nprev, const char *path)
{
    for (size_t i = 0; i < nprev; i++)
        if (strcmp(prev[i].path, path) == 0)
            return &prev[i];
    return NULL;
}

int cpt_live_scan_at(cpt_live *l, const char *dir, uid_t uid, uint64_t now)
{
    if (!dir || !*dir)
        dir = CP_LIVE_DIR_DEFAULT;
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    clear_notes(l);
    l->other_users = 0;
    l->dead_hidden = 0;

    char **paths = NULL;
    int npaths = cp_stats_list(dir, &paths);
    l->dir_missing = npaths < 0 && errno == ENOENT;
    if (npaths < 0) {
        int e = errno;
        /* the model empties: what it showed is no longer known */
        l->nranks = 0;
        l->calls_per_s = l->gbps = 0;
        l->running = l->exited = l->hung = 0;
        l->slowest = -1;
        errno = e;
        return -1;
    }
    cpt_rank *prev = l->ranks;
    size_t nprev = l->nranks;
    /* room for every block, and for the ranks of the last scan whose block has gone */
    cpt_rank *cur = malloc(((size_t)npaths + nprev + 1) * sizeof *cur);
    if (!cur) {
        cp_stats_list_free(paths, npaths);
        errno = ENOMEM;
        return -1;
    }
    size_t n = 0;
    for (int k = 0; k < npaths; k++) {
        const char *path = paths[k];
        struct stat st;
        /* Another user's block is private to them: not opened, only counted. */
        if (uid != 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid != uid) {
            l->other_users++;
            continue;
        }
        char err[CP_STATS_PATH_BYTES + 128];
        errno = 0;
        cp_stats_handle *h = cp_stats_open_as(path, uid, err, sizeof err);
        if (!h) {
            if (errno != ENOENT) /* ended between the listing and the open: not news */
                add_note(l, "skipped %s", err);
            continue;
        }
        cpt_rank *r = &cur[n];
        int rc = cp_stats_snapshot(h, &r->snap);
        int e = errno;
        cp_stats_close(h);
        if (rc != 0) {
            /* a process killed inside an update leaves its block torn for good */
            if (e == EAGAIN && pid_gone(name_pid(path)))
                l->dead_hidden++;
            else
                add_note(l, "skipped '%s': %s", path,
                         e == EAGAIN ? "its writer never left an update" : "changed while read");
            continue;
        }
        if (is_gone(l, path, r->snap.start_mono_ns))
            continue;
        const cpt_rank *p = find_prev(prev, nprev, path);
        if (p && p->start_mono_ns != r->snap.start_mono_ns)
            p = NULL; /* the same pid again: a new process */
        snprintf(r->path, sizeof r->path, "%s", path);
        r->exited_scans = p ? p->exited_scans : 0;
        int gone = pid_gone(r->snap.pid), marked = atomic_load(&r->snap.exited) != 0;
        r->state = marked || gone ? CPT_EXITED : CPT_RUNNING;
        r->died = gone && !marked;
        /* left behind long ago (a killed job's): not news, and not to bury the live ranks */
        if (!p && gone && now > r->snap.update_ns &&
            now - r->snap.update_ns > (uint64_t)CPT_DEAD_GRACE_S * 1000000000u) {
            l->dead_hidden++;
            continue;
        }
        if (r->state == CPT_EXITED && ++r->exited_scans > CPT_EXITED_KEEP) {
            r->start_mono_ns = r->snap.start_mono_ns;
            add_gone(l, r);
            continue;
        }
        derive(r, p, now);
        n++;
    }
    n = keep_vanished(l, prev, nprev, paths, npaths, cur, n);
    prune_gone(l, paths, npaths);
    cp_stats_list_free(paths, npaths);
    free(prev);
    if (n > 1)
        qsort(cur, n, sizeof *cur, cmp_rank);
    l->ranks = cur;
    l->nranks = l->cap = n;
    l->scan_ns = now;

    l->calls_per_s = l->gbps = 0;
    l->running = l->exited = l->hung = 0;
    for (size_t i = 0; i < n; i++) {
        const cpt_rank *r = &cur[i];
        if (r->state == CPT_EXITED) {
            l->exited++;
            continue;
        }
        l->running++;
        l->hung += cpt_rank_hung(l, r);
        l->calls_per_s += r->calls_per_s;
        l->gbps += r->gbps;
    }
    lateness(l);
    if (l->other_users)
        add_note(l, "%zu block%s of other users not shown (root sees them)", l->other_users,
                 l->other_users == 1 ? "" : "s");
    if (l->dead_hidden)
        add_note(l, "%zu block%s of processes that died over %d s ago not shown "
                    "(collprof top --clean removes them)",
                 l->dead_hidden, l->dead_hidden == 1 ? "" : "s", CPT_DEAD_GRACE_S);
    return 0;
}

int cpt_live_clean(const char *dir, uid_t uid, size_t *kept)
{
    if (!dir || !*dir)
        dir = CP_LIVE_DIR_DEFAULT;
    *kept = 0;
    char **paths = NULL;
    int npaths = cp_stats_list(dir, &paths);
    if (npaths < 0)
        return -1;
    int removed = 0;
    for (int k = 0; k < npaths; k++) {
        char err[CP_STATS_PATH_BYTES + 128];
        /* only a valid block the caller owns (root: any): never a file planted at the name */
        cp_stats_handle *h = cp_stats_open_as(paths[k], uid, err, sizeof err);
        if (!h)
            continue;
        cp_stats_close(h);
        /* the name's pid, not the block's: a process killed inside an update leaves a
         * block no snapshot can read, and those are the ones to clean */
        if (!pid_gone(name_pid(paths[k]))) {
            ++*kept;
            continue;
        }
        removed += unlink(paths[k]) == 0;
    }
    cp_stats_list_free(paths, npaths);
    return removed;
}

int cpt_live_scan(cpt_live *l, const char *dir, uid_t uid)
{
    return cpt_live_scan_at(l, dir, uid, mono_ns());
}
