/* nccl_api_list: every public entry point of NCCL 2.28, as X-macros.
 *
 *     #define CP_NCCL_API(X)  X(ret, name, params, args) ...
 *
 * `params` is the parenthesised parameter list with names, `args` the same names as a call's
 * argument list, so one expansion can declare, define and forward:
 *
 *     #define X(ret, name, params, args) ret name params { return real_##name args; }
 *     CP_NCCL_API(X)
 *
 * The shim exports each of these, the emulation implements each, and NCCL exports each again
 * as p<name> (the strong symbol; <name> is its weak alias).
 *
 * Only type names appear here, never an include: the list expands the same after
 * abi/nccl_abi.h or after the real nccl.h, which is how tests/abi/test_abi_nccl_real
 * checks every signature against NCCL's own declarations and checks that nccl.h declares
 * nothing this list lacks.
 *
 * Not listed, on purpose: the device-API host functions libnccl.so.2 also exports
 * (ncclDevCommCreate, ncclTeamWorld, ... from the nccl_device headers). They are C++-only and take
 * types nccl.h does not declare; a shim that does not define them leaves them to NCCL.
 */
#ifndef COLLPROF_NCCL_API_LIST_H
#define COLLPROF_NCCL_API_LIST_H

#define CP_NCCL_API(X) \
    /* memory */ \
    X(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size), (ptr, size)) \
    X(ncclResult_t, ncclMemFree, (void *ptr), (ptr)) \
    /* version, ids, errors */ \
    X(ncclResult_t, ncclGetVersion, (int *version), (version)) \
    X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId *uniqueId), (uniqueId)) \
    X(const char *, ncclGetErrorString, (ncclResult_t result), (result)) \
    X(const char *, ncclGetLastError, (ncclComm_t comm), (comm)) \
    /* communicator life */ \
    X(ncclResult_t, ncclCommInitRankConfig, \
      (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config), \
      (comm, nranks, commId, rank, config)) \
    X(ncclResult_t, ncclCommInitRank, \
      (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank), \
      (comm, nranks, commId, rank)) \
    X(ncclResult_t, ncclCommInitAll, (ncclComm_t *comm, int ndev, const int *devlist), \
      (comm, ndev, devlist)) \
    X(ncclResult_t, ncclCommInitRankScalable, \
      (ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds, \
       ncclConfig_t *config), \
      (newcomm, nranks, myrank, nId, commIds, config)) \
    X(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm)) \
    X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm)) \
    X(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm)) \
    X(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags), (comm, revokeFlags)) \
    X(ncclResult_t, ncclCommSplit, \
      (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config), \
      (comm, color, key, newcomm, config)) \
    X(ncclResult_t, ncclCommShrink, \
      (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm, \
       ncclConfig_t *config, int shrinkFlags), \
      (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags)) \
    /* communicator queries */ \
    X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError), \
      (comm, asyncError)) \
    X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count), (comm, count)) \
    X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device), (comm, device)) \
    X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank), (comm, rank)) \
    /* buffer registration */ \
    X(ncclResult_t, ncclCommRegister, \
      (const ncclComm_t comm, void *buff, size_t size, void **handle), \
      (comm, buff, size, handle)) \
    X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle), (comm, handle)) \
    X(ncclResult_t, ncclCommWindowRegister, \
      (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags), \
      (comm, buff, size, win, winFlags)) \
    X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), \
      (comm, win)) \
    /* custom reductions */ \
    X(ncclResult_t, ncclRedOpCreatePreMulSum, \
      (ncclRedOp_t *op, void *scalar, ncclDataType_t datatype, \
       ncclScalarResidence_t residence, ncclComm_t comm), \
      (op, scalar, datatype, residence, comm)) \
    X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm)) \
    /* collectives */ \
    X(ncclResult_t, ncclReduce, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, op, root, comm, stream)) \
    X(ncclResult_t, ncclBcast, \
      (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, \
       cudaStream_t stream), \
      (buff, count, datatype, root, comm, stream)) \
    X(ncclResult_t, ncclBroadcast, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, \
       ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
    X(ncclResult_t, ncclAllReduce, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, op, comm, stream)) \
    X(ncclResult_t, ncclReduceScatter, \
      (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, \
       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, recvcount, datatype, op, comm, stream)) \
    X(ncclResult_t, ncclAllGather, \
      (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, \
       ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, sendcount, datatype, comm, stream)) \
    X(ncclResult_t, ncclAlltoAll, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
       ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, comm, stream)) \
    X(ncclResult_t, ncclGather, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, \
       ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
    X(ncclResult_t, ncclScatter, \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, \
       ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
    /* point to point */ \
    X(ncclResult_t, ncclSend, \
      (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, \
       cudaStream_t stream), \
      (sendbuff, count, datatype, peer, comm, stream)) \
    X(ncclResult_t, ncclRecv, \
      (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, \
       cudaStream_t stream), \
      (recvbuff, count, datatype, peer, comm, stream)) \
    /* groups */ \
    X(ncclResult_t, ncclGroupStart, (void), ()) \
    X(ncclResult_t, ncclGroupEnd, (void), ()) \
    X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t *simInfo), (simInfo))

/* Apart because it returns void (a forwarding wrapper cannot `return real args;`) and
 * because nccl.h marks it deprecated ("not supported as part of the NCCL API"); NCCL 2.28
 * still exports it and its pncclResetDebugInit twin. */
#define CP_NCCL_API_DEPRECATED(X) \
    X(void, ncclResetDebugInit, (void), ())

#endif
