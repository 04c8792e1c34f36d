/* shm_layout: the bytes of a communicator's shared segment, /dev/shm/cpemu-nccl-<key>.
 *
 * Private to rendezvous.c, shm_sync.c and exec_*.c. Every rank of a communicator maps the
 * same segment (processes, or threads of one process for ncclCommInitAll); futexes on its
 * words are shared futexes, so a wake reaches a waiter in any process. Each field has one
 * writer unless it is an atomic counter; words that different ranks write sit on different
 * cache lines.
 *
 *   header (4 KiB)                       layout, attach count, barrier, boot bell
 *   rank[nranks]          256 B each     identity, doorbell, arrivals, boot payloads
 *   chan[nranks*nranks]   256 B each     point-to-point state of each ordered pair
 *   slot[2][nranks]       slot_bytes     collective staging: each rank's piece, 2 buffers
 *   result[2]             slot_bytes     the reduced piece (reduce-scatter phase)
 *   pair[nranks*nranks]   pair_bytes     each ordered pair's point-to-point buffer (2 chunks),
 *                                        pages touched only for pairs that talk
 *
 * Staging is bounded: a message of any size moves through these in pieces, so the memory
 * a job touches is a few MiB whatever the message size.
 */
#ifndef COLLPROF_EMU_NCCL_SHM_LAYOUT_H
#define COLLPROF_EMU_NCCL_SHM_LAYOUT_H

#include <stdatomic.h>
#include <stdint.h>

#define CPN_SHM_MAGIC 0x31304c43434e5043ull   /* "CPNCCL01" */
#define CPN_SHM_PREFIX "/cpemu-nccl-"
#define CPN_SHM_HEADER_BYTES 4096
#define CPN_SHM_RANK_BYTES 256
#define CPN_SHM_CHAN_BYTES 256
#define CPN_MAX_RANKS 4096

typedef struct cpn_shm_header {
    _Atomic uint32_t init_state;   /* 0 fresh, 1 being laid out, 2 ready */
    uint32_t nranks;
    uint64_t magic;
    uint64_t key;
    uint64_t total_bytes;
    uint64_t slot_bytes, pair_bytes;
    uint64_t off_ranks, off_chans, off_slots, off_results, off_p2p;
    _Alignas(64) _Atomic uint32_t attached;   /* ranks that attached */
    _Atomic uint32_t ready;        /* 1 once all have: the waiters' futex */
    _Alignas(64) _Atomic uint32_t bar_count;  /* collective barrier */
    _Atomic uint32_t bar_gen;
    _Atomic uint32_t bar_sleepers;  /* waiters in futex: the last arriver wakes only then */
    _Alignas(64) _Atomic uint32_t boot_gen;   /* bumped by every boot exchange post */
} cpn_shm_header;

typedef struct cpn_shm_rank {
    _Atomic uint32_t claimed;
    int32_t pid, host, dev;
    int64_t bus_id;
    /* bumped whenever something this rank may wait for changes */
    _Alignas(64) _Atomic uint32_t doorbell;
    _Atomic uint32_t sleepers;     /* waiters on the doorbell: ringers skip the wake if 0 */
    /* model arrival per collective barrier, by seq % 4 */
    _Alignas(64) uint64_t arrival[4];
    _Atomic uint64_t boot_seq;     /* boot exchanges posted */
    int32_t boot_payload[2][4];
} cpn_shm_rank;

/* One staged chunk of a message: what the receiver needs to place and time it. */
typedef struct cpn_p2p_hdr {
    uint64_t msg;                  /* index of the message on the pair */
    uint64_t bytes;                /* the message's size as the sender sent it */
    uint64_t off, len;             /* this chunk's place in it */
    uint64_t arrival;              /* the sender's model arrival */
    uint64_t last;                 /* the message's last chunk */
} cpn_p2p_hdr;

struct cpn_p2p_chan {
    /* written by the sender */
    _Atomic uint64_t s_posted;     /* chunks posted, all messages */
    _Atomic uint64_t s_msgs;       /* messages whose every chunk is posted */
    cpn_p2p_hdr hdr[2];            /* the headers of the two buffer halves */
    /* written by the receiver */
    _Alignas(64) _Atomic uint64_t r_consumed;  /* chunks consumed, all messages */
    _Atomic uint64_t r_done;       /* messages wholly received */
    uint64_t r_arrival[2];         /* by message % 2 */
};

struct cpn_shm {
    cpn_shm_header h;
};

_Static_assert(sizeof(cpn_shm_header) <= CPN_SHM_HEADER_BYTES, "header fits");
_Static_assert(sizeof(cpn_shm_rank) <= CPN_SHM_RANK_BYTES, "rank record fits its stride");
_Static_assert(sizeof(struct cpn_p2p_chan) <= CPN_SHM_CHAN_BYTES, "channel fits its stride");

#endif
