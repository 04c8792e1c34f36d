/* present/cause.c: why a straggler was late, in the words every output uses (present.h). */
#include "present/present.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *cause_words(int cause)
{
    switch (cause) {
    case CPA_CAUSE_HOST: return "host";
    case CPA_CAUSE_BACKLOG: return "GPU backlog";
    case CPA_CAUSE_COLLECTIVE: return "an earlier NCCL operation";
    default: return "?";
    }
}

/* "host 50%, GPU backlog 50%": every cause it has, largest first. */
static size_t shares(char *buf, size_t len, const cpa_straggler *r, int skip)
{
    uint64_t total = 0;
    for (int k = CPA_CAUSE_HOST; k < CPA_CAUSES; k++)
        total += r->by_cause[k];
    size_t n = 0;
    buf[0] = '\0';
    int done[CPA_CAUSES] = {0};
    for (int round = CPA_CAUSE_HOST; round < CPA_CAUSES && total; round++) {
        int best = -1;
        for (int k = CPA_CAUSE_HOST; k < CPA_CAUSES; k++)
            if (!done[k] && k != skip && r->by_cause[k] &&
                (best < 0 || r->by_cause[k] > r->by_cause[best]))
                best = k;
        if (best < 0)
            break;
        done[best] = 1;
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s %.0f%%", n ? ", " : "",
                                  cause_words(best),
                                  100.0 * (double)r->by_cause[best] / (double)total);
    }
    return n;
}

void cpr_cause_text(char *buf, size_t len, const cpa_straggler *r)
{
    if (!len)
        return;
    char gpu[48] = "", rest[128], comm[17];
    double host_ms = r->host_late_us_p50 / 1e3, gpu_ms = r->gpu_late_us_p50 / 1e3;
    switch (r->cause) {
    case CPA_CAUSE_HOST:
        if (!isnan(gpu_ms))
            snprintf(gpu, sizeof gpu, "; its GPU start %.3f ms", gpu_ms);
        snprintf(buf, len, "the host: it entered NCCL %.3f ms late (median%s): data loading, "
                 "Python, CPU contention", host_ms, gpu);
        break;
    case CPA_CAUSE_BACKLOG:
        if (r->kernel[0])
            snprintf(buf, len, "GPU backlog: its host entered NCCL in time (%+.3f ms against "
                     "the others, median) but its stream started the collective %.3f ms late, "
                     "behind other GPU work: %s ran %.3f ms longer than the peers' median "
                     "(%.3f against %.3f ms, median over %" PRIu64 " late collectives)",
                     host_ms, gpu_ms, r->kernel, r->kernel_longer_us_p50 / 1e3,
                     r->kernel_us_p50 / 1e3, r->kernel_peers_us_p50 / 1e3,
                     r->kernel_collectives);
        else
            snprintf(buf, len, "GPU backlog: its host entered NCCL in time (%+.3f ms against "
                     "the others, median) but its stream started the collective %.3f ms late, "
                     "behind other GPU work (longer compute before it)", host_ms, gpu_ms);
        break;
    case CPA_CAUSE_COLLECTIVE:
        cpr_fmt_comm(comm, r->held_comm_id);
        snprintf(buf, len, "an earlier NCCL operation: its host entered NCCL in time (%+.3f ms "
                 "against the others, median) but its stream was still in %s on comm %s (%d "
                 "rank%s) and started the "
                 "collective %.3f ms late: a slow link or NIC on that operation's path",
                 host_ms, r->held_op ? cp_op_name(r->held_op) : "?", comm, (int)r->held_nranks,
                 r->held_nranks == 1 ? "" : "s", gpu_ms);
        break;
    case CPA_CAUSE_MIXED:
        shares(rest, sizeof rest, r, -1);
        if (!isnan(gpu_ms))
            snprintf(gpu, sizeof gpu, ", GPU %.3f ms", gpu_ms);
        snprintf(buf, len, "a mix: %s (median lateness: host %.3f ms%s)", rest, host_ms, gpu);
        return;
    default:
        snprintf(buf, len, "not known");
        return;
    }
    /* the minority, when there is one */
    if (shares(rest, sizeof rest, r, r->cause)) {
        size_t n = strlen(buf);
        uint64_t total = 0;
        for (int k = CPA_CAUSE_HOST; k < CPA_CAUSES; k++)
            total += r->by_cause[k];
        if (n < len)
            snprintf(buf + n, len - n, "; in %.0f%% of its late collectives (the others: %s)",
                     100.0 * (double)r->by_cause[r->cause] / (double)total, rest);
    }
}
