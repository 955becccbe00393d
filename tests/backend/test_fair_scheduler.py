"""FairScheduler: one client cannot hold every sampling thread nor queue without bound."""
from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gnnstore.backend.service.fair_scheduler import BULK_NICE, FairScheduler, SamplingPools
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


def _own_priority() -> tuple[str, int]:
    return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread has a nice value of its own on Linux only")
def test_a_pool_with_a_nice_value_runs_its_jobs_that_much_below_the_process() -> None:
    process = os.getpriority(os.PRIO_PROCESS, 0)
    pools = SamplingPools.start(1, bulk_edges=1000)
    try:
        name, ordinary = pools.ordinary.run("a", _own_priority)
        assert name.startswith("gnnstore-sample-") and ordinary == process
        name, bulk = pools.bulk.run("a", _own_priority)
        assert name.startswith("gnnstore-bulk-") and bulk == min(19, process + BULK_NICE)
        assert os.getpriority(os.PRIO_PROCESS, 0) == process  # the process itself keeps its priority
    finally:
        pools.shutdown()


def test_work_over_the_bulk_bound_goes_to_the_bulk_pool() -> None:
    pools = SamplingPools.start(1, bulk_edges=1000)
    try:
        assert pools.for_work(0) is pools.ordinary and pools.for_work(1000) is pools.ordinary
        assert pools.for_work(1001) is pools.bulk
    finally:
        pools.shutdown()
