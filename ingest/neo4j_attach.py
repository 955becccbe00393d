"""``gnnstore attach neo4j``: a graph kept in the user's own Neo4j schema, read into a data directory.

The user names, in a TOML spec, the node labels to serve (each with the property that is its
key, or Neo4j's element id), the node properties to serve as features, and the relationship
types as PyG edge types ``(from_label, TYPE, to_label)``::

    [labels.User]
    key = "uid"                              # omit: elementId(n)
    features = { x = "embedding", age = "age", y = "segment" }

    [labels.Item]
    key = "sku"
    features = { x = "vector" }

    [[relationships]]
    from = "User"
    type = "BOUGHT"
    to = "Item"
    features = { edge_attr = "rating" }      # optional: relationship properties, by edge id

Everything is read in one read transaction (the user's database is never written; a reader's
credentials are enough) and then ingested as one heterogeneous graph whose node types are the
labels: the id map gives each key a dense id (known keys keep theirs on a later attach), the
features go to RocksDB and the topology to edge files (``EdgeFileGraphStore``; a directory an
older attach wrote keeps its Kùzu graph) in the data directory, which ``gnnstore serve`` then
serves (snapshot sampling). Neo4j values map to dtypes as ``DTYPE_OF`` says; a value that
does not fit (a string, a map, a list of the wrong length, a missing property) is an error
naming the label, the property and the node's key (for a relationship property: the type and
both ends' keys), raised before anything is written.

A later attach reads the graph again: new nodes get new ids, relationships are replaced, and
nodes no longer there are reported; their ids stay taken and their rows stay, without edges.
The attach leaves the schema it read in the data directory (``stores.neo4j_attached``), so the
graph can also be sampled live in Neo4j.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neo4j
import numpy as np
import pandas as pd
import torch
from neo4j import GraphDatabase
from neo4j.exceptions import DriverError, Neo4jError
from torch import Tensor
from torch_geometric.data import HeteroData
from tqdm import tqdm

from gnnstore.common.errors import InvalidRequestError, MalformedFileError, ServerUnavailableError
from gnnstore.common.graph_types import EdgeType
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.ingest.report import IngestReport
from gnnstore.stores.data_dir import Stores, clear_ingest_record, open_stores
from gnnstore.stores.neo4j_attached import AttachedSchema, key_of, quoted

logger = logging.getLogger(__name__)

DTYPE_OF = {
    "Boolean": torch.bool,
    "Integer": torch.int64,
    "Float": torch.float32,
    "List of Integer": torch.int64,
    "List of Float": torch.float32,
    "List of Boolean": torch.bool,
}
"""Neo4j property type -> the feature's dtype. Integers and floats mixed in one property (or one
list) read as Float; a list property is a row of its length, the same on every node."""


@dataclass(frozen=True)
class LabelSpec:
    """One node label to serve: its key property (``None``: Neo4j's element id) and features
    (feature name -> property name)."""

    label: str
    key: str | None
    features: dict[str, str]


@dataclass(frozen=True)
class AttachSpec:
    """What to read: labels by name, relationship types as edge types, and the relationship
    properties to serve as edge features (edge type -> feature name -> property name)."""

    labels: dict[str, LabelSpec]
    relationships: list[EdgeType]
    relationship_features: dict[EdgeType, dict[str, str]] = field(default_factory=dict)


@dataclass
class AttachReport:
    """What an attach read and changed, per label and relationship type."""

    nodes: dict[str, int] = field(default_factory=dict)
    new_nodes: dict[str, int] = field(default_factory=dict)
    removed_nodes: dict[str, list[Any]] = field(default_factory=dict)
    """Keys the id map knew that Neo4j no longer has (their ids stay taken)."""
    edges: dict[EdgeType, int] = field(default_factory=dict)
    ingest: IngestReport | None = None

    def lines(self) -> list[str]:
        """One line per label and relationship type."""
        out = []
        for label, count in self.nodes.items():
            removed = self.removed_nodes.get(label, [])
            out.append(f"{label}: {count} nodes ({self.new_nodes.get(label, 0)} new"
                       + (f", {len(removed)} no longer in Neo4j: {_sample(removed)}" if removed else "") + ")")
        out += [f"{','.join(et)}: {count} relationships" for et, count in self.edges.items()]
        return out


def read_spec(path: Path) -> AttachSpec:
    """The spec in the TOML file at ``path``.

    Raises:
        MalformedFileError: not TOML, or not the spec's shape (the message names the entry).
    """
    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedFileError(f"attach spec {path}: cannot be read ({exc.__class__.__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise MalformedFileError(f"attach spec {path}: {exc}") from None
    unknown = set(raw) - {"labels", "relationships"}
    if unknown:
        raise MalformedFileError(
            f"attach spec {path}: unknown entries {sorted(unknown)} (known: labels, relationships)"
        )
    labels = {}
    for label, entry in _table(raw.get("labels"), f"{path}: [labels]").items():
        where = f"{path}: [labels.{label}]"
        entry = _table(entry, where)
        extra = set(entry) - {"key", "features"}
        if extra:
            raise MalformedFileError(f"attach spec {where}: unknown entries {sorted(extra)} (known: key, features)")
        key = entry.get("key")
        features = _table(entry.get("features", {}), f"{where} features")
        if (key is not None and not _name(key)) or not all(_name(k) and _name(v) for k, v in features.items()):
            raise MalformedFileError(f"attach spec {where}: key and features must be non-empty property names")
        if not features:
            raise MalformedFileError(
                f"attach spec {where}: names no features; PyG finds a node type by its features, so name "
                "at least one (features = {{ x = \"property\" }})"
            )
        labels[label] = LabelSpec(label, key, dict(features))
    if not labels:
        raise MalformedFileError(f"attach spec {path}: no [labels.NAME] entry; name at least one label")
    relationships, relationship_features = [], {}
    for i, entry in enumerate(raw.get("relationships", [])):
        where = f"{path}: relationships[{i}]"
        ends = {k: v for k, v in entry.items() if k != "features"} if isinstance(entry, dict) else {}
        if set(ends) != {"from", "type", "to"} or not all(map(_name, ends.values())):
            raise MalformedFileError(
                f"attach spec {where}: needs exactly from, type and to (non-empty names), and optionally features"
            )
        features = _table(entry.get("features", {}), f"{where} features")
        if not all(_name(k) and _name(v) for k, v in features.items()):
            raise MalformedFileError(f"attach spec {where}: features must map names to non-empty property names")
        for end in ("from", "to"):
            if entry[end] not in labels:
                raise MalformedFileError(
                    f"attach spec {where}: {end} = {entry[end]!r} is not among the labels {sorted(labels)}"
                )
        edge_type = (entry["from"], entry["type"], entry["to"])
        if edge_type in relationships:
            raise MalformedFileError(f"attach spec {where}: {edge_type} is given twice")
        relationships.append(edge_type)
        if features:
            relationship_features[edge_type] = dict(features)
    return AttachSpec(labels, relationships, relationship_features)


def attach_neo4j(
    uri: str, auth: tuple[str, str] | None, spec: AttachSpec, data_dir: Path, *,
    database: str | None = None, progress: bool = False,
) -> AttachReport:
    """Read ``spec``'s part of the Neo4j graph at ``uri``, then ingest it into ``data_dir``.

    Raises:
        ServerUnavailableError: Neo4j does not answer or refuses the login.
        InvalidRequestError: a key or property value that does not fit (named); nothing is
            written, and ``data_dir`` is not even created.
    """
    data, keys, report = read_neo4j_graph(uri, auth, spec, database=database, progress=progress)
    clear_ingest_record(data_dir)  # the folder will no longer hold what an earlier ingest read
    with open_stores(data_dir, edge_files=True) as stores:  # a database's COPY would hold every edge in memory
        _note_changes(stores, spec, keys, report)
        report.ingest = ingest_graph(data, stores, keys=keys, progress=progress)
    AttachedSchema({label: entry.key for label, entry in spec.labels.items()}, spec.relationships).save(data_dir)
    return report


def _note_changes(stores: Stores, spec: AttachSpec, keys: dict[str, np.ndarray], report: AttachReport) -> None:
    """Count the new keys and name the removed ones, per label, against the id map."""
    for label in spec.labels:
        if label in stores.id_map.node_types():
            known = stores.id_map.num_nodes(label)
            ids = torch.from_numpy(stores.id_map.lookup(label, keys[label]))
            report.new_nodes[label] = int((ids < 0).sum())
            present = torch.zeros(known, dtype=torch.bool)
            present[ids[ids >= 0]] = True
            gone = torch.nonzero(~present).flatten()
            report.removed_nodes[label] = list(stores.id_map.to_keys(label, gone[:_REPORTED])) if gone.numel() else []
            if gone.numel() > _REPORTED:
                report.removed_nodes[label] += [f"... {gone.numel() - _REPORTED} more"]
        else:
            report.new_nodes[label] = report.nodes[label]


def read_neo4j_graph(
    uri: str, auth: tuple[str, str] | None, spec: AttachSpec, *, database: str | None = None,
    progress: bool = False,
) -> tuple[HeteroData, dict[str, np.ndarray], AttachReport]:
    """The graph ``spec`` names, as PyG data with local edge positions, its keys per label, and
    the counts read.

    Raises:
        ServerUnavailableError: Neo4j does not answer or refuses the login.
        InvalidRequestError: a key or property value that does not fit (named).
    """
    driver = GraphDatabase.driver(uri, auth=auth, notifications_min_severity=neo4j.NotificationMinimumSeverity.OFF)
    try:
        driver.verify_connectivity()  # fails at once; a transaction would retry for 30 s first
        with driver.session(database=database, default_access_mode=neo4j.READ_ACCESS) as session:
            return session.execute_read(_read_graph, spec, progress)
    except (DriverError, Neo4jError) as exc:
        user = "auth off" if auth is None else f"user {auth[0]!r}"
        reason = " ".join(str(exc).split())
        raise ServerUnavailableError(f"Neo4j at {uri} ({user}) cannot be read: {reason}") from None
    finally:
        driver.close()


def _read_graph(
    tx: neo4j.ManagedTransaction, spec: AttachSpec, progress: bool
) -> tuple[HeteroData, dict[str, np.ndarray], AttachReport]:
    data, keys, report = HeteroData(), {}, AttachReport()
    for label, entry in spec.labels.items():
        total = tx.run(f"MATCH (n:{quoted(label)}) RETURN count(n) AS n").single()["n"]
        props = ", ".join(f"n.{quoted(p)}" for p in entry.features.values())
        rows = tx.run(f"MATCH (n:{quoted(label)}) RETURN {key_of(entry.key, 'n')} AS key, [{props}] AS props")
        key_list: list[Any] = []
        pages = [_SpilledColumn() for _ in entry.features]
        values: list[list[Any]] = [[] for _ in entry.features]

        def flush() -> None:  # a page's property values become tensors at once (a list of floats: 8x)
            first = len(key_list) - len(values[0])  # a spec names at least one feature
            for (name, prop), page, column in zip(entry.features.items(), pages, values if values[0] else ()):
                page.append(_feature(f"label {label!r}", prop, column, lambda i: f"node {key_list[first + i]!r}"))
            for column in values:
                column.clear()

        held = 0  # property values held as Python objects (a list counts its items)
        for record in tqdm(rows, total=total, desc=label, unit="nodes", unit_scale=True, disable=not progress):
            key_list.append(record["key"])
            for column, value in zip(values, record["props"]):
                column.append(value)
                held += len(value) if isinstance(value, list) else 1
            if held >= PAGE_VALUES:
                flush()
                held = 0
        flush()
        if not key_list:
            raise InvalidRequestError(f"label {label!r} has no nodes in Neo4j; leave it out of the spec")
        keys[label] = _keys(label, entry.key, key_list)
        data[label].num_nodes = len(key_list)
        for (name, prop), page in zip(entry.features.items(), pages):
            data[label][name] = page.joined(f"label {label!r}, property {prop!r}")
        report.nodes[label] = len(key_list)
    for edge_type in spec.relationships:
        edges = _read_relationships(tx, spec, edge_type, keys, progress)
        data[edge_type].edge_index = edges.edge_index
        for name, tensor in edges.features.items():
            data[edge_type][name] = tensor
        report.edges[edge_type] = edges.edge_index.shape[1]
    return data, keys, report


PAGE_VALUES = 1 << 18
"""Values read into Python objects before they become arrays (a list property counts its
items, a relationship its target key): a page's property values become tensors and its
relationships' keys positions at once, so memory holds the arrays (~16 bytes an edge, 4 a
float), not a Python object per value."""


@dataclass
class _Relationships:
    """One relationship type read: ``[2, E]`` local positions and its edge features."""

    edge_index: Tensor
    features: dict[str, Tensor]


def _read_relationships(
    tx: neo4j.ManagedTransaction, spec: AttachSpec, edge_type: EdgeType, keys: dict[str, np.ndarray], progress: bool
) -> _Relationships:
    """Every relationship of ``edge_type`` as positions in its ends' keys, page by page.

    Raises:
        InvalidRequestError: a relationship to a node that was not read, or a property value
            that does not fit (named).
    """
    src, rel, dst = edge_type
    features = spec.relationship_features.get(edge_type, {})
    props = ", ".join(f"r.{quoted(p)}" for p in features.values())
    collect_props = f", collect([{props}]) AS p" if features else ""  # no empty list per edge
    # One record per source node with its targets' keys in a list: the driver decodes a list
    # far faster than as many records. The subquery collects per node, so Neo4j streams the
    # records instead of grouping every relationship in memory first.
    rows = tx.run(
        f"MATCH (a:{quoted(src)}) CALL {{ WITH a MATCH (a)-[r:{quoted(rel)}]->(b:{quoted(dst)}) "
        f"RETURN collect({key_of(spec.labels[dst].key, 'b')}) AS d{collect_props} }} "
        f"RETURN {key_of(spec.labels[src].key, 'a')} AS s, d{', p' if features else ''}"
    )
    src_index, dst_index = pd.Index(keys[src]), pd.Index(keys[dst])
    spilled = _SpilledEdges()
    columns = [_SpilledColumn() for _ in features]
    sources, degrees, targets, values = [], [], [], [[] for _ in features]

    def flush() -> None:
        row = np.repeat(src_index.get_indexer(sources), degrees)
        col = dst_index.get_indexer(targets)
        if (row < 0).any() or (col < 0).any():  # every node's key was checked: it came in after
            raise InvalidRequestError(
                f"a {rel} relationship ends at a {src if (row < 0).any() else dst} node that was not there "
                "when the nodes were read (was the graph written to during the attach?); run it again"
            )
        spilled.append(row, col)
        ends = np.repeat(np.asarray(sources, dtype=object), degrees)
        for (name, prop), column, page in zip(features.items(), columns, values if targets else ()):
            column.append(_feature(
                f"relationship type {rel!r} ({src} -> {dst})", prop, page,
                lambda i: f"relationship {ends[i]!r} -> {targets[i]!r}", "relationship",
            ))
        for page in (sources, degrees, targets, *values):
            page.clear()

    held = 0
    with tqdm(desc=",".join(edge_type), unit="edges", unit_scale=True, disable=not progress) as bar:
        for record in rows:
            found = record["d"]
            sources.append(record["s"])
            degrees.append(len(found))
            targets.extend(found)
            for properties in record["p"] if features else ():
                for page, value in zip(values, properties):
                    page.append(value)
                    held += len(value) if isinstance(value, list) else 1
            held += len(found)
            bar.update(len(found))
            if held >= PAGE_VALUES:
                flush()
                held = 0
        flush()
    return _Relationships(spilled.edge_index(), {
        name: column.joined(f"relationship type {rel!r} ({src} -> {dst}), property {prop!r}")
        for (name, prop), column in zip(features.items(), columns)
    })


class _SpilledEdges:
    """Edge ends appended page by page to unnamed temporary files (in ``$TMPDIR``) and read back
    memory-mapped, so the attach holds a page of them, not every edge (16 bytes each) twice over
    while the pages are joined."""

    def __init__(self) -> None:
        self._row, self._col = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._count = 0

    def append(self, row: np.ndarray, col: np.ndarray) -> None:
        self._row.write(np.ascontiguousarray(row, dtype=np.int64).data)
        self._col.write(np.ascontiguousarray(col, dtype=np.int64).data)
        self._count += len(row)

    def edge_index(self) -> Tensor:
        """``[2, E]`` int64 over the files (rows, then columns), which go when it does."""
        with self._row, self._col:
            if not self._count:
                return torch.empty(2, 0, dtype=torch.long)
            self._col.seek(0)
            shutil.copyfileobj(self._col, self._row, 1 << 24)
            self._row.flush()
            return torch.from_numpy(np.memmap(self._row, dtype=np.int64, mode="r+", shape=(2, self._count)))


class _SpilledColumn:
    """One property's pages of values, appended to an unnamed temporary file (in ``$TMPDIR``) and
    joined into another one, read back memory-mapped: the attach holds a page, not the column."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        self._pages: list[tuple[torch.dtype, tuple[int, ...], int]] = []  # dtype, shape, offset

    def append(self, page: Tensor) -> None:
        if page.shape[0]:
            self._pages.append((page.dtype, tuple(page.shape), self._file.tell()))
            self._file.write(np.ascontiguousarray(page.numpy()).data)

    def joined(self, what: str) -> Tensor:
        """One tensor over the pages: integers become floats beside floats, as within a page.

        Raises:
            InvalidRequestError: pages of lists of other lengths, or booleans beside numbers.
        """
        with self._file:
            shapes = {shape[1:] for _, shape, _ in self._pages}
            if len(shapes) > 1:
                lengths = sorted(shape[0] for shape in shapes)
                raise InvalidRequestError(f"{what}: lists of {lengths} values; every one needs one length")
            dtypes = {dtype for dtype, _, _ in self._pages}
            if torch.bool in dtypes and len(dtypes) > 1:
                raise InvalidRequestError(f"{what}: booleans beside numbers; use one kind")
            if not self._pages:
                return torch.empty(0)
            dtype = _numpy_dtype(torch.float32 if torch.float32 in dtypes else dtypes.pop())
            rows = sum(shape[0] for _, shape, _ in self._pages)
            with tempfile.TemporaryFile() as file:
                out = np.memmap(file, dtype=dtype, mode="w+", shape=(rows, *shapes.pop()))
            at = 0
            for page_dtype, shape, offset in self._pages:
                out[at:at + shape[0]] = np.memmap(self._file, dtype=_numpy_dtype(page_dtype), mode="r",
                                                  offset=offset, shape=shape)
                at += shape[0]
            return torch.from_numpy(out)


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _keys(label: str, key: str | None, values: list[Any]) -> np.ndarray:
    """The label's keys as int64 or str, checked: present, one kind, unique.

    Raises:
        InvalidRequestError: a missing, mistyped or repeated key (named).
    """
    where = f"label {label!r}, key {'elementId' if key is None else repr(key)}"
    kinds = {type(v) for v in values}
    if kinds - {int, str}:
        bad = next(v for v in values if type(v) not in (int, str))
        position = values.index(bad)
        raise InvalidRequestError(
            f"{where}: node #{position} has {'no key' if bad is None else f'a {_neo4j_type(bad)} key {bad!r}'}; "
            "keys must be integers or strings"
        )
    if len(kinds) > 1:
        raise InvalidRequestError(f"{where}: mixes integer and string keys; use one kind")
    array = np.array(values, dtype=np.int64 if kinds == {int} else object)
    index = pd.Index(array)
    if not index.is_unique:
        raise InvalidRequestError(f"{where}: key {index[index.duplicated()][0]!r} is held by several nodes")
    return array


def _feature(owner: str, prop: str, values: list[Any], item: Callable[[int], str], kind: str = "node") -> Tensor:
    """One property of every node (or relationship) as a tensor (see ``DTYPE_OF``).

    Args:
        owner: the label or relationship type, as messages name it.
        item: names the node (relationship) of ``values[i]`` in a message.
        kind: ``"node"`` or ``"relationship"``.

    Raises:
        InvalidRequestError: a value that does not fit, naming owner, property and item.
    """
    def fail(i: int, why: str) -> InvalidRequestError:
        return InvalidRequestError(f"{owner}, property {prop!r}, {item(i)}: {why}")

    def describe(value: Any) -> str:
        if value is None:
            return f"no value (every {kind} of the {'label' if kind == 'node' else 'type'} needs the property)"
        return _describe(value)

    # The order is Neo4j's: the odd one out is the value unlike most others, not the first.
    lists = sum(isinstance(v, list) for v in values)
    if values and 2 * lists >= len(values):
        width = Counter(len(v) for v in values if isinstance(v, list)).most_common(1)[0][0]
        for i, v in enumerate(values):
            if not isinstance(v, list):
                raise fail(i, f"{describe(v)} where the other {kind}s have lists")
            if len(v) != width:
                raise fail(i, f"a list of {len(v)} values where the other {kind}s have {width}")
        flat = [x for v in values for x in v]
        return _typed(flat, lambda j: fail(j // max(width, 1), f"a list holding {describe(flat[j])}")).reshape(
            len(values), width)
    for i, v in enumerate(values):
        if isinstance(v, list):
            raise fail(i, f"a list where the other {kind}s have single values")
    return _typed(values, lambda i: fail(i, describe(values[i])))


def _typed(values: list[Any], fail: Any) -> Tensor:
    """Booleans, integers or floats (integers among floats read as floats) as one tensor."""
    kinds = {type(v) for v in values}
    for i, v in enumerate(values):
        if type(v) not in (bool, int, float):
            raise fail(i)
    if kinds == {bool}:
        return torch.tensor(values, dtype=torch.bool)
    if bool in kinds:
        raise fail(next(i for i, v in enumerate(values) if type(v) is bool))
    if kinds == {int}:
        return torch.tensor(values, dtype=torch.int64)
    return torch.tensor(values, dtype=torch.float32)


def _describe(value: Any) -> str:
    return f"a {_neo4j_type(value)} value, which cannot be a feature (numbers, booleans and lists of them can)"


def _neo4j_type(value: Any) -> str:
    names = {bool: "Boolean", int: "Integer", float: "Float", str: "String", dict: "Map", bytes: "ByteArray",
             list: "List"}
    return names.get(type(value), type(value).__name__)


def _table(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedFileError(f"attach spec {where}: expected a table")
    return value


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _sample(keys: Iterable[Any]) -> str:
    return ", ".join(repr(k) for k in keys)


_REPORTED = 10
"""Keys of removed nodes the report names; the rest are counted."""
