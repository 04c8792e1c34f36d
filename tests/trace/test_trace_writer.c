/* The writer under the failures it must survive: a path it must not touch, records that
 * cannot be stored, a disk that fills and empties again, and a process killed mid-run.
 * Each loss is counted, carried in chunk headers and reported in LOST records by cause. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_trace_util.h"
#include "trace/trace_io.h"

static char *g_dir;
static char g_path[600];
static char err[256];

static int setup(void **state)
{
    (void)state;
    g_dir = tt_tmpdir();
    snprintf(g_path, sizeof g_path, "%s/w.cptrace", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

static cp_trace_writer *open_writer(size_t chunk)
{
    cp_file_header h;
    cp_file_header_init(&h);
    cp_trace_writer *w = cp_trace_writer_open(g_path, &h, chunk, err, sizeof err);
    assert_non_null(w);
    return w;
}

/* Walks g_path, keeping every record. */
static void walk_file(cp_walk_result *res, tt_seen *seen)
{
    size_t len;
    unsigned char *data = tt_read_file(g_path, &len);
    assert_non_null(data);
    assert_int_equal(tt_walk_mem(data, len, res, seen, err, sizeof err), CP_READ_OK);
    free(data);
}

static const cp_rec_lost *find_lost(const tt_seen *seen, unsigned cause)
{
    for (size_t k = 0; k < seen->n; k++) {
        const cp_rec_lost *l = (const cp_rec_lost *)tt_seen_rec(seen, k);
        if (l->h.type == CP_REC_LOST && l->cause == cause)
            return l;
    }
    return NULL;
}

static void open_refuses_an_existing_file_a_symlink_and_a_bad_chunk_size(void **state)
{
    (void)state;
    cp_file_header h;
    cp_file_header_init(&h);
    tt_write_file(g_path, "x", 1);
    assert_null(cp_trace_writer_open(g_path, &h, 0, err, sizeof err));
    assert_non_null(strstr(err, g_path));
    assert_non_null(strstr(err, "exists"));
    size_t len;
    free(tt_read_file(g_path, &len));
    assert_int_equal(len, 1); /* untouched */

    char target[700], link_path[700];
    snprintf(target, sizeof target, "%s/target", g_dir);
    snprintf(link_path, sizeof link_path, "%s/link.cptrace", g_dir);
    assert_int_equal(symlink(target, link_path), 0);
    assert_null(cp_trace_writer_open(link_path, &h, 0, err, sizeof err));
    assert_int_equal(access(target, F_OK), -1);

    snprintf(link_path, sizeof link_path, "%s/new.cptrace", g_dir);
    assert_null(cp_trace_writer_open(link_path, &h, 100, err, sizeof err));
    assert_non_null(strstr(err, "chunk payload of 100 bytes"));
    assert_null(cp_trace_writer_open(link_path, &h, 1004, err, sizeof err));
    assert_null(cp_trace_writer_open(link_path, &h, CP_CHUNK_MAX_PAYLOAD + 8, err, sizeof err));
    assert_int_equal(access(link_path, F_OK), -1);
}

static void malformed_and_oversized_records_are_dropped_and_counted(void **state)
{
    (void)state;
    cp_trace_writer *w = open_writer(512);
    cp_rec_call c = tt_call(1);
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
    unsigned char rec[1024] = {0};
    cp_record_header *h = (cp_record_header *)rec;
    h->type = CP_REC_CALL;
    for (unsigned size = 0; size < 8; size++) {
        h->size = (uint16_t)size;
        assert_int_equal(cp_trace_writer_append(w, rec), -1);
    }
    h->size = 12;
    assert_int_equal(cp_trace_writer_append(w, rec), -1);
    h->size = 520; /* larger than a 512-byte chunk */
    assert_int_equal(cp_trace_writer_append(w, rec), -1);
    h->size = 512; /* exactly a chunk: fits on its own */
    assert_int_equal(cp_trace_writer_append(w, rec), 0);
    assert_int_equal(cp_trace_writer_append(w, &c), 0);
    assert_int_equal(cp_trace_writer_records_lost(w), 10);
    assert_int_equal(cp_trace_writer_close(w), 0);

    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.lost_records, 10);
    assert_int_equal(seen.by_type[CP_REC_CALL], 3);
    const cp_rec_lost *l = find_lost(&seen, CP_LOST_TOO_BIG);
    assert_non_null(l);
    assert_int_equal(l->count, 10);
    assert_true(l->at_ns > 0);
    assert_int_equal(seen.by_type[CP_REC_LOST], 1); /* one record for the burst */
    tt_seen_free(&seen);
}

static void ring_losses_ride_in_every_later_chunk(void **state)
{
    (void)state;
    cp_trace_writer *w = open_writer(512);
    cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 0);
    cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 5);
    for (uint64_t i = 0; i < 20; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    cp_trace_writer_count_lost(w, CP_LOST_RING_FULL, 2);
    assert_int_equal(cp_trace_writer_flush(w), 0);
    assert_int_equal(cp_trace_writer_flush(w), 0); /* nothing left: writes nothing */
    assert_int_equal(cp_trace_writer_records_written(w), 20);
    assert_int_equal(cp_trace_writer_records_lost(w), 7);
    assert_int_equal(cp_trace_writer_close(w), 0);

    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.lost_records, 7);
    assert_int_equal(res.records, 22);
    assert_int_equal(seen.by_type[CP_REC_LOST], 2);
    /* The first LOST record leads the file; the second follows the CALLs it came after. */
    const cp_rec_lost *first = (const cp_rec_lost *)tt_seen_rec(&seen, 0);
    const cp_rec_lost *last = (const cp_rec_lost *)tt_seen_rec(&seen, 21);
    assert_int_equal(first->h.type, CP_REC_LOST);
    assert_int_equal(first->count, 5);
    assert_int_equal(last->h.type, CP_REC_LOST);
    assert_int_equal(last->cause, CP_LOST_RING_FULL);
    assert_int_equal(last->count, 2);
    tt_seen_free(&seen);
}

static struct rlimit g_fsize;

static void restore_fsize(void) { setrlimit(RLIMIT_FSIZE, &g_fsize); }

/* A file size limit stands in for a full disk: the kernel cuts a write short at the limit
 * and refuses the next (EFBIG), as with ENOSPC, without needing a small filesystem. */
static void a_full_disk_loses_whole_chunks_and_the_writer_recovers(void **state)
{
    (void)state;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &g_fsize), 0);
    cp_trace_writer *w = open_writer(512);
    uint64_t i = 0;
    for (; i < 16; i++) { /* one chunk out, one in the buffer */
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    const size_t chunk = CP_CHUNK_HEADER_BYTES + 512;
    const size_t good = CP_TRACE_HEADER_BYTES + chunk;
    struct rlimit small = {good + chunk / 2, g_fsize.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    int failures = 0;
    /* Six chunks fail: 8 CALLs in the first, then 7 each beside the LOST record that now
     * leads every chunk buffer; the first write is cut short, the others refused. */
    for (; i < 56; i++) {
        cp_rec_call c = tt_call(i);
        if (cp_trace_writer_append(w, &c) != 0)
            failures++;
    }
    restore_fsize();
    assert_int_equal(failures, 6);
    assert_int_equal(cp_trace_writer_records_lost(w), 43);
    struct stat sb;
    assert_int_equal(stat(g_path, &sb), 0);
    assert_int_equal(sb.st_size, good); /* the cut chunk was taken back */

    for (; i < 80; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);

    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.missing_chunks, 6);
    assert_int_equal(res.lost_records, 43);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(seen.by_type[CP_REC_CALL], 80 - 43);
    const cp_rec_lost *l = find_lost(&seen, CP_LOST_WRITE_ERROR);
    assert_non_null(l);
    assert_int_equal(l->count, 43);
    assert_int_equal(seen.by_type[CP_REC_LOST], 1);
    /* The CALLs that made it are exactly those outside the failed chunks, in order. */
    uint64_t want = 0;
    for (size_t k = 0; k < seen.n; k++) {
        const cp_rec_call *c = (const cp_rec_call *)tt_seen_rec(&seen, k);
        if (c->h.type != CP_REC_CALL)
            continue;
        if (want == 8)
            want = 51; /* 8..50 were in the failed chunks */
        cp_rec_call expect = tt_call(want++);
        assert_memory_equal(c, &expect, sizeof expect);
    }
    assert_non_null(strstr(res.message, "6 chunks missing"));
    tt_seen_free(&seen);
}

/* Appends CALLs until `lost` of them are counted lost (or n tried), then the closing records
 * (CLOCK, END), and closes; returns how many CALLs were appended. */
static uint64_t fill_then_close(cp_trace_writer *w, uint64_t n, uint64_t lost)
{
    uint64_t i = 0;
    for (; i < n && cp_trace_writer_records_lost(w) < lost; i++) {
        cp_rec_call c = tt_call(i);
        cp_trace_writer_append(w, &c);
    }
    cp_trace_writer_closing(w);
    cp_rec_clock clk = {.h = {CP_REC_CLOCK, sizeof clk}, .mono_ns = 1, .realtime_ns = 2};
    cp_rec_end end = {.h = {CP_REC_END, sizeof end}, .signal = 0, .exit_code = -1, .at_ns = 3};
    cp_trace_writer_append(w, &clk);
    cp_trace_writer_append(w, &end);
    cp_trace_writer_close(w);
    return i;
}

/* The file still ends with END and the exact loss count when the limit is never lifted:
 * the closing chunk has room kept for it. Before, the last chunk failed like the others and
 * the file ended without END, its loss count short of what was dropped after. */
static void a_file_at_its_size_limit_still_ends_with_end_and_every_loss(void **state)
{
    (void)state;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &g_fsize), 0);
    cp_trace_writer *w = open_writer(512);
    const size_t chunk = CP_CHUNK_HEADER_BYTES + 512;
    /* room for three chunks and less than a closing chunk after them */
    struct rlimit small = {CP_TRACE_HEADER_BYTES + 3 * chunk + 100, g_fsize.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    uint64_t made = fill_then_close(w, 400, 100);
    restore_fsize();
    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(seen.by_type[CP_REC_END], 1);
    assert_int_equal(seen.by_type[CP_REC_CALL] + res.lost_records, made); /* every CALL */
    assert_true(res.lost_records >= 100);
    const cp_rec_lost *l = find_lost(&seen, CP_LOST_WRITE_ERROR);
    assert_non_null(l);
    assert_int_equal(l->count, res.lost_records);
    tt_seen_free(&seen);
}

/* The same on a real full disk: a 64 KiB tmpfs (root only; skipped with the reason else).
 * The file is first made to end on a page boundary (52 CALLs and 9 CLOCKs: a 4096-byte
 * file), so that no slack in its last page can hold the closing chunk: only the blocks kept
 * past the end can, which is what failed before (no END). */
static void a_full_tmpfs_still_ends_the_file_with_end_and_every_loss(void **state)
{
    (void)state;
    char mnt[400];
    snprintf(mnt, sizeof mnt, "%.300s/small", g_dir);
    assert_int_equal(mkdir(mnt, 0700), 0);
    if (geteuid() != 0 || mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
        fprintf(stderr, "skipped: mounting a 64 KiB tmpfs needs root (%s)\n", strerror(errno));
        skip();
    }
    char saved[600];
    snprintf(saved, sizeof saved, "%s", g_path);
    snprintf(g_path, sizeof g_path, "%s/w.cptrace", mnt);
    cp_trace_writer *w = open_writer(4096);
    for (uint64_t i = 0; i < 52; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    for (int i = 0; i < 9; i++) {
        cp_rec_clock clk = {.h = {CP_REC_CLOCK, sizeof clk}, .mono_ns = 1, .realtime_ns = 2};
        assert_int_equal(cp_trace_writer_append(w, &clk), 0);
    }
    assert_int_equal(cp_trace_writer_flush(w), 0);
    struct stat sb;
    assert_int_equal(stat(g_path, &sb), 0);
    assert_int_equal(sb.st_size, 4096);
    /* the job fills the file system */
    char filler[500];
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    FILE *f = fopen(filler, "w");
    assert_non_null(f);
    static char block[4096];
    while (fwrite(block, 1, sizeof block, f) == sizeof block && fflush(f) == 0)
        ;
    fclose(f);
    uint64_t made = 52 + fill_then_close(w, 20000, 1000);
    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    umount(mnt);
    snprintf(g_path, sizeof g_path, "%s", saved);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(seen.by_type[CP_REC_END], 1);
    assert_int_equal(seen.by_type[CP_REC_CALL] + res.lost_records, made);
    assert_true(res.lost_records >= 1000);
    tt_seen_free(&seen);
}

static void a_process_killed_mid_run_leaves_every_flushed_record(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cp_trace_writer *w = open_writer(4096);
        for (uint64_t i = 0; i < 1000; i++) {
            cp_rec_call c = tt_call(i);
            cp_trace_writer_append(w, &c);
            if (i % 10 == 9)
                cp_trace_writer_flush(w);
        }
        for (uint64_t i = 1000; i < 1005; i++) { /* never flushed */
            cp_rec_call c = tt_call(i);
            cp_trace_writer_append(w, &c);
        }
        raise(SIGKILL);
        _exit(1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.records, 1000);
    assert_int_equal(res.chunks, 100);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(res.corrupt_chunks, 0);
    tt_seen_free(&seen);
}


/* Opens the segment `seg` of g_path's rotated trace and walks it alone. */
static int walk_segment(unsigned seg, cp_walk_result *res, tt_seen *seen)
{
    char path[700];
    assert_int_equal(cp_trace_segment_path(path, sizeof path, g_path, seg), 0);
    size_t len;
    unsigned char *data = tt_read_file(path, &len);
    if (!data)
        return -1;
    assert_int_equal(tt_walk_mem(data, len, res, seen, err, sizeof err), CP_READ_OK);
    free(data);
    return 0;
}

static const cp_record_header *find_type(const tt_seen *seen, unsigned type)
{
    for (size_t k = 0; k < seen->n; k++)
        if (tt_seen_rec(seen, k)->type == type)
            return tt_seen_rec(seen, k);
    return NULL;
}

/* A capped trace keeps its newest records in at most CP_TRACE_SEGMENTS files, each of which
 * reads alone (SEGMENT first, then the communicator and site its calls name); what the
 * deleted segments held is counted lost, cause rotated, and is exactly the records before
 * the first segment kept. */
static void a_capped_trace_keeps_the_newest_records_in_segments_that_read_alone(void **state)
{
    (void)state;
    const uint64_t cap = CP_TRACE_SEGMENTS * 4096;
    cp_trace_writer *w = open_writer(512);
    assert_int_equal(cp_trace_writer_rotate(w, 1024), -1); /* a segment under two chunks */
    assert_int_equal(cp_trace_writer_rotate(w, cap), 0);
    assert_int_equal(cp_trace_writer_rotate(w, cap), -1); /* once */
    cp_rec_comm comm = {.h = {CP_REC_COMM, sizeof comm}, .comm_index = 0, .comm_id = 77,
                        .nranks = 2, .rank = 1};
    assert_int_equal(cp_trace_writer_append_kept(w, &comm), 0);
    cp_rec_comm gone = comm;
    gone.comm_index = 1;
    assert_int_equal(cp_trace_writer_append_kept(w, &gone), 0);
    cp_trace_writer_forget(w, CP_REC_COMM, 1);
    unsigned char site[256];
    const char *frames[] = {"train_step+0x10 (job)"};
    size_t sz = cp_rec_site_build(site, sizeof site, 0, 0x1234, frames, 1);
    assert_true(sz > 0);
    assert_int_equal(cp_trace_writer_append_kept(w, site), 0);
    const uint64_t n = 5000;
    for (uint64_t i = 0; i < n; i++) {
        cp_rec_call c = tt_call(i);
        c.comm_index = 0;
        c.site_index = 0;
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    uint64_t rotated = cp_trace_writer_records_rotated(w);
    assert_true(rotated > 0);
    assert_int_equal(cp_trace_writer_records_lost(w), rotated);
    assert_int_equal(cp_trace_writer_close(w), 0);

    /* the files: the oldest are gone, CP_TRACE_SEGMENTS at most, under the cap and a segment */
    cp_walk_result res;
    tt_seen seen;
    assert_int_equal(walk_segment(0, &res, &seen), -1);
    unsigned first = 1, last = 0, files = 0;
    uint64_t bytes = 0;
    for (unsigned seg = 1; seg < 10000; seg++) {
        char path[700];
        struct stat st;
        cp_trace_segment_path(path, sizeof path, g_path, seg);
        if (stat(path, &st) != 0) {
            if (files)
                break;
            first = seg + 1;
            continue;
        }
        files++;
        last = seg;
        bytes += (uint64_t)st.st_size;
    }
    assert_true(files >= 2 && files <= CP_TRACE_SEGMENTS);
    assert_true(bytes <= cap + cap / CP_TRACE_SEGMENTS);

    /* each alone; together, the newest calls in order, none twice, none missing */
    uint64_t next_seq = 0, calls = 0, rotated_in_records = 0;
    for (unsigned seg = first; seg <= last; seg++) {
        assert_int_equal(walk_segment(seg, &res, &seen), 0);
        assert_int_equal(res.corrupt_chunks, 0);
        assert_int_equal(res.missing_chunks, 0);
        assert_int_equal(res.unknown_records, 0);
        const cp_rec_segment *sg = (const cp_rec_segment *)tt_seen_rec(&seen, 0);
        assert_int_equal(sg->h.type, CP_REC_SEGMENT);
        assert_int_equal(sg->segment, seg);
        if (seg == first) /* what rotation dropped: every record before this segment */
            assert_int_equal(sg->records_before, rotated);
        const cp_rec_comm *c = (const cp_rec_comm *)find_type(&seen, CP_REC_COMM);
        assert_non_null(c);
        assert_int_equal(c->comm_id, 77);
        assert_int_equal(seen.by_type[CP_REC_COMM], 1); /* the forgotten one is not repeated */
        assert_int_equal(seen.by_type[CP_REC_SITE], 1);
        for (size_t k = 0; k < seen.n; k++) {
            const cp_record_header *h = tt_seen_rec(&seen, k);
            if (h->type == CP_REC_LOST) {
                const cp_rec_lost *l = (const cp_rec_lost *)h;
                assert_int_equal(l->cause, CP_LOST_ROTATED);
                assert_true(k < 3); /* in the head */
                rotated_in_records += l->count;
            }
            if (h->type != CP_REC_CALL)
                continue;
            const cp_rec_call *call = (const cp_rec_call *)h;
            if (calls)
                assert_int_equal(call->seq, next_seq);
            next_seq = call->seq + 3;
            calls++;
        }
        if (seg == last)
            assert_int_equal(res.lost_records, rotated);
        tt_seen_free(&seen);
    }
    assert_int_equal(next_seq, tt_call(n - 1).seq + 3); /* the newest call is the last */
    assert_int_equal(calls + rotated, n + 3);           /* 2 COMMs and the SITE were records */
    assert_true(rotated_in_records > 0 && rotated_in_records <= rotated);
}

/* An io whose calls hang while `frozen` (a frozen file system as the shim's executor shows
 * it: each call comes back CP_IO_STALLED and stays in flight) and run, in order, at the
 * thaw. */
typedef struct fake_call {
    int op; /* 0 write, 1 cut, 2 close */
    int fd;
    const void *data;
    size_t len;
    uint64_t off;
    size_t keep;
} fake_call;
static struct {
    int frozen;
    fake_call q[8];
    int n;
    int last_rc, last_wrote, answered; /* the call in flight, once run */
    int calls;
} g_fake;

static int fake_run(const fake_call *c, int *wrote)
{
    *wrote = 0;
    if (c->op == 0)
        return cp_trace_io_direct.write_at(NULL, c->fd, c->data, c->len, c->off, c->keep, 0,
                                           wrote);
    if (c->op == 1)
        return cp_trace_io_direct.cut(NULL, c->fd, c->off, c->keep);
    return close(c->fd);
}

static void fake_thaw(void)
{
    g_fake.frozen = 0;
    for (int i = 0; i < g_fake.n; i++) {
        int wrote;
        g_fake.last_rc = fake_run(&g_fake.q[i], &wrote);
        g_fake.last_wrote = wrote;
    }
    g_fake.answered = g_fake.n > 0;
    g_fake.n = 0;
}

static int fake_queue(fake_call c)
{
    assert_true(g_fake.n < 8);
    g_fake.q[g_fake.n++] = c;
    return CP_IO_STALLED;
}

static int fake_write_at(void *ctx, int fd, const void *data, size_t len, uint64_t off,
                         size_t keep, int flags, int *wrote)
{
    (void)ctx;
    (void)flags;
    g_fake.calls++;
    *wrote = 0;
    if (g_fake.frozen || g_fake.n)
        return fake_queue((fake_call){0, fd, data, len, off, keep});
    return cp_trace_io_direct.write_at(NULL, fd, data, len, off, keep, 0, wrote);
}

static int fake_wait(void *ctx, int block, int *wrote)
{
    (void)ctx;
    (void)block;
    *wrote = 0;
    if (g_fake.frozen)
        return CP_IO_STALLED;
    assert_true(g_fake.answered); /* the writer waits only for a call it has in flight */
    g_fake.answered = 0;
    *wrote = g_fake.last_wrote;
    return g_fake.last_rc;
}

static int fake_cut(void *ctx, int fd, uint64_t len, size_t keep)
{
    (void)ctx;
    if (g_fake.frozen)
        return fake_queue((fake_call){1, fd, NULL, 0, len, keep});
    return cp_trace_io_direct.cut(NULL, fd, len, keep);
}

static int fake_close(void *ctx, int fd)
{
    (void)ctx;
    if (g_fake.frozen)
        return fake_queue((fake_call){2, fd, NULL, 0, 0, 0}), 0;
    return close(fd);
}

static const cp_trace_io fake_io = {fake_write_at, fake_wait, fake_cut, fake_close, NULL};

static void a_stalled_write_keeps_its_chunk_and_counts_what_it_cannot_buffer(void **state)
{
    (void)state;
    memset(&g_fake, 0, sizeof g_fake);
    cp_trace_writer *w = open_writer(512); /* 8 calls a chunk */
    cp_trace_writer_set_io(w, &fake_io);
    uint64_t i = 0;
    for (; i < 20; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    g_fake.frozen = 1;
    /* the chunk of calls 16..23 goes out and hangs; 24..31 fill the spare buffer; the next 22
     * find no room (counted as they come) */
    for (; i < 24; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    assert_int_equal(cp_trace_writer_stalled(w), 0);
    for (; i < 32; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    assert_int_equal(cp_trace_writer_stalled(w), 1);
    assert_int_equal(cp_trace_writer_lost_by_cause(w, CP_LOST_WRITE_STALLED), 0);
    for (; i < 54; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), -1);
    }
    assert_int_equal(cp_trace_writer_lost_by_cause(w, CP_LOST_WRITE_STALLED), 22);
    int before = g_fake.calls;
    errno = 0;
    assert_int_equal(cp_trace_writer_flush(w), -1);
    assert_int_equal(errno, ETIMEDOUT);
    assert_int_equal(g_fake.calls, before); /* nothing more asked of a hung file system */

    fake_thaw();
    assert_int_equal(cp_trace_writer_flush(w), 0); /* the hung chunk landed; LOST follows */
    assert_int_equal(cp_trace_writer_stalled(w), 0);
    for (; i < 60; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    assert_int_equal(cp_trace_writer_close(w), 0);

    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.missing_chunks, 0);
    assert_int_equal(res.lost_records, 22);
    assert_int_equal(seen.by_type[CP_REC_CALL], 60 - 22);
    const cp_rec_lost *l = find_lost(&seen, CP_LOST_WRITE_STALLED);
    assert_non_null(l);
    assert_int_equal(l->count, 22);
    tt_seen_free(&seen);
}

static void a_writer_closed_while_stalled_ends_its_file_with_end_after_the_thaw(void **state)
{
    (void)state;
    memset(&g_fake, 0, sizeof g_fake);
    cp_trace_writer *w = open_writer(512);
    cp_trace_writer_set_io(w, &fake_io);
    uint64_t i = 0;
    for (; i < 12; i++) {
        cp_rec_call c = tt_call(i);
        assert_int_equal(cp_trace_writer_append(w, &c), 0);
    }
    g_fake.frozen = 1;
    for (; i < 30; i++) {
        cp_rec_call c = tt_call(i);
        cp_trace_writer_append(w, &c);
    }
    assert_int_equal(cp_trace_writer_stalled(w), 1);
    uint64_t dropped = cp_trace_writer_lost_by_cause(w, CP_LOST_WRITE_STALLED);
    assert_true(dropped > 0);
    assert_int_equal(cp_trace_writer_closing(w), -1);
    cp_rec_end end = {.h = {CP_REC_END, sizeof end}, .signal = 0, .exit_code = -1, .at_ns = 9};
    assert_int_equal(cp_trace_writer_append(w, &end), 0);
    errno = 0;
    assert_int_equal(cp_trace_writer_close(w), -1); /* returns at once: queued */
    assert_int_equal(errno, ETIMEDOUT);
    assert_int_equal(g_fake.n, 4); /* the hung chunk, the spare's, the closing one, the close */

    fake_thaw();
    cp_walk_result res;
    tt_seen seen;
    walk_file(&res, &seen);
    assert_int_equal(res.corrupt_chunks, 0);
    assert_int_equal(res.missing_chunks, 0);
    assert_int_equal(res.stop, CP_WALK_END);
    assert_int_equal(seen.by_type[CP_REC_END], 1);
    assert_int_equal(res.lost_records, dropped);
    assert_int_equal(seen.by_type[CP_REC_CALL] + dropped, 30);
    const cp_rec_lost *l = find_lost(&seen, CP_LOST_WRITE_STALLED);
    assert_non_null(l);
    assert_int_equal(l->count, dropped);
    tt_seen_free(&seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(open_refuses_an_existing_file_a_symlink_and_a_bad_chunk_size, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_and_oversized_records_are_dropped_and_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(ring_losses_ride_in_every_later_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(a_full_disk_loses_whole_chunks_and_the_writer_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(a_file_at_its_size_limit_still_ends_with_end_and_every_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(a_full_tmpfs_still_ends_the_file_with_end_and_every_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(a_process_killed_mid_run_leaves_every_flushed_record, setup, teardown),
        cmocka_unit_test_setup_teardown(a_capped_trace_keeps_the_newest_records_in_segments_that_read_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stalled_write_keeps_its_chunk_and_counts_what_it_cannot_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(a_writer_closed_while_stalled_ends_its_file_with_end_after_the_thaw, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
