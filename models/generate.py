"""Generate .tflite models with the CAST patterns real models have, via TensorFlow's converter.

Usage::

    python -m models.generate --out /tmp/litecl_models             # all models
    python -m models.generate --out DIR --only image_u8_conv --size 1048576

Each model is a ``tf.function`` with a fixed input signature converted with
``tf.lite.TFLiteConverter.from_concrete_functions`` (builtin ops only, no optimizations,
so no quantization and no float16 weight rewriting). After conversion the script reads
the model's operator list back with the TFLite schema (models.builders.op_counts) and
prints the builtin ops and CAST pairs of every model; it exits with status 1 when an
expected CAST did not survive conversion.

The models (never committed; write them outside the repository or in an ignored folder):

- image_u8_conv: uint8 [1,32,32,3] -> CAST f32 -> (x - 127.5) / 127.5 -> CONV_2D 3x3x8.
- attention_mask_bool / attention_mask_int32: mask [1,S] -> CAST f32 -> (1 - m) * -1e4,
  reshaped to [1,1,1,S] and ADDed to f32 logits [1,2,S,S] -> SOFTMAX.
- token_ids_i64_gather: int64 ids [1,16] -> CAST int32 -> GATHER from a [100,8] table.
- big_f32_to_f16, big_u8_to_f32, big_i64_to_f16: one CAST of [size] elements.
- big_add_f32: ADD f32 [size] + [size].
- big_u8_f32_add_f16: uint8 [size] -> CAST f32 -> ADD 1.0 -> CAST f16.

The converter needs nothing special to keep these CASTs: they sit on graph inputs, so
nothing can fold them. Requires TensorFlow (the ``test`` extra).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, NamedTuple

if __package__ in (None, ""):  # run as a script: make ``models`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.builders import cast_pairs, op_counts  # noqa: E402

DEFAULT_SIZE = 16 * 1024 * 1024  # 16M elements: large enough to be bandwidth-bound
SEQ = 8  # attention sequence length


class Spec(NamedTuple):
    """One model: its input signature, its function and the CAST pairs it must keep."""

    inputs: list  # of (shape, tf dtype name, input name)
    fn: Callable
    casts: set  # {(src, dst)} type names that must appear after conversion


def _specs(size: int) -> dict[str, Spec]:
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    conv_w = tf.constant(rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.1)
    conv_b = tf.constant(rng.standard_normal(8).astype(np.float32) * 0.1)
    table = tf.constant(rng.standard_normal((100, 8)).astype(np.float32))

    def image_u8_conv(img):
        x = (tf.cast(img, tf.float32) - 127.5) * (1.0 / 127.5)
        return tf.nn.relu(tf.nn.conv2d(x, conv_w, strides=1, padding="SAME") + conv_b)

    def attention(logits, mask):
        bias = (1.0 - tf.cast(mask, tf.float32)) * -1e4
        return tf.nn.softmax(logits * 0.125 + tf.reshape(bias, [1, 1, 1, SEQ]), axis=-1)

    def token_gather(ids):
        return tf.gather(table, tf.cast(ids, tf.int32))

    return {
        "image_u8_conv": Spec([((1, 32, 32, 3), "uint8", "image")], image_u8_conv, {("uint8", "float32")}),
        "attention_mask_bool": Spec([((1, 2, SEQ, SEQ), "float32", "logits"), ((1, SEQ), "bool", "mask")],
                                    attention, {("bool", "float32")}),
        "attention_mask_int32": Spec([((1, 2, SEQ, SEQ), "float32", "logits"), ((1, SEQ), "int32", "mask")],
                                     attention, {("int32", "float32")}),
        "token_ids_i64_gather": Spec([((1, 16), "int64", "ids")], token_gather, {("int64", "int32")}),
        "big_f32_to_f16": Spec([((size,), "float32", "x")], lambda x: tf.cast(x, tf.float16),
                               {("float32", "float16")}),
        "big_u8_to_f32": Spec([((size,), "uint8", "x")], lambda x: tf.cast(x, tf.float32),
                              {("uint8", "float32")}),
        "big_i64_to_f16": Spec([((size,), "int64", "x")], lambda x: tf.cast(x, tf.float16),
                               {("int64", "float16")}),
        "big_add_f32": Spec([((size,), "float32", "a"), ((size,), "float32", "b")], lambda a, b: a + b, set()),
        "big_u8_f32_add_f16": Spec([((size,), "uint8", "x")],
                                   lambda x: tf.cast(tf.cast(x, tf.float32) + 1.0, tf.float16),
                                   {("uint8", "float32"), ("float32", "float16")}),
    }


def convert(spec: Spec) -> bytes:
    """Trace ``spec.fn`` with its input signature and convert it to TFLite bytes."""
    import tensorflow as tf

    signature = [tf.TensorSpec(shape, getattr(tf, dtype), name=name) for shape, dtype, name in spec.inputs]
    concrete = tf.function(spec.fn, input_signature=signature).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.optimizations = []  # no quantization, no float16 weight rewriting
    return converter.convert()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m models.generate",
        description="Generate TFLite models with real-world CAST patterns via the TF converter "
                    "and print each model's builtin ops and CAST pairs.")
    parser.add_argument("--out", required=True, type=Path, help="directory for the .tflite files (created)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"element count of the big_* benchmark models (default {DEFAULT_SIZE})")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="generate only this model (repeatable); see --list")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    if args.size < 1:
        parser.error(f"--size must be >= 1, got {args.size}")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    specs = _specs(args.size)
    if args.list:
        print("\n".join(specs))
        return 0
    names = args.only or list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(specs)}")

    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        spec = specs[name]
        model = convert(spec)
        path = args.out / f"{name}.tflite"
        path.write_bytes(model)
        ops = op_counts(model)
        pairs = cast_pairs(model)
        missing = spec.casts - set(pairs)
        print(f"{path} ({len(model)} bytes)")
        print("  ops:   " + ", ".join(f"{op}x{n}" for op, n in sorted(ops.items())))
        print("  casts: " + (", ".join(f"{s}->{d}x{n}" for (s, d), n in sorted(pairs.items())) or "-"))
        if missing:
            print("  MISSING CAST after conversion: " + ", ".join(f"{s}->{d}" for s, d in sorted(missing)))
            failed.append(name)
    if failed:
        print(f"expected CAST nodes did not survive conversion in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
