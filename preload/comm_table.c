/* comm_table: ncclComm_t -> cp_comm, read lock-free on every recorded call.
 *
 * An open-addressing table of atomic (handle, comm) pairs, linear probing, every probe at
 * most CP_COMM_PROBES slots: a lookup costs the same after any number of comms. A comm NCCL
 * destroyed (or aborted) leaves its slot as a tombstone that a later comm reuses; NCCL may
 * hand the same address out again, and then the new comm takes a slot of its own (or the old
 * comm's in place, when its end was never seen). Writers (comm creation and end) hold a
 * mutex; a reader never sees a half-made entry (value before key).
 *
 * Freeing: nothing outside the calling threads holds a cp_comm (records, pending GPU times
 * and the live block name a comm by its comm_index, which is never reused in a file), and no
 * call may use a comm once its destroy returned. A comm out of the table waits on a retired
 * list for CP_COMM_GRACE_NS before a drain frees it (cp_comm_reclaim): a lookup that raced
 * the end (the job's own error) still reads memory that is ours. An aborted comm waits
 * CP_COMM_ABORT_GRACE_NS: ncclCommAbort is made from another thread to release a call
 * blocked on the comm, whose wrapper still records with it once NCCL lets it return.
 */
#include "preload/shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define CP_COMM_SLOTS 8192u /* power of two */
#define CP_COMM_PROBES 64u  /* the longest probe, of a lookup or an insert */
#define CP_COMM_TOMB ((uintptr_t)1) /* a removed entry: handles are aligned, never 1 */
#define CP_COMM_GRACE_NS 10000000ull          /* 10 ms: a lookup takes nanoseconds */
#define CP_COMM_ABORT_GRACE_NS 1000000000ull   /* 1 s: a released call returns at once */

typedef struct comm_slot {
    _Atomic uintptr_t key;
    cp_comm *_Atomic value;
} comm_slot;

static comm_slot g_slots[CP_COMM_SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_next_index;
static cp_comm *g_all;     /* the comms in the table, doubly linked */
static cp_comm *g_retired[2]; /* out of the table, newest first, not yet freed: [1] aborted */
static uint32_t g_live;    /* entries in the table */
static uint64_t g_freed;   /* comms freed */
static uint32_t g_probe_max; /* the longest probe a lookup of any comm so far takes */
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
    for (uint32_t i = slot_of(key), n = 0; n < CP_COMM_PROBES;
         i = (i + 1) & (CP_COMM_SLOTS - 1), n++) {
        uintptr_t k = atomic_load_explicit(&g_slots[i].key, memory_order_acquire);
        if (k == key)
            return atomic_load_explicit(&g_slots[i].value, memory_order_acquire);
        if (k == 0)
            return NULL;
    }
    return NULL;
}

static void list_unlink(cp_comm *c)
{
    if (c->all_prev)
        c->all_prev->all_next = c->all_next;
    else
        g_all = c->all_next;
    if (c->all_next)
        c->all_next->all_prev = c->all_prev;
    c->all_next = c->all_prev = NULL;
}

/* Under g_mu: out of the list, onto the retired list. */
static void retire_locked(cp_comm *c, int aborted)
{
    list_unlink(c);
    c->retired_ns = cp_mono_ns();
    c->all_next = g_retired[aborted];
    g_retired[aborted] = c;
}

/* Under g_mu. The value is published before the key, so a reader that sees the key sees
 * a complete comm. A comm already keyed by this handle (its end never seen) is replaced in
 * place and retired. */
static int table_put(uintptr_t key, cp_comm *c)
{
    uint32_t home = slot_of(key), free_at = UINT32_MAX;
    for (uint32_t n = 0; n < CP_COMM_PROBES; n++) {
        uint32_t i = (home + n) & (CP_COMM_SLOTS - 1);
        uintptr_t k = atomic_load_explicit(&g_slots[i].key, memory_order_relaxed);
        if (k == key) {
            cp_comm *old = atomic_load_explicit(&g_slots[i].value, memory_order_relaxed);
            atomic_store_explicit(&g_slots[i].value, c, memory_order_release);
            if (old)
                retire_locked(old, 0); /* NCCL made a new comm at its address */
            g_probe_max = n + 1 > g_probe_max ? n + 1 : g_probe_max;
            return 0;
        }
        if ((k == 0 || k == CP_COMM_TOMB) && free_at == UINT32_MAX)
            free_at = i;
        if (k == 0)
            break; /* the key is not further on */
    }
    if (free_at == UINT32_MAX)
        return -1;
    atomic_store_explicit(&g_slots[free_at].value, c, memory_order_release);
    atomic_store_explicit(&g_slots[free_at].key, key, memory_order_release);
    g_live++;
    uint32_t probes = ((free_at - home) & (CP_COMM_SLOTS - 1)) + 1;
    g_probe_max = probes > g_probe_max ? probes : g_probe_max;
    return 0;
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
    if (table_put((uintptr_t)handle, c) != 0) {
        pthread_mutex_unlock(&g_mu);
        free(c);
        if (!atomic_exchange(&g_full_warned, 1))
            cp_warn("the communicator table is full (%u live, %u slots): calls on newer "
                    "communicators are recorded without theirs", g_live, CP_COMM_SLOTS);
        return NULL;
    }
    c->comm_index = g_next_index++;
    c->all_next = g_all;
    if (g_all)
        g_all->all_prev = c;
    g_all = c;
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

void cp_comm_end(ncclComm_t handle, cp_comm *c, int aborted)
{
    if (!c)
        return;
    pthread_mutex_lock(&g_mu);
    uint32_t home = slot_of((uintptr_t)handle);
    for (uint32_t n = 0; n < CP_COMM_PROBES; n++) {
        uint32_t i = (home + n) & (CP_COMM_SLOTS - 1);
        uintptr_t k = atomic_load_explicit(&g_slots[i].key, memory_order_relaxed);
        if (k == 0)
            break;
        if (k == (uintptr_t)handle &&
            atomic_load_explicit(&g_slots[i].value, memory_order_relaxed) == c) {
            /* the value stays: a reader that raced the end still reads this comm */
            atomic_store_explicit(&g_slots[i].key, CP_COMM_TOMB, memory_order_release);
            g_live--;
            retire_locked(c, aborted);
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void cp_comm_reclaim(void)
{
    static const uint64_t grace[2] = {CP_COMM_GRACE_NS, CP_COMM_ABORT_GRACE_NS};
    uint64_t now = cp_mono_ns(), n = 0;
    for (int a = 0; a < 2; a++) {
        pthread_mutex_lock(&g_mu);
        cp_comm **link = &g_retired[a];
        while (*link && now - (*link)->retired_ns < grace[a])
            link = &(*link)->all_next;
        cp_comm *old = *link; /* these and every one after: retired longer ago */
        *link = NULL;
        pthread_mutex_unlock(&g_mu);
        for (cp_comm *c = old, *next; c; c = next) {
            next = c->all_next;
            free(c->send_seq); /* recv_seq shares its allocation */
            free(c);
            n++;
        }
    }
    if (n) {
        pthread_mutex_lock(&g_mu);
        g_freed += n;
        pthread_mutex_unlock(&g_mu);
    }
}

void cp_comm_table_census(uint32_t *live, uint32_t *used, uint32_t *longest, uint64_t *freed)
{
    pthread_mutex_lock(&g_mu);
    uint32_t u = 0;
    for (uint32_t i = 0; i < CP_COMM_SLOTS; i++)
        u += atomic_load_explicit(&g_slots[i].key, memory_order_relaxed) != 0;
    *live = g_live;
    *used = u;
    *longest = g_probe_max;
    *freed = g_freed;
    pthread_mutex_unlock(&g_mu);
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
    g_live = 0; /* the parent's comms stay listed (reachable), out of the table */
    g_freed = 0;
    g_probe_max = 0;
}

void cp_comm_want_calibration(void)
{
    /* under the mutex: g_all changes only under it, and holds no retired comm */
    pthread_mutex_lock(&g_mu);
    for (cp_comm *c = g_all; c; c = c->all_next)
        if (atomic_load_explicit(&c->plugin_cover, memory_order_relaxed))
            atomic_store_explicit(&c->calib_wanted, 1, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
}

/* The table's census at exit, for COLLPROF_DEBUG=trace: what tests/preload/test_preload_long
 * holds flat across a job that makes and ends thousands of comms. */
static void stop_hook(int signal_number)
{
    if (signal_number != 0 || cp_log_level() < CP_LOG_TRACE)
        return;
    uint32_t live, used, longest;
    uint64_t freed;
    cp_comm_table_census(&live, &used, &longest, &freed);
    cp_log(CP_LOG_TRACE, "comm table: %u live, %u of %u slots used, longest probe %u, %llu freed",
           live, used, CP_COMM_SLOTS, longest, (unsigned long long)freed);
}

const cp_module cp_module_comm = {.name = "comm", .after_fork_child = reset_after_fork,
                                  .stop = stop_hook};
