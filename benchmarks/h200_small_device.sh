#!/bin/bash
# PoCL (pip's pocl-binary-distribution 3.0) on the H200 host's CPU cores: the partition
# size where PoCL's pthread device (worker threads on every core) starts to beat its basic
# device (the enqueueing thread): bench_small_device.py, the measurement behind
# kernels.py's SMALL_PARTITION_BYTES on a many-core host. One device call; carry .whlx
# (the wheels of h200_env.sh plus pocl-binary-distribution, unpacked into site/ and packed
# as .whlx/site.tar.xz: the zipped wheels exceed the carry's 64 MiB).
T=$(mktemp -d)
tar -C $T -xJf .whlx/site.tar.xz || exit 1
mkdir -p $T/shim/litecl  # pyopencl's loader lists its bundled PoCL itself
for f in backend/*.py; do ln -sfn "$PWD/$f" $T/shim/litecl/; done
ln -sfn "$PWD/backend/native" $T/shim/litecl/native
ln -sfn "$PWD/ops" $T/shim/litecl/ops
export PYTHONPATH=$T/site:$T/shim:$PWD PYTHONUNBUFFERED=1
# a GPU device node exists here, so litecl leaves POCL_DEVICES alone: name both devices
export POCL_DEVICES="pthread basic"
nproc
python3 -c "import pyopencl as cl; [print(p.name, p.version, [d.name for d in p.get_devices()]) for p in cl.get_platforms()]"
python3 benchmarks/bench_small_device.py --secs 1 --sizes 4096,65536,262144,524288,1048576,2097152,4194304,16777216 --device pthread --json $OUT/small_device_h200_host.json
