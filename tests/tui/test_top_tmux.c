/* `collprof top` on a real terminal: tmux runs it over synthetic stats blocks of 8 live
 * processes, keys go in with send-keys and the screen comes back with capture-pane. Rows
 * appear, the hung rank's age grows with its mark, the straggler is the slowest, h, s,
 * Enter and / do what the help says, a resize to 80x24 keeps the table whole, and q,
 * SIGTERM or Ctrl-C leave the terminal clean. Skipped when tmux is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "trace/trace_format.h"
#include "tests/common/test_text_util.h"
#include "tests/tui/live_test_util.h"
#include "tests/tui/top_tmux_util.h"

#define NRANKS 8

static pid_t g_child[NRANKS];
static pid_t g_hostile; /* the process behind the hostile block */

/* 8 ranks on one host: rank 3 arrives 800 us after the others in its last 20 collectives,
 * rank 5 has been in an AllReduce for 70 s (past COLLPROF_HANG_S), rank 6 is reported hung
 * by its watchdog. */
static void write_blocks(void)
{
    uint64_t now = mono_ns();
    for (int i = 0; i < NRANKS; i++) {
        g_child[i] = lt_live_child();
        assert_true(g_child[i] > 0);
        static cp_stats_block b;
        lt_block_init(&b, (unsigned)g_child[i], i, i, NRANKS, "tnode");
        b.start_mono_ns = now - 100000000000ull;
        b.update_ns = now;
        for (uint64_t s = 0; s < 20; s++) {
            uint64_t t = now - 50000000000ull + s * 10000000ull + (i == 3 ? 800000 : i * 1000);
            lt_push(&b, CP_OP_ALLREDUCE, 0x1234567800000000ull, s, 1 << 20, t, t + 300000);
        }
        b.ops[CP_OP_ALLREDUCE].calls = 20;
        b.ops[CP_OP_ALLREDUCE].bytes = 20 << 20;
        if (i == 5 || i == 6) {
            b.inflight = (cp_stats_inflight){ .comm_id = 0x1234567800000000ull, .seq = 20,
                                              .bytes = 1 << 20, .peer = -1,
                                              .op = CP_OP_ALLREDUCE };
            b.inflight.since_ns = now - (i == 5 ? 70000000000ull : 2000000000ull);
        }
        if (i == 6) {
            b.flags |= CP_STATS_HANG;
            b.hang = (cp_stats_hang){ .comm_id = b.inflight.comm_id, .seq = 20,
                                      .age_ns = 1000000000ull, .op = CP_OP_ALLREDUCE };
        }
        assert_int_equal(lt_write(g_dir, &b), 0);
    }
}

static int setup(void **state)
{
    (void)state;
    return tt_init("/tmp/collprof-toptmux-XXXXXX") < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!g_dir[0])
        return 0;
    tmux("kill-server");
    for (int i = 0; i < NRANKS; i++)
        lt_kill(g_child[i]);
    lt_kill(g_hostile);
    lt_rmtree(g_dir);
    return 0;
}

static double age_of(const char *screen, const char *rank)
{
    for (int y = 0; y < 40; y++) {
        const char *l = line(screen, y);
        if (strncmp(l, rank, strlen(rank)) == 0) {
            const char *p = strstr(l, "AllReduce ");
            assert_non_null(p);
            return strtod(p + 10, NULL);
        }
    }
    fail_msg("no row %s", rank);
    return 0;
}

static void test_keys_resize_and_quit(void **state)
{
    (void)state;
    if (!g_dir[0])
        skip();
    write_blocks();
    uint64_t t0 = mono_ns();
    start_top("", "-d 0.2");
    /* a generous ceiling, and the time it took said: a loaded machine is slow, not wrong */
    char *s = wait_for("7/7", 20000);
    assert_non_null(s);
    fprintf(stderr, "rows on the screen %.2f s after top started\n",
            (double)(mono_ns() - t0) / 1e9);
    assert_int_equal(strncmp(line(s, 0), "collprof top  8 ranks: 8 running, 0 exited", 42), 0);
    assert_int_equal(strncmp(line(s, 3), "RANK", 4), 0);
    for (int i = 0; i < NRANKS; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d/%d ", i, i);
        assert_int_equal(strncmp(line(s, 4 + i), want, strlen(want)), 0);
        assert_non_null(strstr(line(s, 4 + i), "tnode"));
    }
    /* the straggler, the hung ones with their mark */
    assert_non_null(strstr(line(s, 1), "slowest: rank 3 on tnode"));
    assert_non_null(strstr(line(s, 9), "s!"));
    assert_non_null(strstr(line(s, 10), "s!"));
    double age1 = age_of(s, "5/5 ");
    assert_true(age1 >= 69 && age1 < 80);
    free(s);
    /* the in-flight age goes on with the clock: wait (up to 20 s) for a screen a second older */
    double age2 = age1;
    for (int t = 0; t < 20000 && age2 < age1 + 1; t += 100) {
        sleep_ms(100);
        s = capture();
        age2 = age_of(s, "5/5 ");
        free(s);
    }
    assert_true(age2 >= age1 + 1);

    tmux("send-keys -t top h");
    s = wait_for("Any key goes back.", 3000);
    assert_non_null(s);
    assert_non_null(strstr(s, "s            sort by the next column"));
    free(s);
    tmux("send-keys -t top x");
    s = wait_for("sort: rank", 3000);
    assert_non_null(s);
    free(s);

    tmux("send-keys -t top s");
    s = wait_for("sort: host", 3000);
    assert_non_null(s);
    free(s);

    tmux("send-keys -t top Down Down Enter");
    s = WAIT_FOR_ALL(3000, "rank 2/2 of 8 on tnode", "OP            COMM          SEQ",
                     "AllReduce     12345678       19   1.00M");
    assert_non_null(s);
    free(s);
    tmux("send-keys -t top q");
    s = wait_for("sort: host", 3000);
    assert_non_null(s);
    free(s);

    /* a filter by rank, then Esc shows every row again */
    tmux("send-keys -t top / 6 Enter");
    s = WAIT_FOR_ALL(3000, "filter: \"6\"", "\n6/6 ");
    assert_non_null(s);
    assert_int_equal(strncmp(line(s, 4), "6/6 ", 4), 0);
    assert_string_equal(line(s, 5), "");
    free(s);
    tmux("send-keys -t top Escape");
    s = wait_for("7/7 ", 3000);
    assert_non_null(s);
    assert_null(strstr(s, "filter:"));
    free(s);

    assert_int_equal(tmux("resize-window -t top -x 80 -y 24"), 0);
    s = WAIT_FOR_ALL(3000, "IN FLIGHT           LATE\n", "\n7/7 ", "\nq quit");
    assert_non_null(s);
    assert_int_equal(strncmp(line(s, 0), "collprof top  8 ranks", 21), 0);
    assert_int_equal(strncmp(line(s, 3), "RANK    HOST", 12), 0);
    for (int i = 0; i < NRANKS; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d/%d ", i, i);
        assert_int_equal(strncmp(line(s, 4 + i), want, strlen(want)), 0);
        assert_true(strlen(line(s, 4 + i)) <= 80);
    }
    assert_string_equal(line(s, 12), "");
    assert_int_equal(strncmp(line(s, 23), "q quit", 6), 0);
    free(s);

    tmux("send-keys -t top q");
    assert_exit_clean("tnode");
    tmux("kill-session -t top");
}

static void test_sigterm_restores_the_terminal(void **state)
{
    (void)state;
    if (!g_dir[0])
        skip();
    start_top("", "-d 0.2");
    pid_t pid = top_pid();
    char *s = wait_for("RANK", 5000);
    assert_non_null(s);
    free(s);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_exit_clean("tnode");
    tmux("kill-session -t top");
}

static void test_ctrl_c_restores_the_terminal(void **state)
{
    (void)state;
    if (!g_dir[0])
        skip();
    start_top("", "-d 0.2");
    char *s = wait_for("7/7 ", 5000);
    assert_non_null(s);
    free(s);
    tmux("send-keys -t top C-c");
    assert_exit_clean("tnode");
    tmux("kill-session -t top");
}

/* A ninth block, another user's process say, with a hostile hostname and job id: the table
 * and the detail screen show each control byte as \xNN (the accent, which a cell cannot
 * hold, as '?'), and the screen is not cleared under them. Last: it adds a rank. */
static void test_hostile_strings_are_shown_escaped(void **state)
{
    (void)state;
    if (!g_dir[0])
        skip();
    g_hostile = lt_live_child();
    assert_true(g_hostile > 0);
    static cp_stats_block b;
    lt_block_init(&b, (unsigned)g_hostile, 8, 8, NRANKS + 1, TX_HOSTILE);
    snprintf(b.job_id, sizeof b.job_id, "%s", TX_HOSTILE);
    b.update_ns = mono_ns();
    assert_int_equal(lt_write(g_dir, &b), 0);
    start_top("", "-d 0.2");
    char *s = wait_for("8/8 ", 5000);
    assert_non_null(s);
    assert_int_equal(strncmp(line(s, 0), "collprof top  9 ranks", 21), 0);
    /* the host column (24 here) ends at a whole escape */
    if (!strstr(s, "\n8/8     ev\\x1b[2J\\x1b]0;x\\x07  "))
        fail_msg("no escaped host in rank 8's row:\n%s", s);
    free(s);
    tmux("resize-window -t top -x 200 -y 30");
    tmux("send-keys -t top / 8 Enter");
    s = wait_for("filter: \"8\"", 3000);
    assert_non_null(s);
    free(s);
    tmux("send-keys -t top Enter");
    s = wait_for("rank 8/8 of 9 on ev\\x1b[2J\\x1b]0;x\\x07\\x9b1m\\xc2\\x9b2J\\x0a\\x7fil?  pid",
                 3000);
    assert_non_null(s);
    assert_non_null(strstr(s, "  job ev\\x1b[2J\\x1b]0;x\\x07\\x9b1m\\xc2\\x9b2J\\x0a\\x7fil?"));
    free(s);
    tmux("send-keys -t top q");
    tmux("send-keys -t top q");
    assert_exit_clean("tnode");
    tmux("kill-session -t top");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_resize_and_quit),
        cmocka_unit_test(test_sigterm_restores_the_terminal),
        cmocka_unit_test(test_ctrl_c_restores_the_terminal),
        cmocka_unit_test(test_hostile_strings_are_shown_escaped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
