"""One index built from a stored attribute at a time, rebuilt when the feature store changes.

The temporal index (node times) and the weight index (edge weights) are both derived from the
snapshot's CSC and one feature attribute, cost a pass over every edge to build, and go stale
when a Put changes the feature store. ``AttrIndexCache``, their base, keeps the last one built,
keyed by the attribute's name and the store's version; concurrent callers wait for one build
instead of each making their own.
"""
from __future__ import annotations

import logging
import threading
import time as clock
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

import numpy as np

from gnnstore.common.dtypes import computable

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AttrIndexCache(ABC, Generic[T]):
    """The index of one attribute at a time, over one engine and one feature store.

    Args:
        engine: the snapshot's engine (``SamplingEngine``).
        feature_store: the durable feature store (``RocksDBRows``: ``version()``, ``tensor_schema()``,
            ``read``, ``dtype``).
    """

    what = "index"
    """How the log names the index."""

    def __init__(self, engine: Any, feature_store: Any) -> None:
        self._engine = engine
        self._features = feature_store
        self._lock = threading.Lock()
        self._cached: tuple[tuple[str, str], T] | None = None

    @abstractmethod
    def _build(self, attr: str) -> T:
        """The index of ``attr`` (its errors pass through to ``get``'s caller)."""

    def get(self, attr: str) -> T:
        """The index of ``attr`` at the store's current version (built now if needed)."""
        with self._lock:
            key = (attr, self._features.version())
            if self._cached is None or self._cached[0] != key:
                self._cached = None  # the old index's memory goes before the new one is built
                started = clock.monotonic()
                index = self._build(attr)
                logger.info("%s by %r built in %.2f s", self.what, attr, clock.monotonic() - started)
                self._cached = (key, index)
            return self._cached[1]

    def _read(self, group: Any, attr: str) -> np.ndarray:
        """Every row of ``attr`` in ``group``, in a dtype numpy computes with (bfloat16 widened)."""
        return computable(self._features.read(group, attr), self._features.dtype(group, attr))
