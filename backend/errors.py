"""litecl's error hierarchy. Every error a user can cause is a ValueError subclass with a
one-line message saying what was expected and what was given.

Where LiteRT's Interpreter raises RuntimeError for the same situation (measured with
ai-edge-litert 2.3.0: a node that fails to prepare at allocate_tensors, e.g. ADD inputs
that do not broadcast, "Given shapes, [4] and [3], are not broadcastable. Node number 0
(ADD) failed to prepare."; invoke() before allocate_tensors(), "Invoke called on model
that is not ready."), litecl's error is also a RuntimeError (``PrepareError``,
``ResizedPrepareError``, ``NotAllocatedError``), so code written to catch LiteRT's error
catches litecl's; ``except ValueError`` and litecl's own classes keep working.
(set_tensor/get_tensor before allocate_tensors are ValueErrors in LiteRT too.)"""
from __future__ import annotations

from os import environ as _environ

__all__ = [
    "LiteclError", "ModelError", "DeviceError", "InputError", "UnsupportedError",
    "KernelBuildError", "PrepareError", "ResizedPrepareError", "NotAllocatedError",
]


class LiteclError(ValueError):
    """Base class of every error litecl raises for bad input or an unusable setup."""


class ModelError(LiteclError):
    """The .tflite file is missing, unreadable, corrupt or structurally invalid."""


class PrepareError(ModelError, RuntimeError):
    """A node cannot be prepared at the model's shapes (allocate_tensors), where LiteRT
    raises RuntimeError: ADD inputs that do not broadcast, a node LiteRT
    refuses to prepare."""


class DeviceError(LiteclError):
    """No OpenCL device matches the requested spec, or the spec is malformed."""


class InputError(LiteclError):
    """A tensor given to the Interpreter has the wrong name, index, dtype or shape."""


class ResizedPrepareError(InputError, RuntimeError):
    """A node cannot be prepared at shapes resize_tensor_input gave (the resize is at
    fault): litecl.Interpreter.allocate_tensors raises it where an input's shape differs
    from the model's (ADD inputs that no longer broadcast; shapes LiteRT would abort on)."""


class NotAllocatedError(InputError, RuntimeError):
    """litecl.Interpreter.invoke() on a model that is not ready: before allocate_tensors(),
    or after a resize or a failed allocate_tensors (LiteRT raises RuntimeError there)."""


class UnsupportedError(LiteclError):
    """A node cannot be lowered (raised only in strict mode; otherwise it falls back)."""


class KernelBuildError(LiteclError):
    """The OpenCL compiler rejected a generated kernel. Carries the source and build log."""

    def __init__(self, message: str, source: str = "", log: str = ""):
        super().__init__(message)
        self.source = source
        self.log = log


def env_positive_int(name: str, what: str = "a positive integer") -> int | None:
    """The environment variable ``name`` as an integer >= 1, None when it is unset or
    empty. Raises LiteclError naming it and its value for anything else (litecl's knobs:
    LITECL_HOST_THREADS, LITECL_CACHE_MAX_BYTES)."""
    v = _environ.get(name)
    if not v:
        return None
    n = _PARSED.get((name, v))
    if n is not None:
        return n
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise LiteclError(f"{name} must be {what}, got {v!r}")
    if len(_PARSED) < 64:
        _PARSED[(name, v)] = n
    return n


_PARSED: dict = {}  # (variable, its text) -> its value (every Interpreter reads them)

#: The words a yes/no environment variable may hold (any case, blanks around ignored), as
#: the native delegate's yes/no options (backend/native/litecl_delegate.c LCL_FLAG_VALUES).
_FLAG_WORDS = {"1": True, "true": True, "yes": True, "on": True,
               "0": False, "false": False, "no": False, "off": False}
FLAG_VALUES = "1, 0, true, false, yes, no, on or off"


def env_flag(name: str, default: bool = False) -> bool:
    """The yes/no environment variable ``name``: ``default`` when it is unset, empty or
    blank; True for 1, true, yes or on; False for 0, false, no or off (any case, blanks
    around ignored). Raises LiteclError naming it, its value and the accepted values for
    anything else. litecl's switches all read this way: LITECL_QUIET, LITECL_NO_CACHE,
    LITECL_NO_INTEL_ICD, LITECL_NO_SUPERVISOR, LITECL_DEBUG."""
    v = _environ.get(name, "")
    word = v.strip().lower()
    if not word:
        return default
    flag = _FLAG_WORDS.get(word)
    if flag is None:
        raise LiteclError(f"{name} must be one of {FLAG_VALUES} (or unset), got {v!r}")
    return flag


#: the first line of every ``python -c`` child litecl starts (device.py's probe,
#: selftest.check_devices): -c puts the working folder first on the import path, where a
#: folder named litecl (a checkout of it, from the folder above) hides the installed
#: package ("cannot import name 'open_device'": every device's check failed)
CHILD_PATH = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"


def raised_by_app(e: BaseException) -> bool:
    """Whether ``e`` was raised by code outside litecl and the libraries it calls (numpy,
    pyopencl, pytools, platformdirs, flatbuffers, LiteRT's and TensorFlow's Python, Python's
    own library): an app's signal handler (a SIGALRM timeout) that ran while litecl's
    callback or pyopencl's cache code was running and raised there. Such an exception is
    the app's, to be raised as itself (delegate._fail, cl_build.build_source), not one of
    litecl's or a cache failure (a fresh user's timer exception came back as "litecl
    delegate: T:", and once as a broken pyopencl cache)."""
    try:  # called inside ctypes callbacks: nothing may raise here
        tb = e.__traceback__
        if tb is None or isinstance(e, LiteclError) or not _OWN_ROOTS:  # litecl's own type: litecl's (or its test's)
            return False
        while tb.tb_next is not None:
            tb = tb.tb_next
        name = tb.tb_frame.f_code.co_filename
        if name.startswith("<frozen "):  # Python's own frozen modules ("<string>", "<stdin>": an app's)
            return False
        packages, stdlib, sep = _OWN_ROOTS
        if name.startswith(packages):
            return False
        return not (name.startswith(stdlib) and "-packages" + sep not in name[len(stdlib):])
    except Exception:  # noqa: BLE001  (then litecl's own, as before)
        return False


def _own_roots() -> list:
    """[(litecl's and its libraries' folders), the standard library's folder, os.sep], found
    at import (~0.5 ms; nothing is imported: a callback may run inside a collection)."""
    import importlib.util  # noqa: PLC0415
    import os  # noqa: PLC0415

    try:
        here = os.path.dirname(os.path.abspath(__file__))
        roots = [here, os.path.join(os.path.dirname(here), "ops")]  # a checkout: ops/ beside backend/
        for mod in ("numpy", "pyopencl", "pytools", "platformdirs", "flatbuffers", "ai_edge_litert", "tensorflow"):
            spec = importlib.util.find_spec(mod)
            roots += list(spec.submodule_search_locations or []) if spec else []
        return [tuple(os.path.join(r, "") for r in roots), os.path.join(os.path.dirname(os.__file__), ""), os.sep]
    except Exception:  # noqa: BLE001  (an odd import system: every exception stays litecl's)
        return []


_OWN_ROOTS: list = _own_roots()
