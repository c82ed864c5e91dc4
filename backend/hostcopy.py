"""Host memory copies split over threads (issue 14, transfers at the floor).

litecl.Interpreter.get_tensor copies a tensor of SPLIT_BYTES or more out of LiteRT's
memory (its tensor() view) with ``copy_host`` instead of LiteRT's own GetTensor, which
mallocs the result and page-faults it in: 16M float32 read back in 32-37 ms by LiteRT,
10-11 ms this way on a 2-core VM (2026-12-01; the threads do not matter there: 1 and 2
copy equally fast, the gain is the allocation). set_tensor stays LiteRT's single memcpy:
split over 2 threads it was no faster on that VM (6.9 ms either way for 64 MB). numpy
releases the GIL while it copies plain numeric arrays, so on many-core hosts the pieces
of one copy run on several cores at once (the H200's 16-core host: 8 threads copy 28-32
GB/s into pinned memory, 16: 39 GB/s; benchmarks/h200_transfers.py).

``LITECL_HOST_THREADS`` sets the thread count (1 turns splitting off); the default is the
host's cores, at most 8, less the 1-minute load average (a busy host splits over fewer:
with both cores of the 2-core VM taken by other jobs, a split 16 MiB read took 3.8-5.5 ms
against LiteRT's 2.4-2.5; quiet, 0.77 ms against 1.23).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from .errors import env_positive_int

__all__ = ["host_threads", "copy_host", "SPLIT_BYTES"]

#: Copies below this stay on the calling thread (a thread hand-off costs ~20-50 us).
SPLIT_BYTES = 4 << 20
#: The smallest piece one thread copies.
PIECE_BYTES = 1 << 20

_pool = None
_pool_lock = threading.Lock()


def host_threads() -> int:
    """Threads a large host copy is split over: LITECL_HOST_THREADS, else
    os.cpu_count() (at most 8). Raises LiteclError (a ValueError) for a LITECL_HOST_THREADS
    that is not a positive integer (so does copy_host of SPLIT_BYTES or more, and with it
    litecl.Interpreter.get_tensor of such a tensor)."""
    n = env_positive_int("LITECL_HOST_THREADS")
    return n if n is not None else _CPUS


_CPUS = max(1, min(8, os.cpu_count() or 1))


def _idle_threads() -> int:
    """host_threads(), less the cores other work keeps busy (the 1-minute load average,
    rounded) where LITECL_HOST_THREADS does not set it: at least 1."""
    n = env_positive_int("LITECL_HOST_THREADS")
    if n is not None:
        return n
    try:
        load = os.getloadavg()[0]
    except OSError:
        return _CPUS
    return max(1, min(_CPUS, int(_CPUS + 0.5 - load)))


def _executor(n: int):
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < n:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="litecl-copy")
        return _pool


def copy_host(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for arrays of one dtype and shape, ``dst`` C-contiguous.

    Copies of at least SPLIT_BYTES between C-contiguous arrays are split into byte ranges
    copied by host_threads() threads (the calling thread takes the first); anything else
    is one np.copyto(casting="no"), which raises TypeError on a dtype mismatch."""
    n = dst.nbytes
    k = _idle_threads() if n >= SPLIT_BYTES else 1
    if (k < 2 or dst.dtype != src.dtype or dst.shape != src.shape or not dst.flags.c_contiguous
            or not src.flags.c_contiguous or dst.dtype.hasobject):
        np.copyto(dst, src, casting="no")
        return
    d = dst.reshape(-1).view(np.uint8)
    s = src.reshape(-1).view(np.uint8)
    parts = max(1, min(k, n // PIECE_BYTES))
    step = -(-n // parts)
    step += -step % 64  # whole cache lines per thread
    try:
        pool = _executor(k)
        futures = [pool.submit(np.copyto, d[i:i + step], s[i:i + step]) for i in range(step, n, step)]
    except RuntimeError:  # Python is shutting down (an atexit hook, a daemon thread): no new threads
        np.copyto(dst, src, casting="no")
        return
    np.copyto(d[:step], s[:step])
    for f in futures:
        f.result()
