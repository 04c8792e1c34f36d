/* The emulated driver's API surface: what works before cuInit, devices from the topology,
 * contexts and the context stack, memory, capture, cuGetProcAddress, error strings, and the
 * process-level behaviours (exit with streams alive, fork). */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/emu/test_emu_cuda_util.h"

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

static void calls_before_cuinit_fail_except_the_few_that_need_no_driver(void **state)
{
    (void)state;
    int n = -1, v = 0;
    CUdevice d;
    CUcontext c;
    CUstream s;
    const char *str = NULL;
    void *fn = NULL;
    assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cpemu_stream_enqueue(NULL, NULL, NULL, NULL), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cpemu_current_device(), -1);
    assert_int_equal(cuDriverGetVersion(&v), CUDA_SUCCESS);
    assert_int_equal(v, 13000);
    assert_int_equal(cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &str), CUDA_SUCCESS);
    assert_string_equal(str, "initialization error");
    assert_int_equal(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuInit);
    assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

/* Runs fn in a fresh process of this program (no CUDA state inherited): its exit status. */
static int in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void visible_devices_child(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "3,1,x,2", 1);
    int n;
    char bus[32];
    if (cuInit(0) || cuDeviceGetCount(&n) || n != 2)
        _exit(1);
    if (cuDeviceGetPCIBusId(bus, sizeof bus, 0) || strcmp(bus, "0000:5D:00.0"))
        _exit(2);
    if (cuDeviceGetPCIBusId(bus, sizeof bus, 1) || strcmp(bus, "0000:2A:00.0"))
        _exit(3);
}

static void hidden_devices_child(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    int n;
    if (cuInit(0) != CUDA_ERROR_NO_DEVICE || cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED)
        _exit(1);
}

static void cuda_visible_devices_is_a_list_of_indices_up_to_the_first_bad_one(void **state)
{
    (void)state;
    /* Forked before this process initialises: the children may. */
    assert_int_equal(in_child(visible_devices_child), 0);
    assert_int_equal(in_child(hidden_devices_child), 0);
}

static void devices_are_the_topologys(void **state)
{
    (void)state;
    int n = 0, v;
    char name[64], bus[32];
    size_t mem;
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
    assert_int_equal(n, 8);
    assert_int_equal(cuDeviceGetName(name, sizeof name, 7), CUDA_SUCCESS);
    assert_string_equal(name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(cuDeviceGetName(name, 7, 0), CUDA_SUCCESS);
    assert_string_equal(name, "NVIDIA");
    assert_int_equal(cuDeviceGetName(name, sizeof name, 8), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuDeviceGetPCIBusId(bus, sizeof bus, 5), CUDA_SUCCESS);
    assert_string_equal(bus, "0000:AB:00.0");
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 5), CUDA_SUCCESS);
    assert_int_equal(v, 0xab);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 5), CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 5), CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, 9);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, 132);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_SUCCESS);
    assert_int_equal(v, 32);
    assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)9999, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceTotalMem_v2(&mem, 0), CUDA_SUCCESS);
    assert_true(mem == 80ull << 30);
    CUuuid a, b;
    assert_int_equal(cuDeviceGetUuid_v2(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetUuid_v2(&b, 1), CUDA_SUCCESS);
    assert_memory_not_equal(a.bytes, b.bytes, 16);
}

static void contexts_stack_per_thread(void **state)
{
    (void)state;
    CUcontext p0, p0b, c2, cur;
    CUdevice d;
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_null(cur);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&p0b, 0), CUDA_SUCCESS);
    assert_ptr_equal(p0, p0b);
    assert_int_equal(cuCtxPushCurrent_v2(p0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
    assert_int_equal(d, 0);
    assert_int_equal(cuCtxCreate_v4(&c2, NULL, 0, 2), CUDA_SUCCESS); /* pushes */
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_ptr_equal(cur, c2);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
    assert_int_equal(d, 2);
    assert_int_equal(cuCtxPopCurrent_v2(&cur), CUDA_SUCCESS);
    assert_ptr_equal(cur, c2);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
    assert_int_equal(d, 0);
    assert_int_equal(cuCtxSetCurrent(c2), CUDA_SUCCESS); /* replaces the top */
    assert_int_equal(cuCtxPopCurrent_v2(&cur), CUDA_SUCCESS);
    assert_ptr_equal(cur, c2);
    assert_int_equal(cuCtxPopCurrent_v2(&cur), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDestroy_v2(p0), CUDA_ERROR_INVALID_CONTEXT); /* primary */
    assert_int_equal(cuCtxPushCurrent_v2(c2), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(c2), CUDA_SUCCESS);               /* pops it */
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_null(cur);
    assert_int_equal(cuCtxDestroy_v2(c2), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxCreate_v4(&c2, NULL, 0, 99), CUDA_ERROR_INVALID_DEVICE);
    /* Released twice, retained twice: the primary context goes inactive. */
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSetCurrent(p0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    assert_int_equal(cuDevicePrimaryCtxRetain(&p0b, 0), CUDA_SUCCESS);
    assert_ptr_equal(p0, p0b);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

static void memory_is_checked_like_the_drivers(void **state)
{
    (void)state;
    CUcontext c;
    CUdeviceptr p, q;
    size_t free0, total, free1;
    assert_int_equal(cuMemAlloc_v2(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxCreate_v4(&c, NULL, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemGetInfo_v2(&free0, &total), CUDA_SUCCESS);
    assert_true(total == 80ull << 30);
    assert_int_equal(cuMemAlloc_v2(&p, 1000), CUDA_SUCCESS);
    assert_int_equal(p % 256, 0);
    assert_int_equal(cuMemGetInfo_v2(&free1, &total), CUDA_SUCCESS);
    assert_true(free0 - free1 == 1024);
    assert_int_equal(cuMemAlloc_v2(&q, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAlloc_v2(&q, (size_t)81 << 30), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAlloc_v2(&q, 1000), CUDA_SUCCESS);

    unsigned char host[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        host[i] = (unsigned char)i;
    assert_int_equal(cuMemcpyHtoD_v2(p, host, 1000), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD_v2(q, p, 1000), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH_v2(back, q, 1000), CUDA_SUCCESS);
    assert_memory_equal(host, back, 1000);
    assert_int_equal(cuMemcpyHtoD_v2(p, host, 1025), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)back, host, 4),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD8_v2(p, 0xab, 10), CUDA_SUCCESS);
    assert_int_equal(cuMemcpy((CUdeviceptr)(uintptr_t)back, p, 10), CUDA_SUCCESS);
    assert_int_equal(back[0], 0xab);
    assert_int_equal(back[9], 0xab);
    assert_int_equal(cuMemsetD32_v2(p + 4, 0x01020304u, 2), CUDA_SUCCESS);
    uint32_t words[2];
    assert_int_equal(cuMemcpyDtoH_v2(words, p + 4, 8), CUDA_SUCCESS);
    assert_int_equal(words[0], 0x01020304u);
    assert_int_equal(words[1], 0x01020304u);
    assert_int_equal(cuMemsetD32_v2(p + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(p + 4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    /* q is freed with its context. */
    assert_int_equal(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

static uint64_t never_runs(void *arg, uint64_t start_ns)
{
    *(int *)arg = 1;
    return start_ns;
}

static int g_freed;
static void count_free(void *arg)
{
    (void)arg;
    g_freed++;
}

static void capture_drops_work_and_forbids_synchronisation(void **state)
{
    (void)state;
    CUcontext c;
    CUstream s, joined;
    CUevent ev;
    CUgraph g = NULL;
    CUstreamCaptureStatus st;
    int ran = 0;
    assert_int_equal(cuCtxCreate_v4(&c, NULL, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&joined, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    assert_int_equal(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                     CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_ILLEGAL_STATE);
    assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    g_freed = 0;
    assert_int_equal(cpemu_stream_enqueue(s, never_runs, &ran, count_free), CUDA_SUCCESS);
    assert_int_equal(g_freed, 1);
    assert_int_equal(cuEventRecord(ev, s), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    /* A stream waiting on a captured event joins the capture. */
    assert_int_equal(cuStreamWaitEvent(joined, ev, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamIsCapturing(joined, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(cpemu_stream_enqueue(joined, never_runs, &ran, count_free), CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(joined, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    assert_non_null(g);
    assert_int_equal(cuStreamIsCapturing(joined, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(joined), CUDA_SUCCESS);
    assert_int_equal(ran, 0);
    assert_int_equal(g_freed, 2);

    /* Synchronising a capturing stream fails and invalidates the capture. */
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_int_equal(cpemu_stream_enqueue(s, never_runs, &ran, NULL),
                     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);

    /* The work runs again once capture ended; the event completes on a real record. */
    assert_int_equal(cpemu_stream_enqueue(s, never_runs, &ran, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(ev, s), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(ev), CUDA_SUCCESS);
    assert_int_equal(ran, 1);
    cuEventDestroy_v2(ev);
    assert_int_equal(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

static void get_proc_address_resolves_api_names_by_version(void **state)
{
    (void)state;
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = (CUdriverProcAddressQueryResult)-1;
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemAlloc_v2);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_int_equal(cuGetProcAddress_v2("cuEventElapsedTime", &fn, 13000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuEventElapsedTime_v2);
    assert_int_equal(cuGetProcAddress_v2("cuEventElapsedTime", &fn, 12000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuEventElapsedTime);
    assert_int_equal(cuGetProcAddress_v2("cuCtxCreate", &fn, 12080, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuCtxCreate_v4);
    assert_int_equal(cuGetProcAddress_v2("cuStreamBeginCapture", &fn, 13000, 0, &q),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuStreamBeginCapture_v2);
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 13000, 0, &q), CUDA_ERROR_NOT_FOUND);
    assert_null(fn);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress_v2("cuGraphLaunch", &fn, 13000, 0, &q),
                     CUDA_ERROR_NOT_FOUND);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress_v2("cuStreamIsCapturing", &fn, 9000, 0, &q),
                     CUDA_ERROR_NOT_FOUND);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &q), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress("cuInit", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuInit);
    /* Every row of the list resolves to the symbol of the same row. */
#define CHECK_ROW(ret, api, sym, params, args)                                                \
    assert_int_equal(cuGetProcAddress_v2(#api, &fn, 13000, 0, &q), CUDA_SUCCESS);             \
    assert_ptr_equal(fn, (void *)sym);
    CP_CUDA_API(CHECK_ROW)
#undef CHECK_ROW
}

static void exports_the_driver_api_and_nothing_internal(void **state)
{
    (void)state;
    char path[1024];
    const char *build = getenv("COLLPROF_BUILD_DIR");
    assert_non_null(build);
    snprintf(path, sizeof path, "%s/emu/libcuda.so.1", build);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
#define CHECK_SYMBOL(ret, api, sym, params, args) assert_non_null(dlsym(h, #sym));
    CP_CUDA_API(CHECK_SYMBOL)
#undef CHECK_SYMBOL
    static const char *const exported[] = {"cpemu_stream_enqueue", "cpemu_stream_device",
                                           "cpemu_current_device", "cuEventElapsedTime",
                                           "cuGetProcAddress"};
    for (size_t i = 0; i < sizeof exported / sizeof exported[0]; i++)
        assert_non_null(dlsym(h, exported[i]));
    static const char *const internal[] = {"cu_ready", "cu_stream_push", "g_cu", "cpemu_topo_get",
                                           "cpemu_topo_load", "cpemu_warn", "cpemu_model_ns"};
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++)
        if (dlsym(h, internal[i]))
            fail_msg("libcuda.so.1 exports %s", internal[i]);
    dlclose(h);
}

static void error_strings_are_the_drivers(void **state)
{
    (void)state;
    const char *s = NULL;
    static const struct { CUresult e; const char *name, *text; } cases[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
        {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
        {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
        {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
        {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
        {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
         "operation not permitted when stream is capturing"},
        {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(cuGetErrorName(cases[i].e, &s), CUDA_SUCCESS);
        assert_string_equal(s, cases[i].name);
        assert_int_equal(cuGetErrorString(cases[i].e, &s), CUDA_SUCCESS);
        assert_string_equal(s, cases[i].text);
    }
    assert_int_equal(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    assert_int_equal(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

static uint64_t sleep_long(void *arg, uint64_t start_ns)
{
    (void)arg;
    test_sleep_ms(10000);
    return start_ns;
}

static void exit_child(void)
{
    CUcontext c;
    CUstream s;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) ||
        cuStreamCreate(&s, 0) || cpemu_stream_enqueue(s, sleep_long, NULL, NULL))
        _exit(1);
    exit(0); /* with a worker busy: must not hang or crash */
}

static void fork_child_after_init(void)
{
    int n;
    CUcontext c;
    if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED ||
        cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED ||
        cuCtxGetCurrent(&c) != CUDA_ERROR_NOT_INITIALIZED ||
        cpemu_stream_enqueue(NULL, sleep_long, NULL, NULL) != CUDA_ERROR_NOT_INITIALIZED)
        _exit(1);
}

/* A fresh process of this program that runs exit_child (fork alone would inherit our
 * initialised driver, which a fork child may not use). */
static void exec_exit_child(void)
{
    execl("/proc/self/exe", "test_emu_cuda_api", "--exit-child", (char *)NULL);
    _exit(127);
}

static void exit_with_busy_streams_and_fork_behave_like_the_driver(void **state)
{
    (void)state;
    uint64_t t0 = test_now_ns();
    assert_int_equal(in_child(exec_exit_child), 0);
    assert_true(MS(test_now_ns() - t0) < 5000);
    /* This process initialised CUDA above: its fork children may not use it. */
    assert_int_equal(in_child(fork_child_after_init), 0);
}

/* COLLPROF_EMU_EVENT_NS=R:Q: each record takes the calling thread R ns, each query Q ns
 * (what a real driver's do: docs/EMULATION.md). Exit status: 0, or the bits of what was too
 * quick (2 records, 4 queries). A lower bound only: the spin cannot be shorter. */
static void event_cost_child(void)
{
    CUcontext c;
    CUstream s;
    CUevent e;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) ||
        cuStreamCreate(&s, 0) || cuEventCreate(&e, 0))
        _exit(1);
    uint64_t t0 = test_now_ns();
    for (int i = 0; i < 50; i++)
        if (cuEventRecord(e, s) != CUDA_SUCCESS)
            _exit(1);
    uint64_t t1 = test_now_ns();
    if (cuEventSynchronize(e) != CUDA_SUCCESS)
        _exit(1);
    uint64_t t2 = test_now_ns();
    for (int i = 0; i < 50; i++)
        if (cuEventQuery(e) != CUDA_SUCCESS)
            _exit(1);
    uint64_t t3 = test_now_ns();
    _exit((t1 - t0 >= 50 * 200000ull ? 0 : 2) | (t3 - t2 >= 50 * 100000ull ? 0 : 4));
}

static void exec_event_cost_child(void)
{
    setenv("COLLPROF_EMU_EVENT_NS", "200000:100000", 1);
    execl("/proc/self/exe", "test_emu_cuda_api", "--event-cost-child", (char *)NULL);
    _exit(127);
}

static void events_cost_what_the_knob_says(void **state)
{
    (void)state;
    assert_int_equal(in_child(exec_event_cost_child), 0);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--exit-child") == 0) {
        exit_child();
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "--event-cost-child") == 0) {
        event_cost_child();
        return 2;
    }
    static const char *const vars[] = {"COLLPROF_EMU_TOPO", "COLLPROF_EMU_HOSTS",
                                       "COLLPROF_EMU_HOST_ID", "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calls_before_cuinit_fail_except_the_few_that_need_no_driver),
        cmocka_unit_test(cuda_visible_devices_is_a_list_of_indices_up_to_the_first_bad_one),
        cmocka_unit_test(devices_are_the_topologys),
        cmocka_unit_test(contexts_stack_per_thread),
        cmocka_unit_test(memory_is_checked_like_the_drivers),
        cmocka_unit_test(capture_drops_work_and_forbids_synchronisation),
        cmocka_unit_test(get_proc_address_resolves_api_names_by_version),
        cmocka_unit_test(exports_the_driver_api_and_nothing_internal),
        cmocka_unit_test(error_strings_are_the_drivers),
        cmocka_unit_test(exit_with_busy_streams_and_fork_behave_like_the_driver),
        cmocka_unit_test(events_cost_what_the_knob_says),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
