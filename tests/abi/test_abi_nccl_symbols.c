/* The installed libnccl.so.2 agrees with our list: it exports every entry point and its
 * pnccl twin, exports no nccl* function the list lacks (device-API ones apart), reports a
 * version our NCCL_VERSION decodes, and ncclGetErrorString's text is cp_nccl_result_name's
 * for every code. Skipped (77) when ${CUDA_HOME}/lib64/libnccl.so.2 is absent. Needs no
 * GPU: nothing called here touches CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/nccl_abi.h"
#include "abi/nccl_api_list.h"
#include "tests/abi/test_abi_util.h"

#ifndef CP_TEST_LIBNCCL
#error "CMake passes the path of libnccl.so.2 as CP_TEST_LIBNCCL"
#endif

#define CP_PFN(ret, name, params, args) typedef ret (*cp_pfn_##name) params;
CP_NCCL_API(CP_PFN)
#undef CP_PFN

static void *lib;

static const char *const our_api[] = {
#define CP_NAME(ret, name, params, args) #name,
    CP_NCCL_API(CP_NAME) CP_NCCL_API_DEPRECATED(CP_NAME)
#undef CP_NAME
};
#define CP_OUR_API_COUNT (sizeof our_api / sizeof our_api[0])

/* Exported by libnccl.so.2 but rightly absent from the list: the host half of the device
 * API (declared in nccl_device/, C++ only, over types nccl.h lacks) and an internal helper
 * behind ncclResetDebugInit. A name outside both sets is a new entry point to list. */
static const char *const not_listed[] = {
    "ncclDevCommCreate", "ncclDevCommDestroy", "ncclGinBarrierCreateRequirement",
    "ncclLLA2ACalcSlots", "ncclLLA2ACreateRequirement", "ncclLsaBarrierCreateRequirement",
    "ncclTeamLsa", "ncclTeamRail", "ncclTeamRankToLsa", "ncclTeamRankToWorld", "ncclTeamWorld",
    "ncclResetDebugInitInternal",
};

static void *sym(const char *name)
{
    dlerror();
    return dlsym(lib, name);
}

static void every_listed_name_and_its_pnccl_twin_is_exported(void **state)
{
    (void)state;
    int missing = 0;
    char twin[128];
    for (size_t i = 0; i < CP_OUR_API_COUNT; i++) {
        snprintf(twin, sizeof twin, "p%s", our_api[i]);
        const char *names[2] = { our_api[i], twin };
        for (int k = 0; k < 2; k++) {
            if (!sym(names[k])) {
                print_error("%s does not export %s\n", CP_TEST_LIBNCCL, names[k]);
                missing++;
            }
        }
    }
    assert_int_equal(missing, 0);
}

struct export_ctx {
    int nccl_functions;
    int unlisted;
};

static void check_export(const char *name, void *ctx)
{
    struct export_ctx *e = ctx;
    if (strncmp(name, "nccl", 4) != 0)
        return;
    e->nccl_functions++;
    for (size_t i = 0; i < CP_OUR_API_COUNT; i++)
        if (strcmp(name, our_api[i]) == 0)
            return;
    for (size_t i = 0; i < sizeof not_listed / sizeof not_listed[0]; i++)
        if (strcmp(name, not_listed[i]) == 0)
            return;
    print_error("%s exports %s, which abi/nccl_api_list.h does not list\n", CP_TEST_LIBNCCL,
                name);
    e->unlisted++;
}

static void the_library_exports_no_unlisted_entry_point(void **state)
{
    (void)state;
    struct export_ctx e = { 0, 0 };
    long n = cp_test_elf_dynamic_functions(CP_TEST_LIBNCCL, check_export, &e);
    assert_true(n > 0);
    assert_true(e.nccl_functions >= (int)CP_OUR_API_COUNT);
    assert_int_equal(e.unlisted, 0);
}

static void the_version_decodes_with_nccl_version(void **state)
{
    (void)state;
    cp_pfn_ncclGetVersion get_version = (cp_pfn_ncclGetVersion)sym("ncclGetVersion");
    assert_non_null(get_version);
    int v = 0;
    assert_int_equal(get_version(&v), ncclSuccess);
    int major = v / 10000, minor = v / 100 % 100, patch = v % 100;
    print_message("%s is NCCL %d.%d.%d (%d)\n", CP_TEST_LIBNCCL, major, minor, patch, v);
    assert_int_equal(NCCL_VERSION(major, minor, patch), v);
    assert_int_equal(major, CP_NCCL_ABI_MAJOR);
    /* Our declarations are 2.28's; an older library lacks entry points the shim exports. */
    assert_true(minor >= CP_NCCL_ABI_MINOR);
    assert_int_equal(get_version(NULL), ncclInvalidArgument);
}

static void error_strings_are_ncclGetErrorString_s(void **state)
{
    (void)state;
    const char *names[] = { "ncclGetErrorString", "pncclGetErrorString" };
    /* Every code, the count itself and two never-defined values ("unknown result code"). */
    const int codes[] = { 0, 1, 2, 3, 4, 5, 6, 7, ncclNumResults, 99, -1 };
    for (int k = 0; k < 2; k++) {
        cp_pfn_ncclGetErrorString get = (cp_pfn_ncclGetErrorString)sym(names[k]);
        assert_non_null(get);
        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
            ncclResult_t r = (ncclResult_t)codes[i];
            const char *theirs = get(r);
            assert_non_null(theirs);
            if (strcmp(theirs, cp_nccl_result_name(r)) != 0)
                fail_msg("%s(%d) is \"%s\", cp_nccl_result_name says \"%s\"", names[k],
                         codes[i], theirs, cp_nccl_result_name(r));
        }
    }
    assert_string_equal(cp_nccl_result_id(ncclInvalidUsage), "ncclInvalidUsage");
}

int main(void)
{
    if (access(CP_TEST_LIBNCCL, R_OK) != 0) {
        printf("skipped: no %s (set CUDA_HOME to a CUDA toolkit with NCCL)\n", CP_TEST_LIBNCCL);
        return 77;
    }
    /* libnccl.so.2 carries its CUDA runtime statically and loads libcuda itself only when a
     * communicator needs it, so it loads on a machine without a driver. */
    lib = dlopen(CP_TEST_LIBNCCL, RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", CP_TEST_LIBNCCL, dlerror());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_listed_name_and_its_pnccl_twin_is_exported),
        cmocka_unit_test(the_library_exports_no_unlisted_entry_point),
        cmocka_unit_test(the_version_decodes_with_nccl_version),
        cmocka_unit_test(error_strings_are_ncclGetErrorString_s),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    dlclose(lib);
    return rc;
}
