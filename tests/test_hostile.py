"""Hostile models, misuse and a broken environment (issue 13): each case runs in a
subprocess with a timeout and must end in a one-line error (API: a LiteclError subclass,
or LiteRT's own error where LiteRT gives one; CLI: `error: ...`, exit 2), never a signal,
a traceback or a hang. Without the guard each case named here crashes or hangs (measured
with LiteRT 2.3.0, noted per test). litecl runs inside LiteRT as a delegate: what LiteRT
itself aborts on is refused by litecl's entry points first (model.py at load,
litecl.Interpreter after allocate_tensors: tests/test_hardening.py)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from models.hostile import control_flow_model

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "litecl.cli"]


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _cli(*args, timeout: float = 120, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env or _env(), **kw)


def _py(code: str, timeout: float = 120, env=None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python; it prints one line starting with RESULT."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env or _env(), cwd=ROOT)


def _error_line(r, match: str = "") -> str:
    """The CLI's contract: exit 2, one `error: ...` line, no traceback, no signal."""
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert "internal error" not in lines[0], lines[0]
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


def _api_raises(r, cls: str, match: str = "") -> str:
    """The API contract: the snippet caught a litecl error of class ``cls`` and printed
    `RESULT <class> <message>`."""
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
    assert line.startswith(f"RESULT {cls} "), line
    assert re.search(match, line), line
    return line


_LOAD = """
    import sys
    import litecl
    try:
        it = litecl.Interpreter(model_path=sys.argv[1] if len(sys.argv) > 1 else {path!r},
                                device={device!r})
        it.allocate_tensors()
        print("RESULT ok")
    except litecl.LiteclError as e:
        print("RESULT", type(e).__name__, e)
"""


# ------------------------------------------------------------------ 1. control-flow recursion
@pytest.mark.parametrize("kind,calls,again,cycle", [
    ("while", (0, 2), (1, 2), "subgraph 0 .WHILE operator 0. -> subgraph 0"),     # cond is itself
    ("while", (1, 0), (1, 2), "subgraph 0 .WHILE operator 0. -> subgraph 0"),     # body is itself
    ("if", (0, 2), (1, 2), "subgraph 0 .IF operator 0. -> subgraph 0"),           # a branch is itself
    ("while", (3, 2), (0, 2), "subgraph 0 .WHILE operator 0. -> subgraph 3 .WHILE operator 0. -> subgraph 0"),
    ("while", (1, 3), (1, 3), "subgraph 3 .WHILE operator 0. -> subgraph 3"),     # a cycle below 0
])
def test_control_flow_recursion_is_a_model_error(tmp_path, fast_device, kind, calls, again, cycle):
    """LiteRT 2.3.0 segfaults in AllocateTensors on each (stack overflow, measured); the
    valid model with calls (1, 2) runs."""
    path = tmp_path / "cycle.tflite"
    path.write_bytes(control_flow_model(kind, calls, again))
    _api_raises(_py(_LOAD.format(path=str(path), device=fast_device)), "ModelError", "cycle: " + cycle)
    _error_line(_cli("run", path, "--device", fast_device), "cycle: " + cycle)


def test_valid_control_flow_model_runs(tmp_path, fast_device):
    for kind in ("while", "if"):
        path = tmp_path / f"{kind}.tflite"
        path.write_bytes(control_flow_model(kind))
        r = _cli("compare", path, "--device", fast_device)
        assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ 2. huge finite scales
_LITERT_PREPARE = """
import sys
from litecl.compare import make_interpreter
m = make_interpreter(open(sys.argv[1], "rb").read())
try:
    m.allocate_tensors()
except Exception:
    pass
"""

_HUGE = [  # (dtype, (s1, s2, s_out)): LiteRT 2.3.0's Prepare aborts on the first six
    ("int8", (0.01, 0.01, 1e33)),      # 2**20 * 1e33 overflows float32: multiplier 0
    ("uint8", (0.01, 0.01, 1e38)),
    ("int8", (1.71e38, 0.01, 1.0)),    # 2 * 1.71e38 overflows: input multipliers 0
    ("uint8", (1e38, 1e38, 1e38)),
    ("int16", (0.01, 0.01, 3.4e38)),   # 2**15 * 3.4e38 overflows
    ("int8", (0.01, 0.01, 1e-10)),     # multiplier >= 1 (as before)
    ("int8", (0.01, 0.01, 3.2e32)),    # 2**20 * 3.2e32 still finite: runs
    ("int16", (0.01, 0.01, 1e30)),     # 2**15 * 1e30 finite: runs
]


@pytest.mark.parametrize("dtype,scales", _HUGE, ids=[f"{d}-{s}" for d, s in _HUGE])
def test_huge_scale_guard_matches_litert(tmp_path, fast_device, dtype, scales):
    """ops.add_quant.general_multipliers_abort predicts LiteRT's SIGABRT (LiteRT run
    alone in a subprocess); where it aborts, `litecl run` and `compare` give one error
    line (compare died with SIGABRT before), else compare is bit-exact."""
    from litecl.ops.add_quant import general_multipliers_abort  # noqa: PLC0415
    from models.builders import add_model  # noqa: PLC0415

    path = tmp_path / "huge.tflite"
    path.write_bytes(add_model(dtype, [4], [4], quant=tuple((s, 0) for s in scales)))
    r = subprocess.run([sys.executable, "-c", _LITERT_PREPARE, str(path)], capture_output=True,
                       timeout=60, env=_env())
    predicted = general_multipliers_abort(*scales, 15 if dtype == "int16" else 20)
    assert (r.returncode < 0) == (predicted is not None), (r.returncode, predicted)
    for cmd in ("run", "compare"):
        c = _cli(cmd, path, "--device", fast_device)
        if predicted:
            _error_line(c, "LiteRT aborts")
        else:
            assert c.returncode == 0, c.stderr


# ------------------------------------------------------------------ 3. fields LiteRT refuses
_LITERT_BUILD = """
import sys
import numpy as np
from litecl.compare import make_interpreter
try:
    m = make_interpreter(open(sys.argv[1], "rb").read())
    m.allocate_tensors()
    print("RESULT ok")
except Exception as e:
    print("RESULT refused", str(e).replace(chr(10), " ")[:300])
"""

_INT8_ADD = ("int8", [4], [4], ((0.01, 0), (0.01, 0), (0.02, 0)))
_FIELDS = [  # (edit of models.hostile.EDITS, what litecl's error names)
    ("version0", r"operator code 0 \(ADD\) has version 0"),
    ("version-1", r"operator code 0 \(ADD\) has version -1"),
    ("zero_points0", r"tensor 0 \('input1'\): quantization has 1 scale\(s\) and 0 zero point"),
    ("zero_points2", r"tensor 0 \('input1'\): quantization has 1 scale\(s\) and 2 zero point"),
    ("quantized_dimension5", r"tensor 0 \('input1'\): quantized_dimension 5 outside \[0, 1\)"),
    ("quantized_dimension-1", r"tensor 0 \('input1'\): quantized_dimension -1 outside"),
    ("output-1", r"operator 0 output names tensor -1"),
    ("tensors_absent", r"subgraph 1 has no tensors field"),
    ("no_tensors", r"subgraph 0 operator 0 input names tensor 0, subgraph has 0"),
]


@pytest.mark.parametrize("edit,match", _FIELDS, ids=[e for e, _ in _FIELDS])
def test_fields_litert_refuses_are_model_errors(tmp_path, fast_device, edit, match):
    """LiteRT 2.3.0 refuses each (Interpreter construction or AllocateTensors, measured
    here); litecl ran the first seven (it read `version or 1`, ignored zero point counts
    and quantized_dimension, took output -1 as optional)."""
    from models.builders import add_model  # noqa: PLC0415
    from models.hostile import apply_edit  # noqa: PLC0415

    dt, s1, s2, q = _INT8_ADD
    path = tmp_path / f"{edit}.tflite"
    path.write_bytes(apply_edit(add_model(dt, s1, s2, quant=q), edit))
    r = subprocess.run([sys.executable, "-c", _LITERT_BUILD, str(path)], capture_output=True,
                       text=True, timeout=60, env=_env())
    assert "RESULT refused" in r.stdout, (r.returncode, r.stdout, r.stderr[-500:])
    _api_raises(_py(_LOAD.format(path=str(path), device=fast_device)), "ModelError", match)
    _error_line(_cli("run", path, "--device", fast_device), match)


def test_empty_subgraph_runs_as_in_litert(tmp_path, fast_device):
    """A subgraph with empty tensor/operator lists: LiteRT 2.3.0 builds and runs the
    model (measured), so litecl does too."""
    from models.builders import add_model  # noqa: PLC0415
    from models.hostile import apply_edit  # noqa: PLC0415

    dt, s1, s2, q = _INT8_ADD
    path = tmp_path / "empty.tflite"
    path.write_bytes(apply_edit(add_model(dt, s1, s2, quant=q), "empty_subgraph"))
    r = subprocess.run([sys.executable, "-c", _LITERT_BUILD, str(path)], capture_output=True,
                       text=True, timeout=60, env=_env())
    assert "RESULT ok" in r.stdout, r.stdout
    c = _cli("compare", path, "--device", fast_device)
    assert c.returncode == 0, c.stderr


_SIDE_BY_SIDE = """
import sys
import numpy as np
import litecl
from litecl.compare import make_interpreter
raw = open(sys.argv[1], "rb").read()
def steps(it):
    out = []
    def step(f):
        try:
            r = f()
            out.append(("ok", r.tolist() if isinstance(r, np.ndarray) else r))
        except Exception as e:
            out.append((type(e).__name__, str(e).splitlines()[0][:100]))
    step(it.allocate_tensors)
    step(lambda: it.set_tensor(0, np.linspace(-4, 4, 10, dtype=np.float32).reshape(2, 5)))
    step(it.invoke)
    step(lambda: it.get_tensor(4))
    step(lambda: [d["name"] for d in it.get_input_details()])
    step(lambda: [d["name"] for d in it.get_output_details()])
    step(lambda: [d["index"] for d in it.get_tensor_details()])
    step(it.get_signature_list)
    step(lambda: sorted(it.get_signature_runner().get_input_details()))
    step(lambda: sorted(it.get_signature_runner().get_output_details()))
    step(lambda: {k: v.tolist() for k, v in it.get_signature_runner()(input=np.ones((2, 5), np.float32)).items()})
    return out
want = steps(make_interpreter(raw))
try:
    got = steps(litecl.Interpreter(model_content=raw, device=sys.argv[2], quiet=True))
except litecl.LiteclError as e:
    got = [("refused", str(e))]
print("RESULT", "same" if got == want else f"litecl {got} LiteRT {want}")
print("LITERT", want)
"""

_RUNS_IN_LITERT = ["name_not_utf8_input", "name_not_utf8_inner", "name_not_utf8_output", "signature_input99",
                   "signature_output99", "signature_output_uint32_max"]


@pytest.mark.parametrize("edit", _RUNS_IN_LITERT)
def test_models_litert_runs_run_as_in_litert(tmp_path, fast_device, edit):
    """A tensor name that is not UTF-8 and a signature tensor index out of range: LiteRT
    2.3.0 builds and runs such a model (measured here, step by step); litecl refused it
    ("name is not UTF-8", "signature maps ... to tensor 99"). Now each step gives what
    LiteRT gives: the same values, and LiteRT's own error where LiteRT fails (the details
    of a tensor whose name is not UTF-8; the runner of the signature with the bad index).
    The name shows as U+FFFD in litecl's reports; `litecl compare` runs the model where
    LiteRT's Python API can describe its inputs and outputs."""
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    from models.builders import chain_model  # noqa: PLC0415
    from models.hostile import apply_edit  # noqa: PLC0415

    base = chain_model(["float32", "int32", ("add", 3), "float16"], (2, 5))
    sg = schema.ModelT.InitFromPackedBuf(base, 0).subgraphs[0]
    assert (list(sg.inputs), list(sg.outputs)) == ([0], [4])  # as _SIDE_BY_SIDE feeds and reads it
    path = tmp_path / f"{edit}.tflite"
    path.write_bytes(apply_edit(base, edit))
    r = _py(_SIDE_BY_SIDE.replace("sys.argv[1]", repr(str(path))).replace("sys.argv[2]", repr(fast_device)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RESULT same" in r.stdout, r.stdout
    litert = r.stdout.split("LITERT ", 1)[1]
    assert "('ok', [[-1.0, 0.0, 1.0, 2.0, 3.0], [3.0," in litert  # LiteRT ran it: -4..4 to int32, + 3
    assert ("Error'" in litert) is (edit != "name_not_utf8_inner")  # a step LiteRT fails, litecl too
    if edit in ("name_not_utf8_input", "name_not_utf8_output"):  # LiteRT's details fail
        _error_line(_cli("compare", path, "--device", fast_device), "cannot read a tensor name of this model: it is not UTF-8")
    else:
        c = _cli("compare", path, "--device", fast_device)
        assert c.returncode == 0 and "bit-exact" in c.stdout, (c.stdout, c.stderr)
    if edit == "name_not_utf8_inner":
        c = _cli("inspect", path, "--device", fast_device, "--json")
        assert c.returncode == 0 and "\\ufffdinner\\ufffd" in c.stdout, (c.stdout, c.stderr)


# ------------------------------------------------------------------ 4. special files
@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe.npz"
    os.mkfifo(p)
    return p


def _small_model(tmp_path) -> Path:
    from models.builders import add_model  # noqa: PLC0415

    p = tmp_path / "add.tflite"
    p.write_bytes(add_model("float32", [4], [4]))
    return p


@pytest.mark.parametrize("where", ["model", "inputs", "output", "json"])
def test_fifo_is_refused_not_blocked_on(tmp_path, fast_device, fifo, where):
    """Opening a FIFO nobody writes (reads) blocks forever: `run`/`bench` hung on each
    (a 20 s timeout here turns a hang into a failure)."""
    m = _small_model(tmp_path)
    args = {"model": ("run", fifo), "inputs": ("run", m, "--inputs", fifo),
            "output": ("run", m, "--output", fifo), "json": ("bench", m, "--json", fifo)}[where]
    _error_line(_cli(*args, "--device", fast_device, timeout=20), r"FIFO \(named pipe\)")
    if where == "model":
        _api_raises(_py(_LOAD.format(path=str(fifo), device=fast_device), timeout=20), "ModelError",
                    "FIFO")


def test_dev_zero_is_refused_not_read_forever(tmp_path, fast_device):
    """/dev/zero was read until memory ran out (model) or into numpy's loader (inputs)."""
    _error_line(_cli("run", "/dev/zero", "--device", fast_device, timeout=20), "a character device")
    _api_raises(_py(_LOAD.format(path="/dev/zero", device=fast_device), timeout=20), "ModelError",
                "character device, not a regular file")
    _error_line(_cli("run", _small_model(tmp_path), "--inputs", "/dev/zero", "--device", fast_device,
                     timeout=20), "character device")


def test_pipe_with_a_reader_is_a_fine_output(tmp_path, fast_device):
    """`--json /dev/stdout | jq` writes into a pipe someone reads: accepted."""
    r = _cli("bench", _small_model(tmp_path), "--json", "/dev/stdout", "--device", fast_device,
             timeout=60)
    assert r.returncode == 0, r.stderr
    assert '"nodes"' in r.stdout or "{" in r.stdout, r.stdout[-500:]


# ------------------------------------------------------------------ 5. limits
def test_num_threads_above_a_c_int_is_one_line(tmp_path, fast_device):
    """LiteRT's binding takes a C int: 2**31 is its multi-line pybind TypeError, which
    litecl.Interpreter refuses first with one line, a ValueError subclass (issue 34); 0
    and -1 are LiteRT's own one-line ValueError, the same through both; a flag that is no
    bool (a str, a list) is one line too; 2**31 - 1 runs. `bench` checks the flag itself:
    one error line (it printed "internal error")."""
    import litecl  # noqa: PLC0415
    from litecl.compare import make_interpreter  # noqa: PLC0415

    m = _small_model(tmp_path)
    for bad in (2**31, 2**40):
        with pytest.raises(TypeError) as e:  # LiteRT's own: many lines
            make_interpreter(m.read_bytes(), num_threads=bad)
        assert len(str(e.value).splitlines()) > 3
        with pytest.raises(litecl.LiteclError, match=f"^num_threads must be at most 2147483647 .*got {bad}$"):
            litecl.Interpreter(model_path=m, device=fast_device, num_threads=bad)
    for bad in (0, -1):
        errors = []
        for make in (lambda: litecl.Interpreter(model_path=m, device=fast_device, num_threads=bad),
                     lambda: make_interpreter(m.read_bytes(), num_threads=bad)):
            with pytest.raises(ValueError) as e:
                make()
            errors.append(str(e.value))
        assert errors[0] == errors[1] and "\n" not in errors[0], (bad, errors)
    for flag in ({"experimental_preserve_all_tensors": "yes"}, {"experimental_disable_delegate_clustering": [1]}):
        with pytest.raises(litecl.LiteclError) as e:
            litecl.Interpreter(model_path=m, device=fast_device, **flag)
        assert "\n" not in str(e.value) and str(e.value).startswith("LiteRT's Interpreter refused its arguments ("), e
    it = litecl.Interpreter(model_path=m, device=fast_device, num_threads=2**31 - 1)
    it.allocate_tensors()
    it.close()
    _error_line(_cli("bench", m, "--num_threads", 2**31, "--device", fast_device, timeout=60),
                r"--num_threads(/--num-threads)?: expected an integer >= 1 and <= 2147483647")


def test_shape_numpy_cannot_hold_is_a_model_error(tmp_path, fast_device):
    """[0, 2**31-1, 2**31-1, 2**31-1] has no elements, but numpy cannot make an array of
    it ("array is too big"): `run`/`compare`/`bench` printed "internal error"."""
    from models.builders import _Graph  # noqa: PLC0415

    for op in ("cast", "mul"):  # lowered, and run on LiteRT
        g = _Graph()
        x = g.tensor("input", "float32", [0, 2**31 - 1, 2**31 - 1, 2**31 - 1])
        g.inputs = [x]
        g.outputs = [g.cast(x, "int32", "output") if op == "cast"
                     else g.binary("mul", x, g.constant("k", "float32", 1.0), "output")]
        path = tmp_path / f"{op}.tflite"
        path.write_bytes(g.finish())
        for cmd in ("run", "compare", "bench"):
            _error_line(_cli(cmd, path, "--device", fast_device, timeout=60), "numpy's limit")


_HUGE_RESIZE = """
import sys, numpy as np, litecl
from models.builders import add_model
it = litecl.Interpreter(model_content=add_model("float32", [4], [4]), device={device!r},
                        placement={placement!r}, quiet=True)
for shape in ([0, 2**31 - 1, 2**31 - 1, 2**31 - 1], [2**31 - 1, 2**31 - 1], [2**20, 2**20]):
    try:
        it.resize_tensor_input(0, shape)
        it.resize_tensor_input(1, shape)
        it.allocate_tensors()
        it.invoke()
        it.get_tensor(2)
        print("RESULT ran", flush=True)
    except (ValueError, RuntimeError) as e:
        print("RESULT", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "", flush=True)
"""


@pytest.mark.parametrize("placement", ["all", "auto"])
def test_resize_to_shapes_no_memory_holds_is_an_error(fast_device, placement):
    """A shape numpy cannot hold (no elements, yet numpy refuses it) allocates as in
    LiteRT and get_tensor is LiteRT's ValueError; shapes no memory holds are LiteRT's
    arena RuntimeError, or litecl's InputError when its kernel holds the ADD (32-bit
    indexing). No signal, whoever runs the node."""
    r = _py(_HUGE_RESIZE.format(device=fast_device, placement=placement), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    results = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert len(results) == 3 and not any(x == "RESULT ran" for x in results), r.stdout
    assert results[0].startswith("RESULT ValueError array is too big"), results


# ------------------------------------------------------------------ 6. close() during invoke()
_CLOSE_DURING_INVOKE = """
import collections, sys, threading, time
import numpy as np
import litecl
from models.builders import add_model
m = add_model("float32", [1 << 20], [1 << 20])
x = np.ones(1 << 20, np.float32)
seen = collections.Counter()
for trial in range(20):
    it = litecl.Interpreter(model_content=m, device={device!r})
    it.allocate_tensors()
    it.set_tensor(0, x)
    it.set_tensor(1, x)
    started = threading.Event()
    def work():
        try:
            while True:
                started.set()
                it.invoke()
                it.get_tensor(it.get_output_details()[0]["index"])
        except litecl.LiteclError as e:
            seen[type(e).__name__] += 1
    t = threading.Thread(target=work)
    t.start()
    started.wait()
    time.sleep(0.001 * (trial % 10))
    it.close()
    t.join(30)
    seen["hung"] += t.is_alive()
print("RESULT", dict(seen))
"""


def test_close_from_another_thread_waits_for_invoke(fast_device):
    """close() while another thread invokes: PoCL aborted ("PTHREAD ERROR in
    POclEnqueueMapBuffer", measured on the first of 30 trials). Now close() waits for the
    running call; the invoking thread then gets a LiteclError."""
    r = _py(_CLOSE_DURING_INVOKE.format(device=fast_device), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
    assert line == "RESULT {'LiteclError': 20, 'hung': 0}", line


# ------------------------------------------------------------------ 7. fork()
_FORK = """
import os, sys
import numpy as np
import litecl
from models.builders import add_model
m = add_model("float32", [4], [4])
it = litecl.Interpreter(model_content=m, device={device!r})
it.allocate_tensors()
x = np.ones(4, np.float32)
it.set_tensor(0, x)
it.set_tensor(1, x)
it.invoke()
pid = os.fork()
if pid == 0:
    try:
        if {mode!r} == "old":
            it.invoke()
        else:
            litecl.Interpreter(model_content=m, device={device!r})
        print("RESULT no error", flush=True)
    except litecl.LiteclError as e:
        print("RESULT", type(e).__name__, e, flush=True)
    sys.exit(0)  # a normal exit: finalizers release the inherited objects
_, status = os.waitpid(pid, 0)
it.invoke()
print("PARENT", status, it.get_tensor(2).tolist())
"""


@pytest.mark.parametrize("mode", ["old", "new"])
def test_invoke_in_a_forked_child_is_an_error_not_a_hang(fast_device, mode):
    """An invoke in a child of fork() never returned on PoCL, and neither did one of a new
    Interpreter on the device the parent had opened (measured): both are LiteclErrors
    telling to create the Interpreter after forking; the parent goes on working."""
    r = _py(_FORK.format(device=fast_device, mode=mode), timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    _api_raises(r, "LiteclError", "create the Interpreter after forking")
    assert "PARENT 0 [2.0, 2.0, 2.0, 2.0]" in r.stdout, r.stdout


_FORK_FIRST = """
import os, sys
import numpy as np
import litecl
from models.builders import add_model
m = add_model("float32", [4], [4])
pid = os.fork()
if pid == 0:
    c = litecl.Interpreter(model_content=m, device={device!r})
    c.allocate_tensors()
    c.set_tensor(0, np.ones(4, np.float32))
    c.set_tensor(1, np.ones(4, np.float32))
    c.invoke()
    print("RESULT", c.get_tensor(2).tolist(), flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("PARENT", status)
"""


def test_interpreter_created_in_a_child_works(fast_device):
    """A device first opened in the child is the child's own: it runs."""
    r = _py(_FORK_FIRST.format(device=fast_device), timeout=60)
    assert "RESULT [2.0, 2.0, 2.0, 2.0]" in r.stdout and "PARENT 0" in r.stdout, (r.stdout, r.stderr[-2000:])


# ------------------------------------------------------------------ 8. caches
from conftest import DEVICE_STATUS, device_params  # noqa: E402


def _inspect_on_opencl(r, device: str) -> None:
    """`inspect` succeeded and the ADD runs on the device (not "cannot build kernels")."""
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "Replacing 1 out of 1 node(s)" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr, r.stderr


def _pyopencl_dir(xdg: Path) -> Path:
    import sys as _s  # noqa: PLC0415

    return xdg / "pyopencl" / "pyopencl-compiler-cache-v2-py{}".format(".".join(str(i) for i in _s.version_info))


@pytest.mark.parametrize("device", device_params(["pocl", "intel"]))
def test_cache_folder_that_is_a_file_costs_nothing(tmp_path, device):
    """XDG_CACHE_HOME naming a file: Intel put every node on LiteRT ("cannot build kernels
    ('PYOPENCL_CACHE_FAILURE_FATAL')"), PoCL vanished from the device list. Now both build
    kernels, and each broken folder is named once."""
    xdg = tmp_path / "a_file"
    xdg.write_text("not a folder")
    env = _env(XDG_CACHE_HOME=xdg, POCL_CACHE_DIR="")
    r = _cli("inspect", _small_model(tmp_path), "--device", device, env=env)
    _inspect_on_opencl(r, device)
    # each a `warning:` line (import's were Python's "litecl:0: RuntimeWarning: ..." before)
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert any(f"{xdg}/pyopencl" in ln for ln in warned) and "RuntimeWarning" not in r.stderr, r.stderr
    assert len(warned) == len(set(warned)) <= 3, warned  # pocl, pyopencl, litecl folders: once each
    d = _cli("devices", env=env)
    assert "Portable Computing Language" in d.stdout or DEVICE_STATUS.get("pocl"), d.stdout


@pytest.mark.parametrize("device", device_params(["intel"]))  # PoCL caches builds itself
def test_stale_pyopencl_lock_does_not_stall(tmp_path, device):
    """A lock file left in pyopencl's cache: `inspect --device intel` waited 61-65 s,
    then put every node on LiteRT. Now the cache is skipped at once, naming the lock."""
    xdg = tmp_path / "xdg"
    lock = _pyopencl_dir(xdg) / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    os.utime(lock, (os.path.getmtime(lock) - 300,) * 2)
    r = _cli("inspect", _small_model(tmp_path), "--device", device, env=_env(XDG_CACHE_HOME=xdg),
             timeout=45)
    _inspect_on_opencl(r, device)
    assert "stale lock file" in r.stderr and str(lock) in r.stderr, r.stderr


@pytest.mark.parametrize("device", device_params(["intel"]))
def test_corrupt_pyopencl_cache_entry_costs_nothing(tmp_path, device):
    """A cache entry whose info file is garbage: KeyError('PYOPENCL_CACHE_FAILURE_FATAL')
    from pyopencl, every node on LiteRT. Now built without the cache, with one warning."""
    xdg = tmp_path / "xdg"
    m = _small_model(tmp_path)
    # litecl's own binary cache off: the second build must go through pyopencl's
    env = _env(XDG_CACHE_HOME=xdg, LITECL_NO_CACHE="1")
    assert _cli("inspect", m, "--device", device, env=env).returncode == 0
    infos = list(_pyopencl_dir(xdg).glob("*/info"))
    assert infos
    for f in infos:
        f.write_bytes(b"garbage")
    r = _cli("inspect", m, "--device", device, env=env)
    _inspect_on_opencl(r, device)
    assert "PYOPENCL_CACHE_FAILURE_FATAL" in r.stderr and str(_pyopencl_dir(xdg)) in r.stderr, r.stderr


@pytest.mark.parametrize("victim", ["litecl_add.so", "program.bc"])
@pytest.mark.parametrize("device", device_params(["pocl"]))
def test_corrupt_pocl_kernel_cache_is_repaired(tmp_path, device, victim):
    """Truncated kernel .so or program.bc files in POCL_CACHE_DIR: `litecl run --device
    pocl` died with SIGABRT inside PoCL ("Assertion `program->data[device_i]' failed",
    dlopen "cannot read file data"). Now the damaged entries are removed (one warning
    naming the folder) and PoCL rebuilds them; the outputs match LiteRT."""
    cache = tmp_path / "kcache"
    m = _small_model(tmp_path)
    env = _env(POCL_CACHE_DIR=cache)
    assert _cli("run", m, "--device", device, env=env).returncode == 0
    files = list(cache.rglob(victim))
    assert files
    for f in files:
        os.truncate(f, 100)
    r = _cli("compare", m, "--device", device, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert f"PoCL's kernel cache {cache} held" in r.stderr and "removed" in r.stderr, r.stderr
    r = _cli("run", m, "--device", device, env=env)  # repaired: no warning the second time
    assert r.returncode == 0 and "RuntimeWarning" not in r.stderr, r.stderr


def test_damage_checks_find_every_truncation(tmp_path):
    """Each cut of a real PoCL kernel .so and program.bc is found; the whole files pass."""
    from litecl.device import _bitcode_truncated, _elf_truncated  # noqa: PLC0415

    if DEVICE_STATUS.get("pocl"):  # it builds no kernel: nothing in its cache
        pytest.skip(DEVICE_STATUS["pocl"])
    cache = tmp_path / "kcache"
    assert _cli("run", _small_model(tmp_path), "--device", "pocl", env=_env(POCL_CACHE_DIR=cache)).returncode == 0
    for name, check in (("*.so", _elf_truncated), ("program.bc", _bitcode_truncated)):
        f = next(cache.rglob(name))
        data = f.read_bytes()
        assert check(f, len(data)) is None
        cut = tmp_path / "cut"
        for n in range(1, len(data), max(1, len(data) // 97)):
            cut.write_bytes(data[:n])
            assert check(cut, n), (name, n)


# ------------------------------------------------------------------ 9. models LiteRT crashes on
@pytest.mark.parametrize("weights_time,state", [("int8", "int8"), ("int8", "int16"), ("int16", "int8")])
def test_integer_svdf_with_int8_time_weights_or_state_is_refused(tmp_path, fast_device,
                                                                 weights_time, state):
    """tflite-micro's keyword_scrambled_8bit has an SVDF with int8 weights_time and
    state; LiteRT's integer SVDF reads them as int16 and corrupts the heap ("double free
    or corruption", SIGSEGV: measured with the models.hostile.svdf_model copy at 64
    units), so `compare` died with no error line."""
    from models.hostile import svdf_model  # noqa: PLC0415

    path = tmp_path / "svdf.tflite"
    path.write_bytes(svdf_model(weights_time, state, input_size=64, units=64, memory=64))
    for cmd in ("run", "compare"):
        _error_line(_cli(cmd, path, "--device", fast_device), r"SVDF\) is fully integer .* LiteRT's integer SVDF")


def test_integer_svdf_as_litert_expects_it_runs(tmp_path, fast_device):
    from models.hostile import svdf_model  # noqa: PLC0415

    path = tmp_path / "svdf.tflite"
    path.write_bytes(svdf_model("int16", "int16", input_size=64, units=64, memory=64))
    r = _cli("compare", path, "--device", fast_device)
    assert r.returncode == 0 and "bit-exact" in r.stdout, (r.stdout, r.stderr)


_CRASH_INJECTION = """
import ctypes
import litecl.interpreter
def _crash(self):  # stands for a crash inside LiteRT or the OpenCL runtime
    ctypes.string_at(0)
litecl.interpreter.Interpreter.invoke = _crash
"""


@pytest.mark.parametrize("cmd", ["run", "compare", "bench"])
def test_a_crash_in_process_is_an_error_line(tmp_path, fast_device, cmd):
    """A SIGSEGV while running the model (injected through sitecustomize: litecl runs
    inside LiteRT's interpreter, so LiteRT's crashes are litecl's) ended `litecl` with no
    error line; the supervising parent now prints one and exits 2. With
    LITECL_NO_SUPERVISOR the signal shows as before (the fuzzer sets it)."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(_CRASH_INJECTION)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(inject), env["PYTHONPATH"]])
    m = _small_model(tmp_path)
    _error_line(_cli(cmd, m, "--device", fast_device, env=env), r"crashed \(SIGSEGV\)")
    env["LITECL_NO_SUPERVISOR"] = "0"  # off, as unset (it counted as set: no supervisor)
    _error_line(_cli(cmd, m, "--device", fast_device, env=env), r"crashed \(SIGSEGV\)")
    env["LITECL_NO_SUPERVISOR"] = "1"
    assert _cli(cmd, m, "--device", fast_device, env=env).returncode == -11


_BANNER_INJECTION = """
import ctypes, os, sys
import litecl.interpreter
BANNER = os.environ["BANNER_TEST"]
def _crash(self):  # a runtime's crash handler (LLVM's, in Intel's CPU runtime) speaks, then dies
    os.write(2, b"INFO: before the crash\\nPLEASE submit a bug report to https://example.invalid and "
                b"include the crash backtrace.\\nStack dump:\\n0. frame\\n")
    if BANNER == "crash":
        ctypes.string_at(0)
litecl.interpreter.Interpreter.invoke = _crash
"""


def test_a_runtime_crash_banner_is_not_a_second_error_line(tmp_path, fast_device):
    """Intel's CPU runtime prints LLVM's "PLEASE submit a bug report" banner (and a stack
    dump) as the process dies: the supervisor drops it, so a crash is one error line
    (it was two on hosts where Intel's runtime is the device); lines before it pass, and
    the same lines from a child that lives on are passed on whole."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(_BANNER_INJECTION)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(inject), env["PYTHONPATH"]])
    m = _small_model(tmp_path)
    r = _cli("run", m, "--device", fast_device, env=dict(env, BANNER_TEST="crash"))
    assert r.returncode == 2 and r.stderr.splitlines()[0] == "INFO: before the crash", r.stderr
    _error_line(subprocess.CompletedProcess(r.args, 2, r.stdout, r.stderr.split("\n", 1)[1]),
                r"crashed \(SIGSEGV\)")
    r = _cli("run", m, "--device", fast_device, env=dict(env, BANNER_TEST="crash", LITECL_DEBUG="1"))
    assert "PLEASE submit a bug report" in r.stderr and "crashed (SIGSEGV)" in r.stderr, r.stderr
    r = _cli("run", m, "--device", fast_device, env=dict(env, BANNER_TEST="live"))
    assert "PLEASE submit a bug report" in r.stderr and "0. frame" in r.stderr, r.stderr


# ------------------------------------------------------------------ 10. structured fuzzing
def test_structured_mutants_keep_the_contract(tmp_path, fast_device):
    """models.mutate's structured edits (the kinds above) keep the file a well-formed
    flatbuffer, and `litecl run` on each ends in an error line or a result: no signal
    (LITECL_NO_SUPERVISOR, as the fuzzer runs it), hang or traceback."""
    import random  # noqa: PLC0415

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fuzz_run import classify  # noqa: PLC0415

    from litecl.verify import verify  # noqa: PLC0415
    from models.builders import add_model, multi_op_model  # noqa: PLC0415
    from models.mutate import _structured  # noqa: PLC0415

    seeds = [add_model("int8", [4], [4], quant=((0.01, 0), (0.01, 0), (0.02, 0))),
             multi_op_model("alternating"), control_flow_model("while")]
    kinds = set()
    env = _env(LITECL_NO_SUPERVISOR=1)
    for k in range(24):
        b = bytearray(seeds[k % len(seeds)])
        what = _structured(b, random.Random(k))
        assert what.startswith("structured: "), what
        kinds.add(what.split(":")[1].split()[0])
        verify(bytes(b))
        path = tmp_path / f"m{k}.tflite"
        path.write_bytes(bytes(b))
        try:
            r = _cli("run", path, "--device", fast_device, env=env, timeout=60)
            kind = classify(r.returncode, r.stderr, "run")
        except subprocess.TimeoutExpired:
            kind = "hang"
        assert kind in ("rejected", "ok"), (k, what, kind, r.stderr[-1000:])
    assert len(kinds) >= 6, kinds


def test_add_output_type_follows_the_inputs_as_in_litert(tmp_path, fast_device):
    """An ADD of two unquantized int8 inputs declared with a float32 output (a structured
    mutant found it): LiteRT's Prepare sets the output type to input2's and aborts on the
    missing quantization; the guard read the output's type and let it through."""
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    from models.builders import add_model  # noqa: PLC0415

    m = schema.ModelT.InitFromPackedBuf(add_model("float32", [4], [4]), 0)
    for t in m.subgraphs[0].tensors[:2]:
        t.type = schema.TensorType.INT8
    from models.hostile import pack  # noqa: PLC0415

    path = tmp_path / "mixed.tflite"
    path.write_bytes(pack(m))
    r = subprocess.run([sys.executable, "-c", _LITERT_PREPARE, str(path)], capture_output=True,
                       timeout=60, env=_env())
    assert r.returncode < 0, r.returncode  # LiteRT alone aborts
    _error_line(_cli("run", path, "--device", fast_device, env=_env(LITECL_NO_SUPERVISOR=1)),
                "int8 ADD with quantization parameters on 0 of its 3 tensors")


_FORK_OTHER = """
import os, sys
import numpy as np
import litecl
from models.builders import add_model
m = add_model("float32", [4], [4])
p = litecl.Interpreter(model_content=m, device="intel")
p.allocate_tensors()
p.close()
pid = os.fork()
if pid == 0:
    try:
        c = litecl.Interpreter(model_content=m, device="pocl")
        c.allocate_tensors()
        c.set_tensor(0, np.ones(4, np.float32))
        c.set_tensor(1, np.ones(4, np.float32))
        c.invoke()
        print("RESULT", c.get_tensor(2).tolist(), flush=True)
    except Exception as e:
        print("API", type(e).__name__, e, flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("PARENT", status)
"""


def test_pocl_in_a_child_of_a_parent_that_listed_devices_is_an_error_not_a_hang():
    """The parent opened only the Intel runtime, but listing devices had started PoCL's
    worker threads: the child's PoCL invoke never returned (measured); now a DeviceError."""
    from conftest import DEVICE_STATUS

    for need in ("intel", "pocl"):
        if DEVICE_STATUS.get(need):
            pytest.skip(f"{need}: {DEVICE_STATUS[need]}")
    r = _py(_FORK_OTHER, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "API DeviceError PoCL was initialized before this process was fork()ed" in r.stdout, r.stdout
    assert "PARENT 0" in r.stdout
