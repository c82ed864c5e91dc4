"""Former/tail tiled kernels: vector widths and launch data (no device), and on devices
every element of [0, n) written exactly once with nothing outside it touched (Oclgrind
reports any invalid access; other devices keep guard elements after the end).

The default run sweeps a representative subset; ``LITECL_FULL_SWEEP=1`` (or ``-m slow``
with it) runs tests/tiling_sweep.py's full sweep: lengths 1..300, 757, 1999 x block_dim
1..256 x every itemsize pair.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from litecl.ops.codegen import cast_kernel
from litecl.ops.tiling import (BLOCK_BYTES, LAUNCH, MAX_ELEMENTS, launch, launch_config, plan,
                               vector_width)

from conftest import DEVICE_STATUS, device_params
from tiling_sweep import PAIRS, sweep

SIZES = (1, 2, 4, 8)


# ------------------------------------------------------------------ no device
@pytest.mark.parametrize("vec_bytes", [1, 16, 32, 64])
@pytest.mark.parametrize("s_in", SIZES)
@pytest.mark.parametrize("s_out", SIZES)
def test_vector_width_divides_the_block_so_vectors_are_aligned(vec_bytes, s_in, s_out):
    w = vector_width((s_in, s_out), vec_bytes)
    align_num = BLOCK_BYTES // min(s_in, s_out)
    assert w in (1, 2, 4, 8, 16)
    assert align_num % w == 0  # chunk starts (multiples of align_num) are multiples of w
    assert w * max(s_in, s_out) <= max(vec_bytes, max(s_in, s_out))
    for total in (1, 33, 757, 1999):
        for cores in (1, 3, 8, 64):
            t = plan(total, min(s_in, s_out), cores)
            for c in range(cores):
                off, _ = t.chunk(c)
                for s in (s_in, s_out):
                    assert (off * s) % BLOCK_BYTES == 0      # 32-byte boundary on both sides
                    assert (off * s) % (w * s) == 0          # so is every vector in the chunk


def test_launch_table_is_data_with_sane_values():
    assert set(LAUNCH) == {"gpu", "cpu"}
    for cfg in LAUNCH.values():
        assert cfg.local_size >= 1 and cfg.groups_per_cu >= 1 and cfg.vec_bytes in (16, 32)


def _caps(gpu: bool, cus: int = 132, wg: int = 1024):
    return SimpleNamespace(is_gpu=gpu, compute_units=cus, max_work_group_size=wg)


def test_launch_geometry_from_the_table():
    caps = _caps(True)
    cfg = launch_config(caps)
    t, g, loc = launch(caps, 1 << 26, 2)
    assert loc == (cfg.local_size,)
    assert t.block_dim == 132 * cfg.groups_per_cu and g == (t.block_dim * cfg.local_size,)
    # mid sizes: only as many groups as fill each work-item with one 16-byte vector or more
    assert launch(caps, 1 << 22, 1)[0].block_dim == (1 << 22) // (cfg.local_size * cfg.vec_bytes)
    assert launch(_caps(False, 2), 1 << 22, 1)[0].block_dim == 2 * LAUNCH["cpu"].groups_per_cu
    t, g, loc = launch(_caps(False, 2), 1999, 2)
    assert t.block_dim == 2 * LAUNCH["cpu"].groups_per_cu and loc == (LAUNCH["cpu"].local_size,)
    # Intel's CPU runtime: no work-group carries less than group_bytes of the narrowest type
    intel = SimpleNamespace(is_gpu=False, compute_units=2, max_work_group_size=8192, platform="Intel(R) OpenCL")
    gb = launch_config(intel).group_bytes
    assert gb and launch(intel, 1999, 4)[0].block_dim == 1
    assert launch(intel, 4 * gb // 4, 4)[0].block_dim == 4
    assert launch(intel, 4 * gb // 4 - 1, 4)[0].block_dim == 3
    assert launch(intel, 1 << 22, 1)[0].block_dim == 2 * LAUNCH["cpu"].groups_per_cu
    # never more cores than 32-byte blocks unless asked; local capped by the device
    assert launch(caps, 5, 4)[0].block_dim == 1
    assert launch(caps, 5, 4, block_dim=256)[0].block_dim == 256
    assert launch(_caps(True, wg=64), 100, 4)[2] == (64,)
    with pytest.raises(ValueError):
        launch(caps, MAX_ELEMENTS + 1, 4)


def test_kernel_text_uses_aligned_vector_access():
    caps = SimpleNamespace(fp16=False, fp64=True, int64=True, strict_compiler=True, is_gpu=True)
    src = cast_kernel("float32", "float16", caps)[0]
    # GPU row: half vectors move as ushortN, converted in integer code (LAUNCH half_bits)
    assert "*(__global const float4*)(src + i)" in src and "*(__global ushort4*)(dst + i) = litecl_f2h_v4(r);" in src
    assert "((__global ushort*)(dst))[i] = litecl_f2h_v1(litecl_cast_op(src[i]));" in src  # the scalar tail
    src = cast_kernel("float16", "uint8", caps, vec_bytes=32)[0]
    # GPU row: one ushortN load of the bits, converted through vloada_halfN from registers
    assert "litecl_vload_half_v16(*(__global const ushort16*)(src + i))" in src
    assert "return vloada_half16(0, (const __private half*)&h);" in src
    cpu = SimpleNamespace(**{**vars(caps), "is_gpu": False})
    src = cast_kernel("float32", "float16", cpu)[0]  # into registers, NaNs LiteRT's 0x7e00, one store
    assert "ushort8 h_; vstorea_half8_rte(r, 0, (__private half*)&h_);" in src
    assert "*(__global ushort8*)(dst + i) = h_;" in src
    assert "vloada_half16(0, src + i)" in cast_kernel("float16", "uint8", cpu)[0]
    src = cast_kernel("complex64", "int32", caps)[0]
    assert "litecl_cast_op_v2(v0.even)" in src  # real parts of interleaved complex
    src = cast_kernel("complex64", "int32", caps, vector_ops=False)[0]
    assert "(v0.s0), litecl_cast_op(v0.s2)" in src  # per component: the same real parts
    assert "for (uint i = start + lid; i < stop" in cast_kernel("int8", "uint8", caps, vec_bytes=1)[0]


# ------------------------------------------------------------------ devices
SUB_LENGTHS = (1, 2, 7, 15, 16, 17, 31, 33, 64, 65, 127, 300, 757, 1999)
SUB_BLOCK_DIMS = (1, 2, 3, 8, 13, 64, 255, 256)


@pytest.mark.parametrize("device", device_params(["oclgrind", "intel"]))
def test_increment_sweep_subset_exactly_once_no_invalid_access(device, capfd):
    r = sweep(device, PAIRS, SUB_LENGTHS, SUB_BLOCK_DIMS, (1, 3))
    r2 = sweep(device, [("float32", "float16"), ("int8", "int64"), ("int64", "int64")],
               (1, 33, 257, 1999), (1, 8, 132), (256,))
    err = capfd.readouterr().err
    assert "Invalid" not in err, err[-3000:]
    assert r["n_failures"] == 0 and r2["n_failures"] == 0, (r["failures"] + r2["failures"])[:10]
    assert r["launches"] > 5000


def _run_real(dev, source, name, n, bufs_in, out_dtype, block_dim, local, tile, args=()):
    import pyopencl as cl

    from litecl.kernels import build_program

    kern = cl.Kernel(build_program(dev, source), name)
    mf = cl.mem_flags
    ins = [cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b) for b in bufs_in]
    out = np.zeros(n, out_dtype)
    ob = cl.Buffer(dev.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    t = plan(n, tile, block_dim)
    kern(dev.queue, (block_dim * local,), (local,), *ins, ob, *(np.uint32(v) for v in t.kernel_args()),
         *(np.int32(v) for _, v in args))  # the ops' int arguments (add_kernel_args)
    cl.enqueue_copy(dev.queue, out, ob)
    return out


REAL_CAST = [("float32", "float16"), ("uint8", "float32"), ("float64", "int8"), ("int8", "int64"),
             ("float16", "float64"), ("int64", "float16"), ("complex64", "uint16"),
             ("bool", "float32"), ("int32", "uint32"), ("uint16", "int16")]


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_real_kernels_vector_path_under_oclgrind(device, capfd):
    """The lowered CAST and same-shape ADD kernels (vector widths of both LAUNCH rows,
    CPU and GPU-sized groups) equal their scalar form, with no invalid access."""
    from litecl.device import open_device
    from litecl.ops.add import add_kernel, add_kernel_args
    from litecl.ops.dtypes import dtype

    dev = open_device(device)
    rng = np.random.default_rng(0)
    cases = []
    for s, d in REAL_CAST:
        sd, dd = dtype(s), dtype(d)
        if not dev.caps.fp64 and "float64" in (s, d):
            continue
        kern = {vb: cast_kernel(s, d, dev.caps, vec_bytes=vb)[0] for vb in (1, 16, 32)}
        cases.append((f"CAST {s}->{d}", kern, "litecl_cast", [sd], dd, ()))
    for t in ("float32", "int32", "int64"):
        kern = {vb: add_kernel(t, [7], [7], "RELU6", dev.caps, vec_bytes=vb) for vb in (1, 16, 32)}
        args = add_kernel_args(t, [7], [7], "RELU6", dev.caps)
        cases.append((f"ADD {t}", kern, "litecl_add", [dtype(t), dtype(t)], dtype(t), args))
    for what, kern, name, ins_t, out_t, args in cases:
        tile = min(x.itemsize for x in ins_t + [out_t])
        for n in (1, 31, 33, 757):
            bufs = []
            for x in ins_t:
                raw = rng.integers(0, 256, n * x.itemsize, dtype=np.uint8).view(x.np)
                if x.name == "bool":
                    raw = (raw.view(np.uint8) & 1).view(x.np)
                bufs.append(raw)
            want = _run_real(dev, kern[1], name, n, bufs, out_t.np, 1, 1, tile, args)
            for vb, bd, local in ((32, 1, 1), (32, 7, 1), (32, 256, 3), (16, 5, 64), (16, 64, 4)):
                got = _run_real(dev, kern[vb], name, n, bufs, out_t.np, bd, local, tile, args)
                same = (got.view(np.uint8) == want.view(np.uint8)).all()
                if out_t.is_float and not same:  # any NaN equals any NaN
                    same = bool(((got == want) | (np.isnan(got) & np.isnan(want))).all())
                assert same, f"{what} n={n} vec_bytes={vb} block_dim={bd} local={local}"
    err = capfd.readouterr().err
    assert "Invalid" not in err, err[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LITECL_FULL_SWEEP"), reason="full sweep: set LITECL_FULL_SWEEP=1")
@pytest.mark.skipif(bool(DEVICE_STATUS.get("oclgrind")), reason=DEVICE_STATUS.get("oclgrind") or "")
def test_full_sweep_under_oclgrind():
    script = Path(__file__).with_name("tiling_sweep.py")
    r = subprocess.run([sys.executable, str(script), "--jobs", str(os.cpu_count() or 1)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_runtime_rows_change_only_their_runtime_and_type():
    """RUNTIME_ROWS: Intel's CPU runtime takes 64-byte vectors (measured,
    benchmarks/results/intel/vec_bytes_s16.txt) and work-groups of 32 KiB or more
    (groups_s18.txt); PoCL's CPU device, a GPU of Intel's, and
    caps without a platform keep their type's LAUNCH row."""
    import types

    from litecl.ops.tiling import RUNTIME_ROWS

    def caps(platform, gpu):
        return types.SimpleNamespace(platform=platform, is_gpu=gpu)

    assert RUNTIME_ROWS[("cpu", "Intel(R) OpenCL")] == {"vec_bytes": 64, "group_bytes": 32 << 10}
    intel = launch_config(caps("Intel(R) OpenCL", False))
    assert intel.vec_bytes == 64 and intel.local_size == LAUNCH["cpu"].local_size
    assert launch_config(caps("Portable Computing Language", False)) is LAUNCH["cpu"]
    assert launch_config(caps("Intel(R) OpenCL Graphics", True)) is LAUNCH["gpu"]
    assert launch_config(types.SimpleNamespace(is_gpu=False)) is LAUNCH["cpu"]
