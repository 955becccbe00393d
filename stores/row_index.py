"""Turns PyG's index forms (None, slice, int, int tensor or array) into checked global row ids."""
from __future__ import annotations

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import HOMOGENEOUS_EDGE_GROUP
from gnnstore.common.host_array import host_array

GroupName = str | tuple[str, str, str] | tuple[None, None] | None


def check_group_name(group: object) -> GroupName:
    """Return ``group`` if it is a node type (str), an edge type (3 str), None (homogeneous)
    or ``(None, None)`` (a homogeneous graph's edge attributes, as PyG's ``LocalFeatureStore``).

    Raises:
        InvalidRequestError: anything else, including ``''`` (use ``None`` for homogeneous).
    """
    if group is None or (isinstance(group, str) and group):
        return group
    if isinstance(group, (tuple, list)) and tuple(group) == HOMOGENEOUS_EDGE_GROUP:
        return HOMOGENEOUS_EDGE_GROUP
    if isinstance(group, (tuple, list)) and len(group) == 3 and all(
        isinstance(part, str) and part for part in group
    ):
        return tuple(group)
    raise InvalidRequestError(
        f"group_name must be a node type (non-empty str), an edge type (3 str), None for a "
        f"homogeneous graph or (None, None) for its edges, got {group!r}"
    )


def resolve_index(
    index: object, num_rows: int, group: GroupName, attr: str, *, allow_append: bool = False
) -> np.ndarray:
    """Global row ids selected by ``index`` as int64, order and duplicates kept.

    An ``int`` gives a 0-d array (one row, no leading dimension); every other form gives a
    1-D array. With ``allow_append`` (puts), ids at or past ``num_rows`` are accepted when
    they extend the rows densely (``num_rows .. k`` all present).

    Raises:
        InvalidRequestError: an index of the wrong type, or an id out of range.
    """
    if index is None:
        return np.arange(num_rows, dtype=np.int64)
    if isinstance(index, slice):
        return np.arange(*index.indices(num_rows), dtype=np.int64)
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        ids = np.asarray(int(index), dtype=np.int64)
    else:
        arr = np.asarray(index) if isinstance(index, (list, tuple)) else host_array(index)
        ids = _integer_array(arr, index, group, attr)
    _check_range(ids, num_rows, group, attr, allow_append)
    return ids


def _integer_array(arr: np.ndarray | None, index: object, group: GroupName, attr: str) -> np.ndarray:
    if arr is None or arr.ndim > 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        kind = getattr(index, "dtype", type(index).__name__)
        shape = list(getattr(index, "shape", []))
        raise InvalidRequestError(
            f"feature {group!r}.{attr!r}: index must be None, a slice, an int or a 1-D integer "
            f"tensor/array of global ids, got {kind} of shape {shape}"
        )
    return arr.astype(np.int64, copy=False)


def _check_range(
    ids: np.ndarray, num_rows: int, group: GroupName, attr: str, allow_append: bool
) -> None:
    if ids.size == 0:
        return
    flat = ids.reshape(-1)
    low, high = int(flat.min()), int(flat.max())
    limit = high + 1 if allow_append else num_rows
    if low >= 0 and high < limit:
        if high < num_rows:
            return
        appended = np.unique(flat[flat >= num_rows])
        if len(appended) == high + 1 - num_rows:
            return
        # The first id not appended, found without materialising the range (ids may be huge).
        holes = np.flatnonzero(appended != num_rows + np.arange(len(appended)))
        gap = num_rows + (int(holes[0]) if holes.size else len(appended))
        raise InvalidRequestError(
            f"feature {group!r}.{attr!r}: rows must stay dense; id {high} leaves id {gap} "
            f"unset (stored rows: {_valid(num_rows)}; append ids {num_rows}.. contiguously)"
        )
    bad = low if low < 0 else high
    raise InvalidRequestError(
        f"feature {group!r}.{attr!r}: id {bad} is out of range (valid ids: {_valid(num_rows)})"
    )


def _valid(num_rows: int) -> str:
    return f"0..{num_rows - 1}" if num_rows else "none, the feature has 0 rows"
