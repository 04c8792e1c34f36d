/* collprof dump: every record of a trace, one a line (perf script).
 *
 * Each file is walked twice through the reader engine. A rank's threads write records in
 * the order they happen, so a CALL can come before the COMM record that names its
 * communicator, and a PROCESS record with the rank can come after the first calls: the
 * first walk learns the communicator table, the rank and the loss causes; the second
 * prints. Problems with the data (a cut file, corrupt chunks, lost records) are warnings
 * printed after all records, one line each, by cause: the records that could be read are
 * still worth having.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/dump_line.h"
#include "cli/options.h"
#include "common/search.h"
#include "trace/trace_reader.h"

struct comm_entry {
    uint32_t index;
    uint32_t order; /* position in the file: the later of two duplicates wins */
    uint64_t id;
};

/* What the first walk learns about one file. */
struct file_facts {
    int rank;
    struct comm_entry *comms;
    size_t ncomms, cap;
    int out_of_memory;
    uint64_t lost_by_cause[CP_LOST_CAUSE_LAST + 1]; /* [0]: a cause this reader does not know */
    int segmented;        /* a rotated trace's segment: its SEGMENT record was seen */
    uint32_t segment;
    uint64_t lost_before; /* losses counted before the segment began */
};

struct dump {
    struct dump_line line;
    struct file_facts facts;
    char **warnings; /* printed after every record, so they are not lost in the output */
    size_t nwarnings;
};

static const char dump_notes[] =
    "Each line is `rank R KIND [OP] key=value...`; --json gives the same fields under\n"
    "the same names, one object a line: rank, kind (CALL DONE COMM SITE PROCESS CLOCK\n"
    "LOST HANG END UNKNOWN), op, comm (16 hex digits), seq, count, dtype, bytes, redop,\n"
    "root (Broadcast, Reduce, Gather, Scatter) or peer (Send, Recv), host_ns (enqueue\n"
    "time), host_dur_ns (then `saturated`, JSON host_dur: that long or longer, 52\n"
    "days), and on DONE lines gpu_start_ns and gpu_end_ns (only when timed). CALL, DONE and HANG lines all carry their operation's comm and seq; comm\n"
    "is null (text: ?) when the file never names the communicator.\n"
    "\n"
    "Damaged data is not an error: every whole chunk is printed, then one\n"
    "`collprof: WARN` line on stderr per problem (cut file, corrupt chunks, records\n"
    "lost by cause). In a DIR, a file that is not a readable trace is skipped with a\n"
    "WARN line.\n"
    "\n"
    "exit codes: 0 records printed (maybe with warnings); 2 a missing path, an empty\n"
    "DIR, or a FILE (or every file of a DIR) that is not a trace this version reads";

static void add_warning(struct dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_warning(struct dump *d, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **grown = realloc(d->warnings, (d->nwarnings + 1) * sizeof *grown);
    char *copy = strdup(buf);
    if (!grown || !copy) {
        /* Out of memory: say it now rather than lose it. */
        free(copy);
        if (grown)
            d->warnings = grown;
        cli_warn("%s", buf);
        return;
    }
    d->warnings = grown;
    d->warnings[d->nwarnings++] = copy;
}

/* ---- first walk: the communicator table, the rank, the losses ---- */

static int learn_process(void *ctx, const cp_rec_process *rec)
{
    struct dump *d = ctx;
    if (rec->rank >= 0)
        d->facts.rank = rec->rank;
    return 0;
}

static int learn_comm(void *ctx, const cp_rec_comm *rec)
{
    struct file_facts *f = &((struct dump *)ctx)->facts;
    if (f->ncomms == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        struct comm_entry *grown = realloc(f->comms, cap * sizeof *grown);
        if (!grown) {
            f->out_of_memory = 1;
            return 1;
        }
        f->comms = grown;
        f->cap = cap;
    }
    f->comms[f->ncomms] = (struct comm_entry){ rec->comm_index, (uint32_t)f->ncomms, rec->comm_id };
    f->ncomms++;
    return 0;
}

static int learn_lost(void *ctx, const cp_rec_lost *rec)
{
    struct file_facts *f = &((struct dump *)ctx)->facts;
    unsigned cause = cp_lost_cause_name(rec->cause) ? rec->cause : 0; /* named, or unknown */
    uint64_t *n = &f->lost_by_cause[cause];
    *n = rec->count > UINT64_MAX - *n ? UINT64_MAX : *n + rec->count;
    return 0;
}

/* A rotated trace's segment: the chunk headers' loss total counts what came before it. */
static int learn_segment(void *ctx, const cp_rec_segment *rec)
{
    struct file_facts *f = &((struct dump *)ctx)->facts;
    if (!f->segmented) {
        f->segmented = 1;
        f->segment = rec->segment;
        f->lost_before = rec->lost_before;
    }
    return 0;
}

static int by_index_then_order(const void *a, const void *b)
{
    const struct comm_entry *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorted, and of duplicates only the last kept: lookups are binary searches, so a file
 * with a million COMM records costs n log n, not n squared. */
static void finish_comm_table(struct file_facts *f)
{
    if (f->ncomms == 0)
        return;
    qsort(f->comms, f->ncomms, sizeof *f->comms, by_index_then_order);
    size_t out = 0;
    for (size_t i = 0; i < f->ncomms; i++) {
        if (out > 0 && f->comms[out - 1].index == f->comms[i].index)
            out--;
        f->comms[out++] = f->comms[i];
    }
    f->ncomms = out;
}

static const struct comm_entry *find_comm(const struct file_facts *f, uint32_t index)
{
    size_t lo;
    CP_LOWER_BOUND(lo, f->ncomms, i, f->comms[i].index < index);
    return lo < f->ncomms && f->comms[lo].index == index ? &f->comms[lo] : NULL;
}

/* ---- second walk: one formatter per record type ---- */

static int op_is_rooted(unsigned op)
{
    return op == CP_OP_BROADCAST || op == CP_OP_REDUCE || op == CP_OP_GATHER ||
           op == CP_OP_SCATTER;
}

static struct dump_line *begin(struct dump *d, const char *kind)
{
    dump_line_begin(&d->line, d->facts.rank, kind);
    return &d->line;
}

static int end(struct dump *d)
{
    return dump_line_end(&d->line) != 0;
}

/* The comm and seq every line of an operation carries, so lines can be joined across
 * ranks with (comm, seq) alone. */
static void put_operation(struct dump *d, unsigned op, uint32_t comm_index, uint64_t seq)
{
    struct dump_line *l = &d->line;
    dump_line_word(l, "op", cp_op_name(op));
    const struct comm_entry *c = find_comm(&d->facts, comm_index);
    if (c)
        dump_line_id(l, "comm", c->id);
    else
        dump_line_unknown(l, "comm");
    if (seq == UINT64_MAX) { /* the shim's "no sequence": a call NCCL refused */
        if (l->json)
            dump_line_unknown(l, "seq");
        else
            dump_line_str(l, "seq", "none", 4);
    } else {
        dump_line_u64(l, "seq", seq);
    }
    if (!c && comm_index != UINT32_MAX)
        dump_line_u64(l, "comm_index", comm_index);
}

/* The record's one peer field means the root for rooted collectives. */
static void put_peer(struct dump *d, unsigned op, int32_t peer)
{
    if (op_is_rooted(op))
        dump_line_i64(&d->line, "root", peer);
    else if (cp_op_is_p2p(op) || peer != -1)
        dump_line_i64(&d->line, "peer", peer);
}

static void put_call_flags(struct dump_line *l, unsigned flags)
{
    static const struct { unsigned bit; const char *name; } names[] = {
        { CP_CALL_IN_GROUP, "in_group" }, { CP_CALL_CAPTURED, "captured" },
        { CP_CALL_TIMED, "timed" },       { CP_CALL_IN_PLACE, "in_place" },
        { CP_CALL_NESTED, "nested" },
    };
    dump_line_array_begin(l, "flags");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (flags & names[i].bit) {
            dump_line_array_str(l, names[i].name, strlen(names[i].name));
            flags &= ~names[i].bit;
        }
    }
    if (flags) {
        char other[16];
        int n = snprintf(other, sizeof other, "0x%x", flags);
        dump_line_array_str(l, other, (size_t)n);
    }
    dump_line_array_end(l);
}


static void put_name(struct dump_line *l, const char *key, const char *name)
{
    dump_line_str(l, key, name, strlen(name));
}

static int print_call(void *ctx, const cp_rec_call *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "CALL");
    put_operation(d, rec->op, rec->comm_index, rec->seq);
    /* Group and communicator calls move no data: no count, dtype or bytes to show. */
    if (cp_op_is_collective(rec->op) || cp_op_is_p2p(rec->op) || rec->count != 0) {
        dump_line_u64(l, "count", rec->count);
        put_name(l, "dtype", cp_dtype_name(rec->dtype));
        uint64_t bytes;
        unsigned size = cp_dtype_size(rec->dtype);
        if (size != 0 && !__builtin_mul_overflow(rec->count, (uint64_t)size, &bytes))
            dump_line_u64(l, "bytes", bytes);
    }
    if (rec->redop != CP_REDOP_NONE)
        put_name(l, "redop", cp_redop_name(rec->redop));
    put_peer(d, rec->op, rec->peer);
    dump_line_addr(l, "stream", rec->stream);
    dump_line_u64(l, "host_ns", rec->enter_ns);
    uint64_t dur = cp_call_host_ns(rec);
    dump_line_u64(l, "host_dur_ns", dur);
    if (dur == CP_HOST_NS_MAX) /* that long or longer: the most a CALL says */
        dump_line_word(l, "host_dur", "saturated");
    dump_line_i64(l, "result", rec->result);
    put_call_flags(l, rec->flags);
    if (rec->site_index != UINT32_MAX)
        dump_line_u64(l, "site", rec->site_index);
    dump_line_u64(l, "thread", rec->thread);
    dump_line_u64(l, "group_depth", rec->group_depth);
    return end(d);
}

static int print_done(void *ctx, const cp_rec_done *rec)
{
    static const char *const timing[] = { "none", "events", "cupti", "host", "plugin" };
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "DONE");
    put_operation(d, rec->op, rec->comm_index, rec->seq);
    put_peer(d, rec->op, rec->peer);
    if (rec->timing < sizeof timing / sizeof timing[0])
        put_name(l, "timing", timing[rec->timing]);
    else
        dump_line_u64(l, "timing", rec->timing);
    /* An untimed completion (no events, a captured stream) carries no GPU times at all,
     * rather than zeros that a consumer could take for times. */
    if (rec->timing != CP_TIMING_NONE && (rec->gpu_start_ns != 0 || rec->gpu_end_ns != 0)) {
        dump_line_u64(l, "gpu_start_ns", rec->gpu_start_ns);
        dump_line_u64(l, "gpu_end_ns", rec->gpu_end_ns);
        if (rec->gpu_end_ns >= rec->gpu_start_ns)
            dump_line_fixed3(l, "dur_us", (double)(rec->gpu_end_ns - rec->gpu_start_ns) / 1e3);
    }
    return end(d);
}

static int print_nccl_op(void *ctx, const cp_rec_nccl_op *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "NCCL_OP");
    put_operation(d, rec->op, rec->comm_index, rec->seq);
    put_peer(d, rec->op, rec->peer);
    if (rec->nccl_seq != UINT64_MAX)
        dump_line_u64(l, "nccl_seq", rec->nccl_seq);
    if (rec->algo != CP_ALGO_UNKNOWN)
        put_name(l, "algo", cp_algo_name(rec->algo));
    if (rec->proto != CP_PROTO_UNKNOWN)
        put_name(l, "proto", cp_proto_name(rec->proto));
    dump_line_u64(l, "channels", rec->nchannels);
    if (rec->nwarps)
        dump_line_u64(l, "warps", rec->nwarps);
    dump_line_u64(l, "kernel_channels", rec->kernel_channels);
    dump_line_u64(l, "kernel_started", rec->kernel_started);
    return end(d);
}

static int print_kname(void *ctx, const cp_rec_kname *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "KNAME");
    dump_line_u64(l, "name_index", rec->name_index);
    dump_line_str(l, "name", rec->name, strnlen(rec->name, sizeof rec->name));
    return end(d);
}

static int print_kernels(void *ctx, const cp_rec_kernels *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "KERNELS");
    put_operation(d, rec->op, rec->comm_index, rec->seq);
    put_peer(d, rec->op, rec->peer);
    unsigned n = rec->nkernels < CP_KERNELS_MAX ? rec->nkernels : CP_KERNELS_MAX;
    for (unsigned i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%u_name_index", i);
        dump_line_u64(l, key, rec->k[i].name_index);
        snprintf(key, sizeof key, "k%u_count", i);
        dump_line_u64(l, key, rec->k[i].count);
        snprintf(key, sizeof key, "k%u_us", i);
        dump_line_fixed3(l, key, (double)rec->k[i].total_ns / 1e3);
    }
    return end(d);
}

static int print_hang(void *ctx, const cp_rec_hang *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "HANG");
    put_operation(d, rec->op, rec->comm_index, rec->seq);
    put_peer(d, rec->op, rec->peer);
    dump_line_u64(l, "at_ns", rec->at_ns);
    dump_line_u64(l, "age_ns", rec->age_ns);
    dump_line_fixed3(l, "age_s", (double)rec->age_ns / 1e9);
    static const char *const gpu[] = {"unknown", "not_started", "started"};
    if (rec->gpu_state < sizeof gpu / sizeof gpu[0])
        put_name(l, "gpu", gpu[rec->gpu_state]);
    else
        dump_line_u64(l, "gpu", rec->gpu_state);
    return end(d);
}

static int print_comm(void *ctx, const cp_rec_comm *rec)
{
    static const char *const origin[] = { "?", "init_rank", "init_all", "split", "shrink" };
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "COMM");
    dump_line_id(l, "comm", rec->comm_id);
    dump_line_u64(l, "comm_index", rec->comm_index);
    dump_line_i64(l, "nranks", rec->nranks);
    dump_line_i64(l, "comm_rank", rec->rank);
    dump_line_i64(l, "cuda_dev", rec->cuda_dev);
    if (rec->origin < sizeof origin / sizeof origin[0])
        put_name(l, "origin", origin[rec->origin]);
    else
        dump_line_u64(l, "origin", rec->origin);
    if (rec->parent_id != 0)
        dump_line_id(l, "parent", rec->parent_id);
    if (rec->origin == CP_COMM_SPLIT) {
        dump_line_i64(l, "color", rec->color);
        dump_line_i64(l, "key", rec->key);
    }
    return end(d);
}

static int print_site(void *ctx, const cp_rec_site *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "SITE");
    dump_line_u64(l, "site", rec->site_index);
    dump_line_addr(l, "return_addr", rec->return_addr);
    dump_line_array_begin(l, "frames");
    size_t pos = 0, len;
    const char *s;
    while (cp_rec_next_string(&rec->h, &pos, &s, &len))
        dump_line_array_str(l, s, len);
    dump_line_array_end(l);
    return end(d);
}

static int print_process(void *ctx, const cp_rec_process *rec)
{
    static const char *const keys[] = { "hostname", "job_id", "launcher" };
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "PROCESS");
    /* The line's rank is the file's final one; show the record's own only if it differs. */
    if (rec->rank != d->facts.rank)
        dump_line_i64(l, "record_rank", rec->rank);
    dump_line_i64(l, "local_rank", rec->local_rank);
    dump_line_i64(l, "world_size", rec->world_size);
    dump_line_u64(l, "pid", rec->pid);
    dump_line_u64(l, "nccl_version", rec->nccl_version);
    dump_line_u64(l, "cuda_driver_version", rec->cuda_driver_version);
    size_t pos = 0, len;
    const char *s;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!cp_rec_next_string(&rec->h, &pos, &s, &len))
            break;
        dump_line_str(l, keys[i], s, len);
    }
    return end(d);
}

static int print_clock(void *ctx, const cp_rec_clock *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "CLOCK");
    dump_line_u64(l, "mono_ns", rec->mono_ns);
    dump_line_u64(l, "realtime_ns", rec->realtime_ns);
    return end(d);
}

/* LOST and UNTIMED: a count by cause (its name, or its number when unknown) since a time. */
static int print_by_cause(struct dump *d, const char *type, const char *cause_name,
                          uint32_t cause, uint64_t count, uint64_t at_ns)
{
    struct dump_line *l = begin(d, type);
    if (cause_name)
        put_name(l, "cause", cause_name);
    else
        dump_line_u64(l, "cause", cause);
    dump_line_u64(l, "count", count);
    dump_line_u64(l, "at_ns", at_ns);
    return end(d);
}

static int print_lost(void *ctx, const cp_rec_lost *rec)
{
    return print_by_cause(ctx, "LOST", cp_lost_cause_name(rec->cause), rec->cause, rec->count,
                          rec->at_ns);
}

static int print_untimed(void *ctx, const cp_rec_untimed *rec)
{
    return print_by_cause(ctx, "UNTIMED", cp_untimed_cause_name(rec->cause), rec->cause,
                          rec->count, rec->at_ns);
}

static int print_end(void *ctx, const cp_rec_end *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "END");
    dump_line_i64(l, "signal", rec->signal);
    dump_line_i64(l, "exit_code", rec->exit_code);
    dump_line_u64(l, "at_ns", rec->at_ns);
    return end(d);
}

static int print_segment(void *ctx, const cp_rec_segment *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "SEGMENT");
    dump_line_u64(l, "segment", rec->segment);
    dump_line_u64(l, "records_before", rec->records_before);
    dump_line_u64(l, "lost_before", rec->lost_before);
    dump_line_u64(l, "at_ns", rec->at_ns);
    return end(d);
}

static int print_unknown(void *ctx, const cp_record_header *rec)
{
    struct dump *d = ctx;
    struct dump_line *l = begin(d, "UNKNOWN");
    dump_line_u64(l, "type", rec->type);
    dump_line_u64(l, "size", rec->size);
    return end(d);
}

/* ---- files ---- */

static void warn_losses(struct dump *d, const char *path, const cp_walk_result *res)
{
    const struct file_facts *f = &d->facts;

    if (res->corrupt_chunks)
        add_warning(d, "'%s': %" PRIu64 " corrupt chunk(s) skipped, the first at byte %" PRIu64
                       ": their records are lost",
                    path, res->corrupt_chunks, res->first_bad_offset);
    if (res->missing_chunks > res->corrupt_chunks)
        add_warning(d, "'%s': %" PRIu64 " chunk(s) missing (gaps in chunk numbers): their "
                       "records are lost",
                    path, res->missing_chunks - res->corrupt_chunks);
    if (res->stop == CP_WALK_TRUNCATED)
        add_warning(d, "'%s': cut short inside a chunk (killed, or a full disk?): the records "
                       "after byte %" PRIu64 " are lost, every whole chunk before was printed",
                    path, res->valid_bytes);

    /* The chunk headers carry the writer's running total; LOST records say why. */
    uint64_t by_cause = 0;
    for (size_t i = 0; i <= CP_LOST_CAUSE_LAST; i++)
        by_cause += f->lost_by_cause[i];
    uint64_t total = res->lost_records > by_cause ? res->lost_records : by_cause;
    /* a later segment's headers count the earlier segments' losses too: said apart */
    uint64_t before = f->segmented && f->lost_before <= total - by_cause ? f->lost_before : 0;
    if (before)
        add_warning(d, "'%s': segment %u of a rotated trace (COLLPROF_MAX_MB): %" PRIu64
                       " record(s) were lost before it began, rotated ones included",
                    path, f->segment, before);
    total -= before;
    if (total == 0)
        return;
    char why[256] = "";
    size_t n = 0;
    for (unsigned cause = 1; cause <= CP_LOST_CAUSE_LAST; cause++)
        if (f->lost_by_cause[cause] && n < sizeof why)
            n += (size_t)snprintf(why + n, sizeof why - n, "%s%" PRIu64 " %s", n ? ", " : "",
                                  f->lost_by_cause[cause], cp_lost_cause_name(cause));
    if (total - (by_cause - f->lost_by_cause[0]) > 0 && n < sizeof why)
        snprintf(why + n, sizeof why - n, "%s%" PRIu64 " cause unknown", n ? ", " : "",
                 total - (by_cause - f->lost_by_cause[0]));
    add_warning(d, "'%s': %" PRIu64 " record(s) lost while tracing (%s)", path, total, why);
}

enum { FILE_OK, FILE_UNREADABLE, FILE_STOPPED, FILE_FAILED };

/* Dumps one file. FILE_UNREADABLE leaves its one-line reason in err. */
static int dump_file(struct dump *d, const char *path, char *err, size_t errlen)
{
    int status;
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, errlen);
    if (!r)
        return FILE_UNREADABLE;

    free(d->facts.comms);
    d->facts = (struct file_facts){ .rank = cp_trace_reader_header(r)->rank };

    const cp_trace_visitor learn = {
        .ctx = d, .on_process = learn_process, .on_comm = learn_comm, .on_lost = learn_lost,
        .on_segment = learn_segment,
    };
    const cp_trace_visitor print = {
        .ctx = d,
        .on_process = print_process,
        .on_comm = print_comm,
        .on_site = print_site,
        .on_call = print_call,
        .on_done = print_done,
        .on_nccl_op = print_nccl_op,
        .on_kname = print_kname,
        .on_kernels = print_kernels,
        .on_clock = print_clock,
        .on_lost = print_lost,
        .on_untimed = print_untimed,
        .on_hang = print_hang,
        .on_end = print_end,
        .on_segment = print_segment,
        .on_unknown = print_unknown,
    };
    cp_walk_result res;
    int rc = FILE_OK;
    if (cp_trace_walk(r, &learn, &res) != 0 || d->facts.out_of_memory) {
        snprintf(err, errlen, "cannot read '%s': %s", path,
                 d->facts.out_of_memory ? "out of memory" : "the reader refused it");
        rc = FILE_FAILED;
    } else {
        finish_comm_table(&d->facts);
        if (cp_trace_walk(r, &print, &res) != 0) {
            snprintf(err, errlen, "cannot read '%s': the reader refused it", path);
            rc = FILE_FAILED;
        } else if (res.stop == CP_WALK_STOPPED) {
            rc = FILE_STOPPED; /* stdout failed: nobody reads on */
        } else {
            warn_losses(d, path, &res);
            if (res.unknown_records)
                add_warning(d, "'%s': %" PRIu64 " record(s) of types this version does not "
                               "know (a newer writer?), shown as UNKNOWN",
                            path, res.unknown_records);
        }
    }
    cp_trace_reader_close(r);
    return rc;
}

static int dump_paths(struct dump *d, const char *what, char **paths, int count, int in_dir)
{
    char err[512];
    int dumped = 0;
    for (int i = 0; i < count; i++) {
        int rc = dump_file(d, paths[i], err, sizeof err);
        if (rc == FILE_STOPPED)
            return CP_EXIT_OK; /* the dispatcher decides about stdout */
        if (rc == FILE_OK) {
            dumped++;
            continue;
        }
        if (!in_dir)
            return cli_error("dump", CP_EXIT_USAGE, "%s", err);
        add_warning(d, "%s (skipped)", err);
    }
    /* Warnings go last and after stdout is flushed, so on a terminal they come after the
     * records they are about instead of scrolling away with them. */
    fflush(stdout);
    for (size_t i = 0; i < d->nwarnings; i++)
        cli_warn("%s", d->warnings[i]);
    if (dumped == 0)
        return cli_error("dump", CP_EXIT_USAGE, "no readable trace in '%s'", what);
    return CP_EXIT_OK;
}

int cmd_dump(int argc, char **argv)
{
    int json = 0;
    static const char *const usage[] = { "dump [--json] DIR|FILE", NULL };
    const struct cli_option options[] = {
        CLI_BOOL(0, "json", &json, "one JSON object a line instead of text"),
        CLI_END(),
    };
    const struct cli_command c = {
        .verb = "dump",
        .usage = usage,
        .about = "Prints every record of a trace, one a line, in file order (like `perf script`).\n"
                 "A DIR means each *.cptrace file in it, in name order.",
        .options = options,
        .args = "DIR|FILE",
        .min_args = 1,
        .max_args = 1,
        .notes = dump_notes,
    };

    int nargs;
    int rc = cli_parse(&c, argc, argv, &nargs);
    if (rc != CLI_GO_ON)
        return rc;

    const char *path = argv[1];
    struct stat st;
    if (stat(path, &st) != 0)
        return cli_error("dump", CP_EXIT_USAGE, "cannot read '%s': %s", path, strerror(errno));

    struct dump d = { .line = { .json = json, .out = stdout } };
    if (S_ISDIR(st.st_mode)) {
        char **paths = NULL;
        char err[512];
        int count = cp_trace_dir_list(path, &paths, err, sizeof err);
        if (count < 0)
            rc = cli_error("dump", CP_EXIT_USAGE, "%s", err);
        else if (count == 0)
            rc = cli_error("dump", CP_EXIT_USAGE, "no trace files (*%s) in '%s'",
                           CP_TRACE_FILE_SUFFIX, path);
        else
            rc = dump_paths(&d, path, paths, count, 1);
        if (count >= 0)
            cp_trace_dir_free(paths, count);
    } else {
        char *one[] = { argv[1] };
        rc = dump_paths(&d, path, one, 1, 0);
    }

    free(d.facts.comms);
    for (size_t i = 0; i < d.nwarnings; i++)
        free(d.warnings[i]);
    free(d.warnings);
    return rc;
}
