"""litecl: an OpenCL delegate for TensorFlow Lite (LiteRT) models.

CAST and ADD nodes run as generated OpenCL kernels (bit-exact with LiteRT) inside LiteRT's
own interpreter; every other node runs on LiteRT (and on the delegates after litecl's).

    from ai_edge_litert.interpreter import Interpreter
    import litecl
    interp = Interpreter(model_path="model.tflite", experimental_delegates=[litecl.Delegate()])

or ``litecl.Interpreter(model_path=...)``: LiteRT's Interpreter with the delegate applied,
the model verified first, and ``placement()`` saying which node ran where and why.
"""
import os as _os
import signal as _signal
import sys as _sys


def _interrupted_while_starting(_signum, _frame):
    """The ``litecl`` program's Ctrl-C while its imports run (~0.3 s, before cli.main sets
    its own handling): the one line cli.main says, not a traceback from inside an import
    (a fresh user's report)."""
    _os.write(2, b"error: interrupted (SIGINT)\n")
    _os._exit(128 + _signal.SIGINT)


def _started_as_the_program() -> bool:
    """Whether this process is the ``litecl`` program (its script, or ``python -m
    litecl.cli``): only there does importing litecl touch SIGINT."""
    argv = getattr(_sys, "orig_argv", None) or getattr(_sys, "argv", None) or [""]
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] in ("litecl.cli", "litecl"):
        return True
    return _os.path.basename(str((getattr(_sys, "argv", None) or [""])[0])) == "litecl"


# an inherited ignored SIGINT (a shell's `litecl ... &`) stays ignored; an app's own handler stays
if _started_as_the_program() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    try:
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)
    except ValueError:  # imported off the main thread
        pass

# device first: it wires the Intel ICD and repairs unusable pyopencl/pytools/PoCL cache
# folders before pyopencl loads (delegate imports pyopencl; XDG_CACHE_HOME naming a file
# made the first kernel raise NotADirectoryError otherwise)
from .device import Caps, Device, list_devices, open_device  # noqa: I001
from .delegate import Delegate
from .errors import (DeviceError, InputError, KernelBuildError, LiteclError, ModelError,
                     NotAllocatedError, PrepareError, ResizedPrepareError, UnsupportedError)
from .interpreter import Interpreter, SignatureRunner
from .model import load_model

__version__ = "0.2.0"

__all__ = [
    "Delegate", "Interpreter", "SignatureRunner", "open_device", "list_devices", "Device", "Caps",
    "load_model", "LiteclError", "ModelError", "DeviceError", "InputError",
    "KernelBuildError", "UnsupportedError", "PrepareError", "ResizedPrepareError",
    "NotAllocatedError", "__version__",
]
