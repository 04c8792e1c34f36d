/* shm_sync: futexes and clocks.
 *
 * Ranks never spin: eight ranks share two cores on our machines, and a spinning waiter
 * would steal the time the rank it waits for needs. Every wait is a futex wait with a
 * timeout (so a waiter can notice an abort or a dead peer without anyone's help) on a word
 * that the side it waits for bumps and wakes.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emu/nccl/nccl_emu.h"

void cpn_futex_wait(_Atomic uint32_t *w, uint32_t val, int shared, long timeout_ns)
{
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    int op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
    /* EAGAIN (value changed), EINTR and ETIMEDOUT all mean: look again */
    (void)syscall(SYS_futex, (uint32_t *)w, op, val, timeout_ns > 0 ? &ts : NULL, NULL, 0);
}

void cpn_futex_wake(_Atomic uint32_t *w, int shared)
{
    int op = shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
    (void)syscall(SYS_futex, (uint32_t *)w, op, 0x7fffffff, NULL, NULL, 0);
}

void cpn_core_wait(_Atomic uint32_t *waiters, _Atomic uint32_t *w, uint32_t val, long timeout_ns)
{
    /* waiters goes up before the word is read again: a waker either sees a waiter, or
     * changed the word first and the futex returns at once */
    atomic_fetch_add(waiters, 1);
    if (atomic_load(w) == val)
        cpn_futex_wait(w, val, 0, timeout_ns);
    atomic_fetch_sub(waiters, 1);
}

void cpn_core_wake(_Atomic uint32_t *waiters, _Atomic uint32_t *w)
{
    if (atomic_load(waiters))
        cpn_futex_wake(w, 0);
}

uint64_t cpn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

