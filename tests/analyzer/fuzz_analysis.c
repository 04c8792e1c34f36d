/* fuzz_analysis: libFuzzer target for the whole analysis: loading, matching across ranks,
 * statistics, clocks, stragglers, hangs, mismatches, and every exporter (text and JSON
 * report, Perfetto, CSV, Prometheus).
 *
 * The input is trace files back to back: a file starts at each "COLLPROF" (the format's
 * own magic) and runs to the next one, at most FA_MAX_FILES of them; bytes before the
 * first are ignored. So a seed is `cat` of a job's real *.cptrace files, and mutations move
 * records between ranks, drop ranks or add them. Before loading, each file's header hash
 * and every believable chunk's hashes and record count are made to hold again (rehash):
 * the reader's own fuzz target covers what it does with bad hashes, while here a mutated
 * record must get past them to the analysis, and the same input must take the same path in
 * every build (the replay test's reader enforces hashes). The files are loaded from memory
 * on this thread (cpa_model_load_mem) and the outputs written to memory (open_memstream):
 * no file is created, nothing shared is written.
 *
 * Beyond what the sanitizers catch, it asserts what the analyzer and exporters promise:
 * every time in the model at most CPA_TIME_MAX, job times within [0, INT64_MAX], operations'
 * parts inside the model, finite figures, sorted and unique rank lists; every exporter
 * succeeds, the JSON documents parse strictly, the text report is 80 columns of clean text,
 * every CSV record has the header's 25 fields, every Prometheus line is a comment or a
 * sample. fa_last says what the last input reached (the replay test checks the seeds
 * reach matching across ranks, hangs, mismatches and stragglers).
 * Built with -fsanitize=fuzzer under COLLPROF_FUZZ; test_analysis_fuzz_replay runs it over
 * tests/fuzzdata/analysis in every normal and sanitizer test run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "analyzer/analyzer.h"
#include "trace/trace_hash.h"
#include "exporters/exporters.h"
#include "tests/analyzer/fuzz_analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

fa_seen fa_last;

#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "fuzz_analysis: %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, sizeof v); }
static void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

/* The segment a rotated trace's file says in its first record (a SEGMENT), 0 for none. */
static uint32_t first_segment(const uint8_t *f, size_t len)
{
    const size_t at = CP_TRACE_HEADER_BYTES + CP_CHUNK_HEADER_BYTES;
    if (len < at + sizeof(cp_rec_segment))
        return 0;
    cp_rec_segment s;
    memcpy(&s, f + at, sizeof s);
    return s.h.type == CP_REC_SEGMENT && s.h.size >= sizeof s ? s.segment : 0;
}

/* The number of records that tile a payload exactly (sizes >= 8, multiples of 8), or -1. */
static long tiling_records(const uint8_t *p, size_t len)
{
    long n = 0;
    for (size_t at = 0; at < len; n++) {
        if (len - at < 4)
            return -1;
        uint16_t sz;
        memcpy(&sz, p + at + 2, sizeof sz);
        if (sz < 8 || sz % 8 || sz > len - at)
            return -1;
        at += sz;
    }
    return n;
}

/* Makes a file's hashes (and a chunk's record count, where its records tile it) hold. */
static void rehash(uint8_t *f, size_t len)
{
    if (len < CP_TRACE_HEADER_BYTES)
        return;
    wr64(f + offsetof(cp_file_header, header_hash),
         cp_trace_hash(f, offsetof(cp_file_header, header_hash)));
    uint32_t hb = rd32(f + offsetof(cp_file_header, header_bytes));
    size_t at = hb % 8 == 0 && hb >= CP_TRACE_HEADER_BYTES && hb <= len ? hb
                                                                       : CP_TRACE_HEADER_BYTES;
    while (at <= len && len - at >= CP_CHUNK_HEADER_BYTES) {
        uint8_t *ch = f + at;
        uint32_t payload = rd32(ch + offsetof(cp_chunk_header, payload_bytes));
        if (rd32(ch) != CP_CHUNK_MAGIC || payload % 8 || payload > CP_CHUNK_MAX_PAYLOAD ||
            payload > len - at - CP_CHUNK_HEADER_BYTES) {
            at += 8; /* not a chunk here: the reader resyncs in 8-byte steps too */
            continue;
        }
        uint8_t *pl = ch + CP_CHUNK_HEADER_BYTES;
        long n = tiling_records(pl, payload);
        if (n >= 0)
            wr32(ch + offsetof(cp_chunk_header, record_count), (uint32_t)n);
        wr64(ch + offsetof(cp_chunk_header, payload_hash), cp_trace_hash(pl, payload));
        wr32(ch + offsetof(cp_chunk_header, header_hash), cp_chunk_header_hash(ch));
        at += CP_CHUNK_HEADER_BYTES + payload;
    }
}

static int finite_nonneg(double v) { return v == v && v >= 0 && v < 1e300; }

static void require_ranks_sorted(const int32_t *r, size_t n)
{
    for (size_t i = 1; i < n; i++)
        REQUIRE(r[i - 1] < r[i]);
}

/* What the analysis promises of itself. */
static void check_analysis(const cpa_analysis *a)
{
    const cpa_model *m = a->model;
    REQUIRE(m->nranks > 0);
    for (size_t i = 0; i < m->nranks; i++) {
        const cpa_rank *r = &m->ranks[i];
        REQUIRE(r->first_ns <= CPA_TIME_MAX && r->last_ns <= CPA_TIME_MAX);
        REQUIRE(r->first_ns <= r->last_ns);
        for (size_t k = 0; k < r->nclocks; k++)
            REQUIRE(r->clocks[k].mono_ns <= CPA_TIME_MAX &&
                    r->clocks[k].realtime_ns <= CPA_TIME_MAX);
        for (size_t k = 0; k < r->ncalls; k++) {
            const cpa_call *c = &r->calls[k];
            REQUIRE(c->enter_ns <= CPA_TIME_MAX);
            REQUIRE(!c->gpu_timed || (c->gpu_start_ns <= c->gpu_end_ns &&
                                      c->gpu_end_ns <= CPA_TIME_MAX && c->done));
            REQUIRE(cpa_clock_job_ns(m, &a->clock, i, c->enter_ns) <= INT64_MAX);
            REQUIRE(cpa_clock_gpu_job_ns(m, &a->clock, i, c->gpu_end_ns) <= INT64_MAX);
        }
        REQUIRE(a->clock.rank_domain[i] < a->clock.ndomains);
    }
    REQUIRE(a->start_ns <= INT64_MAX && finite_nonneg(a->duration_s));
    const cpa_matched *mt = &a->matched;
    size_t multi = 0;
    for (size_t i = 0; i < mt->nops; i++) {
        const cpa_op *o = &mt->ops[i];
        REQUIRE(o->nparts > 0 && o->first_part + o->nparts <= mt->nparts);
        for (uint32_t k = 0; k < o->nparts; k++) {
            const cpa_part *p = &mt->parts[o->first_part + k];
            REQUIRE(p->rank_idx < m->nranks && p->call_idx < m->ranks[p->rank_idx].ncalls);
        }
        multi += o->nparts >= 2 &&
                 mt->parts[o->first_part].rank_idx != mt->parts[o->first_part + 1].rank_idx;
    }
    for (size_t i = 0; i < a->stats.nrows; i++) {
        const cpa_stat *s = &a->stats.rows[i];
        REQUIRE(s->ops > 0 && s->calls >= s->ops && s->nranks > 0);
        /* rows are (op, nranks, S), each once */
        REQUIRE(i == 0 || s->op != s[-1].op || s->nranks != s[-1].nranks || s->size > s[-1].size);
        REQUIRE(finite_nonneg(s->time_us_total) && finite_nonneg(s->time_us_p50) &&
                finite_nonneg(s->time_us_p99) && s->time_us_p50 <= s->time_us_p99);
        REQUIRE(finite_nonneg(s->algbw_gbps) && finite_nonneg(s->busbw_gbps));
    }
    REQUIRE(finite_nonneg(a->clock.error_us));
    const cpa_stragglers *st = &a->stragglers;
    REQUIRE(st->late <= st->judged && finite_nonneg(st->threshold_us));
    for (size_t i = 0; i < st->nrows; i++)
        REQUIRE(st->rows[i].rank_idx < m->nranks && st->rows[i].share >= 0 &&
                st->rows[i].share <= 1 && finite_nonneg(st->rows[i].late_us_total));
    for (size_t i = 0; i < a->hangs.nrows; i++) {
        require_ranks_sorted(a->hangs.rows[i].missing_ranks, a->hangs.rows[i].nmissing);
        require_ranks_sorted(a->hangs.rows[i].waiting_ranks, a->hangs.rows[i].nwaiting);
        REQUIRE(memchr(a->hangs.rows[i].last, '\0', sizeof a->hangs.rows[i].last));
    }
    REQUIRE(a->mismatches.nrows <= a->mismatches.total);
    for (size_t i = 0; i < a->mismatches.nrows; i++)
        REQUIRE(a->mismatches.rows[i].nculprits <= a->mismatches.rows[i].nvalues ||
                a->mismatches.rows[i].field == CPA_FIELD_PEER);
    fa_last.ranks = m->nranks;
    fa_last.hosts = a->clock.ndomains;
    fa_last.multi_rank_ops = multi;
    fa_last.hangs = a->hangs.nrows;
    fa_last.mismatches = a->mismatches.nrows;
    fa_last.stragglers = st->nrows;
}

typedef struct mem_out {
    char *data;
    size_t len;
    FILE *f;
} mem_out;

static FILE *out_open(mem_out *o)
{
    memset(o, 0, sizeof *o);
    o->f = open_memstream(&o->data, &o->len);
    REQUIRE(o->f);
    return o->f;
}

static char *out_close(mem_out *o)
{
    REQUIRE(fclose(o->f) == 0);
    return o->data;
}

static void require_strict_json(const char *s, size_t len)
{
    json_tokener *tok = json_tokener_new();
    REQUIRE(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, s, (int)len);
    REQUIRE(o && json_tokener_get_error(tok) == json_tokener_success);
    json_object_put(o);
    json_tokener_free(tok);
}

/* 80 code points a line, nothing below 0x20 but the newlines (no colour asked). */
/* No control character; lines of at most max_cols code points. */
static void require_clean_text(const char *s, size_t max_cols)
{
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n') {
            cols = 0;
            continue;
        }
        REQUIRE(*p >= 0x20 && *p != 0x7f);
        if ((*p & 0xc0) != 0x80)
            REQUIRE(++cols <= max_cols);
    }
}

/* RFC 4180 records of exactly 25 fields each, the last one ending the document. */
static void require_csv(const char *s)
{
    size_t fields = 1, records = 0;
    int quoted = 0, at_start = 1;
    for (const char *p = s; *p; p++) {
        if (quoted) {
            if (*p == '"' && p[1] == '"')
                p++;
            else if (*p == '"')
                quoted = 0;
            continue;
        }
        if (*p == '"') {
            REQUIRE(at_start);
            quoted = 1;
        } else if (*p == ',') {
            fields++;
            at_start = 1;
            continue;
        } else if (*p == '\n') {
            REQUIRE(fields == 25);
            fields = 1;
            records++;
            at_start = 1;
            continue;
        }
        at_start = 0;
    }
    REQUIRE(!quoted && fields == 1 && records >= 1);
}

/* "# HELP"/"# TYPE" lines, and samples: a metric name, labels maybe, a space, a value. */
static void require_prometheus(char *s)
{
    for (char *save = NULL, *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '#') {
            REQUIRE(!strncmp(l, "# HELP collprof_", 16) || !strncmp(l, "# TYPE collprof_", 16));
            continue;
        }
        REQUIRE(!strncmp(l, "collprof_", 9));
        size_t n = strspn(l, "abcdefghijklmnopqrstuvwxyz_0123456789");
        REQUIRE(l[n] == '{' || l[n] == ' ');
        REQUIRE(strrchr(l, ' ') && strrchr(l, ' ')[1] != '\0');
    }
}

/* Protobuf's wire format, walked: every field's tag, varint and length within its message.
 * A Trace's packets (field 1) and their track events and descriptors (11, 60) are messages;
 * the debug annotations in an event (4) and the descriptors' parts (3, 4, 8) too. */
static const uint8_t *pb_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
        uint8_t b = *p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return p;
    }
    return NULL;
}

static void require_message(const uint8_t *p, const uint8_t *end, int level)
{
    while (p < end) {
        uint64_t tag, len;
        p = pb_varint(p, end, &tag);
        REQUIRE(p && (tag >> 3) != 0);
        switch (tag & 7) {
        case 0: p = pb_varint(p, end, &len); REQUIRE(p); break;
        case 1: REQUIRE(end - p >= 8); p += 8; break;
        case 2:
            p = pb_varint(p, end, &len);
            REQUIRE(p && len <= (uint64_t)(end - p));
            unsigned field = (unsigned)(tag >> 3);
            if ((level == 0 && field == 1) ||
                (level == 1 && (field == 11 || field == 60)) ||
                (level == 2 && (field == 3 || field == 4 || field == 8)))
                require_message(p, p + len, level + 1);
            p += len;
            break;
        default: REQUIRE(0); /* we write no other wire type */
        }
    }
}

static void export_all(const cpa_analysis *a)
{
    mem_out o;
    cpx_text_options to = {.top = 3, .color = 0, .title = "fuzz"};
    REQUIRE(cpx_report_text(out_open(&o), a, &to) == 0);
    require_clean_text(out_close(&o), 80);
    free(o.data);
    to.rows = CPA_ROWS_BUCKETS;
    REQUIRE(cpx_report_text(out_open(&o), a, &to) == 0);
    require_clean_text(out_close(&o), 80);
    free(o.data);
    /* nccl-tests' own lines are 88 columns wide */
    REQUIRE(cpx_report_nccl_tests(out_open(&o), a, "fuzz") == 0);
    require_clean_text(out_close(&o), 100);
    free(o.data);
    REQUIRE(cpx_report_json(out_open(&o), a, 0) == 0);
    out_close(&o);
    require_strict_json(o.data, o.len);
    free(o.data);
    REQUIRE(cpx_export_perfetto(out_open(&o), a) == 0);
    out_close(&o);
    require_strict_json(o.data, o.len);
    free(o.data);
    cpx_piece piece = {.t0_ns = INT64_MIN, .t1_ns = INT64_MAX, .proto = 1};
    cpx_piece_said said;
    REQUIRE(cpx_export_perfetto_piece(out_open(&o), a, &piece, &said) == 0);
    out_close(&o);
    require_message((const uint8_t *)o.data, (const uint8_t *)o.data + o.len, 0);
    free(o.data);
    REQUIRE(cpx_export_csv(out_open(&o), a) == 0);
    require_csv(out_close(&o));
    free(o.data);
    REQUIRE(cpx_export_prometheus(out_open(&o), a) == 0);
    require_prometheus(out_close(&o));
    free(o.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char magic[] = CP_TRACE_MAGIC;
    const size_t mlen = sizeof magic - 1;
    size_t start[FA_MAX_FILES + 1], n = 0;
    memset(&fa_last, 0, sizeof fa_last);
    for (size_t at = 0; n < FA_MAX_FILES && at + mlen <= size;) {
        const uint8_t *p = memmem(data + at, size - at, magic, mlen);
        if (!p)
            break;
        start[n++] = (size_t)(p - data);
        at = start[n - 1] + mlen;
    }
    if (!n)
        return 0;
    start[n] = size;
    /* A file ends where the next begins, or at the end when FA_MAX_FILES are taken. */
    cpa_mem_file files[FA_MAX_FILES];
    char names[FA_MAX_FILES][48];
    size_t group = 0;
    uint32_t prev_seg = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = (i + 1 < n ? start[i + 1] : size) - start[i];
        uint8_t *f = malloc(len);
        REQUIRE(f);
        memcpy(f, data + start[i], len);
        rehash(f, len);
        /* A rotated trace's later segment (its first record a SEGMENT past 0) after an
         * earlier one of the same process is named as the writer names it, so the loader
         * joins them: a seed is a job's segments back to back, each process's in order. */
        uint32_t seg = first_segment(f, len);
        if (seg && i && seg > prev_seg)
            snprintf(names[i], sizeof names[i], "rank%02zu.s%06u%s", group, seg,
                     CP_TRACE_FILE_SUFFIX);
        else
            snprintf(names[i], sizeof names[i], "rank%02zu%s", group = i, CP_TRACE_FILE_SUFFIX);
        prev_seg = seg;
        files[i] = (cpa_mem_file){.name = names[i], .data = f, .len = len};
    }
    char err[256] = "";
    cpa_model *m = NULL;
    int rc = cpa_model_load_mem(files, n, &m, err, sizeof err);
    for (size_t i = 0; i < n; i++)
        free((void *)files[i].data);
    if (rc) {
        REQUIRE(err[0] && !memchr(err, '\n', strnlen(err, sizeof err)));
        return 0;
    }
    cpa_analysis a;
    REQUIRE(cpa_analyze_model(m, &a, NULL, NULL, err, sizeof err) == 0);
    check_analysis(&a);
    export_all(&a);
    cpa_analysis_free(&a);
    return 0;
}
