/* Our CUDA driver ABI (abi/cuda_abi.h, abi/cuda_api_list.h) is CUDA 13's: every value,
 * size and type agrees with the installed cuda.h, every signature in the list is cuda.h's
 * (checked at compile time by test_abi_cuda_real_side.c), cuda.h maps each api_name to
 * exactly our symbol_name, and the toolkit's stub libcuda.so exports each symbol. Built
 * only when CMake found ${CUDA_HOME}/include/cuda.h. */
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

#include "abi/cuda_api_list.h"
#include "tests/abi/test_abi_util.h"

#if !defined(CP_TEST_CUDA_ABI_H) || !defined(CP_TEST_LIBCUDA_STUB)
#error "CMake passes CP_TEST_CUDA_ABI_H and CP_TEST_LIBCUDA_STUB"
#endif

size_t cp_test_cuda_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_cuda_facts_ours(cp_test_fact *out, size_t cap);
size_t cp_test_cuda_symbol_map(const char *(*out)[3], size_t cap);

#define CP_MAX_FACTS 512

static void facts_agree_with_the_real_header(void **state)
{
    (void)state;
    static cp_test_fact real[CP_MAX_FACTS], ours[CP_MAX_FACTS];
    size_t nr = cp_test_cuda_facts_real(real, CP_MAX_FACTS);
    size_t no = cp_test_cuda_facts_ours(ours, CP_MAX_FACTS);
    assert_true(nr <= CP_MAX_FACTS);
    assert_true(nr > 150);
    cp_test_compare_facts("cuda", real, nr, ours, no);
}

static void every_name_our_header_defines_is_checked(void **state)
{
    (void)state;
    static cp_test_fact ours[CP_MAX_FACTS];
    size_t n = cp_test_cuda_facts_ours(ours, CP_MAX_FACTS);
    static const char *const prefixes[] = { "CU", NULL };
    int seen;
    int missing = cp_test_unchecked_names(CP_TEST_CUDA_ABI_H, "abi/cuda_abi.h", prefixes, ours, n, &seen);
    assert_true(missing >= 0); /* the header read */
    assert_true(seen > 100);
    assert_int_equal(missing, 0);
}

static void cuda_h_maps_each_api_name_to_our_symbol_name(void **state)
{
    (void)state;
    const char *map[128][3];
    size_t n = cp_test_cuda_symbol_map(map, 128);
    assert_true(n <= 128);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(map[i][1], map[i][2]) != 0) {
            print_error("cuda.h maps %s to %s; CP_CUDA_API says %s\n", map[i][0], map[i][1],
                        map[i][2]);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void the_stub_library_exports_every_symbol(void **state)
{
    (void)state;
    if (access(CP_TEST_LIBCUDA_STUB, R_OK) != 0) {
        print_message("no %s: symbol check skipped\n", CP_TEST_LIBCUDA_STUB);
        skip();
    }
    /* The stub only exists to be linked against; loading it runs nothing of a driver. */
    void *lib = dlopen(CP_TEST_LIBCUDA_STUB, RTLD_LAZY | RTLD_LOCAL);
    if (!lib)
        fail_msg("dlopen %s: %s", CP_TEST_LIBCUDA_STUB, dlerror());
    static const char *const symbols[] = {
#define CP_SYM(ret, api, sym, params, args) #sym,
        CP_CUDA_API(CP_SYM)
#undef CP_SYM
#define CP_OLDER(api, older, older_version, version) #older,
        CP_CUDA_API_OLDER(CP_OLDER)
#undef CP_OLDER
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        if (!dlsym(lib, symbols[i])) {
            print_error("%s does not export %s\n", CP_TEST_LIBCUDA_STUB, symbols[i]);
            missing++;
        }
    }
    dlclose(lib);
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(facts_agree_with_the_real_header),
        cmocka_unit_test(every_name_our_header_defines_is_checked),
        cmocka_unit_test(cuda_h_maps_each_api_name_to_our_symbol_name),
        cmocka_unit_test(the_stub_library_exports_every_symbol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
