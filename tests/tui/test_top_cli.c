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
#include "tests/common/test_text_util.h"
#include "tests/common/test_trace_util.h"
#include "tests/tui/live_test_util.h"

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

static int teardown(void **state)
{
    (void)state;
    lt_kill(g_child);
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
    json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *j = json_tokener_parse_ex(tok, r.out, (int)strlen(r.out));
    json_tokener_free(tok);
    assert_non_null(j);
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
        cmocka_unit_test_setup_teardown(clean_removes_only_the_blocks_of_gone_processes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
