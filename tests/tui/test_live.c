/* The live model of `collprof top` over synthetic stats blocks written into a temp dir:
 * rates between two scans, in-flight age and hang, lateness against local peers, exited
 * processes shown then dropped (their file left alone), corrupt, foreign and other users'
 * blocks skipped with a note, the empty state, and both snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "tests/tui/live_test_util.h"
#include "tui/live.h"

#define S 1000000000ull
#define T0 (1000 * S) /* the synthetic CLOCK_MONOTONIC of the first scan */

static char g_dir[64];
static pid_t g_child[8];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/collprof-tui-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    memset(g_child, 0, sizeof g_child);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++)
        lt_kill(g_child[i]);
    lt_rmtree(g_dir);
    return 0;
}

/* The snapshot as a string (malloc'ed). */
static char *text_of(const cpt_live *l, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(json ? cpt_snapshot_json(f, l) : cpt_snapshot_text(f, l), 0);
    fclose(f);
    return buf;
}

static int has_note(const cpt_live *l, const char *needle)
{
    for (size_t i = 0; i < l->nnotes; i++)
        if (strstr(l->notes[i], needle))
            return 1;
    return 0;
}

static void empty_dir(void **state)
{
    (void)state;
    cpt_live l = {0};
    assert_int_equal(cpt_live_scan(&l, g_dir, geteuid()), 0);
    assert_int_equal(l.nranks, 0);
    assert_int_equal(l.slowest, -1);
    char *t = text_of(&l, 0);
    char want[160];
    snprintf(want, sizeof want, "no profiled process on this node (looked in %s)", g_dir);
    assert_non_null(strstr(t, want));
    free(t);
    t = text_of(&l, 1);
    assert_non_null(strstr(t, "\"ranks\":[]"));
    free(t);
    /* a directory that does not exist: -1 and ENOENT, the caller's empty state */
    char missing[96];
    snprintf(missing, sizeof missing, "%s/nope", g_dir);
    assert_int_equal(cpt_live_scan(&l, missing, geteuid()), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(l.nranks, 0);
    assert_true(l.dir_missing); /* ... and says so */
    t = text_of(&l, 0);
    assert_non_null(strstr(t, "nope, which does not exist yet)"));
    free(t);
    t = text_of(&l, 1);
    assert_non_null(strstr(t, "\"dir_exists\":false"));
    free(t);
    assert_int_equal(cpt_live_scan(&l, g_dir, geteuid()), 0);
    assert_false(l.dir_missing);
    cpt_live_free(&l);
}

static void rates_inflight_hang(void **state)
{
    (void)state;
    g_child[0] = lt_live_child();
    static cp_stats_block b;
    lt_block_init(&b, (unsigned)g_child[0], 5, 1, 8, "nodeA");
    b.update_ns = T0;
    b.ops[CP_OP_ALLREDUCE] = (cp_stats_op){.calls = 100, .bytes = 1000000000ull,
                                           .host_ns = S / 100, .gpu_ns = S / 5};
    for (int i = 0; i < 9; i++) /* AllReduce durations 10..90 us: p50 50 us */
        lt_push(&b, CP_OP_ALLREDUCE, 7, (uint64_t)i, 1 << 20, T0 - S + (uint64_t)i * 1000000,
                T0 - S + (uint64_t)i * 1000000 + (uint64_t)(i + 1) * 10000);
    lt_push(&b, CP_OP_BROADCAST, 7, 9, 64, T0 - S / 2, T0 - S / 2 + 1000000); /* 1000 us */
    assert_int_equal(lt_write(g_dir, &b), 0);

    cpt_live l = {0};
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0), 0);
    assert_int_equal(l.nranks, 1);
    const cpt_rank *r = &l.ranks[0];
    assert_int_equal(r->state, CPT_RUNNING);
    assert_int_equal(r->rank, 5);
    assert_int_equal(r->pid, (uint32_t)g_child[0]);
    assert_true(r->calls_per_s == 0 && r->gbps == 0); /* no interval yet */
    assert_int_equal(r->calls, 100);
    assert_true(r->p50_us > 59.9 && r->p50_us < 60.1); /* 10 values: the upper middle */
    assert_int_equal(r->inflight_op, CP_OP_NONE);

    /* one second later: 200 more calls, 2 GB, half of it on the GPU; one in flight 2 s */
    b.update_ns = T0 + S;
    b.ops[CP_OP_ALLREDUCE] = (cp_stats_op){.calls = 300, .bytes = 3000000000ull,
                                           .host_ns = S / 50, .gpu_ns = S / 5 + S / 2};
    b.inflight = (cp_stats_inflight){.comm_id = 7, .seq = 10, .bytes = 1 << 20,
                                     .since_ns = T0 - S, .age_ns = 2 * S - S / 10, .peer = -1,
                                     .op = CP_OP_ALLREDUCE};
    b.flags |= CP_STATS_HANG;
    b.hang = (cp_stats_hang){.comm_id = 7, .seq = 10, .op = CP_OP_ALLREDUCE};
    assert_int_equal(lt_write(g_dir, &b), 0);
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + S), 0);
    r = &l.ranks[0];
    assert_true(r->calls_per_s > 199.9 && r->calls_per_s < 200.1);
    assert_true(r->gbps > 1.999 && r->gbps < 2.001);
    assert_true(r->nccl_share > 0.499 && r->nccl_share < 0.501);
    assert_int_equal(r->inflight_op, CP_OP_ALLREDUCE);
    assert_int_equal(r->inflight_seq, 10);
    assert_true(r->inflight_age_s > 1.999 && r->inflight_age_s < 2.001); /* now's, not the tick's */
    assert_true(r->typical_us > 49.9 && r->typical_us < 50.1); /* AllReduce's only */
    assert_true(r->hang);
    assert_int_equal(l.hung, 1);
    assert_int_equal(l.running, 1);
    assert_true(l.calls_per_s > 199.9 && l.calls_per_s < 200.1);
    assert_int_equal(cpt_rank_nrecent(r), 10);
    assert_int_equal(cpt_rank_recent(r, 0)->op, CP_OP_BROADCAST); /* newest first */
    assert_int_equal(cpt_rank_recent(r, 9)->seq, 0);
    assert_null(cpt_rank_recent(r, 10));

    char *t = text_of(&l, 0);
    assert_non_null(strstr(t, "AllReduce#10 2.0s!"));
    assert_non_null(strstr(t, "5/1"));
    /* the screen's column names (test_top_draw.c) and number formats, not names of its own */
    assert_non_null(strstr(t, "\nRANK  HOST         PID GPU CALL/S  GB/S NCCL%    P50 IN FLIGHT"
                              "             LATE\n"));
    assert_non_null(strstr(t, "   200 "));  /* calls/s as the screen's CALL/S */
    assert_non_null(strstr(t, "  60us "));  /* p50 with its unit, as the screen's P50 */
    for (char *line = t; *line;) { /* 80 columns */
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        assert_true(len <= 80);
        line += len + (nl ? 1 : 0);
    }
    free(t);
    t = text_of(&l, 1);
    json_object *root = json_tokener_parse(t);
    assert_non_null(root);
    json_object *ranks, *rk, *v, *f;
    assert_true(json_object_object_get_ex(root, "ranks", &ranks));
    assert_int_equal(json_object_array_length(ranks), 1);
    rk = json_object_array_get_idx(ranks, 0);
    static const char *const keys[] = {"rank", "local_rank", "world_size", "host", "pid", "gpu",
                                       "job_id", "state", "calls", "calls_per_s", "gbps",
                                       "nccl_share", "p50_us", "inflight", "hang",
                                       "late_us_p50", "late_count"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_true(json_object_object_get_ex(rk, keys[i], &v));
    assert_true(json_object_object_get_ex(rk, "world_size", &v));
    assert_int_equal(json_object_get_int(v), 8);
    assert_true(json_object_object_get_ex(rk, "host", &v));
    assert_string_equal(json_object_get_string(v), "nodeA");
    assert_true(json_object_object_get_ex(rk, "state", &v));
    assert_string_equal(json_object_get_string(v), "hung");
    assert_true(json_object_object_get_ex(rk, "inflight", &f));
    assert_true(json_object_object_get_ex(f, "comm", &v));
    assert_string_equal(json_object_get_string(v), "0000000000000007");
    assert_true(json_object_object_get_ex(f, "age_s", &v));
    assert_true(json_object_get_double(v) > 1.99);
    json_object_put(root);
    free(t);

    /* the hung operation completes: the flag stays in the block, the rank is not hung */
    b.update_ns = T0 + 2 * S;
    b.inflight.op = CP_OP_NONE;
    assert_int_equal(lt_write(g_dir, &b), 0);
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 2 * S), 0);
    assert_false(l.ranks[0].hang);
    assert_int_equal(l.hung, 0);
    assert_true(l.ranks[0].calls_per_s == 0); /* nothing moved */

    /* in flight past COLLPROF_HANG_S on another comm, before the watchdog said so: hung as
     * the screen marks it, in the totals and in --json alike */
    l.hang_s = 1.5;
    b.update_ns = T0 + 3 * S;
    b.inflight = (cp_stats_inflight){.comm_id = 8, .seq = 0, .bytes = 1 << 20,
                                     .since_ns = T0 + S, .age_ns = 2 * S, .peer = -1,
                                     .op = CP_OP_ALLREDUCE};
    assert_int_equal(lt_write(g_dir, &b), 0);
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 3 * S), 0);
    assert_false(l.ranks[0].hang);
    assert_int_equal(l.hung, 1);
    t = text_of(&l, 1);
    assert_non_null(strstr(t, "\"state\":\"hung\""));
    free(t);
    l.hang_s = 60;
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 3 * S), 0);
    assert_int_equal(l.hung, 0);
    cpt_live_free(&l);
}

/* 4 ranks on nodeA (rank 2 starts every collective 500 us after the others), 2 on nodeB
 * whose clock is unrelated: lateness compares only ranks of one host. */
static void lateness_vs_local_peers(void **state)
{
    (void)state;
    static cp_stats_block b[6];
    for (int i = 0; i < 6; i++) {
        g_child[i] = lt_live_child();
        const char *host = i < 4 ? "nodeA" : "nodeB";
        lt_block_init(&b[i], (unsigned)g_child[i], i, i % 4, 6, host);
        b[i].update_ns = T0;
        for (uint64_t s = 0; s < 40; s++) {
            uint64_t start = T0 - S + s * 2000000 + (uint64_t)i * 1000; /* 1 us jitter */
            if (i == 2)
                start += 500000;
            if (i >= 4)
                start += 777 * S + (i == 5 ? 3000000 : 0); /* nodeB: another clock */
            lt_push(&b[i], CP_OP_ALLREDUCE, 99, s, 1024, start, start + 100000);
        }
        /* a collective only this rank has seen so far: not a common one */
        lt_push(&b[i], CP_OP_ALLREDUCE, 99, 40 + (uint64_t)i, 1024, T0, 0);
        assert_int_equal(lt_write(g_dir, &b[i]), 0);
    }
    cpt_live l = {0};
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0), 0);
    assert_int_equal(l.nranks, 6);
    for (int i = 0; i < 6; i++) {
        const cpt_rank *r = &l.ranks[i];
        assert_int_equal(r->rank, i);
        assert_int_equal(r->late_judged, CPT_RECENT_LATE);
        fprintf(stderr, "rank %d late p50 %.1f us, last %d of %d\n", i, r->late_us_p50,
                r->late_count, r->late_judged);
    }
    /* starts {0, 1, 502, 3} us: the median is 2 us, rank 2 is 500 us late, last every time */
    assert_true(l.ranks[2].late_us_p50 > 499 && l.ranks[2].late_us_p50 < 501);
    assert_int_equal(l.ranks[2].late_count, CPT_RECENT_LATE);
    for (int i = 0; i < 4; i++)
        if (i != 2) {
            assert_true(l.ranks[i].late_us_p50 < 2);
            assert_int_equal(l.ranks[i].late_count, 0);
        }
    /* nodeB's pair: 3 ms apart, median between them: 1500 us either side */
    assert_true(l.ranks[5].late_us_p50 > 1499 && l.ranks[5].late_us_p50 < 1502);
    assert_int_equal(l.ranks[5].late_count, CPT_RECENT_LATE);
    assert_int_equal(l.slowest, 5);
    char *t = text_of(&l, 0);
    assert_non_null(strstr(t, "slowest rank 5/1"));
    free(t);
    cpt_live_free(&l);
}

static void exited_then_dropped(void **state)
{
    (void)state;
    static cp_stats_block a, d, live;
    g_child[0] = lt_live_child();
    g_child[1] = lt_live_child();
    lt_block_init(&a, (unsigned)g_child[0], 0, 0, 3, "n"); /* alive, its block says exited */
    atomic_store(&a.exited, 1);
    lt_block_init(&d, (unsigned)lt_dead_pid(), 1, 1, 3, "n"); /* gone, block never told */
    d.update_ns = T0;                                         /* ... just now */
    lt_block_init(&live, (unsigned)g_child[1], 2, 2, 3, "n");
    assert_int_equal(lt_write(g_dir, &a), 0);
    assert_int_equal(lt_write(g_dir, &d), 0);
    assert_int_equal(lt_write(g_dir, &live), 0);
    cpt_live l = {0};
    for (int scan = 1; scan <= CPT_EXITED_KEEP; scan++) {
        assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + (uint64_t)scan * S), 0);
        /* the live rank first, then the exited ones by rank */
        assert_int_equal(l.nranks, 3);
        assert_int_equal(l.ranks[0].state, CPT_RUNNING);
        assert_int_equal(l.ranks[0].rank, 2);
        assert_int_equal(l.ranks[1].state, CPT_EXITED);
        assert_int_equal(l.ranks[1].rank, 0);
        assert_false(l.ranks[1].died); /* its exit path ran */
        assert_int_equal(l.ranks[2].state, CPT_EXITED);
        assert_true(l.ranks[2].died);  /* no exit path: killed */
        assert_int_equal(l.ranks[1].exited_scans, scan);
        assert_int_equal(l.exited, 2);
        assert_int_equal(l.running, 1);
    }
    char *t = text_of(&l, 0);
    assert_non_null(strstr(t, "(exited)"));
    assert_non_null(strstr(t, "(died)"));
    free(t);
    for (int scan = 0; scan < 3; scan++) {
        assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 10 * S), 0);
        assert_int_equal(l.nranks, 1);
        assert_int_equal(l.ranks[0].rank, 2);
        assert_int_equal(l.exited, 0);
    }
    /* top never deletes a user's file */
    char path[CP_STATS_PATH_BYTES];
    struct stat st;
    cp_stats_path(path, sizeof path, g_dir, d.uid, d.pid);
    assert_int_equal(stat(path, &st), 0);
    cp_stats_path(path, sizeof path, g_dir, a.uid, a.pid);
    assert_int_equal(stat(path, &st), 0);
    /* a new process under the same pid (a new start time) is shown again */
    a.start_mono_ns += 5;
    atomic_store(&a.exited, 0);
    assert_int_equal(lt_write(g_dir, &a), 0);
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 11 * S), 0);
    assert_int_equal(l.nranks, 2);
    assert_int_equal(l.ranks[0].state, CPT_RUNNING);
    cpt_live_free(&l);
}

/* A clean exit unlinks the block: the rank stays listed, exited, with what it last
 * published, for CPT_EXITED_KEEP scans, instead of vanishing between two refreshes. */
static void a_rank_whose_block_goes_stays_listed_exited(void **state)
{
    (void)state;
    static cp_stats_block b, other;
    g_child[0] = lt_live_child();
    g_child[1] = lt_live_child();
    lt_block_init(&b, (unsigned)g_child[0], 4, 0, 8, "n");
    b.ops[CP_OP_ALLREDUCE].calls = 77;
    lt_block_init(&other, (unsigned)g_child[1], 5, 1, 8, "n");
    assert_int_equal(lt_write(g_dir, &b), 0);
    assert_int_equal(lt_write(g_dir, &other), 0);
    cpt_live l = {0};
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0), 0);
    assert_int_equal(l.running, 2);
    char path[CP_STATS_PATH_BYTES];
    cp_stats_path(path, sizeof path, g_dir, b.uid, b.pid);
    assert_int_equal(unlink(path), 0);
    for (int scan = 1; scan <= CPT_EXITED_KEEP; scan++) {
        assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + (uint64_t)scan * S), 0);
        assert_int_equal(l.nranks, 2);
        assert_int_equal(l.running, 1);
        assert_int_equal(l.exited, 1);
        assert_int_equal(l.ranks[0].rank, 5); /* the live one first */
        assert_int_equal(l.ranks[1].rank, 4);
        assert_int_equal(l.ranks[1].state, CPT_EXITED);
        assert_int_equal(l.ranks[1].calls, 77);
        assert_true(l.ranks[1].calls_per_s == 0);
    }
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0 + 10 * S), 0);
    assert_int_equal(l.nranks, 1);
    assert_int_equal(l.exited, 0);
    cpt_live_free(&l);
}

/* Blocks left by processes killed long ago (SIGKILL cannot unlink them) are not listed, so a
 * day of killed jobs cannot push the live ranks off the screen; a note counts them, and
 * cpt_live_clean (top --clean) removes them and never a live process' block. A block its
 * writer was killed inside an update of (torn for good) counts the same. */
static void blocks_of_long_dead_processes_are_hidden_then_cleaned(void **state)
{
    (void)state;
    static cp_stats_block old[3], recent, live;
    for (int i = 0; i < 3; i++) {
        lt_block_init(&old[i], (unsigned)lt_dead_pid(), 10 + i, i, 16, "n");
        old[i].update_ns = T0 - 600 * S;
    }
    atomic_store(&old[2].seqlock, 7); /* killed inside an update */
    lt_block_init(&recent, (unsigned)lt_dead_pid(), 1, 1, 16, "n");
    recent.update_ns = T0 - 5 * S;
    g_child[0] = lt_live_child();
    lt_block_init(&live, (unsigned)g_child[0], 0, 0, 16, "n");
    live.update_ns = T0 - 600 * S; /* idle for 10 minutes, but alive */
    for (int i = 0; i < 3; i++)
        assert_int_equal(lt_write(g_dir, &old[i]), 0);
    assert_int_equal(lt_write(g_dir, &recent), 0);
    assert_int_equal(lt_write(g_dir, &live), 0);

    cpt_live l = {0};
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0), 0);
    assert_int_equal(l.nranks, 2);
    assert_int_equal(l.ranks[0].rank, 0);
    assert_int_equal(l.ranks[0].state, CPT_RUNNING);
    assert_int_equal(l.ranks[1].rank, 1);
    assert_true(l.ranks[1].died);
    assert_int_equal(l.dead_hidden, 3);
    assert_true(has_note(&l, "3 blocks of processes that died over 30 s ago not shown "
                             "(collprof top --clean removes them)"));
    assert_false(has_note(&l, "never left an update"));
    char *t = text_of(&l, 1);
    assert_non_null(strstr(t, "\"dead_hidden\":3"));
    free(t);
    cpt_live_free(&l);

    size_t kept;
    assert_int_equal(cpt_live_clean(g_dir, geteuid(), &kept), 4);
    assert_int_equal(kept, 1);
    assert_int_equal(cpt_live_scan_at(&l, g_dir, geteuid(), T0), 0);
    assert_int_equal(l.nranks, 1);
    assert_int_equal(l.ranks[0].rank, 0);
    assert_int_equal(l.dead_hidden, 0);
    cpt_live_free(&l);
    /* a file that is not a block is not ours to remove */
    char path[CP_STATS_PATH_BYTES];
    snprintf(path, sizeof path, "%s/collprof-%u-%u", g_dir, (unsigned)geteuid(),
             (unsigned)lt_dead_pid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a block", f);
    fclose(f);
    assert_int_equal(cpt_live_clean(g_dir, geteuid(), &kept), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    unlink(path);
}

static void write_raw(const char *name, const void *data, size_t len)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void corrupt_foreign_and_others(void **state)
{
    (void)state;
    static cp_stats_block good, bad;
    g_child[0] = lt_live_child();
    lt_block_init(&good, (unsigned)g_child[0], 0, 0, 1, "n");
    assert_int_equal(lt_write(g_dir, &good), 0);
    /* foreign: the right name and size, not a collprof block */
    static char junk[CP_STATS_BYTES];
    memset(junk, 'x', sizeof junk);
    char name[64];
    snprintf(name, sizeof name, "collprof-%u-1", (unsigned)geteuid());
    write_raw(name, junk, sizeof junk);
    /* corrupt: a block cut short */
    lt_block_init(&bad, 2, 1, 1, 1, "n");
    snprintf(name, sizeof name, "collprof-%u-2", (unsigned)geteuid());
    write_raw(name, &bad, 4000);
    /* a future version */
    bad.version = 99;
    snprintf(name, sizeof name, "collprof-%u-3", (unsigned)geteuid());
    write_raw(name, &bad, sizeof bad);
    /* not a block name at all: not even a candidate */
    write_raw("collprof-notes.txt", "hi", 2);

    cpt_live l = {0};
    assert_int_equal(cpt_live_scan(&l, g_dir, geteuid()), 0);
    assert_int_equal(l.nranks, 1);
    assert_int_equal(l.nnotes, 3);
    assert_true(has_note(&l, "bad magic"));
    assert_true(has_note(&l, "4000 bytes"));
    assert_true(has_note(&l, "version 99"));
    char *t = text_of(&l, 0);
    assert_non_null(strstr(t, "note: skipped"));
    free(t);
    t = text_of(&l, 1);
    json_object *root = json_tokener_parse(t), *notes;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "notes", &notes));
    assert_int_equal(json_object_array_length(notes), 3);
    json_object_put(root);
    free(t);

    /* As another user: this user's blocks are not opened, only counted. */
    uid_t other = geteuid() + 4242;
    assert_int_equal(cpt_live_scan(&l, g_dir, other), 0);
    assert_int_equal(l.nranks, 0);
    assert_true(has_note(&l, "4 blocks of other users not shown"));
    /* root (uid 0) sees every owner's */
    assert_int_equal(cpt_live_scan(&l, g_dir, 0), 0);
    assert_int_equal(l.nranks, 1);
    cpt_live_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(empty_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(rates_inflight_hang, setup, teardown),
        cmocka_unit_test_setup_teardown(lateness_vs_local_peers, setup, teardown),
        cmocka_unit_test_setup_teardown(exited_then_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(a_rank_whose_block_goes_stays_listed_exited, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(blocks_of_long_dead_processes_are_hidden_then_cleaned,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_foreign_and_others, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
