/* collprof-sim pointed at the real NCCL of a CUDA toolkit on a machine without a GPU or a
 * driver (LD_LIBRARY_PATH=$CUDA_HOME/lib64): it must not crash, nor use the emulated driver its
 * RUNPATH could reach, but exit 3 with NCCL's own error text. Skipped (77) without a toolkit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "tests/emu/test_emu_sim_util.h"

static char g_lib64[4096];

static void exits_3_with_nccls_own_error_text(void **state)
{
    (void)state;
    char ld[4200];
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", g_lib64);
    /* NCCL's own allocations at exit are not ours to report */
    const char *const env[] = { ld, "ASAN_OPTIONS=detect_leaks=0", NULL };
    const char *const *runs[] = {
        (const char *const[]){ "--pattern", "ddp", "--steps", "2", NULL },
        (const char *const[]){ "--launch", "2", "--pattern", "mixed", "--steps", "2", NULL },
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        struct sim_result r;
        sim_run(&r, env, runs[i], 60);
        int ok = r.status == 3 && strstr(r.err, "no CUDA driver") &&
                 strstr(r.err, "ncclCommInitRank failed: unhandled cuda error") &&
                 strstr(r.err, "NCCL 2.") && !*r.out;
        if (!ok)
            sim_show(runs[i][0], &r);
        assert_true(ok);
        sim_result_free(&r);
    }
}

int main(void)
{
    const char *home = getenv("CUDA_HOME");
    snprintf(g_lib64, sizeof g_lib64, "%s/lib64", home && *home ? home : "/usr/local/cuda");
    char nccl[4200];
    snprintf(nccl, sizeof nccl, "%s/libnccl.so.2", g_lib64);
    if (access(nccl, R_OK)) {
        printf("skipped: no real NCCL at %s\n", nccl);
        return 77;
    }
    /* this test binary has no RUNPATH: only an installed driver can be found */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver) {
        printf("skipped: a CUDA driver is installed; this checks a machine without one\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exits_3_with_nccls_own_error_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
