/* bench_shim: what the shim costs per NCCL call, against the bare call, in one run.
 *
 * The benchmark re-executes itself three times against the stub libnccl.so.2 (whose
 * ncclAllReduce returns at once, so the figures are the shim's own cost):
 *   bare      no LD_PRELOAD
 *   disabled  LD_PRELOAD=libcollprof.so, COLLPROF_ENABLE=0 (pure forwarding)
 *   enabled   LD_PRELOAD=libcollprof.so, COLLPROF_GPU_TIMING=off (host timing only)
 *   events    LD_PRELOAD=libcollprof.so, COLLPROF_GPU_TIMING=events, on a stream of the
 *             emulated libcuda.so.1 (build/emu, when built). The child dlopens it by path
 *             rather than through LD_LIBRARY_PATH, which would also put the emulated
 *             libnccl.so.2 ahead of the stub this benchmark runs against (bench_shim finds
 *             the stub through its RUNPATH, which LD_LIBRARY_PATH overrides). The shim finds
 *             the already-loaded driver by its soname. Smaller batches with longer pauses
 *             let the writer return every pair before the next batch, so each call is
 *             timed (the pool holds 4096 pairs per context). The figure is the shim's own
 *             work plus the emulation's cuEventRecord, not a real driver's.
 *   plugin    LD_PRELOAD=libcollprof.so, COLLPROF_GPU_TIMING=plugin, the stub making NCCL
 *             2.28's profiler-plugin calls (STUB_NCCL_PROFILER=1: GroupApi, CollApi, Group,
 *             Coll, KernelLaunch on the calling thread; kernel channels on its proxy thread).
 *             The figure includes those callbacks, which NCCL makes only for a plugin.
 *   auto      LD_PRELOAD=libcollprof.so, COLLPROF_GPU_TIMING=auto on the emulated driver and
 *             a stub without the plugin: the events fallback under COLLPROF_OVERHEAD's budget.
 *   cupti     LD_PRELOAD=libcollprof.so, COLLPROF_GPU_TIMING=cupti on the emulated driver, the
 *             shim taking the emulated libcupti.so.13 beside it: the calling thread's cost of
 *             pushing and popping each call's external correlation id and handing the call to
 *             the writer. The stub NCCL launches no kernel, so no record comes back (a real
 *             driver's launch under CUPTI costs its own, measured on a GPU).
 *   null      no shim, the stub calling a built-in plugin that does nothing
 *             (STUB_NCCL_PROFILER=null): what NCCL pays for any plugin, the plugin mode's floor.
 * Each child runs CALLS AllReduces after a warm-up, best of ROUNDS, and prints ns/call, its
 * calling thread on a core of its own and the threads that serve it on the others (as on a
 * GPU host; COLLPROF_BENCH_NO_PIN=1: wherever the scheduler puts them). The
 * comm has two ranks (the stub does not communicate): NCCL makes no plugin events for one.
 * The enabled run writes a trace to a scratch directory, whose size gives bytes per record.
 *
 * Instructions per call, without timer noise (valgrind):
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     env LD_PRELOAD=build/lib/libcollprof.so COLLPROF_GPU_TIMING=off \
 *     build/bin/bench_shim --child 100000
 * and compare with the bare run (no LD_PRELOAD): "Collected" / calls; bench/shim_callgrind.sh
 * does both and prints the difference.
 */
#ifndef _GNU_SOURCE /* the build defines it; a bench built by hand needs it for CPU_SET */
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"

#define DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(DECLARE)

#define CALLS 500000
#define EVENTS_CALLS 100000
#define ROUNDS 5
/* Calls per timed batch; between batches an untimed pause lets the writer drain, so the
 * enabled figure is the cost of records stored, not of records dropped on a full ring. */
#define BATCH 16384

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

typedef int (*cu_int_fn)(unsigned);
typedef int (*cu_dev_fn)(int *, int);
typedef int (*cu_retain_fn)(void **, int);
typedef int (*cu_set_fn)(void *);
typedef int (*cu_stream_fn)(void **, unsigned);

/* COLLPROF_BENCH_CUDA=<path of libcuda.so.1>: a context and a stream to call on. */
static cudaStream_t bench_stream(void)
{
    const char *path = getenv("COLLPROF_BENCH_CUDA");
    if (!path || !*path)
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        exit(3);
    int dev = 0;
    void *ctx = NULL, *stream = NULL;
    if (((cu_int_fn)dlsym(h, "cuInit"))(0) || ((cu_dev_fn)dlsym(h, "cuDeviceGet"))(&dev, 0) ||
        ((cu_retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain"))(&ctx, dev) ||
        ((cu_set_fn)dlsym(h, "cuCtxSetCurrent"))(ctx) ||
        ((cu_stream_fn)dlsym(h, "cuStreamCreate"))(&stream, 1))
        exit(3);
    return (cudaStream_t)stream;
}

/* The calling thread on a core of its own, the threads that serve it (the shim's writer, the
 * stub's proxy) on the others: as on a GPU host, where a rank's thread does not share its
 * core with them. On 2 cores, three busy threads took turns on them, and the calling thread's
 * CPU time counted each switch's cold caches (figures 1.5-2x apart from run to run). Returns
 * the core to move the calling thread to once the helpers exist, -1 if there is no spare one. */
static int pin_helpers_apart(void)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2)
        return -1;
    int mine = -1;
    cpu_set_t rest;
    CPU_ZERO(&rest);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &all))
            continue;
        if (mine < 0)
            mine = c;
        else
            CPU_SET(c, &rest);
    }
    /* threads started from now on inherit the other cores */
    return sched_setaffinity(0, sizeof rest, &rest) == 0 ? mine : -1;
}

static void pin_self(int core)
{
    if (core < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    sched_setaffinity(0, sizeof one, &one);
}

static int child(long calls)
{
    int core = getenv("COLLPROF_BENCH_NO_PIN") ? -1 : pin_helpers_apart();
    cudaStream_t stream = bench_stream();
    long batch = stream ? 2048 : BATCH;
    useconds_t pause = stream ? 25000 : 12000; /* > the writer's 10 ms tick */
    ncclUniqueId id;
    memset(&id, 1, sizeof id);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess)
        return 1;
    float x = 0;
    /* the first call starts the shim's writer: on the helpers' cores */
    ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream);
    pin_self(core);
    double best = 1e30, best_cpu = 1e30;
    for (int round = 0; round < (calls >= 100000 ? ROUNDS : 1); round++) {
        double spent = 0, cpu = 0;
        for (long done = 0; done < calls;) {
            long n = calls - done < batch ? calls - done : batch;
            double t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            for (long i = 0; i < n; i++)
                ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream);
            cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
            spent += now_ns() - t0;
            done += n;
            if (calls >= 100000)
                usleep(pause); /* a job's compute between its calls */
        }
        double per = spent / (double)(calls ? calls : 1);
        if (per < best)
            best = per;
        per = cpu / (double)(calls ? calls : 1);
        if (per < best_cpu)
            best_cpu = per;
    }
    ncclCommDestroy(comm);
    printf("%.2f %.2f\n", best, best_cpu);
    return 0;
}

static double g_last_cpu; /* the last child's calling-thread CPU ns per call */

static double run_child(const char *self, const char *lib, const char *const *env, long ncalls)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        for (; env && *env; env++)
            putenv((char *)*env);
        if (lib)
            setenv("LD_PRELOAD", lib, 1);
        else
            unsetenv("LD_PRELOAD");
        char calls[32];
        snprintf(calls, sizeof calls, "%ld", ncalls);
        execl(self, self, "--child", calls, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    buf[n] = '\0';
    char *end;
    double wall = strtod(buf, &end);
    g_last_cpu = strtod(end, NULL);
    return wall;
}

static long long dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    long long total = 0;
    struct dirent *e;
    char path[4400];
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0)
            total += st.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--child"))
        return child(atol(argv[2]));

    char self[4096], lib[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    /* build/bin/bench_shim -> build/lib/libcollprof.so */
    char *slash = strrchr(self, '/');
    snprintf(lib, sizeof lib, "%.*s/../lib/libcollprof.so", (int)(slash - self), self);

    const char *tmpdir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/collprof-bench-shim-XXXXXX",
             tmpdir && *tmpdir ? tmpdir : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir)
        return 1;
    static char dir_env[4300];
    snprintf(dir_env, sizeof dir_env, "COLLPROF_DIR=%s", dir);

    const char *disabled[] = {"COLLPROF_ENABLE=0", NULL};
    const char *enabled[] = {dir_env, "COLLPROF_GPU_TIMING=off", "COLLPROF_BUFFER_MB=256",
                             NULL};
    double bare = run_child(self, NULL, NULL, CALLS), bare_cpu = g_last_cpu;
    double off = run_child(self, lib, disabled, CALLS);
    double on = run_child(self, lib, enabled, CALLS), on_cpu = g_last_cpu;
    long long bytes = dir_bytes(dir);

    /* build/bin/bench_shim -> build/emu/libcuda.so.1 */
    static char cuda_env[4400], events_dir_env[4400];
    snprintf(cuda_env, sizeof cuda_env, "COLLPROF_BENCH_CUDA=%.*s/../emu/libcuda.so.1",
             (int)(slash - self), self);
    snprintf(events_dir_env, sizeof events_dir_env, "%s/events", dir_env);
    const char *events_env[] = {events_dir_env, "COLLPROF_GPU_TIMING=events",
                                "COLLPROF_BUFFER_MB=256", cuda_env, NULL};
    double events = access(strchr(cuda_env, '=') + 1, R_OK) == 0
                        ? run_child(self, lib, events_env, EVENTS_CALLS)
                        : -2;
    static char plugin_dir_env[4400], auto_dir_env[4400];
    snprintf(plugin_dir_env, sizeof plugin_dir_env, "%s/plugin", dir_env);
    snprintf(auto_dir_env, sizeof auto_dir_env, "%s/auto", dir_env);
    const char *plugin_env[] = {plugin_dir_env, "COLLPROF_GPU_TIMING=plugin",
                                "COLLPROF_BUFFER_MB=256", "STUB_NCCL_PROFILER=1", NULL};
    const char *auto_env[] = {auto_dir_env, "COLLPROF_GPU_TIMING=auto", "COLLPROF_BUFFER_MB=256",
                              cuda_env, NULL};
    double plugin = run_child(self, lib, plugin_env, CALLS), plugin_cpu = g_last_cpu;
    /* NCCL's own price for calling a plugin: the same calls into one that does nothing, no
     * shim. What collprof adds in plugin mode is the rest. */
    const char *null_env[] = {"STUB_NCCL_PROFILER=null", NULL};
    double null = run_child(self, NULL, null_env, CALLS), null_cpu = g_last_cpu;
    double budget = events >= 0 ? run_child(self, lib, auto_env, EVENTS_CALLS) : -2;
    static char cupti_dir_env[4400];
    snprintf(cupti_dir_env, sizeof cupti_dir_env, "%s/cupti", dir_env);
    const char *cupti_env[] = {cupti_dir_env, "COLLPROF_GPU_TIMING=cupti",
                               "COLLPROF_BUFFER_MB=256", cuda_env, NULL};
    double cupti = events >= 0 ? run_child(self, lib, cupti_env, EVENTS_CALLS) : -2;
    double cupti_cpu = g_last_cpu;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_shim: could not remove %s\n", dir);
    if (bare < 0 || off < 0 || on < 0 || plugin < 0 || null < 0) {
        fprintf(stderr, "bench_shim: a child run failed\n");
        return 1;
    }
    /* the enabled child made ROUNDS * CALLS AllReduces, an init and a destroy */
    double records = (double)ROUNDS * CALLS + 2;
    printf("shim.bare_ns_per_call: %.2f ns\n", bare);
    printf("shim.disabled_ns_per_call: %.2f ns\n", off);
    printf("shim.enabled_ns_per_call: %.2f ns\n", on);
    printf("shim.overhead_ns_per_call: %.2f ns\n", on - bare);
    printf("shim.bytes_per_record_on_disk: %.2f bytes\n", (double)bytes / records);
    /* The calling thread's own CPU time: what the job's thread pays, without the time the
     * writer and NCCL's proxy thread (here the stub's) took it off a core of a 2-core box. */
    printf("shim.bare_cpu_ns_per_call: %.2f ns\n", bare_cpu);
    printf("shim.enabled_cpu_ns_per_call: %.2f ns\n", on_cpu);
    printf("shim.plugin_cpu_ns_per_call: %.2f ns\n", plugin_cpu);
    printf("shim.plugin_vs_off_added_cpu_ratio: %.2f x\n",
           on_cpu - bare_cpu > 0 ? (plugin_cpu - bare_cpu) / (on_cpu - bare_cpu) : 0.0);
    printf("shim.nccl_null_plugin_cpu_ns_per_call: %.2f ns\n", null_cpu);
    printf("shim.nccl_null_plugin_ns_per_call: %.2f ns\n", null);
    /* collprof's own share: plugin mode less what NCCL pays for any plugin, against off */
    printf("shim.plugin_own_vs_off_added_cpu_ratio: %.2f x\n",
           on_cpu - bare_cpu > 0 ? (plugin_cpu - null_cpu) / (on_cpu - bare_cpu) : 0.0);
    printf("shim.plugin_ns_per_call: %.2f ns\n", plugin);
    printf("shim.plugin_overhead_ns_per_call: %.2f ns\n", plugin - bare);
    /* the bar: the plugin's added host cost within 1.2x of timing off */
    printf("shim.plugin_vs_off_added_ratio: %.2f x\n",
           on - bare > 0 ? (plugin - bare) / (on - bare) : 0.0);
    if (budget >= 0) {
        printf("shim.auto_events_budget_ns_per_call: %.2f ns\n", budget);
        printf("shim.auto_vs_off_added_ratio: %.2f x\n",
               on - bare > 0 ? (budget - bare) / (on - bare) : 0.0);
    }
    if (cupti >= 0) {
        printf("shim.cupti_ns_per_call: %.2f ns\n", cupti);
        printf("shim.cupti_cpu_ns_per_call: %.2f ns\n", cupti_cpu);
        printf("shim.cupti_vs_off_added_ratio: %.2f x\n",
               on - bare > 0 ? (cupti - bare) / (on - bare) : 0.0);
    }
    if (events >= 0)
        printf("shim.events_ns_per_call: %.2f ns\n", events);
    else
        fprintf(stderr, "bench_shim: shim.events_ns_per_call skipped: %s\n",
                events == -2 ? "no emulated libcuda.so.1 (build the emu_cuda target)"
                             : "the events child failed");
    return 0;
}
