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


@njit(cache=True, nogil=True)
def merge_into(ptr, values, e_id, gone, add_ptr, add_values, add_e_id, out_ptr, out_values, out_e_id):  # noqa: ANN001, ANN201
    """One compressed side with edits, key by key: a key's old entries except those whose edge
    id has its bit set in ``gone`` (little-endian bits: a bitset stays in the CPU's caches where
    a flag a byte would not), then its added entries (``add_ptr`` over the added arrays, sorted
    by key); ``out_ptr`` gets the new pointer. Returns the number of entries written."""
    old_keys = ptr.shape[0] - 1
    limit = gone.shape[0] * 8
    o = 0
    for k in range(out_ptr.shape[0] - 1):
        out_ptr[k] = o
        if k < old_keys:
            for i in range(ptr[k], ptr[k + 1]):
                edge = e_id[i]
                if edge < limit and (gone[edge >> 3] >> (edge & 7)) & 1:
                    continue
                out_values[o] = values[i]
                out_e_id[o] = edge
                o += 1
        for j in range(add_ptr[k], add_ptr[k + 1]):
            out_values[o] = add_values[j]
            out_e_id[o] = add_e_id[j]
            o += 1
    out_ptr[out_ptr.shape[0] - 1] = o
    return o
