"""Checks PyG edge indices (arrays or tensors) and converts between a layout and its COO expansion
(numpy, int64); layouts by name (``"coo"``, ``"csr"``, ``"csc"``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import checked_edge_type
from gnnstore.common.host_array import host_array

EdgeTypeKey = tuple[str, str, str] | str | None


def check_edge_type(edge_type: object) -> EdgeTypeKey:
    """Return ``edge_type`` if it is ``None``, a non-empty str or a tuple of 3 non-empty str.

    Raises:
        InvalidRequestError: anything else (a list is accepted and turned into a tuple).
    """
    if edge_type is None or (isinstance(edge_type, str) and edge_type):
        return edge_type
    return checked_edge_type(edge_type, what="an edge type (or a str, or None when homogeneous)")


def node_types_of(edge_type: EdgeTypeKey) -> tuple[str | None, str | None]:
    """Source and destination node types; ``None`` (homogeneous) for a non-tuple edge type."""
    if isinstance(edge_type, tuple):
        return edge_type[0], edge_type[2]
    return None, None


@dataclass
class CooEdges:
    """One edge type's edges in the COO expansion of a put: ``e_id`` is the position."""

    row: np.ndarray
    col: np.ndarray
    size: tuple[int, int]


def to_coo(
    edge_index: object, edge_type: EdgeTypeKey, layout: str,
    size: object, is_sorted: bool,
) -> CooEdges:
    """Check ``edge_index`` in ``layout`` and expand it to COO (positions are edge ids).

    Raises:
        InvalidRequestError: a wrong container, shape or dtype, a malformed pointer array, an
            id that is negative or not below ``size``, or ``is_sorted`` on unsorted COO.
    """
    first, second = _pair(edge_index, edge_type)
    declared = _check_size(size, edge_type)
    if layout == "coo":
        if first.size != second.size:
            raise InvalidRequestError(
                f"edge type {edge_type!r}: row has {first.size} entries but col has {second.size}"
            )
        row, col = first, second
        if is_sorted and col.size and np.any(np.diff(col) < 0):
            raise InvalidRequestError(
                f"edge type {edge_type!r}: is_sorted=True but col is not sorted by destination"
            )
    elif layout == "csr":
        row, col = _expand(first, second, edge_type, "rowptr", "col"), second
    else:
        col, row = _expand(second, first, edge_type, "colptr", "row"), first
    inferred = (_extent(row), _extent(col))
    if layout == "csr":
        inferred = (first.size - 1, inferred[1])
    elif layout == "csc":
        inferred = (inferred[0], second.size - 1)
    bound = inferred if declared is None else declared
    _check_ids(row, bound[0], edge_type, "source")
    _check_ids(col, bound[1], edge_type, "destination")
    if declared is None:
        return CooEdges(row, col, inferred)
    if layout == "csr" and first.size - 1 != declared[0]:
        raise InvalidRequestError(
            f"edge type {edge_type!r}: rowptr has {first.size} entries, size {declared} needs "
            f"{declared[0] + 1}"
        )
    if layout == "csc" and second.size - 1 != declared[1]:
        raise InvalidRequestError(
            f"edge type {edge_type!r}: colptr has {second.size} entries, size {declared} needs "
            f"{declared[1] + 1}"
        )
    return CooEdges(row, col, declared)


def from_coo(
    row: np.ndarray, col: np.ndarray, layout: str, size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` in edge-id order, returned in ``layout``; ties keep edge-id order."""
    if layout == "coo":
        return row, col
    if layout == "csr":
        perm = np.argsort(row, kind="stable")
        return _pointer(row, size[0]), col[perm]
    perm = np.argsort(col, kind="stable")
    return row[perm], _pointer(col, size[1])


def _pair(edge_index: object, edge_type: EdgeTypeKey) -> tuple[np.ndarray, np.ndarray]:
    whole = host_array(edge_index)
    if whole is not None and whole.ndim == 2 and whole.shape[0] == 2:
        edge_index = (whole[0], whole[1])
    if not isinstance(edge_index, (tuple, list)) or len(edge_index) != 2:
        got = f"a tensor of shape {list(whole.shape)}" if whole is not None else type(edge_index).__name__
        raise InvalidRequestError(
            f"edge type {edge_type!r}: edge_index must be a pair of 1-D integer tensors (or a "
            f"[2, E] tensor), got {got}"
        )
    out = []
    for part in edge_index:
        array = host_array(part)
        if array is None or array.ndim != 1 or array.dtype.kind not in "iu":
            got = type(part).__name__ if array is None else f"{part.dtype} of shape {list(array.shape)}"
            raise InvalidRequestError(
                f"edge type {edge_type!r}: edge_index parts must be 1-D integer tensors, got {got}"
            )
        out.append(array.astype(np.int64, copy=False))
    return out[0], out[1]


def _check_size(size: object, edge_type: EdgeTypeKey) -> tuple[int, int] | None:
    if size is None:
        return None
    if (isinstance(size, (tuple, list)) and len(size) == 2
            and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
                    for s in size)):
        return int(size[0]), int(size[1])
    raise InvalidRequestError(
        f"edge type {edge_type!r}: size must be (num_src_nodes, num_dst_nodes) of ints >= 0, "
        f"got {size!r}"
    )


def _expand(ptr: np.ndarray, other: np.ndarray, edge_type: EdgeTypeKey, ptr_name: str,
            other_name: str) -> np.ndarray:
    if ptr.size == 0 or ptr[0] != 0 or ptr[-1] != other.size or np.any(np.diff(ptr) < 0):
        raise InvalidRequestError(
            f"edge type {edge_type!r}: {ptr_name} must start at 0, never decrease and end at "
            f"len({other_name}) = {other.size}, got {ptr_name} of length {ptr.size} "
            f"ending at {int(ptr[-1]) if ptr.size else None}"
        )
    return np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr))


def _extent(ids: np.ndarray) -> int:
    return int(ids.max()) + 1 if ids.size else 0


def _check_ids(ids: np.ndarray, bound: int, edge_type: EdgeTypeKey, side: str) -> None:
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= bound:
        bad = low if low < 0 else high
        raise InvalidRequestError(
            f"edge type {edge_type!r}: {side} id {bad} is out of range (valid ids: 0..{bound - 1})"
        )


def _pointer(ids: np.ndarray, n: int) -> np.ndarray:
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ids, minlength=n), out=ptr[1:])
    return ptr
