"""What every gnnstore graph store provides (``BaseGraphStore``), in numpy, without torch.

The sampling engine builds its topology snapshot from any store implementing this: it reads
every edge type once, in chunks, in edge-id order, and records the store's version so a
snapshot knows when it is stale. Edge ids are dense per edge type (``0 .. E-1``) and stable
across calls and processes: ``e_id`` in a batch is an index into this order. PyG's
``GraphStore`` API over any of them is ``PyGGraphStore`` (``pyg_graph_store.py``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import EdgeType

DEFAULT_CHUNK_EDGES = 1 << 20
LAYOUTS = ("coo", "csr", "csc")
"""The edge layouts, as PyG's ``EdgeLayout`` values name them."""


@dataclass(frozen=True)
class StoredEdgeAttr:
    """One stored (edge type, layout), as PyG's ``EdgeAttr`` describes it: ``layout`` is the
    layout's name (``"coo"``, ``"csr"``, ``"csc"``) and ``size`` is
    ``(num_src_nodes, num_dst_nodes)``."""

    edge_type: EdgeType | str | None
    layout: str
    is_sorted: bool
    size: tuple[int, int]


def checked_layout(layout: object) -> str:
    """The name of a layout given by name or as PyG's ``EdgeLayout``.

    Raises:
        InvalidRequestError: any other layout.
    """
    name = getattr(layout, "value", layout)
    if name not in LAYOUTS:
        raise InvalidRequestError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return name


class BaseGraphStore(ABC):
    """A graph store: edges put and read by (edge type, layout), streamed, and versioned.

    Implementers' duties:
      * ``edge_attrs()`` lists every stored ``(edge type, layout)`` with a correct ``size``;
      * ``iter_edge_index`` yields the canonical edge list of one edge type as
        ``(row, col, e_id)`` chunks of int64 global ids, in ascending ``e_id`` order, each chunk
        at most ``chunk_size`` edges;
      * ``version()`` changes whenever any edge is added or removed, and survives reopening.
    """

    @abstractmethod
    def edge_attrs(self) -> list[StoredEdgeAttr]:
        """One record per stored (edge type, layout), in first-put order."""

    @abstractmethod
    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield ``(row, col, e_id)`` chunks (global ids) of ``edge_type`` in edge-id order.

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
        """

    @abstractmethod
    def edge_index(self, edge_type: EdgeType | str | None, layout: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The two arrays of ``edge_type``'s edges in ``layout`` (PyG's forms: ``(row, col)``,
        ``(rowptr, col)`` or ``(row, colptr)``), or ``None`` when that layout is not stored."""

    @abstractmethod
    def put_edges(
        self, edge_index: object, edge_type: EdgeType | str | None, layout: str,
        size: tuple[int, int] | None = None, is_sorted: bool = False,
    ) -> bool:
        """Store ``edge_index`` (a pair of 1-D integer arrays or tensors, or a ``[2, E]`` one) as
        ``edge_type``'s edges in ``layout``, replacing what that layout held.

        Raises:
            InvalidRequestError: a malformed edge index, type, size or layout, naming it.
            PreconditionError: the store is read-only.
        """

    @abstractmethod
    def remove_edges(self, edge_type: EdgeType | str | None, layout: str) -> bool:
        """Delete ``edge_type``'s edges in ``layout``; whether they were stored."""

    @abstractmethod
    def version(self) -> str:
        """An opaque token that changes whenever the stored edges change."""

    def close(self) -> None:
        """Release the database handle; the default holds none."""

    def __enter__(self) -> BaseGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
