/* view_screen: `collprof view` on a terminal. The ncurses loop: read a key, turn it into
 * an action on the view's state (view_draw.h), draw the current screen into a grid and
 * copy the grid out with a colour per role. Nothing here knows what a screen shows. */
#include "tui/view.h"

#include <curses.h>
#include <string.h>

#include "tui/grid_curses.h"
#include "tui/view_draw.h"

/* Colour pairs by role; without colour (NO_COLOR, a mono terminal) bold and reverse only. */
static chtype role_attr[CPV_NATTRS];

static void setup_roles(void)
{
    int color = cpt_grid_start_colour();
    static const struct {
        short fg, bg;
        chtype mono;
    } roles[CPV_NATTRS] = {
        [CPV_NORMAL] = { -1, -1, A_NORMAL },
        [CPV_TITLE] = { COLOR_BLACK, COLOR_CYAN, A_REVERSE },
        [CPV_HEADER] = { COLOR_CYAN, -1, A_BOLD },
        [CPV_SELECTED] = { COLOR_BLACK, COLOR_YELLOW, A_REVERSE | A_BOLD },
        [CPV_BAD] = { COLOR_RED, -1, A_BOLD },
        [CPV_WARN] = { COLOR_YELLOW, -1, A_BOLD },
        [CPV_LATE] = { COLOR_RED, -1, A_BOLD },
        [CPV_WAIT] = { COLOR_BLUE, -1, A_DIM },
        [CPV_DIM] = { -1, -1, A_DIM },
    };
    for (int i = 0; i < CPV_NATTRS; i++) {
        role_attr[i] = roles[i].mono;
        if (color && i != CPV_NORMAL && i != CPV_DIM) {
            init_pair((short)i, roles[i].fg, roles[i].bg);
            role_attr[i] = COLOR_PAIR(i) | (roles[i].mono & A_BOLD);
        }
    }
}

/* Reads a filter line at the bottom row; Enter keeps it, Esc restores the old one. */
static void read_filter(cpv_state *s, const cpv_grid *g)
{
    char old[CPV_FILTER_BYTES];
    memcpy(old, s->filter, sizeof old);
    size_t n = strlen(s->filter);
    for (;;) {
        move(g->h - 1, 0);
        clrtoeol();
        attron(role_attr[CPV_WARN]);
        printw("filter: %s", s->filter);
        attroff(role_attr[CPV_WARN]);
        refresh();
        int k = getch();
        if (k == '\n' || k == KEY_ENTER || k == '\r')
            return;
        if (k == 27) {
            memcpy(s->filter, old, sizeof old);
            return;
        }
        if ((k == KEY_BACKSPACE || k == 127 || k == 8) && n)
            s->filter[--n] = '\0';
        else if (k >= 0x20 && k < 0x7f && n + 1 < sizeof s->filter) {
            s->filter[n++] = (char)k;
            s->filter[n] = '\0';
        }
    }
}

/* All key bindings: ncurses key -> the view's action; 0 for a key that means nothing. */
static int key_action(int k)
{
    switch (k) {
    case KEY_UP: case 'k': return CPV_ACT_UP;
    case KEY_DOWN: case 'j': return CPV_ACT_DOWN;
    case KEY_PPAGE: return CPV_ACT_PGUP;
    case KEY_NPAGE: case ' ': return CPV_ACT_PGDN;
    case KEY_HOME: case 'g': return CPV_ACT_HOME;
    case KEY_END: case 'G': return CPV_ACT_END;
    case KEY_LEFT: return CPV_ACT_LEFT;
    case KEY_RIGHT: return CPV_ACT_RIGHT;
    case '+': case '=': return CPV_ACT_ZOOM_IN;
    case '-': case '_': return CPV_ACT_ZOOM_OUT;
    case '0': return CPV_ACT_ZOOM_FIT;
    case '\n': case '\r': case KEY_ENTER: return CPV_ACT_ENTER;
    case 27: case KEY_BACKSPACE: case 127: return CPV_ACT_BACK;
    case '\t': return CPV_ACT_NEXT;
    case 'h': case '?': case KEY_F(1): return CPV_ACT_HELP;
    default: return 0;
    }
}

int cpt_view_run(const cpa_analysis *a, const char *dir)
{
    cpv_data d;
    if (cpv_data_init(&d, a, dir) != 0)
        return -1;
    cpv_state s;
    cpv_state_init(&s);
    /* newterm, not initscr: an unknown TERM must be an error we report, not ncurses'
     * exit(). */
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        cpv_data_free(&d);
        return -1;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25); /* Esc is a key here, not the start of a sequence to wait for */
    setup_roles();
    cpv_grid g = { 0 };
    int rc = 0, page = 1;
    for (;;) {
        if (g.w != COLS || g.h != LINES) {
            cpv_grid_free(&g);
            if (cpv_grid_init(&g, COLS, LINES) != 0) {
                rc = -1;
                break;
            }
        }
        page = cpv_draw(&d, &s, &g);
        erase();
        cpt_grid_blit(&g, role_attr, CPV_NATTRS);
        refresh();
        int k = getch();
        if (k == 'q' || k == 'Q')
            break;
        if (k == KEY_RESIZE || k == ERR)
            continue; /* the next draw takes the new size */
        if (k == '/') {
            read_filter(&s, &g);
            continue;
        }
        if (k >= '1' && k < '1' + CPV_NSCREENS) {
            cpv_goto(&s, k - '1');
            continue;
        }
        int act = key_action(k);
        if (act)
            cpv_act(&d, &s, act, page);
    }
    endwin();
    delscreen(scr);
    cpv_grid_free(&g);
    cpv_data_free(&d);
    return rc;
}
