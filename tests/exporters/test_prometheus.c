/* The Prometheus export of the synthetic job (exp_job.h), checked by a format checker
 * (prom_check.h) written after promtool's rules (`promtool check metrics`: the text format parser
 * plus its lint) and what node_exporter's textfile collector accepts; the checker is itself
 * tested on inputs each rule must refuse, so a pass means something. */
#include "tests/exporters/exp_job.h"

#include <ctype.h>
#include <math.h>

#include "exporters/exporters.h"
#include "tests/exporters/prom_check.h"

/* ---- the checker refuses what promtool refuses ---- */

static void the_checker_refuses_each_broken_rule(void **state)
{
    (void)state;
    /* and promtool, where it is here, refuses a broken value: its check means something */
    assert_int_not_equal(promtool_check("# HELP x_total X.\n# TYPE x_total counter\n"
                                        "x_total{a=\"1\"} one\n"), 0);
    static const char good[] =
        "# HELP a_total A.\n# TYPE a_total counter\na_total{op=\"x\\\"y\\\\z\\n\"} 1\n"
        "# HELP d_seconds D.\n# TYPE d_seconds summary\nd_seconds{quantile=\"0.5\"} 1e-05\n"
        "d_seconds_sum 3\nd_seconds_count 2\n# HELP g G.\n# TYPE g gauge\ng +Inf\n";
    assert_null(check_exposition(good));
    static const char *const broken[] = {
        "# HELP a_total A.\n# TYPE a_total counter\na_total 1",            /* no final \n */
        "a_total 1\n",                                                     /* no HELP/TYPE */
        "# HELP a A.\n# TYPE a counter\na 1\n",                            /* counter, no _total */
        "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n",            /* gauge _total */
        "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\na 1\n",              /* TYPE twice */
        "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\na 2\n", /* split */
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",       /* same series */
        "# HELP a A.\n# TYPE a gauge\na 1,5\n",                            /* bad float */
        "# HELP a A.\n# TYPE a gauge\na inf\n",                            /* Go wants +Inf */
        "# HELP a A.\n# TYPE a gauge\na{x=\"a\\tb\"} 1\n",                 /* bad escape */
        "# HELP a A.\n# TYPE a gauge\na{x=\"a\nb\"} 1\n",                  /* raw newline */
        "# HELP a A.\n# TYPE a gauge\na{1x=\"a\"} 1\n",                    /* label name */
        "# HELP a A.\n# TYPE a gauge\na{__x=\"a\"} 1\n",                   /* reserved */
        "# HELP 1a A.\n# TYPE 1a gauge\n1a 1\n",                           /* metric name */
        "# HELP a A.\n# TYPE a gauge\na 1 1700000000\n",                   /* timestamp */
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n",             /* label twice */
        "# HELP a_total A.\n# TYPE a_total counter\na_total -1\n",         /* counter < 0 */
        "# HELP a A.\n# TYPE a summary\na 1\n",                            /* no quantile */
        "# HELP aMs A.\n# TYPE aMs gauge\naMs 1\n",                        /* camelCase */
        "# HELP a_milliseconds A.\n# TYPE a_milliseconds gauge\na_milliseconds 1\n",
        "# HELP a A.\n# TYPE a gauge\n\na 1\n",                            /* empty line */
        "# HELP a A.\n# TYPE a gauge\na 1\n# HELP a A.\n",                 /* HELP after */
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        if (check_exposition(broken[i]) == NULL)
            fail_msg("the checker accepted broken input #%zu:\n%s", i, broken[i]);
}

/* ---- the export ---- */

static char *export_of(const cpa_analysis *a)
{
    exp_buf b;
    assert_int_equal(cpx_export_prometheus(exp_buf_open(&b), a), 0);
    return exp_buf_close(&b);
}

static void assert_valid(const char *text)
{
    const char *why = check_exposition(text);
    if (why)
        fail_msg("invalid exposition: %s\n%s", why, text);
    if (promtool_check(text) > 0)
        fail_msg("promtool check metrics refuses it (above):\n%s", text);
}

static void the_export_passes_and_holds_the_jobs_numbers(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_set_findings(&a);
    char *t = export_of(&a);
    assert_valid(t);
    static const char *const lines[] = {
        "collprof_ranks 4\n",
        "collprof_records_total 151\n",
        "collprof_lost_records_total 0\n",
        "collprof_ops_total{op=\"AllReduce\"} 10\n",
        "collprof_ops_total{op=\"AllGather\"} 5\n",
        "collprof_ops_total{op=\"Send\"} 1\n",
        "collprof_bytes_total{op=\"AllReduce\"} 10485760\n",
        "collprof_op_duration_seconds{op=\"AllGather\",nranks=\"4\",bytes=\"1048576\","
        "quantile=\"0.5\"} 5e-06\n",
        "collprof_op_duration_seconds_count{op=\"AllReduce\",nranks=\"4\",bytes=\"1048576\"} 10\n",
        "collprof_busbw_bytes_per_second{op=\"AllReduce\",nranks=\"4\",bytes=\"1048576\"} "
        "1.572864e+11\n",
        "collprof_algbw_bytes_per_second{op=\"Send\",nranks=\"4\",bytes=\"4096\"} "
        "1365333333.3333333\n",
        "collprof_straggler_kind{kind=\"persistent\"} 1\n",
        "collprof_straggler_late_collectives_total{rank=\"3\"} 5\n",
        "collprof_straggler_late_seconds_total{rank=\"3\"} 7.5e-05\n",
        "collprof_straggler_share{rank=\"1\"} 0.06666666666666667\n",
        "collprof_straggler_late_by_cause_total{rank=\"3\",cause=\"gpu_backlog\"} 4\n",
        "collprof_straggler_late_by_cause_total{rank=\"3\",cause=\"host\"} 1\n",
        "collprof_hangs 1\n",
        "collprof_hang_info{comm=\"9f2c0e1d22aa4b01\",seq=\"10\",op=\"AllReduce\","
        "verdict=\"RANK_NOT_JOINED\",missing_ranks=\"2\"} 1\n",
        "collprof_mismatches 1\n",
        "collprof_mismatch_info{comm=\"9f2c0e1d22aa4b01\",seq=\"3\",field=\"count\","
        "culprit_ranks=\"3\"} 1\n",
        "collprof_clock_aligned 1\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(t, lines[i]))
            fail_msg("no line '%s' in:\n%s", lines[i], t);
    free(t);

    /* The same job as the analyzer sees it (no findings) passes as well. */
    cpa_analysis b;
    exp_analyze(dir, &b);
    t = export_of(&b);
    assert_valid(t);
    assert_non_null(strstr(t, "\ncollprof_hangs 0\n"));
    free(t);
    cpa_analysis_free(&b);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* Label values from the trace: control characters and invalid UTF-8 as \\xNN (common/text.h),
 * then \\, \" escaped; the same rank claimed by two files appears once (no duplicate series). */
/* What a holed trace lacks, by kind, for a dashboard; a whole one exports zeros. */
static void holes_are_exported_by_kind(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_with_holes(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *t = export_of(&a);
    assert_valid(t);
    static const char *const lines[] = {
        "collprof_lost_records_total 12\n",
        "collprof_lost_records_by_cause_total{cause=\"ring_full\"} 10\n",
        "collprof_lost_records_by_cause_total{cause=\"at_end\"} 2\n",
        "collprof_trace_unknown_records_total 1\n",
        "collprof_trace_missing_chunks_total 0\n",
        "collprof_trace_truncated_files 0\n",
        "collprof_trace_ranks_with_holes 1\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(t, lines[i]))
            fail_msg("no line '%s' in:\n%s", lines[i], t);
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void refused_calls_are_counted_by_result(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_refused_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *t = export_of(&a);
    assert_valid(t);
    assert_non_null(strstr(t, "collprof_refused_calls_total{result=\"ncclInvalidArgument\"} 1\n"));
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void hostile_labels_are_escaped_and_ranks_unique(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    snprintf(a.model->ranks[2].hostname, sizeof a.model->ranks[2].hostname,
             "a\"b\\c\nd\033\xff");
    a.model->ranks[3].rank = 2; /* two files say rank 2 */
    char *t = export_of(&a);
    assert_valid(t);
    assert_non_null(strstr(t, "collprof_rank_nccl_share{rank=\"2\",host=\"a\\\"b\\\\c\\\\x0ad"
                              "\\\\x1b\\\\xff\"} "));
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void a_failed_stream_is_an_error(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(cpx_export_prometheus(full, &a), -1);
        fclose(full);
    }
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_checker_refuses_each_broken_rule),
        cmocka_unit_test(the_export_passes_and_holds_the_jobs_numbers),
        cmocka_unit_test(holes_are_exported_by_kind),
        cmocka_unit_test(refused_calls_are_counted_by_result),
        cmocka_unit_test(hostile_labels_are_escaped_and_ranks_unique),
        cmocka_unit_test(a_failed_stream_is_an_error),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    check_exposition("# HELP a A.\n# TYPE a gauge\n"); /* frees the checker's series */
    return rc;
}
