/* Our CUPTI ABI (abi/cupti_abi.h, abi/cupti_api_list.h) is CUDA 13's: every value,
 * size and offset the shim and the emulated libcupti rely on agrees with the installed
 * cupti_activity.h, the kernel record's head with versions 9 and 10 of it, every signature
 * in the list is the header's (checked at compile time by test_abi_cupti_real_side.c), and
 * the toolkit's libcupti exports every entry point. Built only when CMake found
 * ${CUDA_HOME}/include/cupti_activity.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/cupti_api_list.h"
#include "tests/abi/test_abi_util.h"

#if !defined(CP_TEST_CUPTI_ABI_H) || !defined(CP_TEST_LIBCUPTI)
#error "CMake passes CP_TEST_CUPTI_ABI_H and CP_TEST_LIBCUPTI"
#endif

size_t cp_test_cupti_facts_real(cp_test_fact *out, size_t cap);
size_t cp_test_cupti_facts_ours(cp_test_fact *out, size_t cap);

#define CP_MAX_FACTS 256

static void facts_agree_with_the_real_header(void **state)
{
    (void)state;
    static cp_test_fact real[CP_MAX_FACTS], ours[CP_MAX_FACTS];
    size_t nr = cp_test_cupti_facts_real(real, CP_MAX_FACTS);
    size_t no = cp_test_cupti_facts_ours(ours, CP_MAX_FACTS);
    assert_true(nr <= CP_MAX_FACTS);
    assert_true(nr > 50);
    cp_test_compare_facts("cupti", real, nr, ours, no);
}

static void every_name_our_header_defines_is_checked(void **state)
{
    (void)state;
    static cp_test_fact ours[CP_MAX_FACTS];
    size_t n = cp_test_cupti_facts_ours(ours, CP_MAX_FACTS);
    static const char *const prefixes[] = {"CUPTI", "CP_CUPTI_KERNEL", NULL};
    int seen;
    int missing = cp_test_unchecked_names(CP_TEST_CUPTI_ABI_H, "abi/cupti_abi.h", prefixes, ours, n, &seen);
    assert_true(missing >= 0); /* the header read */
    assert_true(seen > 20);
    assert_int_equal(missing, 0);
}

struct export_ctx {
    const char *want;
    int found;
};

static void note_export(const char *name, void *ctx)
{
    struct export_ctx *e = ctx;
    e->found |= strcmp(name, e->want) == 0;
}

static void the_toolkit_libcupti_exports_every_entry_point(void **state)
{
    (void)state;
    if (access(CP_TEST_LIBCUPTI, R_OK) != 0) {
        print_message("no %s: symbol check skipped\n", CP_TEST_LIBCUPTI);
        skip();
    }
    /* read as ELF, not dlopen'ed: loading the real libcupti needs a driver */
    static const char *const symbols[] = {
#define CP_SYM(ret, name, params, args) #name,
        CP_CUPTI_API(CP_SYM)
#undef CP_SYM
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        struct export_ctx e = {symbols[i], 0};
        assert_true(cp_test_elf_dynamic_functions(CP_TEST_LIBCUPTI, note_export, &e) > 0);
        if (!e.found) {
            print_error("%s does not export %s\n", CP_TEST_LIBCUPTI, symbols[i]);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(facts_agree_with_the_real_header),
        cmocka_unit_test(every_name_our_header_defines_is_checked),
        cmocka_unit_test(the_toolkit_libcupti_exports_every_entry_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
