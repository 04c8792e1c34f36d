/* options: collprof-sim's command line. Every problem is one line on stderr and exit 2, so a
 * script driving the simulator can tell a typo from a failed job. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu/sim/sim.h"

const char *const sim_pattern_name[SIM_NPATTERNS] = { "ddp", "fsdp", "tp", "pp", "moe", "mixed" };

static const char usage_text[] =
"usage: collprof-sim --pattern ddp|fsdp|tp|pp|moe|mixed --steps N [options]\n"
"\n"
"A training-like job that calls only the NCCL and CUDA driver APIs, so the same binary runs\n"
"on collprof's emulation (LD_LIBRARY_PATH=build/emu) and on real GPUs.\n"
"\n"
"options:\n"
"  --pattern P          ddp: Broadcast of the parameters at start, then per step 5 gradient\n"
"                         buckets (1 MiB, 3 x 25 MiB, 21.5 MiB fp32) AllReduced on a comm\n"
"                         stream while the host computes the backward pass\n"
"                       fsdp: 12 units of 96 MiB (bf16); per unit AllGather forward,\n"
"                         AllGather + ReduceScatter (avg) backward\n"
"                       tp: 16 layers, one 64 MiB bf16 AllReduce per layer forward and one\n"
"                         backward\n"
"                       pp: one stage per rank, 8 microbatches of 64 MiB fp16 activations,\n"
"                         grouped ncclSend/ncclRecv between neighbouring stages (forward, then\n"
"                         backward)\n"
"                       moe: 8 layers, AlltoAll of 64 MiB bf16 tokens twice per layer forward\n"
"                         (dispatch, combine) and twice backward\n"
"                       mixed: ncclCommSplit into TP groups inside a host (color rank/T) and\n"
"                         DP groups across hosts (color rank%T); per step 8 layers of 32 MiB\n"
"                         bf16 TP AllReduce forward and backward, DP ReduceScatter of two\n"
"                         64 MiB fp32 buckets and a 16 MiB fp32 AllReduce, and a world\n"
"                         AllReduce of 2 int64. T = ranks per host (LOCAL_WORLD_SIZE), halved\n"
"                         when the whole job shares one host so that DP has two groups\n"
"  --steps N            training steps (N >= 0)\n"
"  --check              fill every input as a function of (rank, call, index), compute the\n"
"                         expected result on the host and compare each result; integers must\n"
"                         be exact; floats hold small integers so that any summation order is\n"
"                         exact, and may differ by a relative 1e-6 (fp32), 2^-10 (fp16),\n"
"                         2^-7 (bf16) where an average divides. The first difference is one\n"
"                         line (rank, step, op, index, got, expected) and exit 1\n"
"  --timeout S          watchdog, like PyTorch's NCCL watchdog: a call not done after S\n"
"                         seconds (default 300) aborts the communicators, prints one line\n"
"                         naming it (op, communicator, seq: the call's 0-based index among\n"
"                         this rank's communication calls on that communicator) and exits 6;\n"
"                         S also bounds the rendezvous\n"
"  --late RANK:MS       that rank sleeps MS ms on the host before each communication call\n"
"                         (repeatable, or RANK:MS,RANK:MS)\n"
"  --mismatch RANK:SEQ:FIELD=VALUE\n"
"                       that rank's SEQth communication call (0-based, counted per process\n"
"                         as in the count line) uses another FIELD: count=N, dtype=NAME\n"
"                         (int8 uint8 int32 uint32 int64 uint64 fp16 fp32 fp64 bf16),\n"
"                         root=R, peer=R, redop=sum|prod|max|min|avg, or op=COLLECTIVE\n"
"                         (AllReduce, AllGather, ...; op=sum|... means redop). --check skips\n"
"                         that call on every rank (repeatable)\n"
"  --launch N           run N local ranks, each this program re-executed with RANK,\n"
"                         LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and a fresh\n"
"                         COLLPROF_SIM_RENDEZVOUS directory; with COLLPROF_EMU_HOSTS=H > 1,\n"
"                         rank r is on emulated host r / ceil(N/H) (COLLPROF_EMU_HOST_ID,\n"
"                         and libcollprof-emuhost.so added to LD_PRELOAD on the emulation).\n"
"                         Forwards SIGINT and SIGTERM; once a rank fails the others get 5 s\n"
"                         to end by themselves, then SIGTERM. Exits with the worst status of\n"
"                         the ranks that ended by themselves (128+signal for a rank killed by\n"
"                         one)\n"
"  --scale F            multiply message sizes and compute times by F (default 1: sizes of\n"
"                         real jobs; tests use 0.001)\n"
"  --stats              one more stderr line per rank: steps, wall time and GPU time (the\n"
"                         emulation's model time) measured with events\n"
"  --gpu-compute        compute phases are kernels on the GPU (sim_fwd_gemm, sim_bwd_gemm:\n"
"                         PTX spinning on %globaltimer) on the first communicator's stream,\n"
"                         launched while the host goes on, instead of host sleeps\n"
"  --slow-compute RANK:F[:KERNEL]\n"
"                       that rank's compute (only KERNEL's: sim_fwd_gemm or sim_bwd_gemm)\n"
"                         takes F times longer; with --gpu-compute its GPU falls behind while\n"
"                         its host keeps pace (repeatable)\n"
"  --one-stream         every communicator enqueues on the first one's stream, as a framework\n"
"                         with one communication stream does: a collective waits for the\n"
"                         earlier ones of every communicator (default: a stream each)\n"
"  --help, --version\n"
"\n"
"identity: torchrun (RANK, LOCAL_RANK, WORLD_SIZE), OpenMPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK,\n"
"  _SIZE), PMI (PMI_RANK, PMI_LOCAL_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_LOCALID,\n"
"  SLURM_NTASKS), first found wins; none: one rank. Rank 0's ncclUniqueId reaches the others\n"
"  through COLLPROF_SIM_RENDEZVOUS=DIR (a fresh directory per job), or else over TCP at\n"
"  MASTER_ADDR:MASTER_PORT (MASTER_PORT+1 under torchrun, whose agent holds MASTER_PORT).\n"
"  The device is LOCAL_RANK % (number of devices).\n"
"\n"
"output: at the end each rank prints one line on stdout:\n"
"  rank R: T nccl calls (AllReduce=.. AllGather=.. ReduceScatter=.. Broadcast=.. Reduce=..\n"
"  AlltoAll=.. Gather=.. Scatter=.. Send=.. Recv=..)\n"
"  counting one per call of ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast,\n"
"  ncclReduce, ncclAlltoAll, ncclGather, ncclScatter, ncclSend, ncclRecv (a call inside a\n"
"  group counts once), T being their sum. Not counted: ncclGroupStart/End, set-up and teardown\n"
"  (ncclGetUniqueId, ncclCommInitRank, ncclCommSplit, ncclCommFinalize, ncclCommDestroy,\n"
"  ncclCommAbort) and queries (ncclGetVersion, ncclGetErrorString, ncclGetLastError,\n"
"  ncclCommGetAsyncError).\n"
"\n"
"exit: 0 ok; 1 --check found a difference; 2 usage; 3 could not run (no driver, no device,\n"
"  NCCL could not start, no rendezvous), with NCCL's own error text; 4 NCCL or the driver\n"
"  failed during the run; 6 watchdog timeout.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "collprof-sim: %s (see collprof-sim --help)\n", line);
    return -1;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "RANK:MS[,RANK:MS...]" */
static int parse_late(struct sim_options *o, const char *arg)
{
    char buf[512];
    if (strlen(arg) >= sizeof buf)
        return -1;
    strcpy(buf, arg);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        long rank;
        double ms;
        if (!colon || o->nlate >= SIM_MAX_RULES)
            return -1;
        *colon = '\0';
        if (parse_long(item, 0, 1 << 20, &rank) || parse_double(colon + 1, 0, 3.6e6, &ms))
            return -1;
        o->late[o->nlate].rank = (int)rank;
        o->late[o->nlate].ms = ms;
        o->nlate++;
    }
    return 0;
}

/* "RANK:SEQ:FIELD=VALUE" */
static int parse_mismatch(struct sim_options *o, const char *arg)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf || o->nmismatch >= SIM_MAX_RULES)
        return -1;
    strcpy(buf, arg);
    char *c1 = strchr(buf, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    char *eq = c2 ? strchr(c2 + 1, '=') : NULL;
    if (!eq)
        return -1;
    *c1 = *c2 = *eq = '\0';
    const char *field = c2 + 1, *value = eq + 1;
    long rank, seq;
    if (parse_long(buf, 0, 1 << 20, &rank) || parse_long(c1 + 1, 0, LONG_MAX, &seq))
        return -1;
    struct sim_mismatch *m = &o->mismatch[o->nmismatch];
    m->rank = (int)rank;
    m->seq = (uint64_t)seq;
    long v;
    int e;
    if (!strcmp(field, "count")) {
        if (parse_long(value, 0, LONG_MAX, &v))
            return -1;
        m->field = SIM_FIELD_COUNT;
        m->value = v;
    } else if (!strcmp(field, "root") || !strcmp(field, "peer")) {
        if (parse_long(value, 0, 1 << 20, &v))
            return -1;
        m->field = field[0] == 'r' ? SIM_FIELD_ROOT : SIM_FIELD_PEER;
        m->value = v;
    } else if (!strcmp(field, "dtype")) {
        if ((e = sim_dtype_parse(value)) < 0)
            return -1;
        m->field = SIM_FIELD_DTYPE;
        m->value = e;
    } else if (!strcmp(field, "redop") || !strcmp(field, "op")) {
        /* collprof's mismatch fields call the reduction "redop" and the collective "op";
         * op=sum is accepted too, since NCCL's own parameter is named op. */
        if ((e = sim_redop_parse(value)) >= 0) {
            m->field = SIM_FIELD_REDOP;
        } else if (field[0] == 'o' && (e = sim_op_parse(value)) >= 0 && e != SIM_SEND &&
                   e != SIM_RECV) {
            m->field = SIM_FIELD_OP;
        } else {
            return -1;
        }
        m->value = e;
    } else {
        return -1;
    }
    o->nmismatch++;
    return 0;
}

static void defaults(struct sim_options *o)
{
    memset(o, 0, sizeof *o);
    o->pattern = -1;
    o->steps = -1;
    o->timeout_s = 300;
    o->scale = 1;
    o->launch_argi = -1;
}

int sim_options_parse(int argc, char **argv, struct sim_options *o)
{
    defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (!strcmp(arg, "--version")) {
            printf("collprof-sim %s\n", COLLPROF_VERSION);
            return 1;
        }
        if (!strcmp(arg, "--check")) {
            o->check = 1;
            continue;
        }
        if (!strcmp(arg, "--stats")) {
            o->stats = 1;
            continue;
        }
        if (!strcmp(arg, "--gpu-compute")) {
            o->gpu_compute = 1;
            continue;
        }
        if (!strcmp(arg, "--one-stream")) {
            o->one_stream = 1;
            continue;
        }
        static const char *const valued[] = { "--pattern", "--steps", "--mismatch", "--late",
                                              "--timeout", "--launch", "--scale",
                                              "--slow-compute" };
        const char *name = NULL, *val = NULL;
        int start = i;
        for (size_t k = 0; k < sizeof valued / sizeof *valued && !name; k++) {
            size_t len = strlen(valued[k]);
            if (!strcmp(arg, valued[k])) {
                name = valued[k];
                if (i + 1 >= argc)
                    return usage_error("%s needs a value", name);
                val = argv[++i];
            } else if (!strncmp(arg, valued[k], len) && arg[len] == '=') {
                name = valued[k];
                val = arg + len + 1;
            }
        }
        if (!name)
            return usage_error("unknown option '%s'", arg);
        long l;
        double d;
        if (!strcmp(name, "--pattern")) {
            o->pattern = -1;
            for (int p = 0; p < SIM_NPATTERNS; p++)
                if (!strcmp(val, sim_pattern_name[p]))
                    o->pattern = p;
            if (o->pattern < 0)
                return usage_error("--pattern '%s' is none of ddp, fsdp, tp, pp, moe, mixed",
                                   val);
        } else if (!strcmp(name, "--steps")) {
            if (parse_long(val, 0, 100000000, &l))
                return usage_error("--steps '%s' is not a number of steps", val);
            o->steps = l;
        } else if (!strcmp(name, "--timeout")) {
            if (parse_double(val, 0.001, 1e7, &d))
                return usage_error("--timeout '%s' is not a positive number of seconds", val);
            o->timeout_s = d;
        } else if (!strcmp(name, "--launch")) {
            /* The ranks run argv without its one --launch: a second would make them launch. */
            if (o->launch)
                return usage_error("--launch is given twice");
            if (parse_long(val, 1, 1024, &l))
                return usage_error("--launch '%s' is not a number of ranks (1 to 1024)", val);
            o->launch = (int)l;
            o->launch_argi = start;
            o->launch_argc = i - start + 1;
        } else if (!strcmp(name, "--scale")) {
            if (parse_double(val, 1e-9, 1000, &d))
                return usage_error("--scale '%s' is not a factor in (0, 1000]", val);
            o->scale = d;
        } else if (!strcmp(name, "--slow-compute")) {
            char buf[128], *f, *k;
            int kernel = -1;
            if (strlen(val) >= sizeof buf || o->nslow >= SIM_MAX_RULES)
                return usage_error("--slow-compute '%s' is not RANK:FACTOR[:KERNEL]", val);
            strcpy(buf, val);
            f = strchr(buf, ':');
            k = f ? strchr(f + 1, ':') : NULL;
            if (f)
                *f++ = '\0';
            if (k) {
                *k++ = '\0';
                kernel = !strcmp(k, "sim_fwd_gemm") ? SIM_FWD
                         : !strcmp(k, "sim_bwd_gemm") ? SIM_BWD
                                                      : -2;
            }
            if (!f || kernel == -2 || parse_long(buf, 0, 1 << 20, &l) ||
                parse_double(f, 0.01, 1000, &d))
                return usage_error("--slow-compute '%s' is not RANK:FACTOR[:KERNEL] (KERNEL: "
                                   "sim_fwd_gemm or sim_bwd_gemm)", val);
            o->slow[o->nslow].rank = (int)l;
            o->slow[o->nslow].factor = d;
            o->slow[o->nslow].kernel = kernel;
            o->nslow++;
        } else if (!strcmp(name, "--late")) {
            if (parse_late(o, val))
                return usage_error("--late '%s' is not RANK:MS[,RANK:MS...]", val);
        } else if (parse_mismatch(o, val)) {
            return usage_error("--mismatch '%s' is not RANK:SEQ:FIELD=VALUE with FIELD one of "
                               "count, dtype, root, peer, redop, op", val);
        }
    }
    if (o->pattern < 0)
        return usage_error("--pattern is required (ddp, fsdp, tp, pp, moe, mixed)");
    if (o->steps < 0)
        return usage_error("--steps is required");
    return 0;
}
