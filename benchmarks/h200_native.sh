#!/bin/bash
# One device call on the NVIDIA H200 machine: litecl's native delegate (litecl export +
# build.sh) inside stock LiteRT, in a process without litecl or pyopencl, against LiteRT
# alone, with NVIDIA's ICD (libnvidia-opencl.so.1, an ICD vendor library reached through
# clIcdGetPlatformIDsKHR, h200_env.sh registers it).
#  1. .native_pocl_gpu: a delegate exported and BUILT HERE (carried) for the GPU target
#     (benchmarks/h200_native.sh --prepare, below): run with NVIDIA's library in its
#     options; its PoCL program binaries do not load there, so this checks the fall back
#     to source on another vendor.
#  2. bench_native.py --device nvidia: exported on the H200 (litecl + pyopencl from .whl)
#     and built there with its cc (the CUDA image's gcc), every model, with bit-exactness,
#     Replacing lines against the Python delegate, invoke cost in round-trip floors and
#     construct + allocate. Results (native_*.json/.md) under $OUT.
# Carry: .whl (h200_all.sh says which wheels), .shared_models, .real_models, .native_pocl_gpu.
# Here, before the call: bash benchmarks/h200_native.sh --prepare
set -u
if [ "${1:-}" = "--prepare" ]; then
  rm -rf .native_pocl_gpu && mkdir -p .native_pocl_gpu
  .venv/bin/litecl export .shared_models/movenet_singlepose_lightning_int8.tflite --out .native_pocl_gpu/movenet \
      --device pocl --target gpu && sh .native_pocl_gpu/movenet/build.sh
  grep -qx '/.native_pocl_gpu/' .git/info/exclude || echo /.native_pocl_gpu/ >> .git/info/exclude
  exit $?
fi
source benchmarks/h200_env.sh
python3 -m litecl.cli devices
NV=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
if [ -f .native_pocl_gpu/movenet/liblitecl_delegate.so ]; then
  python3 - > $OUT/native_carried.txt 2>&1 <<PY
import json, os, sys
sys.path.insert(0, "benchmarks")
from bench_native import run_child
import numpy as np
from litecl.compare import make_interpreter, random_inputs
d = os.path.abspath(".native_pocl_gpu/movenet")  # the child runs in the temp folder
m = os.path.abspath(".shared_models/movenet_singlepose_lightning_int8.tflite")
opts = json.load(open(d + "/delegate_options.json"))
opts.update(library="$NV", platform="NVIDIA", device="NVIDIA")  # a substring of its names
json.dump(opts, open("/tmp/nv_options.json", "w"))
ref = make_interpreter(open(m, "rb").read())
np.savez("/tmp/nv_inputs.npz", **random_inputs(ref.get_input_details(), seed=0))
print(run_child(d + "/liblitecl_delegate.so", m, "/tmp/nv_options.json", "/tmp/nv_inputs.npz", 0.5))
PY
  echo "carried .so rc=$?"; tail -2 $OUT/native_carried.txt
fi
command -v ${CC:-cc} >/dev/null || command -v gcc >/dev/null || echo "no C compiler on the H200: only the carried .so ran"
command -v ${CC:-cc} >/dev/null || export CC=gcc
for cfg in "nvidia native" "nvidia:profile=mobile mobile"; do
  set -- $cfg
  timeout 270 python3 benchmarks/bench_native.py --device $1 --secs 0.3 --max-secs 1 .shared_models .real_models \
      --out $OUT --tag h200_$2 > $OUT/native_h200_$2.txt 2>&1
  echo "bench_native $1 rc=$?"; tail -1 $OUT/native_h200_$2.txt
done
