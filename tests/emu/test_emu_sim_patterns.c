/* collprof-sim's patterns on the emulation, with --check: every result right, and each rank's
 * count line exactly what --help says the pattern issues. Sizes are shrunk with --scale so
 * the whole file runs in seconds. Also: each launcher's identity variables and both
 * rendezvous ways (directory, MASTER_ADDR:MASTER_PORT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tests/emu/test_emu_sim_util.h"
#include "tests/common/test_port_util.h"

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define SCALE "0.001"

enum { AR, AG, RS, BC, RE, A2A, GA, SC, SE, RV, NOPS };

/* "rank 3: 12 nccl calls (AllReduce=.. ... Recv=..)" */
static void count_line(char *out, size_t cap, int rank, const long c[NOPS])
{
    static const char *const names[NOPS] = { "AllReduce", "AllGather", "ReduceScatter",
                                             "Broadcast", "Reduce", "AlltoAll", "Gather",
                                             "Scatter", "Send", "Recv" };
    long total = 0;
    for (int i = 0; i < NOPS; i++)
        total += c[i];
    int n = snprintf(out, cap, "rank %d: %ld nccl calls (", rank, total);
    for (int i = 0; i < NOPS; i++)
        n += snprintf(out + n, cap - (size_t)n, "%s%s=%ld", i ? " " : "", names[i], c[i]);
    snprintf(out + n, cap - (size_t)n, ")\n");
}

/* The calls per rank --help documents for each pattern, `steps` steps on `n` ranks. */
static void expected_counts(const char *pattern, int rank, int n, long steps, long c[NOPS])
{
    memset(c, 0, NOPS * sizeof *c);
    if (!strcmp(pattern, "ddp")) {
        c[BC] = 1;               /* parameters, once */
        c[AR] = 5 * steps;       /* 5 gradient buckets */
    } else if (!strcmp(pattern, "fsdp")) {
        c[AG] = 2 * 12 * steps;  /* 12 units, gathered forward and backward */
        c[RS] = 12 * steps;
    } else if (!strcmp(pattern, "tp")) {
        c[AR] = 2 * 16 * steps;  /* 16 layers, forward and backward */
    } else if (!strcmp(pattern, "pp")) {
        int links = (rank > 0) + (rank < n - 1);
        c[SE] = c[RV] = 8L * links * steps; /* 8 microbatches each way per neighbour */
    } else if (!strcmp(pattern, "moe")) {
        c[A2A] = 4 * 8 * steps;  /* 8 layers, dispatch + combine, forward and backward */
    } else if (!strcmp(pattern, "mixed")) {
        c[AR] = (2 * 8 + 1 + 1) * steps; /* TP per layer both ways, DP replicated, world */
        c[RS] = 2 * steps;
    }
}

static void expect_job(const struct sim_result *r, const char *what, const char *pattern,
                       int n, long steps)
{
    int ok = r->status == 0 && sim_count_lines(r->out, "nccl calls") == n;
    for (int rank = 0; ok && rank < n; rank++) {
        long c[NOPS];
        char line[512];
        expected_counts(pattern, rank, n, steps, c);
        count_line(line, sizeof line, rank, c);
        ok = strstr(r->out, line) != NULL;
        if (!ok)
            fprintf(stderr, "expected: %s", line);
    }
    if (!ok)
        sim_show(what, r);
    assert_true(ok);
}

static void launch(const char *pattern, int n, long steps, const char *const *env)
{
    char ranks[16], nsteps[32];
    snprintf(ranks, sizeof ranks, "%d", n);
    snprintf(nsteps, sizeof nsteps, "%ld", steps);
    struct sim_result r;
    sim_run(&r, env, ARGS("--launch", ranks, "--pattern", pattern, "--steps", nsteps, "--check",
                          "--scale", SCALE, "--timeout", "20"), 50);
    char what[128];
    snprintf(what, sizeof what, "--launch %d --pattern %s --steps %ld --check", n, pattern,
             steps);
    expect_job(&r, what, pattern, n, steps);
    sim_result_free(&r);
}

static void mixed_8_ranks_20_steps_on_2_hosts_checks_out(void **state)
{
    (void)state;
    launch("mixed", 8, 20, ((const char *const[]){ "COLLPROF_EMU_HOSTS=2", NULL }));
}

static void every_pattern_on_4_ranks_checks_out(void **state)
{
    (void)state;
    static const char *const patterns[] = { "ddp", "fsdp", "tp", "pp", "moe", "mixed" };
    for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++)
        launch(patterns[i], 4, 3, NULL);
}

static void one_rank_without_a_launcher(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL, ARGS("--pattern", "ddp", "--steps", "2", "--check", "--scale", SCALE), 30);
    expect_job(&r, "one rank", "ddp", 1, 2);
    sim_result_free(&r);
}

/* Two ranks started by hand with one launcher family's variables; both must finish. */
static void two_ranks_by_hand(const char *what, const char *const env0[],
                              const char *const env1[])
{
    const char *const *args = ARGS("--pattern", "pp", "--steps", "2", "--check", "--scale",
                                   SCALE, "--timeout", "20");
    struct sim_proc p0, p1;
    struct sim_result r0, r1;
    sim_start(&p0, env0, args);
    sim_start(&p1, env1, args);
    sim_finish(&p0, &r0, 40);
    sim_finish(&p1, &r1, 40);
    char both[8192];
    snprintf(both, sizeof both, "%s%s", r0.out, r1.out);
    struct sim_result joined = { r0.status ? r0.status : r1.status, both, r0.err, r0.seconds };
    if (r1.status)
        fprintf(stderr, "rank 1 said:\n%s", r1.err);
    expect_job(&joined, what, "pp", 2, 2);
    sim_result_free(&r0);
    sim_result_free(&r1);
}

static char *rendezvous_dir(void)
{
    const char *base = getenv("TMPDIR");
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/collprof-sim-test-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void remove_rendezvous_dir(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/nccl-unique-id", dir);
    unlink(path);
    rmdir(dir);
}

static void openmpi_pmi_and_slurm_identities(void **state)
{
    (void)state;
    char rdv[600];
    const char *dir = rendezvous_dir();
    snprintf(rdv, sizeof rdv, "COLLPROF_SIM_RENDEZVOUS=%s", dir);
    two_ranks_by_hand("OpenMPI",
                      (const char *const[]){ rdv, "OMPI_COMM_WORLD_RANK=0",
                                             "OMPI_COMM_WORLD_SIZE=2",
                                             "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL },
                      (const char *const[]){ rdv, "OMPI_COMM_WORLD_RANK=1",
                                             "OMPI_COMM_WORLD_SIZE=2",
                                             "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL });
    remove_rendezvous_dir(dir);
    dir = rendezvous_dir();
    snprintf(rdv, sizeof rdv, "COLLPROF_SIM_RENDEZVOUS=%s", dir);
    two_ranks_by_hand("PMI",
                      (const char *const[]){ rdv, "PMI_RANK=0", "PMI_SIZE=2",
                                             "PMI_LOCAL_RANK=0", NULL },
                      (const char *const[]){ rdv, "PMI_RANK=1", "PMI_SIZE=2",
                                             "PMI_LOCAL_RANK=1", NULL });
    remove_rendezvous_dir(dir);
    dir = rendezvous_dir();
    snprintf(rdv, sizeof rdv, "COLLPROF_SIM_RENDEZVOUS=%s", dir);
    two_ranks_by_hand("Slurm",
                      (const char *const[]){ rdv, "SLURM_PROCID=0", "SLURM_NTASKS=2",
                                             "SLURM_LOCALID=0", "SLURM_TASKS_PER_NODE=2(x1)",
                                             NULL },
                      (const char *const[]){ rdv, "SLURM_PROCID=1", "SLURM_NTASKS=2",
                                             "SLURM_LOCALID=1", "SLURM_TASKS_PER_NODE=2(x1)",
                                             NULL });
    remove_rendezvous_dir(dir);
}

static void torchrun_rendezvous_over_master_addr_and_port(void **state)
{
    (void)state;
    char port[32];
    snprintf(port, sizeof port, "MASTER_PORT=%d", tp_free_port());
    two_ranks_by_hand("MASTER_ADDR:MASTER_PORT",
                      (const char *const[]){ "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2",
                                             "MASTER_ADDR=127.0.0.1", port, NULL },
                      (const char *const[]){ "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2",
                                             "MASTER_ADDR=127.0.0.1", port, NULL });
}

static void late_rank_is_late_on_the_host(void **state)
{
    (void)state;
    struct sim_result r;
    /* 11 calls on rank 1, each after 30 ms on the host: the job takes at least 0.33 s */
    sim_run(&r, NULL, ARGS("--launch", "2", "--pattern", "ddp", "--steps", "2", "--scale", SCALE,
                           "--late", "1:30", "--check"), 30);
    expect_job(&r, "--late 1:30", "ddp", 2, 2);
    assert_true(r.seconds >= 0.33);
    sim_result_free(&r);
}

static void stats_line_reports_wall_and_gpu_time(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL, ARGS("--pattern", "tp", "--steps", "2", "--scale", SCALE, "--stats"), 30);
    const char *at = strstr(r.err, "collprof-sim: rank 0: stats: tp, 2 steps, wall ");
    double wall = -1, gpu = -1;
    if (at)
        sscanf(at, "collprof-sim: rank 0: stats: tp, 2 steps, wall %lf s, gpu %lf s", &wall,
               &gpu);
    if (r.status != 0 || wall <= 0 || gpu <= 0)
        sim_show("--stats", &r);
    assert_int_equal(r.status, 0);
    assert_true(wall > 0 && gpu > 0);
    sim_result_free(&r);
}

/* A --mismatch makes that call's results undefined on every rank: --check must not judge it,
 * and the count line shows what was really called. */
static void mismatched_call_is_not_checked_anywhere(void **state)
{
    (void)state;
    struct sim_result r;
    sim_run(&r, NULL, ARGS("--launch", "2", "--pattern", "ddp", "--steps", "2", "--check",
                           "--scale", SCALE, "--timeout", "20", "--mismatch", "1:1:redop=max"),
            30);
    expect_job(&r, "--mismatch 1:1:redop=max", "ddp", 2, 2);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mixed_8_ranks_20_steps_on_2_hosts_checks_out),
        cmocka_unit_test(every_pattern_on_4_ranks_checks_out),
        cmocka_unit_test(one_rank_without_a_launcher),
        cmocka_unit_test(openmpi_pmi_and_slurm_identities),
        cmocka_unit_test(torchrun_rendezvous_over_master_addr_and_port),
        cmocka_unit_test(late_rank_is_late_on_the_host),
        cmocka_unit_test(stats_line_reports_wall_and_gpu_time),
        cmocka_unit_test(mismatched_call_is_not_checked_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
