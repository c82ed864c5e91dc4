/* The parts of TensorFlow Lite's C ABI (the classic delegate interface) litecl's native
 * delegate uses, declared here so that no TFLite header is needed to build it.
 *
 * Source of truth: tflite/core/c/common.h of google-ai-edge/LiteRT (commit f67457790c;
 * byte-identical on Linux back to tag v2.1.0, and in tensorflow 2.21's tf.lite). The field
 * order below is that header's; the sizes are asserted for LP64 (x86-64 and arm64, Linux
 * and Android), the same numbers backend/abi.py checks from Python
 * (../shared/docs/DELEGATE.md, "The ABI"). Function pointers litecl never calls are
 * declared as plain pointers of the same size. */
#ifndef LITECL_TFLITE_ABI_H
#define LITECL_TFLITE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { kTfLiteOk = 0, kTfLiteError = 1 } TfLiteStatus;

/* TfLiteAllocationType (common.h) */
enum {
    kTfLiteMemNone = 0, kTfLiteMmapRo = 1, kTfLiteArenaRw = 2, kTfLiteArenaRwPersistent = 3,
    kTfLiteDynamic = 4, kTfLitePersistentRo = 5
};

/* BuiltinOperator (schema.fbs) */
enum { kTfLiteBuiltinAdd = 0, kTfLiteBuiltinDelegate = 51, kTfLiteBuiltinCast = 53 };

/* TfLiteDelegateFlags */
enum { kTfLiteDelegateFlagsAllowDynamicTensors = 1 };

typedef struct TfLiteIntArray {
    int size;
    int data[];
} TfLiteIntArray;

typedef struct TfLiteFloatArray {
    int size;
    float data[];
} TfLiteFloatArray;

typedef struct { float scale; int32_t zero_point; } TfLiteQuantizationParams;

typedef struct {
    TfLiteFloatArray *scale;
    TfLiteIntArray *zero_point;
    int32_t quantized_dimension;
} TfLiteAffineQuantization;

typedef struct { int type; /* 0 none, 1 affine */ void *params; } TfLiteQuantization;

struct TfLiteDelegate;
struct TfLiteContext;

typedef struct TfLiteTensor {
    int type;                       /* TfLiteType (not the schema's TensorType) */
    void *data;
    TfLiteIntArray *dims;
    TfLiteQuantizationParams params;
    int allocation_type;            /* TfLiteAllocationType */
    size_t bytes;
    const void *allocation;
    const char *name;
    struct TfLiteDelegate *delegate;
    int buffer_handle;
    bool data_is_stale;
    bool is_variable;
    TfLiteQuantization quantization;
    void *sparsity;
    const TfLiteIntArray *dims_signature;
} TfLiteTensor;

typedef struct TfLiteNode {
    TfLiteIntArray *inputs;
    TfLiteIntArray *outputs;
    TfLiteIntArray *intermediates;
    TfLiteIntArray *temporaries;
    void *user_data;
    void *builtin_data;
    const void *custom_initial_data;
    int custom_initial_data_size;
    struct TfLiteDelegate *delegate;
    bool might_have_side_effect;
} TfLiteNode;

typedef struct TfLiteRegistration {
    void *(*init)(struct TfLiteContext *context, const char *buffer, size_t length);
    void (*free)(struct TfLiteContext *context, void *buffer);
    TfLiteStatus (*prepare)(struct TfLiteContext *context, TfLiteNode *node);
    TfLiteStatus (*invoke)(struct TfLiteContext *context, TfLiteNode *node);
    const char *(*profiling_string)(const struct TfLiteContext *context, const TfLiteNode *node);
    int32_t builtin_code;
    const char *custom_name;
    int version;
    void *registration_external;
    void *async_kernel;
    uint64_t inplace_operator;
} TfLiteRegistration;

typedef struct TfLiteContext {
    size_t tensors_size;
    TfLiteStatus (*GetExecutionPlan)(struct TfLiteContext *context, TfLiteIntArray **execution_plan);
    TfLiteTensor *tensors;
    void *impl_;
    TfLiteStatus (*ResizeTensor)(struct TfLiteContext *, TfLiteTensor *tensor, TfLiteIntArray *new_size);
    void (*ReportError)(struct TfLiteContext *, const char *msg, ...);
    void *AddTensors;
    TfLiteStatus (*GetNodeAndRegistration)(struct TfLiteContext *, int node_index, TfLiteNode **node,
                                           TfLiteRegistration **registration);
    TfLiteStatus (*ReplaceNodeSubsetsWithDelegateKernels)(struct TfLiteContext *,
                                                          TfLiteRegistration registration,
                                                          const TfLiteIntArray *nodes_to_replace,
                                                          struct TfLiteDelegate *delegate);
    int recommended_num_threads;
    void *GetExternalContext;
    void *SetExternalContext;
    bool allow_fp32_relax_to_fp16;
    void *profiler;
    void *AllocatePersistentBuffer;
    void *AllocateBufferForEval;
    void *RequestScratchBufferInArena;
    void *GetScratchBuffer;
    void *ResizeTensorExplicit;
    void *PreviewDelegatePartitioning;
    void *GetTensor;
    void *GetEvalTensor;
    void *GetModelMetadata;
    void *AcquireSubgraphContext;
    void *ReleaseSubgraphContext;
} TfLiteContext;

typedef struct TfLiteDelegate {
    void *data_;
    TfLiteStatus (*Prepare)(TfLiteContext *context, struct TfLiteDelegate *delegate);
    TfLiteStatus (*CopyFromBufferHandle)(TfLiteContext *, struct TfLiteDelegate *, int, TfLiteTensor *);
    TfLiteStatus (*CopyToBufferHandle)(TfLiteContext *, struct TfLiteDelegate *, int, TfLiteTensor *);
    void (*FreeBufferHandle)(TfLiteContext *, struct TfLiteDelegate *, int *handle);
    int64_t flags;
    void *opaque_delegate_builder;
} TfLiteDelegate;

typedef struct TfLiteDelegateParams {
    TfLiteDelegate *delegate;
    TfLiteIntArray *nodes_to_replace;
    TfLiteIntArray *input_tensors;
    TfLiteIntArray *output_tensors;
} TfLiteDelegateParams;

/* builtin_data of an ADD node (builtin_op_data.h) */
typedef struct { int activation; bool pot_scale_int16; } TfLiteAddParams;

/* Sizes measured against LiteRT 2.3.0's binary and asserted against the real header
 * (DELEGATE.md). LP64 only: a 32-bit target (armv7 Android) has other sizes. */
#if defined(__LP64__) || defined(_LP64)
#define LITECL_STATIC_ASSERT(cond, what) typedef char litecl_assert_##what[(cond) ? 1 : -1]
LITECL_STATIC_ASSERT(sizeof(TfLiteTensor) == 112, tensor_size);
LITECL_STATIC_ASSERT(sizeof(TfLiteNode) == 80, node_size);
LITECL_STATIC_ASSERT(sizeof(TfLiteRegistration) == 88, registration_size);
LITECL_STATIC_ASSERT(sizeof(TfLiteContext) == 200, context_size);
LITECL_STATIC_ASSERT(sizeof(TfLiteDelegate) == 56, delegate_size);
LITECL_STATIC_ASSERT(sizeof(TfLiteDelegateParams) == 32, params_size);
LITECL_STATIC_ASSERT(offsetof(TfLiteTensor, dims_signature) == 104, tensor_dims_signature);
LITECL_STATIC_ASSERT(offsetof(TfLiteContext, ReplaceNodeSubsetsWithDelegateKernels) == 64, ctx_replace);
LITECL_STATIC_ASSERT(offsetof(TfLiteRegistration, builtin_code) == 40, reg_builtin_code);
#else
#error "litecl's native delegate declares TFLite's structs for LP64 targets (x86-64, arm64) only"
#endif

#endif
