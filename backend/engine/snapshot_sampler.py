"""``SnapshotSampler``: one sampling configuration over the in-process engine, in numpy.

It is what the server runs for a request and what PyG's ``SnapshotNeighborSampler``
(``sampler.py``) wraps: seed ids in, a :class:`~gnnstore.common.sample.Sample` out, through
``seeds.sample_nodes`` / ``seeds.sample_links`` for seed nodes and seed links. Construction is
cheap (validation only): the engine holds every large buffer.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gnnstore.backend.engine.sampling_engine import Fanouts, SamplingEngine
from gnnstore.backend.engine.seeds import Seeds
from gnnstore.backend.engine.temporal_index import TemporalIndex, TemporalRequest
from gnnstore.backend.engine.topology import TopologySnapshot, edge_ends
from gnnstore.backend.engine.weight_index import WeightIndex
from gnnstore.common.call_seed import seeded_call_seed
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import NodeType
from gnnstore.common.sample import Links, MakeIds, Sample
from gnnstore.common.temporal import TEMPORAL_STRATEGIES


class SnapshotSampler:
    """Uniform (temporal, or weighted) neighbour sampling over a topology snapshot.

    Args:
        engine_or_snapshot: a shared :class:`SamplingEngine`, or a snapshot to build one from.
        num_neighbors: fanouts per hop (-1 = all neighbours): one list, or a dict edge type →
            list (every edge type, one length).
        replace: sample with replacement.
        disjoint: each seed gets its own subtree; samples carry ``batch``.
        seed: makes the samples repeatable: call ``i`` (in each loader worker) uses a stream
            derived from ``(seed, worker id, i)``; ``None``: each call draws one from
            ``fresh_seed``.
        fresh_seed: draws a call's random seed when ``seed`` is ``None`` (default: numpy's
            entropy; PyG's sampler passes torch's generator, as PyG draws).
        make_ids: makes the output id arrays (default ``np.empty``); the server passes its
            reply segment's, so a sample is written where the reply is read.
        temporal: sample temporally over this index (``engine.temporal_index(node_time)``), as
            PyG's ``NeighborSampler(time_attr=...)`` with node times does (always disjoint):
            a node reached from a seed has only neighbours no later than the seed's time
            (the seeds' or links' times, else the seed's own node time).
        temporal_strategy: ``'uniform'`` (draw among the allowed neighbours) or ``'last'``
            (the ``k`` latest of them).
        weights: pick neighbours in proportion to their edges' weights over this index
            (``engine.weight_index(weights)``), as PyG's ``NeighborSampler(weight_attr=...)``;
            edges of weight 0 are never picked. Not together with ``temporal``.

    Raises:
        NotFoundError: a fanout dict names an edge type the graph lacks.
        InvalidRequestError: fanouts that are not ints >= -1 or lists of different lengths, or
            an unknown temporal strategy, or both ``temporal`` and ``weights``.
    """

    def __init__(
        self,
        engine_or_snapshot: SamplingEngine | TopologySnapshot,
        num_neighbors: Sequence[int] | Mapping,
        *,
        replace: bool = False,
        disjoint: bool = False,
        seed: int | None = None,
        fresh_seed: Callable[[], int] | None = None,
        make_ids: MakeIds | None = None,
        temporal: TemporalIndex | None = None,
        temporal_strategy: str = "uniform",
        weights: WeightIndex | None = None,
    ) -> None:
        if isinstance(engine_or_snapshot, TopologySnapshot):
            engine_or_snapshot = SamplingEngine(engine_or_snapshot)
        if not isinstance(engine_or_snapshot, SamplingEngine):
            raise InvalidRequestError(
                "a snapshot sampler needs a SamplingEngine or a TopologySnapshot, got "
                f"{type(engine_or_snapshot).__name__}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InvalidRequestError(f"seed must be an int or None, got {seed!r}")
        self.engine = engine_or_snapshot
        self.fanouts: Fanouts = self.engine.fanouts(num_neighbors)
        if temporal_strategy not in TEMPORAL_STRATEGIES:
            raise InvalidRequestError(
                f"temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {temporal_strategy!r}"
            )
        if temporal is not None and weights is not None:
            raise InvalidRequestError("weighted and temporal sampling cannot be combined; choose one")
        self.replace = bool(replace)
        self.weights = weights
        self.temporal = temporal
        self.temporal_strategy = temporal_strategy
        self.disjoint = bool(disjoint) or temporal is not None  # as PyG: temporal means disjoint
        self.seed = seed
        self.make_ids = make_ids
        self._fresh_seed = fresh_seed or _fresh_seed
        self._calls = itertools.count()

    @property
    def num_nodes(self) -> int | dict[NodeType, int]:
        """Node count (homogeneous) or node type → count: the range negatives are drawn from."""
        return self.engine.num_nodes

    def sample_seeds(self, seed: Seeds, seed_time: Seeds | None = None) -> Sample:
        """One engine call: ``node`` global (seeds first), ``row``/``col`` local, ``edge`` e_ids.

        Raises:
            NotFoundError: a seed node type the graph lacks.
            InvalidRequestError: a seed id out of range, or seed times without a time
                attribute to sample by.
        """
        temporal = None
        if self.temporal is not None:
            if seed_time is not None and not isinstance(seed_time, Mapping):
                seed_time = {None: seed_time}
            temporal = TemporalRequest(self.temporal, seed_time, self.temporal_strategy == "last")
        elif seed_time is not None:
            raise InvalidRequestError("seed times were given, but no time attribute (time_attr) to sample by")
        return self.engine.sample(
            seed,
            self.fanouts,
            replace=self.replace,
            disjoint=self.disjoint,
            random_seed=self._call_seed(),
            make_ids=self.make_ids,
            temporal=temporal,
            weights=self.weights,
        )

    def check_links(self, links: Links) -> np.ndarray | dict[NodeType, np.ndarray] | None:
        """Check the links' times and endpoint ids before negatives are drawn, naming the
        endpoint and the id; the node times negatives must respect (temporal), else ``None``.

        Raises:
            NotFoundError: an endpoint type that is not a node type of the graph.
            InvalidRequestError: an endpoint id out of range, an edge type on a homogeneous graph
                (or none on a heterogeneous one), or link times without a time attribute (or a
                time attribute without link times).
        """
        if (links.time is None) != (self.temporal is None):
            raise InvalidRequestError(
                "temporal link sampling needs both a time attribute (time_attr) and the links' "
                "times (edge_label_time)" if self.temporal is not None else
                "link times (edge_label_time) were given, but no time attribute (time_attr) to sample by"
            )
        input_type = links.input_type
        counts = self.engine.snapshot.num_nodes
        if input_type is None and self.engine.is_hetero:
            raise InvalidRequestError("a heterogeneous graph needs the seed links' edge type")
        if input_type is not None and not self.engine.is_hetero:
            raise InvalidRequestError(
                f"a homogeneous graph takes seed links without an edge type, got {input_type!r}"
            )
        # An edge type the graph lacks is fine when its node types exist: as in PyG, the links
        # to predict may be of a relation with no edges yet; the seeds are their endpoints.
        src, dst = edge_ends(input_type)
        for name, nt, ids in (("source", src, links.row), ("destination", dst, links.col)):
            if nt not in counts:
                raise NotFoundError(
                    f"link {name} type {nt!r} of {input_type!r} is not a node type of the graph "
                    f"(has: {list(counts)})"
                )
            if not ids.size:
                continue
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= counts[nt]:
                bad = low if low < 0 else high
                raise InvalidRequestError(
                    f"link {name} id {bad} of node type {nt!r} is out of range [0, {counts[nt]})"
                )
        if self.temporal is None:
            return None
        node_time = self.temporal.node_time  # negatives no later than their link, as PyG draws them
        return node_time if self.engine.is_hetero else node_time.get(None)

    def _call_seed(self) -> int:
        """The random seed of the next call."""
        if self.seed is None:
            return self._fresh_seed()
        return seeded_call_seed(self.seed, next(self._calls))


def _fresh_seed() -> int:
    return int(np.random.default_rng().integers(1 << 62))
