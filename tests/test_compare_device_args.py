"""Argument checks of litecl.compare (mismatches needs equal shapes and dtypes; diff_report
reports a difference instead) and of device specs (an empty name is an error, a substring
matching devices of several platforms is ambiguous)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # models/ (builders) is not an installed package
    sys.path.insert(0, str(ROOT))

import litecl  # noqa: E402
from litecl import device as D  # noqa: E402
from litecl.compare import bit_equal, diff_report, mismatches  # noqa: E402
from litecl.errors import DeviceError, InputError  # noqa: E402
from models.builders import add_model  # noqa: E402

from conftest import DEVICE_STATUS, any_fast_device  # noqa: E402

# --- compare ---------------------------------------------------------------------------

_UNEQUAL = [
    (np.zeros(3, np.float32), np.zeros(1, np.float32)),  # would broadcast
    (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),  # same size
    (np.zeros((), np.float32), np.zeros(1, np.float32)),  # 0-d vs 1-d
    (np.int8([-1]), np.uint8([255])),  # same bytes
    (np.float32([1.0]), np.int32([1])),
    (np.float32([1.0]), np.float64([1.0])),
    (np.bool_([True]), np.uint8([1])),
    (np.float16([1.0]), np.int16([15360])),  # same bytes
]


@pytest.mark.parametrize("a,b", _UNEQUAL, ids=lambda v: f"{v.dtype}{list(v.shape)}")
def test_mismatches_rejects_other_shapes_and_dtypes(a, b):
    for x, y in ((a, b), (b, a)):
        with pytest.raises(InputError) as e:
            mismatches(x, y)
        msg = str(e.value)
        assert isinstance(e.value, ValueError) and "\n" not in msg
        assert f"dtype {x.dtype} shape {list(x.shape)}" in msg
        assert f"dtype {y.dtype} shape {list(y.shape)}" in msg
        assert not bit_equal(x, y)  # bit_equal answers False, never raises
        rep = diff_report("out", x, y)  # diff_report reports it as a difference
        assert rep["bit_exact"] is False and rep["max_abs_diff"] is None
        assert rep["mismatched"] == y.size
        assert (rep["litecl_dtype"], rep["litecl_shape"]) == (str(x.dtype), list(x.shape))
        assert (rep["dtype"], rep["shape"]) == (str(y.dtype), list(y.shape))


def test_mismatches_mask_has_the_element_shape():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = a.copy()
    b[1, 2] = 0.0
    m = mismatches(a, b)
    assert m.shape == (2, 3) and m.tolist() == [[False] * 3, [False, False, True]]
    assert mismatches(np.float32(np.nan), np.float32(np.nan)).shape == ()
    assert diff_report("0d", np.float32(1.0), np.float32(2.0))["max_abs_diff"] == 1.0  # 0-d: one chunk
    assert not mismatches(np.float32(np.nan), np.uint32(0x7FC00001).view(np.float32)[()])
    assert mismatches(np.float32(np.nan), -np.float32(np.nan))
    assert mismatches(np.zeros((2, 0)), np.zeros((2, 0))).shape == (2, 0)
    # lists and scalars are taken as arrays
    assert mismatches([1.0, 2.0], [1.0, 3.0]).tolist() == [False, True]


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_complex_mask_is_per_element(dt):
    got = np.array([[1 + 1j, 2], [3j, np.nan]], dt)
    want = np.array([[1 + 1j, 2 + 1j], [3j, np.nan]], dt)
    m = mismatches(got, want)
    assert m.shape == (2, 2) and m.tolist() == [[False, True], [False, False]]
    rep = diff_report("c", got, want)  # used to raise IndexError (mask twice too long)
    assert rep["bit_exact"] is False and rep["mismatched"] == 1 and rep["max_abs_diff"] == 1.0


def test_diff_report_equal_and_different():
    a = np.array([1.0, -0.0, np.nan], np.float32)
    assert diff_report("x", a, a.copy())["bit_exact"] is True
    b = np.array([1.5, 0.0, np.nan], np.float32)
    rep = diff_report("x", a, b)
    assert rep["bit_exact"] is False and rep["mismatched"] == 2 and rep["max_abs_diff"] == 0.5
    s = np.array([b"a", b"b"], object)  # strings: compared, no numeric difference
    rep = diff_report("s", s, np.array([b"a", b"c"], object))
    assert rep["bit_exact"] is False and rep["mismatched"] == 1 and rep["max_abs_diff"] is None


def test_bit_equal_docstring_matches_behaviour():
    doc = bit_equal.__doc__
    assert "any NaN equals any NaN)" not in doc and "same sign" in doc
    x = np.float32([np.nan])
    assert bit_equal(x, np.uint32([0x7FC00001]).view(np.float32))  # payload ignored
    assert not bit_equal(x, -x)  # sign not


def _whole(got, want):
    """The mismatch count, max_abs_diff and NaN counts of one whole-array pass (the rule
    diff_report keeps when it walks chunks)."""
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    g, w = got.reshape(-1), want.reshape(-1)
    both = np.isnan(g) & np.isnan(w)
    m = (g.view(u) != w.view(u)) & ~(both & (np.signbit(g) == np.signbit(w)))
    d = np.abs(g[m].astype(np.float64) - w[m].astype(np.float64))
    mad = 0.0 if not m.any() else float(np.nanmax(d)) if (~np.isnan(d)).any() else float("nan")
    return int(m.sum()), mad, int((both & ~m & (g.view(u) != w.view(u))).sum()), int((both & m).sum())


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_chunked_compare_equals_one_pass(monkeypatch, dt):
    """diff_report, mismatches and bit_equal walk CHUNK elements at a time (a 1 GiB output
    compared at once held ~1.5 GiB of masks: a fresh user's report): the same answers as
    one pass, with mismatches, NaNs of both signs and payloads on both sides of a chunk's
    edge, and a chunk whose mismatches are all NaN against a number."""
    from litecl import compare as C  # noqa: PLC0415

    monkeypatch.setattr(C, "CHUNK", 7)
    rng = np.random.default_rng(1)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize]
    want = rng.standard_normal(45).astype(dt)
    want[[3, 6, 7, 20]] = np.nan
    got = want.copy()
    got[6] = -got[6]  # NaN of the other sign, at a chunk's last element
    gv = got.view(u)
    gv[7] ^= 1  # a payload at the next chunk's first
    got[13], got[14] = np.nan, np.inf  # NaN against a number; inf: max_abs_diff inf
    got[40] += dt(1)
    for g, w in ((got, want), (want, got), (got.reshape(5, 9), want.reshape(5, 9))):
        n, mad, payloads, signs = _whole(g, w)
        rep = diff_report("o", g, w)
        assert (rep["mismatched"], rep["nan_payloads"], rep["nan_signs"]) == (n, payloads, signs)
        assert rep["max_abs_diff"] == mad
        assert int(mismatches(g, w).sum()) == n and mismatches(g, w).shape == g.shape
        assert bit_equal(g, w) is False and bit_equal(g, g.copy()) is True
    only_nan = want.copy()
    only_nan[0] = np.nan  # the one mismatch is NaN against a number: max_abs_diff NaN
    assert np.isnan(diff_report("o", only_nan, want)["max_abs_diff"])
    c = (want[:44].astype(np.float64).view(np.complex128) if dt is np.float64 else
         want[:44].astype(np.float32).view(np.complex64))
    c2 = c.copy()
    c2[-1] += 1j
    assert diff_report("c", c2, c)["mismatched"] == 1 and int(mismatches(c2, c).sum()) == 1


# --- device specs ----------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["", " ", ":", " : ", ":profile=mobile", " :profile=nofp16"])
def test_empty_device_name_is_an_error(spec):
    for call in (D.parse_spec, litecl.open_device):
        with pytest.raises(DeviceError, match=r"^empty device spec .*use auto, gpu, cpu, pocl, intel, "
                                              r"oclgrind, nvidia, rusticl or a platform/device name"):
            call(spec)
    if "profile=" in spec:
        with pytest.raises(DeviceError, match=r"e\.g\. auto:profile="):
            D.parse_spec(spec)


@pytest.mark.parametrize("spec", ["intel:", "intel: ", "intel:profile=mobile,", "pocl:,profile=mobile"])
def test_an_empty_device_option_is_an_error(spec):
    """An empty option after the ':' (it was taken as no option, while an empty profile
    was refused: a fresh user's report)."""
    with pytest.raises(DeviceError, match=r"^empty device option in .*; expected NAME:profile=PROFILE, or the "
                                          r"name alone \('(intel|pocl)'\)$"):
        D.parse_spec(spec)


def test_select_rejects_an_empty_name():
    with pytest.raises(DeviceError, match="empty device spec"):
        D._select(" ")


@pytest.mark.parametrize("value", [None, "", "   "])
def test_unset_or_blank_litecl_device_means_auto(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("LITECL_DEVICE", raising=False)
    else:
        monkeypatch.setenv("LITECL_DEVICE", value)
    assert D.parse_spec(None) == ("auto", "")


def test_litecl_device_env_spec_is_checked(monkeypatch):
    monkeypatch.setenv("LITECL_DEVICE", ":profile=mobile")
    with pytest.raises(DeviceError, match=r"empty device spec ':profile=mobile' \(from LITECL_DEVICE\)"):
        D.parse_spec(None)
    monkeypatch.setenv("LITECL_DEVICE", " pocl:profile=mobile ")
    assert D.parse_spec(None) == ("pocl", "mobile")


def test_names_parse_as_before():
    assert D.parse_spec("auto") == ("auto", "")
    assert D.parse_spec(" Portable Computing ") == ("Portable Computing", "")
    assert D.parse_spec("intel:profile=mobile") == ("intel", "mobile")


class _Plat:
    def __init__(self, name):
        self.name = name


class _Dev:
    def __init__(self, platform, name, gpu=False):
        self.platform, self.name, self.gpu = _Plat(platform), name, gpu

    def __repr__(self):
        return f"<{self.platform.name}: {self.name}>"


def _fake(monkeypatch, devices, broken=()):
    """Make _select see ``devices``; those in ``broken`` cannot build kernels."""
    monkeypatch.setattr(D, "_all_devices", lambda: list(devices))
    monkeypatch.setattr(D, "probe_compiler", lambda d: "error: no" if d in broken else "")
    monkeypatch.setattr(D, "_is_gpu", lambda d: d.gpu)


POCL_OLD = _Dev("Portable Computing Language", "pthread-AMD EPYC 9R14")
POCL_NEW = _Dev("Portable Computing Language", "pthread-znver4-AMD EPYC 9R14")
INTEL = _Dev("Intel(R) OpenCL", "AMD EPYC 9R14")
GRIND = _Dev("Oclgrind", "Oclgrind Simulator")
H200 = _Dev("NVIDIA CUDA", "NVIDIA H200", gpu=True)
POCL_CUDA = _Dev("Portable Computing Language", "NVIDIA H200", gpu=True)
ALL = [GRIND, INTEL, POCL_OLD, POCL_NEW]


@pytest.mark.parametrize("spec", ["AMD EPYC", "epyc", "9R14"])
def test_substring_of_several_platforms_is_ambiguous(monkeypatch, spec):
    _fake(monkeypatch, ALL)
    with pytest.raises(DeviceError) as e:
        D._select(spec)
    msg = str(e.value)
    assert "\n" not in msg and f"{spec!r} is ambiguous" in msg and "more specific" in msg
    for d in (INTEL, POCL_OLD, POCL_NEW):
        assert f"{d.platform.name}: {d.name}" in msg
    assert "Oclgrind" not in msg.split("(", 1)[1].split(")")[0]


def test_matches_of_one_platform_name_take_the_first_that_builds(monkeypatch):
    _fake(monkeypatch, ALL, broken={POCL_OLD})
    for spec in ("pthread", "pocl", "Portable", "portable computing language", "POCL"):
        assert D._select(spec) is POCL_NEW, spec
    _fake(monkeypatch, ALL)
    assert D._select("pthread") is POCL_OLD  # both build: the first
    _fake(monkeypatch, ALL, broken={POCL_OLD, POCL_NEW})
    assert D._select("pocl") is POCL_OLD  # none builds: the first (its error shows later)


def test_aliases_and_unique_substrings(monkeypatch):
    _fake(monkeypatch, ALL)
    assert D._select("intel") is INTEL
    assert D._select("Intel(R)") is INTEL
    assert D._select("oclgrind") is GRIND and D._select("simulator") is GRIND
    assert D._select("znver4") is POCL_NEW
    assert D._select("auto") is INTEL  # no GPU: Intel's runtime first (measured, issue 38)
    with pytest.raises(DeviceError, match="no OpenCL device matches 'nvidia'; available: "):
        D._select("nvidia")


def test_alias_names_its_platform_not_other_platforms_devices(monkeypatch):
    # PoCL's CUDA driver lists an "NVIDIA H200" too: nvidia means the NVIDIA platform
    _fake(monkeypatch, [POCL_CUDA, H200, INTEL])
    assert D._select("nvidia") is H200
    assert D._select("auto") is POCL_CUDA  # the first GPU, as before
    with pytest.raises(DeviceError, match="'H200' is ambiguous"):
        D._select("H200")
    # without an NVIDIA platform the alias still finds a device named NVIDIA
    _fake(monkeypatch, [POCL_CUDA, INTEL])
    assert D._select("nvidia") is POCL_CUDA


def test_real_devices_ambiguous_names():
    """On this machine: a device name that is a substring of a device name of another
    platform (Intel's "AMD EPYC" in PoCL's "pthread-AMD EPYC") is ambiguous."""
    devs = D._all_devices()
    cases = [a.name.strip() for a in devs for b in devs
             if a.platform.name.strip() != b.platform.name.strip()
             and a.name.strip().lower() in b.name.lower() and a.name.strip()]
    if not cases:
        pytest.skip("no device name here is part of another platform's device name")
    for name in cases:
        with pytest.raises(DeviceError, match="is ambiguous"):
            litecl.open_device(name)


@pytest.mark.parametrize("spec", ["pocl", "intel", "oclgrind", "nvidia", "auto", "Portable"])
def test_real_aliases_still_open(spec):
    alias = "pocl" if spec == "Portable" else spec
    if alias == "auto":
        usable = [s for s in ("nvidia", "pocl", "intel") if not DEVICE_STATUS.get(s)]
        if not usable:
            pytest.skip("no usable device")
    elif DEVICE_STATUS.get(alias):
        pytest.skip(DEVICE_STATUS[alias])
    d = litecl.open_device(spec)
    assert not d.caps.compiler_error
    if spec == "Portable":
        assert "Portable" in d.caps.platform


def test_cli_empty_device_is_one_line_error(tmp_path):
    m = tmp_path / "add.tflite"
    m.write_bytes(add_model("float32", [4], [4]))
    for spec in ("", ":"):
        r = subprocess.run([sys.executable, "-m", "litecl.cli", "run", str(m), "--device", spec],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert lines[0].startswith("error: empty device spec") and "Traceback" not in r.stderr


def test_diff_report_counts_nan_payloads_and_nan_signs_apart():
    """NaNs of one sign with other payload bits are equal (the contract) but counted
    (nan_payloads: a fresh user's byte-for-byte check found them behind "bit-exact yes");
    a mismatch that is a NaN of the other sign is counted as such (nan_signs)."""
    bits = np.array([0x7FC00000, 0x7FC00001, 0x7F800001, 0xFFC00000, 0x3F800000], np.uint32)
    want = bits.view(np.float32)
    got = np.array([0x7FC00000, 0x7FC00000, 0x7FC00001, 0x7FC00000, 0x3F800000], np.uint32).view(np.float32)
    rep = diff_report("o", got, want)
    assert rep["bit_exact"] is False and rep["mismatched"] == 1
    assert rep["nan_payloads"] == 2 and rep["nan_signs"] == 1, rep
    rep = diff_report("o", want, want.copy())
    assert rep["bit_exact"] and rep["nan_payloads"] == 0 and rep["nan_signs"] == 0


def test_compare_refuses_when_litert_alone_would_not_fit(monkeypatch, capsys, tmp_path):
    """compare runs LiteRT alone beside litecl's interpreter: where the outputs litecl gave
    would not fit again (its arena and get_tensor's copy), a one-line refusal that starts
    "not enough memory" (a sweep's "refused"), not the OOM killer or an "out of memory"
    blamed on litecl (a fresh user's report: a 160 KB-input, 1 GiB-output ADD)."""
    from litecl import cli, cli_common, sweep  # noqa: PLC0415

    dev = any_fast_device()
    m = tmp_path / "wide.tflite"
    m.write_bytes(add_model("float32", (64, 1, 1), (1, 64, 8)))  # 4 KB of inputs, 128 KB of output
    monkeypatch.setattr(cli_common, "_available_bytes", lambda: 200 << 10)
    assert cli.main(["compare", str(m), "--device", dev]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {cli_common.NOT_ENOUGH_MEMORY}: LiteRT alone's run"), err
    assert "'output' [64, 64, 8]" in err[0] or "[64, 64, 8]" in err[0]
    assert err[0][len("error: "):].startswith(sweep._REFUSALS)
    monkeypatch.setattr(cli_common, "_available_bytes", lambda: 1 << 20)  # fits: compared
    assert cli.main(["compare", str(m), "--device", dev]) == 0
    monkeypatch.setattr(cli_common, "_available_bytes", lambda: 1 << 10)  # the random inputs' own guard
    assert cli.main(["compare", str(m), "--device", dev]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: {cli_common.NOT_ENOUGH_MEMORY}: random inputs of"), err


def test_diff_report_memory_is_a_chunk_not_the_output():
    """diff_report's temporaries beside the two tensors stay one chunk's (numpy's
    allocations as tracemalloc counts them): a whole-array pass held ~1.5x the output."""
    import tracemalloc  # noqa: PLC0415

    from litecl import compare as C  # noqa: PLC0415

    want = np.arange(8 * C.CHUNK, dtype=np.float32)
    want[::3] = np.nan
    got = want.copy()
    got[1::5] += 1
    tracemalloc.start()
    try:
        rep = diff_report("o", got, want)
        ok = bit_equal(got, got)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rep["mismatched"] > 0 and ok
    assert peak < want.nbytes // 2, (peak, want.nbytes)
