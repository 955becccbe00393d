"""Callers that stop reading a streamed reply cannot hold the server's handler threads."""
from __future__ import annotations

import time

import grpc
import pytest
import torch
from torch_geometric.data import Data

from grpc_health.v1 import health_pb2, health_pb2_grpc

from gnnstore.client import connect
from gnnstore.common.errors import ResourceExhaustedError
from gnnstore.proto import feature_pb2
from gnnstore.proto.codec import node_type_to_proto
from served import ServerProcess, serve_graph

WORKERS = 4
STALL_S = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    graph = Data(x=torch.randn(50_000, 64), edge_index=torch.randint(50_000, (2, 1000)))  # x: 12.8 MB
    with serve_graph(graph, tmp_path_factory.mktemp("stream-guard"), "--read-only", "--workers", str(WORKERS),
                     "--stream-stall-s", str(STALL_S)) as process:
        yield process


def _stop_reading_after_one_chunk(address: str) -> tuple[grpc.Channel, object]:
    """A GetTensor of the whole of x, one chunk taken, the rest never read."""
    channel = grpc.insecure_channel(address)
    request = feature_pb2.GetTensorRequest()
    request.key.group.CopyFrom(node_type_to_proto(None))
    request.key.attr_name = "x"
    request.chunk_bytes = 64 << 10
    replies = channel.unary_stream("/gnnstore.v1.FeatureService/GetTensor")(request.SerializeToString())
    next(replies)
    return channel, replies


def test_callers_that_stop_reading_leave_threads_for_others_and_are_cancelled(server: ServerProcess) -> None:
    fs, _ = connect(server.address, shared_memory=False)
    started, stalled, refused = time.monotonic(), [], 0
    for _ in range(WORKERS + 2):  # more than there are handler threads
        try:
            stalled.append(_stop_reading_after_one_chunk(server.address))
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            refused += 1
    assert len(stalled) == WORKERS // 2 and refused == WORKERS + 2 - WORKERS // 2
    with pytest.raises(ResourceExhaustedError, match="streamed replies are being sent already"):
        fs.get_tensor(group_name=None, attr_name="x", index=None)  # a further stream is refused at once ...
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (50_000, 64)  # ... and every other call is answered
    assert time.monotonic() - started < STALL_S

    time.sleep(STALL_S + 2)  # past the limit and the guard's next look; reading now takes what was sent
    for channel, replies in stalled:  # the stalled streams were cancelled
        with pytest.raises(grpc.RpcError) as ended:
            for _ in replies:
                pass
        assert ended.value.code() == grpc.StatusCode.CANCELLED
        channel.close()
    whole = fs.get_tensor(group_name=None, attr_name="x", index=None)  # a reader that reads gets the whole tensor again
    assert whole.shape == (50_000, 64)


def test_health_watchers_are_not_counted_as_streamed_replies(server: ServerProcess) -> None:
    watchers = []
    for _ in range(WORKERS // 2):  # as many as the guard admits data streams
        channel = grpc.insecure_channel(server.address)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watchers.append((channel, watch))
    fs, _ = connect(server.address, shared_memory=False)
    assert fs.get_tensor(group_name=None, attr_name="x", index=None).shape == (50_000, 64)
    for channel, watch in watchers:
        watch.cancel()
        channel.close()


def test_open_health_watches_hold_no_handler_thread(server: ServerProcess) -> None:
    """Orchestrators and strangers hold Watch streams open; more of them than there are handler
    threads must leave every other call answered (each used to hold a thread)."""
    watchers = []
    for _ in range(3 * WORKERS):
        channel = grpc.insecure_channel(server.address)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watchers.append((channel, watch))
    try:
        with grpc.insecure_channel(server.address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        fs, _ = connect(server.address, shared_memory=False, timeout=5)
        assert fs.get_tensor_size(group_name=None, attr_name="x") == (50_000, 64)
    finally:
        for channel, watch in watchers:
            watch.cancel()
            channel.close()
