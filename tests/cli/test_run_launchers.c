/* `collprof run` under the launchers people run it with: Open MPI's mpirun, and Slurm's srun
 * on a one-node Slurm this test starts in its temp directory (tests/common/test_slurm_util.h).
 * Each starts four collprof-sim ranks on the emulation, two ways: collprof run around the
 * launcher (--dir, the id over MASTER_ADDR:MASTER_PORT), and the launcher around collprof run
 * (no --dir: every rank's collprof run must pick the same ./collprof-<jobid> from the
 * launcher's job id; the id through a shared directory). Each trace's identity must be what
 * that launcher's own variables say (launcher, rank, world, local rank, job id; the
 * environment holds no other launcher's), NCCL's rank and device must agree with it, and
 * `collprof report --json` must read one job of four ranks on one host, every call matched,
 * nothing lost, each rank's call count the one the rank printed. srun also runs with
 * --mpi=pmi2, whose tasks get PMI's rank and size but no local rank.
 *
 * Built once per launcher (CP_TEST_LAUNCHER "mpirun" or "srun"): one ctest each, so that each
 * says why and exits 77 (skipped) when its launcher is not installed or its daemons cannot
 * start here, never passing without having run. */
#include <json-c/json.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/cli/test_cli_util.h"
#include "tests/common/test_slurm_util.h"
#include "tests/emu/test_emu_sim_util.h"
#include "tests/preload/shim_test_util.h"

#ifndef CP_TEST_LAUNCHER
#error "CP_TEST_LAUNCHER must be \"mpirun\" or \"srun\""
#endif

#define RANKS 4
#ifdef CP_TEST_SANITIZE
#define JOB_TIMEOUT_S 240.0
#else
#define JOB_TIMEOUT_S 120.0
#endif

static const char *const g_launcher = CP_TEST_LAUNCHER;
static char g_bin[PATH_MAX];   /* its path */
static char *g_base;           /* the test's directory: jobs, traces, the Slurm cluster */
static struct ts_cluster g_cluster;
static int g_jobs;             /* jobs started, to name their directories */
static int g_pmi2;             /* srun --mpi=pmi2: the ranks get PMI's variables too */

/* The launcher's name in the trace header (preload/identity.c): PMI's variables come before
 * Slurm's, since under an mpiexec inside an allocation only they are the rank's. */
static const char *header_launcher(void)
{
    return !strcmp(g_launcher, "mpirun") ? "openmpi" : g_pmi2 ? "pmi" : "slurm";
}

/* Appends the launcher and its options for RANKS ranks on this host; `export` is the
 * rendezvous variable the ranks need, which mpirun is told to pass on, as it must be told on
 * more than one node. */
static size_t add_launcher(const char **a, size_t n, const char *export)
{
    a[n++] = g_bin;
    if (!strcmp(g_launcher, "mpirun")) {
        if (geteuid() == 0)
            a[n++] = "--allow-run-as-root";
        /* two cores here: four ranks oversubscribe them, and binding would pin two ranks to
         * one core for the whole job */
        a[n++] = "-np";
        a[n++] = "4";
        a[n++] = "--oversubscribe";
        a[n++] = "--bind-to";
        a[n++] = "none";
        a[n++] = "-x";
        a[n++] = export;
        if (!strcmp(export, "MASTER_ADDR")) {
            a[n++] = "-x";
            a[n++] = "MASTER_PORT";
        }
    } else {
        a[n++] = "-N1";
        a[n++] = "-n4";
        /* one rank failing ends the step rather than leaving the others to their timeout */
        a[n++] = "--kill-on-bad-exit=1";
        a[n++] = "--time=5";
        if (g_pmi2)
            a[n++] = "--mpi=pmi2";
    }
    return n;
}

static size_t add_sim(const char **a, size_t n)
{
    static char sim[PATH_MAX];
    snprintf(sim, sizeof sim, "%s/bin/collprof-sim", sim_build_dir());
    /* mixed: communicators split by LOCAL_WORLD_SIZE, which each launcher says its own way */
    static const char *const args[] = {"--pattern", "mixed", "--steps", "3", "--scale",
                                       "0.001", "--check", "--timeout", "60", NULL};
    a[n++] = sim;
    for (int i = 0; args[i]; i++)
        a[n++] = args[i];
    return n;
}

/* The job's environment beyond sim_start_cmd's: live blocks and Open MPI's session directory
 * in the test's directory, the ASan runtime ahead of the ASan-built shim, and `rdv`. */
static void job_env(const char **env, char (*buf)[PATH_MAX + 64], const char *rdv, int port)
{
    size_t n = 0;
    snprintf(buf[0], sizeof buf[0], "COLLPROF_LIVE_DIR=%s/live", g_base);
    env[n++] = buf[0];
    snprintf(buf[1], sizeof buf[1], "TMPDIR=%s", g_base);
    env[n++] = buf[1];
    if (rdv) {
        snprintf(buf[2], sizeof buf[2], "COLLPROF_SIM_RENDEZVOUS=%s", rdv);
        env[n++] = buf[2];
    } else {
        env[n++] = "MASTER_ADDR=127.0.0.1";
        snprintf(buf[2], sizeof buf[2], "MASTER_PORT=%d", port);
        env[n++] = buf[2];
    }
#ifdef CP_TEST_ASAN_RUNTIME
    /* LD_PRELOAD reaches every process of the job, mpirun and srun included: their leaks
     * are not ours to judge (the shim's are, in tests/preload). */
    env[n++] = "LD_PRELOAD=" CP_TEST_ASAN_RUNTIME;
    env[n++] = "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0";
#endif
    env[n] = NULL;
}

static void run_job(struct sim_result *r, const char *const *argv, const char *const *env,
                    const char *cwd)
{
    char here[PATH_MAX];
    assert_non_null(getcwd(here, sizeof here));
    assert_int_equal(chdir(cwd), 0);
    struct sim_proc p;
    sim_start_cmd(&p, env, argv);
    assert_int_equal(chdir(here), 0);
    sim_finish(&p, r, JOB_TIMEOUT_S);
    if (!strcmp(g_launcher, "srun"))
        g_cluster.next_job_id++;
    fprintf(stderr, "%s job: exit %d after %.1f s\n", g_launcher, r->status, r->seconds);
    if (r->status != 0) {
        sim_show(g_launcher, r);
        fail_msg("the job under %s exited %d", g_launcher, r->status);
    }
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no \"%s\" in the report", key);
    return v;
}

/* The calls rank r said it made ("rank R: N nccl calls"), -1 when it said nothing. */
static int said_calls(const char *out, int rank)
{
    char want[32];
    snprintf(want, sizeof want, "rank %d: ", rank);
    for (const char *p = out; (p = strstr(p, want)) != NULL; p++) {
        int n;
        if ((p == out || p[-1] == '\n') && sscanf(p + strlen(want), "%d nccl calls", &n) == 1)
            return n;
    }
    return -1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The four traces in dir: identity from the launcher, one job id (copied to job_id), NCCL's
 * rank and device the launcher's; then the report of the job. */
static void check_job(const char *dir, const struct sim_result *r, char *job_id, size_t cap)
{
    char **paths = NULL;
    int n = st_list(dir, &paths);
    if (n != RANKS) {
        sim_show(g_launcher, r);
        fail_msg("%d trace files in %s, want %d", n, dir, RANKS);
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int seen[RANKS] = {0};
    job_id[0] = '\0';
    for (int i = 0; i < n; i++) {
        trace_seen s;
        assert_int_equal(st_read_trace(paths[i], &s), 0);
        const cp_file_header *h = &s.header;
        fprintf(stderr, "%s: launcher %s rank %d local %d world %d job %s\n", paths[i],
                h->launcher, h->rank, h->local_rank, h->world_size, h->job_id);
        assert_string_equal(h->launcher, header_launcher());
        assert_int_equal(h->world_size, RANKS);
        assert_true(h->rank >= 0 && h->rank < RANKS);
        assert_int_equal(seen[h->rank]++, 0);
        assert_int_equal(h->local_rank, h->rank); /* one host */
        assert_string_equal(h->hostname, host);
        if (!job_id[0])
            snprintf(job_id, cap, "%s", h->job_id);
        assert_string_equal(h->job_id, job_id);
        /* the file is named by the same rank */
        char name[64];
        snprintf(name, sizeof name, "/rank%05d-", h->rank);
        assert_non_null(strstr(paths[i], name));
        /* collprof-sim read the same variables: its world communicator's rank is the
         * header's, its device the local rank's */
        int world_comms = 0;
        for (size_t c = 0; c < s.ncomms; c++)
            if (s.comms[c].nranks == RANKS && s.comms[c].parent_id == 0) {
                world_comms++;
                assert_int_equal(s.comms[c].rank, h->rank);
                assert_int_equal(s.comms[c].cuda_dev, h->local_rank);
            }
        assert_int_equal(world_comms, 1);
        assert_int_equal(s.nend, 1);
        st_free_trace(&s);
    }
    cp_trace_dir_free(paths, n);
    /* OMPI_MCA_ess_base_jobid and SLURM_JOB_ID are numbers; the fallback is a time stamp */
    if (!all_digits(job_id))
        fail_msg("job id '%s' is not the launcher's", job_id);
    if (!strcmp(g_launcher, "srun")) {
        char want[32];
        snprintf(want, sizeof want, "%d", g_cluster.next_job_id - 1);
        assert_string_equal(job_id, want);
    }

    struct cli_result rep;
    cli_runl(&rep, "report", "--json", dir, NULL);
    assert_int_equal(rep.status, 0);
    json_object *o = json_tokener_parse(rep.out);
    if (!o)
        fail_msg("report --json printed no JSON: %s", rep.err);
    json_object *job = get(o, "job");
    assert_int_equal(json_object_get_int(get(job, "ranks")), RANKS);
    json_object *hosts = get(job, "hosts");
    assert_int_equal(json_object_array_length(hosts), 1);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(hosts, 0)), host);
    assert_int_equal(json_object_get_int64(get(job, "lost_records")), 0);
    assert_int_equal(json_object_get_int64(get(job, "unmatched_calls")), 0);
    assert_true(json_object_get_int64(get(job, "operations")) > 0);
    assert_int_equal(json_object_array_length(get(o, "hangs")), 0);
    assert_int_equal(json_object_array_length(get(o, "mismatches")), 0);
    json_object *warnings = get(o, "warnings");
    if (json_object_array_length(warnings) != 0)
        fail_msg("report warnings: %s", json_object_to_json_string(warnings));
    json_object *per_rank = get(o, "per_rank");
    assert_int_equal(json_object_array_length(per_rank), RANKS);
    int64_t total = 0;
    for (size_t i = 0; i < RANKS; i++) {
        json_object *pr = json_object_array_get_idx(per_rank, i);
        int rank = json_object_get_int(get(pr, "rank"));
        int said = said_calls(r->out, rank);
        int64_t calls = json_object_get_int64(get(pr, "calls"));
        if (said <= 0 || calls != said)
            fail_msg("rank %d: %lld calls in the report, the rank said %d:\n%s", rank,
                     (long long)calls, said, r->out);
        assert_true(json_object_get_boolean(get(pr, "ended")));
        total += calls;
    }
    assert_int_equal(json_object_get_int64(get(job, "calls")), total);
    json_object_put(o);
    cli_result_free(&rep);
}

/* A fresh directory for job number g_jobs: base/<what>-<n>. */
static void job_dir(char *out, size_t cap, const char *what)
{
    int n = snprintf(out, cap, "%s/%s-%d", g_base, what, g_jobs);
    assert_true(n > 0 && (size_t)n < cap);
    assert_int_equal(mkdir(out, 0755), 0);
}

/* collprof run -- <launcher> ... collprof-sim: one profiler for the whole job, --dir. */
static void run_around_the_launcher(void)
{
    g_jobs++;
    char cwd[PATH_MAX], dir[PATH_MAX + 16];
    job_dir(cwd, sizeof cwd, "cwd");
    snprintf(dir, sizeof dir, "%s/trace", cwd);
    const char *argv[64] = {cli_binary(), "run", "--dir", dir, "--"};
    size_t n = add_launcher(argv, 5, "MASTER_ADDR");
    n = add_sim(argv, n);
    argv[n] = NULL;
    const char *env[16];
    char buf[4][PATH_MAX + 64];
    job_env(env, buf, NULL, tp_free_port());
    struct sim_result r;
    run_job(&r, argv, env, cwd);
    char job_id[CP_JOBID_BYTES];
    check_job(dir, &r, job_id, sizeof job_id);
    /* one collprof run: one closing line */
    char said[PATH_MAX + 64];
    snprintf(said, sizeof said, "collprof: trace in '%s'", dir);
    assert_int_equal(st_count_lines(r.err, said), 1);
    sim_result_free(&r);
}

static void collprof_run_around_the_launcher(void **state)
{
    (void)state;
    run_around_the_launcher();
}

/* srun --mpi=pmi2 gives each task PMI_RANK and PMI_SIZE but no PMI_LOCAL_RANK: the local
 * rank is still this task's SLURM_LOCALID, as Slurm's rank and size say the same task. */
static void srun_with_pmi2(void **state)
{
    (void)state;
    g_pmi2 = 1;
    run_around_the_launcher();
    g_pmi2 = 0;
}

/* <launcher> ... collprof run -- collprof-sim: each rank's collprof run chooses the
 * directory itself, and all four must choose ./collprof-<the launcher's job id>. */
static void the_launcher_around_collprof_run(void **state)
{
    (void)state;
    g_jobs++;
    char cwd[PATH_MAX], rdv[PATH_MAX];
    job_dir(cwd, sizeof cwd, "cwd");
    job_dir(rdv, sizeof rdv, "rendezvous");
    const char *argv[64];
    size_t n = add_launcher(argv, 0, "COLLPROF_SIM_RENDEZVOUS");
    argv[n++] = cli_binary();
    argv[n++] = "run";
    argv[n++] = "--";
    n = add_sim(argv, n);
    argv[n] = NULL;
    const char *env[16];
    char buf[4][PATH_MAX + 64];
    job_env(env, buf, rdv, 0);
    struct sim_result r;
    run_job(&r, argv, env, cwd);

    /* the only thing the job left in its working directory */
    DIR *d = opendir(cwd);
    assert_non_null(d);
    char entry[256] = "";
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            entries++;
            snprintf(entry, sizeof entry, "%s", e->d_name);
        }
    closedir(d);
    if (entries != 1)
        fail_msg("%d entries in the job's working directory %s, want one", entries, cwd);
    char dir[PATH_MAX + 256], job_id[CP_JOBID_BYTES], want[CP_JOBID_BYTES + 16];
    snprintf(dir, sizeof dir, "%s/%s", cwd, entry);
    check_job(dir, &r, job_id, sizeof job_id);
    snprintf(want, sizeof want, "collprof-%s", job_id);
    assert_string_equal(entry, want);
    /* the directory as run made it absolute, before the job started */
    char said[PATH_MAX + 512];
    snprintf(said, sizeof said, "collprof: trace in '%s'", dir);
    assert_int_equal(st_count_lines(r.err, said), RANKS);
    sim_result_free(&r);
}

/* Neither another launcher's variables nor an outer Slurm job's may reach the jobs (srun
 * would take an outer job id for an allocation of our cluster). */
static void scrub_launchers(void)
{
    static const char *const prefixes[] = {"SLURM_", "OMPI_", "PMIX_", "PMI_", "TORCHELASTIC_"};
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e && !again; e++)
            for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
                if (!strncmp(*e, prefixes[i], strlen(prefixes[i]))) {
                    char name[256];
                    size_t len = strcspn(*e, "=");
                    if (len >= sizeof name)
                        break;
                    memcpy(name, *e, len);
                    name[len] = '\0';
                    unsetenv(name); /* environ changed: start over */
                    again = 1;
                    break;
                }
    }
    for (int i = 0; sim_scrubbed_env[i]; i++)
        unsetenv(sim_scrubbed_env[i]);
    unsetenv("COLLPROF_DIR");
    unsetenv("LD_PRELOAD");
}

/* mpirun can start nothing on this machine: its first line. 0 when it ran. */
static int mpirun_cannot_run(char *why, size_t cap)
{
    const char *argv[8] = {g_bin};
    size_t n = 1;
    if (geteuid() == 0)
        argv[n++] = "--allow-run-as-root";
    argv[n++] = "-np";
    argv[n++] = "1";
    argv[n++] = "true";
    argv[n] = NULL;
    struct sim_proc p;
    struct sim_result r;
    sim_start_cmd(&p, NULL, argv);
    sim_finish(&p, &r, 60);
    int bad = r.status != 0;
    if (bad) {
        const char *text = r.err[0] ? r.err : r.out;
        text += strspn(text, "-\n ");
        snprintf(why, cap, "'mpirun -np 1 true' exited %d: %.*s", r.status,
                 (int)strcspn(text, "\n"), text);
    }
    sim_result_free(&r);
    return bad;
}

int main(void)
{
    scrub_launchers();
    if (ts_which(g_launcher, g_bin, sizeof g_bin) != 0) {
        printf("%s: skipped: no %s in PATH (Debian: %s)\n", g_launcher, g_launcher,
               !strcmp(g_launcher, "mpirun") ? "openmpi-bin" : "slurm-wlm");
        return 77;
    }
    g_base = cli_tmpdir();
    char live[PATH_MAX];
    snprintf(live, sizeof live, "%s/live", g_base);
    mkdir(live, 0755);
    char why[1024] = "";
    if (!strcmp(g_launcher, "mpirun")) {
        setenv("TMPDIR", g_base, 1); /* the probe's session directory too */
        if (mpirun_cannot_run(why, sizeof why)) {
            printf("mpirun: skipped: %s\n", why);
            cli_rmtree(g_base);
            return 77;
        }
    } else if (ts_cluster_start(&g_cluster, g_base, 60) != 0) {
        printf("srun: skipped: cannot start a one-node Slurm here: %s\n", g_cluster.why);
        ts_cluster_stop(&g_cluster);
        cli_rmtree(g_base);
        return 77;
    }
    const struct CMUnitTest mpirun_tests[] = {
        cmocka_unit_test(collprof_run_around_the_launcher),
        cmocka_unit_test(the_launcher_around_collprof_run),
    };
    const struct CMUnitTest srun_tests[] = {
        cmocka_unit_test(collprof_run_around_the_launcher),
        cmocka_unit_test(the_launcher_around_collprof_run),
        cmocka_unit_test(srun_with_pmi2),
    };
    int failed = !strcmp(g_launcher, "mpirun")
                     ? cmocka_run_group_tests_name("mpirun", mpirun_tests, NULL, NULL)
                     : cmocka_run_group_tests_name("srun", srun_tests, NULL, NULL);
    if (!strcmp(g_launcher, "srun"))
        ts_cluster_stop(&g_cluster);
    cli_rmtree(g_base);
    free(g_base);
    return failed ? 1 : 0;
}
