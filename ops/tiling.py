"""Former/tail multi-core tiling (the seed 003_cd4012480a48d229.txt), corrected.

A tensor of ``total_length`` elements is split over ``block_dim`` cores (OpenCL
work-groups) in blocks of ``block_bytes`` bytes. With x = ceil(total / align_num) blocks,
x = q * block_dim + r: ``former_num = r`` cores take q + 1 blocks, ``tail_num =
block_dim - r`` cores take q blocks. The seed's formulas (formerLength = ceil_A(aligned /
BLOCK_DIM), tailLength = floor_A(aligned / BLOCK_DIM)) lose data whenever
r * align_num < block_dim (REFERENCE_FACTS.md), e.g. 528 halves on 32 cores.

Lengths are in elements. Chunks cover [0, total_length_aligned); kernels mask at
``total_length`` so the padding past the tensor is never read or written.

Kernels whose input and output itemsizes differ (CAST) are planned with the *smaller*
itemsize s_min: align_num = 32 / s_min elements is 32 * s / s_min bytes on a side of
itemsize s, a multiple of 32, so every chunk starts on a 32-byte boundary of every
buffer. Inside a chunk each work-item moves ``vector_width`` elements per access, a width
that divides align_num: every vector is naturally aligned on both sides (one aligned
vector load and store), and only the last non-empty chunk has a scalar tail.

``LAUNCH`` holds the measured launch constants per device type (local size, work-groups
per compute unit, vector bytes) and ``launch`` turns them into a plan and NDRange.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Tiling", "plan", "align_up", "divide_round_up", "BLOCK_BYTES", "LaunchConfig", "LAUNCH", "streams",
           "MAX_ELEMENTS", "launch_config", "launch", "vector_width", "RUNTIME_ROWS"]

#: 32 bytes: the seed's datablock (Ascend unified-buffer alignment); on OpenCL devices it
#: is a full 256-bit vector and a divisor of every cache line, so chunks never share one
#: partial vector.
BLOCK_BYTES = 32

#: Kernels index with 32-bit ``uint``; 2^31 leaves room for ``i + local size`` and the
#: 32-byte padding without wrapping.
MAX_ELEMENTS = 1 << 31


def divide_round_up(a: int, b: int) -> int:
    """ceil(a / b) for a >= 0, b > 0."""
    return -(-a // b)


def align_up(a: int, b: int) -> int:
    """Smallest multiple of b that is >= a."""
    return divide_round_up(a, b) * b


@dataclass(frozen=True)
class Tiling:
    """A former/tail plan. All lengths in elements.

    Cores 0 .. former_num-1 (former chunks) hold ``former_length`` elements each; cores
    former_num .. block_dim-1 (tail chunks) hold ``tail_length``; chunk offsets are
    multiples of ``align_num`` (so of ``block_bytes`` bytes).
    """

    total_length: int
    total_length_aligned: int
    align_num: int
    block_dim: int
    former_num: int
    tail_num: int
    former_length: int
    tail_length: int

    def chunk(self, core: int) -> tuple[int, int]:
        """(offset, length) of core ``core``'s chunk, clipped to total_length.

        Raises ValueError for a core outside [0, block_dim).
        """
        if not 0 <= core < self.block_dim:
            raise ValueError(f"core {core} outside [0, {self.block_dim})")
        if core < self.former_num:
            off, length = core * self.former_length, self.former_length
        else:
            off = self.former_num * self.former_length + (core - self.former_num) * self.tail_length
            length = self.tail_length
        end = min(off + length, self.total_length)
        return off, max(0, end - off)

    def kernel_args(self) -> tuple[int, int, int, int]:
        """(total_length, former_num, former_length, tail_length): what kernels take."""
        return self.total_length, self.former_num, self.former_length, self.tail_length


def plan(total_length: int, dtype_bytes: int, block_dim: int, block_bytes: int = BLOCK_BYTES) -> Tiling:
    """Split ``total_length`` elements of ``dtype_bytes`` bytes over ``block_dim`` cores.

    For kernels whose input and output itemsizes differ, pass the *smaller* itemsize:
    a chunk offset that is a multiple of block_bytes / min_itemsize elements starts on a
    block_bytes boundary on both sides (32 / s_min is a multiple of 32 / s for s >= s_min).

    Raises ValueError for negative lengths, non-positive sizes, or an itemsize that does
    not divide block_bytes.
    """
    if total_length < 0:
        raise ValueError(f"total_length must be >= 0, got {total_length}")
    if dtype_bytes <= 0 or block_bytes <= 0 or block_bytes % dtype_bytes:
        raise ValueError(f"dtype_bytes {dtype_bytes} must be positive and divide block_bytes {block_bytes}")
    if block_dim <= 0:
        raise ValueError(f"block_dim must be >= 1, got {block_dim}")
    align_num = block_bytes // dtype_bytes
    aligned = align_up(total_length, align_num)
    blocks = aligned // align_num
    q, r = divmod(blocks, block_dim)
    return Tiling(
        total_length=total_length,
        total_length_aligned=aligned,
        align_num=align_num,
        block_dim=block_dim,
        former_num=r,
        tail_num=block_dim - r,
        former_length=(q + 1) * align_num,
        tail_length=q * align_num,
    )


@dataclass(frozen=True)
class LaunchConfig:
    """How a device type runs a tiled kernel (measured: benchmarks/bench_tiling.py).

    local_size: work-items per work-group (one work-group is one core of the plan);
    groups_per_cu: work-groups per compute unit (block_dim = compute_units * this);
    vec_bytes: bytes of the widest operand each work-item moves per vector access (the
    vector width in elements is vec_bytes / the largest itemsize, see ``vector_width``).
    """

    local_size: int
    groups_per_cu: int
    vec_bytes: int
    half_width: int = 16  # most elements per vloada_halfN / vstorea_halfN access
    #: without cl_khr_fp16, store half vectors as ushortN converted with integer code
    #: (ops/codegen.py half_bits_source) instead of vstorea_halfN_rte; half_bits_load: the
    #: same for loads instead of vloada_halfN
    half_bits: bool = False
    half_bits_load: bool = False
    #: a kernel touching more than this many bytes (read + written) stores its vectors
    #: non-temporally where the compiler can (``streams``); 0: never
    stream_bytes: int = 0
    #: saturating float -> integer vector steps as convert_T_sat_rtz plus a NaN select
    #: (codegen.step_vexpr) instead of clamp + convert + select
    sat_convert: bool = False
    #: half vectors (without cl_khr_fp16) loaded as ushortN bits, converted from private
    #: memory (codegen.vload_half_source) instead of vloada_halfN from global memory
    half_load_private: bool = False
    #: the fewest bytes of the kernel's narrowest type a work-group takes (block_dim at most
    #: n * tile_bytes / this, at least 1): where each work-group the runtime dispatches
    #: costs more than the work it carries; 0: no such floor
    group_bytes: int = 0


#: Launch constants keyed by device type ("gpu" or "cpu"; Oclgrind reports every type at
#: once and runs as "cpu"), each with its one-line reason. The numbers behind them are
#: README.md's "## Tiling" tables (benchmarks/bench_tiling.py --geometry).
LAUNCH: dict[str, LaunchConfig] = {
    "gpu": LaunchConfig(
        local_size=512,    # measured on the H200: 512 > 256 > 128 in every case (16 warps, coalesced)
        groups_per_cu=32,  # measured on the H200: 32 best (f32->f16 3908 GB/s = 96% of copy at 2^26)
        vec_bytes=16,      # measured: one 128-bit access per work-item; 32 bytes 3x slower on f32->f16
        half_width=8,      # measured on the H200 (vector-form kernels): vloada_half8 loads f16 -> 8-bit at 81% of copy, half4 75%, half2 58%
        half_bits=True,    # measured on the H200: integer f2h stores, 8/16-bit -> f16 77-94% of copy (vstorea_half4_rte: 71-78%)
        half_bits_load=False,  # measured on the H200: integer h2f loads, f16 -> 8-bit 65% (ALU-bound), vloada_half8 81%
        sat_convert=True,  # measured on the H200: f16 -> int8 at 2^24 82 -> 88% of copy, f32 -> int8 80 -> 88%
        half_load_private=True,  # measured on the H200: f16 -> int8 at 2^26 81 -> 95%, -> uint8 79 -> 90%, wider tie
    ),
    "cpu": LaunchConfig(
        local_size=1,      # measured: one work-item walking its chunk; a 2nd one costs ~30%
        groups_per_cu=16,  # measured: 16..32 top in each case (finer chunks), 1..8 up to 7% lower
        vec_bytes=32,      # measured: an AVX2 register; f32->f16 +30..60% over 16 bytes, rest tie
        stream_bytes=16 << 20,  # measured on PoCL 3.1 (Zen 5, 32 MiB L3): from 16 MiB up streaming wins (see ``streams``)
    ),
}


#: Per (device type, OpenCL runtime: the start of the platform's name), the fields of the
#: type's LAUNCH row that runtime changes, each with its measurement.
RUNTIME_ROWS: dict[tuple[str, str], dict] = {
    # measured on Intel's CPU runtime 2026.2 (2 Zen 4 cores, AVX-512; kernel event times,
    # medians of 3 x 21 invokes, 20K-4M elements, 13 CAST/ADD kinds): 64 bytes (one zmm)
    # against 32: CAST i64->f32 0.60-0.66x, f32->i8 0.81-0.87x, f32->u8 0.82-0.92x,
    # bool->f32 0.81-0.99x, ADD f32 0.90-1.00x, the rest 0.95-1.02x (one 1.07x, u8->f32 at
    # 4M). PoCL 3.1 on the same host stays at 32: there 64 bytes gave ADD f32 1.36-1.45x at
    # 50K and 4M elements (benchmarks/results/intel/vec_bytes_s16.txt)
    # group_bytes, measured on the same host (event times of the float32 ADD, CAST f32->f16
    # and u8->f32 kernels at 2^10..2^22 elements over 1..32 work-groups, medians of 35
    # alternating launches, back-to-back and 1 ms apart): each work-group costs 0.1-0.15 us
    # (ADD f32 at 2^12: 0.9 us in 1 group, 3.1 us in 32; at 2^14 cold 5.6 us against 9.1),
    # and 1 group is fastest up to ~32 KiB of the narrowest type; from 1 MiB on, 16-32
    # groups win by up to 8% (benchmarks/results/intel/groups_s18.txt)
    ("cpu", "Intel(R) OpenCL"): {"vec_bytes": 64, "group_bytes": 32 << 10},
}


def launch_config(caps) -> LaunchConfig:
    """The LAUNCH row for a device's caps (``caps.is_gpu``), with its runtime's
    RUNTIME_ROWS fields (by ``caps.platform``) where it has any."""
    kind = "gpu" if caps.is_gpu else "cpu"
    row = LAUNCH[kind]
    platform = getattr(caps, "platform", "") or ""
    for (k, runtime), fields in RUNTIME_ROWS.items():
        if k == kind and platform.startswith(runtime):
            return replace(row, **fields)
    return row


def streams(caps, footprint: int) -> bool:
    """Whether a kernel moving ``footprint`` bytes (inputs read + outputs written) stores
    its vectors with ``__builtin_nontemporal_store`` (caps.streaming, set by the kernel plan).

    A plain store first reads the line it writes (read-for-ownership): a CAST that widens
    (int8 -> int64 writes 8 bytes per byte read) pays nearly twice the traffic it counts.
    Streaming stores skip that read but also skip the cache, so they pay only when the data
    would not stay there anyway: above the LAUNCH row's ``stream_bytes``, on devices whose
    compiler has the builtin (caps.nontemporal; CPU devices only). Measured on PoCL 3.1 (2
    Zen 5 cores, 32 MiB L3; every CAST pair and ADD, benchmarks/results/pocl/streaming.md):
    streaming / plain GB/s has a median of 1.21..1.26 at every footprint from 12 MiB to
    1.5 GiB (int8 -> int64 up to 1.96x), and at 2^24 and 2^26 elements lifts the kernels
    at >= 80% of a copy of the same bytes from 104 and 105 of 113 to 113; at 2..10 MiB
    (inside the L3) it ranges 0.75..1.39, so smaller kernels keep plain stores.

    Ordering: x86 streaming stores (movnt*, checked in PoCL's compiled kernels) are weakly
    ordered, drained by SFENCE/MFENCE or any LOCK-prefixed instruction (Intel SDM vol. 3A,
    11.3.1); the runtime's work-group completion that a kernel's event waits for is such a
    synchronisation, so readers after the event (the next kernel, a map, a fallback
    segment) see the stored values. OpenCL's mem_fence compiles to nothing there.
    """
    limit = launch_config(caps).stream_bytes
    return bool(getattr(caps, "nontemporal", False) and limit and footprint > limit)


def vector_width(itemsizes, vec_bytes: int) -> int:
    """Elements per vector access for a kernel touching buffers of ``itemsizes`` bytes.

    vec_bytes / the largest itemsize (so the widest operand moves vec_bytes per access),
    a power of two in [1, 16] (OpenCL vector widths), and never above the plan's align_num
    (block_bytes / the smallest itemsize), so a vector never straddles a 32-byte block and
    every vector access is naturally aligned on both sides: chunks start on 32-byte
    boundaries and the vector index within a chunk is a multiple of the width.
    """
    big, small = max(itemsizes), min(itemsizes)
    w = max(1, min(16, vec_bytes // big, BLOCK_BYTES // small))
    return 1 << (w.bit_length() - 1)


def launch(caps, n: int, tile_bytes: int, block_dim: int | None = None,
           local_size: int | None = None) -> tuple[Tiling, tuple[int], tuple[int]]:
    """(tiling, global size, local size) of a tiled kernel over ``n`` elements.

    tile_bytes: the smallest itemsize the kernel touches (chunks start on 32-byte
    boundaries of every buffer). block_dim / local_size default to ``launch_config(caps)``
    (block_dim = compute units x groups_per_cu); local_size is capped at the device's
    max_work_group_size. Never more cores than 32-byte blocks, so no core is empty unless
    ``block_dim`` is given explicitly larger (tests use that to prove empty chunks safe),
    nor more than fill each work-item with vec_bytes of the smallest type (measured on the
    H200: one vector of the kernel's own width per work-item instead, e.g. 2 elements for
    int64 -> uint8, changed GB/s at 2^22 and 2^24 by a median factor of 1.00), nor more
    than give each group the row's ``group_bytes`` of the smallest type.
    Raises ValueError above MAX_ELEMENTS elements.
    """
    if not 0 <= n <= MAX_ELEMENTS:
        raise ValueError(f"{n} elements: tiled kernels index with uint, at most {MAX_ELEMENTS}")
    cfg = launch_config(caps)
    local = max(1, min(local_size or cfg.local_size, caps.max_work_group_size))
    if block_dim is None:
        block_dim = max(1, caps.compute_units * cfg.groups_per_cu)
        blocks = max(1, divide_round_up(n, BLOCK_BYTES // tile_bytes))
        # no more groups than keep every work-item busy with a vector or more: on GPUs a
        # 4M-element CAST otherwise launched 4224 groups x 512 work-items for 262K
        # vectors (88% idle). CPUs (one work-item per group) get one group per block, as before.
        per_group = local * max(1, cfg.vec_bytes // tile_bytes)
        block_dim = min(block_dim, blocks, max(1, divide_round_up(n, per_group)))
        if cfg.group_bytes:  # no group carries less than the runtime's dispatch of it costs
            block_dim = min(block_dim, max(1, n * tile_bytes // cfg.group_bytes))
    t = plan(n, tile_bytes, block_dim)
    return t, (block_dim * local,), (local,)
