"""Copy feature rows between 2-D arrays in one pass, prefetching the rows a few steps ahead.

Both ends gather rows at random positions: the server from its feature tier, the client from
its cache. Such a gather waits on memory for every row, one row at a time, unless the rows it
will need next are already on their way: ``copy_rows`` asks the CPU for the row
``PREFETCH_AHEAD`` steps ahead (every cache line of it) before it copies the current one. It
takes explicit positions on both sides, so no row is tested in the loop (a test per row that
the CPU cannot predict, hit or miss, costs more than a small row's copy).
Rows are moved as the widest unsigned words that divide them (``row_words``), whatever their
dtype, so one compiled kernel serves every attr.

``merge_rows`` writes a whole batch from two sources in one pass: a client's cache hits and the
rows the server sent for the rest. Its destination is written in order, where two passes
(hits, then the sent rows) each write half of it at scattered places (measured, 26k rows of
400 bytes, half hits: 2.3 ms against 3.3 ms, 2.6 against 3.8 with the CPU's caches cold).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from gnnstore.common.cpu_prefetch import prefetch

PREFETCH_AHEAD = 16
"""Rows requested ahead of the one being copied (measured: 8 to 32 are equally good here)."""

_CACHE_LINE = 64


@numba.njit(cache=True, nogil=True)
def copy_rows(dst: np.ndarray, dst_at: np.ndarray, src: np.ndarray, src_at: np.ndarray) -> None:
    """``dst[dst_at[j]] = src[src_at[j]]`` for every j (2-D arrays of one dtype, indices in range)."""
    n, width = dst_at.shape[0], dst.shape[1]
    if width == 1:  # a word per row (labels, masks): without the inner loops, twice as fast
        for j in range(n):
            if j + PREFETCH_AHEAD < n:
                prefetch(src, (src_at[j + PREFETCH_AHEAD], 0))
            dst[dst_at[j], 0] = src[src_at[j], 0]
        return
    step = max(1, _CACHE_LINE // dst.itemsize)
    for j in range(n):
        if j + PREFETCH_AHEAD < n:
            for k in range(0, width, step):
                prefetch(src, (src_at[j + PREFETCH_AHEAD], k))
        d, s = dst_at[j], src_at[j]
        for k in range(width):  # an explicit loop: a slice assignment per row costs 3x more
            dst[d, k] = src[s, k]


@numba.njit(cache=True, nogil=True)
def merge_rows(dst: np.ndarray, where: np.ndarray, cached: np.ndarray, sent: np.ndarray) -> None:
    """``dst[i] = cached[where[i]]`` where ``where[i] >= 0``, else ``sent[-1 - where[i]]``
    (2-D arrays of one dtype, indices in range)."""
    n, width = where.shape[0], dst.shape[1]
    step = max(1, _CACHE_LINE // dst.itemsize)
    for i in range(n):
        if i + PREFETCH_AHEAD < n:  # sent rows are read in order: only the cached ones wait on memory
            ahead = where[i + PREFETCH_AHEAD]
            if ahead >= 0:
                for k in range(0, width, step):
                    prefetch(cached, (ahead, k))
        w = where[i]
        if w >= 0:
            for k in range(width):
                dst[i, k] = cached[w, k]
        else:
            r = -1 - w
            for k in range(width):
                dst[i, k] = sent[r, k]


def row_words(array: np.ndarray) -> np.ndarray:
    """A contiguous array's rows as a 2-D array of the widest unsigned words that fit (a view)."""
    flat = array.reshape(array.shape[0], math.prod(array.shape[1:])).view(np.uint8)  # -1 fails at 0 rows
    width = next(w for w in (8, 4, 2, 1) if flat.shape[1] % w == 0)
    return flat.view(f"u{width}")
