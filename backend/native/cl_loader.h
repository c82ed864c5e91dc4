/* OpenCL reached at run time, with no OpenCL header or library at build time.
 *
 * The delegate links only libc and libdl: ``lcl_cl_open`` dlopens one library and fills
 * ``lcl_cl`` with the OpenCL 1.2 entry points litecl calls, in one of two ways
 * (../shared/docs/DELEGATE.md, "Reaching OpenCL without pyopencl"):
 *  - a library that exports the API (an ICD loader such as libOpenCL.so.1, Android's
 *    libOpenCL.so, Intel's libintelocl.so): each function by dlsym;
 *  - an ICD vendor library (PoCL's libpocl.so, NVIDIA's libnvidia-opencl.so.1) that
 *    exports only clGetExtensionFunctionAddress: its platforms come from
 *    clIcdGetPlatformIDsKHR (cl_khr_icd), and every other call goes through the
 *    dispatch table each of its objects starts with (the _cl_icd_dispatch layout of
 *    Khronos' CL/cl_icd.h, OpenCL 1.0-1.2 entries), as an ICD loader does.
 * Constants are the values of Khronos' CL/cl.h. */
#ifndef LITECL_CL_LOADER_H
#define LITECL_CL_LOADER_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef cl_bitfield cl_mem_flags;
typedef cl_bitfield cl_device_type;
typedef cl_bitfield cl_map_flags;
typedef cl_bitfield cl_command_queue_properties;
typedef intptr_t cl_context_properties;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

#define CL_SUCCESS 0
#define CL_TRUE 1
#define CL_FALSE 0
#define CL_PLATFORM_NAME 0x0902
#define CL_PLATFORM_VERSION 0x0901
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFu
#define CL_DEVICE_TYPE_CPU (1 << 1)
#define CL_DEVICE_TYPE_GPU (1 << 2)
#define CL_DEVICE_TYPE 0x1000
#define CL_DEVICE_MAX_COMPUTE_UNITS 0x1002
#define CL_DEVICE_MAX_WORK_GROUP_SIZE 0x1004
#define CL_DEVICE_NAME 0x102B
#define CL_DEVICE_MAX_MEM_ALLOC_SIZE 0x1010
#define CL_DEVICE_PROFILE 0x102E
#define CL_DEVICE_PLATFORM 0x1031
#define CL_DEVICE_VERSION 0x102F
#define CL_DRIVER_VERSION 0x102D
#define CL_DEVICE_EXTENSIONS 0x1030
#define CL_PROGRAM_BINARY_SIZES 0x1165
#define CL_PROGRAM_BINARIES 0x1166
#define CL_CONTEXT_PLATFORM 0x1084
#define CL_MEM_READ_WRITE (1 << 0)
#define CL_MEM_READ_ONLY (1 << 2)
#define CL_MEM_USE_HOST_PTR (1 << 3)
#define CL_MEM_ALLOC_HOST_PTR (1 << 4)
#define CL_MEM_COPY_HOST_PTR (1 << 5)
#define CL_MAP_READ (1 << 0)
#define CL_MAP_WRITE (1 << 1)
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_KERNEL_WORK_GROUP_SIZE 0x11B0
#define CL_KERNEL_NUM_ARGS 0x1191
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3
#define CL_PROFILING_COMMAND_QUEUED 0x1280
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283
#define CL_COMPLETE 0x0

/* The entry points litecl uses; each field's comment is its _cl_icd_dispatch index. */
typedef struct lcl_cl {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);                         /* 0 */
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_uint, size_t, void *, size_t *);           /* 1 */
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *); /* 2 */
    cl_int (*GetDeviceInfo)(cl_device_id, cl_uint, size_t, void *, size_t *);               /* 3 */
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void (*)(const char *, const void *, size_t, void *), void *,
                                cl_int *);                                                  /* 4 */
    cl_int (*ReleaseContext)(cl_context);                                                   /* 7 */
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                           cl_int *);                                       /* 9 */
    cl_int (*ReleaseCommandQueue)(cl_command_queue);                                        /* 11 */
    cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);             /* 14 */
    cl_int (*ReleaseMemObject)(cl_mem);                                                     /* 18 */
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *,
                                          cl_int *);                                        /* 26 */
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id *, const size_t *,
                                          const unsigned char **, cl_int *, cl_int *);      /* 27 */
    cl_int (*ReleaseProgram)(cl_program);                                                   /* 29 */
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void (*)(cl_program, void *), void *);                           /* 30 */
    cl_int (*GetProgramInfo)(cl_program, cl_uint, size_t, void *, size_t *);                  /* 32 */
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *); /* 33 */
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);                          /* 34 */
    cl_int (*ReleaseKernel)(cl_kernel);                                                     /* 37 */
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);                       /* 38 */
    cl_int (*GetKernelInfo)(cl_kernel, cl_uint, size_t, void *, size_t *);                 /* 39 */
    cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_uint, size_t, void *, size_t *); /* 40 */
    cl_int (*WaitForEvents)(cl_uint, const cl_event *);                                     /* 41 */
    cl_int (*GetEventInfo)(cl_event, cl_uint, size_t, void *, size_t *);                   /* 42 */
    cl_int (*RetainEvent)(cl_event);                                                        /* 43 */
    cl_int (*ReleaseEvent)(cl_event);                                                       /* 44 */
    cl_int (*GetEventProfilingInfo)(cl_event, cl_uint, size_t, void *, size_t *);           /* 45 */
    cl_int (*Flush)(cl_command_queue);                                                      /* 46 */
    cl_int (*Finish)(cl_command_queue);                                                     /* 47 */
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint,
                                const cl_event *, cl_event *);                              /* 48 */
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *,
                                 cl_uint, const cl_event *, cl_event *);                    /* 49 */
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *);                              /* 50 */
    void *(*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_uint, cl_map_flags, size_t, size_t,
                              cl_uint, const cl_event *, cl_event *, cl_int *);             /* 56 */
    cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void *, cl_uint, const cl_event *,
                                    cl_event *);                                            /* 58 */
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                   const size_t *, const size_t *, cl_uint, const cl_event *,
                                   cl_event *);                                             /* 59 */
} lcl_cl;

/* Open ``library`` (a path or a name dlopen searches) and fill ``cl``. Returns 0, or -1
 * with a one-line reason in ``err`` (no library, neither export style, no platform). On
 * success ``*platforms``/``*n_platforms`` list its platforms (malloc'd; the caller frees). */
int lcl_cl_open(const char *library, lcl_cl *cl, void **handle, cl_platform_id **platforms,
                cl_uint *n_platforms, char *err, size_t err_len);

#endif
