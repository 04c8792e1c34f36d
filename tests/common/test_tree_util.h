/* tests/common/test_tree_util.h: a directory tree removed with all it holds, symlinks not
 * followed: what each test's temporary directories and the test process's scratch need. */
#ifndef COLLPROF_TESTS_TREE_UTIL_H
#define COLLPROF_TESTS_TREE_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

static inline int tc_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)f;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Nothing when dir is not there. */
static inline void tc_rmtree(const char *dir)
{
    nftw(dir, tc_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
