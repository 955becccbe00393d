"""The threads sampling calls run on, shared fairly between clients.

A server has a few sampling threads (sampling is CPU-bound; more threads than cores only take
cores from a trainer on the same host). With one first-come queue, a client sending large
requests back to back keeps every thread busy and everyone else waits behind all of its work.
``FairScheduler`` keeps a queue per client (a connection: each trainer process has its own)
and gives threads to clients in turn; one client may hold at most ``per_client`` threads, and
the pool has one more, so another client's request never waits for more than the job
running on that spare thread. A client's queue is bounded: past ``queued_per_client`` waiting
jobs its requests are refused with ``RESOURCE_EXHAUSTED`` at once.
"""
from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from gnnstore.common.errors import ResourceExhaustedError, ServerUnavailableError

T = TypeVar("T")

QUEUED_PER_CLIENT = 32
"""Jobs one client may have waiting (a prefetching trainer keeps a handful)."""


class FairScheduler:
    """``run(client, job)`` runs ``job`` on one of ``per_client + 1`` threads, clients in turn.

    Args:
        per_client: threads one client's jobs may use at once (at least 1).
        queued_per_client: jobs one client may have waiting.
    """

    def __init__(self, per_client: int, queued_per_client: int = QUEUED_PER_CLIENT) -> None:
        self.per_client = max(1, per_client)
        self.threads = self.per_client + 1
        self._queued_per_client = queued_per_client
        self._lock = threading.Condition()
        self._waiting: OrderedDict[str, deque[tuple[Callable[[], object], Future]]] = OrderedDict()
        self._running: Counter[str] = Counter()
        self._closed = False
        self._workers = [
            threading.Thread(target=self._work, name=f"gnnstore-sample-{i}", daemon=True) for i in range(self.threads)
        ]
        for worker in self._workers:
            worker.start()

    def run(self, client: str, job: Callable[[], T]) -> T:
        """``job()``'s result (or exception), once a thread ran it in ``client``'s turn.

        Raises:
            ResourceExhaustedError: ``client`` already has ``queued_per_client`` jobs waiting.
            ServerUnavailableError: the scheduler was shut down before the job ran.
        """
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise ServerUnavailableError("the server is stopping")
            queue = self._waiting.setdefault(client, deque())
            if len(queue) >= self._queued_per_client:
                raise ResourceExhaustedError(
                    f"{len(queue)} sampling requests of this client are already waiting (the limit is "
                    f"{self._queued_per_client}); wait for replies before sending more"
                )
            queue.append((job, future))
            self._lock.notify()
        return future.result()

    def load(self) -> tuple[int, int]:
        """``(waiting, running)`` jobs, over all clients."""
        with self._lock:
            return sum(len(queue) for queue in self._waiting.values()), sum(self._running.values())

    def shutdown(self) -> None:
        """Finish the running jobs, fail the waiting ones, stop the threads."""
        with self._lock:
            self._closed = True
            waiting = [future for queue in self._waiting.values() for _, future in queue]
            self._waiting.clear()
            self._lock.notify_all()
        for future in waiting:
            future.set_exception(ServerUnavailableError("the server stopped before this request ran"))
        for worker in self._workers:
            worker.join()

    def _next(self) -> tuple[str, Callable[[], object], Future] | None:
        """The first waiting client in turn order under its thread cap (call under the lock);
        it goes to the back of the turn order."""
        for client, queue in self._waiting.items():
            if self._running[client] < self.per_client:
                job, future = queue.popleft()
                del self._waiting[client]
                if queue:
                    self._waiting[client] = queue
                return client, job, future
        return None

    def _work(self) -> None:
        while True:
            with self._lock:
                picked = self._next()
                while picked is None and not self._closed:
                    self._lock.wait()
                    picked = self._next()
                if picked is None:
                    return
                client, job, future = picked
                self._running[client] += 1
            try:
                if future.set_running_or_notify_cancel():
                    future.set_result(job())
            except BaseException as exc:  # the caller gets it, as from an executor
                future.set_exception(exc)
            finally:
                with self._lock:
                    self._running[client] -= 1
                    if not self._running[client]:
                        del self._running[client]
                    self._lock.notify_all()
