/* clock_job: the synthetic multi-host jobs test_clock and test_straggler share, whose true
 * times are chosen here. Header-only so each test stays one program.
 *
 * Every job is written in "true" time t (ns since the job began). Each host turns it into its
 * own CLOCK_MONOTONIC (a boot time of its own, optionally running fast) and its own wall clock
 * (off by a chosen error); each rank's GPU times may be off by an error of their own (a bad
 * reference event in the shim). The analyzer sees only those local readings, so what it finds
 * (offsets, drift, the late rank, by how much) is checked against the truth, not against its
 * own arithmetic. */
#ifndef COLLPROF_TEST_CLOCK_JOB_H
#define COLLPROF_TEST_CLOCK_JOB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/analyzer.h"
#include "trace/trace_writer.h"
#include "tests/trace/test_trace_util.h"

#define MAXR 16
#define MAXC 8
#define EPOCH 1700000000000000000ull
#define US 1000.0
#define MS 1000000.0
#define LAUNCH_NS 5000.0 /* host entry to GPU start on an idle stream */
#define F32 7

typedef struct thost {
    const char *name;
    uint64_t boot_ns;    /* its monotonic clock reads boot_ns at true time 0 */
    int64_t wall_err_ns; /* its wall clock reads true + wall_err_ns */
    double drift;        /* its monotonic clock runs (1 + drift) fast */
    int clock_at_end;    /* writes a CLOCK record when it closes (the shim does, at exit) */
} thost;

typedef struct tjob {
    char *dir;
    int n;
    const thost *host[MAXR];
    cp_trace_writer *w[MAXR];
    double gerr[MAXR];      /* ns added to that rank's GPU times ... */
    double gerr_late[MAXR]; /* ... or this from true time gerr_switch on (a new reference) */
    double gerr_switch;
    uint64_t seq[MAXC];
    int comm_rank[MAXC][MAXR]; /* -1 not a member */
} tjob;

static inline uint64_t mono_of(const thost *h, double t)
{
    return h->boot_ns + (uint64_t)llround(t * (1.0 + h->drift));
}

static inline uint64_t gpu_of(const tjob *j, int r, double t)
{
    double e = j->gerr_switch > 0 && t >= j->gerr_switch ? j->gerr_late[r] : j->gerr[r];
    return mono_of(j->host[r], t + e);
}

/* Deterministic jitter in [-1, 1). */
static inline double jit(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

static inline void job_open(tjob *j, int n, const thost *hosts, const int *host_of)
{
    memset(j, 0, sizeof *j);
    memset(j->comm_rank, 0xff, sizeof j->comm_rank);
    j->dir = tt_tmpdir();
    j->n = n;
    for (int r = 0; r < n; r++) {
        const thost *h = &hosts[host_of[r]];
        j->host[r] = h;
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/rank%02d%s", j->dir, r, CP_TRACE_FILE_SUFFIX);
        cp_file_header fh;
        cp_file_header_init(&fh);
        fh.rank = r;
        fh.world_size = n;
        fh.pid = 100 + (uint32_t)r;
        fh.flags = CP_FILE_GPU_TIMING;
        fh.mono_anchor_ns = mono_of(h, 0);
        fh.realtime_anchor_ns = (uint64_t)((int64_t)EPOCH + h->wall_err_ns);
        snprintf(fh.hostname, sizeof fh.hostname, "%s", h->name);
        j->w[r] = cp_trace_writer_open(path, &fh, 0, err, sizeof err);
        if (!j->w[r])
            fail_msg("%s", err);
    }
}

static inline void job_comm(tjob *j, uint32_t index, uint64_t id, const int *members, int nm)
{
    for (int k = 0; k < nm; k++) {
        cp_rec_comm c = {.h = {CP_REC_COMM, sizeof c}, .comm_index = index, .comm_id = id,
                         .nranks = nm, .rank = k, .cuda_dev = -1, .origin = CP_COMM_INIT_RANK};
        assert_int_equal(cp_trace_writer_append(j->w[members[k]], &c), 0);
        j->comm_rank[index][members[k]] = k;
    }
}

/* One collective of comm `index`: member k arrives at true time arrive[k] (its GPU start,
 * or its host entry when not timed) and every member's GPU ends at end[k] (NULL: all at
 * end_all). */
static inline void job_coll_at(tjob *j, uint32_t index, const int *members, int nm,
                               uint8_t op, const double *enter_at, const double *arrive,
                               const double *end, double end_all, int timed);

static inline void job_coll(tjob *j, uint32_t index, const int *members, int nm, uint8_t op,
                            const double *arrive, const double *end, double end_all, int timed)
{
    job_coll_at(j, index, members, nm, op, NULL, arrive, end, end_all, timed);
}

/* As job_coll, with each member's host entry given (enter_at[k]; NULL: just before its GPU
 * start), so that a GPU start can trail its entry by a backlog. */
static inline void job_coll_at(tjob *j, uint32_t index, const int *members, int nm,
                               uint8_t op, const double *enter_at, const double *arrive,
                               const double *end, double end_all, int timed)
{
    uint64_t seq = j->seq[index]++;
    for (int k = 0; k < nm; k++) {
        int r = members[k];
        const thost *h = j->host[r];
        double e = end ? end[k] : end_all;
        double enter = enter_at ? enter_at[k] : timed ? arrive[k] - LAUNCH_NS : arrive[k];
        cp_rec_call c = {.h = {CP_REC_CALL, sizeof c}, .op = op, .dtype = F32,
                         .redop = op == CP_OP_ALLREDUCE ? 0 : CP_REDOP_NONE,
                         .flags = timed ? CP_CALL_TIMED : 0, .comm_index = index,
                         .site_index = UINT32_MAX, .seq = seq, .count = 1024, .stream = 1,
                         .enter_ns = mono_of(h, enter),
                         .host_ns = timed ? 3000 : (uint32_t)(e - arrive[k]),
                         .peer = op == CP_OP_BROADCAST ? 0 : -1};
        assert_int_equal(cp_trace_writer_append(j->w[r], &c), 0);
        if (!timed)
            continue;
        cp_rec_done d = {.h = {CP_REC_DONE, sizeof d}, .comm_index = index, .seq = seq,
                         .gpu_start_ns = gpu_of(j, r, arrive[k]), .gpu_end_ns = gpu_of(j, r, e),
                         .peer = c.peer, .op = op, .timing = CP_TIMING_EVENTS};
        assert_int_equal(cp_trace_writer_append(j->w[r], &d), 0);
    }
}

static inline void job_close(tjob *j, double t_end)
{
    for (int r = 0; r < j->n; r++) {
        const thost *h = j->host[r];
        if (h->clock_at_end) {
            cp_rec_clock k = {.h = {CP_REC_CLOCK, sizeof k}, .mono_ns = mono_of(h, t_end),
                              .realtime_ns = (uint64_t)((int64_t)EPOCH + h->wall_err_ns +
                                                        (int64_t)llround(t_end))};
            assert_int_equal(cp_trace_writer_append(j->w[r], &k), 0);
        }
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .exit_code = 0, .at_ns = mono_of(h, t_end)};
        assert_int_equal(cp_trace_writer_append(j->w[r], &e), 0);
        assert_int_equal(cp_trace_writer_close(j->w[r]), 0);
    }
}

/* Only the stages under test: loading, matching, clocks, stragglers. */
typedef struct res {
    cpa_model *m;
    cpa_matched mt;
    cpa_clock c;
    cpa_stragglers s;
} res;

static inline void analyze(tjob *j, res *x)
{
    char err[256] = "";
    memset(x, 0, sizeof *x);
    if (cpa_model_load(j->dir, &x->m, err, sizeof err) ||
        cpa_match(x->m, &x->mt, err, sizeof err) ||
        cpa_clock_align(x->m, &x->mt, &x->c, err, sizeof err) ||
        cpa_stragglers_compute(x->m, &x->mt, &x->c, &x->s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(x->m->nwarnings, 0);
}

static inline void res_free(res *x)
{
    cpa_stragglers_free(&x->s);
    cpa_clock_free(&x->c);
    cpa_matched_free(&x->mt);
    cpa_model_free(x->m);
}

static inline void job_free(tjob *j)
{
    tt_rmtree(j->dir);
    free(j->dir);
}

/* The job time line is the reference host's wall clock: true time + EPOCH + its error. */
static inline void assert_job_time(const res *x, const tjob *j, int r, double t,
                                   double tol_ns)
{
    /* epochs in ns differ by less than a double can tell (256 ns): subtract as integers */
    uint64_t got = cpa_clock_job_ns(x->m, &x->c, (size_t)r, mono_of(j->host[r], t));
    double off = (double)(int64_t)(got - EPOCH) - (double)j->host[0]->wall_err_ns - t;
    if (fabs(off) > tol_ns + 0.5)
        fail_msg("rank %d at %.0f ns: job time off by %.0f ns", r, t, off);
}

static inline void assert_no_straggler(const res *x)
{
    if (x->s.nrows)
        fail_msg("rank %d called a straggler (%llu late)", x->s.rows[0].rank,
                 (unsigned long long)x->s.rows[0].late_count);
    assert_int_equal(x->s.kind, CPA_STRAGGLER_NONE);
}

static const int all8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

#endif
