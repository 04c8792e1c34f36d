/* `collprof export` as a user runs it: each format to stdout and to -o FILE (the same bytes),
 * FILE written whole or not at all (a temporary file renamed at the end: nothing left
 * behind, the old FILE kept when writing fails), and bad input. */
#include "tests/exporters/exp_job.h"

#include <signal.h>
#include <sys/resource.h>

#include "tests/cli/test_cli_util.h"

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

    /* FILE is a directory: the rename fails, the directory and its neighbours stay. */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
