/* Every collective x every data type x every reduction, in place and out of place, on 1, 2,
 * 3 and 8 ranks (forked processes), against a reference computed here: integers exactly
 * (with the GPU's wrap-around), floating results within (n+2) unit roundoffs of the sum of
 * magnitudes of a float64 reference (the emulation reduces in rank order, rounding each
 * step to the data type, docs/EMULATION.md). A few sizes span several staging pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "emu/common/topo.h"
#include "tests/emu/test_emu_nccl_util.h"

/* The element codec under test elsewhere (test_emu_nccl_kernels); inputs are small
 * integers, exact in every type, so it only reads and writes values here. */
size_t cpn_dtype_size(int dtype);
int cpn_dtype_is_float(int dtype);
double cpn_elem_to_double(const void *p, int dtype);
void cpn_double_to_elem(double x, void *p, int dtype);

enum { RED_SUM, RED_PROD, RED_MAX, RED_MIN, RED_AVG, RED_PREMUL_HOST, RED_PREMUL_DEV, NRED };

static int is_signed(int dt) { return dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64; }

/* rank r's element i: -2..2 (0..4 unsigned), never more than 16 in magnitude once summed */
static double input(int dt, int r, size_t i)
{
    int v = (int)((r * 7 + i * 3 + (size_t)dt) % 5);
    return is_signed(dt) || cpn_dtype_is_float(dt) ? v - 2 : v;
}

static double unit_roundoff(int dt)
{
    switch (dt) {
    case ncclFloat16: return ldexp(1, -11);
    case ncclBfloat16: return ldexp(1, -8);
    case ncclFloat32: return ldexp(1, -24);
    case ncclFloat64: return ldexp(1, -53);
    case ncclFloat8e4m3: return ldexp(1, -4);
    case ncclFloat8e5m2: return ldexp(1, -3);
    default: return 0;
    }
}

static uint64_t wrap(uint64_t v, int dt)
{
    int bits = (int)cpn_dtype_size(dt) * 8;
    return bits == 64 ? v : v & ((1ull << bits) - 1);
}

static double as_int(uint64_t v, int dt)
{
    int bits = (int)cpn_dtype_size(dt) * 8;
    if (is_signed(dt) && bits < 64 && (v >> (bits - 1)) & 1)
        return (double)(int64_t)(v | ~((1ull << bits) - 1));
    return is_signed(dt) ? (double)(int64_t)v : (double)v;
}

/* The reduction of element i of block `blk` over all ranks, and a bound on its error. */
static double reference(int dt, int red, int n, size_t idx, double scalar, double *tol)
{
    *tol = 0;
    if (!cpn_dtype_is_float(dt)) {
        uint64_t acc = 0;
        double m = 0;
        for (int r = 0; r < n; r++) {
            int64_t x = (int64_t)input(dt, r, idx);
            uint64_t ux = (uint64_t)x;
            if (red == RED_PREMUL_HOST || red == RED_PREMUL_DEV)
                ux *= (uint64_t)(int64_t)scalar;
            if (r == 0) {
                acc = ux;
                m = (double)x;
            } else if (red == RED_PROD) {
                acc *= ux;
            } else if (red == RED_MAX) {
                m = fmax(m, (double)x);
            } else if (red == RED_MIN) {
                m = fmin(m, (double)x);
            } else {
                acc += ux;
            }
        }
        if (red == RED_MAX || red == RED_MIN)
            return m;
        double v = as_int(wrap(acc, dt), dt);
        if (red == RED_AVG)
            v = trunc(v / n);
        return v;
    }
    double acc = 0, mag = 0;
    for (int r = 0; r < n; r++) {
        double x = input(dt, r, idx);
        if (red == RED_PREMUL_HOST || red == RED_PREMUL_DEV)
            x *= scalar;
        if (red == RED_AVG)
            x /= n;
        mag += fabs(x);
        if (r == 0 || red == RED_SUM || red == RED_AVG || red >= RED_PREMUL_HOST)
            acc = r == 0 ? x : acc + x;
        else if (red == RED_PROD)
            acc *= x;
        else if (red == RED_MAX)
            acc = fmax(acc, x);
        else
            acc = fmin(acc, x);
    }
    if (red == RED_PROD)
        mag = fabs(acc);
    *tol = (n + 2) * unit_roundoff(dt) * mag;
    return acc;
}

typedef struct job {
    int nranks;
    size_t count;
    int coll;
} job;

static void fill(void *buf, int dt, int r, size_t n)
{
    size_t es = cpn_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        cpn_double_to_elem(input(dt, r, i), (char *)buf + i * es, dt);
}

static int expect(const void *buf, size_t at, int dt, double want, double tol, const char *what)
{
    double got = cpn_elem_to_double((const char *)buf + at * cpn_dtype_size(dt), dt);
    TN_CHECK(fabs(got - want) <= tol, "%s dtype %d element %zu: got %g want %g (tol %g)", what,
             dt, at, got, want, tol);
    return 0;
}

static ncclRedOp_t make_op(int red, int dt, ncclComm_t comm, void *scalar_dev, double *scalar)
{
    static const ncclRedOp_t builtin[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    if (red < RED_PREMUL_HOST) {
        *scalar = 1;
        return builtin[red];
    }
    /* 2 for integers (wraps), 0.5 for floats: exact in every type */
    *scalar = cpn_dtype_is_float(dt) ? 0.5 : 2;
    char host[8];
    cpn_double_to_elem(*scalar, host, dt);
    ncclRedOp_t op;
    if (red == RED_PREMUL_HOST) {
        ncclRedOpCreatePreMulSum(&op, host, (ncclDataType_t)dt, ncclScalarHostImmediate, comm);
    } else {
        memcpy(scalar_dev, host, 8);
        ncclRedOpCreatePreMulSum(&op, scalar_dev, (ncclDataType_t)dt, ncclScalarDevice, comm);
    }
    return op;
}

/* One collective, one type, one reduction, in or out of place: run and check. */
static int one(ncclComm_t comm, CUstream s, int me, int n, int coll, int dt, int red,
               int inplace, size_t count)
{
    size_t es = cpn_dtype_size(dt);
    int root = n - 1;
    int blocks = coll == CPEMU_OP_REDUCESCATTER || coll == CPEMU_OP_ALLTOALL ||
                 (coll == CPEMU_OP_SCATTER) ? n : 1;
    int out_blocks = coll == CPEMU_OP_ALLGATHER || coll == CPEMU_OP_ALLTOALL || coll == CPEMU_OP_GATHER ? n : 1;
    size_t in_n = count * (size_t)blocks, out_n = count * (size_t)out_blocks;
    size_t big = in_n > out_n ? in_n : out_n;
    char *buf = calloc(big, es), *sbuf = calloc(in_n, es), *rbuf = calloc(out_n, es);
    double scalar;
    char scalar_dev[8];
    ncclRedOp_t op = make_op(red, dt, comm, scalar_dev, &scalar);
    char *sendp = sbuf, *recvp = rbuf;
    if (inplace) {
        /* where NCCL defines each in-place call's input and output */
        char *mine = buf + (size_t)me * count * es;
        sendp = recvp = buf;
        if (coll == CPEMU_OP_ALLGATHER || (coll == CPEMU_OP_GATHER && me == root))
            sendp = mine;
        else if (coll == CPEMU_OP_REDUCESCATTER || (coll == CPEMU_OP_SCATTER && me == root))
            recvp = mine;
    }
    fill(sendp, dt, me, in_n);
    ncclDataType_t t = (ncclDataType_t)dt;
    ncclResult_t rc = ncclSuccess;
    switch (coll) {
    case CPEMU_OP_ALLREDUCE: rc = ncclAllReduce(sendp, recvp, count, t, op, comm, s); break;
    case CPEMU_OP_REDUCE: rc = ncclReduce(sendp, recvp, count, t, op, root, comm, s); break;
    case CPEMU_OP_BROADCAST: rc = ncclBroadcast(sendp, recvp, count, t, root, comm, s); break;
    case CPEMU_OP_ALLGATHER: rc = ncclAllGather(sendp, recvp, count, t, comm, s); break;
    case CPEMU_OP_REDUCESCATTER: rc = ncclReduceScatter(sendp, recvp, count, t, op, comm, s); break;
    case CPEMU_OP_ALLTOALL: rc = ncclAlltoAll(sendp, recvp, count, t, comm, s); break;
    case CPEMU_OP_GATHER: rc = ncclGather(sendp, recvp, count, t, root, comm, s); break;
    case CPEMU_OP_SCATTER: rc = ncclScatter(sendp, recvp, count, t, root, comm, s); break;
    }
    TN_CHECK(rc == ncclSuccess, "coll %d dtype %d red %d -> %d: %s", coll, dt, red, rc,
             ncclGetLastError(comm));
    TN_CU(cuStreamSynchronize(s));
    if (red >= RED_PREMUL_HOST)
        TN_NCCL(ncclRedOpDestroy(op, comm));
    char what[64];
    snprintf(what, sizeof what, "coll %d red %d inplace %d n %d", coll, red, inplace, n);
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++) {
        double tol, want;
        switch (coll) {
        case CPEMU_OP_ALLREDUCE:
        case CPEMU_OP_REDUCE:
            want = reference(dt, red, n, i, scalar, &tol);
            if (coll == CPEMU_OP_ALLREDUCE || me == root)
                bad = expect(recvp, i, dt, want, tol, what);
            break;
        case CPEMU_OP_REDUCESCATTER:
            want = reference(dt, red, n, (size_t)me * count + i, scalar, &tol);
            bad = expect(recvp, i, dt, want, tol, what);
            break;
        case CPEMU_OP_BROADCAST:
            bad = expect(recvp, i, dt, input(dt, root, i), 0, what);
            break;
        case CPEMU_OP_SCATTER:
            bad = expect(recvp, i, dt, input(dt, root, (size_t)me * count + i), 0, what);
            break;
        default:
            for (int j = 0; j < n && !bad; j++) {
                size_t src = coll == CPEMU_OP_ALLTOALL ? (size_t)me * count + i : i;
                if (coll != CPEMU_OP_GATHER || me == root)
                    bad = expect(recvp, (size_t)j * count + i, dt, input(dt, j, src), 0, what);
            }
        }
    }
    free(buf);
    free(sbuf);
    free(rbuf);
    return bad;
}

static int matrix_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    const job *j = arg;
    CUstream s;
    if (tn_device(me % 8, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    static const int colls[] = {CPEMU_OP_ALLREDUCE, CPEMU_OP_REDUCE, CPEMU_OP_REDUCESCATTER,
                                CPEMU_OP_BROADCAST, CPEMU_OP_ALLGATHER, CPEMU_OP_ALLTOALL,
                                CPEMU_OP_GATHER, CPEMU_OP_SCATTER};
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
        int coll = colls[c];
        if (j->coll && coll != j->coll)
            continue;
        int reduces = coll == CPEMU_OP_ALLREDUCE || coll == CPEMU_OP_REDUCE ||
                      coll == CPEMU_OP_REDUCESCATTER;
        for (int dt = 0; dt < ncclNumTypes; dt++)
            for (int red = 0; red < (reduces ? NRED : 1); red++)
                for (int inplace = 0; inplace < 2; inplace++)
                    if (one(comm, s, me, n, coll, dt, red, inplace, j->count))
                        return 1;
    }
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void run(int nranks, size_t count, int coll)
{
    job j = {nranks, count, coll};
    assert_int_equal(tn_run_ranks(nranks, matrix_rank, &j, 120), 0);
}

static void every_op_type_and_reduction_on_1_rank(void **state) { (void)state; run(1, 37, 0); }
static void every_op_type_and_reduction_on_2_ranks(void **state) { (void)state; run(2, 37, 0); }
static void every_op_type_and_reduction_on_3_ranks(void **state) { (void)state; run(3, 29, 0); }
static void every_op_type_and_reduction_on_8_ranks(void **state) { (void)state; run(8, 11, 0); }

static int large_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me % 8, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    /* past one staging slot (256 KiB): several pieces, uneven last piece */
    static const int colls[] = {CPEMU_OP_ALLREDUCE, CPEMU_OP_REDUCESCATTER, CPEMU_OP_ALLGATHER,
                                CPEMU_OP_ALLTOALL, CPEMU_OP_BROADCAST, CPEMU_OP_SCATTER};
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
        for (int inplace = 0; inplace < 2; inplace++)
            if (one(comm, s, me, n, colls[c], ncclFloat32, RED_SUM, inplace, 100003) ||
                one(comm, s, me, n, colls[c], ncclInt64, RED_MAX, inplace, 40001))
                return 1;
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void large_messages_move_in_pieces(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(3, large_rank, NULL, 120), 0);
}

/* The segment's mappings in this process (their names are unlinked, /proc still shows
 * them): what the staging costs in shared memory. */
static size_t shm_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    size_t total = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (strstr(line, "/dev/shm/cpemu-nccl-") && sscanf(line, "%lx-%lx", &a, &b) == 2)
            total += b - a;
    }
    if (f)
        fclose(f);
    return total;
}

static int big_rank(int me, int n, const ncclUniqueId *id, void *arg)
{
    (void)arg;
    CUstream s;
    if (tn_device(me, &s))
        return 1;
    ncclComm_t comm;
    TN_NCCL(ncclCommInitRank(&comm, n, *id, me));
    size_t count = 25u * 1000 * 1000 / 4;
    float *buf = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)((i + (size_t)me) % 7);
    TN_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
    TN_CU(cuStreamSynchronize(s));
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < n; r++)
            want += (float)((i + (size_t)r) % 7);
        TN_CHECK(buf[i] == want, "[%zu] = %g, want %g", i, buf[i], want);
    }
    size_t mapped = shm_mapped();
    TN_CHECK(mapped > 0 && mapped < (16u << 20), "%zu bytes of /dev/shm for 25 MB messages",
             mapped);
    free(buf);
    TN_NCCL(ncclCommDestroy(comm));
    return 0;
}

static void a_25_MB_all_reduce_on_8_ranks_uses_bounded_shared_memory(void **state)
{
    (void)state;
    assert_int_equal(tn_run_ranks(8, big_rank, NULL, 120), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_op_type_and_reduction_on_1_rank),
        cmocka_unit_test(every_op_type_and_reduction_on_2_ranks),
        cmocka_unit_test(every_op_type_and_reduction_on_3_ranks),
        cmocka_unit_test(every_op_type_and_reduction_on_8_ranks),
        cmocka_unit_test(large_messages_move_in_pieces),
        cmocka_unit_test(a_25_MB_all_reduce_on_8_ranks_uses_bounded_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
