"""Graph versions: the base topology snapshot plus the write log, each version built on demand.

A write is checked against the newest version, its added edges get edge ids (never reused, so
a removed edge's id stays unused and an id names one edge forever), it is made durable in the
:class:`WriteLog`, and the newest version is built at once, so the write is visible when its
call returns. Building version ``v`` merges the net changes of writes ``1 .. v`` into the base's
CSC (and CSR) of each changed edge type in one pass over those arrays; nothing is read from the
graph store, and unchanged edge types share the base's memory-mapped arrays.

At most ``max_views`` built versions stay in memory, the least recently used leaving first. A
version that left is rebuilt from the log when a request names it again, so a trainer's pinned
version is never lost, across server restarts too.
"""
from __future__ import annotations

import dataclasses
import logging
import mmap
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import EdgeTopology, TopologySnapshot, edge_ends, index_dtype
from gnnstore.backend.engine.topology_kernels import merge_into, pointer_from_counts
from gnnstore.backend.engine.work_budget import GraphBounds
from gnnstore.backend.versions.write_log import EdgeChanges, WriteLog, WriteRecord
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError, ServerUnavailableError
from gnnstore.common.graph_types import EdgeType, NodeType, describe

logger = logging.getLogger(__name__)

MAX_VIEWS = 4
"""Built versions kept in memory (each changed edge type costs a copy of its arrays)."""

MAX_WRITE_EDGES = 1 << 22
"""Edges one write may add plus remove."""


@dataclass(frozen=True, eq=False)
class GraphView:
    """One graph version, ready to sample: its snapshot, engine and the bounds of its work
    (hashed by identity: what is derived from a version can be kept beside it, weakly)."""

    graph_version: int
    snapshot: TopologySnapshot
    engine: SamplingEngine
    bounds: GraphBounds


@dataclass(frozen=True)
class EdgeWrite:
    """Requested changes of one edge type: ``[A]`` global ends of added edges and edge ids to
    remove (int64 arrays)."""

    add_src: np.ndarray
    add_dst: np.ndarray
    remove: np.ndarray


class GraphVersions:
    """The versions a server samples: the base snapshot (version 0) and one per logged write.

    Args:
        base: the topology snapshot the log's writes apply to.
        log: the write log over ``base``.
        max_views: built versions kept in memory.
        replica: the log is written by another process (``adopt`` takes its new writes); a
            version it has not written yet is asked for again later, or of another server.
    """

    def __init__(
        self, base: TopologySnapshot, log: WriteLog, max_views: int = MAX_VIEWS, *, replica: bool = False
    ) -> None:
        self.base = base
        self.log = log
        self.replica = replica
        self._max_views = max(1, max_views)
        self._views: OrderedDict[int, GraphView] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[int, threading.Lock] = {}
        self.write_lock = threading.Lock()
        """Held by a writer from its checks until its version is built (one write at a time)."""
        self._next_e_id = {et: topo.num_edges for et, topo in base.edges.items()}
        self._removed: dict[EdgeType | None, np.ndarray] = {et: np.empty(0, np.int64) for et in base.edges}
        for record in log.records:
            for et, changes in record.edges.items():
                self._note(et, changes)
        self._views[0] = _view(0, base)
        if log.newest:
            self.view(log.newest)

    @property
    def newest(self) -> int:
        """The newest version."""
        return self.log.newest

    def view(self, version: int | None = None) -> GraphView:
        """Version ``version`` (``None``: the newest), built now if it is not in memory.

        Raises:
            NotFoundError: no such version yet.
        """
        newest = self.newest
        version = newest if version is None else version
        if self.replica and version > newest:
            raise ServerUnavailableError(
                f"graph version {version} is not on this replica yet (it has 0..{newest}): ask another "
                "server, or this one again within its lag bound"
            )
        if not 0 <= version <= newest:
            raise NotFoundError(f"graph version {version} does not exist (the newest is {newest})")
        with self._lock:
            view = self._views.get(version)
            if view is not None:
                self._views.move_to_end(version)
                return view
            building = self._building.setdefault(version, threading.Lock())
        with building:  # a second request for a version being built waits, then finds it
            with self._lock:
                view = self._views.get(version)
            if view is None:
                started = time.perf_counter()
                view = _view(version, self._build(version))
                logger.info("graph version %d built in %.3f s", version, time.perf_counter() - started)
                with self._lock:
                    self._views[version] = view
                    self._building.pop(version, None)
                    while len(self._views) > self._max_views:
                        self._views.popitem(last=False)
            return view

    def prepare(
        self,
        num_nodes: dict[NodeType | None, int],
        edges: dict[EdgeType | None, EdgeWrite],
        remove_nodes: dict[NodeType | None, np.ndarray] | None = None,
    ) -> WriteRecord:
        """The next version's record, once every change is checked: node counts that grew and
        edge changes, added edges with their edge ids, and the edges of ``remove_nodes`` (global
        ids per node type) removed too. Call under ``write_lock``, and ``commit`` it under the
        same hold.

        Raises:
            InvalidRequestError: an unknown type, an id out of range, an edge id that is not in
                the newest version (or named twice), or more than ``MAX_WRITE_EDGES`` changes.
            PreconditionError: the server is read-only.
        """
        if self.log.read_only:
            raise PreconditionError("this server is read-only: it takes no graph writes")
        newest = self.view()
        counts = dict(newest.snapshot.num_nodes)
        for node_type, count in num_nodes.items():
            if node_type not in counts:
                raise InvalidRequestError(f"node type {describe(node_type)} is not in the graph; writes add nodes of existing types")
            counts[node_type] = max(counts[node_type], count)
        total = sum(w.add_src.size + w.remove.size for w in edges.values())
        total += sum(ids.size for ids in (remove_nodes or {}).values())
        if total > MAX_WRITE_EDGES:
            raise InvalidRequestError(f"{total:,} edge changes in one write is over the limit of {MAX_WRITE_EDGES:,}; split it")
        changes = {}
        for edge_type, wanted in edges.items():
            if edge_type not in self.base.edges:
                raise InvalidRequestError(
                    f"edge type {describe(edge_type)} is not in the graph (has: {self.base.edge_types}); "
                    "writes change edges of existing edge types"
                )
            changes[edge_type] = self._checked(edge_type, wanted, counts)
        for edge_type, incident in self._incident(newest, remove_nodes or {}).items():
            change = changes.get(edge_type) or EdgeChanges(*(np.empty(0, np.int64),) * 4)
            changes[edge_type] = dataclasses.replace(change, remove=np.union1d(change.remove, incident))
        grown = {nt: n for nt, n in counts.items() if n != newest.snapshot.num_nodes[nt]}
        return WriteRecord(self.newest + 1, grown, changes)

    def adopt(self, records: list[WriteRecord]) -> None:
        """Take the writes another process logged (``WriteLog.unread``) as the next versions,
        and build the newest, so the first request for it does not wait."""
        if not records:
            return
        with self.write_lock:
            self.log.adopt(records)
            for record in records:
                for edge_type, change in record.edges.items():
                    self._note(edge_type, change)
        self.view(records[-1].version)

    def commit(self, record: WriteRecord) -> GraphView:
        """Make ``record`` (from ``prepare``) durable and build its version, the newest."""
        self.log.append(record)
        for edge_type, change in record.edges.items():
            self._note(edge_type, change)
        return self.view(record.version)

    def _checked(
        self, edge_type: EdgeType | None, wanted: EdgeWrite, counts: dict[NodeType | None, int]
    ) -> EdgeChanges:
        """``wanted`` with edge ids for its added edges, once every id is known to be valid."""
        src, dst = edge_ends(edge_type)
        name = edges_of(edge_type)
        if wanted.add_src.shape != wanted.add_dst.shape:
            raise InvalidRequestError(f"{name}: {wanted.add_src.size} sources but {wanted.add_dst.size} destinations")
        for what, ids, node_type in (("source", wanted.add_src, src), ("destination", wanted.add_dst, dst)):
            if ids.size and (ids.min() < 0 or ids.max() >= counts[node_type]):
                bad = int(ids.min() if ids.min() < 0 else ids.max())
                nodes = "" if node_type is None else f"node type {describe(node_type)} has "
                raise InvalidRequestError(
                    f"{name}: {what} id {bad} is out of range ({nodes}ids 0..{counts[node_type] - 1} "
                    "in the version this write makes)"
                )
        remove = wanted.remove
        if remove.size:
            next_id = self._next_e_id[edge_type]
            present = (remove >= 0) & (remove < next_id)
            present[present] = ~np.isin(remove[present], self._removed[edge_type])
            if not present.all():
                raise InvalidRequestError(
                    f"{name}: edge id {int(remove[~present][0])} is not in graph version {self.newest}"
                )
            if np.unique(remove).size != remove.size:
                raise InvalidRequestError(f"{name}: an edge id is named twice for removal")
        first = self._next_e_id[edge_type]
        add_e_id = np.arange(first, first + wanted.add_src.size, dtype=np.int64)
        return EdgeChanges(wanted.add_src, wanted.add_dst, add_e_id, np.sort(remove))

    def _incident(
        self, newest: GraphView, remove_nodes: dict[NodeType | None, np.ndarray]
    ) -> dict[EdgeType | None, np.ndarray]:
        """Per edge type, the ids of the edges ``remove_nodes`` have in ``newest``.

        Raises:
            InvalidRequestError: an unknown node type or an id out of range.
        """
        counts = newest.snapshot.num_nodes
        for node_type, ids in remove_nodes.items():
            if node_type not in counts:
                raise InvalidRequestError(f"node type {describe(node_type)} is not in the graph")
            if ids.size and (ids.min() < 0 or ids.max() >= counts[node_type]):
                bad = int(ids.min() if ids.min() < 0 else ids.max())
                raise InvalidRequestError(
                    f"node {bad} of {describe(node_type)} cannot be removed: ids are 0..{counts[node_type] - 1}"
                )
        incident = {}
        for edge_type, topo in newest.snapshot.edges.items():
            src, dst = edge_ends(edge_type)
            found = []
            if src in remove_nodes:
                found.append(np.asarray(topo.e_id)[np.isin(np.asarray(topo.row), remove_nodes[src])])
            if dst in remove_nodes:
                colptr, nodes = np.asarray(topo.colptr), np.unique(remove_nodes[dst])
                starts, lengths = colptr[nodes], colptr[nodes + 1] - colptr[nodes]
                offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                found.append(np.asarray(topo.e_id)[np.repeat(starts, lengths) + offsets])
            if found:
                incident[edge_type] = np.unique(np.concatenate(found))
        return incident

    def _note(self, edge_type: EdgeType | None, changes: EdgeChanges) -> None:
        """Count a logged write's edges into the next edge id and the removed set."""
        if changes.add_e_id.size:
            self._next_e_id[edge_type] = int(changes.add_e_id[-1]) + 1
        if changes.remove.size:
            self._removed[edge_type] = np.union1d(self._removed[edge_type], changes.remove)

    def _build(self, version: int) -> TopologySnapshot:
        """Version ``version``'s snapshot: the base with writes ``1 .. version`` merged in."""
        records = self.log.records[:version]
        counts = dict(self.base.num_nodes)
        for record in records:
            counts.update(record.num_nodes)
        edges = dict(self.base.edges)
        for edge_type in self.base.edges:
            mine = [r.edges[edge_type] for r in records if edge_type in r.edges]
            grew = any(counts[nt] != self.base.num_nodes[nt] for nt in edge_ends(edge_type))
            if mine or grew:
                edges[edge_type] = merged(self.base.edges[edge_type], mine, counts)
        return TopologySnapshot(counts, edges, f"{self.base.version}+{version}", self.base.built_at)


def edges_of(edge_type: EdgeType | None) -> str:
    """How a message names an edge type's edges."""
    return "the homogeneous graph's edges" if edge_type is None else f"edge type {describe(edge_type)}"


def _view(version: int, snapshot: TopologySnapshot) -> GraphView:
    return GraphView(version, snapshot, SamplingEngine(snapshot), GraphBounds.of_snapshot(snapshot))


def merged(topo: EdgeTopology, writes: list[EdgeChanges], counts: dict[NodeType | None, int]) -> EdgeTopology:
    """``topo`` with ``writes`` applied in order, sized for the node ``counts``: removed edges
    leave (added ones included), added ones join their destination's (source's) list after its
    older edges, so each list stays in edge-id order as a built snapshot's is."""
    src, dst = edge_ends(topo.edge_type)
    num_src, num_dst = counts[src], counts[dst]
    empty = np.empty(0, np.int64)
    add_src = np.concatenate([w.add_src for w in writes]) if writes else empty
    add_dst = np.concatenate([w.add_dst for w in writes]) if writes else empty
    add_e_id = np.concatenate([w.add_e_id for w in writes]) if writes else empty
    removed = np.concatenate([w.remove for w in writes]) if writes else empty
    id_count = topo.num_edge_ids + add_e_id.size  # every write's added edges took the next ids
    if removed.size:
        kept = ~np.isin(add_e_id, removed)
        add_src, add_dst, add_e_id = add_src[kept], add_dst[kept], add_e_id[kept]
    flags = np.zeros(int(removed.max(initial=-1)) + 1, bool)
    flags[removed] = True
    gone = np.packbits(flags, bitorder="little")
    colptr, row, e_id = _merged_side(
        topo.colptr, topo.row, topo.e_id, num_dst, add_dst, add_src, add_e_id, gone, index_dtype(num_src)
    )
    csr = (None, None, None)
    if topo.has_csr:
        csr = _merged_side(
            topo.rowptr, topo.col, topo.csr_e_id, num_src, add_src, add_dst, add_e_id, gone, index_dtype(num_dst)
        )
    return EdgeTopology(topo.edge_type, num_src, num_dst, colptr, row, e_id, *csr, id_count=id_count)


def _fresh(size: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array in its own anonymous mapping, asking for huge pages: a version's
    arrays are hundreds of MB of new memory, and 4 KiB page faults made most of a build's time
    (0.63 s against 0.18 s to touch 300 MB on the development VM, where huge pages are madvise-only)."""
    dtype = np.dtype(dtype)
    if size == 0:
        return np.empty(0, dtype)
    mapping = mmap.mmap(-1, size * dtype.itemsize)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(mapping, dtype)  # the array keeps the mapping alive; it unmaps with it


def _merged_side(
    ptr: np.ndarray,
    values: np.ndarray,
    e_id: np.ndarray,
    num_keys: int,
    add_keys: np.ndarray,
    add_values: np.ndarray,
    add_e_id: np.ndarray,
    gone: np.ndarray,
    value_dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One compressed side (CSC or CSR) for ``num_keys`` keys, without the edges whose bit is
    set in ``gone`` (a bitset over edge ids) and with the added edges at the end of their key's
    list: one pass of ``merge_into``. Without edits the arrays are shared and only the pointer
    grows."""
    ptr, values, e_id = np.asarray(ptr), np.asarray(values), np.asarray(e_id)
    if not add_keys.size and not gone.any() and values.dtype == value_dtype:
        grown = np.full(num_keys + 1, ptr[-1], np.int64)
        grown[: ptr.size] = ptr
        return grown, values, e_id
    order = np.lexsort((add_e_id, add_keys))
    add_ptr = pointer_from_counts(np.bincount(add_keys, minlength=num_keys).astype(np.int64))
    size = values.size + add_keys.size
    out_ptr = np.empty(num_keys + 1, np.int64)
    out_values, out_e_id = _fresh(size, value_dtype), _fresh(size, np.int64)
    written = merge_into(
        ptr, values, e_id, gone, add_ptr, add_values[order].astype(value_dtype), add_e_id[order],
        out_ptr, out_values, out_e_id,
    )
    return out_ptr, out_values[:written], out_e_id[:written]
