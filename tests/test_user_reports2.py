"""Regression tests for problems a new user found in a trial (a second round after
tests/test_user_reports.py): the CLI's signature handling, device="auto"'s Oclgrind
fallback, and `litecl kernel cast` for pairs LiteRT's CAST does not run."""
from __future__ import annotations

import copy
import os

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from litecl.cli import main
from models.builders import cast_model


def _pack(m) -> bytes:
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _with_signatures(model: bytes, names: dict) -> bytes:
    """``model`` (one subgraph, builders' serving_default signature) with signatures
    ``names``: {key: (input name, output name)}, each over subgraph 0, named unlike the
    tensors ("input"/"output")."""
    m = schema.ModelT.InitFromPackedBuf(model, 0)
    base, m.signatureDefs = m.signatureDefs[0], []
    for key, (i, o) in names.items():
        s = copy.deepcopy(base)
        s.signatureKey = key
        s.inputs[0].name, s.outputs[0].name = i, o
        m.signatureDefs.append(s)
    return _pack(m)


def test_run_with_the_only_signature_s_input_names_uses_it_without_asking(tmp_path, fast_device, capsys):
    """--inputs keyed by the only signature's input names: run, compare and bench use
    that signature (LiteRT's get_signature_runner() with no key); they asked for
    --signature. Subgraph 0's tensor names still work; with two signatures the error
    still names the one to pass."""
    one = tmp_path / "one.tflite"
    one.write_bytes(_with_signatures(cast_model("float32", "int8", [5]), {"serving_default": ("x", "y")}))
    x = np.array([1.5, -2.25, 3, 200, -7], np.float32)
    np.savez(tmp_path / "sig.npz", x=x)
    np.savez(tmp_path / "tensor.npz", input=x)
    out = tmp_path / "out.npz"
    assert main(["run", str(one), "--inputs", str(tmp_path / "sig.npz"), "--device", fast_device,
                 "--output", str(out)]) == 0
    said = capsys.readouterr()
    assert "y: int8[5]" in said.out and said.err == "", said
    got = np.load(out)["y"]
    assert main(["run", str(one), "--inputs", str(tmp_path / "tensor.npz"), "--device", fast_device,
                 "--output", str(out)]) == 0
    assert "output: int8[5]" in capsys.readouterr().out
    assert np.array_equal(np.load(out)["output"], got)
    assert main(["compare", str(one), "--inputs", str(tmp_path / "sig.npz"), "--device", fast_device]) == 0
    said = capsys.readouterr().out
    assert "signature: serving_default" in said and "all outputs bit-exact" in said
    assert main(["bench", str(one), "--inputs", str(tmp_path / "sig.npz"), "--device", fast_device,
                 "--num_runs", "2", "--warmup_runs", "1", "--min_secs", "0", "--warmup_min_secs", "0"]) == 0
    assert "INFO: signature: serving_default" in capsys.readouterr().out
    two = tmp_path / "two.tflite"
    two.write_bytes(_with_signatures(cast_model("float32", "int8", [5]),
                                     {"serving_default": ("x", "y"), "other": ("a", "b")}))
    assert main(["run", str(two), "--inputs", str(tmp_path / "sig.npz"), "--device", fast_device]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown input name(s) ['x']") and "pass --signature serving_default" in err, err
    # a signature's name beside an unknown one, or beside the model's own: the unknown one
    # alone is named, or the mix is (both were called unknown: a fresh user's report)
    np.savez(tmp_path / "extra.npz", x=x, bogus=x)
    np.savez(tmp_path / "both.npz", x=x, input=x)
    for npz, said in (("extra", "error: unknown input name(s) ['bogus']; the model's inputs are ['input'] "
                                "(signature 'serving_default' takes ['x'])\n"),
                      ("both", "error: --inputs mixes signature input name(s) ['x'] with the model's ['input']: "
                               "name them one way")):
        assert main(["run", str(one), "--inputs", str(tmp_path / f"{npz}.npz"), "--device", fast_device]) == 2
        err = capsys.readouterr().err
        assert err.startswith(said), err


def test_compare_checks_every_signature_and_names_each(tmp_path, fast_device, capsys):
    """A model with two signatures: compare checks both, each block and the last line
    naming its signature (it checked subgraph 0 alone, unnamed); --json lists them;
    --signature checks one; --inputs holding one signature's inputs checks that one."""
    import json

    two = tmp_path / "two.tflite"
    two.write_bytes(_with_signatures(cast_model("float32", "int8", [5]),
                                     {"serving_default": ("x", "y"), "other": ("a", "b")}))
    assert main(["compare", str(two), "--device", fast_device]) == 0
    out = capsys.readouterr().out
    assert "  signature: serving_default  " in out and "  signature: other  " in out
    assert "signature other's outputs bit-exact" in out
    assert out.splitlines()[-1] == "compared 2 signatures (serving_default, other): all bit-exact"
    assert main(["compare", str(two), "--device", fast_device, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["all_bit_exact"] and [r["signature"] for r in rep["signatures"]] == ["serving_default", "other"]
    assert [[o["name"] for o in r["outputs"]] for r in rep["signatures"]] == [["y"], ["b"]]
    assert all(r["nodes"] == 1 and r["opencl_nodes"] == 1 for r in rep["signatures"])
    assert main(["compare", str(two), "--device", fast_device, "--signature", "other", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["signature"] == "other" and rep["all_bit_exact"] and [o["name"] for o in rep["outputs"]] == ["b"]
    np.savez(tmp_path / "a.npz", a=np.arange(5, dtype=np.float32))
    assert main(["compare", str(two), "--device", fast_device, "--inputs", str(tmp_path / "a.npz")]) == 0
    out = capsys.readouterr().out
    assert "  signature: other  " in out and "serving_default" not in out and "all outputs bit-exact" in out


_AUTO_OCLGRIND = r"""
import sys
import litecl.device as D
real, probe = D._all_devices, D.probe_compiler
D._remembered = lambda key: None  # the machine simulated here has no memory of its picks
if sys.argv[1] == "only":  # Oclgrind is the only device
    D._all_devices = lambda: [d for d in real() if "oclgrind" in d.platform.name.lower()]
else:  # every other device fails to build kernels
    D.probe_compiler = lambda d: probe(d) if "oclgrind" in d.platform.name.lower() else "error: cannot build (a test)"
if sys.argv[1].startswith("cli"):
    from litecl.cli import main
    sys.exit(main(["devices"] if sys.argv[1] == "cli-devices" else
                  ["kernel", "cast", "float32", "int8", "--device", "auto"]))
import litecl
for spec in ("auto", None, "auto:profile=mobile", "oclgrind"):
    print(litecl.open_device(spec).caps.platform)
"""


def test_auto_falling_back_to_oclgrind_warns_once(tmp_path):
    """device="auto" (and --device auto) that ends on the Oclgrind simulator says so in
    one warning line on stderr, once per process, with why the others were passed over
    and how to pick another device; it said nothing. ``litecl devices`` (which marks what
    auto picks) does not warn; naming oclgrind does not warn."""
    import os
    import subprocess
    import sys

    from conftest import DEVICE_STATUS, ROOT

    if DEVICE_STATUS.get("oclgrind"):
        import pytest

        pytest.skip(f"oclgrind: {DEVICE_STATUS['oclgrind']}")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    env.pop("LITECL_DEVICE", None)
    runs = {how: subprocess.run([sys.executable, "-c", _AUTO_OCLGRIND, how], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=300)
            for how in ("only", "others", "cli", "cli-devices")}
    devices = runs.pop("cli-devices")
    assert devices.returncode == 0 and devices.stderr == "" and "*" in devices.stdout, devices
    for how, r in runs.items():
        assert r.returncode == 0, (how, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if "Oclgrind simulator" in ln]
        assert len(lines) == 1, (how, r.stderr)
        line = lines[0]
        assert "device auto picked the Oclgrind simulator" in line and "no other OpenCL device builds" in line
        assert "--device SPEC" in line and "LITECL_DEVICE=SPEC" in line
        if how != "cli":
            assert line.startswith("litecl:0: RuntimeWarning: ") and r.stdout.split().count("Oclgrind") == 4
    assert "it is the only OpenCL device found" in runs["only"].stderr
    assert "error: cannot build (a test)" in runs["others"].stderr
    cli = runs["cli"]
    assert cli.stderr.startswith("warning: device auto picked") and cli.stderr.count("\n") == 1, cli.stderr
    assert "__kernel" in cli.stdout


def test_kernel_cast_refuses_exactly_the_pairs_litert_s_cast_does_not_run(fast_device, capsys):
    """`litecl kernel cast SRC DST` emits a kernel for a pair iff LiteRT alone runs CAST
    SRC -> DST (builtin resolver, measured here over all 240 ordered pairs of the dtype
    table), else refuses with one `error:` line naming why (cast_why_not, what
    lowering.why_not says for such a node). A trial user read int2 -> float32 as a pair
    LiteRT does not run: it does, on int2 tensors the model makes (an int2 input cannot
    be set from Python), so the kernel is emitted with a note saying so."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from litecl.ops.dtypes import DTYPES
    from models.builders import chain_model

    def litert_runs(s: str, d: str) -> bool:
        # int2 and bfloat16 inputs cannot be set: made inside the model from float32
        m = chain_model(["float32", s, d], [4]) if s in ("int2", "bfloat16") else cast_model(s, d, [4])
        try:
            it = Interpreter(model_content=m,
                             experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
            it.allocate_tensors()
            x = it.get_input_details()[0]
            it.set_tensor(x["index"], np.zeros(x["shape"], x["dtype"]))
            it.invoke()
        except (RuntimeError, ValueError):
            return False
        return True

    wrong = []
    names = [t.name for t in DTYPES]
    for s in names:
        for d in names:
            if s == d:
                continue
            rc = main(["kernel", "cast", s, d, "--device", fast_device])
            said = capsys.readouterr()
            runs = litert_runs(s, d)
            if runs and rc == 2 and "which the device lacks" in said.err:
                continue  # a capability of this device (int64, fp64), not LiteRT's rule
            if rc != (0 if runs else 2) or (not runs and not (said.err.startswith(f"error: CAST {s} -> {d} ")
                                                             and said.err.count("\n") == 1)):
                wrong.append((s, d, runs, rc, said.err.strip()))
            if runs and s == "int2":
                assert "its Python API cannot pass int2 inputs" in said.out
    assert not wrong, wrong
    assert main(["kernel", "cast", "int2", "int8", "--device", fast_device]) == 2
    assert "LiteRT casts int2 only to and from float32" in capsys.readouterr().err


def test_allocate_tensors_raises_prepare_error_when_litert_s_own_node_fails(fast_device):
    """A node LiteRT itself refuses to prepare (MoveNet with its quantization scales set
    to 1e33, hostile.py's scale1e33): litecl.Interpreter.allocate_tensors raised a bare
    RuntimeError (the constructor already raised PrepareError); now PrepareError, a
    ValueError and a RuntimeError, with LiteRT's text. LiteRT alone raises RuntimeError
    on the same model."""
    import pytest

    import litecl
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
    from conftest import SHARED_MODELS
    from models.hostile import apply_edit

    src = SHARED_MODELS / "movenet_singlepose_lightning_int8.tflite"
    if not src.exists():
        pytest.skip(f"real model {src} is absent")
    bad = apply_edit(src.read_bytes(), "scale1e33")
    ref = LiteRT(model_content=bad, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    with pytest.raises(RuntimeError) as want:
        ref.allocate_tensors()
    it = litecl.Interpreter(model_content=bad, device=fast_device, quiet=True)
    with pytest.raises(litecl.PrepareError) as got:
        it.allocate_tensors()
    assert isinstance(got.value, ValueError) and isinstance(got.value, RuntimeError)
    assert not isinstance(got.value, litecl.ResizedPrepareError)
    assert "failed to prepare" in str(got.value) and "failed to prepare" in str(want.value)


import pytest  # noqa: E402


@pytest.mark.parametrize("supervised", [True, False])
def test_ctrl_c_during_bench_is_one_error_line(tmp_path, fast_device, supervised):
    """SIGINT while `litecl bench` invokes (the delegate's callbacks running): one
    `error: interrupted (SIGINT)` line, exit 130 (the shell's 128 + 2). It printed "Exception ignored on calling
    ctypes callback function ... KeyboardInterrupt" with a traceback, then a failed-node
    error from LiteRT (a fresh user's report), supervised or not."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from models.builders import chain_model

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["float32", ("add", 1.0), "int8"], [4096]))
    env = dict(os.environ)
    env.pop("LITECL_NO_SUPERVISOR", None)
    if not supervised:
        env["LITECL_NO_SUPERVISOR"] = "1"
    p = subprocess.Popen([sys.executable, "-m", "litecl.cli", "bench", str(m), "--device", fast_device,
                          "--num-runs", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    time.sleep(6)  # past start-up, inside the timed invokes
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.strip().splitlines()[-1] == "error: interrupted (SIGINT)", err


def test_a_closed_terminal_s_sighup_is_one_error_line(tmp_path, fast_device):
    """SIGHUP (the terminal or ssh session closed) to the supervised `litecl bench`: passed
    on to the child, then `error: interrupted (SIGHUP)`, exit 129; it ended with no line
    (a fresh user's report)."""
    import signal
    import subprocess
    import sys
    import time

    from models.builders import chain_model

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["float32", ("add", 1.0), "int8"], [4096]))
    env = {k: v for k, v in os.environ.items() if k != "LITECL_NO_SUPERVISOR"}
    p = subprocess.Popen([sys.executable, "-m", "litecl.cli", "bench", str(m), "--device", fast_device,
                          "--num-runs", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    time.sleep(6)
    p.send_signal(signal.SIGHUP)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 129, (p.returncode, err)
    assert err.strip().splitlines()[-1] == "error: interrupted (SIGHUP)", err


def test_a_killed_child_is_not_reported_as_interrupted(tmp_path, fast_device):
    """The supervised child killed with SIGKILL (as the OOM killer does): one error line
    saying it was killed and by whom it may have been, not "interrupted" (a trial's
    report: nothing had been interrupted), exit 2."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from models.builders import chain_model

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["float32", ("add", 1.0), "int8"], [4096]))
    env = dict(os.environ)
    env.pop("LITECL_NO_SUPERVISOR", None)
    p = subprocess.Popen([sys.executable, "-m", "litecl.cli", "bench", str(m), "--device", fast_device,
                          "--num-runs", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    kids = []
    for _ in range(300):  # the supervised child, forked once the arguments are read
        time.sleep(0.1)
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            break
        if kids:
            break
    if not kids:
        p.kill()
        pytest.skip("the supervised child was not found in /proc")
    time.sleep(2)
    os.kill(kids[0], signal.SIGKILL)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2, (p.returncode, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the child running `litecl bench` was killed (SIGKILL)"), err
    assert "interrupted" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("supervised", [True, False])
def test_bench_writes_its_json_when_the_reader_of_stdout_leaves(tmp_path, fast_device, supervised):
    """`litecl bench MODEL --json F | head -1`: the reader leaves after one line, the
    command runs on and writes F, exit 0 (it stopped at the next print and wrote no F, a
    fresh user's report)."""
    import json
    import os
    import subprocess
    import sys

    from models.builders import chain_model

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["float32", ("add", 1.0), "int8"], [4096]))
    out = tmp_path / "b.json"
    env = dict(os.environ)
    env.pop("LITECL_NO_SUPERVISOR", None)
    if not supervised:
        env["LITECL_NO_SUPERVISOR"] = "1"
    p = subprocess.Popen([sys.executable, "-m", "litecl.cli", "bench", str(m), "--device", fast_device,
                          "--num-runs", "20", "--json", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # the reader leaves at once
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert json.loads(out.read_text())["model"] == str(m)


@pytest.mark.parametrize("supervised", [True, False])
def test_an_inherited_ignored_sigint_stays_ignored(tmp_path, fast_device, supervised):
    """A command started with SIGINT ignored (a shell script's `litecl ... &`: bash ignores
    SIGINT in background jobs so that Ctrl-C on the script leaves them alone): litecl's
    handler turned it back on ~0.4 s in, and a SIGINT then stopped it with exit 130 (a fresh
    user's report). It stays ignored, supervised or not: the command runs to its end."""
    import signal
    import subprocess
    import sys
    import time

    from models.builders import chain_model

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["float32", ("add", 1.0), "int8"], [4096]))
    env = {k: v for k, v in os.environ.items() if k != "LITECL_NO_SUPERVISOR"}
    if not supervised:
        env["LITECL_NO_SUPERVISOR"] = "1"
    p = subprocess.Popen([sys.executable, "-m", "litecl.cli", "bench", str(m), "--device", fast_device,
                          "--num-runs", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    while p.poll() is None:  # SIGINTs all along: at start-up, in the child, while it invokes
        p.send_signal(signal.SIGINT)
        time.sleep(0.1)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "interrupted" not in err, (p.returncode, err)


def test_a_ctrl_c_while_litecl_imports_is_one_error_line(tmp_path):
    """A Ctrl-C in the first ~0.3 s of a command lands while litecl's imports run (numpy,
    pyopencl, LiteRT), before cli.main sets its own handling: it printed a KeyboardInterrupt
    traceback from inside an import (a fresh user's report). Now the one line and 130.
    The interrupt is sent once litecl.errors has been imported (-X importtime says so),
    while the heavier imports after it run."""
    import signal
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "litecl.cli", "devices"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.rstrip().endswith("litecl.errors"):
            p.send_signal(signal.SIGINT)
            break
    rest = p.stderr.read()
    p.wait(timeout=120)
    lines = [ln for ln in (seen + rest.splitlines(True)) if not ln.startswith("import time:")]
    assert any(ln.startswith("import time:") and "litecl.errors" in ln for ln in seen), "".join(seen[-5:])
    assert "Traceback" not in rest and lines == ["error: interrupted (SIGINT)\n"], lines
    assert p.returncode == 130


def test_a_model_path_that_is_not_utf8_works_everywhere(tmp_path, fast_device, capsys):
    """Linux file names may hold any bytes (Python gives them as surrogates): run and compare
    took one, but inspect --html, export and sweep ended in "internal error" (the HTML and
    the report written as UTF-8, LiteRT's binding given the name, plan.c's comment): a
    fresh user's report. Each works; the exported library builds."""
    import shutil
    import subprocess
    import sys

    from litecl.cli import main
    from models.builders import add_model

    name = os.fsdecode(b"bad\xffname.tflite")
    try:
        m = tmp_path / name
        m.write_bytes(add_model("float32", (4,), (4,)))
    except (OSError, UnicodeError):
        pytest.skip("this file system takes no file name that is not UTF-8")
    capsys.readouterr()
    assert main(["inspect", str(m), "--device", fast_device, "--html", str(tmp_path / "p.html")]) == 0
    assert "bad\\udcffname.tflite" in (tmp_path / "p.html").read_text(encoding="utf-8")
    assert main(["export", str(m), "--device", fast_device, "--out", str(tmp_path / "e")]) == 0
    err = capsys.readouterr().err
    assert "internal error" not in err, err
    # sweep forks its jobs: from a process of its own (this one opened the device)
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "sweep", str(m), "--device", fast_device,
                        "--out", str(tmp_path / "s")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    assert "bad\\udcffname.tflite" in (tmp_path / "s" / "report.md").read_text(encoding="utf-8")
    if shutil.which("cc") or shutil.which("gcc"):
        r = subprocess.run(["sh", "build.sh"], cwd=tmp_path / "e", capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
