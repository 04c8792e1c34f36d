/* progress: the selftest's progress callback, one step at a time (sweep_internal.h), below
 * the sweep and the pairwise matrix that both report through it. */
#include "selftest/sweep_internal.h"

void cps_progress_step(struct cps_progress *p, const char *what)
{
    cps_progress_note(p, what);
    p->done++;
}

void cps_progress_note(struct cps_progress *p, const char *what)
{
    if (p->o->progress && !p->quiet)
        p->o->progress(p->o->progress_arg, what,
                       p->total > 0 ? (double)p->done / p->total : 0.0);
}
