/* What the shim adds to a process, held against the job without it (docs/RELIABILITY.md,
 * "What the shim adds to a process"): the job's next open(2) gets the number it gets alone
 * (every fd the shim keeps, libunwind's pipe included, sits high); a job that fits under its
 * RLIMIT_AS alone fits under the shim, given the documented allowance; the writer thread's
 * stack use stays within its documented share; and the shim's lines never land in a file
 * the job opened on fd 2 (they go to the trace's side log). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shim_test_util.h"

/* The address space the shim may add to a job (docs/RELIABILITY.md): libcollprof.so and
 * libunwind's mappings, the writer's stack, one ring, the live block, the malloc arena
 * glibc gives a new thread is not in it (glibc falls back to the main arena under a limit). */
#define SHIM_ALLOWANCE_KB (8L << 10)
/* The job's own memory after its calls, in the limit case. */
#define JOB_MB 64

static char *g_tmp;
static job_result g_res;

static int setup(void **state)
{
    (void)state;
    g_tmp = st_tmpdir();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

static void dir_env(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "COLLPROF_DIR=%s/%s", g_tmp, name);
}

static void the_jobs_next_open_gets_the_number_it_gets_without_the_shim(void **s)
{
    (void)s;
    char d[4400];
    dir_env(d, sizeof d, "fds");
    const char *env[] = {d, NULL};
    const char *argv[] = {"first-open", "20", NULL};
    job_result *bare = calloc(1, sizeof *bare);
    st_run(bare, 0, env, argv);
    assert_int_equal(bare->status, 0);
    st_run(&g_res, 1, env, argv);
    if (strcmp(g_res.out, bare->out))
        fprintf(stderr, "without the shim:\n%swith it:\n%s%s", bare->out, g_res.out,
                g_res.err);
    assert_int_equal(g_res.status, 0);
    assert_string_equal(g_res.out, bare->out);
    free(bare);
    /* the calls were recorded, their sites symbolized (libunwind's path, where it is) */
    char dir[4300], **paths;
    snprintf(dir, sizeof dir, "%s/fds", g_tmp);
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    assert_true(t.ncalls >= 20);
    assert_true(t.nsites >= 1);
    st_free_trace(&t);
    cp_trace_dir_free(paths, nf);
}

static long vm_of(const char *out)
{
    const char *p = strstr(out, "vm_kb=");
    return p ? atol(p + 6) : -1;
}

static void a_job_that_fits_its_address_space_limit_alone_fits_under_the_shim(void **s)
{
    (void)s;
    char d[4400], mb[16];
    snprintf(mb, sizeof mb, "%d", JOB_MB);
    dir_env(d, sizeof d, "limit");
    const char *env[] = {d, "COLLPROF_DEBUG=INFO", NULL};
    /* the job alone, no limit: what it needs */
    const char *free_argv[] = {"limit-as", "0", "200", mb, NULL};
    st_run(&g_res, 0, env, free_argv);
    assert_int_equal(g_res.status, 0);
    long alone = vm_of(g_res.out);
    assert_true(alone > 0);
    /* the job alone fits its limit, with 1 MiB to spare... */
    char kb[32];
    snprintf(kb, sizeof kb, "%ld", alone + 1024);
    const char *tight_argv[] = {"limit-as", kb, "200", mb, NULL};
    st_run(&g_res, 0, env, tight_argv);
    assert_int_equal(g_res.status, 0);
    /* ...and under the shim, at that limit plus the shim's documented allowance */
    snprintf(kb, sizeof kb, "%ld", alone + 1024 + SHIM_ALLOWANCE_KB);
    st_run(&g_res, 1, env, tight_argv);
    if (g_res.status != 0)
        fprintf(stderr, "alone %ld kB; under the shim: status %#x\n%s%s", alone, g_res.status,
                g_res.out, g_res.err);
    assert_int_equal(g_res.status, 0);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 0);
    long shim = vm_of(g_res.out);
    fprintf(stderr, "VmSize after the calls: %ld kB alone, %ld kB under the shim (+%ld kB)\n",
            alone, shim, shim - alone);
    /* every call in the trace, nothing lost */
    char dir[4300], **paths;
    snprintf(dir, sizeof dir, "%s/limit", g_tmp);
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 1);
    trace_seen t;
    assert_int_equal(st_read_trace(paths[0], &t), 0);
    assert_int_equal(t.nend, 1);
    for (int c = 0; c <= CP_LOST_CAUSE_LAST; c++)
        assert_int_equal(t.lost_by_cause[c], 0);
    st_free_trace(&t);
    cp_trace_dir_free(paths, nf);
    /* the writer's stack: what it used, within its documented share of what it has */
    const char *u = strstr(g_res.err, "the writer thread used ");
    assert_non_null(u);
    unsigned long used = 0, size = 0;
    assert_int_equal(sscanf(u, "the writer thread used %lu of its %lu", &used, &size), 2);
    fprintf(stderr, "writer stack: %lu of %lu bytes used\n", used, size);
    assert_true(used > 0);
    assert_true(used <= size / 8); /* the margin writer_thread.c keeps */
}

static void the_shims_lines_never_land_in_a_file_the_job_opened_on_fd_2(void **s)
{
    (void)s;
    char d[4400], data[4300];
    dir_env(d, sizeof d, "stderr");
    snprintf(data, sizeof data, "%s/data.txt", g_tmp);
    /* a bad value: a WARN at the first call, when fd 2 is the job's data file */
    const char *env[] = {d, "COLLPROF_FLUSH_MS=bogus", NULL};
    const char *argv[] = {"stderr-file", data, "10", NULL};
    st_run(&g_res, 1, env, argv);
    assert_int_equal(g_res.status, 0);
    assert_string_equal(g_res.out, "stderr-file done\n");
    char content[4096];
    int fd = open(data, O_RDONLY);
    assert_true(fd >= 0);
    st_read_fd(fd, content, sizeof content);
    close(fd);
    assert_string_equal(content, "the job's own data\n");
    /* the WARN is in the trace's side log, beside the trace */
    char dir[4300], **paths;
    snprintf(dir, sizeof dir, "%s/stderr", g_tmp);
    int nf = st_list(dir, &paths);
    assert_int_equal(nf, 1);
    char side[4400];
    size_t n = strlen(paths[0]) - strlen(CP_TRACE_FILE_SUFFIX);
    snprintf(side, sizeof side, "%.*s%s", (int)n, paths[0], CP_SIDE_LOG_SUFFIX);
    cp_trace_dir_free(paths, nf);
    fd = open(side, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* the trace's mode */
    st_read_fd(fd, content, sizeof content);
    close(fd);
    assert_int_equal(st_count_lines(content, "collprof: WARN"), 1);
    assert_non_null(strstr(content, "COLLPROF_FLUSH_MS='bogus'"));
    /* and the report says there is one */
    const char *rargv[] = {"report", dir, NULL};
    st_run_prog(&g_res, "collprof", 0, NULL, rargv);
    assert_int_equal(g_res.status, 0);
    assert_non_null(strstr(g_res.out, "could not take: 1 side log in"));
    /* a job that keeps its stderr gets the WARN there, and no side log is made */
    dir_env(d, sizeof d, "kept");
    const char *argv2[] = {"burst", "10", NULL};
    st_run(&g_res, 1, env, argv2);
    assert_int_equal(g_res.status, 0);
    assert_int_equal(st_count_lines(g_res.err, "collprof: WARN"), 1);
    snprintf(dir, sizeof dir, "%s/kept", g_tmp);
    nf = st_list(dir, &paths);
    assert_int_equal(nf, 1);
    n = strlen(paths[0]) - strlen(CP_TRACE_FILE_SUFFIX);
    snprintf(side, sizeof side, "%.*s%s", (int)n, paths[0], CP_SIDE_LOG_SUFFIX);
    cp_trace_dir_free(paths, nf);
    assert_false(st_exists(side));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_jobs_next_open_gets_the_number_it_gets_without_the_shim),
        cmocka_unit_test(a_job_that_fits_its_address_space_limit_alone_fits_under_the_shim),
        cmocka_unit_test(the_shims_lines_never_land_in_a_file_the_job_opened_on_fd_2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
