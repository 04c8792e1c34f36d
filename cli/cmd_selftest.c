/* collprof selftest: is this node healthy? The sweep, the topology and the verdicts are
 * selftest/'s; this verb reads the options, keeps NCCL's log in a temporary directory, and
 * turns the verdict into the exit status a cluster health check reads. */
#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "launcher/launcher.h"
#include "selftest/selftest.h"

extern char **environ;

static const char selftest_notes[] =
    "Runs every collective over a size sweep on all local GPUs (one process,\n"
    "ncclCommInitAll), or one process per GPU when started by torchrun, mpirun or\n"
    "srun (the unique id goes over MASTER_ADDR:MASTER_PORT, or COLLPROF_RENDEZVOUS_DIR).\n"
    "Each op's busbw at its largest size is judged against what the links should give\n"
    "(docs/SELFTEST.md gives the figures); NCCL's own INFO log says which transport\n"
    "each connection took; a pairwise send/recv matrix finds the slow link.\n"
    "\n"
    "SIZE accepts B, K, M, G suffixes (powers of 1024): --sizes 8:1G (the default),\n"
    "--sizes 1M:256M. --quick: sizes 16x apart (the largest always), 2 warm-up and 5\n"
    "timed iterations.\n"
    "\n"
    "A collective past --timeout stops the sweep: the sizes measured before it are\n"
    "reported, with a FAIL that names it (exit 1).\n"
    "\n"
    "exit codes: 0 PASS or WARN; 1 FAIL (or a sweep that stopped part-way); 2 bad\n"
    "options; 3 could not run (no driver, no GPU, no NCCL, NCCL's init failed)";

/* "64M" -> bytes; -1 when not a size. */
static long long parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'b': case 'B': break;
    default: break;
    }
    if (*end == 'i' && (end[1] == 'B' || end[1] == 'b'))
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    v *= mult;
    if (*end || v > 64.0 * 1024 * 1024 * 1024 || v != (double)(long long)v)
        return -1;
    return (long long)v;
}

static int parse_sizes(const struct cli_command *c, const char *arg, uint64_t *lo, uint64_t *hi)
{
    char buf[64];
    if (strlen(arg) >= sizeof buf)
        return cli_usage_error(c, "--sizes wants A:B (e.g. 8:1G), got a %zu-character value",
                               strlen(arg));
    snprintf(buf, sizeof buf, "%s", arg);
    char *colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
    long long a = parse_size(buf), b = colon ? parse_size(colon + 1) : a;
    if (a < 1 || b < 1)
        return cli_usage_error(c, "--sizes wants A:B in bytes from 1 to 64G (e.g. 8:1G), got '%s'",
                               arg);
    if (a > b)
        return cli_usage_error(c, "--sizes '%s': the first size is larger than the second", arg);
    *lo = (uint64_t)a;
    *hi = (uint64_t)b;
    return CLI_GO_ON;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void say_nothing(void *ctx, const char *line)
{
    (void)ctx;
    (void)line;
}

/* Under torchrun or mpirun every rank shares the terminal: only rank 0 draws the progress
 * line (a bad launcher variable is the sweep's to report, with its message). */
static int draws_progress(void)
{
    cp_launcher id;
    return cp_launcher_read(&id, CPS_RENDEZVOUS_VAR, say_nothing, NULL) != 0 || id.rank == 0;
}

static void progress_adapter(void *arg, const char *what, double frac)
{
    cli_progress_update(arg, what, frac);
}

static int my_host_index(const cps_run *r, int rank)
{
    char host[CPS_HOST_BYTES] = "";
    if (r->world_rank >= 0 && r->world_rank < r->nranks)
        snprintf(host, sizeof host, "%s", r->gpus[r->world_rank].host);
    return strcmp(r->gpus[rank].host, host) == 0;
}

static int judge_and_print(const cps_run *run, const char *root, int json, int all_sizes)
{
    cps_topology topo;
    if (cps_topo_read_sysfs(root, &topo))
        return cli_error("selftest", CP_EXIT_CANNOT_RUN, "out of memory reading the topology");
    cps_report rep;
    memset(&rep, 0, sizeof rep);
    rep.topo = &topo;
    rep.run = (cps_run *)run;
    char why[256] = "";
    int nvml = cps_topo_add_nvml(&topo, NULL, why, sizeof why) == 0;
    snprintf(rep.sources, sizeof rep.sources, "sysfs under %s, %s, the CUDA driver", root,
             nvml ? "NVML" : "no NVML");
    /* This host's GPUs, in rank order, into the topology. */
    int n = run->nranks;
    char (*names)[CPS_NAME_BYTES] = calloc((size_t)n + 1, sizeof *names);
    char (*pcis)[CPS_PCI_BYTES] = calloc((size_t)n + 1, sizeof *pcis);
    int *ccM = calloc((size_t)n + 1, sizeof *ccM), *ccm = calloc((size_t)n + 1, sizeof *ccm);
    int *local = calloc((size_t)n + 1, sizeof *local), *lmap = calloc((size_t)n + 1, sizeof *lmap);
    rep.map = calloc((size_t)n + 1, sizeof *rep.map);
    int rc = CP_EXIT_CANNOT_RUN;
    if (!names || !pcis || !ccM || !ccm || !local || !lmap || !rep.map)
        goto out;
    int nl = 0;
    for (int i = 0; i < n; i++) {
        rep.map[i] = -1;
        if (!my_host_index(run, i))
            continue;
        snprintf(names[nl], sizeof names[nl], "%s", run->gpus[i].name);
        snprintf(pcis[nl], sizeof pcis[nl], "%s", run->gpus[i].pci);
        ccM[nl] = run->gpus[i].cc_major;
        ccm[nl] = run->gpus[i].cc_minor;
        local[nl++] = i;
    }
    if (cps_topo_add_cuda(&topo, (const char (*)[CPS_NAME_BYTES])names,
                          (const char (*)[CPS_PCI_BYTES])pcis, ccM, ccm, nl, lmap))
        goto out;
    for (int k = 0; k < nl; k++)
        rep.map[local[k]] = lmap[k];
    if (cps_judge(&rep, environ))
        goto out;
    rc = rep.verdict == CPS_FAIL ? CP_EXIT_BAD_NEWS : CP_EXIT_OK;
    if (run->world_rank == 0) {
        if (json) {
            json_object *o = cps_report_json(&rep);
            if (!o) {
                rc = CP_EXIT_CANNOT_RUN;
                goto out;
            }
            const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
            fputs(s, stdout);
            fputc('\n', stdout);
            json_object_put(o);
        } else {
            cps_summary_print(stdout, &rep, all_sizes);
        }
    }
out:
    if (rc == CP_EXIT_CANNOT_RUN)
        cli_error("selftest", rc, "out of memory judging the run");
    cps_report_free_checks(&rep);
    free(names);
    free(pcis);
    free(ccM);
    free(ccm);
    free(local);
    free(lmap);
    free(rep.map);
    cps_topo_free(&topo);
    return rc;
}

int cmd_selftest(int argc, char **argv)
{
    int json = 0, quick = 0, all_sizes = 0, no_p2p = 0;
    long iters = 0, warmup = 0;
    double timeout = 60;
    const char *sizes = NULL, *ops = NULL, *root = "/";
    static const char *const usage[] = { "selftest [--json] [--quick] [--sizes A:B] [--ops LIST]",
                                         NULL };
    const struct cli_option options[] = {
        CLI_BOOL(0, "json", &json, "one JSON object (keys in docs/SELFTEST.md) instead of text"),
        CLI_BOOL(0, "quick", &quick, "fewer sizes and iterations: a verdict in seconds"),
        CLI_STRING(0, "sizes", &sizes, "A:B", "sweep message sizes from A to B bytes\n"
                                              "(powers of two; default 8:1G)"),
        CLI_STRING(0, "ops", &ops, "LIST", "only these collectives (comma-separated: allreduce,\n"
                   "allgather, reducescatter, broadcast, reduce, alltoall,\nsendrecv; default all)"),
        CLI_BOOL(0, "all-sizes", &all_sizes, "text: a table per op with every size"),
        CLI_BOOL(0, "no-p2p", &no_p2p, "skip the pairwise send/recv matrix"),
        CLI_INT(0, "iters", &iters, "N", 1, 100000, "timed iterations per size (default 20,\n"
                "--quick 5)"),
        CLI_INT(0, "warmup", &warmup, "N", 1, 100000, "untimed iterations first (default 5,\n"
                "--quick 2)"),
        CLI_DOUBLE(0, "timeout", &timeout, "S", 1, 86400, "NCCL's init or a collective not\n"
                   "done after S seconds ends the run\n(exit 3; default 60)"),
        CLI_STRING(0, "root", &root, "DIR", "read sysfs under DIR instead of / (a container\n"
                   "that mounts the host's /sys elsewhere)"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "selftest",
        .usage = usage,
        .about = "Checks this node: GPUs, links and NICs, then every collective's bandwidth\n"
                 "against what the links should give, and the transport NCCL picked.",
        .options = options,
        .max_args = 0,
        .notes = selftest_notes,
    };
    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;
    cps_options o;
    memset(&o, 0, sizeof o);
    o.min_bytes = 8;
    o.max_bytes = 1ull << 30;
    if (sizes && (rc = parse_sizes(&c, sizes, &o.min_bytes, &o.max_bytes)) != CLI_GO_ON)
        return rc;
    o.ops = (1u << CPS_NOPS) - 1;
    char err[256];
    if (ops && cps_ops_parse(ops, &o.ops, err, sizeof err))
        return cli_usage_error(&c, "%s", err);
    struct stat st;
    if (!*root || stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_usage_error(&c, "--root '%s': not a directory", root);
    o.quick = quick;
    o.iters = (int)iters;
    o.warmup = (int)warmup;
    o.p2p = !no_p2p;
    o.timeout_s = timeout;

    const char *tmp = getenv("TMPDIR");
    char logdir[512];
    snprintf(logdir, sizeof logdir, "%s/collprof-selftest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(logdir))
        return cli_error("selftest", CP_EXIT_CANNOT_RUN, "cannot create a directory for NCCL's "
                         "log in %s: %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
    o.log_dir = logdir;
    cli_progress *prog = draws_progress() ? cli_progress_start("selftest", "starting") : NULL;
    o.progress = progress_adapter;
    o.progress_arg = prog;
    cps_run run;
    memset(&run, 0, sizeof run);
    char why[512] = "";
    int src = cps_sweep(&o, &run, why, sizeof why);
    cli_progress_stop(prog);
    if (src == CPS_SWEEP_PARTIAL) {
        /* what stopped it goes to stderr on every rank; rank 0's report holds what was
         * measured before it, and the FAIL that the sweep stopped */
        cli_error("selftest", CP_EXIT_BAD_NEWS, "%s (the sizes measured before it are %s)", why,
                  run.world_rank == 0 ? "in the report" : "in rank 0's report");
        rc = judge_and_print(&run, root, json, all_sizes);
    } else if (src != CPS_SWEEP_OK) {
        rc = cli_error("selftest", src == CPS_SWEEP_USAGE ? CP_EXIT_USAGE : CP_EXIT_CANNOT_RUN,
                       "%s", why[0] ? why : "the sweep could not run");
    } else {
        rc = judge_and_print(&run, root, json, all_sizes);
    }
    cps_run_free(&run);
    nftw(logdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}
