/* litecl's partition runner: the invoke of litecl.Delegate's partition kernel, in C.
 *
 * backend/delegate.py decides everything (the plan, which buffer each tensor binds, the
 * kernels' arguments) and writes one partition's invoke as a list of commands over
 * OpenCL handles and host pointers (runner.py ``Commands``). This file only executes
 * such a list:
 *
 *   - lcl_run(part): run the commands once, wait, report an OpenCL error (called by
 *     delegate.py from Python at every invoke it handles);
 *   - lcl_invoke(context, node): the partition kernel's TfLiteRegistration.invoke. When
 *     the partition is armed and every tensor it binds still has the data pointer and
 *     byte size the list was written for (LiteRT moves them only at allocation), it runs
 *     the list without entering Python; otherwise it calls delegate.py's invoke (the
 *     ``fallback``), which writes the list again and runs it.
 *
 * It links nothing: the OpenCL entry points are the ICD loader's that pyopencl uses and
 * the TFLite struct offsets are backend/abi.py's (its layout self-check has run), both
 * given once by lcl_configure. No Python object is touched here: this runs with the GIL
 * released, inside LiteRT's invoke. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define LCL_API __attribute__((visibility("default")))

typedef int32_t cl_int;
typedef uint32_t cl_uint;
#define CL_COMPLETE 0
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3

typedef struct {
    cl_int (*EnqueueNDRangeKernel)(void *q, void *kernel, cl_uint dim, const size_t *offset, const size_t *global,
                                   const size_t *local, cl_uint n_wait, const void *wait, void **event);
    cl_int (*EnqueueWriteBuffer)(void *q, void *mem, cl_uint blocking, size_t offset, size_t n, const void *ptr,
                                 cl_uint n_wait, const void *wait, void **event);
    cl_int (*EnqueueReadBuffer)(void *q, void *mem, cl_uint blocking, size_t offset, size_t n, void *ptr,
                                cl_uint n_wait, const void *wait, void **event);
    cl_int (*EnqueueCopyBuffer)(void *q, void *src, void *dst, size_t src_offset, size_t dst_offset, size_t n,
                                cl_uint n_wait, const void *wait, void **event);
    cl_int (*Flush)(void *q);
    cl_int (*Finish)(void *q);
    cl_int (*GetEventInfo)(void *event, cl_uint param, size_t size, void *value, size_t *size_ret);
    cl_int (*ReleaseEvent)(void *event);
    cl_int (*WaitForEvents)(cl_uint n, void *const *events);
} lcl_cl;

/* Commands, in order (runner.py OPS). PRE/POST copy host memory before the first enqueue
 * and after the wait (staging through pinned memory on copy devices). */
enum { LCL_PRE = 1, LCL_WRITE = 2, LCL_KERNEL = 3, LCL_COPY = 4, LCL_READ = 5, LCL_POST = 6 };

typedef struct {
    int32_t op;
    int32_t once;        /* a launch with constant inputs only (and nothing else): its
                            partition's first run after the list was written, not again */
    void *a, *b;         /* PRE/POST: destination, source; WRITE: buffer, host source;
                            KERNEL: cl_kernel; COPY: source, destination buffers;
                            READ: buffer, host destination */
    size_t bytes;        /* PRE/POST/WRITE/COPY/READ */
    size_t global, local;/* KERNEL: the NDRange (1-D; local 0: the runtime picks) */
} lcl_cmd;

typedef struct {
    int32_t tensor, pad;
    void *data;          /* TfLiteTensor.data the list was written for */
    size_t bytes;        /* TfLiteTensor.bytes */
} lcl_check;

typedef struct {
    int32_t armed;       /* 1: lcl_invoke may run the list without Python */
    int32_t ran;         /* the list ran once since it was written (``once`` commands done) */
    int64_t direct;      /* runs by lcl_invoke without Python (delegate.py stats) */
    int64_t launches;    /* kernels enqueued, in all (tests count "computed once" with it) */
    int32_t n_checks, n_cmds;
    const lcl_check *checks;
    const lcl_cmd *cmds;
    void *queue;         /* cl_command_queue */
    int32_t spin_us;     /* polling before clFinish (wait_done) */
    int32_t err;         /* the last OpenCL error (0: none) and the command it came from */
    int32_t err_cmd;
    int32_t pad;
    pthread_mutex_t *lock; /* held while the list runs (a device used by one thread at a time), or NULL */
} lcl_part;

static struct {
    lcl_cl cl;
    size_t ctx_tensors, tensor_size, tensor_data, tensor_bytes, node_user_data;
    int (*fallback)(void *ctx, void *node);
    int configured;
} G;

/* Called once per process by runner.py before any partition is armed. */
LCL_API int lcl_configure(const lcl_cl *cl, size_t ctx_tensors, size_t tensor_size, size_t tensor_data,
                          size_t tensor_bytes, size_t node_user_data, int (*fallback)(void *, void *)) {
    G.cl = *cl;
    G.ctx_tensors = ctx_tensors, G.tensor_size = tensor_size, G.tensor_data = tensor_data;
    G.tensor_bytes = tensor_bytes, G.node_user_data = node_user_data;
    G.fallback = fallback;
    G.configured = 1;
    return (int)sizeof(lcl_part) * 1000 + (int)sizeof(lcl_cmd);  /* runner.py checks its mirror */
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Wait for the list's commands: poll the last one's status for at most spin_us, yielding
 * the CPU to the runtime's threads, then wait for that event and clFinish (which also
 * reports the runtime's errors). As litecl_delegate.c wait_done: after milliseconds of
 * LiteRT's own nodes a sleeping clFinish waits for the OS to wake this thread as well as
 * the runtime's. The event wait: Mesa's rusticl 22.3 returns from clFinish before a
 * non-blocking read it holds has landed (its event not CL_COMPLETE; 19-20 of 20 reads of
 * 1K to 4M uints, measured), while clWaitForEvents waits. */
static cl_int wait_done(const lcl_part *p, void *event) {
    cl_int e = 0;
    if (event && p->spin_us > 0) {
        cl_int st = 1;
        G.cl.Flush(p->queue);
        double until = now_us() + (double)p->spin_us;
        while (G.cl.GetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) == 0 &&
               st > CL_COMPLETE && now_us() < until)
            sched_yield();
    }
    if (event) {
        e = G.cl.WaitForEvents(1, &event);
        G.cl.ReleaseEvent(event);
    }
    cl_int f = G.cl.Finish(p->queue);
    return e ? e : f;
}

static int run_list(lcl_part *p);

/* Run the list once, under part->lock when it has one (PoCL's basic device deadlocked
 * with two threads enqueueing and waiting in it at once: delegate.py _serial). 0, or the
 * OpenCL error (also kept in part->err, with the command's index in part->err_cmd; -1:
 * the wait). */
LCL_API int lcl_run(lcl_part *p) {
    if (!p->lock) return run_list(p);
    pthread_mutex_lock(p->lock);
    int e = run_list(p);
    pthread_mutex_unlock(p->lock);
    return e;
}

static int run_list(lcl_part *p) {
    void *event = NULL;
    cl_int e = 0;
    int i;
    int last = -1; /* the last command enqueued: the only one whose event the wait needs */
    for (i = 0; i < p->n_cmds; i++)
        if (p->cmds[i].op != LCL_PRE && p->cmds[i].op != LCL_POST && !(p->cmds[i].once && p->ran)) last = i;
    for (i = 0; i < p->n_cmds && !e; i++) {
        const lcl_cmd *c = &p->cmds[i];
        if (c->once && p->ran) continue;
        if (c->op == LCL_PRE) {
            memcpy(c->a, c->b, c->bytes);
            continue;
        }
        if (c->op == LCL_POST) continue;
        /* no event for the others: Mesa's rusticl (22.3) gave wrong results, now and
         * then, where an earlier command's event was released while it was pending */
        void **ev = i == last ? &event : NULL;
        switch (c->op) {
        case LCL_WRITE:
            e = G.cl.EnqueueWriteBuffer(p->queue, c->a, 0, 0, c->bytes, c->b, 0, NULL, ev);
            break;
        case LCL_KERNEL:
            e = G.cl.EnqueueNDRangeKernel(p->queue, c->a, 1, NULL, &c->global, c->local ? &c->local : NULL, 0, NULL,
                                          ev);
            p->launches += !e;
            break;
        case LCL_COPY:
            e = G.cl.EnqueueCopyBuffer(p->queue, c->a, c->b, 0, 0, c->bytes, 0, NULL, ev);
            break;
        case LCL_READ:
            e = G.cl.EnqueueReadBuffer(p->queue, c->a, 0, 0, c->bytes, c->b, 0, NULL, ev);
            break;
        default:
            e = -30;  /* CL_INVALID_VALUE: a command runner.py does not write */
        }
        if (e) event = NULL;
    }
    if (e) {
        p->err = e, p->err_cmd = i - 1;
        if (event) G.cl.ReleaseEvent(event);
        G.cl.Finish(p->queue);
        return e;
    }
    e = wait_done(p, event);
    if (e) {
        p->err = e, p->err_cmd = -1;
        return e;
    }
    for (i = 0; i < p->n_cmds; i++)
        if (p->cmds[i].op == LCL_POST) memcpy(p->cmds[i].a, p->cmds[i].b, p->cmds[i].bytes);
    p->ran = 1;
    return 0;
}

/* The partition kernel's invoke (TfLiteRegistration.invoke). */
LCL_API int lcl_invoke(void *ctx, void *node) {
    lcl_part *p = *(lcl_part **)((char *)node + G.node_user_data);
    if (!p || !p->armed) return G.fallback(ctx, node);
    const char *tensors = *(char *const *)((const char *)ctx + G.ctx_tensors);
    for (int i = 0; i < p->n_checks; i++) {
        const lcl_check *c = &p->checks[i];
        const char *t = tensors + (size_t)c->tensor * G.tensor_size;
        if (*(void *const *)(t + G.tensor_data) != c->data || *(const size_t *)(t + G.tensor_bytes) != c->bytes) {
            p->armed = 0;
            return G.fallback(ctx, node);  /* LiteRT moved a tensor: delegate.py binds again */
        }
    }
    if (lcl_run(p)) {
        p->armed = 0;
        return G.fallback(ctx, node);  /* delegate.py reports part->err as litecl's error */
    }
    p->direct++;
    return 0;
}
