"""Writes a PyG Data/HeteroData into the stores: keys to the id map, node tensors, edges.

Order and failure model. Everything that can be checked without writing is checked first (see
``plan.py``), including, for node types the id map already knows, how the new rows fit the
stored features: the ids new keys will get are computed with ``IdMap.lookup`` (read-only) as
the map would give them, so bad input is refused before any write, the id map's included. Then
the writes run in this order, each atomic on its own:

1. the id map, one ``map_keys`` (or ``identity``) per node type;
2. the feature store, one whole-tensor put per (node type, attr) (an SST file switched in by one
   WriteBatch) or, when the ingest adds rows to a type, one indexed put;
3. per edge type: its stored edge attributes removed, one ``put_edges``, which replaces
   the edge type (and gives its edges new ids), then one whole put per edge attribute.

A crash between two writes leaves a prefix of them: ids given to keys whose features or edges
are missing, or some attrs / edge types new and others old; never new edges with the old
edges' attributes (those are removed first, so a crash there leaves the attributes missing). Ids never change once given, every
feature put and edge put replaces what it writes, so re-running the same ingest repairs it: the
same keys get the same ids and the remaining writes are redone, with no duplicated edges.
"""
from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from tqdm import tqdm

from gnnstore.common.dtypes import dtype_name
from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.common.graph_types import EdgeType, NodeType, edge_group_of
from gnnstore.common.tensor_rows import tensor_rows
from gnnstore.ingest.plan import EdgePlan, NodePlan, plan_ingest
from gnnstore.ingest.report import IngestReport, IngestStep

if TYPE_CHECKING:
    from gnnstore.stores.data_dir import Stores
    from gnnstore.stores.id_map import IdMap

logger = logging.getLogger(__name__)


def ingest_graph(
    data: Data | HeteroData,
    stores: Stores,
    *,
    keys: Mapping[NodeType | None, object] | None = None,
    progress: bool = False,
) -> IngestReport:
    """Load ``data`` into ``stores``: node keys, every node-level tensor, every edge type.

    Node rows are stored at the **global** ids the id map gives their keys; edges are
    translated from ``data``'s local positions to global ids. Re-running the same ingest gives
    the same ids and the same edges (edge types are replaced, never appended).

    Args:
        data: a homogeneous ``Data`` (node type and edge type ``None``) or a ``HeteroData``.
        stores: the open stores (``gnnstore.stores.open_stores``).
        keys: external keys (int or str) per node type, one per node in local order; a type
            without keys uses ``0 .. N-1``.
        progress: show a tqdm bar with rows/s on stderr.

    Raises:
        InvalidRequestError: bad tensors, keys or edges, or rows that do not fit the features
            already stored for a type; raised before anything is written.
        PreconditionError: the id map gave other ids than planned (it changed during the
            ingest); the keys keep the ids it gave, and re-running the ingest repairs the rest.
    """
    start = time.perf_counter()
    nodes, edges = plan_ingest(data, keys)
    planned = {plan.node_type: _plan_ids(stores.id_map, plan) for plan in nodes}
    ids = {nt: p.ids for nt, p in planned.items()}
    num_nodes = {nt: p.num_nodes for nt, p in planned.items()}
    for plan in nodes:  # all checked before the first write, the id map's included
        _check_rows_fit(stores, plan, ids[plan.node_type], num_nodes[plan.node_type])
    report = IngestReport()
    total = sum(p.num_nodes * (1 + len(p.attrs)) for p in nodes) + sum(
        e.edge_index.size(1) * (1 + len(e.attrs)) for e in edges
    )
    with tqdm(total=total, unit="rows", unit_scale=True, disable=not progress) as bar:
        for plan in nodes:
            with _step(report, bar, "nodes", _type_label(plan.node_type), plan.num_nodes):
                _map_ids(stores.id_map, plan, planned[plan.node_type])
        for plan in nodes:
            _put_features(stores, plan, ids[plan.node_type], num_nodes[plan.node_type], report, bar)
        for plan in edges:
            _remove_edge_features(stores, plan.edge_type)
            with _step(report, bar, "edges", _type_label(plan.edge_type), plan.edge_index.size(1)):
                _put_edges(stores, plan, ids, num_nodes)
            _put_edge_features(stores, plan, report, bar)
    report.seconds = time.perf_counter() - start
    logger.info("ingest done: %d steps in %.2f s", len(report.steps), report.seconds)
    return report


def _type_label(group: NodeType | EdgeType | None) -> str:
    """``paper``, ``author,writes,paper`` or ``None`` (homogeneous), as the CLI spells types."""
    return ",".join(group) if isinstance(group, tuple) else str(group)


@contextmanager
def _step(report: IngestReport, bar: tqdm, kind: str, name: str, rows: int) -> Iterator[None]:
    """Time one write, add it to ``report`` and advance ``bar`` by its rows."""
    bar.set_description(f"{kind} {name}")
    start = time.perf_counter()
    yield
    report.steps.append(IngestStep(kind, name, rows, time.perf_counter() - start))
    bar.update(rows)


@dataclass
class _IdPlan:
    """The global ids one node type's keys will have, worked out without writing.

    Attributes:
        ids: the **global** id of each local node, known keys' ids and the new keys' ids to be.
        num_nodes: the type's node count once the new keys are mapped.
        new_keys: how many keys the id map does not know yet.
        known_type: whether the id map knows the node type.
    """

    ids: Tensor
    num_nodes: int
    new_keys: int
    known_type: bool


def _plan_ids(id_map: IdMap, plan: NodePlan) -> _IdPlan:
    """The ids ``map_keys`` will give ``plan``'s keys: known keys keep theirs, new keys get
    ``num_nodes, num_nodes+1, ...`` in first-seen order (the plan's keys are unique, so that is
    their local order). A type the id map has never seen gives its keys ``0 .. N-1``.
    """
    if plan.node_type not in id_map.node_types():
        return _IdPlan(torch.arange(plan.num_nodes), plan.num_nodes, plan.num_nodes, False)
    ids = torch.from_numpy(id_map.lookup(plan.node_type, _keys_or_range(plan)))
    new = ids < 0
    new_keys = int(new.sum())
    known = id_map.num_nodes(plan.node_type)
    ids[new] = torch.arange(known, known + new_keys)
    return _IdPlan(ids, known + new_keys, new_keys, True)


def _keys_or_range(plan: NodePlan) -> object:
    return plan.keys if plan.keys is not None else torch.arange(plan.num_nodes)


def _map_ids(id_map: IdMap, plan: NodePlan, planned: _IdPlan) -> None:
    """Give the new keys their planned ids (no write when the type and every key are known).

    Raises:
        PreconditionError: the id map gave other ids than planned.
    """
    if planned.known_type and not planned.new_keys:
        return
    if not planned.known_type and plan.keys is None:
        id_map.identity(plan.node_type, plan.num_nodes)  # nothing written per key
        return
    ids = torch.from_numpy(id_map.map_keys(plan.node_type, _keys_or_range(plan)))
    if not torch.equal(ids, planned.ids):
        raise PreconditionError(
            f"node type {plan.node_type!r}: the id map gave this ingest's keys other ids than "
            "planned (was it written to during the ingest?); re-run the ingest to repair it"
        )


def _check_rows_fit(stores: Stores, plan: NodePlan, ids: Tensor, num_nodes: int) -> None:
    """Check that after this ingest every attr of the type has exactly ``num_nodes`` rows.

    An ingest that covers every id of the type replaces its attrs whole; one that covers only
    some ids updates those rows, which needs each attr already stored with the same dtype and
    row shape, and leaves no id without a row.
    """
    if plan.num_nodes == num_nodes:
        return
    nt = plan.node_type
    stored = {s.attr_name: s for s in stores.feature_store.tensor_schema() if s.group_name == nt}
    for name, tensor in plan.attrs.items():
        schema = stored.get(name)
        if schema is None:
            raise InvalidRequestError(
                f"node type {nt!r} has {num_nodes} nodes but attr {name!r} is given for "
                f"{plan.num_nodes} of them and not stored for the others"
            )
        given = dtype_name(tensor.dtype)
        if schema.dtype != given or tuple(schema.shape[1:]) != tuple(tensor.shape[1:]):
            raise InvalidRequestError(
                f"node type {nt!r}: attr {name!r} is stored as {schema.dtype} rows of shape "
                f"{list(schema.shape[1:])}, got {given} rows of shape "
                f"{list(tensor.shape[1:])}"
            )
    for name, schema in stored.items():
        rows_after = schema.shape[0]
        if name in plan.attrs:
            rows_after += int((ids >= schema.shape[0]).sum())
        if rows_after < num_nodes:
            raise InvalidRequestError(
                f"node type {nt!r}: attr {name!r} would have no row for {num_nodes - rows_after} "
                f"of its {num_nodes} nodes; give {name!r} for every new node"
            )


def _put_features(
    stores: Stores, plan: NodePlan, ids: Tensor, num_nodes: int, report: IngestReport, bar: tqdm
) -> None:
    """Put every attr of one node type: whole when the ingest covers the type, else by id."""
    whole = plan.num_nodes == num_nodes
    in_order = whole and bool(torch.equal(ids, torch.arange(num_nodes)))
    for name, tensor in plan.attrs.items():
        label = name if plan.node_type is None else f"{plan.node_type}.{name}"
        with _step(report, bar, "features", label, plan.num_nodes):
            rows, index = tensor, None if whole else ids
            if whole and not in_order:  # every id, permuted: scatter into global order
                rows = torch.empty_like(tensor)
                rows[ids] = tensor
            _put_rows(stores, plan.node_type, name, rows, index)


def _remove_edge_features(stores: Stores, edge_type: EdgeType | None) -> None:
    """Remove every stored attr of ``edge_type``'s edges: their rows belong to edge ids that the
    edge type's new put gives to other edges."""
    group = edge_group_of(edge_type)
    for schema in stores.feature_store.tensor_schema():
        if schema.group_name == group:
            stores.feature_store.remove(group, schema.attr_name)


def _put_edge_features(stores: Stores, plan: EdgePlan, report: IngestReport, bar: tqdm) -> None:
    """Put every edge attr of one edge type whole, a row per edge in edge-id order."""
    for name, tensor in plan.attrs.items():
        with _step(report, bar, "features", f"{_type_label(plan.edge_type)}.{name}", tensor.size(0)):
            _put_rows(stores, edge_group_of(plan.edge_type), name, tensor)


def _put_edges(
    stores: Stores, plan: EdgePlan, ids: dict[NodeType | None, Tensor],
    num_nodes: dict[NodeType | None, int],
) -> None:
    """Replace one edge type by ``plan``'s edges, translated to global ids."""
    row = _global(ids[plan.src_type], plan.edge_index[0])
    col = _global(ids[plan.dst_type], plan.edge_index[1])
    stores.graph_store.put_edges((row, col), plan.edge_type, "coo", (num_nodes[plan.src_type], num_nodes[plan.dst_type]))


def _put_rows(stores: Stores, group: object, name: str, rows: Tensor, index: Tensor | None = None) -> None:
    """Write ``rows`` of one attribute (whole, or at ``index``)."""
    array, dtype = tensor_rows(rows, f"feature {group!r}.{name!r}")
    stores.feature_store.write(group, name, array, dtype, None if index is None else index.numpy())


def _global(ids: Tensor, positions: Tensor) -> Tensor:
    """The global ids of local ``positions``: themselves when the ids are ``0 .. N-1`` in local
    order (a first ingest), so no copy of the edges is made; translated a chunk at a time into
    an unnamed temporary file (in ``$TMPDIR``), read back memory-mapped, when there are more
    than ``TRANSLATE_CHUNK`` (a re-attach's edges stay out of the heap, as its read left them)."""
    if torch.equal(ids, torch.arange(ids.numel())):
        return positions
    if positions.numel() <= TRANSLATE_CHUNK:
        return ids[positions]
    with tempfile.TemporaryFile() as file:
        out = np.memmap(file, dtype=np.int64, mode="w+", shape=(positions.numel(),))
    for low in range(0, positions.numel(), TRANSLATE_CHUNK):
        high = min(positions.numel(), low + TRANSLATE_CHUNK)
        out[low:high] = ids[positions[low:high]].numpy()
    return torch.from_numpy(out)


TRANSLATE_CHUNK = 1 << 22
"""Edge ends translated to global ids at a time (32 MB of int64)."""
