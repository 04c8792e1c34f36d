/* What each key does to the state of `collprof top` (top_draw.h): every binding is here, so
 * the help screen and the behaviour are checked against one place. */
#include "tui/top_draw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int detail_key(cpt_state *s, int key, int page)
{
    switch (key) {
    case 'q':
    case CPT_KEY_ESC:
    case CPT_KEY_ENTER:
        s->screen = CPT_TABLE;
        break;
    case 'h':
        s->prev_screen = CPT_DETAIL;
        s->screen = CPT_HELP;
        break;
    /* the draw clamps what goes past the end */
    case CPT_KEY_UP:
        if (s->detail_scroll > 0)
            s->detail_scroll--;
        break;
    case CPT_KEY_DOWN:
        s->detail_scroll++;
        break;
    case CPT_KEY_PGUP:
        s->detail_scroll -= s->detail_scroll < (size_t)page ? s->detail_scroll : (size_t)page;
        break;
    case CPT_KEY_PGDN:
        s->detail_scroll += (size_t)page;
        break;
    case CPT_KEY_HOME:
        s->detail_scroll = 0;
        break;
    case CPT_KEY_END:
        s->detail_scroll = SIZE_MAX / 2;
        break;
    default:
        return CPT_KEEP;
    }
    return CPT_REDRAW;
}

static int filter_key(cpt_state *s, int key)
{
    size_t n = strlen(s->filter);
    if (key == CPT_KEY_ENTER) {
        s->editing = 0;
    } else if (key == CPT_KEY_ESC) {
        s->editing = 0;
        s->filter[0] = '\0';
    } else if (key == CPT_KEY_BACKSPACE) {
        if (n)
            s->filter[n - 1] = '\0';
    } else if (key >= 0x20 && key < 0x7f) {
        if (n + 1 < sizeof s->filter) {
            s->filter[n] = (char)key;
            s->filter[n + 1] = '\0';
        }
    } else {
        return CPT_KEEP;
    }
    return CPT_REDRAW;
}

static int table_key(const cpt_live *l, cpt_state *s, int key, int page)
{
    switch (key) {
    case 'q':
        return CPT_QUIT;
    case 's':
        s->sort = (s->sort + 1) % CPT_NSORTS;
        return CPT_REDRAW;
    case '/':
        s->editing = 1;
        return CPT_REDRAW;
    case CPT_KEY_ESC:
        s->filter[0] = '\0';
        return CPT_REDRAW;
    case 'h':
        s->prev_screen = CPT_TABLE;
        s->screen = CPT_HELP;
        return CPT_REDRAW;
    default:
        break;
    }

    size_t *idx = malloc((l->nranks ? l->nranks : 1) * sizeof *idx);
    if (!idx)
        return CPT_KEEP;
    size_t n = cpt_rows(l, s, idx, l->nranks);
    size_t sel = cpt_settle(l, s, idx, n);
    int r = CPT_REDRAW;
    switch (key) {
    case CPT_KEY_UP:
        if (sel > 0)
            sel--;
        break;
    case CPT_KEY_DOWN:
        if (sel + 1 < n)
            sel++;
        break;
    case CPT_KEY_PGUP:
        sel -= sel < (size_t)page ? sel : (size_t)page;
        break;
    case CPT_KEY_PGDN:
        sel = sel + (size_t)page < n ? sel + (size_t)page : (n ? n - 1 : 0);
        break;
    case CPT_KEY_HOME:
        sel = 0;
        break;
    case CPT_KEY_END:
        sel = n ? n - 1 : 0;
        break;
    case CPT_KEY_ENTER:
        if (n) {
            s->screen = CPT_DETAIL;
            s->detail_scroll = 0;
        }
        break;
    default:
        r = CPT_KEEP;
        break;
    }
    if (n) {
        s->sel = sel;
        memcpy(s->sel_path, l->ranks[idx[sel]].path, sizeof s->sel_path);
    }
    free(idx);
    return r;
}

int cpt_key(const cpt_live *l, cpt_state *s, int key, int rows_per_page)
{
    int page = rows_per_page > 0 ? rows_per_page : 1;
    if (s->screen == CPT_HELP) {
        s->screen = s->prev_screen;
        return CPT_REDRAW;
    }
    if (s->screen == CPT_DETAIL)
        return detail_key(s, key, page);
    if (s->editing)
        return filter_key(s, key);
    return table_key(l, s, key, page);
}
