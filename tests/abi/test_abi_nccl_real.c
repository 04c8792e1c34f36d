/* Our NCCL ABI (abi/nccl_abi.h, abi/nccl_api_list.h) is NCCL 2.28's: every value,
 * size, offset and initializer agrees with the installed nccl.h, every signature in the list
 * is nccl.h's (checked at compile time by test_abi_nccl_real_side.c), and nccl.h declares no
 * entry point the list lacks. Built only when CMake found ${CUDA_HOME}/include/nccl.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/nccl_api_list.h"
#include "tests/abi/test_abi_util.h"

#ifndef CP_TEST_NCCL_H
#error "CMake passes the real nccl.h's path as CP_TEST_NCCL_H"
#endif

size_t cp_test_nccl_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_nccl_facts_ours(cp_test_fact *out, size_t cap);

#define CP_MAX_FACTS 512

static void facts_agree_with_the_real_header(void **state)
{
    (void)state;
    static cp_test_fact real[CP_MAX_FACTS], ours[CP_MAX_FACTS];
    size_t nr = cp_test_nccl_facts_real(real, CP_MAX_FACTS);
    size_t no = cp_test_nccl_facts_ours(ours, CP_MAX_FACTS);
    assert_true(nr <= CP_MAX_FACTS);
    assert_true(nr > 100);
    cp_test_compare_facts("nccl", real, nr, ours, no);
}

static void every_name_our_header_defines_is_checked(void **state)
{
    (void)state;
    static cp_test_fact ours[CP_MAX_FACTS];
    size_t n = cp_test_nccl_facts_ours(ours, CP_MAX_FACTS);
    static const char *const prefixes[] = { "nccl", "NCCL_", NULL };
    int seen;
    int missing = cp_test_unchecked_names(CP_TEST_NCCL_ABI_H, "abi/nccl_abi.h", prefixes, ours, n, &seen);
    assert_true(missing >= 0); /* the header read */
    assert_true(seen > 50);
    assert_int_equal(missing, 0);
}

static const char *const our_api[] = {
#define CP_NAME(ret, name, params, args) #name,
    CP_NCCL_API(CP_NAME) CP_NCCL_API_DEPRECATED(CP_NAME)
#undef CP_NAME
};
#define CP_OUR_API_COUNT (sizeof our_api / sizeof our_api[0])

struct declared_ctx {
    int in_header[CP_OUR_API_COUNT];
    int unlisted;
};

static void check_listed(const char *name, void *ctx)
{
    struct declared_ctx *d = ctx;
    for (size_t i = 0; i < CP_OUR_API_COUNT; i++) {
        if (strcmp(our_api[i], name) == 0) {
            d->in_header[i]++;
            return;
        }
    }
    print_error("%s declares %s, which abi/nccl_api_list.h does not list\n", CP_TEST_NCCL_H,
                name);
    d->unlisted++;
}

static void the_list_is_exactly_what_nccl_h_declares(void **state)
{
    (void)state;
    char *text = cp_test_read_file(CP_TEST_NCCL_H);
    assert_non_null(text);
    static const char *const ret_types[] = { "ncclResult_t", "const char*", "const char *",
                                             "void", NULL };
    struct declared_ctx d = { { 0 }, 0 };
    size_t found = cp_test_header_nccl_functions(text, ret_types, check_listed, &d);
    free(text);
    assert_true(found >= CP_OUR_API_COUNT);
    int stale = 0;
    for (size_t i = 0; i < CP_OUR_API_COUNT; i++) {
        if (d.in_header[i] != 1) {
            print_error("%s is declared %d times in %s (expected once)\n", our_api[i],
                        d.in_header[i], CP_TEST_NCCL_H);
            stale++;
        }
    }
    assert_int_equal(d.unlisted, 0);
    assert_int_equal(stale, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(facts_agree_with_the_real_header),
        cmocka_unit_test(every_name_our_header_defines_is_checked),
        cmocka_unit_test(the_list_is_exactly_what_nccl_h_declares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
