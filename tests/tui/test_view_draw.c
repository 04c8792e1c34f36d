/* The screens of `collprof view` (tui/view_draw.h) drawn from an analysis of the synthetic
 * job of tests/exporters/exp_job.h with its findings set by hand: 4 ranks, 10 AllReduce,
 * 5 AllGather in which rank 3 starts 15 us late, a hang and a count mismatch. Each screen
 * is checked as text at 80x24 and 120x40, and the keys' actions on the state. */
#include "tests/exporters/exp_job.h"

#include <math.h>

#include "tui/view_draw.h"

typedef struct fixture {
    char *dir;
    cpa_analysis a;
    cpv_data d;
    cpv_state s;
    cpv_grid g;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = tt_tmpdir();
    exp_write_job(f->dir);
    exp_analyze(f->dir, &f->a);
    exp_set_findings(&f->a);
    assert_int_equal(cpv_data_init(&f->d, &f->a, "/traces/job-42"), 0);
    cpv_state_init(&f->s);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cpv_grid_free(&f->g);
    cpv_data_free(&f->d);
    cpa_analysis_free(&f->a);
    tt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

#define STARTS(s, lit) (strncmp((s), (lit), strlen(lit)) == 0)

static char rowbuf[512];

static const char *row(const fixture *f, int y)
{
    cpv_grid_row(&f->g, y, rowbuf);
    return rowbuf;
}

static void dump(const fixture *f)
{
    for (int y = 0; y < f->g.h; y++)
        fprintf(stderr, "%2d|%s\n", y, row(f, y));
}

/* The first row holding text, -1 none. */
static int find_row(const fixture *f, const char *text)
{
    for (int y = 0; y < f->g.h; y++)
        if (strstr(row(f, y), text))
            return y;
    return -1;
}

static int expect_row(const fixture *f, const char *text)
{
    int y = find_row(f, text);
    if (y < 0) {
        dump(f);
        fail_msg("no row holds \"%s\" (%dx%d)", text, f->g.w, f->g.h);
    }
    return y;
}

static int draw(fixture *f, int screen, int w, int h)
{
    cpv_grid_free(&f->g);
    assert_int_equal(cpv_grid_init(&f->g, w, h), 0);
    if (f->s.screen != screen)
        cpv_goto(&f->s, screen);
    int page = cpv_draw(&f->d, &f->s, &f->g);
    /* Every screen: the bar with the screens on top, the keys at the bottom. */
    assert_non_null(strstr(row(f, 0), "1 summary  2 stragglers  3 problems  4 timeline"));
    assert_non_null(strstr(row(f, h - 1), "q quit  h help"));
    return page;
}

static int attr_at(const fixture *f, int x, int y)
{
    return f->g.attrs[(size_t)y * (size_t)f->g.w + (size_t)x];
}

static const int sizes[][2] = { { 80, 24 }, { 120, 40 } };

static void summary_shows_the_job_and_the_op_table(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 2; i++) {
        draw(f, CPV_SUMMARY, sizes[i][0], sizes[i][1]);
        expect_row(f, "job      4 ranks on 1 host (node-a), ");
        expect_row(f, "findings straggler rank 3 (persistent), 1 hang, 1 mismatch");
        int h = expect_row(f, "op            ranks         size     ops   p50 us");
        /* By total time: 10 AllReduce of 10 us before 5 AllGather of 5 us. */
        assert_true(STARTS(row(f, h + 1), "AllReduce         4        1 MiB      10     10.0"));
        assert_int_equal(attr_at(f, 0, h + 1), CPV_SELECTED);
        assert_true(STARTS(row(f, h + 2), "AllGather         4        1 MiB       5      5.0"));
        assert_true(STARTS(row(f, h + 3), "Send/Recv"));
    }
}

/* Rank 3's strip: on time through the AllReduces, then the job's worst lateness ('9') in
 * the AllGathers; rank 0 never late. */
static void stragglers_rank_the_late_rank_first_with_its_strip(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 2; i++) {
        int w = sizes[i][0];
        draw(f, CPV_STRAGGLERS, w, sizes[i][1]);
        expect_row(f, "persistent: rank 3 was the late one in 5 of 15 collectives");
        expect_row(f, "why rank 3: GPU backlog: its host entered NCCL in time");
        expect_row(f, "15 collectives in time order");
        int h = expect_row(f, "rank                late   late ms");
        assert_true(STARTS(row(f, h + 1), "rank 3    node-a       5     0.075  SLOW"));
        const char *r3 = row(f, h + 1) + 41;
        size_t n = strlen(r3);
        assert_int_equal(n, (size_t)(w - 41));
        size_t dots = strspn(r3, ".");
        assert_true(dots > 0 && dots < n);
        assert_int_equal(strspn(r3 + dots, "9"), n - dots);
        assert_int_equal(attr_at(f, 41 + (int)dots, h + 1), CPV_LATE);
        /* Then ranks by lateness; rank 0 all dots. */
        assert_true(STARTS(row(f, h + 2), "rank 1 "));
        int y0 = expect_row(f, "rank 0    node-a       0");
        assert_int_equal(strspn(row(f, y0) + 41, "."), (size_t)(w - 41));
    }
}

static void problems_show_the_hang_and_the_field_diff_per_rank(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 2; i++) {
        draw(f, CPV_PROBLEMS, sizes[i][0], sizes[i][1]);
        int y = expect_row(f, "RANK_NOT_JOINED  AllReduce seq 10, comm 9f2c0e1d22aa4b01");
        assert_int_equal(attr_at(f, 20, y), CPV_BAD);
        expect_row(f, "  missing 2; waiting 0,1,3; in flight 61.5 s");
        expect_row(f, "  rank 2 last called AllReduce seq 9, finished");
        expect_row(f, "count differs at seq 3, comm 9f2c0e1d22aa4b01; culprit 3");
        expect_row(f, "  rank 0     1024         at train_step+0x12");
        expect_row(f, "  rank 1     1024");
        y = expect_row(f, "  rank 3     2048         <- culprit");
        assert_int_equal(attr_at(f, 5, y), CPV_BAD);
    }
}

/* The lane starts where the axis' first tick is. */
static int lane_x(const fixture *f)
{
    const char *axis = row(f, 2);
    const char *bar = strchr(axis, '|');
    assert_non_null(bar);
    return (int)(bar - axis);
}

static void timeline_draws_ops_by_rank_and_the_wait_for_the_late_rank(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 2; i++) {
        f->s.us_per_col = 0; /* fit */
        draw(f, CPV_TIMELINE, sizes[i][0], sizes[i][1]);
        for (int r = 0; r < 4; r++) {
            char label[32];
            snprintf(label, sizeof label, "rank %d    node-a", r);
            int y = expect_row(f, label);
            assert_non_null(strchr(row(f, y), 'A'));
            assert_non_null(strchr(row(f, y), 'G'));
        }
        /* Zoom on the first AllGather: 1 us a column, its start at column 5.5. */
        int lx = lane_x(f);
        double ag = cpa_gpu_job_us(&f->a, 0, exp_ag_start(0));
        f->s.us_per_col = 1;
        f->s.view_us = ag - 5.5;
        draw(f, CPV_TIMELINE, sizes[i][0], sizes[i][1]);
        expect_row(f, "zoom 1.0us/col");
        int y0 = expect_row(f, "rank 0    node-a");
        int y3 = expect_row(f, "rank 3    node-a");
        /* Ranks 0-2 wait 15 us for rank 3, then run the op with it until 20 us. */
        assert_true(STARTS(row(f, y0) + lx + 5, "---------------GGGGGG"));
        assert_int_equal(attr_at(f, lx + 5, y0), CPV_WAIT);
        assert_int_equal(attr_at(f, lx + 20, y0), CPV_NORMAL);
        /* Rank 3 arrives at 15 us: no wait, its op marked late. */
        assert_int_equal(row(f, y3)[lx + 19], ' ');
        assert_true(STARTS(row(f, y3) + lx + 20, "GGGGGG"));
        assert_int_equal(attr_at(f, lx + 20, y3), CPV_LATE);
    }
}

static void timeline_zooms_and_scrolls_around_the_middle(void **state)
{
    fixture *f = *state;
    f->s.us_per_col = 0;
    draw(f, CPV_TIMELINE, 80, 24);
    double fit = f->s.us_per_col, mid = f->s.view_us + fit * f->s.lane_cols / 2;
    assert_true(fit > 0);
    cpv_act(&f->d, &f->s, CPV_ACT_ZOOM_IN, 10);
    assert_true(fabs(f->s.us_per_col - fit / 2) < 1e-9);
    assert_true(fabs(f->s.view_us + f->s.us_per_col * f->s.lane_cols / 2 - mid) < 1e-6);
    draw(f, CPV_TIMELINE, 80, 24);
    cpv_act(&f->d, &f->s, CPV_ACT_RIGHT, 10);
    assert_true(f->s.view_us > mid - f->s.us_per_col * f->s.lane_cols / 2);
    cpv_act(&f->d, &f->s, CPV_ACT_ZOOM_OUT, 10);
    assert_true(fabs(f->s.us_per_col - fit) < 1e-9);
    cpv_act(&f->d, &f->s, CPV_ACT_ZOOM_FIT, 10);
    assert_true(fabs(f->s.us_per_col - fit) < 1e-9);
    assert_true(f->s.view_us == f->d.t0_us);
}

static void detail_lists_every_ranks_arrival_start_end_and_wait(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 2; i++) {
        cpv_state_init(&f->s);
        draw(f, CPV_STRAGGLERS, sizes[i][0], sizes[i][1]);
        cpv_act(&f->d, &f->s, CPV_ACT_ENTER, 10); /* rank 3, ranked first: its worst */
        assert_int_equal(f->s.screen, CPV_DETAIL);
        draw(f, CPV_DETAIL, sizes[i][0], sizes[i][1]);
        expect_row(f, "AllGather seq 10, comm 9f2c0e1d22aa4b01, 4 of 4 ranks, 1 MiB");
        /* what its profiler plugin said, with NCCL's own number: its first AllGather */
        expect_row(f, "NCCL ran it RING/LL on 4 channels (NCCL's seq 0)");
        expect_row(f, "late rank 3, by 15.0 us");
        expect_row(f, "entered      start        end       wait   duration");
        for (int r = 0; r < 4; r++) {
            char label[32];
            snprintf(label, sizeof label, "rank %d    node-a", r);
            int y = expect_row(f, label);
            double entered, start, end, wait, dur;
            assert_int_equal(sscanf(row(f, y) + 19, "%lf %lf %lf %lf %lf", &entered, &start,
                                    &end, &wait, &dur), 5);
            double late = r == 3 ? 15 : 0;
            assert_true(fabs(entered - late) < 0.05 && fabs(start - late) < 0.05);
            assert_true(fabs(end - 20) < 0.05 && fabs(wait - (15 - late)) < 0.05);
            assert_true(fabs(dur - (20 - late)) < 0.05);
            assert_int_equal(strstr(row(f, y), "late") != NULL, r == 3);
        }
        cpv_act(&f->d, &f->s, CPV_ACT_RIGHT, 10);
        draw(f, CPV_DETAIL, sizes[i][0], sizes[i][1]);
        expect_row(f, "AllGather seq 11,");
        cpv_act(&f->d, &f->s, CPV_ACT_BACK, 10);
        assert_int_equal(f->s.screen, CPV_STRAGGLERS);
    }
}

static void enter_on_a_timeline_row_opens_the_collective_in_the_middle(void **state)
{
    fixture *f = *state;
    cpv_state_init(&f->s);
    draw(f, CPV_TIMELINE, 100, 30);
    double ar3 = cpa_gpu_job_us(&f->a, 0, exp_ar_start(3));
    f->s.us_per_col = 1;
    f->s.view_us = ar3 + 4 - f->s.lane_cols / 2.0; /* the middle inside AllReduce 3 */
    f->s.sel[CPV_TIMELINE] = 2;
    cpv_act(&f->d, &f->s, CPV_ACT_ENTER, 10);
    draw(f, CPV_DETAIL, 100, 30);
    expect_row(f, "AllReduce seq 3,");
    expect_row(f, "no late rank judged in it");
}

static void enter_on_an_op_row_opens_its_first_collective(void **state)
{
    fixture *f = *state;
    cpv_state_init(&f->s);
    draw(f, CPV_SUMMARY, 80, 24);
    cpv_act(&f->d, &f->s, CPV_ACT_DOWN, 10); /* AllGather */
    cpv_act(&f->d, &f->s, CPV_ACT_ENTER, 10);
    assert_int_equal(f->s.screen, CPV_DETAIL);
    draw(f, CPV_DETAIL, 80, 24);
    expect_row(f, "AllGather seq 10,");
    expect_row(f, "collective 11 of 15");
    cpv_act(&f->d, &f->s, CPV_ACT_LEFT, 10);
    draw(f, CPV_DETAIL, 80, 24);
    expect_row(f, "AllReduce seq 9,");
    /* The hang's line on screen 3 opens the collective it names, when there is one. */
    cpv_goto(&f->s, CPV_PROBLEMS);
    f->s.sel[CPV_PROBLEMS] = 1;
    cpv_act(&f->d, &f->s, CPV_ACT_ENTER, 10);
    draw(f, CPV_DETAIL, 80, 24);
    expect_row(f, "AllGather seq 10,"); /* exp_job's seq 10 is its first AllGather */
}

/* A rank of many calls: the timeline's window finds them in any block of its index. */
static void timeline_finds_calls_deep_in_a_long_trace(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    const int n = 1000;
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-b");
        exp_put_comm(w, 2, r);
        for (int i = 0; i < n; i++) {
            uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)i * 100000ull;
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, 1024, -1, t, 1);
            exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, t, t + 10000);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    fixture f = {0};
    exp_analyze(dir, &f.a);
    assert_int_equal(cpv_data_init(&f.d, &f.a, dir), 0);
    cpv_state_init(&f.s);
    for (int i = 0; i < n - 10; i += 333) { /* the last ones: the view stops at the end */
        draw(&f, CPV_TIMELINE, 80, 24);
        int lx = lane_x(&f);
        f.s.us_per_col = 1;
        uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)i * 100000ull;
        f.s.view_us = cpa_gpu_job_us(&f.a, 0, t) - 5.5;
        draw(&f, CPV_TIMELINE, 80, 24);
        for (int r = 0; r < 2; r++) {
            char label[32];
            snprintf(label, sizeof label, "rank %d    node-b", r);
            const char *lane = row(&f, expect_row(&f, label)) + lx;
            if (!STARTS(lane, "     AAAAAAAAAAA ")) {
                dump(&f);
                fail_msg("call %d of rank %d not where it should be", i, r);
            }
        }
    }
    cpv_grid_free(&f.g);
    cpv_data_free(&f.d);
    cpa_analysis_free(&f.a);
    tt_rmtree(dir);
    free(dir);
}

/* A job that starts up for 20 s before its first collective (the trace begins with a record
 * at the start): the fitted timeline spans the collectives, so it opens on them and a zoom
 * around its middle lands on them, not on the blank start-up (six zooms found nothing). */
static void timeline_opens_on_the_collectives(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    const uint64_t startup = 20000000000ull; /* 20 s */
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-d");
        exp_put_comm(w, 2, r);
        cp_rec_clock c = {.h = {CP_REC_CLOCK, sizeof c}, .mono_ns = EXP_MONO0,
                          .realtime_ns = EXP_MONO0};
        exp_put(w, &c); /* the trace's first moment */
        for (int i = 0; i < 50; i++) {
            uint64_t t = EXP_MONO0 + startup + (uint64_t)i * 100000000ull; /* every 100 ms */
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, 1024, -1, t, 1);
            exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, t, t + 20000000); /* 20 ms */
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    fixture f = {0};
    exp_analyze(dir, &f.a);
    assert_true(f.a.duration_s > 24.9);
    assert_int_equal(cpv_data_init(&f.d, &f.a, dir), 0);
    cpv_state_init(&f.s);
    draw(&f, CPV_TIMELINE, 80, 24);
    assert_true(f.d.t0_us > 19e6 && f.d.t1_us < 25.1e6);
    int lx = lane_x(&f);
    for (int zoom = 0; zoom < 4; zoom++) {
        const char *lane = row(&f, expect_row(&f, "rank 0    node-d")) + lx;
        if (!strchr(lane, 'A')) {
            dump(&f);
            fail_msg("no collective on the timeline after %d zooms", zoom);
        }
        cpv_act(&f.d, &f.s, CPV_ACT_ZOOM_IN, 10);
        draw(&f, CPV_TIMELINE, 80, 24);
    }
    cpv_grid_free(&f.g);
    cpv_data_free(&f.d);
    cpa_analysis_free(&f.a);
    tt_rmtree(dir);
    free(dir);
}

/* A call NCCL refused: the summary names its result, rank and arguments. */
static void summary_says_a_call_was_refused(void **state)
{
    (void)state;
    fixture f = {0};
    f.dir = tt_tmpdir();
    exp_write_refused_job(f.dir);
    exp_analyze(f.dir, &f.a);
    assert_int_equal(cpv_data_init(&f.d, &f.a, f.dir), 0);
    cpv_state_init(&f.s);
    draw(&f, CPV_SUMMARY, 160, 30);
    int y = expect_row(&f, "refused: 1 call NCCL returned an error for, on 1 rank (they enqueued "
                           "nothing): 1 ncclInvalidArgument (first: rank 1, Broadcast root 99)");
    assert_int_equal(attr_at(&f, 9, y), CPV_WARN);
    cpv_grid_free(&f.g);
    cpv_data_free(&f.d);
    cpa_analysis_free(&f.a);
    tt_rmtree(f.dir);
    free(f.dir);
}

/* A trace with holes: the summary says what, where and when, and the op table's title warns
 * that its rows may leave operations out. */
static void summary_says_the_trace_has_holes(void **state)
{
    (void)state;
    fixture f = {0};
    f.dir = tt_tmpdir();
    exp_write_job_with_holes(f.dir);
    exp_analyze(f.dir, &f.a);
    assert_int_equal(cpv_data_init(&f.d, &f.a, f.dir), 0);
    cpv_state_init(&f.s);
    draw(&f, CPV_SUMMARY, 160, 30);
    int y = expect_row(&f, "holes: 12 records lost (10 ring_full, 2 at_end), 1 of an unknown "
                           "type; 1 of 4 ranks, the first at +0.003 s (rank 2)");
    assert_int_equal(attr_at(&f, 9, y), CPV_WARN);
    y = expect_row(&f, "operations (by total time); the trace has holes: rows may leave "
                       "operations out");
    assert_int_equal(attr_at(&f, 0, y), CPV_WARN);
    cpv_grid_free(&f.g);
    cpv_data_free(&f.d);
    cpa_analysis_free(&f.a);
    tt_rmtree(f.dir);
    free(f.dir);
}

/* The detail of a send/recv pair says which ranks, and Left/Right step through the pairs,
 * not the collectives. */
static void detail_steps_through_send_recv_pairs(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-c");
        exp_put_comm(w, 2, r);
        for (int i = 0; i < 3; i++) {
            uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)i * 200000ull;
            exp_put_call(w, r, r == 0 ? CP_OP_SEND : CP_OP_RECV, (uint64_t)i, 1024, 1 - r, t, 1);
            exp_put_done(w, r == 0 ? CP_OP_SEND : CP_OP_RECV, (uint64_t)i, 1 - r, t, t + 5000);
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, 1024, -1, t + 100000, 1);
            exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, t + 100000, t + 110000);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    fixture f = {0};
    exp_analyze(dir, &f.a);
    assert_int_equal(cpv_data_init(&f.d, &f.a, dir), 0);
    assert_int_equal(f.d.np2p, 3);
    assert_int_equal(f.d.ncoll, 3);
    cpv_state_init(&f.s);
    cpv_goto(&f.s, CPV_DETAIL);
    f.s.detail_op = f.d.p2p_order[0];
    draw(&f, CPV_DETAIL, 100, 24);
    expect_row(&f, "send/recv 1 of 3, rank 0 to 1;");
    cpv_act(&f.d, &f.s, CPV_ACT_RIGHT, 10);
    cpv_act(&f.d, &f.s, CPV_ACT_RIGHT, 10);
    cpv_act(&f.d, &f.s, CPV_ACT_RIGHT, 10); /* stays on the last */
    draw(&f, CPV_DETAIL, 100, 24);
    expect_row(&f, "send/recv 3 of 3, rank 0 to 1;");
    assert_int_equal(find_row(&f, "collective"), -1);
    cpv_act(&f.d, &f.s, CPV_ACT_LEFT, 10);
    draw(&f, CPV_DETAIL, 100, 24);
    expect_row(&f, "send/recv 2 of 3");
    f.s.detail_op = f.d.coll_order[0]; /* a collective steps through the collectives */
    cpv_act(&f.d, &f.s, CPV_ACT_RIGHT, 10);
    draw(&f, CPV_DETAIL, 100, 24);
    expect_row(&f, "collective 2 of 3");
    cpv_grid_free(&f.g);
    cpv_data_free(&f.d);
    cpa_analysis_free(&f.a);
    tt_rmtree(dir);
    free(dir);
}

static void filter_keeps_the_rows_that_match(void **state)
{
    fixture *f = *state;
    cpv_state_init(&f->s);
    snprintf(f->s.filter, sizeof f->s.filter, "RANK 2");
    draw(f, CPV_TIMELINE, 80, 24);
    expect_row(f, "rank 2    node-a");
    assert_int_equal(find_row(f, "rank 1    node-a"), -1);
    expect_row(f, "filter: RANK 2");
    snprintf(f->s.filter, sizeof f->s.filter, "allgather");
    draw(f, CPV_SUMMARY, 80, 24);
    expect_row(f, "AllGather         4        1 MiB");
    assert_int_equal(find_row(f, "AllReduce         4        1 MiB"), -1);
    cpv_act(&f->d, &f->s, CPV_ACT_BACK, 10); /* Esc clears it */
    assert_string_equal(f->s.filter, "");
    /* screen 3 keeps a hang or a mismatch whole when any of its lines holds the filter */
    snprintf(f->s.filter, sizeof f->s.filter, "train_step");
    draw(f, CPV_PROBLEMS, 80, 24);
    expect_row(f, "count differs at seq 3, comm 9f2c0e1d22aa4b01; culprit 3");
    expect_row(f, "  rank 3     2048         <- culprit");
    assert_int_equal(find_row(f, "RANK_NOT_JOINED"), -1);
    expect_row(f, "hangs (1)"); /* the titles stay */
    snprintf(f->s.filter, sizeof f->s.filter, "not_joined");
    draw(f, CPV_PROBLEMS, 80, 24);
    expect_row(f, "  missing 2; waiting 0,1,3; in flight 61.5 s");
    assert_int_equal(find_row(f, "count differs"), -1);
    f->s.sel[CPV_PROBLEMS] = 1; /* Enter still opens the hang's collective */
    cpv_act(&f->d, &f->s, CPV_ACT_ENTER, 10);
    assert_int_equal(f->s.screen, CPV_DETAIL);
    snprintf(f->s.filter, sizeof f->s.filter, "no such thing");
    draw(f, CPV_PROBLEMS, 80, 24);
    expect_row(f, "  none match the filter");
    f->s.filter[0] = '\0';
}

static void keys_move_the_selection_within_the_rows(void **state)
{
    fixture *f = *state;
    cpv_state_init(&f->s);
    int page = draw(f, CPV_PROBLEMS, 80, 24);
    for (int i = 0; i < 100; i++)
        cpv_act(&f->d, &f->s, CPV_ACT_DOWN, page);
    draw(f, CPV_PROBLEMS, 80, 24);
    int y = expect_row(f, "  rank 3     2048");
    assert_int_equal(attr_at(f, 0, y), CPV_SELECTED);
    cpv_act(&f->d, &f->s, CPV_ACT_PGUP, page);
    cpv_act(&f->d, &f->s, CPV_ACT_HOME, page);
    assert_int_equal(f->s.sel[CPV_PROBLEMS], 0);
    cpv_act(&f->d, &f->s, CPV_ACT_NEXT, page);
    assert_int_equal(f->s.screen, CPV_TIMELINE);
    cpv_act(&f->d, &f->s, CPV_ACT_HELP, page);
    draw(f, CPV_TIMELINE, 80, 24);
    expect_row(f, "collprof view: keys");
    cpv_act(&f->d, &f->s, CPV_ACT_BACK, page);
    assert_int_equal(f->s.help, 0);
}

/* A terminal of a few cells draws what fits and nothing outside it. */
static void tiny_terminals_do_not_break_the_drawing(void **state)
{
    fixture *f = *state;
    static const int tiny[][2] = { { 1, 1 }, { 10, 3 }, { 30, 2 }, { 200, 5 } };
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        for (int sc = 0; sc < CPV_NSCREENS; sc++) {
            cpv_grid_free(&f->g);
            assert_int_equal(cpv_grid_init(&f->g, tiny[i][0], tiny[i][1]), 0);
            cpv_goto(&f->s, sc);
            f->s.help = sc == 0;
            assert_true(cpv_draw(&f->d, &f->s, &f->g) >= 1);
        }
    }
}

static void summary_text_is_the_summary_without_keys(void **state)
{
    fixture *f = *state;
    char *t = cpv_summary_text(&f->d, 80);
    assert_non_null(t);
    assert_true(STARTS(t, "collprof view: /traces/job-42\njob      4 ranks on 1 host"));
    assert_non_null(strstr(t, "\nSend/Recv"));
    assert_null(strstr(t, "q quit"));
    assert_int_equal(t[strlen(t) - 1], '\n');
    assert_true(t[strlen(t) - 2] != '\n');
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(summary_shows_the_job_and_the_op_table),
        T(stragglers_rank_the_late_rank_first_with_its_strip),
        T(problems_show_the_hang_and_the_field_diff_per_rank),
        T(timeline_draws_ops_by_rank_and_the_wait_for_the_late_rank),
        T(timeline_zooms_and_scrolls_around_the_middle),
        T(detail_lists_every_ranks_arrival_start_end_and_wait),
        T(enter_on_a_timeline_row_opens_the_collective_in_the_middle),
        T(enter_on_an_op_row_opens_its_first_collective),
        cmocka_unit_test(timeline_finds_calls_deep_in_a_long_trace),
        cmocka_unit_test(timeline_opens_on_the_collectives),
        cmocka_unit_test(summary_says_the_trace_has_holes),
        cmocka_unit_test(summary_says_a_call_was_refused),
        T(filter_keeps_the_rows_that_match),
        cmocka_unit_test(detail_steps_through_send_recv_pairs),
        T(keys_move_the_selection_within_the_rows),
        T(tiny_terminals_do_not_break_the_drawing),
        T(summary_text_is_the_summary_without_keys),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
