/* cp_nccl_config_read: a caller's ncclConfig_t is read by its own declared size and version,
 * never past its end, whatever NCCL it was compiled against. Configs are built in heap
 * blocks of exactly their declared size, so under ASan a read past the end is a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "abi/nccl_abi.h"

#define ALL_FIELDS ((1u << CP_NCCL_CFG_FIELD_COUNT) - 1u)

/* A config as a program built against another NCCL would pass it: `size` bytes (our
 * layout's prefix, then `fill` for anything past our end), with the given header words. */
static ncclConfig_t *foreign_config(size_t size, unsigned int version, const ncclConfig_t *from,
                                    unsigned char fill)
{
    unsigned char *p = malloc(size);
    assert_non_null(p);
    memset(p, fill, size);
    memcpy(p, from, size < sizeof *from ? size : sizeof *from);
    memcpy(p + offsetof(ncclConfig_t, size), &size, sizeof size);
    memcpy(p + offsetof(ncclConfig_t, version), &version, sizeof version);
    return (ncclConfig_t *)p;
}

/* Every user attribute set to something other than its unset value. */
static ncclConfig_t all_set(void)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0;
    c.cgaClusterSize = 2;
    c.minCTAs = 4;
    c.maxCTAs = 16;
    c.netName = "IB";
    c.splitShare = 1;
    c.trafficClass = 106;
    c.commName = "dp";
    c.collnetEnable = 1;
    c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
    c.shrinkShare = 1;
    c.nvlsCTAs = 8;
    c.nChannelsPerNetPeer = 2;
    c.nvlinkCentricSched = 1;
    return c;
}

static void assert_unset_from(const cp_nccl_config_view *v, int first)
{
    const ncclConfig_t *c = &v->config;
    const int ints[CP_NCCL_CFG_FIELD_COUNT] = {
        c->blocking, c->cgaClusterSize, c->minCTAs, c->maxCTAs, 0, c->splitShare,
        c->trafficClass, 0, c->collnetEnable, c->CTAPolicy, c->shrinkShare, c->nvlsCTAs,
        c->nChannelsPerNetPeer, c->nvlinkCentricSched,
    };
    for (int f = first; f < CP_NCCL_CFG_FIELD_COUNT; f++) {
        assert_false(cp_nccl_config_has(v, f));
        if (f == CP_NCCL_CFG_NET_NAME)
            assert_null(c->netName);
        else if (f == CP_NCCL_CFG_COMM_NAME)
            assert_null(c->commName);
        else
            assert_int_equal(ints[f], NCCL_CONFIG_UNDEF_INT);
    }
}

static void our_own_initializer_reads_back_with_every_field_present(void **state)
{
    (void)state;
    ncclConfig_t c = all_set();
    cp_nccl_config_view v;
    assert_int_equal(cp_nccl_config_read(&c, &v), CP_NCCL_CONFIG_OK);
    assert_int_equal(v.present, ALL_FIELDS);
    assert_int_equal(v.user_size, sizeof(ncclConfig_t));
    assert_int_equal(v.bytes_read, sizeof(ncclConfig_t));
    assert_int_equal(v.user_version, NCCL_VERSION(2, 28, 0));
    assert_memory_equal(&v.config, &c, sizeof c);

    /* An untouched initializer is read just as well: present, and every value unset. */
    const ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    assert_int_equal(cp_nccl_config_read(&init, &v), CP_NCCL_CONFIG_OK);
    assert_int_equal(v.present, ALL_FIELDS);
    assert_int_equal(v.config.blocking, NCCL_CONFIG_UNDEF_INT);
    assert_null(v.config.netName);
}

static void an_older_struct_cut_after_splitShare_reads_later_fields_as_unset(void **state)
{
    (void)state;
    ncclConfig_t full = all_set();
    size_t size = offsetof(ncclConfig_t, splitShare) + sizeof(int); /* NCCL 2.18's layout */
    ncclConfig_t *old = foreign_config(size, NCCL_VERSION(2, 18, 0), &full, 0);
    cp_nccl_config_view v;
    assert_int_equal(cp_nccl_config_read(old, &v), CP_NCCL_CONFIG_OK);
    free(old);
    assert_int_equal(v.user_size, size);
    assert_int_equal(v.bytes_read, size);
    assert_int_equal(v.present, (1u << (CP_NCCL_CFG_SPLIT_SHARE + 1)) - 1u);
    assert_int_equal(v.config.blocking, 0);
    assert_int_equal(v.config.maxCTAs, 16);
    assert_string_equal(v.config.netName, "IB");
    assert_int_equal(v.config.splitShare, 1);
    assert_unset_from(&v, CP_NCCL_CFG_TRAFFIC_CLASS);
    assert_int_equal(v.config.size, sizeof(ncclConfig_t));
}

static void a_field_newer_than_the_callers_version_is_unset_as_nccl_does(void **state)
{
    (void)state;
    /* Full size but version 2.26: NCCL resets the 2.27 and 2.28 attributes whatever the
     * bytes say (parseCommConfig), so the reader does too. */
    ncclConfig_t full = all_set();
    full.version = NCCL_VERSION(2, 26, 5);
    cp_nccl_config_view v;
    assert_int_equal(cp_nccl_config_read(&full, &v), CP_NCCL_CONFIG_OK);
    assert_true(cp_nccl_config_has(&v, CP_NCCL_CFG_TRAFFIC_CLASS));
    assert_true(cp_nccl_config_has(&v, CP_NCCL_CFG_COMM_NAME)); /* NCCL does not gate it */
    assert_int_equal(v.config.trafficClass, 106);
    assert_int_equal(v.config.collnetEnable, NCCL_CONFIG_UNDEF_INT);
    assert_false(cp_nccl_config_has(&v, CP_NCCL_CFG_COLLNET_ENABLE));
    assert_unset_from(&v, CP_NCCL_CFG_SHRINK_SHARE);
}

static void a_newer_larger_struct_is_read_only_up_to_our_size(void **state)
{
    (void)state;
    ncclConfig_t full = all_set();
    size_t size = sizeof(ncclConfig_t) + 48; /* fields of an NCCL after 2.28 */
    ncclConfig_t *newer = foreign_config(size, NCCL_VERSION(2, 30, 1), &full, 0xab);
    cp_nccl_config_view v;
    memset(&v, 0xcd, sizeof v);
    assert_int_equal(cp_nccl_config_read(newer, &v), CP_NCCL_CONFIG_OK);
    assert_int_equal(v.user_size, size);
    assert_int_equal(v.user_version, NCCL_VERSION(2, 30, 1));
    assert_int_equal(v.bytes_read, sizeof(ncclConfig_t));
    assert_int_equal(v.present, ALL_FIELDS);
    assert_int_equal(v.config.nvlinkCentricSched, 1);
    /* Our copy describes itself, not the caller's larger object. */
    assert_int_equal(v.config.size, sizeof(ncclConfig_t));
    assert_memory_equal((const char *)&v.config + offsetof(ncclConfig_t, magic),
                        (const char *)newer + offsetof(ncclConfig_t, magic),
                        sizeof(ncclConfig_t) - offsetof(ncclConfig_t, magic));
    free(newer);
}

static void a_config_not_made_by_the_initializer_is_refused(void **state)
{
    (void)state;
    ncclConfig_t c = all_set();
    c.magic = 0xdeadbeef;
    cp_nccl_config_view v;
    assert_int_equal(cp_nccl_config_read(&c, &v), CP_NCCL_CONFIG_BAD_MAGIC);
    assert_int_equal(v.present, 0);
    assert_int_equal(v.config.blocking, NCCL_CONFIG_UNDEF_INT);
    assert_int_equal(v.config.magic, CP_NCCL_CONFIG_MAGIC);
}

static void absurd_sizes_are_refused_without_reading_past_the_size_word(void **state)
{
    (void)state;
    ncclConfig_t full = all_set();
    cp_nccl_config_view v;
    /* Heap blocks of only the size word: reading magic would be past the end. */
    const size_t tiny[] = { 0, 8 };
    for (size_t i = 0; i < 2; i++) {
        unsigned char *p = malloc(sizeof(size_t));
        assert_non_null(p);
        memcpy(p, &tiny[i], sizeof(size_t));
        assert_int_equal(cp_nccl_config_read((const ncclConfig_t *)p, &v),
                         CP_NCCL_CONFIG_BAD_SIZE);
        assert_int_equal(v.user_size, tiny[i]);
        assert_int_equal(v.present, 0);
        free(p);
    }
    const size_t bad[] = { 16, CP_NCCL_CONFIG_MIN_SIZE - 1, CP_NCCL_CONFIG_MAX_SIZE + 1,
                           (size_t)1 << 40, SIZE_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        full.size = bad[i];
        assert_int_equal(cp_nccl_config_read(&full, &v), CP_NCCL_CONFIG_BAD_SIZE);
        assert_int_equal(v.present, 0);
        assert_int_equal(v.config.blocking, NCCL_CONFIG_UNDEF_INT);
    }
}

static void the_smallest_and_largest_sane_sizes_are_read(void **state)
{
    (void)state;
    ncclConfig_t full = all_set();
    cp_nccl_config_view v;
    ncclConfig_t *min = foreign_config(CP_NCCL_CONFIG_MIN_SIZE, NCCL_VERSION(2, 14, 3), &full, 0);
    assert_int_equal(cp_nccl_config_read(min, &v), CP_NCCL_CONFIG_OK);
    free(min);
    assert_int_equal(v.present, 1u << CP_NCCL_CFG_BLOCKING);
    assert_int_equal(v.config.blocking, 0);
    assert_unset_from(&v, CP_NCCL_CFG_CGA_CLUSTER_SIZE);

    ncclConfig_t *max =
        foreign_config(CP_NCCL_CONFIG_MAX_SIZE, NCCL_VERSION(2, 40, 0), &full, 0x5a);
    assert_int_equal(cp_nccl_config_read(max, &v), CP_NCCL_CONFIG_OK);
    free(max);
    assert_int_equal(v.present, ALL_FIELDS);
}

static void a_null_config_means_nccl_defaults(void **state)
{
    (void)state;
    cp_nccl_config_view v;
    memset(&v, 0xcd, sizeof v);
    assert_int_equal(cp_nccl_config_read(NULL, &v), CP_NCCL_CONFIG_NONE);
    const ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    assert_memory_equal(&v.config, &init, sizeof init);
    assert_int_equal(v.present, 0);
    assert_int_equal(v.user_size, 0);
    assert_int_equal(v.bytes_read, 0);

    ncclConfig_t c = all_set();
    assert_int_equal(cp_nccl_config_read(&c, NULL), CP_NCCL_CONFIG_BAD_ARG);
    assert_int_equal(cp_nccl_config_read(NULL, NULL), CP_NCCL_CONFIG_BAD_ARG);
    assert_false(cp_nccl_config_has(NULL, CP_NCCL_CFG_BLOCKING));
}

static void fields_are_named_as_in_nccl_h_with_the_version_that_gates_them(void **state)
{
    (void)state;
    assert_string_equal(cp_nccl_config_field_name(CP_NCCL_CFG_BLOCKING), "blocking");
    assert_string_equal(cp_nccl_config_field_name(CP_NCCL_CFG_NCHANNELS_PER_NET_PEER),
                        "nChannelsPerNetPeer");
    assert_string_equal(cp_nccl_config_field_name(CP_NCCL_CFG_NVLINK_CENTRIC_SCHED),
                        "nvlinkCentricSched");
    assert_string_equal(cp_nccl_config_field_name(CP_NCCL_CFG_FIELD_COUNT), "?");
    assert_string_equal(cp_nccl_config_field_name(-1), "?");
    assert_int_equal(cp_nccl_config_field_since(CP_NCCL_CFG_BLOCKING), 21400);
    assert_int_equal(cp_nccl_config_field_since(CP_NCCL_CFG_TRAFFIC_CLASS), 22500);
    assert_int_equal(cp_nccl_config_field_since(CP_NCCL_CFG_NVLINK_CENTRIC_SCHED), 22800);
    assert_int_equal(cp_nccl_config_field_since(CP_NCCL_CFG_FIELD_COUNT), 0);

    cp_nccl_config_view v;
    ncclConfig_t c = all_set();
    assert_int_equal(cp_nccl_config_read(&c, &v), CP_NCCL_CONFIG_OK);
    assert_false(cp_nccl_config_has(&v, CP_NCCL_CFG_FIELD_COUNT));
    assert_false(cp_nccl_config_has(&v, -1));
}

static void result_names_are_nccls_own(void **state)
{
    (void)state;
    assert_string_equal(cp_nccl_result_name(ncclUnhandledCudaError),
                        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)");
    assert_string_equal(cp_nccl_result_name(ncclInProgress), "NCCL operation in progress");
    assert_string_equal(cp_nccl_result_name(ncclNumResults), "unknown result code");
    assert_string_equal(cp_nccl_result_id(ncclRemoteError), "ncclRemoteError");
    assert_string_equal(cp_nccl_result_id(ncclNumResults), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(our_own_initializer_reads_back_with_every_field_present),
        cmocka_unit_test(an_older_struct_cut_after_splitShare_reads_later_fields_as_unset),
        cmocka_unit_test(a_field_newer_than_the_callers_version_is_unset_as_nccl_does),
        cmocka_unit_test(a_newer_larger_struct_is_read_only_up_to_our_size),
        cmocka_unit_test(a_config_not_made_by_the_initializer_is_refused),
        cmocka_unit_test(absurd_sizes_are_refused_without_reading_past_the_size_word),
        cmocka_unit_test(the_smallest_and_largest_sane_sizes_are_read),
        cmocka_unit_test(a_null_config_means_nccl_defaults),
        cmocka_unit_test(fields_are_named_as_in_nccl_h_with_the_version_that_gates_them),
        cmocka_unit_test(result_names_are_nccls_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
