"""Topology snapshots: per edge type a CSC (and optionally a CSR), memory-mapped from a folder.

A snapshot is the read-optimised copy of a graph store's edges that the sampling engine reads.
On disk it is one folder per store version::

    <directory>/<version>/meta.json          version, built_at, node and edge types, sizes
    <directory>/<version>/e<i>.colptr.npy    int64 [N_dst + 1]
    <directory>/<version>/e<i>.row.npy       source global ids sorted by destination (stable in
                                             e_id), int32 when N_src < 2**31, else int64
    <directory>/<version>/e<i>.e_id.npy      int64: the store's edge id of each CSC entry
    <directory>/<version>/e<i>.rowptr.npy    the same three by source (CSR), when asked for
    <directory>/<version>/e<i>.col.npy
    <directory>/<version>/e<i>.csr_e_id.npy

A homogeneous graph has node type ``None`` and edge type ``None``, as in PyG. Building from a
graph store (streamed, two passes) lives in :mod:`gnnstore.backend.engine.snapshot_builder`, and
publishing a version's folder atomically in :mod:`gnnstore.backend.engine.snapshot_folder`; this
module holds the snapshot, its in-memory constructors and its on-disk format.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnstore.backend.engine.snapshot_folder import snapshot_path, staging_dir
from gnnstore.backend.engine.topology_kernels import (
    count_into,
    first_out_of_range,
    pointer_from_counts,
    scatter_into,
)
from gnnstore.common.errors import (
    InvalidRequestError,
    MalformedFileError,
    NotFoundError,
    PreconditionError,
)
from gnnstore.common.graph_types import EdgeType, NodeType, checked_edge_type
from gnnstore.common.host_array import host_array

META_FILE = "meta.json"
FORMAT_VERSION = 1
INT32_LIMIT = 2**31


def edge_ends(edge_type: EdgeType | None) -> tuple[NodeType | None, NodeType | None]:
    """``(source node type, destination node type)`` of ``edge_type``; ``(None, None)`` for ``None``."""
    return (None, None) if edge_type is None else (edge_type[0], edge_type[-1])


def index_dtype(num_nodes: int) -> np.dtype:
    """The narrowest dtype that holds node ids below ``num_nodes``: int32 or int64."""
    return np.dtype(np.int32) if num_nodes < INT32_LIMIT else np.dtype(np.int64)


@dataclass(frozen=True)
class EdgeTopology:
    """The CSC (and optional CSR) of one edge type; every id in it is **global**.

    Attributes:
        colptr: int64 ``[num_dst + 1]``: in-edges of destination ``v`` are ``colptr[v]:colptr[v+1]``.
        row: source ids of those in-edges, sorted by destination and, within one, by e_id.
        e_id: the graph store's edge id of each CSC entry (int64).
        rowptr, col, csr_e_id: the same by source, or ``None`` when not built.
        id_count: edge ids given so far, when graph writes removed some (``None``: ``num_edges``,
            as in a built snapshot, whose ids are ``0 .. num_edges-1``).
    """

    edge_type: EdgeType | None
    num_src: int
    num_dst: int
    colptr: np.ndarray
    row: np.ndarray
    e_id: np.ndarray
    rowptr: np.ndarray | None = None
    col: np.ndarray | None = None
    csr_e_id: np.ndarray | None = None
    id_count: int | None = None

    @property
    def num_edges(self) -> int:
        """Number of edges of this type."""
        return int(self.row.shape[0])

    @property
    def num_edge_ids(self) -> int:
        """Edge ids given so far (every id is below it): an attribute per edge has this many rows."""
        return self.num_edges if self.id_count is None else self.id_count

    def coo(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` (int64) of every edge in edge-id order; ids graph writes removed are
        absent."""
        col = np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.colptr))
        order = np.argsort(self.e_id)  # edge ids are distinct
        return self.row[order].astype(np.int64), col[order]

    @property
    def has_csr(self) -> bool:
        """Whether the CSR (outgoing edges) was built."""
        return self.rowptr is not None


@dataclass
class TopologySnapshot:
    """Every edge type's CSC, the node count per node type, and the store version they match.

    Attributes:
        num_nodes: node type → number of nodes (ids are dense ``0 .. N-1``).
        edges: edge type → its :class:`EdgeTopology`.
        version: the graph store's ``version()`` the snapshot was built from.
        built_at: UNIX time of the build.
        path: the folder it was opened from, or ``None`` when it lives in memory.
    """

    num_nodes: dict[NodeType | None, int]
    edges: dict[EdgeType | None, EdgeTopology]
    version: str
    built_at: float = field(default_factory=time.time)
    path: Path | None = None

    @property
    def is_hetero(self) -> bool:
        """False for PyG's homogeneous convention (the single node type ``None``; edges, if any,
        of the single edge type ``None``)."""
        return list(self.num_nodes) != [None]

    @property
    def node_types(self) -> list[NodeType | None]:
        """Node types in a stable order."""
        return list(self.num_nodes)

    @property
    def edge_types(self) -> list[EdgeType | None]:
        """Edge types in a stable order."""
        return list(self.edges)

    def edge(self, edge_type: EdgeType | None) -> EdgeTopology:
        """The topology of ``edge_type``.

        Raises:
            NotFoundError: the snapshot has no such edge type.
        """
        try:
            return self.edges[edge_type]
        except (KeyError, TypeError):
            raise NotFoundError(
                f"edge type {edge_type!r} is not in the snapshot (has: {self.edge_types})"
            ) from None

    def __reduce__(self) -> tuple:
        """Pickle a memory-mapped snapshot as its path (workers re-map it), else by value."""
        if self.path is not None:
            return (TopologySnapshot.open, (self.path,))
        return (TopologySnapshot, (self.num_nodes, self.edges, self.version, self.built_at))

    def is_stale(self, graph_store: object) -> bool:
        """Whether ``graph_store.version()`` differs from the version this was built from."""
        return str(graph_store.version()) != self.version

    @classmethod
    def from_edge_index(
        cls,
        edge_index: np.ndarray | dict[EdgeType, np.ndarray],
        num_nodes: int | dict[NodeType, int],
        *,
        version: str = "memory",
        csr: bool = False,
    ) -> "TopologySnapshot":
        """Build an in-memory snapshot from COO ``[2, E]`` global ids; e_id = column position.

        Args:
            edge_index: one ``[2, E]`` integer array (homogeneous) or one per edge type (a
                CPU tensor will do).
            num_nodes: the node count, or one per node type.
            version: the version the snapshot reports.
            csr: also build the CSR.

        Raises:
            InvalidRequestError: a shape, a node count or an id out of range.
        """
        if isinstance(edge_index, dict):
            if not isinstance(num_nodes, dict):
                raise InvalidRequestError("a heterogeneous edge_index needs num_nodes per node type")
            counts = {nt: _count(nt, n) for nt, n in num_nodes.items()}
            edges = {}
            for et, ei in edge_index.items():
                et = checked_edge_type(et)
                for nt in (et[0], et[-1]):
                    if nt not in counts:
                        raise InvalidRequestError(f"edge type {et!r}: node type {nt!r} has no num_nodes")
                edges[et] = topology_from_coo(et, ei, counts[et[0]], counts[et[-1]], csr=csr)
            return cls(num_nodes=counts, edges=edges, version=version)
        if isinstance(num_nodes, dict):
            raise InvalidRequestError("a homogeneous edge_index needs num_nodes as one int")
        n = _count(None, num_nodes)
        return cls(
            num_nodes={None: n},
            edges={None: topology_from_coo(None, edge_index, n, n, csr=csr)},
            version=version,
        )

    @classmethod
    def from_data(cls, data: object, *, version: str = "memory", csr: bool = False) -> "TopologySnapshot":
        """Build an in-memory snapshot of a PyG ``Data``/``HeteroData``'s ``edge_index``."""
        if hasattr(data, "edge_types"):  # a HeteroData (read without importing PyG)
            return cls.from_edge_index(
                {et: data[et].edge_index for et in data.edge_types},
                {nt: int(data[nt].num_nodes) for nt in data.node_types},
                version=version,
                csr=csr,
            )
        return cls.from_edge_index(data.edge_index, int(data.num_nodes), version=version, csr=csr)

    def save(self, directory: str | os.PathLike) -> "TopologySnapshot":
        """Write into ``directory/<version>/`` atomically and return the memory-mapped copy.

        An existing snapshot of the same version is kept and opened instead.
        """
        target = snapshot_path(directory, self.version)
        if target.is_dir():
            return TopologySnapshot.open(target)
        with staging_dir(directory, self.version) as tmp:
            for i, topo in enumerate(self.edges.values()):
                for name in _ARRAY_NAMES:
                    array = getattr(topo, name)
                    if array is not None:
                        np.save(tmp / f"e{i}.{name}.npy", np.ascontiguousarray(array))
            write_meta(tmp, self)
        return TopologySnapshot.open(target)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "TopologySnapshot":
        """Memory-map a snapshot folder written by :meth:`save` or ``build_snapshot``.

        Raises:
            PreconditionError: the folder or its ``meta.json`` is missing.
            MalformedFileError: ``meta.json`` or an array file cannot be read as declared.
        """
        path = Path(path)
        meta_file = path / META_FILE
        if not meta_file.is_file():
            raise PreconditionError(f"no topology snapshot at {path}: {META_FILE} is missing")
        try:
            meta = json.loads(meta_file.read_text())
            num_nodes = {node_type_from_json(e["name"]): int(e["num_nodes"]) for e in meta["node_types"]}
            specs = [(edge_type_from_json(e["edge_type"]), e) for e in meta["edge_types"]]
            version, built_at = str(meta["version"]), float(meta["built_at"])
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedFileError(f"{meta_file}: not a snapshot description ({exc})") from None
        edges = {}
        for i, (et, spec) in enumerate(specs):
            arrays = {
                name: _load(path / f"e{i}.{name}.npy")
                for name in _ARRAY_NAMES
                if name in _CSC_NAMES or spec.get("csr")
            }
            src, dst = edge_ends(et)
            edges[et] = EdgeTopology(et, num_nodes[src], num_nodes[dst], **arrays)
            _check_sizes(edges[et], path / f"e{i}")
        return cls(num_nodes=num_nodes, edges=edges, version=version, built_at=built_at, path=path)


_CSC_NAMES = ("colptr", "row", "e_id")
_ARRAY_NAMES = (*_CSC_NAMES, "rowptr", "col", "csr_e_id")


def write_meta(folder: Path, snapshot: TopologySnapshot) -> None:
    """Write ``meta.json`` (last, so a folder with it is complete)."""
    meta = {
        "format": FORMAT_VERSION,
        "version": snapshot.version,
        "built_at": snapshot.built_at,
        "node_types": [{"name": nt, "num_nodes": n} for nt, n in snapshot.num_nodes.items()],
        "edge_types": [
            {
                "edge_type": None if et is None else list(et),
                "num_edges": topo.num_edges,
                "csr": topo.has_csr,
            }
            for et, topo in snapshot.edges.items()
        ],
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=1))


def _load(file: Path) -> np.ndarray:
    try:
        return np.load(file, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise MalformedFileError(f"{file}: cannot memory-map ({exc})") from None


def _check_sizes(topo: EdgeTopology, stem: Path) -> None:
    ok = (
        topo.colptr.shape == (topo.num_dst + 1,)
        and topo.e_id.shape == topo.row.shape
        and (topo.colptr.shape[0] == 0 or int(topo.colptr[-1]) == topo.num_edges)
    )
    if topo.has_csr:
        ok = ok and topo.rowptr.shape == (topo.num_src + 1,) and topo.col.shape == topo.row.shape
    if not ok:
        raise MalformedFileError(f"{stem}.*.npy: array sizes disagree with meta.json")


def node_type_from_json(name: object) -> NodeType | None:
    if name is None or isinstance(name, str):
        return name
    raise TypeError(f"node type name must be a string or null, got {name!r}")


def edge_type_from_json(value: object) -> EdgeType | None:
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"edge type must be [src, rel, dst] or null, got {value!r}")


def _count(node_type: NodeType | None, n: object) -> int:
    if getattr(n, "ndim", None) == 0:  # a 0-d tensor or array
        n = n.item()
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise InvalidRequestError(f"num_nodes of node type {node_type!r} must be an int >= 0, got {n!r}")
    return int(n)


def topology_from_coo(
    edge_type: EdgeType | None, edge_index: np.ndarray, num_src: int, num_dst: int, *, csr: bool = False
) -> EdgeTopology:
    """CSC (and CSR) of one edge type from an in-memory ``[2, E]`` COO; e_id = column position.

    Raises:
        InvalidRequestError: not an integer ``[2, E]`` array (or CPU tensor), or an id out of range.
    """
    array = host_array(edge_index)
    if array is None or array.ndim != 2 or array.shape[0] != 2:
        shape = type(edge_index).__name__ if array is None else tuple(array.shape)
        raise InvalidRequestError(f"edge type {edge_type!r}: edge_index must be a [2, E] array, got {shape}")
    if array.dtype.kind not in "iu":
        raise InvalidRequestError(f"edge type {edge_type!r}: edge_index must hold integers, got {array.dtype}")
    row, col = array.astype(np.int64)
    for name, ids, bound in (("source", row, num_src), ("destination", col, num_dst)):
        bad = first_out_of_range(ids, bound)
        if bad is not None:
            raise InvalidRequestError(
                f"edge type {edge_type!r}: {name} id {bad} is out of range [0, {bound})"
            )
    e_id = np.arange(row.shape[0], dtype=np.int64)
    colptr, sorted_row, csc_e_id = compress(col, row, e_id, num_dst, index_dtype(num_src))
    topo = EdgeTopology(edge_type, num_src, num_dst, colptr, sorted_row, csc_e_id)
    if not csr:
        return topo
    rowptr, sorted_col, csr_e_id = compress(row, col, e_id, num_src, index_dtype(num_dst))
    return EdgeTopology(
        edge_type, num_src, num_dst, colptr, sorted_row, csc_e_id, rowptr, sorted_col, csr_e_id
    )


def compress(
    keys: np.ndarray, values: np.ndarray, e_id: np.ndarray, num_keys: int, value_dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counting sort of ``(values, e_id)`` by ``keys``: ``(ptr, values, e_id)``, stable in e_id."""
    counts = np.zeros(num_keys, np.int64)
    count_into(counts, keys)
    ptr = pointer_from_counts(counts)
    out_values = np.empty(keys.shape[0], value_dtype)
    out_e_id = np.empty(keys.shape[0], np.int64)
    scatter_into(ptr[:-1].copy(), keys, values, e_id, out_values, out_e_id)
    return ptr, out_values, out_e_id
