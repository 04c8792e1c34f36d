/* The host preload: a child of this test runs under LD_PRELOAD=libcollprof-emuhost.so as a
 * launcher would start a rank of emulated host 1, and reports what it sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "emu/common/topo_ext.h"

static int64_t ns_of(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Child mode: prints hostname, nodename, and REALTIME - MONOTONIC by each wall clock API. */
static int child_main(void)
{
    char host[256];
    struct utsname u;
    if (gethostname(host, sizeof host) != 0 || uname(&u) != 0)
        return 1;
    int64_t mono = ns_of(CLOCK_MONOTONIC);
    int64_t rt = ns_of(CLOCK_REALTIME);
    int64_t coarse = ns_of(CLOCK_REALTIME_COARSE);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t tod = (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
    time_t t = time(NULL);
    printf("%s\n%s\n%lld\n%lld\n%lld\n%lld\n", host, u.nodename, (long long)(rt - mono),
           (long long)(coarse - mono), (long long)(tod - mono),
           (long long)((int64_t)t * 1000000000 - mono));
    return 0;
}

typedef struct seen {
    char host[256], node[256];
    long long rt, coarse, tod, time;
} seen;

static void run_child(const char *host_id, seen *s)
{
    const char *build = getenv("COLLPROF_BUILD_DIR");
    assert_non_null(build);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "env -u COLLPROF_EMU_TOPO %s%s COLLPROF_EMU_HOSTS=2 "
             "COLLPROF_EMU_CLOCK_OFFSET_US=1:5000,0:-300 "
             "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 "
             "LD_PRELOAD=%s/emu/libcollprof-emuhost.so /proc/%d/exe --child",
             host_id ? "COLLPROF_EMU_HOST_ID=" : "-u COLLPROF_EMU_HOST_ID",
             host_id ? host_id : "", build, (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = fscanf(p, "%255s %255s %lld %lld %lld %lld", s->host, s->node, &s->rt, &s->coarse,
                   &s->tod, &s->time);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(n, 6);
}

static void host_one_has_its_name_and_clock(void **state)
{
    (void)state;
    char real[256], want[300];
    cpemu_real_hostname(real, sizeof real);
    snprintf(want, sizeof want, "%s-emu1", real);
    seen s;
    int64_t base = ns_of(CLOCK_REALTIME) - ns_of(CLOCK_MONOTONIC);
    run_child("1", &s);
    assert_string_equal(s.host, want);
    assert_string_equal(s.node, want);
    /* 5 ms ahead of this (unshifted) process, by every wall clock API. */
    assert_true(llabs(s.rt - base - 5000000) < 1000000);
    assert_true(llabs(s.tod - base - 5000000) < 1000000);
    assert_true(llabs(s.coarse - base - 5000000) < 10000000); /* coarse: a tick or so */
    assert_true(llabs(s.time - base - 5000000) < 1100000000); /* whole seconds */
}

static void host_zero_goes_back_in_time(void **state)
{
    (void)state;
    seen s;
    int64_t base = ns_of(CLOCK_REALTIME) - ns_of(CLOCK_MONOTONIC);
    run_child("0", &s);
    assert_true(llabs(s.rt - base + 300000) < 1000000);
}

static void without_a_host_id_nothing_changes(void **state)
{
    (void)state;
    char real[256];
    gethostname(real, sizeof real);
    seen s;
    int64_t base = ns_of(CLOCK_REALTIME) - ns_of(CLOCK_MONOTONIC);
    run_child(NULL, &s);
    assert_string_equal(s.host, real);
    assert_string_equal(s.node, real);
    assert_true(llabs(s.rt - base) < 1000000);
    run_child("x", &s); /* not a host id: as if unset */
    assert_string_equal(s.host, real);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_one_has_its_name_and_clock),
        cmocka_unit_test(host_zero_goes_back_in_time),
        cmocka_unit_test(without_a_host_id_nothing_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
