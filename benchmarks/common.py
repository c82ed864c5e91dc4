"""Shared pieces of the benchmark scripts: paths, the device's own copy bandwidth, output.

Honest-benchmark rules (STYLE.md 9): warm up, queue.finish() around timed regions,
medians, event-profiled kernel time next to end-to-end time, the peer (LiteRT) measured in
the same process in alternating rounds.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for models.builders

SHARED = Path(os.environ.get("LITECL_SHARED_MODELS", ROOT.parent / "shared" / "models"))


def tflite_files(dirs) -> list[Path]:
    """Every ``*.tflite`` under the folders (or the files) in ``dirs``, in name order, one
    per distinct content."""
    import hashlib  # noqa: PLC0415

    out, seen = [], set()
    for d in map(Path, dirs):
        for f in sorted(d.rglob("*.tflite")) if d.is_dir() else [d]:
            h = hashlib.sha256(f.read_bytes()).hexdigest()
            if h not in seen:
                seen.add(h)
                out.append(f)
    return out


def litert_runs(raw: bytes) -> bool:
    """Whether LiteRT alone (builtin resolver) runs the model at its declared shapes on
    random inputs: the models a benchmark can compare against it."""
    from litecl.compare import make_interpreter, random_inputs, run_outputs  # noqa: PLC0415

    try:
        ref = make_interpreter(raw)
        run_outputs(ref, random_inputs(ref.get_input_details(), seed=0))
    except Exception:  # noqa: BLE001 (LiteRT alone cannot run it)
        return False
    return True


def model_files(models) -> tuple[list, str | None]:
    """The .tflite files named (a folder: every *.tflite under it), and an error line for
    the first that is missing (None when all exist)."""
    paths = []
    for p in map(Path, models):
        paths += sorted(p.rglob("*.tflite")) if p.is_dir() else [p]
    missing = [p for p in paths if not p.is_file()]
    return paths, (f"error: no such model file: {missing[0]}" if missing else None)


def device_error(spec) -> str | None:
    """None when litecl can open device ``spec``, else its one-line ``error: ...``."""
    import litecl  # noqa: PLC0415

    try:
        litecl.open_device(spec)
    except litecl.LiteclError as e:
        return f"error: {e}"
    return None


def copy_bandwidth(device, n_bytes: int = 1 << 28, repeats: int = 10) -> float:
    """GB/s (bytes read + written) of a float4 copy kernel on ``device`` (a litecl Device):
    the roof every elementwise kernel is measured against."""
    import pyopencl as cl

    n4 = n_bytes // 16
    src = "__kernel void copy4(__global const float4* a, __global float4* b) " \
          "{ size_t i = get_global_id(0); b[i] = a[i]; }"
    prg = cl.Program(device.context, src).build()
    a = cl.Buffer(device.context, cl.mem_flags.READ_ONLY, n4 * 16)
    b = cl.Buffer(device.context, cl.mem_flags.WRITE_ONLY, n4 * 16)
    cl.enqueue_fill_buffer(device.queue, a, np.float32(1), 0, n4 * 16)
    k = prg.copy4
    times = []
    for i in range(repeats + 2):
        ev = k(device.queue, (n4,), None, a, b)
        ev.wait()
        if i >= 2:
            times.append((ev.profile.end - ev.profile.start) * 1e-9)
    return 2 * n4 * 16 / statistics.median(times) / 1e9


class CopyProbe:
    """A float4 copy kernel moving a given number of bytes (read + written), timed next to
    the kernel under test so both see the same machine state (a shared VM's bandwidth
    drifts by 2x between minutes: measured 42..77 GB/s on the 2-core CI machine)."""

    def __init__(self, device):
        import pyopencl as cl

        self.cl, self.device = cl, device
        src = "__kernel void copy4(__global const float4* a, __global float4* b) " \
              "{ size_t i = get_global_id(0); b[i] = a[i]; }"
        self.kernel = cl.Program(device.context, src).build().copy4
        self.bufs: dict = {}

    def seconds(self, n_bytes: int) -> float:
        """Device seconds of one copy of ``n_bytes`` / 2 bytes (profiling event)."""
        cl = self.cl
        n4 = max(1, n_bytes // 32)
        if n4 not in self.bufs:
            self.bufs.clear()  # one size at a time: large buffers are 2 x 512 MiB
            a = cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY, n4 * 16)
            b = cl.Buffer(self.device.context, cl.mem_flags.WRITE_ONLY, n4 * 16)
            cl.enqueue_fill_buffer(self.device.queue, a, np.float32(1), 0, n4 * 16)
            self.bufs[n4] = (a, b)
            self.seconds(n_bytes)  # first touch
        a, b = self.bufs[n4]
        ev = self.kernel(self.device.queue, (n4,), None, a, b)
        ev.wait()
        return (ev.profile.end - ev.profile.start) * 1e-9


def _int_at_least(lo: int):
    """argparse type: an integer >= ``lo`` (a one-line usage error otherwise)."""
    import argparse

    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        return v

    return conv


positive_int = _int_at_least(1)
nonnegative_int = _int_at_least(0)


def cast_pairs(text: str) -> list[tuple[str, str]]:
    """argparse type: 'all' (every ordered pair of litecl's CAST types) or comma-separated
    src:dst pairs of them."""
    import argparse

    from litecl.ops.dtypes import CAST_TYPES

    names = [d.name for d in CAST_TYPES]
    if text == "all":
        return [(s, d) for s in names for d in names if s != d]
    pairs = [tuple(p.split(":")) for p in text.split(",")]
    bad = [":".join(p) for p in pairs if len(p) != 2 or not set(p) <= set(names) or p[0] == p[1]]
    if bad:
        raise argparse.ArgumentTypeError(f"bad pairs {', '.join(bad)}: expected src:dst of {', '.join(names)}")
    return pairs


def log2_sizes(text: str) -> list[int]:
    """argparse type: comma-separated log2 element counts in 0..30, e.g. '10,14,26'."""
    import argparse

    try:
        vals = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers (log2 of element counts), "
                                         f"got {text!r}") from None
    if not vals or any(not 0 <= v <= 30 for v in vals):
        raise argparse.ArgumentTypeError(f"log2 sizes must be in 0..30, got {text!r}")
    return vals


def run_script(main, argv=None) -> int:
    """Run a script's ``main(argv)`` for ``raise SystemExit(run_script(main))``: a litecl error
    (litecl.LiteclError: a bad or unusable --device, a model or kernel litecl rejects) prints
    one ``error: ...`` line on stderr and returns exit status 2, never a traceback (set
    LITECL_DEBUG=1 for one). Anything else is a bug and keeps its traceback."""
    from litecl import LiteclError
    from litecl.errors import env_flag

    debug = False
    try:
        debug = env_flag("LITECL_DEBUG")  # a value that is no yes/no word: the error line
        return main(argv)
    except LiteclError as e:
        if debug:
            raise
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


def write_outputs(out_dir: Path, name: str, data, table_md: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=2, default=float))
    (out_dir / f"{name}.md").write_text(table_md)


def progress(it, **kw):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is in the bench extra
        return it
    return tqdm(it, **kw)


def node_model(raw: bytes, subgraph: int, nodes) -> bytes | None:
    """A model holding only ``nodes`` (operator indices) of subgraph ``subgraph`` of the
    model ``raw``, with that subgraph's tensors, quantization and constant buffers as they
    are: the tensors the nodes read that no node of them writes and that have no constant
    buffer become its inputs, what they write its outputs. None where a tensor they touch
    has a dynamic dimension (shape_signature -1: its size is known only at invoke).

    What it is for: LiteRT's own time for the nodes one litecl kernel replaces, measured on
    LiteRT alone (bench_delegate.py's kernels slower than LiteRT's node)."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(raw, 0))
    g = m.subgraphs[subgraph]
    ops = [g.operators[i] for i in nodes]
    written = {t for op in ops for t in op.outputs if t >= 0}
    touched = {t for op in ops for t in (*op.inputs, *op.outputs) if t >= 0}
    for t in touched:
        sig = g.tensors[t].shapeSignature
        if sig is not None and any(int(d) < 0 for d in sig):
            return None

    def constant(t) -> bool:
        b = g.tensors[t].buffer
        return 0 < b < len(m.buffers) and (m.buffers[b].data is not None and len(m.buffers[b].data) > 0
                                           or bool(m.buffers[b].offset))
    g.operators = ops
    g.inputs = sorted({t for op in ops for t in op.inputs if t >= 0 and t not in written and not constant(t)})
    g.outputs = sorted(written)
    m.subgraphs = [g]
    m.signatureDefs = []
    b = flatbuffers.Builder(1 << 16)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())
