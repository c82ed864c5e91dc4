# Sourced by the benchmarks/h200_*.sh scripts (one device call each): installs the wheels
# in .whl (carry it) into a temporary folder, registers only NVIDIA's OpenCL ICD, and puts
# this checkout's litecl (backend/ as litecl, ops/ as litecl.ops) on PYTHONPATH.
T=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target $T/site .whl/*.whl || exit 1
# numpy's wheel where the machine's python3 has none (3.12.3 there since 2026-12-06): carry .pipe
if ls .pipe/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target $T/site .pipe/*.whl || exit 1
fi
mkdir -p $T/icd $T/shim/litecl
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > $T/icd/nvidia.icd
export OCL_ICD_VENDORS=$T/icd
# litecl's C runtime, built as an install builds it (setup.py, backend/native/build.py)
python3 - <<'PY' || exit 1
import importlib.util, platform
spec = importlib.util.spec_from_file_location("build", "backend/native/build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)
build.compile_library(["cc"], "backend/native", "backend/native/" + build.library(platform.machine()))
PY
for f in backend/*.py; do ln -sfn "$PWD/$f" $T/shim/litecl/; done
ln -sfn "$PWD/backend/native" $T/shim/litecl/native  # the native delegate's C sources (export)
ln -sfn "$PWD/ops" $T/shim/litecl/ops
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1 LITECL_SHARED_MODELS=$PWD/.shared_models
# the GPU's tests in one process, as before pyproject's -n auto (.whl carries pytest-xdist)
export PYTEST_ADDOPTS="-n 0"
