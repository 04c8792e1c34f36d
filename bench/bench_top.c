/* bench_top: what one refresh of `collprof top` costs with 64 local ranks, against a plain
 * pread of the same 64 blocks.
 *
 * Usage: bench_top [RANKS [SCANS]]   (default 64 500)
 *
 * Writes RANKS synthetic stats blocks into a fresh directory under $TMPDIR (or /tmp), as
 * the shims of one node would leave them: every block full (256 recent operations with GPU
 * times, all on one communicator, so lateness compares every rank over every collective),
 * one operation in flight each. Then measures the process CPU time
 * (CLOCK_PROCESS_CPUTIME_ID) of SCANS rounds of:
 *   baseline: open, one 16 KiB pread and close of each block;
 *   top: cpt_live_scan (list, open, seqlock snapshot, rates, lateness) and the text
 *   snapshot to /dev/null, which is what a refresh does besides drawing; and the JSON
 *   snapshot alone.
 * `collprof top` refreshes every second by default, so the share of a core is the scan's CPU
 * time over 1 s. The directory is removed at the end. Prints `<name>: <value> <unit>`.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live/stats_block.h"
#include "tui/live.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The blocks written into dir, then dir itself. */
static void rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[1024];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    int ranks = argc > 1 ? atoi(argv[1]) : 64;
    int scans = argc > 2 ? atoi(argv[2]) : 500;
    if (ranks < 1 || ranks > 4096 || scans < 1) {
        fprintf(stderr, "usage: bench_top [RANKS [SCANS]]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/collprof-bench-top-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_top: mkdtemp");
        return 3;
    }
    static cp_stats_block b;
    uint64_t now = mono_ns();
    for (int r = 0; r < ranks; r++) {
        /* the file names differ; the pid inside is this live process, so every block reads
         * as running (kill(pid, 0) is still made for each) */
        cp_stats_block_init(&b);
        b.flags = CP_STATS_GPU_TIMING;
        b.pid = (uint32_t)getpid();
        b.uid = (uint32_t)geteuid();
        b.rank = b.local_rank = b.cuda_dev = r;
        b.world_size = ranks;
        b.start_mono_ns = 1000000000ull;
        snprintf(b.hostname, sizeof b.hostname, "node0");
        snprintf(b.job_id, sizeof b.job_id, "job42");
        b.update_ns = now;
        b.ops[CP_OP_ALLREDUCE] = (cp_stats_op){.calls = 1000000, .bytes = 1ull << 40,
                                               .host_ns = 5000000000ull,
                                               .gpu_ns = 50000000000ull};
        for (uint64_t s = 0; s < CP_STATS_RECENT; s++) {
            uint64_t start = now - 2000000000ull + s * 1000000 + (uint64_t)r * 1000;
            cp_stats_recent_append(&b, &(cp_stats_entry){.comm_id = 0x9f2c, .seq = s,
                                                          .bytes = 1 << 20,
                                                          .enter_ns = start - 1000,
                                                          .gpu_start_ns = start,
                                                          .gpu_end_ns = start + 300000,
                                                          .peer = -1, .op = CP_OP_ALLREDUCE});
        }
        b.inflight = (cp_stats_inflight){.comm_id = 0x9f2c, .seq = CP_STATS_RECENT,
                                         .since_ns = now, .peer = -1, .op = CP_OP_ALLREDUCE};
        char path[CP_STATS_PATH_BYTES];
        cp_stats_path(path, sizeof path, dir, b.uid, 100000u + (unsigned)r);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(&b, 1, sizeof b, f) != sizeof b || fclose(f) != 0) {
            perror("bench_top: writing a block");
            rmtree(dir);
            return 3;
        }
    }
    FILE *null = fopen("/dev/null", "w");
    if (!null) {
        perror("bench_top: /dev/null");
        rmtree(dir);
        return 3;
    }

    /* baseline: the bytes alone */
    char **paths;
    int n = cp_stats_list(dir, &paths);
    static cp_stats_block buf;
    double t0 = cpu_s();
    for (int s = 0; s < scans; s++)
        for (int i = 0; i < n; i++) {
            int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
            if (fd < 0 || pread(fd, &buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
                perror("bench_top: pread");
                return 3;
            }
            close(fd);
        }
    double base = (cpu_s() - t0) / scans;
    cp_stats_list_free(paths, n);

    cpt_live l = {0};
    if (cpt_live_scan(&l, dir, geteuid()) != 0 || (int)l.nranks != ranks) {
        fprintf(stderr, "bench_top: the scan saw %zu ranks of %d\n", l.nranks, ranks);
        return 3;
    }
    t0 = cpu_s();
    for (int s = 0; s < scans; s++) {
        cpt_live_scan(&l, dir, geteuid());
        cpt_snapshot_text(null, &l);
    }
    double top = (cpu_s() - t0) / scans;
    t0 = cpu_s();
    for (int s = 0; s < scans; s++)
        cpt_snapshot_json(null, &l);
    double json = (cpu_s() - t0) / scans;
    fprintf(stderr, "bench_top: %d blocks, %d scans; slowest rank %d, %d judged each\n", ranks,
            scans, l.slowest >= 0 ? l.ranks[l.slowest].rank : -1, l.ranks[0].late_judged);
    cpt_live_free(&l);
    fclose(null);
    rmtree(dir);

    printf("top.scan_cpu_us_%d_ranks: %.1f us\n", ranks, top * 1e6);
    printf("top.baseline_pread_cpu_us_%d_ranks: %.1f us\n", ranks, base * 1e6);
    printf("top.scan_vs_pread_ratio: %.2f x\n", base > 0 ? top / base : 0);
    printf("top.json_snapshot_cpu_us_%d_ranks: %.1f us\n", ranks, json * 1e6);
    printf("top.cpu_share_at_1s: %.3f %%\n", top * 100);
    return 0;
}
