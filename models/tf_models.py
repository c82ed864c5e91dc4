"""Models that need the TensorFlow converter: control flow and resource variables.

TensorFlow exports its own LLVM symbols; loading it in a process that also loads an
OpenCL ICD built on LLVM (Oclgrind, PoCL, Intel) crashes at load or exit (measured: a
segfault in llvm::cl::Option::addArgument from liboclgrind's static constructors). So
tests call these through ``python -m models.tf_models NAME`` in a subprocess, which
writes the .tflite bytes to stdout.
"""
from __future__ import annotations

import sys


def while_cast_model() -> bytes:
    """float32[5] x, int32 n -> CAST int32 -> WHILE (acc += x, n times) -> CAST float16."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([5], tf.float32), tf.TensorSpec([], tf.int32)])
    def f(x, n):
        xi = tf.cast(x, tf.int32)
        i = tf.constant(0)
        _, acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + xi), [i, xi])
        return tf.cast(acc, tf.float16)

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])
    return conv.convert()


def variable_cast_model() -> bytes:
    """int32[4] x -> CAST float32 -> ASSIGN_ADD to a resource variable -> READ -> CAST int64."""
    import tensorflow as tf  # noqa: PLC0415

    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(tf.zeros([4], tf.float32))

        @tf.function(input_signature=[tf.TensorSpec([4], tf.int32)])
        def step(self, x):
            self.v.assign_add(tf.cast(x, tf.float32))
            return tf.cast(self.v.read_value(), tf.int64)

    mod = M()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([mod.step.get_concrete_function()], mod)
    conv.experimental_enable_resource_variables = True
    return conv.convert()


MODELS = {"while_cast": while_cast_model, "variable_cast": variable_cast_model}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODELS:
        print(f"usage: python -m models.tf_models {{{'|'.join(MODELS)}}} > model.tflite", file=sys.stderr)
        sys.exit(2)
    sys.stdout.buffer.write(MODELS[sys.argv[1]]())
