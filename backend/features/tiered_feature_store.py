"""The server's feature store: reads from the read tier, writes to RocksDB, as numpy arrays.

RocksDB stays the truth; the tier (``feature_tier.py``) holds contiguous arrays exported from
it. Reads use the tier whenever it matches the store's version and fall back to the store
otherwise, so a reply never mixes versions or serves stale rows. Every write goes to the store
and then refreshes the tier with what it changed (the rows or the one attr; see ``Change``) and
an atomic swap. Writes run one at a time (concurrent refreshes would sweep each other's build
folders), and a write answers by what the store committed: a refresh that fails afterwards is
logged and reads come from RocksDB until the next one succeeds.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnstore.backend.features.feature_tier import Change, FeatureTier, TierSnapshot
from gnnstore.common.allocate import Allocate
from gnnstore.stores.rocksdb_rows import RocksDBRows
from gnnstore.stores.row_index import resolve_index

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowQuery:
    """Rows of one (group, attr) at ``index`` (PyG's index forms: ``None``, a slice, an int or
    an integer array of global ids)."""

    group_name: Any
    attr_name: str | None
    index: Any = None


class TieredFeatureStore:
    """Feature rows from a RocksDB store and its read tier.

    Args:
        store: the durable store.
        tier: the read tier kept in step with ``store``.
    """

    def __init__(self, store: RocksDBRows, tier: FeatureTier) -> None:
        self.store = store
        self.tier = tier
        self._write_lock = threading.Lock()

    def tensor_schema(self) -> list[Any]:
        """The store's schema: group, attr, dtype and full shape of each attribute."""
        return self.store.tensor_schema()

    def size(self, group_name: Any, attr_name: str | None) -> tuple[int, ...] | None:
        """The full shape of one attribute, or ``None`` when it is not stored."""
        return self.store.size(group_name, attr_name)

    def _live(self) -> TierSnapshot | None:
        """The tier's arrays if they hold the store's current version, else ``None``."""
        return self.tier.snapshot() if self.tier.is_current(self.store) else None

    def read(
        self,
        queries: list[RowQuery],
        empty: Allocate | None = None,
        placements: list[tuple[np.ndarray, int] | None] | None = None,
    ) -> list[np.ndarray]:
        """The rows of each query (``bfloat16`` ones as raw words); ``empty`` allocates the
        results (e.g. straight in a reply segment).

        ``placements[i] = (at, length)`` makes result ``i`` a ``length``-row array with the row
        of ``queries[i].index[j]`` at ``at[j]`` (see ``TierArray.gather``); ``None`` (or an entry
        ``None``) gives the rows in index order.

        Raises:
            NotFoundError: an attribute that is not stored.
            InvalidRequestError: a bad index or an id out of range.
        """
        placements = placements or [None] * len(queries)
        snapshot = self._live()
        if snapshot is None:
            logger.debug("feature tier behind the store; reading %d attrs from RocksDB", len(queries))
            rows = [self.store.read(q.group_name, q.attr_name, q.index) for q in queries]
            return [r if p is None else _placed(r, p, empty) for r, p in zip(rows, placements)]
        out = []
        checked: dict[tuple[int, int], np.ndarray] = {}  # a node type's attrs share one index: one check
        for query, placement in zip(queries, placements):
            array = snapshot.array(query.group_name, query.attr_name)
            key = (id(query.index), array.rows.shape[0])  # ``queries`` keeps each index alive, so ids stay unique
            if key not in checked:
                checked[key] = resolve_index(query.index, array.rows.shape[0], query.group_name, query.attr_name)
            ids = checked[key]
            if placement is None:
                rows = array.gather(ids.reshape(-1), empty)
                out.append(rows.reshape(*ids.shape, *rows.shape[1:]))
            else:
                out.append(array.gather(ids, empty, placement))
        return out

    def write(self, group_name: Any, attr_name: str | None, rows: np.ndarray, dtype: str, index: Any = None) -> bool:
        """``RocksDBRows.write``, then the tier brought to the store's new version."""
        with self._write_lock:
            base = self.store.version()
            written = self.store.write(group_name, attr_name, rows, dtype, index)
            ids = None
            if index is not None:
                count = self.store.size(group_name, attr_name)[0]
                ids = resolve_index(index, count, group_name, attr_name).reshape(-1)
            self._refresh_tier(Change(base, group_name, attr_name, ids))
        return written

    def remove(self, group_name: Any, attr_name: str | None) -> bool:
        """``RocksDBRows.remove``, then the tier brought to the store's new version."""
        with self._write_lock:
            base = self.store.version()
            removed = self.store.remove(group_name, attr_name)
            self._refresh_tier(Change(base, group_name, attr_name))
        return removed

    def _refresh_tier(self, change: Change) -> None:
        """Bring the tier to the store's version; the write is committed whatever happens here."""
        try:
            self.tier.refresh(self.store, change)
        except Exception:
            logger.exception("feature tier refresh failed; reads come from RocksDB until the next write")


def _placed(rows: np.ndarray, placement: tuple[np.ndarray, int], empty: Allocate | None) -> np.ndarray:
    """``rows`` written at ``placement[0]`` of a ``placement[1]``-row array."""
    at, length = placement
    out = (empty or np.empty)((length, *rows.shape[1:]), rows.dtype)
    out[at] = rows
    return out
