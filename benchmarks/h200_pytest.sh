#!/bin/bash
# One device call on the NVIDIA H200 machine: pytest with the given arguments, the H200 as
# fast_device (the same set-up as benchmarks/h200_check.sh). Carry .whl and .shared_models.
#   bash benchmarks/h200_pytest.sh tests/test_hostile.py -k fork
set -u
T=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target $T/site .whl/*.whl || exit 1
mkdir -p $T/icd $T/shim/litecl
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > $T/icd/nvidia.icd
export OCL_ICD_VENDORS=$T/icd
for f in backend/*.py; do ln -sfn "$PWD/$f" $T/shim/litecl/; done
ln -sfn "$PWD/ops" $T/shim/litecl/ops
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1 LITECL_SHARED_MODELS=$PWD/.shared_models
timeout 500 python3 -m pytest -q -p no:cacheprovider "$@"
