/* tui/snapshot: the live model as text (80 columns) or JSON, for `collprof top --once`. Pure
 * functions of the model: what the screen shows without a terminal. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/text.h"
#include "tui/live.h"
#include "tui/top_internal.h"

static const char *state_name(const cpt_live *l, const cpt_rank *r)
{
    if (r->state == CPT_EXITED)
        return "exited";
    return cpt_rank_hung(l, r) ? "hung" : "running";
}

/* "3/1", "?/?" for an identity not known yet. */
static void fmt_rank(char *out, size_t len, const cpt_rank *r)
{
    char a[12] = "?", b[12] = "?";
    if (r->rank >= 0)
        snprintf(a, sizeof a, "%d", r->rank);
    if (r->local_rank >= 0)
        snprintf(b, sizeof b, "%d", r->local_rank);
    snprintf(out, len, "%s/%s", a, b);
}

/* "AllReduce#41 12.3s", with "!" once the watchdog called it a hang; "-" for none. */
static void fmt_inflight(char *out, size_t len, const cpt_rank *r)
{
    if (r->state == CPT_EXITED) {
        /* died: no exit path ran (SIGKILL, a crash): what it had in flight is lost */
        snprintf(out, len, r->died ? "(died)" : "(exited)");
        return;
    }
    if (r->inflight_op == CP_OP_NONE) {
        snprintf(out, len, "-");
        return;
    }
    char age[16];
    double a = r->inflight_age_s;
    if (a >= 100)
        snprintf(age, sizeof age, "%.0fs", a);
    else if (a >= 1)
        snprintf(age, sizeof age, "%.1fs", a);
    else
        snprintf(age, sizeof age, "%.0fms", a * 1e3);
    /* the age must survive the 18 columns: the op name gives way first */
    char seq[24];
    snprintf(seq, sizeof seq, "#%" PRIu64, r->inflight_seq);
    int room = 18 - (int)strlen(seq) - 1 - (int)strlen(age) - (r->hang ? 1 : 0);
    if (room < 3)
        room = 3;
    snprintf(out, len, "%.*s%s %s%s", room, cp_op_name(r->inflight_op), seq, age,
             r->hang ? "!" : "");
}

/* What a block or a directory name holds is whatever its writer put there (another user's
 * process, for root): escaped (common/text.h) before it reaches a terminal or the JSON. */
static char *shown(const char *s)
{
    return cp_text_escape_dup(s, strlen(s));
}

int cpt_snapshot_text(FILE *out, const cpt_live *l)
{
    char dir[4 * sizeof l->dir];
    cp_text_escape(dir, sizeof dir, l->dir, strlen(l->dir));
    fprintf(out, "collprof top  %s  %d running, %d exited, %d hung\n", dir, l->running,
            l->exited, l->hung);
    if (l->nranks == 0) {
        fprintf(out, "no profiled process on this node (looked in %s%s)\n", dir,
                l->dir_missing ? ", which does not exist yet" : "");
    } else {
        fprintf(out, "calls/s %.1f  GB/s %.2f  ", l->calls_per_s, l->gbps);
        if (l->slowest >= 0) {
            char rk[32];
            fmt_rank(rk, sizeof rk, &l->ranks[l->slowest]);
            fprintf(out, "slowest rank %s (%+.0f us p50 vs peers)\n", rk,
                    l->ranks[l->slowest].late_us_p50);
        } else {
            fprintf(out, "slowest rank -\n");
        }
        /* the screen's column names and number formats (top_draw.c), in 80 columns */
        fprintf(out, "%-5s %-8s %7s %3s %6s %5s %5s %6s %-18s %7s\n", "RANK", "HOST", "PID",
                "GPU", "CALL/S", "GB/S", "NCCL%", "P50", "IN FLIGHT", "LATE");
        for (size_t i = 0; i < l->nranks; i++) {
            const cpt_rank *r = &l->ranks[i];
            char rk[32], gpu[12] = "-", fl[40], late[16] = "-", p50[16] = "-", host[9];
            char rate[16], gbps[16];
            fmt_rank(rk, sizeof rk, r);
            /* cut to the column here, at a whole escape or character */
            cp_text_escape(host, sizeof host, r->hostname, strlen(r->hostname));
            if (r->cuda_dev >= 0)
                snprintf(gpu, sizeof gpu, "%d", r->cuda_dev);
            fmt_inflight(fl, sizeof fl, r);
            if (r->late_judged)
                cpt_fmt_late(late, sizeof late, r->late_us_p50);
            if (r->p50_us > 0)
                cpt_fmt_us(p50, sizeof p50, r->p50_us);
            cpt_fmt_rate(rate, sizeof rate, r->calls_per_s);
            cpt_fmt_gbps(gbps, sizeof gbps, r->gbps);
            fprintf(out, "%-5.5s %-8s %7u %3.3s %6.6s %5.5s %4.0f%% %6.6s %-18.18s %7.7s\n",
                    rk, host, (unsigned)r->pid, gpu, rate, gbps, r->nccl_share * 100, p50, fl,
                    late);
        }
    }
    for (size_t i = 0; i < l->nnotes; i++) {
        char *note = shown(l->notes[i]);
        fprintf(out, "note: %s\n", note ? note : "(out of memory)");
        free(note);
    }
    return ferror(out) ? -1 : 0;
}

static void put(json_object *o, const char *k, json_object *v) { json_object_object_add(o, k, v); }

static json_object *shown_json(const char *s)
{
    char *e = shown(s);
    json_object *o = e ? json_object_new_string(e) : NULL;
    free(e);
    return o;
}

/* Keys: {"version":1, "dir", "dir_exists", "ranks":[{"rank","local_rank","world_size","host","pid","gpu",
 * "job_id","state","died","calls","calls_per_s","gbps","nccl_share","p50_us","inflight":{"op",
 * "comm","seq","bytes","age_s","typical_us"}|null,"hang","late_us_p50","late_count",
 * "late_judged","lost_records"}], "totals":{"running","exited","hung","calls_per_s","gbps",
 * "slowest_rank","dead_hidden"}, "notes":[...]}. "died": an exited rank's process ended
 * without its exit path (SIGKILL, a crash). "comm" is the 16-hex-digit id, as in the report. */
int cpt_snapshot_json(FILE *out, const cpt_live *l)
{
    json_object *root = json_object_new_object();
    if (!root)
        return -1;
    put(root, "version", json_object_new_int(1));
    put(root, "dir", shown_json(l->dir));
    put(root, "dir_exists", json_object_new_boolean(!l->dir_missing));
    json_object *ranks = json_object_new_array();
    put(root, "ranks", ranks);
    for (size_t i = 0; i < l->nranks; i++) {
        const cpt_rank *r = &l->ranks[i];
        json_object *o = json_object_new_object();
        json_object_array_add(ranks, o);
        put(o, "rank", json_object_new_int(r->rank));
        put(o, "local_rank", json_object_new_int(r->local_rank));
        put(o, "world_size", json_object_new_int(r->world_size));
        put(o, "host", shown_json(r->hostname));
        put(o, "pid", json_object_new_int64(r->pid));
        put(o, "gpu", json_object_new_int(r->cuda_dev));
        put(o, "job_id", shown_json(r->job_id));
        put(o, "state", json_object_new_string(state_name(l, r)));
        put(o, "died", json_object_new_boolean(r->state == CPT_EXITED && r->died));
        put(o, "calls", json_object_new_int64((int64_t)r->calls));
        put(o, "calls_per_s", json_object_new_double(r->calls_per_s));
        put(o, "gbps", json_object_new_double(r->gbps));
        put(o, "nccl_share", json_object_new_double(r->nccl_share));
        put(o, "p50_us", json_object_new_double(r->p50_us));
        if (r->inflight_op != CP_OP_NONE && r->state == CPT_RUNNING) {
            json_object *f = json_object_new_object();
            char comm[20];
            snprintf(comm, sizeof comm, "%016" PRIx64, r->inflight_comm);
            put(f, "op", json_object_new_string(cp_op_name(r->inflight_op)));
            put(f, "comm", json_object_new_string(comm));
            put(f, "seq", json_object_new_int64((int64_t)r->inflight_seq));
            put(f, "bytes", json_object_new_int64((int64_t)r->inflight_bytes));
            put(f, "age_s", json_object_new_double(r->inflight_age_s));
            put(f, "typical_us", json_object_new_double(r->typical_us));
            put(o, "inflight", f);
        } else {
            put(o, "inflight", NULL);
        }
        put(o, "hang", json_object_new_boolean(r->hang));
        put(o, "late_us_p50", json_object_new_double(r->late_us_p50));
        put(o, "late_count", json_object_new_int(r->late_count));
        put(o, "late_judged", json_object_new_int(r->late_judged));
        put(o, "lost_records", json_object_new_int64((int64_t)r->lost_records));
    }
    json_object *t = json_object_new_object();
    put(root, "totals", t);
    put(t, "running", json_object_new_int(l->running));
    put(t, "exited", json_object_new_int(l->exited));
    put(t, "hung", json_object_new_int(l->hung));
    put(t, "calls_per_s", json_object_new_double(l->calls_per_s));
    put(t, "gbps", json_object_new_double(l->gbps));
    put(t, "slowest_rank",
        l->slowest >= 0 ? json_object_new_int(l->ranks[l->slowest].rank) : NULL);
    put(t, "dead_hidden", json_object_new_int64((int64_t)l->dead_hidden));
    json_object *notes = json_object_new_array();
    put(root, "notes", notes);
    for (size_t i = 0; i < l->nnotes; i++)
        json_object_array_add(notes, shown_json(l->notes[i]));
    const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = s && fprintf(out, "%s\n", s) >= 0 && !ferror(out) ? 0 : -1;
    json_object_put(root);
    return rc;
}
