/* selftest_test_util: what the tests that run `collprof selftest` share — paths that fail the
 * test rather than being cut short, and the sysfs fixture of active InfiniBand ports that
 * stands in for a node's NICs (--root). Header-only; needs cmocka included before it. */
#ifndef COLLPROF_SELFTEST_TEST_UTIL_H
#define COLLPROF_SELFTEST_TEST_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

/* snprintf that fails the test instead of cutting a path short. */
#define PATHF(buf, ...) assert_true(snprintf((buf), sizeof(buf), __VA_ARGS__) < (int)sizeof(buf))

/* content into path, its directories made first. */
static inline void st_write_file(const char *path, const char *content)
{
    char dir[PATH_MAX];
    PATHF(dir, "%s", path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

/* n NDR InfiniBand ports (mlx5_0 ...), all active, under root. */
static inline void st_ib_fixture(const char *root, int n)
{
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX];
        PATHF(p, "%s/sys/class/infiniband/mlx5_%d/ports/1/rate", root, i);
        st_write_file(p, "400 Gb/sec (4X NDR)\n");
        PATHF(p, "%s/sys/class/infiniband/mlx5_%d/ports/1/state", root, i);
        st_write_file(p, "4: ACTIVE\n");
        PATHF(p, "%s/sys/class/infiniband/mlx5_%d/ports/1/link_layer", root, i);
        st_write_file(p, "InfiniBand\n");
    }
}

/* The sizes (--sizes) of a run that must judge a healthy 8xH100 node healthy. The emulation
 * starts no call before the host issued it, as a GPU does, and its workers move every byte on
 * the same 2 cores as the host. Under the sanitizers, issuing one group of 16 SendRecv calls
 * (or 8 AllGathers) can then take longer than the 46 us the model gives 16 MiB, and a
 * launch-bound op read 212-252 GB/s of 349 expected (WARN), once under 50 % in CI (FAIL). At
 * 32 MiB (91 us a call) every op read the model exactly in 9 runs beside two busy loops. A
 * real node's run ends at 1 GiB, where no host is that slow. */
#ifdef CP_TEST_SANITIZE
#define ST_HEALTHY_SIZES "8:32M"
#else
#define ST_HEALTHY_SIZES "8:16M"
#endif

#endif
