"""The seam between the remote sampler and the remote feature store: rows that rode with a sample.

PyG's loaders call ``sampler.sample_from_*`` and then, in the same process,
``feature_store.multi_get_tensor`` with ``index = n_id`` (**global** ids). When the sampler
was given the feature store, it asks the server for those rows in the sampling RPC itself and
``deliver``s them here; the feature store's ``multi_get_tensor`` then ``take``s them without
another round trip. Both objects hold the same ``FeatureExchange``, and it survives fork and
pickling (PyG pickles the feature store and the sampler together into spawned workers).

The exchange is built once, by the feature store, with the store's one way to read rows
apart (``fetch``: a MultiGet) and its cache. A feature cache (anything with ``FeatureCache``'s
``locate`` and ``fill``) serves per node type: ``take`` has the cache place its hits and name
the ids it lacks, brings their rows (from the delivery, else one fetch), and hands them to the
cache to place and keep. If the cache also offers ``known_ids(group_name, include_static=...,
include_dynamic=...) -> Tensor`` (global ids it holds for every attr of the group), the
request tells the server to leave those rows out, so only misses travel. A static tier
warmed from the server's hot ranking (the cache's ``hot_prefix``, noted by
``client.hot_set.warm_hot_set``) is named by its length instead of its ids: a few bytes per
request rather than 4 per cached node.

With a CPU cache, rows that come through a shared-memory reply segment are *aligned* (the
request asks for that; a server aligns rows only into a segment): each sits
at its node's position in a tensor with a row per sampled node, and the cache writes its hits
into the rows around them, so those tensors become the batch's own and no delivered row is
copied on the trainer.

Edge attributes ride the same way when an ``EdgeFeatures`` transform asked for them
(``bring_edges``): their rows, one per distinct sampled edge id, wait apart from the node rows
until ``take_edges`` claims them by the batch's ``e_id`` (PyG's loaders never ask a store pair
for edge attributes). An ``edge_cache`` (a second ``FeatureCache``, over edge groups: it has no
hot set and its rows are never aligned) serves them as the cache serves node rows: the request
names the edge ids it holds, only misses travel, and they are admitted as they arrive.

``delivered_rows``/``delivered_bytes`` count the rows that rode with samples (one per attr and
id sent), ``fetched_rows``/``fetched_bytes`` those a separate MultiGet had to read; both
are per process.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import TensorAttr
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.typing import NodeType

from gnnstore.client.received_rows import ReceivedRows
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.graph_types import edge_group_of, is_edge_group
from gnnstore.proto import graph_pb2
from gnnstore.proto.feature_request import HotPrefix, IdBitmap, compact_ids, feature_request_to_proto
from gnnstore.proto.wire_dtypes import wire_dtype_name

if TYPE_CHECKING:
    from gnnstore.client.feature_cache import FeatureCache

logger = logging.getLogger(__name__)

PENDING_BATCHES = 8
"""Deliveries kept until taken; a prefetcher may sample a few batches ahead of the loader."""

FetchRows = Callable[[list[TensorAttr]], list[Tensor]]
FetchMissing = Callable[[Tensor], list[Tensor]]


class CacheRead(Protocol):
    """A cache read between ``locate`` and ``fill``."""

    @property
    def wanted(self) -> Tensor:
        """The distinct ids (int64, CPU) whose rows ``fill`` needs, in order of first appearance."""


class ExchangeCache(Protocol):
    """What the exchange needs of a feature cache (``client.feature_cache.FeatureCache``)."""

    device: torch.device
    """Where the cache keeps and returns rows (off the CPU, rows are never placed in delivered arrays)."""

    def known_ids(
        self, group_name: Any, *, include_static: bool = True, include_dynamic: bool = False, reads_ahead: int = 0
    ) -> Tensor:
        """Global ids held in the named tiers, for a request to leave out (``reads_ahead``: batches
        read before this one's, whose evictions are not named)."""

    def hot_prefix(self, group_name: Any) -> HotPrefix | None:
        """The leading ids of the server's hot ranking the static tier holds (``None``: none)."""

    def locate(
        self,
        group_name: Any,
        attr_names: Sequence[str],
        ids: Tensor,
        *,
        into: Sequence[Tensor] | None = None,
        written: np.ndarray | None = None,
        sent: tuple[Tensor, Sequence[Tensor]] | None = None,
    ) -> CacheRead:
        """Rows of ``ids`` (global) per attr with the hits in place, and the ids still wanted.
        ``into``: tensors to fill (a row per id), of which the rows ``written`` (a mask) already
        hold theirs. ``sent``: delivered ids and their rows per attr, placed at once when they
        cover the ids lacking."""

    def fill(self, read: CacheRead, rows: Sequence[Tensor]) -> list[Tensor]:
        """The read's rows, with ``rows`` (per attr, a row per wanted id) placed and admitted."""


class _Delivery:
    """The rows one sample brought, per node type, with the batch's ``n_id`` they belong to."""

    def __init__(self, nodes: dict[NodeType | None, Tensor], rows: list[ReceivedRows]) -> None:
        self.nodes = nodes
        self.rows = {r.group: r for r in rows}

    def covers(self, attr: TensorAttr) -> bool:
        """Whether this delivery is for ``attr.index`` (same ids, same order) and holds ``attr``."""
        node = self.nodes.get(attr.group_name)
        delivered = self.rows.get(attr.group_name)
        index = attr.index
        return (
            node is not None
            and delivered is not None
            and attr.attr_name in delivered.rows
            and isinstance(index, Tensor)
            and index.dim() == 1
            and index.numel() == node.numel()
            # PyG's loaders pass the sample's own node tensor: skip the per-attr comparison then.
            and (index is node or torch.equal(index.long(), node))
        )


class _EdgeDelivery:
    """The edge rows one sample brought, per edge group, with the sample's edge ids."""

    def __init__(self, edges: dict[Any, Tensor], rows: list[ReceivedRows]) -> None:
        self.edges = edges
        self.rows = {r.group: r for r in rows}

    def covers(self, e_ids: dict[Any, Tensor], names: dict[Any, list[str]]) -> bool:
        """Whether this delivery is for these edge ids (same ids, same order) and holds ``names``."""
        return all(
            group in self.edges and group in self.rows
            and all(name in self.rows[group].rows for name in names[group])
            and ids.numel() == self.edges[group].numel()
            and torch.equal(ids, self.edges[group].long())
            for group, ids in e_ids.items()
        )


class FeatureExchange:
    """Hands feature rows from the sampling RPC to the loader's ``multi_get_tensor``.

    Args:
        fetch: reads rows from the server apart from samples (one MultiGet), for rows no
            delivery or cache holds.
        cache: an optional row cache consulted before delivered rows (see the module doc).
        wire_dtype: ``torch.bfloat16`` or ``torch.float16`` (or its name): rows of float32 and
            float64 attrs that ride with samples travel rounded to it, in half their bytes or
            less (lossy; ``None``, the default: exact). Rows read apart (a MultiGet) stay exact.
    """

    def __init__(
        self, fetch: FetchRows, cache: ExchangeCache | None = None, *, wire_dtype: torch.dtype | str | None = None
    ) -> None:
        self.cache = cache
        self.edge_attrs: frozenset[str] = frozenset()
        """Edge attribute names each sample brings (``bring_edges``)."""
        self.edge_cache: FeatureCache | None = None
        """The row cache of edge rows by edge group (``bring_edges``)."""
        self._fetch = fetch
        self.wire_dtype = None if wire_dtype is None else getattr(torch, wire_dtype_name(wire_dtype))
        self.delivered_rows = self.delivered_bytes = self.fetched_rows = self.fetched_bytes = 0
        self._lock = threading.Lock()
        self._pending: deque[_Delivery] = deque(maxlen=PENDING_BATCHES)
        self._edge_pending: deque[_EdgeDelivery] = deque(maxlen=PENDING_BATCHES)

    def __getstate__(self) -> dict[str, Any]:
        # Deliveries belong to the process that sampled them; the lock cannot be pickled.
        return {
            "fetch": self._fetch, "cache": self.cache, "edge_attrs": self.edge_attrs, "edge_cache": self.edge_cache,
            "wire_dtype": self.wire_dtype,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["fetch"], state["cache"], wire_dtype=state["wire_dtype"])
        self.bring_edges(state["edge_attrs"], state["edge_cache"])

    def bring_edges(self, names: frozenset[str], cache: FeatureCache | None = None) -> None:
        """Have each sample also bring the rows of the edge attributes ``names`` (added to those
        already brought); ``cache``, if given, replaces the edge cache."""
        with self._lock:
            self.edge_attrs = self.edge_attrs | names
            if cache is not None:
                self.edge_cache = cache

    def wanted(self, schema: Sequence[AttrSchema]) -> list[tuple[Any, str | None]]:
        """The (group, attr) pairs a sample should bring: every node attribute, and the edge
        attributes ``edge_attrs`` names."""
        return [(s.group_name, s.attr_name) for s in schema if not s.is_edge or s.attr_name in self.edge_attrs]

    def request(self, attrs: Sequence[tuple[Any, str]], reads_ahead: int = 0) -> graph_pb2.FeatureRequest:
        """The FeatureRequest a sampling RPC carries: ``attrs`` and what not to send.

        ``reads_ahead``: batches this process reads before this request's own (a prefetcher's
        batches in flight); the caches' dynamic rows they would evict are not named. With a CPU
        cache the rows are asked for aligned (a server aligns them only into a reply segment),
        so the cache fills its hits around them.
        """
        known: dict[Any, Tensor | IdBitmap] = {}
        hot: dict[NodeType | None, HotPrefix] = {}
        for group, names in _names_by_group(attrs).items():
            count = 0
            if is_edge_group(group):
                cache = self._edge_cache_of(group, names)
            else:
                cache = self.cache
                prefix = None if cache is None else cache.hot_prefix(group)
                if prefix is not None:
                    hot[group], count = prefix, prefix.count
            if cache is not None:
                ids = cache.known_ids(group, include_static=not count, include_dynamic=True, reads_ahead=reads_ahead)
                if ids.numel():
                    known[group] = compact_ids(ids)
        request = feature_request_to_proto(attrs, known, hot, self.wire_dtype)
        request.aligned = self.cache is not None and self.cache.device.type == "cpu"
        return request

    def deliver(
        self, out: SamplerOutput | HeteroSamplerOutput, rows: list[ReceivedRows], schema: Sequence[AttrSchema] = ()
    ) -> None:
        """Keep the rows a sample brought until the loader (and ``EdgeFeatures``) ask for them;
        rows that travelled as ``wire_dtype`` go back to their dtype in ``schema``."""
        sent_rows = sum(r.ids.numel() * len(r.rows) for r in rows)  # aligned: rows written
        sent_bytes = sum(sum(t.numel() * t.element_size() for t in r.rows.values()) - r.bytes_unwritten for r in rows)
        if self.wire_dtype is not None:
            dtypes: dict[Any, dict[str, str]] = {}
            for spec in schema:
                dtypes.setdefault(spec.group_name, {})[spec.attr_name] = spec.dtype
            rows = [r.widened(dtypes.get(r.group, {}), self.wire_dtype) for r in rows]
        nodes = out.node if isinstance(out, HeteroSamplerOutput) else {None: out.node}
        edge_rows = [r for r in rows if is_edge_group(r.group)]
        with self._lock:
            self._pending.append(_Delivery(nodes, [r for r in rows if not is_edge_group(r.group)]))
            if edge_rows:
                edges = out.edge if isinstance(out, HeteroSamplerOutput) else {None: out.edge}
                groups = {edge_group_of(et): e for et, e in (edges or {}).items() if e is not None}
                self._edge_pending.append(_EdgeDelivery(groups, edge_rows))
            self.delivered_rows += sent_rows
            self.delivered_bytes += sent_bytes

    def take(self, attrs: list[TensorAttr]) -> list[Tensor]:
        """Rows for ``attrs`` (fully specified, index = global ids, in the loader's order): from
        the cache and a delivery when one matches, else fetched."""
        delivery = self._claim(attrs)
        if delivery is None:
            return self._read(attrs)
        out: dict[int, Tensor] = {}
        for group, positions in _by_group(attrs).items():
            names = [attrs[i].attr_name for i in positions]
            rows = self._assemble(group, names, attrs[positions[0]].index, delivery.rows[group])
            out.update(zip(positions, rows))
        return [out[i] for i in range(len(attrs))]

    def take_edges(self, e_ids: dict[Any, Tensor], names: dict[Any, list[str]]) -> dict[Any, dict[str, Tensor]]:
        """Rows of edge attributes ``names[group]`` for the edge ids ``e_ids[group]`` (global,
        per edge group): from the edge cache and the delivery of the sample with these edge ids,
        else fetched."""
        with self._lock:
            delivery = next((d for d in reversed(self._edge_pending) if d.covers(e_ids, names)), None)
            if delivery is not None:
                self._edge_pending.remove(delivery)
        if delivery is None and self.edge_cache is None:  # every group in one MultiGet
            attrs = [TensorAttr(g, name, ids) for g, ids in e_ids.items() for name in names[g]]
            tensors = iter(self.fetch(attrs) if attrs else [])
            return {g: {name: next(tensors) for name in names[g]} for g in e_ids}
        out: dict[Any, dict[str, Tensor]] = {}
        for group, ids in e_ids.items():
            group_names, ids = names[group], ids.long()
            source = partial(self._fetch_group, group, group_names)
            sent = None
            if delivery is not None:
                delivered = delivery.rows[group]
                source = partial(self._from_delivery, group, delivered, group_names)
                sent = (delivered.ids, [delivered.rows[name] for name in group_names])
            cache = self._edge_cache_of(group, group_names)
            rows = source(ids) if cache is None else _read_through(cache, group, group_names, ids, source, sent=sent)
            out[group] = dict(zip(group_names, rows))
        return out

    def fetch(self, attrs: list[TensorAttr]) -> list[Tensor]:
        """Rows of ``attrs`` read apart from samples (one call), counted in ``fetched_*``."""
        tensors = self._fetch(attrs)
        with self._lock:
            self.fetched_rows += sum(t.shape[0] if t.dim() else 1 for t in tensors)
            self.fetched_bytes += sum(t.numel() * t.element_size() for t in tensors)
        return tensors

    def _edge_cache_of(self, group: Any, names: Sequence[str]) -> FeatureCache | None:
        """The edge cache when it holds every attr of ``names`` for ``group``, else ``None``."""
        cache = self.edge_cache
        if cache is None or group not in cache.groups() or not set(names) <= set(cache.attr_names(group)):
            return None
        return cache

    def _fetch_group(self, group: Any, names: list[str], ids: Tensor) -> list[Tensor]:
        """Rows of ``ids`` for the attrs ``names`` of ``group``, fetched in one call."""
        return self.fetch([TensorAttr(group, name, ids) for name in names])

    def _from_delivery(self, group: Any, delivered: ReceivedRows, names: list[str], ids: Tensor) -> list[Tensor]:
        """Rows of ``ids`` for ``names`` from rows delivered one per id; those not delivered
        (e.g. a cached row named in the request was evicted before its batch was read) are
        fetched."""
        rows = [delivered.rows[name] for name in names]
        if ids.numel() == delivered.ids.numel() and torch.equal(ids, delivered.ids):
            return rows  # the cache asks for exactly the rows the server sent (only misses)
        order = torch.argsort(delivered.ids)
        ordered = delivered.ids[order]
        pos = torch.searchsorted(ordered, ids).clamp_(max=max(ordered.numel() - 1, 0))
        sent = ordered[pos] == ids if ordered.numel() else torch.zeros_like(ids, dtype=torch.bool)
        if bool(sent.all()):
            return [r.index_select(0, order[pos]) for r in rows]
        logger.debug("rows of %d of %d ids were not delivered; fetching them", int((~sent).sum()), ids.numel())
        out = [torch.empty((ids.numel(), *r.shape[1:]), dtype=r.dtype) for r in rows]
        for o, r, fetched in zip(out, rows, self._fetch_group(group, names, ids[~sent])):
            o[sent] = r.index_select(0, order[pos[sent]])
            o[~sent] = fetched
        return out

    def _claim(self, attrs: list[TensorAttr]) -> _Delivery | None:
        with self._lock:
            for delivery in reversed(self._pending):
                if attrs and all(delivery.covers(a) for a in attrs):
                    self._pending.remove(delivery)
                    return delivery
        return None

    def _assemble(
        self, group: NodeType | None, names: list[str], index: Tensor, delivered: ReceivedRows
    ) -> list[Tensor]:
        """Rows of ``index`` for ``names`` from the delivered rows, the cache, or fetched."""
        index = index.long()
        written = None if delivered.positions is None else self._aligned_rows_written(index, delivered, names)
        if written is not None and (self.cache is not None or written.all()):
            into = [delivered.rows[name] for name in names]
            if self.cache is None:
                return into  # every row was sent, each at its place: the batch's own arrays
            return _read_through(
                self.cache, group, names, index, partial(self._fetch_group, group, names), into=into, written=written
            )
        delivered = delivered.compacted()
        from_delivery = partial(self._from_delivery, group, delivered, names)
        if self.cache is None:
            return from_delivery(index)
        sent = (delivered.ids, [delivered.rows[name] for name in names])
        return _read_through(self.cache, group, names, index, from_delivery, sent=sent)

    def _aligned_rows_written(self, index: Tensor, delivered: ReceivedRows, names: list[str]) -> np.ndarray | None:
        """Which rows of aligned ``delivered`` hold theirs (a mask over ``index``), or ``None``
        when they cannot be filled in place: another length or ids than ``index``, or a cache
        off the CPU."""
        positions = delivered.positions
        if (
            any(len(delivered.rows[name]) != index.numel() for name in names)
            or (self.cache is not None and self.cache.device.type != "cpu")
            # in numpy: a third of torch's time at a batch's sizes
            or not np.array_equal(index.numpy()[positions.numpy()], delivered.ids.numpy())
        ):
            return None
        written = np.zeros(index.numel(), dtype=bool)
        written[positions.numpy()] = True
        return written

    def _read(self, attrs: list[TensorAttr]) -> list[Tensor]:
        """No delivery matches: the cache answers what it can, the server the rest."""
        if self.cache is None:
            return self.fetch(attrs)
        out: dict[int, Tensor] = {}
        for i, attr in enumerate(attrs):
            if not isinstance(attr.index, Tensor) or is_edge_group(attr.group_name):  # not cached
                out[i] = self.fetch([attr])[0]
        by_index: dict[tuple[Any, int], list[int]] = {}
        for i, attr in enumerate(attrs):  # one cache call per node type and index tensor
            if i not in out:
                by_index.setdefault((attr.group_name, id(attr.index)), []).append(i)
        for (group, _), positions in by_index.items():
            names = [attrs[i].attr_name for i in positions]
            fetch_missing = partial(self._fetch_group, group, names)
            rows = _read_through(self.cache, group, names, attrs[positions[0]].index.long(), fetch_missing)
            out.update(zip(positions, rows))
        return [out[i] for i in range(len(attrs))]


def _read_through(
    cache: ExchangeCache, group: Any, names: list[str], ids: Tensor, source: FetchMissing, **placed: Any
) -> list[Tensor]:
    """Rows of ``ids`` through ``cache``: it places its hits and names the ids it lacks, ``source``
    brings their rows, the cache places and keeps them. ``placed``: ``locate``'s ``into``/``written``
    or ``sent``."""
    read = cache.locate(group, names, ids, **placed)
    wanted = read.wanted
    return cache.fill(read, source(wanted) if wanted.numel() else [])


def _names_by_group(attrs: Sequence[tuple[Any, str]]) -> dict[Any, list[str]]:
    """Attr names per group, groups in order of first appearance."""
    groups: dict[Any, list[str]] = {}
    for group, name in attrs:
        groups.setdefault(group, []).append(name)
    return groups


def _by_group(attrs: list[TensorAttr]) -> dict[NodeType | None, list[int]]:
    """Positions of ``attrs`` per node type, in order."""
    groups: dict[NodeType | None, list[int]] = {}
    for i, attr in enumerate(attrs):
        groups.setdefault(attr.group_name, []).append(i)
    return groups
