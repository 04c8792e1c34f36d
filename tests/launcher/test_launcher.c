/* launcher/launcher.h in-process: which launcher's variables win, what a bad one says, and the
 * ncclUniqueId exchange both ways (directory, TCP between a forked rank and this one),
 * including the ways a peer goes missing. collprof-sim's end-to-end use is in
 * tests/emu/test_emu_sim_patterns.c and test_emu_sim_cli.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "launcher/launcher.h"
#include "tests/common/test_port_util.h"

#define RDV_VAR "TEST_LAUNCHER_RENDEZVOUS"

/* What the library said, every line, newline-separated. */
struct said { char text[8192]; int lines; };

static void say_into(void *ctx, const char *line)
{
    struct said *s = ctx;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s\n", line);
    s->lines++;
}

static const char *const all_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE",
    "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
    RDV_VAR,
};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_vars / sizeof *all_vars; i++)
        unsetenv(all_vars[i]);
    return 0;
}

/* name=value pairs, NULL-terminated */
static void set(const char *const *kv)
{
    for (; *kv; kv += 2)
        setenv(kv[0], kv[1], 1);
}
#define SET(...) set((const char *const[]){ __VA_ARGS__, NULL })

static void expect_refused(const char *needle)
{
    struct said s = { "", 0 };
    cp_launcher id;
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), -1);
    assert_int_equal(s.lines, 1);
    if (!strstr(s.text, needle))
        fail_msg("said '%s', expected it to contain '%s'", s.text, needle);
}

static void no_launcher_is_one_rank_of_one(void **state)
{
    (void)state;
    struct said s = { "", 0 };
    cp_launcher id;
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), 0);
    assert_int_equal(s.lines, 0);
    assert_int_equal(id.rank, 0);
    assert_int_equal(id.world, 1);
    assert_int_equal(id.local_rank, 0);
    assert_int_equal(id.local_world, 1);
    assert_string_equal(id.source, "default");
    assert_null(id.rendezvous_dir);
    assert_null(id.master_addr);
    assert_int_equal(id.master_port, 0);
}

static void each_family_is_read(void **state)
{
    (void)state;
    struct said s = { "", 0 };
    cp_launcher id;
    SET("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
        "MASTER_ADDR", "node0", "MASTER_PORT", "29500");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), 0);
    assert_string_equal(id.source, "torchrun");
    assert_int_equal(id.rank, 5);
    assert_int_equal(id.world, 8);
    assert_int_equal(id.local_rank, 1);
    assert_int_equal(id.local_world, 4);
    assert_string_equal(id.master_addr, "node0");
    assert_int_equal(id.master_port, 29500);
    clean_env(NULL);

    SET("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4",
        "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), 0);
    assert_string_equal(id.source, "OpenMPI");
    assert_int_equal(id.rank, 3);
    assert_int_equal(id.local_world, 2);
    assert_string_equal(id.rendezvous_dir, "/tmp/x");
    clean_env(NULL);

    /* PMI: PMI_LOCAL_SIZE unset, MPI_LOCALNRANKS (Cray MPICH) counts */
    SET("PMI_RANK", "2", "PMI_SIZE", "6", "PMI_LOCAL_RANK", "2", "MPI_LOCALNRANKS", "3",
        RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), 0);
    assert_string_equal(id.source, "PMI");
    assert_int_equal(id.local_rank, 2);
    assert_int_equal(id.local_world, 3);
    clean_env(NULL);

    /* Slurm's "4(x2)": this node's count is the leading number */
    SET("SLURM_PROCID", "7", "SLURM_NTASKS", "8", "SLURM_LOCALID", "3",
        "SLURM_TASKS_PER_NODE", "4(x2)", RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, say_into, &s), 0);
    assert_string_equal(id.source, "Slurm");
    assert_int_equal(id.rank, 7);
    assert_int_equal(id.local_rank, 3);
    assert_int_equal(id.local_world, 4);
    assert_int_equal(s.lines, 0);
}

static void first_family_wins_and_gaps_are_filled(void **state)
{
    (void)state;
    cp_launcher id;
    /* torchrun under srun: torchrun's variables describe this process */
    SET("RANK", "1", "WORLD_SIZE", "2", "SLURM_PROCID", "0", "SLURM_NTASKS", "1",
        RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, NULL, NULL), 0);
    assert_string_equal(id.source, "torchrun");
    assert_int_equal(id.rank, 1);
    /* no LOCAL_RANK: the rank; no local size: the world; a local size over the world too */
    assert_int_equal(id.local_rank, 1);
    assert_int_equal(id.local_world, 2);
    SET("LOCAL_WORLD_SIZE", "16");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, NULL, NULL), 0);
    assert_int_equal(id.local_world, 2);
}

static void a_family_without_a_local_rank_takes_the_same_tasks_slurm_one(void **state)
{
    (void)state;
    cp_launcher id;
    /* srun --mpi=pmi2, 4 tasks on each of two nodes: PMI_RANK, PMI_SIZE and Slurm's own */
    SET("PMI_RANK", "6", "PMI_SIZE", "8", "SLURM_PROCID", "6", "SLURM_NTASKS", "8",
        "SLURM_LOCALID", "2", "SLURM_TASKS_PER_NODE", "4(x2)", RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, NULL, NULL), 0);
    assert_string_equal(id.source, "PMI");
    assert_int_equal(id.rank, 6);
    assert_int_equal(id.local_rank, 2);
    assert_int_equal(id.local_world, 4);
    /* the family's own local rank and size still come first */
    SET("PMI_LOCAL_RANK", "1", "MPI_LOCALNRANKS", "2");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, NULL, NULL), 0);
    assert_int_equal(id.local_rank, 1);
    assert_int_equal(id.local_world, 2);
    clean_env(NULL);
    /* an mpiexec's ranks inside an allocation: Slurm's variables are another task's */
    SET("PMI_RANK", "6", "PMI_SIZE", "8", "SLURM_PROCID", "1", "SLURM_NTASKS", "2",
        "SLURM_LOCALID", "0", "SLURM_TASKS_PER_NODE", "1(x2)", RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, RDV_VAR, NULL, NULL), 0);
    assert_int_equal(id.local_rank, 6);
    assert_int_equal(id.local_world, 8);
    /* a malformed SLURM_LOCALID of the same task is refused as any malformed variable */
    SET("SLURM_PROCID", "6", "SLURM_NTASKS", "8", "SLURM_LOCALID", "x");
    expect_refused("SLURM_LOCALID='x' is not a non-negative number");
}

static void bad_variables_are_refused_in_one_line(void **state)
{
    (void)state;
    SET("RANK", "x", "WORLD_SIZE", "2");
    expect_refused("RANK='x' is not a non-negative number");
    SET("RANK", "2");
    expect_refused("RANK=2 is not below WORLD_SIZE=2");
    SET("RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "-1");
    expect_refused("LOCAL_RANK='-1' is not a non-negative number");
    clean_env(NULL);
    SET("OMPI_COMM_WORLD_RANK", "1");
    expect_refused("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    clean_env(NULL);
    SET("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_NTASKS_PER_NODE", "2x", RDV_VAR, "/t");
    expect_refused("SLURM_NTASKS_PER_NODE='2x' is not a non-negative number");
    clean_env(NULL);
    SET("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "70000");
    expect_refused("MASTER_PORT='70000' is not a port number");
    SET("MASTER_PORT", "29500x");
    expect_refused("MASTER_PORT='29500x' is not a port number");
}

static void many_ranks_need_a_way_to_share_the_id(void **state)
{
    (void)state;
    SET("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "MASTER_ADDR", "node0");
    expect_refused("Slurm says 2 ranks but there is no way to share the NCCL id: set "
                   RDV_VAR "=DIR or MASTER_ADDR and MASTER_PORT");
    /* a caller with no directory variable names only the TCP way */
    struct said s = { "", 0 };
    cp_launcher id;
    assert_int_equal(cp_launcher_read(&id, NULL, say_into, &s), -1);
    assert_string_equal(s.text, "Slurm says 2 ranks but there is no way to share the NCCL id: "
                                "set MASTER_ADDR and MASTER_PORT\n");
    SET(RDV_VAR, "/tmp/x");
    assert_int_equal(cp_launcher_read(&id, NULL, say_into, &s), -1);
    SET("MASTER_PORT", "29500");
    assert_int_equal(cp_launcher_read(&id, NULL, say_into, &s), 0);
    assert_null(id.rendezvous_dir);
}

static void fill_uid(ncclUniqueId *uid, unsigned seed)
{
    for (size_t i = 0; i < sizeof uid->internal; i++)
        uid->internal[i] = (char)(seed * 31 + i * 7);
}

static cp_launcher rank_of(int rank, int world, const char *dir, int port)
{
    cp_launcher id = { .rank = rank, .world = world, .local_rank = rank, .local_world = world,
                       .source = "test", .rendezvous_dir = dir,
                       .master_addr = port ? "127.0.0.1" : NULL, .master_port = port };
    return id;
}

static void one_rank_needs_no_rendezvous(void **state)
{
    (void)state;
    struct said s = { "", 0 };
    cp_launcher id = rank_of(0, 1, NULL, 0);
    ncclUniqueId uid, want;
    fill_uid(&uid, 3);
    want = uid;
    assert_int_equal(cp_rendezvous(&id, 0.1, &uid, say_into, &s), 0);
    assert_memory_equal(uid.internal, want.internal, sizeof want.internal);
    assert_int_equal(s.lines, 0);
}

static void directory_carries_the_id(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_launcher_XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    struct said s = { "", 0 };
    ncclUniqueId sent, got;
    fill_uid(&sent, 1);
    memset(&got, 0, sizeof got);

    /* nobody published: one line by the timeout, not a wait */
    cp_launcher r1 = rank_of(1, 2, dir, 0);
    assert_int_equal(cp_rendezvous(&r1, 0.05, &got, say_into, &s), -1);
    assert_non_null(strstr(s.text, "rank 0 did not publish the NCCL id in"));
    assert_non_null(strstr(s.text, "within 0.05 s"));

    cp_launcher r0 = rank_of(0, 2, dir, 0);
    assert_int_equal(cp_rendezvous(&r0, 1, &sent, say_into, &s), 0);
    assert_int_equal(cp_rendezvous(&r1, 1, &got, say_into, &s), 0);
    assert_memory_equal(got.internal, sent.internal, sizeof sent.internal);
    assert_int_equal(s.lines, 1);

    /* a file that is not an id is said to be one, not taken as one */
    snprintf(path, sizeof path, "%s/nccl-unique-id", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("short", f);
    fclose(f);
    s.text[0] = '\0';
    assert_int_equal(cp_rendezvous(&r1, 1, &got, say_into, &s), -1);
    assert_non_null(strstr(s.text, "holds 5 bytes, not an NCCL id of 128"));
    unlink(path);

    /* rank 0 cannot write there */
    s.text[0] = '\0';
    cp_launcher nowhere = rank_of(0, 2, "/nonexistent/test_launcher", 0);
    assert_int_equal(cp_rendezvous(&nowhere, 1, &sent, say_into, &s), -1);
    assert_non_null(strstr(s.text, "cannot publish the NCCL id in '/nonexistent/test_launcher'"));
    rmdir(dir);
}

/* A forked rank fetches the id over TCP and exits 0 when it got `want`, 1 on a wrong id, 2 when
 * the fetch failed. */
static pid_t fetch_in_child(int rank, int world, int port, const ncclUniqueId *want)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cp_launcher id = rank_of(rank, world, NULL, port);
        ncclUniqueId got;
        memset(&got, 0, sizeof got);
        if (cp_rendezvous(&id, 5, &got, NULL, NULL))
            _exit(2);
        _exit(memcmp(got.internal, want->internal, sizeof got.internal) ? 1 : 0);
    }
    return pid;
}

static int exit_code(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void tcp_carries_the_id_to_every_rank(void **state)
{
    (void)state;
    int port = tp_free_port();
    ncclUniqueId sent;
    fill_uid(&sent, 2);
    /* ranks 1 and 2 start first and retry until rank 0 listens */
    pid_t a = fetch_in_child(1, 3, port, &sent), b = fetch_in_child(2, 3, port, &sent);
    usleep(100 * 1000);
    struct said s = { "", 0 };
    cp_launcher r0 = rank_of(0, 3, NULL, port);
    assert_int_equal(cp_rendezvous(&r0, 5, &sent, say_into, &s), 0);
    assert_int_equal(s.lines, 0);
    assert_int_equal(exit_code(a), 0);
    assert_int_equal(exit_code(b), 0);
}

static void torchrun_agent_store_moves_the_port(void **state)
{
    (void)state;
    int port = tp_free_port();
    ncclUniqueId sent;
    fill_uid(&sent, 4);
    /* the agent holds MASTER_PORT: both ends must meet on the next one */
    SET("TORCHELASTIC_USE_AGENT_STORE", "True");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(fd, 4), 0);
    pid_t a = fetch_in_child(1, 2, port, &sent);
    struct said s = { "", 0 };
    cp_launcher r0 = rank_of(0, 2, NULL, port);
    int rc = cp_rendezvous(&r0, 5, &sent, say_into, &s);
    close(fd);
    if (rc)
        fail_msg("rank 0 said: %s (port %d+1 may have been taken)", s.text, port);
    assert_int_equal(exit_code(a), 0);
}

static void missing_ranks_are_said_by_the_timeout(void **state)
{
    (void)state;
    int port = tp_free_port();
    ncclUniqueId uid;
    fill_uid(&uid, 5);
    struct said s = { "", 0 };
    /* nobody serves: the refusal, not the deadline's own timeout, is what is said */
    cp_launcher r1 = rank_of(1, 2, NULL, port);
    assert_int_equal(cp_rendezvous(&r1, 0.2, &uid, say_into, &s), -1);
    assert_int_equal(s.lines, 1);
    char want[128];
    snprintf(want, sizeof want, "no NCCL id from rank 0 at 127.0.0.1:%d within 0.2 s: "
             "Connection refused", port);
    assert_non_null(strstr(s.text, want));

    /* nobody fetches; a rank of another job size is named and ignored */
    pid_t stray = fetch_in_child(1, 4, port, &uid);
    s.text[0] = '\0';
    s.lines = 0;
    cp_launcher r0 = rank_of(0, 2, NULL, port);
    assert_int_equal(cp_rendezvous(&r0, 0.5, &uid, say_into, &s), -1);
    snprintf(want, sizeof want, "a rank at 127.0.0.1:%d says rank 1 of 4, but this job has 2 "
             "ranks; ignored", port);
    if (!strstr(s.text, want))
        fail_msg("said '%s'", s.text);
    snprintf(want, sizeof want, "1 of 1 ranks did not fetch the NCCL id from 127.0.0.1:%d "
             "within 0.5 s", port);
    assert_non_null(strstr(s.text, want));
    kill(stray, SIGKILL);
    waitpid(stray, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(no_launcher_is_one_rank_of_one, clean_env),
        cmocka_unit_test_setup(each_family_is_read, clean_env),
        cmocka_unit_test_setup(first_family_wins_and_gaps_are_filled, clean_env),
        cmocka_unit_test_setup(a_family_without_a_local_rank_takes_the_same_tasks_slurm_one,
                               clean_env),
        cmocka_unit_test_setup(bad_variables_are_refused_in_one_line, clean_env),
        cmocka_unit_test_setup(many_ranks_need_a_way_to_share_the_id, clean_env),
        cmocka_unit_test_setup(one_rank_needs_no_rendezvous, clean_env),
        cmocka_unit_test_setup(directory_carries_the_id, clean_env),
        cmocka_unit_test_setup(tcp_carries_the_id_to_every_rank, clean_env),
        cmocka_unit_test_setup(torchrun_agent_store_moves_the_port, clean_env),
        cmocka_unit_test_setup(missing_ranks_are_said_by_the_timeout, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
