/* `collprof top --once` and `--json` run as a user runs them (no terminal) over synthetic
 * stats blocks: what another user's process wrote in its block (hostname, job id) and the
 * directory's name reach stdout with every control byte shown as \xNN, never raw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>

#include "tests/cli/test_cli_util.h"
#include "tests/common/test_json_util.h"
#include "tests/common/test_text_util.h"
#include "tests/trace/test_trace_util.h"
#include "tests/tui/live_test_util.h"

#include <dirent.h>
#include <time.h>

#include "tests/exporters/prom_check.h"

static char *g_tmp;
static char g_live[600];
static pid_t g_child;

static int setup(void **state)
{
    (void)state;
    g_tmp = tt_tmpdir();
    snprintf(g_live, sizeof g_live, "%s/" TX_HOSTILE, g_tmp);
    if (mkdir(g_live, 0700) != 0)
        return -1;
    setenv("COLLPROF_LIVE_DIR", g_live, 1);
    return 0;
}

static pid_t g_two[2];

static int teardown(void **state)
{
    (void)state;
    lt_kill(g_child);
    for (int i = 0; i < 2; i++) {
        lt_kill(g_two[i]);
        g_two[i] = 0;
    }
    tt_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* A running rank whose block says TX_HOSTILE for its host and job, and a block cut short
 * (a note names its path, in a directory named TX_HOSTILE too). */
static void write_hostile_blocks(void)
{
    g_child = lt_live_child();
    assert_true(g_child > 0);
    static cp_stats_block b;
    lt_block_init(&b, (unsigned)g_child, 0, 0, 1, TX_HOSTILE);
    snprintf(b.job_id, sizeof b.job_id, "%s", TX_HOSTILE);
    assert_int_equal(lt_write(g_live, &b), 0);
    char cut[700];
    snprintf(cut, sizeof cut, "%s/collprof-%u-%u", g_live, (unsigned)geteuid(),
             (unsigned)g_child + 1);
    tt_write_file(cut, "short", 5);
}

static void once_shows_hostile_strings_escaped(void **state)
{
    (void)state;
    write_hostile_blocks();
    struct cli_result r;
    cli_runl(&r, "top", "--once", NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    tx_assert_terminal_safe("stderr", r.err);
    char want[800];
    snprintf(want, sizeof want, "collprof top  %s/%s  1 running", g_tmp, TX_HOSTILE_SHOWN);
    assert_true(cli_starts_with(r.out, want));
    /* the host column is 8 wide: the escape is cut whole, never into a raw byte */
    assert_non_null(strstr(r.out, "\n0/0   ev\\x1b[2 "));
    snprintf(want, sizeof want, "\nnote: skipped '%s/%s/collprof-", g_tmp, TX_HOSTILE_SHOWN);
    assert_non_null(strstr(r.out, want));
    cli_result_free(&r);
}

/* `top --clean` removes a killed process' block, keeps a live one's, says both counts. */
static void clean_removes_only_the_blocks_of_gone_processes(void **state)
{
    (void)state;
    g_child = lt_live_child();
    static cp_stats_block live, dead;
    lt_block_init(&live, (unsigned)g_child, 0, 0, 2, "n");
    lt_block_init(&dead, (unsigned)lt_dead_pid(), 1, 1, 2, "n");
    assert_int_equal(lt_write(g_live, &live), 0);
    assert_int_equal(lt_write(g_live, &dead), 0);
    struct cli_result r;
    cli_runl(&r, "top", "--clean", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "collprof top: removed 1 block of processes that are gone; "
                               "1 of live processes kept\n");
    cli_result_free(&r);
    char path[CP_STATS_PATH_BYTES];
    struct stat st;
    cp_stats_path(path, sizeof path, g_live, dead.uid, dead.pid);
    assert_int_equal(stat(path, &st), -1);
    cp_stats_path(path, sizeof path, g_live, live.uid, live.pid);
    assert_int_equal(stat(path, &st), 0);
    cli_runl(&r, "top", "--clean", "--once", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--clean prints no snapshot"));
    cli_result_free(&r);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Two running ranks of job42 on pnode: rank 0 busy and healthy, rank 1 in an AllReduce for
 * 70 s, which its watchdog reported hung; `calls` calls each. */
static void write_prom_blocks(uint64_t calls)
{
    uint64_t now = now_ns();
    for (int i = 0; i < 2; i++) {
        if (!g_two[i])
            g_two[i] = lt_live_child();
        assert_true(g_two[i] > 0);
        static cp_stats_block b;
        lt_block_init(&b, (unsigned)g_two[i], i, i, 2, "pnode");
        b.start_mono_ns = now - 100000000000ull;
        b.update_ns = now;
        for (uint64_t s = 0; s < 20; s++) {
            uint64_t t = now - 50000000000ull + s * 10000000ull;
            lt_push(&b, CP_OP_ALLREDUCE, 0x1234567800000000ull, s, 1 << 20, t, t + 300000);
        }
        b.ops[CP_OP_ALLREDUCE].calls = calls;
        b.ops[CP_OP_ALLREDUCE].bytes = calls << 20;
        if (i == 1) {
            b.inflight = (cp_stats_inflight){.comm_id = 0x1234567800000000ull, .seq = 20,
                                             .bytes = 1 << 20, .peer = -1,
                                             .op = CP_OP_ALLREDUCE,
                                             .since_ns = now - 70000000000ull};
            b.flags |= CP_STATS_HANG;
            b.hang = (cp_stats_hang){.comm_id = b.inflight.comm_id, .seq = 20,
                                     .age_ns = 60000000000ull, .op = CP_OP_ALLREDUCE};
        }
        assert_int_equal(lt_write(g_live, &b), 0);
    }
}

static void expect_line(const char *text, const char *line)
{
    if (!strstr(text, line)) {
        fprintf(stderr, "%s", text); /* cmocka cuts a long message */
        fail_msg("no line '%s' in the text above", line);
    }
}

/* `top --prometheus FILE --once`: the node's figures as Prometheus text the textfile
 * collector accepts, a sample per process labelled as its launcher named it. */
static void prometheus_once_for_the_textfile_collector(void **state)
{
    (void)state;
    write_prom_blocks(20);
    char path[700];
    snprintf(path, sizeof path, "%s/collprof.prom", g_tmp);
    struct cli_result r;
    cli_runl(&r, "top", "--prometheus", path, "--once", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "");
    size_t len;
    char *text = (char *)tt_read_file(path, &len);
    assert_non_null(text);
    text = realloc(text, len + 1);
    text[len] = '\0';
    const char *why = check_exposition(text);
    if (why)
        fail_msg("not an exposition the textfile collector takes: %s\n%s", why, text);
    if (promtool_check(text) > 0)
        fail_msg("promtool check metrics refuses it (above):\n%s", text);
    expect_line(text, "collprof_live_ranks{state=\"running\"} 1\n");
    expect_line(text, "collprof_live_ranks{state=\"hung\"} 1\n");
    char labels[160];
    for (int i = 0; i < 2; i++) {
        snprintf(labels, sizeof labels, "{job=\"job42\",rank=\"%d\",local_rank=\"%d\",host=\"pnode\","
                 "pid=\"%d\"}", i, i, (int)g_two[i]);
        char want[256];
        snprintf(want, sizeof want, "collprof_live_calls_total%s 20\n", labels);
        expect_line(text, want);
        snprintf(want, sizeof want, "collprof_live_hang%s %d\n", labels, i);
        expect_line(text, want);
        snprintf(want, sizeof want, "collprof_live_up%s 1\n", labels);
        expect_line(text, want);
        snprintf(want, sizeof want, "collprof_live_inflight_age_seconds%s ", labels);
        if (i == 1)
            expect_line(text, want);
        else
            assert_null(strstr(text, want));
    }
    free(text);
    cli_result_free(&r);

    /* one format at a time; a FILE that cannot be written is a one-line error */
    cli_runl(&r, "top", "--prometheus", path, "--json", NULL);
    assert_int_equal(r.status, 2);
    cli_result_free(&r);
    cli_runl(&r, "top", "--prometheus", "/nonexistent-dir/x.prom", "--once", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "cannot write '/nonexistent-dir/x.prom'"));
    cli_result_free(&r);
    lt_kill(g_two[0]);
    lt_kill(g_two[1]);
    g_two[0] = g_two[1] = 0;
}

/* Without --once, FILE is rewritten every SECS (whole: a scrape never sees half of it) until
 * SIGTERM, which ends it with status 0 and nothing left beside FILE. */
static void prometheus_keeps_the_file_current_until_sigterm(void **state)
{
    (void)state;
    write_prom_blocks(20);
    char path[700], bin[4200];
    snprintf(path, sizeof path, "%s/out/collprof.prom", g_tmp);
    snprintf(bin, sizeof bin, "%s/out", g_tmp);
    assert_int_equal(mkdir(bin, 0700), 0);
    snprintf(bin, sizeof bin, "%s", cli_binary());
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        execl(bin, bin, "top", "--prometheus", path, "-d", "0.1", (char *)NULL);
        _exit(127);
    }
    assert_true(p > 0);
    /* conditions, not times: up to 20 s each (a loaded machine is slow, not wrong) */
    int seen = 0;
    for (int t = 0; t < 2000 && !seen; t++) {
        size_t len;
        char *text = (char *)tt_read_file(path, &len);
        if (text && len && memmem(text, len, "_calls_total{", 13) &&
            memmem(text, len, "} 20\n", 5))
            seen = 1;
        free(text);
        if (!seen)
            usleep(10000);
    }
    assert_true(seen);
    write_prom_blocks(35);
    seen = 0;
    for (int t = 0; t < 2000 && !seen; t++) {
        size_t len;
        char *text = (char *)tt_read_file(path, &len);
        if (text && len && memmem(text, len, "} 35\n", 5)) {
            text = realloc(text, len + 1);
            text[len] = '\0';
            assert_null(check_exposition(text)); /* whole, whenever it is read */
            seen = 1;
        }
        free(text);
        if (!seen)
            usleep(10000);
    }
    assert_true(seen);
    kill(p, SIGTERM);
    int status;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* only FILE: no temporary left beside it */
    snprintf(bin, sizeof bin, "%s/out", g_tmp);
    DIR *d = opendir(bin);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            assert_string_equal(e->d_name, "collprof.prom");
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
    lt_kill(g_two[0]);
    lt_kill(g_two[1]);
    g_two[0] = g_two[1] = 0;
}

/* The Grafana dashboard in the repository asks only for families top --prometheus writes. */
static void the_dashboard_asks_for_what_top_writes(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "top", "--prometheus", "-", "--once", NULL);
    assert_int_equal(r.status, 0);
    assert_null(check_exposition(r.out));
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    char path[4200];
    snprintf(path, sizeof path, "%s/docs/grafana/collprof-live.json", src);
    json_object *dash = json_object_from_file(path);
    assert_non_null(dash);
    json_object *panels = NULL;
    assert_true(json_object_object_get_ex(dash, "panels", &panels));
    size_t asked = 0;
    for (size_t i = 0; i < json_object_array_length(panels); i++) {
        json_object *targets = NULL;
        if (!json_object_object_get_ex(json_object_array_get_idx(panels, i), "targets",
                                       &targets))
            continue;
        for (size_t k = 0; k < json_object_array_length(targets); k++) {
            json_object *e = NULL;
            assert_true(json_object_object_get_ex(json_object_array_get_idx(targets, k), "expr",
                                                  &e));
            for (const char *p = json_object_get_string(e); (p = strstr(p, "collprof_"));) {
                size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
                char help[160];
                snprintf(help, sizeof help, "# TYPE %.*s ", (int)n, p);
                if (!strstr(r.out, help))
                    fail_msg("the dashboard asks for %.*s, which top does not write", (int)n, p);
                asked++;
                p += n;
            }
        }
    }
    assert_true(asked >= 10);
    json_object_put(dash);
    cli_result_free(&r);
}

static json_object *key(json_object *o, const char *k)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, k, &v))
        fail_msg("no key '%s'", k);
    return v;
}

static void json_carries_hostile_strings_escaped(void **state)
{
    (void)state;
    write_hostile_blocks();
    struct cli_result r;
    cli_runl(&r, "top", "--json", NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    json_object *j = tj_parse_strict(r.out, "top --json");
    char want[800];
    snprintf(want, sizeof want, "%s/%s", g_tmp, TX_HOSTILE_SHOWN);
    assert_string_equal(json_object_get_string(key(j, "dir")), want);
    json_object *rank = json_object_array_get_idx(key(j, "ranks"), 0);
    assert_non_null(rank);
    assert_string_equal(json_object_get_string(key(rank, "host")), TX_HOSTILE_SHOWN);
    assert_string_equal(json_object_get_string(key(rank, "job_id")), TX_HOSTILE_SHOWN);
    const char *note = json_object_get_string(json_object_array_get_idx(key(j, "notes"), 0));
    assert_non_null(note);
    assert_non_null(strstr(note, want));
    json_object_put(j);
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(once_shows_hostile_strings_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(json_carries_hostile_strings_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(prometheus_once_for_the_textfile_collector, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(prometheus_keeps_the_file_current_until_sigterm, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_dashboard_asks_for_what_top_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(clean_removes_only_the_blocks_of_gone_processes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
