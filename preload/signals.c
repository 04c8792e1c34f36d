/* signals: the job's fatal signals, met on their way so that a crash keeps its last calls.
 *
 * Which: every signal whose default action ends the process (signal(7): term or core) and
 * that can be caught, in two kinds:
 *   chained       the crash signals (SEGV BUS FPE ILL TRAP SYS ABRT) and the requests to stop
 *                 (TERM INT QUIT HUP XCPU XFSZ USR1 USR2): taken over a job's own handler
 *                 too, which runs after the flush (Python's faulthandler, PyTorch's fatal
 *                 handler, a launcher's SIGUSR1 for a checkpoint are each rare and usually
 *                 the job's last moments)
 *   default only  PIPE ALRM VTALRM PROF IO STKFLT PWR and the real-time signals: taken only
 *                 while their disposition is SIG_DFL, i.e. only when they would kill. A
 *                 job's handler of these (timers, sampling profilers, I/O readiness, its own
 *                 protocol on SIGRTMIN+n) may run thousands of times a second and must not
 *                 pay a flush each time.
 * An ignored signal (SIG_IGN) is left alone, and so is one whose handler the job installs
 * after tracing started (it replaces ours).
 *
 * At the default action the handler writes what the rings hold, END with the signal and the
 * DONEs it cannot make counted as lost (writer_thread.c), marks the live block exited and
 * unlinks it, restores SIG_DFL and raises the signal again. The signal stays blocked while
 * the handler runs, so it is delivered on return: a fault returns to its instruction with
 * the default action pending, so the core dump (RLIMIT_CORE allowing) shows the faulting
 * context, and the exit status is the one the job would have had. The flush waits at most
 * 200 ms for the writer's token (a crash while the writer holds it, a crash inside the
 * shim's own flush), then gives up: a dying process is never held longer.
 *
 * A job's handler is called as the kernel would call it: ours is installed with its sa_mask
 * and its SA_RESTART, SA_ONSTACK and SA_NODEFER (an interrupted read returns EINTR exactly
 * when it would without us), SA_RESETHAND emulated. When that handler returns having put
 * back SIG_DFL with the signal pending again, or after a fault that will fault again, the
 * process is about to die as by the default: END and the live block then too. A handler that
 * ends the process from inside itself (Python's faulthandler restores SIG_DFL and raises
 * again under SA_NODEFER) does it through raise(), which the shim exports: a raise of a
 * signal that will kill now (the default action, fatal, not blocked) writes END first. Any
 * other way a handler ends the process (kill(2), a fault of its own) leaves the trace
 * flushed up to the handler's call, without END, and the live block in place.
 */
#include "preload/shim.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CP_NSIG 65 /* Linux: 1..64 */

static const int g_chained[] = {SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGTRAP, SIGSYS,  SIGABRT,
                                SIGTERM, SIGINT,  SIGQUIT, SIGHUP,  SIGXCPU, SIGXFSZ, SIGUSR1,
                                SIGUSR2};
static const int g_default_only[] = {SIGPIPE, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
#ifdef SIGSTKFLT /* not on every architecture */
                                     SIGSTKFLT,
#endif
#ifdef SIGPWR
                                     SIGPWR,
#endif
};

static struct sigaction g_prev[CP_NSIG];

static int is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static int is_ignored(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_IGN;
}

/* The job's handler, called as the kernel would have called it: with its own sa_mask blocked
 * (and the signal itself unless SA_NODEFER: ours was installed with both, this only repeats
 * them), and once only under SA_RESETHAND, after which the disposition is the default again:
 * our handler stays, so that the next one still writes END, but treats it as fatal. */
static void call_job_handler(int sig, const struct sigaction *prev, siginfo_t *info, void *uctx)
{
    if (is_ignored(prev))
        return;
    if (prev->sa_flags & SA_RESETHAND) {
        memset(&g_prev[sig], 0, sizeof g_prev[sig]);
        g_prev[sig].sa_handler = SIG_DFL;
    }
    sigset_t mask, old;
    mask = prev->sa_mask;
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (prev->sa_flags & SA_NODEFER) {
        sigemptyset(&mask);
        sigaddset(&mask, sig);
        pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
    }
    if (prev->sa_flags & SA_SIGINFO)
        prev->sa_sigaction(sig, info, uctx);
    else
        prev->sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* After the job's handler returned: whether the return ends the process by `sig`'s default
 * action (the handler restored SIG_DFL, and the signal is pending again or was a fault that
 * re-executes). */
static int dies_on_return(int sig, const siginfo_t *info)
{
    struct sigaction now;
    if (sigaction(sig, NULL, &now) != 0 || !is_default(&now))
        return 0; /* ours still (a pending one comes back to us), or the job's */
    sigset_t pending;
    if (sigpending(&pending) == 0 && sigismember(&pending, sig) == 1)
        return 1;
    int refaults = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
    return refaults && info && info->si_code > 0; /* > 0: the kernel's, not kill/raise */
}

/* The process ends by `sig`: what can be written is, END says how, the live block goes. */
static void write_the_end(int sig, int traced)
{
    if (!traced)
        return;
    cp_writer_flush_from_signal(sig);
    cp_live_close(1);
    cp_process_dying();
}

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    struct sigaction prev = g_prev[sig];
    /* a vfork child shares our memory but not our trace: it only dies */
    int traced = cp_trace_open_here();
    if (is_default(&prev)) {
        write_the_end(sig, traced);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig); /* blocked while we run: delivered, with the default action, on return */
    } else {
        /* Only a signal that will end the process gets an END record: a job's own handler
         * may well let it live on (Python's SIGINT handler does). */
        if (traced)
            cp_writer_flush_from_signal(0);
        call_job_handler(sig, &prev, info, uctx);
        if (dies_on_return(sig, info))
            write_the_end(sig, traced && cp_trace_open_here());
    }
    errno = saved;
}

static int kills_by_default(int sig)
{
    if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        return 1;
    for (size_t i = 0; i < sizeof g_chained / sizeof g_chained[0]; i++)
        if (g_chained[i] == sig)
            return 1;
    for (size_t i = 0; i < sizeof g_default_only / sizeof g_default_only[0]; i++)
        if (g_default_only[i] == sig)
            return 1;
    return 0;
}

/* libc's raise (block every signal, tgkill this thread, restore the mask), after END when
 * the signal will end the process as soon as it is sent: its default action, which kills,
 * and not blocked here. Everywhere else a raise reaches our handler or the job's, or waits
 * blocked; this is the path of a job's handler that put the default back and re-raises
 * under SA_NODEFER, or of a job that restored a default itself. */
__attribute__((visibility("default"))) int raise(int sig)
{
    int saved = errno;
    struct sigaction now;
    sigset_t mask;
    if (sig > 0 && sig < CP_NSIG && kills_by_default(sig) && cp_trace_open_here() &&
        sigaction(sig, NULL, &now) == 0 && is_default(&now) &&
        pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 && sigismember(&mask, sig) == 0)
        write_the_end(sig, 1);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    errno = saved;
    long rc = syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)sig);
    saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return rc == 0 ? 0 : -1;
}

static void install(int sig, int chained)
{
    struct sigaction old;
    if (sig <= 0 || sig >= CP_NSIG || sigaction(sig, NULL, &old) != 0)
        return;
    int dfl = is_default(&old);
    if (is_ignored(&old) || (!dfl && !chained))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    if (dfl) {
        /* The process is dying: every other signal waits (the first one decides how it
         * ends), and a thread with an alternate stack overflowing its own still reaches us. */
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigfillset(&sa.sa_mask);
    } else {
        sa.sa_flags = SA_SIGINFO | (old.sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER));
        sa.sa_mask = old.sa_mask;
    }
    g_prev[sig] = old;
    sigaction(sig, &sa, NULL);
}

void cp_signals_install(void)
{
    for (size_t i = 0; i < sizeof g_chained / sizeof g_chained[0]; i++)
        install(g_chained[i], 1);
    for (size_t i = 0; i < sizeof g_default_only / sizeof g_default_only[0]; i++)
        install(g_default_only[i], 0);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        install(sig, 0);
}
