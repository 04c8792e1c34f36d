/* The Perfetto protobuf export of the synthetic job (exp_job.h), read back by an independent
 * decoder: protoc (Debian's protobuf-compiler) with the fields of Perfetto's published
 * schema that the export uses (tests/exporters/perfetto.proto). Checked: every packet parses
 * with no field protoc does not know, every interned string defined before its first use,
 * a process track per rank and a thread track per
 * stream, each call and wait a begin and an end that nest on their track in file order, at
 * the trace's times with the JSON's args, flows chaining each operation's slices to one
 * terminating at its last arrival, hang instants on every rank involved, the job's facts and
 * holes, and the bandwidth counter; and a rank of thousands of calls, written in runs past
 * the writer's gathered output, whole and nested. */
#include "tests/exporters/exp_job.h"

#include <inttypes.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporters/exporters.h"

/* ---- protoc's text format as a tree ---- */
typedef struct node {
    char *name, *value; /* value NULL: a message */
    struct node **kids;
    size_t nkids;
} node;

static node *node_new(const char *name, size_t n)
{
    node *x = calloc(1, sizeof *x);
    x->name = strndup(name, n);
    return x;
}

static void node_add(node *parent, node *kid)
{
    parent->kids = realloc(parent->kids, (parent->nkids + 1) * sizeof *parent->kids);
    parent->kids[parent->nkids++] = kid;
}

static void node_free(node *x)
{
    for (size_t i = 0; i < x->nkids; i++)
        node_free(x->kids[i]);
    free(x->kids);
    free(x->name);
    free(x->value);
    free(x);
}

static node *parse_text(const char *text)
{
    node *root = node_new("", 0), *stack[16] = {root};
    int depth = 0;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        while (n && (*l == ' ')) {
            l++;
            n--;
        }
        if (n == 1 && *l == '}') {
            assert_true(depth > 0);
            depth--;
        } else if (n > 2 && l[n - 1] == '{') {
            node *k = node_new(l, n - 2);
            node_add(stack[depth], k);
            assert_true(depth < 15);
            stack[++depth] = k;
        } else if (n) {
            const char *colon = memchr(l, ':', n);
            assert_non_null(colon);
            node *k = node_new(l, (size_t)(colon - l));
            const char *v = colon + 2;
            size_t vn = n - (size_t)(v - l);
            if (vn >= 2 && v[0] == '"') { /* the JSON's strings have no escapes here */
                v++;
                vn -= 2;
            }
            k->value = strndup(v, vn);
            node_add(stack[depth], k);
        }
        l += n;
        if (*l == '\n')
            l++;
    }
    assert_int_equal(depth, 0);
    return root;
}

static node *kid(const node *x, const char *name)
{
    for (size_t i = 0; x && i < x->nkids; i++)
        if (!strcmp(x->kids[i]->name, name))
            return x->kids[i];
    return NULL;
}

static const char *val(const node *x, const char *name)
{
    node *k = kid(x, name);
    return k ? k->value : NULL;
}

static uint64_t uval(const node *x, const char *name)
{
    const char *v = val(x, name);
    assert_non_null(v);
    return strtoull(v, NULL, 10);
}

/* The value of a track event's debug annotation `key` (its first value field). */
static const char *ann(const node *te, const char *key)
{
    for (size_t i = 0; te && i < te->nkids; i++) {
        node *d = te->kids[i];
        if (strcmp(d->name, "debug_annotations") || strcmp(val(d, "name") ? val(d, "name") : "", key))
            continue;
        for (size_t k = 0; k < d->nkids; k++)
            if (strcmp(d->kids[k]->name, "name") && d->kids[k]->value)
                return d->kids[k]->value;
        return "";
    }
    return NULL;
}

/* Interned strings replaced by their text, as a reader does: each iid must have been
 * defined (InternedData) earlier in the file, on the one sequence the export writes. */
typedef struct strmap {
    char *s[4][4096];
} strmap;

static void rename_node(node *x, const char *name, const char *value)
{
    free(x->name);
    x->name = strdup(name);
    free(x->value);
    x->value = strdup(value);
}

static const char *lookup(strmap *m, int kind, const char *iid)
{
    unsigned long i = strtoul(iid, NULL, 10);
    if (i == 0 || i >= 4096 || !m->s[kind][i])
        fail_msg("iid %s of kind %d used before it was interned", iid, kind);
    return m->s[kind][i];
}

static void resolve_interned(node *trace)
{
    static strmap m;
    memset(&m, 0, sizeof m);
    static const char *const kinds[4] = {"event_categories", "event_names",
                                         "debug_annotation_names",
                                         "debug_annotation_string_values"};
    for (size_t i = 0; i < trace->nkids; i++) {
        node *pk = trace->kids[i], *idata = kid(pk, "interned_data");
        for (size_t k = 0; idata && k < idata->nkids; k++)
            for (int kind = 0; kind < 4; kind++)
                if (!strcmp(idata->kids[k]->name, kinds[kind])) {
                    unsigned long iid = strtoul(val(idata->kids[k], "iid"), NULL, 10);
                    const char *str = val(idata->kids[k], kind == 3 ? "str" : "name");
                    assert_true(iid > 0 && iid < 4096 && str);
                    assert_null(m.s[kind][iid]); /* each defined once */
                    m.s[kind][iid] = strdup(str);
                }
        node *te = kid(pk, "track_event");
        for (size_t k = 0; te && k < te->nkids; k++) {
            node *x = te->kids[k];
            if (!strcmp(x->name, "category_iids"))
                rename_node(x, "categories", lookup(&m, 0, x->value));
            else if (!strcmp(x->name, "name_iid"))
                rename_node(x, "name", lookup(&m, 1, x->value));
            else if (!strcmp(x->name, "debug_annotations"))
                for (size_t d = 0; d < x->nkids; d++) {
                    node *y = x->kids[d];
                    if (!strcmp(y->name, "name_iid"))
                        rename_node(y, "name", lookup(&m, 2, y->value));
                    else if (!strcmp(y->name, "string_value_iid"))
                        rename_node(y, "string_value", lookup(&m, 3, y->value));
                }
        }
    }
    for (int kind = 0; kind < 4; kind++)
        for (int i = 0; i < 4096; i++)
            free(m.s[kind][i]);
}

/* ---- the export, decoded ---- */
typedef struct fixture {
    char *dir;
    cpa_analysis a;
    node *trace;
} fixture;

static char *decode(const char *dir, const void *pb, size_t len)
{
    if (system("command -v protoc >/dev/null 2>&1") != 0)
        fail_msg("protoc not found: make deps installs protobuf-compiler, which this test "
                 "decodes the export with");
    char in[4200], out[4200], cmd[9000];
    snprintf(in, sizeof in, "%s/export.pb", dir);
    snprintf(out, sizeof out, "%s/export.txt", dir);
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(pb, 1, len, f), len);
    fclose(f);
    const char *src = getenv("COLLPROF_SOURCE_DIR");
    assert_non_null(src);
    snprintf(cmd, sizeof cmd,
             "protoc --decode=perfetto.protos.Trace --proto_path='%s/tests/exporters' "
             "'%s/tests/exporters/perfetto.proto' < '%s' > '%s'", src, src, in, out);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("protoc could not decode the export (status %d)", rc);
    f = fopen(out, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return text;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = tt_tmpdir();
    exp_write_job(f->dir);
    exp_analyze(f->dir, &f->a);
    exp_set_findings(&f->a);
    exp_buf b;
    cpx_piece piece = {.t0_ns = INT64_MIN, .t1_ns = INT64_MAX, .proto = 1};
    cpx_piece_said said;
    assert_int_equal(cpx_export_perfetto_piece(exp_buf_open(&b), &f->a, &piece, &said), 0);
    size_t len = b.len;
    char *pb = exp_buf_close(&b);
    char *text = decode(f->dir, pb, len);
    free(pb);
    /* a field under a number the schema does not give is printed as that number */
    for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        const char *p = l;
        while (*p == ' ')
            p++;
        if (*p >= '0' && *p <= '9')
            fail_msg("a field Perfetto's schema does not have: %.40s", p);
    }
    f->trace = parse_text(text);
    free(text);
    resolve_interned(f->trace);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    node_free(f->trace);
    cpa_analysis_free(&f->a);
    tt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void a_process_per_rank_and_a_thread_per_stream(void **state)
{
    fixture *f = *state;
    int procs = 0, threads = 0, counters = 0;
    uint64_t proc_uuid[EXP_NRANKS] = {0}, seen[4 * EXP_NRANKS + 1];
    size_t nseen = 0;
    for (size_t i = 0; i < f->trace->nkids; i++) {
        node *td = kid(f->trace->kids[i], "track_descriptor");
        if (!td)
            continue;
        /* every track its own uuid: a rank's, a stream's, a counter's, the job's */
        uint64_t uuid = uval(td, "uuid");
        assert_true(uuid != 0);
        for (size_t k = 0; k < nseen; k++)
            assert_true(seen[k] != uuid);
        assert_true(nseen < sizeof seen / sizeof seen[0]);
        seen[nseen++] = uuid;
        node *pd = kid(td, "process"), *th = kid(td, "thread");
        if (pd) {
            int pid = (int)uval(pd, "pid");
            assert_in_range(pid, 0, EXP_NRANKS - 1);
            char want[64];
            snprintf(want, sizeof want, "rank %d (node-a)", pid);
            assert_string_equal(val(pd, "process_name"), want);
            proc_uuid[pid] = uval(td, "uuid");
            procs++;
        } else if (th) {
            int pid = (int)uval(th, "pid");
            assert_int_equal(uval(td, "parent_uuid"), proc_uuid[pid]);
            assert_true(uval(th, "tid") >= EXP_NRANKS);
            threads++;
        } else if (kid(td, "counter")) {
            assert_non_null(strstr(val(td, "name"), "busbw GB/s"));
            counters++;
        }
    }
    assert_int_equal(procs, EXP_NRANKS);
    assert_int_equal(threads, EXP_NRANKS);
    assert_int_equal(counters, EXP_NRANKS);
}

/* Every slice's begin and end on trace's tracks, nesting in file order and in time order on
 * each track; returns how many. */
static size_t nested_slices(const node *trace)
{
    enum { TRACKS = 64, DEPTH = 8 };
    uint64_t track[TRACKS] = {0}, stack_ts[TRACKS][DEPTH], last_ts[TRACKS] = {0};
    int depth[TRACKS] = {0}, ntracks = 0;
    size_t begins = 0, ends = 0;
    for (size_t i = 0; i < trace->nkids; i++) {
        node *pk = trace->kids[i], *te = kid(pk, "track_event");
        const char *type = val(te, "type");
        if (!type || (strcmp(type, "TYPE_SLICE_BEGIN") && strcmp(type, "TYPE_SLICE_END")))
            continue;
        uint64_t uuid = uval(te, "track_uuid"), ts = uval(pk, "timestamp");
        int t = 0;
        while (t < ntracks && track[t] != uuid)
            t++;
        if (t == ntracks) {
            assert_true(ntracks < TRACKS);
            track[ntracks++] = uuid;
        }
        assert_true(ts >= last_ts[t]); /* a track's events in time order */
        last_ts[t] = ts;
        if (!strcmp(type, "TYPE_SLICE_BEGIN")) {
            assert_true(depth[t] < DEPTH);
            stack_ts[t][depth[t]++] = ts;
            begins++;
        } else {
            assert_true(depth[t] > 0);
            assert_true(ts >= stack_ts[t][--depth[t]]);
            ends++;
        }
    }
    for (int t = 0; t < ntracks; t++)
        assert_int_equal(depth[t], 0);
    assert_int_equal(begins, ends);
    return begins;
}

/* Begins and ends nest on each track in file order, one pair per call and per wait, and the
 * JSON's slices are the same number. */
static void every_slice_is_a_begin_and_an_end_that_nest(void **state)
{
    fixture *f = *state;
    size_t begins = nested_slices(f->trace);
    /* as many as the JSON's X slices: each call, and the waits (3 ranks in each of 5
     * AllGathers, the Send for its Recv) */
    size_t calls = 0, xs = 0;
    for (size_t r = 0; r < f->a.model->nranks; r++)
        calls += f->a.model->ranks[r].ncalls;
    exp_buf b;
    assert_int_equal(cpx_export_perfetto(exp_buf_open(&b), &f->a), 0);
    char *json = exp_buf_close(&b);
    for (const char *p = json; (p = strstr(p, "\"ph\":\"X\"")) != NULL; p++)
        xs++;
    free(json);
    assert_int_equal(xs, calls + 3 * EXP_N_AG + 1);
    assert_int_equal(begins, xs);
}

/* A rank of thousands of calls, each with a wait nested in it: its packets are held and go
 * out in runs far past the writer's 64 KB of gathered output, written from where they are
 * held. All of them, each end after the wait its call holds, in time order on the track. */
static void a_long_rank_goes_out_whole_and_nested(void **state)
{
    (void)state;
    enum { N = 3000 };
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 2, r);
        for (int i = 0; i < N; i++) {
            uint64_t t = EXP_MONO0 + 1000000ull + (uint64_t)i * 100000;
            uint64_t start = r == 1 ? t + 30000 : t; /* rank 1 late: rank 0 waits */
            exp_put_call(w, r, CP_OP_ALLREDUCE, (uint64_t)i, 4096, -1, start, 1);
            exp_put_done(w, CP_OP_ALLREDUCE, (uint64_t)i, -1, start, t + 50000);
        }
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_buf b;
    cpx_piece piece = {.t0_ns = INT64_MIN, .t1_ns = INT64_MAX, .proto = 1};
    cpx_piece_said said;
    assert_int_equal(cpx_export_perfetto_piece(exp_buf_open(&b), &a, &piece, &said), 0);
    size_t len = b.len;
    assert_true(len > 2 * 64 * 1024); /* past the gathered output's size, each rank */
    char *pb = exp_buf_close(&b);
    char *text = decode(dir, pb, len);
    free(pb);
    node *trace = parse_text(text);
    free(text);
    resolve_interned(trace); /* each string said before the packets that name it */
    assert_int_equal(nested_slices(trace), 2 * N + N); /* the calls and rank 0's waits */
    node_free(trace);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* The begin of rank `pid`'s call (name, seq), and its end's timestamp. */
static node *begin_of(fixture *f, int pid, const char *name, const char *seq, uint64_t *end_ts)
{
    uint64_t want_track = 0;
    node *found = NULL;
    int depth = 0;
    for (size_t i = 0; i < f->trace->nkids; i++) {
        node *pk = f->trace->kids[i], *te = kid(pk, "track_event");
        node *th = kid(kid(pk, "track_descriptor"), "thread");
        if (th && (int)uval(th, "pid") == pid)
            want_track = uval(kid(pk, "track_descriptor"), "uuid");
        if (!te || !want_track || uval(te, "track_uuid") != want_track)
            continue;
        const char *type = val(te, "type");
        if (!strcmp(type, "TYPE_SLICE_BEGIN")) {
            if (!found && !strcmp(val(te, "name"), name) && ann(te, "seq") &&
                !strcmp(ann(te, "seq"), seq)) {
                found = pk;
                depth = 0;
            }
            depth++;
        } else if (!strcmp(type, "TYPE_SLICE_END") && found && --depth == 0) {
            *end_ts = uval(pk, "timestamp");
            return found;
        }
    }
    fail_msg("no slice %s seq %s on pid %d", name, seq, pid);
    return NULL;
}

static void a_call_at_its_times_with_the_jsons_args(void **state)
{
    fixture *f = *state;
    uint64_t end;
    node *pk = begin_of(f, 2, "AllReduce", "7", &end), *te = kid(pk, "track_event");
    assert_int_equal(uval(pk, "timestamp"), 700000); /* ns since the job's start */
    assert_int_equal(end, 710000);
    assert_string_equal(val(te, "categories"), "collective");
    assert_string_equal(ann(te, "dtype"), "float32");
    assert_string_equal(ann(te, "count"), "262144");
    assert_string_equal(ann(te, "bytes"), "1048576");
    assert_string_equal(ann(te, "redop"), "sum");
    assert_string_equal(ann(te, "timing"), "gpu");
    assert_string_equal(ann(te, "comm"), "9f2c0e1d22aa4b01");
    assert_string_equal(ann(te, "host_us"), "3.000");
    /* the wait nests in the late AllGather's early ranks: 15 us from its start */
    pk = begin_of(f, 0, "AllGather", "12", &end);
    te = kid(pk, "track_event");
    assert_string_equal(ann(te, "wait_us"), "15.000");
    assert_string_equal(ann(te, "algo"), "RING");
    assert_string_equal(ann(te, "late_rank"), "3");
    assert_int_equal(end - uval(pk, "timestamp"), 20000);
    node *s0 = kid(begin_of(f, 0, "AllReduce", "0", &end), "track_event");
    assert_string_equal(ann(s0, "site"), "train_step+0x12 (libtrain.so) < main, \\\"quoted\\\" (app)");
}

/* Each operation's slices carry its flow id; one of them (the last arrival's) ends it. */
static void flows_chain_every_rank_of_an_operation(void **state)
{
    fixture *f = *state;
    const cpa_matched *mt = &f->a.matched;
    for (size_t oi = 0; oi < mt->nops; oi++) {
        char id[32];
        snprintf(id, sizeof id, "%zu", oi + 1);
        int members = 0, ends = 0;
        for (size_t i = 0; i < f->trace->nkids; i++) {
            node *te = kid(f->trace->kids[i], "track_event");
            for (size_t k = 0; te && k < te->nkids; k++) {
                node *x = te->kids[k];
                if (x->value && !strcmp(x->value, id) &&
                    (!strcmp(x->name, "flow_ids") || !strcmp(x->name, "terminating_flow_ids"))) {
                    members++;
                    ends += !strcmp(x->name, "terminating_flow_ids");
                }
            }
        }
        assert_int_equal(members, mt->ops[oi].nparts);
        assert_int_equal(ends, 1);
    }
}

static void hangs_mismatches_and_the_job_are_said(void **state)
{
    fixture *f = *state;
    int hangs = 0, job = 0, counters = 0, mismatches = 0;
    for (size_t i = 0; i < f->trace->nkids; i++) {
        node *te = kid(f->trace->kids[i], "track_event");
        const char *type = val(te, "type");
        if (!type)
            continue;
        if (!strcmp(type, "TYPE_INSTANT") && !strcmp(val(te, "categories"), "hang")) {
            assert_string_equal(val(te, "name"), "hang: RANK_NOT_JOINED AllReduce seq 10");
            assert_non_null(ann(te, "role"));
            hangs++;
        } else if (!strcmp(type, "TYPE_INSTANT") && !strcmp(val(te, "categories"), "mismatch")) {
            assert_string_equal(val(te, "name"), "mismatch: count at AllReduce seq 3");
            assert_non_null(ann(te, "culprit"));
            mismatches++;
        } else if (!strcmp(type, "TYPE_INSTANT") && !strcmp(val(te, "name"), "job")) {
            assert_string_equal(ann(te, "ranks"), "4");
            assert_string_equal(ann(te, "holes"), "none");
            job++;
        } else if (val(te, "extra_double_counter_values")) {
            /* the stream's counter track (a descriptor's, with a unit) and the slice's
             * busbw at its begin, 0 at its end */
            uint64_t track = uval(te, "extra_double_counter_track_uuids");
            int described = 0;
            for (size_t k = 0; k < f->trace->nkids && !described; k++) {
                node *td = kid(f->trace->kids[k], "track_descriptor");
                described = td && kid(td, "counter") && uval(td, "uuid") == track;
            }
            assert_true(described);
            double v = strtod(val(te, "extra_double_counter_values"), NULL);
            if (!strcmp(type, "TYPE_SLICE_END"))
                assert_true(v == 0);
            else
                assert_true(!strcmp(type, "TYPE_SLICE_BEGIN") && v > 0);
            counters++;
        }
    }
    assert_int_equal(hangs, EXP_NRANKS);
    assert_int_equal(mismatches, EXP_NRANKS);
    assert_int_equal(job, 1);
    /* the GPU-timed AllGathers of 4 ranks (the events' AllReduces too): a value at each
     * slice's begin and a 0 at its end, carried by the slice's own begin and end (extra
     * counter values: no packet of their own) */
    assert_true(counters >= 2 * EXP_NRANKS * EXP_N_AG);
    assert_int_equal(counters % 2, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_process_per_rank_and_a_thread_per_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(every_slice_is_a_begin_and_an_end_that_nest, setup, teardown),
        cmocka_unit_test(a_long_rank_goes_out_whole_and_nested),
        cmocka_unit_test_setup_teardown(a_call_at_its_times_with_the_jsons_args, setup, teardown),
        cmocka_unit_test_setup_teardown(flows_chain_every_rank_of_an_operation, setup, teardown),
        cmocka_unit_test_setup_teardown(hangs_mismatches_and_the_job_are_said, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
