"""The feature rows that ride with a sample: the sampled nodes (and edges) the client lacks.

For each wanted attribute of a sampled group the gatherer leaves out what the client holds
(its hot prefix of the server's degree ranking, the ids it names as known: a list or a
bitmap), refuses a reply over ``max_reply_bytes`` before reading a row (and waits for room in the
server's memory for replies, ``reply_memory.py``, when the rows live there), and reads the rest
from the read tier, straight into the reply's segment when it has one (rows a requested wire
dtype narrows are read apart and rounded into it).
"""
from __future__ import annotations

import logging

import numba
import numpy as np

from gnnstore.backend.engine.degree_ranking import DegreeRanking
from gnnstore.backend.features.feature_tier import allocated
from gnnstore.backend.features.tiered_feature_store import RowQuery, TieredFeatureStore
from gnnstore.backend.service.reply_memory import ReplyMemory
from gnnstore.backend.service.served_graph import SampledVersion
from gnnstore.common.allocate import Allocate
from gnnstore.common.cpu_prefetch import prefetch
from gnnstore.common.distinct import distinct_in_order
from gnnstore.common.dtypes import round_into
from gnnstore.common.errors import InvalidRequestError, ResourceExhaustedError
from gnnstore.common.graph_types import NodeType, describe, edge_group_of, edge_type_of_group, is_edge_group
from gnnstore.common.sample import Sample
from gnnstore.proto.feature_request import IdBitmap, RowRequest
from gnnstore.proto.node_rows import NodeRows
from gnnstore.proto.reply_payload import PayloadWriter
from gnnstore.proto.reply_segment import ALIGNMENT, ArrayWriter
from gnnstore.proto.wire_dtypes import narrowed

logger = logging.getLogger(__name__)

HOT_AHEAD = 32
"""Sampled nodes whose hot-mask byte is requested ahead of the one tested."""


class RowGatherer:
    """Rows of sampled nodes and edges from the read tier, less those the client holds.

    Args:
        feature_store: where rows are read (the read tier over the store).
        max_reply_bytes: feature bytes one reply may gather.
        ranking: the out-degree ranking clients' hot sets come from (``None``: no snapshot,
            so hot prefixes are ignored and those rows are sent).
        memory: what replies' rows may take of the server's memory at once (``None``: no bound
            but ``max_reply_bytes`` a reply).
    """

    def __init__(
        self, feature_store: TieredFeatureStore, max_reply_bytes: int, ranking: DegreeRanking | None = None,
        memory: ReplyMemory | None = None,
    ) -> None:
        self._store = feature_store
        self._max_reply_bytes = max_reply_bytes
        self.ranking = ranking
        self._memory = memory

    def gather(
        self,
        out: Sample,
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
        comes from the read tier, into ``segment`` when given; rows of float attrs as
        ``request.wire_dtype`` when it names one (rounded).
        """
        sampled = _sampled_ids(out)
        wanted: dict[object, list[str]] = {}
        for group, name in request.attrs:
            if group in sampled:
                wanted.setdefault(group, []).append(name)
        ids_of = {group: sampled[group] for group in wanted}
        lacking = {group: self._lacking(group, ids_of[group], request, version) for group in wanted}
        empty = None if segment is None else segment.empty
        schema = {(s.group_name, s.attr_name): s for s in self._store.tensor_schema()}
        row_bytes = {key: s.row_bytes for key, s in schema.items()}
        node_groups = {g: names for g, names in wanted.items() if not is_edge_group(g)}
        positions: dict[object, np.ndarray] = {}
        if request.aligned and segment is not None and _fits_aligned(node_groups, sampled, segment, row_bytes):
            positions = {g: np.flatnonzero(lacking[g]) for g in node_groups}
        ids = {
            g: sampled[g][positions[g]] if g in positions else distinct_in_order(ids_of[g][keep])
            for g, keep in lacking.items()
        }
        queries = [RowQuery(g, name, ids[g]) for g, names in wanted.items() for name in names]
        need = self._check_reply_bytes(queries, row_bytes)
        if self._memory is not None and isinstance(segment, PayloadWriter):  # rows in this server's memory
            self._memory.reserve(need, segment)
        placements = [
            (positions[g], sampled[g].size) if g in positions else None
            for g, names in wanted.items() for _ in names
        ]
        stored = [getattr(schema.get((q.group_name, q.attr_name)), "dtype", None) for q in queries]  # None: unknown
        wire = [narrowed(dtype, request.wire_dtype) for dtype in stored]
        arrays = iter(self._gather(queries, placements, stored, wire, empty))
        dtypes = iter(wire)
        out = []
        for g, names in wanted.items():
            rows = {name: next(arrays) for name in names}
            out.append(NodeRows(g, ids[g], rows, {name: next(dtypes) for name in names}, positions.get(g)))
        return out

    def _gather(
        self,
        queries: list[RowQuery],
        placements: list[tuple[np.ndarray, int] | None],
        stored: list[str | None],
        wire: list[str | None],
        empty: Allocate | None,
    ) -> list[np.ndarray]:
        """Rows of ``queries`` (of ``stored`` dtypes, travelling as ``wire``) from the read tier:
        those that travel as stored straight into ``empty``, the narrowed ones read apart and
        rounded into it."""
        exact = [i for i in range(len(queries)) if wire[i] == stored[i]]
        narrow = [i for i in range(len(queries)) if wire[i] != stored[i]]
        out: dict[int, np.ndarray] = {}
        for at, allocate in ((exact, empty), (narrow, None)):
            if at:
                out.update(zip(at, self._store.read([queries[i] for i in at], allocate, [placements[i] for i in at])))
        for i in narrow:
            wide = out[i]
            out[i] = allocated(empty, wide.shape, wire[i])
            round_into(wide, out[i], wire[i])
        return [out[i] for i in range(len(queries))]

    def _lacking(self, group: object, ids: np.ndarray, request: RowRequest, version: SampledVersion) -> np.ndarray:
        """Which entries of ``ids`` (a node list, or a sample's edge ids) the client lacks (a
        mask): those neither in its hot prefix nor known."""
        keep = np.ones(ids.shape[0], dtype=bool)
        prefix = request.hot.get(group)
        if prefix is not None and prefix.count and not is_edge_group(group):
            if self.ranking is not None and prefix.snapshot_id == self.ranking.snapshot_id:
                _drop_hot(keep, ids, self.ranking.hot_mask(group, prefix.count))
            else:
                logger.debug("hot prefix of snapshot %r ignored: the ranking differs", prefix.snapshot_id)
        known = request.known.get(group)
        bitmap = isinstance(known, IdBitmap)
        held = 0 if known is None else known.bits.size if bitmap else known.size
        if held and ids.size:
            count = _id_count(group, version)
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

    def _check_reply_bytes(self, queries: list[RowQuery], row_bytes: dict[tuple, int]) -> int:
        """The feature bytes ``queries`` gather; refuse more than ``max_reply_bytes``, before gathering."""
        need = sum(len(q.index) * row_bytes.get((q.group_name, q.attr_name), 0) for q in queries)
        limit = self._max_reply_bytes
        if need > limit:
            raise ResourceExhaustedError(
                f"the sampled nodes' feature rows are {need:,} bytes, over the server's limit of "
                f"{limit:,} a reply; use fewer seeds or smaller fanouts, or raise the limit with "
                "`gnnstore serve --max-reply-bytes` (GNNSTORE_MAX_REPLY_BYTES)"
            )
        return need


@numba.njit(cache=True, nogil=True)
def _drop_hot(keep: np.ndarray, ids: np.ndarray, hot: np.ndarray) -> None:
    """``keep[i] = False`` where ``ids[i]`` is hot; ids past the mask (nodes added by graph
    writes) never are. The mask is read at random, so entries are requested ahead."""
    n, count = ids.shape[0], hot.shape[0]
    for i in range(n):
        if i + HOT_AHEAD < n and ids[i + HOT_AHEAD] < count:
            prefetch(hot, ids[i + HOT_AHEAD])
        if ids[i] < count and hot[ids[i]]:
            keep[i] = False


def _sampled_ids(out: Sample) -> dict[object, np.ndarray]:
    """The sample's global ids per feature group: node lists by node type, edge ids by edge
    group."""
    return {**out.node, **{edge_group_of(et): e for et, e in out.edge.items()}}


def _id_count(group: object, version: SampledVersion) -> int | None:
    """Ids of ``group`` in ``version``: its nodes, or the edge ids given (``None``: unknown,
    live sampling's edges)."""
    if is_edge_group(group):
        return version.bounds.edge_id_count(edge_type_of_group(group))
    return version.bounds.num_nodes.get(group, 0)


def _fits_aligned(
    wanted: dict[NodeType | None, list[str]],
    nodes: dict[NodeType | None, np.ndarray],
    segment: ArrayWriter,
    row_bytes: dict[tuple, int],
) -> bool:
    """Whether a row per node list entry of every wanted attr, with ids and positions, fits."""
    need = sum(
        nodes[g].size * row_bytes.get((g, name), 0) + ALIGNMENT
        for g, names in wanted.items() for name in names
    )
    need += sum(2 * (nodes[g].size * 8 + ALIGNMENT) for g in wanted)
    return need <= segment.free_bytes()
