/* capture: stream capture as far as a profiler can observe it.
 *
 * What is emulated: the capture status of a stream and of the streams that joined it through
 * an event; that work, event records and waits enqueued under capture — cpemu_stream_enqueue
 * included — do not run (libnccl's collective is dropped and its free_fn called: the real
 * kernel would wait for a graph launch); that synchronising a capturing stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture; that the legacy stream
 * cannot be captured nor depend on a capturing stream.
 * LIMITATION: the CUgraph cuStreamEndCapture returns is an opaque token. Nothing in our API
 * list instantiates or launches graphs, so the captured work is not recorded anywhere.
 * Capture modes are stored but not enforced on other threads' calls, and cuStreamEndCapture
 * does not check that joined streams joined back (CUDA_ERROR_STREAM_CAPTURE_UNJOINED). */
#include <stdlib.h>

#include "emu/cuda/cuda_internal.h"

struct CUgraph_st {
    struct CUgraph_st *next;
    struct CUstream_st *origin;
};

/* Kept reachable: no entry point of ours destroys a graph. */
static struct CUgraph_st *g_graphs;

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&s->mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->cap_mode = mode;
        s->cap_origin = s;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* CUDA 10.0's form, before capture modes: global mode. */
CUresult cuStreamBeginCapture(CUstream hStream)
{
    return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&s->mu);
    *captureStatus = (CUstreamCaptureStatus)s->capture;
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    struct CUstream_st *s;
    CUresult r = cu_stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&s->mu);
    int status = s->capture;
    int origin = s->cap_origin == s;
    pthread_mutex_unlock(&s->mu);
    if (status == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (!origin)
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    /* Ends the capture of the origin and of every stream that joined it. */
    struct CUctx_st *c = s->ctx;
    pthread_mutex_lock(&c->mu);
    for (struct CUstream_st *o = c->streams; o; o = o->next) {
        pthread_mutex_lock(&o->mu);
        if (o->cap_origin == s) {
            if (o->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
                status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            o->capture = CU_STREAM_CAPTURE_STATUS_NONE;
            o->cap_origin = NULL;
        }
        pthread_mutex_unlock(&o->mu);
    }
    pthread_mutex_unlock(&c->mu);
    *phGraph = NULL;
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->origin = s;
    pthread_mutex_lock(&g_cu.mu);
    g->next = g_graphs;
    g_graphs = g;
    pthread_mutex_unlock(&g_cu.mu);
    *phGraph = g;
    return CUDA_SUCCESS;
}
