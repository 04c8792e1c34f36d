/* The names every printer uses, the variable-size record builders with their string
 * iterator, and the listing of a trace directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_trace_util.h"

static void op_names_are_nccls_without_the_prefix(void **state)
{
    (void)state;
    assert_string_equal(cp_op_name(CP_OP_ALLREDUCE), "AllReduce");
    assert_string_equal(cp_op_name(CP_OP_BROADCAST), "Broadcast");
    assert_string_equal(cp_op_name(CP_OP_REDUCE), "Reduce");
    assert_string_equal(cp_op_name(CP_OP_ALLGATHER), "AllGather");
    assert_string_equal(cp_op_name(CP_OP_REDUCESCATTER), "ReduceScatter");
    assert_string_equal(cp_op_name(CP_OP_ALLTOALL), "AlltoAll");
    assert_string_equal(cp_op_name(CP_OP_GATHER), "Gather");
    assert_string_equal(cp_op_name(CP_OP_SCATTER), "Scatter");
    assert_string_equal(cp_op_name(CP_OP_SEND), "Send");
    assert_string_equal(cp_op_name(CP_OP_RECV), "Recv");
    assert_string_equal(cp_op_name(CP_OP_GROUP_START), "GroupStart");
    assert_string_equal(cp_op_name(CP_OP_GROUP_END), "GroupEnd");
    assert_string_equal(cp_op_name(CP_OP_COMM_SPLIT), "CommSplit");
    assert_string_equal(cp_op_name(CP_OP_COMM_REVOKE), "CommRevoke");
    assert_string_equal(cp_op_name(CP_OP_COUNT), "?");
    assert_string_equal(cp_op_name(255), "?");
    for (int op = 0; op < CP_OP_COUNT; op++)
        assert_int_equal(cp_op_from_name(cp_op_name((unsigned)op)), op);
    assert_int_equal(cp_op_from_name("allreduce"), CP_OP_ALLREDUCE);
    assert_int_equal(cp_op_from_name("Bcast"), CP_OP_BROADCAST);
    assert_int_equal(cp_op_from_name("AllReduc"), -1);
    assert_int_equal(cp_op_from_name(""), -1);
    assert_int_equal(cp_op_from_name(NULL), -1);

    for (unsigned op = 0; op < 256; op++) {
        assert_int_equal(cp_op_is_collective(op), op >= CP_OP_ALLREDUCE && op <= CP_OP_SCATTER);
        assert_int_equal(cp_op_is_p2p(op), op == CP_OP_SEND || op == CP_OP_RECV);
    }
}

static void dtypes_follow_nccl_numbering(void **state)
{
    (void)state;
    const char *names[] = {"int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
                           "float16", "float32", "float64",  "bfloat16",   "float8e4m3", "float8e5m2"};
    const unsigned sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    for (unsigned d = 0; d < 12; d++) {
        assert_string_equal(cp_dtype_name(d), names[d]);
        assert_int_equal(cp_dtype_size(d), sizes[d]);
    }
    assert_string_equal(cp_dtype_name(12), "?");
    assert_string_equal(cp_dtype_name(CP_DTYPE_UNKNOWN), "?");
    assert_int_equal(cp_dtype_size(CP_DTYPE_UNKNOWN), 0);

    const char *redops[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
    for (unsigned r = 0; r <= CP_REDOP_DYNAMIC; r++)
        assert_string_equal(cp_redop_name(r), redops[r]);
    assert_string_equal(cp_redop_name(CP_REDOP_NONE), "none");
    assert_string_equal(cp_redop_name(6), "?");
}

/* NCCL's own spellings both ways; an unknown name or number is "?" / 0, never refused. */
static void algorithm_and_protocol_names(void **state)
{
    (void)state;
    const char *algos[] = {"?", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS",
                           "NVLS_TREE", "PAT"};
    for (unsigned a = 0; a < CP_ALGO_COUNT; a++) {
        assert_string_equal(cp_algo_name(a), algos[a]);
        if (a)
            assert_int_equal(cp_algo_from_name(algos[a]), (int)a);
    }
    const char *protos[] = {"?", "LL", "LL128", "SIMPLE"};
    for (unsigned p = 0; p < CP_PROTO_COUNT; p++) {
        assert_string_equal(cp_proto_name(p), protos[p]);
        if (p)
            assert_int_equal(cp_proto_from_name(protos[p]), (int)p);
    }
    assert_string_equal(cp_algo_name(CP_ALGO_COUNT), "?");
    assert_string_equal(cp_proto_name(200), "?");
    assert_int_equal(cp_algo_from_name("ring"), CP_ALGO_UNKNOWN); /* NCCL's case only */
    assert_int_equal(cp_algo_from_name(NULL), CP_ALGO_UNKNOWN);
    assert_int_equal(cp_proto_from_name("LL129"), CP_PROTO_UNKNOWN);
}

static void untimed_cause_names(void **state)
{
    (void)state;
    assert_null(cp_untimed_cause_name(0));
    assert_string_equal(cp_untimed_cause_name(CP_UNTIMED_EVENT_POOL), "event_pool");
    assert_string_equal(cp_untimed_cause_name(CP_UNTIMED_PLUGIN_POOL), "plugin_pool");
    assert_string_equal(cp_untimed_cause_name(CP_UNTIMED_GROUP), "group");
    assert_string_equal(cp_untimed_cause_name(CP_UNTIMED_NO_CONTEXT), "no_context");
    assert_null(cp_untimed_cause_name(CP_UNTIMED_CAUSE_LAST + 1));
}

static void record_type_names(void **state)
{
    (void)state;
    const char *names[] = {NULL, "PROCESS", "COMM", "SITE", "CALL", "DONE",
                           "CLOCK", "LOST", "HANG", "END", "NCCL_OP", "KNAME", "KERNELS",
                           "SEGMENT", "UNTIMED"};
    _Static_assert(sizeof names / sizeof names[0] == CP_REC_TYPE_MAX_KNOWN + 1,
                   "a name for every known type");
    assert_null(cp_record_type_name(0));
    for (unsigned t = 1; t <= CP_REC_TYPE_MAX_KNOWN; t++)
        assert_string_equal(cp_record_type_name(t), names[t]);
    assert_null(cp_record_type_name(CP_REC_TYPE_MAX_KNOWN + 1));
    assert_null(cp_record_type_name(65535));
}

/* A rotated trace's segment names: the writer's and the reader's agree, sort in segment
 * order, keep the suffix every tool lists, and a name that only looks like one is none. */
static void segment_names_round_trip_and_sort_in_order(void **state)
{
    (void)state;
    char a[128], b[128];
    size_t fam;
    assert_int_equal(cp_trace_segment_path(a, sizeof a, "d/rank00003-h-12.cptrace", 0), 0);
    assert_string_equal(a, "d/rank00003-h-12.cptrace");
    assert_int_equal(cp_trace_segment_of(a, &fam), 0);
    assert_int_equal(fam, strlen("d/rank00003-h-12"));
    assert_int_equal(cp_trace_segment_path(b, sizeof b, "d/rank00003-h-12.cptrace", 7), 0);
    assert_string_equal(b, "d/rank00003-h-12.s000007.cptrace");
    assert_int_equal(cp_trace_segment_of(b, &fam), 7);
    assert_int_equal(fam, strlen("d/rank00003-h-12"));
    assert_true(strcmp(a, b) < 0);
    assert_int_equal(cp_trace_segment_path(a, sizeof a, "d/rank00003-h-12.cptrace", 10), 0);
    assert_true(strcmp(b, a) < 0);
    assert_int_equal(cp_trace_segment_path(a, sizeof a, "d/x.cptrace", 1234567), 0);
    assert_int_equal(cp_trace_segment_of(a, &fam), 1234567);
    assert_int_equal(cp_trace_segment_path(a, 10, "d/rank00003-h-12.cptrace", 7), -1);
    /* not segments: too few digits, segment 0 spelt out, no tag */
    assert_int_equal(cp_trace_segment_of("d/run.s12.cptrace", &fam), 0);
    assert_int_equal(fam, strlen("d/run.s12"));
    assert_int_equal(cp_trace_segment_of("d/run.s000000.cptrace", &fam), 0);
    assert_int_equal(cp_trace_segment_of("d/run-000007.cptrace", &fam), 0);
}

static void a_site_record_holds_its_frames_padded_to_8(void **state)
{
    (void)state;
    unsigned char buf[256];
    memset(buf, 0xff, sizeof buf);
    const char *frames[] = {"ncclAllReduce+0x10 (libnccl.so.2)", NULL, "step+0x3 (m.so)"};
    size_t n = cp_rec_site_build(buf, sizeof buf, 7, 0xdeadbeef, frames, 3);
    /* 24 fixed + (2+33) + (2+0) + (2+15) = 78, padded to 80 */
    assert_int_equal(n, 80);
    const cp_rec_site *s = (const cp_rec_site *)buf;
    assert_int_equal(s->h.type, CP_REC_SITE);
    assert_int_equal(s->h.size, 80);
    assert_int_equal(s->site_index, 7);
    assert_int_equal(s->return_addr, 0xdeadbeef);
    assert_int_equal(s->frame_count, 3);
    assert_int_equal(s->reserved[0] | s->reserved[1] | s->reserved[2], 0);
    assert_int_equal(buf[78] | buf[79], 0); /* padding is zero */

    size_t pos = 0, len = 99;
    const char *str = NULL;
    assert_int_equal(cp_rec_next_string(&s->h, &pos, &str, &len), 1);
    assert_int_equal(len, 33);
    assert_memory_equal(str, frames[0], 33);
    assert_int_equal(cp_rec_next_string(&s->h, &pos, &str, &len), 1);
    assert_int_equal(len, 0);
    assert_int_equal(cp_rec_next_string(&s->h, &pos, &str, &len), 1);
    assert_int_equal(len, 15);
    assert_memory_equal(str, "step+0x3 (m.so)", 15);
    assert_int_equal(cp_rec_next_string(&s->h, &pos, &str, &len), 0);
    assert_int_equal(cp_rec_next_string(&s->h, &pos, &str, &len), 0);

    /* Too small a buffer: nothing built. */
    assert_int_equal(cp_rec_site_build(buf, 79, 7, 0, frames, 3), 0);
    assert_int_equal(cp_rec_site_build(buf, sizeof buf, 7, 0, NULL, 0), 24);
    pos = 0;
    assert_int_equal(cp_rec_next_string((const cp_record_header *)buf, &pos, &str, &len), 0);
}

static void long_strings_are_cut_and_huge_records_refused(void **state)
{
    (void)state;
    char *longs = malloc(5000);
    memset(longs, 'a', 4999);
    longs[4999] = '\0';
    unsigned char *buf = malloc(70000);
    const char *frames[64];
    for (int i = 0; i < 64; i++)
        frames[i] = longs;
    size_t n = cp_rec_site_build(buf, 70000, 0, 0, frames, 1);
    assert_int_equal(n, 24 + ((2 + CP_STRING_MAX + 7) & ~7u));
    size_t pos = 0, len;
    const char *str;
    assert_int_equal(cp_rec_next_string((const cp_record_header *)buf, &pos, &str, &len), 1);
    assert_int_equal(len, CP_STRING_MAX);
    /* 64 strings of 1 KiB cannot fit a u16 record size. */
    assert_int_equal(cp_rec_site_build(buf, 70000, 0, 0, frames, 64), 0);
    free(buf);
    free(longs);
}

static void a_process_record_leaves_out_trailing_absent_strings(void **state)
{
    (void)state;
    unsigned char buf[128];
    cp_rec_process fixed = {.rank = 5, .local_rank = 1, .world_size = 16, .nccl_version = 22905,
                            .pid = 99, .cuda_driver_version = 12080, .reserved0 = 77};
    size_t n = cp_rec_process_build(buf, sizeof buf, &fixed, "gpu-node-1", NULL, NULL);
    assert_int_equal(n, 48); /* 32 + 2 + 10 = 44, padded */
    const cp_rec_process *p = (const cp_rec_process *)buf;
    assert_int_equal(p->h.type, CP_REC_PROCESS);
    assert_int_equal(p->string_count, 1);
    assert_int_equal(p->reserved0, 0);
    assert_int_equal(p->rank, 5);
    assert_int_equal(p->cuda_driver_version, 12080);

    n = cp_rec_process_build(buf, sizeof buf, &fixed, NULL, NULL, "slurm");
    assert_int_equal(p->string_count, 3);
    size_t pos = 0, len;
    const char *str;
    const char *want[] = {"", "", "slurm"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cp_rec_next_string(&p->h, &pos, &str, &len), 1);
        assert_int_equal(len, strlen(want[i]));
        assert_memory_equal(str, want[i], len);
    }
    assert_int_equal(cp_rec_next_string(&p->h, &pos, &str, &len), 0);
    assert_int_equal(n, 48); /* 32 + 2 + 2 + 2 + 5 = 43 */
    assert_int_equal(cp_rec_process_build(buf, 40, &fixed, "gpu-node-1", NULL, NULL), 0);

    /* Not a record with strings. */
    cp_rec_call c = tt_call(0);
    pos = 0;
    assert_int_equal(cp_rec_next_string(&c.h, &pos, &str, &len), 0);
}

static void a_directory_lists_its_trace_files_sorted(void **state)
{
    (void)state;
    char *dir = tt_tmpdir();
    char path[700], err[256];
    const char *names[] = {"rank2.cptrace", "rank10.cptrace", "rank0.cptrace", "notes.txt",
                           ".cptrace", "rank1.cptrace.tmp"};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        tt_write_file(path, "x", 1);
    }
    snprintf(path, sizeof path, "%s/sub.cptrace", dir);
    assert_int_equal(mkdir(path, 0755), 0);

    char **paths = NULL;
    int n = cp_trace_dir_list(dir, &paths, err, sizeof err);
    assert_int_equal(n, 3);
    const char *want[] = {"rank0.cptrace", "rank10.cptrace", "rank2.cptrace"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, want[i]);
        assert_string_equal(paths[i], path);
    }
    cp_trace_dir_free(paths, n);

    snprintf(path, sizeof path, "%s/", dir);
    n = cp_trace_dir_list(path, &paths, err, sizeof err);
    assert_int_equal(n, 3);
    snprintf(path, sizeof path, "%s/rank0.cptrace", dir);
    assert_string_equal(paths[0], path);
    cp_trace_dir_free(paths, n);

    snprintf(path, sizeof path, "%s/nope", dir);
    assert_int_equal(cp_trace_dir_list(path, &paths, err, sizeof err), -1);
    assert_null(paths);
    assert_non_null(strstr(err, "no such directory"));
    assert_non_null(strstr(err, path));

    snprintf(path, sizeof path, "%s/notes.txt", dir);
    assert_int_equal(cp_trace_dir_list(path, &paths, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a directory"));

    snprintf(path, sizeof path, "%s/sub.cptrace", dir);
    assert_int_equal(cp_trace_dir_list(path, &paths, err, sizeof err), 0);
    cp_trace_dir_free(paths, 0);
    tt_rmtree(dir);
    free(dir);
}

/* A CALL's host time is exact to the ns across 2^32 ns and up to 52 days, saturates past
 * them, and a reader that knows no host_hi reads a long call as the old saturation. */
static void host_time_is_exact_past_32_bits_and_saturates(void **state)
{
    (void)state;
    static const uint64_t ns[] = {0, 1, 1000000000ull, CP_HOST_NS_WIDE - 1, CP_HOST_NS_WIDE,
                                  UINT32_MAX - 1, UINT32_MAX, 1ull << 32, (1ull << 32) + 1,
                                  2000000000ull, 3000000000ull, 5000000000ull,
                                  3600000000000ull * 24, CP_HOST_NS_MAX - 1, CP_HOST_NS_MAX};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cp_rec_call c = {0};
        cp_call_set_host_ns(&c, ns[i]);
        assert_int_equal(cp_call_host_ns(&c), ns[i]);
        /* the word an older reader reads alone */
        if (ns[i] < CP_HOST_NS_WIDE) {
            assert_int_equal(c.host_hi, 0);
            assert_int_equal(c.host_ns, ns[i]);
        } else {
            assert_true(c.host_ns >= UINT32_MAX - (1u << CP_HOST_LOW_BITS));
        }
    }
    static const uint64_t past[] = {CP_HOST_NS_MAX + 1, 1ull << 60, UINT64_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        cp_rec_call c = {0};
        cp_call_set_host_ns(&c, past[i]);
        assert_int_equal(cp_call_host_ns(&c), CP_HOST_NS_MAX);
        assert_int_equal(c.host_hi, UINT32_MAX);
        assert_int_equal(c.host_ns, UINT32_MAX);
    }
    /* a file of an older writer: its saturated calls read as they always did */
    cp_rec_call old = {.host_ns = UINT32_MAX};
    assert_int_equal(cp_call_host_ns(&old), UINT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(op_names_are_nccls_without_the_prefix),
        cmocka_unit_test(dtypes_follow_nccl_numbering),
        cmocka_unit_test(record_type_names),
        cmocka_unit_test(untimed_cause_names),
        cmocka_unit_test(segment_names_round_trip_and_sort_in_order),
        cmocka_unit_test(algorithm_and_protocol_names),
        cmocka_unit_test(a_site_record_holds_its_frames_padded_to_8),
        cmocka_unit_test(long_strings_are_cut_and_huge_records_refused),
        cmocka_unit_test(a_process_record_leaves_out_trailing_absent_strings),
        cmocka_unit_test(a_directory_lists_its_trace_files_sorted),
        cmocka_unit_test(host_time_is_exact_past_32_bits_and_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
