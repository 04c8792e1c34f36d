/* trace_reader: validates everything before it trusts anything.
 *
 * A file is read whole into memory (mapped read-only above CP_TRACE_READ_MAX); nothing is
 * allocated per chunk or per record, so a file's claims cost nothing. Each chunk is checked
 * whole (header hash, payload hash, every record's bounds, record count) before its first
 * record reaches a callback: a visitor never sees half of a corrupt chunk. After a corrupt
 * chunk the walk scans forward on 8-byte steps for the next chunk header whose magic and hash
 * hold, so one bad sector costs one chunk, not the file.
 */
#include "trace/trace_reader.h"

#include "trace/trace_hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Under libFuzzer the hashes are computed but not enforced: mutated inputs must get past
 * them to reach the bounds checks behind, which are what keep the reader within its bytes. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CP_HASH_DIFFERS(a, b) ((void)((a) != (b)), 0)
#else
#define CP_HASH_DIFFERS(a, b) ((a) != (b))
#endif

/* Files up to this size are read(2) into malloc's memory rather than mapped. A job's
 * analysis opens a file per rank (1024 of a megabyte each on bench_analyzer's job): each
 * mapping was page faults on the file's pages, and each munmap a TLB shootdown to the other
 * loader threads, all under the address space's lock that the threads' faults on their
 * models' pages also take. A megabyte's buffer, freed, is malloc's to give the next file
 * (its mmap threshold rises to it), already mapped. Above this, a copy of the file would
 * double its memory: mapped. */
#define CP_TRACE_READ_MAX ((off_t)64 << 20)

/* A future compatible version may grow the file header; beyond this it is nonsense. */
#define CP_TRACE_HEADER_MAX_BYTES (1u << 20)

struct cp_trace_reader {
    const unsigned char *data;
    size_t len;
    int mapped; /* munmap at close; else free */
    cp_file_header header;
    char *name;
};

/* The smallest size each known type may have; a larger one is a later version's extension. */
static const uint16_t min_record_bytes[CP_REC_TYPE_MAX_KNOWN + 1] = {
    [0] = sizeof(cp_record_header),
    [CP_REC_PROCESS] = sizeof(cp_rec_process),
    [CP_REC_COMM] = sizeof(cp_rec_comm),
    [CP_REC_SITE] = sizeof(cp_rec_site),
    [CP_REC_CALL] = sizeof(cp_rec_call),
    [CP_REC_DONE] = sizeof(cp_rec_done),
    [CP_REC_CLOCK] = sizeof(cp_rec_clock),
    [CP_REC_LOST] = sizeof(cp_rec_lost),
    [CP_REC_HANG] = sizeof(cp_rec_hang),
    [CP_REC_END] = sizeof(cp_rec_end),
    [CP_REC_NCCL_OP] = sizeof(cp_rec_nccl_op),
    [CP_REC_KNAME] = sizeof(cp_rec_kname),
    [CP_REC_KERNELS] = sizeof(cp_rec_kernels),
    [CP_REC_UNTIMED] = sizeof(cp_rec_untimed),
    [CP_REC_SEGMENT] = sizeof(cp_rec_segment),
};

/* Checks the file header; 0 or a cp_read_status with err filled. */
static int check_file_header(const unsigned char *data, size_t len, const char *name,
                             cp_file_header *out, char *err, size_t errlen)
{
    if (len >= sizeof out->magic && memcmp(data, CP_TRACE_MAGIC, sizeof out->magic) != 0) {
        snprintf(err, errlen, "'%s': not a collprof trace (it does not start with %s)", name,
                 CP_TRACE_MAGIC);
        return CP_READ_FORMAT;
    }
    if (len < sizeof *out) {
        snprintf(err, errlen, "'%s': too short for a collprof trace (%zu bytes, the header alone is %d)",
                 name, len, CP_TRACE_HEADER_BYTES);
        return CP_READ_FORMAT;
    }
    memcpy(out, data, sizeof *out);
    if (out->byte_order == __builtin_bswap32(CP_TRACE_BYTE_ORDER)) {
        snprintf(err, errlen, "'%s': trace is byte-swapped (written on a big-endian machine); "
                 "collprof reads little-endian traces only", name);
        return CP_READ_FORMAT;
    }
    if (out->byte_order != CP_TRACE_BYTE_ORDER) {
        snprintf(err, errlen, "'%s': corrupt file header: byte-order mark 0x%08x is not 0x%08x",
                 name, out->byte_order, CP_TRACE_BYTE_ORDER);
        return CP_READ_CORRUPT;
    }
    /* Before the hash: a newer version may hash its header differently, and the version
     * fields are at fixed offsets in every version exactly so this message is possible. */
    if (out->compat_version > CP_TRACE_READ_VERSION) {
        if (out->version > out->compat_version)
            snprintf(err, errlen, "'%s': trace format version %u (readable from version %u) is "
                     "newer than this collprof reads (version %d)", name, out->version,
                     out->compat_version, CP_TRACE_READ_VERSION);
        else
            snprintf(err, errlen, "'%s': trace format version %u is newer than this collprof "
                     "reads (version %d)", name, out->compat_version, CP_TRACE_READ_VERSION);
        return CP_READ_VERSION;
    }
    uint64_t hash = cp_trace_hash(out, offsetof(cp_file_header, header_hash));
    if (CP_HASH_DIFFERS(hash, out->header_hash)) {
        snprintf(err, errlen, "'%s': corrupt file header: it fails its hash", name);
        return CP_READ_CORRUPT;
    }
    if (out->compat_version == 0 || out->version < out->compat_version) {
        snprintf(err, errlen, "'%s': corrupt file header: version %u with compat_version %u",
                 name, out->version, out->compat_version);
        return CP_READ_CORRUPT;
    }
    if (out->header_bytes < CP_TRACE_HEADER_BYTES || out->header_bytes % 8 != 0 ||
        out->header_bytes > CP_TRACE_HEADER_MAX_BYTES || out->header_bytes > len) {
        snprintf(err, errlen, "'%s': corrupt file header: header_bytes %u out of range "
                 "(a multiple of 8 from %d, within the %zu-byte file)", name,
                 out->header_bytes, CP_TRACE_HEADER_BYTES, len);
        return CP_READ_CORRUPT;
    }
    return CP_READ_OK;
}

static cp_trace_reader *finish_open(cp_trace_reader *r, const char *name, int *status,
                                    char *err, size_t errlen)
{
    int st = check_file_header(r->data, r->len, name, &r->header, err, errlen);
    r->name = st == CP_READ_OK ? strdup(name) : NULL;
    if (st == CP_READ_OK && !r->name) {
        snprintf(err, errlen, "'%s': out of memory", name);
        st = CP_READ_IO;
    }
    if (status)
        *status = st;
    if (st != CP_READ_OK) {
        cp_trace_reader_close(r);
        return NULL;
    }
    return r;
}

cp_trace_reader *cp_trace_reader_open(const char *path, int *status, char *err, size_t errlen)
{
    int st = CP_READ_IO;
    cp_trace_reader *r = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "'%s': cannot open trace: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "'%s': not a regular file", path);
        goto fail;
    }
    if (sb.st_size == 0) {
        snprintf(err, errlen, "'%s': empty file, too short for a collprof trace", path);
        st = CP_READ_FORMAT;
        goto fail;
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "'%s': out of memory", path);
        goto fail;
    }
    if (sb.st_size <= CP_TRACE_READ_MAX) {
        unsigned char *buf = malloc((size_t)sb.st_size);
        size_t got = 0;
        while (buf && got < (size_t)sb.st_size) {
            ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                snprintf(err, errlen, "'%s': cannot read trace: %s", path, strerror(errno));
                free(buf);
                goto fail;
            }
            if (n == 0)
                break; /* shorter now than fstat said: what there is */
            got += (size_t)n;
        }
        if (!buf) {
            snprintf(err, errlen, "'%s': out of memory", path);
            goto fail;
        }
        close(fd);
        r->data = buf;
        r->len = got;
        return finish_open(r, path, status, err, errlen);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "'%s': cannot map trace: %s", path, strerror(errno));
        goto fail;
    }
    close(fd);
    /* Read-ahead in large steps and early reclaim: a trace is read once, front to back. */
    madvise(map, (size_t)sb.st_size, MADV_SEQUENTIAL);
    r->data = map;
    r->len = (size_t)sb.st_size;
    r->mapped = 1;
    return finish_open(r, path, status, err, errlen);
fail:
    if (fd >= 0)
        close(fd);
    free(r);
    if (status)
        *status = st;
    return NULL;
}

cp_trace_reader *cp_trace_reader_open_mem(const void *data, size_t len, const char *name,
                                          int *status, char *err, size_t errlen)
{
    if (!name)
        name = "(memory)";
    cp_trace_reader *r = calloc(1, sizeof *r);
    /* A private, malloc-aligned copy: records are read in place as structs, which wants
     * 8-byte alignment the caller's buffer may not have. */
    unsigned char *copy = malloc(len ? len : 1);
    if (!r || !copy) {
        snprintf(err, errlen, "'%s': out of memory", name);
        free(r);
        free(copy);
        if (status)
            *status = CP_READ_IO;
        return NULL;
    }
    if (len)
        memcpy(copy, data, len);
    r->data = copy;
    r->len = len;
    return finish_open(r, name, status, err, errlen);
}

const cp_file_header *cp_trace_reader_header(const cp_trace_reader *r) { return &r->header; }

const char *cp_trace_reader_path(const cp_trace_reader *r) { return r->name; }

void cp_trace_reader_close(cp_trace_reader *r)
{
    if (!r)
        return;
    if (r->mapped)
        munmap((void *)r->data, r->len);
    else
        free((void *)r->data);
    free(r->name);
    free(r);
}

/* ---- the walk ---- */

enum { CHUNK_OK, CHUNK_BAD, CHUNK_CUT };

static int chunk_header_at(const unsigned char *base, size_t len, size_t off,
                           cp_chunk_header *ch, const char **why)
{
    if (len - off < CP_CHUNK_HEADER_BYTES) {
        *why = "the file ends inside a chunk header";
        return CHUNK_CUT;
    }
    memcpy(ch, base + off, sizeof *ch);
    if (ch->magic != CP_CHUNK_MAGIC) {
        *why = "no chunk magic";
        return CHUNK_BAD;
    }
    if (CP_HASH_DIFFERS(cp_chunk_header_hash(ch), ch->header_hash)) {
        *why = "chunk header fails its hash";
        return CHUNK_BAD;
    }
    if (ch->payload_bytes > CP_CHUNK_MAX_PAYLOAD || ch->payload_bytes % 8 != 0) {
        *why = "chunk payload size out of range";
        return CHUNK_BAD;
    }
    if (ch->payload_bytes > len - off - CP_CHUNK_HEADER_BYTES) {
        *why = "the file ends inside a chunk";
        return CHUNK_CUT;
    }
    return CHUNK_OK;
}

/* Next offset at or after `from` (8-byte steps) holding a believable chunk header. */
static size_t resync(const unsigned char *base, size_t len, size_t from)
{
    for (size_t o = from; o <= len && len - o >= CP_CHUNK_HEADER_BYTES; o += 8) {
        uint32_t magic;
        memcpy(&magic, base + o, sizeof magic);
        if (magic != CP_CHUNK_MAGIC)
            continue;
        cp_chunk_header ch;
        const char *why;
        if (chunk_header_at(base, len, o, &ch, &why) != CHUNK_BAD)
            return o;
    }
    return len;
}

static int strings_fit(const unsigned char *rec, size_t size, size_t pos, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        uint16_t n;
        if (size - pos < sizeof n)
            return 0;
        memcpy(&n, rec + pos, sizeof n);
        pos += sizeof n;
        if (n > size - pos)
            return 0;
        pos += n;
    }
    return 1;
}

/* Every record of a payload in bounds and of a believable size; NULL or what is wrong,
 * with *bad_at the payload offset of the offending record. */
static const char *check_records(const unsigned char *p, size_t n, uint32_t expect,
                                 size_t *bad_at)
{
    size_t pos = 0;
    uint32_t count = 0;
    while (pos < n) {
        const cp_record_header *h = (const cp_record_header *)(p + pos);
        size_t size = h->size;
        *bad_at = pos;
        if (size < sizeof *h || size % 8 != 0)
            return "record size is not a multiple of 8 of at least 8";
        if (size > n - pos)
            return "record runs past the end of its chunk";
        if (h->type <= CP_REC_TYPE_MAX_KNOWN && size < min_record_bytes[h->type])
            return "record is shorter than its type";
        if (h->type == CP_REC_SITE &&
            !strings_fit(p + pos, size, sizeof(cp_rec_site), ((const cp_rec_site *)h)->frame_count))
            return "SITE record's strings run past its end";
        if (h->type == CP_REC_PROCESS &&
            !strings_fit(p + pos, size, sizeof(cp_rec_process),
                         ((const cp_rec_process *)h)->string_count))
            return "PROCESS record's strings run past its end";
        pos += size;
        count++;
    }
    *bad_at = 0;
    if (count != expect)
        return "record count does not match the chunk header";
    return NULL;
}

/* Hands a checked payload's records out; 1 when a callback asked to stop. */
static int deliver(const cp_trace_visitor *vp, const unsigned char *p, size_t n,
                   uint64_t file_off, cp_walk_result *res)
{
    const cp_trace_visitor v = *vp; /* callbacks may write anywhere: keep these in registers */
    uint64_t records = 0, unknown = 0;
    int stop = 0;
    for (size_t pos = 0; pos < n && !stop;) {
        const cp_record_header *h = (const cp_record_header *)(p + pos);
        records++;
        if (v.on_record && v.on_record(v.ctx, h, file_off + pos)) {
            stop = 1;
            break;
        }
        switch (h->type) {
        case CP_REC_CALL:
            stop = v.on_call && v.on_call(v.ctx, (const cp_rec_call *)h);
            break;
        case CP_REC_DONE:
            stop = v.on_done && v.on_done(v.ctx, (const cp_rec_done *)h);
            break;
        case CP_REC_NCCL_OP:
            stop = v.on_nccl_op && v.on_nccl_op(v.ctx, (const cp_rec_nccl_op *)h);
            break;
        case CP_REC_KNAME:
            stop = v.on_kname && v.on_kname(v.ctx, (const cp_rec_kname *)h);
            break;
        case CP_REC_KERNELS:
            stop = v.on_kernels && v.on_kernels(v.ctx, (const cp_rec_kernels *)h);
            break;
        case CP_REC_PROCESS:
            stop = v.on_process && v.on_process(v.ctx, (const cp_rec_process *)h);
            break;
        case CP_REC_COMM:
            stop = v.on_comm && v.on_comm(v.ctx, (const cp_rec_comm *)h);
            break;
        case CP_REC_SITE:
            stop = v.on_site && v.on_site(v.ctx, (const cp_rec_site *)h);
            break;
        case CP_REC_CLOCK:
            stop = v.on_clock && v.on_clock(v.ctx, (const cp_rec_clock *)h);
            break;
        case CP_REC_LOST:
            stop = v.on_lost && v.on_lost(v.ctx, (const cp_rec_lost *)h);
            break;
        case CP_REC_HANG:
            stop = v.on_hang && v.on_hang(v.ctx, (const cp_rec_hang *)h);
            break;
        case CP_REC_END:
            stop = v.on_end && v.on_end(v.ctx, (const cp_rec_end *)h);
            break;
        case CP_REC_UNTIMED:
            stop = v.on_untimed && v.on_untimed(v.ctx, (const cp_rec_untimed *)h);
            break;
        case CP_REC_SEGMENT:
            stop = v.on_segment && v.on_segment(v.ctx, (const cp_rec_segment *)h);
            break;
        default:
            unknown++;
            stop = v.on_unknown && v.on_unknown(v.ctx, h);
            break;
        }
        pos += h->size;
    }
    res->records += records;
    res->unknown_records += unknown;
    return stop;
}

/* The first problem found, kept for the message. */
enum { NOTE_CORRUPT = 1, NOTE_CUT, NOTE_GAP };
typedef struct walk_note {
    int kind;
    const char *what;
    uint64_t offset;
    uint64_t chunk_index; /* UINT64_MAX: not known (the header itself is bad) */
    uint64_t after_index; /* the last valid chunk before it, UINT64_MAX for none */
} walk_note;

static void note(walk_note *first, cp_walk_result *res, int kind, const char *what,
                 uint64_t offset, uint64_t chunk_index, uint64_t last_valid)
{
    if (kind != NOTE_GAP && res->first_bad_offset == 0)
        res->first_bad_offset = offset;
    if (!first->kind)
        *first = (walk_note){kind, what, offset, chunk_index, last_valid};
}

static void compose_message(cp_walk_result *res, const walk_note *first, const char *name)
{
    if (!first->kind)
        return;
    /* A path longer than this keeps its tail: the file name says more than the parents. */
    size_t nlen = strlen(name);
    const char *shown = nlen > 60 ? name + nlen - 57 : name;
    char where[48];
    if (first->chunk_index != UINT64_MAX)
        snprintf(where, sizeof where, "chunk %llu", (unsigned long long)first->chunk_index);
    else if (first->after_index != UINT64_MAX)
        snprintf(where, sizeof where, "after chunk %llu", (unsigned long long)first->after_index);
    else
        snprintf(where, sizeof where, "first chunk");
    char tail[96] = "";
    size_t t = 0;
    uint64_t more_corrupt = res->corrupt_chunks - (first->kind == NOTE_CORRUPT);
    if (more_corrupt)
        t += (size_t)snprintf(tail + t, sizeof tail - t, "; %llu%s corrupt chunk%s",
                              (unsigned long long)more_corrupt,
                              first->kind == NOTE_CORRUPT ? " more" : "", more_corrupt > 1 ? "s" : "");
    if (res->missing_chunks && t < sizeof tail)
        t += (size_t)snprintf(tail + t, sizeof tail - t, "; %llu chunk%s missing",
                              (unsigned long long)res->missing_chunks,
                              res->missing_chunks > 1 ? "s" : "");
    if (res->stop == CP_WALK_TRUNCATED && first->kind != NOTE_CUT && t < sizeof tail)
        snprintf(tail + t, sizeof tail - t, "; the file ends inside a chunk");
    snprintf(res->message, sizeof res->message, "'%s%s': %s at byte %llu (%s)%s",
             shown == name ? "" : "...", shown, first->what, (unsigned long long)first->offset,
             where, tail);
}

int cp_trace_walk(cp_trace_reader *r, const cp_trace_visitor *v, cp_walk_result *res)
{
    if (!r || !v || !res)
        return -1;
    memset(res, 0, sizeof *res);
    const unsigned char *base = r->data;
    const size_t len = r->len;
    size_t off = r->header.header_bytes;
    uint64_t next_index = 0, last_valid = UINT64_MAX;
    walk_note first = {0};
    res->valid_bytes = off;
    res->stop = CP_WALK_END;

    while (off < len) {
        cp_chunk_header ch;
        const char *why = NULL;
        int st = chunk_header_at(base, len, off, &ch, &why);
        if (st == CHUNK_CUT) {
            /* With its header whole, the cut chunk can be named by its index. */
            uint64_t index = len - off >= CP_CHUNK_HEADER_BYTES ? ch.chunk_index : UINT64_MAX;
            note(&first, res, NOTE_CUT, why, off, index, last_valid);
            res->stop = CP_WALK_TRUNCATED;
            break;
        }
        if (st == CHUNK_BAD) {
            res->corrupt_chunks++;
            note(&first, res, NOTE_CORRUPT, why, off, UINT64_MAX, last_valid);
            off = resync(base, len, off + 8);
            continue;
        }
        const unsigned char *payload = base + off + CP_CHUNK_HEADER_BYTES;
        size_t bad_at = 0;
        if (CP_HASH_DIFFERS(cp_trace_hash(payload, ch.payload_bytes), ch.payload_hash))
            why = "chunk payload fails its hash";
        else
            why = check_records(payload, ch.payload_bytes, ch.record_count, &bad_at);
        size_t end = off + CP_CHUNK_HEADER_BYTES + ch.payload_bytes;
        if (why) {
            /* The header's hash held, so its length is the writer's: skip just this chunk. */
            res->corrupt_chunks++;
            note(&first, res, NOTE_CORRUPT, why, bad_at ? off + CP_CHUNK_HEADER_BYTES + bad_at : off,
                 ch.chunk_index, last_valid);
            off = end;
            continue;
        }
        if (ch.chunk_index > next_index) {
            /* A hostile index near 2^64 must not wrap the count back to nothing. */
            uint64_t gap = ch.chunk_index - next_index;
            res->missing_chunks = res->missing_chunks > UINT64_MAX - gap
                                      ? UINT64_MAX
                                      : res->missing_chunks + gap;
            note(&first, res, NOTE_GAP, "chunk index gap (chunks the writer could not write)",
                 off, ch.chunk_index, last_valid);
        }
        next_index = ch.chunk_index == UINT64_MAX ? UINT64_MAX : ch.chunk_index + 1;
        last_valid = ch.chunk_index;
        res->chunks++;
        res->lost_records = ch.lost_records;
        res->valid_bytes = end;
        off = end;
        if (deliver(v, payload, ch.payload_bytes, (uint64_t)(payload - base), res)) {
            res->stop = CP_WALK_STOPPED;
            break;
        }
    }
    compose_message(res, &first, r->name);
    return 0;
}

int cp_rec_next_string(const cp_record_header *rec, size_t *pos, const char **str, size_t *len)
{
    /* *pos packs the index of the next string (high bits) and its byte offset in the
     * record (low 16 bits): the count, not the bytes, says where the strings end, since
     * zero padding would read as empty strings. */
    size_t fixed;
    unsigned count;
    if (!rec || !pos || !str || !len)
        return 0;
    if (rec->type == CP_REC_SITE && rec->size >= sizeof(cp_rec_site)) {
        fixed = sizeof(cp_rec_site);
        count = ((const cp_rec_site *)rec)->frame_count;
    } else if (rec->type == CP_REC_PROCESS && rec->size >= sizeof(cp_rec_process)) {
        fixed = sizeof(cp_rec_process);
        count = ((const cp_rec_process *)rec)->string_count;
    } else {
        return 0;
    }
    size_t index = *pos >> 16, at = *pos & 0xffff;
    if (*pos == 0)
        at = fixed;
    if (index >= count || at < fixed || at > rec->size || rec->size - at < 2)
        return 0;
    const unsigned char *p = (const unsigned char *)rec;
    uint16_t n;
    memcpy(&n, p + at, sizeof n);
    if (n > rec->size - at - 2)
        return 0;
    *str = (const char *)p + at + 2;
    *len = n;
    *pos = ((index + 1) << 16) | (at + 2 + n);
    return 1;
}

/* ---- directories ---- */

static int cmp_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cp_trace_dir_list(const char *dir, char ***paths, char *err, size_t errlen)
{
    *paths = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            snprintf(err, errlen, "'%s': no such directory", dir);
        else if (errno == ENOTDIR)
            snprintf(err, errlen, "'%s': not a directory", dir);
        else
            snprintf(err, errlen, "'%s': cannot open directory: %s", dir, strerror(errno));
        return -1;
    }
    const size_t suffix = strlen(CP_TRACE_FILE_SUFFIX);
    char **list = NULL;
    int count = 0, cap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= suffix || strcmp(e->d_name + n - suffix, CP_TRACE_FILE_SUFFIX) != 0)
            continue;
        struct stat sb;
        if (e->d_type == DT_DIR ||
            (e->d_type == DT_UNKNOWN && fstatat(dirfd(d), e->d_name, &sb, 0) == 0 &&
             S_ISDIR(sb.st_mode)))
            continue;
        if (count == cap) {
            int ncap = cap ? cap * 2 : 16;
            char **grown = realloc(list, (size_t)ncap * sizeof *grown);
            if (!grown)
                goto oom;
            list = grown;
            cap = ncap;
        }
        size_t dlen = strlen(dir);
        const char *sep = dlen && dir[dlen - 1] == '/' ? "" : "/";
        size_t plen = dlen + 1 + n + 1;
        list[count] = malloc(plen);
        if (!list[count])
            goto oom;
        snprintf(list[count], plen, "%s%s%s", dir, sep, e->d_name);
        count++;
    }
    closedir(d);
    if (count > 1)
        qsort(list, (size_t)count, sizeof *list, cmp_paths);
    *paths = list;
    return count;
oom:
    closedir(d);
    cp_trace_dir_free(list, count);
    snprintf(err, errlen, "'%s': out of memory listing trace files", dir);
    return -1;
}

void cp_trace_dir_free(char **paths, int count)
{
    if (!paths)
        return;
    for (int i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}
