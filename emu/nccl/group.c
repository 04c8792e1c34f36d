/* group: ncclGroupStart/End and the implicit group around every ungrouped call
 * (src/group.cc).
 *
 * Calls made inside a group are validated at once and queued on this thread; the outermost
 * GroupEnd then runs the queued communicator initializations concurrently (each waits for
 * its peers, so ranks driven by one thread must not be initialized one after the other) and
 * issues each communicator's operations as one unit (so a grouped ring of sends and receives
 * cannot deadlock). A group of non-blocking communicators does that on a thread of its own
 * and returns ncclInProgress; ncclCommGetAsyncError says when it is done.
 */
#include <stdlib.h>
#include <string.h>

#include "emu/nccl/nccl_emu.h"

typedef struct group_job {
    cpn_op *ops;                 /* in call order */
    cpn_init_job *inits;
    ncclComm_t *comms;           /* each communicator once, in order of first use */
    int ncomms, capcomms;
} group_job;

typedef struct group_state {
    int depth;
    ncclResult_t error;
    int blocking;                /* -1 until a communicator says */
    group_job job;
    cpn_op *ops_tail;
    cpn_init_job *inits_tail;
} group_state;

static _Thread_local group_state G = {0, ncclSuccess, -1, {NULL, NULL, NULL, 0, 0}, NULL, NULL};

int cpn_group_depth(void)
{
    return G.depth;
}

ncclResult_t cpn_group_start(void)
{
    G.depth++;
    return ncclSuccess;
}

void cpn_group_error(ncclResult_t res)
{
    /* ncclGroupErrCheck: the first error inside a group is what its GroupEnd returns */
    if (G.depth > 0 && res != ncclSuccess && res != ncclInProgress && G.error == ncclSuccess)
        G.error = res;
}

static ncclResult_t note_comm(group_job *j, ncclComm_t comm)
{
    for (int i = 0; i < j->ncomms; i++)
        if (j->comms[i] == comm)
            return ncclSuccess;
    if (j->ncomms == j->capcomms) {
        int cap = j->capcomms ? j->capcomms * 2 : 8;
        ncclComm_t *p = realloc(j->comms, (size_t)cap * sizeof *p);
        if (!p)
            return ncclSystemError;
        j->comms = p;
        j->capcomms = cap;
    }
    j->comms[j->ncomms++] = comm;
    return ncclSuccess;
}

ncclResult_t cpn_group_note_comm(ncclComm_t comm)
{
    if (G.blocking == -1) {
        G.blocking = comm->blocking;
    } else if (G.blocking != comm->blocking) {
        cpn_warn("Blocking and nonblocking communicators are not allowed in the same group.");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

ncclResult_t cpn_group_add_op(const cpn_op *op)
{
    ncclResult_t res = cpn_group_note_comm(op->comm);
    if (res != ncclSuccess)
        return res;
    cpn_op *c = malloc(sizeof *c);
    if (!c || note_comm(&G.job, op->comm) != ncclSuccess) {
        free(c);
        return ncclSystemError;
    }
    *c = *op;
    c->next = NULL;
    if (G.ops_tail)
        G.ops_tail->next = c;
    else
        G.job.ops = c;
    G.ops_tail = c;
    return ncclSuccess;
}

ncclResult_t cpn_group_add_init(cpn_init_job *job)
{
    ncclResult_t res = cpn_group_note_comm(job->owner);
    if (res != ncclSuccess)
        return res;
    job->next = NULL;
    if (G.inits_tail)
        G.inits_tail->next = job;
    else
        G.job.inits = job;
    G.inits_tail = job;
    return note_comm(&G.job, job->owner);
}

ncclResult_t cpn_async_launch(cpn_init_job *job)
{
    if (G.depth == 0) {
        /* outside a group the job runs now, as ncclAsyncLaunch does */
        ncclResult_t r = cpn_init_run(job);
        free(job);
        return r;
    }
    ncclResult_t r = cpn_group_add_init(job);
    if (r != ncclSuccess)
        free(job);
    return r;
}

static void free_job_lists(group_job *j)
{
    for (cpn_op *o = j->ops, *n; o; o = n) {
        n = o->next;
        cpn_prof_op_free(o->prof);   /* the group's list owns the tasks; issue copied them */
        free(o);
    }
    for (cpn_init_job *i = j->inits, *n; i; i = n) {
        n = i->next;
        free(i);
    }
    free(j->comms);
    memset(j, 0, sizeof *j);
}

static void reset_state(void)
{
    G.error = ncclSuccess;
    G.blocking = -1;
    memset(&G.job, 0, sizeof G.job);
    G.ops_tail = NULL;
    G.inits_tail = NULL;
}

static void *init_thread(void *arg)
{
    cpn_init_job *job = arg;
    job->result = cpn_init_run(job);
    return NULL;
}

/* Initializations wait for their peers: several of them (ncclCommInitAll, a group of
 * InitRank calls) must wait side by side. */
static ncclResult_t run_inits(cpn_init_job *inits)
{
    int n = 0;
    for (cpn_init_job *j = inits; j; j = j->next)
        n++;
    if (n == 0)
        return ncclSuccess;
    if (n == 1) {
        inits->result = cpn_init_run(inits);
        return inits->result;
    }
    pthread_t *t = calloc((size_t)n, sizeof *t);
    int *started = calloc((size_t)n, sizeof *started);
    int i = 0;
    for (cpn_init_job *j = inits; j; j = j->next, i++) {
        if (t && started && pthread_create(&t[i], NULL, init_thread, j) == 0)
            started[i] = 1;
        else
            j->result = cpn_init_run(j);   /* no thread: this one alone may then wait */
    }
    i = 0;
    ncclResult_t res = ncclSuccess;
    for (cpn_init_job *j = inits; j; j = j->next, i++) {
        if (started && started[i])
            pthread_join(t[i], NULL);
        if (res == ncclSuccess && j->result != ncclSuccess)
            res = j->result;
    }
    free(t);
    free(started);
    return res;
}

static ncclResult_t run_job(group_job *j)
{
    ncclResult_t res = run_inits(j->inits);
    for (int c = 0; c < j->ncomms; c++) {
        /* this communicator's ops, unlinked from the others' in call order */
        cpn_op *head = NULL, **tail = &head;
        for (cpn_op *o = j->ops; o; o = o->next)
            if (o->comm == j->comms[c]) {
                cpn_op *copy = malloc(sizeof *copy);
                if (!copy) {
                    res = ncclSystemError;
                    break;
                }
                *copy = *o;
                copy->next = NULL;
                *tail = copy;
                tail = &copy->next;
            }
        if (head) {
            ncclResult_t r = cpn_issue_comm_ops(j->comms[c], head);
            if (res == ncclSuccess)
                res = r;
        }
        for (cpn_op *o = head, *n; o; o = n) {
            n = o->next;
            free(o);
        }
    }
    return res;
}

static void *nonblocking_main(void *arg)
{
    group_job *j = arg;
    ncclResult_t res = run_job(j);
    /* a child (split, shrink) reports its own init; the group's comms the group's result */
    for (cpn_init_job *i = j->inits; i; i = i->next)
        if (i->comm && i->comm != i->owner)
            atomic_store(&i->comm->async_state, i->result);
    for (int c = 0; c < j->ncomms; c++) {
        ncclComm_t comm = j->comms[c];
        ncclResult_t mine = res;
        for (cpn_init_job *i = j->inits; i; i = i->next)
            if (i->owner == comm)
                mine = i->result;
        atomic_store(&comm->async_state, mine);
        if (atomic_fetch_sub(&comm->group_jobs, 1) == 1)
            cpn_futex_wake(&comm->group_jobs, 0);
    }
    free_job_lists(j);
    free(j);
    return NULL;
}

static double simulate(group_job *j, double *us)
{
    double total = 0;
    int any = 0;
    for (cpn_op *o = j->ops; o; o = o->next) {
        if (!o->comm->core || o->kind == CPEMU_OP_SEND || o->kind == CPEMU_OP_RECV)
            continue;
        total += cpn_op_model_ns(o->comm->core, o) / 1e3;
        any = 1;
    }
    *us = total;
    return any;
}

static ncclResult_t group_end(ncclSimInfo_t *sim);

/* ncclGroupEndInternal: the profiler's group API state first, the GroupApi event's stop at
 * every exit (group.cc). */
ncclResult_t cpn_group_end(ncclSimInfo_t *sim)
{
    if (CPN_PROF_ON() && G.depth > 0)
        cpn_prof_group_end_enter();
    ncclResult_t r = group_end(sim);
    if (CPN_PROF_ON())
        cpn_prof_group_end_exit();
    return r;
}

static ncclResult_t group_end(ncclSimInfo_t *sim)
{
    if (G.depth == 0) {
        cpn_warn("ncclGroupEnd: not in a group call.");
        return ncclInvalidUsage;
    }
    if (--G.depth > 0)
        return ncclSuccess;
    ncclResult_t res = G.error;
    group_job job = G.job;
    int blocking = G.blocking == -1 ? 1 : G.blocking;
    reset_state();
    if (res == ncclSuccess && sim) {
        ncclSimInfo_t in = NCCL_SIM_INFO_INITIALIZER;
        size_t size;
        memcpy(&size, &sim->size, sizeof size);
        if (size > sizeof in)
            size = sizeof in;
        in.magic = 0;
        memcpy(&in, sim, size);
        if (in.magic != CP_NCCL_SIM_INFO_MAGIC) {
            cpn_warn("ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
            res = ncclInvalidArgument;
        } else {
            /* simulated, not launched: the model's time of the group, in microseconds */
            double us;
            res = run_inits(job.inits);
            if (simulate(&job, &us))
                in.estimatedTime = (float)us;
            memcpy(sim, &in, size);
        }
        free_job_lists(&job);
        return res;
    }
    if (res != ncclSuccess || (!job.ops && !job.inits)) {
        for (cpn_init_job *i = job.inits; i && res != ncclSuccess; i = i->next)
            if (i->comm) {
                atomic_store(&i->comm->init_state, res);
                atomic_store(&i->comm->async_state, res);
            }
        free_job_lists(&job);
        return res;
    }
    if (blocking) {
        res = run_job(&job);
        free_job_lists(&job);
        return res;
    }
    group_job *bg = malloc(sizeof *bg);
    if (!bg) {
        free_job_lists(&job);
        return ncclSystemError;
    }
    *bg = job;
    for (int c = 0; c < bg->ncomms; c++) {
        atomic_store(&bg->comms[c]->async_state, ncclInProgress);
        atomic_fetch_add(&bg->comms[c]->group_jobs, 1);
    }
    for (cpn_init_job *i = bg->inits; i; i = i->next)
        if (i->comm)
            atomic_store(&i->comm->async_state, ncclInProgress);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, nonblocking_main, bg) != 0)
        nonblocking_main(bg);   /* no thread to spare: do it now, the result is the same */
    pthread_attr_destroy(&attr);
    return ncclInProgress;
}
