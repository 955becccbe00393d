"""Distinct ids in order of first appearance, without sorting."""
from __future__ import annotations

import numba
import numpy as np

from gnnstore.common.cpu_prefetch import prefetch


def distinct_in_order(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` (non-negative ints) in order of first appearance.

    One pass over a map of the id range, without sorting: a batch's missing rows repeat
    whenever its seeds do (measured on 11.5k ids of a 1M range, half of them with repeats:
    0.35 ms against 1.05 for a bitmap check and ``np.unique``).
    """
    if ids.size < 2:
        return ids
    return _first_appearances(ids, np.zeros(int(ids.max()) + 1, dtype=np.bool_))


_SEEN_AHEAD = 16  # ids whose map entry is requested ahead: the map is read at random


@numba.njit(cache=True, nogil=True)
def _first_appearances(ids: np.ndarray, seen: np.ndarray) -> np.ndarray:
    out = np.empty_like(ids)
    count = 0
    for i in range(ids.shape[0]):
        if i + _SEEN_AHEAD < ids.shape[0]:
            prefetch(seen, ids[i + _SEEN_AHEAD])
        if not seen[ids[i]]:
            seen[ids[i]] = True
            out[count] = ids[i]
            count += 1
    return out[:count]
