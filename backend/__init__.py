"""litecl: a delegate-style OpenCL backend for TensorFlow Lite (LiteRT) models.

CAST and ADD nodes run as generated OpenCL kernels (bit-exact with LiteRT), every other
node falls back to the LiteRT interpreter on sub-models (its builtin kernels by default;
``reference="ref"`` for its reference kernels, ``"xnnpack"`` for its default delegate).

    import litecl
    interp = litecl.Interpreter(model_path="model.tflite", device="pocl")
    interp.allocate_tensors()
"""
from .device import Caps, Device, list_devices, open_device
from .errors import (DeviceError, InputError, KernelBuildError, LiteclError, ModelError,
                     NotAllocatedError, PrepareError, ResizedPrepareError, UnsupportedError)
from .interpreter import Interpreter, SignatureRunner
from .model import load_model

__version__ = "0.1.0"

__all__ = [
    "Interpreter", "SignatureRunner", "open_device", "list_devices", "Device", "Caps",
    "load_model", "LiteclError", "ModelError", "DeviceError", "InputError",
    "KernelBuildError", "UnsupportedError", "PrepareError", "ResizedPrepareError",
    "NotAllocatedError", "__version__",
]
