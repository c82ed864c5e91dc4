"""Write ops/selftest_<arch>.json: LiteRT's output bits for every self-test family's
canonical inputs (backend/selftest.py), on this machine's architecture.

Usage::

    python -m models.selftest_tables            # writes ops/selftest_<arch>.json
    python -m models.selftest_tables --check    # exit 1 when the committed file differs

Each family's one-node model (models/builders.py cast_model / add_model at the canonical
shapes and quantization) runs in LiteRT alone with the family's reference kernels
(builtin: BUILTIN_WITHOUT_DEFAULT_DELEGATES, ref: BUILTIN_REF). The aarch64 file is made
in the arm64 userland (.ci/arm64-userland run python -m models.selftest_tables).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from models.builders import add_model, cast_model  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "ops"


def family_model(f) -> bytes:
    from litecl import selftest as S

    if f.op == "CAST":
        return cast_model(f.types[0], f.types[1], [S.N])
    s1, s2 = S.SHAPES[f.kind]
    q = S.QUANT.get((f.types[0], f.quant)) if f.quant else None
    return add_model(f.types[0], list(s1), list(s2), activation=f.activation, quant=q,
                     pot_scale_int16=f.quant == "pot")


def tables() -> dict:
    import ai_edge_litert

    from litecl import selftest as S
    from litecl.compare import make_interpreter
    from litecl.ops.add import host_arch

    fams = {}
    for f in S.FAMILIES:
        it = make_interpreter(family_model(f), reference=f.reference)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), S.canonical_inputs(f)):
            it.set_tensor(d["index"], x)
        it.invoke()
        out = np.ascontiguousarray(it.get_tensor(it.get_output_details()[0]["index"]))
        fams[S.family_name(f)] = out.view(np.uint8).tobytes().hex()
    return {"arch": host_arch(), "litert": getattr(ai_edge_litert, "__version__", "?"),
            "written_by": "models/selftest_tables.py", "families": fams}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args(argv)
    t = tables()
    path = OUT / f"selftest_{t['arch']}.json"
    text = json.dumps(t, indent=0, sort_keys=True) + "\n"
    if args.check:
        old = json.loads(path.read_text()) if path.exists() else {}
        diff = sorted(k for k in set(t["families"]) | set(old.get("families", {}))
                      if t["families"].get(k) != old.get("families", {}).get(k))
        print(f"{path.name}: {len(diff)} families differ" + (f": {diff[:5]}" if diff else ""))
        return 1 if diff else 0
    path.write_text(text)
    print(f"wrote {path} ({len(t['families'])} families)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
