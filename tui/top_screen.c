/* The ncurses side of `collprof top` (top.h): one loop that scans the blocks every delay,
 * turns keys into enum cpt_key, and copies the grid top_draw.c renders onto the terminal.
 * Nothing here decides what a screen shows. */
#include "tui/top.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/settings.h"
#include "tui/grid_curses.h"
#include "tui/live.h"
#include "tui/top_draw.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The curses attribute of each role: colours when the terminal has them and NO_COLOR is not
 * set, else bold and reverse only. */
static void attr_scheme(chtype *map)
{
    int colour = cpt_grid_start_colour();
    map[CPT_NORMAL] = A_NORMAL;
    map[CPT_TITLE] = A_BOLD;
    map[CPT_HEADER] = A_REVERSE;
    map[CPT_SORTED] = A_REVERSE | A_BOLD;
    map[CPT_SELECTED] = A_REVERSE;
    map[CPT_WARN] = A_BOLD;
    map[CPT_BAD] = A_BOLD | A_REVERSE;
    map[CPT_DIM] = A_DIM;
    if (colour) {
        init_pair(1, COLOR_YELLOW, -1);
        init_pair(2, COLOR_RED, -1);
        init_pair(3, COLOR_BLACK, COLOR_CYAN);
        map[CPT_WARN] = A_BOLD | COLOR_PAIR(1);
        map[CPT_BAD] = A_BOLD | COLOR_PAIR(2);
        map[CPT_SELECTED] = COLOR_PAIR(3);
    }
}

static int map_key(int ch)
{
    switch (ch) {
    case KEY_UP: return CPT_KEY_UP;
    case KEY_DOWN: return CPT_KEY_DOWN;
    case KEY_PPAGE: return CPT_KEY_PGUP;
    case KEY_NPAGE: return CPT_KEY_PGDN;
    case KEY_HOME: return CPT_KEY_HOME;
    case KEY_END: return CPT_KEY_END;
    case KEY_ENTER: case '\n': case '\r': return CPT_KEY_ENTER;
    case 27: return CPT_KEY_ESC;
    case KEY_BACKSPACE: case 127: case 8: return CPT_KEY_BACKSPACE;
    default: return ch >= 0x20 && ch < 0x7f ? ch : -1;
    }
}

static void scan(cpt_live *l, const char *dir, uid_t uid, cpt_state *st, char *err, size_t len)
{
    /* a directory not there yet holds no profiled process: the empty state, as --once says */
    if (cpt_live_scan(l, dir, uid) < 0 && errno != ENOENT) {
        snprintf(err, len, "%s", strerror(errno));
        st->error = err;
    } else {
        st->error = NULL;
    }
}

int cpt_top_run(const cp_settings *set, uid_t uid, double delay_s)
{
    const char *dir = set->live_dir;
    if (!(delay_s > 0))
        delay_s = 1;

    struct sigaction sa, old[3];
    static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    /* ours before newterm, so curses keeps them instead of installing its own exit path */
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);

    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        for (int i = 0; i < 3; i++)
            sigaction(sigs[i], &old[i], NULL);
        const char *term = getenv("TERM");
        fprintf(stderr, "collprof: top: cannot drive the terminal \"%s\"\n", term ? term : "");
        return 3;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    chtype map[CPT_NATTRS];
    attr_scheme(map);

    cpt_live l;
    memset(&l, 0, sizeof l);
    cpt_state st;
    cpt_state_init(&st, set->hang_s, delay_s);
    l.hang_s = st.hang_s; /* the header's count and the rows' marks agree */
    char err[256];
    cpt_grid g = { 0 };
    int rc = 0;
    if (cpt_grid_init(&g, COLS, LINES) < 0)
        rc = 3;
    scan(&l, dir, uid, &st, err, sizeof err);
    double next = now_s() + delay_s;

    int page = 1, dirty = 1;
    while (!rc && !stop_signal) {
        /* drawn again only when a scan, a key or a resize changed something */
        if (dirty) {
            page = cpt_draw(&l, &st, &g);
            cpt_grid_blit(&g, map, CPT_NATTRS);
            wnoutrefresh(stdscr);
            doupdate();
            dirty = 0;
        }
        double wait = next - now_s();
        /* bounded so a signal that does not interrupt the read is still seen soon */
        int ms = wait <= 0 ? 0 : wait > 0.25 ? 250 : (int)(wait * 1000);
        timeout(ms);
        int ch = getch();
        if (stop_signal)
            break;
        if (ch == KEY_RESIZE) {
            cpt_grid_free(&g);
            if (cpt_grid_init(&g, COLS, LINES) < 0)
                rc = 3;
            erase();
            dirty = 1;
            continue;
        }
        if (ch != ERR) {
            int key = map_key(ch);
            int r = key >= 0 ? cpt_key(&l, &st, key, page) : CPT_KEEP;
            if (r == CPT_QUIT)
                break;
            dirty |= r == CPT_REDRAW;
        }
        /* on time even while keys keep coming */
        double t = now_s();
        if (t >= next) {
            scan(&l, dir, uid, &st, err, sizeof err);
            next += delay_s;
            if (next < t)
                next = t + delay_s;
            dirty = 1;
        }
    }

    erase();
    refresh();
    endwin();
    delscreen(scr);
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    cpt_grid_free(&g);
    cpt_live_free(&l);
    if (rc)
        fprintf(stderr, "collprof: top: out of memory\n");
    return rc;
}
