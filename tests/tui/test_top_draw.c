/* The screens of `collprof top` (tui/top_draw.h) on live models built here: what each column
 * shows, the in-flight highlights, exited ranks, sort, filter, selection, 80x24, the detail
 * and help screens, and the keys that move between them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace/trace_format.h"
#include "tui/top_draw.h"

static cpt_rank mk(int rank, int local, const char *host, unsigned pid)
{
    cpt_rank r;
    memset(&r, 0, sizeof r);
    snprintf(r.path, sizeof r.path, "/tmp/x/collprof-1000-%u", pid);
    snprintf(r.hostname, sizeof r.hostname, "%s", host);
    snprintf(r.job_id, sizeof r.job_id, "job42");
    r.pid = pid;
    r.rank = rank;
    r.local_rank = local;
    r.world_size = 8;
    r.cuda_dev = local;
    r.gpu_timing = 1;
    return r;
}

static cpt_live model(cpt_rank *ranks, size_t n)
{
    cpt_live l;
    memset(&l, 0, sizeof l);
    l.ranks = ranks;
    l.nranks = l.cap = n;
    l.slowest = -1;
    snprintf(l.dir, sizeof l.dir, "/tmp/x");
    l.hang_s = 60; /* as the tests' cpt_state_init */
    for (size_t i = 0; i < n; i++) {
        if (ranks[i].state == CPT_EXITED)
            l.exited++;
        else
            l.running++;
        l.hung += cpt_rank_hung(&l, &ranks[i]);
    }
    return l;
}

static char row_buf[512];
static const char *row(const cpt_grid *g, int y)
{
    cpt_grid_row(g, y, row_buf);
    return row_buf;
}

/* The row of the grid holding s, -1 none. */
static int find_row(const cpt_grid *g, const char *s)
{
    for (int y = 0; y < g->h; y++)
        if (strstr(row(g, y), s))
            return y;
    return -1;
}

static int col_of(const cpt_grid *g, int y, const char *s)
{
    const char *p = strstr(row(g, y), s);
    return p ? (int)(p - row_buf) : -1;
}

static int attr_at(const cpt_grid *g, int y, int x)
{
    return g->attrs[(size_t)y * (size_t)g->w + (size_t)x];
}

static void draw(const cpt_live *l, cpt_state *s, cpt_grid *g, int w, int h)
{
    assert_int_equal(cpt_grid_init(g, w, h), 0);
    cpt_draw(l, s, g);
}

static void test_columns_show_each_measure(void **st)
{
    (void)st;
    cpt_rank r[1] = { mk(3, 3, "node1", 1234) };
    r[0].calls_per_s = 1500;
    r[0].gbps = 12.5;
    r[0].nccl_share = 0.45;
    r[0].p50_us = 850;
    r[0].inflight_op = CP_OP_ALLREDUCE;
    r[0].inflight_age_s = 0.12;
    r[0].typical_us = 200000;
    r[0].late_us_p50 = 1200;
    r[0].late_count = 20;
    r[0].late_judged = 32;
    cpt_live l = model(r, 1);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    assert_string_equal(row(&g, 3), "RANK    HOST                        PID GPU CALL/S  GB/S "
                                    "NCCL%    P50 IN FLIGHT           LATE  LAST");
    assert_string_equal(row(&g, 4), "3/3     node1                      1234   3   1500 12.50 "
                                    "  45%  850us AllReduce 120ms  +1.20ms 20/32");
    assert_non_null(strstr(row(&g, 0), "1 rank: 1 running, 0 exited, 0 hung"));
    assert_string_equal(row(&g, 2), "sort: rank");
    cpt_grid_free(&g);
}

static void test_slowest_rank_in_header(void **st)
{
    (void)st;
    cpt_rank r[2] = { mk(0, 0, "a", 10), mk(1, 1, "a", 11) };
    r[1].late_us_p50 = 5300;
    r[1].late_count = 30;
    r[1].late_judged = 32;
    cpt_live l = model(r, 2);
    l.slowest = 1;
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    assert_string_equal(row(&g, 1), "slowest: rank 1 on a (pid 11): arrives 5.30ms after its "
                                    "peers (p50), last in 30 of 32");
    /* early, and what rounds to nothing carries no sign */
    r[0].late_judged = 32;
    r[0].late_us_p50 = -0.3;
    r[1].late_us_p50 = -2;
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 1), "slowest: none (no rank arrives after its peers)");
    assert_non_null(strstr(row(&g, 4), "    0us  0/32"));
    assert_non_null(strstr(row(&g, 5), "   -2us 30/32"));
    l.slowest = -1;
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 1), "slowest: none yet (no common collectives seen)");
    cpt_grid_free(&g);
}

/* Within its typical time: plain; past it: WARN and '+'; past COLLPROF_HANG_S or reported
 * by the watchdog: BAD and '!'. */
static void test_in_flight_highlights(void **st)
{
    (void)st;
    cpt_rank r[4] = { mk(0, 0, "h", 10), mk(1, 1, "h", 11), mk(2, 2, "h", 12), mk(3, 3, "h", 13) };
    for (int i = 0; i < 4; i++) {
        r[i].inflight_op = CP_OP_ALLGATHER;
        r[i].typical_us = 1000;
    }
    r[0].inflight_age_s = 0.0005;
    r[1].inflight_age_s = 0.5;
    r[2].inflight_age_s = 61;
    r[3].inflight_age_s = 2;
    r[3].hang = 1;
    cpt_live l = model(r, 4);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    s.sel = 3; /* keep the selection's colour off the rows under test */
    snprintf(s.sel_path, sizeof s.sel_path, "none");
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    int x = col_of(&g, 3, "IN FLIGHT");
    assert_true(x > 0);
    assert_non_null(strstr(row(&g, 4), "AllGather 500us "));
    assert_int_equal(attr_at(&g, 4, x), CPT_NORMAL);
    assert_non_null(strstr(row(&g, 5), "AllGather 500ms+"));
    assert_int_equal(attr_at(&g, 5, x), CPT_WARN);
    assert_non_null(strstr(row(&g, 6), "AllGather 61.0s!"));
    assert_int_equal(attr_at(&g, 6, x), CPT_BAD);
    assert_non_null(strstr(row(&g, 7), "AllGather 2.00s!"));
    assert_int_equal(attr_at(&g, 7, x), CPT_BAD);
    /* the header counts the hung ones as the rows mark them */
    assert_non_null(strstr(row(&g, 0), "4 running, 0 exited, 2 hung"));
    /* the rest of a hung row is not red */
    assert_int_equal(attr_at(&g, 6, 0), CPT_NORMAL);
    /* a shorter COLLPROF_HANG_S makes the 0.5 s one a hang */
    s.hang_s = 0.4;
    cpt_draw(&l, &s, &g);
    assert_int_equal(attr_at(&g, 5, x), CPT_BAD);
    cpt_grid_free(&g);
}

static void test_exited_rank_dimmed_and_marked(void **st)
{
    (void)st;
    cpt_rank r[2] = { mk(0, 0, "h", 10), mk(1, 1, "h", 11) };
    r[1].state = CPT_EXITED;
    r[1].inflight_op = CP_OP_ALLREDUCE;
    r[1].inflight_age_s = 100;
    cpt_live l = model(r, 2);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    int x = col_of(&g, 3, "IN FLIGHT");
    assert_int_equal(col_of(&g, 5, "exited"), x);
    for (int i = 0; i < 100; i++)
        assert_int_equal(attr_at(&g, 5, i), CPT_DIM);
    assert_non_null(strstr(row(&g, 0), "2 ranks: 1 running, 1 exited"));
    cpt_grid_free(&g);
}

/* Whatever the sort key, the running ranks come first: forty exited ranks from earlier jobs
 * sorted among them left 3 of 8 live ranks on a 30-line screen. A killed one reads "died". */
static void test_running_ranks_before_exited_ones(void **st)
{
    (void)st;
    cpt_rank r[3] = { mk(0, 0, "h", 10), mk(1, 1, "h", 11), mk(2, 2, "h", 12) };
    r[0].state = CPT_EXITED;
    r[0].died = 1;
    r[0].calls_per_s = 1e6; /* would sort first by calls/s */
    cpt_live l = model(r, 3);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    for (int k = 0; k < 2; k++) {
        cpt_grid g;
        draw(&l, &s, &g, 100, 30);
        assert_int_equal(strncmp(row(&g, 4), "1/1", 3), 0);
        assert_int_equal(strncmp(row(&g, 5), "2/2", 3), 0);
        assert_int_equal(strncmp(row(&g, 6), "0/0", 3), 0);
        assert_int_equal(col_of(&g, 6, "died"), col_of(&g, 3, "IN FLIGHT"));
        cpt_grid_free(&g);
        s.sort = CPT_SORT_CALLS;
    }
}

static void test_sort_cycles_and_orders(void **st)
{
    (void)st;
    cpt_rank r[3] = { mk(0, 0, "c", 10), mk(1, 1, "a", 11), mk(2, 2, "b", 12) };
    r[0].late_judged = r[1].late_judged = r[2].late_judged = 10;
    r[0].late_us_p50 = 5;
    r[1].late_us_p50 = 900;
    r[2].late_us_p50 = 40;
    r[0].calls_per_s = 30;
    r[1].calls_per_s = 10;
    r[2].calls_per_s = 20;
    cpt_live l = model(r, 3);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    assert_int_equal(attr_at(&g, 3, col_of(&g, 3, "RANK")), CPT_SORTED);

    assert_int_equal(cpt_key(&l, &s, 's', 10), CPT_REDRAW);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 2), "sort: host");
    assert_int_equal(row(&g, 4)[0], '1');
    assert_int_equal(row(&g, 5)[0], '2');
    assert_int_equal(row(&g, 6)[0], '0');

    cpt_key(&l, &s, 's', 10);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 2), "sort: calls/s");
    assert_int_equal(attr_at(&g, 3, col_of(&g, 3, "CALL/S")), CPT_SORTED);
    assert_int_equal(attr_at(&g, 3, col_of(&g, 3, "RANK")), CPT_HEADER);
    assert_int_equal(row(&g, 4)[0], '0');
    assert_int_equal(row(&g, 5)[0], '2');
    assert_int_equal(row(&g, 6)[0], '1');

    while (s.sort != CPT_SORT_LATE)
        cpt_key(&l, &s, 's', 10);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 2), "sort: lateness");
    assert_int_equal(row(&g, 4)[0], '1');
    assert_int_equal(row(&g, 5)[0], '2');
    assert_int_equal(row(&g, 6)[0], '0');
    cpt_key(&l, &s, 's', 10);
    assert_int_equal(s.sort, CPT_SORT_RANK);
    cpt_grid_free(&g);
}

static void test_filter_by_host_or_rank(void **st)
{
    (void)st;
    cpt_rank r[12];
    for (int i = 0; i < 12; i++)
        r[i] = mk(i, i % 4, i < 4 ? "gpu-a" : i < 8 ? "gpu-b" : "gpu-c", 100 + (unsigned)i);
    cpt_live l = model(r, 12);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 100, 30);
    assert_int_equal(cpt_key(&l, &s, '/', 10), CPT_REDRAW);
    assert_true(s.editing);
    cpt_key(&l, &s, 'B', 10); /* any case */
    cpt_draw(&l, &s, &g);
    assert_non_null(strstr(row(&g, 29), "filter (host or rank): B_"));
    for (int y = 4; y < 8; y++)
        assert_non_null(strstr(row(&g, y), "gpu-b"));
    assert_string_equal(row(&g, 8), "");
    cpt_key(&l, &s, CPT_KEY_ENTER, 10);
    assert_false(s.editing);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 2), "sort: rank  filter: \"B\"");

    /* by rank: "1" holds ranks 1, 10 and 11 */
    cpt_key(&l, &s, '/', 10);
    cpt_key(&l, &s, CPT_KEY_BACKSPACE, 10);
    cpt_key(&l, &s, '1', 10);
    cpt_key(&l, &s, CPT_KEY_ENTER, 10);
    cpt_draw(&l, &s, &g);
    assert_int_equal(strncmp(row(&g, 4), "1/1 ", 4), 0);
    assert_int_equal(strncmp(row(&g, 5), "10/2 ", 5), 0);
    assert_int_equal(strncmp(row(&g, 6), "11/3 ", 5), 0);
    assert_string_equal(row(&g, 7), "");

    cpt_key(&l, &s, '/', 10);
    cpt_key(&l, &s, 'z', 10);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 4), "No rank matches \"1z\" (Esc clears the filter).");
    cpt_key(&l, &s, CPT_KEY_ESC, 10);
    assert_false(s.editing);
    assert_string_equal(s.filter, "");
    cpt_draw(&l, &s, &g);
    assert_int_equal(find_row(&g, "gpu-c") > 0, 1);
    cpt_grid_free(&g);
}

/* The selection moves by row and page, stays in view, and follows its rank across sorts. */
static void test_selection_moves_and_follows(void **st)
{
    (void)st;
    cpt_rank r[64];
    for (int i = 0; i < 64; i++) {
        r[i] = mk(i, i % 8, "node", 1000 + (unsigned)i);
        r[i].calls_per_s = 64 - i;
    }
    cpt_live l = model(r, 64);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 80, 24);
    int page = cpt_draw(&l, &s, &g);
    assert_int_equal(page, 19);
    assert_int_equal(attr_at(&g, 4, 0), CPT_SELECTED);
    cpt_key(&l, &s, CPT_KEY_DOWN, page);
    cpt_key(&l, &s, CPT_KEY_DOWN, page);
    cpt_draw(&l, &s, &g);
    assert_int_equal(attr_at(&g, 4, 0), CPT_NORMAL);
    assert_int_equal(attr_at(&g, 6, 0), CPT_SELECTED);
    assert_int_equal(strncmp(row(&g, 6), "2/2 ", 4), 0);
    cpt_key(&l, &s, CPT_KEY_PGDN, page);
    page = cpt_draw(&l, &s, &g);
    /* rank 21 selected: the list scrolled so that it is the last row shown */
    assert_int_equal(attr_at(&g, 22, 0), CPT_SELECTED);
    assert_int_equal(strncmp(row(&g, 22), "21/5 ", 5), 0);
    assert_non_null(strstr(row(&g, 23), "rows 4-22 of 64"));
    cpt_key(&l, &s, CPT_KEY_END, page);
    cpt_draw(&l, &s, &g);
    assert_int_equal(strncmp(row(&g, 22), "63/7 ", 5), 0);
    assert_int_equal(attr_at(&g, 22, 0), CPT_SELECTED);
    cpt_key(&l, &s, CPT_KEY_DOWN, page); /* stays at the end */
    cpt_key(&l, &s, CPT_KEY_HOME, page);
    cpt_key(&l, &s, CPT_KEY_PGDN, page);
    cpt_key(&l, &s, CPT_KEY_PGUP, page);
    cpt_key(&l, &s, CPT_KEY_UP, page); /* stays at the top */
    cpt_draw(&l, &s, &g);
    assert_int_equal(attr_at(&g, 4, 0), CPT_SELECTED);
    assert_int_equal(strncmp(row(&g, 4), "0/0 ", 4), 0);

    /* rank 5 selected, then sorted by calls/s (rank 63 first): still rank 5 */
    for (int i = 0; i < 5; i++)
        cpt_key(&l, &s, CPT_KEY_DOWN, page);
    cpt_key(&l, &s, 's', page);
    cpt_key(&l, &s, 's', page);
    cpt_draw(&l, &s, &g);
    int y = find_row(&g, "1005");
    assert_true(y >= 4);
    assert_int_equal(attr_at(&g, y, 0), CPT_SELECTED);
    assert_int_equal(strncmp(row(&g, 4), "0/0 ", 4), 0); /* 64 calls/s, the most */
    cpt_grid_free(&g);
}

/* At 80x24 every line fits, the header and column titles show, each row keeps its rank,
 * host, age and lateness; the LAST column gives way first and a long host is cut. */
static void test_80x24_keeps_the_table_readable(void **st)
{
    (void)st;
    cpt_rank r[30];
    for (int i = 0; i < 30; i++) {
        r[i] = mk(i, i % 8, "a-very-long-hostname.cluster.example.org", 40000 + (unsigned)i);
        r[i].inflight_op = CP_OP_REDUCESCATTER;
        r[i].inflight_age_s = 12.3;
        r[i].late_judged = 32;
        r[i].late_count = 3;
        r[i].late_us_p50 = -250;
        r[i].calls_per_s = 123456;
        r[i].gbps = 345.6;
        r[i].nccl_share = 1;
        r[i].p50_us = 123456;
    }
    cpt_live l = model(r, 30);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 80, 24);
    assert_string_equal(row(&g, 3), "RANK    HOST          PID GPU CALL/S  GB/S NCCL%    P50 "
                                    "IN FLIGHT           LATE");
    assert_string_equal(row(&g, 4), "0/0     a-very-lo   40000   0 123.5k 345.6  100%  123ms "
                                    "ReduceScat 12.3s  -250us");
    assert_non_null(strstr(row(&g, 0), "collprof top  30 ranks"));
    assert_int_equal(strncmp(row(&g, 22), "18/2 ", 5), 0);
    assert_non_null(strstr(row(&g, 23), "q quit"));
    for (int y = 0; y < 24; y++)
        assert_true(strlen(row(&g, y)) <= 80);
    cpt_grid_free(&g);
}

static void test_detail_shows_recent_collectives(void **st)
{
    (void)st;
    cpt_rank r[2] = { mk(0, 0, "h", 10), mk(5, 1, "node7", 4242) };
    cp_stats_block *b = &r[1].snap;
    b->start_mono_ns = 1000000000ull;
    /* 300 pushes: the ring holds the last 256, newest seq 299 */
    for (uint64_t i = 0; i < 300; i++) {
        cp_stats_entry *e = &b->recent[i % CP_STATS_RECENT];
        memset(e, 0, sizeof *e);
        e->comm_id = 0xabcdef0123456789ull;
        e->seq = i;
        e->bytes = 1u << 20;
        e->op = CP_OP_ALLREDUCE;
        e->enter_ns = 2000000000ull + i * 1000000;
        e->gpu_start_ns = i == 299 ? 0 : e->enter_ns + 15000;
        e->gpu_end_ns = i == 299 ? 0 : e->enter_ns + 265000;
    }
    b->recent_total = 300;
    b->recent_count = CP_STATS_RECENT;
    r[1].calls = 300;
    r[1].bytes = 300ull << 20;
    r[1].inflight_op = CP_OP_ALLREDUCE;
    r[1].inflight_seq = 299;
    r[1].inflight_comm = 0xabcdef0123456789ull;
    r[1].inflight_bytes = 1u << 20;
    r[1].inflight_age_s = 3;
    r[1].typical_us = 250;
    r[1].late_judged = 20;
    r[1].late_us_p50 = -2;
    cpt_live l = model(r, 2);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 80, 24);
    int page = cpt_draw(&l, &s, &g);
    cpt_key(&l, &s, CPT_KEY_DOWN, page);
    assert_int_equal(cpt_key(&l, &s, CPT_KEY_ENTER, page), CPT_REDRAW);
    assert_int_equal(s.screen, CPT_DETAIL);
    page = cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 0), "rank 5/1 of 8 on node7  pid 4242  GPU 1  job job42");
    assert_string_equal(row(&g, 1), "300 calls, 300M  GPU timing yes  lost records 0");
    assert_string_equal(row(&g, 2), "in flight AllReduce seq 299, 1.00M, 3.00s (typical 250us), "
                                    "comm abcdef0123456789");
    assert_int_equal(attr_at(&g, 2, 0), CPT_WARN);
    assert_string_equal(row(&g, 3), "");
    assert_string_equal(row(&g, 4), "arrives 2us before its local peers (p50), last in 0 of 20 "
                                    "recent");
    assert_string_equal(row(&g, 6), "OP            COMM          SEQ    SIZE    ENTER(s)  "
                                    "GPU-START  GPU-END      DUR");
    assert_string_equal(row(&g, 7), "AllReduce     abcdef01      299   1.00M    1.299000          "
                                    "-        -        -");
    assert_string_equal(row(&g, 8), "AllReduce     abcdef01      298   1.00M    1.298000       "
                                    "15us    265us    250us");
    assert_int_equal(page, 16);
    cpt_key(&l, &s, CPT_KEY_END, page);
    cpt_draw(&l, &s, &g);
    /* the oldest the ring still holds: seq 44 */
    assert_non_null(strstr(row(&g, 22), "      44   1.00M"));
    assert_non_null(strstr(row(&g, 23), "rows 241-256 of 256"));
    /* a hang the watchdog reported */
    r[1].hang = 1;
    b->hang = (cp_stats_hang){ .comm_id = 0xabcdef0123456789ull, .seq = 299,
                               .age_ns = 1500000000ull, .op = CP_OP_ALLREDUCE };
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 3), "watchdog: AllReduce seq 299 hung after 1.50s, comm "
                                    "abcdef0123456789");
    assert_int_equal(attr_at(&g, 2, 0), CPT_BAD);
    assert_int_equal(attr_at(&g, 3, 0), CPT_BAD);
    /* q leaves the detail, it does not quit */
    assert_int_equal(cpt_key(&l, &s, 'q', page), CPT_REDRAW);
    assert_int_equal(s.screen, CPT_TABLE);
    cpt_key(&l, &s, CPT_KEY_ENTER, page);
    cpt_key(&l, &s, CPT_KEY_ESC, page);
    assert_int_equal(s.screen, CPT_TABLE);
    cpt_key(&l, &s, CPT_KEY_ENTER, page);
    cpt_key(&l, &s, CPT_KEY_ENTER, page);
    assert_int_equal(s.screen, CPT_TABLE);
    /* the rank gone from the model */
    cpt_key(&l, &s, CPT_KEY_ENTER, page);
    l.nranks = 1;
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 2), "This rank is gone (its block was dropped).");
    cpt_grid_free(&g);
}

static void test_help_and_back(void **st)
{
    (void)st;
    cpt_rank r[1] = { mk(0, 0, "h", 10) };
    cpt_live l = model(r, 1);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 80, 24);
    cpt_key(&l, &s, 'h', 10);
    assert_int_equal(s.screen, CPT_HELP);
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 0), "collprof top: the profiled ranks of this node, live");
    assert_true(find_row(&g, "  q            quit (in a detail: back)") > 0);
    assert_true(find_row(&g, "  /            filter by host or rank") > 0);
    assert_true(find_row(&g, "age! past COLLPROF_HANG_S") > 0);
    assert_int_equal(cpt_key(&l, &s, 'x', 10), CPT_REDRAW); /* any key */
    assert_int_equal(s.screen, CPT_TABLE);
    /* q quits only from the table */
    assert_int_equal(cpt_key(&l, &s, 'q', 10), CPT_QUIT);
    cpt_grid_free(&g);
}

static void test_empty_node_and_hostile_host(void **st)
{
    (void)st;
    cpt_live l = model(NULL, 0);
    cpt_state s;
    cpt_state_init(&s, 60, 1);
    cpt_grid g;
    draw(&l, &s, &g, 80, 24);
    assert_string_equal(row(&g, 4), "No profiled process on this node (no stats block in /tmp/x).");
    assert_int_equal(cpt_key(&l, &s, CPT_KEY_ENTER, 10), CPT_REDRAW);
    assert_int_equal(s.screen, CPT_TABLE);
    cpt_key(&l, &s, CPT_KEY_DOWN, 10);
    s.error = "Permission denied";
    cpt_draw(&l, &s, &g);
    assert_string_equal(row(&g, 4), "cannot read /tmp/x: Permission denied");
    s.error = NULL;

    cpt_rank r[1] = { mk(0, 0, "ev\x1b[2Jil\xc3\xa9", 10) };
    l = model(r, 1);
    char *notes[1] = { "'/tmp/x/collprof-1000-7': bad magic" };
    l.notes = notes;
    l.nnotes = 1;
    cpt_draw(&l, &s, &g);
    /* the escape shown as \x1b, the host cut to its 9 columns at a whole escape */
    assert_int_equal(strncmp(row(&g, 4), "0/0     ev\\x1b[2J      10", 25), 0);
    assert_string_equal(row(&g, 2), "sort: rank  1 block skipped: '/tmp/x/collprof-1000-7': bad "
                                    "magic");
    l.other_users = 2;
    cpt_draw(&l, &s, &g);
    /* cut at the edge */
    assert_string_equal(row(&g, 2), "sort: rank  2 blocks of other users not read  1 block "
                                    "skipped: '/tmp/x/collprof-");
    cpt_grid_free(&g);

    draw(&l, &s, &g, 30, 5);
    assert_string_equal(row(&g, 0), "terminal too small for collpro");
    cpt_grid_free(&g);
}

static void test_formats(void **st)
{
    (void)st;
    char b[32];
    cpt_fmt_us(b, sizeof b, 0.4);
    assert_string_equal(b, "0us");
    cpt_fmt_us(b, sizeof b, 999.4);
    assert_string_equal(b, "999us");
    cpt_fmt_us(b, sizeof b, 999.6);
    assert_string_equal(b, "1.00ms");
    cpt_fmt_us(b, sizeof b, 12345);
    assert_string_equal(b, "12.3ms");
    cpt_fmt_us(b, sizeof b, -2.5e6);
    assert_string_equal(b, "-2.50s");
    cpt_fmt_us(b, sizeof b, 3.6e9);
    assert_string_equal(b, "3600s");
    cpt_fmt_bytes(b, sizeof b, 512);
    assert_string_equal(b, "512B");
    cpt_fmt_bytes(b, sizeof b, 65536);
    assert_string_equal(b, "64.0K");
    cpt_fmt_bytes(b, sizeof b, 3ull << 30);
    assert_string_equal(b, "3.00G");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_show_each_measure),
        cmocka_unit_test(test_slowest_rank_in_header),
        cmocka_unit_test(test_in_flight_highlights),
        cmocka_unit_test(test_exited_rank_dimmed_and_marked),
        cmocka_unit_test(test_running_ranks_before_exited_ones),
        cmocka_unit_test(test_sort_cycles_and_orders),
        cmocka_unit_test(test_filter_by_host_or_rank),
        cmocka_unit_test(test_selection_moves_and_follows),
        cmocka_unit_test(test_80x24_keeps_the_table_readable),
        cmocka_unit_test(test_detail_shows_recent_collectives),
        cmocka_unit_test(test_help_and_back),
        cmocka_unit_test(test_empty_node_and_hostile_host),
        cmocka_unit_test(test_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
