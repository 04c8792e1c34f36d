/* `collprof view DIR` run as a user runs it: without a terminal it prints the summary once;
 * bad input gives report's one-line errors and exit 2; in tmux (when there is one) the
 * keys switch screens, the straggler is named, the timeline zooms, a resize to 80x24 keeps
 * it readable and 'q' leaves the terminal as it was.
 *
 * The job for the terminal is one the analyzer itself finds a straggler in: 4 ranks, 20
 * AllReduce 10 ms apart, rank 2 starting each 3 ms after the others (over CPA_LATE_MIN_US),
 * every rank ending together. */
#include "tests/exporters/exp_job.h"

#include <math.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/cli/test_cli_util.h"
#include "tests/common/test_text_util.h"

#define LATE_N 20
#define LATE_RANK 2
#define LATE_NS 3000000ull

static void write_late_job(const char *dir)
{
    for (int r = 0; r < EXP_NRANKS; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, EXP_NRANKS, r);
        for (int i = 0; i < LATE_N; i++) {
            uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)i * 10000000ull;
            uint64_t start = r == LATE_RANK ? t + LATE_NS : t;
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, 262144, -1, start, 1);
            exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, start, t + LATE_NS + 50000);
        }
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0,
                        .at_ns = EXP_MONO0 + 1000000ull + LATE_N * 10000000ull};
        exp_put(w, &e);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
}

static void without_a_terminal_it_prints_the_summary_once(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    cli_runl(&r, "view", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    char head[1200];
    snprintf(head, sizeof head,
             "collprof view: %s\n"
             "job      4 ranks on 1 host (node-a), ", dir);
    assert_true(strncmp(r.out, head, strlen(head)) == 0);
    assert_non_null(strstr(r.out, "\nclock    one host: one clock, nothing to align\n"));
    assert_non_null(strstr(r.out, "\nop            ranks         size     ops   p50 us   p99 us"));
    assert_non_null(strstr(r.out, "\nAllReduce         4        1 MiB      10     10.0     10.0"));
    assert_non_null(strstr(r.out, "\nAllGather         4        1 MiB       5      5.0      5.0"));
    assert_null(strstr(r.out, "\033")); /* no escape sequence into a file */
    assert_null(strstr(r.out, "q quit"));
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

static void bad_input_is_one_line_and_exit_2(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char line[2048], file[1100];
    struct cli_result r;

    cli_runl(&r, "view", dir, NULL);
    snprintf(line, sizeof line, "collprof: view: no trace file (*.cptrace) in '%s'\n", dir);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.err, line);
    assert_string_equal(r.out, "");
    cli_result_free(&r);

    snprintf(file, sizeof file, "%s/missing", dir);
    cli_runl(&r, "view", file, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "collprof: view: cannot read '"));
    cli_result_free(&r);

    snprintf(file, sizeof file, "%s/junk%s", dir, CP_TRACE_FILE_SUFFIX);
    tt_write_file(file, "not a trace at all", 18);
    cli_runl(&r, "view", dir, NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    cli_result_free(&r);

    cli_runl(&r, "view", NULL);
    assert_int_equal(r.status, 2);
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* ---- in tmux ---- */

static char sock[1200]; /* the tmux server's socket, in the test's directory */

static int tmux(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int tmux(const char *fmt, ...)
{
    char args[3000], cmd[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "tmux -S '%s' %s >/dev/null 2>&1", sock, args);
    return system(cmd);
}

static char screen[16384];
static const char *capture_flags = "";

static const char *capture(void)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "tmux -S '%s' capture-pane -p %s -t v 2>/dev/null", sock,
             capture_flags);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(screen, 1, sizeof screen - 1, p) : 0;
    screen[n] = '\0';
    if (p)
        pclose(p);
    return screen;
}

/* Waits up to 5 s for text on the screen (drawing and ASan take their time). */
/* Up to 20 s: a loaded machine redraws late, never wrong. */
static int wait_for(const char *text)
{
    for (int i = 0; i < 1000; i++) {
        if (strstr(capture(), text))
            return 1;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "waited for \"%s\"; the screen:\n%s\n", text, screen);
    return 0;
}

/* The timeline's "zoom 1.234ms/col" in microseconds; -1 when not on the screen. */
static double zoom_us(void)
{
    const char *z = strstr(capture(), "zoom ");
    double v;
    char unit[3] = "";
    if (!z || sscanf(z, "zoom %lf%2[mus]", &v, unit) != 2)
        return -1;
    return strcmp(unit, "s") == 0 ? v * 1e6 : strcmp(unit, "ms") == 0 ? v * 1e3 : v;
}

static int wait_zoom(double want_us)
{
    for (int i = 0; i < 250; i++) {
        double z = zoom_us();
        if (z > 0 && fabs(z - want_us) <= want_us * 1e-3)
            return 1;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "waited for zoom %.3f us/col; the screen:\n%s\n", want_us, screen);
    return 0;
}

static void in_tmux_keys_switch_screens_zoom_and_quit_cleanly(void **state)
{
    (void)state;
    if (system("command -v tmux >/dev/null 2>&1") != 0)
        skip();
    char *dir = tt_tmpdir();
    snprintf(sock, sizeof sock, "%s/tmux", dir);
    write_late_job(dir);
    /* The shell stays after collprof so the screen it leaves behind can be read. */
    assert_int_equal(tmux("new-session -d -s v -x 100 -y 30 \"'%s' view '%s'; echo view-rc=\\$?; "
                          "sleep 30\"", cli_binary(), dir), 0);
    /* each line waited for: a capture can catch the screen half redrawn */
    assert_true(wait_for("operations (by total time)"));
    assert_true(wait_for("AllReduce         4        1 MiB      20"));

    tmux("send-keys -t v 2");
    assert_true(wait_for("persistent: rank 2 was the late one in 20 of 20 collectives"));
    assert_true(wait_for("rank 2    node-a      20"));

    tmux("send-keys -t v 4");
    assert_true(wait_for("zoom "));
    double fit = zoom_us();
    assert_true(fit > 0);
    tmux("send-keys -t v +");
    assert_true(wait_zoom(fit / 2));
    tmux("send-keys -t v -");
    assert_true(wait_zoom(fit));

    tmux("resize-window -t v -x 80 -y 24");
    assert_true(wait_for("/ filter  +/- zoom"));
    assert_true(wait_for("rank 3    node-a"));
    assert_true(wait_for("q quit"));
    for (const char *l = screen; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        assert_true(n <= 80);
        l += n + (nl != NULL);
    }

    tmux("send-keys -t v h");
    assert_true(wait_for("collprof view: keys"));
    tmux("send-keys -t v Escape");
    tmux("send-keys -t v q");
    assert_true(wait_for("view-rc=0"));
    /* endwin put the shell's screen back: nothing of the view is left on it. */
    assert_null(strstr(screen, "collprof view"));
    assert_null(strstr(screen, "q quit"));
    tmux("kill-server");
    tt_rmtree(dir);
    free(dir);
}

/* Whether SGR sequences on the screen (capture-pane -e) set a foreground or background
 * colour; 39 and 49 (the defaults) do not count. */
static int has_colour(const char *s)
{
    for (const char *p = strstr(s, "\033["); p; p = strstr(p + 1, "\033[")) {
        const char *q = p + 2;
        while (*q && *q != 'm') {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q)
                break;
            if ((v >= 30 && v <= 37) || (v >= 40 && v <= 47) || (v >= 90 && v <= 107) ||
                v == 38 || v == 48)
                return 1;
            q = *end == ';' ? end + 1 : end;
        }
    }
    return 0;
}

/* NO_COLOR (no-color.org): roles shown with bold and reverse only. */
static void no_color_draws_without_colours(void **state)
{
    (void)state;
    if (system("command -v tmux >/dev/null 2>&1") != 0)
        skip();
    char *dir = tt_tmpdir();
    write_late_job(dir);
    capture_flags = "-e";
    for (int no_color = 0; no_color < 2; no_color++) {
        snprintf(sock, sizeof sock, "%s/tmux%d", dir, no_color);
        assert_int_equal(tmux("new-session -d -s v -x 100 -y 30 \"%s'%s' view '%s'; sleep 30\"",
                              no_color ? "NO_COLOR=1 " : "", cli_binary(), dir), 0);
        assert_true(wait_for("operations (by total time)"));
        tmux("send-keys -t v 2");
        assert_true(wait_for("persistent: rank 2"));
        assert_int_equal(has_colour(screen), !no_color);
        tmux("kill-server");
    }
    capture_flags = "";
    tt_rmtree(dir);
    free(dir);
}

/* A terminal ncurses does not know: one line and exit 3, not ncurses' own exit. (ncurses
 * leaks its half-made screen on that path: leak checking is off for this run.) */
static void an_unknown_terminal_is_one_line_and_exit_3(void **state)
{
    (void)state;
    if (system("command -v tmux >/dev/null 2>&1") != 0)
        skip();
    char *dir = tt_tmpdir();
    write_late_job(dir);
    snprintf(sock, sizeof sock, "%s/tmux", dir);
    assert_int_equal(tmux("new-session -d -s v -x 100 -y 30 \"ASAN_OPTIONS=detect_leaks=0 "
                          "TERM=no-such-terminal '%s' view "
                          "'%s'; echo view-rc=\\$?; sleep 30\"", cli_binary(), dir), 0);
    assert_true(wait_for("view-rc=3"));
    assert_non_null(strstr(screen, "collprof: view: cannot run the terminal view "
                                   "(TERM=no-such-terminal)\nview-rc=3"));
    tmux("kill-server");
    tt_rmtree(dir);
    free(dir);
}

/* A job whose hostnames and call-site frames are hostile: without a terminal and in tmux,
 * the view shows each control byte as \xNN (an accent, which the screen's cells cannot
 * hold, as '?'), and nothing of it acts on the terminal. */
static void hostile_strings_are_shown_escaped(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_text(dir, TX_HOSTILE);
    struct cli_result r;
    cli_runl(&r, "view", dir, NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    tx_assert_terminal_safe("stderr", r.err);
    assert_non_null(strstr(r.out, "\njob      4 ranks on 1 host (ev\\x1b[2J\\x1b]0;x"));
    cli_result_free(&r);

    if (system("command -v tmux >/dev/null 2>&1") != 0) {
        tt_rmtree(dir);
        free(dir);
        skip();
    }
    snprintf(sock, sizeof sock, "%s/tmux", dir);
    assert_int_equal(tmux("new-session -d -s v -x 120 -y 30 \"'%s' view '%s'; echo view-rc=\\$?; "
                          "sleep 30\"", cli_binary(), dir), 0);
    assert_true(wait_for("operations (by total time)"));
    assert_true(wait_for("collprof view"));
    assert_true(wait_for("host (ev\\x1b[2J\\x1b]0;x"));
    tmux("send-keys -t v 3");
    assert_true(wait_for("count differs"));
    assert_true(wait_for("at ev\\x1b[2J\\x1b]0;x\\x07\\x9b1m\\xc2\\x9b2J\\x0a\\x7fil? < main"));
    tmux("send-keys -t v q");
    assert_true(wait_for("view-rc=0"));
    tmux("kill-server");
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(without_a_terminal_it_prints_the_summary_once),
        cmocka_unit_test(hostile_strings_are_shown_escaped),
        cmocka_unit_test(bad_input_is_one_line_and_exit_2),
        cmocka_unit_test(in_tmux_keys_switch_screens_zoom_and_quit_cleanly),
        cmocka_unit_test(no_color_draws_without_colours),
        cmocka_unit_test(an_unknown_terminal_is_one_line_and_exit_3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
