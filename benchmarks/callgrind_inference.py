"""Instructions per inference, litecl against LiteRT, counted by callgrind (issue 14: the
2-5 us models are below what wall-clock timing on a shared 2-core VM can resolve).

One process runs N inferences (set every input, invoke, read every output) after
allocate; the count of a run with N1 and one with N2 inferences differ by (N2 - N1)
inferences, so set-up cancels out:

    for n in 1000 21000; do
      valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/callgrind_inference.py litecl $n MODEL 2>&1 | grep Collected
    done   # (count(21000) - count(1000)) / 20000; the same with "litert"

LiteRT's own set-up varies by about +-11M instructions between runs (+-550 per inference
over 20,000); litecl's by about +-0.3M. Results: docs/PERFORMANCE.md.
"""
import sys, numpy as np
which, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
if which == "litecl":
    import litecl
    it = litecl.Interpreter(model_path=path, device="pocl", placement="auto")
else:
    it = LiteRT(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
it.allocate_tensors()
d = it.get_input_details()
ins = [(x["index"], np.ones(x["shape"], x["dtype"])) for x in d]
outs = [x["index"] for x in it.get_output_details()]
def run():
    for i, v in ins:
        it.set_tensor(i, v)
    it.invoke()
    for o in outs:
        it.get_tensor(o)
run(); run()
for _ in range(n):
    run()
