/* The emulated NCCL's API surface: exactly NCCL's exports (each pnccl strong, its nccl
 * twin weak), the version, error strings, and argument checking with NCCL's result codes
 * and ncclGetLastError texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/emu/test_emu_nccl_util.h"

static const char *const api_names[] = {
#define TN_NAME(ret, name, params, args) #name,
    CP_NCCL_API(TN_NAME) CP_NCCL_API_DEPRECATED(TN_NAME)
#undef TN_NAME
};
#define N_API (sizeof api_names / sizeof api_names[0])

static void exports_exactly_the_api_with_weak_nccl_and_strong_pnccl(void **state)
{
    (void)state;
    const char *build = getenv("COLLPROF_BUILD_DIR");
    assert_non_null(build);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/emu/libnccl.so.2'", build);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    int seen_plain[N_API] = {0}, seen_p[N_API] = {0}, others = 0;
    while (fgets(line, sizeof line, p)) {
        char addr[64], kind[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, kind, name) != 3)
            continue;
        int known = 0;
        for (size_t i = 0; i < N_API; i++) {
            if (strcmp(name, api_names[i]) == 0) {
                assert_string_equal(kind, "W");
                seen_plain[i]++;
                known = 1;
            } else if (name[0] == 'p' && strcmp(name + 1, api_names[i]) == 0) {
                assert_string_equal(kind, "T");
                seen_p[i]++;
                known = 1;
            }
        }
        if (!known) {
            fprintf(stderr, "unexpected export: %s", line);
            others++;
        }
    }
    pclose(p);
    assert_int_equal(others, 0);
    for (size_t i = 0; i < N_API; i++) {
        assert_int_equal(seen_plain[i], 1);
        assert_int_equal(seen_p[i], 1);
    }
}

static void version_and_error_strings_are_nccls(void **state)
{
    (void)state;
    int v = 0;
    assert_int_equal(ncclGetVersion(&v), ncclSuccess);
    assert_int_equal(v, 22809);
    assert_int_equal(ncclGetVersion(NULL), ncclInvalidArgument);
    assert_string_equal(ncclGetErrorString(ncclInvalidArgument),
                        "invalid argument (run with NCCL_DEBUG=WARN for details)");
    assert_string_equal(ncclGetErrorString(ncclInProgress), "NCCL operation in progress");
    assert_string_equal(ncclGetErrorString((ncclResult_t)42), "unknown result code");
    assert_string_equal(pncclGetErrorString(ncclSuccess), "no error");
}

#define EXPECT_ERR(call, code, text)                                                         \
    do {                                                                                     \
        ncclResult_t r_ = (call);                                                            \
        TN_CHECK(r_ == (code), "%s -> %d, expected %d", #call, (int)r_, (int)(code));        \
        TN_CHECK(strcmp(ncclGetLastError(NULL), text) == 0, "%s: last error '%s'", #call,    \
                 ncclGetLastError(NULL));                                                    \
    } while (0)

static int args_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(0, &s))
        return 1;
    ncclComm_t comm = NULL;
    EXPECT_ERR(ncclCommInitRank(&comm, n, *id, 2), ncclInvalidArgument,
               "Invalid rank requested : 2/1");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    EXPECT_ERR(ncclCommInitRankConfig(&comm, n, *id, me, &bad), ncclInvalidArgument,
               "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
    ncclConfig_t bad_blocking = NCCL_CONFIG_INITIALIZER;
    bad_blocking.blocking = 7;
    EXPECT_ERR(ncclCommInitRankConfig(&comm, n, *id, me, &bad_blocking), ncclInvalidArgument,
               "Invalid config blocking attribute value 7");
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));

    int x[4] = {1, 2, 3, 4}, y[4];
    EXPECT_ERR(ncclAllReduce(x, y, 4, ncclInt32, ncclSum, NULL, s), ncclInvalidArgument,
               "AllReduce : comm argument is NULL");
    EXPECT_ERR(ncclAllReduce(x, y, 4, (ncclDataType_t)12, ncclSum, comm, s), ncclInvalidArgument,
               "AllReduce : invalid type 12");
    EXPECT_ERR(ncclAllReduce(x, y, 4, ncclInt32, (ncclRedOp_t)-1, comm, s), ncclInvalidArgument,
               "AllReduce : invalid reduction operation -1");
    ncclRedOp_t garbage = (ncclRedOp_t)(ncclNumOps + 3);
    char want[128];
    ncclResult_t r = ncclAllReduce(x, y, 4, ncclInt32, garbage, comm, s);
    TN_CHECK(r == ncclInvalidArgument, "unknown user op -> %d", r);
    TN_CHECK(strstr(ncclGetLastError(NULL), "unknown to this communicator") != NULL, "%s",
             ncclGetLastError(NULL));
    EXPECT_ERR(ncclBroadcast(x, y, 4, ncclInt32, 5, comm, s), ncclInvalidArgument,
               "Broadcast : invalid root 5 (root should be in the 0..1 range)");
    EXPECT_ERR(ncclSend(x, 4, ncclInt32, -1, comm, s), ncclInvalidArgument,
               "Send : invalid root -1 (root should be in the 0..1 range)");
    EXPECT_ERR(ncclRecv(y, 4, ncclInt32, 1, comm, s), ncclInvalidArgument,
               "Recv : invalid root 1 (root should be in the 0..1 range)");
    EXPECT_ERR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
    /* an error inside a group is also what the group's end returns; nothing is issued */
    TN_NCCL(ncclGroupStart());
    TN_CHECK(ncclReduce(x, y, 4, ncclInt32, ncclSum, 9, comm, s) == ncclInvalidArgument, "root");
    TN_CHECK(ncclGroupEnd() == ncclInvalidArgument, "group end keeps the error");
    EXPECT_ERR(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument,
               "ncclRedOpDestroy : operator is a NCCL builtin.");
    EXPECT_ERR(ncclGetUniqueId(NULL), ncclInvalidArgument, "GetUniqueId : out argument is NULL");
    EXPECT_ERR(ncclCommCount(comm, NULL), ncclInvalidArgument, "CommCount : count argument is NULL");

    int count = 0, dev = -1, rank = -1;
    TN_NCCL(ncclCommCount(comm, &count));
    TN_NCCL(ncclCommCuDevice(comm, &dev));
    TN_NCCL(ncclCommUserRank(comm, &rank));
    TN_CHECK(count == 1 && dev == 0 && rank == 0, "count %d dev %d rank %d", count, dev, rank);
    ncclResult_t async = ncclInternalError;
    TN_NCCL(ncclCommGetAsyncError(comm, &async));
    TN_CHECK(async == ncclSuccess, "async %d", async);

    /* one rank: the op's pre/post operation on a local copy (ncclLaunchOneRank) */
    TN_NCCL(ncclAllReduce(x, y, 4, ncclInt32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(y[0] == 1 && y[3] == 4, "y %d %d", y[0], y[3]);

    void *mem = NULL, *handle = NULL;
    TN_NCCL(ncclMemAlloc(&mem, 1 << 20));
    TN_CHECK(mem != NULL, "ncclMemAlloc gave NULL");
    TN_NCCL(ncclCommRegister(comm, mem, 1 << 20, &handle));
    TN_NCCL(ncclCommDeregister(comm, handle));
    ncclWindow_t win = NULL;
    TN_NCCL(ncclCommWindowRegister(comm, mem, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
    TN_CHECK(win != NULL, "no window");
    TN_NCCL(ncclCommWindowDeregister(comm, win));
    TN_NCCL(ncclMemFree(mem));

    TN_NCCL(ncclCommFinalize(comm));
    TN_CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "second finalize");
    TN_NCCL(ncclCommDestroy(comm));
    snprintf(want, sizeof want, "comm %p has already been destroyed", (void *)comm);
    EXPECT_ERR(ncclCommDestroy(comm), ncclInvalidArgument, want);
    TN_NCCL(ncclCommDestroy(NULL));
    TN_NCCL(ncclCommAbort(NULL));
    return 0;
}

static void arguments_are_checked_like_nccl(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(1, args_rank, NULL, 60), 0);
}

static int groups_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(me + i);
    /* nested: nothing reaches the stream before the outermost end */
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclAllReduce(x, y, 64, ncclFloat32, ncclSum, comm, s));
    TN_NCCL(ncclGroupEnd());
    tn_sleep_ms(20);
    TN_CHECK(cuStreamQuery(s) == CUDA_SUCCESS, "inner GroupEnd issued work");
    TN_NCCL(ncclGroupEnd());
    TN_CU(cuStreamSynchronize(s));
    for (int i = 0; i < 64; i++)
        TN_CHECK(y[i] == (float)(2 * i + 1), "y[%d] = %g", i, y[i]);
    /* NCCL's ncclBcast, the old in-place broadcast */
    int b[3] = {me * 10, me * 10 + 1, me * 10 + 2};
    TN_NCCL(ncclBcast(b, 3, ncclInt32, 1, comm, s));
    TN_CU(cuStreamSynchronize(s));
    TN_CHECK(b[0] == 10 && b[2] == 12, "bcast %d %d", b[0], b[2]);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void nested_groups_issue_at_the_outermost_end(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, groups_rank, NULL, 60), 0);
}

/* NCCL pairs a group's sends to the rank itself with its receives from itself when it
 * schedules them: one left alone fails the group with ncclInvalidUsage (src/enqueue.cc,
 * scheduleP2pTasksToPlan), nothing of it runs; a pair, in place or not, is fine. */
static int self_alone_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    static int32_t a[16], b[16];
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclSend(a, 16, ncclInt32, me, comm, s));
    TN_CHECK(ncclGroupEnd() == ncclInvalidUsage, "a send to itself alone was accepted");
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclRecv(b, 16, ncclInt32, me, comm, s));
    TN_NCCL(ncclSend(a, 16, ncclInt32, me, comm, s));
    TN_NCCL(ncclRecv(b, 16, ncclInt32, me, comm, s));
    TN_CHECK(ncclGroupEnd() == ncclInvalidUsage, "a receive from itself alone was accepted");
    for (int i = 0; i < 16; i++)
        a[i] = me * 100 + i;
    TN_NCCL(ncclGroupStart());
    TN_NCCL(ncclRecv(b, 16, ncclInt32, me, comm, s));
    TN_NCCL(ncclSend(a, 16, ncclInt32, me, comm, s));
    TN_NCCL(ncclGroupEnd());
    TN_CU(cuStreamSynchronize(s));
    for (int i = 0; i < 16; i++)
        TN_CHECK(b[i] == me * 100 + i, "b[%d] = %d", i, (int)b[i]);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void a_send_to_itself_alone_fails_its_group(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(2, self_alone_rank, NULL, 60), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exports_exactly_the_api_with_weak_nccl_and_strong_pnccl),
        cmocka_unit_test(version_and_error_strings_are_nccls),
        cmocka_unit_test(arguments_are_checked_like_nccl),
        cmocka_unit_test(nested_groups_issue_at_the_outermost_end),
        cmocka_unit_test(a_send_to_itself_alone_fails_its_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
