/* analyzer/model.c: the model's memory (growth, warnings, free) and how its holes read.
 * Loading is in load.c. */
#include "analyzer/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void cpa_populate(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || len < 64 * (size_t)page)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

int cpa_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -1;
        n *= 2;
    }
    void *p = realloc(*arr, n * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = n;
    return 0;
}

const char *cpa_call_site(const cpa_rank *r, const cpa_call *c)
{
    return c->site_index < r->nsites ? r->sites[c->site_index] : NULL;
}

int cpa_model_warn(cpa_model *m, const char *fmt, ...)
{
    if (m->nwarnings >= CPA_MAX_WARNINGS) {
        m->dropped_warnings++;
        return 0;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cpa_grow((void **)&m->warnings, &m->cap_warnings, m->nwarnings + 1, sizeof(char *)))
        return -1;
    char *copy = strdup(line);
    if (!copy)
        return -1;
    m->warnings[m->nwarnings++] = copy;
    return 0;
}

void cpa_model_free(cpa_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nranks; i++) {
        free(m->ranks[i].path);
        free(m->ranks[i].comms);
        free(m->ranks[i].comm_at);
        free(m->ranks[i].census);
        free(m->ranks[i].calls);
        free(m->ranks[i].nccl_seqs);
        free(m->ranks[i].clocks);
        free(m->ranks[i].streams);
        free(m->ranks[i].hangs);
        free(m->ranks[i].knames);
        free(m->ranks[i].kernels);
        for (size_t k = 0; k < m->ranks[i].nsites; k++)
            free(m->ranks[i].sites[k]);
        free(m->ranks[i].sites);
    }
    free(m->ranks);
    for (size_t i = 0; i < m->nwarnings; i++)
        free(m->warnings[i]);
    free(m->warnings);
    free(m);
}

void cpa_integrity_text(char *buf, size_t len, const cpa_integrity *g, uint64_t lost)
{
    size_t n = 0;
    if (!len)
        return;
    buf[0] = '\0';
#define CPA_PUT(...)                                                                     \
    do {                                                                                 \
        if (n < len)                                                                     \
            n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                        \
    } while (0)
    uint64_t by_cause = 0;
    for (unsigned c = 0; c <= CP_LOST_CAUSE_LAST; c++)
        by_cause = cpa_sat_add(by_cause, g->lost_by_cause[c]);
    if (lost < by_cause)
        lost = by_cause;
    if (lost) {
        CPA_PUT("%" PRIu64 " record%s lost", lost, lost == 1 ? "" : "s");
        const char *sep = " (";
        for (unsigned c = 1; c <= CP_LOST_CAUSE_LAST; c++)
            if (g->lost_by_cause[c]) {
                CPA_PUT("%s%" PRIu64 " %s", sep, g->lost_by_cause[c], cp_lost_cause_name(c));
                sep = ", ";
            }
        /* the chunk headers' total counts drops whose LOST record never reached the disk */
        uint64_t untold = lost - (by_cause - g->lost_by_cause[0]);
        if (untold && sep[0] == ',')
            CPA_PUT("%s%" PRIu64 " cause unknown", sep, untold);
        if (sep[0] == ',')
            CPA_PUT(")");
    }
    if (g->unknown_records)
        CPA_PUT("%s%" PRIu64 " of an unknown type", n ? ", " : "", g->unknown_records);
    if (g->missing_chunks)
        CPA_PUT("%s%" PRIu64 " chunk%s missing", n ? ", " : "", g->missing_chunks,
                g->missing_chunks == 1 ? "" : "s");
    if (g->corrupt_chunks && g->corrupt_chunks != g->missing_chunks)
        CPA_PUT("%s%" PRIu64 " corrupt", n ? ", " : "", g->corrupt_chunks);
    if (g->truncated)
        CPA_PUT("%s%" PRIu64 " file%s cut short", n ? ", " : "", g->truncated,
                g->truncated == 1 ? "" : "s");
#undef CPA_PUT
}

void cpa_untimed_text(char *buf, size_t len, const cpa_integrity *g)
{
    uint64_t all = 0;
    size_t n = 0;
    if (!len)
        return;
    buf[0] = '\0';
    for (unsigned c = 0; c <= CP_UNTIMED_CAUSE_LAST; c++)
        all = cpa_sat_add(all, g->untimed_by_cause[c]);
    if (!all)
        return;
    n += (size_t)snprintf(buf, len, "%" PRIu64 " call%s untimed:", all, all == 1 ? "" : "s");
    const char *sep = " ";
    for (unsigned c = 0; c <= CP_UNTIMED_CAUSE_LAST && n < len; c++)
        if (g->untimed_by_cause[c]) {
            static const char *const words[CP_UNTIMED_CAUSE_LAST + 1] = {
                "cause unknown", "event pool exhausted", "plugin pool full",
                "group too large", "no CUDA context"};
            const char *why = words[c];
            n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64 " %s", sep,
                                  g->untimed_by_cause[c], why);
            sep = ", ";
        }
}

long cpa_rank_index(const cpa_model *m, int32_t rank)
{
    /* Ranks are sorted by rank (load.c); files without one sort first as -1. */
    size_t lo;
    CP_LOWER_BOUND(lo, m->nranks, i, m->ranks[i].rank < rank);
    return lo < m->nranks && m->ranks[lo].rank == rank ? (long)lo : -1;
}

/* Selection: the k-th smallest of v[lo..hi] put at v[k], smaller ones before it, larger
 * after. The clock stage takes medians of millions of end differences (each operation's
 * ends, each pair of ranks' differences), the straggler judge one per late operation.
 *
 * Partitions without branches (the element swapped in whatever it is, the boundary moved by
 * the comparison's 0 or 1): a median's comparisons go either way at random, and Hoare's
 * partition mispredicted half of them, ~11 ns an element at 128 or 1024 elements against
 * ~2.6 ns (bench/bench_analyzer's job: selection was a sixth of the analysis). The pivot is
 * the median of three, or above SELECT_SAMPLE elements Floyd and Rivest's (CACM 1975,
 * algorithm 489): a sample's own selection puts an estimate of the k-th at v[k], so the
 * partition that follows leaves little to go on with. */
#define SELECT_SAMPLE 1200
#define SELECT_SMALL 4

static void swap_d(double *v, ptrdiff_t a, ptrdiff_t b)
{
    double x = v[a];
    v[a] = v[b];
    v[b] = x;
}

/* Hoare's, for a range whose pivot compares with nothing (a NaN): the way taken before,
 * which ends whatever the values. */
static void select_hoare(double *v, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t k)
{
    while (hi > lo) {
        double t = v[k];
        ptrdiff_t i = lo, j = hi;
        swap_d(v, lo, k);
        if (v[hi] > t)
            swap_d(v, hi, lo);
        while (i < j) {
            swap_d(v, i, j);
            i++;
            j--;
            while (v[i] < t)
                i++;
            while (v[j] > t)
                j--;
        }
        if (v[lo] == t) {
            swap_d(v, lo, j);
        } else {
            j++;
            swap_d(v, j, hi);
        }
        if (j <= k)
            lo = j + 1;
        if (k <= j)
            hi = j - 1;
    }
}

/* Those of v[lo..hi] below t (le: at most t) first; returns where the rest start. */
static ptrdiff_t part_below(double *v, ptrdiff_t lo, ptrdiff_t hi, double t, int le)
{
    ptrdiff_t i = lo;
    if (le)
        for (ptrdiff_t j = lo; j <= hi; j++) {
            double x = v[j];
            v[j] = v[i];
            v[i] = x;
            i += x <= t;
        }
    else
        for (ptrdiff_t j = lo; j <= hi; j++) {
            double x = v[j];
            v[j] = v[i];
            v[i] = x;
            i += x < t;
        }
    return i;
}

static void select_range(double *v, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t k)
{
    while (hi - lo > SELECT_SMALL) {
        double t;
        if (hi - lo > SELECT_SAMPLE) {
            double n = (double)(hi - lo + 1), i = (double)(k - lo + 1), z = log(n);
            double s = 0.5 * exp(2 * z / 3);
            double sd = 0.5 * sqrt(z * s * (n - s) / n) * (i - n / 2 < 0 ? -1 : 1);
            ptrdiff_t nlo = (ptrdiff_t)((double)k - i * s / n + sd);
            ptrdiff_t nhi = (ptrdiff_t)((double)k + (n - i) * s / n + sd);
            select_range(v, nlo > lo ? nlo : lo, nhi < hi ? nhi : hi, k);
            t = v[k];
        } else {
            double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
            double mn = a < b ? a : b, mx = a < b ? b : a;
            t = mx < c ? mx : c;
            t = mn > t ? mn : t;
        }
        ptrdiff_t i = part_below(v, lo, hi, t, 0);
        if (k < i) {
            hi = i - 1;
            continue;
        }
        if (i > lo) {
            lo = i;
            continue;
        }
        /* nothing below t: those equal to it next, so that the range always shrinks */
        ptrdiff_t e = part_below(v, lo, hi, t, 1);
        if (e == lo) {
            select_hoare(v, lo, hi, k);
            return;
        }
        if (k < e)
            return; /* v[k] == t */
        lo = e;
    }
    for (ptrdiff_t i = lo + 1; i <= hi; i++) { /* a few left: insertion */
        double x = v[i];
        ptrdiff_t j = i;
        for (; j > lo && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Up to 8 values sorted by a network of 19 compare-exchanges (Knuth's, 5.3.4) on registers,
 * padded with +inf: minimum and maximum instructions, no branch to mispredict, where a
 * partition's were 65 ns for 8 (bench_analyzer's job takes 0.7 M such medians, of its
 * operations within a host). NaNs order with nothing: those go the general way. 0 when it
 * did not. */
#define CX(a, b)                                                                           \
    do {                                                                                   \
        double lo_ = a < b ? a : b, hi_ = a > b ? a : b;                                   \
        a = lo_;                                                                           \
        b = hi_;                                                                           \
    } while (0)

static int select_small(double *v, size_t n)
{
    double t[8];
    int nan = 0;
    for (size_t i = 0; i < 8; i++) {
        t[i] = i < n ? v[i] + 0.0 : INFINITY; /* -0.0 as +0.0: equal values alike in bits */
        nan |= t[i] != t[i];
    }
    if (nan)
        return 0;
    double a0 = t[0], a1 = t[1], a2 = t[2], a3 = t[3], a4 = t[4], a5 = t[5], a6 = t[6],
           a7 = t[7];
    CX(a0, a2); CX(a1, a3); CX(a4, a6); CX(a5, a7);
    CX(a0, a4); CX(a1, a5); CX(a2, a6); CX(a3, a7);
    CX(a0, a1); CX(a2, a3); CX(a4, a5); CX(a6, a7);
    CX(a2, a4); CX(a3, a5);
    CX(a1, a4); CX(a3, a6);
    CX(a1, a2); CX(a3, a4); CX(a5, a6);
    t[0] = a0, t[1] = a1, t[2] = a2, t[3] = a3, t[4] = a4, t[5] = a5, t[6] = a6, t[7] = a7;
    memcpy(v, t, n * sizeof *v);
    return 1;
}

double cpa_select(double *v, size_t n, size_t k)
{
    if (n == 1)
        return v[0];
    if (n <= 8 && select_small(v, n))
        return v[k];
    select_range(v, 0, (ptrdiff_t)n - 1, (ptrdiff_t)k);
    return v[k];
}

/* Room for four times what is kept: each spill drops at least three quarters of it, so
 * however the values come (a falling run keeps every one) the selections cost O(values). */
int cpa_smallest_init(cpa_smallest *s, size_t keep)
{
    *s = (cpa_smallest){.keep = keep ? keep : 1, .below = INFINITY};
    s->cap = 4 * s->keep + 1024;
    s->v = malloc(s->cap * sizeof *s->v);
    return s->v ? 0 : -1;
}

/* Full: the keep smallest to the front, the rest dropped, and nothing at or above the
 * largest of those taken again (the keep smallest are there already, however many equal). */
void cpa_smallest_spill(cpa_smallest *s)
{
    if (s->n <= s->keep)
        return;
    s->below = cpa_select(s->v, s->n, s->keep - 1);
    s->n = s->keep;
}

double cpa_smallest_get(cpa_smallest *s, size_t k)
{
    return cpa_select(s->v, s->n, k);
}

void cpa_smallest_free(cpa_smallest *s)
{
    free(s->v);
    s->v = NULL;
}

/* Hoare's selection for integers (job times: a double cannot always hold one): the
 * straggler judge's median entry per late operation, the clock anchors' per cluster. */
int64_t cpa_select_i64(int64_t *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (hi > lo) {
        int64_t p = v[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < p)
                i++;
            while (v[j] > p)
                j--;
            if (i <= j) {
                int64_t x = v[i];
                v[i++] = v[j];
                v[j--] = x;
            }
        }
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

void cpa_sort_kv(cpa_kv *v, cpa_kv *tmp, size_t n)
{
    if (n < 2)
        return;
    /* One histogram per byte, all in one pass. */
    size_t count[8][256];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (unsigned b = 0; b < 8; b++)
            count[b][(v[i].key >> (8 * b)) & 0xff]++;
    cpa_kv *src = v, *dst = tmp;
    for (unsigned b = 0; b < 8; b++) {
        size_t *c = count[b];
        if (c[(v[0].key >> (8 * b)) & 0xff] == n)
            continue; /* every key has this byte: the pass would move nothing */
        size_t sum = 0;
        for (unsigned d = 0; d < 256; d++) {
            size_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++)
            dst[c[(src[i].key >> (8 * b)) & 0xff]++] = src[i];
        cpa_kv *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* Doubles as unsigned keys in the same order: negatives' bits reversed, positives' sign set. */
static inline uint64_t key_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u >> 63 ? ~u : u | (1ull << 63);
}

static inline double double_of(uint64_t k)
{
    uint64_t u = k >> 63 ? k & ~(1ull << 63) : ~k;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static int cmp_double(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

int cpa_sort_doubles(double *v, size_t n)
{
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            double x = v[i];
            size_t j = i;
            for (; j > 0 && v[j - 1] > x; j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        return 0;
    }
    cpa_kv *kv = malloc(2 * n * sizeof *kv);
    if (!kv) {
        qsort(v, n, sizeof *v, cmp_double);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        kv[i] = (cpa_kv){key_of(v[i]), 0};
    cpa_sort_kv(kv, kv + n, n);
    for (size_t i = 0; i < n; i++)
        v[i] = double_of(kv[i].key);
    free(kv);
    return 0;
}
