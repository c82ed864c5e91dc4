#!/bin/bash
# bench_tiling.py (and a tiling correctness sweep) on the NVIDIA H200 device machine.
#
# Run from the repository root there, with the wheels folder .whl carried
# (OPENCL_DEVICES.md: pyopencl, pytools, platformdirs, siphash24, typing_extensions):
#     bash benchmarks/h200_tiling.sh            # results under $OUT (default bench_out/h200)
# The machine has python3.12 + numpy, no network and no LiteRT, so:
# - the wheels go to a temporary site folder (--no-index --no-deps);
# - the NVIDIA OpenCL driver is named by an .icd file in a folder OCL_ICD_VENDORS points to;
# - litecl is imported from a shim package in the temporary folder: pyproject maps backend/ -> litecl and ops/ ->
#   litecl.ops, and backend/__init__.py imports the LiteRT interpreter, so shim/litecl
#   holds an empty __init__.py plus links to every backend/*.py module and to ops/ (the
#   benchmark needs only litecl.device and litecl.ops).
set -u
OUT=${OUT:-$PWD/bench_out/h200}
DEVICE=${LITECL_BENCH_DEVICE:-nvidia}                                  # a litecl device spec
ICD_LIB=${LITECL_ICD_LIB:-/usr/local/nvidia/lib64/libnvidia-opencl.so.1}  # the driver's OpenCL library
mkdir -p "$OUT"
T=$(mktemp -d)   # wheels, .icd folder and shim: fresh each run
exec > >(tee "$OUT/log.txt") 2>&1
${PYTHON:-python3} -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target $T/site .whl/*.whl || exit 1
mkdir -p $T/icd $T/shim/litecl
echo "$ICD_LIB" > $T/icd/nvidia.icd
export OCL_ICD_VENDORS=$T/icd
for f in backend/*.py; do
    [ "$(basename "$f")" = __init__.py ] || ln -sfn "$PWD/$f" $T/shim/litecl/
done
ln -sfn "$PWD/ops" $T/shim/litecl/ops
echo '"""litecl shim: backend modules without the LiteRT-dependent package init."""' \
    > $T/shim/litecl/__init__.py
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1
${PYTHON:-python3} -c "import pyopencl as cl; print([(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv 2>/dev/null
# 1. kernels vs baselines, 2^16..2^24, plus the local size x groups/CU x vector-bytes sweep
timeout 360 ${PYTHON:-python3} benchmarks/bench_tiling.py --device "$DEVICE" --sizes "${LITECL_BENCH_SIZES:-16,18,20,22,24}" \
    --repeats 30 --geometry --out "$OUT"
echo "bench rc=$?"
# 2. exactly-once and guard elements on the real GPU (GPU-sized groups), a representative subset
timeout 120 ${PYTHON:-python3} tests/tiling_sweep.py --device "$DEVICE" --subset > "$OUT/sweep.txt" 2>&1
echo "sweep rc=$?"; tail -5 "$OUT/sweep.txt"
ls -l "$OUT"
