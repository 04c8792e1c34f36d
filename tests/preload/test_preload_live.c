/* The live stats block and the hang watchdog: the reader's checks and seqlock on synthetic
 * blocks, then collprof-sim on the emulation under the shim, its blocks read while it runs
 * (COLLPROF_LIVE_DIR keeps them out of the real /dev/shm). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "live/stats_block.h"
#include "shim_test_util.h"

static char *g_tmp;
static job_result g_res;

/* ---- synthetic blocks ---- */

static void write_block(const char *path, const cp_stats_block *b, size_t len)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, len), (ssize_t)len);
    close(fd);
}

static void valid_block(cp_stats_block *b)
{
    memset(b, 0, sizeof *b);
    memcpy(b->magic, CP_STATS_MAGIC, 8);
    b->version = CP_STATS_VERSION;
    b->total_bytes = CP_STATS_BYTES;
}

static void refused(const char *path, const char *why)
{
    char err[512] = "";
    cp_stats_handle *h = cp_stats_open(path, err, sizeof err);
    if (h || !strstr(err, why))
        fprintf(stderr, "want '%s', got: %s\n", why, err);
    assert_null(h);
    assert_non_null(strstr(err, why));
    assert_non_null(strstr(err, path));
}

static void corrupt_and_foreign_files_are_refused(void **state)
{
    (void)state;
    static cp_stats_block b;
    char path[4300], link[4300];
    snprintf(path, sizeof path, "%s/collprof-0-1", g_tmp);
    valid_block(&b);
    write_block(path, &b, sizeof b);
    char err[512];
    cp_stats_handle *h = cp_stats_open(path, err, sizeof err);
    assert_non_null(h);
    cp_stats_close(h);

    memcpy(b.magic, "COLLPROF", 8);
    write_block(path, &b, sizeof b);
    refused(path, "bad magic");
    valid_block(&b);
    b.version = 7;
    write_block(path, &b, sizeof b);
    refused(path, "version 7");
    valid_block(&b);
    b.total_bytes = 1u << 30;
    write_block(path, &b, sizeof b);
    refused(path, "claims 1073741824 bytes");
    valid_block(&b);
    write_block(path, &b, 10);
    refused(path, "too short");
    write_block(path, &b, 4096);
    refused(path, "4096 bytes");
    write_block(path, &b, sizeof b);
    snprintf(link, sizeof link, "%s/collprof-0-2", g_tmp);
    assert_int_equal(symlink(path, link), 0);
    refused(link, "symbolic link");
    unlink(link);
    snprintf(link, sizeof link, "%s/collprof-0-3", g_tmp);
    assert_int_equal(mkfifo(link, 0600), 0);
    refused(link, "not a regular file");
    unlink(link);

    /* another uid's block: as root, chown it away and check as a user would */
    uid_t other = geteuid() == 0 ? 4242 : geteuid() + 1;
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 4241, 4241), 0);
        h = cp_stats_open(path, err, sizeof err); /* root reads anyone's */
        assert_non_null(h);
        cp_stats_close(h);
    }
    h = cp_stats_open_as(path, other, err, sizeof err);
    assert_null(h);
    assert_non_null(strstr(err, "owned by uid"));
    unlink(path);
}

static void listing_keeps_only_block_names(void **state)
{
    (void)state;
    char dir[4300], path[4400];
    snprintf(dir, sizeof dir, "%s/list", g_tmp);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *names[] = {"collprof-0-12", "collprof-1000-5", "collprof-0-", "collprof-x-1",
                           "collprof-0-1-2", "other", "collprof-0-12.tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        close(open(path, O_CREAT | O_WRONLY, 0600));
    }
    char **paths;
    int n = cp_stats_list(dir, &paths);
    assert_int_equal(n, 2);
    assert_non_null(strstr(paths[0], "/collprof-0-12"));
    assert_non_null(strstr(paths[1], "/collprof-1000-5"));
    cp_stats_list_free(paths, n);
    snprintf(path, sizeof path, "%s/none", g_tmp);
    assert_int_equal(cp_stats_list(path, &paths), -1);
}

/* ---- seqlock ---- */

static cp_stats_block *g_shared;
static _Atomic int g_stop;

static void *hammer(void *arg)
{
    (void)arg;
    for (uint64_t v = 1; !atomic_load(&g_stop); v++) {
        cp_stats_write_begin(g_shared);
        g_shared->update_ns = v;
        for (int i = 0; i < CP_STATS_OPS; i++)
            g_shared->ops[i].calls = v;
        for (int i = 0; i < CP_STATS_RECENT; i++)
            g_shared->recent[i].seq = v;
        g_shared->lost_records = v;
        cp_stats_write_end(g_shared);
        /* The shim's writer updates once a tick; a writer that never pauses would starve
         * a slow reader (a sanitizer build) of every window and test nothing but speed.
         * A pause shorter than a read keeps reads overlapping updates. */
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void snapshots_are_never_torn(void **state)
{
    (void)state;
    char path[4300], err[512];
    snprintf(path, sizeof path, "%s/collprof-0-99", g_tmp);
    static cp_stats_block b, snap;
    valid_block(&b);
    write_block(path, &b, sizeof b);
    int fd = open(path, O_RDWR);
    g_shared = mmap(NULL, sizeof b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(g_shared != MAP_FAILED);
    cp_stats_handle *h = cp_stats_open(path, err, sizeof err);
    assert_non_null(h);
    pthread_t t;
    atomic_store(&g_stop, 0);
    pthread_create(&t, NULL, hammer, NULL);
    int ok = 0, busy = 0;
    uint64_t last = 0;
    for (int k = 0; k < 3000; k++) {
        if (cp_stats_snapshot(h, &snap) != 0) {
            assert_int_equal(errno, EAGAIN); /* a writer this busy may win every try */
            busy++;
            continue;
        }
        uint64_t v = snap.update_ns;
        for (int i = 0; i < CP_STATS_OPS; i++)
            assert_true(snap.ops[i].calls == v);
        for (int i = 0; i < CP_STATS_RECENT; i++)
            assert_true(snap.recent[i].seq == v);
        assert_true(snap.lost_records == v);
        assert_true(v >= last);
        last = v;
        ok++;
    }
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    assert_true(ok > 100);
    assert_true(last > 0);
    (void)busy;

    /* a writer stuck mid-update: bounded retries, then -1 */
    cp_stats_write_begin(g_shared);
    assert_int_equal(cp_stats_snapshot(h, &snap), -1);
    assert_int_equal(errno, EAGAIN);
    cp_stats_write_end(g_shared);
    assert_int_equal(cp_stats_snapshot(h, &snap), 0);
    cp_stats_close(h);
    munmap(g_shared, sizeof b);
    unlink(path);
}

/* ---- the shim's blocks under collprof-sim ---- */

typedef struct sim_run {
    const char *const *env;
    const char *const *argv;
    _Atomic int done;
} sim_run;

static void *sim_thread(void *arg)
{
    sim_run *r = arg;
    st_run_prog(&g_res, "collprof-sim", 1, r->env, r->argv);
    atomic_store(&r->done, 1);
    return NULL;
}

#define MAX_PROCS 8
typedef struct watched {
    uint32_t pid;
    int snaps;
    cp_stats_block first, last;
    int saw_hang;
    uint64_t max_inflight_age;
} watched;
static watched g_w[MAX_PROCS];
static int g_nw;

static watched *watched_of(uint32_t pid)
{
    for (int i = 0; i < g_nw; i++)
        if (g_w[i].pid == pid)
            return &g_w[i];
    assert_true(g_nw < MAX_PROCS);
    memset(&g_w[g_nw], 0, sizeof g_w[g_nw]);
    g_w[g_nw].pid = pid;
    return &g_w[g_nw++];
}

/* One look at every block in live_dir: checks each snapshot against the last one. */
static void look(const char *live_dir)
{
    char **paths;
    int n = cp_stats_list(live_dir, &paths);
    static cp_stats_block s;
    for (int i = 0; i < n; i++) {
        char err[512];
        cp_stats_handle *h = cp_stats_open(paths[i], err, sizeof err);
        if (!h)
            continue; /* gone between the listing and the open: it exited */
        int rc = cp_stats_snapshot(h, &s);
        cp_stats_close(h);
        if (rc != 0)
            continue;
        char want[64];
        snprintf(want, sizeof want, "/collprof-%u-%u", s.uid, s.pid);
        assert_non_null(strstr(paths[i], want));
        assert_int_equal(s.uid, geteuid());
        watched *w = watched_of(s.pid);
        if (w->snaps) {
            for (int op = 0; op < CP_STATS_OPS; op++) {
                assert_true(s.ops[op].calls >= w->last.ops[op].calls);
                assert_true(s.ops[op].bytes >= w->last.ops[op].bytes);
            }
            assert_true(s.recent_total >= w->last.recent_total);
            assert_true(s.update_ns >= w->last.update_ns);
        } else {
            w->first = s;
        }
        w->last = s;
        w->snaps++;
        w->saw_hang |= !!(s.flags & CP_STATS_HANG);
        if (s.inflight.op != CP_OP_NONE && s.inflight.age_ns > w->max_inflight_age)
            w->max_inflight_age = s.inflight.age_ns;
    }
    if (n > 0)
        cp_stats_list_free(paths, n);
}

/* Runs collprof-sim with env + argv, looking at its blocks every 20 ms while it runs. */
static void run_sim_watching(const char *live_dir, const char *const *env,
                             const char *const *argv)
{
    char sim[4200];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", st_build_dir());
    if (!st_exists(sim)) {
        fprintf(stderr, "skipped: collprof-sim is not built (emu/sim)\n");
        skip();
    }
    g_nw = 0;
    mkdir(live_dir, 0700);
    sim_run r = {.env = env, .argv = argv};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sim_thread, &r), 0);
    while (!atomic_load(&r.done)) {
        look(live_dir);
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    pthread_join(t, NULL);
}

typedef struct trace_ops {
    uint64_t calls[CP_STATS_OPS], bytes[CP_STATS_OPS];
    cp_rec_hang hangs[4];
    int nhang;
} trace_ops;
static int to_call(void *ctx, const cp_rec_call *c)
{
    trace_ops *t = ctx;
    if (c->op < CP_STATS_OPS) {
        t->calls[c->op]++;
        t->bytes[c->op] += c->count * cp_dtype_size(c->dtype);
    }
    return 0;
}
static int to_hang(void *ctx, const cp_rec_hang *h)
{
    trace_ops *t = ctx;
    if (t->nhang < 4)
        t->hangs[t->nhang++] = *h;
    return 0;
}

/* The trace of pid in dir. */
static void read_trace_of(const char *dir, uint32_t pid, trace_ops *t)
{
    memset(t, 0, sizeof *t);
    char **paths;
    int nf = st_list(dir, &paths);
    int found = 0;
    for (int i = 0; i < nf; i++) {
        int status;
        char err[256];
        cp_trace_reader *r = cp_trace_reader_open(paths[i], &status, err, sizeof err);
        assert_non_null(r);
        if (cp_trace_reader_header(r)->pid == pid) {
            cp_trace_visitor v = {.ctx = t, .on_call = to_call, .on_hang = to_hang};
            cp_walk_result wr;
            cp_trace_walk(r, &v, &wr);
            found = 1;
        }
        cp_trace_reader_close(r);
    }
    cp_trace_dir_free(paths, nf);
    assert_true(found);
}

static void env_for(char (*buf)[4400], const char *trace_dir,
                    const char *live_dir)
{
    snprintf(buf[0], sizeof buf[0], "COLLPROF_DIR=%s/%s", g_tmp, trace_dir);
    snprintf(buf[1], sizeof buf[1], "COLLPROF_LIVE_DIR=%s/%s", g_tmp, live_dir);
    snprintf(buf[2], sizeof buf[2], "LD_LIBRARY_PATH=%s/emu", st_build_dir());
}

static void blocks_follow_the_running_job_and_vanish_at_exit(void **state)
{
    (void)state;
    static char e[3][4400];
    env_for(e, "run-trace", "run-live");
    /* rank 0's stream starts each collective 8 ms late: ~1 s of 120 collectives */
    const char *env[] = {e[0], e[1], e[2], "COLLPROF_EMU_DELAY=0:8", NULL};
    const char *argv[] = {"--launch", "2", "--pattern", "ddp", "--steps", "24",
                          "--scale", "0.001", NULL};
    char live[4300], trace[4300], host[256] = "";
    snprintf(live, sizeof live, "%s/run-live", g_tmp);
    snprintf(trace, sizeof trace, "%s/run-trace", g_tmp);
    run_sim_watching(live, env, argv);
    if (g_res.status != 0)
        fprintf(stderr, "%s\n%s", g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    gethostname(host, sizeof host - 1);
    assert_int_equal(g_nw, 2);
    int ranks_seen = 0;
    for (int i = 0; i < g_nw; i++) {
        const watched *w = &g_w[i];
        const cp_stats_block *s = &w->last;
        assert_true(w->snaps >= 5);
        assert_true(s->rank == 0 || s->rank == 1);
        ranks_seen |= 1 << s->rank;
        assert_int_equal(s->world_size, 2);
        assert_string_equal(s->hostname, host);
        assert_non_null(strstr(s->trace_path, trace));
        assert_true(s->flags & CP_STATS_GPU_TIMING);
        assert_true(s->start_mono_ns > 0 && s->start_realtime_ns > 0);
        /* counters grew while we watched, and the trace holds at least what they said */
        assert_true(s->ops[CP_OP_ALLREDUCE].calls > w->first.ops[CP_OP_ALLREDUCE].calls);
        assert_true(s->ops[CP_OP_ALLREDUCE].gpu_ns > 0);
        trace_ops t;
        read_trace_of(trace, s->pid, &t);
        for (int op = 1; op < CP_STATS_OPS; op++) {
            assert_true(s->ops[op].calls <= t.calls[op]);
            assert_true(s->ops[op].bytes <= t.bytes[op]);
        }
        assert_int_equal(t.calls[CP_OP_ALLREDUCE], 120);
        assert_int_equal(t.nhang, 0);
        /* the ring holds AllReduces with sane times */
        int ar = 0;
        assert_true(s->recent_count > 0 && s->recent_count <= CP_STATS_RECENT);
        for (uint32_t k = 0; k < s->recent_count; k++) {
            const cp_stats_entry *en = &s->recent[k];
            if (en->op != CP_OP_ALLREDUCE)
                continue;
            ar++;
            assert_true(en->bytes > 0);
            assert_true(en->comm_id != 0);
            assert_true(en->enter_ns >= s->start_mono_ns && en->enter_ns <= s->update_ns);
            if (en->gpu_end_ns) {
                assert_true(en->gpu_start_ns <= en->gpu_end_ns);
                assert_true(en->gpu_end_ns <= s->update_ns + 1000000);
            }
        }
        assert_true(ar > 0);
        assert_false(s->flags & CP_STATS_HANG);
    }
    assert_int_equal(ranks_seen, 3);
    char **paths;
    assert_int_equal(cp_stats_list(live, &paths), 0); /* removed at exit */
}

static void live_0_gives_no_block(void **state)
{
    (void)state;
    static char e[3][4400];
    env_for(e, "off-trace", "off-live");
    const char *env[] = {e[0], e[1], e[2], "COLLPROF_LIVE=0", "COLLPROF_EMU_DELAY=0:5", NULL};
    const char *argv[] = {"--launch", "2", "--pattern", "ddp", "--steps", "10",
                          "--scale", "0.001", NULL};
    char live[4300];
    snprintf(live, sizeof live, "%s/off-live", g_tmp);
    run_sim_watching(live, env, argv);
    assert_int_equal(g_res.status, 0);
    assert_int_equal(g_nw, 0);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
}

static void a_hang_is_reported_once_and_the_job_ends_as_it_would(void **state)
{
    (void)state;
    static char e[3][4400];
    env_for(e, "hang-trace", "hang-live");
    /* 4 s, not 1 or 2: on a loaded machine (CI beside other builds) a healthy AllReduce of
     * this job took over 1 s, and under the sanitizers beside two busy loops over 2 s, and its
     * HANG record was the one this test found; the job's own watchdog waits 10 s */
    const char *env[] = {e[0], e[1], e[2], "COLLPROF_EMU_HANG=1:3", "COLLPROF_HANG_S=4", NULL};
    const char *argv[] = {"--launch", "2", "--pattern", "ddp", "--steps", "4", "--scale",
                          "0.001", "--timeout", "10", NULL};
    char live[4300], trace[4300];
    snprintf(live, sizeof live, "%s/hang-live", g_tmp);
    snprintf(trace, sizeof trace, "%s/hang-trace", g_tmp);
    run_sim_watching(live, env, argv);
    assert_true(WIFEXITED(g_res.status));
    assert_int_equal(WEXITSTATUS(g_res.status), 6); /* the sim's own watchdog, as without us */
    assert_non_null(strstr(g_res.err, "collprof: WARN suspected hang: AllReduce comm="));
    assert_non_null(strstr(g_res.err, " seq=3 in flight for "));
    /* The emulated rank 1 made the call and never joined it, so it may see it in flight
     * too: each rank reports it once, one WARN line per HANG record. */
    int hung = 0, records = 0;
    for (int i = 0; i < g_nw; i++) {
        const watched *w = &g_w[i];
        trace_ops t;
        read_trace_of(trace, w->pid, &t);
        for (int k = 0; t.nhang > 1 && k < t.nhang; k++)
            fprintf(stderr, "rank %d HANG comm %u seq %llu op %u age %llu\n%s", w->last.rank,
                    t.hangs[k].comm_index, (unsigned long long)t.hangs[k].seq, t.hangs[k].op,
                    (unsigned long long)t.hangs[k].age_ns, k ? "" : g_res.err);
        assert_true(t.nhang <= 1);
        records += t.nhang;
        assert_int_equal(w->saw_hang, t.nhang);
        if (t.nhang) {
            assert_int_equal(t.hangs[0].op, CP_OP_ALLREDUCE);
            assert_int_equal(t.hangs[0].seq, 3);
            assert_true(t.hangs[0].age_ns >= 4000000000ull);
            assert_int_equal(w->last.hang.op, CP_OP_ALLREDUCE);
            assert_int_equal(w->last.hang.seq, 3);
        }
        if (w->last.rank != 0)
            continue;
        hung = 1;
        assert_int_equal(t.nhang, 1); /* rank 0 waits inside the collective: always */
        assert_true(w->max_inflight_age >= 4000000000ull);
    }
    assert_int_equal(st_count_lines(g_res.err, "suspected hang:"), records);
    assert_true(hung);
    char **paths;
    assert_int_equal(cp_stats_list(live, &paths), 0);
}

/* st_run_prog forks: this runs in the child before its exec, where the job's pid is known. */
static char g_plant_dir[4300], g_plant_target[4300];
static void plant_symlink_in_child(void)
{
    if (!g_plant_dir[0])
        return;
    char path[4400];
    cp_stats_path(path, sizeof path, g_plant_dir, (unsigned)geteuid(), (unsigned)getpid());
    if (symlink(g_plant_target, path) != 0)
        _exit(126);
}

static void a_symlink_at_the_name_gives_one_warn_and_no_block(void **state)
{
    (void)state;
    static job_result plain;
    const char *argv[] = {"burst", "5", NULL};
    st_run(&plain, 0, NULL, argv);
    snprintf(g_plant_dir, sizeof g_plant_dir, "%s/plant", g_tmp);
    snprintf(g_plant_target, sizeof g_plant_target, "%s/target", g_tmp);
    mkdir(g_plant_dir, 0700);
    int fd = open(g_plant_target, O_CREAT | O_WRONLY, 0644);
    assert_int_equal(write(fd, "keep", 4), 4);
    close(fd);
    static char e[2][4400];
    snprintf(e[0], sizeof e[0], "COLLPROF_DIR=%s/plant-trace", g_tmp);
    snprintf(e[1], sizeof e[1], "COLLPROF_LIVE_DIR=%s", g_plant_dir);
    const char *env[] = {e[0], e[1], NULL};
    st_run(&g_res, 1, env, argv);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s", g_plant_dir);
    g_plant_dir[0] = '\0';
    assert_int_equal(g_res.status, plain.status);
    assert_string_equal(g_res.out, plain.out);
    if (st_count_lines(g_res.err, "collprof: WARN") != 1)
        fprintf(stderr, "%s", g_res.err);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 1);
    assert_non_null(strstr(g_res.err, "cannot create the live stats block"));
    struct stat st;
    assert_int_equal(stat(g_plant_target, &st), 0);
    assert_int_equal(st.st_size, 4); /* neither followed nor truncated */
    char **paths;
    int n = cp_stats_list(dir, &paths);
    assert_int_equal(n, 1); /* the planted link itself, left alone, and no block */
    char err[512];
    assert_null(cp_stats_open(paths[0], err, sizeof err));
    cp_stats_list_free(paths, n);
    char trace[4300];
    snprintf(trace, sizeof trace, "%s/plant-trace", g_tmp);
    n = st_list(trace, &paths);
    assert_int_equal(n, 1); /* tracing went on */
    cp_trace_dir_free(paths, n);
}

int main(void)
{
    g_tmp = st_tmpdir();
    pthread_atfork(NULL, NULL, plant_symlink_in_child);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(corrupt_and_foreign_files_are_refused),
        cmocka_unit_test(listing_keeps_only_block_names),
        cmocka_unit_test(snapshots_are_never_torn),
        cmocka_unit_test(blocks_follow_the_running_job_and_vanish_at_exit),
        cmocka_unit_test(live_0_gives_no_block),
        cmocka_unit_test(a_symlink_at_the_name_gives_one_warn_and_no_block),
        cmocka_unit_test(a_hang_is_reported_once_and_the_job_ends_as_it_would),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    st_rmtree(g_tmp);
    free(g_tmp);
    return rc;
}
