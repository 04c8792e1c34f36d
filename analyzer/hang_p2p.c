/* analyzer/hang_p2p.c: hangs on send/recv pairs. A pair-direction (comm, sender ->
 * receiver) whose first op with one side only has no later call of the other side is a hang
 * of its own: the side present waits, the other is missing. mismatch.c reads the same
 * unmatched side for a wrong peer, so the scan for it is here once.
 */
#include <stdio.h>

#include "analyzer/hang_internal.h"

size_t cpa_pair_end(const cpa_matched *mt, size_t i)
{
    size_t j = i + 1;
    while (j < mt->nops && mt->ops[j].comm_id == mt->ops[i].comm_id &&
           mt->ops[j].sender == mt->ops[i].sender && mt->ops[j].receiver == mt->ops[i].receiver)
        j++;
    return j;
}

void cpa_pair_sides(const cpa_model *m, const cpa_matched *mt, const cpa_op *o, int *sends,
                    int *recvs)
{
    *sends = *recvs = 0;
    for (uint32_t p = 0; p < o->nparts; p++) {
        const cpa_part *pt = &mt->parts[o->first_part + p];
        int is_send = m->ranks[pt->rank_idx].calls[pt->call_idx].op == CP_OP_SEND;
        *sends += is_send;
        *recvs += !is_send;
    }
}

size_t cpa_pair_dangling(const cpa_model *m, const cpa_matched *mt, size_t lo, size_t hi,
                         int *send_side)
{
    uint64_t send1 = 0, recv1 = 0;
    for (size_t i = lo; i < hi; i++) {
        int sends, recvs;
        cpa_pair_sides(m, mt, &mt->ops[i], &sends, &recvs);
        if (sends && mt->ops[i].seq + 1 > send1)
            send1 = mt->ops[i].seq + 1;
        if (recvs && mt->ops[i].seq + 1 > recv1)
            recv1 = mt->ops[i].seq + 1;
    }
    for (size_t i = lo; i < hi; i++) {
        const cpa_op *o = &mt->ops[i];
        int sends, recvs;
        cpa_pair_sides(m, mt, o, &sends, &recvs);
        if ((sends && recvs) || !o->nparts)
            continue;
        if (sends ? recv1 > o->seq : send1 > o->seq)
            continue; /* the other side went on: its record here was lost */
        *send_side = sends > 0;
        return i;
    }
    return hi;
}

/* A pair (comm, sender -> receiver) whose first op with one side only has no later call of
 * the other side: a hang on that pair. */
int cpa_hg_judge_pair(finder *f, size_t lo, size_t hi)
{
    const cpa_matched *mt = f->mt;
    int send_side;
    size_t i = cpa_pair_dangling(f->m, mt, lo, hi, &send_side);
    if (i == hi)
        return 0;
    const cpa_op *o = &mt->ops[i];
    /* every part of a one-sided op is that side's */
    const cpa_part *present = &mt->parts[o->first_part + o->nparts - 1];
    const cpa_call *pc = call_of(f, present);
    int32_t absent_cr = send_side ? o->receiver : o->sender;
    comm_view *cv = cpa_hg_view_of(f, o->comm_id);
    const member *mb = cv ? cpa_hg_find_member(cv, absent_cr, UINT32_MAX) : NULL;
    const cpa_rank *ar = mb ? &f->m->ranks[mb->rank_idx] : NULL;
    /* A finished side proves the other came, when the other's trace may have lost its
     * tail; with no trace of the other at all, only an unfinished timed side tells. */
    if (pc->done && (!ar || unclean_end(ar)))
        return 0;
    if (!ar && !(pc->flags & CP_CALL_TIMED))
        return 0;
    char last[256] = "";
    size_t nmiss = 0;
    int verdict = CPA_HANG_RANK_NOT_JOINED;
    if (ar) {
        f->missing[nmiss++] = ar->rank;
        if (unclean_end(ar))
            verdict = CPA_HANG_RANK_EXITED;
        cpa_hg_say_last_call(last, sizeof last, ar);
    } else {
        if (cv && cv->identity)
            f->missing[nmiss++] = absent_cr;
        snprintf(last, sizeof last, "comm rank %d left no trace of this comm (no file, or "
                 "no COMM record in it)%s", (int)absent_cr,
                 cv && cv->identity ? "; on this world comm, comm rank = global rank" : "");
    }
    f->waiting[0] = global_rank(f, present->rank_idx);
    double age_s = 0;
    for (size_t k = cv ? cpa_hg_seen_lower(cv, o->seq) : 0;
         cv && k < cv->nhs && cv->hs[k].seq == o->seq; k++)
        if (cv->hs[k].rank_idx == present->rank_idx && cv->hs[k].op == pc->op &&
            cv->hs[k].peer == pc->peer && (double)cv->hs[k].age_ns / 1e9 > age_s)
            age_s = (double)cv->hs[k].age_ns / 1e9;
    return cpa_hg_add_row(f, ar ? ROW_NO_CALL : ROW_OTHER, o->comm_id, o->seq, pc->op,
                          verdict, nmiss, 1, age_s, last);
}
