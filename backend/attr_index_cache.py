"""One index built from a stored attribute at a time, rebuilt when the feature store changes.

The temporal index (node times) and the weight index (edge weights) are both derived from the
snapshot's CSC and one feature attribute, cost a pass over every edge to build, and go stale
when a Put changes the feature store. ``AttrIndexCache`` keeps the last one built, keyed by the
attribute's name and the store's version; concurrent callers wait for one build instead of
each making their own.
"""
from __future__ import annotations

import logging
import threading
import time as clock
from collections.abc import Callable
from typing import Any, Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AttrIndexCache(Generic[T]):
    """The index ``build(attr)`` of one attribute at a time.

    Args:
        build: makes the index of an attribute name (its errors pass through).
        feature_store: what the index is read from (``version()``).
        what: how the log names the index, e.g. ``"temporal index"``.
    """

    def __init__(self, build: Callable[[str], T], feature_store: Any, what: str) -> None:
        self._build = build
        self._features = feature_store
        self._what = what
        self._lock = threading.Lock()
        self._cached: tuple[tuple[str, str], T] | None = None

    def get(self, attr: str) -> T:
        """The index of ``attr`` at the store's current version (built now if needed)."""
        with self._lock:
            key = (attr, self._features.version())
            if self._cached is None or self._cached[0] != key:
                self._cached = None  # the old index's memory goes before the new one is built
                started = clock.monotonic()
                index = self._build(attr)
                logger.info("%s by %r built in %.2f s", self._what, attr, clock.monotonic() - started)
                self._cached = (key, index)
            return self._cached[1]
