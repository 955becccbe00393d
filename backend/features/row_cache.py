"""The rows of one array last read from disk, kept in the server's memory up to a capacity.

Rows read straight from disk (``direct_reads.py``) bypass the page cache, so the server keeps
its own cache of them: a fixed array of row slots, a slot per id (``-1``: not cached) and the
CLOCK policy. A row enters unreferenced and is marked when a later gather finds it; the hand
evicts the first unmarked slot it meets, clearing marks on its way. So a row read once leaves
soon and a row read again stays: the rows a trainer's own cache lacks and asks for again and
again, whatever the size of that cache (the server cannot know which rows a trainer holds).

One lock guards the slots: a gather copies its hits and, after its disk reads, admits its
misses under it; the reads themselves run outside it.
"""
from __future__ import annotations

import threading

import numba
import numpy as np


class RowCache:
    """Up to ``capacity`` rows of ``width`` words of ``word`` (an unsigned dtype) of an array of
    ``num_rows`` rows."""

    def __init__(self, num_rows: int, width: int, word: np.dtype, capacity: int) -> None:
        self.capacity = capacity
        self._slot_of = np.full(num_rows, -1, dtype=np.int32 if capacity < 2**31 else np.int64)
        self._id_of = np.full(capacity, -1, dtype=np.int64)
        self._marked = np.zeros(capacity, dtype=np.bool_)
        self._hand = np.zeros(1, dtype=np.int64)
        self._rows = np.empty((capacity, width), dtype=word)
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds (its rows and its slot tables)."""
        return self._rows.nbytes + self._slot_of.nbytes + self._id_of.nbytes + self._marked.nbytes

    def take(self, dst: np.ndarray, dst_at: np.ndarray, src_at: np.ndarray) -> np.ndarray:
        """Copy the cached rows of ``src_at`` to ``dst[dst_at]`` (``dst``: rows as the cache's words); return
        the positions in ``src_at`` that missed."""
        missed = np.empty(src_at.shape[0], dtype=np.int64)
        with self._lock:
            count = _take(dst, dst_at, src_at, self._slot_of, self._rows, self._marked, missed)
        return missed[:count]

    def admit(self, rows: np.ndarray, row_at: np.ndarray, ids: np.ndarray) -> None:
        """Cache ``rows[row_at[k]]`` (the cache's words) as the row of ``ids[k]``, evicting by CLOCK."""
        with self._lock:
            _admit(rows, row_at, ids, self._slot_of, self._id_of, self._marked, self._rows, self._hand)


@numba.njit(cache=True, nogil=True)
def _take(dst, dst_at, src_at, slot_of, rows, marked, missed) -> int:  # noqa: ANN001
    count = 0
    for j in range(src_at.shape[0]):
        slot = slot_of[src_at[j]]
        if slot < 0:
            missed[count] = j
            count += 1
        else:
            d = dst_at[j]
            for w in range(rows.shape[1]):  # an explicit loop: a slice assignment costs 3x more
                dst[d, w] = rows[slot, w]
            marked[slot] = True
    return count


@numba.njit(cache=True, nogil=True)
def _admit(src, src_at, ids, slot_of, id_of, marked, rows, hand) -> None:  # noqa: ANN001
    capacity = id_of.shape[0]
    for k in range(ids.shape[0]):
        if slot_of[ids[k]] >= 0:  # a duplicate, or another gather admitted it meanwhile
            continue
        slot = hand[0]
        while marked[slot]:
            marked[slot] = False
            slot = (slot + 1) % capacity
        hand[0] = (slot + 1) % capacity
        if id_of[slot] >= 0:
            slot_of[id_of[slot]] = -1
        id_of[slot] = ids[k]
        slot_of[ids[k]] = slot
        s = src_at[k]
        for w in range(rows.shape[1]):
            rows[slot, w] = src[s, w]
