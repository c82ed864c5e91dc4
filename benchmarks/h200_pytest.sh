#!/bin/bash
# One device call on the NVIDIA H200 machine: pytest with the given arguments, the H200 as
# fast_device (the same set-up as benchmarks/h200_check.sh). Carry .whl and .shared_models.
#   bash benchmarks/h200_pytest.sh tests/test_hostile.py -k fork
set -u
source benchmarks/h200_env.sh
timeout 500 python3 -m pytest -q -p no:cacheprovider "$@"
