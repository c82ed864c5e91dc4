#!/bin/bash
# The pip-installed CPU runtimes (pocl-binary-distribution 3.0, Intel's intel-opencl-rt)
# measured on the device machine's CPU, a second host beside this project's 2-core VM
# (issue 38: the default device chosen by measurement). The runtimes' files (a tar.xz of a
# venv where pip installed those wheels, about 113 MB, and PoCL's library, 27 MB) travel in
# four calls (64 MiB per call), kept in /tmp while the machine stays warm (30 s idle):
#   bash benchmarks/device_pip_cpu.sh 1   # carry .whl .pipa   (part1: 30 MB)
#   bash benchmarks/device_pip_cpu.sh 2   # carry .pipb        (part2: 50 MB)
#   bash benchmarks/device_pip_cpu.sh 3   # carry .pipd .shared_models .real_models
#   bash benchmarks/device_pip_cpu.sh 4   # carry .pipc .pipe (part3: 33 MB; numpy's cp312 wheel,
#                                         # which the device's python3 lacks): runs
set -u
S=/tmp/pipcl
mkdir -p $S
case "$1" in
1) python3 -m pip install -q --no-index --no-deps --no-compile --target $S/site .whl/*.whl || exit 1
   cp .pipa/part1 $S/ && echo stage 1 ok;;
2) cp .pipb/part2 $S/ && echo stage 2 ok;;
3) cp .pipd/libpocl.xz $S/ && mkdir -p $S/models && cp -r .shared_models .real_models $S/models/ && echo stage 3 ok;;
4) python3 -m pip install -q --no-index --no-deps --no-compile --target $S/site .pipe/*.whl || exit 1
   cp .pipc/part3 $S/ && cat $S/part1 $S/part2 $S/part3 | xz -d | tar -x -C $S || exit 1
   python3 -m venv --without-pip --system-site-packages $S/v || exit 1
   cp -a $S/lib/*.so* $S/lib/*.rtl $S/lib/*.o $S/lib/cl.cfg $S/v/lib/
   P=$S/lib/python3.11/site-packages
   mkdir -p $S/site/pyopencl/.libs && cp $P/pyopencl/.libs/pocl.icd $S/site/pyopencl/.libs/
   xz -dc $S/libpocl.xz > $S/site/pyopencl/.libs/$(cat $P/pyopencl/.libs/pocl.icd) || exit 1
   cp -r $P/pocl_binary_distribution $S/site/
   python3 - <<'PY' || exit 1
import importlib.util, platform
spec = importlib.util.spec_from_file_location("build", "backend/native/build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)
build.compile_library(["cc"], "backend/native", "backend/native/" + build.library(platform.machine()))
PY
   mkdir -p $S/shim/litecl
   for f in backend/*.py; do ln -sfn "$PWD/$f" $S/shim/litecl/; done
   ln -sfn "$PWD/backend/native" $S/shim/litecl/native; ln -sfn "$PWD/ops" $S/shim/litecl/ops
   export PYTHONPATH=$S/site:$S/shim:$PWD PYTHONUNBUFFERED=1
   unset OCL_ICD_VENDORS
   lscpu | grep -E "Model name|^CPU\(s\)|Thread|Flags" | cut -c1-200 | tee $OUT/host.txt
   $S/v/bin/python -m litecl.cli devices 2>&1 | tee -a $OUT/host.txt
   for d in pocl intel; do
     timeout 200 $S/v/bin/python benchmarks/bench_delegate.py --device $d --secs 0.3 --init-rounds 5 \
         $S/models/.shared_models $S/models/.real_models --json $OUT/pip_$d.json > $OUT/pip_$d.txt 2>&1
     echo "$d rc=$?"; grep -E "floor|start-up|invoke over|LiteRT .* ms|median" $OUT/pip_$d.txt
   done;;
esac
