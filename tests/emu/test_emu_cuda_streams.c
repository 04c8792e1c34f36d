/* The emulated driver's streams and events: asynchrony, order, the model clock, waits
 * between streams, the legacy stream's implicit synchronisation, stream destruction. */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/emu/test_emu_cuda_util.h"

static CUcontext g_ctx;

/* One item: burns cpu_ms of wall time, ends model_ms after its model start. */
typedef struct work {
    double cpu_ms, model_ms;
    int id;
    int *log;          /* appends id at log[(*nlog)++] */
    int *nlog;
    int done;             /* atomics: other streams' workers read them */
    int saw_other_done;
    const int *other;
    uint64_t start_ns, ran_wall_ns;
    sem_t *sem;        /* posted by work_fn: the caller must still synchronise before returning */
    sem_t *freed;      /* posted by post_when_freed, the worker's last use of the item */
    sem_t *gate;       /* waited for first: the test decides when the work may run */
    int ends_when_released; /* a kernel that lasts until the gate opens: model end = now */
} work;

/* Timing checks must not depend on how fast a loaded 2-core machine schedules the test: a
 * gated item holds the stream until the test has queued everything, so model times come out
 * exact, and "returned before the work ran" is a fact rather than a race. */
static uint64_t work_fn(void *arg, uint64_t start_ns)
{
    work *w = arg;
    if (w->gate)
        sem_wait(w->gate);
    if (w->ends_when_released)
        start_ns = test_now_ns();
    w->start_ns = start_ns;
    if (w->other)
        w->saw_other_done = __atomic_load_n(w->other, __ATOMIC_SEQ_CST);
    if (w->cpu_ms > 0)
        test_sleep_ms(w->cpu_ms);
    if (w->log)
        w->log[(*w->nlog)++] = w->id;
    w->ran_wall_ns = test_now_ns();
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    if (w->sem)
        sem_post(w->sem);
    return start_ns + (uint64_t)(w->model_ms * 1e6);
}

static int g_freed;
static void count_free(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&g_freed, 1, __ATOMIC_SEQ_CST);
}

static int setup(void **state)
{
    (void)state;
    CUdevice dev;
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&g_ctx, dev), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
    return 0;
}

static void enqueue_returns_at_once_and_event_completes_after_the_work(void **state)
{
    (void)state;
    CUstream s;
    CUevent ev;
    sem_t gate;
    sem_init(&gate, 0, 0);
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ev, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    work w = {.cpu_ms = 50, .gate = &gate};
    /* The work cannot start before the gate opens: a synchronous enqueue would never return. */
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    uint64_t t0 = test_now_ns();
    sem_post(&gate);
    assert_int_equal(cuEventSynchronize(ev), CUDA_SUCCESS);
    assert_true(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
    assert_true(MS(test_now_ns() - t0) >= 50);
    assert_int_equal(cuEventQuery(ev), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy_v2(ev), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    sem_destroy(&gate);
}

/* Holds stream s until the returned gate is opened; the item's end is the opening time. */
static sem_t *hold(CUstream s, work *w, sem_t *gate)
{
    sem_init(gate, 0, 0);
    *w = (work){.gate = gate, .ends_when_released = 1};
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, w, NULL), CUDA_SUCCESS);
    return gate;
}

static void items_run_in_order_and_are_freed(void **state)
{
    (void)state;
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    enum { N = 20 };
    work w[N];
    int log[N], nlog = 0;
    g_freed = 0;
    for (int i = 0; i < N; i++) {
        w[i] = (work){.cpu_ms = (i * 7) % 3, .id = i, .log = log, .nlog = &nlog};
        assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w[i], count_free), CUDA_SUCCESS);
    }
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(nlog, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(log[i], i);
    assert_int_equal(g_freed, N);
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void elapsed_time_is_the_models_when_the_cpu_is_faster(void **state)
{
    (void)state;
    CUstream s;
    CUevent a, b;
    work held, w = {.cpu_ms = 0, .model_ms = 10};
    sem_t gate;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    hold(s, &held, &gate);
    assert_int_equal(cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
    uint64_t t0 = test_now_ns();
    sem_post(&gate);
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    /* The host waited for the model's 10 ms, though the CPU finished at once. */
    assert_true(MS(test_now_ns() - t0) >= 10);
    float ms = 0;
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    assert_float_equal(ms, 10.0, 1e-4);
    assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS); /* pre-12.8 symbol */
    assert_float_equal(ms, 10.0, 1e-4);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
    cuStreamDestroy_v2(s);
    sem_destroy(&gate);
}

static void elapsed_time_is_the_models_when_the_cpu_is_slower(void **state)
{
    (void)state;
    CUstream s;
    CUevent a, b;
    work held, w = {.cpu_ms = 30, .model_ms = 1};
    sem_t gate;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    hold(s, &held, &gate);
    assert_int_equal(cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
    uint64_t t0 = test_now_ns();
    sem_post(&gate);
    float ms = 0;
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    /* Completion waits for the work itself... */
    assert_true(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
    assert_true(MS(test_now_ns() - t0) >= 30);
    /* ...but GPU time is the model's. */
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    assert_float_equal(ms, 1.0, 1e-4);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
    cuStreamDestroy_v2(s);
    sem_destroy(&gate);
}

static void queued_items_start_when_the_previous_ends_in_model_time(void **state)
{
    (void)state;
    CUstream s;
    CUevent a, b;
    work held, w[3];
    sem_t gate;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    hold(s, &held, &gate);
    assert_int_equal(cuEventRecord(a, s), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) {
        w[i] = (work){.model_ms = 4};
        assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w[i], NULL), CUDA_SUCCESS);
    }
    assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
    sem_post(&gate);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_true(w[0].start_ns == held.start_ns);
    assert_true(w[1].start_ns - w[0].start_ns == 4000000);
    assert_true(w[2].start_ns - w[1].start_ns == 4000000);
    float ms;
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    assert_float_equal(ms, 12.0, 1e-4);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
    cuStreamDestroy_v2(s);
    sem_destroy(&gate);
}

static void events_recorded_on_an_idle_stream_are_wall_time_apart(void **state)
{
    (void)state;
    CUevent a, b;
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(a, NULL), CUDA_SUCCESS);
    test_sleep_ms(5);
    assert_int_equal(cuEventRecord(b, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    float ms;
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    assert_true(ms >= 5.0f && ms < 1000.0f);
    assert_int_equal(cuEventElapsedTime_v2(&ms, b, a), CUDA_SUCCESS);
    assert_true(ms <= -5.0f);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
}

/* COLLPROF_EMU_DELAY's hold makes the operation after it late by its length from the issue,
 * even when the record trailing the stream is the job's own, from long before (the hold
 * attaches to a trailing record, so that a profiler's start event shows the lateness): an
 * idle stream once absorbed the whole delay, and a GPU straggler timed without a start event
 * (NCCL's profiler plugin) looked on time. */
static void a_delay_counts_from_the_issue_even_after_an_old_record(void **state)
{
    (void)state;
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUevent old;
    assert_int_equal(cuEventCreate(&old, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(old, s), CUDA_SUCCESS);
    test_sleep_ms(20); /* the stream sits idle, the old record long complete */
    work w = {.model_ms = 1};
    uint64_t issue = test_now_ns();
    assert_int_equal(cpemu_stream_delay(s, 10000000), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_true(w.start_ns >= issue + 10000000);
    cuEventDestroy_v2(old);
    cuStreamDestroy_v2(s);
}

static void event_flags_and_unrecorded_events(void **state)
{
    (void)state;
    CUevent t, nt, never;
    float ms;
    assert_int_equal(cuEventCreate(&t, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&never, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&never, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuEventCreate(&never, 0x100), CUDA_ERROR_INVALID_VALUE);
    /* A never-recorded event is complete, but has no time. */
    assert_int_equal(cuEventQuery(never), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(never), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(t, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(nt, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(t), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(nt), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime_v2(&ms, t, never), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventElapsedTime_v2(&ms, t, nt), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventElapsedTime_v2(NULL, t, t), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuEventDestroy_v2(never), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(never), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventDestroy_v2(never), CUDA_ERROR_INVALID_HANDLE);
    cuEventDestroy_v2(t);
    cuEventDestroy_v2(nt);
}

static void rerecording_resets_and_destroy_with_pending_record_is_safe(void **state)
{
    (void)state;
    CUstream s;
    CUevent ev;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, s), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(ev), CUDA_SUCCESS);
    work w = {.cpu_ms = 20};
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, s), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventDestroy_v2(ev), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    cuStreamDestroy_v2(s);
}

static void stream_waits_for_an_event_of_another_stream(void **state)
{
    (void)state;
    CUstream a, b;
    CUevent ev, ea0, eb1;
    assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ea0, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&eb1, 0), CUDA_SUCCESS);
    work held, wa = {.cpu_ms = 30, .model_ms = 30};
    work wb = {.other = &wa.done};
    sem_t gate;
    hold(a, &held, &gate);
    assert_int_equal(cuEventRecord(ea0, a), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(a, work_fn, &wa, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, a), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(b, ev, 0), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(b, work_fn, &wb, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(eb1, b), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    sem_post(&gate);
    assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
    assert_true(wb.saw_other_done);
    /* b's clock moved to the event's stamp: its work starts at a's end in model time. */
    assert_true(wb.start_ns == wa.start_ns + 30000000);
    float ms;
    assert_int_equal(cuEventElapsedTime_v2(&ms, ea0, eb1), CUDA_SUCCESS);
    assert_float_equal(ms, 30.0, 1e-4);
    sem_destroy(&gate);
    assert_int_equal(cuStreamWaitEvent(b, ev, 7), CUDA_ERROR_INVALID_VALUE);
    cuEventDestroy_v2(ev);
    cuEventDestroy_v2(ea0);
    cuEventDestroy_v2(eb1);
    cuStreamDestroy_v2(a);
    cuStreamDestroy_v2(b);
}

static void legacy_stream_synchronises_with_blocking_streams_only(void **state)
{
    (void)state;
    CUstream blocking, nonblocking;
    assert_int_equal(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    work slow = {.cpu_ms = 30};
    work after_legacy = {.other = &slow.done};
    assert_int_equal(cpemu_stream_enqueue(blocking, work_fn, &slow, NULL), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(NULL, work_fn, &after_legacy, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_true(after_legacy.saw_other_done);

    /* A blocking stream's new work waits for the legacy stream's. */
    work legacy_slow = {.cpu_ms = 30};
    work on_blocking = {.other = &legacy_slow.done};
    assert_int_equal(cpemu_stream_enqueue(CU_STREAM_LEGACY, work_fn, &legacy_slow, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(blocking, work_fn, &on_blocking, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(blocking), CUDA_SUCCESS);
    assert_true(on_blocking.saw_other_done);

    /* A non-blocking stream runs beside the legacy stream: its work runs while the legacy
     * stream's is held. */
    sem_t sem, gate;
    sem_init(&sem, 0, 0);
    sem_init(&gate, 0, 0);
    work legacy2 = {.gate = &gate};
    work free_runner = {.other = &legacy2.done, .sem = &sem};
    assert_int_equal(cpemu_stream_enqueue(NULL, work_fn, &legacy2, NULL), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_enqueue(nonblocking, work_fn, &free_runner, NULL), CUDA_SUCCESS);
    sem_wait(&sem);
    assert_false(free_runner.saw_other_done);
    sem_post(&gate);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_true(legacy2.done);
    sem_destroy(&gate);
    sem_destroy(&sem);
    cuStreamDestroy_v2(blocking);
    cuStreamDestroy_v2(nonblocking);
}

/* free_fn is the worker's last use of an item's argument: the test may return after it. */
static void post_when_freed(void *arg)
{
    sem_post(((work *)arg)->freed);
}

static void destroy_returns_at_once_and_pending_work_completes(void **state)
{
    (void)state;
    CUstream s;
    sem_t sem;
    sem_init(&sem, 0, 0);
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    sem_t gate;
    sem_init(&gate, 0, 0);
    work w = {.cpu_ms = 30, .freed = &sem, .gate = &gate};
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, post_when_freed), CUDA_SUCCESS);
    /* Returns while the work cannot even have started. */
    assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cpemu_stream_enqueue(s, work_fn, &w, NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_false(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
    sem_post(&gate);
    sem_wait(&sem);
    assert_true(w.done);
    sem_destroy(&sem);
    sem_destroy(&gate);
}

static void stream_device_and_context(void **state)
{
    (void)state;
    CUstream s;
    CUcontext c;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetCtx(s, &c), CUDA_SUCCESS);
    assert_ptr_equal(c, g_ctx);
    assert_int_equal(cuStreamGetCtx(NULL, &c), CUDA_SUCCESS);
    assert_ptr_equal(c, g_ctx);
    assert_int_equal(cpemu_stream_device(s), 0);
    assert_int_equal(cpemu_stream_device(NULL), 0);
    assert_int_equal(cpemu_current_device(), 0);
    assert_int_equal(cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cpemu_stream_enqueue(s, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cuStreamDestroy_v2(s);
}

static uint64_t ask_device(void *arg, uint64_t start_ns)
{
    *(int *)arg = cpemu_current_device();
    return start_ns;
}

/* collprof-sim's compute: a PTX spin kernel, loaded, found by name and launched, keeps its
 * stream busy for the ns its parameter gives; unknown names and PTX without an entry are
 * refused as the driver refuses them. */
static void a_ptx_spin_kernel_runs_for_its_parameter(void **state)
{
    (void)state;
    static const char ptx[] =
        ".version 7.0\n.target sm_70\n.address_size 64\n"
        ".visible .entry sim_gemm(.param .u64 ns)\n{\n ret;\n}\n"
        ".visible .entry sim_other(.param .u64 ns)\n{\n ret;\n}\n";
    CUmodule mod;
    CUfunction f, g;
    assert_int_equal(cuModuleLoadData(&mod, "no entry here"), CUDA_ERROR_INVALID_PTX);
    assert_int_equal(cuModuleLoadData(&mod, ptx), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, mod, "sim_gemm"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, mod, "sim_other"), CUDA_SUCCESS);
    assert_true(f != g);
    assert_int_equal(cuModuleGetFunction(&g, mod, "sim_missing"), CUDA_ERROR_NOT_FOUND);
    CUstream s;
    CUevent a, b;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    uint64_t ns = 30000000;
    void *params[] = {&ns};
    assert_int_equal(cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, params, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    float ms = 0;
    assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
    /* its 30 ms, plus however long this thread took from the record to the launch (a
     * loaded machine may hold it off the CPU for milliseconds) */
    assert_true(ms >= 29.9f && ms < 50.0f);
    assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
    assert_int_equal(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    cuEventDestroy_v2(a);
    cuEventDestroy_v2(b);
    cuStreamDestroy_v2(s);
}

static void work_runs_with_its_streams_device_current(void **state)
{
    (void)state;
    CUcontext c3, popped;
    CUstream s;
    int seen = -1;
    assert_int_equal(cuCtxCreate_v4(&c3, NULL, 0, 3), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cpemu_stream_device(s), 3);
    assert_int_equal(cpemu_stream_enqueue(s, ask_device, &seen, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(seen, 3);
    assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, c3);
    /* The stream belongs to its context, whatever is current now. */
    assert_int_equal(cpemu_stream_device(s), 3);
    assert_int_equal(cuCtxDestroy_v2(c3), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
    static const char *const vars[] = {"COLLPROF_EMU_TOPO", "COLLPROF_EMU_HOSTS",
                                       "COLLPROF_EMU_HOST_ID", "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(enqueue_returns_at_once_and_event_completes_after_the_work),
        cmocka_unit_test(items_run_in_order_and_are_freed),
        cmocka_unit_test(elapsed_time_is_the_models_when_the_cpu_is_faster),
        cmocka_unit_test(elapsed_time_is_the_models_when_the_cpu_is_slower),
        cmocka_unit_test(queued_items_start_when_the_previous_ends_in_model_time),
        cmocka_unit_test(events_recorded_on_an_idle_stream_are_wall_time_apart),
        cmocka_unit_test(a_delay_counts_from_the_issue_even_after_an_old_record),
        cmocka_unit_test(event_flags_and_unrecorded_events),
        cmocka_unit_test(rerecording_resets_and_destroy_with_pending_record_is_safe),
        cmocka_unit_test(stream_waits_for_an_event_of_another_stream),
        cmocka_unit_test(legacy_stream_synchronises_with_blocking_streams_only),
        cmocka_unit_test(destroy_returns_at_once_and_pending_work_completes),
        cmocka_unit_test(stream_device_and_context),
        cmocka_unit_test(work_runs_with_its_streams_device_current),
        cmocka_unit_test(a_ptx_spin_kernel_runs_for_its_parameter),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
