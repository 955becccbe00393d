"""A replica follows the primary that writes its data directory, within a bounded lag.

The primary is the only writer. Every ``max_lag_s / 4`` seconds the follower takes what it
wrote since the last round: the feature store's and id map's writes (RocksDB secondary
instances), the feature tier version the primary exported, and the graph writes in its log.
Graph writes are taken last and only those on disk before the round began, because the primary
stores a write's rows and keys before it logs the write: a version the replica serves never has
a node without its rows.

The lag bound: a round's data is the primary's as of the round's start. While the last round
that succeeded began at most ``max_lag_s`` ago the replica reports SERVING; after that
(the primary's files missing or damaged, a disk too slow) it reports NOT_SERVING, says why in
its log, keeps serving what it has to the callers that still come, and keeps trying. Health
checks (a Kubernetes readiness probe, the client's health-checked round robin) then send calls
to other servers.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gnnstore.backend.service.served_data import ServedData

logger = logging.getLogger(__name__)


class ReplicaFollower:
    """Catches ``data`` up with its primary in a thread, and reports readiness changes.

    Args:
        data: what the replica serves, opened with ``follow``.
        max_lag_s: the most the replica's data may trail the primary's while it says SERVING.
        on_ready: called with True or False when readiness changes (first call: True, from
            ``start``, which catches up once before it returns).
    """

    def __init__(self, data: ServedData, max_lag_s: float, on_ready: Callable[[bool], None]) -> None:
        self._data = data
        self._max_lag_s = max_lag_s
        self._on_ready = on_ready
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = False
        self._last_error: str | None = None
        self._caught_up_at = 0.0  # time.monotonic() when the last successful round began

    def start(self) -> None:
        """Catch up once (raising what fails), report ready, then follow in a thread."""
        self._round()
        self._set_ready(True)
        self._thread = threading.Thread(target=self._run, name="gnnstore-replica", daemon=True)
        self._thread.start()

    def lag_s(self) -> float:
        """Seconds since the last successful round began: the most the data trails the primary's."""
        return time.monotonic() - self._caught_up_at

    def stop(self) -> None:
        """Stop following (the data stays open)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _round(self) -> None:
        began = time.monotonic()
        data = self._data
        records = [] if data.versions is None else data.versions.log.unread()
        data.stores.feature_store.catch_up()
        data.stores.id_map.catch_up()
        data.feature_reader.tier.follow()
        if data.versions is not None:
            data.versions.adopt(records)
        self._caught_up_at = began

    def _run(self) -> None:
        interval = max(0.05, self._max_lag_s / 4)
        while not self._stop.wait(interval):
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001 - any failure: keep serving what we have, retry
                error = f"{type(exc).__name__}: {exc}"
                if error != self._last_error:
                    logger.warning("replica: cannot catch up with the primary (%s); retrying", error)
                    self._last_error = error
            else:
                if self._last_error is not None:
                    logger.info("replica: caught up with the primary again")
                    self._last_error = None
            self._set_ready(self.lag_s() <= self._max_lag_s)

    def _set_ready(self, ready: bool) -> None:
        if ready != self._ready:
            self._ready = ready
            if not ready:
                logger.warning("replica: no catch-up for over %g s (the lag bound): NOT_SERVING", self._max_lag_s)
            self._on_ready(ready)
