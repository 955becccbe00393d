"""``EdgeFeatures``: a loader transform that adds a batch's edge attributes, the rows of its ``e_id``.

PyG's loaders never read edge attributes from a store pair: the homogeneous
``filter_custom_store`` reads every listed attribute at the batch's *node* ids, which gives an
edge attribute the wrong rows (PyG#9566), and ``filter_custom_hetero_store`` skips edge types.
So gnnstore's feature stores list only node attributes (as PyG's ``Data`` and ``HeteroData``
do), and this transform sets ``batch[name]`` (``batch[edge_type][name]`` when heterogeneous) to
the stored rows of ``batch.e_id``::

    loader = NodeLoader((fs, gs), sampler, input_nodes=..., transform=EdgeFeatures(fs))

Made on the loader's feature store, it has the remote sampler (``feature_store=fs``) bring those
rows with each sample, so they cost no extra round trip; without them (another sampler, or a
sample whose rows were dropped) one MultiGet reads them. With ``cache_bytes`` the rows are
cached on the trainer as node rows are (``FeatureCache``, by edge id): each sampling request
names the edge ids held, and only the others travel.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from gnnstore.client.cache_policy import EVICTION_POLICIES
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.common.graph_types import edge_group_of


class EdgeFeatures:
    """Adds the stored edge attributes of a batch's sampled edges (``e_id``) to the batch.

    Args:
        feature_store: the loader's :class:`RemoteFeatureStore`.
        attrs: edge attribute names to add (default: every stored one); an edge type without
            one of them is left as it is.
        cache_bytes: bytes of edge rows to cache on the trainer (0: none), shared by the edge
            types in proportion to their rows' size; the id maps add 4 bytes per edge id.
            The cache (``self.cache``; ``stats()`` gives its hit rate) holds the attributes
            this and earlier ``EdgeFeatures`` on the feature store add; a later one with
            ``cache_bytes`` replaces it.
        cache_policy: ``lru`` or ``sieve`` (default): edges have no hot set to warm.
        cache_device: where cached rows live, as ``connect``'s ``cache_device``.

    Raises:
        NotFoundError: a name no edge type stores.
        InvalidRequestError: ``attrs`` holds a name that is not a non-empty str; a bad cache
            size or policy.
    """

    def __init__(
        self,
        feature_store: RemoteFeatureStore,
        attrs: Iterable[str] | None = None,
        *,
        cache_bytes: int = 0,
        cache_policy: str = "sieve",
        cache_device: str | torch.device = "cpu",
    ) -> None:
        if not isinstance(feature_store, RemoteFeatureStore):
            raise InvalidRequestError(
                f"EdgeFeatures needs the loader's RemoteFeatureStore, got {type(feature_store).__name__}"
            )
        stored = {s.attr_name for s in feature_store.schema() if s.is_edge and s.attr_name is not None}
        names = stored if attrs is None else set(attrs)
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad:
            raise InvalidRequestError(f"edge attribute names must be non-empty str, got {bad!r}")
        unknown = sorted(names - stored)
        if unknown:
            raise NotFoundError(
                f"no edge type stores the edge attribute(s) {unknown} (stored: {sorted(stored) or 'none'})"
            )
        if cache_policy not in EVICTION_POLICIES:
            raise InvalidRequestError(
                f"edge rows are cached by {sorted(EVICTION_POLICIES)} (edges have no hot set), got {cache_policy!r}"
            )
        self.feature_store = feature_store
        self.attrs = frozenset(names)
        cache = None
        if cache_bytes:
            brought = feature_store.exchange.edge_attrs | self.attrs
            cached = [s for s in feature_store.schema() if s.is_edge and s.attr_name in brought]
            cache = FeatureCache(cache_bytes, cached, policy=cache_policy, device=cache_device)
        feature_store.exchange.bring_edges(self.attrs, cache)

    @property
    def cache(self) -> FeatureCache | None:
        """The feature store's cache of edge rows (``None`` without one)."""
        return self.feature_store.exchange.edge_cache

    def __repr__(self) -> str:
        return f"EdgeFeatures({sorted(self.attrs)})"

    def __call__(self, batch: Data | HeteroData) -> Data | HeteroData:
        """``batch`` with the rows of its ``e_id`` for each edge attribute, per edge type.

        Raises:
            InvalidRequestError: a homogeneous batch without ``e_id``.
        """
        if isinstance(batch, HeteroData):
            stores = {et: batch[et] for et in batch.edge_types if "e_id" in batch[et]}
        else:
            if "e_id" not in batch:
                raise InvalidRequestError("EdgeFeatures needs batch.e_id: sample with a sampler that returns edge ids")
            stores = {None: batch}
        schema = self.feature_store.schema()
        e_ids: dict[Any, Tensor] = {}
        names: dict[Any, list[str]] = {}
        for edge_type, store in stores.items():
            group = edge_group_of(edge_type)
            wanted = [s.attr_name for s in schema if s.group_name == group and s.attr_name in self.attrs]
            if wanted:
                e_ids[group], names[group] = store.e_id, wanted
        if e_ids:
            rows = self.feature_store.exchange.take_edges(e_ids, names)
            for edge_type, store in stores.items():
                for name, tensor in rows.get(edge_group_of(edge_type), {}).items():
                    store[name] = tensor
        return batch
