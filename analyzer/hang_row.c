/* analyzer/hang_row.c: one row of the hangs table: the sentence in its `last` and its
 * lists of missing and waiting ranks.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/hang_internal.h"
#include "abi/nccl_abi.h"

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

void cpa_hg_describe_call(char *buf, size_t len, const cpa_rank *r, const cpa_call *c)
{
    uint64_t comm_id = cpa_call_comm_id(r, c);
    if (cpa_call_refused(c)) { /* no seq: NCCL enqueued nothing */
        char what[64];
        cpa_call_args(what, sizeof what, c);
        snprintf(buf, len, "%s on comm %016" PRIx64 ", which NCCL refused (%s)", what,
                 comm_id, cp_nccl_result_id((ncclResult_t)c->result));
        return;
    }
    const char *state = c->done                     ? "finished"
                        : c->flags & CP_CALL_TIMED ? "not finished"
                                                   : "completion not timed";
    if (cp_op_is_p2p(c->op))
        snprintf(buf, len, "%s %s comm rank %d (seq %" PRIu64 ") on comm %016" PRIx64 ", %s",
                 cp_op_name(c->op), c->op == CP_OP_SEND ? "to" : "from", (int)c->peer, c->seq,
                 comm_id, state);
    else
        snprintf(buf, len, "%s seq %" PRIu64 " on comm %016" PRIx64 ", %s", cp_op_name(c->op),
                 c->seq, comm_id, state);
}

static void describe_end(char *buf, size_t len, const cpa_rank *r)
{
    if (!r->ended)
        /* no END: a kill, or a file that stopped taking writes (a read-only remount): the
         * trace cannot tell which */
        snprintf(buf, len, "; its trace ends without END (killed, or unwritable)");
    else if (r->end_signal)
        snprintf(buf, len, "; it ended on signal %d", (int)r->end_signal);
    else if (r->end_exit_code > 0) /* -1: the shim could not know it */
        snprintf(buf, len, "; it exited with status %d", (int)r->end_exit_code);
    else
        buf[0] = '\0';
}

void cpa_hg_say_last_call(char *out, size_t len, const cpa_rank *r)
{
    char what[200], end[64];
    describe_end(end, sizeof end, r);
    if (!r->ncalls) {
        snprintf(out, len, "rank %d made no NCCL call on record%s", (int)r->rank, end);
        return;
    }
    cpa_hg_describe_call(what, sizeof what, r, &r->calls[r->ncalls - 1]);
    snprintf(out, len, "rank %d last called %s%s", (int)r->rank, what, end);
}

/* What the GPU of a rank that called the operation but never started it finished last:
 * what its stream was stuck behind, or after. */
void cpa_hg_say_last_finished(char *out, size_t len, const cpa_rank *r, const cpa_call *hung)
{
    char what[200] = "", end[64];
    describe_end(end, sizeof end, r);
    size_t at = (size_t)(hung - r->calls);
    for (size_t i = at; i-- > 0;)
        if (r->calls[i].done) {
            cpa_hg_describe_call(what, sizeof what, r, &r->calls[i]);
            break;
        }
    snprintf(out, len, "rank %d's GPU never started %s seq %" PRIu64 "; the last operation it "
             "finished: %s%s", (int)r->rank, cp_op_name(hung->op), hung->seq,
             what[0] ? what : "none", end);
}

int cpa_hg_add_row(finder *f, int kind, uint64_t comm_id, uint64_t seq, uint8_t op,
                   int verdict, size_t nmissing, size_t nwaiting, double age_s, const char *last)
{
    if (cpa_grow((void **)&f->out->rows, &f->cap, f->out->nrows + 1, sizeof *f->out->rows) ||
        cpa_grow((void **)&f->kinds, &f->cap_kinds, f->out->nrows + 1, sizeof *f->kinds))
        return -1;
    f->kinds[f->out->nrows] = (uint8_t)kind;
    cpa_hang *h = &f->out->rows[f->out->nrows];
    memset(h, 0, sizeof *h);
    h->missing_ranks = malloc((nmissing ? nmissing : 1) * sizeof *h->missing_ranks);
    h->waiting_ranks = malloc((nwaiting ? nwaiting : 1) * sizeof *h->waiting_ranks);
    if (!h->missing_ranks || !h->waiting_ranks) {
        free(h->missing_ranks);
        free(h->waiting_ranks);
        return -1;
    }
    f->out->nrows++;
    h->comm_id = comm_id;
    h->seq = seq;
    h->op = op;
    h->verdict = verdict;
    h->age_s = age_s;
    snprintf(h->last, sizeof h->last, "%s", last);
    /* Sorted and unique: one process may hold several ranks of a comm. */
    qsort(f->missing, nmissing, sizeof *f->missing, cmp_i32);
    qsort(f->waiting, nwaiting, sizeof *f->waiting, cmp_i32);
    for (size_t i = 0; i < nmissing; i++)
        if (!h->nmissing || h->missing_ranks[h->nmissing - 1] != f->missing[i])
            h->missing_ranks[h->nmissing++] = f->missing[i];
    for (size_t i = 0; i < nwaiting; i++)
        if (!h->nwaiting || h->waiting_ranks[h->nwaiting - 1] != f->waiting[i])
            h->waiting_ranks[h->nwaiting++] = f->waiting[i];
    return 0;
}
