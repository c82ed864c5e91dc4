"""litecl: an OpenCL delegate for TensorFlow Lite (LiteRT) models.

CAST and ADD nodes run as generated OpenCL kernels (bit-exact with LiteRT) inside LiteRT's
own interpreter; every other node runs on LiteRT (and on the delegates after litecl's).

    from ai_edge_litert.interpreter import Interpreter
    import litecl
    interp = Interpreter(model_path="model.tflite", experimental_delegates=[litecl.Delegate()])

or ``litecl.Interpreter(model_path=...)``: LiteRT's Interpreter with the delegate applied,
the model verified first, and ``placement()`` saying which node ran where and why.
"""
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
