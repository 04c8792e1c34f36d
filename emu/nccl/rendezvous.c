/* rendezvous: how the ranks of a communicator find each other — NCCL's bootstrap, on one
 * machine.
 *
 * The segment is named after a 64-bit key (a hash of the ncclUniqueId, or of the parent's
 * key for a split), so ranks need nothing but the id to meet and two jobs never share a
 * segment. The first rank to map it lays it out; each rank claims its record; the last to
 * attach unlinks the name, so a normal run leaves nothing in /dev/shm, and a job killed
 * before every rank arrived leaves only a name no later job will ever ask for.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/nccl/nccl_emu.h"
#include "emu/nccl/shm_layout.h"

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Per-rank staging: large enough to amortize a barrier per piece, small enough that 8 ranks
 * of many communicators fit in /dev/shm. Every rank computes the same from nranks. */
static size_t slot_bytes_for(int nranks)
{
    size_t s = (2u << 20) / (size_t)nranks;
    if (s > (256u << 10))
        s = 256u << 10;
    if (s < (16u << 10))
        s = 16u << 10;
    /* ReduceScatter and AlltoAll put one element per rank in a slot at the least */
    if (s < (size_t)nranks * 8)
        s = (size_t)nranks * 8;
    return (s + 4095) / 4096 * 4096;
}

/* A pair's buffer: two chunks a sender may fill before its receiver came (so a small send
 * completes on its own, as NCCL's does into its connection buffers). Large for few ranks,
 * smaller for many so that the n*n buffers stay addressable; only pairs that exchange
 * messages ever touch their pages. */
static size_t pair_bytes_for(int nranks)
{
    size_t s = (8u << 20) / ((size_t)nranks * (size_t)nranks);
    if (s > (256u << 10))
        s = 256u << 10;
    if (s < (8u << 10))
        s = 8u << 10;
    return s / 4096 * 4096;
}

static void layout(cpn_shm_header *h, int nranks, uint64_t key)
{
    size_t n = (size_t)nranks;
    h->nranks = (uint32_t)nranks;
    h->key = key;
    h->slot_bytes = slot_bytes_for(nranks);
    h->pair_bytes = pair_bytes_for(nranks);
    h->off_ranks = CPN_SHM_HEADER_BYTES;
    h->off_chans = h->off_ranks + n * CPN_SHM_RANK_BYTES;
    h->off_slots = align_up(h->off_chans + n * n * CPN_SHM_CHAN_BYTES, 4096);
    h->off_results = h->off_slots + 2 * n * h->slot_bytes;
    h->off_p2p = h->off_results + 2 * h->slot_bytes;
    h->total_bytes = h->off_p2p + n * n * h->pair_bytes;
}

static size_t total_for(int nranks)
{
    cpn_shm_header h;
    memset(&h, 0, sizeof h);
    layout(&h, nranks, 0);
    return h.total_bytes;
}

static cpn_shm_rank *rank_rec(const cpn_link *l, int r)
{
    return (cpn_shm_rank *)((char *)l->shm + l->shm->h.off_ranks +
                            (size_t)r * CPN_SHM_RANK_BYTES);
}

cpn_p2p_chan *cpn_p2p_chan_get(cpn_link *l, int src, int dst)
{
    return (cpn_p2p_chan *)((char *)l->shm + l->shm->h.off_chans +
                            ((size_t)src * (size_t)l->nranks + (size_t)dst) *
                                CPN_SHM_CHAN_BYTES);
}

uint8_t *cpn_coll_slot(cpn_link *l, int rank, uint64_t buf)
{
    return (uint8_t *)l->shm + l->shm->h.off_slots +
           ((buf & 1) * (size_t)l->nranks + (size_t)rank) * l->slot_bytes;
}

uint8_t *cpn_coll_result(cpn_link *l, uint64_t buf)
{
    return (uint8_t *)l->shm + l->shm->h.off_results + (buf & 1) * l->slot_bytes;
}

uint8_t *cpn_p2p_buffer(cpn_link *l, int src, int dst)
{
    return (uint8_t *)l->shm + l->shm->h.off_p2p +
           ((size_t)src * (size_t)l->nranks + (size_t)dst) * l->pair_bytes;
}

_Atomic uint32_t *cpn_doorbell(cpn_link *l, int rank)
{
    return &rank_rec(l, rank)->doorbell;
}

static void shm_name(char *out, size_t cap, uint64_t key)
{
    snprintf(out, cap, CPN_SHM_PREFIX "%016llx", (unsigned long long)key);
}

static int aborted(const cpn_link *l)
{
    return l->abort_word && atomic_load(l->abort_word) != 0;
}

/* Maps the segment, creating it with its final size when this rank is first. */
static ncclResult_t map_segment(cpn_link *l, const char *name, size_t total)
{
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        cpn_warn("Call to shm_open %s failed : %s", name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size != 0 && (size_t)st.st_size != total) {
        /* laid out by a rank that believes in another rank count */
        close(fd);
        cpn_warn("Bootstrap : rank count mismatch on %s (segment of %lld bytes, %zu expected)",
                 name, (long long)st.st_size, total);
        return ncclInvalidUsage;
    }
    /* every rank sets the same size, so a rank racing the creator cannot shrink it */
    if (ftruncate(fd, (off_t)total) != 0) {
        cpn_warn("Call to ftruncate %s failed : %s", name, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        cpn_warn("Call to mmap %s failed : %s", name, strerror(errno));
        return ncclSystemError;
    }
    l->shm = p;
    l->map_bytes = total;
    return ncclSuccess;
}

/* The first rank lays the header out; the others wait until it has. */
static ncclResult_t ensure_layout(cpn_link *l, uint64_t key, int nranks)
{
    cpn_shm_header *h = &l->shm->h;
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong(&h->init_state, &zero, 1)) {
        layout(h, nranks, key);
        h->magic = CPN_SHM_MAGIC;
        atomic_store(&h->init_state, 2);
        cpn_futex_wake(&h->init_state, 1);
    } else {
        uint32_t s;
        while ((s = atomic_load(&h->init_state)) != 2) {
            if (aborted(l))
                return ncclInternalError;
            cpn_futex_wait(&h->init_state, s, 1, 100000000);
        }
    }
    if (h->magic != CPN_SHM_MAGIC || h->key != key) {
        cpn_warn("Bootstrap : segment for key %016llx is not ours", (unsigned long long)key);
        return ncclSystemError;
    }
    if ((int)h->nranks != nranks) {
        cpn_warn("Bootstrap : rank count mismatch: %d here, %u in the communicator", nranks,
                 h->nranks);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

ncclResult_t cpn_link_attach(cpn_link *l, uint64_t key, int nranks, int rank,
                             const cpn_rank_info *mine, _Atomic uint32_t *abort_word)
{
    memset(l, 0, sizeof *l);
    l->nranks = nranks;
    l->rank = rank;
    l->key = key;
    l->abort_word = abort_word;
    if (nranks > CPN_MAX_RANKS) {
        cpn_warn("Invalid rank count %d: the emulation supports up to %d ranks", nranks,
                 CPN_MAX_RANKS);
        return ncclInvalidArgument;
    }
    char name[64];
    shm_name(name, sizeof name, key);
    ncclResult_t res = map_segment(l, name, total_for(nranks));
    if (res != ncclSuccess)
        return res;
    res = ensure_layout(l, key, nranks);
    if (res != ncclSuccess)
        goto fail_unmap;
    l->slot_bytes = l->shm->h.slot_bytes;
    l->pair_bytes = l->shm->h.pair_bytes;

    cpn_shm_rank *me = rank_rec(l, rank);
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&me->claimed, &zero, 1)) {
        cpn_warn("Bootstrap : rank %d joined communicator %016llx twice", rank,
                 (unsigned long long)key);
        res = ncclInvalidUsage;
        goto fail_unmap;
    }
    me->pid = mine->pid;
    me->host = mine->host;
    me->dev = mine->dev;
    me->bus_id = mine->bus_id;

    cpn_shm_header *h = &l->shm->h;
    if (atomic_fetch_add(&h->attached, 1) + 1 == (uint32_t)nranks) {
        /* everyone mapped it: the name is no longer needed, and must not outlive the job */
        shm_unlink(name);
        atomic_store(&h->ready, 1);
        cpn_futex_wake(&h->ready, 1);
    } else {
        while (atomic_load(&h->ready) == 0) {
            if (aborted(l)) {
                /* the last one out of an abandoned rendezvous removes the name */
                atomic_store(&me->claimed, 0);
                if (atomic_fetch_sub(&h->attached, 1) == 1)
                    shm_unlink(name);
                res = ncclInternalError;
                goto fail_unmap;
            }
            cpn_futex_wait(&h->ready, 0, 1, 100000000);
        }
    }
    l->peers = calloc((size_t)nranks, sizeof *l->peers);
    if (!l->peers) {
        res = ncclSystemError;
        goto fail_unmap;
    }
    for (int r = 0; r < nranks; r++) {
        cpn_shm_rank *p = rank_rec(l, r);
        l->peers[r].pid = p->pid;
        l->peers[r].host = p->host;
        l->peers[r].dev = p->dev;
        l->peers[r].bus_id = p->bus_id;
    }
    return ncclSuccess;

fail_unmap:
    munmap(l->shm, l->map_bytes);
    l->shm = NULL;
    return res;
}

/* A process that exited is gone even while its parent has not reaped it yet (a zombie
 * still answers kill(pid, 0)): a launcher that waits for its ranks in order must not keep
 * the others believing a dead rank lives. */
static int pid_alive(int pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;   /* no /proc: trust kill() */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
    return !(paren && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* A segment whose ranks all died before the last one attached keeps its name (nobody is
 * left to unlink it). It can never be reached again - no later id hashes to it - so only
 * /dev/shm's tidiness is at stake: the next ncclGetUniqueId removes such segments, once
 * every rank that claimed a record in them is gone. */
static void sweep_one(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDONLY, 0);
    if (fd < 0)
        return;
    struct stat st;
    cpn_shm_header *h = NULL;
    size_t len = 0;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= CPN_SHM_HEADER_BYTES) {
        len = (size_t)st.st_size;
        h = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (!h || h == MAP_FAILED)
        return;
    int claimed = 0, alive = 0;
    if (atomic_load(&h->init_state) == 2 && h->magic == CPN_SHM_MAGIC &&
        h->off_ranks + (size_t)h->nranks * CPN_SHM_RANK_BYTES <= len) {
        for (uint32_t r = 0; r < h->nranks; r++) {
            const cpn_shm_rank *rec = (const cpn_shm_rank *)((const char *)h + h->off_ranks +
                                                             r * CPN_SHM_RANK_BYTES);
            if (!atomic_load(&rec->claimed))
                continue;
            claimed++;
            alive += pid_alive(rec->pid);
        }
    }
    munmap(h, len);
    if (claimed > 0 && alive == 0)
        shm_unlink(path);
}

void cpn_shm_sweep(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    const char *prefix = &CPN_SHM_PREFIX[1];   /* the name without its leading slash */
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            sweep_one(e->d_name);
    closedir(d);
}

void cpn_link_detach(cpn_link *l)
{
    if (l->shm)
        munmap(l->shm, l->map_bytes);
    l->shm = NULL;
    free(l->peers);
    l->peers = NULL;
}

void cpn_link_wake_all(cpn_link *l)
{
    if (!l->shm)
        return;
    cpn_shm_header *h = &l->shm->h;
    /* Shared futex wakes reach the other processes' waiters too; they find nothing changed
     * and sleep again, which is cheaper than tracking who waits where. */
    cpn_futex_wake(&h->init_state, 1);
    cpn_futex_wake(&h->ready, 1);
    cpn_futex_wake(&h->bar_gen, 1);
    cpn_futex_wake(&h->boot_gen, 1);
    cpn_futex_wake(&rank_rec(l, l->rank)->doorbell, 1);
}

int cpn_peer_alive(const cpn_link *l, int rank)
{
    int pid = l->peers ? l->peers[rank].pid : 0;
    if (pid <= 0 || pid == (int)getpid())
        return 1;
    return pid_alive(pid);
}

/* The collective barrier and the doorbells live here because they need the records. */

int cpn_coll_barrier(cpn_link *l, uint64_t seq, uint64_t arrival_ns, uint64_t *max_arrival)
{
    rank_rec(l, l->rank)->arrival[seq & 3] = arrival_ns;
    int w = cpn_coll_step(l);
    if (w != CPN_WAIT_OK)
        return w;
    uint64_t m = 0;
    for (int r = 0; r < l->nranks; r++) {
        uint64_t a = rank_rec(l, r)->arrival[seq & 3];
        if (a > m)
            m = a;
    }
    *max_arrival = m;
    return CPN_WAIT_OK;
}

static int any_peer_gone(const cpn_link *l)
{
    for (int r = 0; r < l->nranks; r++)
        if (!cpn_peer_alive(l, r))
            return 1;
    return 0;
}

int cpn_coll_step(cpn_link *l)
{
    cpn_shm_header *h = &l->shm->h;
    if (l->nranks <= 1)
        return CPN_WAIT_OK;
    /* read the generation before arriving: it can only move once everyone has */
    uint32_t gen = atomic_load(&h->bar_gen);
    if (atomic_fetch_add(&h->bar_count, 1) + 1 == (uint32_t)l->nranks) {
        atomic_store(&h->bar_count, 0);
        atomic_fetch_add(&h->bar_gen, 1);
        if (atomic_load(&h->bar_sleepers))
            cpn_futex_wake(&h->bar_gen, 1);
        return CPN_WAIT_OK;
    }
    int quiet = 0;
    while (atomic_load(&h->bar_gen) == gen) {
        if (aborted(l))
            return CPN_WAIT_ABORTED;
        /* sleepers goes up before gen is read again: the last arriver either sees a
         * sleeper and wakes it, or moved gen first and the futex returns at once */
        atomic_fetch_add(&h->bar_sleepers, 1);
        if (atomic_load(&h->bar_gen) == gen)
            cpn_futex_wait(&h->bar_gen, gen, 1, 100000000);
        atomic_fetch_sub(&h->bar_sleepers, 1);
        /* a peer that died leaves us waiting forever: look every second or so */
        if (++quiet % 10 == 0 && atomic_load(&h->bar_gen) == gen && any_peer_gone(l))
            return CPN_WAIT_PEER_GONE;
    }
    return CPN_WAIT_OK;
}

void cpn_ring(cpn_link *l, int rank)
{
    cpn_shm_rank *r = rank_rec(l, rank);
    atomic_fetch_add(&r->doorbell, 1);
    if (atomic_load(&r->sleepers))
        cpn_futex_wake(&r->doorbell, 1);
}

int cpn_wait_doorbell(cpn_link *l, uint32_t seen)
{
    cpn_shm_rank *r = rank_rec(l, l->rank);
    static _Thread_local unsigned quiet;
    atomic_fetch_add(&r->sleepers, 1);
    /* sleepers is raised before the doorbell is read again: a ringer either sees a sleeper
     * and wakes it, or rang before this read and the futex returns at once */
    if (atomic_load(&r->doorbell) == seen && !aborted(l))
        cpn_futex_wait(&r->doorbell, seen, 1, 100000000);
    atomic_fetch_sub(&r->sleepers, 1);
    if (aborted(l))
        return CPN_WAIT_ABORTED;
    if (atomic_load(&r->doorbell) == seen && ++quiet % 10 == 0 && any_peer_gone(l))
        return CPN_WAIT_PEER_GONE;
    return CPN_WAIT_OK;
}

int cpn_boot_exchange(cpn_link *l, uint64_t seq, const int *participants, int npart,
                      const int32_t payload[4], int32_t (*payloads)[4])
{
    cpn_shm_header *h = &l->shm->h;
    cpn_shm_rank *me = rank_rec(l, l->rank);
    memcpy(me->boot_payload[seq & 1], payload, 4 * sizeof(int32_t));
    atomic_store(&me->boot_seq, seq + 1);
    atomic_fetch_add(&h->boot_gen, 1);
    cpn_futex_wake(&h->boot_gen, 1);
    int quiet = 0;
    for (;;) {
        uint32_t gen = atomic_load(&h->boot_gen);
        int all = 1;
        for (int i = 0; i < npart && all; i++) {
            int r = participants ? participants[i] : i;
            all = atomic_load(&rank_rec(l, r)->boot_seq) >= seq + 1;
        }
        if (all)
            break;
        if (aborted(l))
            return CPN_WAIT_ABORTED;
        cpn_futex_wait(&h->boot_gen, gen, 1, 100000000);
        if (++quiet % 10 == 0 && any_peer_gone(l))
            return CPN_WAIT_PEER_GONE;
    }
    for (int i = 0; i < npart; i++) {
        int r = participants ? participants[i] : i;
        memcpy(payloads[i], rank_rec(l, r)->boot_payload[seq & 1], 4 * sizeof(int32_t));
    }
    return CPN_WAIT_OK;
}
