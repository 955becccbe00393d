"""Compiled (numba) counting-sort steps that turn streamed COO chunks into a CSC or CSR.

Pass one counts the edges per key node (``count_into``); the counts become a pointer array;
pass two places each chunk's edges at the next free slot of their key (``scatter_into``).
Chunks arrive in e_id order, so within one key the entries stay sorted by e_id: the same
stable order PyG's ``index_sort`` gives.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_into(counts, keys):  # noqa: ANN001, ANN201 (numba)
    """Add one to ``counts[k]`` for every ``k`` in ``keys``; O(len(keys)), never O(N)."""
    for i in range(keys.shape[0]):
        counts[keys[i]] += 1


@njit(cache=True, nogil=True)
def scatter_into(cursor, keys, values, e_id, out_values, out_e_id):  # noqa: ANN001, ANN201
    """Place edge ``i`` at slot ``cursor[keys[i]]`` (then advance it) of both outputs."""
    for i in range(keys.shape[0]):
        p = cursor[keys[i]]
        cursor[keys[i]] = p + 1
        out_values[p] = values[i]
        out_e_id[p] = e_id[i]


def pointer_from_counts(counts: np.ndarray) -> np.ndarray:
    """``[0, cumsum(counts)]`` as int64: the ``colptr``/``rowptr`` of a compressed layout."""
    ptr = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def first_out_of_range(ids: np.ndarray, bound: int) -> int | None:
    """The first id outside ``[0, bound)``, or ``None`` when all are inside."""
    if ids.shape[0] == 0:
        return None
    bad = (ids < 0) | (ids >= bound)
    if not bad.any():
        return None
    return int(ids[int(np.argmax(bad))])
