/* progress: a "\r" status line on a terminal during a long step (progress.h). */
#include "cli/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"

#define SHOW_AFTER_S 2.0
#define REDRAW_NS 250000000L

struct cli_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    char prefix[128];
    char stage[48];
    double fraction;
    struct timespec started;
    size_t drawn; /* characters of the line on screen, to erase */
};

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Called with the lock held. One write, so the line is never torn by another writer. */
static void draw(cli_progress *p)
{
    double t = since(&p->started);
    if (t < SHOW_AFTER_S)
        return;
    char line[256];
    int n = snprintf(line, sizeof line, "\r%s: %s %3.0f%%, %.0f s", p->prefix, p->stage,
                     100 * p->fraction, t);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    /* Pad over a longer previous line. */
    while (len - 1 < p->drawn && len < sizeof line - 1)
        line[len++] = ' ';
    if (write(STDERR_FILENO, line, len) > 0)
        p->drawn = len - 1;
}

static void *run(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += REDRAW_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
        if (!p->stop)
            draw(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cli_progress *cli_progress_start(const char *verb, const char *what)
{
    if (!isatty(STDERR_FILENO))
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    /* A line wider than the terminal wraps, and "\r" no longer returns to its start: a
     * long path is cut to its tail, the part that tells one run from another. */
    char clean[64];
    size_t n = strlen(what), max = 40;
    const char *tail = what;
    if (n > max) {
        tail = what + n - (max - 3);
        while (((unsigned char)*tail & 0xc0) == 0x80)
            tail++;
    }
    size_t skip = tail != what ? 3 : 0;
    cp_text_escape(clean + skip, sizeof clean - skip, tail, strlen(tail));
    if (skip)
        memcpy(clean, "...", 3);
    snprintf(p->prefix, sizeof p->prefix, "collprof: %s: %s", verb, clean);
    snprintf(p->stage, sizeof p->stage, "starting");
    clock_gettime(CLOCK_MONOTONIC, &p->started);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int ok = pthread_mutex_init(&p->lock, NULL) == 0 && pthread_cond_init(&p->wake, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_create(&p->thread, NULL, run, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void cli_progress_update(void *ctx, const char *stage, double fraction)
{
    cli_progress *p = ctx;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->stage, sizeof p->stage, "%s", stage ? stage : "");
    p->fraction = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_stop(cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    if (p->drawn) {
        char blank[260];
        size_t n = p->drawn < sizeof blank - 2 ? p->drawn : sizeof blank - 2;
        blank[0] = '\r';
        memset(blank + 1, ' ', n);
        blank[n + 1] = '\r';
        if (write(STDERR_FILENO, blank, n + 2) < 0) {
            /* A terminal that went away: nothing left to erase. */
        }
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}
