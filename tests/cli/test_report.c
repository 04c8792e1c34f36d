/* `collprof report` as a user runs it: the text and JSON reports of a synthetic job, the
 * exit codes of --fail-on on jobs with and without a hang or a mismatch, and hostile input
 * (an empty directory, a file that is not a trace, a missing path, a cut file, a file from a
 * newer collprof). */
#include "tests/exporters/exp_job.h"

#include <json-c/json.h>
#include <math.h>

#include "tests/cli/test_cli_util.h"
#include "tests/common/test_json_util.h"
#include "tests/common/test_text_util.h"

/* Exit 2, nothing on stdout, exactly one line on stderr naming the problem. */
static void assert_one_line_error(struct cli_result *r, const char *needle)
{
    assert_int_equal(r->status, 2);
    assert_string_equal(r->out, "");
    assert_int_equal(cli_count_lines(r->err), 1);
    if (!cli_starts_with(r->err, "collprof: report: ") || !strstr(r->err, needle))
        fail_msg("stderr '%s' does not say '%s'", r->err, needle);
}

static json_object *parse_strict(const char *s) { return tj_parse_strict(s, "stdout"); }

static json_object *key(json_object *o, const char *k)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, k, &v))
        fail_msg("no key '%s'", k);
    return v;
}

static void text_report_of_a_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    cli_runl(&r, "report", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    char head[1200];
    snprintf(head, sizeof head, "collprof report: %s\njob      4 ranks on 1 host (node-a), 0.009 s\n",
             dir);
    if (!cli_starts_with(r.out, head))
        fail_msg("report begins '%.200s'", r.out);
    assert_non_null(strstr(r.out, "\nAllReduce         4        1 MiB      10     10.0     10.0     "
                                  "104.86     157.29\n"));
    assert_non_null(strstr(r.out, "\nhangs        none\n"));
    assert_null(strchr(r.out, '\033')); /* not a terminal: no colour */
    cli_result_free(&r);

    cli_runl(&r, "report", "--top", "1", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\n... 2 more rows (--top N, or --json)\n"));
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

static void json_report_of_a_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    json_object *j = parse_strict(r.out);
    assert_int_equal(json_object_get_int(key(j, "version")), 1);
    json_object *job = key(j, "job");
    assert_int_equal(json_object_get_int(key(job, "ranks")), 4);
    assert_int_equal(json_object_get_int(key(job, "records")), 151);
    assert_int_equal(json_object_get_int(key(job, "lost_records")), 0);
    json_object *ops = key(j, "ops");
    assert_int_equal(json_object_array_length(ops), 3);
    json_object *ar = json_object_array_get_idx(ops, 0);
    assert_string_equal(json_object_get_string(key(ar, "op")), "AllReduce");
    assert_int_equal(json_object_get_int64(key(ar, "bytes")), 1048576);
    assert_int_equal(json_object_get_int(key(ar, "nranks")), 4);
    assert_int_equal(json_object_get_int(key(ar, "ops")), 10);
    assert_int_equal(json_object_get_int(key(ar, "calls")), 40);
    assert_true(fabs(json_object_get_double(key(ar, "busbw_gbps")) - 157.286) < 1e-9);
    assert_int_equal(json_object_array_length(key(j, "stragglers")), 0);
    assert_int_equal(json_object_array_length(key(j, "hangs")), 0);
    assert_int_equal(json_object_array_length(key(j, "mismatches")), 0);
    json_object *clock = key(j, "clock");
    assert_true(json_object_get_boolean(key(clock, "aligned")));
    assert_int_equal(json_object_object_length(key(clock, "offsets_us")), 4);
    json_object_put(j);
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* --table nccl-tests and --buckets as a user types them, and the combinations that make
 * no sense refused in one line. */
static void table_and_buckets_options(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    cli_runl(&r, "report", "--table", "nccl-tests", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_true(cli_starts_with(r.out, "# collprof report --table nccl-tests: "));
    assert_non_null(strstr(r.out, "\n# AllReduce, 4 ranks\n#       size         count      type"
                                  "   redop    root     time   algbw   busbw     #ops\n"));
    assert_non_null(strstr(r.out, "\n     1048576        262144     float     sum      -1    "
                                  "10.00  104.86  157.29       10\n"));
    cli_result_free(&r);

    cli_runl(&r, "report", "--buckets", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\nAllReduce         4      >=1 MiB      10     10.0"));
    cli_result_free(&r);

    cli_runl(&r, "report", "--table", "nccl", dir, NULL);
    assert_one_line_error(&r, "unknown --table 'nccl': wants nccl-tests");
    cli_result_free(&r);
    cli_runl(&r, "report", "--json", "--buckets", dir, NULL);
    assert_one_line_error(&r, "--buckets is for text");
    cli_result_free(&r);
    cli_runl(&r, "report", "--table", "nccl-tests", "--top", "3", dir, NULL);
    assert_one_line_error(&r, "no --top");
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* A 3-rank job of AllReduces: rank `hang_rank` makes no call from `hang_seq` on and is
 * killed (no END), the others wait in it; rank `odd_rank` passes count 2048 instead of 1024
 * at seq `odd_seq`. -1 for neither. */
static void write_small_job(const char *dir, int hang_rank, int hang_seq, int odd_rank,
                            int odd_seq)
{
    for (int r = 0; r < 3; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 3, r);
        for (int s = 0; s < 6; s++) {
            if (r == hang_rank && s >= hang_seq)
                break;
            uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)s * 100000;
            uint64_t count = r == odd_rank && s == odd_seq ? 2048 : 1024;
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)s, count, -1, t - 1000, 1);
            if (hang_rank < 0 || s < hang_seq)
                exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)s, -1, t, t + 10000);
            if (hang_rank >= 0 && s >= hang_seq)
                break; /* in the hung collective until killed */
        }
        if (hang_rank >= 0) { /* the heartbeat: alive, waiting, 5 s later */
            uint64_t later = EXP_MONO0 + 5000000000ull;
            cp_rec_clock c = {.h = {CP_REC_CLOCK, sizeof c}, .mono_ns = later,
                              .realtime_ns = later};
            exp_put(w, &c);
        }
        if (hang_rank < 0) {
            cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .at_ns = EXP_MONO0 + 2000000ull};
            exp_put(w, &e);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
}

static int report_status(const char *dir, const char *fail_on, int *hangs, int *mismatches)
{
    struct cli_result r;
    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    json_object *j = parse_strict(r.out);
    *hangs = (int)json_object_array_length(key(j, "hangs"));
    *mismatches = (int)json_object_array_length(key(j, "mismatches"));
    json_object_put(j);
    cli_result_free(&r);
    cli_runl(&r, "report", "--fail-on", fail_on, dir, NULL);
    int status = r.status;
    assert_true(status == 0 || cli_starts_with(r.out, "collprof report: "));
    cli_result_free(&r);
    return status;
}

static void fail_on_sets_the_exit_status(void **state)
{
    (void)state;
    int hangs, mismatches;

    char *healthy = tt_tmpdir();
    write_small_job(healthy, -1, -1, -1, -1);
    assert_int_equal(report_status(healthy, "hang,mismatch", &hangs, &mismatches), 0);
    assert_int_equal(hangs, 0);
    assert_int_equal(mismatches, 0);

    char *hung = tt_tmpdir();
    write_small_job(hung, 2, 4, -1, -1);
    assert_int_equal(report_status(hung, "hang", &hangs, &mismatches), 1);
    assert_true(hangs >= 1);
    assert_int_equal(mismatches, 0);
    assert_int_equal(report_status(hung, "mismatch", &hangs, &mismatches), 0);
    assert_int_equal(report_status(hung, "mismatch,hang", &hangs, &mismatches), 1);

    char *odd = tt_tmpdir();
    write_small_job(odd, -1, -1, 2, 3);
    assert_int_equal(report_status(odd, "mismatch", &hangs, &mismatches), 1);
    assert_int_equal(mismatches, 1);
    assert_int_equal(hangs, 0);
    assert_int_equal(report_status(odd, "hang", &hangs, &mismatches), 0);

    /* The report is printed either way: --fail-on changes only the status. */
    struct cli_result r;
    cli_runl(&r, "report", "--fail-on=mismatch", "--json", odd, NULL);
    assert_int_equal(r.status, 1);
    json_object *j = parse_strict(r.out);
    json_object *m = json_object_array_get_idx(key(j, "mismatches"), 0);
    assert_string_equal(json_object_get_string(key(m, "field")), "count");
    assert_int_equal(json_object_get_int(json_object_array_get_idx(key(m, "culprit_ranks"), 0)),
                     2);
    json_object_put(j);
    cli_result_free(&r);

    char *dirs[] = { healthy, hung, odd };
    for (int i = 0; i < 3; i++) {
        tt_rmtree(dirs[i]);
        free(dirs[i]);
    }
}

static void bad_fail_on_lists_are_usage_errors(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "report", "--fail-on", "hang,frob", "/nonexistent", NULL);
    assert_one_line_error(&r, "unknown item 'frob' in --fail-on");
    cli_result_free(&r);
    cli_runl(&r, "report", "--fail-on", ",", "/nonexistent", NULL);
    assert_one_line_error(&r, "--fail-on wants hang, mismatch or both");
    cli_result_free(&r);
    cli_runl(&r, "report", "--top", "0", "/nonexistent", NULL);
    assert_one_line_error(&r, "bad value '0' for --top");
    cli_result_free(&r);
}

static void hostile_input_is_one_line_and_exit_2(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    struct cli_result r;

    cli_runl(&r, "report", dir, NULL);
    assert_one_line_error(&r, "no trace file");
    cli_result_free(&r);

    char path[1024];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    tt_write_file(path, "hello\n", 6);
    cli_runl(&r, "report", dir, NULL);
    assert_one_line_error(&r, "no trace file");
    cli_result_free(&r);

    /* Named like a trace, but not one (a foreign or garbled file). */
    snprintf(path, sizeof path, "%s/rank00%s", dir, CP_TRACE_FILE_SUFFIX);
    tt_write_file(path, "GARBAGE! not a collprof trace at all, not even close.", 53);
    cli_runl(&r, "report", "--json", dir, NULL);
    assert_one_line_error(&r, "no readable trace file");
    cli_result_free(&r);

    cli_runl(&r, "report", "/nonexistent/trace/dir", NULL);
    assert_one_line_error(&r, "cannot read '/nonexistent/trace/dir'");
    cli_result_free(&r);

    cli_runl(&r, "report", path, NULL);
    assert_one_line_error(&r, "is not a directory");
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* A rank killed mid-write: the report of what is readable, the warning in it, exit 0. */
static void a_cut_file_is_reported_with_a_warning(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/rank01%s", dir, CP_TRACE_FILE_SUFFIX);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 40), 0);

    struct cli_result r;
    cli_runl(&r, "report", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\nwarnings (1)\n"));
    assert_non_null(strstr(r.out, "rank01.cptrace"));
    assert_string_equal(r.err, "");
    cli_result_free(&r);

    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    json_object *j = parse_strict(r.out);
    assert_int_equal(json_object_array_length(key(j, "warnings")), 1);
    json_object_put(j);
    /* JSON has no prose: the warning also goes to stderr, one line. */
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: WARN "));
    assert_non_null(strstr(r.err, "rank01.cptrace"));
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* One rank of a 2-rank job: four finished AllReduces, then a clean END. */
static void write_rank_of_two(const char *dir, int rank)
{
    cp_trace_writer *w = exp_open_rank(dir, rank, "node-a");
    exp_put_comm(w, 2, rank);
    for (int s = 0; s < 4; s++) {
        uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)s * 100000;
        exp_put_call(w, rank, CP_OP_ALLREDUCE, (uint64_t)s, 1024, -1, t - 1000, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)s, -1, t, t + 10000);
    }
    cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .at_ns = EXP_MONO0 + 2000000ull};
    exp_put(w, &e);
    assert_int_equal(cp_trace_writer_close(w), 0);
}

/* Rewrites the header of a written file as a newer writer's would be, hash included, so
 * that only the version can be what stops a reader. */
static void claim_version(const char *path, uint16_t version, uint16_t compat_version)
{
    cp_file_header h;
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    h.version = version;
    h.compat_version = compat_version;
    tt_rehash_header(&h);
    assert_int_equal(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
}

/* The report wraps a warning over lines that go on with two spaces: one line again. */
static void unwrap(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (p[0] == '\n' && p[1] == ' ' && p[2] == ' ' && p[3] != ' ') {
            *o++ = ' ';
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* A directory where one rank's file comes from a newer collprof: the readable ranks are
 * reported, the other is skipped with a warning naming it and both versions; with nothing
 * readable left, exit 2. */
static void mixed_versions_skip_the_newer_file_with_a_warning(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    write_rank_of_two(dir, 0);
    write_rank_of_two(dir, 1);
    char newer[1024], warning[1300];
    snprintf(newer, sizeof newer, "%s/rank01%s", dir, CP_TRACE_FILE_SUFFIX);
    claim_version(newer, CP_TRACE_READ_VERSION + 1, CP_TRACE_READ_VERSION + 1);
    snprintf(warning, sizeof warning, "'%s': trace format version %d is newer than this "
             "collprof reads (version %d): skipped", newer, CP_TRACE_READ_VERSION + 1,
             CP_TRACE_READ_VERSION);

    struct cli_result r;
    cli_runl(&r, "report", dir, NULL);
    assert_int_equal(r.status, 0);
    char head[1200];
    snprintf(head, sizeof head, "collprof report: %s\njob      1 rank on 1 host (node-a)", dir);
    if (!cli_starts_with(r.out, head))
        fail_msg("report begins '%.200s'", r.out);
    assert_non_null(strstr(r.out, "\nwarnings (1)\n"));
    unwrap(r.out);
    if (!strstr(r.out, warning))
        fail_msg("no warning '%s' in '%s'", warning, r.out);
    assert_string_equal(r.err, ""); /* text: the warning is in the report */
    cli_result_free(&r);

    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    json_object *j = parse_strict(r.out);
    assert_int_equal(json_object_get_int(key(key(j, "job"), "ranks")), 1);
    json_object *w = key(j, "warnings");
    assert_int_equal(json_object_array_length(w), 1);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(w, 0)), warning);
    json_object_put(j);
    char line[1400];
    snprintf(line, sizeof line, "collprof: WARN %s\n", warning);
    assert_string_equal(r.err, line);
    cli_result_free(&r);

    /* A newer writer that says this collprof can still read it is read, without a word. */
    char rank0[1024];
    snprintf(rank0, sizeof rank0, "%s/rank00%s", dir, CP_TRACE_FILE_SUFFIX);
    claim_version(rank0, CP_TRACE_VERSION + 1, CP_TRACE_READ_VERSION);
    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, line);
    cli_result_free(&r);

    /* Nothing readable: one line, exit 2. */
    claim_version(rank0, CP_TRACE_READ_VERSION + 2, CP_TRACE_READ_VERSION + 1);
    cli_runl(&r, "report", dir, NULL);
    assert_one_line_error(&r, "no readable trace file");
    assert_non_null(strstr(r.err, "newer than this collprof reads"));
    cli_result_free(&r);
    cli_runl(&r, "report", "--json", dir, NULL);
    assert_one_line_error(&r, "no readable trace file");
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* A job whose hostnames, job id, launcher and call-site frames are hostile, beside a file
 * whose name is: the text report and the warnings show each control byte as \xNN, and the
 * JSON carries the same text, valid UTF-8 without control characters. */
static void hostile_strings_are_shown_escaped(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_text(dir, TX_HOSTILE);
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/" TX_HOSTILE "%s", dir, CP_TRACE_FILE_SUFFIX);
    tt_write_file(bad, "GARBAGE! not a collprof trace at all, not even close.", 53);

    struct cli_result r;
    cli_runl(&r, "report", dir, NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    tx_assert_terminal_safe("stderr", r.err);
    assert_non_null(strstr(r.out, "\njob      4 ranks on 1 host (ev\\x1b[2J\\x1b]0;x"));
    assert_non_null(strstr(r.out, "at " TX_HOSTILE_SHOWN " < main"));
    assert_non_null(strstr(r.out, "\nwarnings (1)\n"));
    cli_result_free(&r);

    cli_runl(&r, "report", "--json", dir, NULL);
    assert_int_equal(r.status, 0);
    tx_assert_terminal_safe("stdout", r.out);
    tx_assert_terminal_safe("stderr", r.err);
    assert_non_null(strstr(r.err, "/" TX_HOSTILE_SHOWN CP_TRACE_FILE_SUFFIX "'"));
    json_object *j = parse_strict(r.out);
    json_object *hosts = key(key(j, "job"), "hosts");
    assert_int_equal(json_object_array_length(hosts), 1);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(hosts, 0)),
                        TX_HOSTILE_SHOWN);
    const char *warning = json_object_get_string(json_object_array_get_idx(key(j, "warnings"), 0));
    assert_non_null(warning);
    assert_non_null(strstr(warning, "/" TX_HOSTILE_SHOWN CP_TRACE_FILE_SUFFIX "'"));
    json_object *m = json_object_array_get_idx(key(j, "mismatches"), 0);
    assert_non_null(m);
    const char *site = json_object_get_string(key(key(m, "sites"), "0"));
    assert_non_null(site);
    assert_true(cli_starts_with(site, TX_HOSTILE_SHOWN " < main"));
    json_object_put(j);
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_report_of_a_job),
        cmocka_unit_test(json_report_of_a_job),
        cmocka_unit_test(table_and_buckets_options),
        cmocka_unit_test(fail_on_sets_the_exit_status),
        cmocka_unit_test(bad_fail_on_lists_are_usage_errors),
        cmocka_unit_test(hostile_input_is_one_line_and_exit_2),
        cmocka_unit_test(a_cut_file_is_reported_with_a_warning),
        cmocka_unit_test(mixed_versions_skip_the_newer_file_with_a_warning),
        cmocka_unit_test(hostile_strings_are_shown_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
