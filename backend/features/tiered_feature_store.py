"""The server's FeatureStore: reads from the read tier, writes to RocksDB.

RocksDB stays the truth; the tier (``feature_tier.py``) holds contiguous arrays exported from
it. Reads use the tier whenever it matches the store's version and fall back to the store
otherwise, so a reply never mixes versions or serves stale rows. Every write goes to the store
and then refreshes the tier with what it changed (the rows or the one attr; see ``Change``) and
an atomic swap. Writes run
one at a time (concurrent refreshes would sweep each other's build folders), and a write
answers by what the store committed: a refresh that fails afterwards is logged and reads come
from RocksDB until the next one succeeds.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr

from gnnstore.backend.features.feature_tier import Change, FeatureTier, TierSnapshot, allocated
from gnnstore.common.allocate import Allocate
from gnnstore.stores.row_index import resolve_index

logger = logging.getLogger(__name__)


class TieredFeatureStore(FeatureStore):
    """PyG FeatureStore over a RocksDB feature store and its read tier.

    Args:
        store: the durable store (``RocksDBFeatureStore`` or one with ``version()`` and
            ``tensor_schema()``).
        tier: the read tier kept in step with ``store``.
    """

    def __init__(self, store: Any, tier: FeatureTier) -> None:
        super().__init__()
        self.store = store
        self.tier = tier
        self._write_lock = threading.Lock()

    def tensor_schema(self) -> list[Any]:
        """The store's schema: group, attr, dtype and full shape of each attribute."""
        return self.store.tensor_schema()

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """New TensorAttr objects, one per stored (group, attr)."""
        return self.store.get_all_tensor_attrs()

    def _live(self) -> TierSnapshot | None:
        """The tier's arrays if they hold the store's current version, else ``None``."""
        return self.tier.snapshot() if self.tier.is_current(self.store) else None

    def _get_tensor(self, attr: TensorAttr) -> Tensor:
        return self._multi_get_tensor([attr])[0]

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[Tensor]:
        return self.gather(attrs)

    def gather(
        self,
        attrs: list[TensorAttr],
        empty: Allocate | None = None,
        placements: list[tuple[np.ndarray, int] | None] | None = None,
    ) -> list[Tensor]:
        """``multi_get_tensor`` of fully specified attrs with 1-D indices; ``empty`` allocates
        the results (e.g. straight in a reply segment).

        ``placements[i] = (at, length)`` makes result ``i`` a ``length``-row tensor with the row
        of ``attrs[i].index[j]`` at ``at[j]`` (see ``TierArray.gather``); ``None`` (or an entry
        ``None``) gives the rows in index order.
        """
        placements = placements or [None] * len(attrs)
        snapshot = self._live()
        if snapshot is None:
            logger.debug("feature tier behind the store; reading %d attrs from RocksDB", len(attrs))
            rows = self.store.multi_get_tensor(attrs)
            return [r if p is None else _placed(r, p, empty) for r, p in zip(rows, placements)]
        out = []
        checked: dict[tuple[int, int], np.ndarray] = {}  # a node type's attrs share one index: one check
        for attr, placement in zip(attrs, placements):
            array = snapshot.array(attr.group_name, attr.attr_name)
            key = (id(attr.index), array.rows.shape[0])  # ``attrs`` keeps each index alive, so ids stay unique
            if key not in checked:
                checked[key] = resolve_index(attr.index, array.rows.shape[0], attr.group_name, attr.attr_name)
            ids = checked[key]
            if placement is None:
                rows = array.gather(ids.reshape(-1), empty)
                out.append(rows.reshape(*ids.shape, *rows.shape[1:]))
            else:
                out.append(array.gather(ids, empty, placement))
        return out

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        with self._write_lock:
            base = self.store.version()
            written = self.store.put_tensor(tensor, attr)
            ids = None
            if attr.index is not None:
                rows = self.store.get_tensor_size(attr)[0]
                ids = resolve_index(attr.index, rows, attr.group_name, attr.attr_name).reshape(-1)
            self._refresh_tier(Change(base, attr.group_name, attr.attr_name, ids))
        return written

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        with self._write_lock:
            base = self.store.version()
            removed = self.store.remove_tensor(attr)
            self._refresh_tier(Change(base, attr.group_name, attr.attr_name))
        return removed

    def _refresh_tier(self, change: Change) -> None:
        """Bring the tier to the store's version; the write is committed whatever happens here."""
        try:
            self.tier.refresh(self.store, change)
        except Exception:
            logger.exception("feature tier refresh failed; reads come from RocksDB until the next write")

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        return self.store.get_tensor_size(attr)


def _placed(rows: Tensor, placement: tuple[np.ndarray, int], empty: Allocate | None) -> Tensor:
    """``rows`` written at ``placement[0]`` of a ``placement[1]``-row tensor."""
    at, length = placement
    out = allocated(empty, (length, *rows.shape[1:]), rows.dtype)
    out[torch.from_numpy(at)] = rows
    return out
