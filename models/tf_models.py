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


def while_grow_model() -> bytes:
    """float32[None] x, int32[1] n -> WHILE n times: x = x + x * 0.5 - 0.0, acc = concat(acc,
    CAST x to int32) (a state that grows: static at the declared [1], dynamic at [5]) ->
    x, acc, CAST acc to float32 + 0.25, i (a fresh user's decoder-like loop)."""
    import tensorflow as tf  # noqa: PLC0415

    def f(x, n):
        i, acc = tf.constant(0), tf.zeros([0], tf.int32)

        def body(i, x, acc):
            y = x + x * 0.5 + tf.constant(-0.0)
            return i + 1, y, tf.concat([acc, tf.cast(y, tf.int32)], 0)

        i, x, acc = tf.while_loop(lambda i, x, acc: i < n[0], body, [i, x, acc],
                                  shape_invariants=[i.shape, tf.TensorShape([None]), tf.TensorShape([None])])
        return {"x": x, "acc": acc, "accf": tf.cast(acc, tf.float32) + 0.25, "i": i}

    fn = tf.function(f, input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([1], tf.int32)])
    return tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn).convert()


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


def reshape_scalar_model() -> bytes:
    """float32[] x -> ADD 1 -> RESHAPE to [] (its shape operand: an int32[0] constant with
    an empty buffer) -> MUL 2 (issue 12's smallest zero-element-constant case)."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])
    def f(x):
        return tf.reshape(x + 1.0, []) * 2.0

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def dynamic_reshape_model() -> bytes:
    """float32[1, 16] x -> SHAPE, STRIDED_SLICE, FLOOR_DIV, PACK -> RESHAPE to
    [1, n // 4, 4, 1] (a shape computed at invoke), ADD 1, two CONV_2D: the RESHAPE's
    output shape is known only after the nodes before it ran (issue 12 item 1)."""
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    w1 = tf.constant(np.linspace(-1, 1, 3 * 3 * 1 * 2, dtype=np.float32).reshape(3, 3, 1, 2))
    w2 = tf.constant(np.linspace(-0.5, 0.5, 3 * 3 * 2 * 2, dtype=np.float32).reshape(3, 3, 2, 2))

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32)])
    def f(x):
        n = tf.shape(x)[1] // 4
        r = tf.reshape(x, tf.stack([1, n, 4, 1])) + 1.0
        y = tf.nn.conv2d(r, w1, 1, "SAME")
        return tf.nn.conv2d(y, w2, 1, "SAME")

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def add_then_dynamic_model() -> bytes:
    """float32[None, 1] x -> ADD [[1, 2]] (a broadcast: its kernel compiles in the
    shapes) -> SHAPE, STRIDED_SLICE, PACK -> RESHAPE to [1, n, 2, 1] (a shape computed at
    invoke) -> ADD 1: the first ADD is prepared at
    allocate, the graph still has invoke-time shapes (its delegate sets
    AllowDynamicTensors)."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def f(x):
        a = x + tf.constant([[1.0, 2.0]])
        n = tf.shape(a)[0]
        return tf.reshape(a, tf.stack([1, n, 2, 1])) + 1.0

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def dynamic_broadcast_add_model() -> bytes:
    """int32 x [None, 1] + y [1, None] -> ADD (a broadcast whose operands' shapes a resize
    changes; TensorFlow's converter writes the -1s in their shape signatures)."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.int32), tf.TensorSpec([1, None], tf.int32)])
    def f(x, y):
        return x + y

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def detector_head_model() -> bytes:
    """A YOLO/MobileBERT-like mix: float32[1, 8, 8, 4] x -> CONV_2D -> CONV_2D -> residual
    ADD of the two (LiteRT's GPU delegate takes these) -> ARG_MAX (int64 indices) -> CAST
    int64 -> float32 -> ADD 0.5 -> CAST float32 -> int32; and a second head of the ADD:
    CAST float32 -> int64 + int64 ADD (the GPU delegate refuses int64 CASTs and ADDs)."""
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    w1 = tf.constant(np.linspace(-1, 1, 3 * 3 * 4 * 4, dtype=np.float32).reshape(3, 3, 4, 4))
    w2 = tf.constant(np.linspace(-0.5, 0.7, 3 * 3 * 4 * 4, dtype=np.float32).reshape(3, 3, 4, 4))

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 4], tf.float32)])
    def f(x):
        y = tf.nn.conv2d(x, w1, 1, "SAME")
        z = tf.nn.conv2d(y, w2, 1, "SAME")
        r = y + z
        idx = tf.math.argmax(r, axis=-1)  # int64
        score = tf.cast(idx, tf.float32) + 0.5
        boxes = tf.cast(tf.cast(r * 100.0, tf.int64) + tf.constant(7, tf.int64), tf.float16)
        return tf.cast(score, tf.int32), boxes

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def if_dynamic_model() -> bytes:
    """float32 x [None, None], bool p -> IF: CAST x to uint8, back to float32, + x; else
    CAST x to int16, back to float32, + 2. The branch subgraphs' tensors carry no -1 shape
    signature, though a resize of x changes their shapes (a fresh user's export failed
    there at any shape but the exported one, then LiteRT crashed)."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([], tf.bool)])
    def f(x, p):
        return tf.cond(p, lambda: tf.cast(tf.cast(x, tf.uint8), tf.float32) + x,
                       lambda: tf.cast(tf.cast(x, tf.int16), tf.float32) + 2.0)

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


def if_static_model() -> bytes:
    """float32 x [2, 5], bool p -> IF: x + [1, 2, 3, 4, 5] (a broadcast), else CAST x to
    int32 and back: every shape static, the branches' too."""
    import tensorflow as tf  # noqa: PLC0415

    @tf.function(input_signature=[tf.TensorSpec([2, 5], tf.float32), tf.TensorSpec([], tf.bool)])
    def f(x, p):
        return tf.cond(p, lambda: x + tf.constant([1.0, 2.0, 3.0, 4.0, 5.0]),
                       lambda: tf.cast(tf.cast(x, tf.int32), tf.float32))

    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert()


MODELS = {"detector_head": detector_head_model, "if_dynamic": if_dynamic_model, "if_static": if_static_model, "while_cast": while_cast_model,
          "while_grow": while_grow_model, "variable_cast": variable_cast_model,
          "reshape_scalar": reshape_scalar_model, "dynamic_reshape": dynamic_reshape_model,
          "dynamic_broadcast_add": dynamic_broadcast_add_model, "add_then_dynamic": add_then_dynamic_model}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODELS:
        print(f"usage: python -m models.tf_models {{{'|'.join(MODELS)}}} > model.tflite", file=sys.stderr)
        sys.exit(2)
    sys.stdout.buffer.write(MODELS[sys.argv[1]]())
