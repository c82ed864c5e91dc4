"""backend/cache.py: program binaries and probe results kept on disk (fast start), and a
broken cache never costs the device."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from litecl import cache
from litecl.errors import LiteclError

SCRIPT = textwrap.dedent("""
    import time, numpy as np, litecl, litecl.kernels as kn
    from models.builders import cast_model
    m = cast_model("float32", "int8", [33])
    built = []  # programs that came from a cached binary
    real = kn.load_binary
    def counting(ident, source):
        b = real(ident, source)
        built.append(b is not None)
        return b
    kn.load_binary = counting
    it = litecl.Interpreter(model_content=m, device=DEV)
    assert [p["placement"] for p in it.placement()] == ["opencl"]
    it.allocate_tensors()
    x = np.array([1.5, -2.5, 1e10, float("nan")] * 8 + [300], np.float32)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    print(sum(built), it.get_tensor(it.get_output_details()[0]["index"]).tolist())
""")


def _run(dev: str, env: dict) -> tuple[int, list]:
    from conftest import ROOT

    r = subprocess.run([sys.executable, "-c", SCRIPT.replace("DEV", repr(dev))], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                                **env))
    assert r.returncode == 0, r.stderr[-1500:]
    n, out = r.stdout.split(" ", 1)
    return int(n), eval(out), r.stderr


def test_second_process_loads_the_binary(tmp_path, fast_device):
    env = {"LITECL_CACHE_DIR": str(tmp_path / "c")}
    n1, out1, _ = _run(fast_device, env)
    n2, out2, _ = _run(fast_device, env)
    assert out1 == out2 == [1, -2, 127, 127] * 8 + [127]
    assert n1 == 0 and n2 >= 1  # the second process built from the stored binary
    assert any((tmp_path / "c" / "programs").rglob("*.bin"))
    assert any((tmp_path / "c" / "probes").rglob("*.bin"))


def test_corrupted_binary_is_rebuilt(tmp_path, fast_device):
    env = {"LITECL_CACHE_DIR": str(tmp_path / "c")}
    _run(fast_device, env)
    for p in (tmp_path / "c" / "programs").rglob("*.bin"):
        b = p.read_bytes()
        p.write_bytes(b[: len(b) // 2])  # truncated
    n, out, _ = _run(fast_device, env)
    assert out == [1, -2, 127, 127] * 8 + [127]
    assert n == 0  # the damaged entries were not used


_FOREIGN = textwrap.dedent("""
    import sys, numpy as np, litecl, litecl.kernels as kn
    import pyopencl as cl
    from litecl.cache import device_identity, store_binary
    from litecl.lowering import kernel_spec
    from litecl.model import load_model
    from models.builders import add_model, cast_model
    dev = litecl.open_device(sys.argv[1])
    a = load_model(model_content=add_model("float32", [4], [4])).subgraphs[0]
    c = load_model(model_content=cast_model("int32", "float32", [4])).subgraphs[0]
    sa = kernel_spec(a.nodes[0], a, [(4,), (4,)], dev.caps).source
    sc = kernel_spec(c.nodes[0], c, [(4,)], dev.caps).source
    other = cl.Program(dev.context, sc).build().get_info(cl.program_info.BINARIES)[0]
    store_binary(device_identity(dev.device), sa, other)  # the CAST's binary under the ADD's key
    it = litecl.Interpreter(model_content=add_model("float32", [4], [4]), device=sys.argv[1], quiet=True)
    it.allocate_tensors()
    it.set_tensor(0, np.arange(4, dtype=np.float32))
    it.set_tensor(1, np.ones(4, np.float32))
    it.invoke()
    print("RESULT", it.get_tensor(2).tolist(), it.placement()[0]["placement"])
""")


def test_foreign_binary_is_rebuilt(tmp_path, fast_device):
    """A binary that builds but holds another program (PoCL's binaries point into its own
    kernel cache, which can change under them): clCreateKernel failed with
    INVALID_KERNEL_NAME and the model could not run. Now the entry is dropped and the
    program built from source."""
    from conftest import ROOT  # noqa: PLC0415

    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "c"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _FOREIGN, fast_device], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "RESULT [1.0, 2.0, 3.0, 4.0] opencl" in r.stdout, r.stdout


@pytest.mark.parametrize("kind", ["file", "readonly"])
def test_unusable_cache_warns_and_builds(tmp_path, fast_device, kind):
    if kind == "file":
        (tmp_path / "c").write_text("not a folder")
    else:
        (tmp_path / "c").mkdir()
        os.chmod(tmp_path / "c", 0o500)
        if os.access(tmp_path / "c", os.W_OK):  # root ignores the mode bits
            pytest.skip("running as root: a read-only folder is still writable")
    _, out, err = _run(fast_device, {"LITECL_CACHE_DIR": str(tmp_path / "c")})
    assert out == [1, -2, 127, 127] * 8 + [127]
    # a file: said so (it read "cannot use ... (File exists)", a fresh user's report)
    said = f"the cache folder {tmp_path / 'c'} is not a folder" if kind == "file" else "cannot use the cache folder"
    assert said in err and str(tmp_path / "c") in err, err


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o777, 0o1777], ids=["world-writable", "sticky"])
def test_cache_folder_others_can_write_is_not_used_from_the_first_run(tmp_path, fast_device, mode):
    """A LITECL_CACHE_DIR anyone can write (sticky bit or not): every process, the first
    included, warns once naming it and neither reads nor writes it (the first run filled
    it silently; later runs warned that its entries are not used, and stored more)."""
    c = tmp_path / "c"
    c.mkdir()
    os.chmod(c, mode)
    for _ in range(2):
        n, out, err = _run(fast_device, {"LITECL_CACHE_DIR": str(c)})
        assert out == [1, -2, 127, 127] * 8 + [127] and n == 0
        warn = [ln for ln in err.splitlines() if "the cache folder" in ln]
        assert len(warn) == 1 and f"the cache folder {c} is not this user's or others can write it; " \
            "litecl does not use it" in warn[0], err
        assert not any(c.iterdir())


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_unsafe_cache_folder_is_off_for_the_process(tmp_path, monkeypatch):
    """The folder litecl makes is this user's only whatever the umask (with umask 0 it was
    world-writable: written by the first run, refused by the next); a folder that becomes
    writable by others is neither read nor written, with one warning, for the rest of the
    process."""
    import stat  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    root = tmp_path / "c"
    monkeypatch.setenv("LITECL_CACHE_DIR", str(root))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    for name, fresh in (("_warned", set()), ("_REFUSED", set())):
        monkeypatch.setattr(cache, name, fresh, raising=False)
    old = os.umask(0)
    try:
        cache.store_blob("models", "k", b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert cache.load_blob("models", "k") == b"data"
    stored = sorted(root.rglob("*.bin"))
    os.chmod(root, 0o777)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cache.load_blob("models", "k") is None
        cache.store_blob("models", "k2", b"more")
        cache.store_binary("dev", "src", b"binary")
        cache.probe_put("probe", "dev", 1)
        assert cache.probe_get("probe", "dev") is None and cache.cache_root() is None
    assert [str(x.message) for x in w] == [
        f"litecl: the cache folder {root} is not this user's or others can write it; litecl does not "
        "use it (kernels built from source, models checked in full)"]
    assert sorted(root.rglob("*.bin")) == stored
    os.chmod(root, 0o700)
    assert cache.cache_root() is None  # off for the rest of the process


def test_binary_checksum_detects_damage(tmp_path, monkeypatch):
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    cache.store_binary("dev", "src", b"payload-bytes")
    assert cache.load_binary("dev", "src") == b"payload-bytes"
    assert cache.load_binary("dev", "other") is None
    p = next(tmp_path.rglob("*.bin"))
    p.write_bytes(p.read_bytes()[:-1] + b"X")
    assert cache.load_binary("dev", "src") is None and not p.exists()
    monkeypatch.setenv("LITECL_NO_CACHE", "1")
    cache.store_binary("dev", "src", b"x")
    assert cache.load_binary("dev", "src") is None


def test_binary_build_checks_only_the_pocl_entry_it_names(tmp_path, monkeypatch):
    """A build from a PoCL binary checks (and repairs) only the kernel cache entry the
    binary's header names, not the whole cache (fast start); no device needed."""
    import warnings  # noqa: PLC0415

    from litecl import cl_build, device  # noqa: PLC0415

    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cl_build, "_POCL_ENTRY_CHECKED", {})
    monkeypatch.setattr(cl_build, "_POCL_CACHE_CHECKED", {})
    named, other = tmp_path / "AB" / "CDEFGHIJKLMNOP", tmp_path / "CD" / "EFGHIJKLMNOPAB"
    for entry in (named, other):
        (entry / "k" / "0-0-0").mkdir(parents=True)
        (entry / "program.bc").write_bytes(b"junk")
        (entry / "k" / "0-0-0" / "k.so").write_bytes(b"junk")
    binary = b"poclbin\0" + bytes(28) + b"AB/CDEFGHIJKLMNOP\0" + b"rest"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert device.pocl_binary_problem(binary) == ""
    assert not named.exists() and other.exists()
    assert any("held 1 damaged entry" in str(x.message) for x in w)
    assert device.pocl_binary_problem(b"poclbin\0" + bytes(28) + b"AC/ABCDEFGHIJ\0") == ""  # absent
    assert other.exists()
    assert device.pocl_binary_problem(b"not a pocl binary") == ""  # the whole folder is checked
    assert not other.exists()


def test_cache_is_bounded_least_recently_used_first(tmp_path, monkeypatch):
    """Past LITECL_CACHE_MAX_BYTES a store removes the entries used longest ago (a hit
    counts as a use) until three quarters of the bound are left."""
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", str(10 * 1100))
    for i in range(10):  # 10 entries of 1044 bytes: under the bound
        cache.store_blob("models", f"k{i}", bytes([i]) * 1000)
        p = cache._entry("models", "", f"k{i}")
        os.utime(p, ns=(i * 10**9, i * 10**9))  # k0 oldest
    assert len(list(tmp_path.rglob("*.bin"))) == 10
    assert cache.load_blob("models", "k0") == bytes([0]) * 1000  # a hit: now the newest
    cache.store_blob("models", "k10", b"\x0a" * 1000)  # 11 x 1044 > 11,000
    left = {f"k{i}" for i in range(11) if cache.load_blob("models", f"k{i}") is not None}
    total = sum(p.stat().st_size for p in tmp_path.rglob("*.bin"))
    assert total <= 10 * 1100 * 3 // 4
    assert left == {"k0", "k10", "k5", "k6", "k7", "k8", "k9"}  # k1-k4 used longest ago


def test_cache_bound_holds_over_many_stores_and_processes(tmp_path, monkeypatch):
    """A process keeps counting what it stores, and another process's entries are counted
    at its first store."""
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", "5000")
    for process in range(3):
        for i in range(20):
            cache.store_blob("models", f"p{process}-{i}", b"x" * 900)
            assert sum(p.stat().st_size for p in tmp_path.rglob("*.bin")) <= 5000 + 944


def test_a_store_counts_the_cache_only_when_its_ledger_says_so(tmp_path, monkeypatch):
    """Every process's first store walked the whole cache (250 ms at 21,000 entries on the
    2-core VM): a store appends to the root's ledger and the entries are counted again
    only when the ledger is missing, unreadable or too long, or its sum passes the bound."""
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", "100000")
    counts = []
    real = cache._count_and_prune
    monkeypatch.setattr(cache, "_count_and_prune", lambda root, cap: counts.append(1) or real(root, cap))
    for i in range(5):
        cache.store_blob("models", f"k{i}", b"x" * 1000)
    assert len(counts) == 1  # the first store: no ledger yet
    ledger = (tmp_path / cache.LEDGER).read_text().split()
    assert ledger[0] == "=1044" and ledger[1:] == ["+1044"] * 4
    (tmp_path / cache.LEDGER).write_text("=junk\n")
    cache.store_blob("models", "k5", b"x" * 1000)
    assert len(counts) == 2 and (tmp_path / cache.LEDGER).read_text() == f"={6 * 1044}\n"
    monkeypatch.setattr(cache, "LEDGER_LINES", 3)
    for i in range(4):
        cache.store_blob("models", f"m{i}", b"y" * 1000)
    assert len(counts) == 3  # the fourth line past the count
    monkeypatch.setattr(cache, "LEDGER_LINES", 4096)
    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", str(12006))
    cache.store_blob("models", "n", b"z" * 1000)  # 11 entries: under the bound
    assert len(counts) == 3
    cache.store_blob("models", "o", b"z" * 1000)  # 12: past it, the oldest removed
    assert len(counts) == 4 and sum(p.stat().st_size for p in tmp_path.rglob("*.bin")) <= 12006 * 3 // 4


def test_no_cache_values(monkeypatch, tmp_path):
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    for v, off in (("1", True), ("yes", True), (" ON ", True), ("0", False), ("false", False),
                   ("No", False), ("off", False), ("", False), (" ", False)):
        monkeypatch.setenv("LITECL_NO_CACHE", v)
        assert (cache.cache_root() is None) is off, v
    for v in ("maybe", "2"):  # were taken as "on"
        monkeypatch.setenv("LITECL_NO_CACHE", v)
        with pytest.raises(LiteclError, match=f"LITECL_NO_CACHE must be one of 1, 0, true, false, yes, "
                                              f"no, on or off \\(or unset\\), got '{v}'"):
            cache.cache_root()


@pytest.mark.parametrize("name", ["LITECL_QUIET", "LITECL_NO_CACHE", "LITECL_NO_INTEL_ICD",
                                  "LITECL_NO_SUPERVISOR", "LITECL_DEBUG"])
def test_yes_no_variables_read_one_way(monkeypatch, name):
    """Every yes/no LITECL_* variable is read by errors.env_flag: unset or blank is the
    default, 1/true/yes/on and 0/false/no/off in any case, anything else an error naming
    the variable (LITECL_NO_INTEL_ICD=0 and LITECL_NO_SUPERVISOR=0 counted as set, and
    "maybe" was accepted by all five)."""
    from litecl.errors import env_flag  # noqa: PLC0415

    monkeypatch.delenv(name, raising=False)
    assert env_flag(name) is False and env_flag(name, True) is True
    for v, want in (("", None), ("  ", None), ("1", True), ("TRUE", True), (" yes\n", True), ("On", True),
                    ("0", False), ("false", False), ("NO", False), ("off ", False)):
        monkeypatch.setenv(name, v)
        assert env_flag(name, True) is (True if want is None else want), v
    for v in ("maybe", "2", "-1", "y", "nope", "1 0"):
        monkeypatch.setenv(name, v)
        with pytest.raises(LiteclError) as e:
            env_flag(name)
        assert str(e.value) == f"{name} must be one of 1, 0, true, false, yes, no, on or off (or unset), got {v!r}"


def test_cache_bound_refuses_nonsense(monkeypatch):
    import litecl  # noqa: PLC0415
    from models.builders import add_model  # noqa: PLC0415

    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", "")
    assert cache.max_bytes() == cache.DEFAULT_MAX_BYTES
    monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", "12345")
    assert cache.max_bytes() == 12345
    for v in ("abc", "0", "-5", "1.5"):
        monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", v)
        with pytest.raises(litecl.LiteclError, match="LITECL_CACHE_MAX_BYTES must be a positive"):
            litecl.Interpreter(model_content=add_model("float32", [2], [2]), device="pocl")


def test_cli_prints_a_cache_warning_on_one_line(tmp_path, fast_device):
    from conftest import ROOT  # noqa: PLC0415
    from models.builders import cast_model  # noqa: PLC0415

    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int8", [33]))
    (tmp_path / "c").write_text("not a folder")
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "c"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(m), "--device", fast_device],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    warn = [ln for ln in lines if "the cache folder" in ln]
    assert warn and all(ln.startswith("warning: ") for ln in warn), r.stderr
    assert not any(".py:" in ln or "_store(" in ln for ln in lines), r.stderr


def test_memory_policy_is_kept_on_disk_per_device(tmp_path, monkeypatch, fast_device):
    """The in-place measurement (memory.py _measure_memory: builds a kernel and runs six)
    is kept as a device probe: the next process reads it; a damaged record is measured
    again; under LITECL_NO_CACHE it is measured every time."""
    import litecl
    import litecl.memory as mm

    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    dev = litecl.open_device(fast_device)
    if dev.caps.is_gpu:  # a GPU always copies (memory.py): nothing to measure there
        from conftest import any_cpu_device  # noqa: PLC0415

        dev = litecl.open_device(any_cpu_device())
    measured = []
    real = mm._measure_memory
    monkeypatch.setattr(mm, "_measure_memory", lambda *a, **k: (measured.append(1), real(*a, **k))[1])
    first = mm._remembered_memory(dev)
    second = mm._remembered_memory(dev)
    assert len(measured) == 1 and (second.in_place, second.align) == (first.in_place, first.align)
    ident = cache.device_identity(dev.device)
    cache.probe_put(mm._PROBE, ident, [True, 3])  # not an alignment litecl measures
    third = mm._remembered_memory(dev)
    assert len(measured) == 2 and (third.in_place, third.align) == (first.in_place, first.align)
    monkeypatch.setenv("LITECL_NO_CACHE", "1")
    mm._remembered_memory(dev)
    assert len(measured) == 3


def test_a_bad_cache_bound_is_refused_by_the_delegate_too(fast_device, monkeypatch):
    """LITECL_CACHE_MAX_BYTES of no positive integer: litecl.Delegate refuses it at
    construction, as litecl.Interpreter and the CLI do (it was accepted silently: a fresh user)."""
    import litecl

    for bad in ("abc", "0", "-5"):
        monkeypatch.setenv("LITECL_CACHE_MAX_BYTES", bad)
        with pytest.raises(litecl.LiteclError, match="LITECL_CACHE_MAX_BYTES must be a positive integer"):
            litecl.Delegate(fast_device, quiet=True)


class _AppTimeout(Exception):
    """An app's own exception, raised by its signal handler."""


def _app_signal_handler(*args, **kwargs):
    """Stands for an app's signal handler (this file's code) running inside pyopencl's
    cache code and raising."""
    raise _AppTimeout("the app's deadline")


def test_a_signal_handlers_exception_inside_pyopencls_cache_is_the_apps(monkeypatch, fast_device):
    """pyopencl's cache code turns any Exception into KeyError('PYOPENCL_CACHE_FAILURE_FATAL'):
    one an app's signal handler raised there (a fresh user's SIGALRM timer) reached litecl
    as a broken cache, was warned of and dropped, and the cache went off for the process.
    It is raised as the app's own; a failure inside pyopencl's code is still the cache's
    (a warning, the program built without it)."""
    import warnings  # noqa: PLC0415

    import pyopencl as cl  # noqa: PLC0415
    import pyopencl.cache as pc  # noqa: PLC0415

    import litecl  # noqa: PLC0415
    from litecl import cl_build  # noqa: PLC0415

    from pyopencl.characterize import has_src_build_cache  # noqa: PLC0415

    from conftest import DEVICE_STATUS  # noqa: PLC0415

    if cl_build._pyopencl_cache_problem() is not None or os.environ.get("PYOPENCL_NO_CACHE"):
        pytest.skip("pyopencl's cache is off here")
    # a device whose source builds go through pyopencl's cache (PoCL's do not: pyopencl
    # leaves them to PoCL's own kernel cache)
    specs = [s for s in dict.fromkeys([fast_device, "intel", "oclgrind", "pocl"]) if not DEVICE_STATUS.get(s)]
    dev = next((d for d in map(litecl.open_device, specs) if not has_src_build_cache(d.device)), None)
    if dev is None:
        pytest.skip(f"pyopencl leaves every device's source builds here to its own cache ({', '.join(specs)})")
    monkeypatch.setattr(cl_build, "_PYOPENCL_CACHE_BROKEN", [])
    ctx = dev.context
    src = "__kernel void k(__global int* a) { a[get_global_id(0)] = %d; }"
    monkeypatch.setattr(pc, "_create_built_program_from_source_cached", _app_signal_handler)
    with pytest.raises(_AppTimeout, match="the app's deadline"):
        cl_build.build_source(ctx, src % 1)
    assert not cl_build._PYOPENCL_CACHE_BROKEN
    ns: dict = {}  # a failure of pyopencl's own code (its file): the cache's
    exec(compile("def fail(*a, **k):\n    raise OSError(28, 'No space left on device')\n", pc.__file__, "exec"), ns)
    monkeypatch.setattr(pc, "_create_built_program_from_source_cached", ns["fail"])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        prg = cl_build.build_source(ctx, src % 2)
    assert isinstance(prg, cl.Program) and cl_build._PYOPENCL_CACHE_BROKEN
