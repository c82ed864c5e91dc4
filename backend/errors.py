"""litecl's error hierarchy. Every error a user can cause is a ValueError subclass with a
one-line message saying what was expected and what was given."""
from __future__ import annotations

__all__ = [
    "LiteclError", "ModelError", "DeviceError", "InputError", "UnsupportedError",
    "KernelBuildError",
]


class LiteclError(ValueError):
    """Base class of every error litecl raises for bad input or an unusable setup."""


class ModelError(LiteclError):
    """The .tflite file is missing, unreadable, corrupt or structurally invalid."""


class DeviceError(LiteclError):
    """No OpenCL device matches the requested spec, or the spec is malformed."""


class InputError(LiteclError):
    """A tensor given to the Interpreter has the wrong name, index, dtype or shape."""


class UnsupportedError(LiteclError):
    """A node cannot be lowered (raised only in strict mode; otherwise it falls back)."""


class KernelBuildError(LiteclError):
    """The OpenCL compiler rejected a generated kernel. Carries the source and build log."""

    def __init__(self, message: str, source: str = "", log: str = ""):
        super().__init__(message)
        self.source = source
        self.log = log
