"""Unit tests with no device: the dtype table and the former/tail tiling plan."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from litecl.ops import dtypes
from litecl.ops.tiling import align_up, divide_round_up, plan


def test_maps_complete_and_one_to_one():
    n = len(dtypes.DTYPES)
    assert len(dtypes.BY_NAME) == n
    assert len(dtypes.BY_TFLITE) == n
    # the sub-byte types are held as int8/uint8 (LiteRT's Python API): not numpy keys
    packed = [d for d in dtypes.DTYPES if d.packed_bits]
    assert {d.name for d in packed} == {"int4", "uint4", "int2"}
    assert len(dtypes.BY_NUMPY) == n - len(packed)
    for d in dtypes.DTYPES:
        assert dtypes.dtype(d.name) is d
        assert dtypes.dtype(d.tflite) is d
        assert dtypes.dtype(d.np) is d or (d.packed_bits and dtypes.dtype(d.np).bits == 8)
        assert d.np.itemsize == d.itemsize
        assert dtypes.TFLITE_TYPE_NAMES[d.tflite].lower() == d.name


def test_tflite_codes_match_schema():
    from ai_edge_litert import schema_py_generated as schema

    for d in dtypes.DTYPES:
        assert getattr(schema.TensorType, d.name.upper()) == d.tflite


def test_cast_types_are_the_eleven():
    assert len(dtypes.CAST_TYPES) == 11
    assert len(dtypes.CAST_TYPES) * (len(dtypes.CAST_TYPES) - 1) == 110


def test_unknown_type_raises_keyerror():
    with pytest.raises(KeyError, match="unknown tensor type"):
        dtypes.dtype("float8_e4m3fn")
    with pytest.raises(KeyError, match="unknown tensor type"):
        dtypes.dtype(21)


def test_sub_byte_ranges_and_names():
    assert [(dtypes.dtype(t).min, dtypes.dtype(t).max) for t in ("int4", "uint4", "int2")] == [
        (-8, 7), (0, 15), (-2, 1)]
    assert dtypes.TFLITE_TYPE_NAMES[19] == "INT2" and dtypes.TFLITE_TYPE_NAMES[20] == "UINT4"


def test_seed_worked_example():
    # 1999 halves on 8 cores: aligned 2000, 125 blocks: 5 former x 256, 3 tail x 240
    t = plan(1999, 2, 8)
    assert (t.total_length_aligned, t.former_num, t.tail_num) == (2000, 5, 3)
    assert (t.former_length, t.tail_length) == (256, 240)


def _seed_formula(total, itemsize, block_dim):
    a = 32 // itemsize
    aligned = divide_round_up(total, a) * a
    former_len = divide_round_up(aligned // block_dim, a) * a
    tail_len = (aligned // block_dim // a) * a
    former_num = (aligned // a) % block_dim
    return former_num * former_len + (block_dim - former_num) * tail_len


@pytest.mark.parametrize("total,itemsize,cores", [(528, 2, 32), (36, 8, 8), (520, 4, 64), (532, 8, 132)])
def test_seed_formula_loses_data_ours_does_not(total, itemsize, cores):
    assert _seed_formula(total, itemsize, cores) < total  # the seed's bug (REFERENCE_FACTS.md)
    t = plan(total, itemsize, cores)
    covered = np.zeros(total, np.int32)
    for c in range(cores):
        off, n = t.chunk(c)
        covered[off:off + n] += 1
    assert (covered == 1).all()


@settings(max_examples=400, deadline=None)
@given(total=st.integers(0, 20000), itemsize=st.sampled_from([1, 2, 4, 8]),
       cores=st.integers(1, 300))
def test_plan_covers_every_element_exactly_once(total, itemsize, cores):
    t = plan(total, itemsize, cores)
    assert t.former_num + t.tail_num == cores
    assert t.former_length == t.tail_length + t.align_num
    assert t.total_length_aligned == align_up(total, 32 // itemsize)
    assert t.former_num * t.former_length + t.tail_num * t.tail_length == t.total_length_aligned
    covered = np.zeros(total, np.int32)
    prev_end = 0
    for c in range(cores):
        off, n = t.chunk(c)
        assert (off * itemsize) % 32 == 0  # every chunk starts on a 32-byte boundary
        assert off >= prev_end or n == 0
        covered[off:off + n] += 1
        prev_end = off + n
    assert (covered == 1).all()


def test_plan_rejects_bad_input():
    with pytest.raises(ValueError):
        plan(-1, 4, 8)
    with pytest.raises(ValueError):
        plan(10, 3, 8)
    with pytest.raises(ValueError):
        plan(10, 4, 0)
    with pytest.raises(ValueError):
        plan(10, 4, 2).chunk(2)
