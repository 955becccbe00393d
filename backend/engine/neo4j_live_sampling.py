"""``live`` sampling over Neo4j: one Cypher round trip per hop and edge type, for graphs that change.

Each hop sends the frontier (**global** ids) in one ``UNWIND`` query that picks at most ``k``
in-neighbours per node inside the database (``ORDER BY rand() LIMIT k`` in a Cypher 5 ``CALL``
subquery), so nothing but the sample crosses the wire and every batch sees the graph as it is
now. The output is the sampling engine's: a :class:`~gnnstore.common.sample.Sample` (PyG's
output through ``sampler.Neo4jLiveSampler``) with ``node`` global (seeds first and in order),
``row``/``col`` local, ``edge`` the store's edge ids and per-hop counts. Sampling is without
replacement and not disjoint; for throughput on a graph that holds still, ``snapshot`` mode
(``build_snapshot`` + ``SnapshotNeighborSampler``) is faster.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gnnstore.backend.engine.seeds import Seeds
from gnnstore.backend.engine.topology import edge_ends
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.common.sample import Links, Sample
from gnnstore.stores.neo4j_attached import AttachedNeo4jGraph
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore


class _Nodes:
    """The nodes of one type in a batch: global ids in local order, and the map back."""

    def __init__(self, seeds: np.ndarray) -> None:
        self.ids: list[int] = seeds.tolist()
        self.local: dict[int, int] = {}
        for i, g in enumerate(self.ids):
            self.local.setdefault(g, i)

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Local ids of ``ids``, appending the unseen ones in first-seen order."""
        out = np.empty(len(ids), np.int64)
        for i, g in enumerate(ids.tolist()):
            pos = self.local.get(g)
            if pos is None:
                pos = self.local[g] = len(self.ids)
                self.ids.append(g)
            out[i] = pos
        return out


class LiveSampler:
    """Uniform neighbour sampling inside Neo4j, batch by batch.

    Args:
        graph_store: the Neo4j store (gnnstore's schema, or the user's as attached:
            ``edge_attrs`` and ``sample_in_neighbors`` are all it reads); its driver
            opens lazily in each loader worker.
        num_neighbors: fanouts per hop (-1 = all): one list for every edge type, or a dict
            edge type -> list (each edge type, one length).

    Raises:
        InvalidRequestError: the store holds no edges, or fanouts that are not ints >= -1.
        NotFoundError: a fanout dict names an edge type the store lacks.
    """

    def __init__(
        self, graph_store: Neo4jGraphStore | AttachedNeo4jGraph,
        num_neighbors: Sequence[int] | Mapping[EdgeType, Sequence[int]],
    ) -> None:
        self.graph_store = graph_store
        sizes: dict[EdgeType | None, tuple[int, int]] = {}
        for attr in graph_store.edge_attrs():
            sizes.setdefault(attr.edge_type, tuple(attr.size))
        if not sizes:
            raise InvalidRequestError("the Neo4j graph store holds no edges to sample from")
        self.edge_types = list(sizes)
        self.disjoint = False
        self.is_hetero = None not in sizes
        self.node_counts: dict[NodeType | None, int] = {}
        for et, (num_src, num_dst) in sizes.items():
            src, dst = edge_ends(et)
            self.node_counts[src] = max(self.node_counts.get(src, 0), num_src)
            self.node_counts[dst] = max(self.node_counts.get(dst, 0), num_dst)
        self.fanouts = self._fanouts(num_neighbors)
        self.num_hops = len(next(iter(self.fanouts.values())))

    def _fanouts(self, num_neighbors: object) -> dict[EdgeType | None, list[int]]:
        if isinstance(num_neighbors, Mapping):
            unknown = [et for et in num_neighbors if et not in self.edge_types]
            if unknown:
                raise NotFoundError(f"fanouts name edge types {unknown} the graph lacks ({self.edge_types})")
            given = {et: list(num_neighbors.get(et, [])) for et in self.edge_types}
        else:
            given = {et: list(num_neighbors) for et in self.edge_types}
        lengths = {len(v) for v in given.values()}
        bad = [k for v in given.values() for k in v if isinstance(k, bool) or not isinstance(k, int) or k < -1]
        if len(lengths) != 1 or bad:
            raise InvalidRequestError(f"fanouts must be ints >= -1, one length per edge type; got {given}")
        return given

    @property
    def num_nodes(self) -> int | dict[NodeType, int]:
        """Node count (homogeneous) or node type -> count: the range negatives are drawn from."""
        return self.node_counts if self.is_hetero else self.node_counts[None]

    def check_links(self, links: Links) -> None:
        """Nothing to check before negatives are drawn (the endpoints are checked as seeds);
        live sampling is not temporal, so any node may be a negative."""
        return None

    def sample_seeds(self, seed: Seeds, seed_time: Seeds | None = None) -> Sample:
        """One batch: a query per hop and edge type around the seeds (global ids).

        Raises:
            InvalidRequestError: seed times (live sampling is not temporal), or a seed out of range.
            NotFoundError: a seed node type the graph lacks.
        """
        if seed_time is not None:
            raise InvalidRequestError("temporal sampling (seed_time) is not supported")
        seeds = self._seeds(seed)
        nodes = {nt: _Nodes(ids) for nt, ids in seeds.items()}
        frontier = {nt: (ids, 0) for nt, ids in seeds.items()}
        num_sampled_nodes = {nt: [len(ids)] for nt, ids in seeds.items()}
        rows, cols, edges = ({et: [] for et in self.edge_types} for _ in range(3))
        for hop in range(self.num_hops):
            start = {nt: len(n.ids) for nt, n in nodes.items()}
            for et in self.edge_types:
                src, dst = edge_ends(et)
                front, base = frontier[dst]
                k = self.fanouts[et][hop]
                if len(front) == 0 or k == 0:
                    row = col = eid = np.empty(0, np.int64)
                else:
                    row, col, eid = self.graph_store.sample_in_neighbors(et, front, k)
                    col = base + _positions(front, col)
                    row = nodes[src].add(row)
                rows[et].append(row)
                cols[et].append(col)
                edges[et].append(eid)
            for nt, n in nodes.items():
                frontier[nt] = (np.asarray(n.ids[start[nt]:], np.int64), start[nt])
                num_sampled_nodes[nt].append(len(n.ids) - start[nt])
        node = {nt: np.array(n.ids, dtype=np.int64) for nt, n in nodes.items()}
        row, col, edge = ({et: _cat(parts[et]) for et in self.edge_types} for parts in (rows, cols, edges))
        num_sampled_edges = {et: [len(part) for part in rows[et]] for et in self.edge_types}
        return Sample(node, row, col, edge, None, num_sampled_nodes, num_sampled_edges)

    def _seeds(self, seed: Seeds) -> dict[NodeType | None, np.ndarray]:
        given = dict(seed) if isinstance(seed, Mapping) else {None: seed}
        if (None in given) == self.is_hetero:
            raise InvalidRequestError(
                "a heterogeneous graph takes seeds as a dict node type -> tensor, a homogeneous one "
                f"as one tensor; got {type(seed).__name__}"
            )
        out = {}
        for nt, count in self.node_counts.items():
            ids = given.pop(nt, None)
            ids = np.empty(0, np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
            if ids.size:
                low, high = int(ids.min()), int(ids.max())
                if low < 0 or high >= count:
                    bad = low if low < 0 else high
                    raise InvalidRequestError(
                        f"node type {nt!r}: seed id {bad} is outside 0..{count - 1}"
                    )
            out[nt] = ids
        if given:
            raise NotFoundError(f"node types {list(given)} are not in the graph ({list(self.node_counts)})")
        return out


def _positions(front: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position in ``front`` (unique ids) of each of ``ids``."""
    order = np.argsort(front, kind="stable")
    return order[np.searchsorted(front, ids, sorter=order)]


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
