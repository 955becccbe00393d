"""The seam between the remote sampler and the remote feature store: rows that rode with a sample.

PyG's loaders call ``sampler.sample_from_*`` and then, in the same process,
``feature_store.multi_get_tensor`` with ``index = n_id`` (**global** ids). When the sampler
was given the feature store, it asks the server for those rows in the sampling RPC itself and
``deliver``s them here; the feature store's ``multi_get_tensor`` then ``take``s them without
another round trip. Both objects hold the same ``FeatureExchange``, and it survives fork and
pickling (PyG pickles the feature store and the sampler together into spawned workers).

A feature cache plugs in as ``cache`` (anything with ``FeatureCache.read``'s signature):
``take`` answers hits from it and fills misses from the delivered rows. If the cache also
offers ``known_ids(group_name) -> Tensor`` (global ids it holds for every attr of the group),
the request tells the server to leave those rows out, so only misses travel.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor
from torch_geometric.data import TensorAttr
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.typing import NodeType

from gnnstore.proto import graph_pb2
from gnnstore.proto.sample_codec import NodeRows, feature_request_to_proto

logger = logging.getLogger(__name__)

PENDING_BATCHES = 8
"""Deliveries kept until taken; a prefetcher may sample a few batches ahead of the loader."""

FetchRows = Callable[[list[TensorAttr]], list[Tensor]]


class RowCache(Protocol):
    """What the exchange needs of a feature cache (``client.feature_cache.FeatureCache``)."""

    def read(
        self, group_name: Any, attr_name: str, ids: Tensor, fetch_missing: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """Rows of ``ids`` (global); ``fetch_missing`` gets the distinct missing ids, ascending."""


class _Delivery:
    """The rows one sample brought, per node type, with the batch's ``n_id`` they belong to."""

    def __init__(self, nodes: dict[NodeType | None, Tensor], rows: list[NodeRows]) -> None:
        self.nodes = nodes
        self.rows = {r.node_type: r for r in rows}

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
            and torch.equal(index.long(), node)
        )


class FeatureExchange:
    """Hands feature rows from the sampling RPC to the loader's ``multi_get_tensor``.

    Args:
        cache: an optional row cache consulted before delivered rows (see the module doc).
    """

    def __init__(self, cache: RowCache | None = None) -> None:
        self.cache = cache
        self._lock = threading.Lock()
        self._pending: deque[_Delivery] = deque(maxlen=PENDING_BATCHES)

    def __getstate__(self) -> dict[str, Any]:
        # Deliveries belong to the process that sampled them; the lock cannot be pickled.
        return {"cache": self.cache}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cache"])

    def request(self, attrs: Sequence[tuple[NodeType | None, str]]) -> graph_pb2.FeatureRequest:
        """The FeatureRequest a sampling RPC carries: ``attrs`` and the ids not to send."""
        known = {}
        known_ids = getattr(self.cache, "known_ids", None)
        if known_ids is not None:
            for group in {group for group, _ in attrs}:
                ids = known_ids(group)
                if ids is not None and ids.numel():
                    known[group] = ids
        return feature_request_to_proto(attrs, known)

    def deliver(self, out: SamplerOutput | HeteroSamplerOutput, rows: list[NodeRows]) -> None:
        """Keep the rows a sample brought until the loader asks for them."""
        nodes = out.node if isinstance(out, HeteroSamplerOutput) else {None: out.node}
        with self._lock:
            self._pending.append(_Delivery(nodes, rows))

    def take(self, attrs: list[TensorAttr], fetch: FetchRows) -> list[Tensor]:
        """Rows for ``attrs`` (index = global ids): from a delivery when one matches, else ``fetch``.

        Args:
            attrs: fully specified attrs, in the loader's order.
            fetch: reads rows from the server (one RPC) for attrs no delivery answers.
        """
        delivery = self._claim(attrs)
        if delivery is None:
            return self._read(attrs, fetch)
        out = []
        for attr in attrs:
            delivered = delivery.rows[attr.group_name]
            out.append(self._assemble(attr, delivered, fetch))
        return out

    def _claim(self, attrs: list[TensorAttr]) -> _Delivery | None:
        with self._lock:
            for delivery in reversed(self._pending):
                if attrs and all(delivery.covers(a) for a in attrs):
                    self._pending.remove(delivery)
                    return delivery
        return None

    def _assemble(self, attr: TensorAttr, delivered: NodeRows, fetch: FetchRows) -> Tensor:
        """Rows of ``attr.index`` from the delivered ids (unique, ascending), the cache, or fetch."""
        rows = delivered.rows[attr.attr_name]

        def from_delivery(ids: Tensor) -> Tensor:
            pos = torch.searchsorted(delivered.ids, ids).clamp_(max=max(delivered.ids.numel() - 1, 0))
            found = delivered.ids.numel() > 0 and bool((delivered.ids[pos] == ids).all())
            if found:
                return rows[pos]
            missing = TensorAttr(attr.group_name, attr.attr_name, ids)
            logger.debug("rows of %d ids were not delivered; fetching them", ids.numel())
            return fetch([missing])[0]

        index = attr.index.long()
        if self.cache is None:
            return from_delivery(index)
        return self.cache.read(attr.group_name, attr.attr_name, index, from_delivery)

    def _read(self, attrs: list[TensorAttr], fetch: FetchRows) -> list[Tensor]:
        """No delivery matches: the cache answers what it can, the server the rest."""
        if self.cache is None:
            return fetch(attrs)
        out = []
        for attr in attrs:
            if not isinstance(attr.index, Tensor):
                out.append(fetch([attr])[0])
                continue

            def fetch_missing(ids: Tensor, attr: TensorAttr = attr) -> Tensor:
                return fetch([TensorAttr(attr.group_name, attr.attr_name, ids)])[0]

            out.append(self.cache.read(attr.group_name, attr.attr_name, attr.index.long(), fetch_missing))
        return out
