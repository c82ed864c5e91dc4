"""Fork probe (H200): after a fork() child exits (os._exit, sys.exit), does the parent's
Interpreter still run, and can it make a new one? Before the fix in
device._after_fork_in_child, a child leaving through sys.exit freed the inherited OpenCL
objects and the parent got INVALID_COMMAND_QUEUE on NVIDIA (measured 2026-12-01).

    PYTHONPATH=... python3 benchmarks/h200_fork_probe.py   (see benchmarks/h200_pytest.sh)
"""
import os, sys, numpy as np, litecl
from models.builders import add_model
m = add_model("float32", [4], [4])
def run(it):
    it.set_tensor(0, np.ones(4, np.float32)); it.set_tensor(1, np.ones(4, np.float32)); it.invoke(); return it.get_tensor(2).tolist()
for mode in ("os_exit", "sys_exit"):
    it = litecl.Interpreter(model_content=m, device="nvidia"); it.allocate_tensors(); print(mode, "before", run(it), flush=True)
    pid = os.fork()
    if pid == 0:
        if mode == "os_exit":
            os._exit(0)
        sys.exit(0)
    os.waitpid(pid, 0)
    try:
        print(mode, "after", run(it), flush=True)
    except Exception as e:
        print(mode, "after ERROR", e, flush=True)
    try:
        it2 = litecl.Interpreter(model_content=m, device="nvidia"); it2.allocate_tensors(); print(mode, "new interp", run(it2), flush=True)
    except Exception as e:
        print(mode, "new interp ERROR", e, flush=True)
