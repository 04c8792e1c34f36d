/* top_tmux_util: `collprof top` run in a private tmux server, for the tests that drive it
 * as a user would (send-keys in, capture-pane out). Header-only; one user per test program.
 * Needs cmocka included before it. */
#ifndef COLLPROF_TOP_TMUX_UTIL_H
#define COLLPROF_TOP_TMUX_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_dir[64];  /* the test's temp dir: tmux.conf, top.pid, the blocks */
static char g_sock[96]; /* the private tmux server's socket, in g_dir: gone with it */

/* Makes the temp dir (from template) and the tmux config: 0, 1 when tmux is missing (the
 * tests skip), -1 on failure. */
static inline int tt_init(const char *template)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        return 1;
    snprintf(g_dir, sizeof g_dir, "%s", template);
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(g_sock, sizeof g_sock, "%s/tmux.sock", g_dir);
    char conf[128];
    snprintf(conf, sizeof conf, "%s/tmux.conf", g_dir);
    FILE *f = fopen(conf, "w");
    if (!f)
        return -1;
    /* the pane stays after top exits, so what it left on the terminal can be read */
    fputs("set -g remain-on-exit on\nset -g status off\n", f);
    fclose(f);
    return 0;
}

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double tt_now_s(void)
{
    return (double)mono_ns() / 1e9;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static inline int tmux(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int tmux(const char *fmt, ...)
{
    char args[4096], cmd[4300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "tmux -S %s -f %s/tmux.conf %s >/dev/null 2>&1", g_sock, g_dir,
             args);
    return system(cmd);
}

/* The output of a tmux command (malloc'ed). */
static inline char *tmux_out(const char *args)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "tmux -S %s -f %s/tmux.conf %s 2>/dev/null", g_sock, g_dir, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - 1 - n, p)) > 0)
        n += r;
    buf[n] = '\0';
    pclose(p);
    return buf;
}

static inline char *capture(void)
{
    return tmux_out("capture-pane -p -t top");
}

/* The screen and the history above it (where a resize pushes lines). */
static inline char *capture_all(void)
{
    return tmux_out("capture-pane -p -S -1000 -t top");
}

/* The screen once it holds needle (malloc'ed), NULL when it does not within timeout_ms. */
static inline char *wait_for_in(char *(*cap)(void), const char *needle, int timeout_ms)
{
    for (int t = 0; t <= timeout_ms; t += 50) {
        char *s = cap();
        if (strstr(s, needle))
            return s;
        free(s);
        sleep_ms(50);
    }
    char *s = cap();
    fprintf(stderr, "screen without \"%s\":\n%s\n", needle, s);
    free(s);
    return NULL;
}

static inline char *wait_for(const char *needle, int timeout_ms)
{
    return wait_for_in(capture, needle, timeout_ms);
}

/* A screen with every one of the NULL-terminated needles: a capture can catch a screen half
 * redrawn (CI's sanitizer pass saw a detail screen's title without its table), so a test
 * waits for each thing it then reads. */
static inline char *wait_for_all(const char *const *needles, int timeout_ms)
{
    for (int t = 0; t <= timeout_ms; t += 50) {
        char *s = capture();
        int all = 1;
        for (const char *const *n = needles; *n && all; n++)
            all = strstr(s, *n) != NULL;
        if (all)
            return s;
        free(s);
        sleep_ms(50);
    }
    char *s = capture();
    for (const char *const *n = needles; *n; n++)
        if (!strstr(s, *n))
            fprintf(stderr, "screen without \"%s\":\n%s\n", *n, s);
    free(s);
    return NULL;
}
#define WAIT_FOR_ALL(ms, ...) wait_for_all((const char *const[]){__VA_ARGS__, NULL}, (ms))

/* Line y of a screen (static buffer). */
static inline const char *line(const char *screen, int y)
{
    static char buf[512];
    for (int i = 0; i < y && screen; i++) {
        screen = strchr(screen, '\n');
        if (screen)
            screen++;
    }
    if (!screen)
        return "";
    size_t n = strcspn(screen, "\n");
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, screen, n);
    buf[n] = '\0';
    return buf;
}

/* Starts `collprof top ARGS` (ENV: more VAR=value before it) in a 100x30 pane, under a shell
 * that writes its own pid to dir/top.pid and, once top has ended, its exit status on the
 * terminal. (tmux's pane_dead_status is not used: tmux 3.3 sometimes marks the pane dead
 * without reaping it.) */
static inline void start_top(const char *env, const char *args)
{
    const char *build = getenv("COLLPROF_BUILD_DIR");
    assert_non_null(build);
    char pidfile[128];
    snprintf(pidfile, sizeof pidfile, "%s/top.pid", g_dir);
    unlink(pidfile);
    tmux("kill-session -t top"); /* what a failed test left */
    assert_int_equal(tmux("new-session -d -s top -x 100 -y 30 \"echo \\$\\$ > '%s/top.pid'; "
                          "env COLLPROF_LIVE_DIR='%s' NO_COLOR=1 %s '%s/bin/collprof' top %s; "
                          "echo top exit \\$?\"", g_dir, g_dir, env, build, args), 0);
}

/* The pid of collprof top: the only child of the pane's shell. */
static inline pid_t top_pid(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/top.pid", g_dir);
    for (int t = 0; t < 100; t++) {
        FILE *f = fopen(path, "r");
        int sh = 0, pid = 0;
        if (f) {
            int ok = fscanf(f, "%d", &sh);
            fclose(f);
            if (ok == 1 && sh > 0) {
                char children[128];
                snprintf(children, sizeof children, "/proc/%d/task/%d/children", sh, sh);
                f = fopen(children, "r");
                if (f) {
                    ok = fscanf(f, "%d", &pid);
                    fclose(f);
                    if (ok == 1 && pid > 0)
                        return pid;
                }
            }
        }
        sleep_ms(20);
    }
    fail_msg("no pid for collprof top");
    return -1;
}

/* Once top has ended, nothing of its screen is left on the pane or in its history (no title,
 * no column heading, no `gone`, a word of its rows): the first line is the shell's
 * "top exit 0" (then, maybe, tmux's "Pane is dead"). */
static inline void assert_exit_clean(const char *gone)
{
    char *s = wait_for_in(capture_all, "top exit ", 5000);
    assert_non_null(s);
    const char *p = s;
    while (*p == ' ' || *p == '\n')
        p++;
    assert_int_equal(strncmp(p, "top exit 0\n", 11), 0);
    assert_null(strstr(s, "collprof top"));
    assert_null(strstr(s, "RANK"));
    assert_null(strstr(s, gone));
    free(s);
}

#endif
