/* live_test_util: synthetic stats blocks written into a directory, as a shim would leave
 * them, for the live model's tests and benchmark. Header-only. */
#ifndef COLLPROF_LIVE_TEST_UTIL_H
#define COLLPROF_LIVE_TEST_UTIL_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "live/stats_block.h"

/* A block with its identity filled in; counters, ring and in-flight are the caller's. */
static inline void lt_block_init(cp_stats_block *b, unsigned pid, int rank, int local_rank,
                                 int world, const char *host)
{
    cp_stats_block_init(b);
    b->flags = CP_STATS_GPU_TIMING;
    b->pid = pid;
    b->uid = (uint32_t)geteuid();
    b->rank = rank;
    b->local_rank = local_rank;
    b->world_size = world;
    b->cuda_dev = local_rank;
    b->start_mono_ns = 1000000000ull + pid;
    snprintf(b->hostname, sizeof b->hostname, "%s", host);
    snprintf(b->job_id, sizeof b->job_id, "job42");
}

/* Appends one operation to the ring, as the shim's recent_push does. */
static inline void lt_push(cp_stats_block *b, uint8_t op, uint64_t comm, uint64_t seq,
                           uint64_t bytes, uint64_t gpu_start, uint64_t gpu_end)
{
    cp_stats_recent_append(b, &(cp_stats_entry){.comm_id = comm, .seq = seq, .bytes = bytes,
                                                .enter_ns = gpu_start ? gpu_start - 1000 : 0,
                                                .gpu_start_ns = gpu_start,
                                                .gpu_end_ns = gpu_end, .peer = -1, .op = op});
}

/* Writes b as dir/collprof-<uid>-<pid>: 0 or -1. */
static inline int lt_write(const char *dir, const cp_stats_block *b)
{
    char path[CP_STATS_PATH_BYTES];
    cp_stats_path(path, sizeof path, dir, b->uid, b->pid);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(b, 1, sizeof *b, f);
    return fclose(f) == 0 && w == sizeof *b ? 0 : -1;
}

/* A process that stays alive until lt_kill: a real pid for a running block. */
static inline pid_t lt_live_child(void)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        for (;;)
            pause();
    }
    return p;
}

static inline void lt_kill(pid_t p)
{
    if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
}

/* The pid of a process that has ended and been reaped. */
static inline pid_t lt_dead_pid(void)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

static inline void lt_rmtree(const char *dir)
{
    char cmd[CP_STATS_PATH_BYTES + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    (void)rc;
}

#endif
