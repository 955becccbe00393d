"""FairScheduler: one client cannot hold every sampling thread nor queue without bound."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gnnstore.backend.fair_scheduler import FairScheduler
from gnnstore.common.errors import ResourceExhaustedError, ServerUnavailableError


def _blocked(release: threading.Event, started: list[str], name: str):
    def job() -> str:
        started.append(name)
        assert release.wait(10)
        return name
    return job


def _wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_busy_client_leaves_a_thread_for_another() -> None:
    scheduler = FairScheduler(per_client=1)
    release, started = threading.Event(), []
    try:
        with ThreadPoolExecutor(8) as callers:
            hog = [callers.submit(scheduler.run, "hog", _blocked(release, started, f"hog{i}")) for i in range(5)]
            _wait_for(lambda: started == ["hog0"])
            # The hog holds its one thread; its other jobs wait; another client runs at once.
            assert scheduler.run("other", lambda: "done") == "done"
            assert started == ["hog0"]
            release.set()
            assert [f.result(10) for f in hog] == [f"hog{i}" for i in range(5)]
    finally:
        scheduler.shutdown()


def test_clients_take_turns() -> None:
    scheduler = FairScheduler(per_client=1)
    hold, gate, order = threading.Event(), threading.Event(), []
    try:
        with ThreadPoolExecutor(8) as callers:
            # "z" holds one of the two threads the whole time: a and b share the other.
            held = callers.submit(scheduler.run, "z", _blocked(hold, [], "z0"))
            first = callers.submit(scheduler.run, "a", _blocked(gate, order, "a0"))
            _wait_for(lambda: order == ["a0"])
            rest = [callers.submit(scheduler.run, "a", lambda i=i: order.append(f"a{i}")) for i in range(1, 4)]
            _wait_for(lambda: len(scheduler._waiting.get("a", ())) == 3)
            rest.append(callers.submit(scheduler.run, "b", lambda: order.append("b1")))
            _wait_for(lambda: len(scheduler._waiting.get("b", ())) == 1)
            gate.set()
            for future in [first, *rest]:
                future.result(10)
            hold.set()
            held.result(10)
        assert order == ["a0", "a1", "b1", "a2", "a3"]  # b's turn came right after a's
    finally:
        scheduler.shutdown()


def test_a_full_queue_is_refused_at_once_and_errors_reach_the_caller() -> None:
    scheduler = FairScheduler(per_client=1, queued_per_client=2)
    release, started = threading.Event(), []
    try:
        with ThreadPoolExecutor(4) as callers:
            running = callers.submit(scheduler.run, "a", _blocked(release, started, "a0"))
            _wait_for(lambda: started == ["a0"])
            queued = [callers.submit(scheduler.run, "a", lambda: None) for _ in range(2)]
            _wait_for(lambda: len(scheduler._waiting.get("a", ())) == 2)
            with pytest.raises(ResourceExhaustedError, match="2 sampling requests of this client are already waiting"):
                scheduler.run("a", lambda: None)
            release.set()
            running.result(10)
            [f.result(10) for f in queued]
        with pytest.raises(ZeroDivisionError):
            scheduler.run("a", lambda: 1 / 0)
    finally:
        scheduler.shutdown()
    with pytest.raises(ServerUnavailableError):
        scheduler.run("a", lambda: None)
