/* launcher: a process of a multi-process NCCL job learns who it is and gets rank 0's
 * ncclUniqueId, the two things a program started by torchrun, mpirun or srun needs before
 * ncclCommInitRank. collprof-sim and `collprof selftest` both start jobs this way, so they share
 * this rather than each reading the launchers its own way.
 *
 *   launcher_env.c  rank, world and local rank from torchrun / OpenMPI / PMI / Slurm variables
 *   rendezvous.c    rank 0's ncclUniqueId to every rank: a shared directory, or TCP at
 *                   MASTER_ADDR:MASTER_PORT
 *
 * Neither prints on its own: each message is one line without a newline, handed to the
 * caller's `say`, which adds its program's prefix (and the rank, once known). A -1 return comes
 * right after the line that says why. (The shim's preload/identity.c reads the same variables
 * but never refuses a job, so it keeps its own lenient reader.)
 */
#ifndef COLLPROF_LAUNCHER_H
#define COLLPROF_LAUNCHER_H

#include <stdlib.h>

#include "abi/nccl_abi.h"

/* The job's id as its launcher gives it (torchrun's run id, Slurm's, PBS's, OpenMPI's job id,
 * the first set), or NULL: the shim's trace header and `collprof run`'s default directory
 * read the same list. Inline: the shim links none of this folder's socket code. */
static inline const char *cp_launcher_job_id(void)
{
    static const char *const vars[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID",
                                       "OMPI_MCA_ess_base_jobid"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* Where messages go; ctx is the caller's. NULL: stderr, one write(2) per line, no prefix. */
typedef void (*cp_launcher_say_fn)(void *ctx, const char *line);
/* Formats one line (cut at 2 KiB) and hands it to say: how both files below speak. */
void cp_launcher_say(cp_launcher_say_fn say, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct cp_launcher {
    int rank, world, local_rank, local_world;
    const char *source;         /* "torchrun", "OpenMPI", "PMI", "Slurm", or "default" */
    const char *rendezvous_dir; /* the caller's directory variable; NULL when unset */
    const char *master_addr;    /* NULL when unset */
    int master_port;            /* 0 when MASTER_PORT is unset */
} cp_launcher;

/* Fills id from the environment: the first launcher family whose rank variable is set wins
 * (torchrun, OpenMPI, PMI, Slurm, the shim's order); with none, one rank of one. local_world
 * is the ranks on this host (LOCAL_WORLD_SIZE and the like; world when none says). A family
 * without a local rank or size (srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE only) takes
 * Slurm's when SLURM_PROCID and SLURM_NTASKS are its rank and world, else the rank. The
 * rendezvous directory is read from the variable named rendezvous_var (collprof-sim:
 * COLLPROF_SIM_RENDEZVOUS; NULL: there is no directory way). -1 after a line: a malformed or
 * inconsistent variable, or a world over one rank with neither a directory nor MASTER_ADDR
 * and MASTER_PORT. The strings point into the environment. */
int cp_launcher_read(cp_launcher *id, const char *rendezvous_var, cp_launcher_say_fn say,
                     void *ctx);

/* Every rank ends with rank 0's uid: rank 0 passes its own (from ncclGetUniqueId), the others
 * receive it. Through id->rendezvous_dir when set, else TCP at master_addr:master_port (the
 * port after it under torchrun's agent, whose store holds MASTER_PORT). Nothing to do for one
 * rank. -1 after a line when a peer is missing by timeout_s or the exchange fails: rank 0 waits
 * until every other rank has fetched the id over TCP (a directory needs no wait). */
int cp_rendezvous(const cp_launcher *id, double timeout_s, ncclUniqueId *uid,
                  cp_launcher_say_fn say, void *ctx);

#endif
