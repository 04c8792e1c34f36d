/* view_rows: what the view's screens share, below all of them (view_internal.h): the filter,
 * the window over a list, a rank's label and the ranks a screen lists. */
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "tui/view_internal.h"

int cpv_match(const cpv_state *s, const char *label)
{
    return !s->filter[0] || strcasestr(label, s->filter) != NULL;
}

size_t cpv_window(cpv_state *s, int screen, size_t n, int page)
{
    size_t p = page > 0 ? (size_t)page : 1;
    if (n == 0) {
        s->sel[screen] = s->scroll[screen] = 0;
        return 0;
    }
    if (s->sel[screen] >= n)
        s->sel[screen] = n - 1;
    if (s->sel[screen] < s->scroll[screen])
        s->scroll[screen] = s->sel[screen];
    if (s->sel[screen] >= s->scroll[screen] + p)
        s->scroll[screen] = s->sel[screen] - p + 1;
    if (s->scroll[screen] + p > n)
        s->scroll[screen] = n > p ? n - p : 0;
    return s->scroll[screen];
}

void cpv_rank_label(const cpv_data *d, size_t i, char *buf, size_t len, int host_cols)
{
    const cpa_rank *r = &d->a->model->ranks[i];
    /* escaped, then cut to the column at a whole escape: the columns after it stay put */
    char host[4 * sizeof r->hostname];
    cp_text_escape(host, host_cols >= 0 && (size_t)host_cols < sizeof host ? (size_t)host_cols + 1
                                                                           : sizeof host,
                   r->hostname[0] ? r->hostname : "?", r->hostname[0] ? strlen(r->hostname) : 1);
    snprintf(buf, len, "rank %-4d %-*s", (int)r->rank, host_cols, host);
}

size_t cpv_rank_rows(const cpv_data *d, const cpv_state *s, int by_lateness, size_t *out)
{
    size_t n = 0;
    for (size_t k = 0; k < d->a->model->nranks; k++) {
        size_t i = by_lateness ? d->rank_order[k] : k;
        char label[64];
        cpv_rank_label(d, i, label, sizeof label, 24);
        if (cpv_match(s, label))
            out[n++] = i;
    }
    return n;
}
