/* launch: --launch N, a torchrun in miniature for one machine.
 *
 * Each rank is this program re-executed (/proc/self/exe), not merely forked: exec is what makes
 * an LD_PRELOADed profiler and the emulation's per-host library load into every rank, exactly
 * as under a real launcher. The launcher itself makes no NCCL call. It forwards SIGINT and
 * SIGTERM, and when a rank fails it gives the others a grace period to fail on their own (so
 * that every rank waiting on a hung peer can print its own watchdog line) before it stops
 * them. Its status is the worst of the ranks that ended by themselves. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "emu/sim/sim.h"

extern char **environ;

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif

#define GRACE_S 5.0      /* after the first failure, before the rest are stopped */
#define KILL_AFTER_S 3.0 /* after SIGTERM, before SIGKILL */

struct child {
    pid_t pid;
    int status;     /* exit code, or 128 + signal; -1 while running */
    int stopped_by_us;
};

/* The variables a rank gets, which replace the same names inherited from the launcher. */
#define MAX_SET 10
struct env_set {
    int n;
    char *entries[MAX_SET]; /* "NAME=value" */
};

static void env_add(struct env_set *e, const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;
    char *s = malloc(len);
    if (!s || e->n == MAX_SET) {
        free(s);
        return;
    }
    snprintf(s, len, "%s=%s", name, value);
    e->entries[e->n++] = s;
}

static int env_overridden(const struct env_set *e, const char *entry)
{
    for (int i = 0; i < e->n; i++) {
        size_t k = strcspn(e->entries[i], "=") + 1;
        if (!strncmp(entry, e->entries[i], k))
            return 1;
    }
    return 0;
}

/* environ minus the overridden names, plus the set; built before fork so that the child only
 * calls execve. */
static char **child_env(const struct env_set *e)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + (size_t)e->n + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; env && i < n; i++)
        if (!env_overridden(e, environ[i]))
            env[k++] = environ[i];
    for (int i = 0; env && i < e->n; i++)
        env[k++] = e->entries[i];
    return env;
}

static int hosts_from_env(void)
{
    const char *v = getenv("COLLPROF_EMU_HOSTS");
    char *end;
    long h = v && *v ? strtol(v, &end, 10) : 1;
    if (!v || !*v || *end || h < 1 || h > 4096)
        return 1; /* the emulation itself warns about a bad value */
    return (int)h;
}

/* libcollprof-emuhost.so beside the loaded libnccl.so.2, when that is the emulation. */
static int emuhost_path(char *out, size_t cap)
{
    char nccl[PATH_MAX];
    if (sim_nccl_path(nccl, sizeof nccl))
        return -1;
    char *slash = strrchr(nccl, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    if (!sim_dir_is_emulation(nccl) ||
        snprintf(out, cap, "%s/libcollprof-emuhost.so", nccl) >= (int)cap)
        return -1;
    return access(out, F_OK) == 0 ? 0 : -1;
}

static void rank_env(struct env_set *e, int rank, int n, int hosts, const char *rdv,
                     const char *emuhost)
{
    int per = hosts > 1 ? (n + hosts - 1) / hosts : n;
    char num[32];
    snprintf(num, sizeof num, "%d", rank);
    env_add(e, "RANK", num);
    snprintf(num, sizeof num, "%d", rank % per);
    env_add(e, "LOCAL_RANK", num);
    snprintf(num, sizeof num, "%d", n);
    env_add(e, "WORLD_SIZE", num);
    snprintf(num, sizeof num, "%d", per);
    env_add(e, "LOCAL_WORLD_SIZE", num);
    env_add(e, SIM_RENDEZVOUS_VAR, rdv);
    if (hosts <= 1)
        return;
    snprintf(num, sizeof num, "%d", rank / per);
    env_add(e, "COLLPROF_EMU_HOST_ID", num);
    if (!emuhost)
        return;
    const char *pre = getenv("LD_PRELOAD");
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", pre && *pre ? pre : "", pre && *pre ? ":" : "",
             emuhost);
    env_add(e, "LD_PRELOAD", buf);
#ifdef SIM_ASAN
    /* ASan insists on being first in the initial library list, which a preload precedes. */
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(buf, sizeof buf, "%s%sverify_asan_link_order=0", asan && *asan ? asan : "",
             asan && *asan ? ":" : "");
    env_add(e, "ASAN_OPTIONS", buf);
#endif
}

static char **child_argv(int argc, char **argv, const struct sim_options *o)
{
    char **av = calloc((size_t)argc + 1, sizeof *av);
    int k = 0;
    for (int i = 0; av && i < argc; i++)
        if (i < o->launch_argi || i >= o->launch_argi + o->launch_argc)
            av[k++] = argv[i];
    return av;
}

static void stop_all(struct child *c, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (c[i].status < 0 && c[i].pid > 0) {
            kill(c[i].pid, sig);
            c[i].stopped_by_us = 1;
        }
}

static void remove_rendezvous(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/nccl-unique-id", dir) < (int)sizeof path)
        unlink(path);
    rmdir(dir);
}

int sim_launch(int argc, char **argv, const struct sim_options *o)
{
    int n = o->launch, hosts = hosts_from_env();
    char emuhost[PATH_MAX], rdv[PATH_MAX];
    int have_emuhost = hosts > 1 && emuhost_path(emuhost, sizeof emuhost) == 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(rdv, sizeof rdv, "%s/collprof-sim-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(rdv)) {
        sim_say("cannot make a rendezvous directory '%s': %s", rdv, strerror(errno));
        return SIM_EXIT_CANNOT_RUN;
    }
    struct child *kids = calloc((size_t)n, sizeof *kids);
    char **av = child_argv(argc, argv, o);
    if (!kids || !av) {
        sim_say("out of memory");
        return SIM_EXIT_CANNOT_RUN;
    }
    /* Signals are taken synchronously (sigtimedwait), so none is lost between checks; the
     * ranks get the launcher's original mask back before exec. */
    sigset_t wait_set, old;
    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGINT);
    sigaddset(&wait_set, SIGTERM);
    sigaddset(&wait_set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &wait_set, &old);
    fflush(NULL);

    int live = 0, worst = 0, interrupted = 0;
    for (int r = 0; r < n; r++) {
        struct env_set e = { 0 };
        rank_env(&e, r, n, hosts, rdv, have_emuhost ? emuhost : NULL);
        char **env = child_env(&e);
        pid_t pid = env ? fork() : -1;
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            execve("/proc/self/exe", av, env);
            _exit(127);
        }
        free(env);
        for (int i = 0; i < e.n; i++)
            free(e.entries[i]);
        kids[r].pid = pid;
        kids[r].status = -1;
        if (pid < 0) {
            sim_say("cannot start rank %d: %s", r, strerror(errno));
            worst = SIM_EXIT_CANNOT_RUN;
            stop_all(kids, r, SIGTERM);
            n = r;
            break;
        }
        live++;
    }

    double first_failure = 0, term_sent = 0;
    while (live > 0) {
        struct timespec tick = { 0, 100 * 1000 * 1000 };
        int sig = sigtimedwait(&wait_set, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            interrupted = 1;
            for (int i = 0; i < n; i++)
                if (kids[i].status < 0)
                    kill(kids[i].pid, sig);
        }
        int ws;
        pid_t pid;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
            for (int i = 0; i < n; i++) {
                if (kids[i].pid != pid)
                    continue;
                kids[i].status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
                live--;
                if (kids[i].status && !first_failure)
                    first_failure = sim_now_s();
                /* a rank this launcher stopped did not fail by itself; an interrupt's did */
                if (!kids[i].stopped_by_us || interrupted)
                    worst = kids[i].status > worst ? kids[i].status : worst;
            }
        }
        double now = sim_now_s();
        if (first_failure && live > 0 && !term_sent && now - first_failure > GRACE_S) {
            sim_say("launch: a rank failed %g s ago; stopping the %d still running", GRACE_S,
                    live);
            stop_all(kids, n, SIGTERM);
            term_sent = now;
        }
        if (term_sent && live > 0 && now - term_sent > KILL_AFTER_S)
            stop_all(kids, n, SIGKILL);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    remove_rendezvous(rdv);
    free(av);
    free(kids);
    return worst;
}
