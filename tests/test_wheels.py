"""litecl's platform wheels (.ci/wheels): manylinux x86_64 and aarch64, each holding the C
runtime built for its architecture (setup.py), needing only libc (and its loader), and the one for this
machine loading with the digest of the sources it ships."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

EM = {"x86_64": 62, "aarch64": 183}  # ELF e_machine


def _needed(elf: bytes, tmp_path) -> list[str]:
    """The ELF's DT_NEEDED libraries (readelf -d)."""
    if shutil.which("readelf") is None:
        pytest.skip("no readelf (binutils)")
    path = tmp_path / "lib.so"
    path.write_bytes(elf)
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheels")
    r = subprocess.run([str(ROOT / ".ci" / "wheels"), str(out)], capture_output=True, text=True, timeout=900,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return {w.name.split("-")[-1].removesuffix(".whl").split("_", 3)[-1]: w for w in out.glob("*.whl")}


def test_a_manylinux_wheel_per_architecture(wheels, tmp_path):
    want = {"x86_64"} | ({"aarch64"} if shutil.which("aarch64-linux-gnu-gcc") else set())
    assert set(wheels) == want, wheels
    for arch, w in wheels.items():
        assert w.name.startswith("litecl-") and "-py3-none-manylinux_2_" in w.name, w.name
        with zipfile.ZipFile(w) as z:
            libs = [n for n in z.namelist() if n.startswith("litecl/native/liblitecl_runtime")]
            assert libs == [f"litecl/native/liblitecl_runtime-{arch}.so"], libs
            elf = z.read(libs[0])
            assert "litecl/native/litecl_delegate.c" in z.namelist()
        assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == EM[arch]
        needed = _needed(elf, tmp_path)
        assert needed and all(n.startswith(("libc.so", "libdl.so", "ld-linux")) for n in needed), needed


def test_this_machines_wheel_loads_what_it_ships(wheels, tmp_path):
    import platform  # noqa: PLC0415

    w = wheels[platform.machine()]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
                    str(tmp_path), str(w)], check=True, timeout=300, capture_output=True)
    native = tmp_path / "litecl" / "native"
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("wheel_build", native / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    lib = ctypes.CDLL(str(native / build.library(platform.machine())))
    lib.lcl_runtime_digest.restype = ctypes.c_char_p
    assert lib.lcl_runtime_digest().decode() == build.digest(str(native))
