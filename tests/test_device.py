"""Tests for backend/device.py: the Intel ICD wiring (which must keep every vendor the
loader would otherwise read and hold no state between runs), duplicate platforms, and
device spec parsing.

The wiring runs when litecl is imported, so those tests run ``python -c "import litecl"``
in a subprocess with a controlled environment: OCL_ICD_VENDORS / OPENCL_VENDOR_PATH
unset or pointing at temporary folders, LITECL_ICD_SYSTEM_VENDORS standing for
/etc/OpenCL/vendors, and TMPDIR a private folder so the ICD folders land there. No test
needs a system driver: the .icd files of fake vendors name libraries that do not exist,
which the loader skips.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import litecl
from litecl import device as D
from conftest import script_json

INTEL_LIB = Path(sys.prefix) / "lib" / "libintelocl.so"
needs_intel_lib = pytest.mark.skipif(not INTEL_LIB.exists(), reason=f"{INTEL_LIB} absent (intel-opencl-rt)")

_SCRIPT = """
import json, os, sys
import litecl
out = {"vendors": os.environ.get("OCL_ICD_VENDORS")}
v = out["vendors"]
if v and os.path.isdir(v):
    out["files"] = {f: open(os.path.join(v, f)).read() for f in sorted(os.listdir(v))}
if "--list" in sys.argv:
    out["devices"] = [[c.platform, c.name] for c in litecl.list_devices()]
print(json.dumps(out))
"""


@pytest.fixture
def env(tmp_path):
    """A clean environment: no vendor variables, an empty fake system vendors folder,
    a private TMPDIR."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH", "LITECL_NO_INTEL_ICD", "LITECL_DEVICE")}
    (tmp_path / "etc").mkdir()
    (tmp_path / "tmp").mkdir()
    e["LITECL_ICD_SYSTEM_VENDORS"] = str(tmp_path / "etc")
    e["TMPDIR"] = str(tmp_path / "tmp")
    return e


def wired(env, *args) -> dict:
    return script_json(_SCRIPT, env, *args)


def intel_line() -> str:
    return f"{INTEL_LIB}\n"


@needs_intel_lib
def test_system_vendors_are_kept(env, tmp_path):
    # /etc/OpenCL/vendors stands for where NVIDIA, Mali, Adreno or AMD drivers register
    etc = tmp_path / "etc"
    (etc / "nvidia.icd").write_text("libnvidia-opencl-fake.so.1\n")
    (etc / "mali.icd").write_text("/nonexistent/libmali-fake.so\n")
    (etc / "README").write_text("not an icd\n")
    out = wired(env)
    folder = Path(out["vendors"])
    assert folder.parent == tmp_path / "tmp"
    assert re.fullmatch(rf"litecl-icd-{os.getuid()}-[0-9a-f]{{12}}", folder.name)
    assert out["files"] == {"litecl-intel.icd": intel_line(),
                            "mali.icd": "/nonexistent/libmali-fake.so\n",
                            "nvidia.icd": "libnvidia-opencl-fake.so.1\n"}


@needs_intel_lib
def test_opencl_vendor_path_is_the_default_folder_when_set(env, tmp_path):
    other = tmp_path / "vendor_path"
    other.mkdir()
    (other / "amd.icd").write_text("libamdocl-fake.so\n")
    (tmp_path / "etc" / "nvidia.icd").write_text("libnvidia-opencl-fake.so.1\n")
    out = wired(dict(env, OPENCL_VENDOR_PATH=str(other)))
    assert set(out["files"]) == {"litecl-intel.icd", "amd.icd"}


@needs_intel_lib
def test_user_vendors_folder_is_kept_not_the_system_one(env, tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "a.icd").write_text("/opt/a/liba-fake.so\n")
    (user / "b.icd").write_text("libb-fake.so\n")
    (user / "notes.txt").write_text("ignored by the loader\n")
    (user / "intel.icd").write_text(intel_line())  # the same library as ours: not twice
    (tmp_path / "etc" / "nvidia.icd").write_text("libnvidia-opencl-fake.so.1\n")
    out = wired(dict(env, OCL_ICD_VENDORS=str(user)))
    assert out["files"] == {"litecl-intel.icd": intel_line(), "a.icd": "/opt/a/liba-fake.so\n",
                            "b.icd": "libb-fake.so\n"}
    assert sorted(os.listdir(user)) == ["a.icd", "b.icd", "intel.icd", "notes.txt"]  # untouched


@needs_intel_lib
def test_user_vendors_single_icd_file_is_kept(env, tmp_path):
    f = tmp_path / "only" / "mali.icd"
    f.parent.mkdir()
    f.write_text("/vendor/lib64/libmali-fake.so\n")
    (tmp_path / "etc" / "nvidia.icd").write_text("libnvidia-opencl-fake.so.1\n")
    out = wired(dict(env, OCL_ICD_VENDORS=str(f)))
    assert out["files"] == {"litecl-intel.icd": intel_line(), "mali.icd": "/vendor/lib64/libmali-fake.so\n"}
    # a bare .icd name is looked up in the vendors folder first, as ocl-icd does
    (tmp_path / "etc" / "adreno.icd").write_text("libadreno-fake.so\n")
    out = wired(dict(env, OCL_ICD_VENDORS="adreno.icd"))
    assert out["files"] == {"litecl-intel.icd": intel_line(), "adreno.icd": "libadreno-fake.so\n"}


@needs_intel_lib
def test_user_vendors_library_name_is_kept(env):
    # ocl-icd dlopens a value that is neither a folder nor an .icd file
    out = wired(dict(env, OCL_ICD_VENDORS="libnvidia-opencl-fake.so.1"))
    assert out["files"] == {"litecl-intel.icd": intel_line(),
                            "user-libnvidia-opencl-fake.so.1.icd": "libnvidia-opencl-fake.so.1\n"}


@needs_intel_lib
def test_pyopencl_bundled_icds_are_not_copied(env, tmp_path):
    # pyopencl's loader finds its PoCL and Oclgrind itself (PYOPENCL_HOME)
    bundled = sorted(Path(D.cl.__file__).parent.joinpath(".libs").glob("*.icd"))
    if not bundled:
        pytest.skip("this pyopencl ships no ICD")
    for f in bundled:
        (tmp_path / "etc" / f.name).write_bytes(f.read_bytes())
    (tmp_path / "etc" / "nvidia.icd").write_text("libnvidia-opencl-fake.so.1\n")
    out = wired(env)
    assert set(out["files"]) == {"litecl-intel.icd", "nvidia.icd"}


@needs_intel_lib
def test_folder_holds_no_state_between_runs(env, tmp_path):
    etc = tmp_path / "etc"
    (etc / "x.icd").write_text("libx-fake.so\n")
    first = wired(env)
    folder = Path(first["vendors"])
    # strays: a vendor copied by an older run, a second Intel entry written by a test
    (folder / "old.icd").write_text("libold-fake.so\n")
    (folder / "intel.icd").write_text(intel_line())
    (folder / "litecl-intel.icd").write_text("/some/other/venv/lib/libintelocl.so\n")
    again = wired(env)
    assert again["vendors"] == first["vendors"]
    assert again["files"] == first["files"] == {"litecl-intel.icd": intel_line(), "x.icd": "libx-fake.so\n"}
    # another set of vendors gets another folder; the first one is not reused
    (etc / "x.icd").unlink()
    other = wired(env)
    assert other["vendors"] != first["vendors"]
    assert other["files"] == {"litecl-intel.icd": intel_line()}
    # no temporary folders left behind
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == sorted(
        {Path(first["vendors"]).name, Path(other["vendors"]).name})


@needs_intel_lib
def test_child_process_inherits_the_same_folder(env, tmp_path):
    (tmp_path / "etc" / "x.icd").write_text("libx-fake.so\n")
    parent = wired(env)
    child = wired(dict(env, OCL_ICD_VENDORS=parent["vendors"]))
    assert child["vendors"] == parent["vendors"] and child["files"] == parent["files"]


@needs_intel_lib
def test_concurrent_imports_agree(env, tmp_path):
    (tmp_path / "etc" / "x.icd").write_text("libx-fake.so\n")
    procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = []
    for p in procs:
        so, se = p.communicate(timeout=300)
        assert p.returncode == 0, se[-3000:]
        outs.append(json.loads(so.strip().splitlines()[-1]))
    assert len({o["vendors"] for o in outs}) == 1
    assert all(o["files"] == {"litecl-intel.icd": intel_line(), "x.icd": "libx-fake.so\n"} for o in outs)
    assert len(list((tmp_path / "tmp").iterdir())) == 1


@needs_intel_lib
def test_foreign_folder_under_our_name_is_not_used(env, tmp_path):
    files = {"litecl-intel.icd": intel_line().encode()}
    planted = tmp_path / "tmp" / D._icd_folder_name(files)
    planted.mkdir()
    planted.chmod(0o777)  # writable by anyone: not trusted
    out = wired(env)
    assert out["vendors"] != str(planted)
    assert out["files"] == {"litecl-intel.icd": intel_line()}


def test_no_intel_icd_leaves_the_loader_alone(env, tmp_path):
    out = wired(dict(env, LITECL_NO_INTEL_ICD="1"))
    assert out["vendors"] is None
    out = wired(dict(env, LITECL_NO_INTEL_ICD="1", OCL_ICD_VENDORS=str(tmp_path / "etc")))
    assert out["vendors"] == str(tmp_path / "etc")
    assert not list((tmp_path / "tmp").iterdir())


def test_no_intel_icd_is_a_yes_no_variable(monkeypatch, tmp_path):
    """LITECL_NO_INTEL_ICD=0 (or off, or blank) wires the Intel runtime as when it is
    unset (any non-empty value left the loader alone); a value that is no yes/no word
    leaves the import working and makes listing or opening a device an error naming it.
    In-process, with a stand-in library: no Intel runtime needed."""
    import tempfile  # noqa: PLC0415

    lib = tmp_path / "libintelocl.so"
    lib.write_bytes(b"")
    (tmp_path / "etc").mkdir()
    from litecl import icd  # noqa: PLC0415

    monkeypatch.setattr(icd, "_intel_lib", lambda: lib)
    monkeypatch.setattr(icd, "_ENV_ERROR", [])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("LITECL_ICD_SYSTEM_VENDORS", str(tmp_path / "etc"))
    monkeypatch.delenv("OPENCL_VENDOR_PATH", raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", "")  # put back (or removed) after the test
    for v, wires in (("0", True), ("off", True), (" ", True), ("1", False), (" Yes ", False)):
        monkeypatch.setenv("LITECL_NO_INTEL_ICD", v)
        monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
        D._wire_intel_icd()
        assert ("OCL_ICD_VENDORS" in os.environ) is wires, v
    monkeypatch.setenv("LITECL_NO_INTEL_ICD", "maybe")
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    D._wire_intel_icd()  # at import: no error there
    assert "OCL_ICD_VENDORS" not in os.environ
    for call in (D.list_devices, lambda: D.open_device("a spec never opened")):
        with pytest.raises(litecl.LiteclError, match="LITECL_NO_INTEL_ICD must be one of 1, 0, true, "
                                                     "false, yes, no, on or off .or unset., got 'maybe'"):
            call()


def test_folder_name_is_a_hash_of_the_content():
    a = {"litecl-intel.icd": b"/venv-a/lib/libintelocl.so\n"}
    b = {"litecl-intel.icd": b"/venv-b/lib/libintelocl.so\n"}
    assert D._icd_folder_name(a) != D._icd_folder_name(b)  # two virtualenvs never share one
    assert D._icd_folder_name(a) == D._icd_folder_name(dict(a))
    assert D._icd_folder_name({**a, "x.icd": b"x\n"}) != D._icd_folder_name(a)


def test_materialize_syncs(tmp_path):
    files = {"litecl-intel.icd": b"/v/lib/libintelocl.so\n", "x.icd": b"libx.so\n"}
    f = D._materialize_icd_folder(files, base=tmp_path)
    (f / "stray.icd").write_text("libstray.so\n")
    (f / "x.icd").write_text("changed\n")
    assert D._materialize_icd_folder(files, base=tmp_path) == f
    assert {p.name: p.read_bytes() for p in f.iterdir()} == files
    assert [p.name for p in tmp_path.iterdir()] == [f.name]


def test_a_new_folder_prunes_stale_ones(tmp_path):
    """Each environment leaves a folder keyed by its content (a fresh user counted 31 in
    /tmp): making a new one removes this user's folders whose Intel runtime is gone and
    that nobody touched for an hour; one whose library exists, a recent one and a
    stranger's name are kept."""
    import time  # noqa: PLC0415

    lib = tmp_path / "libintelocl.so"
    lib.write_bytes(b"")
    from litecl import icd  # noqa: PLC0415

    old = time.time() - 2 * icd.STALE_AFTER_S

    def folder(target: str, age: float | None) -> Path:
        f = D._materialize_icd_folder({"litecl-intel.icd": target.encode() + b"\n"}, base=tmp_path)
        if age is not None:
            os.utime(f, (age, age))
        return f

    gone = folder("/nonexistent/venv/libintelocl.so", old)
    alive = folder(str(lib), old)
    recent = folder("/nonexistent/other/libintelocl.so", None)
    other = tmp_path / "litecl-icd-not-ours"
    other.mkdir()
    new = folder("/nonexistent/new/libintelocl.so", None)  # made now: prunes
    left = {p.name for p in tmp_path.iterdir()}
    assert gone.name not in left
    assert {alive.name, recent.name, other.name, new.name, lib.name} <= left
    assert D._materialize_icd_folder({"litecl-intel.icd": b"/nonexistent/new/libintelocl.so\n"},
                                     base=tmp_path) == new  # an existing folder: nothing pruned


# --- duplicate platforms ---------------------------------------------------------------

@needs_intel_lib
def test_intel_listed_once_even_when_registered_twice(env, tmp_path):
    # two .icd files naming one library by different paths: the loader lists it twice
    user = tmp_path / "user"
    user.mkdir()
    (user / "intel-again.icd").write_text(f"{INTEL_LIB.parent}/../lib/{INTEL_LIB.name}\n")
    out = wired(dict(env, OCL_ICD_VENDORS=str(user)), "--list")
    assert len(out["files"]) == 2
    intel = [d for d in out["devices"] if d[0] == "Intel(R) OpenCL"]
    assert len(intel) == 1, out["devices"]


class _FakeDevice:
    def __init__(self, name, driver="1.0"):
        self.name, self.driver_version = name, driver


class _FakePlatform:
    def __init__(self, name, devices):
        self.name, self._devices = name, devices

    def get_devices(self):
        return self._devices


def test_all_devices_dedupes_platforms_not_identical_devices(monkeypatch):
    gpu0, gpu1 = _FakeDevice("H200"), _FakeDevice("H200")
    twice = [_FakePlatform("NVIDIA CUDA", [gpu0, gpu1]),
             _FakePlatform("NVIDIA CUDA", [_FakeDevice("H200"), _FakeDevice("H200")]),
             _FakePlatform("Intel(R) OpenCL", [_FakeDevice("CPU", "2026")]),
             _FakePlatform("Intel(R) OpenCL", [_FakeDevice("CPU", "2026")]),
             _FakePlatform("Intel(R) OpenCL", [_FakeDevice("CPU", "2027")])]
    monkeypatch.setattr(D.cl, "get_platforms", lambda: twice)
    got = D._all_devices()
    assert got[:2] == [gpu0, gpu1]  # two GPUs of a kind in one platform are both kept
    assert [(d.name, d.driver_version) for d in got] == [("H200", "1.0"), ("H200", "1.0"),
                                                         ("CPU", "2026"), ("CPU", "2027")]


# --- specs -----------------------------------------------------------------------------

@pytest.mark.parametrize("spec,kind", [(3, "int"), (["intel"], "list"), (b"intel", "bytes")])
def test_open_device_rejects_non_strings(spec, kind):
    msg = f"device must be a spec string or a litecl Device, got {kind}$"
    with pytest.raises(litecl.DeviceError, match=msg):
        litecl.open_device(spec)


def test_empty_profile_is_rejected():
    with pytest.raises(litecl.DeviceError, match="empty profile.*known: mobile, .*noint64"):
        D.parse_spec("intel:profile=")


def test_profiles_combine_with_plus():
    assert D.parse_spec("intel:profile=mobile+noint64") == ("intel", "mobile+noint64")
    assert D.parse_spec(" pocl : profile = mobile + strict ") == ("pocl", "mobile+strict")
    assert D.profile_overrides("mobile+noint64") == {"fp16": False, "fp64": False, "int64": False,
                                                     "strict_compiler": True}
    assert D.profile_overrides("nofp16+nofp64") == {"fp16": False, "fp64": False}
    with pytest.raises(litecl.DeviceError, match="unknown profile 'nope'.*known: mobile"):
        D.parse_spec("intel:profile=mobile+nope")
    with pytest.raises(litecl.DeviceError, match="empty profile name"):
        D.parse_spec("intel:profile=mobile+")


def test_comma_form_suggests_plus():
    with pytest.raises(litecl.DeviceError, match=r"combine with '\+', e\.g\. profile=mobile\+noint64"):
        D.parse_spec("intel:profile=mobile,noint64")
    with pytest.raises(litecl.DeviceError, match=r"profile given twice.*profile=mobile\+nofp16"):
        D.parse_spec("intel:profile=mobile,profile=nofp16")
    with pytest.raises(litecl.DeviceError, match="bad device option 'foo=bar'"):
        D.parse_spec("intel:foo=bar")


def test_litecl_device_env_is_named_in_errors(monkeypatch):
    monkeypatch.setenv("LITECL_DEVICE", "intel:profile=")
    with pytest.raises(litecl.DeviceError, match="from LITECL_DEVICE"):
        D.parse_spec(None)


def test_combined_profile_on_a_device(fast_device):
    d = litecl.open_device(fast_device + ":profile=mobile+noint64")
    assert d.caps.profile == "mobile+noint64"
    assert not d.caps.fp16 and not d.caps.fp64 and not d.caps.int64 and d.caps.strict_compiler
    real = litecl.open_device(fast_device).caps
    d2 = litecl.open_device(fast_device + ":profile=nofp16+strict")
    assert not d2.caps.fp16 and d2.caps.fp64 == real.fp64 and d2.caps.int64 == real.int64
    assert d2.caps.strict_compiler


def test_docstring_documents_auto_and_env_vars():
    doc = D.__doc__
    assert "else PoCL)" not in doc
    for word in ("LITECL_DEVICE", "LITECL_NO_INTEL_ICD", "LITECL_ICD_SYSTEM_VENDORS", "Oclgrind"):
        assert word in doc
