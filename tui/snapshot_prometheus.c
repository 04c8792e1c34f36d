/* tui/snapshot_prometheus.c: the live model as Prometheus text exposition (live.h), for
 * node_exporter's textfile collector: `collprof top --prometheus FILE` rewrites FILE every
 * few seconds, and a cluster's Prometheus scrapes every node's. Labels name each process as
 * its launcher did (job, rank, local_rank, host) plus its pid, which keeps two processes
 * claiming one rank apart. Written with present/'s exposition helpers, as the trace's
 * export is. */
#include <inttypes.h>
#include <stdio.h>

#include "present/present.h"
#include "tui/live.h"

static void rank_labels(cpr_labels *l, const cpt_rank *r)
{
    cpr_lbl_reset(l);
    cpr_lbl_add(l, "job", r->job_id[0] ? r->job_id : "unknown");
    cpr_lbl_int(l, "rank", r->rank);
    cpr_lbl_int(l, "local_rank", r->local_rank);
    cpr_lbl_add(l, "host", r->hostname[0] ? r->hostname : "unknown");
    cpr_lbl_int(l, "pid", r->pid);
}

typedef double (*rank_value)(const cpt_live *l, const cpt_rank *r, int *skip);

static double v_up(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return r->state == CPT_RUNNING;
}
static double v_calls(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return (double)r->calls;
}
static double v_calls_rate(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return r->calls_per_s;
}
static double v_bytes_rate(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return r->gbps * 1e9;
}
static double v_share(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return r->nccl_share;
}
static double v_p50(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l;
    *skip = r->p50_us <= 0;
    return r->p50_us / 1e6;
}
static double v_inflight(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l;
    *skip = r->inflight_op == CP_OP_NONE || r->state != CPT_RUNNING;
    return r->inflight_age_s;
}
static double v_hang(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)skip;
    return r->state == CPT_RUNNING && cpt_rank_hung(l, r);
}
static double v_late(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l;
    *skip = r->late_judged <= 0;
    return r->late_us_p50 / 1e6;
}
static double v_late_count(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l;
    *skip = r->late_judged <= 0;
    return r->late_count;
}
static double v_judged(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return r->late_judged;
}
static double v_lost(const cpt_live *l, const cpt_rank *r, int *skip)
{
    (void)l, (void)skip;
    return (double)r->lost_records;
}

static const struct {
    const char *name, *type, *help;
    rank_value value;
} families[] = {
    {"collprof_live_up", "gauge", "1 while the process runs, 0 for a few scans after it exits.",
     v_up},
    {"collprof_live_calls_total", "counter", "NCCL collectives and send/recv calls made.",
     v_calls},
    {"collprof_live_calls_per_second", "gauge", "Calls per second over the last interval.",
     v_calls_rate},
    {"collprof_live_bytes_per_second", "gauge",
     "Bytes the calls moved per second over the last interval.", v_bytes_rate},
    {"collprof_live_nccl_share", "gauge",
     "Share of the last interval spent in NCCL (GPU time when timed, else host).", v_share},
    {"collprof_live_op_p50_seconds", "gauge", "Median duration of the recent operations.",
     v_p50},
    {"collprof_live_inflight_age_seconds", "gauge",
     "How long the operation in flight has been in flight (absent: none).", v_inflight},
    {"collprof_live_hang", "gauge",
     "1 when the shim's watchdog reported a hang or the operation in flight is older than "
     "COLLPROF_HANG_S.", v_hang},
    {"collprof_live_late_p50_seconds", "gauge",
     "Median arrival after its local peers' median over their recent common collectives.",
     v_late},
    {"collprof_live_late_collectives", "gauge",
     "Of the recent common collectives, how many it arrived last in, late.", v_late_count},
    {"collprof_live_late_judged_collectives", "gauge",
     "Recent common collectives the lateness figures cover.", v_judged},
    {"collprof_live_lost_records_total", "counter", "Trace records the shim had to drop.",
     v_lost},
};

int cpt_snapshot_prometheus(FILE *out, const cpt_live *l)
{
    cpr_labels lb;
    cpr_prom_family(out, "collprof_live_ranks", "gauge",
                    "Profiled processes on this node, by state (hung: running, but hung).");
    static const char *const states[] = {"running", "hung", "exited"};
    int counts[] = {l->running - l->hung, l->hung, l->exited};
    for (int i = 0; i < 3; i++) {
        cpr_lbl_reset(&lb);
        cpr_lbl_add(&lb, "state", states[i]);
        cpr_prom_sample(out, "collprof_live_ranks", &lb, counts[i] > 0 ? counts[i] : 0);
    }
    cpr_prom_family(out, "collprof_live_dead_hidden", "gauge",
                    "Blocks left by processes that died over 30 s ago: not shown, counted "
                    "(collprof top --clean removes them).");
    cpr_prom_u64(out, "collprof_live_dead_hidden", NULL, l->dead_hidden);
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        cpr_prom_family(out, families[f].name, families[f].type, families[f].help);
        for (size_t i = 0; i < l->nranks; i++) {
            int skip = 0;
            double v = families[f].value(l, &l->ranks[i], &skip);
            if (skip)
                continue;
            rank_labels(&lb, &l->ranks[i]);
            cpr_prom_sample(out, families[f].name, &lb, v);
        }
    }
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
