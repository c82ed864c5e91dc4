"""How litecl's C runtime library is built (standard library only: setup.py runs it at
install, before litecl's dependencies exist).

The library is litecl_delegate.c with the in-process entry points (-DLITECL_IN_PROCESS)
and no exported model (inprocess_plan.c, written by backend/runtime.py
``inprocess_plan_c``; a test keeps the two equal). It is compiled when litecl is installed
(setup.py: into the package, or beside these sources for an editable install) and carries
``digest`` of what it was built from, so that litecl loads it only while the sources it
came from are the ones installed (runtime.py; after an edit of the C it builds again).
"""
from __future__ import annotations

import hashlib
import os
import subprocess

#: compiled together, in this folder
SOURCES = ("litecl_delegate.c", "cl_loader.c", "litert_check.c", "inprocess_plan.c")
HEADERS = ("litecl_plan.h", "cl_loader.h", "litert_check.h", "tflite_abi.h")
FLAGS = ("-std=c99", "-O2", "-fPIC", "-pthread", "-shared", "-fvisibility=hidden", "-DLITECL_IN_PROCESS")
#: how long the C compiler may run
COMPILE_S = 180


def digest(folder: str) -> str:
    """sha256 (hex) of the flags and of every source and header in ``folder``."""
    h = hashlib.sha256(" ".join(FLAGS).encode() + b"\0")
    for name in sorted(SOURCES + HEADERS):
        with open(os.path.join(folder, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def command(cc: list, folder: str, out: str) -> list:
    """The compiler command building ``out`` from ``folder``'s sources with ``cc`` (a list:
    CC split as a shell would); the library's lcl_runtime_digest() returns ``digest``."""
    return [*cc, *FLAGS, f'-DLITECL_RUNTIME_DIGEST="{digest(folder)}"', "-I", folder, "-o", out,
            *(os.path.join(folder, s) for s in SOURCES), "-ldl"]


def library(machine: str) -> str:
    """The library's file name in this folder for ``machine`` (platform.machine():
    x86_64, aarch64): one per architecture, so that a checkout shared with an arm64
    userland (.ci/arm64-userland) holds both."""
    return f"liblitecl_runtime-{machine}.so"


def target_machine(cc: list) -> str:
    """The architecture ``cc`` builds for (its -dumpmachine's first part: x86_64,
    aarch64). Raises OSError or subprocess.SubprocessError."""
    out = subprocess.run([*cc, "-dumpmachine"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         timeout=60, check=True).stdout.decode().strip()
    return out.split("-")[0]


def compile_library(cc: list, folder: str, out: str) -> None:
    """Build ``out``. Raises OSError (no compiler) or subprocess.SubprocessError with the
    compiler's last lines; a compiler past COMPILE_S is stopped."""
    p = subprocess.run(command(cc, folder, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=COMPILE_S)
    if p.returncode != 0:
        lines = p.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise subprocess.SubprocessError(" | ".join(lines) or f"it exited {p.returncode}")
