"""Check an ``edge_index`` in PyG's COO, CSR or CSC layout and convert it to and from COO.

A graph store keeps one canonical edge list per edge type, in edge-id order: COO as put, CSR
in row-major order, CSC in column-major order (the order PyG's own conversions produce). So a
layout read back is the layout that was put, and ``e_id`` is the position in it.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr, EdgeLayout

from gnnstore.proto.errors import InvalidRequestError

INDEX_DTYPES = (torch.int32, torch.int64)


def _index(name: str, value: object, where: str) -> Tensor:
    """``value`` as a 1-D int64 CPU tensor, or an error naming ``name`` and what was received."""
    if not isinstance(value, Tensor):
        raise InvalidRequestError(f"{where}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype not in INDEX_DTYPES:
        raise InvalidRequestError(f"{where}: {name} must be int32 or int64, got {value.dtype}")
    if value.dim() != 1:
        raise InvalidRequestError(f"{where}: {name} must be 1-D, got shape {tuple(value.shape)}")
    return value.detach().to("cpu", torch.int64)


def _pointer(name: str, ptr: Tensor, num_edges: int, where: str) -> None:
    """Check a CSR ``rowptr`` / CSC ``colptr``: starts at 0, never decreases, ends at ``num_edges``."""
    if ptr.numel() == 0 or int(ptr[0]) != 0 or int(ptr[-1]) != num_edges:
        got = ptr.tolist() if ptr.numel() <= 8 else f"{ptr[:4].tolist()}...{ptr[-4:].tolist()}"
        raise InvalidRequestError(
            f"{where}: {name} must start at 0 and end at the number of edges {num_edges}, got {got}"
        )
    if bool((ptr[1:] < ptr[:-1]).any()):
        raise InvalidRequestError(f"{where}: {name} must never decrease")


def _bounded(name: str, ids: Tensor, bound: int | None, where: str) -> None:
    """Ids are non-negative and, when ``bound`` is known, below it."""
    if ids.numel() == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        raise InvalidRequestError(f"{where}: {name} id {low} is negative")
    if bound is not None and high >= bound:
        raise InvalidRequestError(f"{where}: {name} id {high} is outside the size's 0..{bound - 1}")


def _size(size: object, where: str) -> tuple[int | None, int | None]:
    """``(num_src, num_dst)`` from ``EdgeAttr.size`` (``None``: infer both)."""
    if size is None:
        return None, None
    try:
        num_src, num_dst = (int(s) for s in size)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{where}: size must be two non-negative ints, got {size!r}") from None
    if min(num_src, num_dst) < 0:
        raise InvalidRequestError(f"{where}: size must be two non-negative ints, got {size!r}")
    return num_src, num_dst


def to_coo(edge_index: object, attr: EdgeAttr) -> tuple[Tensor, Tensor, tuple[int, int]]:
    """Validate ``edge_index`` in ``attr.layout``; return ``(row, col, size)`` in edge-id order.

    Raises:
        InvalidRequestError: not a pair of 1-D integer tensors, inconsistent lengths or
            pointers, ids out of ``attr.size``, or a COO claimed sorted that is not.
    """
    where = f"edge type {attr.edge_type!r} ({attr.layout.value})"
    if isinstance(edge_index, Tensor) and (edge_index.dim() != 2 or edge_index.size(0) != 2):
        raise InvalidRequestError(
            f"{where}: edge_index must be a pair of tensors or a [2, E] tensor, got shape {list(edge_index.shape)}"
        )
    if not isinstance(edge_index, (tuple, list, Tensor)) or len(edge_index) != 2:
        raise InvalidRequestError(f"{where}: edge_index must be a pair of tensors, got {type(edge_index).__name__}")
    num_src, num_dst = _size(attr.size, where)
    if attr.layout == EdgeLayout.COO:
        row, col = _index("row", edge_index[0], where), _index("col", edge_index[1], where)
        if row.numel() != col.numel():
            raise InvalidRequestError(f"{where}: row has {row.numel()} entries but col has {col.numel()}")
        if attr.is_sorted and bool((col[1:] < col[:-1]).any()):
            raise InvalidRequestError(f"{where}: is_sorted=True but col is not sorted")
    elif attr.layout == EdgeLayout.CSR:
        rowptr, col = _index("rowptr", edge_index[0], where), _index("col", edge_index[1], where)
        _pointer("rowptr", rowptr, col.numel(), where)
        if num_src is not None and rowptr.numel() > num_src + 1:
            raise InvalidRequestError(f"{where}: rowptr has {rowptr.numel()} entries, size allows {num_src + 1}")
        row = torch.repeat_interleave(torch.arange(rowptr.numel() - 1), rowptr.diff())
        num_src = rowptr.numel() - 1 if num_src is None else num_src
    else:
        row, colptr = _index("row", edge_index[0], where), _index("colptr", edge_index[1], where)
        _pointer("colptr", colptr, row.numel(), where)
        if num_dst is not None and colptr.numel() > num_dst + 1:
            raise InvalidRequestError(f"{where}: colptr has {colptr.numel()} entries, size allows {num_dst + 1}")
        col = torch.repeat_interleave(torch.arange(colptr.numel() - 1), colptr.diff())
        num_dst = colptr.numel() - 1 if num_dst is None else num_dst
    _bounded("source", row, num_src, where)
    _bounded("destination", col, num_dst, where)
    if num_src is None:
        num_src = int(row.max()) + 1 if row.numel() else 0
    if num_dst is None:
        num_dst = int(col.max()) + 1 if col.numel() else 0
    return row, col, (num_src, num_dst)


def from_coo(
    row: Tensor, col: Tensor, layout: EdgeLayout, size: tuple[int, int]
) -> tuple[Tensor, Tensor]:
    """The edge list ``(row, col)`` (edge-id order) in ``layout``; ties keep edge-id order."""
    if layout == EdgeLayout.COO:
        return row, col
    if layout == EdgeLayout.CSR:
        perm = torch.sort(row, stable=True).indices
        counts = torch.bincount(row, minlength=size[0])
        return torch.cat([row.new_zeros(1), counts.cumsum(0)]), col[perm]
    perm = torch.sort(col, stable=True).indices
    counts = torch.bincount(col, minlength=size[1])
    return row[perm], torch.cat([col.new_zeros(1), counts.cumsum(0)])
