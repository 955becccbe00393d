"""Graph writes through the service: new nodes by key, edges added and removed, one version each.

A write is one ``WriteGraph`` call. Every change is checked before anything is stored; then
new keys get ids in the id map, the write goes to the durable log as the next graph version,
and that version is built, so the call returns once the write is durable and sampled from.
Writes run one at a time (the id map's next ids and the versions advance together). A process
killed after the id map step keeps those keys' ids for the next write that names them.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.typing import NodeType

from gnnstore.backend.versions.graph_versions import MAX_WRITE_EDGES, EdgeWrite, GraphVersions, edges_of
from gnnstore.backend.versions.write_log import WriteRecord
from gnnstore.common.disk import ensure_free, full_disk_as_error
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import describe
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import (
    edge_type_from_proto,
    edge_type_to_proto,
    ids_from_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
)
from gnnstore.proto.key_codec import keys_from_proto
from gnnstore.stores.id_map import IdMap, NodeKey

_WRITE_MARGIN_BYTES = 1 << 20
"""Free space a graph write needs beyond its own bytes (RocksDB's log rolls, the record's header)."""


class WriteApplier:
    """Applies ``WriteGraph`` requests to the id map and the graph versions.

    Args:
        versions: the served graph versions (and their write log).
        id_map: the persistent key <-> id map new nodes join.
    """

    def __init__(self, versions: GraphVersions, id_map: IdMap) -> None:
        self._versions = versions
        self._id_map = id_map

    def write(self, request: graph_pb2.WriteGraphRequest) -> graph_pb2.WriteGraphResponse:
        """Apply one write; the reply names the version it made, the new nodes' ids and the
        added edges' ids.

        Raises:
            InvalidRequestError: a malformed or invalid change (nothing is stored).
            NotFoundError: an unknown node type.
            PreconditionError: the server is read-only.
            ResourceExhaustedError: the disk has too little space (nothing is stored).
        """
        if not request.nodes and not request.edges and not request.remove_nodes:
            raise InvalidRequestError("the write names no nodes and no edges: nothing to write")
        nodes = self._node_keys(request)
        edges = {}
        for change in request.edges:
            edge_type = edge_type_from_proto(change.edge_type)
            if edge_type in edges:
                raise InvalidRequestError(f"{edges_of(edge_type)} are named twice in one write")
            where = edges_of(edge_type)
            edges[edge_type] = EdgeWrite(*(
                ids_from_proto(getattr(change, name), f"{where}: {name}").numpy() if change.HasField(name)
                else np.empty(0, np.int64)
                for name in ("add_src", "add_dst", "remove")
            ))
        removed_nodes = {}
        for entry in request.remove_nodes:
            node_type = node_type_from_proto(entry.node_type)
            if node_type in removed_nodes:
                raise InvalidRequestError(f"node type {describe(node_type)} is named twice in remove_nodes")
            removed_nodes[node_type] = ids_from_proto(entry.ids, f"nodes of {describe(node_type)} to remove").numpy()
        versions = self._versions
        with versions.write_lock:
            counts = {node_type: self._count_after(node_type, keys) for node_type, keys in nodes.items()}
            record = versions.prepare(counts, edges, removed_nodes)
            self._check_space(nodes, record)
            node_ids = {node_type: self._id_map.map_keys(node_type, keys) for node_type, keys in nodes.items()}
            with full_disk_as_error(self._id_map.path, "graph write", say_where=False):
                view = versions.commit(record)
        reply = graph_pb2.WriteGraphResponse(graph_version=view.graph_version)
        for node_type, ids in node_ids.items():
            reply.node_ids.add(node_type=node_type_to_proto(node_type), ids=ids_to_proto(ids))
        for edge_type, changes in record.edges.items():
            reply.edges.add(
                edge_type=edge_type_to_proto(edge_type),
                added=ids_to_proto(torch.from_numpy(changes.add_e_id)),
                removed=ids_to_proto(torch.from_numpy(changes.remove)),
            )
        return reply

    def _check_space(self, nodes: dict[NodeType | None, list[NodeKey] | Tensor], record: WriteRecord) -> None:
        """Refuse a write the disk cannot take before any of it is written (a failed RocksDB write
        would leave the id map refusing writes until reopened).

        Raises:
            ResourceExhaustedError: too little free space for the id map's keys or the log's record.
        """
        key_bytes = sum(keys.numel() * 8 if isinstance(keys, Tensor) else sum(len(str(k)) for k in keys)
                        for keys in nodes.values())
        keys = sum(len(k) for k in nodes.values())
        # each new key twice (both directions) with RocksDB's per-entry overhead, in the WAL and
        # again when flushed; the record's int64 arrays; and room for RocksDB's own files
        needed = 4 * (key_bytes + 32 * keys) + 8 * sum(
            c.add_src.size + c.add_dst.size + c.add_e_id.size + c.remove.size for c in record.edges.values()
        ) + _WRITE_MARGIN_BYTES
        ensure_free(self._id_map.path, needed, "this graph write")

    def _node_keys(self, request: graph_pb2.WriteGraphRequest) -> dict[NodeType | None, list[NodeKey] | Tensor]:
        """The request's new node keys per node type (each type once, at most ``MAX_WRITE_EDGES`` keys)."""
        nodes: dict[NodeType | None, list[NodeKey] | Tensor] = {}
        for entry in request.nodes:
            node_type = node_type_from_proto(entry.node_type)
            if node_type in nodes:
                raise InvalidRequestError(f"node type {describe(node_type)} is named twice in one write")
            if node_type not in self._versions.base.num_nodes:
                raise InvalidRequestError(
                    f"node type {describe(node_type)} is not in the graph; writes add nodes of existing types"
                )
            nodes[node_type] = keys_from_proto(entry.keys)
        total = sum(len(keys) for keys in nodes.values())
        if total > MAX_WRITE_EDGES:
            raise InvalidRequestError(f"{total:,} node keys in one write is over the limit of {MAX_WRITE_EDGES:,}; split it")
        return nodes

    def _count_after(self, node_type: NodeType | None, keys: list[NodeKey] | Tensor) -> int:
        """``node_type``'s node count once ``keys`` are in the id map (unknown keys get the next
        ids), without writing it.

        Raises:
            InvalidRequestError: a key that is neither int nor str, or an id map with fewer ids
                than the graph has nodes (new keys would take ids that existing nodes hold).
        """
        ids = self._id_map.lookup(node_type, keys).numpy()
        missing = ids < 0
        if isinstance(keys, Tensor):
            new = int(torch.unique(keys[torch.from_numpy(missing)]).numel())
        else:
            new = len({(type(key), key) for key, unknown in zip(keys, missing.tolist()) if unknown})
        mapped = self._id_map.num_nodes(node_type) if node_type in self._id_map.node_types() else 0
        nodes = self._versions.view().snapshot.num_nodes[node_type]
        if new and mapped < nodes:
            raise InvalidRequestError(
                f"node type {describe(node_type)}: the id map gives out {mapped} ids but the graph has {nodes} "
                "nodes, so a new key would take an existing node's id; ingest the graph with its keys to add nodes"
            )
        return int(max(nodes, mapped + new, ids.max(initial=-1) + 1))
