#!/bin/bash
# One device call on the NVIDIA H200 machine: the NVIDIA rows of the CAST/ADD/fusion/vector
# matrices, and the runtime tests (run-time shapes, order, variables, placement, executor
# paths) with the H200 as fast_device. Carry .whl (see benchmarks/h200_all.sh) and
# .shared_models (a copy of ../shared/models). Results under $OUT.
set -u
T=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target $T/site .whl/*.whl || exit 1
mkdir -p $T/icd $T/shim/litecl
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > $T/icd/nvidia.icd
export OCL_ICD_VENDORS=$T/icd
for f in backend/*.py; do ln -sfn "$PWD/$f" $T/shim/litecl/; done
ln -sfn "$PWD/ops" $T/shim/litecl/ops
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1 LITECL_SHARED_MODELS=$PWD/.shared_models
python3 -m litecl.cli devices
timeout 330 python3 -m pytest -q -p no:cacheprovider -x tests/test_cast.py tests/test_add.py tests/test_fusion.py tests/test_vector_paths.py -k nvidia > $OUT/p1.txt 2>&1; echo "p1 rc=$?"; tail -5 $OUT/p1.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_runtime_faithful.py tests/test_placement_auto.py tests/test_executor_paths.py tests/test_user_reports.py tests/test_cache.py tests/test_noint64.py tests/test_first_user.py tests/test_export.py > $OUT/p2.txt 2>&1; echo "p2 rc=$?"; tail -8 $OUT/p2.txt
