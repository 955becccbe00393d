"""``RemoteGraphStore``: PyG's GraphStore over a gnnstore server (edge attributes and edge lists).

Sampling does not need the edge list in the trainer: ``RemoteNeighborSampler`` samples on the
server. This store lists edge types with their sizes (PyG infers node counts from them) and
streams a whole edge index only when asked (PyG's stock sampler, ``edge_label_index=<type>``).
Edge types decode to ``(src, rel, dst)`` tuples, ``None`` for a homogeneous graph.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.typing import EdgeTensorType

from gnnstore.client.channel import Connection, as_connection
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import edge_type_from_proto, edge_type_to_proto
from gnnstore.proto.tensor_codec import tensor_from_proto

SERVICE = "GraphService"


class RemoteGraphStore(GraphStore):
    """PyG GraphStore whose edges live on a gnnstore server; safe to pickle into workers.

    Like a sampler, it reads one graph version (graph writes make them; ``GraphWriter``): the
    newest when it is first used, or ``graph_version``, until ``switch_version()``. Edge types
    and sizes are read once per version (PyG's loaders ask for them every batch).

    Args:
        connection: a :class:`Connection`, or a ``"host:port"`` address to open one for.
        graph_version: the graph version to read (``None``: the newest at first use).
    """

    def __init__(self, connection: Connection | str, *, graph_version: int | None = None) -> None:
        super().__init__()
        self.connection = as_connection(connection)
        self.graph_version = graph_version
        self._edge_attrs: list[tuple] | None = None

    def __repr__(self) -> str:
        return f"RemoteGraphStore({self.connection.address!r})"

    def switch_version(self, version: int | None = None) -> int:
        """Read graph version ``version`` from now on (``None``: the server's newest); returns it.

        Raises:
            NotFoundError: no such version.
        """
        self.graph_version, self._edge_attrs = version, None
        self.get_all_edge_attrs()
        return self.graph_version

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """New ``EdgeAttr`` objects with ``size`` set, one per stored (edge type, layout)."""
        if self._edge_attrs is None:
            request = graph_pb2.ListEdgeAttrsRequest()
            if self.graph_version is not None:
                request.graph_version = self.graph_version
            reply = self.connection.call(SERVICE, "ListEdgeAttrs", request)
            self._edge_attrs = [
                (edge_type_from_proto(a.edge_type), a.layout, a.is_sorted, (a.num_src_nodes, a.num_dst_nodes))
                for a in reply.edge_attrs
            ]
            self.graph_version = reply.graph_version
        return [
            EdgeAttr(edge_type, layout, is_sorted=is_sorted, size=size)
            for edge_type, layout, is_sorted, size in self._edge_attrs
        ]

    def _get_edge_index(self, edge_attr: EdgeAttr) -> EdgeTensorType | None:
        if self.graph_version is None:
            self.get_all_edge_attrs()  # pins the newest version
        request = graph_pb2.GetEdgeIndexRequest(
            edge_type=edge_type_to_proto(edge_attr.edge_type), layout=edge_attr.layout.value,
            graph_version=self.graph_version,
        )
        firsts: list[Tensor] = []
        seconds: list[Tensor] = []
        for chunk in self.connection.stream_all(SERVICE, "GetEdgeIndex", request):
            firsts.append(tensor_from_proto(chunk.first))
            seconds.append(tensor_from_proto(chunk.second))
        empty = torch.empty(0, dtype=torch.long)
        return (torch.cat(firsts) if firsts else empty, torch.cat(seconds) if seconds else empty)

    def _put_edge_index(self, edge_index: EdgeTensorType, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(
            "a GraphStore put replaces an edge type; add and remove edges with "
            "GraphWriter(fs).write(...), or load an edge type with `gnnstore ingest`"
        )

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(
            "the gnnstore service does not remove edges; re-ingest the edge type instead"
        )
