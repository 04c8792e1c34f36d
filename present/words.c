/* present/words.c: the names and numbers every output writes one way (present.h). */
#include "present/present.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

const char *cpr_op_label(unsigned op, int pairs)
{
    if (op == CP_OP_SEND && pairs)
        return "Send/Recv";
    return cp_op_name(op);
}

const char *cpr_signal_name(int sig, char *buf)
{
    const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
    if (abbrev)
        snprintf(buf, 16, "SIG%.12s", abbrev);
    else
        snprintf(buf, 16, "signal %d", sig);
    return buf;
}

void cpr_fmt_size(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    unsigned u = 0;
    uint64_t v = bytes;
    while (u + 1 < sizeof units / sizeof units[0] && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    /* Never rounded ("97.5 MiB"): two messages a few bytes apart would read alike, and
     * neither as nccl-tests prints it. */
    snprintf(buf, len, "%" PRIu64 " %s", v, units[u]);
}

void cpr_fmt_ranks(char *buf, size_t len, const int32_t *ranks, size_t n)
{
    if (!len)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        char part[40];
        if (j == i)
            snprintf(part, sizeof part, "%s%" PRId32, i ? "," : "", ranks[i]);
        else if (j == i + 1)
            snprintf(part, sizeof part, "%s%" PRId32 ",%" PRId32, i ? "," : "", ranks[i],
                     ranks[j]);
        else
            snprintf(part, sizeof part, "%s%" PRId32 "-%" PRId32, i ? "," : "", ranks[i],
                     ranks[j]);
        size_t plen = strlen(part);
        /* Keep room for ",..." so a cut list says it is cut. */
        if (used + plen + (j + 1 < n ? 4 : 0) >= len) {
            if (used + 4 < len)
                memcpy(buf + used, ",...", 5);
            else if (len > 3)
                memcpy(buf + len - 4, "...", 4);
            return;
        }
        memcpy(buf + used, part, plen + 1);
        used += plen;
        i = j + 1;
    }
}

const char *cpr_fmt_ns_us(char buf[32], int64_t ns)
{
    *cpr_put_ns_us(buf, ns) = '\0';
    return buf;
}

void cpr_fmt_comm(char buf[17], uint64_t comm_id)
{
    /* "%016" PRIx64 by hand: the exporters name a comm per call */
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, comm_id >>= 4)
        buf[i] = hex[comm_id & 15];
    buf[16] = '\0';
}

void cpr_fmt_site(char *buf, size_t len, const char *site)
{
    if (!len)
        return;
    if (!site) {
        buf[0] = '\0';
        return;
    }
    if (cp_text_escape(buf, len, site, strlen(site)) < len)
        return;
    if (len < 4) {
        buf[0] = '\0';
        return;
    }
    /* Innermost frames come first: keep the head, cut at a whole character or escape. */
    cp_text_escape(buf, len - 3, site, strlen(site));
    strcat(buf, "...");
}
