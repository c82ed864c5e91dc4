"""Seeded byte mutation of .tflite files, for fuzzing litecl's model reading and runtime.

``mutant(buf, seed)`` returns one mutated copy of ``buf`` and a description; the same
buffer and seed always give the same mutant. The strategies aim at a flatbuffer's
structure: bit flips anywhere, 4-byte words (offsets, lengths, indices) and 2-byte words
(vtable entries) replaced by edge values, truncation, and a chunk deleted or duplicated
(which shifts every offset that crosses it), and values of scalar fields the verifier
locates (types, shapes, tensor indices, opcodes, options) replaced by edge values.
"""
from __future__ import annotations

import random
import struct

__all__ = ["mutant", "STRATEGIES"]

_WORDS = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF,
          0x80000000, 0xFFFFFFFF, 0xFFFFFFFC, 0x40000000)
_HALVES = (0, 1, 2, 4, 6, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE)


def _flip(b: bytearray, r: random.Random) -> str:
    k = r.randint(1, 8)
    for _ in range(k):
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    return f"flip {k} bits"


def _word(b: bytearray, r: random.Random) -> str:
    if len(b) < 4:
        return _flip(b, r)
    i = r.randrange(0, max(1, len(b) - 3)) & ~3
    v = r.choice(_WORDS + (len(b), len(b) - i, r.getrandbits(32), r.randrange(64)))
    struct.pack_into("<I", b, i, v & 0xFFFFFFFF)
    return f"word at {i} = {v:#x}"


def _half(b: bytearray, r: random.Random) -> str:
    if len(b) < 2:
        return _flip(b, r)
    i = r.randrange(0, max(1, len(b) - 1)) & ~1
    v = r.choice(_HALVES + (r.getrandbits(16), r.randrange(64)))
    struct.pack_into("<H", b, i, v)
    return f"half at {i} = {v:#x}"


def _scalar(b: bytearray, r: random.Random) -> str:
    """An edge value written over a scalar field or scalar vector element the verifier
    found (tensor types, shapes, indices, opcodes, options): the file stays well-formed,
    so the mutant reaches model validation, kernels and LiteRT."""
    from litecl.verify import VerifyError, verify  # noqa: PLC0415

    found: list = []
    try:
        verify(bytes(b), scalars=found)
    except VerifyError:
        pass
    if not found:
        return _word(b, r)
    pos, width, count = r.choice(found)
    pos += width * r.randrange(count)
    bits = 8 * width
    v = r.choice((0, 1, 2, 3, -1, -2, 4, 5, 6, 7, 8, 9, 10, 16, 17, 31, 32, 63, 64, 127, 128, 255,
                  2**15 - 1, 2**15, 2**31 - 1, -2**31, 2**bits - 1, r.getrandbits(bits),
                  r.randrange(-4, 200)))
    b[pos:pos + width] = (v % 2**bits).to_bytes(width, "little")
    return f"scalar at {pos} ({width} bytes) = {v}"


def _truncate(b: bytearray, r: random.Random) -> str:
    n = r.randrange(len(b))
    del b[n:]
    return f"truncate to {n}"


def _chunk(b: bytearray, r: random.Random) -> str:
    i = r.randrange(len(b))
    n = r.choice((1, 2, 4, 8, 16, r.randint(1, 256)))
    if r.random() < 0.5:
        del b[i:i + n]
        return f"delete {n} at {i}"
    b[i:i] = b[i:i + n]
    return f"duplicate {n} at {i}"


#: (name, function, weight)
STRATEGIES = (("flip", _flip, 4), ("word", _word, 4), ("half", _half, 3),
              ("scalar", _scalar, 6), ("truncate", _truncate, 1), ("chunk", _chunk, 1))


def mutant(buf: bytes, seed: int) -> tuple[bytes, str]:
    """One seeded mutant of ``buf``: (bytes, what was done). 1-3 mutations are applied."""
    r = random.Random(seed)
    b = bytearray(buf)
    done = []
    names, fns, weights = zip(*((n, f, w) for n, f, w in STRATEGIES))
    for _ in range(r.choice((1, 1, 1, 2, 3))):
        if not b:
            break
        done.append(r.choices(fns, weights)[0](b, r))
    return bytes(b), "; ".join(done)
