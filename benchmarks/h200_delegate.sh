#!/bin/bash
# One device call on the NVIDIA H200 machine: litecl.Delegate inside stock LiteRT. Real
# models bit-exact against LiteRT alone (default and mobile profiles), the delegate's
# tests with the H200 as fast_device, and bench_delegate.py (start-up, invoke against the
# round-trip floor, the five 16M-element models). Carry .whl (benchmarks/h200_all.sh says
# which wheels), .shared_models (a copy of ../shared/models) and .real_models (models from
# models/extract_wheels.py). Results under $OUT.
set -u
source benchmarks/h200_env.sh
python3 -m litecl.cli devices
for dev in nvidia nvidia:profile=mobile; do
  timeout 150 python3 benchmarks/delegate_models.py --device $dev .shared_models .real_models \
      --json $OUT/models_${dev//[:=]/_}.json > $OUT/models_${dev//[:=]/_}.txt 2>&1
  echo "models $dev rc=$?"; tail -1 $OUT/models_${dev//[:=]/_}.txt
done
timeout 150 python3 benchmarks/delegate_models.py --device nvidia .shared_models --full-range > $OUT/models_full_range.txt 2>&1
echo "full-range rc=$?"; tail -1 $OUT/models_full_range.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider ${LITECL_H200_TESTS:-tests/test_delegate.py tests/test_placement_auto.py tests/test_add_quant_ties.py tests/test_runtime_faithful.py} > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; tail -4 $OUT/pytest.txt
for p in all auto; do
  timeout 200 python3 benchmarks/bench_delegate.py --device nvidia --placement $p --secs 0.5 .shared_models .real_models \
      --json $OUT/bench_$p.json > $OUT/bench_$p.txt 2>&1
  echo "bench $p rc=$?"; grep -E "floor|start-up|invoke over|LiteRT .* ms" $OUT/bench_$p.txt
done
