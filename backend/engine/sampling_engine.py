"""The sampling engine: multi-hop neighbour sampling over a topology snapshot, in numpy.

``SamplingEngine.sample`` validates its input once, then drives the compiled per-hop kernels
of :mod:`gnnstore.backend.engine.sampling_kernels` (one call per hop and edge type, never a Python
loop over nodes) and returns a :class:`~gnnstore.common.sample.Sample` with the fields of PyG's
``NeighborSampler`` output: ``node`` global ids with the seeds first and in order, ``row``/``col``
local, ``edge`` the graph store's edge ids, nodes and edges hop-contiguous.

Thread-safety: one engine may serve many threads at once. The dense global→local arrays
(one per node type, O(N) each) are leased from a pool, one set per call in flight, and reset
on return by touching only the nodes that call sampled; the disjoint mode uses per-call hash
tables instead. The kernels release the GIL, so calls on different threads run in parallel.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gnnstore.backend.engine import sampling_kernels as kernels
from gnnstore.backend.engine.temporal_index import TemporalIndex, TemporalRequest, batch_times
from gnnstore.backend.engine.topology import TopologySnapshot, edge_ends, index_dtype
from gnnstore.backend.engine.weight_index import WeightIndex
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import EdgeType, NodeType, checked_edge_type
from gnnstore.common.host_array import host_array
from gnnstore.common.sample import MakeIds, Sample

logger = logging.getLogger(__name__)

_EMPTY = np.empty(0, np.int64)
_UINT64 = 1 << 64


@dataclass(frozen=True)
class Fanouts:
    """Validated fanouts: edge type → one int per hop (-1 = all neighbours)."""

    per_edge_type: dict[EdgeType | None, tuple[int, ...]]
    num_hops: int


class _AssocPool:
    """Dense global→local arrays (-1 = absent), one set per call in flight."""

    def __init__(self, num_nodes: dict[NodeType | None, int]) -> None:
        self._num_nodes = num_nodes
        self._lock = threading.Lock()
        self._free: list[dict[NodeType | None, np.ndarray]] = []

    def acquire(self) -> dict[NodeType | None, np.ndarray]:
        """A set whose entries are all -1; allocated only when every set is in use."""
        with self._lock:
            if self._free:
                return self._free.pop()
        logger.debug("allocating a global->local array set for %d node types", len(self._num_nodes))
        return {nt: np.full(n, -1, index_dtype(n)) for nt, n in self._num_nodes.items()}

    def release(self, assoc: dict[NodeType | None, np.ndarray]) -> None:
        """Give back a set whose entries were reset to -1."""
        with self._lock:
            self._free.append(assoc)


class SamplingEngine:
    """Uniform (or temporal, or weighted) multi-hop neighbour sampling over a :class:`TopologySnapshot`.

    Build one per snapshot and share it: construction allocates the O(N) scratch; a call
    allocates only O(batch).
    """

    def __init__(self, snapshot: TopologySnapshot) -> None:
        self.snapshot = snapshot
        self.is_hetero = snapshot.is_hetero
        self.node_types = snapshot.node_types
        self.edge_types = snapshot.edge_types
        self._csc = {
            et: (np.asarray(t.colptr), np.asarray(t.row), np.asarray(t.e_id))
            for et, t in snapshot.edges.items()
        }
        self._ends = {et: edge_ends(et) for et in self.edge_types}
        self._pool = _AssocPool(snapshot.num_nodes)
        self._pool.release(self._pool.acquire())

    def __reduce__(self) -> tuple:
        """Pickle as the snapshot (a path when memory-mapped); scratch is rebuilt on arrival."""
        return (SamplingEngine, (self.snapshot,))

    def temporal_index(
        self,
        node_time: Mapping[NodeType | None, np.ndarray],
        edge_time: Mapping[EdgeType | None, np.ndarray] | None = None,
    ) -> TemporalIndex:
        """This snapshot's CSC sorted for temporal sampling by ``node_time`` (node type → times)
        or, for the edge types it names, ``edge_time`` (edge type → a time per edge id).

        Raises:
            InvalidRequestError: a node type's times are not one per node, or an edge type's
                not one per edge.
        """
        for node_type, times in node_time.items():
            expected = self.snapshot.num_nodes.get(node_type)
            if expected is not None and times.shape != (expected,):
                raise InvalidRequestError(
                    f"node type {node_type!r} has {expected} nodes but {times.shape[0]} times"
                )
        self._check_per_edge(edge_time or {}, "times")
        return TemporalIndex(self._csc, self._ends, node_time, edge_time)

    def weight_index(self, weights: Mapping[EdgeType | None, np.ndarray]) -> WeightIndex:
        """This snapshot's edge weights in CSC order (edge type → one weight per edge id).

        Raises:
            InvalidRequestError: an edge type's weights are not one per edge.
        """
        self._check_per_edge(weights, "weights")
        return WeightIndex(self._csc, weights)

    def _check_per_edge(self, values: Mapping[EdgeType | None, np.ndarray], what: str) -> None:
        """Each edge type's ``values`` are one per edge id.

        Raises:
            InvalidRequestError: they are not (named by edge type and ``what``).
        """
        for edge_type, array in values.items():
            expected = self.snapshot.edges[edge_type].num_edge_ids
            if array.shape != (expected,):
                raise InvalidRequestError(f"edge type {edge_type!r} has {expected} edge ids but {array.shape[0]} {what}")

    @property
    def num_nodes(self) -> int | dict[NodeType, int]:
        """Node count (homogeneous) or node type → count: the range negatives are drawn from."""
        counts = self.snapshot.num_nodes
        return counts[None] if not self.is_hetero else dict(counts)

    def fanouts(self, num_neighbors: Sequence[int] | Mapping) -> Fanouts:
        """Validate ``num_neighbors`` as PyG accepts it: one list, or one list per edge type
        (keys ``(src, rel, dst)`` or PyG's ``'src__rel__dst'``).

        Raises:
            NotFoundError: a dict key is not an edge type of the snapshot.
            InvalidRequestError: a fanout below -1 or not an int, a dict for a homogeneous
                graph, a missing edge type, or lists of different lengths.
        """
        if isinstance(num_neighbors, Mapping):
            if not self.is_hetero:
                raise InvalidRequestError(
                    "num_neighbors for a homogeneous graph is one list of ints, got a dict"
                )
            given = {_edge_type_key(k): _hops(v, k) for k, v in num_neighbors.items()}
            unknown = [et for et in given if et not in self._csc]
            if unknown:
                raise NotFoundError(
                    f"num_neighbors names edge types not in the graph: {unknown} "
                    f"(has: {self.edge_types})"
                )
            missing = [et for et in self.edge_types if et not in given]
            if missing:
                raise InvalidRequestError(f"num_neighbors has no list for edge types {missing}")
            per = {et: given[et] for et in self.edge_types}
        elif isinstance(num_neighbors, (list, tuple)):
            hops = _hops(num_neighbors, "num_neighbors")
            per = {et: hops for et in self.edge_types}
            if not per:  # node types but no edge type: every hop finds nothing, as in PyG
                return Fanouts(per, len(hops))
        else:
            raise InvalidRequestError(
                f"num_neighbors must be a list of ints or a dict edge type -> list, "
                f"got {type(num_neighbors).__name__}"
            )
        lengths = {len(v) for v in per.values()}
        if len(lengths) > 1:
            raise InvalidRequestError(
                f"num_neighbors lists must have one length (one entry per hop), got "
                f"{ {et: len(v) for et, v in per.items()} }"
            )
        return Fanouts(per, lengths.pop())

    def sample(
        self,
        seed: np.ndarray | Mapping[NodeType, np.ndarray],
        num_neighbors: Fanouts | Sequence[int] | Mapping,
        *,
        replace: bool = False,
        disjoint: bool = False,
        random_seed: int | None = None,
        make_ids: MakeIds | None = None,
        temporal: TemporalRequest | None = None,
        weights: WeightIndex | None = None,
    ) -> Sample:
        """Sample the multi-hop neighbourhood of ``seed`` (**global** ids).

        Args:
            seed: seed ids (homogeneous) or node type → seed ids: 1-D integer arrays (or
                anything numpy reads as one, such as a CPU tensor).
            num_neighbors: fanouts, validated by :meth:`fanouts` unless already a ``Fanouts``.
            replace: sample with replacement.
            disjoint: give each seed its own subtree (``batch`` holds the seed index).
            random_seed: seed of this call's random stream; ``None``: a fresh one.
            make_ids: makes the output id arrays (default ``np.empty``), e.g. straight in a
                reply segment so the server does not copy them there.
            temporal: sample temporally (always disjoint): a node reached from seed ``b`` has
                only neighbours no later than ``b``'s seed time.
            weights: pick each node's neighbours in proportion to their edges' weights (edge
                types without weights: uniformly); not together with ``temporal``.

        Returns:
            ``node`` (global, seeds first and in order), ``row``/``col`` (local), ``edge``
            (graph store edge ids), ``batch`` (disjoint only), per-hop counts.

        Raises:
            NotFoundError: an unknown node type among the seeds.
            InvalidRequestError: seeds not a 1-D integer array, an id out of range, bad fanouts.
        """
        fanouts = num_neighbors if isinstance(num_neighbors, Fanouts) else self.fanouts(num_neighbors)
        seeds = self._seeds(seed)
        if random_seed is None:
            random_seed = int(np.random.default_rng().integers(1 << 62))
        state = np.array([random_seed % _UINT64], np.uint64)
        make_ids = make_ids or _new_ids
        if temporal is not None:
            if weights is not None:
                raise InvalidRequestError("weighted and temporal sampling cannot be combined; choose one")
            seed_time = temporal.index.seed_times(seeds) if temporal.seed_time is None else temporal.seed_time
            run = self._run_disjoint(seeds, fanouts, bool(replace), state, temporal, batch_times(seed_time, seeds))
            return self._output(run, True, make_ids)
        csc_weights = {} if weights is None else weights.csc_weights
        if disjoint:
            run = self._run_disjoint(seeds, fanouts, bool(replace), state, csc_weights=csc_weights)
            return self._output(run, True, make_ids)
        return self._output(self._run_shared(seeds, fanouts, bool(replace), state, csc_weights), False, make_ids)

    def _seeds(self, seed: np.ndarray | Mapping[NodeType, np.ndarray]) -> dict[NodeType | None, np.ndarray]:
        """Seeds per node type as contiguous int64 arrays, every id checked against its range."""
        if isinstance(seed, Mapping):
            if not self.is_hetero:
                raise InvalidRequestError("a homogeneous graph takes seeds as one array, got a dict")
            for nt in seed:
                if nt not in self.snapshot.num_nodes:
                    raise NotFoundError(
                        f"node type {nt!r} is not in the graph (has: {self.node_types})"
                    )
            given = dict(seed)
        elif self.is_hetero:
            raise InvalidRequestError(
                "a heterogeneous graph takes seeds as a dict node type -> ids, got "
                f"{type(seed).__name__}"
            )
        else:
            given = {None: seed}
        out = {}
        for nt in self.node_types:
            ids = given.get(nt)
            out[nt] = _EMPTY if ids is None else _check_ids(nt, ids, self.snapshot.num_nodes[nt])
        return out

    def _run_shared(
        self,
        seeds: dict[NodeType | None, np.ndarray],
        fanouts: Fanouts,
        replace: bool,
        state: np.ndarray,
        csc_weights: Mapping[EdgeType | None, tuple | None],
    ) -> "_Run":
        """All hops with the dense global→local arrays; resets exactly the touched entries.
        Edge types with ``csc_weights`` pick by weight."""
        assoc = self._pool.acquire()  # not returned if a kernel raises: it may hold stale ids
        run = _Run(seeds, self.node_types, self.edge_types, disjoint=False)
        for nt, ids in seeds.items():
            kernels.insert_seeds(assoc[nt], ids)
        for hop in range(fanouts.num_hops):
            for et in self.edge_types:
                src, dst = self._ends[et]
                front, base, _ = run.frontier[dst]
                k = fanouts.per_edge_type[et][hop]
                if front.shape[0] == 0 or k == 0:
                    run.add_edges(et, src, _EMPTY, _EMPTY, _EMPTY, _EMPTY)
                    continue
                ptr, idx, eid = self._csc[et]
                weight = csc_weights.get(et)
                if weight is None:
                    out = kernels.sample_hop(
                        ptr, idx, eid, front, base, k, replace, assoc[src], run.count[src], state
                    )
                else:
                    out = kernels.sample_hop_weighted(
                        ptr, idx, eid, *weight, front, base, k, replace, assoc[src], run.count[src], state
                    )
                run.add_edges(et, src, *out)
            run.end_hop()
        for nt, parts in run.nodes.items():
            for part in parts:
                kernels.reset_assoc(assoc[nt], part)
        self._pool.release(assoc)
        return run

    def _run_disjoint(
        self,
        seeds: dict[NodeType | None, np.ndarray],
        fanouts: Fanouts,
        replace: bool,
        state: np.ndarray,
        temporal: TemporalRequest | None = None,
        batch_time: np.ndarray | None = None,
        csc_weights: Mapping[EdgeType | None, tuple | None] | None = None,
    ) -> "_Run":
        """All hops with per-call ``(seed index, node)`` hash tables; with ``temporal``, edge
        types whose source has times pick only neighbours no later than ``batch_time``; edge
        types with ``csc_weights`` pick by weight."""
        run = _Run(seeds, self.node_types, self.edge_types, disjoint=True)
        num_nodes = self.snapshot.num_nodes
        tables = {nt: kernels.new_table(ids, num_nodes[nt]) for nt, ids in seeds.items()}
        for hop in range(fanouts.num_hops):
            for et in self.edge_types:
                src, dst = self._ends[et]
                front, base, batch = run.frontier[dst]
                k = fanouts.per_edge_type[et][hop]
                if front.shape[0] == 0 or k == 0:
                    run.add_edges(et, src, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY)
                    continue
                if temporal is None:
                    (ptr, idx, eid), src_time = self._csc[et], None
                else:
                    ptr, idx, eid, src_time = temporal.index.csc[et]
                weight = None if csc_weights is None else csc_weights.get(et)
                if weight is not None:
                    *out, keys, vals = kernels.sample_hop_weighted_disjoint(
                        ptr, idx, eid, *weight, front, batch, base, k, replace,
                        *tables[src], num_nodes[src], run.count[src], state,
                    )
                elif src_time is None:
                    *out, keys, vals = kernels.sample_hop_disjoint(
                        ptr, idx, eid, front, batch, base, k, replace,
                        *tables[src], num_nodes[src], run.count[src], state,
                    )
                else:
                    *out, keys, vals = kernels.sample_hop_temporal(
                        ptr, idx, eid, src_time, front, batch, batch_time, base, k, replace, temporal.last,
                        *tables[src], num_nodes[src], run.count[src], state,
                    )
                tables[src] = (keys, vals)
                run.add_edges(et, src, *out)
            run.end_hop()
        return run

    def _output(self, run: "_Run", disjoint: bool, make_ids: MakeIds) -> Sample:
        node = {nt: _joined(parts, make_ids) for nt, parts in run.nodes.items()}
        batch = {nt: _joined(parts, make_ids) for nt, parts in run.batch.items()} if disjoint else None
        row = {et: _joined(run.rows[et], make_ids) for et in self.edge_types}
        col = {et: _joined(run.cols[et], make_ids) for et in self.edge_types}
        edge = {et: _joined(run.edges[et], make_ids) for et in self.edge_types}
        num_sampled_edges = {et: run.num_sampled_edges[et] for et in self.edge_types}
        if not self.is_hetero and None not in self.edge_types:  # nodes alone: every hop finds nothing
            row[None], col[None], edge[None] = (_joined([], make_ids) for _ in range(3))
            num_sampled_edges[None] = [0] * (len(run.num_sampled_nodes[None]) - 1)
        return Sample(node, row, col, edge, batch, run.num_sampled_nodes, num_sampled_edges)


class _Run:
    """What one call has sampled so far, per node type and edge type, hop by hop."""

    def __init__(
        self,
        seeds: dict[NodeType | None, np.ndarray],
        node_types: list[NodeType | None],
        edge_types: list[EdgeType | None],
        *,
        disjoint: bool,
    ) -> None:
        self.nodes = {nt: [ids] for nt, ids in seeds.items()}
        self.batch = {nt: [np.arange(ids.shape[0])] for nt, ids in seeds.items()} if disjoint else {}
        self.count = {nt: ids.shape[0] for nt, ids in seeds.items()}
        self.frontier = {
            nt: (ids, 0, self.batch[nt][0] if disjoint else None) for nt, ids in seeds.items()
        }
        self.num_sampled_nodes = {nt: [ids.shape[0]] for nt, ids in seeds.items()}
        self.num_sampled_edges = {et: [] for et in edge_types}
        self.rows = {et: [] for et in edge_types}
        self.cols = {et: [] for et in edge_types}
        self.edges = {et: [] for et in edge_types}
        self._disjoint = disjoint
        self._new = {nt: [] for nt in node_types}
        self._new_batch = {nt: [] for nt in node_types}

    def add_edges(
        self,
        et: EdgeType | None,
        src: NodeType | None,
        row: np.ndarray,
        col: np.ndarray,
        edge: np.ndarray,
        new_nodes: np.ndarray,
        new_batch: np.ndarray | None = None,
    ) -> None:
        """Record one (hop, edge type) result; new source nodes join this hop's frontier."""
        self.rows[et].append(row)
        self.cols[et].append(col)
        self.edges[et].append(edge)
        self.num_sampled_edges[et].append(int(row.shape[0]))
        self.count[src] += new_nodes.shape[0]
        self._new[src].append(new_nodes)
        if self._disjoint:
            self._new_batch[src].append(new_batch)

    def end_hop(self) -> None:
        """Close a hop: this hop's new nodes (contiguous local ids) become the frontier."""
        for nt, parts in self._new.items():
            hop_nodes = _concat(parts)
            hop_batch = _concat(self._new_batch[nt]) if self._disjoint else None
            self.nodes[nt].append(hop_nodes)
            if self._disjoint:
                self.batch[nt].append(hop_batch)
            self.num_sampled_nodes[nt].append(int(hop_nodes.shape[0]))
            self.frontier[nt] = (hop_nodes, self.count[nt] - hop_nodes.shape[0], hop_batch)
            parts.clear()
            self._new_batch[nt].clear()


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return _EMPTY
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _new_ids(n: int) -> np.ndarray:
    return np.empty(n, np.int64)


def _joined(parts: list[np.ndarray], make_ids: MakeIds) -> np.ndarray:
    """The hop parts joined into one int64 array made by ``make_ids``."""
    out = make_ids(sum(p.shape[0] for p in parts))
    if out.size:
        np.concatenate(parts, out=out)
    return out


def _check_ids(node_type: NodeType | None, ids: object, num_nodes: int) -> np.ndarray:
    """Seed ids as a contiguous int64 array, or an error naming the node type and the bad id."""
    array = host_array(ids)  # a tensor too (a CPU one without a copy)
    if array is None:
        raise InvalidRequestError(f"seeds of node type {node_type!r} must be a 1-D array, got {type(ids).__name__}")
    if array.ndim != 1:
        raise InvalidRequestError(f"seeds of node type {node_type!r} must be a 1-D array, got {array.shape}")
    if array.dtype.kind not in "iu":
        raise InvalidRequestError(
            f"seeds of node type {node_type!r} must be integer ids, got dtype {array.dtype}"
        )
    out = np.ascontiguousarray(array, dtype=np.int64)
    if out.shape[0]:
        lo, hi = int(out.min()), int(out.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise InvalidRequestError(
                f"seed id {bad} of node type {node_type!r} is out of range [0, {num_nodes})"
            )
    return out


def _hops(values: object, name: object) -> tuple[int, ...]:
    """One fanout per hop: ints >= -1."""
    if not isinstance(values, (list, tuple)):
        raise InvalidRequestError(
            f"num_neighbors for {name!r} must be a list of ints, got {type(values).__name__}"
        )
    for hop, k in enumerate(values):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < -1:
            raise InvalidRequestError(
                f"num_neighbors for {name!r}, hop {hop}: fanout must be an int >= -1 "
                f"(-1 = all neighbours), got {k!r}"
            )
    return tuple(int(k) for k in values)


def _edge_type_key(key: object) -> EdgeType:
    """An edge type from a ``(src, rel, dst)`` tuple or PyG's ``'src__rel__dst'`` string."""
    if isinstance(key, str) and key.count("__") == 2:
        key = tuple(key.split("__"))
    return checked_edge_type(key, what="a num_neighbors key")
