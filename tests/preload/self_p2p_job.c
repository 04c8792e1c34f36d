/* self_p2p_job: two ranks on the emulated NCCL, each sending to itself in groups: a pair in
 * place (one buffer: NCCL drops it at the group's end, no task, no kernel) and a pair out of
 * place (a kernel, but no proxy op: no kernel channel reported), five times, with an
 * AllReduce between; then the self pairs NCCL makes of an AlltoAll in place (alone and in a
 * group) and of a Gather in place at its root, which drop two of the call's tasks, and of an
 * AlltoAll out of place, whose self tasks report no channel. For the shim's handling of
 * calls NCCL's plugin never completes (test_preload_timing_emu). */
#include <stdint.h>
#include <stdio.h>

#include "test_emu_nccl_util.h"

static int work(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(rank, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, nranks, *id, rank));
    static int32_t a[100], b[100];
    for (int i = 0; i < 100; i++)
        a[i] = rank * 1000 + i;
    for (int it = 0; it < 5; it++) {
        TN_NCCL(ncclAllReduce(a, b, 100, ncclInt32, ncclSum, comm, s));
        TN_CHECK(tn_self_pair(a, a, 100, rank, comm, s) == 0, "in place");
        TN_CHECK(tn_self_pair(a, b, 100, rank, comm, s) == 0, "out of place");
    }
    static int32_t c[200], e[200];
    TN_NCCL(ncclAlltoAll(c, c, 100, ncclInt32, comm, s));
    TN_NCCL(ncclAlltoAll(c, e, 100, ncclInt32, comm, s));
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclAlltoAll(c, c, 100, ncclInt32, comm, s));
    TN_NCCL(ncclGroupEnd());
    TN_NCCL(ncclGather(c + rank * 100, c, 100, ncclInt32, 0, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

int main(void)
{
    return tn_job(NULL, 2, work, NULL, 60);
}
