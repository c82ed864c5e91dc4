"""Print the placement of every CAST pair with a bfloat16 or sub-byte side on a device
spec (a diagnostic for device runs): python benchmarks/h200_probe_pairs.py SPEC."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import litecl  # noqa: E402
from models.builders import cast_model  # noqa: E402

spec = sys.argv[1]
types = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32",
         "float64", "bfloat16", "int4", "uint4", "int2"]
for s in types:
    for d in types:
        if not {s, d} & {"bfloat16", "int4", "uint4", "int2"}:
            continue
        try:
            p = litecl.Interpreter(model_content=cast_model(s, d, [37]), device=spec).placement()[0]
            print(f"{s:>9} -> {d:<9} {p['placement']:<9} {p['reason'][:110]}")
        except Exception as e:  # noqa: BLE001
            print(f"{s:>9} -> {d:<9} ERROR {type(e).__name__}: {str(e)[:100]}")
