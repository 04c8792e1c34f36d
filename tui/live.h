/* tui/live: the live model `collprof top` draws — every profiled rank of this node, from the
 * stats blocks their shims publish (live/stats_block.h), with rates computed between two
 * scans. Screens read this model only, never the blocks, so each is tested on a model built
 * in the test.
 */
#ifndef COLLPROF_TUI_LIVE_H
#define COLLPROF_TUI_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "live/stats_block.h"

enum cpt_rank_state {
    CPT_RUNNING = 0,
    CPT_EXITED = 1,     /* the process ended (its block says so, or it is gone): shown, then dropped */
};

#define CPT_RECENT_LATE 32 /* recent collectives the lateness column looks at */
#define CPT_LATE_US 200.0  /* arriving later than the median by more counts as late */

typedef struct cpt_rank {
    char path[CP_STATS_PATH_BYTES];
    char hostname[CP_HOSTNAME_BYTES];
    char job_id[CP_JOBID_BYTES];
    uint32_t pid, uid;
    int32_t rank, local_rank, world_size, cuda_dev;
    int state;                 /* enum cpt_rank_state */
    int died;                  /* exited without its shim's exit path (SIGKILL, a crash, the
                                * OOM killer): its block was left behind, never marked */
    int exited_scans;          /* scans since it was first seen exited */
    uint64_t calls;            /* since tracing started */
    uint64_t bytes;
    double calls_per_s;        /* over the last interval (0 on the first scan) */
    double gbps;               /* bytes per ns over the last interval */
    double nccl_share;         /* GPU (else host) time in NCCL / wall time, last interval */
    double p50_us;             /* median GPU (else host) duration of the recent operations */
    uint64_t lost_records;
    int gpu_timing;
    /* the operation in flight */
    uint8_t inflight_op;       /* CP_OP_NONE: none */
    uint64_t inflight_comm, inflight_seq, inflight_bytes;
    double inflight_age_s;
    double typical_us;         /* that op's recent p50, 0 unknown */
    int hang;                  /* the watchdog reported a hang */
    /* lateness against its local peers over their recent common collectives */
    double late_us_p50;        /* its arrival minus the median arrival of its peers */
    int late_count;            /* of those, how many it arrived last in, CPT_LATE_US past the median */
    int late_judged;           /* how many common collectives the two above cover (0: none) */
    uint64_t start_mono_ns;    /* identifies the process behind path (a pid can be reused) */
    cp_stats_block snap;       /* the last consistent copy (recent history for the detail view) */
} cpt_rank;

typedef struct cpt_live {
    cpt_rank *ranks;           /* sorted by rank, then pid */
    size_t nranks, cap;
    char dir[CP_STATS_PATH_BYTES];
    uint64_t scan_ns;          /* CLOCK_MONOTONIC of the last scan */
    char **notes;              /* blocks skipped, one line each (corrupt, foreign, unreadable) */
    size_t nnotes;
    /* totals */
    double calls_per_s, gbps;
    int running, exited, hung;  /* hung: cpt_rank_hung */
    /* blocks left behind by processes that died more than CPT_DEAD_GRACE_S ago: not shown
     * (a day of killed jobs would bury the live ranks), counted; `top --clean` removes them */
    size_t dead_hidden;
    int slowest;               /* index of the rank with the largest late_us_p50, -1 none */
    size_t other_users;        /* blocks of other users left unread (not root) */
    /* An operation in flight this long is hung, as the shim's watchdog would say
     * (COLLPROF_HANG_S; 0: its default, 60 s). The caller sets it. */
    double hang_s;
    int dir_missing;           /* the last scan found no such directory (a job creates it) */
    /* exited processes already dropped whose block is still on disk: not shown again */
    struct cpt_gone { char path[CP_STATS_PATH_BYTES]; uint64_t start_mono_ns; } *gone;
    size_t ngone, gone_cap;
} cpt_live;

/* A scan of dir (the settings' live_dir; NULL: /dev/shm) for blocks readable by uid (0: root,
 * every owner). The model keeps what the last scan saw, so rates are over the interval. A rank
 * that exits stays listed, exited, for CPT_EXITED_KEEP scans, then is dropped, whether its
 * block is gone (a clean exit unlinks it) or left behind; a block whose process died longer
 * than CPT_DEAD_GRACE_S before the scan is not listed at all. Running ranks come first, then
 * exited ones, each by rank. 0, or -1 with errno when dir cannot be read. */
#define CPT_EXITED_KEEP 5
#define CPT_DEAD_GRACE_S 30
int cpt_live_scan(cpt_live *l, const char *dir, uid_t uid);
/* A running rank the watchdog reported hung, or whose operation in flight is older than
 * l->hang_s: what the screen marks red, the header and --json count as hung. */
int cpt_rank_hung(const cpt_live *l, const cpt_rank *r);
/* The same with the time of the scan given (CLOCK_MONOTONIC ns): tests drive time. */
int cpt_live_scan_at(cpt_live *l, const char *dir, uid_t uid, uint64_t now_ns);
void cpt_live_free(cpt_live *l); /* and zeroes it: ready for a new first scan */

/* `collprof top --clean`: removes from dir (as cpt_live_scan finds it) the blocks of
 * processes that are gone, owned by uid (0: root, any owner); a live process' block, and a
 * file that is not a valid block, are never touched. Returns how many it removed, or -1 with
 * errno when dir cannot be read; *kept counts the blocks of live processes. */
int cpt_live_clean(const char *dir, uid_t uid, size_t *kept);

/* A rank's recent operations, newest first (i < cpt_rank_nrecent): what the detail view
 * lists, each with its host entry and, when timed, GPU start and end. */
size_t cpt_rank_nrecent(const cpt_rank *r);
const cp_stats_entry *cpt_rank_recent(const cpt_rank *r, size_t i);

/* Snapshots of the model (tui/snapshot.c), what `collprof top --once [--json]` prints.
 * The text fits 80 columns; the JSON's keys are in snapshot.c. 0, or -1 when out fails. */
int cpt_snapshot_text(FILE *out, const cpt_live *l);
int cpt_snapshot_json(FILE *out, const cpt_live *l);
/* The same as Prometheus text exposition for node_exporter's textfile collector
 * (tui/snapshot_prometheus.c): collprof_live_* families, a sample per process labelled job,
 * rank, local_rank, host and pid. 0, or -1 when out fails. */
int cpt_snapshot_prometheus(FILE *out, const cpt_live *l);

#endif
