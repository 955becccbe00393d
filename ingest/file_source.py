"""Graphs from files: node files (CSV or Parquet, optionally a ``.npy`` matrix) and edge lists.

Conventions, per node type (``None`` for a homogeneous graph):

* a node file has a key column (``key`` unless told otherwise) holding the external keys, int or
  str (a CSV key column is int when every value is an integer, else str; a Parquet column keeps
  its type); an optional label column ``y`` (int64); any ``*_mask`` columns (bool: 1/0,
  true/false); every other column is a feature, stacked in file order into ``x`` (float32);
* a ``.npy`` matrix can give ``x`` instead (row i belongs to the node file's row i); given alone,
  without a node file, its rows are the nodes ``0 .. N-1``;
* an edge file, one per edge type, has columns ``src`` and ``dst`` holding keys of the source
  and destination node types, one edge per row; every other column is an edge feature,
  stacked in file order into the edge type's ``edge_attr`` (float32, a row per edge).

Every file is read and checked, and every edge resolved to its nodes, before anything is
written: a malformed file raises ``MalformedFileError`` naming the file, the line (CSV, 1-based,
header included) or row (Parquet, 0-based) and the column, and leaves the stores untouched.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from gnnstore.common.errors import InvalidRequestError, MalformedFileError
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.ingest.file_columns import DST_COLUMN, KEY_COLUMN, LABEL_COLUMN, MASK_SUFFIX, SRC_COLUMN
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.ingest.report import IngestReport
from gnnstore.ingest.table_reader import is_csv, position, read_header, read_table

if TYPE_CHECKING:
    from gnnstore.stores.data_dir import Stores

logger = logging.getLogger(__name__)



@dataclass
class _Nodes:
    """One node type read from its files: keys (``None``: ``0 .. N-1``) and tensors."""

    num_nodes: int
    keys: np.ndarray | None
    attrs: dict[str, Tensor]
    source: Path

    def index(self) -> pd.Index:
        return pd.RangeIndex(self.num_nodes) if self.keys is None else pd.Index(self.keys)

    def int_keys(self) -> bool:
        return self.keys is None or self.keys.dtype == np.int64


def ingest_files(
    stores: Stores,
    *,
    nodes: Mapping[NodeType | None, Path] | None = None,
    edges: Mapping[EdgeType | None, Path] | None = None,
    features: Mapping[NodeType | None, Path] | None = None,
    key_column: str = KEY_COLUMN,
    label_column: str = LABEL_COLUMN,
    progress: bool = False,
) -> IngestReport:
    """Read node and edge files (see the module docstring) and ingest them as one graph.

    Args:
        stores: the open stores.
        nodes: node file per node type (``{None: path}`` for a homogeneous graph).
        edges: edge file per edge type (``{None: path}`` for a homogeneous graph).
        features: ``.npy`` feature matrix per node type, in place of feature columns.
        key_column: the node files' key column (default ``key``).
        label_column: the node files' label column (default ``y``), optional in each file.
        progress: show a tqdm bar on stderr.

    Raises:
        MalformedFileError: a file that cannot be read as declared; nothing is written.
        InvalidRequestError: a mix of homogeneous and typed files, or an edge type whose node
            type has no node file.
    """
    data, keys = read_graph_files(
        nodes=nodes, edges=edges, features=features,
        key_column=key_column, label_column=label_column,
    )
    return ingest_graph(data, stores, keys=keys, progress=progress)


def read_graph_files(
    *,
    nodes: Mapping[NodeType | None, Path] | None = None,
    edges: Mapping[EdgeType | None, Path] | None = None,
    features: Mapping[NodeType | None, Path] | None = None,
    key_column: str = KEY_COLUMN,
    label_column: str = LABEL_COLUMN,
) -> tuple[Data | HeteroData, dict[NodeType | None, np.ndarray | None]]:
    """The graph in the files, with edges as local positions, and the keys per node type.

    Raises:
        MalformedFileError: see ``ingest_files``.
        InvalidRequestError: see ``ingest_files``.
    """
    nodes, edges, features = dict(nodes or {}), dict(edges or {}), dict(features or {})
    types = set(nodes) | set(features) | set(edges)
    if not nodes and not features:
        raise InvalidRequestError("no node files given: each node type needs a node file or .npy")
    homogeneous = types == {None}
    if None in types and not homogeneous:
        raise InvalidRequestError(
            "give either one untyped node/edge file (a homogeneous graph) or typed files, not both"
        )
    tables = {
        nt: _read_nodes(nt, nodes.get(nt), features.get(nt), key_column, label_column)
        for nt in dict.fromkeys([*nodes, *features])
    }
    edge_lists = {et: _read_edges(et, path, tables) for et, path in edges.items()}
    keys = {nt: table.keys for nt, table in tables.items()}
    if homogeneous:
        table = tables[None]
        data = Data(num_nodes=table.num_nodes, **table.attrs)
        if None in edge_lists:
            data.edge_index, edge_attr = edge_lists[None]
            if edge_attr is not None:
                data.edge_attr = edge_attr
        return data, keys
    data = HeteroData()
    for nt, table in tables.items():
        data[nt].num_nodes = table.num_nodes
        for name, tensor in table.attrs.items():
            data[nt][name] = tensor
    for et, (index, edge_attr) in edge_lists.items():
        data[et].edge_index = index
        if edge_attr is not None:
            data[et].edge_attr = edge_attr
    return data, keys


def _read_nodes(
    node_type: NodeType | None, path: Path | None, npy: Path | None, key_column: str,
    label_column: str,
) -> _Nodes:
    """Keys, labels, masks and features of one node type."""
    x = _read_npy(npy) if npy is not None else None
    if path is None:
        return _Nodes(len(x), None, {"x": x}, npy)
    header = read_header(path)
    types: dict[str, pa.DataType | None] = {key_column: None}
    feature_columns = []
    for name in header:
        if name == key_column:
            continue
        if name == label_column:
            types[name] = pa.int64()
        elif name.endswith(MASK_SUFFIX):
            types[name] = pa.bool_()
        else:
            types[name] = pa.float32()
            feature_columns.append(name)
    if x is not None and feature_columns:
        raise MalformedFileError(
            f"{path}: has feature columns {feature_columns} and {npy} gives the features too; "
            "keep one"
        )
    table = read_table(path, types)
    keys = _keys(table.column(key_column), path, key_column)
    attrs: dict[str, Tensor] = {}
    if feature_columns:
        x = torch.from_numpy(np.stack([table.column(c).to_numpy() for c in feature_columns], 1))
    if x is not None:
        if len(x) != len(keys):
            raise MalformedFileError(
                f"{npy}: has {len(x)} rows but {path} has {len(keys)} nodes; row i of the matrix "
                "belongs to row i of the node file"
            )
        attrs["x"] = x
    for name, typ in types.items():
        if name != key_column and name not in feature_columns:
            values = table.column(name).to_numpy(zero_copy_only=False)
            attrs[name] = torch.from_numpy(values.astype(np.int64 if typ == pa.int64() else bool))
    if not attrs:
        raise MalformedFileError(
            f"{path}: only a key column; node type {node_type!r} needs at least one feature, "
            "label or mask column (or a .npy matrix)"
        )
    logger.info("node type %r: %d nodes, attrs %s from %s", node_type, len(keys), list(attrs), path)
    return _Nodes(len(keys), keys, attrs, path)


def _read_npy(path: Path) -> Tensor:
    """A feature matrix ``[N, *]`` from a ``.npy`` file."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise MalformedFileError(f"{path}: cannot be read as a .npy matrix ({exc})") from exc
    if array.ndim < 1 or array.dtype.kind not in "fiub":
        raise MalformedFileError(
            f"{path}: expected a numeric matrix [N, *], got {array.dtype} of shape "
            f"{list(array.shape)}"
        )
    return torch.from_numpy(np.ascontiguousarray(array))


def _keys(column: pa.ChunkedArray, path: Path, name: str) -> np.ndarray:
    """The key column as int64, or as an object array of str; keys must be unique."""
    if pa.types.is_integer(column.type):
        keys = column.to_numpy().astype(np.int64)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        keys = None
        if is_csv(path):
            try:
                keys = pc.cast(column, pa.int64()).to_numpy()
            except pa.ArrowInvalid:
                pass  # not every key is an integer: the keys are strings
        if keys is None:
            keys = np.asarray(column.to_pylist(), dtype=object)
    else:
        raise MalformedFileError(
            f"{path}: column {name!r} holds {column.type}; keys must be integers or strings"
        )
    duplicated = pd.Index(keys).duplicated()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated)[0])
        raise MalformedFileError(
            f"{path}: {position(path, row)}, column {name!r}: key {_plain(keys[row])!r} "
            "appears twice"
        )
    return keys


def _read_edges(
    edge_type: EdgeType | None, path: Path, tables: dict[NodeType | None, _Nodes]
) -> tuple[Tensor, Tensor | None]:
    """``[2, E]`` local positions of the edges in ``path``, and their features ``[E, k]`` from
    the other columns (``None`` without any)."""
    ends = (None, None) if edge_type is None else (edge_type[0], edge_type[-1])
    for node_type in ends:
        if node_type not in tables:
            raise InvalidRequestError(
                f"edge type {edge_type!r} ({path}): node type {node_type!r} has no node file"
            )
    feature_columns = [c for c in read_header(path) if c not in (SRC_COLUMN, DST_COLUMN)]
    types: dict[str, pa.DataType | None] = {
        column: pa.int64() if tables[nt].int_keys() else pa.string()
        for column, nt in zip((SRC_COLUMN, DST_COLUMN), ends)
    }
    types.update(dict.fromkeys(feature_columns, pa.float32()))
    table = read_table(path, types)
    rows = []
    for column, node_type in zip((SRC_COLUMN, DST_COLUMN), ends):
        values = table.column(column).to_numpy(zero_copy_only=False)
        local = tables[node_type].index().get_indexer(values)
        if (local < 0).any():
            row = int(np.flatnonzero(local < 0)[0])
            raise MalformedFileError(
                f"{path}: {position(path, row)}, column {column!r}: key {_plain(values[row])!r} "
                f"is not a node of type {node_type!r} (not in {tables[node_type].source})"
            )
        rows.append(local.astype(np.int64))
    edge_attr = None
    if feature_columns:
        edge_attr = torch.from_numpy(np.stack([table.column(c).to_numpy() for c in feature_columns], 1))
    logger.info("edge type %r: %d edges from %s, features %s", edge_type, len(rows[0]), path, feature_columns)
    return torch.from_numpy(np.stack(rows)), edge_attr


def _plain(value: object) -> object:
    """A numpy scalar as its Python value, so messages print ``77``, not ``np.int64(77)``."""
    return value.item() if isinstance(value, np.generic) else value
