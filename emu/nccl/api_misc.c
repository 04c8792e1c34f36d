/* api_misc: the small entry points - version, error strings, groups, memory, registration,
 * windows and custom reductions (src/init.cc, group.cc, allocator.cc, register/,
 * dev_runtime.cc, enqueue.cc).
 */
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuInit(unsigned int flags);

ncclResult_t cpn_impl_ncclGetVersion(int *version)
{
    if (version == NULL)
        return ncclInvalidArgument;
    *version = CPN_NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *cpn_impl_ncclGetErrorString(ncclResult_t result)
{
    return cp_nccl_result_name(result);
}

const char *cpn_impl_ncclGetLastError(ncclComm_t comm)
{
    (void)comm;   /* NCCL keeps one text per process; comm is unused there too */
    return cpn_last_error();
}

void cpn_impl_ncclResetDebugInit(void)
{
    cpn_log_reset();
}

ncclResult_t cpn_impl_ncclGroupStart(void)
{
    return cpn_group_start();
}

ncclResult_t cpn_impl_ncclGroupEnd(void)
{
    return cpn_group_end(NULL);
}

ncclResult_t cpn_impl_ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    return cpn_group_end(simInfo);
}

/* ---- device memory: the emulated driver's, in the calling thread's device ---- */

/* The runtime keeps each device's primary context alive once used; so does this. */
static CUcontext device_ctx(int dev)
{
    static CUcontext ctx[CPEMU_MAX_GPUS];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    if (dev < 0 || dev >= CPEMU_MAX_GPUS)
        return NULL;
    pthread_mutex_lock(&lock);
    if (!ctx[dev] && cuInit(0) == CUDA_SUCCESS)
        cuDevicePrimaryCtxRetain(&ctx[dev], dev);
    CUcontext c = ctx[dev];
    pthread_mutex_unlock(&lock);
    return c;
}

ncclResult_t cpn_impl_ncclMemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL) {
        cpn_warn("Cuda failure 1 'invalid argument'");   /* cudaMalloc(NULL, ...) */
        return ncclUnhandledCudaError;
    }
    if (size == 0) {
        *ptr = NULL;
        return ncclSuccess;
    }
    CUcontext c = device_ctx(cpn_current_dev());
    if (!c || cuCtxPushCurrent_v2(c) != CUDA_SUCCESS) {
        cpn_warn("Cuda failure 3 'initialization error'");
        return ncclUnhandledCudaError;
    }
    CUdeviceptr d = 0;
    CUresult r = cuMemAlloc_v2(&d, size);
    CUcontext old;
    cuCtxPopCurrent_v2(&old);
    if (r != CUDA_SUCCESS) {
        cpn_warn("Cuda failure %d 'out of memory'", (int)r);
        return ncclUnhandledCudaError;
    }
    *ptr = (void *)(uintptr_t)d;
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclMemFree(void *ptr)
{
    if (ptr == NULL)
        return ncclSuccess;   /* cudaFree(NULL) */
    CUcontext c = device_ctx(cpn_current_dev());
    int pushed = c && cuCtxPushCurrent_v2(c) == CUDA_SUCCESS;
    CUresult r = cuMemFree_v2((CUdeviceptr)(uintptr_t)ptr);
    if (pushed) {
        CUcontext old;
        cuCtxPopCurrent_v2(&old);
    }
    if (r != CUDA_SUCCESS) {
        cpn_warn("Cuda failure %d 'invalid argument'", (int)r);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* ---- registration and windows: bookkeeping only (the emulation copies either way) ---- */

static cpn_reg *reg_add(ncclComm_t comm, void *buff, size_t size, int window, int flags)
{
    cpn_reg *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->buff = buff;
    r->size = size;
    r->is_window = window;
    r->flags = flags;
    pthread_mutex_lock(&comm->lock);
    r->next = comm->regs;
    comm->regs = r;
    pthread_mutex_unlock(&comm->lock);
    return r;
}

static int reg_remove(ncclComm_t comm, const void *handle, int window)
{
    int found = 0;
    pthread_mutex_lock(&comm->lock);
    for (cpn_reg **p = &comm->regs; *p; p = &(*p)->next)
        if ((const void *)*p == handle && (*p)->is_window == window) {
            cpn_reg *r = *p;
            *p = r->next;
            free(r);
            found = 1;
            break;
        }
    pthread_mutex_unlock(&comm->lock);
    return found;
}

ncclResult_t cpn_impl_ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                       void **handle)
{
    ncclResult_t r = cpn_comm_check(comm, "ncclCommRegister", "comm");
    if (r == ncclSuccess)
        r = cpn_ptr_check(handle, "ncclCommRegister", "handle");
    if (r == ncclSuccess)
        r = cpn_comm_ensure_ready(comm);
    if (r != ncclSuccess)
        return r;
    *handle = reg_add(comm, buff, size, 0, 0);
    return *handle ? ncclSuccess : ncclSystemError;
}

ncclResult_t cpn_impl_ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t r = cpn_comm_check(comm, "ncclCommRegister", "comm");
    if (r != ncclSuccess || handle == NULL)
        return r;
    if (!reg_remove(comm, handle, 0)) {
        cpn_warn("ncclCommDeregister : handle %p is not registered with comm %p", handle,
                 (void *)comm);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                             ncclWindow_t *win, int winFlags)
{
    if (buff == NULL || size == 0)
        return ncclSuccess;   /* NCCL leaves *win untouched then */
    ncclResult_t r = cpn_comm_check(comm, "ncclCommWindowRegister", "comm");
    if (r == ncclSuccess)
        r = cpn_ptr_check(win, "ncclCommWindowRegister", "win");
    if (r == ncclSuccess)
        r = cpn_comm_ensure_ready(comm);
    if (r != ncclSuccess)
        return r;
    cpn_reg *reg = reg_add(comm, buff, size, 1, winFlags);
    if (!reg)
        return ncclSystemError;
    *win = (ncclWindow_t)(void *)reg;
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (win == NULL)
        return ncclSuccess;
    ncclResult_t r = cpn_comm_check(comm, "ncclCommWindowDeregister", "comm");
    if (r != ncclSuccess)
        return r;
    if (!reg_remove(comm, (void *)win, 1)) {
        cpn_warn("ncclCommWindowDeregister : window %p is not registered with comm %p",
                 (void *)win, (void *)comm);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* ---- custom reductions ---- */

ncclResult_t cpn_impl_ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                               ncclDataType_t datatype,
                                               ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t r = cpn_comm_check(comm, "ncclRedOpCreatePreMulSum", "comm");
    if (r == ncclSuccess)
        r = cpn_comm_ensure_ready(comm);
    if (r != ncclSuccess)
        return r;
    pthread_mutex_lock(&comm->lock);
    int ix = 0;
    while (ix < CPN_MAX_USER_OPS && comm->user_ops[ix].used)
        ix++;
    if (ix == CPN_MAX_USER_OPS) {
        pthread_mutex_unlock(&comm->lock);
        cpn_warn("ncclRedOpCreatePreMulSum : too many custom operators (%d)", CPN_MAX_USER_OPS);
        return ncclSystemError;
    }
    cpn_user_op *u = &comm->user_ops[ix];
    memset(u, 0, sizeof *u);
    u->dtype = (int)datatype;
    u->op.kind = CPN_RED_PREMULSUM;
    if (residence == ncclScalarHostImmediate) {
        size_t size = cpn_dtype_size((int)datatype);
        if (size < 1) {
            pthread_mutex_unlock(&comm->lock);
            return ncclInternalError;
        }
        memcpy(&u->op.scalar_bits, scalar, size);   /* read now: the caller may reuse it */
    } else {
        u->op.scalar_is_ptr = 1;
        u->op.scalar_ptr = scalar;
    }
    u->used = 1;
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)cpn_user_op_mangle(comm, (int)ncclNumOps + ix);
    return ncclSuccess;
}

ncclResult_t cpn_impl_ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    if (0 <= (int)op && (int)op < (int)ncclNumOps) {
        cpn_warn("ncclRedOpDestroy : operator is a NCCL builtin.");
        return ncclInvalidArgument;
    }
    if ((int)op < 0 || (int)ncclMaxRedOp < (int)op) {
        cpn_warn("ncclRedOpDestroy :  operator is garbage.");
        return ncclInvalidArgument;
    }
    if (comm == NULL) {
        cpn_warn("ncclRedOpDestroy : invalid communicator passed.");
        return ncclInvalidArgument;
    }
    int ix = cpn_user_op_mangle(comm, (int)op) - (int)ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    if (ix < 0 || ix >= CPN_MAX_USER_OPS || !comm->user_ops[ix].used) {
        pthread_mutex_unlock(&comm->lock);
        cpn_warn("ncclRedOpDestroy : operator unknown to this communicator.");
        return ncclInvalidArgument;
    }
    comm->user_ops[ix].used = 0;
    pthread_mutex_unlock(&comm->lock);
    return ncclSuccess;
}
