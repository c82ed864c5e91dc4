# One device call: export same-shape float32/int8/int16 ADD models on the GPU at [512], build the
# library and run it in plain LiteRT at other lengths (757, 1, 33, 0, 1999), bit for bit against
# LiteRT alone (NaN of both signs, -0.0, inf, subnormals in float32). Carry .whl.
source benchmarks/h200_env.sh
W=$(mktemp -d)
python3 - "$W" <<'PY'
import sys
from models.builders import add_model
w = sys.argv[1]
q = {"int8": ((0.05, 3), (0.07, -9), (0.11, 1)), "int16": ((0.05, 0), (0.07, 0), (0.11, 0))}
for dt in ("float32", "int8", "int16"):
    open(f"{w}/add_{dt}.tflite", "wb").write(add_model(dt, [512], [512], quant=q.get(dt)))
PY
for dt in float32 int8 int16; do
  python3 -m litecl.cli export $W/add_$dt.tflite --out $W/$dt --device nvidia | tail -1
  sh $W/$dt/build.sh > /dev/null || echo BUILD FAILED
  for n in 757 1 33 0 1999; do
    PYTHONPATH=$T/site python3 - $W/$dt/liblitecl_delegate.so $W/add_$dt.tflite $W/$dt/exported_device.json $n <<'PY'
import sys, json, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
so, model, opts, n = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), int(sys.argv[4])
outs = []
for dl in ([], [load_delegate(so, opts)]):
    it = Interpreter(model_path=model, experimental_delegates=dl, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for d in it.get_input_details(): it.resize_tensor_input(d["index"], [n])
    it.allocate_tensors()
    for k, d in enumerate(it.get_input_details()):
        x = (np.random.default_rng(k).standard_normal(n) * 300).astype(d["dtype"])
        if d["dtype"] == np.float32 and n > 8: x[:8] = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40]
        it.set_tensor(d["index"], x)
    it.invoke(); outs.append(it.get_tensor(it.get_output_details()[0]["index"]).tobytes())
print(model.split("/")[-1], n, "EQUAL" if outs[0] == outs[1] else "DIFFER")
PY
  done
done 2>&1 | grep -v "^INFO: Created\|^INFO: Initialized"
