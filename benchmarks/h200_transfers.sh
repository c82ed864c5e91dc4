#!/bin/bash
# One device call on the NVIDIA H200 machine: benchmarks/h200_transfers.py (host copies
# and piece uploads A/B against the pinned floor and LiteRT), then the host-copy,
# host-copy and delegate tests with the H200 as fast_device. Carry .whl (see
# benchmarks/h200_all.sh) and .shared_models. Results under $OUT.
set -u
source benchmarks/h200_env.sh
nproc
timeout 300 python3 benchmarks/h200_transfers.py --device nvidia --json $OUT/h200_transfers.json > $OUT/transfers.md 2>&1; echo "bench rc=$?"; cat $OUT/transfers.md | grep -v INFO
timeout 200 python3 benchmarks/h200_transfers.py --device nvidia --threads 16 > $OUT/transfers16.md 2>&1; echo "bench16 rc=$?"; grep -v INFO $OUT/transfers16.md
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_host_copies.py tests/test_user_reports.py tests/test_delegate.py tests/test_placement_auto.py > $OUT/tests.txt 2>&1; echo "tests rc=$?"; tail -8 $OUT/tests.txt
