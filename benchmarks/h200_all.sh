#!/bin/bash
# One device call on the NVIDIA H200 machine: the CAST and ADD matrices against LiteRT
# (pytest, NVIDIA rows), the tiling benchmark with the GPU geometry sweep, and the roofline.
#
#     bash benchmarks/h200_all.sh      # results under $OUT (default bench_out/h200)
# Needs the wheels folder .whl (pyopencl, pytools, platformdirs, siphash24,
# typing_extensions, ai-edge-litert and its needs incl. ml_dtypes (bfloat16), pytest, hypothesis,
# tqdm) carried, and
# optionally .shared_models (a copy of ../shared/models) for the real-model tests.
# litecl is imported from a shim package: pyproject maps backend/ -> litecl and
# ops/ -> litecl.ops, reproduced with links (no setuptools needed there).
set -u
OUT=${OUT:-$PWD/bench_out/h200}
ICD_LIB=${LITECL_ICD_LIB:-/usr/local/nvidia/lib64/libnvidia-opencl.so.1}
mkdir -p "$OUT"
T=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $T/site .whl/*.whl || exit 1
mkdir -p $T/icd $T/shim/litecl
echo "$ICD_LIB" > $T/icd/nvidia.icd
export OCL_ICD_VENDORS=$T/icd
for f in backend/*.py; do ln -sfn "$PWD/$f" $T/shim/litecl/; done
ln -sfn "$PWD/ops" $T/shim/litecl/ops
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1 LITECL_SHARED_MODELS=$PWD/.shared_models
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null
python3 -m litecl.cli devices
STEPS=${LITECL_H200_STEPS:-tests tiling roofline}   # any of: tests tiling roofline e2e latency
TESTS=${LITECL_H200_TESTS:-tests/test_cast.py tests/test_add.py tests/test_fusion.py tests/test_vector_paths.py tests/test_delegate.py}
for step in $STEPS; do case $step in
tests)  # correctness matrices on the GPU, compared with LiteRT run on the host CPU there
    timeout 230 python3 -m pytest -q -p no:cacheprovider $TESTS -k "nvidia" \
        -o junit_family=xunit2 --junitxml="$OUT/pytest.xml" > "$OUT/pytest.txt" 2>&1
    echo "pytest rc=$?"; tail -15 "$OUT/pytest.txt";;
tiling)  # former/tail vs baselines, and the local size x groups/CU x vector-bytes sweep
    timeout 150 python3 benchmarks/bench_tiling.py --device nvidia --sizes 16,20,24,26 --repeats 20 --geometry --out "$OUT"
    echo "tiling rc=$?";;
roofline)  # every CAST pair and ADD
    timeout ${LITECL_ROOF_TIMEOUT:-200} python3 benchmarks/bench_roofline.py --device nvidia --sizes ${LITECL_ROOF_SIZES:-16,20,24,26} --pairs ${LITECL_ROOF_PAIRS:-all} --repeats 5 ${LITECL_ROOF_ARGS:-} --out "$OUT" 2>/dev/null | tail -130
    echo "roofline rc=$?";;
e2e)  # litecl vs LiteRT (host CPU there), synthetic and real models
    timeout 200 python3 benchmarks/bench_e2e.py --device nvidia --out "$OUT" 2>/dev/null | tail -30
    echo "e2e rc=$?";;
latency)  # per-invoke overhead of a 4K-element model, and the OpenCL calls behind it
    timeout 120 python3 benchmarks/bench_latency.py --device nvidia --out "$OUT" 2>/dev/null | tail -20
    echo "latency rc=$?";;
esac; done
ls -l "$OUT"
