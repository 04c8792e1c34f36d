/* bench_trace: the trace writer and reader against the plainest code doing the same I/O.
 *
 * Writes a 1 GiB trace of 64-byte CALL records (in $TMPDIR or /tmp, removed at the end)
 * with the writer, and the same records with nothing but memcpy into a 64 KiB buffer and
 * write(2); then reads the trace with the reader (a trivial visitor, and none) and with
 * plain read(2); and writes the same records under a size cap (rotating segments). Each figure
 * is the best of a few rounds, taken side by side in this run.
 * Prints `<name>: <value> <unit>` lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace_reader.h"
#include "trace/trace_writer.h"

#define TRACE_BYTES (1ull << 30)
#define N_RECORDS (TRACE_BYTES / sizeof(cp_rec_call))
#define ROUNDS 3
#define TEMPLATES 4096 /* records cycled through, so the writer copies varied bytes */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cp_rec_call g_templates[TEMPLATES];

static void make_templates(void)
{
    for (unsigned i = 0; i < TEMPLATES; i++) {
        cp_rec_call *c = &g_templates[i];
        memset(c, 0, sizeof *c);
        c->h.type = CP_REC_CALL;
        c->h.size = sizeof *c;
        c->op = (uint8_t)(1 + i % 10);
        c->dtype = (uint8_t)(i % 12);
        c->comm_index = i % 3;
        c->count = 1024u * (i + 1);
        c->stream = 0x7f00aa000000ull + i % 4;
        c->enter_ns = 1000000ull * i;
        c->peer = -1;
    }
}

static void fail(const char *what, const char *path)
{
    fprintf(stderr, "bench_trace: %s '%s': %s\n", what, path, strerror(errno));
    unlink(path);
    exit(1);
}

/* The writer: append every record (seq set per record, as the shim would), then close. */
static double write_with_writer(const char *path)
{
    char err[256];
    cp_file_header h;
    cp_file_header_init(&h);
    unlink(path);
    double t0 = now_s();
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 0, err, sizeof err);
    if (!w) {
        fprintf(stderr, "bench_trace: %s\n", err);
        exit(1);
    }
    for (uint64_t i = 0; i < N_RECORDS; i++) {
        cp_rec_call *c = &g_templates[i % TEMPLATES];
        c->seq = i;
        cp_trace_writer_append(w, c);
    }
    uint64_t lost = cp_trace_writer_records_lost(w);
    if (cp_trace_writer_close(w) != 0 || lost != 0)
        fail("writer lost records into", path);
    return now_s() - t0;
}

/* The writer under a size cap (COLLPROF_MAX_MB): the same records through rotating segments,
 * each a file made, a head written and the oldest deleted; the segments are removed after. */
static double write_capped(const char *path, uint64_t cap)
{
    char err[256], seg[600];
    cp_file_header h;
    cp_file_header_init(&h);
    unlink(path);
    double t0 = now_s();
    cp_trace_writer *w = cp_trace_writer_open(path, &h, 0, err, sizeof err);
    if (!w || cp_trace_writer_rotate(w, cap) != 0) {
        fprintf(stderr, "bench_trace: cannot write a capped trace at '%s'\n", path);
        exit(1);
    }
    for (uint64_t i = 0; i < N_RECORDS; i++) {
        cp_rec_call *c = &g_templates[i % TEMPLATES];
        c->seq = i;
        cp_trace_writer_append(w, c);
    }
    uint64_t rotated = cp_trace_writer_records_rotated(w);
    if (cp_trace_writer_close(w) != 0 || !rotated)
        fail("capped writer did not rotate", path);
    double t = now_s() - t0;
    /* a segment is more than half full when the next starts */
    uint64_t segments = 2 * TRACE_BYTES / (cap / CP_TRACE_SEGMENTS) + 2 * CP_TRACE_SEGMENTS;
    for (uint64_t k = 0; k <= segments; k++)
        if (cp_trace_segment_path(seg, sizeof seg, path, (unsigned)k) == 0)
            unlink(seg);
    return t;
}

/* The floor: the same bytes with memcpy into a chunk-sized buffer and write(2). */
static double write_with_memcpy(const char *path)
{
    static unsigned char buf[CP_CHUNK_DEFAULT_PAYLOAD];
    unlink(path);
    double t0 = now_s();
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        fail("cannot create", path);
    size_t used = 0;
    for (uint64_t i = 0; i < N_RECORDS; i++) {
        cp_rec_call *c = &g_templates[i % TEMPLATES];
        c->seq = i;
        if (used + sizeof *c > sizeof buf) {
            if (write(fd, buf, used) != (ssize_t)used)
                fail("cannot write", path);
            used = 0;
        }
        memcpy(buf + used, c, sizeof *c);
        used += sizeof *c;
    }
    if ((used && write(fd, buf, used) != (ssize_t)used) || close(fd) != 0)
        fail("cannot write", path);
    double t = now_s() - t0;
    unlink(path);
    return t;
}

static double read_plain(const char *path)
{
    static unsigned char buf[1 << 20];
    double t0 = now_s();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("cannot open", path);
    ssize_t n;
    volatile unsigned char sink = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        sink ^= buf[n - 1];
    close(fd);
    (void)sink;
    return now_s() - t0;
}

typedef struct tally {
    uint64_t calls;
    uint64_t bytes;
} tally;

static int count_call(void *ctx, const cp_rec_call *rec)
{
    tally *t = ctx;
    t->calls++;
    t->bytes += rec->count;
    return 0;
}

static double read_with_reader(const char *path, int with_visitor, uint64_t *records)
{
    char err[256];
    int status;
    tally t = {0, 0};
    double t0 = now_s();
    cp_trace_reader *r = cp_trace_reader_open(path, &status, err, sizeof err);
    if (!r) {
        fprintf(stderr, "bench_trace: %s\n", err);
        exit(1);
    }
    cp_trace_visitor v = {.ctx = &t};
    if (with_visitor)
        v.on_call = count_call;
    cp_walk_result res;
    cp_trace_walk(r, &v, &res);
    cp_trace_reader_close(r);
    double dt = now_s() - t0;
    if (res.records != N_RECORDS || res.corrupt_chunks || res.stop != CP_WALK_END ||
        (with_visitor && t.calls != N_RECORDS)) {
        fprintf(stderr, "bench_trace: read back %llu records of %llu: %s\n",
                (unsigned long long)res.records, (unsigned long long)N_RECORDS, res.message);
        exit(1);
    }
    *records = res.records;
    return dt;
}

static double min2(double a, double b) { return a < b ? a : b; }

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    char path[512], base_path[600];
    snprintf(path, sizeof path, "%s/bench_trace_%d.cptrace", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    snprintf(base_path, sizeof base_path, "%s.baseline", path);
    make_templates();

    double t_write = 1e9, t_memcpy = 1e9, t_plain = 1e9, t_read = 1e9, t_bare = 1e9;
    double t_cap64 = 1e9, t_cap1 = 1e9;
    for (int round = 0; round < ROUNDS; round++) {
        t_memcpy = min2(t_memcpy, write_with_memcpy(base_path));
        t_cap64 = min2(t_cap64, write_capped(path, 64ull << 20));
        t_cap1 = min2(t_cap1, write_capped(path, 2ull << 20));
        t_write = min2(t_write, write_with_writer(path));
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        fail("cannot stat", path);
    uint64_t records = 0;
    for (int round = 0; round < ROUNDS; round++) {
        t_plain = min2(t_plain, read_plain(path));
        t_read = min2(t_read, read_with_reader(path, 1, &records));
        t_bare = min2(t_bare, read_with_reader(path, 0, &records));
    }
    unlink(path);

    const double mb = (double)sb.st_size / 1e6;
    printf("trace.write_records_per_s: %.1fe6 records/s\n", N_RECORDS / t_write / 1e6);
    printf("trace.write_memcpy_baseline_records_per_s: %.1fe6 records/s\n", N_RECORDS / t_memcpy / 1e6);
    printf("trace.write_vs_memcpy_ratio: %.2f x\n", t_memcpy / t_write);
    printf("trace.write_MB_per_s: %.0f MB/s\n", mb / t_write);
    /* rotation: a 64 MiB cap (8 MiB segments, a rotation every 128 chunks) and 2 MiB (256 KiB
     * segments, one every four chunks: about the smallest cap 64 KiB chunks allow) */
    printf("trace.write_capped_64MiB_records_per_s: %.1fe6 records/s\n", N_RECORDS / t_cap64 / 1e6);
    printf("trace.write_capped_64MiB_vs_uncapped_ratio: %.2f x\n", t_write / t_cap64);
    printf("trace.write_capped_2MiB_records_per_s: %.1fe6 records/s\n", N_RECORDS / t_cap1 / 1e6);
    printf("trace.write_capped_2MiB_vs_uncapped_ratio: %.2f x\n", t_write / t_cap1);
    printf("trace.read_records_per_s: %.1fe6 records/s\n", (double)records / t_read / 1e6);
    printf("trace.read_no_visitor_records_per_s: %.1fe6 records/s\n", (double)records / t_bare / 1e6);
    printf("trace.read_MB_per_s: %.0f MB/s\n", mb / t_read);
    printf("trace.read_plain_read_baseline_MB_per_s: %.0f MB/s\n", mb / t_plain);
    printf("trace.read_vs_plain_read_ratio: %.2f x\n", t_plain / t_read);
    printf("trace.bytes_per_call_record: %.3f bytes\n", (double)sb.st_size / (double)N_RECORDS);
    printf("trace.file_MB: %.0f MB\n", mb);
    return 0;
}
