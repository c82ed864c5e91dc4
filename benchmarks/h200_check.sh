#!/bin/bash
# One device call on the NVIDIA H200 machine: the NVIDIA rows of the CAST/ADD/fusion/vector
# matrices, and the runtime tests (run-time shapes, order, variables, placement, the delegate
# paths) with the H200 as fast_device. Carry .whl (see benchmarks/h200_all.sh) and
# .shared_models (a copy of ../shared/models). Results under $OUT.
set -u
source benchmarks/h200_env.sh
python3 -m litecl.cli devices
timeout 330 python3 -m pytest -q -p no:cacheprovider -x tests/test_cast.py tests/test_add.py tests/test_fusion.py tests/test_vector_paths.py -k nvidia > $OUT/p1.txt 2>&1; echo "p1 rc=$?"; tail -5 $OUT/p1.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_runtime_faithful.py tests/test_placement_auto.py tests/test_delegate.py tests/test_user_reports.py tests/test_cache.py tests/test_noint64.py tests/test_first_user.py tests/test_export.py > $OUT/p2.txt 2>&1; echo "p2 rc=$?"; tail -8 $OUT/p2.txt
