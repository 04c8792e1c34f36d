/* analyzer/hang.c: per communicator, the operation the job stopped at, who never joined it
 * and who waits in it.
 *
 * Membership comes from COMM records (a rank belongs to a comm when its file names it), the
 * size from their nranks, so a comm rank with no file is still known to be missing. Where a
 * comm stopped is the lowest of three pieces of evidence:
 *   - its ranks' last calls disagree: the first collective after the laggards' last one
 *     (their later calls would show, had they made any: a record lost in the middle is not
 *     a hang). A laggard killed without an END record may have lost its trace's tail, so
 *     collectives after its last one that the others finished are passed over (finishing
 *     proves every rank joined) up to one that a HANG record names or that took far longer
 *     than the comm's typical one (ended by an abort or a dead peer's error, not done); when
 *     the others finished everything, the last of it, where the job ended;
 *   - every rank called it, each timed it, none finished it, and nothing later finished
 *     (a rank whose trace lost records cannot show it did not finish: not on this alone);
 *   - a watchdog HANG record names it, unless that rank went on to finish a later call it
 *     made after the record (a stall that cleared, not a hang), or its own call's DONE
 *     says the kernel ended before the record was written (the news came late). A HANG
 *     record stands even when DONEs follow: an abort ends the kernels it releases.
 * At that operation a rank that made no call there (nor later) is missing, the others wait
 * (a rank whose call there was lost but that went on counts as waiting); RANK_EXITED when a
 * missing rank's trace has no END (killed) or ended on a signal. When every rank called it,
 * ranks killed in it (no END) while others lived on are missing, RANK_EXITED, unless one of
 * them is also a rank whose GPU had not started it; else HANG records whose GPU had not
 * started it name the ranks that never joined on the GPU (their stream was stuck before it);
 * else it is STUCK_IN_NCCL. A comm rank nobody has a
 * trace of is missing too (by global rank when the comm is the world in rank order). A
 * send/recv pair-direction that ends with one side only, the other making no later call on
 * it, is a hang of its own (hang_p2p.c).
 * A rank missing from one hang because another holds it (it waits there, or its GPU never
 * started that one) makes the first a consequence: `last` says where it is held, and the
 * causes sort first; then more waiting ranks, then (comm, seq) (hang_cascade.c).
 * A DONE completed after its rank's ncclCommAbort (a watchdog's) was ended by the abort: it
 * does not count as finished, and a rank whose GPU began the operation only then (its start
 * at the abort) never started it; the row is `aborted`. Then what the evidence cannot carry
 * is taken out: in a job stopped as a whole (the same fatal signal in every END, or no END
 * anywhere: killed) an operation in flight for less than a stall is `interrupted`, not hung;
 * a row whose missing rank's trace lost records is `unknown` (its calls may be what was
 * lost), never an accusation.
 * Work and memory: O(calls) time over the matched operations plus sorts of the members and
 * HANG records; memory O(members + HANG records + rows), never a table sized by a comm's
 * claimed size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/hang_internal.h"

/* Comm sizes beyond this are a hostile file's, not enumerated for absent ranks. */
#define MAX_ENUM_RANKS (1 << 20)

const char *cpa_hang_verdict_name(int v)
{
    switch (v) {
    case CPA_HANG_RANK_NOT_JOINED: return "RANK_NOT_JOINED";
    case CPA_HANG_STUCK_IN_NCCL: return "STUCK_IN_NCCL";
    case CPA_HANG_RANK_EXITED: return "RANK_EXITED";
    default: return "?";
    }
}

/* Done, and not by an abort: an abort ends the kernels it releases, which then show DONEs. */
static int really_done(const finder *f, const cpa_part *pt)
{
    const cpa_rank *r = &f->m->ranks[pt->rank_idx];
    const cpa_call *c = &r->calls[pt->call_idx];
    return c->done && !cpa_call_aborted(r, c);
}

/* Each member's last call and last finished call on its comm, and per view the last seq
 * any member finished, + 1 (fin1[v]). The calls are read rank by rank in memory order,
 * each collective's through its operation (call_op), instead of operation by operation
 * across the ranks (a cache miss a part); the maxima are the same in any order, and of two
 * calls of one member in one operation the lower call index, which the parts also put
 * first, sets done_enter_ns. -1 out of memory. */
static int scan_comms(const finder *f, uint64_t *fin1)
{
    const cpa_matched *mt = f->mt;
    uint32_t *view_of = malloc((f->ncoll ? f->ncoll : 1) * sizeof *view_of);
    /* per view, the member the rank walked last found in it: a rank's calls go to its few
     * communicators in turn, and a member search for each call was most of this scan */
    typedef struct seen_member {
        size_t rank;
        int32_t cr;
        member *mb;
    } seen_member;
    seen_member *seen = malloc((f->nviews ? f->nviews : 1) * sizeof *seen);
    if (!view_of || !seen) {
        free(view_of);
        free(seen);
        return -1;
    }
    for (size_t v = 0; v < f->nviews; v++)
        seen[v].rank = SIZE_MAX;
    for (size_t i = 0; i < f->ncoll; i++)
        view_of[i] = UINT32_MAX;
    for (size_t v = 0; v < f->nviews; v++) {
        fin1[v] = 0;
        const comm_view *cv = &f->views[v];
        for (size_t i = 0; i < cv->nops; i++)
            view_of[(size_t)(cv->ops - mt->ops) + i] = (uint32_t)v;
    }
    for (size_t r = 0; r < f->m->nranks; r++) {
        const cpa_rank *k = &f->m->ranks[r];
        const uint32_t *op_of = mt->call_op[r];
        for (size_t ci = 0; ci < k->ncalls; ci++) {
            uint32_t oi = op_of[ci];
            if (oi >= f->ncoll || view_of[oi] == UINT32_MAX)
                continue;
            const cpa_call *c = &k->calls[ci];
            uint32_t v = view_of[oi];
            int32_t cr = cpa_call_comm_rank(k, c);
            seen_member *sm = &seen[v];
            if (sm->rank != r || sm->cr != cr)
                *sm = (seen_member){r, cr, cpa_hg_find_member(&f->views[v], cr, (uint32_t)r)};
            member *mb = sm->mb;
            if (!mb)
                continue;
            uint64_t seq1 = mt->ops[oi].seq + 1;
            if (seq1 > mb->last1)
                mb->last1 = seq1;
            if (!c->done || cpa_call_aborted(k, c))
                continue;
            if (seq1 > mb->done1) {
                mb->done1 = seq1;
                mb->done_enter_ns = c->enter_ns;
            }
            if (seq1 > fin1[v])
                fin1[v] = seq1;
        }
    }
    free(view_of);
    free(seen);
    return 0;
}

/* Some rank finished it, and none that timed it lacks the DONE. */
static int finished(const finder *f, const cpa_op *o)
{
    int any = 0;
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        const cpa_call *c = call_of(f, pt);
        if (really_done(f, pt))
            any = 1;
        else if (c->flags & CP_CALL_TIMED)
            return 0;
    }
    return any;
}

/* Every rank timed it and none has its DONE. A rank whose trace lost records (a stalled or
 * failed file system, a full ring) may have lost that DONE: its missing DONE is no evidence,
 * and the operation is not judged stuck on it (a watchdog's HANG record still is). */
static int timed_none_done(const finder *f, const cpa_op *o)
{
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        if (really_done(f, pt) || !(call_of(f, pt)->flags & CP_CALL_TIMED) ||
            cpa_rank_has_holes(&f->m->ranks[pt->rank_idx]))
            return 0;
    }
    return o->nparts > 0;
}

/* Whether h's own call finished on its GPU before the record was written: the watchdog
 * went by what the shim knew then, and its news of the end came late (its plugin's DONEs
 * once waited behind a stuck calibration call). A stall that is over before it is reported
 * is no hang; a kernel an abort or a dead peer ends comes after the record. */
static int refuted_by_its_done(const finder *f, const comm_view *cv, const seen *h)
{
    size_t i = cpa_hg_op_lower(cv, h->seq);
    if (i >= cv->nops || cv->ops[i].seq != h->seq)
        return 0;
    const cpa_op *o = &cv->ops[i];
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        if (pt->rank_idx != h->rank_idx)
            continue;
        const cpa_call *c = call_of(f, pt);
        return c->done && c->gpu_timed && c->gpu_end_ns < h->at_ns;
    }
    return 0;
}

/* A collective HANG record that still stands: its rank did not go on to finish a later
 * call entered after the record, nor had it finished this one before the record. */
static int hang_stands(const finder *f, const comm_view *cv, const seen *h)
{
    if (!cp_op_is_collective(h->op))
        return 0;
    if (refuted_by_its_done(f, cv, h))
        return 0;
    long k = cpa_hg_member_of_idx(cv, h->rank_idx);
    if (k < 0)
        return 1;
    const member *mb = &cv->mem[k];
    /* done1 - 1 > seq, not done1 > seq + 1: a record's seq may be UINT64_MAX */
    return !(mb->done1 && mb->done1 - 1 > h->seq && mb->done_enter_ns > h->at_ns);
}

static int hang_named(const finder *f, const comm_view *cv, uint64_t seq)
{
    for (size_t i = cpa_hg_seen_lower(cv, seq); i < cv->nhs && cv->hs[i].seq == seq; i++)
        if (hang_stands(f, cv, &cv->hs[i]))
            return 1;
    return 0;
}

/* The longest GPU time any rank took for the op; 0 when none was timed. */
static uint64_t op_gpu_ns(const finder *f, const cpa_op *o)
{
    uint64_t d = 0;
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_call *c = call_of(f, &f->mt->parts[o->first_part + p]);
        if (c->gpu_timed && c->gpu_end_ns - c->gpu_start_ns > d)
            d = c->gpu_end_ns - c->gpu_start_ns;
    }
    return d;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The median GPU time of the (up to 1024) timed ops before ops[end]: what the comm's
 * operations take when nothing is wrong. 0 when unknown or out of memory. */
static uint64_t typical_gpu_ns(const finder *f, const comm_view *cv, size_t end)
{
    size_t from = end > 1024 ? end - 1024 : 0, n = 0;
    uint64_t *d = malloc((end - from + 1) * sizeof *d);
    if (!d)
        return 0;
    for (size_t i = from; i < end; i++)
        if ((d[n] = op_gpu_ns(f, &cv->ops[i])) > 0)
            n++;
    qsort(d, n, sizeof *d, cmp_u64);
    uint64_t t = n ? d[n / 2] : 0;
    free(d);
    return t;
}

/* Ended by an abort or a dead peer's error rather than done: far longer than the comm's
 * typical operation (an abort ends the kernels it releases, and they then show DONEs). */
static int cut_short(const finder *f, const cpa_op *o, uint64_t typical_ns)
{
    uint64_t d = op_gpu_ns(f, o);
    if (!typical_ns)
        return d > 1000000000ull;
    /* 100 x a typical time that does not fit is more than any d */
    return typical_ns <= UINT64_MAX / 100 && d > 100 * typical_ns && d > 100000000ull;
}

/* The seq this comm stopped at, or UINT64_MAX when it did not. */
static uint64_t stop_seq(const finder *f, comm_view *cv, uint64_t fin1)
{
    uint64_t best = UINT64_MAX;
    uint64_t lo1 = UINT64_MAX, hi1 = 0;
    for (size_t k = 0; k < cv->nmem; k++) {
        if (cv->mem[k].last1 < lo1)
            lo1 = cv->mem[k].last1;
        if (cv->mem[k].last1 > hi1)
            hi1 = cv->mem[k].last1;
    }
    if (cv->nmem && lo1 < hi1) {
        size_t i0 = cpa_hg_op_lower(cv, lo1), i = i0;
        int killed = 1;
        for (size_t k = 0; k < cv->nmem; k++)
            if (cv->mem[k].last1 == lo1 && f->m->ranks[cv->mem[k].rank_idx].ended)
                killed = 0;
        uint64_t typical = killed ? typical_gpu_ns(f, cv, i0) : 0;
        if (killed)
            while (i < cv->nops && finished(f, &cv->ops[i]) &&
                   !hang_named(f, cv, cv->ops[i].seq) && !cut_short(f, &cv->ops[i], typical))
                i++;
        if (i < cv->nops)
            best = cv->ops[i].seq;
        else if (killed && cv->nops)
            /* The others finished all they started, the laggard's tail is lost, and nothing
             * tells which operation its death ended (a dead peer's error can end one as fast
             * as a slow job runs one): the last of them, where the job ended. A trace that
             * ends early without a clean exit is RANK_EXITED, named rather than passed over. */
            best = cv->ops[cv->nops - 1].seq;
    }
    for (size_t i = cpa_hg_op_lower(cv, fin1); i < cv->nops && cv->ops[i].seq < best; i++)
        if (timed_none_done(f, &cv->ops[i])) {
            best = cv->ops[i].seq;
            break;
        }
    for (size_t i = 0; i < cv->nhs && cv->hs[i].seq < best; i++)
        if (hang_stands(f, cv, &cv->hs[i])) {
            best = cv->hs[i].seq;
            break;
        }
    /* A rank killed inside its last call (timed, never finished) while the others' calls
     * there ended anyway (a dead peer's error, an abort: DONEs) died in it, even when nobody
     * got further: no laggard, nothing unfinished everywhere, no watchdog record. */
    for (size_t k = 0; k < cv->nmem; k++) {
        const member *mb = &cv->mem[k];
        if (!mb->last1 || mb->last1 - 1 >= best || f->m->ranks[mb->rank_idx].ended)
            continue;
        size_t i = cpa_hg_op_lower(cv, mb->last1 - 1);
        if (i < cv->nops && cv->ops[i].seq == mb->last1 - 1 && !finished(f, &cv->ops[i]))
            best = mb->last1 - 1;
    }
    return best;
}

/* Appends the comm ranks with no member (no trace file, or no COMM record in theirs) to
 * missing when identity maps them to global ranks, and says so in last. */
static size_t absent_ranks(const finder *f, const comm_view *cv, size_t *nmissing, char *last,
                           size_t len)
{
    if (cv->nranks <= 0 || (size_t)cv->nranks <= cv->nmem || cv->nranks > MAX_ENUM_RANKS)
        return 0;
    char list[128] = "";
    size_t used = 0, k = 0, count = 0;
    for (int32_t c = 0; c < cv->nranks; c++) {
        while (k < cv->nmem && cv->mem[k].comm_rank < c)
            k++;
        if (k < cv->nmem && cv->mem[k].comm_rank == c)
            continue;
        if (cv->identity && *nmissing < f->cap_missing)
            f->missing[(*nmissing)++] = c;
        if (count++ < 8 && used < sizeof list) {
            int n = snprintf(list + used, sizeof list - used, "%s%d", used ? ", " : "", (int)c);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    if (!count)
        return 0;
    size_t at = strlen(last);
    snprintf(last + at, len - at, "%scomm rank%s %s%s of %d left no trace of this comm (no "
             "file, or no COMM record in it)%s", at ? "; " : "", count > 1 ? "s" : "", list,
             count > 8 ? ", ..." : "", (int)cv->nranks,
             cv->identity ? "; on this world comm, comm rank = global rank" : "");
    return count;
}

enum { F_CALLED = 1, F_PAST = 2, F_NOT_STARTED = 4, F_KILLED = 8 };

/* The verdict on the collective at seq where cv stopped, as one row. */
static int judge(finder *f, const comm_view *cv, uint64_t seq)
{
    size_t need = cv->nmem + 1;
    if (cv->identity && cv->nranks > 0 && cv->nranks <= MAX_ENUM_RANKS)
        need += (size_t)cv->nranks;
    if (need > f->cap_missing) {
        int32_t *p = realloc(f->missing, need * sizeof *p);
        if (!p)
            return -1;
        f->missing = p;
        f->cap_missing = need;
    }
    size_t oi = cpa_hg_op_lower(cv, seq);
    const cpa_op *o = oi < cv->nops && cv->ops[oi].seq == seq ? &cv->ops[oi] : NULL;
    memset(f->flag, 0, cv->nmem);
    if (o)
        for (uint32_t p = 0; p < o->nparts; p++) {
            const cpa_part *pt = &f->mt->parts[o->first_part + p];
            member *mb = cpa_hg_find_member(cv, comm_rank_of(f, pt), pt->rank_idx);
            if (mb)
                f->flag[mb - cv->mem] |= F_CALLED;
        }
    uint8_t op = o ? o->op : CP_OP_NONE;
    double age_s = 0;
    for (size_t i = cpa_hg_seen_lower(cv, seq); i < cv->nhs && cv->hs[i].seq == seq; i++) {
        const seen *h = &cv->hs[i];
        if (!cp_op_is_collective(h->op))
            continue;
        if (op == CP_OP_NONE)
            op = h->op;
        if ((double)h->age_ns / 1e9 > age_s)
            age_s = (double)h->age_ns / 1e9;
        long k = cpa_hg_member_of_idx(cv, h->rank_idx);
        if (k >= 0 && h->gpu_state == CP_HANG_GPU_NOT_STARTED)
            f->flag[k] |= F_NOT_STARTED;
    }
    /* NCCL's plugin said no kernel channel of it had begun by the process's end (the rank's
     * stream never reached it), and it never finished. */
    for (uint32_t p = 0; o && p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        const cpa_call *c = call_of(f, pt);
        member *mb = cpa_hg_find_member(cv, comm_rank_of(f, pt), pt->rank_idx);
        if (mb && (c->nccl & CPA_NCCL_NOT_STARTED) && !c->done)
            f->flag[mb - cv->mem] |= F_NOT_STARTED;
    }
    /* A rank's abort released its GPU into the operation: it had not started it before
     * (its start is the abort's, to within the 1 ms the release and the clock allow). */
    int aborted = 0;
    for (uint32_t p = 0; o && p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        const cpa_rank *r = &f->m->ranks[pt->rank_idx];
        const cpa_call *c = call_of(f, pt);
        if (!r->abort_ns || r->abort_ns < c->enter_ns)
            continue;
        aborted = 1;
        member *mb = cpa_hg_find_member(cv, comm_rank_of(f, pt), pt->rank_idx);
        if (mb && c->gpu_timed && c->gpu_start_ns + 1000000 >= r->abort_ns)
            f->flag[mb - cv->mem] |= F_NOT_STARTED;
    }
    size_t nmiss = 0, nwait = 0, ncalled = 0, nnot = 0;
    long first_missing = -1, first_not = -1;
    for (size_t k = 0; k < cv->nmem; k++) {
        if (!(f->flag[k] & F_CALLED) && cv->mem[k].last1 > seq + 1)
            f->flag[k] |= F_PAST; /* its call here was lost: it went on */
        if (f->flag[k] & (F_CALLED | F_PAST)) {
            ncalled++;
            if ((f->flag[k] & F_CALLED) && (f->flag[k] & F_NOT_STARTED) &&
                (first_not < 0 || global_rank(f, cv->mem[k].rank_idx) <
                                      global_rank(f, cv->mem[first_not].rank_idx)))
                first_not = (long)k;
            nnot += (f->flag[k] & F_CALLED) && (f->flag[k] & F_NOT_STARTED);
        } else if (first_missing < 0 || global_rank(f, cv->mem[k].rank_idx) <
                                            global_rank(f, cv->mem[first_missing].rank_idx)) {
            first_missing = (long)k;
        }
    }
    char last[256] = "";
    int verdict;
    int by_gpu = first_missing < 0 && nnot > 0 && nnot < ncalled;
    /* Every rank came, but some were killed in it while the others lived on to say so: the
     * dead ones are why it never finished (when all were killed, the job was, while stuck).
     * A death outranks a GPU that had not started it: a killed rank's collective can never
     * finish, while a kernel that had not started may only have been queued behind it (the
     * emulation under load: a rank killed in AllReduce seq 40, a peer's kernel for it
     * stamped at its watchdog's abort 3 s later, and the peer named instead). */
    size_t nkilled = 0;
    long first_killed = -1;
    for (size_t k = 0; first_missing < 0 && k < cv->nmem; k++)
        if ((f->flag[k] & F_CALLED) && !f->m->ranks[cv->mem[k].rank_idx].ended) {
            f->flag[k] |= F_KILLED;
            nkilled++;
            if (first_killed < 0 || global_rank(f, cv->mem[k].rank_idx) <
                                        global_rank(f, cv->mem[first_killed].rank_idx))
                first_killed = (long)k;
        }
    int by_death = nkilled > 0 && nkilled < ncalled;
    if (by_death && by_gpu) {
        /* ... unless a killed rank is one whose GPU had not started it: that rank's stream
         * was stuck first, and its death (a teardown's) came after */
        int stuck_first = 0;
        for (size_t k = 0; k < cv->nmem; k++)
            stuck_first |= (f->flag[k] & F_KILLED) && (f->flag[k] & F_NOT_STARTED);
        if (stuck_first)
            by_death = 0;
        else
            by_gpu = 0;
    }
    for (size_t k = 0; k < cv->nmem; k++) {
        int32_t g = global_rank(f, cv->mem[k].rank_idx);
        int waits = (f->flag[k] & (F_CALLED | F_PAST)) &&
                    !(by_gpu && (f->flag[k] & F_NOT_STARTED) && (f->flag[k] & F_CALLED)) &&
                    !(by_death && (f->flag[k] & F_KILLED));
        if (waits)
            f->waiting[nwait++] = g;
        else
            f->missing[nmiss++] = g;
    }
    if (first_missing >= 0) {
        verdict = CPA_HANG_RANK_NOT_JOINED;
        for (size_t k = 0; k < cv->nmem; k++)
            if (!(f->flag[k] & (F_CALLED | F_PAST)) &&
                unclean_end(&f->m->ranks[cv->mem[k].rank_idx]))
                verdict = CPA_HANG_RANK_EXITED;
        cpa_hg_say_last_call(last, sizeof last, &f->m->ranks[cv->mem[first_missing].rank_idx]);
    } else if (by_gpu) {
        verdict = CPA_HANG_RANK_NOT_JOINED;
        const cpa_rank *r = &f->m->ranks[cv->mem[first_not].rank_idx];
        const cpa_call *c = NULL;
        for (uint32_t p = 0; o && p < o->nparts; p++) {
            const cpa_part *pt = &f->mt->parts[o->first_part + p];
            if (pt->rank_idx == cv->mem[first_not].rank_idx)
                c = call_of(f, pt);
        }
        if (c)
            cpa_hg_say_last_finished(last, sizeof last, r, c);
    } else if (by_death) {
        verdict = CPA_HANG_RANK_EXITED;
        char what[128];
        const cpa_rank *r = &f->m->ranks[cv->mem[first_killed].rank_idx];
        cpa_hg_describe_call(what, sizeof what, r, &r->calls[r->ncalls - 1]);
        snprintf(last, sizeof last,
                 "rank %d's trace ends without END (killed, or unwritable) in %s seq %" PRIu64
                 "; its last call: %s",
                 (int)r->rank, cp_op_name(op), seq, what);
    } else {
        verdict = CPA_HANG_STUCK_IN_NCCL;
    }
    /* A comm rank nobody has a trace of may be the one that never came. */
    if (absent_ranks(f, cv, &nmiss, last, sizeof last) && verdict == CPA_HANG_STUCK_IN_NCCL)
        verdict = CPA_HANG_RANK_NOT_JOINED;
    int kind = first_missing >= 0 ? ROW_NO_CALL
               : by_gpu              ? ROW_GPU
               : by_death            ? ROW_DEATH
                                     : ROW_OTHER;
    if (cpa_hg_add_row(f, kind, cv->comm_id, seq, op, verdict, nmiss, nwait, age_s, last))
        return -1;
    f->out->rows[f->out->nrows - 1].aborted = aborted;
    return 0;
}

/* How the job ended: the fatal signal every rank's END names, -1 when no rank has an END
 * (the whole job killed), 0 when it was not stopped as a whole. */
static int whole_job_stop(const cpa_model *m)
{
    int sig = 0;
    size_t unended = 0;
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        if (!r->ended)
            unended++;
        else if (r->end_signal <= 0 || (sig && r->end_signal != sig))
            return 0;
        else
            sig = r->end_signal;
    }
    if (!m->nranks || (unended && unended != m->nranks))
        return 0;
    return unended ? -1 : sig;
}

/* Whether the collective row r (comm, seq) was in flight for less than a stall when the job
 * stopped: no watchdog saw it, and no rank had waited in it max(2 s, 100 typical operations)
 * by its own end (each rank's time against its own clock: no alignment needed). */
static int young(finder *f, const cpa_hang *r)
{
    if (r->age_s > 0 || !cp_op_is_collective(r->op))
        return 0;
    comm_view *cv = cpa_hg_view_of(f, r->comm_id);
    size_t oi = cv ? cpa_hg_op_lower(cv, r->seq) : 0;
    if (!cv || oi >= cv->nops || cv->ops[oi].seq != r->seq)
        return 0;
    const cpa_op *o = &cv->ops[oi];
    uint64_t typical = typical_gpu_ns(f, cv, oi);
    uint64_t stall = typical < UINT64_MAX / 100 && 100 * typical > 2000000000ull
                         ? 100 * typical
                         : 2000000000ull;
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_part *pt = &f->mt->parts[o->first_part + p];
        const cpa_rank *rk = &f->m->ranks[pt->rank_idx];
        uint64_t end = rk->ended ? rk->end_ns : rk->last_ns, enter = call_of(f, pt)->enter_ns;
        if (end > enter && end - enter >= stall)
            return 0;
    }
    return 1;
}

/* The first missing rank of r whose trace lost records, or -1. */
static int32_t lossy_missing(const finder *f, const cpa_hang *r)
{
    for (size_t k = 0; k < r->nmissing; k++)
        for (size_t i = 0; i < f->m->nranks; i++)
            if (f->m->ranks[i].rank == r->missing_ranks[k] && f->m->ranks[i].lost_records)
                return r->missing_ranks[k];
    return -1;
}

/* Takes out the rows the evidence cannot carry (the header says which), counting them. */
static void drop_unfounded(finder *f)
{
    cpa_hangs *h = f->out;
    h->stop_signal = whole_job_stop(f->m);
    h->unknown_rank = -1;
    size_t kept = 0;
    for (size_t i = 0; i < h->nrows; i++) {
        cpa_hang *r = &h->rows[i];
        int32_t lossy = lossy_missing(f, r);
        int drop = 0;
        if (lossy >= 0) {
            h->unknown++;
            if (h->unknown_rank < 0)
                h->unknown_rank = lossy;
            drop = 1;
        } else if (h->stop_signal && young(f, r)) {
            h->interrupted++;
            drop = 1;
        }
        if (drop) {
            free(r->missing_ranks);
            free(r->waiting_ranks);
            continue;
        }
        if (f->kinds)
            f->kinds[kept] = f->kinds[i];
        h->rows[kept++] = *r;
    }
    h->nrows = kept;
}

int cpa_hangs_find(const cpa_model *m, const cpa_matched *mt, cpa_hangs *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof *out);
    finder f = {.m = m, .mt = mt, .out = out};
    int rc = cpa_hg_build(&f);
    uint64_t *fin1 = rc ? NULL : malloc((f.nviews ? f.nviews : 1) * sizeof *fin1);
    if (rc == 0 && (!fin1 || scan_comms(&f, fin1)))
        rc = -1;
    for (size_t v = 0; rc == 0 && v < f.nviews; v++) {
        uint64_t seq = stop_seq(&f, &f.views[v], fin1[v]);
        if (seq != UINT64_MAX)
            rc = judge(&f, &f.views[v], seq);
    }
    for (size_t i = f.ncoll; rc == 0 && i < mt->nops;) {
        size_t j = cpa_pair_end(mt, i);
        rc = cpa_hg_judge_pair(&f, i, j);
        i = j;
    }
    if (rc == 0) {
        drop_unfounded(&f);
        rc = cpa_hg_order(&f);
    }
    free(fin1);
    cpa_hg_finder_free(&f);
    if (rc) {
        cpa_hangs_free(out);
        snprintf(err, errlen, "out of memory looking for hangs");
        return -1;
    }
    return 0;
}

void cpa_hangs_free(cpa_hangs *h)
{
    for (size_t i = 0; i < h->nrows; i++) {
        free(h->rows[i].missing_ranks);
        free(h->rows[i].waiting_ranks);
    }
    free(h->rows);
    memset(h, 0, sizeof *h);
}
