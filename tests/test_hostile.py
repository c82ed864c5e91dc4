"""Hostile models, misuse and a broken environment (issue 13): each case runs in a
subprocess with a timeout and must end in a one-line litecl error (API: a LiteclError
subclass; CLI: `error: ...`, exit 2), never a signal, a traceback or a hang. Without the
guard each case named here crashes or hangs (measured with LiteRT 2.3.0, noted per test)."""
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
from litecl.fallback import make_interpreter
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
