/* `collprof export` as a user runs it: each format to stdout and to -o FILE (the same bytes),
 * FILE written whole or not at all (a temporary file renamed at the end: nothing left
 * behind, the old FILE kept when writing fails), a FIFO, a symbolic link or a device
 * written through and left what it was, and bad input. */
#include "tests/exporters/exp_job.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>

#include "tests/cli/test_cli_util.h"
#include "tests/exporters/perfetto_check.h"

static void assert_one_line_error(struct cli_result *r, const char *needle)
{
    assert_int_equal(r->status, 2);
    assert_string_equal(r->out, "");
    assert_int_equal(cli_count_lines(r->err), 1);
    if (!cli_starts_with(r->err, "collprof: export: ") || !strstr(r->err, needle))
        fail_msg("stderr '%s' does not say '%s'", r->err, needle);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static char *slurp(const char *path)
{
    size_t len;
    unsigned char *b = tt_read_file(path, &len);
    assert_non_null(b);
    char *s = realloc(b, len + 1);
    s[len] = '\0';
    return s;
}

static void each_format_to_stdout_and_to_a_file(void **state)
{
    (void)state;
    char *dir = tt_tmpdir(), *outdir = tt_tmpdir();
    exp_write_job(dir);
    static const char *const formats[] = { "--perfetto", "--csv", "--prometheus" };
    for (int i = 0; i < 3; i++) {
        struct cli_result r, f;
        cli_runl(&r, "export", formats[i], dir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        assert_true(strlen(r.out) > 100);

        char path[1024];
        snprintf(path, sizeof path, "%s/out%d", outdir, i);
        cli_runl(&f, "export", formats[i], "-o", path, dir, NULL);
        assert_int_equal(f.status, 0);
        assert_string_equal(f.out, "");
        assert_string_equal(f.err, "");
        char *written = slurp(path);
        assert_string_equal(written, r.out);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0666 & ~(mode_t)022); /* ctest's umask */
        free(written);
        cli_result_free(&r);
        cli_result_free(&f);
    }
    /* Only the three files: no temporary one left beside them. */
    assert_int_equal(count_entries(outdir), 3);

    struct cli_result r;
    cli_runl(&r, "export", "--csv", dir, NULL);
    assert_int_equal(cli_count_lines(r.out), 63); /* header + 62 calls */
    assert_true(cli_starts_with(r.out, "rank,host,comm,seq,op,"));
    cli_result_free(&r);
    tt_rmtree(dir);
    tt_rmtree(outdir);
    free(dir);
    free(outdir);
}

/* The X slices of an export, checked as a piece must be: on kept pids, overlapping the
 * window [from_us, to_us], no partial overlap, and each operation's flow arrows with one
 * start and one end at most among the piece's slices. Returns the X slices (waits too). */
static size_t check_piece(const char *json, const int *pids, size_t npids, double from_us,
                          double to_us, json_object **piece_out)
{
    json_object *doc = pj_parse_strict(json), *events = NULL;
    assert_true(json_object_object_get_ex(doc, "traceEvents", &events));
    assert_no_partial_overlap(events);
    size_t n = json_object_array_length(events), x = 0;
    int starts[64] = {0}, ends[64] = {0};
    for (size_t i = 0; i < n; i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        int pid = json_object_get_int(pj_field(ev, "pid"));
        int kept = 0;
        for (size_t k = 0; k < npids; k++)
            kept |= pids[k] == pid;
        if (!kept)
            fail_msg("an event of pid %d, not in the piece", pid);
        if (strcmp(pj_str(ev, "ph"), "X") != 0)
            continue;
        x++;
        double ts = json_object_get_double(pj_field(ev, "ts"));
        double te = ts + json_object_get_double(pj_field(ev, "dur"));
        if (te < from_us - 0.001 || ts > to_us + 0.001)
            fail_msg("slice %.3f..%.3f us outside the window %.3f..%.3f", ts, te, from_us,
                     to_us);
        json_object *bind = pj_field(ev, "bind_id");
        if (!bind)
            continue;
        int64_t id = json_object_get_int64(bind);
        assert_true(id > 0 && id < 64);
        starts[id] += !pj_field(ev, "flow_in");
        ends[id] += !pj_field(ev, "flow_out");
    }
    for (int id = 0; id < 64; id++)
        if (starts[id] > 1 || ends[id] > 1)
            fail_msg("operation %d: %d arrow starts and %d ends in the piece", id - 1, starts[id],
                     ends[id]);
    json_object *other = pj_field(doc, "otherData"), *piece = pj_field(other, "piece");
    *piece_out = piece ? json_object_get(piece) : NULL;
    json_object_put(doc);
    return x;
}

/* A piece of a job: by ranks, by window, by a cap on events (the job's end), each saying
 * what it left out in otherData.piece and on stderr; bad values are one-line errors. */
/* A job this small is JSON unless the protobuf is asked for; the protobuf is a Trace of
 * packets (field 1, length-delimited: 0x0a first) with the same piece rules. */
static void the_perfetto_format_is_json_or_protobuf(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    cli_runl(&r, "export", "--perfetto", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.out[0], '{');
    cli_result_free(&r);
    cli_runl(&r, "export", "--perfetto", "--format", "json", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.out[0], '{');
    cli_result_free(&r);
    cli_runl(&r, "export", "--perfetto", "--format", "proto", "--ranks", "1-2", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal((unsigned char)r.out[0], 0x0a);
    assert_non_null(strstr(r.err, "calls left out (--window, --ranks)"));
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* A job of more events than the JSON's cap is a protobuf by default, whole (its own cap is
 * ten times larger), and says nothing left out; --format json keeps the JSON's cap. One rank
 * of 1,000,050 untimed AllReduces, each an operation of its own: one event each. */
static void a_job_past_the_json_cap_is_a_protobuf(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    cp_trace_writer *w = exp_open_rank(dir, 0, "node-a");
    exp_put_comm(w, 1, 0);
    for (uint64_t i = 0; i < 1000050; i++)
        exp_put_call(w, 0, CP_OP_ALLREDUCE, i, 256, -1, EXP_MONO0 + i * 10000, 0);
    assert_int_equal(cp_trace_writer_close(w), 0);
    char out[4200];
    snprintf(out, sizeof out, "%s/job.trace", dir);
    struct cli_result r;
    cli_runl(&r, "export", "--perfetto", "-o", out, dir, NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.err, "left out"));
    assert_non_null(strstr(r.err, "collprof export: 1000050 events, past what Perfetto UI's "
                                  "JSON importer takes: wrote Perfetto's protobuf"));
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fgetc(f), 0x0a); /* a Trace's first packet */
    fclose(f);
    cli_result_free(&r);
    cli_runl(&r, "export", "--perfetto", "--format", "json", "-o", out, dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "the job is over the cap of 1000000 events"));
    f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fgetc(f), '{');
    fclose(f);
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

static void a_piece_of_the_job(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    struct cli_result r;
    json_object *piece;

    cli_runl(&r, "export", "--perfetto", "--ranks", "1-2", dir, NULL);
    assert_int_equal(r.status, 0);
    static const int two[] = {1, 2};
    assert_true(check_piece(r.out, two, 2, -1e18, 1e18, &piece) > 0);
    assert_int_equal(json_object_get_int(pj_field(piece, "ranks_kept")), 2);
    int left = json_object_get_int(pj_field(piece, "calls_left_out"));
    assert_true(left > 0 && left < 62);
    char want[96];
    snprintf(want, sizeof want, "collprof export: %d of 62 calls left out (--window, --ranks)\n",
             left);
    assert_string_equal(r.err, want);
    json_object_put(piece);
    cli_result_free(&r);

    static const int all[] = {0, 1, 2, 3};
    cli_runl(&r, "export", "--perfetto", "--window", "0.004:0.006", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_true(check_piece(r.out, all, 4, 4000, 6000, &piece) > 0);
    assert_true(fabs(json_object_get_double(pj_field(piece, "from_s")) - 0.004) < 1e-9);
    assert_true(fabs(json_object_get_double(pj_field(piece, "to_s")) - 0.006) < 1e-9);
    assert_false(json_object_get_boolean(pj_field(piece, "capped")));
    json_object_put(piece);
    cli_result_free(&r);

    /* a cap: the job's end, about that many events */
    cli_runl(&r, "export", "--perfetto", "--max-events", "20", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "the job is over the cap of 20 events: kept its end, from +"));
    json_object *doc = pj_parse_strict(r.out);
    piece = json_object_get(pj_field(pj_field(doc, "otherData"), "piece"));
    json_object_put(doc);
    double from = json_object_get_double(pj_field(piece, "from_s"));
    assert_true(json_object_get_boolean(pj_field(piece, "capped")));
    assert_true(from > 0);
    json_object_put(piece);
    size_t x = check_piece(r.out, all, 4, from * 1e6, 1e18, &piece);
    assert_true(x > 0 && x <= 20);
    json_object_put(piece);
    cli_result_free(&r);

    /* the default cap is far above this job: the whole of it, no piece said */
    cli_runl(&r, "export", "--perfetto", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "\"piece\""));
    assert_string_equal(r.err, "");
    cli_result_free(&r);

    static const char *const bad[][3] = {
        {"--window", "3", "is not T0:T1"},
        {"--window", "2:1", "T0 must come before T1"},
        {"--window", "x:", "is not T0:T1"},
        {"--ranks", "9", "no rank 9 in the trace"},
        {"--ranks", "1-x", "is not a list of ranks"},
        {"--max-events", "0", "bad value '0' for --max-events"},
        {"--format", "xml", "--format 'xml' is neither json nor proto"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_runl(&r, "export", "--perfetto", bad[i][0], bad[i][1], dir, NULL);
        assert_one_line_error(&r, bad[i][2]);
        cli_result_free(&r);
    }
    cli_runl(&r, "export", "--csv", "--ranks", "1", dir, NULL);
    assert_one_line_error(&r, "cut a --perfetto export only");
    cli_result_free(&r);
    cli_runl(&r, "export", "--csv", "--format", "proto", dir, NULL);
    assert_one_line_error(&r, "--format chooses a --perfetto export's format only");
    cli_result_free(&r);
    cli_runl(&r, "export", "--perfetto", "--all", "--max-events", "5", dir, NULL);
    assert_one_line_error(&r, "contradict");
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

/* Runs `collprof export` with the file size limited to `limit` bytes (EFBIG on writes past
 * it, as on a full disk; SIGXFSZ ignored so the write fails instead of killing us). */
static void run_limited(struct cli_result *r, rlim_t limit, const char *const *args)
{
    const char *argv[16] = { "collprof" };
    size_t n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = { limit, limit };
        signal(SIGXFSZ, SIG_IGN);
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(126);
        execv(cli_binary(), (char *const *)argv);
        _exit(127);
    }
    r->status = cli_wait(pid);
    r->out = cli_slurp(out);
    r->err = cli_slurp(err);
    fclose(out);
    fclose(err);
}

static void a_failed_write_leaves_the_old_file_and_no_temporary(void **state)
{
    (void)state;
    char *dir = tt_tmpdir(), *outdir = tt_tmpdir();
    exp_write_job(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/trace.json", outdir);
    tt_write_file(path, "old", 3);
    struct cli_result r;
    const char *args[] = { "export", "--perfetto", "-o", path, dir, NULL };
    run_limited(&r, 4096, args);
    assert_one_line_error(&r, "cannot write '");
    assert_non_null(strstr(r.err, "trace.json"));
    char *kept = slurp(path);
    assert_string_equal(kept, "old");
    free(kept);
    assert_int_equal(count_entries(outdir), 1);
    cli_result_free(&r);

    /* The same to stdout: the dispatcher's check of stdout says so (stdout is a file). */
    const char *to_stdout[] = { "export", "--perfetto", dir, NULL };
    run_limited(&r, 4096, to_stdout);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "cannot write to standard output"));
    cli_result_free(&r);
    tt_rmtree(dir);
    tt_rmtree(outdir);
    free(dir);
    free(outdir);
}

static void bad_destinations_and_input_are_one_line_and_exit_2(void **state)
{
    (void)state;
    char *dir = tt_tmpdir(), *outdir = tt_tmpdir();
    struct cli_result r;

    cli_runl(&r, "export", "--csv", dir, NULL);
    assert_one_line_error(&r, "no trace file");
    cli_result_free(&r);

    exp_write_job(dir);
    cli_runl(&r, "export", "--csv", "-o", "/nonexistent/dir/out.csv", dir, NULL);
    assert_one_line_error(&r, "cannot write '/nonexistent/dir/out.csv'");
    cli_result_free(&r);

    /* FILE is a directory: it cannot be opened, the directory and its neighbours stay. */
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/sub", outdir);
    assert_int_equal(mkdir(sub, 0755), 0);
    cli_runl(&r, "export", "--prometheus", "-o", sub, dir, NULL);
    assert_one_line_error(&r, "cannot write '");
    assert_int_equal(count_entries(outdir), 1);
    cli_result_free(&r);

    cli_runl(&r, "export", "--csv", "/nonexistent/trace", NULL);
    assert_one_line_error(&r, "cannot read '/nonexistent/trace'");
    cli_result_free(&r);

    /* -o - is stdout. */
    cli_runl(&r, "export", "--csv", "-o", "-", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 63);
    cli_result_free(&r);
    tt_rmtree(dir);
    tt_rmtree(outdir);
    free(dir);
    free(outdir);
}

/* export -o path: exit 0, nothing on stderr; sb: what is at path afterwards (lstat). */
static void export_onto(const char *format, const char *path, const char *dir, struct stat *sb)
{
    struct cli_result r;
    cli_runl(&r, "export", format, "-o", path, dir, NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    cli_result_free(&r);
    assert_int_equal(lstat(path, sb), 0);
}

/* export -o FIFO with a reader at the other end (a child process copying what arrives into
 * copy); the FIFO must still be one afterwards. Returns what the reader got. The test holds
 * a write end of its own while collprof runs, so the reader never waits for a writer that
 * does not come (when collprof replaced the FIFO instead of opening it, the reader sees the
 * end with nothing). */
static char *export_through_fifo(const char *format, const char *fifo, const char *copy,
                                 const char *dir)
{
    int hold = open(fifo, O_RDWR);
    assert_true(hold >= 0);
    fflush(NULL);
    pid_t reader = fork();
    assert_true(reader >= 0);
    if (reader == 0) {
        int in = open(fifo, O_RDONLY);
        close(hold);
        int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[65536];
        ssize_t n;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n)
                _exit(1);
        _exit(in >= 0 && out >= 0 && close(out) == 0 ? 0 : 1);
    }
    struct stat sb;
    export_onto(format, fifo, dir, &sb);
    close(hold);
    assert_int_equal(cli_wait(reader), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    return slurp(copy);
}

/* -o onto what is not a regular file writes through it and leaves it what it was: a FIFO
 * (its reader gets the export), a symbolic link (its target gets it, dangling or not), a
 * character device (a copy of /dev/null made here, as root). Before, each was replaced by
 * a regular file, and `-o /dev/null` as root broke the machine's /dev/null. */
static void non_regular_targets_are_written_through(void **state)
{
    (void)state;
    char *dir = tt_tmpdir(), *outdir = tt_tmpdir();
    exp_write_job(dir);
    char fifo[1024], copy[1024], target[1024], link[1024], dangling[1024], fresh[1024];
    char dev[1024];
    snprintf(fifo, sizeof fifo, "%s/fifo", outdir);
    snprintf(copy, sizeof copy, "%s/fifo.copy", outdir);
    snprintf(target, sizeof target, "%s/target", outdir);
    snprintf(link, sizeof link, "%s/link", outdir);
    snprintf(dangling, sizeof dangling, "%s/dangling", outdir);
    snprintf(fresh, sizeof fresh, "%s/fresh", outdir);
    snprintf(dev, sizeof dev, "%s/null", outdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(symlink("target", link), 0);
    assert_int_equal(symlink("fresh", dangling), 0);
    int have_dev = 0;
    if (geteuid() != 0) {
        fprintf(stderr, "not root: -o onto a character device not checked (mknod needs root)\n");
    } else if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        fprintf(stderr, "mknod '%s': %s: -o onto a character device not checked\n", dev,
                strerror(errno));
    } else {
        int fd = open(dev, O_WRONLY); /* a nodev mount refuses it */
        have_dev = fd >= 0;
        if (fd >= 0)
            close(fd);
        else
            fprintf(stderr, "'%s' cannot be opened (%s): -o onto a character device not "
                    "checked\n", dev, strerror(errno));
    }

    static const char *const formats[] = { "--perfetto", "--csv", "--prometheus" };
    for (int i = 0; i < 3; i++) {
        struct cli_result want;
        cli_runl(&want, "export", formats[i], dir, NULL);
        assert_int_equal(want.status, 0);

        char *got = export_through_fifo(formats[i], fifo, copy, dir);
        assert_string_equal(got, want.out);
        free(got);
        struct stat sb;

        tt_write_file(target, "old", 3);
        export_onto(formats[i], link, dir, &sb);
        assert_true(S_ISLNK(sb.st_mode));
        got = slurp(target);
        assert_string_equal(got, want.out);
        free(got);

        unlink(fresh);
        export_onto(formats[i], dangling, dir, &sb);
        assert_true(S_ISLNK(sb.st_mode));
        got = slurp(fresh);
        assert_string_equal(got, want.out);
        free(got);

        if (have_dev) {
            export_onto(formats[i], dev, dir, &sb);
            assert_true(S_ISCHR(sb.st_mode));
            assert_int_equal(sb.st_rdev, makedev(1, 3));
        }
        cli_result_free(&want);
    }
    /* nothing left beside them: fifo, its copy, link, target, dangling, fresh (and null) */
    assert_int_equal(count_entries(outdir), 6 + have_dev);
    tt_rmtree(dir);
    tt_rmtree(outdir);
    free(dir);
    free(outdir);
}

/* A cut file: exported all the same, with the warning on stderr. */
static void a_cut_file_is_exported_with_a_warning(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/rank03%s", dir, CP_TRACE_FILE_SUFFIX);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 8), 0);
    struct cli_result r;
    cli_runl(&r, "export", "--prometheus", dir, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\ncollprof_warnings 1\n"));
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_true(cli_starts_with(r.err, "collprof: WARN "));
    assert_non_null(strstr(r.err, "rank03.cptrace"));
    cli_result_free(&r);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    umask(022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_format_to_stdout_and_to_a_file),
        cmocka_unit_test(a_failed_write_leaves_the_old_file_and_no_temporary),
        cmocka_unit_test(bad_destinations_and_input_are_one_line_and_exit_2),
        cmocka_unit_test(a_cut_file_is_exported_with_a_warning),
        cmocka_unit_test(a_piece_of_the_job),
        cmocka_unit_test(the_perfetto_format_is_json_or_protobuf),
        cmocka_unit_test(a_job_past_the_json_cap_is_a_protobuf),
        cmocka_unit_test(non_regular_targets_are_written_through),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
