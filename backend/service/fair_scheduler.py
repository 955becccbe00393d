"""The threads sampling calls run on, shared fairly between clients.

A server has a few sampling threads (sampling is CPU-bound; more threads than cores only take
cores from a trainer on the same host). With one first-come queue, a client sending large
requests back to back keeps every thread busy and everyone else waits behind all of its work.
``FairScheduler`` keeps a queue per client (a connection: each trainer process has its own)
and gives threads to clients in turn; one client may hold at most ``per_client`` threads, and
the pool has one more, so another client's request never waits for more than the job
running on that spare thread. A client's queue is bounded: past ``queued_per_client`` waiting
jobs its requests are refused with ``RESOURCE_EXHAUSTED`` at once.

Taking turns at threads is not enough on a small machine: a client's bulk request (millions
of edges) keeps a core busy for its whole run, and an ordinary batch beside it waited for a
core as long as for a thread before. ``SamplingPools`` runs bulk work (a bound of sampled
edges over ``bulk_edges``) on threads of its own at a lower CPU priority (nice + 10): the
kernel gives a core to an ordinary batch first, and bulk work still gets every core nobody
else wants. ``benchmarks.fairness``: a batch's p99 beside a bulk client reading the data port
went from 2.22x and 2.44x of its p99 alone to 1.79x and 1.62x (README).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from gnnstore.common.errors import ResourceExhaustedError, ServerUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

QUEUED_PER_CLIENT = 32
"""Jobs one client may have waiting (a prefetching trainer keeps a handful)."""

BULK_NICE = 10
"""How much lower bulk work's threads run than the server (nice values, at most 19 in all)."""


class FairScheduler:
    """``run(client, job)`` runs ``job`` on one of ``per_client + 1`` threads, clients in turn.

    Args:
        per_client: threads one client's jobs may use at once (at least 1).
        queued_per_client: jobs one client may have waiting.
        name: the threads' name prefix.
        nice: added to the server's nice value for these threads (Linux, where a thread has
            one of its own; elsewhere ignored).
    """

    def __init__(
        self, per_client: int, queued_per_client: int = QUEUED_PER_CLIENT, *, name: str = "gnnstore-sample",
        nice: int = 0,
    ) -> None:
        self.per_client = max(1, per_client)
        self.nice = nice
        self.threads = self.per_client + 1
        self._queued_per_client = queued_per_client
        self._lock = threading.Condition()
        self._waiting: OrderedDict[str, deque[tuple[Callable[[], object], Future]]] = OrderedDict()
        self._running: Counter[str] = Counter()
        self._closed = False
        self._workers = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(self.threads)
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
        if self.nice:
            _lower_this_thread(self.nice)
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
                # an idle thread must not keep its last job, and the reply's rows, alive
                picked = job = future = None


def _lower_this_thread(nice: int) -> None:
    """Run the calling thread ``nice`` steps below the process (a thread is its own task on
    Linux; raising one's nice value needs no privilege)."""
    if not sys.platform.startswith("linux"):
        return
    own = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, own, min(19, os.getpriority(os.PRIO_PROCESS, own) + nice))
    except OSError as exc:
        logger.warning("cannot lower the priority of thread %s (%s): bulk work runs at normal priority",
                       threading.current_thread().name, exc.strerror)


@dataclass
class SamplingPools:
    """Ordinary sampling and bulk sampling on thread pools of their own, clients in turn in each.

    Args:
        ordinary: where jobs of at most ``bulk_edges`` sampled edges (by their bound) run.
        bulk: where larger jobs run, at a lower CPU priority.
        bulk_edges: the bound of sampled edges above which a job is bulk work.
    """

    ordinary: FairScheduler
    bulk: FairScheduler
    bulk_edges: int

    @classmethod
    def start(cls, per_client: int, bulk_edges: int) -> "SamplingPools":
        """Both pools, ``per_client`` threads for one client in each, bulk ones ``BULK_NICE`` lower."""
        return cls(FairScheduler(per_client), FairScheduler(per_client, name="gnnstore-bulk", nice=BULK_NICE),
                   bulk_edges)

    def for_work(self, edges_bound: int) -> FairScheduler:
        """The pool a job that may sample up to ``edges_bound`` edges runs in."""
        return self.bulk if edges_bound > self.bulk_edges else self.ordinary

    def load(self) -> tuple[int, int]:
        """``(waiting, running)`` jobs, over both pools."""
        (waiting, running), (bulk_waiting, bulk_running) = self.ordinary.load(), self.bulk.load()
        return waiting + bulk_waiting, running + bulk_running

    def shutdown(self) -> None:
        """Shut both pools down (see ``FairScheduler.shutdown``)."""
        self.ordinary.shutdown()
        self.bulk.shutdown()
