/* The Prometheus export of the synthetic job (exp_job.h), checked by a format checker
 * written here after promtool's rules (`promtool check metrics`: the text format parser
 * plus its lint) and what node_exporter's textfile collector accepts; the checker is itself
 * tested on inputs each rule must refuse, so a pass means something. */
#include "tests/exporters/exp_job.h"

#include <ctype.h>
#include <math.h>

#include "exporters/exporters.h"

/* ---- the checker ---- */

#define MAX_FAMILIES 256
#define MAX_SERIES 4096

typedef struct family {
    char name[128];
    char type[16];
    int help, typed, samples, closed;
} family;

typedef struct checker {
    family fam[MAX_FAMILIES];
    size_t nfam;
    char *series[MAX_SERIES];
    size_t nseries;
    family *current;
    char err[512];
} checker;

static int bad(checker *c, int line, const char *fmt, const char *what)
{
    /* a quoted line is cut to 200 bytes: the message must fit, whatever the input */
    char w[201], msg[400];
    size_t n = strnlen(what, sizeof w - 1);
    memcpy(w, what, n);
    w[n] = '\0';
    snprintf(msg, sizeof msg, fmt, w);
    snprintf(c->err, sizeof c->err, "line %d: %s", line, msg);
    return -1;
}

static int is_metric_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
            return 0;
    return 1;
}

static int is_label_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    if (n >= 2 && s[0] == '_' && s[1] == '_')
        return 0; /* reserved for Prometheus itself */
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* Go's strconv.ParseFloat as the text format uses it: decimal or exponent forms, +Inf,
 * -Inf, NaN; no hex, no spaces. */
static int is_float(const char *s, double *v)
{
    if (!strcmp(s, "+Inf") || !strcmp(s, "Inf")) {
        *v = INFINITY;
        return 1;
    }
    if (!strcmp(s, "-Inf")) {
        *v = -INFINITY;
        return 1;
    }
    if (!strcmp(s, "NaN")) {
        *v = NAN;
        return 1;
    }
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    int digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            digits++;
    if (!digits)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p)
        return 0;
    *v = strtod(s, NULL);
    return 1;
}

static family *find_family(checker *c, const char *name, size_t n)
{
    for (size_t i = 0; i < c->nfam; i++)
        if (strlen(c->fam[i].name) == n && !memcmp(c->fam[i].name, name, n))
            return &c->fam[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* "# HELP name text" or "# TYPE name type" */
static int meta_line(checker *c, int ln, const char *line)
{
    int help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
    if (!help && !type)
        return 0; /* any other comment is allowed */
    const char *name = line + 7;
    size_t n = strcspn(name, " ");
    if (!is_metric_name(name, n))
        return bad(c, ln, "bad metric name in '%s'", line);
    if (name[n] != ' ')
        return bad(c, ln, "no text after the name in '%s'", line);
    const char *rest = name + n + 1;
    family *f = find_family(c, name, n);
    if (f && (f->closed || f->samples))
        return bad(c, ln, "HELP or TYPE after the family's samples: '%s'", line);
    if (!f) {
        if (c->current)
            c->current->closed = 1;
        if (c->nfam == MAX_FAMILIES)
            return bad(c, ln, "%s", "too many families");
        f = &c->fam[c->nfam++];
        memset(f, 0, sizeof *f);
        memcpy(f->name, name, n < sizeof f->name ? n : sizeof f->name - 1);
        c->current = f;
    }
    if (help) {
        if (f->help++)
            return bad(c, ln, "second HELP: '%s'", line);
        if (!*rest)
            return bad(c, ln, "empty help text: '%s'", line);
        for (const char *p = rest; *p; p++)
            if (*p == '\\' && p[1] != '\\' && p[1] != 'n')
                return bad(c, ln, "bad escape in help text: '%s'", line);
            else if (*p == '\\')
                p++;
        return 0;
    }
    if (f->typed++)
        return bad(c, ln, "second TYPE: '%s'", line);
    if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") &&
        strcmp(rest, "summary") && strcmp(rest, "untyped"))
        return bad(c, ln, "unknown type in '%s'", line);
    snprintf(f->type, sizeof f->type, "%s", rest);
    /* promtool's lint */
    if (!strcmp(rest, "counter") && !ends_with(f->name, "_total"))
        return bad(c, ln, "counter without the _total suffix: '%s'", line);
    if (strcmp(rest, "counter") && ends_with(f->name, "_total"))
        return bad(c, ln, "non-counter with the _total suffix: '%s'", line);
    if (strcmp(rest, "histogram") && strcmp(rest, "summary") &&
        (ends_with(f->name, "_count") || ends_with(f->name, "_sum") ||
         ends_with(f->name, "_bucket")))
        return bad(c, ln, "reserved suffix on a non-histogram, non-summary: '%s'", line);
    for (const char *p = f->name; *p; p++)
        if (isupper((unsigned char)*p))
            return bad(c, ln, "not snake_case: '%s'", line);
    if (strstr(f->name, "milliseconds") || strstr(f->name, "microseconds") ||
        strstr(f->name, "nanoseconds") || strstr(f->name, "kilobytes") ||
        strstr(f->name, "megabytes") || strstr(f->name, "gigabytes"))
        return bad(c, ln, "not a base unit: '%s'", line);
    return 0;
}

typedef struct label {
    char name[64];
    char value[600];
} label;

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const label *)a)->name, ((const label *)b)->name);
}

static int sample_line(checker *c, int ln, const char *line)
{
    size_t n = strcspn(line, "{ ");
    if (!is_metric_name(line, n))
        return bad(c, ln, "bad metric name in '%s'", line);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)n, line);
    label labels[16];
    size_t nl = 0;
    const char *p = line + n;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            size_t k = strcspn(p, "=");
            if (!is_label_name(p, k) || p[k] != '=' || p[k + 1] != '"')
                return bad(c, ln, "bad label in '%s'", line);
            if (nl == 16)
                return bad(c, ln, "too many labels in '%s'", line);
            label *l = &labels[nl++];
            snprintf(l->name, sizeof l->name, "%.*s", (int)k, p);
            p += k + 2;
            size_t v = 0;
            while (*p != '"') {
                if (*p == '\0' || *p == '\n')
                    return bad(c, ln, "unterminated label value in '%s'", line);
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        return bad(c, ln, "bad escape in a label value: '%s'", line);
                    p++;
                }
                if (v + 1 < sizeof l->value)
                    l->value[v++] = *p;
                p++;
            }
            l->value[v] = '\0';
            p++;
            if (*p == ',') {
                p++;
                if (*p == '}')
                    return bad(c, ln, "trailing comma in '%s'", line);
            } else if (*p != '}') {
                return bad(c, ln, "bad label list in '%s'", line);
            }
        }
        p++;
    }
    if (*p != ' ')
        return bad(c, ln, "no value in '%s'", line);
    p++;
    if (strchr(p, ' '))
        return bad(c, ln, "a timestamp (the textfile collector refuses them): '%s'", line);
    double value;
    if (!is_float(p, &value))
        return bad(c, ln, "bad value in '%s'", line);
    qsort(labels, nl, sizeof *labels, cmp_label);
    for (size_t i = 1; i < nl; i++)
        if (!strcmp(labels[i].name, labels[i - 1].name))
            return bad(c, ln, "a label twice in '%s'", line);

    /* Which family: its own name, or a summary's/histogram's _sum, _count, _bucket. */
    family *f = c->current;
    if (!f)
        return bad(c, ln, "a sample before any HELP/TYPE: '%s'", line);
    int is_summary = !strcmp(f->type, "summary"), is_hist = !strcmp(f->type, "histogram");
    const char *suffix = name + strlen(f->name);
    if (strncmp(name, f->name, strlen(f->name)) ||
        !(*suffix == '\0' || ((is_summary || is_hist) && (!strcmp(suffix, "_sum") ||
                                                          !strcmp(suffix, "_count"))) ||
          (is_hist && !strcmp(suffix, "_bucket"))))
        return bad(c, ln, "a sample outside its family's group (or with no HELP/TYPE): '%s'",
                   line);
    if (!f->help || !f->typed)
        return bad(c, ln, "a family without HELP and TYPE: '%s'", line);
    int has_quantile = 0;
    for (size_t i = 0; i < nl; i++)
        if (!strcmp(labels[i].name, "quantile")) {
            double q;
            if (!is_float(labels[i].value, &q))
                return bad(c, ln, "bad quantile in '%s'", line);
            has_quantile = 1;
        }
    if (is_summary && (*suffix == '\0') != has_quantile)
        return bad(c, ln, "a summary's quantile label wrong in '%s'", line);
    if (!strcmp(f->type, "counter") && (value < 0 || isnan(value)))
        return bad(c, ln, "a counter below zero or NaN: '%s'", line);
    f->samples++;

    char key[2048];
    size_t kl = (size_t)snprintf(key, sizeof key, "%s", name);
    for (size_t i = 0; i < nl && kl < sizeof key; i++)
        kl += (size_t)snprintf(key + kl, sizeof key - kl, "|%s=%s", labels[i].name,
                               labels[i].value);
    for (size_t i = 0; i < c->nseries; i++)
        if (!strcmp(c->series[i], key))
            return bad(c, ln, "a series twice: '%s'", line);
    if (c->nseries == MAX_SERIES)
        return bad(c, ln, "%s", "too many series");
    c->series[c->nseries++] = strdup(key);
    return 0;
}

/* NULL when text is a valid exposition, else why not (static storage). */
static const char *check_exposition(const char *text)
{
    static checker c;
    for (size_t i = 0; i < c.nseries; i++)
        free(c.series[i]);
    memset(&c, 0, sizeof c);
    size_t len = strlen(text);
    if (len == 0)
        return "empty";
    if (text[len - 1] != '\n')
        return "no newline at the end";
    int ln = 0, rc = 0;
    for (const char *p = text; *p && !rc;) {
        const char *nl = strchr(p, '\n');
        char line[2048];
        size_t n = (size_t)(nl - p);
        if (n >= sizeof line)
            return "line too long";
        memcpy(line, p, n);
        line[n] = '\0';
        ln++;
        if (memchr(line, '\r', n))
            rc = bad(&c, ln, "%s", "a carriage return");
        else if (n == 0)
            rc = bad(&c, ln, "%s", "an empty line");
        else if (line[0] == '#')
            rc = meta_line(&c, ln, line);
        else
            rc = sample_line(&c, ln, line);
        p = nl + 1;
    }
    for (size_t i = 0; !rc && i < c.nfam; i++)
        if (!c.fam[i].help || !c.fam[i].typed)
            rc = bad(&c, 0, "family %s without HELP or TYPE", c.fam[i].name);
    return rc ? c.err : NULL;
}

/* ---- the checker refuses what promtool refuses ---- */

static void the_checker_refuses_each_broken_rule(void **state)
{
    (void)state;
    static const char good[] =
        "# HELP a_total A.\n# TYPE a_total counter\na_total{op=\"x\\\"y\\\\z\\n\"} 1\n"
        "# HELP d_seconds D.\n# TYPE d_seconds summary\nd_seconds{quantile=\"0.5\"} 1e-05\n"
        "d_seconds_sum 3\nd_seconds_count 2\n# HELP g G.\n# TYPE g gauge\ng +Inf\n";
    assert_null(check_exposition(good));
    static const char *const broken[] = {
        "# HELP a_total A.\n# TYPE a_total counter\na_total 1",            /* no final \n */
        "a_total 1\n",                                                     /* no HELP/TYPE */
        "# HELP a A.\n# TYPE a counter\na 1\n",                            /* counter, no _total */
        "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n",            /* gauge _total */
        "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\na 1\n",              /* TYPE twice */
        "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\na 2\n", /* split */
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",       /* same series */
        "# HELP a A.\n# TYPE a gauge\na 1,5\n",                            /* bad float */
        "# HELP a A.\n# TYPE a gauge\na inf\n",                            /* Go wants +Inf */
        "# HELP a A.\n# TYPE a gauge\na{x=\"a\\tb\"} 1\n",                 /* bad escape */
        "# HELP a A.\n# TYPE a gauge\na{x=\"a\nb\"} 1\n",                  /* raw newline */
        "# HELP a A.\n# TYPE a gauge\na{1x=\"a\"} 1\n",                    /* label name */
        "# HELP a A.\n# TYPE a gauge\na{__x=\"a\"} 1\n",                   /* reserved */
        "# HELP 1a A.\n# TYPE 1a gauge\n1a 1\n",                           /* metric name */
        "# HELP a A.\n# TYPE a gauge\na 1 1700000000\n",                   /* timestamp */
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n",             /* label twice */
        "# HELP a_total A.\n# TYPE a_total counter\na_total -1\n",         /* counter < 0 */
        "# HELP a A.\n# TYPE a summary\na 1\n",                            /* no quantile */
        "# HELP aMs A.\n# TYPE aMs gauge\naMs 1\n",                        /* camelCase */
        "# HELP a_milliseconds A.\n# TYPE a_milliseconds gauge\na_milliseconds 1\n",
        "# HELP a A.\n# TYPE a gauge\n\na 1\n",                            /* empty line */
        "# HELP a A.\n# TYPE a gauge\na 1\n# HELP a A.\n",                 /* HELP after */
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        if (check_exposition(broken[i]) == NULL)
            fail_msg("the checker accepted broken input #%zu:\n%s", i, broken[i]);
}

/* ---- the export ---- */

static char *export_of(const cpa_analysis *a)
{
    exp_buf b;
    assert_int_equal(cpx_export_prometheus(exp_buf_open(&b), a), 0);
    return exp_buf_close(&b);
}

static void assert_valid(const char *text)
{
    const char *why = check_exposition(text);
    if (why)
        fail_msg("invalid exposition: %s\n%s", why, text);
}

static void the_export_passes_and_holds_the_jobs_numbers(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    exp_set_findings(&a);
    char *t = export_of(&a);
    assert_valid(t);
    static const char *const lines[] = {
        "collprof_ranks 4\n",
        "collprof_records_total 151\n",
        "collprof_lost_records_total 0\n",
        "collprof_ops_total{op=\"AllReduce\"} 10\n",
        "collprof_ops_total{op=\"AllGather\"} 5\n",
        "collprof_ops_total{op=\"Send\"} 1\n",
        "collprof_bytes_total{op=\"AllReduce\"} 10485760\n",
        "collprof_op_duration_seconds{op=\"AllGather\",nranks=\"4\",bytes=\"1048576\","
        "quantile=\"0.5\"} 5e-06\n",
        "collprof_op_duration_seconds_count{op=\"AllReduce\",nranks=\"4\",bytes=\"1048576\"} 10\n",
        "collprof_busbw_bytes_per_second{op=\"AllReduce\",nranks=\"4\",bytes=\"1048576\"} "
        "1.572864e+11\n",
        "collprof_algbw_bytes_per_second{op=\"Send\",nranks=\"4\",bytes=\"4096\"} "
        "1365333333.3333333\n",
        "collprof_straggler_kind{kind=\"persistent\"} 1\n",
        "collprof_straggler_late_collectives_total{rank=\"3\"} 5\n",
        "collprof_straggler_late_seconds_total{rank=\"3\"} 7.5e-05\n",
        "collprof_straggler_share{rank=\"1\"} 0.06666666666666667\n",
        "collprof_straggler_late_by_cause_total{rank=\"3\",cause=\"gpu_backlog\"} 4\n",
        "collprof_straggler_late_by_cause_total{rank=\"3\",cause=\"host\"} 1\n",
        "collprof_hangs 1\n",
        "collprof_hang_info{comm=\"9f2c0e1d22aa4b01\",seq=\"10\",op=\"AllReduce\","
        "verdict=\"RANK_NOT_JOINED\",missing_ranks=\"2\"} 1\n",
        "collprof_mismatches 1\n",
        "collprof_mismatch_info{comm=\"9f2c0e1d22aa4b01\",seq=\"3\",field=\"count\","
        "culprit_ranks=\"3\"} 1\n",
        "collprof_clock_aligned 1\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(t, lines[i]))
            fail_msg("no line '%s' in:\n%s", lines[i], t);
    free(t);

    /* The same job as the analyzer sees it (no findings) passes as well. */
    cpa_analysis b;
    exp_analyze(dir, &b);
    t = export_of(&b);
    assert_valid(t);
    assert_non_null(strstr(t, "\ncollprof_hangs 0\n"));
    free(t);
    cpa_analysis_free(&b);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

/* Label values from the trace: control characters and invalid UTF-8 as \\xNN (common/text.h),
 * then \\, \" escaped; the same rank claimed by two files appears once (no duplicate series). */
/* What a holed trace lacks, by kind, for a dashboard; a whole one exports zeros. */
static void holes_are_exported_by_kind(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job_with_holes(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *t = export_of(&a);
    assert_valid(t);
    static const char *const lines[] = {
        "collprof_lost_records_total 12\n",
        "collprof_lost_records_by_cause_total{cause=\"ring_full\"} 10\n",
        "collprof_lost_records_by_cause_total{cause=\"at_end\"} 2\n",
        "collprof_trace_unknown_records_total 1\n",
        "collprof_trace_missing_chunks_total 0\n",
        "collprof_trace_truncated_files 0\n",
        "collprof_trace_ranks_with_holes 1\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(t, lines[i]))
            fail_msg("no line '%s' in:\n%s", lines[i], t);
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void refused_calls_are_counted_by_result(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_refused_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    char *t = export_of(&a);
    assert_valid(t);
    assert_non_null(strstr(t, "collprof_refused_calls_total{result=\"ncclInvalidArgument\"} 1\n"));
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void hostile_labels_are_escaped_and_ranks_unique(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    snprintf(a.model->ranks[2].hostname, sizeof a.model->ranks[2].hostname,
             "a\"b\\c\nd\033\xff");
    a.model->ranks[3].rank = 2; /* two files say rank 2 */
    char *t = export_of(&a);
    assert_valid(t);
    assert_non_null(strstr(t, "collprof_rank_nccl_share{rank=\"2\",host=\"a\\\"b\\\\c\\\\x0ad"
                              "\\\\x1b\\\\xff\"} "));
    free(t);
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

static void a_failed_stream_is_an_error(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    exp_write_job(dir);
    cpa_analysis a;
    exp_analyze(dir, &a);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(cpx_export_prometheus(full, &a), -1);
        fclose(full);
    }
    cpa_analysis_free(&a);
    tt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_checker_refuses_each_broken_rule),
        cmocka_unit_test(the_export_passes_and_holds_the_jobs_numbers),
        cmocka_unit_test(holes_are_exported_by_kind),
        cmocka_unit_test(refused_calls_are_counted_by_result),
        cmocka_unit_test(hostile_labels_are_escaped_and_ranks_unique),
        cmocka_unit_test(a_failed_stream_is_an_error),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    check_exposition("# HELP a A.\n# TYPE a gauge\n"); /* frees the checker's series */
    return rc;
}
