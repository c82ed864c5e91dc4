/* litecl's native TFLite delegate: the CAST and ADD kernels litecl's Python delegate
 * launches for one model (backend/delegate.py), as a TFLite external delegate an app
 * loads beside its other delegates.
 *
 *   load_delegate("liblitecl_delegate.so", options)      (ai_edge_litert / tf.lite)
 *   --external_delegate_path=liblitecl_delegate.so       (LiteRT's tools)
 *
 * What it runs is data written by ``litecl export`` into plan.c (litecl_plan.h): per
 * subgraph the model's fingerprint, the nodes the Python delegate claimed, its partitions
 * and their launches (OpenCL C source, program binary). Shaped like TFLite's
 * SimpleDelegate (tensorflow/lite/delegates/utils/simple_delegate.h): the delegate's
 * Prepare picks nodes; a kernel per partition has init (the nodes), prepare (shapes ->
 * geometry, programs, output resizes) and invoke (bind LiteRT's memory, launch, wait).
 *
 * Rules and where they come from:
 *  - the ABI: tflite_abi.h (TFLite's common.h); OpenCL at run time: cl_loader.h;
 *  - the runtime's version and a layout check of its context: litert_check.h (create
 *    refuses an untested LiteRT / TensorFlow; Prepare declines an implausible context);
 *  - claims, partitions, the Replacing line: backend/claims.py prepare;
 *  - per-partition inputs, folded launches, memory: backend/kernels.py plan_partition and
 *    backend/delegate.py _c_plan (the plan this runtime reads);
 *  - former/tail tiling and NDRange: ops/tiling.py plan() and launch() (``tiling``);
 *  - output shapes: CAST keeps its input's, ADD broadcasts as numpy
 *    (ops/broadcast.py broadcast_shape).
 * Every failure is one line (context->ReportError, and stderr for the delegate's own
 * errors) and kTfLiteError; nothing aborts. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cl_loader.h"
#include "litecl_plan.h"
#include "litert_check.h"
#include "tflite_abi.h"

#define LCL_NAME "litecl OpenCL"    /* backend/delegate.py DELEGATE_NAME */
#define LCL_MAX_RANK 16
#define LCL_MAX_BOUND 64            /* in-place buffers kept per partition */
#define LCL_BLOCK_BYTES 32          /* ops/tiling.py BLOCK_BYTES */
#define LCL_MAX_ELEMENTS (1ull << 31) /* ops/tiling.py MAX_ELEMENTS */
#define LCL_SPIN_US 1000            /* kernel_invoke's wait on a runtime SPIN_ROWS does not name */
/* On a copy device (a discrete GPU) a tensor of at most this many bytes goes through a
 * pinned staging buffer (ALLOC_HOST_PTR, mapped once: a memcpy, then the DMA from it); a
 * larger one is copied from LiteRT's pageable memory directly. NVIDIA H200
 * (benchmarks/h200_staging.py, results/h200/staging.json; a write and a read each): staged
 * 1.4-1.6x faster from 16 to 576 KiB, 1.05x at 1152 KiB; direct 1.07-1.10x faster from 2.3 MiB. */
#define LCL_STAGE_MAX (3 << 19)
#define LCL_PROFILE_MAX 256         /* commands a profiled invoke records */

#if defined(__GNUC__)
#define LCL_EXPORT __attribute__((visibility("default")))
#define LCL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LCL_EXPORT
#define LCL_PRINTF(a, b)
#endif

/* ----------------------------------------------------------------- tiling (pure) */
/* ops/tiling.py, line for line: divide_round_up, align_up, plan(), launch(). */
typedef struct {
    uint64_t n, former_num, former_len, tail_len; /* the kernels' four uint arguments */
    uint64_t gsize, lsize;
} lcl_tiling;

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* ops/tiling.py launch(caps, n, tile_bytes): block_dim = compute units x groups_per_cu,
 * never more groups than 32-byte blocks, nor than fill each work-item with vec_bytes of
 * the smallest type, nor than give each group group_bytes of it (0: no floor); local size
 * capped at the device's work-group limit; then plan(). */
static int tiling(uint64_t n, int tile_bytes, int compute_units, int max_wg, int local_size,
                  int groups_per_cu, int vec_bytes, int group_bytes, lcl_tiling *t) {
    if (n > LCL_MAX_ELEMENTS || tile_bytes <= 0 || LCL_BLOCK_BYTES % tile_bytes)
        return -1;
    uint64_t local = (uint64_t)(local_size < max_wg ? local_size : max_wg);
    if (local < 1) local = 1;
    uint64_t block_dim = (uint64_t)compute_units * (uint64_t)groups_per_cu;
    if (block_dim < 1) block_dim = 1;
    uint64_t align_num = (uint64_t)(LCL_BLOCK_BYTES / tile_bytes);
    uint64_t blocks = div_up(n, align_num);
    if (blocks < 1) blocks = 1;
    uint64_t per_item = (uint64_t)(vec_bytes / tile_bytes);
    uint64_t per_group = local * (per_item > 1 ? per_item : 1);
    uint64_t fill = div_up(n, per_group);
    if (fill < 1) fill = 1;
    if (blocks < block_dim) block_dim = blocks;
    if (fill < block_dim) block_dim = fill;
    if (group_bytes > 0) {
        uint64_t carried = n * (uint64_t)tile_bytes / (uint64_t)group_bytes;
        if (carried < block_dim) block_dim = carried < 1 ? 1 : carried;
    }
    /* plan(): x = ceil(n / align_num) blocks = q * block_dim + r */
    uint64_t x = div_up(n, align_num);
    uint64_t q = x / block_dim, r = x % block_dim;
    t->n = n;
    t->former_num = r;
    t->former_len = (q + 1) * align_num;
    t->tail_len = q * align_num;
    t->gsize = block_dim * local;
    t->lsize = local;
    return 0;
}

/* For tests (tests/test_native_delegate.py compares it with ops/tiling.py on many n):
 * out = n, former_num, former_len, tail_len, global size, local size. */
LCL_EXPORT int litecl_native_tiling(uint64_t n, int tile_bytes, int compute_units, int max_wg,
                                    int local_size, int groups_per_cu, int vec_bytes, int group_bytes,
                                    uint64_t out[6]) {
    lcl_tiling t;
    if (tiling(n, tile_bytes, compute_units, max_wg, local_size, groups_per_cu, vec_bytes, group_bytes, &t))
        return -1;
    out[0] = t.n, out[1] = t.former_num, out[2] = t.former_len, out[3] = t.tail_len;
    out[4] = t.gsize, out[5] = t.lsize;
    return 0;
}

/* ----------------------------------------------------------------- the delegate */
/* An opened OpenCL device: one per (library, platform, device) for the process's life.
 * Never released: PoCL joins its worker threads a second time at exit once its last
 * context was released ("pocl_pthread_join: Invalid argument"), and a later delegate on
 * the same device reuses the context and every program built (construct + allocate). */
/* The architecture whose LiteRT bits the kernels give (ops/add.py FLOAT_ADD_RULES: float
 * ADD's default NaN, NaN choice and signed zero differ between x86-64 and aarch64): the
 * one this library is compiled for, as LiteRT runs in the same process. Every program is
 * built with its -D option (ops/add.py arch_source), and the exported binaries are used
 * only where they were built for it (LCL_PLAN.binary_arch). */
#if defined(__x86_64__)
#define LCL_ARCH "x86_64"
#define LCL_ARCH_OPTION "-DLITECL_ARCH_X86_64"
#elif defined(__aarch64__)
#define LCL_ARCH "aarch64"
#define LCL_ARCH_OPTION "-DLITECL_ARCH_AARCH64"
#else
#error "litecl's native delegate has LiteRT's float rules for x86-64 and aarch64 only"
#endif

/* Long enough for any path (PATH_MAX) or OpenCL name, and for a message naming a few of
 * them whole: no message cuts a path or a name. */
#define LCL_NAME_MAX 4096
#define LCL_MSG_MAX 32768

#define LCL_OP_CAST 1
#define LCL_OP_ADD 2

/* a partition's counts (lcl_partition_counts; backend/delegate.py Delegate.stats) */
enum { LCL_IN_PLACE, LCL_COPIED, LCL_STAGED, LCL_INVOKES, LCL_LAUNCHED, LCL_BUFFERS, LCL_UPLOADS, LCL_N_COUNTS };

typedef struct device_entry {
    struct device_entry *next;
    char library[LCL_NAME_MAX], platform[LCL_NAME_MAX], device[LCL_NAME_MAX]; /* as asked (options) */
    char device_type[8];               /* as asked: "gpu", "cpu", "any", or "" (the export's, then any) */
    char opened[LCL_NAME_MAX];         /* the library that gave the device */
    char platform_name[LCL_NAME_MAX], device_name[LCL_NAME_MAX], driver[256];
    pthread_mutex_t lock;              /* recursive: Prepare -> Replace -> init */
    lcl_cl cl;
    void *lib;
    cl_platform_id platform_id;
    cl_device_id device_id;
    cl_context context;
    cl_command_queue queue;
    cl_program *programs;              /* LCL_PROGRAMS, built on first use */
    int local_size, groups_per_cu, vec_bytes, group_bytes;  /* ops/tiling.py LAUNCH row for it */
    int serial;                        /* 1: kernels' prepare and invoke hold ``lock`` (exported:
                                          always; in process: Device.one_thread) */
    int one_thread;                    /* exported: invokes hold ``lock`` too (Oclgrind: two
                                          threads' kernels at once crashed it, device.py _open) */
    pid_t pid;                         /* the process that opened it (fork check) */
    char fork_message[1024];           /* in process: what an invoke after fork() says (device.py) */
    struct pooled_kernel *pool;        /* kernels partitions gave back (take_kernel) */
    pthread_mutex_t pool_lock;
    char **family_why;                 /* LCL_FAMILIES' self-test verdicts: NULL not run yet,
                                          "" LiteRT's bits, else why not (self_test) */
    int compute_units, max_wg;
    long spin_us;                      /* its runtime's wait (SPIN_ROWS), unless "spin_us" is given */
} device_entry;

typedef struct {
    TfLiteDelegate base;               /* first: a TfLiteDelegate* is a delegate* */
    device_entry *dev;
    pthread_mutex_t *lockp;            /* the device's */
    int in_place, align;               /* memory policy (LCL_PLAN, option "memory") */
    int use_binaries, quiet;
    char cache_dir[LCL_NAME_MAX];      /* compiled programs kept between processes ("" none: program_cache) */
    int cache_warned;                  /* cache_unwritable said its line */
    long spin_us;                      /* polling before a blocking clFinish ("spin_us"); -1: the
                                          device's row (SPIN_ROWS) */
    int keep_order;                    /* LiteRT's own nodes in the model's order ("keep_order": LCL_KEEP_*) */
    int ops;                           /* the operators it may take ("ops"): LCL_OP_CAST | LCL_OP_ADD */
    int *nodes, n_nodes;               /* "nodes": (subgraph, node index) pairs it may take; NULL: any */
    TfLiteContext **announced;         /* contexts whose Replacing line was printed */
    int n_announced, cap_announced;
    int partitions_made;               /* partition kernels init'ed in the current Prepare */
    int hush;                          /* say() keeps its line in ``error`` only (self_test) */
    char error[512];                   /* the last error, one line */
    /* in process (litecl.Delegate: lcl_inprocess_new); planner NULL in an export */
    int64_t key;                       /* the Python Delegate's */
    /* 0: planned; ``shape_key``: the partition's input key (kernel_prepare: per input
     * slot its constness, rank and dims), n_key -1 where it did not fit */
    int (*planner)(int64_t partition, TfLiteContext *ctx, const int *shape_key, int n_key,
                   lcl_inprocess_plan *out);
    void (*reporter)(int64_t delegate_key, TfLiteContext *ctx, const char *message);
    void (*profiler)(int64_t partition, const lcl_profile_cmd *cmds, int32_t n, const lcl_profile_span *spans,
                     int32_t n_spans, int64_t t0, int64_t t1);
    int profile;                       /* event-profile each partition invoke (Delegate.profile) */
    struct recall_state *recall;       /* in process: recalled Prepares (lcl_recall_bind) */
} delegate;

static void say(delegate *d, TfLiteContext *ctx, const char *fmt, ...) LCL_PRINTF(3, 4);

/* One line naming the cause: to LiteRT's error reporter (which LiteRT's Python
 * Interpreter raises as RuntimeError), else to stderr. */
static void say(delegate *d, TfLiteContext *ctx, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = ' ';
    if (d) snprintf(d->error, sizeof d->error, "%s", buf);
    if (d && d->hush) return;
    if (d && d->reporter) { /* in process: litecl.Delegate keeps it and reports it through LiteRT */
        d->reporter(d->key, ctx, buf);
        return;
    }
    if (ctx && ctx->ReportError)
        ctx->ReportError(ctx, "%s", buf);
    else
        fprintf(stderr, "ERROR: %s\n", buf);
}

static int type_size(int type) {
    return type >= 0 && type < LCL_PLAN.n_type_sizes ? LCL_PLAN.type_sizes[type] : 0;
}

/* (bits, signed) of a sub-byte type LiteRT holds packed at run time, else bits 0 */
static int packed_bits(int type, int *is_signed) {
    for (int i = 0; i < LCL_PLAN.n_packed_types; i++)
        if (LCL_PLAN.packed_types[3 * i] == type) {
            *is_signed = LCL_PLAN.packed_types[3 * i + 2];
            return LCL_PLAN.packed_types[3 * i + 1];
        }
    return 0;
}

static const TfLiteIntArray *sig_dims(const TfLiteTensor *t) {
    /* backend/views.py _tensor_view: the signature when LiteRT has one, else dims */
    return t->dims_signature ? t->dims_signature : t->dims;
}

/* ----------------------------------------------------------------- fingerprint */
/* The int32 stream export.py ``fingerprint`` writes, rebuilt from the context: the
 * tensor and node counts; per node of the execution plan its index, builtin code,
 * version, inputs and outputs (ADD: its activation and pot_scale_int16); per tensor its
 * TfLiteType, signature shape, per-tensor scale (bits) and zero point. Compared as it is
 * produced; on the first difference ``why`` names it. Returns 1 when equal.
 * The tensor count is the model's: a delegate without AllowDynamicTensors is prepared
 * after LiteRT ran the ops' prepare, which appends their temporaries (one for MoveNet,
 * shaped by the inputs): those tensors past the model's are not compared.
 * Returns -1 when a node does not read plausibly through tflite_abi.h (NULL node or
 * registration, arrays missing, counts or tensor indices out of range): ``why`` says so. */
typedef struct {
    const int32_t *want;
    int32_t len, pos;
    char *why;
    size_t why_len;
} fp_cursor;

/* A name for ``v`` in a message: ``names`` (``n`` of them) where it has one, else the
 * number (``buf``). */
static const char *named(const char *const *names, int n, int32_t v, char *buf, size_t len) {
    if (names && v >= 0 && v < n && names[v] && names[v][0]) return names[v];
    snprintf(buf, len, "%d", (int)v);
    return buf;
}

/* TfLiteFusedActivation's values (tflite_abi.h), as the schema names them */
static const char *const ACTIVATION_NAMES[] = {"NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT",
                                               "SIGMOID"};

/* how fp_put words a value: a number, an operator (LCL_OP_NAMES), an activation, a tensor
 * type (LCL_TYPE_NAMES), a float held as its bits */
enum { FP_INT, FP_OP, FP_ACT, FP_TYPE, FP_FLOAT };

static int fp_put(fp_cursor *c, int32_t v, const char *what, int index, int kind) {
    if (c->pos >= c->len || c->want[c->pos] != v) {
        if (c->pos >= c->len) {
            snprintf(c->why, c->why_len, "the model has more %s than the exported one", what);
        } else if (kind == FP_FLOAT) {
            float here, was;
            memcpy(&here, &v, sizeof here);
            memcpy(&was, &c->want[c->pos], sizeof was);
            snprintf(c->why, c->why_len, "%s %d is %.9g here, exported %.9g", what, index, here, was);
        } else {
            const char *const *names = kind == FP_OP ? LCL_OP_NAMES : kind == FP_ACT ? ACTIVATION_NAMES
                                     : kind == FP_TYPE ? LCL_TYPE_NAMES : NULL;
            int n = kind == FP_OP ? LCL_N_OP_NAMES : kind == FP_ACT ? (int)(sizeof ACTIVATION_NAMES /
                                                                          sizeof ACTIVATION_NAMES[0])
                  : kind == FP_TYPE ? LCL_PLAN.n_type_sizes : 0;
            char a[16], b[16];
            snprintf(c->why, c->why_len, "%s %d is %s here, exported %s", what, index,
                     named(names, n, v, a, sizeof a), named(names, n, c->want[c->pos], b, sizeof b));
        }
        return 0;
    }
    c->pos++;
    return 1;
}

/* A node as tflite_abi.h reads it: the cheap per-node layout check (backend/views.py
 * _plausible): arrays present, counts and tensor indices in range (-1: an optional tensor
 * left out), a sane op version. Any node may have no outputs (ASSIGN_VARIABLE,
 * CALL_ONCE) or leave one out (WHILE: -1 for an unused one); a CAST or ADD has one. */
static int node_plausible(const TfLiteContext *ctx, int i, const TfLiteNode *node, const TfLiteRegistration *reg,
                          char *why, size_t why_len) {
    int ok = node && reg && node->inputs && node->outputs && node->inputs->size >= 0 &&
             node->inputs->size < 4096 && node->outputs->size >= 0 && node->outputs->size < 4096 &&
             reg->version >= 0 && reg->version < 1000 && reg->builtin_code >= 0 && reg->builtin_code < 4096;
    if (ok && (reg->builtin_code == kTfLiteBuiltinCast || reg->builtin_code == kTfLiteBuiltinAdd))
        ok = node->outputs->size > 0;
    for (int j = 0; ok && j < node->inputs->size; j++)
        ok = node->inputs->data[j] >= -1 && (size_t)(node->inputs->data[j] + 1) <= ctx->tensors_size;
    for (int j = 0; ok && j < node->outputs->size; j++)
        ok = node->outputs->data[j] >= -1 && (size_t)(node->outputs->data[j] + 1) <= ctx->tensors_size;
    if (!ok)
        snprintf(why, why_len, "node %d does not read as a TfLiteNode with %zu tensors (inputs %d, outputs %d, "
                 "op %d version %d)", i, ctx->tensors_size, node && node->inputs ? node->inputs->size : -1,
                 node && node->outputs ? node->outputs->size : -1, reg ? (int)reg->builtin_code : -1,
                 reg ? reg->version : -1);
    return ok;
}

static int fingerprint_matches(TfLiteContext *ctx, const TfLiteIntArray *plan, const lcl_span fp,
                               char *why, size_t why_len) {
    fp_cursor c = {LCL_INTS + fp.off, fp.len, 0, why, why_len};
#define PUTK(v, what, i, kind) do { if (!fp_put(&c, (int32_t)(v), what, i, kind)) return 0; } while (0)
#define PUT(v, what, i) PUTK(v, what, i, FP_INT)
    int32_t n_tensors = c.len ? c.want[0] : 0;
    if ((size_t)n_tensors > ctx->tensors_size) {
        snprintf(why, why_len, "%d tensors exported, %d here", (int)n_tensors, (int)ctx->tensors_size);
        return 0;
    }
    /* the model's nodes by index, 0 .. N-1, whatever delegates applied before this one
     * took: their kernels replace nodes in the execution plan, while LiteRT keeps every
     * node of the model at its index (the kernels come after them, from N on) */
    int32_t want_nodes = c.len > 1 ? c.want[1] : 0;
    /* the model's nodes: the execution plan's length where no delegate applied before,
     * else up to the first delegate kernel (LiteRT appends kernels from N on). Read from
     * the plan, not by asking for node indices until one fails: LiteRT reports each
     * failed lookup, and that line then led every later error of the interpreter. */
    int here = plan ? plan->size : 0, first_kernel = -1;
    for (int k = 0; plan && k < plan->size; k++) {
        TfLiteNode *node;
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, plan->data[k], &node, &reg) == kTfLiteOk && reg &&
            reg->builtin_code == kTfLiteBuiltinDelegate && (first_kernel < 0 || plan->data[k] < first_kernel))
            first_kernel = plan->data[k];
    }
    if (first_kernel >= 0) here = first_kernel;
    if (here != want_nodes) {
        snprintf(why, why_len, "%d nodes exported, %d here", (int)want_nodes, here);
        return 0;
    }
    c.pos = 2;
    for (int k = 0; k < want_nodes; k++) {
        int i = k;
        TfLiteNode *node;
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, i, &node, &reg) != kTfLiteOk) {
            snprintf(why, why_len, "LiteRT's GetNodeAndRegistration failed for node %d", i);
            return 0;
        }
        if (!node_plausible(ctx, i, node, reg, why, why_len)) return -1;
        PUT(i, "execution plan entry", k);
        PUTK(reg->builtin_code, "the operator of node", i, FP_OP);
        PUT(reg->version, "the op version of node", i);
        PUT(node->inputs->size, "the input count of node", i);
        for (int j = 0; j < node->inputs->size; j++) PUT(node->inputs->data[j], "an input of node", i);
        PUT(node->outputs->size, "the output count of node", i);
        for (int j = 0; j < node->outputs->size; j++) {
            /* an output LiteRT's own prepare left out: export reads the context before the
             * ops' prepare (AllowDynamicTensors), a static graph's delegate after it, where
             * WHILE has written -1 for a loop output nothing reads (measured, LiteRT 2.3.0) */
            if (node->outputs->data[j] == -1 && reg->builtin_code != kTfLiteBuiltinCast &&
                reg->builtin_code != kTfLiteBuiltinAdd && c.pos < c.len && c.want[c.pos] >= 0) {
                c.pos++;
                continue;
            }
            PUT(node->outputs->data[j], "an output of node", i);
        }
        if (reg->builtin_code == kTfLiteBuiltinAdd) {
            const TfLiteAddParams *p = node->builtin_data;
            PUTK(p ? p->activation : 0, "the activation of node", i, FP_ACT);
            PUT(p ? p->pot_scale_int16 : 1, "pot_scale_int16 of node", i);
        }
    }
    for (int t = 0; t < n_tensors; t++) {
        const TfLiteTensor *ts = &ctx->tensors[t];
        const TfLiteIntArray *dims = sig_dims(ts);
        PUTK(ts->type, "the type of tensor", t, FP_TYPE);
        PUT(dims ? dims->size : -1, "the rank of tensor", t);
        for (int j = 0; dims && j < dims->size; j++) PUT(dims->data[j], "a dimension of tensor", t);
        int32_t bits;
        memcpy(&bits, &ts->params.scale, sizeof bits);
        PUTK(bits, "the scale of tensor", t, FP_FLOAT);
        PUT(ts->params.zero_point, "the zero point of tensor", t);
    }
#undef PUT
#undef PUTK
    if (c.pos != c.len) {
        snprintf(why, why_len, "the model's tensors differ from the exported ones");
        return 0;
    }
    return 1;
}

/* ----------------------------------------------------------------- partitions */
typedef struct {
    int tensor;
    int rank, dims[LCL_MAX_RANK];
    int is_in, is_out, constant, folded;   /* partition input / output; value fixed */
    int type, itemsize, pbits, psigned;    /* TfLiteType; packed sub-byte bits */
    cl_mem own;                            /* litecl's buffer: internal, folded, staging */
    size_t own_bytes;
    cl_mem pinned;                         /* staging on copy devices (ALLOC_HOST_PTR) */
    void *pinned_ptr;
    size_t pinned_bytes;
    cl_mem bound;                          /* this invoke's buffer for the tensor's value */
    int host;                              /* 1: ``bound`` is LiteRT's memory itself */
} slot;

typedef struct {
    const lcl_launch *ln;
    cl_kernel kernel;
    cl_program prg;                        /* ``kernel``'s program and name (give_kernel) */
    char name[128];
    size_t kwg;                            /* its CL_KERNEL_WORK_GROUP_SIZE (0: not known) */
    int program, folded, n_bufs;
    int *bufs;                             /* slot indices of its buffer arguments */
    cl_mem *last;                          /* the buffers its kernel was last given */
    lcl_tiling t;
} run;

typedef struct { void *ptr; size_t bytes; int type; cl_mem mem; } cached_mem;

/* What a partition's launches come from: the exported tables (LCL_*), or, in process,
 * the planner's plan for its current shapes (lcl_inprocess_plan). */
typedef struct {
    const int32_t *ints;                   /* spans index it */
    const lcl_launch *launches;
    int n_launches;                        /* in process: the plan's; exported: unused */
    void *const *programs;                 /* in process: cl_program built by the planner, by lcl_launch.program */
    const char *const *names;              /* in process: kernel names, by lcl_launch.program */
} launch_source;

typedef struct {
    delegate *d;
    device_entry *dev;                     /* where it runs (in process: the plan's device) */
    int in_place, align;                   /* memory policy of ``dev`` */
    launch_source src;
    int64_t key;                           /* in process: the planner's name for it */
    int64_t counts[LCL_N_COUNTS];          /* lcl_partition_counts */
    int n_nodes, *nodes;                   /* execution order */
    int *ops, (*node_io)[2];               /* per node: builtin code; first slot of ins/outs */
    int *node_ins, *node_outs;             /* per node: input / output count */
    int *io;                               /* slot indices: node j's inputs then outputs */
    slot *slots;
    int n_slots;
    run *runs;
    int n_runs;
    int single;                            /* 1: one unfused launch per node */
    const lcl_subgraph *sg;
    const lcl_partition *part;             /* NULL when single */
    int prepared, folded_done;
    int *last_key, n_last_key;             /* input shapes and constness of the last prepare */
    /* in process: the plan an earlier partition of the same nodes got at input key
     * ``preset_key`` (lcl_partition_new), used at the first prepare with that key instead
     * of asking the planner; the planner keeps what it points into alive */
    lcl_inprocess_plan preset;
    int *preset_key, n_preset_key;         /* NULL: none */
    int on_preset;                         /* its current launches are the preset's */
    cached_mem bound[LCL_MAX_BOUND];
    int n_bound;
    cached_mem *consts;
    int n_consts, cap_consts;
    cl_event done;                         /* the invoke's last non-blocking command */
    lcl_profile_cmd *prof;                 /* a profiled invoke's commands (Delegate.profile) */
    cl_event *prof_ev;
    int n_prof;
    lcl_profile_span spans[64];
    int n_spans;
} partition;

static int slot_of(partition *p, int tensor) {
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].tensor == tensor) return i;
    return -1;
}

static size_t numel(const slot *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->dims[i];
    return n;
}

static int same_shape(const slot *a, const slot *b) {
    return a->rank == b->rank && !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof(int));
}

static int generic_operand_holds(const int32_t *ints, const lcl_launch *ln, int a, const slot *in,
                                 const slot *out);

static void dims_text(const int *dims, int rank, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %d" : "%d", dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

static void shape_text(const slot *s, char *buf, size_t len) { dims_text(s->dims, s->rank, buf, len); }

static void release_mem(device_entry *dev, cl_mem *m) {
    if (*m) dev->cl.ReleaseMemObject(*m);
    *m = NULL;
}

/* the buffers each launch's kernel was last given (run.last: an argument is set again only
 * when its buffer changes) are forgotten whenever a buffer is released: a buffer made later
 * can get the released one's handle, and its kernel argument would then not be set */
static void forget_args(partition *p) {
    for (int i = 0; i < p->n_runs; i++)
        if (p->runs[i].last) memset(p->runs[i].last, 0, (size_t)p->runs[i].n_bufs * sizeof(cl_mem));
}

static void release_consts(partition *p) {
    for (int i = 0; i < p->n_consts; i++) release_mem(p->dev, &p->consts[i].mem);
    p->n_consts = 0;
    forget_args(p);
}

static void release_bound(partition *p) {
    for (int i = 0; i < p->n_bound; i++) release_mem(p->dev, &p->bound[i].mem);
    p->n_bound = 0;
    forget_args(p);
}

/* Kernel objects of a device, kept by program and name when a partition lets one go and
 * handed to the next partition that asks (a kernel's arguments are set at every prepare
 * and its buffers at every invoke): clCreateKernel at every prepare of every partition
 * cost start-up (the Python delegate kept such a pool: kernels.py take_kernel). A pooled
 * kernel holds its program, so no other program can take that address meanwhile. */
typedef struct pooled_kernel {
    struct pooled_kernel *next;
    cl_program prg;
    cl_kernel kernel;
    size_t kwg;
    char name[128];
} pooled_kernel;

/* ``*kwg``: the pooled kernel's CL_KERNEL_WORK_GROUP_SIZE, 0 for a new kernel */
static cl_kernel take_kernel(device_entry *dev, cl_program prg, const char *name, size_t *kwg, cl_int *err) {
    *kwg = 0;
    pthread_mutex_lock(&dev->pool_lock);
    for (pooled_kernel **q = &dev->pool; *q; q = &(*q)->next) {
        pooled_kernel *k = *q;
        if (k->prg == prg && !strcmp(k->name, name)) {
            *q = k->next;
            pthread_mutex_unlock(&dev->pool_lock);
            cl_kernel got = k->kernel;
            *kwg = k->kwg;
            free(k);
            *err = CL_SUCCESS;
            return got;
        }
    }
    pthread_mutex_unlock(&dev->pool_lock);
    return dev->cl.CreateKernel(prg, name, err);
}

static void give_kernel(device_entry *dev, cl_program prg, const char *name, cl_kernel kernel, size_t kwg) {
    pooled_kernel *k = *name && strlen(name) < sizeof k->name ? malloc(sizeof *k) : NULL;
    if (!k) {
        dev->cl.ReleaseKernel(kernel);
        return;
    }
    k->prg = prg, k->kernel = kernel, k->kwg = kwg;
    snprintf(k->name, sizeof k->name, "%s", name);
    pthread_mutex_lock(&dev->pool_lock);
    k->next = dev->pool;
    dev->pool = k;
    pthread_mutex_unlock(&dev->pool_lock);
}

static void release_runs(partition *p) {
    for (int i = 0; i < p->n_runs; i++) {
        if (p->runs[i].kernel) give_kernel(p->dev, p->runs[i].prg, p->runs[i].name, p->runs[i].kernel, p->runs[i].kwg);
        free(p->runs[i].bufs);
        free(p->runs[i].last);
    }
    free(p->runs);
    p->runs = NULL;
    p->n_runs = 0;
}

/* every kernel and buffer of the partition's device (its plan moves it to another, or it goes) */
static void release_device_memory(partition *p) {
    release_runs(p);
    release_bound(p);
    release_consts(p);
    int unmapped = 0; /* every invoke waited for its commands: only unmaps can be pending */
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        if (s->pinned && s->pinned_ptr)
            unmapped = p->dev->cl.EnqueueUnmapMemObject(p->dev->queue, s->pinned, s->pinned_ptr, 0, NULL, NULL)
                       == CL_SUCCESS || unmapped;
        release_mem(p->dev, &s->pinned);
        s->pinned_ptr = NULL;
        s->pinned_bytes = 0;
        release_mem(p->dev, &s->own);
        s->own_bytes = 0;
        s->bound = NULL;
    }
    if (unmapped) p->dev->cl.Finish(p->dev->queue);
    if (p->done) p->dev->cl.ReleaseEvent(p->done);
    p->done = NULL;
    p->folded_done = 0;
}

static void partition_free(partition *p) {
    if (!p) return;
    release_device_memory(p);
    free(p->consts);
    free(p->prof);
    free(p->prof_ev);
    free(p->slots);
    free(p->last_key);
    free(p->preset_key);
    free(p->nodes);
    free(p->ops);
    free(p->node_io);
    free(p->node_ins);
    free(p->node_outs);
    free(p->io);
    free(p);
}

/* ----------------------------------------------------------------- programs */
/* The program of LCL_PROGRAMS[k] on the delegate's device: the exported binary when the
 * runtime takes it and it holds the kernel (backend/kernels.py build_program: a binary of
 * another runtime or version fails, or names a kernel it lacks), else the source. Built
 * once per delegate. Returns NULL with the error said. */
/* ----------------------------------------------------------------- program cache */
/* Compiled programs kept between processes in the "cache_dir" option's folder (default
 * $XDG_CACHE_HOME/litecl/native or ~/.cache/litecl/native on Linux; none on Android unless
 * given, as the GPU delegate's serialization_dir): one file per program, named by a hash
 * of the platform, device, driver version, build options and source, holding a magic, the
 * length and a checksum of the binary. A binary the runtime refuses, or a damaged file,
 * is removed and the source built again, with one INFO line per process. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int cache_file(const delegate *d, const lcl_program *pg, char *path, size_t len) {
    if (!d->cache_dir[0]) return 0;
    const device_entry *e = d->dev;
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {e->platform_name, e->device_name, e->driver, LCL_ARCH_OPTION};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) h = fnv(h, parts[i], strlen(parts[i]) + 1);
    h = fnv(h, pg->source, pg->source_len);
    return snprintf(path, len, "%s/litecl-%016llx.bin", d->cache_dir, (unsigned long long)h) < (int)len;
}

static int said_refused; /* the INFO line about a refused binary: once per process */

static void refused(const delegate *d, const char *what, const char *path, int code) {
    if (path && path[0] == '/') unlink(path);
    if (d->quiet || __sync_lock_test_and_set(&said_refused, 1)) return;
    if (code == CL_SUCCESS) /* never given to the runtime: its header or checksum is wrong */
        fprintf(stderr, "INFO: litecl: %s %s does not hold what litecl wrote (header or checksum): building "
                "from source\n", what, path ? path : "");
    else
        fprintf(stderr, "INFO: litecl: %s %s refused by %s (OpenCL error %d): building from source\n", what,
                path ? path : "", d->dev->device_name, code);
}

/* The parameters of kernel ``pg->name`` in ``pg->source`` ("__kernel void NAME(a, b, ...)"),
 * or -1 where the text does not say. */
static int source_args(const lcl_program *pg) {
    char head[LCL_NAME_MAX + 32];
    snprintf(head, sizeof head, "__kernel void %s(", pg->name);
    const char *p = strstr(pg->source, head);
    if (!p) return -1;
    int n = 1, depth = 0, any = 0;
    for (p += strlen(head); *p && (depth || *p != ')'); p++) {
        depth += (*p == '(') - (*p == ')');
        n += !depth && *p == ',';
        any |= *p > ' ';
    }
    return *p ? (any ? n : 0) : -1;
}

static cl_program from_binary(delegate *d, const lcl_program *pg, const unsigned char *bin, size_t len,
                              cl_int *code) {
    cl_int err = 0, status = 0;
    cl_program prg = d->dev->cl.CreateProgramWithBinary(d->dev->context, 1, &d->dev->device_id, &len, &bin, &status,
                                                        &err);
    *code = err ? err : status;
    if (prg && (err != CL_SUCCESS || status != CL_SUCCESS ||
                (*code = d->dev->cl.BuildProgram(prg, 1, &d->dev->device_id, LCL_ARCH_OPTION, NULL, NULL)) != CL_SUCCESS)) {
        d->dev->cl.ReleaseProgram(prg);
        return NULL;
    }
    if (prg) { /* it holds the kernel, with the source's parameters (another program's binary would not:
                * one with a kernel of the same name and other parameters failed every Prepare at
                * clSetKernelArg, in every process, a fresh user's report) */
        cl_kernel probe = d->dev->cl.CreateKernel(prg, pg->name, code);
        cl_uint nargs = 0;
        int want = source_args(pg);
        if (probe && *code == CL_SUCCESS && want >= 0 &&
                d->dev->cl.GetKernelInfo(probe, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL) == CL_SUCCESS &&
                (int)nargs != want)
            *code = -42; /* CL_INVALID_BINARY: refused() says so */
        if (probe) d->dev->cl.ReleaseKernel(probe);
        if (!probe || *code != CL_SUCCESS) {
            d->dev->cl.ReleaseProgram(prg);
            return NULL;
        }
    }
    return prg;
}

static cl_program cached_program(delegate *d, const lcl_program *pg, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char head[24];
    cl_program prg = NULL;
    uint64_t n = 0, sum = 0;
    unsigned char *bin = NULL;
    if (fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, "LCLBIN1\n", 8)) {
        memcpy(&n, head + 8, 8), memcpy(&sum, head + 16, 8);
        bin = n && n < (1ull << 31) ? malloc((size_t)n) : NULL;
    }
    int ok = bin && fread(bin, 1, (size_t)n, f) == n && fnv(1469598103934665603ull, bin, (size_t)n) == sum;
    fclose(f);
    cl_int code = 0;
    if (ok) prg = from_binary(d, pg, bin, (size_t)n, &code);
    free(bin);
    if (!prg) refused(d, ok ? "the cached program" : "the damaged cache file", path, code);
    return prg;
}

static int make_dirs(const char *dir) {
    char p[LCL_NAME_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            if (mkdir(p, 0700) && errno != EEXIST) return -1;
            *c = '/';
        }
    return mkdir(p, 0700) && errno != EEXIST ? -1 : 0;
}

/* cache_dir cannot be written (read-only, not a folder, no permission): one WARNING line
 * per delegate, naming the folder, why, and what each process then does again (``redo``:
 * a program built from source, or the self-test), as litecl's Python cache warns once
 * (backend/cache.py); the delegate runs on. */
static void cache_unwritable(delegate *d, int err, const char *redo) {
    if (d->cache_warned) return;
    d->cache_warned = 1;
    struct stat st;
    /* a folder that exists but takes no new file says ENOENT (procfs: cache_dir=/proc, a
     * fresh user's report read "No such file or directory" of a folder that is there) */
    int there = err == ENOENT && !stat(d->cache_dir, &st) && S_ISDIR(st.st_mode);
    fprintf(stderr, "WARNING: litecl: cannot write to the cache folder %s (%s); each process %s again "
            "(name a writable folder with the cache_dir option, or cache_dir=none)\n",
            d->cache_dir, there ? "the folder takes no new file" : strerror(err), redo);
}

static void store_program(delegate *d, cl_program prg, const char *path) {
    size_t n = 0;
    if (d->dev->cl.GetProgramInfo(prg, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || !n) return;
    unsigned char *bin = malloc(n);
    if (!bin) return;
    unsigned char *bins[1] = {bin};
    char tmp[LCL_NAME_MAX + 128];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = NULL;
    if (d->dev->cl.GetProgramInfo(prg, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
        if (make_dirs(d->cache_dir) || !(f = fopen(tmp, "wb"))) {
            cache_unwritable(d, errno, "builds the programs the exported binaries do not cover from source");
        } else {
            uint64_t len = n, sum = fnv(1469598103934665603ull, bin, n);
            int ok = fwrite("LCLBIN1\n", 1, 8, f) == 8 && fwrite(&len, 8, 1, f) == 1 && fwrite(&sum, 8, 1, f) == 1 &&
                     fwrite(bin, 1, n, f) == n;
            ok = !fclose(f) && ok;
            if (!ok) cache_unwritable(d, errno ? errno : EIO,
                                      "builds the programs the exported binaries do not cover from source");
            if (!ok || rename(tmp, path)) unlink(tmp);
        }
    }
    free(bin);
}

/* ----------------------------------------------------------------- test-only fault */
#ifdef LITECL_TEST_WRONG_FAMILY
/* Built with -DLITECL_TEST_WRONG_FAMILY=K (tests only; never an option of a shipped
 * library): the programs of family LCL_FAMILIES[K] (its self-test's and its nodes' single
 * launches) compute it wrong, as backend/selftest.py faulty() makes a family's kernels:
 * each "TYPE f(...)\n{\n...    return EXPR;\n}" without inner braces whose TYPE is an
 * integer type returns (EXPR) ^ (TYPE)(1). Those programs are built from this text, never
 * from a binary or the cache. */
static int faulty_program(int k) {
    int w = LITECL_TEST_WRONG_FAMILY;
    if (w < 0 || w >= LCL_PLAN.n_families) return 0;
    if (LCL_FAMILIES[w].program == k) return 1;
    for (int s = 0; s < LCL_PLAN.n_subgraphs; s++)
        for (int i = 0; i < LCL_SUBGRAPHS[s].claimed.len; i++) {
            const lcl_launch *ln = &LCL_LAUNCHES[LCL_SUBGRAPHS[s].first_single + i];
            if (ln->family == w && ln->program == k) return 1;
        }
    return 0;
}

static size_t word_len(const char *p, const char *end) {
    size_t n = 0;
    while (p + n < end && (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') || ((p[n] | 32) >= 'a' && (p[n] | 32) <= 'z')))
        n++;
    return n;
}

static char *faulty_source(const char *src, size_t len, size_t *out_len) {
    char *out = malloc(2 * len + 64), *o = out;
    const char *p = src, *end = src + len;
    if (!out) return NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        /* "TYPE NAME(ARGS)\n{\n" */
        size_t t = word_len(p, eol), f = t && p + t < eol && p[t] == ' ' ? word_len(p + t + 1, eol) : 0;
        const char *args = p + t + 1 + f, *expr = NULL, *semi = NULL;
        int header = f && args < eol && *args == '(' && eol[-1] == ')' &&
                     !memchr(args + 1, ')', (size_t)(eol - args - 2)) && end - eol >= 3 && !memcmp(eol, "\n{\n", 3);
        int integer = !(t >= 5 && !memcmp(p, "float", 5)) && !(t >= 4 && !memcmp(p, "half", 4)) &&
                      !(t >= 6 && !memcmp(p, "double", 6));
        /* then a body without braces up to "    return EXPR;\n}" (EXPR without ';') */
        for (const char *r = header ? eol + 3 : NULL; r && !semi;) {
            const char *ret = memmem(r, (size_t)(end - r), "    return ", 11);
            if (!ret || memchr(eol + 3, '{', (size_t)(ret - eol - 3)) || memchr(eol + 3, '}', (size_t)(ret - eol - 3)))
                break;
            const char *sc = memchr(ret + 11, ';', (size_t)(end - ret - 11));
            if (sc && sc > ret + 11 && end - sc >= 3 && !memcmp(sc, ";\n}", 3)) expr = ret + 11, semi = sc;
            r = ret + 1;
        }
        if (semi && integer) {
            memcpy(o, p, (size_t)(expr - p)), o += expr - p;
            o += sprintf(o, "(");
            memcpy(o, expr, (size_t)(semi - expr)), o += semi - expr;
            o += sprintf(o, ") ^ (%.*s)(1)", (int)t, p);
            p = semi; /* ";\n}" onwards as it is */
            continue;
        }
        size_t n = (size_t)(eol - p) + (nl ? 1 : 0);
        memcpy(o, p, n), o += n;
        p += n;
    }
    *out_len = (size_t)(o - out);
    return out;
}
#endif

/* ----------------------------------------------------------------- programs */
static int built_from_source; /* programs this process built from source (tests read it) */

/* For tests: how many programs this process has built from source (a second start with
 * the cache, or on the exporting device with its binaries, builds none). */
LCL_EXPORT int litecl_native_programs_built(void) { return built_from_source; }

static cl_program program(delegate *d, TfLiteContext *ctx, int k) {
    if (d->dev->programs[k]) return d->dev->programs[k];
    const lcl_program *pg = &LCL_PROGRAMS[k];
    cl_int err = 0;
    cl_program prg = NULL;
    char path[LCL_NAME_MAX + 64];
    int cached = cache_file(d, pg, path, sizeof path);
#ifdef LITECL_TEST_WRONG_FAMILY
    char *wrong = NULL;
    size_t wrong_len = 0;
    if (faulty_program(k)) {
        cached = 0;
        if (!(wrong = faulty_source(pg->source, pg->source_len, &wrong_len))) return NULL;
    }
#define LCL_NO_BINARY wrong
#else
#define LCL_NO_BINARY 0
#endif
    if (cached) prg = cached_program(d, pg, path);
    if (!prg && !LCL_NO_BINARY && pg->binary && d->use_binaries && !strcmp(LCL_PLAN.binary_arch, LCL_ARCH) &&
        !strcmp(d->dev->device_name, LCL_PLAN.device)) { /* the exporting device's binary, on that device */
        prg = from_binary(d, pg, pg->binary, pg->binary_len, &err);
        if (!prg) refused(d, "the exported binary of", pg->name, err);
    }
    if (!prg) { /* from source */
        const char *src = pg->source;
        size_t len = pg->source_len;
#ifdef LITECL_TEST_WRONG_FAMILY
        if (wrong) src = wrong, len = wrong_len;
#endif
        prg = d->dev->cl.CreateProgramWithSource(d->dev->context, 1, &src, &len, &err);
#ifdef LITECL_TEST_WRONG_FAMILY
        free(wrong);
#endif
        if (!prg || err != CL_SUCCESS) {
            say(d, ctx, "litecl: cannot create program %s (OpenCL error %d)", pg->name, (int)err);
            return NULL;
        }
        if (d->dev->cl.BuildProgram(prg, 1, &d->dev->device_id, LCL_ARCH_OPTION, NULL, NULL) != CL_SUCCESS) {
            char log[4096] = "";
            d->dev->cl.GetProgramBuildInfo(prg, d->dev->device_id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
            const char *line = strstr(log, "error");
            if (!line) line = log;
            /* its first line, at most 199 bytes: a bounded %.*s, which gcc's
             * -Wformat-truncation accepts at every -O level (a 200-byte copy of the
             * 4096-byte log with "%s" warns at -O0, -O1, -Os, -Og) */
            int n = (int)strcspn(line, "\n");
            say(d, ctx, "litecl: kernel %s failed to build: %.*s", pg->name, n < 199 ? n : 199, line);
            d->dev->cl.ReleaseProgram(prg);
            return NULL;
        }
        __sync_fetch_and_add(&built_from_source, 1);
        if (cached) store_program(d, prg, path);
    }
    d->dev->programs[k] = prg;
    return prg;
}

/* ----------------------------------------------------------------- self-test */
/* litecl's self-test (backend/selftest.py) in the native delegate: a kernel family's
 * canonical kernel (LCL_FAMILIES, written by export from the Python self-test) run once
 * on its edge values (NaN of both signs, infinities, -0.0, subnormals, values beyond
 * the narrower types' ranges) and compared with LiteRT's bits for the architecture this
 * library is built for. A family the device computes wrong is refused: delegate_prepare
 * leaves its nodes to LiteRT with the reason, and open_device passes over a device that
 * fails one when another can run them. The verdict is kept per device for the process,
 * and in cache_dir per driver (self_test_file). */
static int is_nan(const unsigned char *p, int kind, int *neg) {
    uint64_t v = 0;
    memcpy(&v, p, kind == 3 ? 2 : (size_t)kind); /* little-endian hosts: x86-64, aarch64 */
    switch (kind) {
    case 2: *neg = (int)(v >> 15 & 1); return (v & 0x7C00) == 0x7C00 && (v & 0x3FF);
    case 3: *neg = (int)(v >> 15 & 1); return (v & 0x7F80) == 0x7F80 && (v & 0x7F);
    case 4: *neg = (int)(v >> 31 & 1); return (v & 0x7F800000u) == 0x7F800000u && (v & 0x7FFFFFu);
    default: *neg = (int)(v >> 63); return (v & 0x7FF0000000000000ull) == 0x7FF0000000000000ull &&
                                          (v & 0xFFFFFFFFFFFFFull);
    }
}

/* Elements of ``got`` that differ from ``want`` (backend/compare.py mismatches: the bits,
 * except that NaNs of one sign are equal). */
static int mismatches(const lcl_family *f, const unsigned char *got, const unsigned char *want) {
    int bad = 0, n = f->n > 0 ? f->n : 1;
    size_t item = (size_t)f->out_bytes / (size_t)n, lane = f->out_float == 3 ? 2 : f->out_float ? (size_t)f->out_float
                                                                                                 : item;
    for (int i = 0; i < f->n; i++) {
        int differ = 0;
        for (size_t off = 0; off + lane <= item && lane; off += lane) {
            const unsigned char *a = got + (size_t)i * item + off, *b = want + (size_t)i * item + off;
            if (!memcmp(a, b, lane)) continue;
            int na = 0, nb = 0;
            differ |= !(f->out_float && is_nan(a, f->out_float, &na) && is_nan(b, f->out_float, &nb) && na == nb);
        }
        bad += differ;
    }
    return bad;
}

/* Runs family ``k`` on the delegate's device: 0 with the elements that differ in ``bad``,
 * or -1 with why it could not run in ``why``. */
static int run_family(delegate *d, int k, int *bad, char *why, size_t len) {
    const lcl_family *f = &LCL_FAMILIES[k];
    device_entry *e = d->dev;
    cl_mem bufs[3] = {NULL, NULL, NULL};
    cl_kernel kern = NULL;
    cl_event ev[2] = {NULL, NULL};
    unsigned char *got = malloc((size_t)(f->out_bytes > 0 ? f->out_bytes : 1));
    cl_int err = 0;
    int rc = -1, nb = f->n_inputs;
    lcl_tiling t;
    d->hush = 1;
    cl_program prg = got ? program(d, NULL, f->program) : NULL;
    d->hush = 0;
    if (!prg) {
        snprintf(why, len, "%s", got ? d->error : "out of memory");
        goto out;
    }
    if (tiling((uint64_t)f->n, f->tile_bytes, e->compute_units, e->max_wg, e->local_size, e->groups_per_cu,
               e->vec_bytes, e->group_bytes, &t)) {
        snprintf(why, len, "no tiling for %d elements of %d bytes", (int)f->n, (int)f->tile_bytes);
        goto out;
    }
    kern = e->cl.CreateKernel(prg, LCL_PROGRAMS[f->program].name, &err);
    if (!kern || err) goto cl_failed;
    size_t kwg = 0;
    if (e->cl.GetKernelWorkGroupInfo(kern, e->device_id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) ==
            CL_SUCCESS && kwg && kwg < t.lsize)
        t.gsize = t.gsize / t.lsize * kwg, t.lsize = kwg; /* as kernel_init */
    for (int a = 0; a <= nb; a++) {
        size_t n = a < nb ? (size_t)f->input_bytes[a] : (size_t)f->out_bytes;
        bufs[a] = e->cl.CreateBuffer(e->context, a < nb ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE,
                                     n ? n : 1, a < nb && n ? (void *)f->inputs[a] : NULL, &err);
        if (!bufs[a] || err) goto cl_failed;
        if ((err = e->cl.SetKernelArg(kern, (cl_uint)a, sizeof(cl_mem), &bufs[a]))) goto cl_failed;
    }
    cl_uint targs[4] = {(cl_uint)t.n, (cl_uint)t.former_num, (cl_uint)t.former_len, (cl_uint)t.tail_len};
    for (int a = 0; a < 4 + f->args.len; a++) {
        cl_int v = a < 4 ? 0 : (cl_int)LCL_INTS[f->args.off + a - 4];
        if ((err = e->cl.SetKernelArg(kern, (cl_uint)(nb + 1 + a), a < 4 ? sizeof(cl_uint) : sizeof(cl_int),
                                      a < 4 ? (const void *)&targs[a] : (const void *)&v)))
            goto cl_failed;
    }
    size_t g = (size_t)t.gsize, l = (size_t)t.lsize;
    if ((err = e->cl.EnqueueNDRangeKernel(e->queue, kern, 1, NULL, &g, &l, 0, NULL, &ev[0])) ||
        (err = e->cl.EnqueueReadBuffer(e->queue, bufs[nb], CL_FALSE, 0, (size_t)f->out_bytes, got, 0, NULL, &ev[1])))
        goto cl_failed;
    /* the events waited for, not clFinish alone: rusticl's returns early (wait_done) */
    if ((err = e->cl.WaitForEvents(2, ev)) || (err = e->cl.Finish(e->queue))) goto cl_failed;
    *bad = mismatches(f, got, f->expected[strcmp(LCL_ARCH, "aarch64") ? 0 : 1]);
    rc = 0;
    goto out;
cl_failed:
    snprintf(why, len, "OpenCL error %d", (int)err);
out:
    for (int i = 0; i < 2; i++)
        if (ev[i]) e->cl.ReleaseEvent(ev[i]);
    for (int a = 0; a < 3; a++)
        if (bufs[a]) e->cl.ReleaseMemObject(bufs[a]);
    if (kern) e->cl.ReleaseKernel(kern);
    free(got);
    return rc;
}

/* The file in cache_dir holding family ``k``'s verdict on this device and driver: named
 * by a hash of the platform, device, driver version, architecture, the family's program,
 * inputs and LiteRT's bits. 0 when there is no cache_dir. */
static int self_test_file(const delegate *d, int k, char *path, size_t len) {
    if (!d->cache_dir[0]) return 0;
#ifdef LITECL_TEST_WRONG_FAMILY
    return 0; /* its programs are not the exported ones */
#endif
    const device_entry *e = d->dev;
    const lcl_family *f = &LCL_FAMILIES[k];
    const lcl_program *pg = &LCL_PROGRAMS[f->program];
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {e->platform_name, e->device_name, e->driver, LCL_ARCH_OPTION, f->name};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) h = fnv(h, parts[i], strlen(parts[i]) + 1);
    h = fnv(h, pg->source, pg->source_len);
    for (int a = 0; a < f->n_inputs; a++) h = fnv(h, f->inputs[a], (size_t)f->input_bytes[a]);
    h = fnv(h, f->expected[strcmp(LCL_ARCH, "aarch64") ? 0 : 1], (size_t)f->out_bytes);
    h = fnv(h, LCL_INTS + f->args.off, (size_t)f->args.len * sizeof(int32_t));
    return snprintf(path, len, "%s/litecl-selftest-%016llx.txt", d->cache_dir, (unsigned long long)h) < (int)len;
}

/* Family ``k``'s verdict on the delegate's device: "" when it gives LiteRT's bits, else
 * why not (one line). Run once per device and process, and read from cache_dir after. */
static const char *self_test(delegate *d, int k) {
    device_entry *e = d->dev;
    if (k < 0 || k >= LCL_PLAN.n_families) return "";
    if (!e->family_why && !(e->family_why = calloc((size_t)LCL_PLAN.n_families, sizeof *e->family_why)))
        return "";
    if (e->family_why[k]) return e->family_why[k];
    const lcl_family *f = &LCL_FAMILIES[k];
    char path[LCL_NAME_MAX + 64], line[2 * LCL_NAME_MAX + 1200] = "";
    int stored = self_test_file(d, k, path, sizeof path);
    FILE *fp = stored ? fopen(path, "r") : NULL;
    if (fp) {
        if (!fgets(line, sizeof line, fp) || strncmp(line, "litecl-selftest 1 ", 18)) line[0] = 0;
        fclose(fp);
        line[strcspn(line, "\n")] = 0;
        if (line[0]) memmove(line, line + 18, strlen(line + 18) + 1);
        else stored = 2; /* damaged: run it again */
    }
    if (!fp || stored == 2) {
        int bad = 0;
        char why[520] = "";
        if (run_family(d, k, &bad, why, sizeof why))
            snprintf(line, sizeof line, "its self-test kernel for %s could not run on %s: %s", f->name,
                     e->device_name, why);
        else if (bad)
            snprintf(line, sizeof line, "%s computes %s wrong: %d of %d edge values differ from LiteRT's "
                     "(litecl's self-test)", e->device_name, f->name, bad, (int)f->n);
        else
            snprintf(line, sizeof line, "ok");
        char tmp[LCL_NAME_MAX + 128];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
        if (stored && (make_dirs(d->cache_dir) || !(fp = fopen(tmp, "w")))) {
            cache_unwritable(d, errno, "runs litecl's self-test of its kernel families");
        } else if (stored) {
            int ok = fprintf(fp, "litecl-selftest 1 %s\n", line) > 0;
            if (fclose(fp) || !ok || rename(tmp, path)) unlink(tmp);
        }
    }
    e->family_why[k] = strdup(strcmp(line, "ok") ? line : "");
    return e->family_why[k] ? e->family_why[k] : "";
}

/* The first family of LCL_FAMILIES that the delegate's device computes wrong, or -1. */
static int first_wrong_family(delegate *d) {
    for (int k = 0; k < LCL_PLAN.n_families; k++)
        if (self_test(d, k)[0]) return k;
    return -1;
}

/* ----------------------------------------------------------------- kernel: init */
static const lcl_subgraph *subgraph_for_context(delegate *d, TfLiteContext *ctx);

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int add_slot(partition *p, int tensor) {
    int i = slot_of(p, tensor);
    if (i >= 0) return i;
    slot *s = &p->slots[p->n_slots];
    memset(s, 0, sizeof *s);
    s->tensor = tensor;
    return p->n_slots++;
}

/* A partition of ``n`` nodes run in the order ``order``, whose tensors ``outputs`` LiteRT
 * reads after it: its slots (every tensor a node reads or writes; inputs are those read
 * before a node of the partition writes them). NULL after saying why. */
static partition *partition_make(delegate *d, device_entry *dev, TfLiteContext *ctx, const int *order, int n,
                                 const TfLiteIntArray *outputs) {
    partition *p = calloc(1, sizeof *p);
    if (!p) {
        say(d, ctx, "litecl: out of memory");
        return NULL;
    }
    p->d = d;
    p->dev = dev;
    p->n_nodes = n;
    p->nodes = malloc((size_t)(n ? n : 1) * sizeof(int));
    p->ops = calloc((size_t)(n ? n : 1), sizeof(int));
    p->node_io = calloc((size_t)(n ? n : 1), sizeof *p->node_io);
    p->node_ins = calloc((size_t)(n ? n : 1), sizeof(int));
    p->node_outs = calloc((size_t)(n ? n : 1), sizeof(int));
    int total = 0;
    if (!p->nodes || !p->ops || !p->node_io || !p->node_ins || !p->node_outs) goto oom;
    memcpy(p->nodes, order, (size_t)n * sizeof(int));
    TfLiteNode **nodes = calloc((size_t)(n ? n : 1), sizeof *nodes);
    if (!nodes) goto oom;
    for (int j = 0; j < n; j++) {
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, p->nodes[j], &nodes[j], &reg) != kTfLiteOk) {
            free(nodes);
            say(d, ctx, "litecl: LiteRT's GetNodeAndRegistration failed for node %d", p->nodes[j]);
            partition_free(p);
            return NULL;
        }
        p->ops[j] = reg->builtin_code;
        total += nodes[j]->inputs->size + nodes[j]->outputs->size;
    }
    p->io = malloc((size_t)(total ? total : 1) * sizeof(int));
    p->slots = calloc((size_t)(total ? total : 1), sizeof(slot));
    if (!p->io || !p->slots) { free(nodes); goto oom; }
    int k = 0;
    for (int j = 0; j < n; j++) {
        p->node_io[j][0] = k;
        p->node_ins[j] = nodes[j]->inputs->size;
        p->node_outs[j] = nodes[j]->outputs->size;
        for (int q = 0; q < nodes[j]->inputs->size; q++) {
            int t = nodes[j]->inputs->data[q];
            int before = slot_of(p, t) >= 0;
            int s = t >= 0 ? add_slot(p, t) : -1;
            if (s >= 0 && !before) p->slots[s].is_in = 1;
            p->io[k++] = s;
        }
        for (int q = 0; q < nodes[j]->outputs->size; q++) {
            int t = nodes[j]->outputs->data[q];
            p->io[k++] = t >= 0 ? add_slot(p, t) : -1;
        }
    }
    free(nodes);
    for (int q = 0; q < outputs->size; q++) {
        int s = slot_of(p, outputs->data[q]);
        if (s >= 0) p->slots[s].is_out = 1;
    }
    for (int s = 0; s < p->n_slots; s++) {
        const TfLiteTensor *ts = &ctx->tensors[p->slots[s].tensor];
        p->slots[s].type = ts->type;
        p->slots[s].pbits = packed_bits(ts->type, &p->slots[s].psigned);
        p->slots[s].itemsize = type_size(ts->type);
    }
    return p;
oom:
    say(d, ctx, "litecl: out of memory");
    partition_free(p);
    return NULL;
}

static void *kernel_init(TfLiteContext *ctx, const char *buffer, size_t length) {
    (void)length;
    const TfLiteDelegateParams *params = (const TfLiteDelegateParams *)buffer;
    delegate *d = (delegate *)params->delegate;
    const lcl_subgraph *sg = subgraph_for_context(d, ctx);
    if (!sg) {
        say(d, ctx, "litecl: partition kernel: no exported subgraph for this context");
        return NULL;
    }
    int n = params->nodes_to_replace->size;
    int *order = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!order) {
        say(d, ctx, "litecl: out of memory");
        return NULL;
    }
    memcpy(order, params->nodes_to_replace->data, (size_t)n * sizeof(int));
    /* execution order: the plan of a graph no delegate changed before litecl's (the
     * fingerprint checked it) runs nodes in index order */
    qsort(order, (size_t)n, sizeof(int), cmp_int);
    partition *p = partition_make(d, d->dev, ctx, order, n, params->output_tensors);
    free(order);
    if (!p) return NULL;
    p->sg = sg;
    p->in_place = d->in_place;
    p->align = d->align;
    p->src.ints = LCL_INTS;
    d->partitions_made++;
    /* the exported partition with exactly these nodes whose launches write every tensor
     * LiteRT reads after it; else one unfused launch per node */
    for (int i = 0; i < sg->n_partitions && !p->part; i++) {
        const lcl_partition *cand = &LCL_PARTITIONS[sg->first_partition + i];
        if (cand->nodes.len != n || memcmp(LCL_INTS + cand->nodes.off, p->nodes, (size_t)n * sizeof(int)))
            continue;
        int ok = 1;
        for (int s = 0; s < p->n_slots && ok; s++) {
            if (!p->slots[s].is_out) continue;
            int written = 0;
            for (int l = 0; l < cand->n_launches && !written; l++) {
                const lcl_launch *ln = &LCL_LAUNCHES[cand->first_launch + l];
                for (int o = 0; o < ln->outputs.len; o++)
                    written |= LCL_INTS[ln->outputs.off + o] == p->slots[s].tensor;
            }
            ok = written;
        }
        if (ok) p->part = cand;
    }
    p->single = p->part == NULL;
    return p;
}

/* Whether every launch of the exported partition ``p->part`` holds at the slots' current
 * shapes (kernel_prepare's check below: exported shapes where they are compiled in, else
 * generic_operand_holds), its outputs of one shape. */
static int part_fits(partition *p) {
    for (int l = 0; l < p->part->n_launches; l++) {
        const lcl_launch *ln = &LCL_LAUNCHES[p->part->first_launch + l];
        int o = slot_of(p, LCL_INTS[ln->outputs.off]);
        if (o < 0) return 0;
        const int32_t *sh = LCL_INTS + ln->shapes.off;
        for (int a = 0; a < ln->inputs.len + ln->outputs.len; a++) {
            int s = slot_of(p, a < ln->inputs.len ? LCL_INTS[ln->inputs.off + a]
                                                  : LCL_INTS[ln->outputs.off + a - ln->inputs.len]);
            if (s < 0) return 0;
            const slot *in = &p->slots[s];
            if (a >= ln->inputs.len) {
                if (!same_shape(in, &p->slots[o])) return 0;
                continue;
            }
            int rank = *sh++;
            int exported = rank == in->rank && !memcmp(sh, in->dims, (size_t)rank * sizeof(int));
            sh += rank;
            if (ln->shape_fixed ? !exported : !generic_operand_holds(LCL_INTS, ln, a, in, &p->slots[o])) return 0;
        }
    }
    return 1;
}

static void kernel_free(TfLiteContext *ctx, void *buffer) {
    (void)ctx;
    partition_free(buffer);
}

/* In process (lcl_inprocess_device): the OpenCL devices partitions run on, by index. */
static pthread_mutex_t INPROCESS_LOCK = PTHREAD_MUTEX_INITIALIZER;
#define LCL_MAX_INPROCESS 64
static device_entry *INPROCESS[LCL_MAX_INPROCESS]; /* by lcl_inprocess_device's index */
static int N_INPROCESS;

static device_entry *inprocess_device(int i) {
    pthread_mutex_lock(&INPROCESS_LOCK);
    device_entry *e = i >= 0 && i < N_INPROCESS ? INPROCESS[i] : NULL;
    pthread_mutex_unlock(&INPROCESS_LOCK);
    return e;
}

/* ----------------------------------------------------------------- kernel: prepare */
static const lcl_launch *single_launch(const partition *p, int node) {
    const lcl_subgraph *sg = p->sg;
    for (int i = 0; i < sg->claimed.len; i++)
        if (LCL_INTS[sg->claimed.off + i] == node) return &LCL_LAUNCHES[sg->first_single + i];
    return NULL;
}

static int set_shape(slot *s, const TfLiteIntArray *dims) {
    if (!dims || dims->size > LCL_MAX_RANK) return -1;
    s->rank = dims->size;
    memcpy(s->dims, dims->data, (size_t)dims->size * sizeof(int));
    return 0;
}

/* numpy broadcasting (ops/broadcast.py broadcast_shape) */
static int broadcast(const slot *a, const slot *b, slot *out) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int x = i < r - a->rank ? 1 : a->dims[i - (r - a->rank)];
        int y = i < r - b->rank ? 1 : b->dims[i - (r - b->rank)];
        if (x != y && x != 1 && y != 1) return -1;
        out->dims[i] = x == 1 ? y : x;
    }
    out->rank = r;
    return 0;
}

static TfLiteStatus guarded(TfLiteContext *ctx, TfLiteNode *node, int invoke);
static TfLiteStatus kernel_prepare(TfLiteContext *ctx, TfLiteNode *node) { return guarded(ctx, node, 0); }

static TfLiteStatus kernel_prepare_inner(TfLiteContext *ctx, TfLiteNode *node) {
    partition *p = node->user_data;
    if (!p) {
        if (ctx->ReportError) ctx->ReportError(ctx, "%s", "litecl: partition kernel missing (its init failed)");
        return kTfLiteError;
    }
    delegate *d = p->d;
    if (p->dev->fork_message[0] && p->dev->pid != getpid()) { /* as kernel_invoke */
        say(d, ctx, "%s", p->dev->fork_message);
        return kTfLiteError;
    }
    TfLiteStatus status = kTfLiteError;
    const int inproc = d->planner != NULL;
    /* in process, Prepare does not hold the device's lock: the planner takes Python's GIL,
     * which a thread waiting for the lock may hold */
    if (!inproc) pthread_mutex_lock(d->lockp);
    int recompute = 0;
    /* shapes: partition inputs from LiteRT, node outputs inferred in order */
    for (int s = 0; s < p->n_slots; s++) {
        slot *sl = &p->slots[s];
        if (!sl->is_in) continue;
        const TfLiteTensor *ts = &ctx->tensors[sl->tensor];
        int was_const = sl->constant;
        sl->constant = ts->allocation_type == kTfLiteMmapRo || ts->allocation_type == kTfLitePersistentRo;
        /* a PERSISTENT_RO value is computed at Prepare (SHAPE's output): upload it again
         * and recompute what depends on it */
        if (ts->allocation_type == kTfLitePersistentRo || was_const != sl->constant) recompute = 1;
        if (set_shape(sl, ts->dims)) {
            say(d, ctx, "litecl: tensor %d has rank above %d or no shape", sl->tensor, LCL_MAX_RANK);
            goto out;
        }
    }
    {
        /* the same input shapes and constness as the last prepare: the same launches
         * (delegate.py _Planner.plan_for's key); LiteRT prepares again at every
         * invoke of a graph with dynamic tensors */
        int key[4096], nk = 0, fits = 1;
        for (int s = 0; s < p->n_slots && fits; s++) {
            const slot *sl = &p->slots[s];
            if (!sl->is_in) continue;
            if (nk + 2 + sl->rank > (int)(sizeof key / sizeof key[0])) { fits = 0; break; }
            key[nk++] = sl->constant;
            key[nk++] = sl->rank;
            for (int i = 0; i < sl->rank; i++) key[nk++] = sl->dims[i];
        }
        if (fits && p->prepared && !recompute && p->last_key && nk == p->n_last_key &&
                !memcmp(key, p->last_key, (size_t)nk * sizeof(int))) {
            status = kTfLiteOk;
            goto out;
        }
        free(p->last_key);
        p->last_key = fits ? malloc((size_t)(nk ? nk : 1) * sizeof(int)) : NULL;
        if (p->last_key) memcpy(p->last_key, key, (size_t)nk * sizeof(int));
        p->n_last_key = p->last_key ? nk : 0;
    }
    if (inproc) { /* the in-process planner's launches for these shapes */
        lcl_inprocess_plan pl;
        memset(&pl, 0, sizeof pl);
        /* -1 until the planner writes its answer: a KeyboardInterrupt raised at the Python
         * callback's first line leaves ctypes returning garbage and ``pl`` as it was, which
         * ran as an empty plan (every output left unwritten, no error: a fresh user's Ctrl-C) */
        pl.n_launches = -1;
        if (p->preset_key && p->last_key && p->n_last_key == p->n_preset_key &&
                !memcmp(p->last_key, p->preset_key, (size_t)p->n_last_key * sizeof(int))) {
            pl = p->preset; /* the planner's answer for these nodes at this key, given at init */
            p->on_preset = 1;
        } else if (d->planner(p->key, ctx, p->last_key, p->last_key ? p->n_last_key : -1, &pl) != 0) {
            goto out; /* it reported why */
        } else {
            p->on_preset = 0;
        }
        free(p->preset_key); /* once: later plans may drop what it points into */
        p->preset_key = NULL;
        device_entry *dev = inprocess_device(pl.device);
        if (!dev || pl.n_launches < 0 || (pl.n_launches && (!pl.launches || !pl.ints || !pl.programs || !pl.names))) {
            say(d, ctx, "litecl: the planner gave no usable plan for node %d's partition", p->nodes[0]);
            goto out;
        }
        if (dev != p->dev) { /* its buffers and kernels belong to the other device's context */
            release_device_memory(p);
            p->dev = dev;
        }
        p->in_place = pl.in_place;
        p->align = pl.align > 0 ? pl.align : 64;
        p->src = (launch_source){pl.ints, pl.launches, pl.n_launches, pl.programs, pl.names};
    }
    for (int j = 0; j < p->n_nodes; j++) {
        int *io = p->io + p->node_io[j][0];
        int nin = p->node_ins[j];
        if (p->node_outs[j] < 1 || io[nin] < 0 || nin < 1 || io[0] < 0) goto bad_node;
        slot *out = &p->slots[io[nin]];
        if (p->ops[j] == kTfLiteBuiltinCast) { /* CAST keeps its input's shape */
            out->rank = p->slots[io[0]].rank;
            memcpy(out->dims, p->slots[io[0]].dims, sizeof out->dims);
        } else if (p->ops[j] == kTfLiteBuiltinAdd && nin == 2 && io[1] >= 0) {
            if (broadcast(&p->slots[io[0]], &p->slots[io[1]], out)) {
                char a[128], b[128];
                shape_text(&p->slots[io[0]], a, sizeof a);
                shape_text(&p->slots[io[1]], b, sizeof b);
                say(d, ctx, "litecl: node %d (ADD): shapes %s and %s do not broadcast", p->nodes[j], a, b);
                goto out;
            }
        } else {
            goto bad_node;
        }
    }
    /* the exported partition's launches where they fit these shapes, else one per node (a
     * fused kernel of two CASTs walks one element count: x [1] beside y [4] failed the
     * prepare, and LiteRT then dropped the delegate for good; a fresh user's report) */
    if (!inproc) p->single = p->part == NULL || !part_fits(p);
    /* the launches and their geometry at these shapes */
    release_runs(p);
    p->n_runs = inproc ? p->src.n_launches : p->single ? p->n_nodes : p->part->n_launches;
    p->runs = calloc((size_t)p->n_runs, sizeof(run));
    if (!p->runs) { say(d, ctx, "litecl: out of memory"); p->n_runs = 0; goto out; }
    for (int s = 0; s < p->n_slots; s++) p->slots[s].folded = p->slots[s].is_in && p->slots[s].constant;
    for (int r = 0; r < p->n_runs; r++) {
        run *rn = &p->runs[r];
        rn->ln = inproc ? &p->src.launches[r] : p->single ? single_launch(p, p->nodes[r])
                                                           : &LCL_LAUNCHES[p->part->first_launch + r];
        if (!rn->ln) { say(d, ctx, "litecl: node %d has no exported kernel", p->nodes[r]); goto out; }
        const lcl_launch *ln = rn->ln;
        rn->n_bufs = ln->inputs.len + ln->outputs.len;
        rn->bufs = malloc((size_t)rn->n_bufs * sizeof(int));
        rn->last = calloc((size_t)rn->n_bufs, sizeof(cl_mem));
        if (!rn->bufs || !rn->last) { say(d, ctx, "litecl: out of memory"); goto out; }
        for (int a = 0; a < rn->n_bufs; a++) {
            int t = a < ln->inputs.len ? p->src.ints[ln->inputs.off + a]
                                       : p->src.ints[ln->outputs.off + a - ln->inputs.len];
            rn->bufs[a] = slot_of(p, t);
            if (rn->bufs[a] < 0) { say(d, ctx, "litecl: launch tensor %d is not in its partition", t); goto out; }
        }
        const slot *o = &p->slots[rn->bufs[ln->inputs.len]];
        int node0 = p->src.ints[ln->nodes.off];
        /* per input: the shape it was exported at; a shape-fixed kernel (broadcast strides
         * compiled in) runs at exactly those, an elementwise one with every operand at the
         * output's shape or one element as exported (a splatted scalar) */
        const int32_t *sh = p->src.ints + ln->shapes.off;
        for (int a = 0; a < rn->n_bufs && !inproc; a++) { /* the planner planned these shapes */
            const slot *in = &p->slots[rn->bufs[a]];
            int ok = same_shape(in, o);
            if (a < ln->inputs.len) {
                int rank = *sh++;
                int exported = rank == in->rank && !memcmp(sh, in->dims, (size_t)rank * sizeof(int));
                ok = ln->shape_fixed ? exported : generic_operand_holds(p->src.ints, ln, a, in, o);
                sh += rank;
            }
            if (!ok) {
                char now[160], what[256] = "";
                shape_text(in, now, sizeof now);
                if (ln->shape_fixed && ln->fixed_elements > 0)
                    snprintf(what, sizeof what, "; its source depends on the exported shapes, not only their %d "
                             "elements: export the model again at these shapes (litecl export --inputs FILE.npz)",
                             (int)ln->fixed_elements);
                else if (ln->shape_fixed)
                    snprintf(what, sizeof what, "; %s compiled in: export the model again at these shapes "
                             "(litecl export --inputs FILE.npz)",
                             ln->fixed_elements ? "the exported shapes are" : "its broadcast is");
                say(d, ctx, "litecl: node %d's kernel was exported for other shapes (tensor %d is %s now)%s",
                    node0, in->tensor, now, what);
                goto out;
            }
        }
        if (tiling(numel(o), ln->tile_bytes, p->dev->compute_units, p->dev->max_wg, p->dev->local_size,
                   p->dev->groups_per_cu, p->dev->vec_bytes, p->dev->group_bytes, &rn->t)) {
            say(d, ctx, "litecl: node %d: %zu elements: tiled kernels index with uint, at most %llu",
                node0, numel(o), LCL_MAX_ELEMENTS);
            goto out;
        }
        /* folded: every input a constant or a folded result (kernels.py _plan_partition) */
        rn->folded = 1;
        for (int a = 0; a < ln->inputs.len; a++) rn->folded &= p->slots[rn->bufs[a]].folded;
        if (rn->folded)
            for (int a = ln->inputs.len; a < rn->n_bufs; a++) p->slots[rn->bufs[a]].folded = 1;
        rn->program = ln->program;
        const char *kname = inproc ? p->src.names[ln->program] : LCL_PROGRAMS[ln->program].name;
        cl_program prg = inproc ? (cl_program)p->src.programs[ln->program] : program(d, ctx, ln->program);
        if (!prg) goto out;
        cl_int err = 0;
        rn->kernel = take_kernel(p->dev, prg, kname, &rn->kwg, &err);
        rn->prg = prg;
        /* a name too long to keep is not pooled (give_kernel releases the kernel) */
        snprintf(rn->name, sizeof rn->name, "%s", strlen(kname) < sizeof rn->name ? kname : "");
        if (!rn->kernel || err != CL_SUCCESS) {
            say(d, ctx, "litecl: clCreateKernel(%s) failed (OpenCL error %d)", kname, (int)err);
            goto out;
        }
        if (!rn->kwg && p->dev->cl.GetKernelWorkGroupInfo(rn->kernel, p->dev->device_id, CL_KERNEL_WORK_GROUP_SIZE,
                                                           sizeof rn->kwg, &rn->kwg, NULL) != CL_SUCCESS)
            rn->kwg = 0;
        size_t kwg = rn->kwg;
        if (kwg && kwg < rn->t.lsize) {
            /* the kernels stride by their local size: fewer work-items, same groups */
            rn->t.gsize = rn->t.gsize / rn->t.lsize * kwg;
            rn->t.lsize = kwg;
        }
        cl_uint args[4] = {(cl_uint)rn->t.n, (cl_uint)rn->t.former_num, (cl_uint)rn->t.former_len,
                           (cl_uint)rn->t.tail_len};
        for (int a = 0; a < 4 + ln->args.len; a++) {
            /* the tiling's four uints, then the ops' int32 arguments (a quantized ADD's
             * constants: backend/kernels.py Launch.args) */
            cl_int v = a < 4 ? 0 : (cl_int)p->src.ints[ln->args.off + a - 4];
            const void *val = a < 4 ? (const void *)&args[a] : (const void *)&v;
            if (p->dev->cl.SetKernelArg(rn->kernel, (cl_uint)(rn->n_bufs + a), a < 4 ? sizeof(cl_uint) : sizeof(cl_int),
                                        val) != CL_SUCCESS) {
                say(d, ctx, "litecl: clSetKernelArg failed for %s", kname);
                goto out;
            }
        }
    }
    if (recompute) release_consts(p);
    p->folded_done = 0;
    /* outputs LiteRT reads: resized to the shapes the kernels produce */
    for (int s = 0; s < p->n_slots; s++) {
        slot *sl = &p->slots[s];
        if (!sl->is_out) continue;
        TfLiteTensor *ts = &ctx->tensors[sl->tensor];
        if (ts->dims && ts->dims->size == sl->rank &&
            !memcmp(ts->dims->data, sl->dims, (size_t)sl->rank * sizeof(int)))
            continue;
        TfLiteIntArray *arr = malloc(sizeof(TfLiteIntArray) + (size_t)sl->rank * sizeof(int));
        if (!arr) { say(d, ctx, "litecl: out of memory"); goto out; }
        arr->size = sl->rank;
        memcpy(arr->data, sl->dims, (size_t)sl->rank * sizeof(int));
        if (ctx->ResizeTensor(ctx, ts, arr) != kTfLiteOk) { /* LiteRT owns arr either way */
            say(d, ctx, "litecl: LiteRT could not resize tensor %d", sl->tensor);
            goto out;
        }
    }
    p->prepared = 1;
    status = kTfLiteOk;
    goto out;
bad_node:
    say(d, ctx, "litecl: a node of the partition is not a CAST or ADD litecl exported");
out:
    if (status != kTfLiteOk) p->prepared = 0;
    if (!inproc) pthread_mutex_unlock(d->lockp);
    return status;
}

/* ----------------------------------------------------------------- kernel: invoke */
static cl_mem own_buffer(partition *p, slot *s, size_t bytes) {
    if (bytes < 1) bytes = 1;
    if (s->own && s->own_bytes >= bytes) return s->own;
    if (s->own) {
        release_mem(p->dev, &s->own);
        forget_args(p);
    }
    cl_int err = 0;
    s->own = p->dev->cl.CreateBuffer(p->dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    p->counts[LCL_BUFFERS]++;
    s->own_bytes = s->own && err == CL_SUCCESS ? bytes : 0;
    return err == CL_SUCCESS ? s->own : NULL;
}

static size_t slot_bytes(const slot *s) { return numel(s) * (size_t)s->itemsize; }

/* a pinned host buffer (CL_MEM_ALLOC_HOST_PTR, mapped once) to stage copies through */
static void *pinned(partition *p, slot *s, size_t bytes) {
    if (s->pinned && s->pinned_bytes >= bytes) return s->pinned_ptr;
    if (s->pinned) {
        p->dev->cl.EnqueueUnmapMemObject(p->dev->queue, s->pinned, s->pinned_ptr, 0, NULL, NULL);
        p->dev->cl.Finish(p->dev->queue);
        release_mem(p->dev, &s->pinned);
    }
    cl_int err = 0;
    s->pinned = p->dev->cl.CreateBuffer(p->dev->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
    p->counts[LCL_BUFFERS]++;
    if (!s->pinned || err != CL_SUCCESS) return NULL;
    s->pinned_ptr = p->dev->cl.EnqueueMapBuffer(p->dev->queue, s->pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                           bytes, 0, NULL, NULL, &err);
    if (!s->pinned_ptr || err != CL_SUCCESS) { release_mem(p->dev, &s->pinned); return NULL; }
    s->pinned_bytes = bytes;
    return s->pinned_ptr;
}

/* a USE_HOST_PTR buffer over LiteRT's memory (the same memory on host-unified devices at
 * the measured alignment: memory.py _measure_memory), cached per pointer and size; with
 * the cache full (kernel_invoke empties it before binding anything) NULL: copied instead */
static cl_mem in_place(partition *p, void *ptr, size_t bytes) {
    if (!p->in_place || !ptr || (uintptr_t)ptr % (uintptr_t)p->align) return NULL;
    for (int i = 0; i < p->n_bound; i++)
        if (p->bound[i].ptr == ptr && p->bound[i].bytes == bytes) return p->bound[i].mem;
    if (p->n_bound >= LCL_MAX_BOUND) return NULL;
    cl_int err = 0;
    cl_mem m = p->dev->cl.CreateBuffer(p->dev->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &err);
    p->counts[LCL_BUFFERS]++;
    if (!m || err != CL_SUCCESS) return NULL;
    p->bound[p->n_bound++] = (cached_mem){ptr, bytes, 0, m};
    return m;
}

/* a device copy of a constant input, made once per (LiteRT pointer, its bytes, type):
 * ``host`` holds ``host_bytes`` (a sub-byte constant's values unpacked, one per byte) */
static cl_mem const_buffer(partition *p, void *ptr, size_t bytes, int type, const void *host, size_t host_bytes) {
    for (int i = 0; i < p->n_consts; i++)
        if (p->consts[i].ptr == ptr && p->consts[i].bytes == bytes && p->consts[i].type == type)
            return p->consts[i].mem;
    if (p->n_consts == p->cap_consts) {
        int cap = p->cap_consts ? 2 * p->cap_consts : 8;
        cached_mem *c = realloc(p->consts, (size_t)cap * sizeof *c);
        if (!c) return NULL;
        p->consts = c, p->cap_consts = cap;
    }
    cl_int err = 0;
    cl_mem m = p->dev->cl.CreateBuffer(p->dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                     host_bytes ? host_bytes : 1, (void *)host, &err);
    p->counts[LCL_BUFFERS]++;
    p->counts[LCL_UPLOADS]++;
    if (!m || err != CL_SUCCESS) return NULL;
    p->consts[p->n_consts++] = (cached_mem){ptr, bytes, type, m};
    return m;
}

/* model.py unpack_bits: LiteRT's packed sub-byte values, low bits first, one per byte */
static void unpack(const uint8_t *src, size_t n_bytes, int bits, int is_signed, int8_t *dst, size_t count) {
    int per = 8 / bits, mask = (1 << bits) - 1;
    for (size_t i = 0; i < count && i / (size_t)per < n_bytes; i++) {
        int v = (src[i / (size_t)per] >> ((int)(i % (size_t)per) * bits)) & mask;
        if (is_signed && v >= 1 << (bits - 1)) v -= 1 << bits;
        dst[i] = (int8_t)v;
    }
}

/* delegate.py _pack_bits: the inverse */
static void pack(const int8_t *src, size_t count, int bits, uint8_t *dst, size_t n_bytes) {
    int per = 8 / bits, mask = (1 << bits) - 1;
    memset(dst, 0, n_bytes);
    for (size_t i = 0; i < count && i / (size_t)per < n_bytes; i++)
        dst[i / (size_t)per] |= (uint8_t)((src[i] & mask) << ((int)(i % (size_t)per) * bits));
}

/* where the next non-blocking command of an invoke leaves its event: the queue is in
 * order, so the last one done means every one is */
static cl_event *track(partition *p) {
    if (p->done) p->dev->cl.ReleaseEvent(p->done);
    p->done = NULL;
    return &p->done;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Wait for the invoke's commands. clFinish sleeps until the runtime wakes the thread:
 * after milliseconds of LiteRT's own nodes, PoCL's worker threads and this one each
 * wake from an idle CPU, which cost ~100 us a partition where the kernel took 18 us
 * (frontend_sl_v1, 2-core VM, measured). Polling the last command's status, yielding
 * the CPU to the runtime's threads, for at most ``spin_us``, then clFinish (which also
 * reports the runtime's errors): 150 -> 86 us in the delegate per invoke there.
 * What is left is the runtime's, not the wait's (event-profiled inside LiteRT, 2-core VM
 * at load 1.5-2): ~1 us from kernel_invoke's entry to its one enqueue, then PoCL's
 * worker starts the kernel 37-77 us after it is queued (a few us back to back), the
 * kernel, and ~1 us from its end to the return. Polling with or without sched_yield and
 * a plain clFinish came within the noise of each other in a C harness of the same
 * launch after 3 ms of compute (60-100 us each; 30-40 us back to back); the round-trip
 * floor's three commands take 140-190 us there against 55-76 us back to back
 * (benchmarks/bench_native.py cold_round_trip_us). */
static int profiling(const partition *p);

/* How long an invoke polls before clFinish, by OpenCL runtime: a row per platform name
 * (a substring), LCL_SPIN_US for the others. Measured on the project's 2-core VM, invoke
 * medians of 55 alternating rounds, LiteRT / polling 1000 us / a plain clFinish:
 * Intel's CPU runtime 2026.2 (pip): MoveNet 15983 / 16458 / 16014 us, face_landmark 3922 /
 * 4755 / 4369, palm_detection_lite 22300 / 24505 / 23415, rope 701 / 763 / 729: the
 * polling thread takes a core from the runtime's TBB workers, which run the kernel (the
 * profiled CAST of frontend_sl_v1: 240 us polled, 21 us not). PoCL 3.1, the same runs:
 * face_landmark 3926 / 5023 / 5439, palm 22031 / 24542 / 25108, rope 739 / 833 / 889:
 * polling pays there (its workers wake late from clFinish's sleep). */
static const struct { const char *platform; long spin_us; } SPIN_ROWS[] = {
    {"Intel(R) OpenCL", 0},
};

static long platform_spin_us(const char *platform_name) {
    for (size_t i = 0; i < sizeof SPIN_ROWS / sizeof SPIN_ROWS[0]; i++)
        if (strstr(platform_name, SPIN_ROWS[i].platform)) return SPIN_ROWS[i].spin_us;
    return LCL_SPIN_US;
}

static cl_int wait_done(partition *p) {
    delegate *d = p->d;
    long spin_us = d->spin_us >= 0 ? d->spin_us : p->dev->spin_us;
    /* not while profiling: the polling thread takes a core from the runtime's workers,
     * and on 2 cores Intel's CPU runtime then timed a kernel at 240 us that runs in 21
     * (frontend_sl_v1's CAST, event-profiled, measured) */
    if (p->done && spin_us > 0 && !profiling(p)) {
        cl_int st = 1;
        p->dev->cl.Flush(p->dev->queue);
        double until = now_us() + (double)spin_us;
        while (p->dev->cl.GetEventInfo(p->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) == CL_SUCCESS &&
               st > CL_COMPLETE && now_us() < until)
            sched_yield();
    }
    /* the event waited for too: Mesa's rusticl 22.3 returns from clFinish before a
     * non-blocking read has landed (measured with the removed runner.c) */
    cl_int e = p->done ? p->dev->cl.WaitForEvents(1, &p->done) : CL_SUCCESS;
    if (p->done) p->dev->cl.ReleaseEvent(p->done);
    p->done = NULL;
    cl_int f = p->dev->cl.Finish(p->dev->queue);
    return e != CL_SUCCESS ? e : f;
}

#define CHECK(call, what) do { cl_int e_ = (call); if (e_ != CL_SUCCESS) { \
    say(d, ctx, "litecl: %s failed (OpenCL error %d)", what, (int)e_); goto fail; } } while (0)

/* ---- profiling (Delegate.profile: its profile_log and kernel_times_ns) */
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);  /* Python's perf_counter_ns on Linux */
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void profile_begin(partition *p) {
    p->n_prof = p->n_spans = 0;
    if (!p->d->profile || !p->d->profiler) return;
    if (!p->prof) {
        p->prof = calloc(LCL_PROFILE_MAX, sizeof *p->prof);
        p->prof_ev = calloc(LCL_PROFILE_MAX, sizeof *p->prof_ev);
        if (!p->prof || !p->prof_ev) { free(p->prof); free(p->prof_ev); p->prof = NULL; p->prof_ev = NULL; }
    }
}

static int profiling(const partition *p) { return p->prof && p->d->profile && p->d->profiler; }

/* before an enqueue: what it is and when */
static void noted(partition *p, int kind, int launch, size_t bytes) {
    if (!profiling(p) || p->n_prof >= LCL_PROFILE_MAX) return;
    lcl_profile_cmd *c = &p->prof[p->n_prof];
    memset(c, 0, sizeof *c);
    c->kind = kind, c->launch = launch, c->bytes = (int64_t)bytes, c->host_ns = now_ns();
    p->prof_ev[p->n_prof] = NULL;
}

/* after it: its event kept for its times */
static void kept(partition *p) {
    if (!profiling(p) || p->n_prof >= LCL_PROFILE_MAX) return;
    if (p->done && p->dev->cl.RetainEvent && p->dev->cl.RetainEvent(p->done) == CL_SUCCESS)
        p->prof_ev[p->n_prof] = p->done;
    p->n_prof++;
}

static void span(partition *p, int kind, int64_t t0) {
    if (!profiling(p) || p->n_spans >= (int)(sizeof p->spans / sizeof p->spans[0])) return;
    p->spans[p->n_spans++] = (lcl_profile_span){kind, 0, t0, now_ns()};
}

/* after the wait: the events' times to the profiler (t_invoke 0: a failed invoke, dropped) */
static void profile_end(partition *p, int64_t t_invoke) {
    if (!profiling(p)) return;
    for (int i = 0; i < p->n_prof; i++) {
        cl_event ev = p->prof_ev[i];
        if (!ev) continue;
        lcl_profile_cmd *c = &p->prof[i];
        if (p->dev->cl.GetEventProfilingInfo) {
            p->dev->cl.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED, sizeof c->queued, &c->queued, NULL);
            p->dev->cl.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof c->start, &c->start, NULL);
            p->dev->cl.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof c->end, &c->end, NULL);
        }
        p->dev->cl.ReleaseEvent(ev);
        p->prof_ev[i] = NULL;
    }
    if (t_invoke) p->d->profiler(p->key, p->prof, p->n_prof, p->spans, p->n_spans, t_invoke, now_ns());
    p->n_prof = p->n_spans = 0;
}

/* At exit: an invoke or prepare of another thread (a daemon thread, an app's pool) inside
 * the OpenCL runtime while exit() tore the runtime down segfaulted in clEnqueueNDRangeKernel
 * (a fresh user: 6 of 20 runs with the exported library, 6 of 20 here). exit_now (an
 * atexit handler of this library, registered when it first opens a device, so it runs
 * before the runtime's own teardown; and Python's atexit, before its final collection)
 * stops new OpenCL work and waits up to 5 s for the work in flight. */
static volatile int EXITING;
static int IN_FLIGHT;

static void exit_now(void) {
    __sync_lock_test_and_set(&EXITING, 1);
    for (int i = 0; i < 5000 && __sync_fetch_and_add(&IN_FLIGHT, 0) > 0; i++) usleep(1000);
}

#ifdef __GLIBC__
/* a child's exit() after a fork() that another thread's invoke was in flight at: the
 * OpenCL runtime's own teardown then waits for commands of threads the child does not
 * have (Intel's CPU runtime: dll_fini -> ContextModule::ShutDown -> FinishAllActiveQueues
 * spun for good, a child's sys.exit(0) measured past 240 s). The child's exit skips the C
 * exit handlers and library destructors after this one (registered last, it runs first),
 * as os._exit would, once C's streams are flushed; Python's own finalization has run. */
static void exit_at_once(int status, void *arg) {
    (void)arg;
    fflush(NULL);
    _exit(status);
}
#endif

/* in a fork()ed child the work in flight was the parent's threads', which the child does
 * not have: exit_now waited its full 5 s for them, twice (a fresh user's server children) */
static void forked_child(void) {
#ifdef __GLIBC__
    if (__sync_fetch_and_add(&IN_FLIGHT, 0) > 0) on_exit(exit_at_once, NULL);
#endif
    IN_FLIGHT = 0;
}

static pthread_once_t EXIT_ONCE = PTHREAD_ONCE_INIT;
static void register_exit(void) {
    atexit(exit_now);
    pthread_atfork(NULL, NULL, forked_child);
}

static TfLiteStatus kernel_invoke_inner(TfLiteContext *ctx, TfLiteNode *node);
static TfLiteStatus kernel_prepare_inner(TfLiteContext *ctx, TfLiteNode *node);

/* kernel_prepare and kernel_invoke, counted while in flight; none starts once exiting */
static TfLiteStatus guarded(TfLiteContext *ctx, TfLiteNode *node, int invoke) {
    __sync_fetch_and_add(&IN_FLIGHT, 1);
    TfLiteStatus st = kTfLiteError;
    if (EXITING) {
        if (ctx->ReportError) ctx->ReportError(ctx, "%s", "litecl: the process is exiting: its OpenCL runtime "
                                                           "takes no more work");
    } else {
        st = invoke ? kernel_invoke_inner(ctx, node) : kernel_prepare_inner(ctx, node);
    }
    __sync_fetch_and_sub(&IN_FLIGHT, 1);
    return st;
}

static TfLiteStatus kernel_invoke(TfLiteContext *ctx, TfLiteNode *node) { return guarded(ctx, node, 1); }

static TfLiteStatus kernel_invoke_inner(TfLiteContext *ctx, TfLiteNode *node) {
    partition *p = node->user_data;
    if (!p || !p->prepared) {
        if (ctx->ReportError) ctx->ReportError(ctx, "%s", "litecl: partition kernel not prepared");
        return kTfLiteError;
    }
    delegate *d = p->d;
    int8_t *tmp = NULL;
    if (p->dev->fork_message[0] && p->dev->pid != getpid()) { /* an OpenCL context does not survive fork() */
        say(d, ctx, "%s", p->dev->fork_message);
        return kTfLiteError;
    }
    const int serial = d->planner ? p->dev->serial : p->dev->one_thread;
    if (serial) pthread_mutex_lock(&p->dev->lock);
    const int64_t t_invoke = now_ns();
    profile_begin(p);
    p->counts[LCL_INVOKES]++;
    /* LiteRT's memory moves with each resize: past LCL_MAX_BOUND pointers the cache of
     * in-place buffers starts again, here, before any of this invoke's is bound (emptied
     * while binding, it released a buffer an earlier slot of this invoke was bound to:
     * clSetKernelArg failed with CL_INVALID_MEM_OBJECT on Intel's runtime, PoCL aborted) */
    int bindable = 0; /* the slots an invoke may bind in place: inputs not constant, outputs */
    for (int i = 0; i < p->n_slots; i++)
        bindable += (p->slots[i].is_in && !p->slots[i].constant) || (p->slots[i].is_out && !p->slots[i].is_in);
    if (p->n_bound && p->n_bound + bindable > LCL_MAX_BOUND) release_bound(p);
    /* inputs: constants uploaded once, LiteRT's memory in place or copied in */
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        s->bound = NULL;
        s->host = 0;
        if (!s->is_in) continue;
        TfLiteTensor *ts = &ctx->tensors[s->tensor];
        size_t n = ts->bytes;
        if (n == 0) {
            s->bound = own_buffer(p, s, 1);
        } else if (s->pbits) {
            if (!s->constant) p->counts[LCL_COPIED]++;
            size_t count = numel(s);
            if (s->constant)
                for (int c = 0; c < p->n_consts && !s->bound; c++)
                    if (p->consts[c].ptr == ts->data && p->consts[c].bytes == n && p->consts[c].type == -1)
                        s->bound = p->consts[c].mem;
            if (!s->bound) {
                tmp = malloc(count ? count : 1);
                if (!tmp) { say(d, ctx, "litecl: out of memory"); goto fail; }
                unpack(ts->data, n, s->pbits, s->psigned, tmp, count);
                if (s->constant) {
                    s->bound = const_buffer(p, ts->data, n, -1, tmp, count);
                } else {
                    s->bound = own_buffer(p, s, count);
                    if (s->bound)
                        CHECK(p->dev->cl.EnqueueWriteBuffer(p->dev->queue, s->bound, CL_TRUE, 0, count ? count : 1, tmp, 0,
                                                       NULL, NULL), "clEnqueueWriteBuffer");
                }
                free(tmp);
                tmp = NULL;
            }
        } else if (s->constant) {
            s->bound = const_buffer(p, ts->data, n, 0, ts->data, n);
        } else if ((s->bound = in_place(p, ts->data, n)) != NULL) {
            s->host = 1;
            p->counts[LCL_IN_PLACE]++;
        } else {
            p->counts[LCL_COPIED]++;
            s->bound = own_buffer(p, s, n);
            if (!s->bound) goto nomem;
            const void *src = ts->data;
            if (!p->in_place && n <= LCL_STAGE_MAX) { /* staging through pinned memory (discrete GPUs) */
                void *pin = pinned(p, s, n);
                if (!pin) goto nomem;
                int64_t t0 = now_ns();
                memcpy(pin, src, n);
                span(p, 0, t0);
                src = pin;
                p->counts[LCL_STAGED]++;
            }
            noted(p, 0, -1, n);
            CHECK(p->dev->cl.EnqueueWriteBuffer(p->dev->queue, s->bound, CL_FALSE, 0, n, src, 0, NULL, track(p)),
                  "clEnqueueWriteBuffer");
            kept(p);
        }
        if (!s->bound) goto nomem;
    }
    /* outputs: LiteRT's memory in place, else litecl's buffer read back after */
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        if (!s->is_out || s->is_in) continue;
        TfLiteTensor *ts = &ctx->tensors[s->tensor];
        size_t n = ts->bytes;
        if (n && !ts->data) { say(d, ctx, "litecl: tensor %d has no memory at invoke", s->tensor); goto fail; }
        if (n && !s->pbits && (s->bound = in_place(p, ts->data, n)) != NULL) {
            s->host = 1;
            p->counts[LCL_IN_PLACE]++;
        } else if (n) {
            p->counts[LCL_COPIED]++;
        }
    }
    for (int r = 0; r < p->n_runs; r++) {
        run *rn = &p->runs[r];
        const lcl_launch *ln = rn->ln;
        if (rn->folded && p->folded_done) continue;
        for (int a = 0; a < rn->n_bufs; a++) {
            slot *s = &p->slots[rn->bufs[a]];
            int is_output = a >= ln->inputs.len;
            cl_mem m;
            /* folded results live in litecl's buffers (computed once); LiteRT's copy of a
             * folded partition output is refreshed from there each invoke (below) */
            if (s->bound && !(s->folded && !s->is_in) && !(is_output && rn->folded))
                m = s->bound;
            else
                m = own_buffer(p, s, slot_bytes(s));
            if (!m) goto nomem;
            if (m != rn->last[a]) {
                CHECK(p->dev->cl.SetKernelArg(rn->kernel, (cl_uint)a, sizeof(cl_mem), &m), "clSetKernelArg");
                rn->last[a] = m;
            }
        }
        if (rn->t.n) {
            size_t g = (size_t)rn->t.gsize, l = (size_t)rn->t.lsize;
            noted(p, 1, r, 0);
            CHECK(p->dev->cl.EnqueueNDRangeKernel(p->dev->queue, rn->kernel, 1, NULL, &g, &l, 0, NULL, track(p)),
                  "clEnqueueNDRangeKernel");
            kept(p);
            p->counts[LCL_LAUNCHED]++;
        }
    }
    p->folded_done = 1;
    /* results to LiteRT's memory: folded results (kept in litecl's buffers), outputs not
     * bound in place (read back; staged through pinned memory on copy devices) */
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        TfLiteTensor *ts = &ctx->tensors[s->tensor];
        size_t n = ts->bytes;
        if (!s->is_out || !n || !ts->data || s->pbits || (s->host && !s->folded)) continue;
        cl_mem src = s->folded || !s->bound ? own_buffer(p, s, slot_bytes(s)) : s->bound;
        if (!src) goto nomem;
        if (s->host) {
            noted(p, 2, -1, n);
            CHECK(p->dev->cl.EnqueueCopyBuffer(p->dev->queue, src, s->bound, 0, 0, n, 0, NULL, track(p)),
                  "clEnqueueCopyBuffer");
            kept(p);
            continue;
        }
        void *dst = p->in_place || n > LCL_STAGE_MAX ? ts->data : pinned(p, s, n);
        if (!dst) goto nomem;
        if (dst != ts->data) p->counts[LCL_STAGED]++;
        noted(p, 3, -1, n);
        CHECK(p->dev->cl.EnqueueReadBuffer(p->dev->queue, src, CL_FALSE, 0, n, dst, 0, NULL, track(p)),
              "clEnqueueReadBuffer");
        kept(p);
    }
    {
        int64_t t0 = now_ns();
        CHECK(wait_done(p), "clFinish");
        span(p, 1, t0);
    }
    for (int i = 0; i < p->n_slots; i++) {
        slot *s = &p->slots[i];
        TfLiteTensor *ts = &ctx->tensors[s->tensor];
        size_t n = ts->bytes;
        if (!s->is_out || !n || !ts->data) continue;
        if (s->pbits) {
            size_t count = numel(s);
            tmp = malloc(count ? count : 1);
            if (!tmp) goto nomem;
            CHECK(p->dev->cl.EnqueueReadBuffer(p->dev->queue, own_buffer(p, s, slot_bytes(s)), CL_TRUE, 0, count ? count : 1,
                                          tmp, 0, NULL, NULL), "clEnqueueReadBuffer");
            pack(tmp, count, s->pbits, ts->data, n);
            free(tmp);
            tmp = NULL;
        } else if (!p->in_place && !s->host && n <= LCL_STAGE_MAX) {
            int64_t t0 = now_ns();
            memcpy(ts->data, s->pinned_ptr, n);
            span(p, 2, t0);
        }
    }
    profile_end(p, t_invoke);
    if (serial) pthread_mutex_unlock(&p->dev->lock);
    return kTfLiteOk;
nomem:
    say(d, ctx, "litecl: cannot allocate OpenCL memory");
fail:
    free(tmp);
    wait_done(p);
    profile_end(p, 0);
    if (serial) pthread_mutex_unlock(&p->dev->lock);
    return kTfLiteError;
}

/* ----------------------------------------------------------------- delegate Prepare */
/* The exported subgraph this context's graph is, else NULL with ``why`` (``*implausible``
 * set when a node does not read as tflite_abi.h's structs: fingerprint_matches -1). */
static const lcl_subgraph *match_subgraph(TfLiteContext *ctx, const TfLiteIntArray *plan, char *why, size_t len,
                                          int *implausible) {
    *implausible = 0;
    for (int s = 0; s < LCL_PLAN.n_subgraphs; s++) {
        char w[256];
        int m = fingerprint_matches(ctx, plan, LCL_SUBGRAPHS[s].fingerprint, w, sizeof w);
        if (m == 1) return &LCL_SUBGRAPHS[s];
        if (s == 0 || m < 0) snprintf(why, len, "%s", w);
        if (m < 0) {
            *implausible = 1;
            return NULL;
        }
    }
    return NULL;
}

/* Contexts seen by this delegate's Prepare and the subgraph each matched: kernel init
 * runs inside ReplaceNodeSubsetsWithDelegateKernels, for the context being prepared. */
static __thread const lcl_subgraph *preparing;

static const lcl_subgraph *subgraph_for_context(delegate *d, TfLiteContext *ctx) {
    (void)d, (void)ctx;
    return preparing;
}

#define LCL_LAYOUT_DECLINED "WARNING: litecl: LiteRT's TfLiteContext does not read as litecl's TFLite " \
    "structs (tflite_abi.h) expect (%s); litecl claims none of its nodes\n"


/* Whether operand ``a`` of a shape-generic launch (shape_fixed 0: exported with every operand
 * at the output's shape, or one element splatted while the output had more) fits its kernel
 * at shape ``in`` with output ``out``: a splatted operand still one element, any other at the
 * output's shape. Exported with every operand one element (x [-1] + y [-1] at [1] + [1]),
 * the kernel reads them all element by element: an operand left at one element beside a
 * grown one does not fit (it read past that operand's end: a fresh user's wrong results and
 * segfault), nor one grown to the output's shape where it was splatted. */
static int generic_operand_holds(const int32_t *ints, const lcl_launch *ln, int a, const slot *in,
                                 const slot *out) {
    const int32_t *sh = ints + ln->shapes.off;
    size_t exported_out = 1, mine = 1;
    for (int k = 0; k < ln->inputs.len; k++) {
        int rank = *sh++;
        size_t n = 1;
        for (int i = 0; i < rank; i++) n *= (size_t)sh[i];
        if (n > exported_out) exported_out = n;
        if (k == a) mine = n;
        sh += rank;
    }
    return mine == 1 && exported_out > 1 ? numel(in) == 1 : same_shape(in, out);
}
/* kernel_prepare's rule for an elementwise launch, at the shapes LiteRT holds now: every
 * input at the output's shape, or one element as exported (a splatted scalar) */
static int elementwise_still(const TfLiteContext *ctx, const lcl_launch *ln) {
    slot in[2], out;
    for (int a = 0; a < 2; a++)
        if (set_shape(&in[a], ctx->tensors[LCL_INTS[ln->inputs.off + a]].dims)) return 0;
    if (broadcast(&in[0], &in[1], &out)) return 0;
    for (int a = 0; a < 2; a++)
        if (!generic_operand_holds(LCL_INTS, ln, a, &in[a], &out)) return 0;
    return 1;
}

/* Keep LiteRT's own nodes in the model's order around ReplaceNodeSubsetsWithDelegateKernels
 * (backend/order.py, line for line; the Python delegate's keep_order).
 * LiteRT partitions greedily (tensorflow/lite/graph_info.cc
 * PartitionGraphIntoIndependentNodeSubsetsImpl): every LiteRT node ready to run goes before
 * the next delegate node, so whatever does not wait for litecl's nodes moves to the front.
 * In pose_detection that is 38 DEQUANTIZEs of DENSIFY'd fp16 weights (arena tensors,
 * computed every invoke): they ran before the first ADD instead of just before their
 * convolutions, LiteRT's arena grew from 7.1 to 15.6 MB and LiteRT's own nodes took ~1.5 ms
 * more per invoke (2-core VM: a test build computing the ADDs on the host, no OpenCL,
 * +1531 us, 95% 1423..1647, over LiteRT alone). The partitioner chains the nodes marked
 * might_have_side_effect in plan order with control edges, so LiteRT's nodes are marked for
 * the call (keep_order_begin) and their own flags put back after it (keep_order_end). Only
 * where that leaves litecl's partitions as LiteRT forms them unmarked (partitions(), both
 * ways): a chain can also hold back a node that a partition waits for and split it (movenet
 * 20 -> 22 partitions, BirdNET's MData 2 -> 5, pose_landmark_full 20 -> 28).
 * keep_order: "no", "yes", or "auto" (the default, as the Python delegate's): only where the
 * greedy order makes more per-invoke bytes live at once (live_peak), since LiteRT's arena
 * planner places tensors by the partitioned plan. Measured (PoCL, 2-core VM, paired rounds
 * against the greedy order): pose_detection -1.31 ms per invoke here (live peak 14.7 ->
 * 6.5 MB; the Python delegate -0.8..-1.9 in six runs), face_detection_full_range_sparse
 * -0.30 ms (5.4 -> 3.6 MB); where the peak is the same, keeping the order changed nothing
 * measurable (-64..+31 us), and in most models it moves only nodes LiteRT runs once. */
enum { LCL_KEEP_NO = 0, LCL_KEEP_YES = 1, LCL_KEEP_AUTO = 2 };
#define LCL_KEEP_ORDER_DEFAULT LCL_KEEP_AUTO /* backend/delegate.py KEEP_ORDER_DEFAULT */
enum { LCL_BUILTIN_DEQUANTIZE = 6, LCL_BUILTIN_DENSIFY = 124 }; /* order.py computed_once */

/* LiteRT's greedy partitioning of the plan's ``n`` nodes (the loop of graph_info.cc, with
 * control edges from one node marked in ``marked`` to the next): the subset each plan
 * position lands in, in ``epoch``, and the positions in the order the partitioned plan runs
 * them, in ``order`` (as the loop adds them: by subset, sweep, position). ``mine``: the
 * positions litecl claims. Returns 0, -1 without memory. */
static int partitions(TfLiteNode *const *nodes, int n, int nt, const unsigned char *mine,
                      const unsigned char *marked, int *epoch, int *order) {
    enum { NOT_READY = -1, ALWAYS_READY = -2 };
    int *tensor = malloc((size_t)(nt ? nt : 1) * sizeof(int)), *waits = calloc((size_t)n + 1, sizeof(int));
    int *next = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!tensor || !waits || !next) {
        free(tensor), free(waits), free(next);
        return -1;
    }
    for (int t = 0; t < nt; t++) tensor[t] = ALWAYS_READY;
    for (int i = 0, last = -1; i < n; i++) {
        epoch[i] = NOT_READY;
        next[i] = -1;
        for (int k = 0; k < nodes[i]->outputs->size; k++)
            if (nodes[i]->outputs->data[k] >= 0 && nodes[i]->outputs->data[k] < nt) tensor[nodes[i]->outputs->data[k]] = NOT_READY;
        if (marked[i]) {
            if (last >= 0) next[last] = i, waits[i]++;
            last = i;
        }
    }
    for (int e = 0, m = 0;; e++) {
        int type = -1, added = 0;
        for (int did = 1; did;) {
            did = 0;
            for (int i = 0; i < n; i++) {
                const TfLiteNode *nd = nodes[i];
                int ready = epoch[i] == NOT_READY && !waits[i];
                for (int k = 0; ready && k < nd->inputs->size; k++) {
                    int t = nd->inputs->data[k];
                    ready = t < 0 || t >= nt || tensor[t] != NOT_READY;
                }
                if (!ready) continue;
                if (type < 0) type = mine[i];
                if (type != mine[i]) continue;
                epoch[i] = e;
                order[m++] = i;
                for (int k = 0; k < nd->outputs->size; k++)
                    if (nd->outputs->data[k] >= 0 && nd->outputs->data[k] < nt) tensor[nd->outputs->data[k]] = e;
                if (next[i] >= 0) waits[next[i]]--;
                did = 1, added++;
            }
        }
        if (!added) break;
    }
    free(tensor), free(waits), free(next);
    return 0;
}

static int constant_tensor(const TfLiteContext *ctx, int t) {
    return t >= (int)ctx->tensors_size || ctx->tensors[t].allocation_type == kTfLiteMmapRo ||
           ctx->tensors[t].allocation_type == kTfLitePersistentRo;
}

/* The most bytes of per-invoke tensors live at once over the plan partitioned as
 * ``epoch``/``order`` (partitions()), each delegated subset one step (order.py
 * execution_order and live_peak): a tensor lives from the step that writes it (the first,
 * for a graph input) to the last step that reads it (the last, for one no node reads);
 * constants, tensors only their own subset reads, and ``skip`` (outputs LiteRT computes
 * once) hold no arena bytes. Returns -1 without memory. */
static long long live_peak(const TfLiteContext *ctx, TfLiteNode *const *nodes, int n, const unsigned char *mine,
                           const int *epoch, const int *order, const unsigned char *skip) {
    int nt = (int)ctx->tensors_size, steps = 0;
    int *step = malloc((size_t)(n ? n : 1) * sizeof(int));
    int *first = malloc((size_t)(nt ? nt : 1) * sizeof(int)), *last = malloc((size_t)(nt ? nt : 1) * sizeof(int));
    int *minr = malloc((size_t)(nt ? nt : 1) * sizeof(int));
    unsigned char *used = calloc((size_t)nt + 1, 1), *by_mine = calloc((size_t)nt + 1, 1);
    long long *delta = calloc((size_t)n + 2, sizeof(long long)), peak = 0, cur = 0;
    if (!step || !first || !last || !minr || !used || !by_mine || !delta) {
        free(step), free(first), free(last), free(minr), free(used), free(by_mine), free(delta);
        return -1;
    }
    for (int k = 0, prev = -1; k < n; k++) { /* a subset's positions are consecutive in ``order`` */
        int i = order[k];
        if (!mine[i] || prev < 0 || !mine[prev] || epoch[prev] != epoch[i]) steps++;
        step[i] = steps - 1, prev = i;
    }
    for (int t = 0; t < nt; t++) first[t] = last[t] = minr[t] = -1;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        const TfLiteIntArray *ins = nodes[i]->inputs, *outs = nodes[i]->outputs;
        for (int j = 0; j < outs->size; j++) {
            int t = outs->data[j];
            if (t < 0 || t >= nt) continue;
            if (first[t] < 0) first[t] = step[i], by_mine[t] = mine[i];
            used[t] = 1;
        }
        for (int j = 0; j < ins->size; j++) {
            int t = ins->data[j];
            if (t < 0 || t >= nt) continue;
            if (minr[t] < 0) minr[t] = step[i];
            last[t] = step[i], used[t] = 1;
        }
    }
    for (int t = 0; t < nt; t++) {
        if (!used[t] || constant_tensor(ctx, t) || skip[t]) continue;
        if (by_mine[t] && last[t] >= 0 && minr[t] == first[t] && last[t] == first[t]) continue; /* inside a partition */
        int a = first[t] < 0 ? 0 : first[t], b = last[t] < 0 ? steps - 1 : last[t];
        b = b < a ? a : b;
        delta[a] += (long long)ctx->tensors[t].bytes;
        delta[b + 1] -= (long long)ctx->tensors[t].bytes;
    }
    for (int k = 0; k <= steps; k++) {
        cur += delta[k];
        peak = cur > peak ? cur : peak;
    }
    free(step), free(first), free(last), free(minr), free(used), free(by_mine), free(delta);
    return peak;
}

/* The outputs LiteRT computes once, at the first invoke, into persistent memory (order.py
 * computed_once): DEQUANTIZE of a constant (dequantize.cc) and DENSIFY (densify.cc). */
static void computed_once(const TfLiteContext *ctx, TfLiteNode *const *nodes, const int *codes, int n,
                          unsigned char *skip) {
    for (int i = 0; i < n; i++) {
        int once = codes[i] == LCL_BUILTIN_DENSIFY;
        if (codes[i] == LCL_BUILTIN_DEQUANTIZE) {
            once = 1;
            for (int k = 0; k < nodes[i]->inputs->size; k++)
                if (nodes[i]->inputs->data[k] >= 0 && !constant_tensor(ctx, nodes[i]->inputs->data[k])) once = 0;
        }
        for (int k = 0; once && k < nodes[i]->outputs->size; k++) {
            int t = nodes[i]->outputs->data[k];
            if (t >= 0 && t < (int)ctx->tensors_size) skip[t] = 1;
        }
    }
}

/* Mark LiteRT's nodes in ``plan`` (those litecl does not claim) might_have_side_effect when
 * that leaves litecl's partitions as they are (above) and, for ``mode`` LCL_KEEP_AUTO, when
 * the greedy order makes more per-invoke bytes live at once (live_peak). Returns what
 * keep_order_end needs: count, then (node, its own flag) pairs; NULL when nothing was
 * marked. */
static int *keep_order_begin(TfLiteContext *ctx, const TfLiteIntArray *plan, const TfLiteIntArray *claim,
                             int mode) {
    int n = plan->size, top = 0, same = 1, nt = (int)ctx->tensors_size;
    for (int i = 0; i < n; i++) top = plan->data[i] > top ? plan->data[i] : top;
    for (int i = 0; i < claim->size; i++) top = claim->data[i] > top ? claim->data[i] : top;
    unsigned char *claimed = calloc((size_t)top + 1, 1), *mine = calloc((size_t)n + 1, 1);
    unsigned char *was = calloc((size_t)n + 1, 1), *marked = calloc((size_t)n + 1, 1);
    int *e0 = malloc((size_t)(n + 1) * sizeof(int)), *e1 = malloc((size_t)(n + 1) * sizeof(int));
    int *o0 = malloc((size_t)(n + 1) * sizeof(int)), *o1 = malloc((size_t)(n + 1) * sizeof(int));
    int *codes = malloc((size_t)(n + 1) * sizeof(int));
    TfLiteNode **nodes = calloc((size_t)n + 1, sizeof *nodes);
    int *saved = malloc((size_t)(2 * n + 1) * sizeof(int));
    if (!claimed || !mine || !was || !marked || !e0 || !e1 || !o0 || !o1 || !codes || !nodes || !saved) same = 0;
    for (int i = 0; same && i < claim->size; i++) claimed[claim->data[i]] = 1;
    for (int i = 0; same && i < n; i++) {
        TfLiteRegistration *reg = NULL;
        if (ctx->GetNodeAndRegistration(ctx, plan->data[i], &nodes[i], &reg) != kTfLiteOk || !nodes[i] || !reg)
            same = 0;
        else {
            mine[i] = claimed[plan->data[i]];
            was[i] = nodes[i]->might_have_side_effect;
            codes[i] = reg->builtin_code;
            /* LiteRT's own nodes only: a kernel of a delegate applied before keeps its flag */
            marked[i] = was[i] || (!mine[i] && codes[i] != kTfLiteBuiltinDelegate);
        }
    }
    same = same && !partitions(nodes, n, nt, mine, was, e0, o0) && !partitions(nodes, n, nt, mine, marked, e1, o1);
    /* the same partitions, in the same order (order.py same_partitions): claimed positions
     * i < j share a subset, or come in the same order, one way iff the other */
    for (int i = 0; same && i < n; i++)
        for (int j = i + 1; same && mine[i] && j < n; j++)
            if (mine[j] && ((e0[i] > e0[j]) - (e0[i] < e0[j])) != ((e1[i] > e1[j]) - (e1[i] < e1[j]))) same = 0;
    if (same && mode == LCL_KEEP_AUTO) {
        unsigned char *skip = calloc((size_t)nt + 1, 1);
        long long greedy = -1, kept = -1;
        if (skip) {
            computed_once(ctx, nodes, codes, n, skip);
            greedy = live_peak(ctx, nodes, n, mine, e0, o0, skip);
            kept = live_peak(ctx, nodes, n, mine, e1, o1, skip);
        }
        same = kept >= 0 && greedy > kept;
        free(skip);
    }
    if (same) {
        saved[0] = 0;
        for (int i = 0; i < n; i++) {
            if (mine[i] || was[i] || codes[i] == kTfLiteBuiltinDelegate) continue;
            saved[1 + 2 * saved[0]] = plan->data[i];
            saved[2 + 2 * saved[0]] = 0;
            saved[0]++;
            nodes[i]->might_have_side_effect = true;
        }
    }
    free(claimed), free(mine), free(was), free(marked), free(e0), free(e1), free(o0), free(o1), free(codes);
    free(nodes);
    if (!same) free(saved);
    return same ? saved : NULL;
}

/* keep_order_begin's flags back as they were, each node looked up again: nodes keep their
 * indices when others are replaced, not their addresses (the partition kernels' nodes are
 * added to LiteRT's node vector, which can move it) */
static void keep_order_end(TfLiteContext *ctx, int *saved) {
    if (!saved) return;
    for (int i = 0; i < saved[0]; i++) {
        TfLiteNode *node = NULL;
        TfLiteRegistration *reg = NULL;
        if (ctx->GetNodeAndRegistration(ctx, saved[1 + 2 * i], &node, &reg) == kTfLiteOk && node)
            node->might_have_side_effect = saved[2 + 2 * i] != 0;
    }
    free(saved);
}

/* Whether the delegate may take exported node ``n`` of subgraph ``sgi``: it is still in
 * LiteRT's execution plan (no delegate applied before took it: ``*other`` counts those),
 * its op is among the "ops" option's and it is among the "nodes" option's. */
static int asked(const delegate *d, TfLiteContext *ctx, const TfLiteIntArray *plan, int sgi, int n, int *other) {
    int in_plan = 0;
    for (int k = 0; k < plan->size && !in_plan; k++) in_plan = plan->data[k] == n;
    if (!in_plan) {
        (*other)++;
        return 0;
    }
    TfLiteNode *node;
    TfLiteRegistration *reg;
    if (ctx->GetNodeAndRegistration(ctx, n, &node, &reg) != kTfLiteOk || !reg) return 0;
    int op = reg->builtin_code == kTfLiteBuiltinCast ? LCL_OP_CAST : reg->builtin_code == kTfLiteBuiltinAdd ? LCL_OP_ADD : 0;
    if (!(d->ops & op)) return 0;
    if (!d->nodes) return 1;
    for (int k = 0; k < d->n_nodes; k++)
        if (d->nodes[2 * k] == sgi && d->nodes[2 * k + 1] == n) return 1;
    return 0;
}

static TfLiteStatus delegate_prepare(TfLiteContext *ctx, TfLiteDelegate *base) {
    delegate *d = (delegate *)base;
    char why[256] = "";
    /* before anything of the context is called (ReportError included): a runtime whose
     * structs differ is declined with a line on stderr, its graph left to LiteRT */
    if (!lcl_context_plausible(ctx, why, sizeof why)) {
        fprintf(stderr, LCL_LAYOUT_DECLINED, why);
        return kTfLiteOk;
    }
    TfLiteIntArray *plan = NULL;
    if (ctx->GetExecutionPlan(ctx, &plan) != kTfLiteOk || !plan) {
        say(d, ctx, "litecl: LiteRT's GetExecutionPlan failed");
        return kTfLiteError;
    }
    if (plan->size < 0 || plan->size > (1 << 24)) {
        snprintf(why, sizeof why, "an execution plan of %d nodes", plan->size);
        fprintf(stderr, LCL_LAYOUT_DECLINED, why);
        return kTfLiteOk;
    }
    for (int k = 0; k < plan->size; k++) { /* this delegate's own kernel: it is in the delegate list twice */
        TfLiteNode *node;
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, plan->data[k], &node, &reg) == kTfLiteOk && node && reg &&
                reg->builtin_code == kTfLiteBuiltinDelegate && node->delegate == base) {
            if (!d->quiet)
                fprintf(stderr, "INFO: litecl: this graph's CAST/ADD nodes were taken by this same litecl delegate "
                        "(it is in the delegate list twice): nothing more to take\n");
            return kTfLiteOk;
        }
    }
    int implausible;
    const lcl_subgraph *sg = match_subgraph(ctx, plan, why, sizeof why, &implausible);
    if (implausible) {
        fprintf(stderr, LCL_LAYOUT_DECLINED, why);
        return kTfLiteOk;
    }
    if (!sg) {
        /* one line, and no node claimed: LiteRT runs the subgraph itself */
        fprintf(stderr, "WARNING: litecl: this graph is not the one litecl exported from %s (%s); "
                "litecl claims none of its nodes\n", LCL_PLAN.model, why);
        return kTfLiteOk;
    }
    TfLiteIntArray *claim = malloc(sizeof(TfLiteIntArray) + (size_t)(sg->claimed.len + 1) * sizeof(int));
    if (!claim) { say(d, ctx, "litecl: out of memory"); return kTfLiteError; }
    claim->size = 0;
    int sgi = (int)(sg - LCL_SUBGRAPHS), other = 0;
    for (int i = 0; i < sg->claimed.len; i++) {
        int n = LCL_INTS[sg->claimed.off + i];
        if (!asked(d, ctx, plan, sgi, n, &other)) continue;
        /* a node whose kernel bakes the exported shapes (broadcast) is left to LiteRT
         * when LiteRT already knows other shapes for its inputs (a resized input) */
        const lcl_launch *ln = &LCL_LAUNCHES[sg->first_single + i];
        int keep = 1;
        if (ln->family >= 0) { /* a family this device computes wrong stays on LiteRT */
            pthread_mutex_lock(d->lockp);
            const char *wrong = self_test(d, ln->family);
            pthread_mutex_unlock(d->lockp);
            if (wrong[0]) {
                if (!d->quiet) fprintf(stderr, "INFO: litecl: node %d left to LiteRT: %s\n", n, wrong);
                continue;
            }
        }
        if (ln->shape_fixed) {
            const int32_t *sh = LCL_INTS + ln->shapes.off;
            /* shapes the Python delegate knew only at invoke (shape_fixed 2): LiteRT prepares
             * nodes after a dynamic tensor at invoke, so with AllowDynamicTensors the shapes
             * here may not be the ones the kernel will see; without it LiteRT propagated
             * every shape before this Prepare (a static graph: export.py delegate_flags) and
             * runs it again after a resize, so the check below holds as for shape_fixed 1
             * (nmp, star_trek, lyra's second signature: claimed as the Python delegate) */
            int dynamic = ln->shape_fixed == 2 && (d->base.flags & kTfLiteDelegateFlagsAllowDynamicTensors);
            int callee = ln->shape_fixed == 3; /* litecl_plan.h */
            char now[96] = "", then[96] = ""; /* the first input not at its exported shape */
            int off = -1;
            for (int a = 0; a < ln->inputs.len && keep; a++) {
                off = LCL_INTS[ln->inputs.off + a];
                const TfLiteIntArray *dims = ctx->tensors[off].dims;
                int rank = *sh++;
                keep = dims && dims->size == rank && !memcmp(dims->data, sh, (size_t)rank * sizeof(int));
                if (!keep) {
                    if (dims) dims_text(dims->data, dims->size, now, sizeof now);
                    dims_text(sh, rank, then, sizeof then);
                }
                sh += rank;
            }
            /* why the kernel holds at the exported shapes only (lcl_launch.fixed_elements) */
            char what[128];
            if (!keep && ln->fixed_elements > 0 && ln->inputs.len == 2 && !elementwise_still(ctx, ln))
                snprintf(what, sizeof what, "its operands broadcast and its kernel is elementwise (exported "
                         "for operands of one shape)");
            else if (ln->fixed_elements > 0)
                snprintf(what, sizeof what, "its kernel's source depends on the exported shapes, not only their "
                         "%d elements", (int)ln->fixed_elements);
            else
                snprintf(what, sizeof what, "its kernel compiles in the exported shapes%s",
                         ln->fixed_elements ? "" : " (a broadcast)");
            if (!keep && !d->quiet) /* LiteRT prepares at the model's own shapes first (a resize later) */
                fprintf(stderr, "INFO: litecl: node %d left to LiteRT at these input shapes (tensor %d is %s, "
                        "exported at %s): %s\n", n, off, now, then, what);
            else if (dynamic && !d->quiet)
                fprintf(stderr, "INFO: litecl: node %d left to LiteRT: its input shapes are known only at "
                        "invoke and %s\n", n, what);
            else if (callee && !d->quiet)
                fprintf(stderr, "INFO: litecl: node %d of subgraph %d left to LiteRT: a called subgraph's shapes "
                        "follow its caller's and %s\n", n, sgi, what);
            keep &= !dynamic && !callee;
        }
        else if (!(d->base.flags & kTfLiteDelegateFlagsAllowDynamicTensors) && ln->inputs.len == 2 &&
                 !elementwise_still(ctx, ln)) {
            /* an elementwise kernel (no shape compiled in) after a resize that made its
             * operands broadcast (x [-1, 1] + y [1, -1] exported at [1, 1] + [1, 1]), or an
             * operand it splats grow (generic_operand_holds): a static graph's Prepare runs
             * again at the new shapes, so leave it to LiteRT here rather than fail the
             * partition's prepare (kernel_prepare's check) */
            keep = 0;
            if (!d->quiet)
                fprintf(stderr, "INFO: litecl: node %d left to LiteRT at these input shapes: its operands "
                        "broadcast and its kernel is elementwise (exported for operands of one shape), or "
                        "an operand it reads as one element grew\n", n);
        }
        if (keep) claim->data[claim->size++] = n;
    }
    TfLiteStatus st = kTfLiteOk;
    pthread_mutex_lock(d->lockp);
    if (claim->size) {
        TfLiteRegistration reg;
        memset(&reg, 0, sizeof reg);
        reg.init = kernel_init;
        reg.free = kernel_free;
        reg.prepare = kernel_prepare;
        reg.invoke = kernel_invoke;
        reg.builtin_code = kTfLiteBuiltinDelegate;
        reg.custom_name = LCL_NAME;
        reg.version = 1;
        d->partitions_made = 0;
        preparing = sg;
        int *order = d->keep_order ? keep_order_begin(ctx, plan, claim, d->keep_order) : NULL;
        st = ctx->ReplaceNodeSubsetsWithDelegateKernels(ctx, reg, claim, base);
        keep_order_end(ctx, order);
        preparing = NULL;
        if (st != kTfLiteOk) say(d, ctx, "litecl: LiteRT refused litecl's node subsets");
    }
    if (other && !d->quiet)
        fprintf(stderr, "INFO: litecl: %d of the exported CAST/ADD nodes were taken by a delegate applied before "
                "litecl's\n", other);
    int seen = 0;
    for (int i = 0; i < d->n_announced; i++) seen |= d->announced[i] == ctx;
    if (st == kTfLiteOk && claim->size && !seen) {
        if (d->n_announced == d->cap_announced) {
            int cap = d->cap_announced ? 2 * d->cap_announced : 8;
            TfLiteContext **a = realloc(d->announced, (size_t)cap * sizeof *a);
            if (a) d->announced = a, d->cap_announced = cap;
        }
        if (d->n_announced < d->cap_announced) d->announced[d->n_announced++] = ctx;
        if (!d->quiet) /* backend/claims.py prepare: TFLite's own line, once per subgraph */
            fprintf(stderr, "INFO: Replacing %d out of %d node(s) with delegate (%s) node, yielding %d "
                    "partitions for the whole graph.\n", claim->size, plan->size, LCL_NAME, d->partitions_made);
    }
    pthread_mutex_unlock(d->lockp);
    free(claim);
    return st;
}

static TfLiteStatus copy_handle(TfLiteContext *ctx, TfLiteDelegate *dl, int h, TfLiteTensor *t) {
    /* litecl sets no buffer handle: LiteRT never has a stale tensor of ours to sync */
    (void)ctx, (void)dl, (void)h, (void)t;
    return kTfLiteError;
}

static void free_handle(TfLiteContext *ctx, TfLiteDelegate *dl, int *h) { (void)ctx, (void)dl, (void)h; }

/* ----------------------------------------------------------------- create / destroy */
static void delegate_free(delegate *d) {
    if (!d) return;
    free(d->announced);
    free(d->nodes);
    free(d); /* the device (context, queue, programs) stays for the process: device_entry */
}

/* Appends "name" to the comma-separated list ``buf`` of ``len`` bytes; a list that would
 * not fit ends in ", ..." instead. */
static void append_quoted(char *buf, size_t len, const char *name) {
    size_t k = strlen(buf);
    if (k >= 3 && !strcmp(buf + k - 3, "...")) return;
    size_t need = (k ? 2 : 0) + strlen(name) + 2;
    if (k + need + 6 > len) { /* room for ", ..." and the NUL stays */
        if (k + 6 <= len) memcpy(buf + k, k ? ", ..." : "...", k ? 6 : 4);
        return;
    }
    snprintf(buf + k, len - k, "%s\"%s\"", k ? ", " : "", name);
}

/* whether ``buf`` (append_quoted's list) holds an item that is ``name``, or ``name`` then
 * ": " and a reason; not a substring: Intel's "AMD EPYC" is in PoCL's "pthread-...-AMD EPYC" */
static int listed(const char *buf, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strchr(buf, '"'); p; p = strchr(p + 1, '"'))
        if (!strncmp(p + 1, name, n) && (p[1 + n] == '"' || p[1 + n] == ':')) return 1;
    return 0;
}

static int contains(const char *hay, const char *needle) {
    if (!needle || !*needle) return 1;
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && (hay[i] | 32) == (needle[i] | 32)) i++;
        if (i == n) return 1;
    }
    return 0;
}

/* Where OpenCL is looked for when no "library" option names one, in order: what TFLite's
 * GPU delegate opens (delegates/gpu/cl/opencl_wrapper.cc LoadOpenCL: libOpenCL.so, then on
 * Android libOpenCL-pixel.so), the ICD loader's versioned name on Linux, the paths Android
 * vendors install their OpenCL at (Qualcomm, Mali, PowerVR), and, last, the library the
 * export reached its device through (LCL_PLAN.library: the exporting machine's). */
static const char *const LCL_LIBRARIES[] = {
    "libOpenCL.so", "libOpenCL.so.1",
#ifdef __ANDROID__
    "libOpenCL-pixel.so", "/vendor/lib64/libOpenCL.so", "/system/vendor/lib64/libOpenCL.so",
    "/system/lib64/libOpenCL.so", "/vendor/lib64/egl/libGLES_mali.so", "/system/vendor/lib64/egl/libGLES_mali.so",
    "libGLES_mali.so", "libmali.so", "/vendor/lib64/libPVROCL.so",
#endif
    NULL};

/* Why device ``dev`` cannot run the exported kernels ("" when it can): the extensions,
 * 64-bit integers, work-group size and allocation size they use (LCL_PLAN.needs_*). */
static void device_lacks(const lcl_cl *cl, cl_device_id dev, char *why, size_t len) {
    char ext[LCL_NAME_MAX * 2] = "", profile[64] = "";
    cl->GetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    cl->GetDeviceInfo(dev, CL_DEVICE_PROFILE, sizeof profile - 1, profile, NULL);
    size_t wg = 0;
    cl_ulong alloc = 0;
    cl->GetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    cl->GetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    why[0] = 0;
    if (LCL_PLAN.needs_fp16 && !strstr(ext, "cl_khr_fp16")) snprintf(why, len, "no cl_khr_fp16");
    else if (LCL_PLAN.needs_fp64 && !strstr(ext, "cl_khr_fp64")) snprintf(why, len, "no cl_khr_fp64");
    else if (LCL_PLAN.needs_int64 && strncmp(profile, "FULL_PROFILE", 12) && !strstr(ext, "cles_khr_int64"))
        snprintf(why, len, "no 64-bit integers (%s)", profile);
    else if ((long long)wg < LCL_PLAN.max_local_size)
        snprintf(why, len, "work-groups of at most %zu, the kernels use %d", wg, (int)LCL_PLAN.max_local_size);
    else if ((double)alloc < LCL_PLAN.max_alloc_bytes)
        snprintf(why, len, "allocations of at most %llu bytes, the kernels use %.0f", (unsigned long long)alloc,
                 LCL_PLAN.max_alloc_bytes);
}

/* ``s`` without leading or trailing blanks (as Python's str.strip()), in one of three
 * static buffers (``slot``) */
static const char *trimmed(const char *s, int slot) {
    static char buf[3][LCL_NAME_MAX];
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    snprintf(buf[slot], sizeof buf[slot], "%s", s);
    size_t k = strlen(buf[slot]);
    while (k && (buf[slot][k - 1] == ' ' || buf[slot][k - 1] == '\t' || buf[slot][k - 1] == '\n')) buf[slot][--k] = 0;
    return buf[slot];
}

static int type_matches(const lcl_cl *cl, cl_device_id dev, const char *type) {
    cl_device_type t = 0;
    cl->GetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    return !strcmp(type, "any") || (!strcmp(type, "gpu") && (t & CL_DEVICE_TYPE_GPU)) ||
           (!strcmp(type, "cpu") && (t & CL_DEVICE_TYPE_CPU));
}

#define LCL_MAX_CANDIDATES 16

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    char platform_name[LCL_NAME_MAX], device_name[LCL_NAME_MAX];
} candidate;

/* In the library opened into ``e``: appends to ``out`` (``*n`` of them so far) each device
 * not there yet whose platform and device names contain the options' (when given), of
 * ``type``, that can run the kernels (device_lacks). Notes each device passed over in
 * ``seen`` (name: why) and each platform in ``platforms``. */
static void pick_devices(device_entry *e, cl_platform_id *plats, cl_uint np, const char *type, candidate *out, int *n,
                         char *seen, size_t len, char *platforms, size_t plen) {
    for (cl_uint i = 0; i < np; i++) {
        char pname[LCL_NAME_MAX] = "";
        e->cl.GetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        if (!listed(platforms, pname)) append_quoted(platforms, plen, pname);
        if (!contains(pname, e->platform)) continue;
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (e->cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd && j < 16; j++) {
            char dname[LCL_NAME_MAX] = "", lack[256] = "", note[LCL_NAME_MAX + 300];
            int dup = 0;
            for (int c = 0; c < *n; c++) dup |= out[c].device == devs[j];
            if (dup) continue;
            e->cl.GetDeviceInfo(devs[j], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
            if (!contains(dname, e->device) || !type_matches(&e->cl, devs[j], type)) {
                snprintf(note, sizeof note, "%s: %s", dname, contains(dname, e->device) ? "not of device_type" :
                         "not the device option's");
                if (!listed(seen, dname)) append_quoted(seen, len, note);
                continue;
            }
            device_lacks(&e->cl, devs[j], lack, sizeof lack);
            if (!lack[0]) { /* a device whose compiler failed litecl's probe where the plan was exported */
                char drv[LCL_NAME_MAX] = "";
                e->cl.GetDeviceInfo(devs[j], CL_DRIVER_VERSION, sizeof drv - 1, drv, NULL);
                for (int r = 0; r < LCL_PLAN.n_refused && !lack[0]; r++) {
                    const char *const *q = LCL_PLAN.refused + 4 * r;
                    if (!strcmp(trimmed(pname, 0), q[0]) && !strcmp(trimmed(dname, 1), q[1]) &&
                            !strcmp(trimmed(drv, 2), q[2]))
                        snprintf(lack, sizeof lack, "its compiler failed litecl's probe on the exporting machine (%s)",
                                 q[3]);
                }
            }
            if (lack[0]) {
                snprintf(note, sizeof note, "%s: %s", dname, lack);
                if (!listed(seen, note)) append_quoted(seen, len, note); /* pick_devices runs per type */
            } else if (*n < LCL_MAX_CANDIDATES) {
                candidate *c = &out[(*n)++];
                c->platform = plats[i], c->device = devs[j];
                snprintf(c->device_name, sizeof c->device_name, "%s", dname);
                snprintf(c->platform_name, sizeof c->platform_name, "%s", pname);
            }
        }
    }
}

/* The context and in-order queue of candidate ``c`` in ``e``, and the device's numbers. */
static int use_candidate(device_entry *e, const candidate *c, char *err, size_t len) {
    e->platform_id = c->platform, e->device_id = c->device;
    snprintf(e->device_name, sizeof e->device_name, "%s", c->device_name);
    snprintf(e->platform_name, sizeof e->platform_name, "%s", c->platform_name);
    e->spin_us = platform_spin_us(e->platform_name);
    e->programs = calloc((size_t)(LCL_PLAN.n_programs ? LCL_PLAN.n_programs : 1), sizeof(cl_program));
    e->family_why = NULL;
    if (!e->programs) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    cl_int st = 0;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)e->platform_id, 0};
    e->context = e->cl.CreateContext(props, 1, &e->device_id, NULL, NULL, &st);
    if (!e->context || st != CL_SUCCESS) {
        snprintf(err, len, "clCreateContext failed on %s (OpenCL error %d)", e->device_name, (int)st);
        return -1;
    }
    e->queue = e->cl.CreateCommandQueue(e->context, e->device_id, 0, &st);
    if (!e->queue || st != CL_SUCCESS) {
        snprintf(err, len, "clCreateCommandQueue failed on %s (OpenCL error %d)", e->device_name, (int)st);
        return -1;
    }
    cl_uint cu = 0;
    size_t wg = 0;
    e->driver[0] = 0;
    e->cl.GetDeviceInfo(e->device_id, CL_DRIVER_VERSION, sizeof e->driver - 1, e->driver, NULL);
    /* the device's own numbers, as the Python delegate's caps read them (ops/tiling.py
     * launch: compute_units, max_work_group_size); the exporting device's otherwise */
    e->compute_units = e->cl.GetDeviceInfo(e->device_id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL)
                           == CL_SUCCESS && cu ? (int)cu : LCL_PLAN.compute_units;
    e->max_wg = e->cl.GetDeviceInfo(e->device_id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL)
                    == CL_SUCCESS && wg ? (int)(wg > 1 << 30 ? 1 << 30 : wg) : LCL_PLAN.max_work_group_size;
    return 0;
}

/* Whether the library the export reached its device through (LCL_PLAN.library, an
 * absolute path on the exporting machine) may be opened here: only by a library compiled
 * for the exporting machine's architecture (a cross build's machine has none of its
 * libraries), and only where that file and every folder above it belong to this user or
 * root and no one else can write them (a folder others can write with the sticky bit,
 * /tmp, guards its entries' names, so the entry below it decides): on another machine
 * anyone who could create the path ran code inside the app (a fresh user's report).
 * ``why`` says why not ("" where there is no such library). */
static int exporting_library_usable(char *why, size_t len) {
    why[0] = 0;
    if (!LCL_PLAN.library[0] || LCL_PLAN.library[0] != '/') return 0;
    if (strcmp(LCL_PLAN.binary_arch, LCL_ARCH)) return 0;
    char path[4096];
    if (!realpath(LCL_PLAN.library, path)) return 0; /* not on this machine */
    uid_t me = geteuid();
    for (char *end = path + strlen(path);;) {
        struct stat st;
        if (stat(path, &st)) return 0;
        if ((st.st_uid != me && st.st_uid != 0) ||
                ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))) {
            snprintf(why, len, "%s (the exporting machine's library) not opened: %s %s", LCL_PLAN.library, path,
                     st.st_uid != me && st.st_uid != 0 ? "belongs to another user" : "can be written by others");
            return 0;
        }
        while (end > path && *end != '/') end--;
        if (end == path) {
            if (path[1] == 0) return 1;
            path[1] = 0; /* then "/" itself */
            end = path + 1;
            continue;
        }
        *end = 0;
    }
}

/* Open OpenCL and its device for the options: the "library" option's library, else the
 * first of LCL_LIBRARIES that opens and has a device for the kernels; in it, by
 * pick_devices, devices of the "device_type" option's type, or (its default) of the
 * exported target's type, then of any. Where no device was named and several can run the
 * kernels, the first whose self-test passes every exported family (self_test; ``d``'s
 * options build its programs); the first of them when none does (the failing families'
 * nodes are then left to LiteRT). Makes the context and in-order queue. 0, or -1 with
 * ``err`` naming each library and device tried. */
static int open_device(device_entry *e, delegate *d, char *err, size_t len) {
    const char *libs[sizeof LCL_LIBRARIES / sizeof *LCL_LIBRARIES + 1];
    int n_libs = 0;
    char tried[LCL_NAME_MAX] = "", seen[LCL_NAME_MAX] = "", platforms[LCL_NAME_MAX] = "";
    if (e->library[0]) libs[n_libs++] = e->library;
    else {
        for (int k = 0; LCL_LIBRARIES[k]; k++) libs[n_libs++] = LCL_LIBRARIES[k];
        char why[LCL_NAME_MAX + 200];
        if (exporting_library_usable(why, sizeof why)) libs[n_libs++] = LCL_PLAN.library;
        else if (why[0]) append_quoted(tried, sizeof tried, why);
    }
    static candidate cands[LCL_MAX_CANDIDATES], found[LCL_MAX_CANDIDATES]; /* under DEVICES_LOCK */
    int n = 0;
    /* no library, platform or device option: the exporting device where a library lists it
     * (its programs' binaries are for it; the ICD loader of a process without litecl may not
     * list the runtime litecl used, Intel's pip one, which the exported library path opens),
     * else the first library's devices */
    const int prefer = !e->library[0] && !e->platform[0] && !e->device[0] && LCL_PLAN.device && LCL_PLAN.device[0];
    lcl_cl first_cl;
    void *first_lib = NULL;
    const char *first_name = NULL;
    int n_first = 0;
    for (int k = 0; k < n_libs && !n; k++) {
        const char *lib = libs[k];
        cl_platform_id *plats = NULL;
        cl_uint np = 0;
        int m = 0;
        char why[LCL_NAME_MAX + 200];
        if (lcl_cl_open(lib, &e->cl, &e->lib, &plats, &np, why, sizeof why)) {
            append_quoted(tried, sizeof tried, why);
            free(plats);
            continue;
        }
        if (e->device_type[0])
            pick_devices(e, plats, np, e->device_type, found, &m, seen, sizeof seen, platforms, sizeof platforms);
        else {
            pick_devices(e, plats, np, LCL_PLAN.target, found, &m, seen, sizeof seen, platforms, sizeof platforms);
            pick_devices(e, plats, np, "any", found, &m, seen, sizeof seen, platforms, sizeof platforms);
        }
        free(plats);
        if (!m) {
            append_quoted(tried, sizeof tried, lib);
            continue;
        }
        int exported = -1;
        for (int c = 0; c < m && prefer && exported < 0; c++)
            if (!strcmp(found[c].device_name, LCL_PLAN.device) &&
                    (!LCL_PLAN.platform || !strcmp(found[c].platform_name, LCL_PLAN.platform)))
                exported = c;
        if (!prefer || exported >= 0) {
            if (exported > 0) { candidate t = found[0]; found[0] = found[exported]; found[exported] = t; }
            memcpy(cands, found, (size_t)m * sizeof *found);
            n = m;
            snprintf(e->opened, sizeof e->opened, "%s", lib);
        } else if (!first_lib) { /* kept in case no library lists the exporting device */
            first_cl = e->cl, first_lib = e->lib, first_name = lib, n_first = m;
            memcpy(cands, found, (size_t)m * sizeof *found);
        }
    }
    if (!n && first_lib) {
        e->cl = first_cl, e->lib = first_lib, n = n_first;
        snprintf(e->opened, sizeof e->opened, "%s", first_name);
    }
    if (!n) {
        snprintf(err, len, "no OpenCL device for litecl's kernels%s%s%s%s (libraries tried: %s; platforms: %s; "
                 "devices passed over: %s; set the library, platform, device or device_type option)",
                 e->platform[0] ? " on platform " : "", e->platform, e->device[0] ? ", device " : "", e->device,
                 tried[0] ? tried : "none", platforms[0] ? platforms : "none", seen[0] ? seen : "none");
        if (strstr(platforms, "rusticl") && !getenv("RUSTICL_ENABLE"))
            snprintf(err + strlen(err), len - strlen(err), "; Mesa's rusticl lists no device unless "
                     "RUSTICL_ENABLE names its driver (e.g. RUSTICL_ENABLE=llvmpipe)");
        /* a capability the export's kernels need: no option of this library gives it */
        const char *needs = strstr(seen, "no cl_khr_fp16") ? "float16 (cl_khr_fp16)"
                            : strstr(seen, "no cl_khr_fp64") ? "float64 (cl_khr_fp64)"
                            : strstr(seen, "no 64-bit integers") ? "64-bit integers" : NULL;
        if (needs)
            snprintf(err + strlen(err), len - strlen(err), "; this export's kernels need %s: for devices "
                     "without it export again with --device SPEC:profile=%s", needs,
                     !strncmp(needs, "float16", 7) ? "nofp16 (or profile=mobile)"
                     : !strncmp(needs, "float64", 7) ? "nofp64 (or profile=mobile)" : "noint64");
        return -1;
    }
    /* the first candidate that opens and passes the self-test (when there is a choice) */
    int chosen = -1, first = -1;
    for (int c = 0; c < n && chosen < 0; c++) {
        char why[LCL_NAME_MAX + 200];
        if (use_candidate(e, &cands[c], why, sizeof why)) {
            if (n == 1) { snprintf(err, len, "%s", why); return -1; }
            if (!d->quiet) fprintf(stderr, "INFO: litecl: passed over %s: %s\n", cands[c].device_name, why);
            continue; /* its context, if any, is kept (never released: device_entry) */
        }
        if (first < 0) first = c;
        int wrong = e->device[0] || n == 1 ? -1 : (d->dev = e, first_wrong_family(d));
        d->dev = NULL;
        if (wrong < 0) chosen = c;
        else if (!d->quiet)
            fprintf(stderr, "INFO: litecl: passed over %s: %s\n", cands[c].device_name, e->family_why[wrong]);
    }
    if (chosen < 0 && first < 0) {
        snprintf(err, len, "no OpenCL device for litecl's kernels could be opened (see the lines above)");
        return -1;
    }
    if (chosen < 0 && first != n - 1) { /* none passes: the first that opened, its wrong families refused */
        char why[LCL_NAME_MAX + 200];
        if (use_candidate(e, &cands[first], why, sizeof why)) { snprintf(err, len, "%s", why); return -1; }
    }
    if (!d->quiet && !e->library[0] && !e->platform[0] && !e->device[0]) { /* the search chose it: which */
        const int same = LCL_PLAN.device && !strcmp(e->device_name, LCL_PLAN.device);
        fprintf(stderr, "INFO: litecl: OpenCL device %s (platform %s, library %s)%s%s%s\n", e->device_name,
                e->platform_name, e->opened, same || !LCL_PLAN.device ? "" : "; exported on ",
                same || !LCL_PLAN.device ? "" : LCL_PLAN.device,
                same || !LCL_PLAN.device ? "" : ": the programs are built from source for this one");
    }
    return 0;
}

/* a new entry's locks: ``lock`` recursive (Prepare -> Replace -> init), the kernel pool's plain */
static void init_locks(device_entry *e) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&e->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_mutex_init(&e->pool_lock, NULL);
    pthread_once(&EXIT_ONCE, register_exit); /* after the runtime is loaded: before its teardown at exit */
}

/* An exported device of the other type than the export's target (``--target gpu`` run on
 * a CPU device): that type's local size and work-groups per compute unit (LCL_PLAN.type_rows,
 * ops/tiling.py LAUNCH). The kernels stride by their local size, so any fits; vector bytes
 * stay the target's (the sources were generated for them). Measured: arm64 PoCL under qemu
 * segfaulted running a GPU target's 512 work-items per group. A GPU is a GPU only (Oclgrind
 * reports every type: device.py _is_gpu). */
static void own_type_row(device_entry *e) {
    cl_device_type t = 0;
    if (!LCL_PLAN.type_rows || e->cl.GetDeviceInfo(e->device_id, CL_DEVICE_TYPE, sizeof t, &t, NULL) != CL_SUCCESS)
        return;
    const int gpu = t == CL_DEVICE_TYPE_GPU;
    if (gpu == !strcmp(LCL_PLAN.target, "gpu")) return;
    e->local_size = LCL_PLAN.type_rows[2 * gpu];
    e->groups_per_cu = LCL_PLAN.type_rows[2 * gpu + 1];
}

static pthread_mutex_t DEVICES_LOCK = PTHREAD_MUTEX_INITIALIZER;
static device_entry *DEVICES;

/* The process's entry for (library, platform, device), opened on first use. */
static device_entry *device_for(const char *library, const char *platform, const char *device, const char *type,
                                delegate *d, char *err, size_t len) {
    pthread_mutex_lock(&DEVICES_LOCK);
    device_entry *e = DEVICES;
    for (; e; e = e->next)
        if (!strcmp(e->library, library) && !strcmp(e->platform, platform) && !strcmp(e->device, device) &&
            !strcmp(e->device_type, type))
            break;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            snprintf(err, len, "out of memory");
        } else {
            snprintf(e->library, sizeof e->library, "%s", library);
            snprintf(e->platform, sizeof e->platform, "%s", platform);
            snprintf(e->device, sizeof e->device, "%s", device);
            snprintf(e->device_type, sizeof e->device_type, "%s", type);
            if (open_device(e, d, err, len)) {
                free(e); /* the library, any context and programs stay: a runtime may have started threads */
                e = NULL;
            } else {
                init_locks(e);
                e->local_size = LCL_PLAN.local_size;
                e->groups_per_cu = LCL_PLAN.groups_per_cu;
                e->vec_bytes = LCL_PLAN.vec_bytes;
                e->group_bytes = LCL_PLAN.group_bytes;
                own_type_row(e);
                e->serial = 1;
                e->one_thread = strstr(e->platform_name, "Oclgrind") != NULL;
                e->pid = getpid();
                /* as litecl.Delegate's (device.py FORK_MESSAGE): PoCL's worker threads are
                 * gone in a fork()ed child, whose first wait then blocks for good */
                snprintf(e->fork_message, sizeof e->fork_message,
                         "litecl: this process was fork()ed after the OpenCL device %.200s (platform %.200s) was "
                         "opened, and an OpenCL context cannot be used across fork(); load the delegate "
                         "in a process that had not opened the device (multiprocessing's 'spawn' or "
                         "'forkserver' start method)", e->device_name, e->platform_name);
                e->next = DEVICES;
                DEVICES = e;
            }
        }
    }
    pthread_mutex_unlock(&DEVICES_LOCK);
    return e;
}

/* Node ``node``'s builtin operator code in subgraph ``s`` as exported (its fingerprint:
 * tensor and node counts, then per node index, code, version, inputs, outputs, and for
 * an ADD its activation and pot_scale_int16; export.py ``fingerprint``), or -1. */
static int exported_builtin(const lcl_subgraph *s, int node) {
    const int32_t *f = LCL_INTS + s->fingerprint.off, *end = f + s->fingerprint.len;
    if (end - f < 2) return -1;
    int n_nodes = f[1];
    f += 2;
    for (int k = 0; k < n_nodes && end - f >= 4; k++) {
        int index = f[0], code = f[1];
        f += 3;                       /* index, code, version */
        if (end - f < 1) return -1;
        f += 1 + f[0];                /* inputs */
        if (end - f < 1) return -1;
        f += 1 + f[0];                /* outputs */
        if (code == kTfLiteBuiltinAdd) f += 2;
        if (index == node) return code;
        if (f > end) return -1;
    }
    return -1;
}

/* A yes/no option's value: 1 or 0, -1 when it is neither (then refused, naming these). */
#define LCL_FLAG_VALUES "1, 0, true, false, yes, no, on or off"
static int flag_value(const char *v) { /* in any case, as env_flag and litecl's Python read them */
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return 1;
        if (!strcasecmp(v, no[i])) return 0;
    }
    return -1;
}

/* A yes/no environment variable read as litecl's Python reads one (backend/errors.py
 * env_flag): unset, empty or blank gives dflt; the words of flag_value in any case, blanks
 * around them ignored, give 1 or 0; anything else -1 (then refused, naming the variable). */
static int env_flag(const char *name, int dflt) {
    const char *v = getenv(name);
    char word[8];
    size_t len;
    if (!v) return dflt;
    while (*v == ' ' || (*v >= '\t' && *v <= '\r')) v++;
    len = strlen(v);
    while (len && (v[len - 1] == ' ' || (v[len - 1] >= '\t' && v[len - 1] <= '\r'))) len--;
    if (!len) return dflt;
    if (len >= sizeof word) return -1;
    for (size_t i = 0; i < len; i++) word[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] - 'A' + 'a' : v[i]);
    word[len] = 0;
    return flag_value(word);
}

/* The "ops" option ("CAST", "ADD", "CAST,ADD") as LCL_OP_* bits; -1 when it names another. */
static int parse_ops(const char *v) {
    int ops = 0;
    while (*v) {
        size_t n = strcspn(v, ",");
        const char *w = v;
        size_t m = n;
        while (m && *w == ' ') w++, m--; /* "ADD, CAST": spaces around an item */
        while (m && w[m - 1] == ' ') m--;
        if (m == 4 && !strncasecmp(w, "CAST", 4)) ops |= LCL_OP_CAST;
        else if (m == 3 && !strncasecmp(w, "ADD", 3)) ops |= LCL_OP_ADD;
        else return -1;
        if (v[n] == ',' && !v[n + 1]) return -1; /* "ADD,": an empty item, as ",ADD" */
        v += n + (v[n] == ',');
    }
    return ops ? ops : -1;
}

/* The "nodes" option, "SUBGRAPH=NODE,NODE;SUBGRAPH=NODE" ("0=1,5;1=2"), into (subgraph,
 * node) pairs; -1 when malformed. */
static int parse_nodes(delegate *d, const char *v) {
    size_t cap = strlen(v) + 1;
    d->nodes = malloc(2 * cap * sizeof(int));
    if (!d->nodes) return -1;
    d->n_nodes = 0;
    while (*v) {
        char *end;
        if (*v < '0' || *v > '9') return -1;
        long sg = strtol(v, &end, 10);
        if (end == v || *end != '=' || sg < 0 || sg > 1 << 20) return -1;
        v = end + 1;
        do { /* a number after every separator: "0=1," and "0=1;" are refused as ";0=1" is */
            if (*v < '0' || *v > '9') return -1;
            long n = strtol(v, &end, 10);
            if (end == v || n < 0 || n > 1 << 24) return -1;
            d->nodes[2 * d->n_nodes] = (int)sg, d->nodes[2 * d->n_nodes + 1] = (int)n, d->n_nodes++;
            v = end;
        } while (*v == ',' && ++v);
        if (*v == ';' && v[1]) v++;
        else if (*v) return -1;
    }
    return 0;
}

/* TFLite's external delegate entry point (delegates/external/external_delegate_interface.h).
 * Options: library (the OpenCL library: a path, or a name the dynamic loader finds),
 * platform and device (substrings of their names, case-insensitive), memory ("auto",
 * "in_place", "copy"), binaries (yes/no: try the exported program binaries first),
 * quiet (yes/no: no Replacing line; yes/no values are 1, 0, true, false, yes, no, on,
 * off, anything else is refused; without it, LITECL_QUIET as env_flag reads it, a value
 * that is no yes/no word refused), an empty value for any option is refused, spin_us (how long an invoke polls for its commands,
 * yielding the CPU, before it blocks in clFinish: default by runtime, SPIN_ROWS (1000, Intel's CPU runtime 0); 0 blocks at once), keep_order (yes/no
 * or auto, default auto: LiteRT's own nodes run in the model's order, keep_order_begin; auto only
 * where LiteRT's greedy order makes more bytes live at once), ops ("CAST", "ADD" or "CAST,ADD":
 * the operators it may take), nodes ("0=1,5;1=2": only these nodes of these subgraphs, as
 * placement() numbers them). Defaults: delegate_options.json's, baked into plan.c.
 * It may follow other delegates: it claims the exported nodes they left (asked).
 * Returns NULL after one line to report_error (or stderr) on any failure; an untested
 * LiteRT / TensorFlow version (litert_check.h) is also said on stderr. */
LCL_EXPORT TfLiteDelegate *tflite_plugin_create_delegate(char **keys, char **values, size_t n,
                                                         void (*report_error)(const char *)) {
    delegate *d = calloc(1, sizeof *d);
    char err[LCL_MSG_MAX + 64] = "";
    if (!d) {
        snprintf(err, sizeof err, "litecl: out of memory");
        goto fail;
    }
    /* OpenCL and its device are found on the machine that loads this (open_device): the
     * exporting machine's library and device names are not defaults */
    const char *library = "", *platform = "", *device = "", *device_type = "";
    const char *memory = "auto";
    d->use_binaries = 1;
    d->spin_us = -1; /* the device's SPIN_ROWS row */
    d->keep_order = LCL_KEEP_ORDER_DEFAULT;
    d->ops = LCL_OP_CAST | LCL_OP_ADD;
    int env_quiet = env_flag("LITECL_QUIET", 0), quiet_given = 0; /* the quiet option wins over it */
    int cache_given = 0, untested_runtime = 0;
    d->quiet = env_quiet > 0;
    if (n && (!keys || !values)) { /* LiteRT's loader never passes these; a C caller may */
        snprintf(err, sizeof err, "litecl: %zu options given without their %s array", n, keys ? "values" : "keys");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if (!keys[i]) {
            snprintf(err, sizeof err, "litecl: option %zu has no key (a NULL pointer)", i);
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(keys[i], keys[j])) { /* the last one silently won */
                snprintf(err, sizeof err, "litecl: the %s option is given twice", keys[i]);
                goto fail;
            }
        const char *k = keys[i], *v = values[i] ? values[i] : "";
        int known = !strcmp(k, "library") || !strcmp(k, "platform") || !strcmp(k, "device") ||
                    !strcmp(k, "memory") || !strcmp(k, "binaries") || !strcmp(k, "quiet") || !strcmp(k, "spin_us") ||
                    !strcmp(k, "keep_order") || !strcmp(k, "ops") || !strcmp(k, "nodes") || !strcmp(k, "device_type") ||
                    !strcmp(k, "cache_dir") || !strcmp(k, "untested_runtime");
        if (known && !*v) { /* every option the same way: an empty value is no value */
            snprintf(err, sizeof err, "litecl: the %s option is empty; %s", k,
                     !strcmp(k, "library") ? "name the OpenCL library (a path, or a name the dynamic loader finds)"
                     : !strcmp(k, "platform") || !strcmp(k, "device") ? "give a substring of its name, or leave "
                                                                        "the option out"
                     : !strcmp(k, "memory") ? "expected auto, in_place or copy"
                     : !strcmp(k, "spin_us") ? "expected a whole number of microseconds from 0 to 1000000"
                     : !strcmp(k, "keep_order") ? "expected " LCL_FLAG_VALUES ", or auto"
                     : !strcmp(k, "ops") ? "expected CAST, ADD or CAST,ADD"
                     : !strcmp(k, "device_type") ? "expected gpu, cpu or any"
                     : !strcmp(k, "cache_dir") ? "name a folder for compiled programs, or leave the option out"
                     : !strcmp(k, "nodes") ? "expected SUBGRAPH=NODE,NODE;SUBGRAPH=NODE, e.g. 0=1,5;1=2"
                     : "expected " LCL_FLAG_VALUES);
            goto fail;
        }
        if ((!strcmp(k, "library") || !strcmp(k, "platform") || !strcmp(k, "device")) &&
            strlen(v) >= LCL_NAME_MAX) {
            snprintf(err, sizeof err, "litecl: the %s option is %zu bytes long; at most %d are taken", k, strlen(v),
                     LCL_NAME_MAX - 1);
            goto fail;
        }
        if (!strcmp(k, "device_type")) { /* words in any case, as the yes/no values */
            device_type = !strcasecmp(v, "gpu") ? "gpu" : !strcasecmp(v, "cpu") ? "cpu"
                          : !strcasecmp(v, "any") ? "any" : NULL;
            if (!device_type) {
                snprintf(err, sizeof err, "litecl: device_type \"%s\" is not gpu, cpu or any", v);
                goto fail;
            }
        } else if (!strcmp(k, "cache_dir")) {
            if (strlen(v) >= sizeof d->cache_dir) {
                snprintf(err, sizeof err, "litecl: the cache_dir option is %zu bytes long; at most %zu are taken",
                         strlen(v), sizeof d->cache_dir - 1);
                goto fail;
            }
            if (strcasecmp(v, "none") && v[0] != '/') { /* an app's current folder is often "/" */
                snprintf(err, sizeof err, "litecl: cache_dir \"%s\" is not an absolute path; name the folder "
                         "by its full path (an Android app: its getCacheDir()), or none", v);
                goto fail;
            }
            snprintf(d->cache_dir, sizeof d->cache_dir, "%s", strcasecmp(v, "none") ? v : "");
            cache_given = 1;
        } else if (!strcmp(k, "library")) library = v;
        else if (!strcmp(k, "platform")) platform = v;
        else if (!strcmp(k, "device")) device = v;
        else if (!strcmp(k, "memory")) memory = v;
        else if (!strcmp(k, "keep_order") && !strcasecmp(v, "auto")) d->keep_order = LCL_KEEP_AUTO;
        else if (!strcmp(k, "binaries") || !strcmp(k, "quiet") || !strcmp(k, "keep_order") ||
                 !strcmp(k, "untested_runtime")) {
            int f = flag_value(v);
            if (f < 0) {
                snprintf(err, sizeof err, "litecl: %s \"%s\" is not a yes/no value; expected " LCL_FLAG_VALUES "%s",
                         k, v, !strcmp(k, "keep_order") ? ", or auto" : "");
                goto fail;
            }
            if (!strcmp(k, "binaries")) d->use_binaries = f;
            else if (!strcmp(k, "untested_runtime")) untested_runtime = f;
            else if (!strcmp(k, "keep_order")) d->keep_order = f ? LCL_KEEP_YES : LCL_KEEP_NO;
            else d->quiet = f, quiet_given = 1;
        } else if (!strcmp(k, "spin_us")) {
            char *end = NULL;
            d->spin_us = strtol(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || d->spin_us < 0 || d->spin_us > 1000000) { /* " 5" too */
                snprintf(err, sizeof err, "litecl: spin_us \"%s\" is not a whole number of microseconds from 0 "
                         "to 1000000", v);
                goto fail;
            }
        } else if (!strcmp(k, "ops")) {
            if ((d->ops = parse_ops(v)) < 0) {
                snprintf(err, sizeof err, "litecl: ops \"%s\" names no operator litecl runs; expected CAST, ADD "
                         "or CAST,ADD", v);
                goto fail;
            }
        } else if (!strcmp(k, "nodes")) {
            free(d->nodes);
            d->nodes = NULL;
            if (parse_nodes(d, v)) {
                snprintf(err, sizeof err, "litecl: nodes \"%s\" is not SUBGRAPH=NODE,NODE;SUBGRAPH=NODE "
                         "(e.g. 0=1,5;1=2)", v);
                goto fail;
            }
        } else {
            snprintf(err, sizeof err, "litecl: unknown option \"%s\"; expected library, platform, device, "
                     "device_type, cache_dir, memory, binaries, quiet, spin_us, keep_order, ops, nodes, untested_runtime", k);
            goto fail;
        }
    }
    if (env_quiet < 0 && !quiet_given) { /* as litecl.Delegate(quiet=None) refuses it */
        snprintf(err, sizeof err, "litecl: LITECL_QUIET must be one of " LCL_FLAG_VALUES " (or unset), got '%s'",
                 getenv("LITECL_QUIET"));
        goto fail;
    }
#ifndef __ANDROID__ /* Linux: litecl's cache folder; an Android app names its own (cache_dir) */
    if (!cache_given) { /* LITECL_CACHE_DIR and LITECL_NO_CACHE as litecl's Python reads them (backend/cache.py) */
        const char *own = getenv("LITECL_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (env_flag("LITECL_NO_CACHE", 0) == 1) d->cache_dir[0] = 0;
        else if (own && own[0] == '/') snprintf(d->cache_dir, sizeof d->cache_dir, "%s/native", own);
        else if (xdg && xdg[0] == '/') snprintf(d->cache_dir, sizeof d->cache_dir, "%s/litecl/native", xdg);
        else if (home && home[0] == '/') snprintf(d->cache_dir, sizeof d->cache_dir, "%s/.cache/litecl/native", home);
    }
#else
    (void)cache_given;
#endif
    { /* a cache folder that is not this user's alone to write is neither read nor written
       * (as backend/cache.py _refused): a binary planted there ran in place of the kernel, and
       * a planted "ok" verdict passed the self-test (a fresh user's report); an absent folder
       * is made this user's only (0700) by the first store */
        struct stat st;
        if (d->cache_dir[0] && !stat(d->cache_dir, &st) &&
                (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))) {
            fprintf(stderr, "WARNING: litecl: the cache folder %s is %s; litecl does not use it (name a folder of "
                    "this user's that others cannot write with the cache_dir option, or cache_dir=none)\n",
                    d->cache_dir, !S_ISDIR(st.st_mode) ? "not a folder" : "not this user's or others can write it");
            d->cache_dir[0] = 0;
        }
    }
    /* "nodes" naming a subgraph or node the exported model lacks: a typo that would
     * otherwise leave every node to LiteRT without a word */
    for (int k = 0; k < d->n_nodes; k++) {
        int sg = d->nodes[2 * k], node = d->nodes[2 * k + 1];
        if (sg >= LCL_PLAN.n_subgraphs) {
            snprintf(err, sizeof err, "litecl: nodes names subgraph %d, but %s has %d subgraph(s) LiteRT prepares "
                     "(0..%d)", sg, LCL_PLAN.model, LCL_PLAN.n_subgraphs, LCL_PLAN.n_subgraphs - 1);
            goto fail;
        }
        if (node >= LCL_SUBGRAPHS[sg].n_nodes) {
            snprintf(err, sizeof err, "litecl: nodes names node %d of subgraph %d, which has %d node(s) (0..%d)",
                     node, sg, LCL_SUBGRAPHS[sg].n_nodes, LCL_SUBGRAPHS[sg].n_nodes - 1);
            goto fail;
        }
        int code = exported_builtin(&LCL_SUBGRAPHS[sg], node);
        if (code >= 0 && code != kTfLiteBuiltinCast && code != kTfLiteBuiltinAdd) { /* as litecl.Delegate's nodes= */
            char num[16];
            snprintf(err, sizeof err, "litecl: nodes names node %d of subgraph %d, a %s node: litecl takes CAST and "
                     "ADD nodes only", node, sg, named(LCL_OP_NAMES, LCL_N_OP_NAMES, code, num, sizeof num));
            goto fail;
        }
    }
    if (!strcasecmp(memory, "auto")) d->in_place = LCL_PLAN.in_place;
    else if (!strcasecmp(memory, "in_place")) d->in_place = 1;
    else if (!strcasecmp(memory, "copy")) d->in_place = 0;
    else {
        snprintf(err, sizeof err, "litecl: unknown memory \"%s\"; expected auto, in_place or copy", memory);
        goto fail;
    }
    d->align = LCL_PLAN.in_place_align > 0 ? LCL_PLAN.in_place_align : 64;
    char why[LCL_MSG_MAX];
    /* the runtime this library was loaded into: an untested LiteRT / TensorFlow is refused
     * (its structs may differ from tflite_abi.h's); where no version can be found, each
     * Prepare's layout check (lcl_context_plausible) is what stands guard */
    int version = lcl_litert_version_check(LCL_PLAN.tested, LCL_PLAN.n_tested, why, sizeof why);
    if (version < 0 && untested_runtime) { /* the user's choice: guarded as an unknown version is */
        fprintf(stderr, "WARNING: litecl: %s; untested_runtime is on: litecl relies on each Prepare's check that "
                "LiteRT's TfLiteContext reads as its structs expect\n", why);
        version = 1;
    }
    if (version < 0) {
        snprintf(err, sizeof err, "litecl: %s (or, at your risk, the option untested_runtime=yes)", why);
        fprintf(stderr, "ERROR: %s\n", err); /* also when the app swallows load_delegate's ValueError */
        if (report_error) report_error(err);
        delegate_free(d);
        return NULL;
    }
    static int said_version; /* once per process, not per delegate */
    if (version == 0 && !d->quiet && !__sync_lock_test_and_set(&said_version, 1))
        fprintf(stderr, "INFO: litecl: %s: litecl relies on each Prepare's check that LiteRT's TfLiteContext "
                "reads as its structs expect\n", why);
    d->dev = device_for(library, platform, device, device_type, d, why, sizeof why);
    if (!d->dev) {
        snprintf(err, sizeof err, "litecl: %s", why);
        goto fail;
    }
    d->lockp = &d->dev->lock;
    d->base.data_ = d;
    d->base.Prepare = delegate_prepare;
    d->base.CopyFromBufferHandle = copy_handle;
    d->base.CopyToBufferHandle = copy_handle;
    d->base.FreeBufferHandle = free_handle;
    /* 0 for a static graph: LiteRT then runs this Prepare again at the new shapes after a
     * resize (export.py delegate_flags), where a compiled-in broadcast is left to LiteRT */
    d->base.flags = LCL_PLAN.delegate_flags;
    return &d->base;
fail:
    if (report_error) report_error(err);
    else fprintf(stderr, "ERROR: %s\n", err);
    delegate_free(d);
    return NULL;
}

LCL_EXPORT void tflite_plugin_destroy_delegate(TfLiteDelegate *delegate_) {
    delegate_free((delegate *)delegate_);
}

#ifdef LITECL_IN_PROCESS /* backend/runtime.py builds the library with it; an export without */
/* ----------------------------------------------------------------- in process */
/* litecl.Delegate (backend/delegate.py) runs its partitions on this runtime, loaded with
 * ctypes (backend/runtime.py): the Python delegate's Prepare claims the nodes and makes
 * each partition (lcl_partition_new, from its kernel's init); the partition kernel's
 * prepare and invoke are kernel_prepare and kernel_invoke, which ask the planner (a
 * Python callback) for the launches whenever the input shapes change. OpenCL is reached
 * through the ICD loader pyopencl uses, on pyopencl's context and queue. */

/* the partition kernel's init in Python (backend/delegate.py _INIT): every partition
 * lcl_inprocess_init does not make (one function for the process) */
/* writes the partition (or nothing) to *out: a KeyboardInterrupt raised at the callback's first
 * line makes ctypes return garbage, which LiteRT took as the partition (a segfault, a fresh
 * user's Ctrl-C); *out stays NULL then */
static int (*PYTHON_INIT)(TfLiteContext *ctx, const char *buffer, size_t length, void **out);

/* A delegate with no exported plan: its partitions' launches come from ``planner``; its
 * errors go to ``reporter``; profiled invokes to ``profiler``; ``init`` (PYTHON_INIT) makes
 * the partitions no Prepare expected. */
LCL_EXPORT void *lcl_inprocess_new(int64_t key, void *planner, void *reporter, void *profiler, int spin_us,
                                   void *init) {
    delegate *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->key = key;
    memcpy(&PYTHON_INIT, &init, sizeof init);
    memcpy(&d->planner, &planner, sizeof planner);
    memcpy(&d->reporter, &reporter, sizeof reporter);
    memcpy(&d->profiler, &profiler, sizeof profiler);
    d->spin_us = spin_us;
    d->quiet = 1;
    return d;
}

static void recall_unbind(delegate *d);

LCL_EXPORT void lcl_inprocess_free(void *d_) {
    delegate *d = d_;
    if (!d) return;
    recall_unbind(d);
    free(d);
}

LCL_EXPORT void lcl_inprocess_profile(void *d_, int on) { ((delegate *)d_)->profile = on; }


/* The device (pyopencl's context, queue and device handles, reached through the OpenCL
 * library ``library``) partitions may run on: its index for the planner's
 * lcl_inprocess_plan.device (the process's: one entry per queue), or -1 with ``err``. */
LCL_EXPORT int lcl_inprocess_device(void *d_, const char *library, void *context, void *queue, void *device,
                                    int compute_units, int max_wg, int local_size, int groups_per_cu,
                                    int vec_bytes, int group_bytes, int serial,
                                    const char *fork_message, char *err, size_t err_len) {
    (void)d_;
    pthread_mutex_lock(&INPROCESS_LOCK);
    int i = 0;
    while (i < N_INPROCESS && INPROCESS[i]->queue != (cl_command_queue)queue) i++;
    device_entry *e = i < N_INPROCESS ? INPROCESS[i] : NULL;
    if (!e && N_INPROCESS == LCL_MAX_INPROCESS) {
        snprintf(err, err_len, "more than %d OpenCL queues in one process", LCL_MAX_INPROCESS);
    } else if (!e) {
        e = calloc(1, sizeof *e);
        cl_platform_id *plats = NULL;
        cl_uint np = 0;
        if (!e) {
            snprintf(err, err_len, "out of memory");
        } else if (lcl_cl_open(library, &e->cl, &e->lib, &plats, &np, err, err_len)) {
            free(e);
            e = NULL;
        } else {
            free(plats);
            snprintf(e->opened, sizeof e->opened, "%s", library);
            e->context = context;
            e->queue = queue;
            e->device_id = device;
            cl_platform_id platform = NULL;
            if (e->cl.GetDeviceInfo(e->device_id, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL) == CL_SUCCESS)
                e->cl.GetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof e->platform_name - 1, e->platform_name, NULL);
            e->spin_us = platform_spin_us(e->platform_name);
            init_locks(e);
            e->pid = getpid();
            INPROCESS[N_INPROCESS++] = e;
        }
    }
    if (e) {
        e->compute_units = compute_units, e->max_wg = max_wg;
        e->local_size = local_size, e->groups_per_cu = groups_per_cu, e->vec_bytes = vec_bytes;
        e->group_bytes = group_bytes;
        e->serial = serial;
        snprintf(e->fork_message, sizeof e->fork_message, "%s", fork_message ? fork_message : "");
    }
    pthread_mutex_unlock(&INPROCESS_LOCK);
    return e ? i : -1;
}

/* Hold (``on`` 1) or let go (0) runtime device ``index``'s lock, the one a one-thread
 * device's invokes take (device_entry.serial): Python's own commands on such a device
 * (Device.exclusive: self-test, probes, cost measurement) and partitions' invokes run one
 * at a time (Oclgrind crashed in its WorkGroup when a self-test ran beside another
 * thread's invoke, measured). 0, or -1 for no such device. */
LCL_EXPORT int lcl_inprocess_hold(int index, int on) {
    pthread_mutex_lock(&INPROCESS_LOCK);
    device_entry *e = index >= 0 && index < N_INPROCESS ? INPROCESS[index] : NULL;
    pthread_mutex_unlock(&INPROCESS_LOCK);
    if (!e) return -1;
    if (on) pthread_mutex_lock(&e->lock);
    else pthread_mutex_unlock(&e->lock);
    return 0;
}

/* How long an invoke on runtime device ``index`` polls before clFinish without a
 * spin_us option (SPIN_ROWS, by its platform's name); -1 for no such device. */
LCL_EXPORT long lcl_inprocess_device_spin_us(int index) {
    pthread_mutex_lock(&INPROCESS_LOCK);
    long v = index >= 0 && index < N_INPROCESS ? INPROCESS[index]->spin_us : -1;
    pthread_mutex_unlock(&INPROCESS_LOCK);
    return v;
}

/* The plan for input key ``key`` (``n`` ints): kernel_prepare uses it instead of asking
 * the planner when its key is that one (a second construction: no callback). Without
 * memory for the key the planner is asked, as without a preset. */
static void set_preset(partition *p, const lcl_inprocess_plan *preset, const int32_t *key, int n) {
    p->preset_key = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!p->preset_key) return;
    memcpy(p->preset_key, key, (size_t)n * sizeof(int));
    p->n_preset_key = n;
    p->preset = *preset;
}

/* The partition kernel's user data for nodes ``order`` (execution order) writing
 * ``outputs`` that LiteRT reads; ``key``: the planner's name for it. NULL after
 * reporting why. */
LCL_EXPORT void *lcl_partition_new(void *d_, TfLiteContext *ctx, int64_t key, const int *order, int n,
                                   const TfLiteIntArray *outputs, int device, const lcl_inprocess_plan *preset,
                                   const int *preset_key, int n_preset_key) {
    delegate *d = d_;
    device_entry *dev = inprocess_device(device);
    if (!dev) {
        say(d, ctx, "litecl: partition kernel: no device %d", device);
        return NULL;
    }
    partition *p = partition_make(d, dev, ctx, order, n, outputs);
    if (!p) return NULL;
    p->key = key;  /* its memory policy comes with each plan */
    if (preset && preset_key && n_preset_key >= 0) set_preset(p, preset, preset_key, n_preset_key);
    return p;
}

LCL_EXPORT void lcl_partition_free(void *p) { partition_free(p); }

/* What the Prepare running on this thread expects LiteRT to form (lcl_inprocess_expect):
 * LiteRT calls the partition kernels' init inside ReplaceNodeSubsetsWithDelegateKernels,
 * on the thread of the delegate's Prepare. */
typedef struct {
    delegate *d;
    const void *owner;                 /* the TfLiteDelegate the Prepare is for */
    const lcl_expected *expect;
    const int32_t *ints;
    int n;
    int64_t key;                       /* the planner key of expect[0]; expect[i]'s is + i */
    void **made;                       /* per expected partition: the one made, or NULL */
    struct prepared *fast;             /* a recalled Prepare's log entry (lcl_inprocess_prepare) */
} expectation;
static void *recall_extra(const expectation *x, TfLiteContext *ctx, const TfLiteDelegateParams *params);
LCL_EXPORT int64_t lcl_new_keys(int n);
static __thread expectation EXPECT;

/* The partitions delegate ``d``'s Prepare for TfLiteDelegate ``owner`` expects LiteRT to
 * form (``n`` of ``expect``, spans into ``ints``; planner keys ``key``, ``key`` + 1, ...):
 * the partition kernel's init (lcl_inprocess_init) makes one whose nodes and outputs
 * match an entry not yet made, with the entry's preset, and stores it in ``made``; any
 * other partition goes to Python's init. ``n`` 0 ends it (after
 * ReplaceNodeSubsetsWithDelegateKernels). */
LCL_EXPORT void lcl_inprocess_expect(void *d, const void *owner, const lcl_expected *expect, const int32_t *ints,
                                     int n, int64_t key, void **made) {
    expectation e = {d, owner, expect, ints, n > 0 ? n : 0, key, made, NULL};
    if (n <= 0) memset(&e, 0, sizeof e);
    EXPECT = e;
}

static int span_is(const int32_t *ints, lcl_span sp, const TfLiteIntArray *a) {
    return sp.len == a->size && !memcmp(ints + sp.off, a->data, (size_t)a->size * sizeof(int));
}

/* The in-process partition kernel's init: an expected partition (lcl_inprocess_expect)
 * is made here, any other by Python's init. */
LCL_EXPORT void *lcl_inprocess_init(TfLiteContext *ctx, const char *buffer, size_t length) {
    const TfLiteDelegateParams *params = (const TfLiteDelegateParams *)buffer;
    const expectation *x = &EXPECT;
    if (x->d && params->delegate == x->owner) {
        for (int i = 0; i < x->n; i++) {
            const lcl_expected *e = &x->expect[i];
            if (x->made[i] || !span_is(x->ints, e->nodes, params->nodes_to_replace) ||
                    !span_is(x->ints, e->outputs, params->output_tensors))
                continue;
            device_entry *dev = inprocess_device(e->device);
            if (!dev) break;
            partition *p = partition_make(x->d, dev, ctx, x->ints + e->order.off, e->order.len,
                                          params->output_tensors);
            if (!p) return NULL; /* it said why */
            p->key = x->key + i;
            if (e->preset) set_preset(p, e->preset, x->ints + e->preset_key.off, e->preset_key.len);
            x->made[i] = p;
            return p;
        }
        if (x->fast) return recall_extra(x, ctx, params);
    }
    void *made = NULL;
    if (PYTHON_INIT) PYTHON_INIT(ctx, buffer, length, &made);
    return made;
}

/* 1 where the partition's current launches are the preset lcl_partition_new gave it (the
 * planner did not plan it since), else 0 */
LCL_EXPORT int lcl_partition_on_preset(const void *p) { return ((const partition *)p)->on_preset; }

/* what the partition counted: in place, copied, staged, invokes, launches (LCL_N_COUNTS) */
LCL_EXPORT void lcl_partition_counts(const void *p_, int64_t *out) {
    const partition *p = p_;
    memcpy(out, p->counts, sizeof p->counts);
}

/* Everything litecl.Delegate's Prepare reads of context ``ctx`` (backend/claims.py: its
 * claims, auto's groups, keep_order's marks, the records of nodes other delegates took),
 * as int32s into ``out`` (room for ``cap``): per node of the execution plan its index,
 * builtin code, version, side-effect flag, inputs and outputs; an ADD's parameters; a
 * delegate kernel node's delegate, name and replaced nodes; a CAST or ADD node's tensors
 * in full (type, allocation type, variable flag, dims, dims_signature, quantization,
 * name); then tensors_size and every tensor's allocation type and bytes (keep_order's
 * cost). No data: Prepare reads none. Returns the count of int32s (call again with room
 * for them where it is over ``cap``), -1 where LiteRT fails a lookup. Equal streams read
 * the same to Prepare: claims.py memoises its decisions on it. */
typedef struct { int32_t *out; long cap, n; } key_stream;

static void key_put(key_stream *k, int32_t v) {
    if (k->n < k->cap) k->out[k->n] = v;
    k->n++;
}

static void key_int64(key_stream *k, uint64_t v) {
    key_put(k, (int32_t)(uint32_t)v);
    key_put(k, (int32_t)(uint32_t)(v >> 32));
}

static void key_ints(key_stream *k, const TfLiteIntArray *a) {
    key_put(k, a ? a->size : -1);
    for (int j = 0; a && j < a->size; j++) key_put(k, a->data[j]);
}

static void key_text(key_stream *k, const char *s) {
    size_t len = s ? strlen(s) : 0;
    key_put(k, s ? (int32_t)len : -1);
    for (size_t j = 0; j < len; j += 4) {
        uint32_t w = 0;
        for (size_t b = 0; b < 4 && j + b < len; b++) w |= (uint32_t)(unsigned char)s[j + b] << (8 * b);
        key_put(k, (int32_t)w);
    }
}

static void key_tensor(key_stream *k, const TfLiteTensor *ts) {
    key_put(k, ts->type);
    key_put(k, ts->allocation_type);
    key_put(k, ts->is_variable);
    key_ints(k, ts->dims);
    key_ints(k, ts->dims_signature);
    int32_t bits;
    memcpy(&bits, &ts->params.scale, sizeof bits);
    key_put(k, bits);
    key_put(k, ts->params.zero_point);
    const TfLiteAffineQuantization *q = ts->quantization.type == 1 ? ts->quantization.params : NULL;
    key_put(k, q ? 1 : 0);
    if (q) {
        key_put(k, q->scale ? q->scale->size : -1);
        for (int j = 0; q->scale && j < q->scale->size; j++) {
            memcpy(&bits, &q->scale->data[j], sizeof bits);
            key_put(k, bits);
        }
        key_ints(k, q->zero_point);
        key_put(k, q->quantized_dimension);
    }
    key_text(k, ts->name);
}

LCL_EXPORT long lcl_context_key(TfLiteContext *ctx, int32_t *out, long cap) {
    key_stream k = {out, cap, 0};
    TfLiteIntArray *plan = NULL;
    if (ctx->GetExecutionPlan(ctx, &plan) != kTfLiteOk) return -1;
    key_put(&k, plan ? plan->size : -1);
    for (int e = 0; plan && e < plan->size; e++) {
        TfLiteNode *node;
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, plan->data[e], &node, &reg) != kTfLiteOk || !node || !reg) return -1;
        key_put(&k, plan->data[e]);
        key_put(&k, reg->builtin_code);
        key_put(&k, reg->version);
        key_put(&k, node->might_have_side_effect);
        key_ints(&k, node->inputs);
        key_ints(&k, node->outputs);
        if (reg->builtin_code == kTfLiteBuiltinDelegate) {
            const TfLiteDelegateParams *d = node->builtin_data;
            key_int64(&k, (uint64_t)(uintptr_t)node->delegate);
            key_text(&k, reg->custom_name);
            key_ints(&k, d ? d->nodes_to_replace : NULL);
            continue;
        }
        if (reg->builtin_code != kTfLiteBuiltinAdd && reg->builtin_code != kTfLiteBuiltinCast) continue;
        if (reg->builtin_code == kTfLiteBuiltinAdd) {
            const TfLiteAddParams *a = node->builtin_data;
            key_put(&k, a ? a->activation : -1);
            key_put(&k, a ? a->pot_scale_int16 : -1);
        }
        for (int side = 0; side < 2; side++) {
            const TfLiteIntArray *ts = side ? node->outputs : node->inputs;
            for (int j = 0; ts && j < ts->size; j++)
                if (ts->data[j] >= 0 && (size_t)ts->data[j] < ctx->tensors_size) key_tensor(&k, &ctx->tensors[ts->data[j]]);
        }
    }
    key_int64(&k, ctx->tensors_size);
    for (size_t t = 0; t < ctx->tensors_size; t++) {
        key_put(&k, ctx->tensors[t].allocation_type);
        key_int64(&k, ctx->tensors[t].bytes);
    }
    return k.n;
}

/* Set might_have_side_effect to ``value`` on nodes ``nodes`` (``n`` indices) of ``ctx``
 * (backend/claims.py keep_order). Each node is looked up by index every time: LiteRT's
 * nodes keep their indices when others are replaced, not their addresses
 * (ReplaceNodeSubsetsWithDelegateKernels can move its node vector). */
/* Where context ``ctx`` sits in its interpreter (backend/records.py _record): the k for
 * which LiteRT's AcquireSubgraphContext(ctx, k) gives ``ctx`` back, with subgraph 0's
 * context in ``*first``; every k below it is released again. -1 where LiteRT has no such
 * function or none gives ``ctx``. */
LCL_EXPORT int lcl_subgraph_place(TfLiteContext *ctx, void **first) {
    typedef TfLiteStatus (*acquire_fn)(TfLiteContext *, int, TfLiteContext **);
    typedef TfLiteStatus (*release_fn)(TfLiteContext *, int);
    acquire_fn acquire;
    release_fn release;
    if (!ctx->AcquireSubgraphContext || !ctx->ReleaseSubgraphContext) return -1;
    memcpy(&acquire, &ctx->AcquireSubgraphContext, sizeof acquire);
    memcpy(&release, &ctx->ReleaseSubgraphContext, sizeof release);
    *first = NULL;
    for (int k = 0; k < (1 << 16); k++) {
        TfLiteContext *got = NULL;
        if (acquire(ctx, k, &got) != kTfLiteOk) break;
        if (k == 0) *first = got;
        if (got == ctx) return k;
        release(ctx, k);
    }
    return -1;
}

LCL_EXPORT void lcl_flag_nodes(TfLiteContext *ctx, const int *nodes, int n, int value) {
    for (int j = 0; j < n; j++) {
        TfLiteNode *node;
        TfLiteRegistration *reg;
        if (ctx->GetNodeAndRegistration(ctx, nodes[j], &node, &reg) == kTfLiteOk && node)
            node->might_have_side_effect = value != 0;
    }
}

LCL_EXPORT int lcl_kernel_prepare(TfLiteContext *ctx, TfLiteNode *node) { return kernel_prepare(ctx, node); }
LCL_EXPORT int lcl_kernel_invoke(TfLiteContext *ctx, TfLiteNode *node) { return kernel_invoke(ctx, node); }

#ifndef LITECL_RUNTIME_DIGEST
#define LITECL_RUNTIME_DIGEST ""
#endif
/* what the library was built from (backend/native/build.py digest): runtime.py loads an
 * installed library only while it matches the installed sources */
LCL_EXPORT const char *lcl_runtime_digest(void) { return LITECL_RUNTIME_DIGEST; }

/* Python's atexit (runtime.py): exit_now before its final collection */
LCL_EXPORT void lcl_exit_now(void) { exit_now(); }

/* the sizes of the structs backend/runtime.py mirrors, for its check */
LCL_EXPORT int64_t lcl_inprocess_sizes(void) {
    return (int64_t)sizeof(lcl_expected) * 1000000000 + (int64_t)sizeof(lcl_launch) * 1000000 +
           (int64_t)sizeof(lcl_inprocess_plan) * 1000 +
           (int64_t)sizeof(lcl_profile_cmd);
}
/* ----------------------------------------------------------------- recalled Prepares */
/* litecl.Delegate's Prepare of a context equal to one its Python Prepare decided before
 * (backend/claims.py: the same context key, lcl_context_key, under the same delegate
 * settings) runs here, without calling Python: start-up is then LiteRT's own
 * partitioning and the partitions' init (issue 38). Python keeps, per context key, the
 * nodes it claimed, keep_order's marks and the partitions LiteRT formed with their
 * presets (lcl_recall_put, after its own Prepare); a Prepare that finds its key flags
 * the marks, hands the runtime the expected partitions (lcl_inprocess_expect) and calls
 * ReplaceNodeSubsetsWithDelegateKernels, then logs what it did (``prepared``) for Python
 * to record (backend/recall.py drains the log before it reads its records or partitions:
 * placement(), stats, the planner, a partition's free). Every other Prepare is Python's:
 * a key not kept, a forked child. A Prepare inside Delegate.owning (a litecl.Interpreter's)
 * is recalled from a Prepare kept with the same visible tensors (``salt``) and logged
 * with its owner (lcl_recall_own), whose records name it. */
#define LCL_RECALL_BUCKETS 64
#define LCL_RECALL_MAX 1024            /* keys per delegate (claims._PREPARES_MAX): all dropped past it */

typedef struct recall {
    struct recall *next;
    uint64_t hash;
    int32_t *key;                      /* lcl_context_key's stream */
    long n_key;
    TfLiteIntArray *claim;             /* the nodes to replace */
    int *marks, n_marks;               /* keep_order's */
    lcl_expected *expect;              /* the partitions LiteRT formed; presets are Python's,
                                          alive while Python keeps ``token`` */
    int32_t *ints;
    int n_expect;
    int nodes;                         /* the execution plan's length (the Replacing line) */
    int64_t token;                     /* Python's name for what it recorded with it */
    int64_t salt;                      /* the owner's visible tensors (recall.owner_salt), 0
                                          none: part of the key */
    int64_t settings;                  /* the delegate settings it was decided with
                                          (recall.settings_number): part of the key */
    int refs, retired;
} recall;

typedef struct recall_state {
    const TfLiteDelegate *owner;       /* Python's TfLiteDelegate for this delegate */
    const TfLiteRegistration *registration;
    pid_t pid;
    int say;                           /* print the Replacing line (not quiet) */
    TfLiteContext **announced;         /* contexts whose Replacing line was said (lcl_announce) */
    long n_announced, cap_announced;
    struct { TfLiteContext *ctx; int64_t event; } *freed; /* contexts whose partitions were all
                                          freed, and when (lcl_recall_freed) */
    long n_freed, cap_freed;
} recall_state;

/* One recalled Prepare, for Python to record; ``n`` -1: ``token`` is no longer used. */
typedef struct prepared {
    struct prepared *next;
    int64_t delegate_key, token, event, base, fetched, owner;
    TfLiteContext *ctx;
    void *first;
    int place, status, said, n;
    int n_extra;                       /* partitions LiteRT formed that were not expected (recall_extra) */
    void **extra_made;
    int32_t *extra_ints;               /* per extra: key (2 ints), nodes (count, then them), outputs */
    long n_extra_ints;
    TfLiteIntArray *plan;              /* the execution plan before Replace (recall_extra's order) */
    void *made[];
} prepared;

static void prepared_free(prepared *e) {
    free(e->plan);
    free(e->extra_made);
    free(e->extra_ints);
    free(e);
}

/* A partition a recalled Prepare did not expect: an equal context key holds no subgraph
 * outputs, so LiteRT may give a partition other outputs (a graph that reads a fused
 * chain's middle tensor). Made here with no preset, so its kernel_prepare asks the planner,
 * and logged with its nodes and outputs for Python's _Planner (recall.drain); its nodes in
 * the execution plan's order. NULL when out of memory. */
static void *recall_extra(const expectation *x, TfLiteContext *ctx, const TfLiteDelegateParams *params) {
    prepared *e = x->fast;
    const TfLiteIntArray *nodes = params->nodes_to_replace, *outs = params->output_tensors;
    const TfLiteIntArray *plan = e->plan; /* inside Replace the context's plan is being rebuilt */
    device_entry *dev = inprocess_device(x->n ? x->expect[0].device : -1);
    int *order = malloc(sizeof(int) * (size_t)(nodes->size ? nodes->size : 1));
    if (!dev || !order || !plan) {
        free(order);
        return NULL;
    }
    int m = 0;
    for (int k = 0; k < plan->size; k++)
        for (int j = 0; j < nodes->size; j++)
            if (nodes->data[j] == plan->data[k]) order[m++] = plan->data[k];
    partition *p = m == nodes->size ? partition_make(x->d, dev, ctx, order, m, outs) : NULL;
    free(order);
    if (!p) return NULL;
    p->key = lcl_new_keys(1);
    void **made = realloc(e->extra_made, sizeof *made * (size_t)(e->n_extra + 1));
    if (made) e->extra_made = made;
    int32_t *ints = made ? realloc(e->extra_ints, sizeof *ints * (size_t)(e->n_extra_ints + 4 + nodes->size + outs->size))
                         : NULL;
    if (!ints) {
        partition_free(p);
        return NULL;
    }
    e->extra_ints = ints;
    e->extra_made[e->n_extra++] = p;
    int32_t *w = ints + e->n_extra_ints;
    *w++ = (int32_t)(p->key & 0xFFFFFFFF), *w++ = (int32_t)(p->key >> 32);
    *w++ = nodes->size;
    for (int j = 0; j < nodes->size; j++) *w++ = nodes->data[j];
    *w++ = outs->size;
    for (int j = 0; j < outs->size; j++) *w++ = outs->data[j];
    e->n_extra_ints = w - ints;
    return p;
}

static pthread_mutex_t RECALL_LOCK = PTHREAD_MUTEX_INITIALIZER; /* all of the below */
static delegate **BOUND;               /* delegates with recall state, by their owner */
static long N_BOUND, CAP_BOUND;
/* the kept Prepares, of every delegate: one Delegate's serves another of equal settings
 * (each litecl.Interpreter makes its own Delegate) */
static recall *KEPT[LCL_RECALL_BUCKETS];
static int N_KEPT;
static prepared *LOG_HEAD, **LOG_TAIL = &LOG_HEAD;
LCL_EXPORT volatile int lcl_recall_pending;  /* entries in the log (Python reads it) */
static TfLiteStatus (*PYTHON_PREPARE)(TfLiteContext *, TfLiteDelegate *);
static int64_t EVENTS, KEYS = 1;
static __thread int32_t *KEY_BUF;
static __thread long KEY_CAP;
/* KEY_BUF freed when its thread ends (a server making interpreters on short-lived threads
 * kept ~21 KB a thread for MoveNet's context key: a fresh user's report) */
static pthread_key_t KEY_BUF_OWNER;
static pthread_once_t KEY_BUF_ONCE = PTHREAD_ONCE_INIT;
static void key_buf_owner(void) { pthread_key_create(&KEY_BUF_OWNER, free); }
/* the delegate whose TfLiteDelegate* this thread fetched last, and when (lcl_recall_fetched) */
static __thread struct { int64_t key, event, settings; } FETCHED;
/* the delegate this thread prepares for inside Delegate.owning, its owner and salt (lcl_recall_own) */
static __thread struct { int64_t key, owner, salt; } OWNING;

/* The next of the process's event numbers (backend/records.py orders Prepares, frees and
 * pointer fetches by them) and ``n`` new consecutive planner keys: shared by Python and
 * the recalled Prepares. */
LCL_EXPORT int64_t lcl_next_event(void) { return __atomic_add_fetch(&EVENTS, 1, __ATOMIC_SEQ_CST); }
LCL_EXPORT int64_t lcl_new_keys(int n) { return __atomic_fetch_add(&KEYS, n, __ATOMIC_SEQ_CST); }

/* The bound delegate of Python key ``key`` (Delegate._key: never reused), or NULL (its
 * Delegate is gone: a collection may run its finalizer before an interpreter's __del__
 * reaches these functions). Under RECALL_LOCK. */
static delegate *bound(int64_t key) {
    for (long i = 0; i < N_BOUND; i++)
        if (BOUND[i]->key == key) return BOUND[i];
    return NULL;
}

static void log_append(prepared *e) { /* under RECALL_LOCK */
    e->next = NULL;
    *LOG_TAIL = e;
    LOG_TAIL = &e->next;
    lcl_recall_pending++;
}

/* drop ``r`` once no Prepare uses it, telling Python its token is free (under RECALL_LOCK) */
static void recall_release(recall *r) {
    if (!r->retired || r->refs) return;
    prepared *e = calloc(1, sizeof *e);
    if (e) {
        e->token = r->token, e->n = -1;
        log_append(e);
    }
    free(r->key);
    free(r->claim);
    free(r->marks);
    free(r->expect);
    free(r->ints);
    free(r);
}

static void recall_retire(recall **at) { /* unlink *at (under RECALL_LOCK) */
    recall *r = *at;
    *at = r->next;
    N_KEPT--;
    r->retired = 1;
    recall_release(r);
}

static void recall_clear(void) { /* under RECALL_LOCK */
    for (int b = 0; b < LCL_RECALL_BUCKETS; b++)
        while (KEPT[b]) recall_retire(&KEPT[b]);
}

static uint64_t key_hash(const int32_t *k, long n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (long i = 0; i < n; i++) {
        h = (h ^ (uint32_t)k[i]) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

/* Keep recalled Prepares for delegate ``d``, whose TfLiteDelegate is ``owner`` (its
 * Prepare: lcl_inprocess_prepare, which calls ``python_prepare`` for the others), its
 * partitions' registration ``registration``; ``say``: print the Replacing line. 0, or
 * -1 out of memory. */
LCL_EXPORT int lcl_recall_bind(void *d_, const TfLiteDelegate *owner, void *python_prepare,
                               const TfLiteRegistration *registration, int say) {
    delegate *d = d_;
    recall_state *st = calloc(1, sizeof *st);
    if (!st) return -1;
    st->owner = owner, st->registration = registration, st->say = say != 0, st->pid = getpid();
    pthread_mutex_lock(&RECALL_LOCK);
    if (N_BOUND == CAP_BOUND) {
        long cap = CAP_BOUND ? 2 * CAP_BOUND : 16;
        delegate **b = realloc(BOUND, (size_t)cap * sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&RECALL_LOCK);
            free(st);
            return -1;
        }
        BOUND = b, CAP_BOUND = cap;
    }
    memcpy(&PYTHON_PREPARE, &python_prepare, sizeof python_prepare);
    d->recall = st;
    BOUND[N_BOUND++] = d;
    pthread_mutex_unlock(&RECALL_LOCK);
    return 0;
}

/* ``say``: print the Replacing line of a recalled Prepare (Delegate.quiet changed). */
LCL_EXPORT void lcl_recall_bind_say(int64_t key, int say) {
    pthread_mutex_lock(&RECALL_LOCK);
    delegate *d = bound(key);
    if (d) d->recall->say = say != 0;
    pthread_mutex_unlock(&RECALL_LOCK);
}

static void recall_unbind(delegate *d) {
    if (!d->recall) return;
    pthread_mutex_lock(&RECALL_LOCK);
    for (long i = 0; i < N_BOUND; i++)
        if (BOUND[i] == d) {
            BOUND[i] = BOUND[--N_BOUND];
            break;
        }
    free(d->recall->announced);
    free(d->recall->freed);
    free(d->recall);
    d->recall = NULL;
    pthread_mutex_unlock(&RECALL_LOCK);
}

/* Keep Python's Prepare, with delegate settings ``settings``, of the context whose
 * lcl_context_key is ``key`` (``n_key`` ints): ``claim`` (``n_claim`` node indices)
 * replaced, ``marks`` flagged around it, the ``n_expect`` partitions ``expect`` (spans into
 * ``ints``) expected, ``nodes`` the plan's length; ``token``: Python's name for it (its
 * presets live while Python keeps it); ``salt``: its owner's visible tensors. One per key,
 * salt and settings: an earlier one is dropped. 0, or -1 out of memory (nothing kept). */
LCL_EXPORT int lcl_recall_put(int64_t settings, const int32_t *key, long n_key, const int *claim, int n_claim,
                              const int *marks, int n_marks, const lcl_expected *expect, const int32_t *ints,
                              int n_ints, int n_expect, int nodes, int64_t token, int64_t salt) {
    recall *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->key = malloc((size_t)(n_key ? n_key : 1) * sizeof *r->key);
    r->claim = malloc(sizeof(int) * (size_t)(n_claim + 1));
    r->marks = malloc(sizeof(int) * (size_t)(n_marks ? n_marks : 1));
    r->expect = malloc(sizeof *r->expect * (size_t)(n_expect ? n_expect : 1));
    r->ints = malloc(sizeof *r->ints * (size_t)(n_ints ? n_ints : 1));
    if (!r->key || !r->claim || !r->marks || !r->expect || !r->ints) goto oom;
    memcpy(r->key, key, (size_t)n_key * sizeof *r->key);
    r->claim->size = n_claim;
    memcpy(r->claim->data, claim, (size_t)n_claim * sizeof(int));
    memcpy(r->marks, marks, (size_t)n_marks * sizeof(int));
    memcpy(r->expect, expect, (size_t)n_expect * sizeof *r->expect);
    memcpy(r->ints, ints, (size_t)n_ints * sizeof *r->ints);
    r->n_key = n_key, r->n_marks = n_marks, r->n_expect = n_expect, r->nodes = nodes, r->token = token;
    r->salt = salt, r->settings = settings;
    r->hash = key_hash(key, n_key);
    pthread_mutex_lock(&RECALL_LOCK);
    if (N_KEPT >= LCL_RECALL_MAX) recall_clear();
    recall **at = &KEPT[r->hash % LCL_RECALL_BUCKETS];
    for (recall **q = at; *q; q = &(*q)->next)
        if ((*q)->hash == r->hash && (*q)->salt == salt && (*q)->settings == settings && (*q)->n_key == n_key &&
                !memcmp((*q)->key, key, (size_t)n_key * sizeof *key)) {
            recall_retire(q);
            break;
        }
    r->next = *at;
    *at = r;
    N_KEPT++;
    pthread_mutex_unlock(&RECALL_LOCK);
    return 0;
oom:
    if (r) {
        free(r->key), free(r->claim), free(r->marks), free(r->expect), free(r->ints);
        free(r);
    }
    return -1;
}

/* Drop the kept Prepare named ``token`` (its presets changed: backend/recall.py
 * refresh, forget); ``token`` -1: all. */
LCL_EXPORT void lcl_recall_forget(int64_t token) {
    pthread_mutex_lock(&RECALL_LOCK);
    if (token < 0) recall_clear();
    for (int b = 0; token >= 0 && b < LCL_RECALL_BUCKETS; b++)
        for (recall **q = &KEPT[b]; *q; q = &(*q)->next)
            if ((*q)->token == token) {
                recall_retire(q);
                b = LCL_RECALL_BUCKETS;
                break;
            }
    pthread_mutex_unlock(&RECALL_LOCK);
}

/* This thread's Prepares for delegate ``key`` are ``owner``'s (a litecl.Interpreter's id;
 * 0 none) with visible tensors ``salt`` (Delegate.owning, on entry and on exit); ``salt``
 * -1: Python prepares them all. */
LCL_EXPORT void lcl_recall_own(int64_t key, int64_t owner, int64_t salt) {
    OWNING.key = key, OWNING.owner = owner, OWNING.salt = salt;
}

static long announced_at(recall_state *st, TfLiteContext *ctx) {
    for (long i = 0; i < st->n_announced; i++)
        if (st->announced[i] == ctx) return i;
    return -1;
}

/* The contexts whose Replacing line was said (one set for Python's Prepares and the
 * recalled ones): ``op`` 1 adds ``ctx`` and returns 1 where it was not there (say it),
 * 0 removes it, 2 asks. */
LCL_EXPORT int lcl_announce(int64_t key, TfLiteContext *ctx, int op) {
    int got = 0;
    pthread_mutex_lock(&RECALL_LOCK);
    delegate *d = bound(key);
    recall_state *st = d ? d->recall : NULL;
    long i = st ? announced_at(st, ctx) : -1;
    if (st && op == 1 && i < 0) {
        if (st->n_announced == st->cap_announced) {
            long cap = st->cap_announced ? 2 * st->cap_announced : 16;
            TfLiteContext **a = realloc(st->announced, (size_t)cap * sizeof *a);
            if (a) st->announced = a, st->cap_announced = cap;
        }
        if (st->n_announced < st->cap_announced) st->announced[st->n_announced++] = ctx;
        got = 1;
    } else if (st && op == 0 && i >= 0) {
        st->announced[i] = st->announced[--st->n_announced];
    } else if (op == 2) {
        got = i >= 0;
    }
    pthread_mutex_unlock(&RECALL_LOCK);
    return got;
}

/* This thread fetched delegate ``d``'s TfLiteDelegate* (an interpreter's construction:
 * Delegate._get_native_delegate_pointer) at ``event``, its settings then ``settings``
 * (recall.settings_number; -1: Python prepares). */
LCL_EXPORT void lcl_recall_fetched(int64_t key, int64_t event, int64_t settings) {
    FETCHED.key = key;
    FETCHED.event = event;
    FETCHED.settings = settings;
}

static long freed_at(recall_state *st, TfLiteContext *ctx) {
    for (long i = 0; i < st->n_freed; i++)
        if (st->freed[i].ctx == ctx) return i;
    return -1;
}

/* The last partition kernel of context ``ctx`` was freed at ``event`` (> 0); ``event`` 0
 * asks and forgets it. Returns the event it was freed at before, or 0. Python's Prepare
 * and the recalled ones read it: a Prepare of a new interpreter at a freed one's address
 * (this thread fetched the delegate since) says its Replacing line again. */
LCL_EXPORT int64_t lcl_recall_freed(int64_t key, TfLiteContext *ctx, int64_t event) {
    int64_t was = 0;
    pthread_mutex_lock(&RECALL_LOCK);
    delegate *d = bound(key);
    recall_state *st = d ? d->recall : NULL;
    long i = st ? freed_at(st, ctx) : -1;
    if (i >= 0) {
        was = st->freed[i].event;
        st->freed[i] = st->freed[--st->n_freed];
    }
    if (st && event > 0) {
        if (st->n_freed >= LCL_RECALL_MAX * 4) { /* the oldest goes (Python's bound was its records') */
            long o = 0;
            for (long j = 1; j < st->n_freed; j++)
                if (st->freed[j].event < st->freed[o].event) o = j;
            st->freed[o] = st->freed[--st->n_freed];
        }
        if (st->n_freed == st->cap_freed) {
            long cap = st->cap_freed ? 2 * st->cap_freed : 16;
            void *a = realloc(st->freed, (size_t)cap * sizeof *st->freed);
            if (a) st->freed = a, st->cap_freed = cap;
        }
        if (st->n_freed < st->cap_freed) {
            st->freed[st->n_freed].ctx = ctx;
            st->freed[st->n_freed++].event = event;
        }
    }
    pthread_mutex_unlock(&RECALL_LOCK);
    return was;
}

/* The oldest recalled Prepare in the log, removed: ``head`` (14) gets delegate key, token,
 * event, first planner key, context, subgraph 0's context, place (lcl_subgraph_place),
 * status, said, n, this thread's fetch of the delegate (or 0), the extra partitions'
 * count and their ints' (recall_extra), its owner (or 0: lcl_recall_own); ``made`` its n expected partitions, then the
 * extra ones; ``ints`` the extra ones' stream. 1, 0 for none, or -1 without removing it
 * where ``cap`` or ``icap`` is too small (head[9] + head[11] and head[12] say how much). */
LCL_EXPORT int lcl_recall_next(int64_t *head, void **made, int cap, int32_t *ints, long icap) {
    pthread_mutex_lock(&RECALL_LOCK);
    prepared *e = LOG_HEAD;
    if (e && (e->n + e->n_extra > cap || e->n_extra_ints > icap)) {
        head[9] = e->n, head[11] = e->n_extra, head[12] = e->n_extra_ints;
        pthread_mutex_unlock(&RECALL_LOCK);
        return -1;
    }
    if (!e) {
        pthread_mutex_unlock(&RECALL_LOCK);
        return 0;
    }
    LOG_HEAD = e->next;
    if (!LOG_HEAD) LOG_TAIL = &LOG_HEAD;
    lcl_recall_pending--;
    pthread_mutex_unlock(&RECALL_LOCK);
    int64_t h[] = {e->delegate_key, e->token, e->event, e->base, (int64_t)(uintptr_t)e->ctx,
                   (int64_t)(uintptr_t)e->first, e->place, e->status, e->said, e->n, e->fetched,
                   e->n_extra, e->n_extra_ints, e->owner};
    memcpy(head, h, sizeof h);
    if (e->n > 0) memcpy(made, e->made, (size_t)e->n * sizeof *made);
    if (e->n_extra) memcpy(made + (e->n > 0 ? e->n : 0), e->extra_made, (size_t)e->n_extra * sizeof *made);
    if (e->n_extra_ints) memcpy(ints, e->extra_ints, (size_t)e->n_extra_ints * sizeof *ints);
    prepared_free(e);
    return 1;
}

/* Whether the log holds a recalled Prepare of delegate ``key`` for ``owner`` (lcl_recall_own)
 * that made partitions: litecl.Interpreter's allocate_tensors asks it before the Python
 * records a drain would write (records.py has_partitions). */
LCL_EXPORT int lcl_recall_logged(int64_t key, int64_t owner) {
    int found = 0;
    pthread_mutex_lock(&RECALL_LOCK);
    for (const prepared *e = LOG_HEAD; e && !found; e = e->next)
        found = e->delegate_key == key && e->owner == owner && e->n + e->n_extra > 0;
    pthread_mutex_unlock(&RECALL_LOCK);
    return found;
}

/* ``owner`` of delegate ``key`` is gone (litecl.Interpreter's close or __del__: its id may
 * name another interpreter next): its Prepares still in the log are recorded with no owner
 * (owner -1: their partitions' planners made, no rows kept) and their contexts' Replacing
 * line is said again, as records.py forget does for the recorded ones. Never waits on
 * Python (a collection runs it inside any lock). */
LCL_EXPORT void lcl_recall_disown(int64_t key, int64_t owner) {
    pthread_mutex_lock(&RECALL_LOCK);
    delegate *d = bound(key);
    for (prepared *e = LOG_HEAD; e; e = e->next) {
        if (e->delegate_key != key || e->owner != owner || !owner) continue;
        e->owner = -1;
        long i = d && d->recall ? announced_at(d->recall, e->ctx) : -1;
        if (i >= 0) d->recall->announced[i] = d->recall->announced[--d->recall->n_announced];
    }
    pthread_mutex_unlock(&RECALL_LOCK);
}

/* litecl.Delegate's Prepare (its TfLiteDelegate's): a kept one where the context's key
 * is kept, else Python's. */
LCL_EXPORT TfLiteStatus lcl_inprocess_prepare(TfLiteContext *ctx, TfLiteDelegate *base) {
    delegate *d = NULL;
    pthread_mutex_lock(&RECALL_LOCK);
    for (long i = 0; i < N_BOUND && !d; i++)
        if (BOUND[i]->recall->owner == base) d = BOUND[i];
    /* this thread fetched the delegate last (records.py numbers interpreters by it) */
    const int owned = d && OWNING.key == d->key;
    const int64_t owner = owned ? OWNING.owner : 0, salt = owned ? OWNING.salt : 0;
    int use = d && salt >= 0 && N_KEPT && d->recall->pid == getpid() && !EXITING && FETCHED.key == d->key &&
              FETCHED.settings >= 0;
    const int64_t settings = FETCHED.settings;
    pthread_mutex_unlock(&RECALL_LOCK);
    if (!use) return PYTHON_PREPARE(ctx, base);
    long n = lcl_context_key(ctx, KEY_BUF, KEY_CAP);
    if (n > KEY_CAP) {
        int32_t *b = realloc(KEY_BUF, (size_t)n * sizeof *b);
        if (!b) return PYTHON_PREPARE(ctx, base);
        KEY_BUF = b, KEY_CAP = n;
        pthread_once(&KEY_BUF_ONCE, key_buf_owner);
        pthread_setspecific(KEY_BUF_OWNER, b);
        n = lcl_context_key(ctx, KEY_BUF, KEY_CAP);
    }
    if (n < 0 || n > KEY_CAP) return PYTHON_PREPARE(ctx, base);
    uint64_t h = key_hash(KEY_BUF, n);
    recall *r = NULL;
    pthread_mutex_lock(&RECALL_LOCK);
    recall_state *st = d->recall;
    for (r = KEPT[h % LCL_RECALL_BUCKETS]; r; r = r->next)
        if (r->hash == h && r->salt == salt && r->settings == settings && r->n_key == n &&
                !memcmp(r->key, KEY_BUF, (size_t)n * sizeof *KEY_BUF))
            break;
    int64_t fetched = FETCHED.event;
    long f = r ? freed_at(st, ctx) : -1;
    if (f >= 0) {                      /* claims.prepare's rule: a new interpreter at a freed address */
        if (fetched > st->freed[f].event) {
            long a = announced_at(st, ctx);
            if (a >= 0) st->announced[a] = st->announced[--st->n_announced];
        }
        st->freed[f] = st->freed[--st->n_freed];
    }
    if (r) r->refs++;
    const TfLiteRegistration *reg = st ? st->registration : NULL;
    int say_line = st && st->say;
    pthread_mutex_unlock(&RECALL_LOCK);
    if (!r) return PYTHON_PREPARE(ctx, base);
    prepared *e = calloc(1, sizeof *e + (size_t)r->n_expect * sizeof(void *));
    TfLiteStatus status = e ? kTfLiteOk : kTfLiteError;
    if (e) {
        e->delegate_key = d->key, e->token = r->token, e->ctx = ctx, e->n = r->n_expect, e->fetched = fetched;
        e->owner = owner;
        e->event = lcl_next_event();
        e->place = lcl_subgraph_place(ctx, &e->first);
    }
    if (e && r->claim->size) {
        lcl_flag_nodes(ctx, r->marks, r->n_marks, 1);
        e->base = lcl_new_keys(r->n_expect);
        TfLiteIntArray *plan = NULL; /* for recall_extra */
        if (ctx->GetExecutionPlan(ctx, &plan) == kTfLiteOk && plan &&
                (e->plan = malloc(sizeof(int) * (size_t)(plan->size + 1))))
            memcpy(e->plan, plan, sizeof(int) * (size_t)(plan->size + 1));
        lcl_inprocess_expect(d, base, r->expect, r->ints, r->n_expect, e->base, e->made);
        EXPECT.fast = e; /* a partition not expected: recall_extra */
        status = ctx->ReplaceNodeSubsetsWithDelegateKernels(ctx, *reg, r->claim, base);
        lcl_inprocess_expect(d, NULL, NULL, NULL, 0, 0, NULL);
        lcl_flag_nodes(ctx, r->marks, r->n_marks, 0);
        if (status != kTfLiteOk)
            say(d, ctx, "LiteRT refused litecl's node subsets (ReplaceNodeSubsetsWithDelegateKernels)");
    }
    int made = e ? e->n_extra : 0;
    for (int i = 0; e && i < e->n; i++) made += e->made[i] != NULL;
    if (e && status == kTfLiteOk && r->claim->size && say_line && lcl_announce(d->key, ctx, 1)) {
        e->said = 1;
        fprintf(stderr, "INFO: Replacing %d out of %d node(s) with delegate (litecl OpenCL) node, "
                "yielding %d partitions for the whole graph.\n", r->claim->size, r->nodes, made);
        fflush(stderr);
    }
    pthread_mutex_lock(&RECALL_LOCK);
    if (e) {
        e->status = status;
        log_append(e);
    }
    r->refs--;
    recall_release(r);
    pthread_mutex_unlock(&RECALL_LOCK);
    if (!e) say(d, ctx, "litecl: out of memory");
    return status;
}

#endif /* LITECL_IN_PROCESS */
