/* The CSV export of the synthetic job (exp_job.h): a header, one row per call per rank with
 * the trace's own times, RFC 4180 quoting that a strict reader (this file's, and Python's
 * csv module when python3 is here) reads back to the same fields. */
#include "tests/exporters/exp_job.h"

#include "exporters/exporters.h"

#define NCOLS 25

static const char header[] =
    "rank,host,comm,seq,op,count,dtype,bytes,root_or_peer,stream,enter_us,start_us,end_us,"
    "dur_us,arrival_us,wait_us,late,site,timing,algo,proto,channels,nccl_seq,rank_holes,"
    "after_hole\n";

typedef struct fixture {
    char *dir;
    cpa_analysis a;
    char *csv;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = tt_tmpdir();
    exp_write_job(f->dir);
    exp_analyze(f->dir, &f->a);
    exp_set_findings(&f->a);
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &f->a), 0);
    f->csv = exp_buf_close(&b);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->csv);
    cpa_analysis_free(&f->a);
    tt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* RFC 4180, strictly: a field is bare (no quote in it) or wholly quoted with quotes doubled;
 * a record ends at a newline outside quotes. Returns the fields of the record at *p (each
 * malloc'd) and moves *p past it; fails the test on anything else. */
static size_t read_record(const char **p, char **fields, size_t max)
{
    size_t n = 0;
    const char *s = *p;
    for (;;) {
        char buf[1024];
        size_t len = 0;
        if (*s == '"') {
            s++;
            for (;;) {
                if (*s == '\0')
                    fail_msg("unterminated quoted field");
                if (*s == '"') {
                    if (s[1] == '"') {
                        buf[len++] = '"';
                        s += 2;
                        continue;
                    }
                    s++;
                    break;
                }
                buf[len++] = *s++;
            }
            if (*s != ',' && *s != '\n')
                fail_msg("text after a closing quote: '%.20s'", s);
        } else {
            while (*s != ',' && *s != '\n') {
                if (*s == '\0' || *s == '"' || *s == '\r')
                    fail_msg("bad character in a bare field: '%.20s'", s);
                buf[len++] = *s++;
            }
        }
        assert_true(n < max);
        buf[len] = '\0';
        fields[n++] = strdup(buf);
        if (*s++ == '\n')
            break;
    }
    *p = s;
    return n;
}

static void free_fields(char **fields, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(fields[i]);
}

static void header_then_one_row_per_call(void **state)
{
    fixture *f = *state;
    assert_int_equal(strncmp(f->csv, header, strlen(header)), 0);
    size_t calls = 0;
    for (size_t r = 0; r < f->a.model->nranks; r++)
        calls += f->a.model->ranks[r].ncalls;
    const char *p = f->csv;
    size_t rows = 0;
    char *fields[NCOLS + 4];
    while (*p) {
        size_t n = read_record(&p, fields, NCOLS + 4);
        assert_int_equal(n, NCOLS);
        free_fields(fields, n);
        rows++;
    }
    assert_int_equal(rows, calls + 1);
    assert_int_equal(calls, 62);
}

/* The row of rank r's call (op, seq). */
static void find_row(fixture *f, const char *rank, const char *op, const char *seq,
                     char **fields)
{
    const char *p = f->csv;
    while (*p) {
        size_t n = read_record(&p, fields, NCOLS + 4);
        if (!strcmp(fields[0], rank) && !strcmp(fields[4], op) && !strcmp(fields[3], seq))
            return;
        free_fields(fields, n);
    }
    fail_msg("no row for rank %s %s seq %s", rank, op, seq);
}

static void rows_hold_the_traces_values(void **state)
{
    fixture *f = *state;
    /* The first AllReduce of rank 0: entered at the job's first instant, GPU 0..10 us;
     * every rank arrives together (no wait); the call site, with its comma and quotes. */
    const char *want =
        "0,node-a,9f2c0e1d22aa4b01,0,AllReduce,262144,float32,1048576,,0x7f00abc0,0.000,"
        "0.000,10.000,10.000,0.000,0.000,0,"
        "\"train_step+0x12 (libtrain.so) < main, \"\"quoted\"\" (app)\",gpu,,,,,,\n";
    assert_non_null(strstr(f->csv, want));

    char *x[NCOLS + 4];
    /* AllGather 2 (seq 12): rank 0 waits 15 us for rank 3, the late one. */
    find_row(f, "0", "AllGather", "12", x);
    assert_string_equal(x[14], "4200.000");
    assert_string_equal(x[15], "15.000");
    assert_string_equal(x[16], "0");
    assert_string_equal(x[7], "262144");
    free_fields(x, NCOLS);
    find_row(f, "3", "AllGather", "12", x);
    assert_string_equal(x[11], "4215.000");
    assert_string_equal(x[13], "5.000");
    assert_string_equal(x[15], "0.000");
    assert_string_equal(x[16], "1");
    assert_string_equal(x[17], "");
    assert_string_equal(x[9], "0x7f00abf0");
    /* timed by NCCL's profiler plugin, which said how it ran it (exp_job.h) */
    assert_string_equal(x[19], "RING");
    assert_string_equal(x[20], "LL");
    assert_string_equal(x[21], "4");
    /* NCCL's own number: its 3rd AllGather, whatever AllReduces came before (collprof's 12) */
    assert_string_equal(x[22], "2");
    free_fields(x, NCOLS);
    /* The untimed Send: no GPU times, its host time, its peer; the Recv came 1 us later. */
    find_row(f, "0", "Send", "0", x);
    assert_string_equal(x[8], "1");
    assert_string_equal(x[10], "8000.000");
    assert_string_equal(x[11], "");
    assert_string_equal(x[12], "");
    assert_string_equal(x[13], "3.000");
    assert_string_equal(x[15], "1.000");
    assert_string_equal(x[18], "host");
    free_fields(x, NCOLS);
}

static void pythons_csv_reads_the_same(void **state)
{
    fixture *f = *state;
    static const char check[] =
        "import csv, io, sys\n"
        "rows = list(csv.reader(io.StringIO(sys.stdin.read(), newline=''), strict=True))\n"
        "assert len(rows) == 63, len(rows)\n"
        "assert all(len(r) == 25 for r in rows)\n"
        "h = rows[0]\n"
        "site = [r for r in rows[1:] if r[0] == '0'][0][h.index('site')]\n"
        "assert site == 'train_step+0x12 (libtrain.so) < main, \"quoted\" (app)', site\n"
        "assert sum(1 for r in rows[1:] if r[h.index('late')] == '1') == 5\n";
    if (exp_python(check, f->csv, strlen(f->csv)) == 1)
        fail_msg("python3's csv module disagrees with the export");
}

static void hostile_strings_are_escaped_and_quoted(void **state)
{
    fixture *f = *state;
    cpa_rank *r = &f->a.model->ranks[2];
    snprintf(r->hostname, sizeof r->hostname, "a,b\"c\nd\033e");
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &f->a), 0);
    char *csv = exp_buf_close(&b);
    assert_non_null(strstr(csv, "\n2,\"a,b\"\"c\\x0ad\\x1be\",9f2c0e1d22aa4b01,"));
    free(csv);
}

static void a_failed_stream_is_an_error(void **state)
{
    fixture *f = *state;
    FILE *full = fopen("/dev/full", "w");
    if (!full)
        skip();
    assert_int_equal(cpx_export_csv(full, &f->a), -1);
    fclose(full);
}

/* A count whose size does not fit 64 bits (2^62 float32) has no bytes cell, rather than
 * one wrapped to 0. */
static void a_size_past_64_bits_is_an_empty_cell(void **state)
{
    fixture *f = *state;
    f->a.model->ranks[0].calls[0].count = 1ull << 62;
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &f->a), 0);
    free(f->csv);
    f->csv = exp_buf_close(&b);
    char *x[NCOLS + 4];
    find_row(f, "0", "AllReduce", "0", x);
    assert_string_equal(x[5], "4611686018427387904");
    assert_string_equal(x[7], "");
    free_fields(x, NCOLS);
}

/* The rows of a rank whose trace has holes say what it lacks, and whether each came after
 * its first hole (3 ms in: the AllReduces before, the AllGathers after); other ranks' rows
 * leave both cells empty. */
static void rows_of_a_rank_with_holes_say_so(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_with_holes(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &a), 0);
    fixture f = {.csv = exp_buf_close(&b)};
    char *x[NCOLS + 4];
    find_row(&f, "2", "AllReduce", "0", x);
    assert_string_equal(x[NCOLS - 2], "12 records lost (10 ring_full, 2 at_end), 1 of an "
                                      "unknown type");
    assert_string_equal(x[NCOLS - 1], "0");
    free_fields(x, NCOLS);
    find_row(&f, "2", "AllGather", "10", x);
    assert_string_equal(x[NCOLS - 1], "1");
    free_fields(x, NCOLS);
    find_row(&f, "1", "AllGather", "10", x);
    assert_string_equal(x[NCOLS - 2], "");
    assert_string_equal(x[NCOLS - 1], "");
    free_fields(x, NCOLS);
    free(f.csv);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* A call a watchdog's ncclCommAbort ended is "aborted", never a finished "gpu" call. */
static void a_call_an_abort_ended_says_aborted(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_aborted_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &a), 0);
    fixture f = {.csv = exp_buf_close(&b)};
    char *x[NCOLS + 4];
    find_row(&f, "0", "AllReduce", "1", x);
    assert_string_equal(x[18], "aborted");
    free_fields(x, NCOLS);
    find_row(&f, "0", "AllReduce", "0", x);
    assert_string_equal(x[18], "gpu");
    free_fields(x, NCOLS);
    free(f.csv);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* A call NCCL refused is no call it ran: timing "refused", no seq (not 2^64 - 1). */
static void a_refused_call_says_refused(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_refused_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &a), 0);
    fixture f = {.csv = exp_buf_close(&b)};
    char *x[NCOLS + 4];
    find_row(&f, "1", "Broadcast", "", x);
    assert_string_equal(x[18], "refused");
    assert_string_equal(x[8], "99");
    free_fields(x, NCOLS);
    find_row(&f, "0", "Broadcast", "1", x);
    assert_string_not_equal(x[18], "refused");
    free_fields(x, NCOLS);
    assert_null(strstr(f.csv, "18446744073709551615"));
    free(f.csv);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* A wait is never longer than from the call's arrival to its end: the peer that arrives
 * after an abort ended the call (rank 1 enters seq 1 5 ms after rank 0's abort) does not make
 * rank 0 wait past its end, as the 8,009,681 us wait beside an 826 us duration did. */
static void a_wait_never_outlasts_the_call(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_aborted_job(dir);
    /* rank 1's file again, now with its late seq 1 */
    char path[1200];
    snprintf(path, sizeof path, "%s/rank01%s", dir, CP_TRACE_FILE_SUFFIX);
    assert_int_equal(unlink(path), 0);
    cp_trace_writer *w = exp_open_rank(dir, 1, "node-a");
    exp_put_comm(w, 2, 1);
    exp_put_call(w, 1, CP_OP_ALLREDUCE, 0, 256, -1, EXP_MONO0, 1);
    exp_put_done(w, CP_OP_ALLREDUCE, 0, -1, EXP_MONO0 + 1000, EXP_MONO0 + 11000);
    exp_put_call(w, 1, CP_OP_ALLREDUCE, 1, 256, -1, EXP_ABORT_T + 5000000, 1);
    assert_int_equal(cp_trace_writer_close(w), 0);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_buf b;
    assert_int_equal(cpx_export_csv(exp_buf_open(&b), &a), 0);
    fixture f = {.csv = exp_buf_close(&b)};
    char *x[NCOLS + 4];
    find_row(&f, "0", "AllReduce", "1", x);
    assert_string_equal(x[18], "aborted");
    assert_true(atof(x[15]) <= atof(x[13]) + 1e-9);
    assert_true(atof(x[15]) > 0);
    free_fields(x, NCOLS);
    free(f.csv);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(header_then_one_row_per_call, setup, teardown),
        cmocka_unit_test_setup_teardown(rows_hold_the_traces_values, setup, teardown),
        cmocka_unit_test_setup_teardown(pythons_csv_reads_the_same, setup, teardown),
        cmocka_unit_test_setup_teardown(hostile_strings_are_escaped_and_quoted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_stream_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(a_size_past_64_bits_is_an_empty_cell, setup, teardown),
        cmocka_unit_test(rows_of_a_rank_with_holes_say_so),
        cmocka_unit_test(a_call_an_abort_ended_says_aborted),
        cmocka_unit_test(a_refused_call_says_refused),
        cmocka_unit_test(a_wait_never_outlasts_the_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
