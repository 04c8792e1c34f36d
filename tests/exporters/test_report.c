/* The report, text and JSON, of the synthetic job (exp_job.h) with its findings set by hand:
 * the exact text a user sees, the contract's keys with their values, --top, damaged input,
 * hostile strings and terminal hygiene. */
#include "tests/exporters/exp_job.h"

#include <json-c/json.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "present/present.h"
#include "exporters/exporters.h"
#include "tests/common/test_json_util.h"

typedef struct fixture {
    char *dir;
    cpa_analysis a;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = tt_tmpdir();
    exp_write_job(f->dir);
    exp_analyze(f->dir, &f->a);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cpa_analysis_free(&f->a);
    tt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static char *text_of(const cpa_analysis *a, size_t top, int color, const char *title)
{
    exp_buf b;
    cpx_text_options o = { .top = top, .color = color, .title = title };
    assert_int_equal(cpx_report_text(exp_buf_open(&b), a, &o), 0);
    return exp_buf_close(&b);
}

static const char expected_with_findings[] =
    "collprof report: /data/job-42\n"
    "job      4 ranks on 1 host (node-a), 0.009 s\n"
    "         151 records (none lost), 62 calls in 16 operations\n"
    "         time in NCCL 2.0% mean, 1.4% rank 3 (least), 2.3% rank 0 (most)\n"
    "clock    one host: one clock, nothing to align\n"
    "\n"
    "operations (by total time)\n"
    "op            ranks         size     ops   p50 us   p99 us algbw GB/s busbw GB/s\n"
    "AllReduce         4        1 MiB      10     10.0     10.0     104.86     157.29\n"
    "AllGather         4        1 MiB       5      5.0      5.0     209.72     157.29\n"
    "Send/Recv         4        4 KiB       1      3.0      3.0       1.37       1.37\n"
    "(times: on the GPU by NCCL's profiler plugin for 31% of the operations, by CUDA\n"
    "events for 62%, the host's enqueue only for 6%)\n"
    "\n"
    "nccl (algorithm/protocol and channels NCCL chose, by its plugin)\n"
    "op            ranks         size  algo/proto               channels\n"
    "AllGather         4        1 MiB  RING/LL                         4\n"
    "\n"
    "stragglers   persistent: rank 3 was the late one in 5 of 15 collectives\n"
    "  rank  host               late late total ms    p50 us   share   waited ms\n"
    "     3  node-a                5         0.075      15.0   33.3%       0.000\n"
    "     1  node-a                1         0.010      10.0    6.7%       0.150\n"
    "  why rank 3: GPU backlog: its host entered NCCL in time (+0.000 ms against the\n"
    "  others, median) but its stream started the collective 0.015 ms late, behind\n"
    "  other GPU work (longer compute before it); in 80% of its late collectives (the\n"
    "  others: host 20%)\n"
    "  why rank 1: the host: it entered NCCL 0.010 ms late (median; its GPU start\n"
    "  0.010 ms): data loading, Python, CPU contention\n"
    "(late: arrived > 5 us after the others' median, whatever the durations)\n"
    "\n"
    "hangs (1)\n"
    "RANK_NOT_JOINED  AllReduce seq 10, comm 9f2c0e1d22aa4b01\n"
    "  missing 2; waiting 0,1,3; in flight 61.5 s\n"
    "  rank 2 last called AllReduce seq 9, finished\n"
    "\n"
    "mismatches (1)\n"
    "count differs at seq 3, comm 9f2c0e1d22aa4b01; culprit 3\n"
    "  ranks 0-2: 1024\n"
    "      at train_step+0x12 (libtrain.so) < main, \"quoted\" (app)\n"
    "  rank 3: 2048\n";

/* Ops by total time (AllReduce 100 us, AllGather 25, the pair 3); busbw with nccl-tests'
 * factors: AllReduce 1 MiB / 10 us = 104.86 GB/s x 2(n-1)/n = 157.29; AllGather 1 MiB /
 * 5 us (the duration of rank 3, the last to arrive: the others' 20 us hold their wait for
 * it) = 209.72 x (n-1)/n = 157.29; the untimed pair 4 KiB / 3 us of host time. */
static void text_report_names_everything_found(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    char *t = text_of(&f->a, 0, 0, "/data/job-42");
    assert_string_equal(t, expected_with_findings);
    free(t);
}

static void text_report_of_a_healthy_job_says_none(void **state)
{
    fixture *f = *state;
    /* Whatever the analyzer finds in this job, it must not be a hang or a mismatch. */
    assert_int_equal(f->a.hangs.nrows, 0);
    assert_int_equal(f->a.mismatches.nrows, 0);
    cpa_stragglers_free(&f->a.stragglers);
    f->a.stragglers.judged = 15;
    f->a.stragglers.threshold_us = 200;
    char *t = text_of(&f->a, 0, 0, NULL);
    assert_int_equal(strncmp(t, "job      4 ranks on 1 host (node-a)", 35), 0);
    assert_non_null(strstr(t, "\nstragglers   none: no rank late in 15 collectives judged "
                              "(threshold 200 us)\n"));
    assert_non_null(strstr(t, "\nhangs        none\n"));
    assert_non_null(strstr(t, "\nmismatches   none\n"));
    assert_null(strstr(t, "warnings"));
    free(t);
    /* late now and then, nobody often: said so, not "no rank late" */
    f->a.stragglers.late = 4;
    t = text_of(&f->a, 0, 0, NULL);
    assert_non_null(strstr(t, "\nstragglers   none named: 4 of 15 collectives had a late rank\n"
                              "(late: > 200 us; no rank was late often enough to be named)\n"));
    free(t);
}

/* nccl-tests' columns and number formats, a block per op and communicator size; the
 * operations are those of the op table (exp_job.h: 1 MiB AllReduces of float32, 10 us;
 * AllGathers of 1 MiB in all, 5 us; one untimed 4 KiB pair). */
static const char expected_nccl_tests[] =
    "# collprof report --table nccl-tests: /data/job-42\n"
    "# the job's operations in nccl-tests' columns; time: the mean over #ops operations\n"
    "#\n"
    "# AllReduce, 4 ranks\n"
    "#       size         count      type   redop    root     time   algbw   busbw     #ops\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
    "     1048576        262144     float     sum      -1    10.00  104.86  157.29       10\n"
    "#\n"
    "# AllGather, 4 ranks\n"
    "#       size         count      type   redop    root     time   algbw   busbw     #ops\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
    "     1048576        262144     float    none      -1     5.00  209.72  157.29        5\n"
    "#\n"
    "# Send/Recv, 4 ranks\n"
    "#       size         count      type   redop    root     time   algbw   busbw     #ops\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
    "        4096          1024     float    none      -1     3.00    1.37    1.37        1\n"
    "#\n"
    "# times: NCCL's profiler plugin 31%, CUDA events 62%, host only 6% of 16 operations\n";

static void nccl_tests_table_lays_beside_all_reduce_perf(void **state)
{
    fixture *f = *state;
    exp_buf b;
    assert_int_equal(cpx_report_nccl_tests(exp_buf_open(&b), &f->a, "/data/job-42"), 0);
    char *t = exp_buf_close(&b);
    assert_string_equal(t, expected_nccl_tests);
    free(t);
    /* a trace with losses says so under the rows */
    f->a.model->lost_records = 7;
    assert_int_equal(cpx_report_nccl_tests(exp_buf_open(&b), &f->a, NULL), 0);
    t = exp_buf_close(&b);
    assert_non_null(strstr(t, "\n# WARNING: 7 records lost while tracing: operations may be "
                              "missing from these rows\n"));
    free(t);
}

/* A size is printed as it is: a 102,227,772 B Broadcast was "64 MiB" when rows were buckets,
 * and "97.5 MiB" would read alike for messages a few bytes apart. */
static void sizes_are_exact_never_rounded(void **state)
{
    (void)state;
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {{0, "0 B"},
                 {4096, "4 KiB"},
                 {25u << 20, "25 MiB"},
                 {43u << 19, "22016 KiB"},
                 {102227772, "102227772 B"},
                 {1ull << 30, "1 GiB"},
                 {(1ull << 30) + 512, "1073742336 B"},
                 {UINT64_MAX, "18446744073709551615 B"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[24];
        cpr_fmt_size(buf, sizeof buf, cases[i].bytes);
        assert_string_equal(buf, cases[i].text);
    }
}

/* --buckets: the same operations by power-of-two bucket, said in the title */
static void text_buckets_round_sizes_down_when_asked(void **state)
{
    fixture *f = *state;
    exp_buf b;
    cpx_text_options o = { .rows = CPA_ROWS_BUCKETS };
    assert_int_equal(cpx_report_text(exp_buf_open(&b), &f->a, &o), 0);
    char *t = exp_buf_close(&b);
    assert_non_null(strstr(t, "\noperations (by total time; sizes in power-of-two buckets)\n"));
    assert_non_null(strstr(t, "\nAllReduce         4      >=1 MiB      10     10.0"));
    assert_non_null(strstr(t, "\nSend/Recv         4      >=4 KiB       1"));
    free(t);
}

static void text_top_cuts_each_table(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    char *t = text_of(&f->a, 1, 0, NULL);
    assert_non_null(strstr(t, "\nAllReduce         4        1 MiB      10"));
    assert_null(strstr(t, "\nAllGather "));
    assert_non_null(strstr(t, "\n... 2 more rows (--top N, or --json)\n"));
    assert_non_null(strstr(t, "\n     3  node-a "));
    assert_null(strstr(t, "\n     1  node-a "));
    assert_non_null(strstr(t, "\n... 1 more ranks (--top N, or --json)\n"));
    free(t);
}

static size_t columns(const char *line, size_t len)
{
    size_t cols = 0;
    for (size_t i = 0; i < len; i++)
        cols += ((unsigned char)line[i] & 0xc0) != 0x80;
    return cols;
}

/* Every line within 80 columns, valid UTF-8 with no control character but the newline (no
 * escape from a hostile hostname); with colour, escapes only as whole-line wrappers. */
static void assert_terminal_safe(const char *t, int color)
{
    for (const char *p = t; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        size_t len = (size_t)(nl - p);
        const char *body = p;
        size_t blen = len;
        if (color && len >= 4 && p[0] == '\033') {
            const char *m = memchr(p, 'm', len);
            assert_non_null(m);
            assert_true(len >= 4 && memcmp(p + len - 4, "\033[0m", 4) == 0);
            body = m + 1;
            blen = (size_t)(p + len - 4 - body);
        }
        if (columns(body, blen) > 80)
            fail_msg("line over 80 columns: '%.*s'", (int)len, p);
        for (size_t i = 0; i < blen; i++)
            if ((unsigned char)body[i] < 0x20 || body[i] == 0x7f)
                fail_msg("control character 0x%02x in '%.*s'", (unsigned char)body[i],
                         (int)len, p);
        p = nl + 1;
    }
}

static void text_is_terminal_safe_with_hostile_strings(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    /* What a hostile or corrupt file could hold. */
    cpa_rank *r1 = &f->a.model->ranks[1];
    snprintf(r1->hostname, sizeof r1->hostname, "evil\033]0;owned\007\033[2J-host-name-\xff");
    free(f->a.hosts[0]);
    f->a.hosts[0] = strdup(r1->hostname);
    cpa_hang *h = &f->a.hangs.rows[0];
    memset(h->last, 'x', sizeof h->last - 1);
    h->last[sizeof h->last - 1] = '\0';
    memcpy(h->last + 10, "\033[31m", 5);
    char title[300];
    memset(title, 'd', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    for (int color = 0; color <= 1; color++) {
        char *t = text_of(&f->a, 0, color, title);
        assert_terminal_safe(t, color);
        if (!color)
            assert_null(strchr(t, '\033'));
        else
            assert_non_null(strstr(t, "\033[1;31mhangs (1)\033[0m\n"));
        assert_non_null(strstr(t, "(evil\\x1b]0;owned\\x07\\x1b), "));
        assert_non_null(strstr(t, "\n     1  evil\\x1b]0;own        1 "));
        free(t);
    }
}

static void want_color_only_on_a_terminal_without_no_color(void **state)
{
    (void)state;
    int fd = open("/dev/null", O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(cpx_want_color(fd), 0); /* not a terminal */
    close(fd);
    setenv("NO_COLOR", "1", 1);
    assert_int_equal(cpx_want_color(STDOUT_FILENO), 0);
    unsetenv("NO_COLOR");
}

static json_object *json_of(const cpa_analysis *a, size_t top)
{
    exp_buf b;
    assert_int_equal(cpx_report_json(exp_buf_open(&b), a, top), 0);
    char *s = exp_buf_close(&b);
    json_object *o = tj_parse_strict(s, "report JSON");
    free(s);
    return o;
}

static json_object *get(json_object *o, const char *path)
{
    /* "job.ranks", "ops.0.op": objects by key, arrays by index. */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
        json_object *next = NULL;
        if (json_object_is_type(o, json_type_array))
            next = json_object_array_get_idx(o, (size_t)atoi(k));
        else if (!json_object_object_get_ex(o, k, &next))
            next = NULL;
        if (!next)
            fail_msg("no '%s' in the report (at '%s')", path, k);
        o = next;
    }
    return o;
}

static void assert_num(json_object *root, const char *path, double want)
{
    double got = json_object_get_double(get(root, path));
    if (fabs(got - want) > 1e-9 * (fabs(want) + 1))
        fail_msg("%s = %.9g, want %.9g", path, got, want);
}

static void assert_str(json_object *root, const char *path, const char *want)
{
    assert_string_equal(json_object_get_string(get(root, path)), want);
}

static void assert_len(json_object *root, const char *path, size_t want)
{
    assert_int_equal(json_object_array_length(get(root, path)), want);
}

static void json_report_has_the_contract_keys_and_values(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    json_object *j = json_of(&f->a, 0);
    assert_num(j, "version", 1);
    assert_num(j, "job.ranks", 4);
    assert_len(j, "job.hosts", 1);
    assert_str(j, "job.hosts.0", "node-a");
    assert_num(j, "job.records", 151);
    assert_num(j, "job.lost_records", 0);
    assert_num(j, "job.duration_s", 0.009);

    assert_len(j, "ops", 3);
    assert_str(j, "ops.0.op", "AllReduce");
    assert_num(j, "ops.0.bytes", 1048576);
    assert_num(j, "ops.0.nranks", 4);
    assert_num(j, "ops.0.ops", 10);
    assert_num(j, "ops.0.calls", 40);
    assert_str(j, "ops.0.dtype", "float32");
    assert_str(j, "ops.0.redop", "sum");
    assert_num(j, "ops.0.count", 262144);
    assert_num(j, "ops.0.time_us_p50", 10.0);
    assert_num(j, "ops.0.time_us_p99", 10.0);
    assert_num(j, "ops.0.algbw_gbps", 104.858);
    assert_num(j, "ops.0.busbw_gbps", 157.286);
    assert_str(j, "ops.1.op", "AllGather");
    assert_num(j, "ops.1.time_us_p50", 5.0);
    assert_num(j, "ops.1.algbw_gbps", 209.715);
    assert_num(j, "ops.1.busbw_gbps", 157.286);
    assert_str(j, "ops.2.op", "Send");
    assert_num(j, "ops.2.bytes", 4096);
    assert_true(json_object_get_boolean(get(j, "ops.2.send_recv_pairs")));
    /* where the times come from, and what NCCL's plugin said (exp_job.h) */
    assert_num(j, "ops.0.timing.events", 10);
    assert_num(j, "ops.0.timing.plugin", 0);
    assert_num(j, "ops.0.nccl.channels_max", 0);
    assert_num(j, "ops.1.timing.plugin", 5);
    assert_num(j, "ops.1.timing.events", 0);
    assert_num(j, "ops.1.nccl.algo_proto.RING/LL", 5);
    assert_false(json_object_object_get_ex(get(j, "ops.0"), "algo", NULL)); /* NCCL said none */
    assert_str(j, "ops.1.algo", "RING");
    assert_str(j, "ops.1.proto", "LL");
    assert_num(j, "ops.1.nccl.channels_max", 4);
    assert_num(j, "ops.2.timing.host", 1);

    assert_len(j, "stragglers", 2);
    assert_num(j, "stragglers.0.rank", 3);
    assert_num(j, "stragglers.0.late_count", 5);
    assert_num(j, "stragglers.0.late_us_total", 75.0);
    assert_num(j, "stragglers.0.late_us_p50", 15.0);
    assert_num(j, "stragglers.0.share", 0.3333);
    /* why (issue 19) */
    assert_str(j, "stragglers.0.cause", "gpu_backlog");
    assert_num(j, "stragglers.0.late_by_cause.gpu_backlog", 4);
    assert_num(j, "stragglers.0.late_by_cause.host", 1);
    assert_num(j, "stragglers.0.late_by_cause.in_collective", 0);
    assert_num(j, "stragglers.0.host_late_us_p50", 0.2);
    assert_num(j, "stragglers.0.gpu_late_us_p50", 15.0);
    assert_true(strstr(json_object_get_string(get(j, "stragglers.0.why")), "GPU backlog: ") ==
                json_object_get_string(get(j, "stragglers.0.why")));
    assert_str(j, "stragglers.1.cause", "host");
    assert_str(j, "straggler_kind", "persistent");
    assert_num(j, "straggler_stats.judged", 15);

    assert_len(j, "hangs", 1);
    assert_str(j, "hangs.0.comm", "9f2c0e1d22aa4b01");
    assert_num(j, "hangs.0.seq", 10);
    assert_str(j, "hangs.0.op", "AllReduce");
    assert_str(j, "hangs.0.verdict", "RANK_NOT_JOINED");
    assert_len(j, "hangs.0.missing_ranks", 1);
    assert_num(j, "hangs.0.missing_ranks.0", 2);
    assert_len(j, "hangs.0.waiting_ranks", 3);
    assert_num(j, "hangs.0.waiting_ranks.2", 3);
    assert_str(j, "hangs.0.last", "rank 2 last called AllReduce seq 9, finished");

    assert_len(j, "mismatches", 1);
    assert_str(j, "mismatches.0.comm", "9f2c0e1d22aa4b01");
    assert_num(j, "mismatches.0.seq", 3);
    assert_str(j, "mismatches.0.field", "count");
    assert_num(j, "mismatches.0.values.0", 1024);
    assert_num(j, "mismatches.0.values.3", 2048);
    assert_len(j, "mismatches.0.culprit_ranks", 1);
    assert_num(j, "mismatches.0.culprit_ranks.0", 3);
    assert_str(j, "mismatches.0.sites.0", EXP_SITE);
    assert_num(j, "mismatches_total", 1);

    assert_true(json_object_get_boolean(get(j, "clock.aligned")));
    assert_int_equal(json_object_object_length(get(j, "clock.offsets_us")), 4);
    assert_num(j, "clock.offsets_us.0", 0.0);
    assert_num(j, "clock.offsets_us.3", 0.0);
    assert_str(j, "clock.hosts.0.host", "node-a");

    assert_len(j, "per_rank", 4);
    assert_num(j, "per_rank.2.rank", 2);
    assert_num(j, "per_rank.0.calls", 16);
    assert_num(j, "per_rank.3.nccl_time_s", 0.000125); /* AllReduce 10 x 10 + AllGather 5 x 5 us */
    assert_len(j, "warnings", 0);
    json_object_put(j);
}

static void json_top_cuts_arrays_and_zero_keeps_all(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    json_object *j = json_of(&f->a, 1);
    assert_len(j, "ops", 1);
    assert_len(j, "stragglers", 1);
    assert_num(j, "straggler_stats.ranks", 2);
    assert_len(j, "per_rank", 4); /* not a worst-first table: never cut */
    json_object_put(j);
}

/* A rank killed mid-write leaves its file cut: the report is of what was readable, and
 * says so. */
static void a_cut_file_is_a_warning_in_both_reports(void **state)
{
    fixture *f = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/rank02%s", f->dir, CP_TRACE_FILE_SUFFIX);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 24), 0);
    cpa_analysis a;
    exp_analyze(f->dir, &a);
    char *t = text_of(&a, 0, 0, NULL);
    assert_non_null(strstr(t, "\nwarnings (1)\n  "));
    assert_non_null(strstr(t, "rank02.cptrace"));
    assert_terminal_safe(t, 0);
    free(t);
    json_object *j = json_of(&a, 0);
    assert_len(j, "warnings", 1);
    assert_non_null(strstr(json_object_get_string(get(j, "warnings.0")), "rank02.cptrace"));
    json_object_put(j);
    cpa_analysis_free(&a);
}

static void a_failed_stream_is_an_error(void **state)
{
    fixture *f = *state;
    FILE *full = fopen("/dev/full", "w");
    if (!full)
        skip();
    cpx_text_options o = { 0 };
    assert_int_equal(cpx_report_text(full, &f->a, &o), -1);
    clearerr(full);
    assert_int_equal(cpx_report_json(full, &f->a, 0), -1);
    fclose(full);
}

/* A trace with holes (rank 2: 12 records lost, one of an unknown type) says so in both
 * reports, with the cause, the rank and when, and the tables of figures carry the caveat; a
 * whole trace says nothing of holes (the expected texts above). */
static void a_trace_with_holes_says_so_in_both_reports(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_with_holes(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_set_findings(&a);
    char *t = text_of(&a, 0, 0, NULL);
    assert_non_null(strstr(t, "\n         holes: 12 records lost (10 ring_full, 2 at_end), 1 of an "
                              "unknown type;\n         1 of 4 ranks, the first at +0.003 s (rank 2)\n"));
    assert_non_null(strstr(t, "\n(the trace has holes, see job: these figures may leave operations "
                              "out)\n"));
    free(t);
    json_object *j = json_of(&a, 0);
    assert_true(json_object_get_boolean(get(j, "job.integrity.holes")));
    assert_num(j, "job.integrity.lost_by_cause.ring_full", 10);
    assert_num(j, "job.integrity.lost_by_cause.at_end", 2);
    assert_num(j, "job.integrity.unknown_records", 1);
    assert_num(j, "job.integrity.missing_chunks", 0);
    assert_num(j, "job.integrity.ranks_with_holes", 1);
    assert_num(j, "job.integrity.first_hole.rank", 2);
    assert_num(j, "job.integrity.first_hole.t_s", 0.003);
    assert_num(j, "job.lost_records", 12);
    assert_num(j, "per_rank.2.integrity.lost_by_cause.ring_full", 10);
    assert_num(j, "per_rank.2.first_hole_s", 0.003);
    assert_num(j, "per_rank.1.integrity.unknown_records", 0);
    json_object_put(j);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* An operation a watchdog's abort ended has no duration: left out of the op table, and said
 * (its 826 us DONE came with the abort, 3 s after the call). */
static void an_aborted_operation_is_no_duration(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_aborted_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    assert_int_equal(a.stats.aborted, 1);
    assert_int_equal(a.stats.nrows, 1);
    assert_int_equal(a.stats.rows[0].ops, 1); /* seq 0 only */
    char *t = text_of(&a, 0, 0, NULL);
    assert_non_null(strstr(t, "\n1 operation ended by ncclCommAbort (a watchdog's) left out\n"));
    free(t);
    json_object *j = json_of(&a, 0);
    assert_num(j, "job.aborted_operations", 1);
    json_object_put(j);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* A call NCCL refused is said, with its result and its arguments, in the job's lines and the
 * hang it caused, and counted in the JSON. */
static void a_refused_call_is_said(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_refused_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    assert_int_equal(a.refused.total, 1);
    assert_int_equal(a.refused.by_result[4], 1);
    char *t = text_of(&a, 0, 0, NULL);
    if (!strstr(t, "refused: 1 call NCCL returned an error for, on 1 rank") ||
        !strstr(t, "ncclInvalidArgument (first: rank 1, Broadcast root 99)"))
        fail_msg("no refused line in:\n%s", t);
    free(t);
    json_object *j = json_of(&a, 0);
    assert_num(j, "job.refused_calls", 1);
    assert_num(j, "job.refused_by_result.ncclInvalidArgument.calls", 1);
    assert_num(j, "job.refused_by_result.ncclInvalidArgument.first_rank", 1);
    json_object_put(j);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* What a damaged or forged trace makes the analyzer leave out is said where the figures rest
 * on it: clock samples rejected (under the clock), operations of no possible size (under the
 * operations), and a count past INT64_MAX shown as the count it is, not a negative number. */
static void values_no_trace_can_hold_are_said(void **state)
{
    fixture *f = *state;
    exp_set_findings(&f->a);
    f->a.clock.rejected_samples = 3;
    f->a.stats.oversized = 2;
    f->a.mismatches.rows[0].values[3].value = (int64_t)(1ull << 63);
    char *t = text_of(&f->a, 0, 0, NULL);
    assert_non_null(strstr(t, "clock    one host: one clock, nothing to align\n"
                              "         3 clock samples rejected: a time past 2^62 ns\n"));
    assert_non_null(strstr(t, "Send/Recv         4        4 KiB       1      3.0      3.0       "
                              "1.37       1.37\n2 operations of no possible size (S past 2^64 "
                              "bytes) left out\n"));
    assert_non_null(strstr(t, "  rank 3: 9223372036854775808\n"));
    free(t);
    json_object *j = json_of(&f->a, 0);
    assert_int_equal(json_object_get_int64(get(j, "clock.rejected_samples")), 3);
    assert_int_equal(json_object_get_int64(get(j, "job.oversized_operations")), 2);
    assert_true(json_object_get_uint64(get(j, "mismatches.0.values.3")) == 1ull << 63);
    json_object_put(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(text_report_names_everything_found, setup, teardown),
        cmocka_unit_test_setup_teardown(text_report_of_a_healthy_job_says_none, setup, teardown),
        cmocka_unit_test_setup_teardown(text_top_cuts_each_table, setup, teardown),
        cmocka_unit_test_setup_teardown(nccl_tests_table_lays_beside_all_reduce_perf, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(text_buckets_round_sizes_down_when_asked, setup,
                                        teardown),
        cmocka_unit_test(sizes_are_exact_never_rounded),
        cmocka_unit_test(a_trace_with_holes_says_so_in_both_reports),
        cmocka_unit_test(an_aborted_operation_is_no_duration),
        cmocka_unit_test(a_refused_call_is_said),
        cmocka_unit_test_setup_teardown(text_is_terminal_safe_with_hostile_strings, setup,
                                        teardown),
        cmocka_unit_test(want_color_only_on_a_terminal_without_no_color),
        cmocka_unit_test_setup_teardown(json_report_has_the_contract_keys_and_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(json_top_cuts_arrays_and_zero_keeps_all, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_cut_file_is_a_warning_in_both_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_stream_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(values_no_trace_can_hold_are_said, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
