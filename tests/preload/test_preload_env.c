/* The shim's settings and failure policy: off means pure pass-through, no NCCL means no
 * file, a bad value or an unwritable directory is one WARN line and the job is untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <dirent.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "shim_test_util.h"

static char *g_tmp;
static char g_dir[4200], g_dir_env[4300];
static job_result g_bare, g_shim;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/t", g_tmp);
    snprintf(g_dir_env, sizeof g_dir_env, "COLLPROF_DIR=%s", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void enable_0_is_pure_pass_through(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_ENABLE=0", NULL};
    const char *argv[] = {"basic", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_string_equal(g_shim.err, "");
    assert_false(st_exists(g_dir));
}

static void a_job_without_nccl_calls_leaves_no_file_and_no_directory(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, NULL};
    const char *none[] = {"none", NULL}, *queries[] = {"queries", NULL};
    st_run(&g_shim, 1, env, none);
    assert_int_equal(g_shim.status, 0);
    assert_false(st_exists(g_dir));
    /* queries (GetVersion, GetErrorString) forward but record nothing */
    st_run(&g_shim, 1, env, queries);
    assert_false(st_exists(g_dir));
}

/* Nor a live stats block, looked for while the program still runs: a block made at load
 * time and removed at exit would pass a check made afterwards. */
static void a_program_without_nccl_calls_has_no_stats_block_while_it_runs(void **state)
{
    (void)state;
    char live[4200], live_env[4300], preload[8400];
    snprintf(live, sizeof live, "%s/live", g_tmp);
    assert_int_equal(mkdir(live, 0700), 0);
    snprintf(live_env, sizeof live_env, "COLLPROF_LIVE_DIR=%s", live);
#ifdef CP_TEST_ASAN_RUNTIME
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s/lib/libcollprof.so",
             CP_TEST_ASAN_RUNTIME, st_build_dir());
#else
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s/lib/libcollprof.so", st_build_dir());
#endif
    char *const envp[] = {preload, live_env, (char *)g_dir_env,
                          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL};
    char *const argv[] = {"sleep", "1", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    usleep(400000);
    DIR *d = opendir(live);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        entries += e->d_name[0] != '.';
    closedir(d);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(entries, 0);
    assert_false(st_exists(g_dir));
}

static void a_bad_value_is_one_warning_and_tracing_goes_on(void **state)
{
    (void)state;
    const char *env[] = {g_dir_env, "COLLPROF_FLUSH_MS=soon", NULL};
    const char *argv[] = {"basic", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
    assert_non_null(strstr(g_shim.err, "COLLPROF_FLUSH_MS"));
    char **paths;
    int n = st_list(g_dir, &paths);
    assert_int_equal(n, 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    assert_int_equal(t.ncalls, 36);
    st_free_trace(&t);
    cp_trace_dir_free(paths, n);
}

static void an_unwritable_directory_is_one_warning_and_the_job_is_untouched(void **state)
{
    (void)state;
    char file[4300], env_dir[4400];
    snprintf(file, sizeof file, "%s/plainfile", g_tmp);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(env_dir, sizeof env_dir, "COLLPROF_DIR=%s/sub", file);
    const char *env[] = {env_dir, NULL};
    const char *argv[] = {"basic", NULL};
    st_run(&g_bare, 0, NULL, argv);
    st_run(&g_shim, 1, env, argv);
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
    assert_non_null(strstr(g_shim.err, "trace directory"));
}

/* The trace holds host names, job ids and call stacks: 0600 in a 0700 directory unless
 * COLLPROF_FILE_MODE says otherwise (the directory then gets x where the file has r). */
static void trace_files_are_private_unless_asked(void **state)
{
    (void)state;
    static const struct {
        const char *env;
        unsigned file, dir;
    } cases[] = {{NULL, 0600, 0700}, {"COLLPROF_FILE_MODE=0640", 0640, 0750}};
    mode_t old = umask(022);
    for (size_t i = 0; i < 2; i++) {
        st_rmtree(g_dir);
        const char *env[] = {g_dir_env, cases[i].env, NULL};
        const char *argv[] = {"burst", "3", NULL};
        st_run(&g_shim, 1, env, argv);
        assert_int_equal(g_shim.status, 0);
        char **paths;
        assert_int_equal(st_list(g_dir, &paths), 1);
        struct stat st;
        assert_int_equal(stat(paths[0], &st), 0);
        assert_int_equal(st.st_mode & 0777, cases[i].file);
        cp_trace_dir_free(paths, 1);
        assert_int_equal(stat(g_dir, &st), 0);
        assert_int_equal(st.st_mode & 0777, cases[i].dir);
    }
    umask(old);
}

/* The job's file as the job left it: exactly its 14 bytes. */
static void assert_job_file_untouched(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 14);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[32] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "job data here\n");
}

/* A job that closes every fd and opens its own file, or dup2s its file over every number the
 * shim could hold: its file keeps exactly what the job wrote, its output and status are those
 * of the run without the shim. After closefds the trace goes on in the same file (opened again
 * by its path); when every number is the job's, tracing stops with one WARN. */
static void the_trace_never_lands_in_a_file_of_the_job(void **state)
{
    (void)state;
    char job_file[4300], flush_env[] = "COLLPROF_FLUSH_MS=50";
    snprintf(job_file, sizeof job_file, "%s/job.txt", g_tmp);
    const char *env[] = {g_dir_env, flush_env, NULL};
    const char *closefds[] = {"closefds", job_file, NULL}, *dup2fds[] = {"dup2fds", job_file, NULL};
    st_run(&g_bare, 0, NULL, closefds);
    st_run(&g_shim, 1, env, closefds);
    if (!strstr(g_bare.out, "job file: 14 bytes") || strcmp(g_bare.out, g_shim.out))
        fprintf(stderr, "bare %#x:\n%s%s\nshim %#x:\n%s%s\n", g_bare.status, g_bare.out,
                g_bare.err, g_shim.status, g_shim.out, g_shim.err);
    assert_job_file_untouched(job_file);
    assert_int_equal(g_bare.status, 0);
    assert_non_null(strstr(g_bare.out, "job file: 14 bytes: job data here\n"));
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 0);
    char **paths;
    assert_int_equal(st_list(g_dir, &paths), 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, 1);
    assert_int_equal(t.ncalls, 17); /* init, 15 AllReduce, destroy: none lost */
    assert_int_equal(t.nend, 1);
    assert_int_equal(t.walk.lost_records, 0);
    st_free_trace(&t);

    st_rmtree(g_dir);
    st_run(&g_bare, 0, NULL, dup2fds);
    st_run(&g_shim, 1, env, dup2fds);
    assert_job_file_untouched(job_file);
    assert_non_null(strstr(g_bare.out, "job file: 14 bytes: job data here\n"));
    assert_string_equal(g_shim.out, g_bare.out);
    assert_int_equal(g_shim.status, g_bare.status);
    assert_int_equal(st_count_lines(g_shim.err, "collprof: WARN"), 1);
    assert_int_equal(st_list(g_dir, &paths), 1);
    assert_int_equal(st_read_trace(paths[0], &t), 0); /* what was written before still reads */
    cp_trace_dir_free(paths, 1);
    assert_true(t.ncalls >= 6);
    st_free_trace(&t);
}

/* libcollprof.so must load beside whichever NCCL the job has, or none, on a node that has
 * nothing but glibc. Beside NCCL's names it exports only the exec family (exec_wrap.c
 * flushes the trace before exec) and raise (signals.c). */
static void the_library_needs_only_glibc_and_exports_only_nccl_names(void **state)
{
    (void)state;
    char cmd[4400], lib[4200];
    snprintf(lib, sizeof lib, "%s/lib/libcollprof.so", st_build_dir());
    /* glibc's objects only (and the sanitizers' runtimes in that build): ld.so drops a preload
     * whose dependency is missing, and a GPU image had neither libunwind nor json-c */
    snprintf(cmd, sizeof cmd, "readelf -d '%s'", lib);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    static const char *const allowed[] = {"libc.so.", "libm.so.", "libdl.so.", "libpthread.so.",
                                          "ld-linux", "librt.so.",
#ifdef CP_TEST_ASAN_RUNTIME
                                          "libasan.so.", "libubsan.so.",
#endif
                                          NULL};
    char line[1024];
    int needed = 0;
    while (fgets(line, sizeof line, f)) {
        char *dep = strstr(line, "(NEEDED)");
        if (!dep || !(dep = strstr(dep, "[")))
            continue;
        needed++;
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strncmp(dep + 1, allowed[i], strlen(allowed[i])) == 0;
        if (!ok)
            fail_msg("libcollprof.so needs %s", dep);
    }
    assert_int_equal(pclose(f), 0);
    assert_true(needed >= 1); /* readelf ran and saw libc */
    snprintf(cmd, sizeof cmd,
             "nm -D --defined-only '%s' | awk '{print $3}' | grep -v '^nccl' | "
             "grep -vxE 'exec(ve|v|vp|vpe|l|lp|le)|fexecve|raise' | grep .", lib);
    assert_int_not_equal(system(cmd), 0);

    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    assert_non_null(h);
#define CHECK_EXPORTED(ret, name, params, args) assert_non_null(dlsym(h, #name));
    CP_NCCL_API(CHECK_EXPORTED)
    CP_NCCL_API_DEPRECATED(CHECK_EXPORTED)
    void *own_execve = dlsym(h, "execve");
    assert_non_null(own_execve);
    assert_ptr_not_equal(own_execve, dlsym(RTLD_NEXT, "execve")); /* ours, not libc's */
    assert_null(dlsym(h, "pncclAllReduce"));
    assert_null(dlsym(h, "cp_trace_hash"));
    /* deliberately not dlclose'd: the library is marked nodelete */
}

/* A relative COLLPROF_DIR (and the default collprof-<jobid>) is made absolute when the trace
 * starts: a job that changes directory and then takes the trace's fd (the writer reopens its
 * file by path) still has every call in the file it started. */
static void a_relative_directory_survives_a_chdir(void **state)
{
    (void)state;
    char a[4300], b[4300], dir[4400];
    snprintf(a, sizeof a, "%s/a", g_tmp);
    snprintf(b, sizeof b, "%s/b", g_tmp);
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    const char *env[] = {"COLLPROF_DIR=rel/trace", "COLLPROF_FLUSH_MS=100", NULL};
    const char *argv[] = {"chdir", a, b, NULL};
    st_run(&g_shim, 1, env, argv);
    assert_int_equal(g_shim.status, 0);
    snprintf(dir, sizeof dir, "%s/rel/trace", a);
    char **paths;
    int n = st_list(dir, &paths);
    assert_int_equal(n, 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    cp_trace_dir_free(paths, n);
    /* the init, 10 AllReduces, the destroy */
    if (t.ncalls != 12 || t.nend != 1)
        fail_msg("%zu calls, %d END\n%s", t.ncalls, t.nend, g_shim.err);
    st_free_trace(&t);
    snprintf(dir, sizeof dir, "%s/rel", b);
    assert_false(st_exists(dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(enable_0_is_pure_pass_through, setup, teardown),
        cmocka_unit_test_setup_teardown(trace_files_are_private_unless_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(a_relative_directory_survives_a_chdir, setup, teardown),
        cmocka_unit_test_setup_teardown(the_trace_never_lands_in_a_file_of_the_job, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_program_without_nccl_calls_has_no_stats_block_while_it_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(a_job_without_nccl_calls_leaves_no_file_and_no_directory,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_bad_value_is_one_warning_and_tracing_goes_on, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            an_unwritable_directory_is_one_warning_and_the_job_is_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_library_needs_only_glibc_and_exports_only_nccl_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
