/* tests/common/test_scratch.h: one scratch directory per test process, removed with all it
 * holds when the process exits. Jobs the tests start get it as TMPDIR (collprof-sim's
 * rendezvous directories, which a launcher killed by a test's teardown cannot remove) and for
 * their live stats blocks (not /dev/shm: a job a test kills would leave its block there for
 * every later `collprof top`): `make test` fails on files a test leaves in /tmp or /dev/shm
 * (scripts/leftovers.sh). */
#ifndef COLLPROF_TEST_SCRATCH_H
#define COLLPROF_TEST_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "tests/common/test_tree_util.h"

static char ts_scratch[64];
static pid_t ts_scratch_owner;

static inline void ts_scratch_remove(void)
{
    /* only the process that made it: a forked child that exits must leave it alone */
    if (ts_scratch[0] && getpid() == ts_scratch_owner)
        tc_rmtree(ts_scratch);
}

/* The directory, made at the first call; NULL when it cannot be. */
static inline const char *ts_scratch_dir(void)
{
    if (!ts_scratch[0]) {
        char dir[] = "/tmp/collprof-test-XXXXXX";
        if (!mkdtemp(dir))
            return NULL;
        snprintf(ts_scratch, sizeof ts_scratch, "%s", dir);
        ts_scratch_owner = getpid();
        atexit(ts_scratch_remove);
    }
    return ts_scratch;
}

/* Made as the test program starts, so that it is the test process's (removed at its exit)
 * even where a test first needs it in a child it forked. */
__attribute__((constructor)) static void ts_scratch_make(void)
{
    ts_scratch_dir();
}

/* "TMPDIR=<scratch>", "" when there is none. */
static inline const char *ts_tmpdir_env(void)
{
    static char var[96];
    if (!var[0] && ts_scratch_dir())
        snprintf(var, sizeof var, "TMPDIR=%s", ts_scratch);
    return var;
}

/* "COLLPROF_LIVE_DIR=<scratch>/live", "" when there is none. */
static inline const char *ts_live_dir_env(void)
{
    static char var[96];
    if (!var[0] && ts_scratch_dir()) {
        char dir[80];
        snprintf(dir, sizeof dir, "%s/live", ts_scratch);
        if (mkdir(dir, 0700) == 0)
            snprintf(var, sizeof var, "COLLPROF_LIVE_DIR=%s", dir);
    }
    return var;
}

#endif
