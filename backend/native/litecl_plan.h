/* The tables ``litecl export`` writes into plan.c for one model (backend/plan_c.py
 * ``native_plan``): what litecl's Python delegate decided for that model, device and placement,
 * as data. Every variable-length list is a span of LCL_INTS. */
#ifndef LITECL_PLAN_H
#define LITECL_PLAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct { int32_t off, len; } lcl_span;  /* LCL_INTS[off .. off + len) */

typedef struct {
    const char *name;                 /* kernel name */
    const char *source;               /* OpenCL C (the Python delegate's text, byte for byte;
                                         where LiteRT's bits differ by architecture, each
                                         one's under #if defined(LITECL_ARCH_...)) */
    size_t source_len;
    const unsigned char *binary;      /* the exporting device's program binary, or NULL */
    size_t binary_len;
} lcl_program;

/* One kernel launch of a partition plan (backend/kernels.py Launch). */
typedef struct {
    int32_t program;                  /* LCL_PROGRAMS index */
    int32_t tile_bytes;               /* ops/tiling.py launch(): the smallest itemsize touched */
    int32_t shape_fixed;              /* 1: the source bakes the exported shapes (broadcast
                                         strides, or the element count: fixed_elements):
                                         it runs at exactly ``shapes``; 2: the
                                         same, but the Python delegate knew the shapes
                                         only at invoke: declined where the delegate
                                         sets AllowDynamicTensors (a graph with
                                         invoke-time shapes), else as 1; 3: the
                                         same as 1 in a called subgraph (IF, WHILE),
                                         whose shapes follow its caller's: declined
                                         (LiteRT prepares it again at a caller's new
                                         shapes without asking the delegate, and after
                                         that prepare failed LiteRT 2.x crashed in its
                                         ArenaPlanner on the next call) */
    lcl_span nodes;                   /* model node indices it computes */
    lcl_span inputs;                  /* tensor indices of its buffer parameters, in order */
    lcl_span outputs;                 /* ... then these */
    lcl_span shapes;                  /* exported input shapes: per input, rank then dims */
    int32_t fixed_elements;           /* why shape_fixed (the INFO line): 0 a broadcast is
                                         compiled in; N > 0 the operands share one shape
                                         and only its element count N is (a float32 or
                                         quantized ADD: LiteRT's SIMD body and tail
                                         depend on it); -1 other shape arithmetic */
    lcl_span args;                    /* int32 values set after the tiling's four uints
                                         (a quantized ADD's constants: Launch.args) */
    int32_t family;                   /* a single launch's self-test family (LCL_FAMILIES), or -1 */
} lcl_launch;

/* One kernel family's self-test (backend/selftest.py): its canonical kernel run on edge
 * values and compared with LiteRT's bits for the architecture this library is built for. */
typedef struct {
    const char *name;                 /* selftest.family_name */
    int32_t program;                  /* LCL_PROGRAMS index of the canonical kernel */
    int32_t n, tile_bytes;            /* its elements; the smallest itemsize it touches */
    lcl_span args;                    /* int32 args after the tiling's four */
    int32_t n_inputs;
    const unsigned char *inputs[2];   /* each operand's bytes */
    int32_t input_bytes[2];
    const unsigned char *expected[2]; /* LiteRT's output bytes: x86_64, aarch64 */
    int32_t out_bytes;
    int32_t out_float;                /* how to compare: 0 bytes; 2 float16, 3 bfloat16, 4
                                         float32, 8 float64 (any NaN equals a NaN of its sign) */
} lcl_family;

typedef struct {
    lcl_span nodes;                   /* the nodes LiteRT gives the partition kernel, sorted */
    int32_t first_launch, n_launches; /* LCL_LAUNCHES */
} lcl_partition;

typedef struct {
    lcl_span fingerprint;             /* export.py ``fingerprint``; litecl_delegate.c
                                         ``fingerprint`` rebuilds it from the context */
    lcl_span claimed;                 /* node indices the Python delegate claimed */
    int32_t n_nodes;                  /* M of its Replacing line */
    int32_t first_partition, n_partitions;  /* LCL_PARTITIONS */
    int32_t first_single;             /* LCL_LAUNCHES: one unfused launch per claimed node,
                                         in ``claimed`` order (partitions LiteRT forms
                                         differently, after a node is declined) */
} lcl_subgraph;

typedef struct {
    const char *library, *platform, *device;   /* defaults of the options */
    const char *model, *litecl_version, *target;
    int32_t in_place, in_place_align;  /* memory: USE_HOST_PTR over LiteRT's memory at
                                          this pointer alignment; else staging copies */
    int32_t local_size, groups_per_cu, vec_bytes, group_bytes;  /* ops/tiling.py LAUNCH row */
    int32_t compute_units, max_work_group_size;    /* the exporting device's */
    int32_t n_subgraphs, n_programs;
    const int32_t *packed_types;       /* TfLiteType codes of sub-byte types: code, bits, signed */
    int32_t n_packed_types;
    const int32_t *type_sizes;         /* bytes per value by TfLiteType (ops/dtypes.py; sub-byte
                                          types one value per byte, as the kernels hold them) */
    int32_t n_type_sizes;
    int32_t delegate_flags;            /* TfLiteDelegate.flags: 0, or AllowDynamicTensors (1)
                                          for a model with shapes known only at invoke
                                          (export.py ``delegate_flags``) */
    const char *const *tested;         /* (distribution, version prefix) pairs: the LiteRT /
                                          TensorFlow versions the structs were checked
                                          against (backend/abi.py TESTED, written by export) */
    int32_t n_tested;                  /* pairs */
    /* what the kernels use, for finding a device that can run them (open_device): */
    int32_t needs_fp16, needs_fp64, needs_int64;  /* cl_khr_fp16, cl_khr_fp64, 64-bit integers */
    int32_t max_local_size;            /* the largest work-group a launch asks for */
    double max_alloc_bytes;            /* the largest buffer */
    int32_t n_families;                /* LCL_FAMILIES */
    const char *binary_arch;           /* the architecture the binaries were built for
                                          (-DLITECL_ARCH_...: ops/add.py arch_source); used
                                          only by a library compiled for it (LCL_ARCH) */
    const char *const *refused;        /* (platform, device, driver version, why) of each device
                                          on the exporting machine whose compiler failed
                                          litecl's probe (device.py probe_compiler): never
                                          picked (its compiler may abort the app) */
    int32_t n_refused;                 /* quadruples */
    const int32_t *type_rows;          /* ops/tiling.py LAUNCH's local_size, groups_per_cu for
                                          "cpu", then "gpu": a device of the other type than
                                          ``target`` runs with its own (device_for); NULL in
                                          process */
} lcl_plan_info;

/* ---- in process: litecl.Delegate's partitions (backend/runtime.py mirrors these) ---- */
/* A partition's plan at its current shapes, from the in-process planner
 * (backend/delegate.py _Planner.plan): its launches in order, their spans indexing
 * ``ints``; ``programs`` and ``names`` are indexed by lcl_launch.program. */
typedef struct {
    const int32_t *ints;
    const lcl_launch *launches;
    int32_t n_launches;
    void *const *programs;            /* cl_program, built by the planner (pyopencl) */
    const char *const *names;         /* kernel names */
    int32_t device;                   /* lcl_inprocess_device index it runs on */
    int32_t in_place, align;          /* memory: USE_HOST_PTR over LiteRT's memory at this
                                         pointer alignment, else copies (memory.py _Memory) */
} lcl_inprocess_plan;

/* A partition litecl.Delegate's Prepare expects LiteRT to form (the one an equal context
 * formed before: backend/delegate.py _Expected), made by the partition kernel's init
 * without calling back into Python (lcl_inprocess_expect). */
typedef struct {
    lcl_span nodes;                   /* nodes_to_replace as LiteRT lists them, in ints */
    lcl_span order;                   /* the same nodes in execution order */
    lcl_span outputs;                 /* the partition's output tensors LiteRT reads */
    int32_t device;                   /* lcl_inprocess_device index it is made on */
    lcl_span preset_key;              /* the input key ``preset`` was planned at */
    const lcl_inprocess_plan *preset; /* the planner's answer at that key (lcl_partition_new), or NULL */
} lcl_expected;

/* One command of a profiled partition invoke (Delegate.profile): OpenCL's event times. */
typedef struct {
    int32_t kind;                     /* 0 write, 1 kernel, 2 copy, 3 read */
    int32_t launch;                   /* kernel: index into the plan's launches; else -1 */
    int64_t bytes;
    int64_t host_ns;                  /* CLOCK_MONOTONIC before its enqueue (perf_counter_ns) */
    uint64_t queued, start, end;      /* CL_PROFILING_COMMAND_*; 0 where the queue does not profile */
} lcl_profile_cmd;

/* The host's own work in a profiled invoke: 0 stage in, 1 wait, 2 stage out. */
typedef struct { int32_t kind, pad; int64_t t0, t1; } lcl_profile_span;

extern const lcl_plan_info LCL_PLAN;
extern const int32_t LCL_INTS[];
extern const lcl_program LCL_PROGRAMS[];
extern const lcl_launch LCL_LAUNCHES[];
extern const lcl_partition LCL_PARTITIONS[];
extern const lcl_subgraph LCL_SUBGRAPHS[];
extern const lcl_family LCL_FAMILIES[];
/* names for messages: TfLiteType's (ops/dtypes.py, by code: LCL_PLAN.n_type_sizes of them)
 * and the builtin operators' (the schema's BuiltinOperator, by code; written by export,
 * none in process, where Python words these messages) */
extern const char *const LCL_TYPE_NAMES[];
extern const char *const LCL_OP_NAMES[];
extern const int32_t LCL_N_OP_NAMES;

#endif
