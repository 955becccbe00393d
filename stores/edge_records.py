"""The metadata records both embedded graph stores keep per stored (edge type, layout), and
what the stores do alike over them (``RecordedGraphStore``).

A store's metadata is a dict of json values: ``edge:<json [edge type, layout]>`` -> a record
with at least ``size``, ``is_sorted``, ``num_edges`` and ``seq`` (the first-put order, kept when
an edge type is put again); other keys are the store's own.
"""
from __future__ import annotations

import json
from abc import abstractmethod
from pathlib import Path

import numpy as np

from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.stores.base import BaseGraphStore, StoredEdgeAttr, checked_layout
from gnnstore.stores.edge_layout import EdgeTypeKey, check_edge_type, from_coo

_PREFIX = "edge:"


def edge_key(edge_type: EdgeTypeKey, layout: str) -> str:
    """The metadata key of one stored (edge type, layout)."""
    return _PREFIX + json.dumps([edge_type, layout])


def edge_records(meta: dict) -> list[tuple[EdgeTypeKey, str, dict]]:
    """``(edge type, layout, record)`` of every stored (edge type, layout), in first-put order."""
    records = []
    for key, info in meta.items():
        if key.startswith(_PREFIX):
            edge_type, layout = json.loads(key[len(_PREFIX):])
            records.append((tuple(edge_type) if isinstance(edge_type, list) else edge_type, layout, info))
    return sorted(records, key=lambda record: record[2]["seq"])


def edge_attrs(meta: dict) -> list[StoredEdgeAttr]:
    """One record per stored (edge type, layout), in first-put order."""
    return [
        StoredEdgeAttr(edge_type, layout, info["is_sorted"], tuple(info["size"]))
        for edge_type, layout, info in edge_records(meta)
    ]


def canonical_record(meta: dict, edge_type: EdgeTypeKey) -> dict:
    """The record of ``edge_type``'s canonical edge list: its COO layout if one was put, else
    the first layout put.

    Raises:
        NotFoundError: no edges of ``edge_type`` are stored.
    """
    coo = meta.get(edge_key(edge_type, "coo"))
    if coo is not None:
        return coo
    mine = [info for other, _, info in edge_records(meta) if other == edge_type]
    if not mine:
        stored = sorted({repr(attr.edge_type) for attr in edge_attrs(meta)})
        raise NotFoundError(
            f"no edges of edge type {edge_type!r} are stored (stored: {', '.join(stored) or 'none'})"
        )
    return mine[0]


class RecordedGraphStore(BaseGraphStore):
    """A graph store whose subclass keeps ``path``, ``read_only`` and ``_meta`` (these records)."""

    path: Path
    read_only: bool
    _meta: dict

    def edge_attrs(self) -> list[StoredEdgeAttr]:
        """One record per stored (edge type, layout), in first-put order."""
        return edge_attrs(self._meta)

    def edge_index(self, edge_type: EdgeTypeKey, layout: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The two arrays of ``edge_type``'s edges in ``layout``, or ``None`` when not stored."""
        edge_type, layout = check_edge_type(edge_type), checked_layout(layout)
        info = self._meta.get(edge_key(edge_type, layout))
        if info is None:
            return None
        row, col = self._all_edges(info)
        return from_coo(row, col, layout, tuple(info["size"]))

    @abstractmethod
    def _all_edges(self, info: dict) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` of one record in edge-id order, as int64 arrays the caller owns."""

    def _check_writable(self) -> None:
        if self.read_only:
            raise PreconditionError(f"graph store {self.path} is open read-only")

    def _scan_record(self, edge_type: object, chunk_size: object) -> dict:
        """The canonical record of ``edge_type``, to be read in chunks of ``chunk_size``.

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
            InvalidRequestError: ``chunk_size`` below 1 or a malformed edge type.
        """
        edge_type = check_edge_type(edge_type)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise InvalidRequestError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        return canonical_record(self._meta, edge_type)
