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
from gnnstore.proto.codec import edge_type_from_proto, edge_type_to_proto, tensor_from_proto

SERVICE = "GraphService"


class RemoteGraphStore(GraphStore):
    """PyG GraphStore whose edges live on a gnnstore server; safe to pickle into workers.

    Edge lists and sizes are those of the server's newest graph version (graph writes make
    them; ``GraphWriter``), or of ``graph_version`` when it is set.

    Args:
        connection: a :class:`Connection`, or a ``"host:port"`` address to open one for.
        graph_version: the graph version ``get_edge_index`` reads (``None``: the newest at
            each call).
    """

    def __init__(self, connection: Connection | str, *, graph_version: int | None = None) -> None:
        super().__init__()
        self.connection = as_connection(connection)
        self.graph_version = graph_version

    def __repr__(self) -> str:
        return f"RemoteGraphStore({self.connection.address!r})"

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """New ``EdgeAttr`` objects, one per stored (edge type, layout), with ``size`` set to
        the newest graph version's node counts (one RPC)."""
        reply = self.connection.call(SERVICE, "ListEdgeAttrs", graph_pb2.ListEdgeAttrsRequest())
        return [
            EdgeAttr(edge_type_from_proto(a.edge_type), a.layout, is_sorted=a.is_sorted,
                     size=(a.num_src_nodes, a.num_dst_nodes))
            for a in reply.edge_attrs
        ]

    def _get_edge_index(self, edge_attr: EdgeAttr) -> EdgeTensorType | None:
        request = graph_pb2.GetEdgeIndexRequest(
            edge_type=edge_type_to_proto(edge_attr.edge_type), layout=edge_attr.layout.value
        )
        if self.graph_version is not None:
            request.graph_version = self.graph_version
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
