/* exec_p2p: Send and Recv, on the stream's worker.
 *
 * The k-th send from a to b meets the k-th receive on b from a, as NCCL matches them. Each
 * ordered pair has a channel record and a buffer of two chunks in the segment; a message is
 * a stream of chunks (at least one, so a zero-byte message still meets its receive), each
 * carrying a header that says which message it belongs to, where it goes and when the
 * sender arrived. A send is done when its last chunk is in the buffer: a message of up to
 * two chunks completes without waiting for its receiver - NCCL's sends complete into the
 * connection's buffers the same way, which is why an ungrouped "send, then receive" between
 * two ranks works for small messages and deadlocks for large ones, here as with NCCL.
 *
 * All sends and receives of one unit of work progress together in one loop: it does
 * whatever it can on every operation and sleeps on this rank's doorbell (which every
 * counterpart rings after each step) only when nothing could move. So a grouped ring
 * "send to next, receive from previous" cannot deadlock whatever the message size.
 */
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"
#include "emu/nccl/shm_layout.h"

typedef struct p2p_state {
    const cpn_op *op;
    int send;
    int peer;
    uint64_t msg;            /* index of this message on the pair */
    size_t bytes;            /* this side's size */
    uint64_t nchunks, next;  /* sender: chunks of the message, posted so far */
    int started, done;
    uint64_t end;
} p2p_state;

static uint64_t pair_end(cpn_core *core, const p2p_state *st, uint64_t start)
{
    cpemu_place ends[2];
    ends[0] = core->places[st->send ? core->rank : st->peer];
    ends[1] = core->places[st->send ? st->peer : core->rank];
    double ns = cpemu_model_ns(&core->topo, CPEMU_OP_SEND, st->bytes, ends, 2);
    double f = cpemu_topo_passing(&core->topo, ends[0].host, ends[0].dev, ends[1].host,
                                  ends[1].dev, st->msg);
    return start + (uint64_t)(ns / f);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int step_send(cpn_core *core, p2p_state *st, uint64_t t)
{
    cpn_link *l = &core->link;
    cpn_p2p_chan *ch = cpn_p2p_chan_get(l, core->rank, st->peer);
    size_t chunk = l->pair_bytes / 2;
    /* messages on a pair go one after the other */
    if (atomic_load(&ch->s_msgs) != st->msg)
        return 0;
    if (!st->started) {
        st->nchunks = st->bytes ? (st->bytes + chunk - 1) / chunk : 1;
        st->started = 1;
    }
    int moved = 0;
    const uint8_t *src = st->op->sendbuff;
    uint8_t *buf = cpn_p2p_buffer(l, core->rank, st->peer);
    while (st->next < st->nchunks) {
        uint64_t g = atomic_load(&ch->s_posted);
        if (g - atomic_load(&ch->r_consumed) >= 2)
            break;   /* both halves still hold data the receiver has not taken */
        size_t at = (size_t)st->next * chunk;
        size_t len = st->bytes - at < chunk ? st->bytes - at : chunk;
        if (!st->bytes)
            len = 0;
        cpn_p2p_hdr *h = &ch->hdr[g & 1];
        h->msg = st->msg;
        h->bytes = st->bytes;
        h->off = at;
        h->len = len;
        h->arrival = t;
        h->last = st->next + 1 == st->nchunks;
        if (len)
            memcpy(buf + (g & 1) * chunk, src + at, len);
        atomic_store(&ch->s_posted, g + 1);
        st->next++;
        moved = 1;
    }
    if (moved)
        cpn_ring(l, st->peer);
    if (st->next == st->nchunks) {
        /* a message the buffer held whole never waited for its receiver; a larger one did,
         * and then ends with the later of the two arrivals (the receiver wrote its own
         * before taking the first chunk) */
        uint64_t start = st->nchunks > 2 ? max_u64(t, ch->r_arrival[st->msg & 1]) : t;
        st->end = pair_end(core, st, start);
        atomic_store(&ch->s_msgs, st->msg + 1);
        st->done = moved = 1;
    }
    return moved;
}

static int step_recv(cpn_core *core, p2p_state *st, uint64_t t)
{
    cpn_link *l = &core->link;
    cpn_p2p_chan *ch = cpn_p2p_chan_get(l, st->peer, core->rank);
    size_t chunk = l->pair_bytes / 2;
    if (atomic_load(&ch->r_done) != st->msg)
        return 0;
    int moved = 0;
    if (!st->started) {
        ch->r_arrival[st->msg & 1] = t;
        st->started = moved = 1;
    }
    uint8_t *dst = st->op->recvbuff;
    const uint8_t *buf = cpn_p2p_buffer(l, st->peer, core->rank);
    int rang = 0;
    for (;;) {
        uint64_t g = atomic_load(&ch->r_consumed);
        if (atomic_load(&ch->s_posted) <= g)
            break;
        const cpn_p2p_hdr *h = &ch->hdr[g & 1];
        if (h->off < st->bytes) {
            size_t len = h->len < st->bytes - h->off ? h->len : st->bytes - h->off;
            if (len)
                memcpy(dst + h->off, buf + (g & 1) * chunk, len);
        }
        int last = h->last != 0;
        if (last) {
            if (h->bytes != st->bytes)
                cpn_warn("Recv : rank %d sent %llu bytes, %zu expected from it", st->peer,
                         (unsigned long long)h->bytes, st->bytes);
            st->end = pair_end(core, st, max_u64(h->arrival, t));
        }
        atomic_store(&ch->r_consumed, g + 1);
        rang = moved = 1;
        if (last) {
            atomic_store(&ch->r_done, st->msg + 1);
            st->done = 1;
            break;
        }
    }
    if (rang)
        cpn_ring(l, st->peer);
    return moved;
}

int cpn_exec_p2p(cpn_core *core, cpn_op **ops, int nops, uint64_t *t)
{
    cpn_link *l = &core->link;
    p2p_state *st = calloc((size_t)nops, sizeof *st);
    if (!st)
        return CPN_WAIT_ABORTED;
    for (int i = 0; i < nops; i++) {
        st[i].op = ops[i];
        st[i].send = ops[i]->kind == CPEMU_OP_SEND;
        st[i].peer = ops[i]->root;
        st[i].bytes = ops[i]->count * cpn_dtype_size(ops[i]->dtype);
        st[i].msg = st[i].send ? core->p2p_sent[st[i].peer]++ : core->p2p_recvd[st[i].peer]++;
    }
    uint64_t arrival = *t;
    int w = CPN_WAIT_OK;
    for (;;) {
        uint32_t seen = atomic_load(cpn_doorbell(l, core->rank));
        int moved = 0, all = 1;
        for (int i = 0; i < nops; i++) {
            if (st[i].done)
                continue;
            moved |= st[i].send ? step_send(core, &st[i], arrival)
                                : step_recv(core, &st[i], arrival);
            all &= st[i].done;
        }
        if (all)
            break;
        if (!moved && (w = cpn_wait_doorbell(l, seen)) != CPN_WAIT_OK)
            break;
    }
    if (w == CPN_WAIT_OK)
        for (int i = 0; i < nops; i++)
            if (st[i].end > *t)
                *t = st[i].end;
    free(st);
    return w;
}
