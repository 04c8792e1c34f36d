/* main: one rank's life, or the launcher (--launch).
 *
 *   identity -> driver, device, context -> rank 0's ncclUniqueId -> rendezvous
 *   -> ncclCommInitRank(world) -> pattern set-up -> steps -> teardown -> the count line
 *
 * Anything missing before the communicator exists is exit 3 with the reason; where the driver
 * is missing NCCL is still asked to start, so that its own error text explains the machine. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu/sim/sim.h"

static int g_rank = -1;
static struct sim g_sim;

void sim_set_rank(int rank)
{
    g_rank = rank;
}

void sim_format(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

void sim_say(const char *fmt, ...)
{
    char line[2048];
    int n = g_rank >= 0 ? snprintf(line, sizeof line, "collprof-sim: rank %d: ", g_rank)
                        : snprintf(line, sizeof line, "collprof-sim: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    /* one write, so that the lines of ranks sharing a terminal never interleave */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

/* launcher/launcher.h's lines go out as this program's own. */
static void sim_say_line(void *ctx, const char *line)
{
    (void)ctx;
    sim_say("%s", line);
}

_Noreturn void sim_exit(int code)
{
    if (sim_aborting()) /* the watchdog is ending the process with its own status */
        sim_park();
    sim_watchdog_stop(&g_sim);
    fflush(stdout);
    exit(code);
}

void sim_cu_check(struct sim *s, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    if (sim_aborting()) /* a stream of an aborted communicator: the watchdog has spoken */
        sim_park();
    char text[256];
    sim_cuda_result(&s->cu, r, text, sizeof text);
    sim_say("%s failed: %s", what, text);
    sim_exit(SIM_EXIT_FAILED);
}

double sim_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sim_sleep_us(double us)
{
    if (us <= 0)
        return;
    double whole_s = (double)(time_t)(us / 1e6);
    struct timespec ts = { (time_t)whole_s, (long)((us - whole_s * 1e6) * 1e3) };
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static const char *driver_call(CUresult r, const char *name, struct sim *s, char *why,
                               size_t cap)
{
    if (r == CUDA_SUCCESS)
        return NULL;
    char text[256];
    sim_cuda_result(&s->cu, r, text, sizeof text);
    sim_format(why, cap, "%s failed: %s (driver '%s')", name, text, s->cu.path);
    return why;
}

/* The driver, the device LOCAL_RANK % count and its primary context, current on this thread. */
static int device_setup(struct sim *s, char *why, size_t cap)
{
    if (sim_cuda_load(&s->cu, why, cap))
        return -1;
    int count = 0;
    if (driver_call(s->cu.cuInit(0), "cuInit", s, why, cap) ||
        driver_call(s->cu.cuDeviceGetCount(&count), "cuDeviceGetCount", s, why, cap))
        return -1;
    if (count < 1) {
        sim_format(why, cap, "no CUDA device (driver '%s' counts none)", s->cu.path);
        return -1;
    }
    int ordinal = s->id.local_rank % count;
    if (driver_call(s->cu.cuDeviceGet(&s->dev, ordinal), "cuDeviceGet", s, why, cap) ||
        driver_call(s->cu.cuDevicePrimaryCtxRetain(&s->ctx, s->dev), "cuDevicePrimaryCtxRetain",
                    s, why, cap))
        return -1;
    if (driver_call(s->cu.cuCtxSetCurrent(s->ctx), "cuCtxSetCurrent", s, why, cap)) {
        s->cu.cuDevicePrimaryCtxRelease(s->dev);
        s->ctx = NULL;
        return -1;
    }
    return 0;
}

/* NCCL's own account of a machine we could not start on: a one-rank communicator needs no
 * peer, so its failure (or success) says what NCCL thinks of this driver and device. */
static void nccl_explains(void)
{
    int v = 0;
    ncclGetVersion(&v);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    const char *what = "ncclGetUniqueId";
    ncclResult_t r = ncclGetUniqueId(&id);
    ncclComm_t comm = NULL;
    if (r == ncclSuccess) {
        what = "ncclCommInitRank";
        r = ncclCommInitRank(&comm, 1, id, 0);
    }
    if (r != ncclSuccess) {
        const char *last = ncclGetLastError(NULL);
        sim_say("%s failed: %s; NCCL %s says: %s", what, ncclGetErrorString(r), version,
                last && *last ? last : "(nothing more)");
        return;
    }
    ncclCommDestroy(comm);
    sim_say("NCCL %s starts a one-rank communicator here, but collprof-sim needs the driver "
            "for its streams and memory", version);
}

static double late_ms(const struct sim_options *o, int rank)
{
    double ms = 0;
    for (int i = 0; i < o->nlate; i++)
        if (o->late[i].rank == rank)
            ms += o->late[i].ms;
    return ms;
}

/* --stats: events around each step on the first stream, the others joined into it, so that
 * their distance is the step's GPU time (the emulation's model time). */
struct step_timer {
    CUevent start, end, join[SIM_MAX_COMMS];
    double gpu_s;
    int failed;
};

static void timer_begin(struct sim *s, struct step_timer *t)
{
    if (!t->start) {
        sim_cu_check(s, s->cu.cuEventCreate(&t->start, CU_EVENT_DEFAULT), "cuEventCreate");
        sim_cu_check(s, s->cu.cuEventCreate(&t->end, CU_EVENT_DEFAULT), "cuEventCreate");
    }
    sim_cu_check(s, s->cu.cuEventRecord(t->start, s->comms[0].stream), "cuEventRecord");
}

static void timer_end(struct sim *s, struct step_timer *t)
{
    for (int i = 1; i < s->ncomms; i++) {
        if (!t->join[i])
            sim_cu_check(s, s->cu.cuEventCreate(&t->join[i], CU_EVENT_DISABLE_TIMING),
                         "cuEventCreate");
        sim_cu_check(s, s->cu.cuEventRecord(t->join[i], s->comms[i].stream), "cuEventRecord");
        sim_cu_check(s, s->cu.cuStreamWaitEvent(s->comms[0].stream, t->join[i], 0),
                     "cuStreamWaitEvent");
    }
    sim_cu_check(s, s->cu.cuEventRecord(t->end, s->comms[0].stream), "cuEventRecord");
}

static void timer_collect(struct sim *s, struct step_timer *t)
{
    float ms = 0;
    if (s->cu.cuEventElapsedTime(&ms, t->start, t->end) == CUDA_SUCCESS)
        t->gpu_s += ms / 1e3;
    else
        t->failed = 1;
}

static void timer_free(struct sim *s, struct step_timer *t)
{
    if (t->start) {
        s->cu.cuEventDestroy(t->start);
        s->cu.cuEventDestroy(t->end);
    }
    for (int i = 0; i < SIM_MAX_COMMS; i++)
        if (t->join[i])
            s->cu.cuEventDestroy(t->join[i]);
}

static void print_counts(const struct sim *s)
{
    char line[1024];
    unsigned long long total = 0;
    for (int i = 0; i < SIM_NOPS; i++)
        total += s->counts[i];
    int n = snprintf(line, sizeof line, "rank %d: %llu nccl calls (", s->id.rank, total);
    for (int i = 0; i < SIM_NOPS; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s%s=%llu", i ? " " : "",
                      sim_op_name[i], (unsigned long long)s->counts[i]);
    snprintf(line + n, sizeof line - (size_t)n, ")\n");
    fflush(stdout);
    ssize_t w = write(STDOUT_FILENO, line, strlen(line));
    (void)w;
}

static void teardown(struct sim *s)
{
    sim_watchdog_stop(s);
    /* split communicators first, as a framework tears down its subgroups before the world */
    for (int i = s->ncomms - 1; i >= 0; i--) {
        ncclResult_t r = ncclCommFinalize(s->comms[i].comm);
        if (r != ncclSuccess)
            sim_nccl_fail(s, r, "ncclCommFinalize", i, SIM_EXIT_FAILED);
        r = ncclCommDestroy(s->comms[i].comm);
        if (r != ncclSuccess)
            sim_nccl_fail(s, r, "ncclCommDestroy", i, SIM_EXIT_FAILED);
        if (i == 0 || s->comms[i].stream != s->comms[0].stream) /* --one-stream shares it */
            sim_cu_check(s, s->cu.cuStreamDestroy(s->comms[i].stream), "cuStreamDestroy");
    }
    s->ncomms = 0;
    sim_free_all(s);
    free(s->pattern_state);
    s->pattern_state = NULL;
    s->cu.cuDevicePrimaryCtxRelease(s->dev);
}

static int run_rank(const struct sim_options *o)
{
    struct sim *s = &g_sim;
    s->opt = o;
    if (cp_launcher_read(&s->id, SIM_RENDEZVOUS_VAR, sim_say_line, NULL))
        return SIM_EXIT_USAGE;
    sim_set_rank(s->id.rank);
    s->late_ms = late_ms(o, s->id.rank);
    for (int k = 0; k < SIM_NKERNELS; k++) {
        s->slow_factor[k] = 1;
        for (int i = 0; i < o->nslow; i++)
            if (o->slow[i].rank == s->id.rank && (o->slow[i].kernel < 0 || o->slow[i].kernel == k))
                s->slow_factor[k] *= o->slow[i].factor;
    }

    char why[2048];
    if (device_setup(s, why, sizeof why)) {
        sim_say("%s", why);
        nccl_explains();
        return SIM_EXIT_CANNOT_RUN;
    }
    if (sim_watchdog_start(s))
        return SIM_EXIT_CANNOT_RUN;
    ncclUniqueId uid;
    memset(&uid, 0, sizeof uid);
    if (s->id.rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&uid);
        if (r != ncclSuccess)
            sim_nccl_fail(s, r, "ncclGetUniqueId", -1, SIM_EXIT_CANNOT_RUN);
    }
    if (cp_rendezvous(&s->id, o->timeout_s, &uid, sim_say_line, NULL))
        sim_exit(SIM_EXIT_CANNOT_RUN);
    ncclComm_t world = NULL;
    sim_watchdog_enter(s, "ncclCommInitRank (world)", -1, -1, 0);
    ncclResult_t r = ncclCommInitRank(&world, s->id.world, uid, s->id.rank);
    sim_watchdog_leave(s);
    if (r != ncclSuccess)
        sim_nccl_fail(s, r, "ncclCommInitRank", -1, SIM_EXIT_CANNOT_RUN);
    sim_comm_add(s, world, "world");

    if (o->gpu_compute)
        sim_compute_setup(s);
    const struct sim_pattern *p = &sim_patterns[o->pattern];
    s->step = -1; /* set-up calls (ddp's Broadcast) come before step 0 */
    p->setup(s);
    sim_sync_all(s);
    struct step_timer timer = { 0 };
    double t0 = sim_now_s();
    for (s->step = 0; s->step < o->steps; s->step++) {
        if (o->stats)
            timer_begin(s, &timer);
        p->step(s);
        if (o->stats)
            timer_end(s, &timer);
        /* the optimizer needs every gradient: each step ends with the streams drained */
        sim_sync_all(s);
        if (o->stats)
            timer_collect(s, &timer);
    }
    double wall = sim_now_s() - t0;
    timer_free(s, &timer);
    teardown(s);

    if (o->stats) {
        char gpu[64] = "unknown (the driver could not time events)";
        if (!timer.failed)
            snprintf(gpu, sizeof gpu, "%.6f s", timer.gpu_s);
        sim_say("stats: %s, %ld steps, wall %.6f s, gpu %s", sim_pattern_name[o->pattern],
                o->steps, wall, gpu);
    }
    print_counts(s);
    const struct sim_check_failure *f = &s->first_failure;
    if (f->failed) {
        char step[32] = "set-up";
        if (f->step >= 0)
            snprintf(step, sizeof step, "step %ld", f->step);
        sim_say("check failed: %s, %s on comm %s (seq %llu), index %zu: got %.9g, "
                "expected %.9g", step, sim_op_name[f->op], s->comms[f->comm].name,
                (unsigned long long)f->seq, f->index, f->got, f->expected);
        return SIM_EXIT_CHECK;
    }
    return SIM_EXIT_OK;
}

int main(int argc, char **argv)
{
    struct sim_options o;
    int r = sim_options_parse(argc, argv, &o);
    if (r)
        return r < 0 ? SIM_EXIT_USAGE : SIM_EXIT_OK;
    if (o.launch)
        return sim_launch(argc, argv, &o);
    return run_rank(&o);
}
