/* sweep: the measurement of `collprof selftest` — the driver's GPU list, NCCL's INFO log set
 * up, the communicators of this process (world.c), every op over the size list timed with
 * CUDA events, then the pairwise matrix and the rail pairs between hosts (p2p.c) and the log
 * read back. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "selftest/sweep_internal.h"

#define DEFAULT_MIN_BYTES 8ull
#define DEFAULT_MAX_BYTES (1ull << 30)
#define DEFAULT_CHECK_BYTES (1ull << 20)
#define DEFAULT_P2P_BYTES (64ull << 20)
#define DEFAULT_P2P_BYTES_QUICK (16ull << 20)
#define DEFAULT_TIMEOUT_S 60.0
#define MAX_SIZES 72

#define CU(call, what) CPS_CU(call, what)

/* ---- the GPU list --------------------------------------------------------------------- */

static int list_gpus(const struct cps_lib *L, cps_run *r, char *why, size_t whyn)
{
    CUresult rc = L->cuInit(0);
    if (rc != CUDA_SUCCESS) {
        char e[256];
        cps_cu_error(L, rc, e, sizeof e);
        snprintf(why, whyn, "%s: cuInit failed: %s (driver '%s'%s)",
                 rc == CUDA_ERROR_NO_DEVICE ? "no GPU" : "the CUDA driver does not start", e,
                 L->cuda_path,
                 rc == CUDA_ERROR_STUB_LIBRARY
                     ? ": the CUDA toolkit's stub, found before the real driver; take its "
                       "stubs directory out of LD_LIBRARY_PATH"
                     : "");
        cps_one_line(why);
        return -1;
    }
    int count = 0;
    CU(L->cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(why, whyn, "no GPU: the CUDA driver sees none%s%s%s",
                 vis ? " (CUDA_VISIBLE_DEVICES='" : "", vis ? vis : "", vis ? "')" : "");
        cps_one_line(why);
        return -1;
    }
    if (count > CPS_MAX_GPUS)
        count = CPS_MAX_GPUS; /* the pairwise matrix has room for this many */
    (void)L->cuDriverGetVersion(&r->cuda_driver_version);
    r->gpus = calloc((size_t)count, sizeof *r->gpus);
    if (!r->gpus) {
        snprintf(why, whyn, "out of memory");
        return -1;
    }
    char host[CPS_HOST_BYTES] = "";
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "?");
    for (int i = 0; i < count; i++)
        if (cps_gpu_identity(L, i, host, &r->gpus[i], why, whyn))
            return -1;
    r->nranks = r->local_ranks = count;
    r->nhosts = 1;
    return 0;
}

/* ---- NCCL's INFO log -------------------------------------------------------------------- */

static int has_token(const char *list, const char *tok)
{
    size_t tl = strlen(tok);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == tl && strncasecmp(p, tok, tl) == 0)
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* The transport lines are INFO lines of the INIT subsystem: a user's NCCL_DEBUG_SUBSYS keeps
 * what it asks for and gets INIT added; a higher level (TRACE) stays. NCCL reads these once,
 * at its first log line, so they are set before it loads. Returns the file NCCL is asked to
 * write (%h and %p expanded as NCCL does: the host name up to its first '.'). */
static void nccl_log_env(const char *dir, char *path, size_t pathn)
{
    const char *lvl = getenv("NCCL_DEBUG");
    if (!lvl || strcasecmp(lvl, "TRACE") != 0)
        setenv("NCCL_DEBUG", "INFO", 1);
    const char *sub = getenv("NCCL_DEBUG_SUBSYS");
    if (!sub || !*sub) {
        setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    } else if (sub[0] == '^') {
        if (has_token(sub + 1, "INIT") || has_token(sub + 1, "ALL"))
            setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    } else if (!has_token(sub, "INIT") && !has_token(sub, "ALL")) {
        char both[512];
        snprintf(both, sizeof both, "%s,INIT", sub);
        setenv("NCCL_DEBUG_SUBSYS", both, 1);
    }
    char file[512];
    snprintf(file, sizeof file, "%s/nccl.%%h.%%p.log", dir);
    setenv("NCCL_DEBUG_FILE", file, 1);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "unknown");
    host[strcspn(host, ".")] = '\0';
    snprintf(path, pathn, "%s/nccl.%s.%d.log", dir, host, (int)getpid());
}

/* The file NCCL actually opened: the expected name, else any nccl.*.<pid>.log in dir (a host
 * name NCCL shortens another way). "" when there is none. */
static void find_log(const char *dir, const char *expect, char *out, size_t outn)
{
    if (access(expect, R_OK) == 0) {
        snprintf(out, outn, "%s", expect);
        return;
    }
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        return;
    char tail[32];
    snprintf(tail, sizeof tail, ".%d.log", (int)getpid());
    size_t tl = strlen(tail);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > tl + 5 && strncmp(e->d_name, "nccl.", 5) == 0 &&
            strcmp(e->d_name + len - tl, tail) == 0) {
            if (snprintf(out, outn, "%s/%s", dir, e->d_name) >= (int)outn)
                out[0] = '\0'; /* a name cut short would name another file */
            break;
        }
    }
    closedir(d);
}

/* ---- the sweep --------------------------------------------------------------------------- */

/* Powers of two (x16 when quick) from min, and max itself last: the busbw checks judge the
 * largest size, which a x16 ladder would otherwise step over. */
static int size_list(uint64_t min, uint64_t max, int quick, uint64_t *sizes)
{
    uint64_t step = quick ? 16 : 2;
    int n = 0;
    for (uint64_t s = min; s <= max && n < MAX_SIZES - 1;) {
        sizes[n++] = s;
        if (s > max / step)
            break;
        s *= step;
    }
    if (n == 0 || sizes[n - 1] != max)
        sizes[n++] = max;
    return n;
}

struct sweep_plan {
    uint64_t sizes[MAX_SIZES];
    int nsizes, warmup, iters;
    uint64_t check_bytes, p2p_bytes;
};

static int plan(const cps_options *o, struct sweep_plan *p, char *why, size_t whyn)
{
    uint64_t min = o->min_bytes ? o->min_bytes : DEFAULT_MIN_BYTES;
    uint64_t max = o->max_bytes ? o->max_bytes : DEFAULT_MAX_BYTES;
    if (min > max) {
        snprintf(why, whyn, "sizes: the smallest (%llu B) is above the largest (%llu B)",
                 (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    p->nsizes = size_list(min, max, o->quick, p->sizes);
    p->warmup = o->warmup > 0 ? o->warmup : o->quick ? 2 : 5;
    p->iters = o->iters > 0 ? o->iters : o->quick ? 5 : 20;
    p->check_bytes = o->check_bytes ? o->check_bytes : DEFAULT_CHECK_BYTES;
    p->p2p_bytes = o->p2p_bytes ? o->p2p_bytes
                   : o->quick   ? DEFAULT_P2P_BYTES_QUICK
                                : DEFAULT_P2P_BYTES;
    return 0;
}

static int measure_ops_into(struct cps_world *w, const cps_options *o,
                            const struct sweep_plan *p, struct cps_progress *pr, cps_run *r,
                            double *us, char *why, size_t whyn)
{
    int n = w->nranks;
    unsigned all = (1u << w->n) - 1;
    int use_alltoall = w->L->ncclAlltoAll != NULL;
    for (int op = 0; op < CPS_NOPS; op++) {
        if (!(o->ops & (1u << op)))
            continue;
        char what[96], size[32];
        cps_bytes_text(r->check_bytes, size, sizeof size);
        snprintf(what, sizeof what, "%s check %s", cps_op_name(op), size);
        cps_progress_step(pr, what);
        double wrong = 0;
        if (cps_op_check(w, op, r->check_bytes, use_alltoall, &r->wrong[op], why, whyn))
            return -1;
        /* under a launcher each rank checked its own output: the run's count is the sum */
        wrong = (double)r->wrong[op];
        if (cps_world_agree(w, &wrong, 1, ncclSum, what, why, whyn))
            return -1;
        r->wrong[op] = (long)wrong;
        for (int s = 0; s < p->nsizes; s++) {
            struct cps_op_call call = {op, cps_op_count(op, p->sizes[s], n), use_alltoall};
            if (call.count == 0)
                continue;
            cps_point *pt = &r->points[r->npoints];
            pt->op = op;
            pt->bytes = cps_op_bytes(op, call.count, n);
            pt->count = call.count; /* nccl-tests' count column: NCCL's count argument */
            cps_bytes_text(pt->bytes, size, sizeof size);
            snprintf(what, sizeof what, "%s %s", cps_op_name(op), size);
            cps_progress_step(pr, what);
            /* under a launcher each process saw its own rank: the shortest over all ranks */
            if (cps_time_each(w, all, cps_op_issue, &call, p->warmup, p->iters, 1, what, us,
                              why, whyn) ||
                cps_world_agree(w, us, (size_t)p->iters, ncclMin, what, why, whyn))
                return -1;
            pt->time_us = cps_median(us, p->iters);
            double t = pt->time_us > 0 ? pt->time_us * 1e-6 : 1e-9;
            pt->algbw_gbps = (double)pt->bytes / t / 1e9;
            pt->busbw_gbps = pt->algbw_gbps * cps_busbw_factor(op, n);
            r->npoints++;
        }
    }
    return 0;
}

/* Every op over every size; us holds one size's per-call times. */
static int measure_ops(struct cps_world *w, const cps_options *o, const struct sweep_plan *p,
                       struct cps_progress *pr, cps_run *r, char *why, size_t whyn)
{
    double *us = calloc((size_t)p->iters, sizeof *us);
    if (!us) {
        snprintf(why, whyn, "out of memory for %d iterations' times", p->iters);
        return -1;
    }
    int rc = measure_ops_into(w, o, p, pr, r, us, why, whyn);
    free(us);
    return rc;
}

int cps_sweep(const cps_options *o, cps_run *r, char *why, size_t whyn)
{
    memset(r, 0, sizeof *r);
    for (int op = 0; op < CPS_NOPS; op++)
        r->wrong[op] = -1;
    cps_nccl_log_init(&r->log);
    if (whyn)
        why[0] = '\0';
    struct sweep_plan p;
    if (plan(o, &p, why, whyn))
        return CPS_SWEEP_USAGE;
    /* torchrun, mpirun or srun: one rank per process (world_launcher.c) */
    cp_launcher id;
    struct cps_say say = {why, whyn};
    if (cp_launcher_read(&id, CPS_RENDEZVOUS_VAR, cps_say_why, &say))
        return CPS_SWEEP_USAGE;

    /* NCCL reads its log settings once per process: a later sweep here keeps the first file. */
    static char given_log[512];
    char expect_log[512] = "";
    if (o->log_dir && !given_log[0]) {
        nccl_log_env(o->log_dir, expect_log, sizeof expect_log);
        snprintf(given_log, sizeof given_log, "%s", expect_log);
    } else {
        snprintf(expect_log, sizeof expect_log, "%s", given_log);
    }
    /* A run that could not be made holds nothing to free (cps_run_free is still safe). */
    const struct cps_lib *L = cps_lib_load(why, whyn);
    if (!L)
        return CPS_SWEEP_CANNOT_RUN;
    ncclResult_t vr = L->ncclGetVersion(&r->nccl_version);
    if (vr != ncclSuccess) {
        char e[256];
        cps_nccl_error(L, vr, NULL, e, sizeof e);
        snprintf(why, whyn, "ncclGetVersion failed: %s (NCCL '%s')", e, L->nccl_path);
        return CPS_SWEEP_CANNOT_RUN;
    }
    double timeout_s = o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT_S;
    struct cps_world w;
    int fail;
    if (id.world > 1) {
        fail = cps_world_open_launcher(&w, L, &id, timeout_s, r, why, whyn);
    } else {
        if (list_gpus(L, r, why, whyn)) {
            cps_run_free(r);
            return CPS_SWEEP_CANNOT_RUN;
        }
        fail = cps_world_open_local(&w, L, r->nranks, timeout_s, why, whyn);
    }
    if (!fail && expect_log[0]) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s", expect_log);
        *strrchr(dir, '/') = '\0';
        find_log(dir, expect_log, r->log_path, sizeof r->log_path);
    }
    int n = r->nranks;
    r->check_bytes = p.check_bytes < (uint64_t)n * sizeof(float) ? (uint64_t)n * sizeof(float)
                                                                   : p.check_bytes;
    uint64_t need = r->check_bytes;
    int nops = 0;
    for (int op = 0; op < CPS_NOPS; op++) {
        if (!(o->ops & (1u << op)))
            continue;
        nops++;
        for (int s = 0; s < p.nsizes; s++) {
            uint64_t b = cps_op_buffer_bytes(op, p.sizes[s], n);
            need = b > need ? b : need;
        }
    }
    if (o->p2p && p.p2p_bytes > need)
        need = p.p2p_bytes;
    r->points = calloc((size_t)(nops * p.nsizes) + 1, sizeof *r->points);
    if (!fail && !r->points) {
        snprintf(why, whyn, "out of memory");
        fail = -1;
    }
    if (!fail && (size_t)need != need) {
        snprintf(why, whyn, "sizes: %llu bytes do not fit this machine's address space",
                 (unsigned long long)need);
        fail = -1;
    }
    if (!fail)
        fail = cps_world_buffers(&w, (size_t)need, why, whyn);
    /* from here a failure is the node's answer (a collective that never finishes is the worst
     * one): what was measured before it is kept and judged */
    int measuring = !fail;

    struct cps_progress pr = {o, 0, 0, r->world_rank != 0};
    for (int op = 0; op < CPS_NOPS; op++)
        if (o->ops & (1u << op)) {
            pr.total++;
            for (int s = 0; s < p.nsizes; s++)
                pr.total += cps_op_count(op, p.sizes[s], n) > 0;
        }
    if (o->p2p && !fail)
        pr.total += cps_p2p_steps(&w, r) + cps_net_steps(&w, r);
    if (!fail)
        fail = measure_ops(&w, o, &p, &pr, r, why, whyn);
    if (!fail && o->p2p)
        fail = cps_p2p_matrix(&w, p.p2p_bytes, p.warmup, p.iters, &pr, r, why, whyn);
    if (!fail && o->p2p)
        fail = cps_net_pairs(&w, p.p2p_bytes, p.warmup, p.iters, &pr, r, why, whyn);
    /* NCCL wrote its transport lines by now (p2p connections open at their first use); under a
     * launcher the ranks' findings are merged over the communicator, so before it closes */
    if (!fail && r->multi_process) {
        if (r->log_path[0])
            (void)cps_nccl_log_parse_file(r->log_path, &r->log); /* unreadable: left empty */
        fail = cps_world_merge_log(&w, &r->log, why, whyn);
    }
    cps_world_close(&w, fail != 0);
    if ((!fail || measuring) && !r->multi_process && r->log_path[0])
        (void)cps_nccl_log_parse_file(r->log_path, &r->log);
    if (fail) {
        if (r->multi_process) {
            /* every rank prints its own reason: say whose */
            char own[512];
            snprintf(own, sizeof own, "rank %d of %d: %s", id.rank, id.world, why);
            snprintf(why, whyn, "%s", own);
        }
        if (measuring) {
            snprintf(r->stopped, sizeof r->stopped, "%s", why);
            return CPS_SWEEP_PARTIAL;
        }
        cps_run_free(r);
        return CPS_SWEEP_CANNOT_RUN;
    }
    return CPS_SWEEP_OK;
}

void cps_run_free(cps_run *r)
{
    if (!r)
        return;
    free(r->gpus);
    free(r->points);
    free(r->net_pairs);
    free(r->p2p_job);
    cps_nccl_log_free(&r->log);
    r->gpus = NULL;
    r->points = NULL;
    r->npoints = 0;
    r->net_pairs = NULL;
    r->n_net_pairs = 0;
    r->p2p_job = NULL;
    r->p2p_widest = 0;
}
