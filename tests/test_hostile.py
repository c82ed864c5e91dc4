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
