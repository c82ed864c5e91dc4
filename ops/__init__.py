"""litecl.ops: the dtype table, the cast planner, OpenCL C code generation, ADD and tiling.

Everything here is pure (no device access): functions take device capabilities as data
and return plans or OpenCL C source text.
"""
