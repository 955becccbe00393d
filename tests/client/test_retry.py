"""What the SDK retries and how long it waits; the restarts themselves are in test_server_restart."""
from __future__ import annotations

import pickle
import time

import pytest
from grpc_health.v1 import health_pb2

from gnnstore.client import Connection, connect
from gnnstore.client.retry import IDEMPOTENT_CALLS, NEVER_RETRIED, Backoff
from gnnstore.common.errors import InvalidRequestError, ServerUnavailableError
from gnnstore.proto import admin_pb2, feature_pb2, graph_pb2, idmap_pb2


def test_every_rpc_is_either_retried_or_named_as_never_retried() -> None:
    rpcs = {
        f"{service.name}.{method.name}"
        for module in (admin_pb2, feature_pb2, graph_pb2, idmap_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert IDEMPOTENT_CALLS | NEVER_RETRIED == rpcs
    assert not IDEMPOTENT_CALLS & NEVER_RETRIED


def test_backoff_grows_with_jitter_up_to_its_cap_and_gives_up_when_the_budget_is_spent() -> None:
    backoff = Backoff(0.5, first_s=0.01, cap_s=0.08)
    delays = [backoff.next_delay() for _ in range(200)]
    assert all(d is not None and 0 <= d <= 0.08 for d in delays)
    assert max(delays[:1]) <= 0.01 and max(delays[10:]) > 0.02  # exponential, then capped
    assert len(set(delays)) > 100  # jitter: trainers do not come back in step
    time.sleep(0.5)
    assert backoff.next_delay() is None and backoff.remaining_s() == 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_retry_timeout_is_refused(bad: float) -> None:
    with pytest.raises(InvalidRequestError, match="retry_timeout"):
        Connection("127.0.0.1:1", retry_timeout=bad)
    with pytest.raises(InvalidRequestError, match="retry_timeout"):
        connect("127.0.0.1:1", retry_timeout=bad)


def test_a_server_never_reached_fails_at_once_without_retrying() -> None:
    connection = Connection("127.0.0.1:1", timeout=5.0)  # nothing listens on port 1
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError, match="is `gnnstore serve` running there"):
        connection.call("AdminService", "Info", admin_pb2.InfoRequest())
    assert time.monotonic() - started < 5.0 and connection.retries == 0
    assert not connection.is_serving()  # the health check is a probe: never retried either
    with pytest.raises(ServerUnavailableError):
        connection.call("Health", "Check", health_pb2.HealthCheckRequest())
    assert connection.retries == 0 and connection.snapshot_id is None


def test_the_version_a_connection_began_with_travels_to_loader_workers() -> None:
    connection = Connection("127.0.0.1:1")
    connection.snapshot_id, connection.retries = "abc-3", 4
    copy = pickle.loads(pickle.dumps(connection))
    assert copy.snapshot_id == "abc-3" and copy.retries == 0  # retries are counted per process
