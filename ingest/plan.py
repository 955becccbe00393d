"""Checks a PyG graph and its keys completely, before anything is written, into an ingest plan."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from gnnstore.common.dtypes import ITEMSIZE
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import EdgeType, NodeType

logger = logging.getLogger(__name__)

Keys = np.ndarray  # int64 array, or an object array of int and str


@dataclass
class NodePlan:
    """One node type, checked.

    Attributes:
        node_type: ``None`` for a homogeneous graph.
        num_nodes: rows in this ingest.
        keys: the external key of each local node (unique), or ``None`` for ``0 .. N-1``.
        attrs: node-level tensors ``[num_nodes, *]`` by attr name, rows in local order.
    """

    node_type: NodeType | None
    num_nodes: int
    keys: Keys | None
    attrs: dict[str, Tensor]


@dataclass
class EdgePlan:
    """One edge type, checked: ``edge_index`` is ``[2, E]`` int64 of **local** node positions,
    ``attrs`` its edge-level tensors ``[E, *]`` by attr name, a row per edge in edge order."""

    edge_type: EdgeType | None
    src_type: NodeType | None
    dst_type: NodeType | None
    edge_index: Tensor
    attrs: dict[str, Tensor] = field(default_factory=dict)


def plan_ingest(
    data: Data | HeteroData, keys: Mapping[NodeType | None, object] | None = None
) -> tuple[list[NodePlan], list[EdgePlan]]:
    """Check every node type, attr, key column and edge index of ``data``.

    Raises:
        InvalidRequestError: a node type without a node-level tensor, an unsupported dtype,
            keys of the wrong length, type or with duplicates, an edge index that is not
            ``[2, E]`` integers, or an edge whose end is outside its node type.
    """
    if isinstance(data, HeteroData):
        node_items = [(nt, data[nt]) for nt in data.node_types]
        edge_items = [(et, data[et]) for et in data.edge_types]
    elif isinstance(data, Data):
        node_items = [(None, data)]
        edge_items = [(None, data)] if data.edge_index is not None else []
    else:
        raise InvalidRequestError(f"expected a PyG Data or HeteroData, got {type(data).__name__}")
    keys = dict(keys or {})
    unknown = set(keys) - {nt for nt, _ in node_items}
    if unknown:
        raise InvalidRequestError(
            f"keys given for unknown node type(s) {sorted(map(repr, unknown))} "
            f"(the graph has {[nt for nt, _ in node_items]})"
        )
    nodes = [_plan_nodes(nt, store, keys.get(nt)) for nt, store in node_items]
    sizes = {plan.node_type: plan.num_nodes for plan in nodes}
    edges = [_plan_edges(data, et, store, sizes) for et, store in edge_items]
    return nodes, edges


def _plan_nodes(node_type: NodeType | None, store: object, keys: object) -> NodePlan:
    """Node-level tensors and keys of one node type."""
    num_nodes = store.num_nodes
    if num_nodes is None:
        raise InvalidRequestError(f"node type {node_type!r}: cannot tell its number of nodes")
    attrs = {}
    for name in sorted(store.node_attrs()):
        value = _storable(store[name], f"node type {node_type!r}", name)
        if value is not None:
            attrs[name] = value
    if not attrs:
        raise InvalidRequestError(
            f"node type {node_type!r} has no node-level tensor; PyG discovers node types from the "
            f"feature store, so give it one (e.g. x = torch.ones({num_nodes}, 1))"
        )
    return NodePlan(node_type, int(num_nodes), _check_keys(node_type, keys, num_nodes), attrs)


def _check_keys(node_type: NodeType | None, keys: object, num_nodes: int) -> Keys | None:
    """Keys as an int64 or object array, one per node, unique."""
    if keys is None:
        return None
    if isinstance(keys, Tensor):
        keys = keys.detach().cpu().numpy()
    arr = np.asarray(keys) if not isinstance(keys, np.ndarray) else keys
    if arr.dtype.kind in "US" and arr.ndim == 1 and not isinstance(keys, np.ndarray):
        arr = np.empty(len(arr), dtype=object)  # numpy made mixed int/str keys all str:
        arr[:] = list(keys)                     # keep each key as given (5 and "5" differ)
    if arr.ndim != 1 or len(arr) != num_nodes:
        raise InvalidRequestError(
            f"node type {node_type!r}: expected {num_nodes} keys, one per node, got shape "
            f"{list(arr.shape)}"
        )
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.int64)
    else:
        arr = np.asarray(arr.tolist() if arr.dtype.kind != "O" else arr, dtype=object)
        for pos, key in enumerate(arr):
            if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer, str)):
                raise InvalidRequestError(
                    f"node type {node_type!r}: key #{pos} is {key!r} of type "
                    f"{type(key).__name__}; keys must be int or str"
                )
    index = pd.Index(arr)
    if not index.is_unique:
        dup = index[index.duplicated()][0]
        where = np.flatnonzero(arr == dup)[:2].tolist()
        raise InvalidRequestError(
            f"node type {node_type!r}: key {dup!r} appears more than once (positions {where})"
        )
    return arr


def _plan_edges(
    data: Data | HeteroData, edge_type: EdgeType | None, store: object, sizes: dict[NodeType | None, int]
) -> EdgePlan:
    """The edge index of one edge type, checked against its node types' sizes, and its
    edge-level tensors."""
    src_type, dst_type = (None, None) if edge_type is None else (edge_type[0], edge_type[-1])
    for node_type in (src_type, dst_type):
        if node_type not in sizes:
            raise InvalidRequestError(
                f"edge type {edge_type!r}: node type {node_type!r} has no nodes in the graph"
            )
    edge_index = store.edge_index
    if isinstance(edge_index, np.ndarray):
        edge_index = torch.from_numpy(edge_index)
    if (
        not isinstance(edge_index, Tensor)
        or edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.dtype.is_floating_point
        or edge_index.dtype in (torch.bool, torch.complex64, torch.complex128)
    ):
        got = f"{edge_index.dtype} of shape {list(edge_index.shape)}" if isinstance(
            edge_index, Tensor) else type(edge_index).__name__
        raise InvalidRequestError(
            f"edge type {edge_type!r}: edge_index must be an integer tensor of shape [2, E], "
            f"got {got}"
        )
    edge_index = edge_index.detach().cpu().long()
    for row, node_type, side in ((0, src_type, "source"), (1, dst_type, "destination")):
        ends = edge_index[row]
        if ends.numel() and (int(ends.min()) < 0 or int(ends.max()) >= sizes[node_type]):  # no mask held for a good one
            pos = int(((ends < 0) | (ends >= sizes[node_type])).nonzero()[0, 0])
            raise InvalidRequestError(
                f"edge type {edge_type!r}: edge #{pos} has {side} {int(ends[pos])}, outside node "
                f"type {node_type!r} (0..{sizes[node_type] - 1})"
            )
    return EdgePlan(edge_type, src_type, dst_type, edge_index, _edge_attrs(data, edge_type, store))


def _edge_attrs(data: Data | HeteroData, edge_type: EdgeType | None, store: object) -> dict[str, Tensor]:
    """The edge-level tensors of one edge type with a row per edge (``edge_attr``, weights, ...).

    Raises:
        InvalidRequestError: one of a dtype the feature store cannot hold.
    """
    attrs = {}
    for name in sorted(k for k in store.keys() if k != "edge_index" and store.is_edge_attr(k)):
        value = store[name]
        if isinstance(value, (Tensor, np.ndarray)) and data.__cat_dim__(name, value, store) != 0:
            logger.warning("edge type %r: edge-level attr %r has no row per edge; skipped", edge_type, name)
            continue
        value = _storable(value, f"edge type {edge_type!r}", name)
        if value is not None:
            attrs[name] = value
    return attrs


def _storable(value: object, owner: str, name: str) -> Tensor | None:
    """``value`` as a CPU tensor the feature store can hold; ``None`` (and a warning) when it
    is not a tensor.

    Raises:
        InvalidRequestError: a dtype the feature store cannot hold.
    """
    if isinstance(value, np.ndarray) and value.dtype != object:
        value = torch.from_numpy(value)
    if not isinstance(value, Tensor):
        logger.warning("%s: attr %r is a %s, not a tensor; skipped", owner, name, type(value).__name__)
        return None
    if str(value.dtype).removeprefix("torch.") not in ITEMSIZE:
        raise InvalidRequestError(f"{owner}: attr {name!r} has dtype {value.dtype}, which the feature store cannot hold")
    return value.detach().cpu()
