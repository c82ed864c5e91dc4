"""litecl's build: the Python packages (pyproject.toml) and litecl's C runtime library,
compiled at install (backend/native/build.py says how). A source build needs a C
compiler; without one the install stops with one line saying so."""
import importlib.util
import os
import shlex
import shutil
import subprocess
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("litecl_native_build", os.path.join(HERE, "backend", "native", "build.py"))
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)


class BuildRuntime(build_py):
    """build_py, then liblitecl_runtime-<arch>.so (for the architecture CC builds for)
    into the package's native folder (beside the sources for an editable install)."""

    def run(self):
        super().run()
        native = os.path.join(HERE, "backend", "native")
        out_dir = native if self.editable_mode else os.path.join(self.build_lib, "litecl", "native")
        os.makedirs(out_dir, exist_ok=True)
        cc_text = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        cc = shlex.split(cc_text)
        if not cc or shutil.which(cc[0]) is None:
            raise SystemExit(f"error: litecl's C runtime (backend/native) is compiled at install and no C compiler "
                             f"was found ({cc_text!r}): install one (Debian: apt-get install gcc) or set CC")
        try:
            build.compile_library(cc, native, os.path.join(out_dir, build.library(build.target_machine(cc))))
        except (OSError, subprocess.SubprocessError) as e:
            raise SystemExit(f"error: {cc_text} could not build litecl's C runtime (backend/native): {e}") from None


class BinaryDistribution(Distribution):
    """A distribution with a compiled library: installed to platlib, its wheel for one
    platform."""

    def has_ext_modules(self):
        return True


try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """The wheel's tag: any Python 3 (the library is loaded with ctypes, not imported),
        this platform."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass = {"build_py": BuildRuntime, "bdist_wheel": PlatformWheel}
except ImportError:
    cmdclass = {"build_py": BuildRuntime}

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
