/* comm_child: ncclCommSplit and ncclCommShrink (src/init.cc's ncclCommInitChildComm,
 * commGetSplitInfo, getParentRanks).
 *
 * Split is collective over the parent: every rank, NCCL_SPLIT_NOCOLOR ones included,
 * publishes (color, key) through the parent's segment; ranks of one color form the child,
 * ordered by key then parent rank. Shrink needs no exchange: the survivors all know the
 * exclusion list, and the excluded ranks (often dead) take no part. A child's segment key
 * derives from the parent's, the split count and the color, so every member computes the
 * same one; its commHash is NCCL's hash of (parent hash, split count, color).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Exchanges of one parent run in the order their jobs were created, on every rank. */
static void wait_boot_turn(ncclComm_t parent, uint64_t seq)
{
    uint32_t cur;
    while ((cur = atomic_load(&parent->boot_turn)) != (uint32_t)seq) {
        if (atomic_load(&parent->core->abort_word))
            return;
        cpn_futex_wait(&parent->boot_turn, cur, 0, 100000000);
    }
}

static void end_boot_turn(ncclComm_t parent)
{
    atomic_fetch_add(&parent->boot_turn, 1);
    cpn_futex_wake(&parent->boot_turn, 0);
}

ncclResult_t cpn_split_resolve(cpn_init_job *job)
{
    ncclComm_t parent = job->parent;
    int n = parent->nranks;
    int32_t (*all)[4] = calloc((size_t)n, sizeof *all);
    if (!all)
        return ncclSystemError;
    int32_t mine[4] = {job->color, job->key_arg, parent->rank, 0};
    wait_boot_turn(parent, job->boot_seq);
    int w = cpn_boot_exchange(&parent->core->link, job->boot_seq, NULL, n, mine, all);
    end_boot_turn(parent);
    if (w != CPN_WAIT_OK) {
        free(all);
        cpn_warn("ncclCommSplit : the split exchange with the parent's ranks failed");
        if (job->comm)
            atomic_store(&job->comm->init_state, ncclInternalError);
        return w == CPN_WAIT_PEER_GONE ? ncclRemoteError : ncclInternalError;
    }
    if (job->color == NCCL_SPLIT_NOCOLOR) {
        free(all);
        return ncclSuccess;
    }
    int count = 0, myrank = 0;
    for (int r = 0; r < n; r++) {
        if (all[r][0] != job->color)
            continue;
        count++;
        /* ranks before me: smaller key, or the same key and a smaller parent rank */
        if (all[r][1] < job->key_arg || (all[r][1] == job->key_arg && r < parent->rank))
            myrank++;
    }
    free(all);
    job->nranks = count;
    job->rank = myrank;
    job->comm_hash = cpn_hash_child(parent->comm_hash, job->split_count, job->color);
    job->key = cpn_hash_child(parent->key, job->split_count, job->color);
    job->id_hash = 0;
    return ncclSuccess;
}

static ncclResult_t init_child(ncclComm_t comm, ncclComm_t *newcomm, int shrink, int color,
                               int key, const int *exclude, int nexclude,
                               const ncclConfig_t *config, const char *caller)
{
    ncclResult_t r = cpn_comm_check(comm, caller, "comm");
    if (r == ncclSuccess)
        r = cpn_ptr_check(newcomm, caller, "newcomm");
    if (r != ncclSuccess)
        return r;
    int *sorted = NULL;
    if (shrink) {
        if ((r = cpn_ptr_check(exclude, caller, "excludeRanksList")) != ncclSuccess)
            return r;
        if (nexclude <= 0)
            return ncclInvalidArgument;
        sorted = malloc((size_t)nexclude * sizeof *sorted);
        if (!sorted)
            return ncclSystemError;
        memcpy(sorted, exclude, (size_t)nexclude * sizeof *sorted);
        qsort(sorted, (size_t)nexclude, sizeof *sorted, cmp_int);
        if (bsearch(&comm->rank, sorted, (size_t)nexclude, sizeof *sorted, cmp_int)) {
            free(sorted);
            return ncclInvalidArgument;   /* an excluded rank must not call it */
        }
    }
    if ((r = cpn_comm_ensure_ready(comm)) != ncclSuccess) {
        free(sorted);
        return r;
    }
    *newcomm = NULL;   /* until the child is fully made */
    ncclComm_t child = NULL;
    if (!shrink && color == NCCL_SPLIT_NOCOLOR) {
        cpn_info(CPN_INIT, comm->dev,
                 "Rank %d has color with NCCL_SPLIT_NOCOLOR, not creating a new communicator",
                 comm->rank);
    } else if ((r = cpn_comm_new(config, comm, &child)) != ncclSuccess) {
        free(sorted);
        return r;
    }
    cpn_init_job *job = calloc(1, sizeof *job);
    if (!job) {
        free(sorted);
        if (child)
            cpn_comm_free(child);
        return ncclSystemError;
    }
    job->comm = child;
    job->owner = comm;
    job->user_out = newcomm;
    job->parent = comm;
    job->dev = comm->dev;
    job->color = shrink ? 0 : color;
    job->key_arg = shrink ? comm->rank : key;
    snprintf(job->func_name, sizeof job->func_name, "%s", caller);
    if (!shrink) {
        job->split_count = ++comm->split_count;
        job->split_color_pending = 1;
        job->boot_seq = comm->boot_seq++;
    } else {
        /* the survivors keep their order; NCCL hashes a shrink as split count 0, color 0 */
        int myrank = 0;
        for (int r2 = 0; r2 < comm->rank; r2++)
            myrank += !bsearch(&r2, sorted, (size_t)nexclude, sizeof *sorted, cmp_int);
        int excluded = 0;
        for (int i = 0; i < nexclude; i++)
            excluded += sorted[i] >= 0 && sorted[i] < comm->nranks &&
                        (i == 0 || sorted[i] != sorted[i - 1]);
        job->nranks = comm->nranks - excluded;
        job->rank = myrank;
        job->comm_hash = cpn_hash_child(comm->comm_hash, 0, 0);
        job->key = cpn_hash_child(comm->key, -1 - ++comm->shrink_count, 0x5348524b);
    }
    free(sorted);
    if (child) {
        child->rank = job->rank;
        child->dev = comm->dev;
    }
    return cpn_async_launch(job);
}

ncclResult_t cpn_impl_ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                    ncclConfig_t *config)
{
    cpn_group_start();
    ncclResult_t r = init_child(comm, newcomm, 0, color, key, NULL, 0, config, "ncclCommSplit");
    cpn_group_error(r);
    ncclResult_t e = cpn_group_end(NULL);
    if (e != ncclSuccess && e != ncclInProgress)
        return e;
    return r;
}

ncclResult_t cpn_impl_ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                     int excludeRanksCount, ncclComm_t *newcomm,
                                     ncclConfig_t *config, int shrinkFlags)
{
    cpn_group_start();
    if ((shrinkFlags & NCCL_SHRINK_ABORT) && cpn_comm_check(comm, "ncclCommShrink", "comm") == 0)
        /* error mode: what is in flight on the parent is aborted first */
        cpn_comm_abort_inflight(comm);
    ncclResult_t r = init_child(comm, newcomm, 1, 0, 0, excludeRanksList, excludeRanksCount,
                                config, "ncclCommShrink");
    cpn_group_error(r);
    ncclResult_t e = cpn_group_end(NULL);
    if (e != ncclSuccess && e != ncclInProgress)
        return e;
    return r;
}
