/* The Perfetto / Chrome trace-event JSON of the synthetic job (exp_job.h): it parses with
 * strict parsers (json-c's strict mode, and Python's json with no NaN/Infinity and no
 * duplicate keys when python3 is here), and holds the events a timeline needs: a named
 * process per rank and thread per stream, one X slice per call at the times the trace
 * gives, the wait nested before the last arrival, flow arrows chaining each operation's
 * slices in arrival order, instants on hangs. */
#include "tests/exporters/exp_job.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>

#include "exporters/exporters.h"
#include "exporters/perfetto_internal.h"
#include "present/present.h"
#include "tests/exporters/perfetto_check.h"

typedef struct fixture {
    char *dir;
    cpa_analysis a;
    json_object *doc;
    json_object *events;
} fixture;

static char *export_of(const cpa_analysis *a)
{
    exp_buf b;
    assert_int_equal(cpx_export_perfetto(exp_buf_open(&b), a), 0);
    return exp_buf_close(&b);
}

/* a's export parsed strictly: doc (the caller puts it) and its traceEvents. */
static fixture parsed_export(const cpa_analysis *a)
{
    char *s = export_of(a);
    fixture g = { .doc = pj_parse_strict(s) };
    free(s);
    assert_true(json_object_object_get_ex(g.doc, "traceEvents", &g.events));
    return g;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = tt_tmpdir();
    exp_write_job(f->dir);
    exp_analyze(f->dir, &f->a);
    exp_set_findings(&f->a);
    char *s = export_of(&f->a);
    f->doc = pj_parse_strict(s);
    free(s);
    assert_true(json_object_object_get_ex(f->doc, "traceEvents", &f->events));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    json_object_put(f->doc);
    cpa_analysis_free(&f->a);
    tt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static json_object *arg(json_object *ev, const char *key)
{
    return pj_field(pj_field(ev, "args"), key);
}

static void assert_us(json_object *v, double want)
{
    assert_non_null(v);
    double got = json_object_get_double(v);
    if (fabs(got - want) > 1e-6)
        fail_msg("%.3f us, want %.3f", got, want);
}

/* The X slice of rank `pid`'s call (name, seq). */
static json_object *slice(fixture *f, int pid, const char *name, int64_t seq)
{
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (!strcmp(pj_str(ev, "ph"), "X") && !strcmp(pj_str(ev, "name"), name) &&
            json_object_get_int(pj_field(ev, "pid")) == pid &&
            json_object_get_int64(arg(ev, "seq")) == seq)
            return ev;
    }
    fail_msg("no X slice %s seq %" PRId64 " on pid %d", name, seq, pid);
    return NULL;
}

static void document_is_strict_json_with_the_object_format(void **state)
{
    fixture *f = *state;
    assert_string_equal(pj_str(f->doc, "displayTimeUnit"), "ns");
    assert_non_null(pj_field(f->doc, "otherData"));
    assert_true(json_object_is_type(f->events, json_type_array));

    /* Python's reader, told to refuse what JSON does not have (NaN, Infinity) and what
     * json-c would let pass (a key twice in one object). */
    static const char check[] =
        "import json, sys\n"
        "def reject(c): raise ValueError('non-JSON constant ' + c)\n"
        "def pairs(kv):\n"
        "    keys = [k for k, _ in kv]\n"
        "    if len(keys) != len(set(keys)): raise ValueError('duplicate key')\n"
        "    return dict(kv)\n"
        "d = json.loads(sys.stdin.buffer.read().decode('utf-8', 'strict'),\n"
        "               parse_constant=reject, object_pairs_hook=pairs)\n"
        "assert isinstance(d['traceEvents'], list) and len(d['traceEvents']) > 0\n";
    char *s = export_of(&f->a);
    int rc = exp_python(check, s, strlen(s));
    free(s);
    if (rc == 1)
        fail_msg("python3's json refused the Perfetto export");
}

static void a_named_process_per_rank_and_thread_per_stream(void **state)
{
    fixture *f = *state;
    int procs[EXP_NRANKS] = { 0 }, threads = 0;
    int64_t tids[EXP_NRANKS] = { 0 };
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (strcmp(pj_str(ev, "ph"), "M"))
            continue;
        int pid = json_object_get_int(pj_field(ev, "pid"));
        assert_in_range(pid, 0, EXP_NRANKS - 1);
        const char *name = json_object_get_string(arg(ev, "name"));
        if (!strcmp(pj_str(ev, "name"), "process_name")) {
            char want[64];
            snprintf(want, sizeof want, "rank %d (node-a)", pid);
            assert_string_equal(name, want);
            procs[pid]++;
        } else if (!strcmp(pj_str(ev, "name"), "thread_name")) {
            char want[64];
            snprintf(want, sizeof want, "stream 0 (0x%" PRIx64 ")", exp_stream(pid));
            assert_string_equal(name, want);
            tids[pid] = json_object_get_int64(pj_field(ev, "tid"));
            threads++;
        }
    }
    for (int r = 0; r < EXP_NRANKS; r++)
        assert_int_equal(procs[r], 1);
    assert_int_equal(threads, EXP_NRANKS);
    /* Perfetto keys threads by tid: unique, and no pid (a process' own thread) among them. */
    for (int r = 0; r < EXP_NRANKS; r++) {
        assert_true(tids[r] >= EXP_NRANKS);
        for (int k = 0; k < r; k++)
            assert_true(tids[k] != tids[r]);
    }
}

/* One slice per call, on its rank's stream thread, at the trace's times relative to the
 * job's first record (AllReduce 0's entry). */
static void one_slice_per_call_at_its_times(void **state)
{
    fixture *f = *state;
    size_t calls = 0, slices = 0;
    for (size_t r = 0; r < f->a.model->nranks; r++)
        calls += f->a.model->ranks[r].ncalls;
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (!strcmp(pj_str(ev, "ph"), "X") && strcmp(pj_str(ev, "name"), "wait")) {
            slices++;
            assert_string_equal(json_object_get_string(arg(ev, "comm")), "9f2c0e1d22aa4b01");
        }
    }
    assert_int_equal(slices, calls);

    json_object *ar = slice(f, 2, "AllReduce", 7);
    assert_us(pj_field(ar, "ts"), 7 * 100.0);
    assert_us(pj_field(ar, "dur"), 10.0);
    assert_string_equal(pj_str(ar, "cat"), "collective");
    assert_string_equal(json_object_get_string(arg(ar, "dtype")), "float32");
    assert_int_equal(json_object_get_int64(arg(ar, "count")), 262144);
    assert_int_equal(json_object_get_int64(arg(ar, "bytes")), 1048576);
    assert_string_equal(json_object_get_string(arg(ar, "redop")), "sum");
    assert_string_equal(json_object_get_string(arg(ar, "timing")), "gpu");

    json_object *s0 = slice(f, 0, "AllReduce", 0);
    assert_string_equal(json_object_get_string(arg(s0, "site")), EXP_SITE);

    /* The pair is untimed: its slices are the host's time in the call. */
    json_object *send = slice(f, 0, "Send", 0), *recv = slice(f, 1, "Recv", 0);
    assert_us(pj_field(send, "ts"), 8000.0);
    assert_us(pj_field(send, "dur"), 3.0);
    assert_us(pj_field(recv, "ts"), 8001.0);
    assert_string_equal(json_object_get_string(arg(send, "timing")), "host");
    assert_string_equal(pj_str(send, "cat"), "p2p");
    assert_int_equal(json_object_get_int(arg(send, "peer")), 1);
}

/* AllGather: ranks 0-2 start at t, rank 3 at t + 15 us; the early ones wait 15 us, shown
 * as a "wait" slice nested at the start of theirs. */
static void the_wait_before_the_last_arrival_is_a_nested_slice(void **state)
{
    fixture *f = *state;
    double t0 = 4000.0 + 2 * 100.0; /* AllGather 2 = seq 12 */
    for (int r = 0; r < EXP_NRANKS; r++) {
        json_object *s = slice(f, r, "AllGather", 12);
        assert_us(pj_field(s, "ts"), r == 3 ? t0 + 15 : t0);
        assert_us(pj_field(s, "dur"), r == 3 ? 5.0 : 20.0);
        assert_us(arg(s, "arrival_us"), r == 3 ? t0 + 15 : t0);
        assert_us(arg(s, "wait_us"), r == 3 ? 0.0 : 15.0);
        assert_int_equal(json_object_get_int(arg(s, "late_rank")), 3);
        assert_us(arg(s, "late_us"), 15.0);
        assert_string_equal(json_object_get_string(arg(s, "late_cause")), "gpu_backlog");
        /* what NCCL's profiler plugin said it ran it with (exp_job.h) */
        assert_string_equal(json_object_get_string(arg(s, "algo")), "RING");
        assert_string_equal(json_object_get_string(arg(s, "proto")), "LL");
        assert_int_equal(json_object_get_int(arg(s, "channels")), 4);
        /* and NCCL's own number for it: its 3rd AllGather, where collprof counts 12 */
        assert_int_equal(json_object_get_int64(arg(s, "nccl_seq")), 2);
    }
    /* an AllReduce, timed by events, has no NCCL_OP: no such args */
    json_object *ar = slice(f, 0, "AllReduce", 1), *none = NULL;
    assert_false(json_object_object_get_ex(pj_field(ar, "args"), "algo", &none));
    assert_false(json_object_object_get_ex(pj_field(ar, "args"), "nccl_seq", &none));
    int waits = 0;
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (strcmp(pj_str(ev, "name"), "wait"))
            continue;
        double ts = json_object_get_double(pj_field(ev, "ts"));
        if (fabs(ts - t0) > 1e-6)
            continue;
        waits++;
        assert_true(json_object_get_int(pj_field(ev, "pid")) != 3);
        assert_us(pj_field(ev, "dur"), 15.0);
        assert_int_equal(json_object_get_int(arg(ev, "for_rank")), 3);
        json_object *parent = slice(f, json_object_get_int(pj_field(ev, "pid")), "AllGather", 12);
        assert_int_equal(json_object_get_int64(pj_field(ev, "tid")),
                         json_object_get_int64(pj_field(parent, "tid")));
    }
    assert_int_equal(waits, 3);
}

/* Each operation's slices share one bind_id; chained in arrival order: the first has no
 * flow_in, the last (the latest arrival) no flow_out, the others both. */
static void flows_chain_every_rank_of_an_operation(void **state)
{
    fixture *f = *state;
    const cpa_matched *mt = &f->a.matched;
    for (size_t oi = 0; oi < mt->nops; oi++) {
        const cpa_op *o = &mt->ops[oi];
        int members = 0, starts = 0, ends = 0, end_pid = -1, start_pid = -1;
        for (size_t i = 0; i < json_object_array_length(f->events); i++) {
            json_object *ev = json_object_array_get_idx(f->events, i);
            json_object *id = pj_field(ev, "bind_id");
            if (!id || json_object_get_int64(id) != (int64_t)oi + 1)
                continue;
            assert_string_equal(pj_str(ev, "ph"), "X");
            members++;
            int in = pj_field(ev, "flow_in") != NULL, out = pj_field(ev, "flow_out") != NULL;
            assert_true(in || out);
            if (!in) {
                starts++;
                start_pid = json_object_get_int(pj_field(ev, "pid"));
            }
            if (!out) {
                ends++;
                end_pid = json_object_get_int(pj_field(ev, "pid"));
            }
        }
        assert_int_equal(members, o->nparts);
        assert_int_equal(starts, 1);
        assert_int_equal(ends, 1);
        if (o->op == CP_OP_ALLGATHER) {
            assert_int_equal(start_pid, 0); /* ties go to the lowest rank */
            assert_int_equal(end_pid, 3);   /* the late one */
        } else if (o->op == CP_OP_SEND) {
            assert_int_equal(start_pid, 0);
            assert_int_equal(end_pid, 1);
        }
    }
}

static void a_hang_is_an_instant_on_each_rank_involved(void **state)
{
    fixture *f = *state;
    int seen[EXP_NRANKS] = { 0 };
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (strcmp(pj_str(ev, "ph"), "i"))
            continue;
        if (strcmp(pj_str(ev, "cat"), "hang"))
            continue;
        int pid = json_object_get_int(pj_field(ev, "pid"));
        assert_in_range(pid, 0, EXP_NRANKS - 1);
        seen[pid]++;
        assert_string_equal(pj_str(ev, "name"), "hang: RANK_NOT_JOINED AllReduce seq 10");
        assert_string_equal(pj_str(ev, "s"), "p");
        assert_string_equal(json_object_get_string(arg(ev, "role")),
                            pid == 2 ? "missing" : "waiting");
        assert_int_equal(json_object_array_length(arg(ev, "waiting_ranks")), 3);
        assert_us(pj_field(ev, "ts"), 9000.0); /* each rank's last record: its END */
    }
    for (int r = 0; r < EXP_NRANKS; r++)
        assert_int_equal(seen[r], 1);
}

/* The count mismatch at AllReduce seq 3 (exp_job.h): an instant on each rank where its call
 * starts, with its value; rank 3's 2048 is the culprit. */
static void a_mismatch_is_an_instant_on_each_rank_at_its_call(void **state)
{
    fixture *f = *state;
    int seen[EXP_NRANKS] = {0};
    for (size_t i = 0; i < json_object_array_length(f->events); i++) {
        json_object *ev = json_object_array_get_idx(f->events, i);
        if (strcmp(pj_str(ev, "ph"), "i") || strcmp(pj_str(ev, "cat"), "mismatch"))
            continue;
        int pid = json_object_get_int(pj_field(ev, "pid"));
        assert_in_range(pid, 0, EXP_NRANKS - 1);
        seen[pid]++;
        assert_string_equal(pj_str(ev, "name"), "mismatch: count at AllReduce seq 3");
        assert_string_equal(pj_str(ev, "s"), "p");
        assert_us(pj_field(ev, "ts"), 3 * 100.0); /* where its AllReduce 3 starts */
        assert_int_equal(json_object_get_int64(arg(ev, "value")), pid == 3 ? 2048 : 1024);
        assert_int_equal(json_object_get_boolean(arg(ev, "culprit")), pid == 3);
        assert_string_equal(json_object_get_string(arg(ev, "field")), "count");
    }
    for (int r = 0; r < EXP_NRANKS; r++)
        assert_int_equal(seen[r], 1);
}

/* A timed call with no DONE (the trace ended with it in flight) runs to its rank's last
 * record, marked unfinished. */
static void an_unfinished_call_runs_to_the_end_of_its_trace(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 2, r);
        exp_put_call(w, r, CP_OP_ALLREDUCE, 0, 256, -1, EXP_MONO0, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, 0, -1, EXP_MONO0 + 1000, EXP_MONO0 + 3000);
        if (r == 0)
            exp_put_call(w, r, CP_OP_ALLREDUCE, 1, 256, -1, EXP_MONO0 + 10000, 1);
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .signal = 15, .exit_code = -1,
                        .at_ns = EXP_MONO0 + 50000};
        exp_put(w, &e);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *s = export_of(&a);
    json_object *doc = pj_parse_strict(s);
    free(s);
    fixture f = { .doc = doc };
    assert_true(json_object_object_get_ex(doc, "traceEvents", &f.events));
    json_object *hung = slice(&f, 0, "AllReduce", 1);
    assert_us(pj_field(hung, "ts"), 10.0);
    assert_us(pj_field(hung, "dur"), 40.0);
    assert_true(json_object_get_boolean(arg(hung, "unfinished")));
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* Two calls on one stream whose measured GPU times overlap by 2 us (events and the plugin's
 * timers, clock conversions): the second slice starts where the first ends and says by how
 * much, so no track holds a partial overlap; the standard job's tracks hold none either. */
static void slices_on_a_stream_never_partly_overlap(void **state)
{
    fixture *f = *state;
    assert_no_partial_overlap(f->events);
    char *dir = tt_tmpdir();
    for (int r = 0; r < 2; r++) {
        cp_trace_writer *w = exp_open_rank(dir, r, "node-a");
        exp_put_comm(w, 2, r);
        exp_put_call(w, r, CP_OP_ALLREDUCE, 0, 256, -1, EXP_MONO0, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, 0, -1, EXP_MONO0 + 1000, EXP_MONO0 + 11000);
        exp_put_call(w, r, CP_OP_ALLREDUCE, 1, 256, -1, EXP_MONO0 + 2000, 1);
        exp_put_done(w, CP_OP_ALLREDUCE, 1, -1, EXP_MONO0 + 9000, EXP_MONO0 + 20000);
        cp_rec_end e = {.h = {CP_REC_END, sizeof e}, .at_ns = EXP_MONO0 + 50000};
        exp_put(w, &e);
        assert_int_equal(cp_trace_writer_close(w), 0);
    }
    cpa_analysis a;
    exp_analyze(dir, &a);
    fixture g = parsed_export(&a);
    json_object *doc = g.doc;
    assert_no_partial_overlap(g.events);
    json_object *second = slice(&g, 0, "AllReduce", 1);
    assert_us(pj_field(second, "ts"), 10.0); /* job time starts at the first entry */
    assert_us(pj_field(second, "dur"), 9.0);
    assert_us(arg(second, "clipped_us"), 2.0);
    assert_null(arg(slice(&g, 0, "AllReduce", 0), "clipped_us"));
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* A call an abort ended is flagged in its slice, and its wait never runs past its end. */
static void an_aborted_call_is_flagged(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_aborted_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    fixture g = parsed_export(&a);
    json_object *doc = g.doc;
    json_object *ab = slice(&g, 0, "AllReduce", 1);
    assert_true(json_object_get_boolean(arg(ab, "aborted")));
    assert_null(arg(slice(&g, 0, "AllReduce", 0), "aborted"));
    assert_no_partial_overlap(g.events);
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void a_refused_call_is_flagged_with_its_result(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_refused_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    fixture g = parsed_export(&a);
    json_object *doc = g.doc;
    size_t refused = 0;
    for (size_t i = 0; i < json_object_array_length(g.events); i++) {
        json_object *ev = json_object_array_get_idx(g.events, i);
        if (!arg(ev, "refused"))
            continue;
        refused++;
        assert_int_equal(json_object_get_int(pj_field(ev, "pid")), 1);
        assert_string_equal(json_object_get_string(arg(ev, "result")), "ncclInvalidArgument");
        assert_null(arg(ev, "seq"));
    }
    assert_int_equal(refused, 1);
    assert_null(arg(slice(&g, 0, "Broadcast", 1), "refused"));
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* The writers keep a call's run of args (count to channels) by a key of the fields they come
 * from and copy it for the next call of that key: calls of rank 0 that differ from the one
 * before in one field at a time (count, dtype, redop, whether and how NCCL reported it) each
 * show their own values, so a field the key left out would show the call before's. */
static void each_call_shows_its_own_size_type_and_nccl_choices(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    cpa_rank *r0 = &a.model->ranks[0];
    cpa_call was = {.count = 4096, .nccl = CPA_NCCL_SEEN, .algo = 1, .proto = 1,
                    .nchannels = 2};
    unsigned n = 0;
    for (size_t i = 0; i < r0->ncalls; i++) {
        cpa_call *c = &r0->calls[i];
        if (cp_op_is_p2p(c->op))
            continue;
        switch (n++ % 7) { /* one field moves from one call to the next */
        case 0: was.count++; break;
        case 1: was.dtype = (uint8_t)((was.dtype + 1) % 3); break;
        case 2: was.redop = (uint8_t)(!was.redop); break;
        case 3: was.algo = (uint8_t)(3 - was.algo); break;
        case 4: was.proto = (uint8_t)(3 - was.proto); break;
        case 5: was.nchannels = (uint8_t)(was.nchannels % 4 + 1); break;
        case 6: was.nccl = was.nccl ? 0 : CPA_NCCL_SEEN; break;
        }
        c->count = was.count;
        c->dtype = was.dtype;
        c->redop = was.redop;
        c->nccl = was.nccl;
        c->algo = was.algo;
        c->proto = was.proto;
        c->nchannels = was.nchannels;
    }
    /* and the last two alike but for NCCL's word, which said nothing of algo or channels */
    for (size_t i = r0->ncalls, left = 2; i-- > 0 && left;)
        if (!cp_op_is_p2p(r0->calls[i].op)) {
            cpa_call *c = &r0->calls[i];
            c->nccl = --left ? CPA_NCCL_SEEN : 0;
            c->algo = c->proto = c->nchannels = 0;
            c->count = 4096;
            c->dtype = 0;
            c->redop = 0;
        }
    fixture g = parsed_export(&a);
    json_object *doc = g.doc;
    size_t checked = 0;
    for (size_t i = 0; i < r0->ncalls; i++) {
        const cpa_call *c = &r0->calls[i];
        if (cp_op_is_p2p(c->op) || c->seq == CPA_SEQ_NONE)
            continue;
        json_object *ev = slice(&g, 0, cp_op_name(c->op), (int64_t)c->seq);
        assert_int_equal(json_object_get_int64(arg(ev, "count")), (int64_t)c->count);
        assert_string_equal(json_object_get_string(arg(ev, "dtype")), cp_dtype_name(c->dtype));
        assert_int_equal(json_object_get_int64(arg(ev, "bytes")),
                         (int64_t)cpa_elem_bytes(c->count, c->dtype));
        assert_string_equal(json_object_get_string(arg(ev, "redop")), cp_redop_name(c->redop));
        if (c->nccl & CPA_NCCL_SEEN) {
            if (c->algo)
                assert_string_equal(json_object_get_string(arg(ev, "algo")),
                                    cp_algo_name(c->algo));
            else
                assert_null(arg(ev, "algo"));
            if (c->proto)
                assert_string_equal(json_object_get_string(arg(ev, "proto")),
                                    cp_proto_name(c->proto));
            else
                assert_null(arg(ev, "proto"));
            assert_non_null(arg(ev, "channels"));
            assert_int_equal(json_object_get_int(arg(ev, "channels")), c->nchannels);
        } else {
            assert_null(arg(ev, "algo"));
            assert_null(arg(ev, "channels"));
        }
        checked++;
    }
    assert_true(checked >= 14); /* every field moved twice */
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* The writer's strings are json-c's (JSON_C_TO_STRING_NOSLASHESCAPE): each byte that needs
 * escaping, and some that do not, at every place of strings shorter and longer than the
 * eight bytes the writer scans at a time, alone and with a second one eight bytes on. */
static void strings_are_escaped_as_json_c_escapes_them(void **state)
{
    (void)state;
    const unsigned char odd[] = {1, 0x1f, '\b', '\n', '\t', '"', '\\', ' ', 0x7f, 0xc3, '/'};
    for (size_t len = 1; len <= 19; len++)
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof odd; k++) {
                char s[32];
                memset(s, 'a', len);
                s[len] = '\0';
                s[at] = (char)odd[k];
                if (at + 8 < len)
                    s[at + 8] = (char)odd[(k + 5) % sizeof odd];
                exp_buf b;
                pw p = {.out = exp_buf_open(&b), .first = 1};
                cpx_pj_metadata(&p, "n", 1, 2, "k", s, 0);
                cpx_pj_close(&p);
                assert_false(p.failed);
                free(p.jbuf);
                char *got = exp_buf_close(&b);
                json_object *js = json_object_new_string(s);
                char want[256];
                snprintf(want, sizeof want,
                         "\n{\"name\":\"n\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"k\":%s}}\n]}\n",
                         json_object_to_json_string_ext(js, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE));
                assert_string_equal(got, want);
                json_object_put(js);
                free(got);
            }
}

/* Numbers as printf and cpr_fmt_ns_us write them, at every digit count's edges (the writer
 * counts digits from the bit length and writes two at a time). */
static void numbers_are_written_at_every_length(void **state)
{
    (void)state;
    for (int d = 0; d <= 19; d++) {
        uint64_t p10 = 1;
        for (int i = 0; i < d; i++)
            p10 *= 10;
        int64_t vals[] = {(int64_t)p10, (int64_t)p10 - 1, (int64_t)p10 + 1, -(int64_t)p10,
                          INT64_MAX, INT64_MIN, 0};
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
            exp_buf b;
            pw p = {.out = exp_buf_open(&b), .first = 1};
            cpx_pj_metadata(&p, "n", 1, 2, "k", NULL, vals[k]);
            pf_event e = {.ph = 'X', .name = "x", .cat = "c", .ts = vals[k], .dur = 7};
            cpx_pj_event(&p, &e);
            cpx_pj_close(&p);
            free(p.jbuf);
            char *got = exp_buf_close(&b), want[512], us[32];
            snprintf(want, sizeof want,
                     "\n{\"name\":\"n\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"k\":%" PRId64
                     "}},\n{\"name\":\"x\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"cat\":\"c\","
                     "\"ts\":%s,\"dur\":0.007,\"args\":{}}\n]}\n",
                     vals[k], cpr_fmt_ns_us(us, vals[k]));
            assert_string_equal(got, want);
            free(got);
        }
    }
}

static void a_failed_stream_is_an_error(void **state)
{
    fixture *f = *state;
    FILE *full = fopen("/dev/full", "w");
    if (!full)
        skip();
    setvbuf(full, NULL, _IONBF, 0); /* the first write fails, not the final flush */
    assert_int_equal(cpx_export_perfetto(full, &f->a), -1);
    fclose(full);
}

/* Values no trace can hold: a count whose size does not fit 64 bits gets no bytes arg (it
 * wrapped to 0 before), and a lateness past what an int64 of ns holds shows as that limit. */
static void values_past_64_bits_are_left_out_or_saturate(void **state)
{
    fixture *f = *state;
    cpa_call *c = &f->a.model->ranks[2].calls[7];
    uint64_t count = c->count;
    c->count = 1ull << 62;
    float *late = f->a.stragglers.op_late_us;
    float keep[64];
    size_t nops = f->a.matched.nops < 64 ? f->a.matched.nops : 64;
    memcpy(keep, late, nops * sizeof *late);
    for (size_t i = 0; i < nops; i++)
        late[i] = 3.0e38f;
    fixture g = parsed_export(&f->a);
    json_object *doc = g.doc;
    json_object *ar = slice(&g, 2, "AllReduce", 7);
    assert_null(arg(ar, "bytes"));
    assert_int_equal(json_object_get_uint64(arg(ar, "count")), 1ull << 62);
    json_object *ag = slice(&g, 0, "AllGather", 12);
    assert_string_equal(json_object_to_json_string(arg(ag, "late_us")), "9223372036854775.807");
    json_object_put(doc);
    c->count = count;
    memcpy(late, keep, nops * sizeof *late);
}

/* A trace with holes says so where a reader of the file looks: otherData, the rank's
 * process name, and an instant at its first hole; a whole one says "none". */
static void holes_are_in_the_metadata_and_on_the_rank(void **state)
{
    fixture *f = *state;
    assert_string_equal(pj_str(pj_field(f->doc, "otherData"), "holes"), "none");
    char *dir = tt_tmpdir();
    exp_write_job_with_holes(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *s = export_of(&a);
    json_object *doc = pj_parse_strict(s);
    free(s);
    json_object *other = pj_field(doc, "otherData");
    assert_non_null(strstr(pj_str(other, "holes"), "12 records lost (10 ring_full, 2 at_end)"));
    assert_int_equal(json_object_get_int(pj_field(other, "lost_records")), 12);
    json_object *events = pj_field(doc, "traceEvents");
    int named = 0, marked = 0;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        const char *name = pj_str(ev, "name");
        if (!strcmp(name, "process_name") &&
            !strcmp(pj_str(pj_field(ev, "args"), "name"), "rank 2 (node-a, trace has holes)"))
            named++;
        if (!strncmp(name, "trace hole: 12 records lost", 27)) {
            marked++;
            assert_int_equal(json_object_get_int(pj_field(ev, "pid")), 2);
            assert_string_equal(pj_str(ev, "ph"), "i");
            /* at the first LOST record's time: 3 ms after the job's start */
            assert_true(fabs(json_object_get_double(pj_field(ev, "ts")) - 3000.0) < 1e-6);
            assert_int_equal(json_object_get_int(pj_field(pj_field(ev, "args"), "lost_records")), 12);
        }
    }
    assert_int_equal(named, 1);
    assert_int_equal(marked, 1);
    json_object_put(doc);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(document_is_strict_json_with_the_object_format),
        cmocka_unit_test(a_named_process_per_rank_and_thread_per_stream),
        cmocka_unit_test(one_slice_per_call_at_its_times),
        cmocka_unit_test(the_wait_before_the_last_arrival_is_a_nested_slice),
        cmocka_unit_test(flows_chain_every_rank_of_an_operation),
        cmocka_unit_test(a_hang_is_an_instant_on_each_rank_involved),
        cmocka_unit_test(a_mismatch_is_an_instant_on_each_rank_at_its_call),
        cmocka_unit_test(an_unfinished_call_runs_to_the_end_of_its_trace),
        cmocka_unit_test(a_failed_stream_is_an_error),
        cmocka_unit_test(strings_are_escaped_as_json_c_escapes_them),
        cmocka_unit_test(numbers_are_written_at_every_length),
        cmocka_unit_test(values_past_64_bits_are_left_out_or_saturate),
        cmocka_unit_test(holes_are_in_the_metadata_and_on_the_rank),
        cmocka_unit_test(slices_on_a_stream_never_partly_overlap),
        cmocka_unit_test(an_aborted_call_is_flagged),
        cmocka_unit_test(a_refused_call_is_flagged_with_its_result),
        cmocka_unit_test(each_call_shows_its_own_size_type_and_nccl_choices),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
