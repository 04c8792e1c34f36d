/* comm_table: ncclComm_t -> cp_comm, read lock-free on every recorded call.
 *
 * An open-addressing table of atomic (handle, comm) pairs, linear probing. Entries are never
 * removed: a destroyed comm's handle stays keyed to its old cp_comm until NCCL hands the same
 * address out again, and then the new comm replaces the value in place. So a reader never
 * sees a tombstone, and the table only fills with distinct handle values (CP_COMM_SLOTS).
 * Writers (comm creation) hold a mutex; cp_comm structs are never freed while the process
 * runs, so a reader that raced a replacement still holds valid memory.
 */
#include "preload/shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define CP_COMM_SLOTS 8192u /* power of two */

typedef struct comm_slot {
    _Atomic uintptr_t key;
    cp_comm *_Atomic value;
} comm_slot;

static comm_slot g_slots[CP_COMM_SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_next_index;
static cp_comm *g_all;
static _Atomic int g_full_warned;

static inline uint32_t slot_of(uintptr_t key)
{
    /* Handles are heap addresses: the low bits are alignment, the multiply mixes the rest. */
    return (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 40) & (CP_COMM_SLOTS - 1);
}

cp_comm *cp_comm_lookup(ncclComm_t handle)
{
    uintptr_t key = (uintptr_t)handle;
    if (!key)
        return NULL;
    for (uint32_t i = slot_of(key), n = 0; n < CP_COMM_SLOTS; i = (i + 1) & (CP_COMM_SLOTS - 1), n++) {
        uintptr_t k = atomic_load_explicit(&g_slots[i].key, memory_order_acquire);
        if (k == key)
            return atomic_load_explicit(&g_slots[i].value, memory_order_acquire);
        if (k == 0)
            return NULL;
    }
    return NULL;
}

/* Under g_mu. The value is published before the key, so a reader that sees the key sees
 * a complete comm. */
static int table_put(uintptr_t key, cp_comm *c)
{
    for (uint32_t i = slot_of(key), n = 0; n < CP_COMM_SLOTS; i = (i + 1) & (CP_COMM_SLOTS - 1), n++) {
        uintptr_t k = atomic_load_explicit(&g_slots[i].key, memory_order_relaxed);
        if (k == key || k == 0) {
            atomic_store_explicit(&g_slots[i].value, c, memory_order_release);
            if (k == 0)
                atomic_store_explicit(&g_slots[i].key, key, memory_order_release);
            return 0;
        }
    }
    return -1;
}

/* Under g_mu, with the comm's init complete: asks the real NCCL who we are in it. */
static int learn_and_publish(cp_comm *c)
{
    cp_fn_ncclCommCount count = CP_NCCL_LIB_FN(c->lib, ncclCommCount);
    cp_fn_ncclCommUserRank user_rank = CP_NCCL_LIB_FN(c->lib, ncclCommUserRank);
    cp_fn_ncclCommCuDevice cu_device = CP_NCCL_LIB_FN(c->lib, ncclCommCuDevice);
    int nranks = -1, rank = -1, dev = -1;
    if (!count || count(c->handle, &nranks) != ncclSuccess || nranks <= 0)
        nranks = c->nranks;
    if (!user_rank || user_rank(c->handle, &rank) != ncclSuccess)
        rank = c->rank;
    if (!cu_device || cu_device(c->handle, &dev) != ncclSuccess)
        dev = -1;
    if (nranks <= 0)
        return 0;
    _Atomic uint64_t *seqs = calloc(2 * (size_t)nranks, sizeof *seqs);
    if (!seqs)
        return 0;
    c->nranks = nranks;
    c->rank = rank;
    c->cuda_dev = dev;
    c->send_seq = seqs;
    c->recv_seq = seqs + nranks;

    cp_rec_comm rec = {
        .h = {CP_REC_COMM, sizeof(cp_rec_comm)},
        .comm_index = c->comm_index,
        .comm_id = c->comm_id,
        .parent_id = c->parent_id,
        .nranks = nranks,
        .rank = rank,
        .cuda_dev = dev,
        .color = c->color,
        .key = c->key,
        .origin = c->origin,
    };
    cp_control_push(&rec);
    atomic_store_explicit(&c->ready, 1, memory_order_release);
    cp_identity_learn_rank(rank, nranks);
    return 1;
}

cp_comm *cp_comm_create(ncclComm_t handle, uint64_t comm_id, uint64_t parent_id, int origin,
                        int color, int key, int completed, int rank_hint, int nranks_hint,
                        cp_nccl_lib *lib)
{
    if (!handle)
        return NULL;
    cp_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->handle = handle;
    c->comm_id = comm_id;
    c->parent_id = parent_id;
    c->origin = (uint8_t)origin;
    c->color = color;
    c->key = key;
    c->rank = rank_hint;
    c->nranks = nranks_hint;
    c->cuda_dev = -1;
    c->lib = lib;

    pthread_mutex_lock(&g_mu);
    c->comm_index = g_next_index++;
    c->all_next = g_all;
    g_all = c;
    if (table_put((uintptr_t)handle, c) != 0) {
        g_all = c->all_next;
        pthread_mutex_unlock(&g_mu);
        free(c);
        if (!atomic_exchange(&g_full_warned, 1))
            cp_warn("more than %u communicators: calls on the newer ones are recorded "
                    "without their communicator", CP_COMM_SLOTS);
        return NULL;
    }
    if (completed)
        learn_and_publish(c);
    pthread_mutex_unlock(&g_mu);
    return c;
}

int cp_comm_make_ready(cp_comm *c)
{
    if (atomic_load_explicit(&c->ready, memory_order_acquire))
        return 1;
    cp_fn_ncclCommGetAsyncError get_err = CP_NCCL_LIB_FN(c->lib, ncclCommGetAsyncError);
    ncclResult_t state = ncclInProgress;
    if (!get_err || get_err(c->handle, &state) != ncclSuccess || state != ncclSuccess)
        return 0;
    pthread_mutex_lock(&g_mu);
    int ready = atomic_load_explicit(&c->ready, memory_order_relaxed) || learn_and_publish(c);
    pthread_mutex_unlock(&g_mu);
    return ready;
}

static void reset_after_fork(void)
{
    /* The parent's comms are not ours to describe in the child's file. Their structs stay
     * allocated (a thread of the parent may have been reading one at the fork). */
    pthread_mutex_init(&g_mu, NULL);
    for (uint32_t i = 0; i < CP_COMM_SLOTS; i++) {
        atomic_store_explicit(&g_slots[i].value, NULL, memory_order_relaxed);
        atomic_store_explicit(&g_slots[i].key, 0, memory_order_relaxed);
    }
    g_next_index = 0;
}

void cp_comm_want_calibration(void)
{
    /* under the mutex: g_all is only ever prepended to under it, and no comm is freed */
    pthread_mutex_lock(&g_mu);
    for (cp_comm *c = g_all; c; c = c->all_next)
        if (atomic_load_explicit(&c->plugin_cover, memory_order_relaxed))
            atomic_store_explicit(&c->calib_wanted, 1, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
}

const cp_module cp_module_comm = {.name = "comm", .after_fork_child = reset_after_fork};
