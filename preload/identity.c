/* identity: who this process is, and ids that agree across ranks.
 *
 * The launcher's environment is read in a fixed order (torchrun, OpenMPI, PMI, Slurm): the
 * first launcher whose rank variable is set wins, and its local rank and world size go with
 * it. One that gives no local rank (srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE only) takes
 * SLURM_LOCALID when Slurm's rank and size say the same task (launcher/launcher_env.c's rule).
 * The job id comes from TORCHELASTIC_RUN_ID, SLURM_JOB_ID, PBS_JOBID or OpenMPI's jobid;
 * without one it is the start time of the process group's leader (UTC, to the second) and
 * the group id, so ranks that one launcher forked share a directory, and runs started one
 * after another by hand do not.
 *
 * Comm ids are XXH3_64 (the trace format's hash, cp_trace_hash) of what every rank of a
 * communicator holds alike: the ncclUniqueId bytes; the parent's id, the color and how many
 * splits the parent had before (never the key, which differs per rank).
 */
#include "preload/shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launcher.h"
#include "trace/trace_hash.h"

static int env_int(const char *name, int32_t *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0 || n > INT32_MAX)
        return 0;
    *out = (int32_t)n;
    return 1;
}

static const struct {
    const char *launcher, *rank, *local_rank, *size;
} launchers[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"pmi", "PMI_RANK", "PMI_LOCAL_RANK", "PMI_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

/* The start time of process `pid` (UTC seconds), from /proc; 0 when unknown. */
static time_t process_start(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long start_ticks = 0;
    /* after ")": state is field 3, starttime field 22 */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                            "%*d %*d %*d %llu", &start_ticks) != 1)
        return 0;
    struct timespec boot_mono, now_real;
    clock_gettime(CLOCK_BOOTTIME, &boot_mono);
    clock_gettime(CLOCK_REALTIME, &now_real);
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return 0;
    return now_real.tv_sec - boot_mono.tv_sec + (time_t)(start_ticks / (unsigned long long)hz);
}

void cp_identity_load(cp_identity *id)
{
    memset(id, 0, sizeof *id);
    id->rank = id->local_rank = id->world_size = -1;
    strcpy(id->launcher, "none");
    size_t n = sizeof launchers / sizeof launchers[0];
    for (size_t i = 0; i < n; i++) {
        if (!env_int(launchers[i].rank, &id->rank))
            continue;
        env_int(launchers[i].local_rank, &id->local_rank);
        env_int(launchers[i].size, &id->world_size);
        snprintf(id->launcher, sizeof id->launcher, "%s", launchers[i].launcher);
        /* Under an mpiexec inside an allocation the SLURM_ variables are the allocation's
         * and do not match: then the local rank stays unknown. */
        int32_t slurm_rank, slurm_size;
        if (id->local_rank < 0 && i + 1 < n && env_int(launchers[n - 1].rank, &slurm_rank) &&
            env_int(launchers[n - 1].size, &slurm_size) && slurm_rank == id->rank &&
            slurm_size == id->world_size)
            env_int(launchers[n - 1].local_rank, &id->local_rank);
        break;
    }

    const char *job = cp_launcher_job_id();
    if (job) {
        snprintf(id->job_id, sizeof id->job_id, "%s", job);
    } else {
        pid_t pg = getpgrp();
        time_t t = process_start(pg);
        if (!t)
            t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(id->job_id, sizeof id->job_id, "%s-%d", stamp, (int)pg);
    }
    if (gethostname(id->hostname, sizeof id->hostname - 1) != 0 || !id->hostname[0])
        strcpy(id->hostname, "unknown");
    id->hostname[sizeof id->hostname - 1] = '\0';
}

/* A name that is safe as one path component: '/' and control bytes become '_'. */
static void path_safe(const char *in, char *out, size_t len)
{
    size_t i = 0;
    for (; in[i] && i + 1 < len; i++)
        out[i] = (in[i] == '/' || (unsigned char)in[i] < 0x20) ? '_' : in[i];
    out[i] = '\0';
}

void cp_identity_file_name(const cp_identity *id, const char *dir, char *out, size_t len)
{
    char host[CP_HOSTNAME_BYTES];
    path_safe(id->hostname, host, sizeof host);
    if (id->rank >= 0)
        snprintf(out, len, "%s/rank%05d-%s-%d%s", dir, (int)id->rank, host, (int)getpid(),
                 CP_TRACE_FILE_SUFFIX);
    else
        snprintf(out, len, "%s/norank-%s-%d%s", dir, host, (int)getpid(), CP_TRACE_FILE_SUFFIX);
}

int cp_mkdir_p(const char *dir, unsigned mode)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, mode) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

uint64_t cp_comm_id_from_unique_id(const ncclUniqueId *id)
{
    return cp_trace_hash(id->internal, sizeof id->internal);
}

uint64_t cp_comm_id_init_all(const char *hostname, uint64_t counter)
{
    struct {
        char host[CP_HOSTNAME_BYTES];
        uint64_t pid;
        uint64_t counter;
    } key;
    memset(&key, 0, sizeof key);
    strncpy(key.host, hostname, sizeof key.host - 1);
    key.pid = (uint64_t)getpid();
    key.counter = counter;
    return cp_trace_hash(&key, sizeof key);
}

uint64_t cp_comm_id_split(uint64_t parent_id, int color, uint64_t split_index, int shrink)
{
    struct {
        uint64_t parent;
        uint64_t index;
        int64_t color;
        uint64_t kind; /* a split and a shrink of the same parent never share an id */
    } key = {parent_id, split_index, color, shrink ? 2 : 1};
    return cp_trace_hash(&key, sizeof key);
}
