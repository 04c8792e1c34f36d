/* plugin_pool: indices handed out once at a time, magazines published by the freeing thread
 * and taken whole by callers, a partial one published by a flush, and no index ever held by
 * two threads while callers take and a writer gives back concurrently. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "preload/plugin_pool.h"

static void fresh_indices_then_none(void **state)
{
    (void)state;
    static cp_ipool p;
    assert_int_equal(cp_ipool_make(&p, 8, 0), 0);
    int fresh;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(cp_ipool_get(&p, &fresh), i);
        assert_true(fresh);
    }
    assert_int_equal(cp_ipool_get(&p, &fresh), -1);
    cp_ipool_put(&p, 5);
    assert_int_equal(cp_ipool_get(&p, &fresh), 5);
    assert_false(fresh); /* given back: the caller must not take it for mmap's zeros */
}

static void a_full_magazine_reaches_a_caller_in_order(void **state)
{
    (void)state;
    static cp_ipool p;
    assert_int_equal(cp_ipool_make(&p, 1024, 1), 0);
    int fresh, next;
    cp_ipool_cache c = {0};
    int got[CP_MAG_N];
    for (int i = 0; i < CP_MAG_N; i++)
        got[i] = cp_ipool_get_cached(&p, &c, &fresh, &next);
    for (int i = 0; i < CP_MAG_N; i++)
        cp_ipool_put_batched(&p, (uint32_t)got[CP_MAG_N - 1 - i]); /* full: published */
    for (int i = 0; i < CP_MAG_N; i++) {
        int k = cp_ipool_get_cached(&p, &c, &fresh, &next);
        assert_int_equal(k, got[CP_MAG_N - 1 - i]);
        assert_false(fresh);
        /* the hint names what the next get returns, the last of a magazine none */
        assert_int_equal(next, i + 1 < CP_MAG_N ? got[CP_MAG_N - 2 - i] : -1);
    }
    /* the magazine is empty: a fresh index again */
    assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), CP_MAG_N);
    assert_true(fresh);
}

static void a_partial_magazine_waits_for_the_flush(void **state)
{
    (void)state;
    static cp_ipool p;
    assert_int_equal(cp_ipool_make(&p, 4, 1), 0);
    int fresh, next;
    cp_ipool_cache c = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), i);
    cp_ipool_put_batched(&p, 2);
    cp_ipool_put_batched(&p, 0);
    /* unflushed, they are not to be had: the pool is dry */
    assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), -1);
    cp_ipool_flush(&p);
    assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), 2);
    assert_int_equal(next, 0);
    assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), 0);
    assert_int_equal(cp_ipool_get_cached(&p, &c, &fresh, &next), -1);
}

/* Two callers take, one writer gives back (flushing now and then), as in a job: an index is
 * never handed to a caller while another holds it, and none is lost. */
#define CONC_MAX 2048u
#define CONC_ROUNDS 200000
static cp_ipool g_p;
static _Atomic int g_owner[CONC_MAX];
static _Atomic int g_bad;
static struct {
    _Atomic uint64_t head, tail;
    _Atomic uint32_t idx[1u << 16];
} g_ret; /* callers -> writer, a ring under a lock-free MPSC discipline of one slot each */
static pthread_mutex_t g_ret_mu = PTHREAD_MUTEX_INITIALIZER;

static cp_ipool_cache g_caches[3];

static void *caller(void *arg)
{
    int me = (int)(intptr_t)arg;
    cp_ipool_cache *c = &g_caches[me];
    for (int r = 0; r < CONC_ROUNDS; r++) {
        int fresh, next;
        int i = cp_ipool_get_cached(&g_p, c, &fresh, &next);
        if (i < 0)
            continue; /* dry for now: the writer has them */
        int expect = 0;
        if (!atomic_compare_exchange_strong(&g_owner[i], &expect, me))
            atomic_store(&g_bad, 1);
        atomic_store(&g_owner[i], 0);
        pthread_mutex_lock(&g_ret_mu);
        uint64_t h = atomic_load(&g_ret.head);
        atomic_store(&g_ret.idx[h % (1u << 16)], (uint32_t)i);
        atomic_store(&g_ret.head, h + 1);
        pthread_mutex_unlock(&g_ret_mu);
    }
    return NULL;
}

static _Atomic int g_stop;
static void *writer(void *arg)
{
    (void)arg;
    unsigned n = 0;
    while (!atomic_load(&g_stop) || atomic_load(&g_ret.tail) != atomic_load(&g_ret.head)) {
        uint64_t t = atomic_load(&g_ret.tail);
        if (t == atomic_load(&g_ret.head))
            continue;
        cp_ipool_put_batched(&g_p, atomic_load(&g_ret.idx[t % (1u << 16)]));
        atomic_store(&g_ret.tail, t + 1);
        if (++n % 100 == 0)
            cp_ipool_flush(&g_p);
    }
    cp_ipool_flush(&g_p);
    return NULL;
}

static void callers_and_a_writer_never_share_an_index(void **state)
{
    (void)state;
    assert_int_equal(cp_ipool_make(&g_p, CONC_MAX, 1), 0);
    pthread_t w, a, b;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&a, NULL, caller, (void *)(intptr_t)1);
    pthread_create(&b, NULL, caller, (void *)(intptr_t)2);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    atomic_store(&g_stop, 1);
    pthread_join(w, NULL);
    assert_int_equal(atomic_load(&g_bad), 0);
    /* every index handed out came back: a new caller gets the rest of CONC_MAX, all
     * distinct, less what the two callers' magazines still hold (a thread's own) */
    static unsigned char seen[CONC_MAX];
    unsigned got = 0;
    for (int k = 1; k <= 2; k++) {
        cp_ipool_cache *h = &g_caches[k];
        for (unsigned j = h->mag ? h->pos : 0; h->mag && j < h->n; j++) {
            uint32_t i = g_p.mags[h->mag - 1][1 + j];
            assert_false(seen[i]);
            seen[i] = 1;
            got++;
        }
    }
    cp_ipool_cache c = {0};
    for (;;) {
        int fresh, next;
        int i = cp_ipool_get_cached(&g_p, &c, &fresh, &next);
        if (i < 0)
            break;
        assert_false(seen[i]);
        seen[i] = 1;
        got++;
    }
    assert_int_equal(got, CONC_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_indices_then_none),
        cmocka_unit_test(a_full_magazine_reaches_a_caller_in_order),
        cmocka_unit_test(a_partial_magazine_waits_for_the_flush),
        cmocka_unit_test(callers_and_a_writer_never_share_an_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
