/* collprof run: the job's exit status, its environment, and a trace from a job calling
 * NCCL (shim_job against the stub libnccl, as the shim's own tests run it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "test_cli_util.h"
#include "trace/trace_reader.h"

static char *g_tmp;

static int setup(void **state)
{
    (void)state;
    g_tmp = cli_tmpdir();
#ifdef CP_TEST_ASAN_RUNTIME
    /* An ASan-built libcollprof.so works in a plain program only with ASan's runtime
     * loaded too: `run` puts ours first, so the order check is off. */
    setenv("LD_PRELOAD", CP_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#else
    setenv("LD_PRELOAD", "libm.so.6", 1);
#endif
    unsetenv("COLLPROF_DIR");
    /* the jobs' live stats blocks go to the test's own directory, not /dev/shm */
    setenv("COLLPROF_LIVE_DIR", g_tmp, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cli_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void the_jobs_exit_status_comes_back(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/none", g_tmp);
    cli_runl(&r, "run", "--dir", dir, "--", "sh", "-c", "exit 7", NULL);
    assert_int_equal(r.status, 7);
    assert_non_null(strstr(r.err, "no trace"));
    cli_result_free(&r);
    cli_runl(&r, "run", "--dir", dir, "sh", "-c", "kill -TERM $$", NULL);
    assert_int_equal(r.status, 128 + 15);
    cli_result_free(&r);
    cli_runl(&r, "run", "--dir", dir, "--", "/nonexistent/job", NULL);
    assert_int_equal(r.status, 127);
    cli_result_free(&r);
}

static void the_environment_is_set_and_ld_preload_kept(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/env", g_tmp);
    cli_runl(&r, "run", "--dir", dir, "--gpu-timing", "sample:4", "--", "sh", "-c",
             "echo \"$COLLPROF_DIR|$COLLPROF_GPU_TIMING|$LD_PRELOAD\"", NULL);
    assert_int_equal(r.status, 0);
    char want[8400];
    snprintf(want, sizeof want, "%s|sample:4|", dir);
    assert_true(cli_starts_with(r.out, want));
    const char *pre = r.out + strlen(want);
    assert_non_null(strstr(pre, "/lib/libcollprof.so "));
    assert_non_null(strstr(pre, getenv("LD_PRELOAD")));
    assert_true(strstr(pre, "libcollprof.so") < strstr(pre, getenv("LD_PRELOAD")));
    cli_result_free(&r);
}

static void a_bad_gpu_timing_is_one_line_and_exit_2(void **state)
{
    (void)state;
    struct cli_result r;
    cli_runl(&r, "run", "--gpu-timing", "sample:0", "--", "true", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "sample:0"));
    cli_result_free(&r);
}

static void a_job_calling_nccl_leaves_its_trace_in_dir(void **state)
{
    (void)state;
    struct cli_result r;
    char dir[4200], job[4200];
    snprintf(dir, sizeof dir, "%s/trace/sub", g_tmp);
    snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
    cli_runl(&r, "run", "--dir", dir, "--gpu-timing", "off", "--", job, "burst", "5", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "burst done\n");
    char want[8600];
    snprintf(want, sizeof want, "collprof: trace in '%s'; see it with: collprof report %s\n",
             dir, dir);
    assert_non_null(strstr(r.err, want));
    char **paths = NULL, err[256];
    int n = cp_trace_dir_list(dir, &paths, err, sizeof err);
    assert_int_equal(n, 1);
    cp_trace_dir_free(paths, n);
    cli_result_free(&r);
}

/* The shim_job of these tests, making NCCL calls (5 AllReduce) under `collprof run --dir`. */
static void run_burst(struct cli_result *r, const char *dir)
{
    char job[4200];
    snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
    cli_runl(r, "run", "--dir", dir, "--gpu-timing", "off", "--", job, "burst", "5", NULL);
    assert_int_equal(r->status, 0);
}

static void assert_says(const struct cli_result *r, const char *want)
{
    if (!strstr(r->err, want))
        fail_msg("stderr does not say \"%s\":\n%s", want, r->err);
}

/* The job called NCCL, but D could not be made (a file where a folder should be): run says
 * so, with the reason, not that the job made no call. */
static void a_directory_that_cannot_be_made_is_said_so(void **state)
{
    (void)state;
    char file[4200], dir[4300], want[8800];
    snprintf(file, sizeof file, "%s/file", g_tmp);
    cli_write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/sub", file);
    struct cli_result r;
    run_burst(&r, dir);
    snprintf(want, sizeof want, "collprof: no trace: cannot create the trace directory '%s': "
             "Not a directory\n", dir);
    assert_says(&r, want);
    assert_null(strstr(r.err, "made no NCCL call"));
    assert_null(strstr(r.err, "see it with"));
    cli_result_free(&r);
}

/* D made, but no rank could create its file in it (a trace file's path there is longer than
 * PATH_MAX): run says that, not "trace in D", and the D it made goes again. */
static void every_rank_failing_to_create_its_file_is_said_so(void **state)
{
    (void)state;
    static char dir[4096];
    size_t n = (size_t)snprintf(dir, sizeof dir, "%s", g_tmp);
    while (n + 1 + 200 < 4090) {
        dir[n++] = '/';
        memset(dir + n, 'd', 200);
        n += 200;
    }
    dir[n++] = '/';
    memset(dir + n, 'e', 4090 - n);
    dir[4090] = '\0';
    struct cli_result r;
    run_burst(&r, dir);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0); /* run made it, and it was left empty */
    static char want[8800];
    snprintf(want, sizeof want, "collprof: no trace in '%s': a trace file cannot be created "
             "there: File name too long\n", dir);
    assert_says(&r, want);
    assert_null(strstr(r.err, "see it with"));
    cli_result_free(&r);
}

/* D held a trace before; a job that makes no NCCL call adds none: run does not point at the
 * old one. */
static void an_old_trace_is_not_this_jobs(void **state)
{
    (void)state;
    char dir[4200], old[4300], want[8800];
    snprintf(dir, sizeof dir, "%s/old", g_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(old, sizeof old, "%s/rank00000-host-1.cptrace", dir);
    cli_write_file(old, "x", 1);
    struct cli_result r;
    cli_runl(&r, "run", "--dir", dir, "--", "true", NULL);
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof want, "collprof: the job made no NCCL call: no new trace in '%s'\n",
             dir);
    assert_says(&r, want);
    cli_result_free(&r);
}

/* A directory longer than COLLPROF_DIR takes would send the trace to the shim's default:
 * refused before the job starts. */
static void a_directory_the_shim_would_not_take_is_exit_2(void **state)
{
    (void)state;
    static char dir[4200];
    memset(dir, 'd', 4096);
    dir[0] = '/';
    dir[4096] = '\0';
    struct cli_result r;
    cli_runl(&r, "run", "--dir", dir, "--", "true", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(cli_count_lines(r.err), 1);
    assert_says(&r, "the trace directory is longer than 4095 bytes");
    cli_result_free(&r);
}

/* The hint's path is quoted for a shell: pasted, it names D, a space and a quote in it. */
static void the_hint_is_pasteable_into_a_shell(void **state)
{
    (void)state;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/it's a \"dir\" $HOME", g_tmp);
    struct cli_result r;
    run_burst(&r, dir);
    const char *hint = strstr(r.err, "see it with: collprof report ");
    assert_non_null(hint);
    hint += strlen("see it with: collprof report ");
    char word[8800];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(hint, "\n"), hint);
    /* the shell's own reading of the pasted word */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "printf %%s %s", word);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char got[4400];
    ssize_t n = 0, k;
    while ((k = read(fds[0], got + n, sizeof got - 1 - (size_t)n)) > 0)
        n += k;
    got[n] = '\0';
    close(fds[0]);
    assert_int_equal(cli_wait(pid), 0);
    assert_string_equal(got, dir);
    cli_result_free(&r);
}

/* The default directory is relative (collprof-<stamp>-<pid>): run makes it absolute before
 * the job starts, so a job that changes directory before its first NCCL call still writes
 * where run looks (it used to say "the job made no NCCL call"). */
static void a_job_that_changes_directory_traces_where_run_looks(void **state)
{
    (void)state;
    char work[4200], other[4200], job[4200], script[8800], cwd[4200];
    snprintf(work, sizeof work, "%s/work", g_tmp);
    snprintf(other, sizeof other, "%s/other", g_tmp);
    assert_int_equal(mkdir(work, 0700), 0);
    assert_int_equal(mkdir(other, 0700), 0);
    snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
    snprintf(script, sizeof script, "cd '%s' && exec '%s' burst 5", other, job);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(work), 0);
    struct cli_result r;
    cli_runl(&r, "run", "--gpu-timing", "off", "--", "sh", "-c", script, NULL);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r.status, 0);
    char want[8600];
    snprintf(want, sizeof want, "collprof: trace in '%s/collprof-", work);
    assert_says(&r, want);
    assert_null(strstr(r.err, "made no NCCL call"));
    DIR *d = opendir(other);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        assert_true(e->d_name[0] == '.'); /* nothing landed in the job's new directory */
    closedir(d);
    cli_result_free(&r);
}

/* The job renames or removes D once its trace is written (and makes another at its path):
 * run says so, and where D went, never that the job made no NCCL call; the status stays the
 * job's. */
static void a_directory_renamed_or_removed_mid_run_is_said_so(void **state)
{
    (void)state;
    static const char *const how[] = {"mv \"$COLLPROF_DIR\" \"$COLLPROF_DIR.moved\"",
                                      "rm -rf \"$COLLPROF_DIR\"",
                                      "rm -rf \"$COLLPROF_DIR\" && mkdir \"$COLLPROF_DIR\""};
    static const char *const said[] = {"was renamed while the job ran: it is now '%s.moved'; "
                                       "see it with: collprof report %s.moved\n",
                                       "was removed while the job ran: whatever trace the job "
                                       "wrote went with it\n",
                                       "was removed while the job ran: whatever trace the job "
                                       "wrote went with it ('%s' is another directory now)\n"};
    for (size_t i = 0; i < 3; i++) {
        char dir[4200], job[4200], script[8800];
        snprintf(dir, sizeof dir, "%s/mid-%zu", g_tmp, i);
        snprintf(job, sizeof job, "%s/bin/shim_job", getenv("COLLPROF_BUILD_DIR"));
        snprintf(script, sizeof script, "'%s' burst 5 && %s && exit 4", job, how[i]);
        struct cli_result r;
        cli_runl(&r, "run", "--dir", dir, "--gpu-timing", "off", "--", "sh", "-c", script,
                 NULL);
        assert_int_equal(r.status, 4);
        char want[8800], tail[8800];
        snprintf(tail, sizeof tail, said[i], dir, dir);
        snprintf(want, sizeof want, "collprof: the trace directory '%s' %s", dir, tail);
        assert_says(&r, want);
        assert_null(strstr(r.err, "made no NCCL call"));
        cli_result_free(&r);
    }
}

/* Polls (10 ms) until path exists: 1, or 0 after 20 s. */
static int wait_for_file(const char *path)
{
    struct stat st;
    for (int i = 0; i < 2000; i++) {
        if (stat(path, &st) == 0 && st.st_size > 0)
            return 1;
        usleep(10000);
    }
    return 0;
}

/* Polls until file holds exactly `want`: 1, or 0 after 20 s. */
static int wait_for_content(const char *path, const char *want)
{
    char got[256];
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
        if (f)
            fclose(f);
        got[n] = '\0';
        if (!strcmp(got, want))
            return 1;
        usleep(10000);
    }
    fprintf(stderr, "%s holds \"%s\", not \"%s\"\n", path, got, want);
    return 0;
}

/* A job (a shell) that logs each of HUP QUIT USR1 USR2 INT it gets into `log`, writes its
 * pid into `ready`, and runs until a TERM (default action) ends it. */
static void signal_logger(char *script, size_t cap, const char *log, const char *ready)
{
    snprintf(script, cap,
             "for s in HUP QUIT USR1 USR2 INT; do trap \"echo $s >> '%s'\" $s; done; "
             "echo $$ > '%s.tmp' && mv '%s.tmp' '%s'; "
             "while :; do sleep 0.02; done",
             log, ready, ready, ready);
}

/* collprof run started in the background: stderr into err_path; with a pty of its own as its
 * controlling terminal (a new session) when pty_slave is set. */
static pid_t start_run(const char *dir, const char *script, const char *err_path,
                       const char *pty_slave)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* run leads a process group of its own, whose parent (this test) is in another of
         * the same session: never an orphaned group, in which the kernel discards a stop
         * signal (TSTP, TTIN, TTOU) rather than stop the job (a CI shell that left) */
        if (pty_slave) {
            setsid();
            int t = open(pty_slave, O_RDWR);
            if (t < 0 || ioctl(t, TIOCSCTTY, 0) != 0)
                _exit(125);
            dup2(t, STDIN_FILENO);
        } else {
            setpgid(0, 0);
        }
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(e, STDERR_FILENO);
        execl(cli_binary(), "collprof", "run", "--dir", dir, "--", "sh", "-c", script,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

/* `kill PID` of run, as a user, a scheduler or a launcher sends it: the job gets each of
 * HUP, QUIT, USR1, USR2 once (run used to die of HUP with 129 and leave the job running),
 * run keeps waiting and exits with the job's status; the job is gone when run returns. */
static void signals_sent_to_run_reach_the_job_once(void **state)
{
    (void)state;
    char dir[4200], log[4200], ready[4200], err[4200], script[16384];
    snprintf(dir, sizeof dir, "%s/sig", g_tmp);
    snprintf(log, sizeof log, "%s/got", g_tmp);
    snprintf(ready, sizeof ready, "%s/ready", g_tmp);
    snprintf(err, sizeof err, "%s/run.err", g_tmp);
    signal_logger(script, sizeof script, log, ready);
    pid_t run = start_run(dir, script, err, NULL);
    assert_true(wait_for_file(ready));
    pid_t job = read_pid(ready);
    assert_true(job > 0);
    static const struct {
        int sig;
        const char *log;
    } sent[] = {{SIGHUP, "HUP\n"},
                {SIGQUIT, "HUP\nQUIT\n"},
                {SIGUSR1, "HUP\nQUIT\nUSR1\n"},
                {SIGUSR2, "HUP\nQUIT\nUSR1\nUSR2\n"}};
    int ok = 1;
    for (size_t i = 0; i < sizeof sent / sizeof sent[0] && ok; i++) {
        kill(run, sent[i].sig);
        ok = wait_for_content(log, sent[i].log);
    }
    if (!ok || waitpid(run, NULL, WNOHANG) != 0) {
        kill(job, SIGKILL); /* run died and left it: the failure this test is for */
        fail_msg("the job did not get each signal once, or run died");
    }
    kill(run, SIGTERM);
    int status = cli_wait(run);
    assert_int_equal(status, 128 + SIGTERM);
    assert_int_equal(kill(job, 0), -1); /* reaped: no orphan */
    assert_int_equal(errno, ESRCH);
}

/* A terminal's Ctrl-C goes to the whole foreground group, run and job: run must not send it
 * again (the job's trap ran twice before). */
static void a_terminals_signal_reaches_the_job_once(void **state)
{
    (void)state;
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    char slave[256];
    assert_int_equal(ptsname_r(master, slave, sizeof slave), 0);
    char dir[4200], log[4200], ready[4200], err[4200], script[16384];
    snprintf(dir, sizeof dir, "%s/tty", g_tmp);
    snprintf(log, sizeof log, "%s/tty-got", g_tmp);
    snprintf(ready, sizeof ready, "%s/tty-ready", g_tmp);
    snprintf(err, sizeof err, "%s/tty.err", g_tmp);
    signal_logger(script, sizeof script, log, ready);
    pid_t run = start_run(dir, script, err, slave);
    assert_true(wait_for_file(ready));
    pid_t job = read_pid(ready);
    assert_true(job > 0);
    assert_int_equal(write(master, "\x03", 1), 1); /* Ctrl-C: SIGINT to the foreground group */
    int ok = wait_for_content(log, "INT\n");
    /* a second delivery, had run forwarded it, comes within the job's next few sleeps */
    for (int i = 0; ok && i < 20; i++) {
        usleep(10000);
        ok = wait_for_content(log, "INT\n");
    }
    kill(run, SIGTERM);
    int status = cli_wait(run);
    kill(job, SIGKILL);
    close(master);
    assert_true(ok);
    assert_int_equal(status, 128 + SIGTERM);
}

/* SIGTSTP sent to run: the job stops, and run stops with it (the shell sees its job
 * stopped); CONT to run resumes both, and the job goes on getting signals. */
static void a_stopped_job_stops_run_and_both_resume(void **state)
{
    (void)state;
    char dir[4200], log[4200], ready[4200], err[4200], script[16384];
    snprintf(dir, sizeof dir, "%s/stop", g_tmp);
    snprintf(log, sizeof log, "%s/stop-got", g_tmp);
    snprintf(ready, sizeof ready, "%s/stop-ready", g_tmp);
    snprintf(err, sizeof err, "%s/stop.err", g_tmp);
    signal_logger(script, sizeof script, log, ready);
    pid_t run = start_run(dir, script, err, NULL);
    assert_true(wait_for_file(ready));
    pid_t job = read_pid(ready);
    assert_true(job > 0);
    kill(run, SIGTSTP);
    int ws = 0;
    pid_t w = 0;
    for (int i = 0; i < 1000 && w == 0; i++) { /* 10 s at most */
        w = waitpid(run, &ws, WUNTRACED | WNOHANG);
        if (w == 0 || (w < 0 && errno == EINTR)) {
            w = 0;
            usleep(10000);
        }
    }
    int stopped = w == run && WIFSTOPPED(ws);
    kill(run, SIGCONT);
    int resumed = stopped && (kill(run, SIGUSR1), wait_for_content(log, "USR1\n"));
    kill(run, SIGTERM);
    int status = cli_wait(run);
    kill(job, SIGKILL);
    assert_true(stopped);
    assert_true(resumed);
    assert_int_equal(status, 128 + SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_jobs_exit_status_comes_back),
        cmocka_unit_test(the_environment_is_set_and_ld_preload_kept),
        cmocka_unit_test(a_bad_gpu_timing_is_one_line_and_exit_2),
        cmocka_unit_test(a_job_calling_nccl_leaves_its_trace_in_dir),
        cmocka_unit_test(a_directory_that_cannot_be_made_is_said_so),
        cmocka_unit_test(every_rank_failing_to_create_its_file_is_said_so),
        cmocka_unit_test(an_old_trace_is_not_this_jobs),
        cmocka_unit_test(a_directory_the_shim_would_not_take_is_exit_2),
        cmocka_unit_test(the_hint_is_pasteable_into_a_shell),
        cmocka_unit_test(a_job_that_changes_directory_traces_where_run_looks),
        cmocka_unit_test(a_directory_renamed_or_removed_mid_run_is_said_so),
        cmocka_unit_test(signals_sent_to_run_reach_the_job_once),
        cmocka_unit_test(a_terminals_signal_reaches_the_job_once),
        cmocka_unit_test(a_stopped_job_stops_run_and_both_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
