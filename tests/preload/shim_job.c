/* shim_job: an "unmodified NCCL job" for the shim's tests, linked against the stub
 * libnccl.so.2 and run by test_shim with and without LD_PRELOAD=libcollprof.so.
 *
 * Each scenario prints every NCCL result it gets on stdout, one `name=result` a line, so the
 * test can check that the output is byte for byte the same with and without the shim.
 *   basic       every recorded entry point once, some failing on purpose (see stub_nccl.c)
 *   none        no NCCL call at all
 *   queries     only calls that are not recorded (GetVersion, GetErrorString)
 *   threads T C N   C comms, T threads, each thread N AllReduces on every comm (serialized per comm)
 *   burst N     N AllReduces on one comm as fast as possible
 *   plugin N    N AllReduces on a comm of two ranks (the stub makes profiler-plugin calls for
 *               those under STUB_NCCL_PROFILER=1), then the comm's destroy
 *   kill MS     a few calls, sleep MS (past a flush), then SIGKILL itself
 *   sigterm     a few calls, then SIGTERM itself (default action)
 *   sigterm-handled  the same with a handler installed before NCCL use: prints and goes on
 *   sigterm-once  a handler installed with SA_RESETHAND and a mask of SIGUSR1: SIGTERM twice;
 *               the first is handled (printing whether SIGUSR1 was blocked), the second kills
 *   closefds PATH  calls past a flush, then closes every fd >= 3 (as daemons and launchers
 *               do), opens PATH, writes 14 bytes to it and dup2s it onto fds up to 31 (a
 *               loader's few files: the numbers the trace had), more calls past flushes;
 *               prints the file's size and content at the end
 *   dup2fds PATH   the same, and then dup2s PATH onto every fd number up to RLIMIT_NOFILE
 *               (lowered to 256 first): any fd the shim could hold is the job's file
 *   errno       every recorded kind of call with errno set before it: prints the errno the
 *               call left (the stub's errno-echo and system-error counts, see stub_nccl.c)
 *   fork-nccl / fork-plain  a fork whose child does / does not call NCCL
 *   nonblocking a non-blocking init, polled with GetAsyncError, then one AllReduce
 *   exits N MS M HOW [PIDFILE]  N AllReduces, sleep MS (past a flush), M more, then leave by
 *               HOW: return, exit (3), _exit (4), sigterm (raise, default action), abort,
 *               kill (write the pid to PIDFILE and wait for the test's SIGKILL)
 *   exec N PATH  N AllReduces, then execv PATH; if that fails, print its errno, 2 more calls
 *               and return
 *   first-open N  N AllReduces, then opens /dev/null: prints the number it got and every
 *               open fd below 1000 (the shim's own must not be among them)
 *   plugin-env N  the plugin scenario, then prints whether NCCL_PROFILER_PLUGIN is set and
 *               the process's address space (VmSize, kB)
 *   stderr-file PATH N  closes fd 2 and opens PATH there (O_TRUNC) for its own data, writes
 *               a line to it, then N AllReduces (a bad COLLPROF_* value warns at the first)
 *   limit-as KB N MB  RLIMIT_AS lowered to KB kB (0: left alone), N AllReduces, then the job's
 *               own MB MiB (mmap, touched): prints its VmSize, or exits 3 when the mmap fails
 *   block N     an init and N AllReduces of the stub's blocking count (STUB_NCCL_BLOCK_MS says
 *               how long each blocks), then the comm's destroy
 *   churn N [P]  N cycles of a comm created (its own unique id), one AllReduce, destroyed
 *               (with P: every P-th cycle aborted instead; a destroy that fails is followed
 *               by one more AllReduce and destroy); stderr gets `rss_kb <cycles>
 *               <VmRSS>` after half the cycles (the shim's ring has wrapped: its pages are
 *               all touched) and at the end, `reused <n>` (cycles
 *               whose comm had the address of the one before), and under the shim
 *               (COLLPROF_LIVE_DIR set) `live_named <named> <entries> <total>` once its live
 *               block has seen every AllReduce (or after 10 s): the recent operations whose
 *               communicator the block names
 *   abort-blocked  an AllReduce of the stub's blocking count (STUB_NCCL_BLOCK_MS) that another
 *               thread's ncclCommAbort ends 50 ms in (the stub keeps the comm's memory under
 *               STUB_NCCL_FRESH_COMMS=1, as NCCL releases a blocked call before freeing)
 *   die N SIG HOW  N AllReduces, then dies by signal SIG: HOW is `kill` (kill(getpid()), as
 *               a sender outside would), `fault` (the fault itself: a null write for SEGV, a
 *               division by zero for FPE, ud2 for ILL, a page past a file's end for BUS;
 *               raise for the others), or `thread` (the same fault, or raise, on a second
 *               thread); prints "dying" first
 *   eintr SIG   a handler for SIG installed without SA_RESTART, calls, then a read of an
 *               empty pipe that a thread interrupts with SIG every 20 ms (then, after 3 s,
 *               feeds): prints what read returned (EINTR, as the kernel does, or data)
 *   dispositions  handlers for PROF, ALRM, VTALRM, IO and SIGRTMIN, SIGPIPE ignored, before
 *               NCCL use; after calls, prints whether each disposition is still the job's
 *   chdir A B   chdir A, calls past a flush, chdir B, close every fd >= 3 (the trace's too:
 *               the writer reopens it by path), calls past a flush, destroy
 *   lookup-shrink  ncclCommShrink looked up with dlsym(RTLD_DEFAULT) and called if found, as
 *               a job written for several NCCL versions would
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "live/stats_block.h"

#define DECLARE(ret, name, params, args) ret name params;
CP_NCCL_API(DECLARE)

#define SHOW(call) printf("%s=%d\n", #call, (int)(call))
#define STREAM ((cudaStream_t)(uintptr_t)0x5000)

static ncclComm_t make_comm(int nranks, int rank)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    snprintf(id.internal, sizeof id.internal, "test-id-%d-%d", nranks, rank);
    ncclComm_t c = NULL;
    if (ncclCommInitRank(&c, nranks, id, rank) != ncclSuccess)
        abort();
    return c;
}

static void basic(void)
{
    float buf[64];
    ncclUniqueId id;
    memset(&id, 7, sizeof id);
    int version = 0;
    SHOW(ncclGetVersion(&version));
    printf("version=%d\n", version);
    ncclComm_t c = NULL;
    SHOW(ncclCommInitRank(&c, 4, id, 1));
    SHOW(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, c, STREAM));        /* in place */
    SHOW(ncclAllReduce(buf, buf + 16, 16, ncclFloat32, ncclMax, c, STREAM));
    SHOW(ncclBroadcast(buf, buf + 16, 8, ncclInt32, 2, c, STREAM));
    SHOW(ncclBcast(buf, 8, ncclInt32, 3, c, STREAM));                        /* nests */
    SHOW(ncclReduce(buf, buf + 16, 8, ncclFloat64, ncclProd, 0, c, STREAM));
    SHOW(ncclAllGather(buf + 4, buf, 4, ncclFloat32, c, STREAM));           /* in place, rank 1 */
    SHOW(ncclReduceScatter(buf, buf + 4, 4, ncclFloat32, ncclAvg, c, STREAM)); /* in place */
    SHOW(ncclAlltoAll(buf, buf + 32, 4, ncclUint8, c, STREAM));
    SHOW(ncclGather(buf, buf + 32, 4, ncclBfloat16, 1, c, STREAM));
    SHOW(ncclScatter(buf, buf + 32, 4, ncclInt8, 1, c, STREAM));
    SHOW(ncclGroupStart());
    SHOW(ncclSend(buf, 5, ncclFloat32, 2, c, STREAM));
    SHOW(ncclRecv(buf, 5, ncclFloat32, 3, c, STREAM));
    SHOW(ncclSend(buf, 6, ncclFloat32, 2, c, STREAM));
    SHOW(ncclGroupEnd());
    ncclRedOp_t premul;
    float scalar = 2;
    SHOW(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate, c));
    SHOW(ncclAllReduce(buf, buf, 3, ncclFloat32, premul, c, STREAM));
    /* failures the stub makes on purpose */
    SHOW(ncclAllReduce(buf, buf, 777, ncclFloat32, ncclSum, c, STREAM));
    SHOW(ncclAllReduce(buf, buf, 1, (ncclDataType_t)99, ncclSum, c, STREAM));
    SHOW(ncclSend(buf, 1, ncclFloat32, 9, c, STREAM));
    SHOW(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, NULL, STREAM));
    SHOW(ncclGroupEnd());
    /* comm life */
    ncclComm_t s1 = NULL, s2 = NULL, sh = NULL, all[2] = {NULL, NULL};
    SHOW(ncclCommSplit(c, 5, 1, &s1, NULL));
    SHOW(ncclCommSplit(c, NCCL_SPLIT_NOCOLOR, 1, &s2, NULL));
    int excl = 0;
    SHOW(ncclCommShrink(c, &excl, 1, &sh, NULL, NCCL_SHRINK_DEFAULT));
    SHOW(ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, s1, STREAM));
    SHOW(ncclCommInitAll(all, 2, NULL));
    SHOW(ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, all[1], STREAM));
    SHOW(ncclCommFinalize(c));
    SHOW(ncclCommRevoke(c, 0));
    SHOW(ncclCommDestroy(s1));
    SHOW(ncclCommDestroy(sh));
    SHOW(ncclCommDestroy(all[0]));
    SHOW(ncclCommAbort(all[1]));
    SHOW(ncclCommDestroy(c));
    SHOW(ncclCommDestroy(NULL));
    printf("error=%s\n", ncclGetErrorString(ncclInvalidUsage));
}

struct thread_arg {
    ncclComm_t *comms;
    pthread_mutex_t *locks; /* one per comm */
    int ncomms, calls;
};

/* NCCL forbids concurrent calls on one communicator ("multiple threads should use separate
 * communicator objects"): threads that share one serialize their calls, as a job must. */
static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    float x;
    for (int i = 0; i < a->calls; i++)
        for (int k = 0; k < a->ncomms; k++) {
            pthread_mutex_lock(&a->locks[k]);
            ncclResult_t r = ncclAllReduce(&x, &x, (size_t)i + 1, ncclFloat32, ncclSum,
                                           a->comms[k], STREAM);
            pthread_mutex_unlock(&a->locks[k]);
            if (r)
                abort();
        }
    return NULL;
}

static void threads(int nthreads, int ncomms, int calls)
{
    ncclComm_t *comms = calloc((size_t)ncomms, sizeof *comms);
    for (int k = 0; k < ncomms; k++)
        comms[k] = make_comm(ncomms + k + 1, k);
    pthread_mutex_t *locks = calloc((size_t)ncomms, sizeof *locks);
    for (int k = 0; k < ncomms; k++)
        pthread_mutex_init(&locks[k], NULL);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    struct thread_arg a = {comms, locks, ncomms, calls};
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, thread_main, &a);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < ncomms; k++)
        ncclCommDestroy(comms[k]);
    for (int k = 0; k < ncomms; k++)
        pthread_mutex_destroy(&locks[k]);
    free(locks);
    free(comms);
    free(t);
    printf("threads done\n");
}

static void few_calls(ncclComm_t c, int n)
{
    float x;
    for (int i = 0; i < n; i++)
        ncclAllReduce(&x, &x, (size_t)i + 1, ncclFloat32, ncclSum, c, STREAM);
}

static long vm_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            kb = atol(line + 7);
    if (f)
        fclose(f);
    return kb;
}

static void first_open(int n)
{
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, n);
    int fd = open("/dev/null", O_RDONLY);
    printf("first open=%d\nfds below 1000:", fd);
    for (int i = 0; i < 1000; i++)
        if (fcntl(i, F_GETFD) >= 0)
            printf(" %d", i);
    printf("\n");
    close(fd);
    ncclCommDestroy(c);
}

static void stderr_file(const char *path, int n)
{
    close(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd != STDERR_FILENO)
        abort();
    static const char data[] = "the job's own data\n";
    if (write(fd, data, sizeof data - 1) != (ssize_t)sizeof data - 1)
        abort();
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, n);
    ncclCommDestroy(c);
    printf("stderr-file done\n");
}

static int limit_as(long kb, int n, long mb)
{
    if (kb > 0) {
        struct rlimit rl = {(rlim_t)kb << 10, (rlim_t)kb << 10};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            abort();
    }
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, n);
    char *p = mmap(NULL, (size_t)mb << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        printf("the job's mmap of %ld MiB failed\n", mb);
        return 3;
    }
    for (long i = 0; i < mb << 20; i += 4096)
        p[i] = 1;
    printf("limit-as vm_kb=%ld\n", vm_kb());
    few_calls(c, n);
    ncclCommDestroy(c);
    munmap(p, (size_t)mb << 20);
    return 0;
}

static void on_term_once(int sig)
{
    sigset_t now;
    (void)sig;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    static const char yes[] = "handled SIGTERM once, SIGUSR1 blocked\n";
    static const char no[] = "handled SIGTERM once, SIGUSR1 not blocked\n";
    int blocked = sigismember(&now, SIGUSR1) == 1;
    ssize_t rc = write(STDOUT_FILENO, blocked ? yes : no, (blocked ? sizeof yes : sizeof no) - 1);
    (void)rc;
}

/* errno as the job set it, through a call: each line is the errno the call left. */
static void errno_calls(void)
{
    errno = 1234;
    ncclComm_t c = make_comm(2, 0);
    printf("init: errno %d\n", errno);
    int buf[4];
    errno = 1234;
    SHOW(ncclAllReduce(buf, buf, 779, ncclInt32, ncclSum, c, STREAM));
    printf("allreduce echo: errno %d\n", errno);
    errno = 1234;
    SHOW(ncclAllReduce(buf, buf, 777, ncclInt32, ncclSum, c, STREAM));
    printf("allreduce system error: errno %d\n", errno);
    errno = 1234;
    SHOW(ncclGroupStart());
    SHOW(ncclSend(buf, 779, ncclInt32, 1, c, STREAM));
    printf("send echo: errno %d\n", errno);
    errno = 1234;
    SHOW(ncclGroupEnd());
    printf("group: errno %d\n", errno);
    errno = 1234;
    ncclResult_t async;
    SHOW(ncclCommGetAsyncError(c, &async));
    printf("async: errno %d\n", errno);
    errno = 1234;
    SHOW(ncclCommDestroy(c));
    printf("destroy: errno %d\n", errno);
}

/* A job that takes every file descriptor: our trace must never land in its file. */
static void take_fds(const char *path, int dup_all)
{
    struct rlimit rl = {256, 256};
    if (dup_all)
        setrlimit(RLIMIT_NOFILE, &rl);
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, 5);
    usleep(300000); /* past a flush: the trace file is open and written */
    for (int fd = 3; fd < 4096; fd++)
        close(fd);
    int f = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (f < 0 || write(f, "job data here\n", 14) != 14) {
        printf("cannot write %s\n", path);
        return;
    }
    for (int fd = f + 1; fd < (dup_all ? 256 : 32); fd++)
        dup2(f, fd);
    few_calls(c, 5);
    usleep(300000);
    few_calls(c, 5);
    SHOW(ncclCommDestroy(c));
    char buf[64] = "";
    ssize_t n = pread(f, buf, sizeof buf - 1, 0);
    printf("job file: %zd bytes: %s", n, n > 0 ? buf : "\n");
    fflush(stdout);
    /* the numbers go back: a sanitizer's leak check at exit needs a free fd */
    for (int fd = f + 1; fd < (dup_all ? 256 : 32); fd++)
        close(fd);
}

static void on_term(int sig)
{
    static const char msg[] = "handled SIGTERM\n";
    (void)sig;
    ssize_t rc = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)rc;
}

static int forked(int child_uses_nccl)
{
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, 3);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (child_uses_nccl) {
            ncclComm_t cc = make_comm(2, 1);
            few_calls(cc, 2);
            ncclCommDestroy(cc);
        }
        printf("child done\n");
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    few_calls(c, 4);
    ncclCommDestroy(c);
    printf("parent done, child status %d\n", status);
    return 0;
}

/* Output is flushed by hand before each way out: _exit and the signals would drop stdio's
 * buffer, and the test compares stdout with and without the shim. */
static ncclComm_t g_kept; /* reachable at exit: LeakSanitizer would fail the bare run */

static int leave(int n, int ms, int m, const char *how, const char *pidfile)
{
    g_kept = make_comm(2, 0);
    few_calls(g_kept, n);
    usleep((useconds_t)ms * 1000);
    few_calls(g_kept, m);
    printf("leaving by %s\n", how);
    fflush(stdout);
    if (!strcmp(how, "return"))
        return 0;
    if (!strcmp(how, "exit"))
        exit(3);
    if (!strcmp(how, "_exit"))
        _exit(4);
    if (!strcmp(how, "sigterm"))
        raise(SIGTERM);
    else if (!strcmp(how, "abort"))
        abort();
    else if (!strcmp(how, "kill") && pidfile) {
        char tmp[4200], pid[32];
        snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
        if (fd < 0 || write(fd, pid, (size_t)len) != len || close(fd) != 0 ||
            rename(tmp, pidfile) != 0)
            return 5;
        for (;;)
            pause();
    }
    fprintf(stderr, "shim_job: unknown way out '%s'\n", how);
    return 2;
}

static int exec_after_calls(int n, const char *path)
{
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, n);
    fflush(stdout);
    char *const args[] = {(char *)path, NULL};
    errno = 0;
    execv(path, args);
    printf("execv failed: errno %d\n", errno);
    /* on stderr, which the tests compare less collprof's lines: the live blocks still there */
    const char *live = getenv("COLLPROF_LIVE_DIR");
    DIR *d = live ? opendir(live) : NULL;
    int blocks = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        blocks += e->d_name[0] != '.';
    if (d) {
        closedir(d);
        fprintf(stderr, "live blocks after the failed exec: %d\n", blocks);
    }
    few_calls(c, 2);
    ncclCommDestroy(c);
    return 0;
}

static void *abort_later(void *arg)
{
    usleep(50000);
    SHOW(ncclCommAbort((ncclComm_t)arg));
    return NULL;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void churn(int n, int abort_every)
{
    float buf[16];
    ncclComm_t last = NULL;
    long reused = 0;
    for (int i = 0; i < n; i++) {
        ncclUniqueId id;
        memset(&id, 0, sizeof id);
        snprintf(id.internal, sizeof id.internal, "churn-%d", i);
        ncclComm_t c = NULL;
        if (ncclCommInitRank(&c, 2, id, 0) != ncclSuccess)
            abort();
        reused += c == last;
        last = c;
        if (ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, c, STREAM) != ncclSuccess)
            abort();
        if (abort_every > 0 && i % abort_every == abort_every - 1) {
            if (ncclCommAbort(c) != ncclSuccess)
                abort();
        } else if (ncclCommDestroy(c) != ncclSuccess) {
            /* NCCL said no (STUB_NCCL_DESTROY_FAILS): the comm lives on, used once more */
            fprintf(stderr, "destroy failed %d\n", i);
            if (ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, c, STREAM) != ncclSuccess ||
                ncclCommDestroy(c) != ncclSuccess)
                abort();
        }
        if (i == n / 2 - 1 || i == n - 1)
            fprintf(stderr, "rss_kb %d %ld\n", i + 1, rss_kb());
    }
    printf("churn done\n");
    fprintf(stderr, "reused %ld\n", reused);
    const char *live = getenv("COLLPROF_LIVE_DIR");
    if (!live || !getenv("LD_PRELOAD"))
        return;
    char path[4200], err[512];
    cp_stats_path(path, sizeof path, live, (unsigned)getuid(), (unsigned)getpid());
    cp_stats_handle *h = cp_stats_open(path, err, sizeof err);
    static cp_stats_block b;
    int got = -1;
    for (int i = 0; h && i < 1000; i++) {
        got = cp_stats_snapshot(h, &b);
        if (got == 0 && b.recent_total >= (uint64_t)n)
            break;
        usleep(10000);
    }
    unsigned named = 0;
    for (uint32_t i = 0; got == 0 && i < b.recent_count && i < CP_STATS_RECENT; i++)
        named += b.recent[i].comm_id != 0;
    fprintf(stderr, "live_named %u %u %llu%s%s\n", named, got == 0 ? b.recent_count : 0,
            got == 0 ? (unsigned long long)b.recent_total : 0ull, h ? "" : " ", h ? "" : err);
    if (h)
        cp_stats_close(h);
}

/* The fault that raises sig by itself, where there is one: the real one, unchecked by the
 * sanitizers (UBSan would report the division, ASan the null write, and end the job its
 * own way). */
__attribute__((no_sanitize("address", "undefined"))) static void fault(int sig)
{
    static volatile int zero;
    if (sig == SIGSEGV) {
        *(volatile int *)(uintptr_t)zero = 1;
    } else if (sig == SIGFPE) {
        volatile int x = 1 / zero;
        (void)x;
    } else if (sig == SIGILL) {
        __builtin_trap();
    } else if (sig == SIGBUS) {
        FILE *f = tmpfile();
        volatile char *p = f ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0) : NULL;
        if (p && p != MAP_FAILED)
            (void)p[0]; /* past the end of an empty file */
    }
    raise(sig);
}

static void *fault_thread(void *arg)
{
    fault((int)(intptr_t)arg);
    return NULL;
}

static int die(int n, int sig, const char *how)
{
    g_kept = make_comm(2, 0);
    few_calls(g_kept, n);
    printf("dying\n");
    fflush(stdout);
    if (!strcmp(how, "kill")) {
        kill(getpid(), sig);
    } else if (!strcmp(how, "fault")) {
        fault(sig);
    } else if (!strcmp(how, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, fault_thread, (void *)(intptr_t)sig);
        pthread_join(t, NULL);
    }
    for (int i = 0; i < 500; i++) /* a signal that is still on its way */
        usleep(10000);
    printf("still alive\n");
    return 0;
}

static volatile sig_atomic_t g_eintr_done;
static int g_eintr_sig;
static int g_eintr_pipe[2];

static void on_eintr_signal(int sig) { (void)sig; }

static void *eintr_sender(void *arg)
{
    pthread_t main_thread = *(pthread_t *)arg;
    for (int i = 0; i < 150 && !g_eintr_done; i++) {
        pthread_kill(main_thread, g_eintr_sig);
        usleep(20000);
    }
    if (!g_eintr_done && write(g_eintr_pipe[1], "x", 1) != 1)
        abort();
    return NULL;
}

static int eintr(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_eintr_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    g_eintr_sig = sig;
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, 5);
    if (pipe(g_eintr_pipe) != 0)
        return 5;
    pthread_t self = pthread_self(), t;
    pthread_create(&t, NULL, eintr_sender, &self);
    char ch;
    ssize_t r = read(g_eintr_pipe[0], &ch, 1);
    int e = errno;
    g_eintr_done = 1;
    pthread_join(t, NULL);
    printf("read: %s\n", r < 0 ? strerror(e) : "data");
    ncclCommDestroy(c);
    return 0;
}

static void on_frequent(int sig) { (void)sig; }

static int dispositions(void)
{
    const int sigs[] = {SIGPROF, SIGALRM, SIGVTALRM, SIGIO, SIGRTMIN};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], on_frequent);
    signal(SIGPIPE, SIG_IGN);
    ncclComm_t c = make_comm(2, 0);
    few_calls(c, 3);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction now;
        sigaction(sigs[i], NULL, &now);
        printf("%d: %s\n", sigs[i], now.sa_handler == on_frequent ? "the job's" : "another");
    }
    struct sigaction pipe_now;
    sigaction(SIGPIPE, NULL, &pipe_now);
    printf("SIGPIPE: %s\n", pipe_now.sa_handler == SIG_IGN ? "ignored" : "another");
    ncclCommDestroy(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "basic";
    int a1 = argc > 2 ? atoi(argv[2]) : 0, a2 = argc > 3 ? atoi(argv[3]) : 0;
    int a3 = argc > 4 ? atoi(argv[4]) : 0;
    if (!strcmp(what, "basic")) {
        basic();
    } else if (!strcmp(what, "none")) {
        printf("no nccl\n");
    } else if (!strcmp(what, "queries")) {
        int v;
        SHOW(ncclGetVersion(&v));
        printf("%s\n", ncclGetErrorString(ncclSuccess));
    } else if (!strcmp(what, "threads")) {
        threads(a1, a2, a3);
    } else if (!strcmp(what, "plugin")) {
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, a1);
        ncclCommDestroy(c);
        printf("plugin done\n");
    } else if (!strcmp(what, "plugin-env")) {
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, a1);
        ncclCommDestroy(c);
        const char *p = getenv("NCCL_PROFILER_PLUGIN");
        printf("NCCL_PROFILER_PLUGIN %s\nvm_kb=%ld\n", p ? "set" : "unset", vm_kb());
    } else if (!strcmp(what, "limit-as") && argc > 4) {
        return limit_as(atol(argv[2]), a2, atol(argv[4]));
    } else if (!strcmp(what, "first-open")) {
        first_open(a1);
    } else if (!strcmp(what, "stderr-file") && argc > 3) {
        stderr_file(argv[2], a2);
    } else if (!strcmp(what, "burst")) {
        ncclComm_t c = make_comm(1, 0);
        few_calls(c, a1);
        ncclCommDestroy(c);
        printf("burst done\n");
    } else if (!strcmp(what, "many")) { /* a long job: one size, so one row of the report */
        ncclComm_t c = make_comm(1, 0);
        float x[256];
        for (int i = 0; i < a1; i++)
            ncclAllReduce(x, x, 256, ncclFloat32, ncclSum, c, STREAM);
        ncclCommDestroy(c);
        printf("many done\n");
    } else if (!strcmp(what, "many-term")) { /* ... ended by SIGTERM, default action */
        ncclComm_t c = make_comm(1, 0);
        float x[256];
        for (int i = 0; i < a1; i++)
            ncclAllReduce(x, x, 256, ncclFloat32, ncclSum, c, STREAM);
        printf("many-term raises\n");
        fflush(stdout);
        raise(SIGTERM);
    } else if (!strcmp(what, "kill")) {
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, 10);
        usleep((useconds_t)a1 * 1000);
        raise(SIGKILL);
    } else if (!strcmp(what, "sigterm") || !strcmp(what, "sigterm-handled")) {
        if (!strcmp(what, "sigterm-handled"))
            signal(SIGTERM, on_term);
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, 10);
        raise(SIGTERM);
        printf("after SIGTERM\n");
        ncclCommDestroy(c);
    } else if (!strcmp(what, "sigterm-once")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term_once;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGUSR1);
        sigaction(SIGTERM, &sa, NULL);
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, 3);
        raise(SIGTERM);
        printf("after the first SIGTERM\n");
        fflush(stdout);
        raise(SIGTERM);
        printf("after the second SIGTERM\n");
        ncclCommDestroy(c);
    } else if ((!strcmp(what, "closefds") || !strcmp(what, "dup2fds")) && argc > 2) {
        take_fds(argv[2], !strcmp(what, "dup2fds"));
    } else if (!strcmp(what, "errno")) {
        errno_calls();
    } else if (!strcmp(what, "fork-nccl") || !strcmp(what, "fork-plain")) {
        return forked(!strcmp(what, "fork-nccl"));
    } else if (!strcmp(what, "exits") && argc > 5) {
        return leave(a1, a2, a3, argv[5], argc > 6 ? argv[6] : NULL);
    } else if (!strcmp(what, "exec") && argc > 3) {
        return exec_after_calls(a1, argv[3]);
    } else if (!strcmp(what, "block")) {
        ncclComm_t c = make_comm(2, 0);
        float buf[781];
        for (int i = 0; i < a1; i++)
            SHOW(ncclAllReduce(buf, buf, 781, ncclFloat32, ncclSum, c, STREAM));
        SHOW(ncclCommDestroy(c));
    } else if (!strcmp(what, "abort-blocked")) {
        ncclComm_t c = make_comm(2, 0);
        float buf[781];
        pthread_t t;
        pthread_create(&t, NULL, abort_later, c);
        SHOW(ncclAllReduce(buf, buf, 781, ncclFloat32, ncclSum, c, STREAM));
        pthread_join(t, NULL);
    } else if (!strcmp(what, "churn")) {
        churn(a1, a2);
    } else if (!strcmp(what, "die") && argc > 4) {
        return die(a1, a2, argv[4]);
    } else if (!strcmp(what, "chdir") && argc > 3) {
        if (chdir(argv[2]) != 0)
            return 5;
        ncclComm_t c = make_comm(2, 0);
        few_calls(c, 5);
        usleep(300000); /* past a flush: the trace file is open and written */
        if (chdir(argv[3]) != 0)
            return 6;
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
        few_calls(c, 5);
        usleep(300000);
        SHOW(ncclCommDestroy(c));
    } else if (!strcmp(what, "dispositions")) {
        return dispositions();
    } else if (!strcmp(what, "eintr")) {
        return eintr(a1);
    } else if (!strcmp(what, "lookup-shrink")) {
        typedef ncclResult_t (*shrink_fn)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *,
                                          int);
        shrink_fn shrink = (shrink_fn)dlsym(RTLD_DEFAULT, "ncclCommShrink");
        printf("ncclCommShrink %s\n", shrink ? "found" : "absent");
        ncclComm_t c = make_comm(4, 1), sh = NULL;
        int excl = 0;
        if (shrink)
            SHOW(shrink(c, &excl, 1, &sh, NULL, NCCL_SHRINK_DEFAULT));
        few_calls(c, 2);
        SHOW(ncclCommDestroy(c));
    } else if (!strcmp(what, "nonblocking")) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclUniqueId id;
        memset(&id, 3, sizeof id);
        ncclComm_t c = NULL;
        SHOW(ncclCommInitRankConfig(&c, 8, id, 5, &cfg));
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress)
            SHOW(ncclCommGetAsyncError(c, &st));
        few_calls(c, 1);
        SHOW(ncclCommDestroy(c));
    } else {
        fprintf(stderr, "shim_job: unknown scenario '%s'\n", what);
        return 2;
    }
    return 0;
}
