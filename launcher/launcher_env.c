/* launcher_env: who this process is in the job, from the launcher's environment.
 *
 * The launchers collprof supports each name rank, world size and local rank their own way;
 * the first family whose rank variable is set wins, in the order collprof's shim uses, so a
 * program started under a launcher and the profiler always agree on who a process is. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/launcher.h"

void cp_launcher_say(cp_launcher_say_fn say, void *ctx, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (say) {
        say(ctx, line);
        return;
    }
    size_t len = strlen(line);
    line[len++] = '\n';
    /* one write, so that the lines of ranks sharing a terminal never interleave */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

struct family {
    const char *source;
    const char *rank, *world, *local_rank;
    /* ranks on this host, tried in order; the first set one counts. `leading` marks a
     * variable read by its leading number: SLURM_TASKS_PER_NODE reads "4(x2)" or "4,3", whose
     * first number is this node's count for the usual even split (what the TP size needs). */
    struct { const char *name; int leading; } local_world[2];
};

static const struct family families[] = {
    { "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", { { "LOCAL_WORLD_SIZE", 0 } } },
    { "OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      { { "OMPI_COMM_WORLD_LOCAL_SIZE", 0 } } },
    { "PMI", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK",
      { { "PMI_LOCAL_SIZE", 0 }, { "MPI_LOCALNRANKS", 0 } } },
    { "Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
      { { "SLURM_NTASKS_PER_NODE", 0 }, { "SLURM_TASKS_PER_NODE", 1 } } },
};

/* -1: unset; -2: malformed; else the value. `prefix_ok` accepts trailing text ("4(x2)"). */
static long env_int(const char *name, int prefix_ok)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || x < 0 || x > (1L << 24) || (*end && !prefix_ok))
        return -2;
    return x;
}

/* Slurm, when its rank and size are this same task: what fills a local rank or local size
 * the winning family does not give. srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE but no
 * PMI_LOCAL_RANK; SLURM_LOCALID is the task's. Under an mpiexec inside an allocation the
 * SLURM_ variables are those of the allocation or of mpiexec's proxies, and disagree. */
static const struct family *same_task_slurm(const struct family *fam, long rank, long world)
{
    const struct family *slurm = &families[sizeof families / sizeof *families - 1];
    if (fam == slurm || env_int(slurm->rank, 0) != rank || env_int(slurm->world, 0) != world)
        return NULL;
    return slurm;
}

static int bad(const char *name, cp_launcher_say_fn say, void *ctx)
{
    cp_launcher_say(say, ctx, "%s='%s' is not a non-negative number", name, getenv(name));
    return -1;
}

int cp_launcher_read(cp_launcher *id, const char *rendezvous_var, cp_launcher_say_fn say,
                     void *ctx)
{
    memset(id, 0, sizeof *id);
    id->world = 1;
    id->local_world = -1;
    id->source = "default";
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        const struct family *fam = &families[f];
        long rank = env_int(fam->rank, 0);
        if (rank == -1)
            continue;
        if (rank == -2)
            return bad(fam->rank, say, ctx);
        long world = env_int(fam->world, 0), local = env_int(fam->local_rank, 0);
        if (world == -2)
            return bad(fam->world, say, ctx);
        if (local == -2)
            return bad(fam->local_rank, say, ctx);
        if (world == -1) {
            cp_launcher_say(say, ctx, "%s is set but %s is not: cannot tell the world size",
                            fam->rank, fam->world);
            return -1;
        }
        if (world < 1 || rank >= world) {
            cp_launcher_say(say, ctx, "%s=%ld is not below %s=%ld", fam->rank, rank,
                            fam->world, world);
            return -1;
        }
        const struct family *alt = same_task_slurm(fam, rank, world);
        if (local == -1 && alt && (local = env_int(alt->local_rank, 0)) == -2)
            return bad(alt->local_rank, say, ctx);
        id->rank = (int)rank;
        id->world = (int)world;
        id->local_rank = local >= 0 ? (int)local : (int)rank;
        id->source = fam->source;
        const struct family *const from[2] = {fam, alt};
        for (int f = 0; f < 2 && from[f] && id->local_world < 1; f++)
            for (int k = 0; k < 2 && from[f]->local_world[k].name && id->local_world < 1; k++) {
                const struct family *lf = from[f];
                long lw = env_int(lf->local_world[k].name, lf->local_world[k].leading);
                if (lw == -2)
                    return bad(lf->local_world[k].name, say, ctx);
                if (lw >= 1)
                    id->local_world = (int)lw;
            }
        break;
    }
    if (id->local_world < 1 || id->local_world > id->world)
        id->local_world = id->world;

    const char *dir = rendezvous_var ? getenv(rendezvous_var) : NULL;
    id->rendezvous_dir = dir && *dir ? dir : NULL;
    const char *addr = getenv("MASTER_ADDR");
    id->master_addr = addr && *addr ? addr : NULL;
    long port = env_int("MASTER_PORT", 0);
    if (port == -2 || port > 65535) {
        cp_launcher_say(say, ctx, "MASTER_PORT='%s' is not a port number",
                        getenv("MASTER_PORT"));
        return -1;
    }
    id->master_port = port > 0 ? (int)port : 0;
    if (id->world > 1 && !id->rendezvous_dir && !(id->master_addr && id->master_port)) {
        if (rendezvous_var)
            cp_launcher_say(say, ctx, "%s says %d ranks but there is no way to share the NCCL "
                            "id: set %s=DIR or MASTER_ADDR and MASTER_PORT", id->source,
                            id->world, rendezvous_var);
        else
            cp_launcher_say(say, ctx, "%s says %d ranks but there is no way to share the NCCL "
                            "id: set MASTER_ADDR and MASTER_PORT", id->source, id->world);
        return -1;
    }
    return 0;
}
