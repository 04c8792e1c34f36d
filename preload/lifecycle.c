/* lifecycle: the shim's life inside the job's process.
 *
 *   load        no thread, no file, no signal handler, no settings read; one environment
 *               variable set: NCCL_PROFILER_PLUGIN, so that NCCL opens the shim as its
 *               profiler plugin (profiler_plugin.c says when and why)
 *   first call  settings read once (COLLPROF_ENABLE=0 makes every wrapper a pure forward)
 *   first record  the trace directory (a relative one made absolute against the working
 *               directory of that moment) and file, the writer thread, atexit, signal
 *               handlers, fork handlers; any failure: one WARN, tracing off, the job runs on
 *   exit        atexit and a destructor (whichever runs first) drain, append END, close
 *   signals     every signal whose default action ends the process (signals.c, its table:
 *               term or core) and that the job did not ignore: drain and flush what the
 *               rings hold, then the job's own handler runs (installed with its sa_mask,
 *               SA_RESTART, SA_ONSTACK and SA_NODEFER, SA_RESETHAND honoured, as the kernel
 *               would run it), or, at the default action, END with the signal, the live
 *               block closed, the default restored and the signal raised again: the process
 *               dies as it would have, core dump included (a fault returns to its
 *               instruction with the signal pending). A signal is never swallowed; the
 *               flush waits at most 200 ms for the writer's token.
 *   fork        the child forgets the parent's trace, rings and comms and starts its own
 *               file at its first record; the parent goes on untouched
 *   exec        exec_wrap.c flushes what the rings hold (no END: the pid lives on) and execs;
 *               a failed exec returns to a trace that goes on as before
 *   exit codes  END's exit_code stays -1: atexit and destructors are not told the status,
 *               and interposing exit() would miss a return from main (libc calls its own)
 */
#include "preload/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fd_high.h"
#include "common/log.h"
#include "common/settings.h"
#include "trace/trace_writer.h"

_Atomic int cp_mode;
CP_TLS cp_tls_state cp_tls;

static cp_settings g_settings;
static pthread_once_t g_settings_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_started;   /* this process image (or fork child) tried to start */
static int g_start_rc;
static int g_hooks_installed; /* atexit, atfork, signals, key: once per process image */
static _Atomic int g_shut;
static _Atomic uint32_t g_thread_count;
static _Atomic int g_no_ring_warned;
static _Atomic int g_rank_learnt;
/* The pid whose trace is open, 0 when none: a vfork child shares our memory but has a pid of
 * its own, and must not touch the parent's writer. */
static _Atomic int g_trace_pid;
static pthread_key_t g_ring_key;
static cp_identity g_id;
static uint32_t g_nccl_version;

/* The shim's modules, in start order (shim.h says what each hook is for and the order's
 * rules). A module with something to do at start, fork or exit is added here and nowhere
 * else in this file. */
static const cp_module *const g_modules[] = {
    &cp_module_gpu_timing, /* the timing mode, which the writer's header records */
    &cp_module_unwind,     /* libunwind loaded off the NCCL call that captures a site */
    &cp_module_gpu_poll,
    &cp_module_comm,
    &cp_module_ring,
    &cp_module_live,       /* before the writer thread, which feeds it from its first tick */
    &cp_module_writer,
};
#define NMODULES (sizeof g_modules / sizeof g_modules[0])

/* Stops modules [0, n) in reverse order. */
static void stop_modules(size_t n, int signal_number)
{
    while (n-- > 0)
        if (g_modules[n]->stop)
            g_modules[n]->stop(signal_number);
}

static void load_settings(void)
{
    cp_settings_load(&g_settings);
    /* Before tracing turns on: every stamp of this process must come from one source. */
    cp_ticks_init("");
    atomic_store(&cp_mode, g_settings.enable ? CP_MODE_ON : CP_MODE_OFF);
}

/* In the job's first NCCL call: the settings' parsing must not show in its errno. */
int cp_mode_init(void)
{
    int saved = errno;
    pthread_once(&g_settings_once, load_settings);
    errno = saved;
    return atomic_load(&cp_mode);
}

const cp_settings *cp_settings_get(void) { return &g_settings; }

/* The job's fd 2 as it is now: the shim's lines go there only while it stays that file
 * (common/log.h). */
__attribute__((constructor)) static void on_load(void) { cp_log_guard_stderr(); }

/* The trace's side log, "<trace without .cptrace>.log": the lines fd 2 may no longer take.
 * Opened at its first line only, with the trace's mode, high and close-on-exec. */
static char g_side_path[4096 + 256];

static int open_side_log(void)
{
    int fd = open(g_side_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
                  g_settings.file_mode & 0777);
    if (fd < 0)
        return -1;
    (void)fchmod(fd, g_settings.file_mode & 0777); /* the mode asked for, whatever the umask */
    return cp_fd_move_high(fd);
}

static void side_log_set(const char *trace_path)
{
    char abs[4096 + 256];
    const char *p = trace_path;
    /* absolute: a job that changes its directory still reaches it */
    if (trace_path[0] != '/') {
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd) && (size_t)snprintf(abs, sizeof abs, "%s/%s", cwd,
                                                         trace_path) < sizeof abs)
            p = abs;
    }
    size_t n = strlen(p), ext = strlen(CP_TRACE_FILE_SUFFIX);
    if (n >= ext && strcmp(p + n - ext, CP_TRACE_FILE_SUFFIX) == 0)
        n -= ext;
    if (n + sizeof CP_SIDE_LOG_SUFFIX > sizeof g_side_path)
        return;
    memcpy(g_side_path, p, n);
    memcpy(g_side_path + n, CP_SIDE_LOG_SUFFIX, sizeof CP_SIDE_LOG_SUFFIX);
    cp_log_set_side(open_side_log);
}

static void on_exit_hook(void) { cp_shutdown(0); }

__attribute__((destructor)) static void on_unload(void) { cp_shutdown(0); }

/* A fatal signal's handler wrote END: nothing records or writes after it. Atomic stores
 * only (async-signal-safe). */
void cp_process_dying(void)
{
    atomic_store(&cp_mode, CP_MODE_OFF);
    atomic_store(&g_shut, 1);
    atomic_store(&g_trace_pid, 0);
}

void cp_shutdown(int signal_number)
{
    if (atomic_exchange(&g_shut, 1))
        return;
    atomic_store(&g_trace_pid, 0);
    atomic_store(&cp_mode, CP_MODE_OFF);
    pthread_mutex_lock(&g_start_mu);
    int started = g_started && g_start_rc == 0;
    pthread_mutex_unlock(&g_start_mu);
    if (started)
        stop_modules(NMODULES, signal_number);
}

static void before_fork(void)
{
    pthread_mutex_lock(&g_start_mu);
    for (size_t i = 0; i < NMODULES; i++)
        if (g_modules[i]->before_fork)
            g_modules[i]->before_fork();
}

static void after_fork_parent(void)
{
    for (size_t i = NMODULES; i-- > 0;)
        if (g_modules[i]->after_fork_parent)
            g_modules[i]->after_fork_parent();
    pthread_mutex_unlock(&g_start_mu);
}

static void after_fork_child(void)
{
    pthread_mutex_init(&g_start_mu, NULL);
    cp_log_after_fork_child(); /* the parent's side log is not the child's */
    for (size_t i = NMODULES; i-- > 0;)
        if (g_modules[i]->after_fork_child)
            g_modules[i]->after_fork_child();
    /* The forking thread starts over too: its next record starts the child's trace. */
    cp_tls.ring = NULL;
    cp_tls.attached = 0;
    g_started = 0;
    g_start_rc = 0;
    atomic_store(&g_trace_pid, 0);
    atomic_store(&g_shut, 0);
    atomic_store(&g_rank_learnt, 0);
    atomic_store(&g_thread_count, 1);
    cp_tls.thread_no = 0;
    if (atomic_load(&cp_mode) != CP_MODE_UNKNOWN)
        atomic_store(&cp_mode, g_settings.enable ? CP_MODE_ON : CP_MODE_OFF);
}

static void release_ring(void *ring) { cp_ring_release(ring); }

static void install_hooks(void)
{
    if (g_hooks_installed)
        return;
    g_hooks_installed = 1;
    pthread_key_create(&g_ring_key, release_ring);
    atexit(on_exit_hook);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    cp_signals_install();
}

/* Under g_start_mu. */
static int start_locked(void)
{
    cp_identity_load(&g_id);
    char given[4096], dir[4096];
    if (g_settings.dir[0])
        snprintf(given, sizeof given, "%s", g_settings.dir);
    else
        snprintf(given, sizeof given, "collprof-%s", g_id.job_id);
    /* Absolute from here on: the writer reopens its file by path when the job takes its fd,
     * maybe after a chdir, where a relative path names another file or none. */
    char cwd[4096];
    if (given[0] == '/' || !getcwd(cwd, sizeof cwd) ||
        (size_t)snprintf(dir, sizeof dir, "%s/%s", cwd, given) >= sizeof dir)
        snprintf(dir, sizeof dir, "%s", given);
    /* as private as the files in it: x wherever COLLPROF_FILE_MODE gives r */
    unsigned dir_mode = g_settings.file_mode | ((g_settings.file_mode & 0444) >> 2);
    if (cp_mkdir_p(dir, dir_mode) != 0) {
        cp_warn("cannot create the trace directory '%s': %s; tracing is off, the job runs on",
                dir, strerror(errno));
        return -1;
    }
    /* the NCCL of the call that starts the trace (with two in the process, the first's) */
    cp_fn_ncclGetVersion get_version = CP_NCCL_LIB_FN(cp_nccl_first_lib(), ncclGetVersion);
    int version = 0;
    if (get_version && get_version(&version) == ncclSuccess && version > 0)
        g_nccl_version = (uint32_t)version;

    char path[4096 + 256];
    cp_identity_file_name(&g_id, dir, path, sizeof path);
    const cp_start_info info = {.id = &g_id, .settings = &g_settings, .path = path,
                                .nccl_version = g_nccl_version};
    for (size_t i = 0; i < NMODULES; i++)
        if (g_modules[i]->start && g_modules[i]->start(&info) != 0) {
            stop_modules(i, 0);
            return -1;
        }
    install_hooks();
    side_log_set(path);
    cp_info("tracing to '%s'", path);
    return 0;
}

int cp_process_start(void)
{
    int saved = errno; /* the job never sees our errno */
    pthread_mutex_lock(&g_start_mu);
    if (!g_started && !atomic_load(&g_shut)) {
        g_started = 1;
        g_start_rc = start_locked();
        if (g_start_rc != 0)
            atomic_store(&cp_mode, CP_MODE_OFF);
        else
            atomic_store(&g_trace_pid, (int)getpid());
    }
    int rc = g_started ? g_start_rc : -1;
    pthread_mutex_unlock(&g_start_mu);
    errno = saved;
    return rc;
}

/* No lock: a vfork child must not take the parent's mutex, and the pid check is what
 * tells it apart. */
int cp_trace_open_here(void)
{
    int pid = atomic_load(&g_trace_pid);
    return pid != 0 && pid == (int)getpid() && !atomic_load(&g_shut);
}

cp_ring *cp_thread_attach(void)
{
    if (cp_tls.attached == 1)
        return cp_tls.ring;
    if (cp_process_start() != 0)
        return NULL;
    int saved = errno;
    cp_ring *r = cp_ring_acquire((size_t)g_settings.buffer_mb << 20);
    if (!r) {
        cp_tls.attached = 2;
        atomic_fetch_add(&cp_lost_no_ring, 1);
        if (!atomic_exchange(&g_no_ring_warned, 1))
            cp_warn("COLLPROF_BUFFER_MB=%d is spent: threads that start recording now lose "
                    "their records (counted as lost)", g_settings.buffer_mb);
    } else {
        cp_tls.ring = r;
        cp_tls.attached = 1;
        cp_tls.thread_no = (uint16_t)atomic_fetch_add(&g_thread_count, 1);
        pthread_setspecific(g_ring_key, r);
    }
    errno = saved;
    return r;
}

void cp_identity_learn_rank(int rank, int nranks)
{
    /* A blocking init that is the job's first recorded call learns the rank before its CALL
     * starts the trace: start it now, or g_id (read at start) would still be unset. */
    if (rank < 0 || cp_process_start() != 0)
        return;
    if (g_id.rank >= 0 || atomic_exchange(&g_rank_learnt, 1))
        return;
    cp_rec_process fixed = {
        .rank = rank,
        .local_rank = g_id.local_rank,
        .world_size = nranks,
        .nccl_version = g_nccl_version,
        .pid = (uint32_t)getpid(),
    };
    unsigned char buf[512];
    if (cp_rec_process_build(buf, sizeof buf, &fixed, g_id.hostname, g_id.job_id,
                             g_id.launcher) > 0)
        cp_control_push(buf);
}
