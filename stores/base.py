"""What gnnstore's graph stores add to PyG's ``GraphStore`` contract.

The sampling engine builds its topology snapshot from any store implementing this: it reads
every edge type once, in chunks, in edge-id order, and records the store's version so a
snapshot knows when it is stale. Edge ids are dense per edge type (``0 .. E-1``) and stable
across calls and processes: ``e_id`` in a batch is an index into this order.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator

from torch import Tensor
from torch_geometric.data import GraphStore

from gnnstore.common.graph_types import EdgeType

DEFAULT_CHUNK_EDGES = 1 << 20


class BaseGraphStore(GraphStore):
    """A PyG GraphStore that can also stream its edges and name its version.

    Implementers' duties:
      * ``get_all_edge_attrs()`` lists every stored ``(edge_type, layout)`` with a correct
        ``size=(num_src_nodes, num_dst_nodes)``;
      * ``iter_edge_index`` yields the canonical edge list of one edge type as
        ``(row, col, e_id)`` chunks of int64 global ids, in ascending ``e_id`` order, each chunk
        at most ``chunk_size`` edges;
      * ``version()`` changes whenever any edge is added or removed, and survives reopening.
    """

    @abstractmethod
    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
        """Yield ``(row, col, e_id)`` chunks (global ids) of ``edge_type`` in edge-id order.

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
        """

    @abstractmethod
    def version(self) -> str:
        """An opaque token that changes whenever the stored edges change."""

    def close(self) -> None:
        """Release the database handle; the default holds none."""

    def __enter__(self) -> "BaseGraphStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
