"""``litecl kernel`` and ``litecl kernel-add``: the OpenCL source litecl generates for a
CAST or an ADD, built (and optionally run) on a device."""
from __future__ import annotations

import argparse

import numpy as np

from .cli_common import _Usage


def _kernel_device(args):
    """The device ``kernel`` and ``export`` generate for: --device, as a --target type."""
    from .device import open_device  # noqa: PLC0415
    from .export import target_device  # noqa: PLC0415

    return target_device(open_device(args.device), args.target)


def _kernel_header(dev, target) -> None:
    print(f"// device: {dev.caps.platform}: {dev.caps.name}"
          + (f" (profile {dev.caps.profile})" if dev.caps.profile else ""))
    print(f"// target: {'gpu' if dev.caps.is_gpu else 'cpu'}"
          + ("" if target else " (the device's type; --target gpu|cpu picks another)"))


def _kernel_build(args, dev, source) -> None:
    if args.build:
        from .kernels import build_program  # noqa: PLC0415

        build_program(dev, source)
        print("// built OK")


#: types LiteRT's Python API cannot pass as an input, measured with ai-edge-litert 2.3.0
#: (int2: set_tensor says "Got value of type INT8 but expected type INT2"; bfloat16:
#: get_input_details raises "Invalid data-type for array")
_UNSETTABLE_INPUTS = ("int2", "bfloat16")


def cmd_kernel(args) -> int:
    from .ops.codegen import cast_kernel  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415

    dev = _kernel_device(args)
    try:
        src, dst = dtype(args.src), dtype(args.dst)
    except KeyError as e:
        raise _Usage(str(e.args[0])) from None
    try:
        source, plan = cast_kernel(src, dst, dev.caps)
    except ValueError as e:
        raise _Usage(f"CAST {src.name} -> {dst.name} on {dev.caps.name}: {e}") from None
    _kernel_header(dev, args.target)
    if src.name in _UNSETTABLE_INPUTS:  # LiteRT runs the CAST; its Python API cannot feed it
        print(f"// note: LiteRT runs CAST {src.name} -> {dst.name} on {src.name} tensors the model makes "
              f"(constants, other nodes' outputs); its Python API cannot pass {src.name} inputs")
    print("// chain: " + " -> ".join(plan.chain()))
    for line in plan.describe().splitlines():
        print("// " + line)
    print(source)
    _kernel_build(args, dev, source)
    return 0


def _arg_shape(text: str) -> tuple:
    """argparse type: a shape as comma-separated dims >= 0 ("2,3,4"; "" or "[]" for 0-d)."""
    t = text.strip().strip("[]()").strip()
    if not t:
        return ()
    try:
        dims = tuple(int(x) for x in t.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape such as 2,3,4 (or [] for a scalar), got {text!r}") from None
    if any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"dimensions must be >= 0, got {text!r}")
    return dims


def _arg_qparam(text: str) -> tuple:
    """argparse type: SCALE:ZERO_POINT (a tensor's per-tensor quantization)."""
    s, sep, z = text.partition(":")
    try:
        if not sep:
            raise ValueError
        scale, zp = float(s), int(z)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SCALE:ZERO_POINT such as 0.5:-3, got {text!r}") from None
    if not (np.isfinite(scale) and scale > 0):
        raise argparse.ArgumentTypeError(f"scale must be a finite number > 0, got {s!r}")
    return scale, zp


def cmd_kernel_add(args) -> int:
    from .ops import add as add_ops  # noqa: PLC0415
    from .ops.add_quant import quant_add_params, quant_add_why_not  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415
    from .ops.tiling import launch  # noqa: PLC0415

    dev = _kernel_device(args)
    try:
        dt = dtype(args.dtype)
    except KeyError as e:
        raise _Usage(str(e.args[0])) from None
    a, b = args.shapes
    try:
        out = add_ops.broadcast_shape(a, b)
    except ValueError as e:
        raise _Usage(f"ADD: {e}") from None  # "shapes [3, 4] and [5] do not broadcast"
    quant = None
    if dt.name in ("int8", "uint8") and args.quant is None:
        raise _Usage(f"{dt.name} ADD is quantized: pass --quant S1:Z1 S2:Z2 SOUT:ZOUT")
    if args.quant is not None:
        if dt.name not in ("int8", "uint8", "int16"):
            raise _Usage(f"--quant applies to int8, uint8 and int16 ADD, not {dt.name}")
        try:
            quant = quant_add_params(dt.name, *args.quant, args.activation,
                                     pot_scale_int16=args.pot_scale_int16)
            why = quant_add_why_not(quant, a, b)
        except ValueError as e:
            raise _Usage(f"quantized {dt.name} ADD: {e}") from None
        if why:
            raise _Usage(f"quantized {dt.name} ADD: {why}")
    why = add_ops.add_why_not(dt.name, [a, b, out], args.activation, dev.caps)
    if why:
        raise _Usage(f"ADD {dt.name} on {dev.caps.name}: {why}")
    try:
        source = add_ops.add_kernel(dt.name, a, b, args.activation, dev.caps, quant)
        tiling, gsize, lsize = launch(dev.caps, add_ops.numel(out), dt.itemsize)
    except ValueError as e:
        raise _Usage(f"ADD {dt.name} {list(a)} + {list(b)}: {e}") from None
    _kernel_header(dev, args.target)
    print(f"// ADD {dt.name} {list(a)} + {list(b)} -> {list(out)}, activation {args.activation}"
          + (f", quantized {' '.join(f'{s:g}:{z}' for s, z in args.quant)}" if quant else ""))
    n, former_num, former_len, tail_len = tiling.kernel_args()
    extra = add_ops.add_kernel_args(dt.name, a, b, args.activation, dev.caps, quant)
    print(f"// launch: litecl_add(a, b, out, n={n}, former_num={former_num}, former_len={former_len}, "
          f"tail_len={tail_len}{''.join(f', {k}={v}' for k, v in extra)}), global size {gsize[0]}, local size {lsize[0]}")
    print(source)
    _kernel_build(args, dev, source)
    return 0
