"""Runs one sampling request on the shared engine: limits, PyG's sampler, and the rows to return.

For each request the runner builds a PyG sampler from the request's options (a
``SnapshotNeighborSampler`` over the shared engine, cheap since the engine holds every large
buffer; or a live Neo4j sampler) and runs PyG's ``node_sample`` / ``edge_sample`` through it, so
a remote batch is built exactly as an in-process one. Negatives are drawn from a
generator seeded by the request, so concurrent requests never share random state and, over a
snapshot, a request with a seed always returns the same batch (live Neo4j sampling picks
neighbours in the database and ignores the seed).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import TensorAttr
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.typing import NodeType

from gnnstore.backend.degree_ranking import DegreeRanking
from gnnstore.backend.served_data import SampledVersion, SamplerRequest, VersionLookup
from gnnstore.backend.tiered_feature_store import TieredFeatureStore
from gnnstore.backend.topology import edge_ends
from gnnstore.backend.work_budget import sampled_edges_bound
from gnnstore.proto.codec import describe
from gnnstore.common.errors import InvalidRequestError, ResourceExhaustedError
from gnnstore.common.allocate import Allocate
from gnnstore.common.graph_types import edge_group_of, edge_type_of_group, is_edge_group
from gnnstore.common.temporal import TemporalOptions
from gnnstore.proto.reply_segment import ALIGNMENT, ArrayWriter
from gnnstore.proto.sample_codec import IdBitmap, NodeRows, NeighborCounts, RowRequest, distinct_in_order

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


class _SeededNegativeSampling(NegativeSampling):
    """PyG's NegativeSampling drawing from its own generator instead of torch's global one."""

    def __init__(self, spec: NegativeSampling, generator: torch.Generator) -> None:
        super().__init__(spec.mode, spec.amount)
        self.generator = generator

    def sample(self, num_samples: int, endpoint: str, num_nodes: int | None = None) -> Tensor:
        """``num_samples`` uniform global ids in ``[0, num_nodes)``."""
        return torch.randint(int(num_nodes), (num_samples,), generator=self.generator)


class SamplingRunner:
    """Sampling requests over the served graph versions, and the feature rows of what they sampled.

    Args:
        sampling: the graph version a request names, with its bounds and sampler factory.
        feature_store: where rows of sampled nodes are read (the read tier over the store).
        limits: per-request limits.
        ranking: the out-degree ranking clients' hot sets come from (``None``: no snapshot,
            so hot prefixes are ignored and those rows are sent).
    """

    def __init__(
        self,
        sampling: VersionLookup,
        feature_store: TieredFeatureStore,
        limits: SamplingLimits,
        ranking: DegreeRanking | None = None,
    ) -> None:
        self._sampling = sampling
        self._features = feature_store
        self._limits = limits
        self.ranking = ranking

    def version(self, requested: int | None) -> SampledVersion:
        """The graph version a request reads (``None``: the newest).

        Raises:
            NotFoundError: no such version.
        """
        return self._sampling(requested)

    def sample_from_nodes(
        self,
        inputs: NodeSamplerInput,
        num_neighbors: NeighborCounts,
        *,
        version: SampledVersion,
        replace: bool,
        disjoint: bool,
        seed: int | None,
        temporal: TemporalOptions | None = None,
        weight_attr: str | None = None,
        allocate: Allocate | None = None,
    ) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's ``sample_from_nodes`` around global seed ids of graph ``version``; metadata
        ``(input_id, time)``.
        ``allocate`` makes the output id tensors where the sampler can (e.g. a reply segment);
        ``weight_attr`` names the edge attribute to sample by weight.

        Raises:
            InvalidRequestError: no seeds, too many, an id out of range, or absurd fanouts.
            ResourceExhaustedError: the sample could be larger than ``max_sample_edges``.
            NotFoundError: an unknown node type.
        """
        self._check(inputs.node.numel(), "seed nodes", num_neighbors)
        disjoint = disjoint or temporal is not None
        self._check_work(version, {inputs.input_type: inputs.node.numel()}, num_neighbors, replace, disjoint)
        sampler = version.make_sampler(
            SamplerRequest(num_neighbors, replace, disjoint, seed, allocate, temporal, weight_attr)
        )
        return sampler.sample_from_nodes(inputs)

    def sample_from_edges(
        self,
        inputs: EdgeSamplerInput,
        neg_sampling: NegativeSampling | None,
        num_neighbors: NeighborCounts,
        *,
        version: SampledVersion,
        replace: bool,
        disjoint: bool,
        seed: int | None,
        temporal: TemporalOptions | None = None,
        weight_attr: str | None = None,
        allocate: Allocate | None = None,
    ) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's ``sample_from_edges``: positives, negatives and metadata with local indices;
        ``version``, ``allocate`` and ``weight_attr`` as for ``sample_from_nodes``.

        Raises:
            InvalidRequestError: no links, too many, an id out of range, or absurd fanouts.
            ResourceExhaustedError: the sample could be larger than ``max_sample_edges``.
            NotFoundError: an unknown edge or node type.
        """
        amount = 0.0 if neg_sampling is None else float(neg_sampling.amount)
        links = int(inputs.row.numel() * (1 + amount))
        self._check(links, "seed links", num_neighbors)
        src, dst = edge_ends(inputs.input_type)
        seeds = {src: 2 * links} if src == dst else {src: links, dst: links}  # both ends of each link
        disjoint = disjoint or temporal is not None
        self._check_work(version, seeds, num_neighbors, replace, disjoint)
        if neg_sampling is not None:
            generator = torch.Generator()
            generator.manual_seed(int(torch.randint(1 << 62, ())) if seed is None else seed)
            neg_sampling = _SeededNegativeSampling(neg_sampling, generator)
        sampler = version.make_sampler(
            SamplerRequest(num_neighbors, replace, disjoint, seed, allocate, temporal, weight_attr)
        )
        return sampler.sample_from_edges(inputs, neg_sampling)

    def gather_rows(
        self,
        out: SamplerOutput | HeteroSamplerOutput,
        request: RowRequest,
        version: SampledVersion,
        segment: ArrayWriter | None = None,
    ) -> list[NodeRows]:
        """Rows of ``request.attrs`` for the sampled nodes the client lacks, and of its edge
        attributes for the sampled edges (by edge id).

        Each distinct id once; or, when the request asks for aligned rows and they all fit in
        ``segment``, each node's row at its position in the node list, so the client's cache
        fills the other rows around them and the arrays become the batch's own. Attributes of a
        group with nothing sampled in ``out`` are skipped, as PyG's loader skips them. Every row
        comes from one ``gather`` call, into ``segment`` when given.
        """
        sampled = _sampled_ids(out)
        wanted: dict[object, list[str]] = {}
        for group, name in request.attrs:
            if group in sampled:
                wanted.setdefault(group, []).append(name)
        ids_of = {group: sampled[group].numpy() for group in wanted}
        lacking = {group: self._lacking(group, ids_of[group], request, version) for group in wanted}
        empty = None if segment is None else segment.empty
        row_bytes = {(s.group_name, s.attr_name): s.row_bytes for s in self._features.tensor_schema()}
        node_groups = {g: names for g, names in wanted.items() if not is_edge_group(g)}
        positions: dict[object, np.ndarray] = {}
        if request.aligned and segment is not None and _fits_aligned(node_groups, sampled, segment, row_bytes):
            positions = {g: np.flatnonzero(lacking[g]) for g in node_groups}
        ids = {
            g: sampled[g][torch.from_numpy(positions[g])] if g in positions
            else torch.from_numpy(distinct_in_order(ids_of[g][keep]))
            for g, keep in lacking.items()
        }
        queries = [TensorAttr(g, name, ids[g]) for g, names in wanted.items() for name in names]
        self._check_reply_bytes(queries, row_bytes)
        placements = [
            (positions[g], sampled[g].numel()) if g in positions else None
            for g, names in wanted.items() for _ in names
        ]
        tensors = iter(self._features.gather(queries, empty, placements) if queries else [])
        return [
            NodeRows(
                g, ids[g], {name: next(tensors) for name in names},
                torch.from_numpy(positions[g]) if g in positions else None,
            )
            for g, names in wanted.items()
        ]

    def _lacking(self, group: object, ids: np.ndarray, request: RowRequest, version: SampledVersion) -> np.ndarray:
        """Which entries of ``ids`` (a node list, or a sample's edge ids) the client lacks (a
        mask): those neither in its hot prefix nor known."""
        keep = np.ones(ids.shape[0], dtype=bool)
        prefix = request.hot.get(group)
        if prefix is not None and prefix.count and not is_edge_group(group):
            if self.ranking is not None and prefix.version == self.ranking.version:
                hot = self.ranking.hot_mask(group, prefix.count)
                inside = ids < hot.shape[0]  # nodes added by graph writes are never in the hot set
                keep[inside] &= ~hot[ids[inside]]
            else:
                logger.debug("hot prefix of version %r ignored: the ranking differs", prefix.version)
        known = request.known.get(group)
        bitmap = isinstance(known, IdBitmap)
        if known is not None and (known.bits.size if bitmap else known.numel()) and ids.size:
            count = _id_count(group, version)
            known = known if bitmap else known.numpy()
            low, high = (known.start, known.last_byte_start) if bitmap else (int(known.min()), int(known.max()))
            # ids past an older version's count: a client back from a newer one holds them
            if low < 0 or count is not None and high >= count and version.newest:
                what = "edge id" if is_edge_group(group) else "id"
                valid = "0 and up" if count is None else f"0..{count - 1}"
                raise InvalidRequestError(
                    f"known {what} {low if low < 0 else high} of {describe(group)} is out of range "
                    f"(valid ids: {valid})"
                )
            if bitmap:
                keep &= ~known.holds(ids)
            else:  # np.isin builds a bitmap over the known ids' range: keep it within the sample's
                known = known[(known >= ids.min()) & (known <= ids.max())]
                keep &= ~np.isin(ids, known, kind="table")
        return keep

    def _check_work(
        self,
        version: SampledVersion,
        seeds: dict[NodeType | None, int],
        num_neighbors: NeighborCounts,
        replace: bool,
        disjoint: bool,
    ) -> None:
        """Refuse a request whose sample could pass ``max_sample_edges``, before sampling."""
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

    def _check_reply_bytes(self, queries: list[TensorAttr], row_bytes: dict[tuple, int]) -> None:
        """Refuse to gather more feature bytes than ``max_reply_bytes``, before gathering."""
        need = sum(len(q.index) * row_bytes.get((q.group_name, q.attr_name), 0) for q in queries)
        limit = self._limits.max_reply_bytes
        if need > limit:
            raise ResourceExhaustedError(
                f"the sampled nodes' feature rows are {need:,} bytes, over the server's limit of "
                f"{limit:,} a reply; use fewer seeds or smaller fanouts, or raise the limit with "
                "`gnnstore serve --max-reply-bytes` (GNNSTORE_MAX_REPLY_BYTES)"
            )

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


def _sampled_ids(out: SamplerOutput | HeteroSamplerOutput) -> dict[object, Tensor]:
    """The sample's global ids per feature group: node lists by node type, edge ids by edge
    group."""
    if isinstance(out, HeteroSamplerOutput):
        edges = {edge_group_of(et): e for et, e in (out.edge or {}).items() if e is not None}
        return {**out.node, **edges}
    return {None: out.node, **({} if out.edge is None else {edge_group_of(None): out.edge})}


def _id_count(group: object, version: SampledVersion) -> int | None:
    """Ids of ``group`` in ``version``: its nodes, or the edge ids given (``None``: unknown,
    live sampling's edges)."""
    if is_edge_group(group):
        return version.bounds.edge_id_count(edge_type_of_group(group))
    return version.bounds.num_nodes.get(group, 0)


def _fits_aligned(
    wanted: dict[NodeType | None, list[str]],
    nodes: dict[NodeType | None, Tensor],
    segment: ArrayWriter,
    row_bytes: dict[tuple, int],
) -> bool:
    """Whether a row per node list entry of every wanted attr, with ids and positions, fits."""
    need = sum(
        nodes[g].numel() * row_bytes.get((g, name), 0) + ALIGNMENT
        for g, names in wanted.items() for name in names
    )
    need += sum(2 * (nodes[g].numel() * 8 + ALIGNMENT) for g in wanted)
    return need <= segment.free_bytes()


def _per_edge_type(num_neighbors: NeighborCounts) -> dict:
    """Fanouts by edge type; a homogeneous graph's under ``None``."""
    return num_neighbors if isinstance(num_neighbors, dict) else {None: list(num_neighbors)}


def _fanouts(per_type: dict) -> str:
    """Fanouts for a message: the list, or ``{edge type: list}``."""
    if list(per_type) == [None]:
        return str(list(per_type[None]))
    return "{" + ", ".join(f"{describe(et)}: {list(k)}" for et, k in per_type.items()) + "}"
