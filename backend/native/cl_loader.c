/* OpenCL entry points from a library opened at run time (cl_loader.h says how). */
#define _GNU_SOURCE
#include "cl_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (field offset in lcl_cl, exported name, index in Khronos' _cl_icd_dispatch) */
#define ENTRY(field, index) { offsetof(lcl_cl, field), "cl" #field, index }
static const struct { size_t offset; const char *name; int index; } ENTRIES[] = {
    ENTRY(GetPlatformIDs, 0), ENTRY(GetPlatformInfo, 1), ENTRY(GetDeviceIDs, 2),
    ENTRY(GetDeviceInfo, 3), ENTRY(CreateContext, 4), ENTRY(ReleaseContext, 7),
    ENTRY(CreateCommandQueue, 9), ENTRY(ReleaseCommandQueue, 11), ENTRY(CreateBuffer, 14),
    ENTRY(ReleaseMemObject, 18), ENTRY(CreateProgramWithSource, 26),
    ENTRY(CreateProgramWithBinary, 27), ENTRY(ReleaseProgram, 29), ENTRY(BuildProgram, 30),
    ENTRY(GetProgramInfo, 32), ENTRY(GetProgramBuildInfo, 33), ENTRY(CreateKernel, 34), ENTRY(ReleaseKernel, 37),
    ENTRY(SetKernelArg, 38), ENTRY(GetKernelInfo, 39), ENTRY(GetKernelWorkGroupInfo, 40), ENTRY(WaitForEvents, 41), ENTRY(GetEventInfo, 42),
    ENTRY(RetainEvent, 43), ENTRY(ReleaseEvent, 44), ENTRY(GetEventProfilingInfo, 45), ENTRY(Flush, 46), ENTRY(Finish, 47),
    ENTRY(EnqueueReadBuffer, 48), ENTRY(EnqueueWriteBuffer, 49), ENTRY(EnqueueCopyBuffer, 50),
    ENTRY(EnqueueMapBuffer, 56), ENTRY(EnqueueUnmapMemObject, 58),
    ENTRY(EnqueueNDRangeKernel, 59),
};
#define N_ENTRIES (sizeof(ENTRIES) / sizeof(ENTRIES[0]))
/* the highest dispatch index read: tables of OpenCL 1.0 runtimes end after index 65 */
#define LAST_INDEX 59

typedef void (*any_fn)(void);
typedef void *(*get_ext_fn)(const char *);
typedef cl_int (*icd_platforms_fn)(cl_uint, cl_platform_id *, cl_uint *);

static void set_entry(lcl_cl *cl, size_t offset, void *sym) {
    any_fn fn;
    memcpy(&fn, &sym, sizeof fn); /* POSIX: a dlsym result is callable as a function */
    memcpy((char *)cl + offset, &fn, sizeof fn);
}

static int fail(char *err, size_t len, const char *what, const char *library) {
    snprintf(err, len, "%s (%s)", what, library);
    return -1;
}

/* Libraries that export LLVM process-wide (backend/icd.py _LLVM_EXPORTERS, the same
 * names): TensorFlow's. Where one is mapped, a runtime that links its own LLVM (Debian's
 * PoCL 3.1: libLLVM-15, libclang-cpp15) is opened with RTLD_DEEPBIND, so it resolves LLVM
 * against its own copy: opened plainly after `import tensorflow`, libclang-cpp's static
 * initialisers ran into TensorFlow's LLVM and the process segfaulted (found by a fresh
 * user: tf.lite.experimental.load_delegate of a PoCL export). Only then: DEEPBIND defeats
 * symbol interposition (sanitizers refuse it). */
static const char *const LLVM_EXPORTERS[] = {"libtensorflow_framework", "libtensorflow_cc",
                                             "_pywrap_tensorflow_internal"};

static int llvm_exporter_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[4096];
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f))
        for (size_t i = 0; i < sizeof LLVM_EXPORTERS / sizeof LLVM_EXPORTERS[0] && !hit; i++)
            hit = strstr(line, LLVM_EXPORTERS[i]) != NULL;
    fclose(f);
    return hit;
}

#ifdef RTLD_DEEPBIND
/* Where TensorFlow is mapped and ``library`` is an ICD loader: each vendor library it will
 * open (the .icd files of OCL_ICD_VENDORS, a folder or one file, else /etc/OpenCL/vendors)
 * opened first with RTLD_DEEPBIND, as backend/icd.py _preload_icds_if_llvm_clash does; the
 * loader's own dlopen of the same library then returns this one. Opened plainly by the
 * loader, Debian's PoCL ran into TensorFlow's LLVM: the native library loaded with no
 * options segfaulted after `import tensorflow` (a fresh user's report). Failures are left
 * to the loader, which reports them as before. */
static void preload_icd_vendors(void) {
    const char *env = getenv("OCL_ICD_VENDORS");
    const char *where = env && *env ? env : "/etc/OpenCL/vendors";
    struct stat st;
    if (stat(where, &st)) return;
    char path[4096], lib[4096];
    DIR *dir = S_ISDIR(st.st_mode) ? opendir(where) : NULL;
    struct dirent *e = NULL;
    for (int one = !S_ISDIR(st.st_mode); one || (dir && (e = readdir(dir))); one = 0) {
        if (one) snprintf(path, sizeof path, "%s", where);
        else {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 4, ".icd")) continue;
            snprintf(path, sizeof path, "%s/%s", where, e->d_name);
        }
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(lib, sizeof lib, f)) {
            lib[strcspn(lib, "\r\n")] = 0;
            if (lib[0]) (void)dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND); /* kept for the process */
        }
        fclose(f);
    }
    if (dir) closedir(dir);
}
#endif

int lcl_cl_open(const char *library, lcl_cl *cl, void **handle, cl_platform_id **platforms,
                cl_uint *n_platforms, char *err, size_t err_len) {
    int mode = RTLD_NOW | RTLD_LOCAL, llvm = 0;
#ifdef RTLD_DEEPBIND /* glibc; bionic (Android) has none, and no TensorFlow in-process */
    if ((llvm = llvm_exporter_mapped())) mode |= RTLD_DEEPBIND;
#else
    (void)llvm_exporter_mapped;
#endif
    void *h = dlopen(library, mode);
    if (!h) {
        const char *why = dlerror();
        snprintf(err, err_len, "cannot open OpenCL library %s: %s", library, why ? why : "dlopen failed");
        return -1;
    }
    memset(cl, 0, sizeof *cl);
    *handle = h;
    *platforms = NULL;
    *n_platforms = 0;
    void *direct = dlsym(h, "clGetPlatformIDs");
    cl_uint n = 0;
    if (direct) { /* the library exports the API (an ICD loader, Intel's runtime) */
#ifdef RTLD_DEEPBIND
        const char *base = strrchr(library, '/');
        if (llvm && !strncmp(base ? base + 1 : library, "libOpenCL", 9)) preload_icd_vendors(); /* a loader */
#endif
        (void)llvm;
        for (size_t i = 0; i < N_ENTRIES; i++) {
            void *sym = dlsym(h, ENTRIES[i].name);
            if (!sym) {
                char what[128];
                snprintf(what, sizeof what, "OpenCL library exports clGetPlatformIDs but not %s",
                         ENTRIES[i].name);
                return fail(err, err_len, what, library);
            }
            set_entry(cl, ENTRIES[i].offset, sym);
        }
        if (cl->GetPlatformIDs(0, NULL, &n) != CL_SUCCESS || n == 0)
            return fail(err, err_len, "no OpenCL platform found", library);
        *platforms = calloc(n, sizeof **platforms);
        if (!*platforms || cl->GetPlatformIDs(n, *platforms, NULL) != CL_SUCCESS)
            return fail(err, err_len, "clGetPlatformIDs failed", library);
        *n_platforms = n;
        return 0;
    }
    /* an ICD vendor library (cl_khr_icd): platforms from clIcdGetPlatformIDsKHR, calls
     * through the dispatch table at the start of every object it returns */
    void *get = dlsym(h, "clGetExtensionFunctionAddress");
    void *icd = dlsym(h, "clIcdGetPlatformIDsKHR");
    if (!icd && get) {
        get_ext_fn g;
        memcpy(&g, &get, sizeof g);
        icd = g("clIcdGetPlatformIDsKHR");
    }
    if (!icd)
        return fail(err, err_len,
                    "not an OpenCL library: it exports neither clGetPlatformIDs nor clIcdGetPlatformIDsKHR",
                    library);
    icd_platforms_fn icd_ids;
    memcpy(&icd_ids, &icd, sizeof icd_ids);
    if (icd_ids(0, NULL, &n) != CL_SUCCESS || n == 0)
        return fail(err, err_len, "the ICD library reports no OpenCL platform", library);
    *platforms = calloc(n, sizeof **platforms);
    if (!*platforms || icd_ids(n, *platforms, NULL) != CL_SUCCESS)
        return fail(err, err_len, "clIcdGetPlatformIDsKHR failed", library);
    *n_platforms = n;
    void *const *table = *(void *const *const *)(*platforms)[0];
    for (size_t i = 0; i < N_ENTRIES; i++) {
        void *sym = table[ENTRIES[i].index];
        if (!sym && ENTRIES[i].index != 0) /* index 0 (clGetPlatformIDs) may be empty */
            return fail(err, err_len, "the ICD dispatch table lacks an OpenCL 1.2 entry", library);
        set_entry(cl, ENTRIES[i].offset, sym);
    }
    (void)LAST_INDEX;
    return 0;
}
