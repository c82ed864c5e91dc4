"""Former/tail multi-core tiling (the seed 003_cd4012480a48d229.txt), corrected.

A tensor of ``total_length`` elements is split over ``block_dim`` cores (OpenCL
work-groups) in blocks of ``block_bytes`` bytes. With x = ceil(total / align_num) blocks,
x = q * block_dim + r: ``former_num = r`` cores take q + 1 blocks, ``tail_num =
block_dim - r`` cores take q blocks. The seed's formulas (formerLength = ceil_A(aligned /
BLOCK_DIM), tailLength = floor_A(aligned / BLOCK_DIM)) lose data whenever
r * align_num < block_dim (REFERENCE_FACTS.md), e.g. 528 halves on 32 cores.

Lengths are in elements. Chunks cover [0, total_length_aligned); kernels mask at
``total_length`` so the padding past the tensor is never read or written.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tiling", "plan", "align_up", "divide_round_up", "BLOCK_BYTES"]

#: 32 bytes: the seed's datablock (Ascend unified-buffer alignment); on OpenCL devices it
#: is a full 256-bit vector and a divisor of every cache line, so chunks never share one
#: partial vector.
BLOCK_BYTES = 32


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
