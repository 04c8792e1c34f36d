/* NCCL's INFO lines as the emulation writes them (NCCL_DEBUG=INFO, NCCL_DEBUG_FILE with %h
 * and %p, NCCL_DEBUG_SUBSYS): the version, the network, each channel's transport (P2P over
 * NVLink, IB with GPUDirect RDMA or sockets between emulated hosts, SHM when P2P is
 * disabled), the Init COMPLETE identity line; and /dev/shm left clean, even after a job
 * whose ranks were killed. Each rank checks its own log file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

#include "tests/emu/test_emu_nccl_util.h"

static char logdir[256];

typedef struct log_job {
    int per_host;          /* ranks per emulated host (placed with COLLPROF_EMU_HOST_ID) */
    int socket;            /* NET/Socket expected between hosts */
    int shm;               /* NCCL_P2P_DISABLE=1: SHM expected within a host */
    int quiet;             /* NCCL_DEBUG_SUBSYS excludes INIT: no channel lines */
    int pcie;              /* pcie-4: P2P within a PCIe switch, SHM across the sockets */
    int ib_line;           /* 1: "NET/IB : No device found." expected; 2: no NET/IB line */
    int net_local;         /* P2P and SHM disabled: the network even within a host */
} log_job;

static const char *bus_ids[] = {"18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"};
static const char *pcie_bus_ids[] = {"1000", "2000", "81000", "82000"};

/* NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log: this rank's file, named after its emulated host
 * (cut at the first '.', as NCCL cuts it) and its pid. */
static char *read_own_log(int host)
{
    struct utsname u;
    syscall(SYS_uname, &u);
    char name[300], path[600];
    snprintf(name, sizeof name, "%s-emu%d", u.nodename, host);
    name[strcspn(name, ".")] = '\0';
    snprintf(path, sizeof path, "%s/nccl.%s.%d.log", logdir, name, (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#define HAS(text, ...)                                                                       \
    do {                                                                                     \
        char want_[512];                                                                     \
        snprintf(want_, sizeof want_, __VA_ARGS__);                                          \
        TN_CHECK(strstr(text, want_) != NULL, "rank %d: no line with '%s' in:\n%s", me,      \
                 want_, text);                                                               \
    } while (0)

static int log_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    const log_job *j = arg;
    int host = me / j->per_host, dev = me % j->per_host;
    char hostid[16];
    snprintf(hostid, sizeof hostid, "%d", host);
    setenv("COLLPROF_EMU_HOST_ID", hostid, 1);   /* what the launcher of host `host` sets */
    CUstream s;
    if (tn_device(dev, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    TN_NCCL(ncclCommDestroy(comm));
    char *text = read_own_log(host);
    TN_CHECK(text != NULL, "rank %d: no log file named after its host and pid in %s", me, logdir);
    struct utsname u;
    syscall(SYS_uname, &u);
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s-emu%d:%d:", u.nodename, host, (int)getpid());
    prefix[strcspn(prefix, ".")] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        TN_CHECK(strncmp(line, prefix, strlen(prefix)) == 0, "line without '%s': %s", prefix,
                 line);
        char *p = line + strlen(prefix);
        int tid, d;
        char rest[16];
        TN_CHECK(sscanf(p, "%d [%d] NCCL %4s", &tid, &d, rest) == 3 && tid > 0 && d == dev &&
                     strcmp(rest, "INFO") == 0,
                 "bad shape: %s", line);
    }
    free(text);
    text = read_own_log(host);
    if (j->quiet) {
        TN_CHECK(strstr(text, "Channel") == NULL && strstr(text, "Init COMPLETE") == NULL,
                 "INIT lines despite NCCL_DEBUG_SUBSYS: %s", text);
        free(text);
        return 0;
    }
    if (me == 0)
        HAS(text, "NCCL INFO NCCL version 2.28.9+cuda13.0");
    HAS(text, "NCCL INFO ncclCommInitRank comm 0x");
    HAS(text, " rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId 0x%llx - Init COMPLETE",
        me, n, dev, dev, j->pcie ? pcie_bus_ids[dev] : bus_ids[dev],
        (unsigned long long)tn_nccl_hash(id->internal, NCCL_UNIQUE_ID_BYTES));
    int nhosts = (n + j->per_host - 1) / j->per_host;
    if (j->ib_line == 1)   /* the IB plugin found no usable HCA, then sockets took over */
        HAS(text, "NCCL INFO NET/IB : No device found.");
    if (j->ib_line == 2)   /* NCCL_IB_DISABLE: the IB plugin quits without a word */
        TN_CHECK(strstr(text, "NET/IB") == NULL, "an IB line despite NCCL_IB_DISABLE");
    if (j->socket) {
        HAS(text, "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.%d<0>", host + 1);
        HAS(text, "NCCL INFO Using network Socket");
    } else {
        HAS(text, "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB");
        HAS(text, "[7]mlx5_7:1/IB ; OOB eth0:10.0.0.%d<0>", host + 1);
        HAS(text, "NCCL INFO Using network IB");
    }
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    int nd = next % j->per_host, pd = prev % j->per_host;
    if (next / j->per_host == host && j->net_local) {
        HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/IB/0/GDRDMA\n", me, dev, next,
            nd);
        HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] [receive] via NET/IB/0/GDRDMA\n", prev, pd,
            me, dev);
    } else if (next / j->per_host == host) {
        if (j->pcie && dev / 2 == nd / 2)
            HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] via P2P/CUMEM\n", me, dev, next, nd);
        else if (j->shm || j->pcie)
            HAS(text, "Channel 00 : %d[%d] -> %d[%d] via SHM/direct/direct", me, dev, next, nd);
        else
            HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", me, dev, next, nd);
    } else if (nhosts > 1) {
        HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/%s", me, dev, next, nd,
            j->socket ? "Socket/0\n" : "IB/0/GDRDMA\n");
    }
    if (prev / j->per_host != host && nhosts > 1)
        HAS(text, "Channel 00/0 : %d[%d] -> %d[%d] [receive] via NET/%s", prev, pd, me, dev,
            j->socket ? "Socket/0\n" : "IB/0/GDRDMA\n");
    free(text);
    return 0;
}

static int run_log_job(const char *const *extra, int nranks, log_job *j)
{
    char file[300];
    snprintf(file, sizeof file, "NCCL_DEBUG_FILE=%s/nccl.%%h.%%p.log", logdir);
    const char *env[12] = {"NCCL_DEBUG=INFO", file};
    int k = 2;
    for (int i = 0; extra && extra[i] && k < 11; i++)
        env[k++] = extra[i];
    env[k] = NULL;
    return tn_job(env, nranks, log_rank, j, 60);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(logdir, sizeof logdir, "/tmp/collprof-emunccl-log-%d", (int)getpid());
    mkdir(logdir, 0700);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void info_lines_name_p2p_within_hosts_and_ib_between(void **state)
{
    (void)state;
    log_job j = {4, 0, 0, 0, 0, 0, 0};
    const char *env[] = {"COLLPROF_EMU_HOSTS=2", NULL};
    assert_int_equal(run_log_job(env, 8, &j), 0);
}

static void info_lines_show_the_socket_fallback(void **state)
{
    (void)state;
    log_job j = {2, 1, 0, 0, 0, 1, 0};
    const char *net[] = {"COLLPROF_EMU_HOSTS=2", "COLLPROF_EMU_NET=socket", NULL};
    assert_int_equal(run_log_job(net, 4, &j), 0);
    j.ib_line = 2;
    const char *noib[] = {"COLLPROF_EMU_HOSTS=2", "NCCL_IB_DISABLE=1", NULL};
    assert_int_equal(run_log_job(noib, 4, &j), 0);
}

static void p2p_disabled_falls_back_to_shm_then_net(void **state)
{
    (void)state;
    log_job j = {4, 0, 1, 0, 0, 0, 0};
    const char *env[] = {"NCCL_P2P_DISABLE=1", NULL};
    assert_int_equal(run_log_job(env, 4, &j), 0);
    /* and with SHM disabled too, NCCL goes through the network even within a host */
    log_job net = {4, 0, 0, 0, 0, 0, 1};
    const char *both[] = {"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", NULL};
    assert_int_equal(run_log_job(both, 2, &net), 0);
}

static void pcie_uses_p2p_under_a_switch_and_shm_across_sockets(void **state)
{
    (void)state;
    log_job j = {4, 1, 0, 0, 1, 1, 0};
    const char *env[] = {"COLLPROF_EMU_TOPO=pcie-4", NULL};
    assert_int_equal(run_log_job(env, 4, &j), 0);
}

static void debug_subsys_filters_lines(void **state)
{
    (void)state;
    log_job j = {4, 0, 0, 1, 0, 0, 0};
    const char *env[] = {"NCCL_DEBUG_SUBSYS=ENV", NULL};
    assert_int_equal(run_log_job(env, 2, &j), 0);
}

static int noop_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)me, (void)n, (void)id, (void)arg;
    return 0;
}

static void socket_ifname_is_honoured(void **state)
{
    (void)state;
    const char *none[] = {"NCCL_SOCKET_IFNAME=ib", NULL};
    /* no interface: ncclGetUniqueId fails (the launcher reports it with status 100) */
    assert_int_equal(tn_job(none, 1, noop_rank, NULL, 30), 100);
    const char *exact[] = {"NCCL_SOCKET_IFNAME==eth0", NULL};
    assert_int_equal(tn_job(exact, 1, noop_rank, NULL, 30), 0);
}

/* ---- /dev/shm ---- */

static int clean_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    char path[128];
    tn_segment_path(id, path, sizeof path);
    /* every rank attached, so the name is already gone */
    TN_CHECK(access(path, F_OK) != 0, "%s still there after init", path);
    int v = 1, sum;
    TN_NCCL(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static char killed_path[300];

static int killed_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    if (me == n - 1)
        return 0;   /* this rank never comes */
    char path[128];
    tn_segment_path(id, path, sizeof path);
    FILE *f = fopen(killed_path, "w");
    if (f) {
        fputs(path, f);
        fclose(f);
    }
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm;
    ncclCommInitRankConfig(&comm, n, *id, me, &cfg);
    tn_sleep_ms(200);
    raise(SIGKILL);   /* killed mid-job, waiting for its peer */
    return 1;
}

static void no_segment_is_left_behind(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(4, clean_rank, NULL, 60), 0);
    /* a job whose ranks die before the last one arrived leaves its segment... */
    snprintf(killed_path, sizeof killed_path, "%s/killed-segment", logdir);
    assert_int_equal(tn_run_ranks(3, killed_rank, NULL, 60), 2);
    char seg[256] = "";
    FILE *f = fopen(killed_path, "r");
    assert_non_null(f);
    assert_non_null(fgets(seg, sizeof seg, f));
    fclose(f);
    assert_int_equal(access(seg, F_OK), 0);
    /* ...which wedges nothing: the next job runs, and its ncclGetUniqueId removes it */
    assert_int_equal(tn_run_ranks(2, clean_rank, NULL, 60), 0);
    assert_int_not_equal(access(seg, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(info_lines_name_p2p_within_hosts_and_ib_between),
        cmocka_unit_test(info_lines_show_the_socket_fallback),
        cmocka_unit_test(p2p_disabled_falls_back_to_shm_then_net),
        cmocka_unit_test(pcie_uses_p2p_under_a_switch_and_shm_across_sockets),
        cmocka_unit_test(debug_subsys_filters_lines),
        cmocka_unit_test(socket_ifname_is_honoured),
        cmocka_unit_test(no_segment_is_left_behind),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
