"""Graph writes from a client: add nodes by key, add and remove edges, one new graph version per call.

    writer = GraphWriter(fs)                        # a writer-role token when the server has tokens
    done = writer.write(nodes={"paper": ["p-new"]},  # with a row of each of the type's attributes
                        rows={"paper": {"x": torch.zeros(1, 128), "y": torch.tensor([3])}})
    paper = done.node_ids["paper"]                  # the new node's global id
    done = writer.write(add_edges={("paper", "cites", "paper"): (paper, torch.tensor([0]))},
                        remove_edges={("paper", "cites", "paper"): torch.tensor([17])})
    done.version, done.edge_ids                     # the version made; the added edges' ids

Each call is atomic (all of it or none) and durable when it returns; samplers read the new
version once they switch to it (``RemoteNeighborSampler.switch_version``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.typing import EdgeType, NodeType

from gnnstore.client.channel import Connection
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import (
    attr_name_to_wire,
    edge_type_from_proto,
    edge_type_to_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
)
from gnnstore.proto.key_codec import keys_to_proto
from gnnstore.proto.tensor_codec import ids_from_proto, tensor_to_proto

NodeKeys = Sequence[int | str] | Tensor


@dataclass(frozen=True)
class GraphWrite:
    """What one write made: its graph version, the nodes' global ids per node type (in key
    order), the added edges' ids per edge type (in the order sent) and the removed ones
    (ascending; with a removed node's edges)."""

    version: int
    node_ids: dict[NodeType | None, Tensor]
    edge_ids: dict[EdgeType | None, Tensor]
    removed_edge_ids: dict[EdgeType | None, Tensor]


class GraphWriter:
    """Writes to a gnnstore server's graph (its ``WriteGraph`` RPC; the writer role).

    Args:
        client: a remote store or a :class:`Connection` to share.
        timeout: deadline of each write (default: the connection's).
    """

    def __init__(self, client: Connection | RemoteFeatureStore | RemoteGraphStore, timeout: float | None = None) -> None:
        if isinstance(client, (RemoteFeatureStore, RemoteGraphStore)):
            client = client.connection
        if not isinstance(client, Connection):
            raise InvalidRequestError(f"expected a remote store or a Connection, got {type(client).__name__}")
        self.connection = client
        self.timeout = timeout

    def write(
        self,
        *,
        nodes: Mapping[NodeType | None, NodeKeys] | None = None,
        rows: Mapping[NodeType | None, Mapping[str | None, Tensor]] | None = None,
        add_edges: Mapping[EdgeType | None, tuple[Tensor, Tensor]] | None = None,
        remove_edges: Mapping[EdgeType | None, Tensor] | None = None,
        remove_nodes: Mapping[NodeType | None, Tensor] | None = None,
    ) -> GraphWrite:
        """One atomic, durable write; ``None`` is the homogeneous graph's node (edge) type.

        Args:
            nodes: node type → keys; unknown keys become new nodes, known ones keep their ids.
            rows: node type → attribute name → rows, one per key of ``nodes`` in key order, for
                every node attribute the type has (``fs.schema()``): a node is never in a graph
                version without its rows. They are stored for the keys whose nodes have none
                yet; a node that has rows keeps them (change them with a Put).
            add_edges: edge type → ``(src, dst)`` global ids (of nodes in the version this write
                makes: new nodes of an earlier write, or of ``nodes`` here once their ids are known).
            remove_edges: edge type → edge ids (``batch.e_id``) of edges in the newest version.
            remove_nodes: node type → global ids whose edges (every edge type's, in the newest
                version) are removed; the nodes keep their ids and keys, without edges.

        Raises:
            InvalidRequestError: a change the server refused (nothing was written), e.g. new
                nodes without a row of each of their type's attributes.
            PermissionDeniedError: the token is not a writer's.
            PreconditionError: the server is read-only or samples live from Neo4j.
        """
        request = graph_pb2.WriteGraphRequest()
        for node_type, keys in (nodes or {}).items():
            entry = request.nodes.add(node_type=node_type_to_proto(node_type), keys=keys_to_proto(keys))
            for attr_name, value in (rows or {}).get(node_type, {}).items():
                entry.rows.add(attr_name=attr_name_to_wire(attr_name), value=tensor_to_proto(torch.as_tensor(value)))
        unknown = set(rows or {}) - set(nodes or {})
        if unknown:
            raise InvalidRequestError(f"rows are given for node types {sorted(map(str, unknown))} without their keys")
        edge_types = list(dict.fromkeys([*(add_edges or {}), *(remove_edges or {})]))
        for edge_type in edge_types:
            change = request.edges.add(edge_type=edge_type_to_proto(edge_type))
            if edge_type in (add_edges or {}):
                src, dst = add_edges[edge_type]
                change.add_src.CopyFrom(_ids(src, edge_type, "sources"))
                change.add_dst.CopyFrom(_ids(dst, edge_type, "destinations"))
            if edge_type in (remove_edges or {}):
                change.remove.CopyFrom(_ids(remove_edges[edge_type], edge_type, "edge ids to remove"))
        for node_type, ids in (remove_nodes or {}).items():
            request.remove_nodes.add(node_type=node_type_to_proto(node_type), ids=_ids(ids, node_type, "nodes to remove"))
        reply = self.connection.call("GraphService", "WriteGraph", request, timeout=self.timeout)
        return GraphWrite(
            reply.graph_version,
            {node_type_from_proto(n.node_type): ids_from_proto(n.ids) for n in reply.node_ids},
            {edge_type_from_proto(e.edge_type): ids_from_proto(e.added) for e in reply.edges},
            {edge_type_from_proto(e.edge_type): ids_from_proto(e.removed) for e in reply.edges},
        )


def _ids(values: object, of_type: NodeType | EdgeType | None, what: str) -> object:
    """Integer ids as they travel.

    Raises:
        InvalidRequestError: not integers (a float id would be cut, not refused).
    """
    ids = torch.as_tensor(values)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise InvalidRequestError(f"{of_type!r}: {what} must be integer ids, got {ids.dtype}")
    return ids_to_proto(ids)
