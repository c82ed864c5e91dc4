/* Which TFLite runtime litecl's native delegate was loaded into, and whether its context
 * reads as tflite_abi.h declares it (the native counterpart of backend/abi.py
 * check_versions and backend/delegate.py _self_check).
 *
 * The runtime's version: neither LiteRT 2.3's Python wheel (ai_edge_litert: its
 * libpywrap_litert_common.so exports 15 symbols, none a version) nor tensorflow 2.21's
 * tf.lite exports a version symbol (`nm -D`, checked), so the version is the one of the
 * Python wheel whose shared objects are loaded in the process: the package folder an
 * object lives in (ai_edge_litert/, tensorflow/, tflite_runtime/) and the
 * ``<dist>-<version>.dist-info`` folder beside it, as importlib.metadata reads it. A C
 * program linking TFLite's C library (libtensorflowlite_c) exports ``TfLiteVersion``:
 * its value is TensorFlow's numbering, checked against the tested tensorflow versions.
 * Where neither is found (an Android app, a static benchmark_model) there is no version
 * to read: the delegate then relies on ``lcl_context_plausible`` at every Prepare.
 *
 * libc and libdl only (dl_iterate_phdr, dladdr, dlsym, opendir). */
#ifndef LITECL_LITERT_CHECK_H
#define LITECL_LITERT_CHECK_H

#include <stddef.h>

#include "tflite_abi.h"

/* ``tested``: n_tested (distribution, version prefix) pairs, e.g. {"ai-edge-litert",
 * "2.3.", "tensorflow", "2.21."} (export.py writes backend/abi.py TESTED).
 * Returns 1 when every runtime found is a tested version; 0 when no version could be
 * found (``why``: what was looked for); -1 when one is untested (``why``: one line
 * naming it and the tested versions). */
int lcl_litert_version_check(const char *const *tested, int n_tested, char *why, size_t len);

/* 1 when ``ctx`` reads plausibly through tflite_abi.h's TfLiteContext: the tensor count
 * and array, the thread count, the bool flag, and every function pointer litecl calls
 * is code of a loaded library (a shifted layout puts counts or heap pointers there);
 * else 0 with ``why``. Reads fields only: calls nothing of LiteRT's. */
int lcl_context_plausible(const TfLiteContext *ctx, char *why, size_t len);

#endif
