"""Runs one sampling job on the shared engine: limits, then the sampler.

For each request the runner builds a sampler from the request's options (a ``SnapshotSampler``
over the shared engine, cheap since the engine holds every large buffer; or a live Neo4j
sampler) and runs ``seeds.sample_nodes`` / ``sample_links`` (PyG's ``node_sample`` /
``edge_sample``) through it, as the in-process PyG sampler does, so a remote batch is built
exactly as an in-process one. Negatives are drawn from a generator seeded by the request, so
concurrent requests never share random state and, over a snapshot, a request with a seed always
returns the same batch (live Neo4j sampling picks neighbours in the database and ignores the
seed).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from gnnstore.backend.engine.seeds import sample_links, sample_nodes
from gnnstore.backend.engine.topology import edge_ends
from gnnstore.backend.engine.work_budget import sampled_edges_bound
from gnnstore.backend.service.sample_job import SampleJob
from gnnstore.backend.service.served_graph import SampledVersion, SamplerRequest, VersionLookup
from gnnstore.common.errors import InvalidRequestError, ResourceExhaustedError
from gnnstore.common.graph_types import NodeType, describe
from gnnstore.common.sample import Sample, SeedNodes
from gnnstore.proto.sampling_options import NeighborCounts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingLimits:
    """What one request may ask for; beyond it the request is refused, never truncated.

    Attributes:
        max_seeds: seed nodes (or seed links) per request.
        max_hops: hops of fanouts.
        max_fanout: neighbours per node per hop (-1, all neighbours, is always allowed).
        max_sample_edges: the bound of the edges a request may sample (``work_budget.py``).
        max_reply_bytes: feature bytes one reply may gather.
    """

    max_seeds: int = 1 << 20
    max_hops: int = 8
    max_fanout: int = 10_000
    max_sample_edges: int = 50_000_000
    max_reply_bytes: int = 1 << 30


class SamplingRunner:
    """Sampling jobs over the served graph versions, within the per-request limits.

    Args:
        sampling: the graph version a request names, with its bounds and sampler factory.
        limits: per-request limits.
    """

    def __init__(self, sampling: VersionLookup, limits: SamplingLimits) -> None:
        self._sampling = sampling
        self._limits = limits

    def sampled_version(self, requested: int | None) -> SampledVersion:
        """The graph version a request reads (``None``: the newest).

        Raises:
            NotFoundError: no such version.
        """
        return self._sampling(requested)

    def check(self, job: SampleJob) -> int:
        """The bound of the edges ``job`` may sample (``work_budget.py``), once it is within
        the per-request limits; microseconds, before any work.

        Raises:
            InvalidRequestError: no seeds, too many, or absurd fanouts.
            ResourceExhaustedError: the sample could be larger than ``max_sample_edges``.
            NotFoundError: an unknown node or edge type.
        """
        inputs, negatives, num_neighbors = job.inputs, job.negatives, job.num_neighbors
        if isinstance(inputs, SeedNodes):
            self._check(inputs.node.size, "seed nodes", num_neighbors)
            counts = {inputs.input_type: inputs.node.size}
        else:
            amount = 0.0 if negatives is None else float(negatives.amount)
            links = int(inputs.row.size * (1 + amount))
            self._check(links, "seed links", num_neighbors)
            src, dst = edge_ends(inputs.input_type)
            counts = {src: 2 * links} if src == dst else {src: links, dst: links}  # both ends of each link
        return self._check_work(job.graph, counts, num_neighbors, job.replace, _disjoint(job))

    def sample(self, job: SampleJob) -> Sample:
        """PyG's ``sample_from_nodes`` around the job's global seed ids (metadata ``(input_id,
        time)``), or its ``sample_from_edges`` (positives, negatives and metadata with local
        indices), on the job's graph version; the id arrays go where ``job.make_ids`` makes them.
        The job is one ``check`` passed.

        Raises:
            InvalidRequestError: an id out of range.
        """
        sampler = job.graph.make_sampler(
            SamplerRequest(job.num_neighbors, job.replace, _disjoint(job), job.seed, job.make_ids, job.temporal,
                           job.weight_attr)
        )
        if isinstance(job.inputs, SeedNodes):
            return sample_nodes(sampler, job.inputs)
        generator = np.random.default_rng(job.seed)

        def draw(count: int, endpoint: str, num_nodes: int) -> np.ndarray:
            return generator.integers(num_nodes, size=count)

        return sample_links(sampler, job.inputs, job.negatives, draw)

    def _check_work(
        self,
        version: SampledVersion,
        seeds: dict[NodeType | None, int],
        num_neighbors: NeighborCounts,
        replace: bool,
        disjoint: bool,
    ) -> int:
        """The request's bound of sampled edges; refused when it passes ``max_sample_edges``."""
        per_type = _per_edge_type(num_neighbors)
        bound = sampled_edges_bound(seeds, per_type, version.bounds, replace=replace, disjoint=disjoint)
        limit = self._limits.max_sample_edges
        if bound > limit:
            raise ResourceExhaustedError(
                f"this request could sample up to {bound:,} edges ({sum(seeds.values()):,} seeds, fanouts "
                f"{_fanouts(per_type)}, replace={replace}, disjoint={disjoint}), over the server's "
                f"limit of {limit:,}; use fewer seeds or smaller fanouts, or raise the limit with "
                "`gnnstore serve --max-sample-edges` (GNNSTORE_MAX_SAMPLE_EDGES)"
            )
        return bound

    def _check(self, num_seeds: int, what: str, num_neighbors: NeighborCounts) -> None:
        limits = self._limits
        if num_seeds == 0:
            raise InvalidRequestError(f"no {what} were sent: give at least one")
        if num_seeds > limits.max_seeds:
            raise InvalidRequestError(
                f"{num_seeds} {what} in one request is over the server's limit of "
                f"{limits.max_seeds}; use smaller batches"
            )
        for edge_type, hops in _per_edge_type(num_neighbors).items():
            where = "" if edge_type is None else f" of edge type {describe(edge_type)}"
            if len(hops) > limits.max_hops:
                raise InvalidRequestError(
                    f"{len(hops)} hops of fanouts{where} is over the limit of {limits.max_hops}"
                )
            if any(k > limits.max_fanout for k in hops):
                raise InvalidRequestError(
                    f"fanouts {list(hops)}{where} exceed the limit of {limits.max_fanout} "
                    f"neighbours per hop (use -1 for all neighbours)"
                )


def _per_edge_type(num_neighbors: NeighborCounts) -> dict:
    """Fanouts by edge type; a homogeneous graph's under ``None``."""
    return num_neighbors if isinstance(num_neighbors, dict) else {None: list(num_neighbors)}


def _fanouts(per_type: dict) -> str:
    """Fanouts for a message: the list, or ``{edge type: list}``."""
    if list(per_type) == [None]:
        return str(list(per_type[None]))
    return "{" + ", ".join(f"{describe(et)}: {list(k)}" for et, k in per_type.items()) + "}"


def _disjoint(job: SampleJob) -> bool:
    """Whether each seed keeps a subgraph of its own: asked for, or temporal (always disjoint)."""
    return job.disjoint or job.temporal is not None
