/* comm_init: unique ids and communicator initialization (src/init.cc's ncclGetUniqueId,
 * ncclCommInitRank*, ncclCommInitAll and ncclCommInitRankFunc).
 *
 * An id is 128 bytes: a magic, 64 random bits and the creator's pid; its hash names the
 * shared segment the ranks meet in and is NCCL's commHash (getHash of the id), so the
 * `commId 0x...` of the INFO line is what NCCL would print for the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "abi/cuda_api_list.h"
#include "emu/common/topo_ext.h"
#include "emu/nccl/nccl_emu.h"

#define CPN_UID_MAGIC 0x4449555545504350ull   /* "CPEPUUID" */

typedef struct cpn_uid {
    uint64_t magic;
    uint64_t random;
    int32_t pid;
    int32_t host;
    uint64_t nonce;
} cpn_uid;
_Static_assert(sizeof(cpn_uid) <= NCCL_UNIQUE_ID_BYTES, "the id fits ncclUniqueId");

/* The driver calls this library needs; resolved at link time against the emulated driver. */
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);

/* ---- NCCL's hash (src/include/bitops.h), so commHash values match NCCL's ---- */

static void eat_hash(uint64_t acc[2], const void *bytes, size_t size)
{
    const char *p = bytes;
    acc[0] ^= size;
    while (size != 0) {
        acc[0] += acc[1];
        acc[1] ^= acc[0];
        acc[0] ^= acc[0] >> 31;
        acc[0] *= 0x9de62bbc8cef3ce3ull;
        acc[1] ^= acc[1] >> 32;
        acc[1] *= 0x485cd6311b599e79ull;
        size_t n = size < 8 ? size : 8;
        uint64_t x = 0;
        memcpy(&x, p, n);
        p += n;
        size -= n;
        acc[0] += x;
    }
}

static uint64_t digest_hash(const uint64_t acc[2])
{
    uint64_t h = acc[0];
    h ^= h >> 31;
    h *= 0xbac3bd562846de6bull;
    h += acc[1];
    h ^= h >> 32;
    h *= 0x995a187a14e7b445ull;
    return h;
}

uint64_t cpn_hash_bytes(const void *p, size_t n)
{
    uint64_t acc[2] = {1, 1};
    eat_hash(acc, p, n);
    return digest_hash(acc);
}

uint64_t cpn_hash_child(uint64_t parent_hash, int split_count, int color)
{
    uint64_t acc[2] = {1, 1};
    eat_hash(acc, &parent_hash, sizeof parent_hash);
    eat_hash(acc, &split_count, sizeof split_count);
    eat_hash(acc, &color, sizeof color);
    return digest_hash(acc);
}

/* ---- the process and its devices ---- */

static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
static int first_rank_on_dev[CPEMU_MAX_GPUS];
static int first_rank_known[CPEMU_MAX_GPUS];

static int env_rank(void)
{
    static const char *names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long r = strtol(v, &end, 10);
        if (!errno && !*end && r >= 0 && r < (1L << 30))
            return (int)r;
    }
    return -1;
}

int cpn_fault_rank_for(int dev, int rank)
{
    int r = env_rank();
    if (r >= 0)
        return r;
    if (dev < 0 || dev >= CPEMU_MAX_GPUS)
        return rank;
    /* the rank of the first communicator this process created on that device: the job's
     * global rank, whatever sub-communicators come later */
    pthread_mutex_lock(&proc_lock);
    if (!first_rank_known[dev]) {
        first_rank_known[dev] = 1;
        first_rank_on_dev[dev] = rank;
    }
    r = first_rank_on_dev[dev];
    pthread_mutex_unlock(&proc_lock);
    return r;
}

int cpn_visible_devices(void)
{
    int n = 0;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

int cpn_env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 0);
    if (errno || *end)
        return dflt;
    return (int)x;
}

static ncclResult_t driver_init(void)
{
    /* NCCL's cudaFree(NULL): the runtime, hence the driver, is up before anything else */
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) {
        cpn_warn("Cuda failure %d 'initialization error'", (int)r);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

int cpn_retain_device(ncclComm_t comm)
{
    if (comm->ctx)
        return 0;
    return cuDevicePrimaryCtxRetain(&comm->ctx, comm->dev) == CUDA_SUCCESS ? 0 : -1;
}

void cpn_release_device(ncclComm_t comm)
{
    if (comm->ctx)
        cuDevicePrimaryCtxRelease_v2(comm->dev);
    comm->ctx = NULL;
}

int cpn_push_device(ncclComm_t comm)
{
    if (cpn_retain_device(comm) != 0)
        return -1;
    return cuCtxPushCurrent_v2(comm->ctx) == CUDA_SUCCESS ? 0 : -1;
}

void cpn_pop_device(void)
{
    CUcontext c;
    cuCtxPopCurrent_v2(&c);
}

/* NCCL's busIdToInt64: the hex digits of "0000:18:00.0", separators skipped. */
static int64_t bus_id_int(const char *s)
{
    char hex[17];
    int o = 0;
    for (int i = 0; s[i] && o < 16; i++) {
        char c = s[i];
        if (c == '.' || c == ':')
            continue;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
            hex[o++] = c;
        else
            break;
    }
    hex[o] = '\0';
    return (int64_t)strtoll(hex, NULL, 16);
}

/* Where ordinal `dev` of this process sits: its emulated host and topology GPU. */
static void place_device(int dev, cpn_rank_info *info, int *topo_dev)
{
    const cpemu_topo *t = cpemu_topo_get();
    int map[CPEMU_MAX_GPUS];
    int nvis = cpemu_visible_devices(t, map);
    int td = dev >= 0 && dev < nvis ? map[dev] : (dev >= 0 && t->ngpus ? dev % t->ngpus : 0);
    info->pid = (int)getpid();
    info->host = cpemu_device_host(t, dev, nvis);
    info->dev = td;
    info->bus_id = bus_id_int(t->gpus[td].pci_bus_id);
    *topo_dev = td;
}

/* ---- unique ids ---- */

ncclResult_t cpn_impl_ncclGetUniqueId(ncclUniqueId *out)
{
    /* no CUDA here, as in NCCL: a launcher may make the id and then fork its ranks */
    ncclResult_t r = cpn_bootstrap_net_init(-1);
    if (r == ncclSuccess)
        r = cpn_ptr_check(out, "GetUniqueId", "out");
    if (r != ncclSuccess)
        return r;
    cpn_shm_sweep();
    cpn_uid id;
    memset(&id, 0, sizeof id);
    id.magic = CPN_UID_MAGIC;
    if (getrandom(&id.random, sizeof id.random, 0) != (ssize_t)sizeof id.random)
        id.random = cpn_now_ns() ^ ((uint64_t)getpid() << 32);
    id.pid = (int32_t)getpid();
    id.host = cpemu_process_host();
    static _Atomic uint64_t nonce;
    id.nonce = atomic_fetch_add(&nonce, 1);
    memset(out, 0, sizeof *out);
    memcpy(out->internal, &id, sizeof id);
    return ncclSuccess;
}

/* ---- one rank's initialization (runs in the group's end, maybe on a thread of its own) ---- */

static void core_setup(ncclComm_t comm, int host)
{
    cpn_core *core = comm->core;
    core->nranks = comm->nranks;
    core->rank = comm->rank;
    core->places = calloc((size_t)comm->nranks, sizeof *core->places);
    core->p2p_sent = calloc((size_t)comm->nranks, sizeof *core->p2p_sent);
    core->p2p_recvd = calloc((size_t)comm->nranks, sizeof *core->p2p_recvd);
    for (int r = 0; r < comm->nranks && core->places; r++) {
        core->places[r].host = core->link.peers[r].host;
        core->places[r].dev = core->link.peers[r].dev;
    }
    core->fault_rank = cpn_fault_rank_for(comm->dev, comm->rank);
    cpn_topo_for_comm(core, host);
}

ncclResult_t cpn_init_run(cpn_init_job *job)
{
    uint64_t t0 = cpn_now_ns();
    ncclComm_t comm = job->comm;
    if (job->parent && job->split_color_pending) {
        ncclResult_t r = cpn_split_resolve(job);
        if (r != ncclSuccess || !comm)
            return r;   /* NCCL_SPLIT_NOCOLOR: took part in the exchange, made nothing */
    }
    if (!comm)
        return ncclSuccess;
    cpn_rank_info mine;
    int topo_dev;
    place_device(job->dev, &mine, &topo_dev);
    comm->rank = job->rank;
    comm->nranks = job->nranks;
    comm->dev = job->dev;
    comm->nvml_dev = topo_dev;
    comm->bus_id = mine.bus_id;
    comm->comm_hash = job->comm_hash;
    comm->key = job->key;
    comm->id_hash = job->id_hash;
    snprintf(comm->func_name, sizeof comm->func_name, "%s", job->func_name);
    if (job->parent)
        cpn_info(CPN_INIT, comm->dev,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p "
                 "splitCount %d color %d key %d- Init START",
                 job->func_name, (void *)comm, comm->rank, comm->nranks, comm->dev, topo_dev,
                 (unsigned long)comm->bus_id, (void *)job->parent, job->split_count,
                 job->color, job->key_arg);
    else
        cpn_info(CPN_INIT, comm->dev,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - "
                 "Init START",
                 job->func_name, (void *)comm, comm->rank, comm->nranks, comm->dev, topo_dev,
                 (unsigned long)comm->bus_id, (unsigned long long)job->id_hash);
    if (!job->parent &&
        cpemu_fault_hangs_at(cpemu_topo_get(), cpn_fault_rank_for(job->dev, job->rank),
                             CPEMU_HANG_INIT)) {
        /* COLLPROF_EMU_HANG=RANK:init, as a bootstrap that never connects: only an abort of
         * the (non-blocking) communicator ends it; a blocking caller waits for ever */
        while (!atomic_load(&comm->core->abort_word))
            cpn_futex_wait(&comm->core->abort_word, 0, 0, 1000000000);
        atomic_store(&comm->init_state, ncclInternalError);
        atomic_store(&comm->async_state, ncclInternalError);
        return ncclInternalError;
    }
    ncclResult_t r = cpn_link_attach(&comm->core->link, job->key, job->nranks, job->rank, &mine,
                                     &comm->core->abort_word);
    uint64_t t1 = cpn_now_ns();
    /* NCCL refuses two ranks of one communicator on the same GPU (init.cc); a job that
     * launches more ranks than a host has GPUs must fail here too, not run on. */
    for (int i = 0; r == ncclSuccess && i < job->nranks; i++) {
        const cpn_rank_info *p = &comm->core->link.peers[i];
        if (i != job->rank && p->host == mine.host && p->dev == mine.dev) {
            cpn_warn("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx",
                     job->rank, i, (unsigned long)mine.bus_id);
            r = ncclInvalidUsage;
        }
    }
    if (r == ncclSuccess && cpn_retain_device(comm) != 0) {
        cpn_warn("Cuda failure 'invalid device ordinal' (device %d)", comm->dev);
        r = ncclUnhandledCudaError;
    }
    if (r != ncclSuccess) {
        atomic_store(&comm->init_state, r);
        atomic_store(&comm->async_state, r);
        return r;
    }
    core_setup(comm, mine.host);
    cpn_log_transports(comm);
    /* init.cc: the profiler's context is made before the proxy thread, in initTransportsRank */
    cpn_prof_comm_init(comm);
    atomic_store(&comm->init_state, ncclSuccess);
    if (comm->blocking)
        atomic_store(&comm->async_state, ncclSuccess);
    if (job->parent)
        cpn_info(CPN_INIT, comm->dev,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p "
                 "splitCount %d color %d key %d - Init COMPLETE",
                 job->func_name, (void *)comm, comm->rank, comm->nranks, comm->dev, topo_dev,
                 (unsigned long)comm->bus_id, (void *)job->parent, job->split_count,
                 job->color, job->key_arg);
    else
        cpn_info(CPN_INIT, comm->dev,
                 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - "
                 "Init COMPLETE",
                 job->func_name, (void *)comm, comm->rank, comm->nranks, comm->dev, topo_dev,
                 (unsigned long)comm->bus_id, (unsigned long long)job->id_hash);
    double total = (double)(cpn_now_ns() - t0) / 1e9, boot = (double)(t1 - t0) / 1e9;
    cpn_info(CPN_INIT | CPN_PROFILE, comm->dev,
             "Init timings - %s: rank %d nranks %d total %.2f (kernels 0.00, alloc 0.00, "
             "bootstrap %.2f, allgathers 0.00, topo 0.00, graphs 0.00, connections 0.00, "
             "rest %.2f)",
             job->func_name, comm->rank, comm->nranks, total, boot, total - boot);
    if (job->user_out)
        __atomic_store_n(job->user_out, comm, __ATOMIC_RELEASE);
    return ncclSuccess;
}

/* ncclCommInitRankDev: checks, the comm object, and the job (now, or at the group's end). */
static ncclResult_t init_rank_dev(ncclComm_t *newcomm, int nranks, int nId,
                                  const ncclUniqueId *ids, int myrank, int dev,
                                  const ncclConfig_t *config, const char *func)
{
    /* NCCL leaves *newcomm alone on this early error and its caller then reads it; the
     * emulation clears it first, so no garbage pointer is ever followed */
    if (newcomm)
        *newcomm = NULL;
    if (nId <= 0 || nId > nranks) {
        cpn_warn("improper usage of ncclCommInitRank: nId = %d, nranks=%d", nId, nranks);
        return ncclInvalidArgument;
    }
    ncclResult_t r = driver_init();
    if (r == ncclSuccess)
        r = cpn_bootstrap_net_init(dev);
    if (r != ncclSuccess)
        return r;
    cpn_log_version_once(myrank);
    if ((r = cpn_ptr_check(newcomm, "CommInitRank", "newcomm")) != ncclSuccess)
        return r;
    if (nranks < 1 || myrank < 0 || myrank >= nranks) {
        cpn_warn("Invalid rank requested : %d/%d", myrank, nranks);
        *newcomm = NULL;
        return ncclInvalidArgument;
    }
    cpn_uid id;
    memcpy(&id, ids[0].internal, sizeof id);
    if (id.magic != CPN_UID_MAGIC) {
        cpn_warn("Bootstrap : the ncclUniqueId was not made by ncclGetUniqueId");
        *newcomm = NULL;
        return ncclInvalidArgument;
    }
    ncclComm_t comm;
    if ((r = cpn_comm_new(config, NULL, &comm)) != ncclSuccess) {
        *newcomm = NULL;
        return r;
    }
    *newcomm = comm;
    cpn_init_job *job = calloc(1, sizeof *job);
    if (!job) {
        cpn_comm_free(comm);
        *newcomm = NULL;
        return ncclSystemError;
    }
    job->comm = job->owner = comm;
    job->nranks = nranks;
    job->rank = myrank;
    job->dev = dev;
    /* NCCL's commHash: getHash of the first id; it also names the segment */
    job->key = job->comm_hash = job->id_hash =
        cpn_hash_bytes(ids[0].internal, NCCL_UNIQUE_ID_BYTES);
    snprintf(job->func_name, sizeof job->func_name, "%s", func);
    comm->rank = myrank;
    comm->nranks = nranks;
    comm->dev = dev;
    return cpn_async_launch(job);
}

ncclResult_t cpn_impl_ncclCommInitRank(ncclComm_t *newcomm, int nranks, ncclUniqueId commId,
                                       int myrank)
{
    return init_rank_dev(newcomm, nranks, 1, &commId, myrank, cpn_current_dev(), NULL,
                         "ncclCommInitRank");
}

static ncclResult_t init_config_wrapped(ncclComm_t *newcomm, int nranks, int nId,
                                        const ncclUniqueId *ids, int myrank,
                                        const ncclConfig_t *config, const char *func)
{
    cpn_group_start();
    ncclResult_t r = init_rank_dev(newcomm, nranks, nId, ids, myrank, cpn_current_dev(), config,
                                   func);
    cpn_group_error(r);
    ncclResult_t e = cpn_group_end(NULL);
    if (r == ncclSuccess)
        r = e;
    if (newcomm && *newcomm && !(*newcomm)->blocking && r != ncclSuccess && r != ncclInProgress)
        atomic_store(&(*newcomm)->async_state, r);
    if (newcomm && *newcomm && !(*newcomm)->blocking)
        (void)cpn_impl_ncclCommGetAsyncError(*newcomm, &r);
    return r;
}

ncclResult_t cpn_impl_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                             int rank, ncclConfig_t *config)
{
    return init_config_wrapped(comm, nranks, 1, &commId, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t cpn_impl_ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                               int nId, ncclUniqueId *commIds,
                                               ncclConfig_t *config)
{
    if (nId > 0 && !commIds) {
        cpn_warn("CommInitRankScalable : commIds argument is NULL");
        return ncclInvalidArgument;
    }
    return init_config_wrapped(newcomm, nranks, nId, commIds, myrank, config,
                               "ncclCommInitRankScalable");
}

ncclResult_t cpn_impl_ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    ncclResult_t r = driver_init();
    if (r != ncclSuccess)
        return r;
    if ((r = cpn_ptr_check(comms, "CommInitAll", "comms")) != ncclSuccess)
        return r;
    if (ndev < 0) {
        cpn_warn("Invalid device count requested : %d", ndev);
        return ncclInvalidArgument;
    }
    int total = cpn_visible_devices();
    if (devlist) {
        int used[CPEMU_MAX_GPUS] = {0};
        for (int i = 0; i < ndev; i++) {
            if (devlist[i] < 0 || devlist[i] >= total) {
                cpn_warn("Invalid device %d (totalnDev=%d)", devlist[i], total);
                return ncclInvalidArgument;
            }
            if (used[devlist[i]]++)
                return ncclInvalidUsage;
        }
    }
    ncclUniqueId id;
    if ((r = cpn_impl_ncclGetUniqueId(&id)) != ncclSuccess)
        return r;
    cpn_group_start();
    for (int i = 0; i < ndev; i++)
        /* like NCCL, errors of the individual inits surface through the group's end */
        cpn_group_error(init_rank_dev(comms + i, ndev, 1, &id, i, devlist ? devlist[i] : i,
                                      NULL, "ncclCommInitAll"));
    return cpn_group_end(NULL);
}
