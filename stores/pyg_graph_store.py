"""PyG's ``GraphStore`` over any of gnnstore's graph stores, for PyG's loaders and in-process use
(the server reads the stores in numpy, without torch)."""
from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.data.graph_store import EdgeLayout

from gnnstore.common.graph_types import EdgeType
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, BaseGraphStore


class PyGGraphStore(GraphStore):
    """PyG's ``GraphStore`` (plus ``iter_edge_index`` and ``version``, in tensors) over ``store``.

    Attributes:
        store: the graph store underneath (closed with this one).
    """

    def __init__(self, store: BaseGraphStore) -> None:
        super().__init__()
        self.store = store

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.store!r})"

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """One fresh ``EdgeAttr`` per stored (edge type, layout), in first-put order."""
        return [
            EdgeAttr(a.edge_type, EdgeLayout(a.layout), is_sorted=a.is_sorted, size=a.size)
            for a in self.store.edge_attrs()
        ]

    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
        """The store's ``iter_edge_index`` chunks as tensors."""
        for row, col, e_id in self.store.iter_edge_index(edge_type, chunk_size):
            yield torch.from_numpy(row), torch.from_numpy(col), torch.from_numpy(e_id)

    def version(self) -> str:
        """The store's version: it changes whenever the stored edges change."""
        return self.store.version()

    def close(self) -> None:
        """Close the store underneath."""
        self.store.close()

    def __enter__(self) -> PyGGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- PyG hooks -------------------------------------------------------------------------

    def _put_edge_index(self, edge_index: object, edge_attr: EdgeAttr) -> bool:
        return self.store.put_edges(
            edge_index, edge_attr.edge_type, EdgeLayout(edge_attr.layout).value, edge_attr.size,
            bool(edge_attr.is_sorted),
        )

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[Tensor, Tensor] | None:
        found = self.store.edge_index(edge_attr.edge_type, EdgeLayout(edge_attr.layout).value)
        return None if found is None else (torch.from_numpy(found[0]), torch.from_numpy(found[1]))

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self.store.remove_edges(edge_attr.edge_type, EdgeLayout(edge_attr.layout).value)
