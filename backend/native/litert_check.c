/* The running TFLite runtime's version, and a plausibility check of its TfLiteContext
 * (litert_check.h says why these two and where the version comes from). */
#define _GNU_SOURCE
#include "litert_check.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python packages holding a TFLite interpreter, and the distributions that install each
 * (as their .dist-info folder names spell them, normalised: lower case, '_' for '-'/'.') */
static const struct { const char *package; const char *dists[3]; } WHEELS[] = {
    {"ai_edge_litert", {"ai_edge_litert", "ai_edge_litert_nightly", NULL}},
    {"tensorflow", {"tensorflow", "tensorflow_cpu", "tf_nightly"}},
    {"tflite_runtime", {"tflite_runtime", NULL, NULL}},
};
#define N_WHEELS (int)(sizeof WHEELS / sizeof WHEELS[0])
#define MAX_FOUND 8

typedef struct { char site[1024]; int wheel; } package_dir;
typedef struct { package_dir dirs[MAX_FOUND]; int n; } loaded_packages;

/* dl_iterate_phdr: each loaded object under <site>/<package>/ (first such folder of its
 * path) adds (site, package) once */
static int on_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    loaded_packages *f = data;
    const char *name = info->dlpi_name;
    if (!name || name[0] != '/') return 0;
    for (const char *p = name; (p = strchr(p, '/'));) {
        const char *comp = p + 1, *end = strchr(comp, '/');
        if (!end) break; /* the file name itself */
        for (int w = 0; w < N_WHEELS; w++) {
            size_t n = strlen(WHEELS[w].package);
            if ((size_t)(end - comp) != n || memcmp(comp, WHEELS[w].package, n) || p == name) continue;
            size_t site_len = (size_t)(p - name);
            if (site_len >= sizeof f->dirs[0].site) return 0;
            for (int i = 0; i < f->n; i++)
                if (f->dirs[i].wheel == w && strlen(f->dirs[i].site) == site_len &&
                    !memcmp(f->dirs[i].site, name, site_len))
                    return 0;
            if (f->n < MAX_FOUND) {
                memcpy(f->dirs[f->n].site, name, site_len);
                f->dirs[f->n].site[site_len] = 0;
                f->dirs[f->n++].wheel = w;
            }
            return 0;
        }
        p = end;
    }
    return 0;
}

/* "Ai-Edge.LiteRT" -> "ai_edge_litert" (PEP 503 names as dist-info folders write them) */
static void normalise(const char *s, size_t n, char *out, size_t len) {
    size_t i = 0;
    for (; i < n && i + 1 < len; i++) {
        char c = s[i];
        out[i] = c == '-' || c == '.' ? '_' : c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    out[i] = 0;
}

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* 1 when distribution ``dist`` (normalised) at ``version`` is one of ``tested`` */
static int is_tested(const char *const *tested, int n_tested, const char *dist, const char *version) {
    for (int i = 0; i < n_tested; i++) {
        char norm[64];
        normalise(tested[2 * i], strlen(tested[2 * i]), norm, sizeof norm);
        if (!strcmp(norm, dist) && starts_with(version, tested[2 * i + 1])) return 1;
    }
    return 0;
}

/* "ai-edge-litert 2.1.x, 2.2.x, 2.3.x; tensorflow 2.21.x" */
static void tested_text(const char *const *tested, int n_tested, char *out, size_t len) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n_tested && used < len; i++) {
        int same = i && !strcmp(tested[2 * i], tested[2 * i - 2]);
        int k = snprintf(out + used, len - used, "%s%s%s%sx", i ? (same ? ", " : "; ") : "",
                         same ? "" : tested[2 * i], same ? "" : " ", tested[2 * i + 1]);
        if (k < 0) break;
        used += (size_t)k;
    }
    if (!n_tested) snprintf(out, len, "none");
}

int lcl_litert_version_check(const char *const *tested, int n_tested, char *why, size_t len) {
    char list[256];
    tested_text(tested, n_tested, list, sizeof list);
    loaded_packages f;
    f.n = 0;
    dl_iterate_phdr(on_object, &f);
    int found = 0, unknown = 0;
    char unknown_what[8192] = "";
    for (int i = 0; i < f.n; i++) {
        const char *pkg = WHEELS[f.dirs[i].wheel].package;
        int versions = 0;
        DIR *dir = opendir(f.dirs[i].site);
        for (struct dirent *e; dir && (e = readdir(dir));) {
            /* <name>-<version>.dist-info (the wheel spec; '-' appears in neither part) */
            const char *dash = strchr(e->d_name, '-');
            size_t n = strlen(e->d_name), suffix = strlen(".dist-info");
            if (!dash || n <= suffix || strcmp(e->d_name + n - suffix, ".dist-info")) continue;
            char dist[64], version[64];
            normalise(e->d_name, (size_t)(dash - e->d_name), dist, sizeof dist);
            int mine = 0;
            for (int k = 0; k < 3 && WHEELS[f.dirs[i].wheel].dists[k]; k++)
                mine |= !strcmp(dist, WHEELS[f.dirs[i].wheel].dists[k]);
            if (!mine) continue;
            snprintf(version, sizeof version, "%.*s", (int)(e->d_name + n - suffix - dash - 1), dash + 1);
            versions++;
            if (!is_tested(tested, n_tested, dist, version)) {
                for (char *c = dist; *c; c++) if (*c == '_') *c = '-';
                snprintf(why, len, "%s %s (%s/%s) is not a version litecl's native delegate was checked "
                         "against (%s): its TFLite C structs may differ; install a tested version",
                         dist, version, f.dirs[i].site, pkg, list);
                closedir(dir);
                return -1;
            }
            found = 1;
        }
        if (dir) closedir(dir);
        if (!versions && !unknown++)
            snprintf(unknown_what, sizeof unknown_what, "%s/%s is loaded but no %s-*.dist-info beside it "
                     "says its version", f.dirs[i].site, pkg, pkg);
    }
    /* TFLite's C library (c_api.h TfLiteVersion: TensorFlow's version string) */
    void *sym = dlsym(RTLD_DEFAULT, "TfLiteVersion");
    if (sym) {
        const char *(*tflite_version)(void);
        memcpy(&tflite_version, &sym, sizeof sym); /* POSIX: a dlsym result is callable */
        const char *v = tflite_version();
        if (!v) v = "(null)";
        if (!is_tested(tested, n_tested, "tensorflow", v)) {
            snprintf(why, len, "TensorFlow Lite %s (TfLiteVersion) is not a version litecl's native delegate "
                     "was checked against (%s): its TFLite C structs may differ; install a tested version",
                     v, list);
            return -1;
        }
        found = 1;
    }
    if (found && !unknown) return 1;
    snprintf(why, len, "%s", unknown ? unknown_what
             : "no TFLite runtime version found in this process (no ai_edge_litert, tensorflow or "
               "tflite_runtime wheel loaded, no TfLiteVersion symbol)");
    return 0;
}

/* the function pointer's address is code of a loaded library (dladdr finds its object) */
static int is_code(const void *fn_field) {
    void *p;
    memcpy(&p, fn_field, sizeof p);
    Dl_info info;
    return p && dladdr(p, &info) && info.dli_fbase;
}

int lcl_context_plausible(const TfLiteContext *ctx, char *why, size_t len) {
    if (!ctx) {
        snprintf(why, len, "no context");
        return 0;
    }
    if (ctx->tensors_size > (1u << 28) || (ctx->tensors_size && !ctx->tensors)) {
        snprintf(why, len, "tensors_size %zu with tensors at %p", ctx->tensors_size, (void *)ctx->tensors);
        return 0;
    }
    const struct { const char *name; const void *field; } fns[] = {
        {"GetExecutionPlan", &ctx->GetExecutionPlan}, {"ResizeTensor", &ctx->ResizeTensor},
        {"ReportError", &ctx->ReportError}, {"GetNodeAndRegistration", &ctx->GetNodeAndRegistration},
        {"ReplaceNodeSubsetsWithDelegateKernels", &ctx->ReplaceNodeSubsetsWithDelegateKernels},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!is_code(fns[i].field)) {
            snprintf(why, len, "its %s is not code of a loaded library", fns[i].name);
            return 0;
        }
    unsigned char relax;
    memcpy(&relax, &ctx->allow_fp32_relax_to_fp16, 1);
    if (ctx->recommended_num_threads < -1 || ctx->recommended_num_threads > (1 << 16) || relax > 1) {
        snprintf(why, len, "recommended_num_threads %d, allow_fp32_relax_to_fp16 %d", ctx->recommended_num_threads,
                 (int)relax);
        return 0;
    }
    return 1;
}
