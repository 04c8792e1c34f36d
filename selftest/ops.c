/* ops: the swept operations' names, the --ops list, nccl-tests' busbw factors, status names,
 * sizes as text. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "selftest/selftest.h"

static const char *const names[CPS_NOPS] = {"allreduce", "allgather", "reducescatter",
                                             "broadcast", "reduce",    "alltoall",
                                             "sendrecv"};
static const char *const titles[CPS_NOPS] = {"AllReduce", "AllGather", "ReduceScatter",
                                             "Broadcast", "Reduce",    "AlltoAll",
                                             "SendRecv"};

const char *cps_op_name(int op)
{
    return op >= 0 && op < CPS_NOPS ? names[op] : "?";
}

const char *cps_op_title(int op)
{
    return op >= 0 && op < CPS_NOPS ? titles[op] : "?";
}

int cps_ops_parse(const char *list, unsigned *mask, char *err, size_t errn)
{
    *mask = 0;
    if (!list || !*list) {
        snprintf(err, errn, "--ops: empty list (ops: all, %s", names[0]);
        for (int i = 1; i < CPS_NOPS; i++) {
            size_t used = strlen(err);
            snprintf(err + used, errn > used ? errn - used : 0, ", %s", names[i]);
        }
        size_t used = strlen(err);
        snprintf(err + used, errn > used ? errn - used : 0, ")");
        return -1;
    }
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        if (len == 3 && strncasecmp(p, "all", 3) == 0) {
            *mask = (1u << CPS_NOPS) - 1;
            found = CPS_NOPS;
        }
        for (int i = 0; i < CPS_NOPS && found < 0; i++)
            if (strlen(names[i]) == len && strncasecmp(p, names[i], len) == 0)
                found = i;
        /* nccl-tests' binary names and the short forms people type */
        if (found < 0 && len == 8 && strncasecmp(p, "alltoall", 8) == 0)
            found = CPS_ALLTOALL;
        if (found < 0 && len == 5 && strncasecmp(p, "bcast", 5) == 0)
            found = CPS_BROADCAST;
        if (found < 0 && len == 4 && strncasecmp(p, "send", 4) == 0)
            found = CPS_SENDRECV;
        if (found < 0 && len == 4 && strncasecmp(p, "recv", 4) == 0)
            found = CPS_SENDRECV;
        if (found < 0) {
            snprintf(err, errn, "--ops: unknown operation '%.*s' (all, allreduce, allgather, "
                     "reducescatter, broadcast, reduce, alltoall, sendrecv)", (int)(len > 40 ? 40 : len), p);
            return -1;
        }
        if (found < CPS_NOPS)
            *mask |= 1u << found;
        p += len;
        if (*p == ',')
            p++;
        else if (*p)
            break;
        if (comma && !*p) {
            snprintf(err, errn, "--ops: empty entry at the end of '%s'", list);
            return -1;
        }
    }
    return 0;
}

double cps_busbw_factor(int op, int n)
{
    if (n <= 1)
        return op == CPS_BROADCAST || op == CPS_REDUCE || op == CPS_SENDRECV ? 1.0 : 0.0;
    switch (op) {
    case CPS_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case CPS_ALLGATHER: case CPS_REDUCESCATTER: case CPS_ALLTOALL:
        return (double)(n - 1) / n;
    default:
        return 1.0;
    }
}

const char *cps_status_name(int status)
{
    return status == CPS_PASS ? "PASS" : status == CPS_WARN ? "WARN" : "FAIL";
}

void cps_bytes_text(uint64_t bytes, char *out, size_t outn)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, outn, "%llu %s", (unsigned long long)bytes, unit[u]);
}
