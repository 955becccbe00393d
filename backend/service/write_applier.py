"""Graph writes through the service: new nodes by key, edges added and removed, one version each.

A write is one ``WriteGraph`` call. Every change is checked before anything is stored; then
new keys get ids in the id map, their nodes' rows go to the feature store (a node type with
attributes takes no node without a row of each, so no version has a node without rows), the
write goes to the durable log as the next graph version, and that version is built, so the
call returns once the write is durable and sampled from.
Writes run one at a time (the id map's next ids and the versions advance together). A process
killed after the id map step keeps those keys' ids for the next write that names them.
"""
from __future__ import annotations

import numpy as np

from gnnstore.backend.features.tiered_feature_store import TieredFeatureStore
from gnnstore.backend.versions.graph_versions import MAX_WRITE_EDGES, EdgeWrite, GraphVersions, edges_of
from gnnstore.backend.versions.write_log import WriteRecord
from gnnstore.common.disk import ensure_free, full_disk_as_error
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import NodeType, describe
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import (
    array_from_proto,
    attr_name_from_wire,
    edge_type_from_proto,
    edge_type_to_proto,
    id_array_from_proto,
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
        features: the served feature store, where new nodes' rows go.
    """

    def __init__(self, versions: GraphVersions, id_map: IdMap, features: TieredFeatureStore) -> None:
        self._versions = versions
        self._id_map = id_map
        self._features = features

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
        rows = {node_type: self._rows(node_type, entry, len(nodes[node_type]))
                for node_type, entry in zip(nodes, request.nodes, strict=True)}
        edges = {}
        for change in request.edges:
            edge_type = edge_type_from_proto(change.edge_type)
            if edge_type in edges:
                raise InvalidRequestError(f"{edges_of(edge_type)} are named twice in one write")
            where = edges_of(edge_type)
            edges[edge_type] = EdgeWrite(*(
                id_array_from_proto(getattr(change, name), f"{where}: {name}") if change.HasField(name)
                else np.empty(0, np.int64)
                for name in ("add_src", "add_dst", "remove")
            ))
        removed_nodes = {}
        for entry in request.remove_nodes:
            node_type = node_type_from_proto(entry.node_type)
            if node_type in removed_nodes:
                raise InvalidRequestError(f"node type {describe(node_type)} is named twice in remove_nodes")
            removed_nodes[node_type] = id_array_from_proto(entry.ids, f"nodes of {describe(node_type)} to remove")
        versions = self._versions
        with versions.write_lock:
            counts = {node_type: self._count_after(node_type, keys) for node_type, keys in nodes.items()}
            record = versions.prepare(counts, edges, removed_nodes)
            for node_type, keys in nodes.items():
                self._require_rows(node_type, keys, rows[node_type])
            self._check_space(nodes, rows, record)
            node_ids = {node_type: self._id_map.map_keys(node_type, keys) for node_type, keys in nodes.items()}
            for node_type, ids in node_ids.items():
                self._store_rows(node_type, ids, rows[node_type])
            with full_disk_as_error(self._id_map.path, "graph write", say_where=False):
                view = versions.commit(record)
        reply = graph_pb2.WriteGraphResponse(graph_version=view.graph_version)
        for node_type, ids in node_ids.items():
            reply.node_ids.add(node_type=node_type_to_proto(node_type), ids=ids_to_proto(ids))
        for edge_type, changes in record.edges.items():
            reply.edges.add(
                edge_type=edge_type_to_proto(edge_type),
                added=ids_to_proto(changes.add_e_id),
                removed=ids_to_proto(changes.remove),
            )
        return reply

    def _rows(self, node_type: NodeType | None, entry: graph_pb2.NodeKeys, count: int) -> dict[str | None, np.ndarray]:
        """The entry's rows by attribute, one per key (``_require_rows`` checks none is missing),
        each as its attribute's stored array (``bfloat16`` as raw words).

        Raises:
            InvalidRequestError: an unknown attribute or one given twice, or rows of another
                count, dtype or row shape than the stored attribute's.
        """
        schema = {s.attr_name: s for s in self._features.tensor_schema() if s.group_name == node_type}
        given: dict[str | None, np.ndarray] = {}
        for entry_rows in entry.rows:
            name = attr_name_from_wire(entry_rows.attr_name)
            where = f"rows of {describe(node_type)}.{name}"
            if name in given:
                raise InvalidRequestError(f"{where} are given twice")
            if name not in schema:
                raise InvalidRequestError(f"{where}: node type {describe(node_type)} has no attribute {name!r} "
                                          f"(it has {sorted(map(str, schema))}); Put a new attribute instead")
            value = array_from_proto(entry_rows.value, where, words=True)
            want = schema[name]
            if entry_rows.value.dtype != want.dtype or tuple(value.shape) != (count, *want.shape[1:]):
                raise InvalidRequestError(
                    f"{where}: {tuple(value.shape)} {entry_rows.value.dtype} given; {count} key(s) need "
                    f"{(count, *want.shape[1:])} {want.dtype}"
                )
            given[name] = value
        return given

    def _require_rows(
        self, node_type: NodeType | None, keys: list[NodeKey] | np.ndarray, rows: dict[str | None, np.ndarray]
    ) -> None:
        """Refuse a write that would leave a node without a row of one of its type's attributes.

        Raises:
            InvalidRequestError: a key is new (or its node has no rows yet) and an attribute's
                rows are not given; the message names the attributes.
        """
        names = [s.attr_name for s in self._features.tensor_schema() if s.group_name == node_type]
        missing = [name for name in names if name not in rows]
        if not missing:
            return
        have = min(self._features.size(node_type, name)[0] for name in names)
        ids = self._id_map.lookup(node_type, keys)
        if bool(((ids < 0) | (ids >= have)).any()):
            raise InvalidRequestError(
                f"a write that adds nodes of {describe(node_type)} carries a row of each of its attributes, one "
                f"per key; missing: {', '.join(map(str, missing))} (GraphWriter.write(nodes=..., rows=...))"
            )

    def _store_rows(self, node_type: NodeType | None, ids: np.ndarray, rows: dict[str | None, np.ndarray]) -> None:
        """Write the rows of the nodes in ``ids`` that have none yet (new ids, or ids an
        interrupted write gave); a node that has rows keeps them."""
        dtypes = {s.attr_name: s.dtype for s in self._features.tensor_schema() if s.group_name == node_type}
        for name, value in rows.items():
            have = self._features.size(node_type, name)[0]
            missing = ids >= have
            if missing.any():
                new_ids, first = np.unique(ids[missing], return_index=True)
                self._features.write(node_type, name, value[missing][first], dtypes[name], new_ids)

    def _check_space(
        self, nodes: dict[NodeType | None, list[NodeKey] | np.ndarray],
        rows: dict[NodeType | None, dict[str | None, np.ndarray]], record: WriteRecord,
    ) -> None:
        """Refuse a write the disk cannot take before any of it is written (a failed RocksDB write
        would leave the id map refusing writes until reopened).

        Raises:
            ResourceExhaustedError: too little free space for the keys, the rows or the log's record.
        """
        row_bytes = sum(v.nbytes for by_attr in rows.values() for v in by_attr.values())
        key_bytes = sum(keys.nbytes if isinstance(keys, np.ndarray) else sum(len(str(k)) for k in keys)
                        for keys in nodes.values())
        keys = sum(len(k) for k in nodes.values())
        # each new key twice (both directions) with RocksDB's per-entry overhead, and the rows, in
        # the WAL and again when flushed; the record's int64 arrays; room for RocksDB's own files
        needed = 4 * (key_bytes + 32 * keys) + 2 * row_bytes + 8 * sum(
            c.add_src.size + c.add_dst.size + c.add_e_id.size + c.remove.size for c in record.edges.values()
        ) + _WRITE_MARGIN_BYTES
        ensure_free(self._id_map.path, needed, "this graph write")

    def _node_keys(self, request: graph_pb2.WriteGraphRequest) -> dict[NodeType | None, list[NodeKey] | np.ndarray]:
        """The request's new node keys per node type (each type once, at most ``MAX_WRITE_EDGES`` keys)."""
        nodes: dict[NodeType | None, list[NodeKey] | np.ndarray] = {}
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

    def _count_after(self, node_type: NodeType | None, keys: list[NodeKey] | np.ndarray) -> int:
        """``node_type``'s node count once ``keys`` are in the id map (unknown keys get the next
        ids), without writing it.

        Raises:
            InvalidRequestError: a key that is neither int nor str, or an id map with fewer ids
                than the graph has nodes (new keys would take ids that existing nodes hold).
        """
        ids = self._id_map.lookup(node_type, keys)
        missing = ids < 0
        if isinstance(keys, np.ndarray):
            new = np.unique(keys[missing]).size
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

