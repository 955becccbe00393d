"""Bad requests get INVALID_ARGUMENT / NOT_FOUND naming the problem, and the server keeps serving."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest
from torch_geometric.data import HeteroData
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.client import Connection, RemoteNeighborSampler, connect, server_info, server_stats
from gnnstore.common.errors import (
    InvalidRequestError,
    NotFoundError,
    ServerUnavailableError,
)
from gnnstore.ingest.generator import generate_hetero_graph
from gnnstore.proto import feature_pb2, graph_pb2
from gnnstore.proto.codec import ids_to_proto, node_type_to_proto
from gnnstore.proto.sampling_options import options_to_proto
from gnnstore.proto.tensor_codec import tensor_to_proto

MAX_SEEDS = 300


@pytest.fixture(scope="module")
def graph() -> HeteroData:
    return generate_hetero_graph(60, 40, 5, num_features=4, seed=3)


@pytest.fixture(scope="module")
def server(graph: HeteroData, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = ingest(graph, tmp_path_factory.mktemp("errors") / "data")
    process = ServerProcess(data_dir, "--read-only", log=data_dir.parent / "server.log",
                            env={"GNNSTORE_MAX_SEEDS": str(MAX_SEEDS)})
    yield process
    process.stop()


def _sample(server: ServerProcess, seeds: torch.Tensor, node_type: str = "paper", fanouts: object = (2,)) -> object:
    sampler = RemoteNeighborSampler(server.address, list(fanouts) if not isinstance(fanouts, dict) else fanouts)
    inputs = NodeSamplerInput(input_id=torch.arange(seeds.numel()), node=seeds, input_type=node_type)
    return sampler.sample_from_nodes(inputs)


def _still_serving(server: ServerProcess, graph: HeteroData) -> None:
    out = _sample(server, torch.tensor([0, 1]))
    assert torch.equal(out.node["paper"][:2], torch.tensor([0, 1]))
    assert server_info(server.address).num_nodes["paper"] == graph["paper"].num_nodes


def test_unknown_attr_is_not_found_by_name(server: ServerProcess, graph: HeteroData) -> None:
    fs, _ = connect(server.address)
    with pytest.raises(NotFoundError, match="'colour'") as caught:
        fs.get_tensor(group_name="paper", attr_name="colour", index=torch.tensor([0]))
    assert isinstance(caught.value, KeyError)
    _still_serving(server, graph)


def test_a_raw_multiget_of_an_unknown_or_unnamed_attr_names_it_without_a_path(
    server: ServerProcess, graph: HeteroData
) -> None:
    for name, shown in (("colour", "'colour'"), ("", "None")):  # '' is PyG's attr_name=None on the wire
        request = feature_pb2.MultiGetRequest()
        request.queries.add(group=node_type_to_proto("paper"), attr_names=[name], index=ids_to_proto([0]))
        with pytest.raises(NotFoundError, match=f"no attr {shown} of node type 'paper'") as caught:
            Connection(server.address).call("FeatureService", "MultiGet", request)
        assert "/" not in str(caught.value)  # never the data directory's path
    _still_serving(server, graph)


def test_unknown_node_type_is_not_found(server: ServerProcess, graph: HeteroData) -> None:
    with pytest.raises(NotFoundError, match="venue"):
        _sample(server, torch.tensor([0]), node_type="venue")
    _still_serving(server, graph)


def test_ids_out_of_range_are_named(server: ServerProcess, graph: HeteroData) -> None:
    fs, _ = connect(server.address)
    with pytest.raises(InvalidRequestError, match="1000000"):
        fs.get_tensor(group_name="paper", attr_name="x", index=torch.tensor([0, 1_000_000]))
    with pytest.raises(InvalidRequestError, match="out of range"):
        _sample(server, torch.tensor([graph["paper"].num_nodes]))
    _still_serving(server, graph)


def test_wrong_id_dtype_is_invalid(server: ServerProcess, graph: HeteroData) -> None:
    request = feature_pb2.MultiGetRequest()
    request.queries.add(group=node_type_to_proto("paper"), attr_names=["x"],
                        index=tensor_to_proto(torch.tensor([0.5, 1.0])))
    with pytest.raises(InvalidRequestError, match="int64 or int32 ids, got dtype float32"):
        Connection(server.address).call("FeatureService", "MultiGet", request)
    _still_serving(server, graph)


@pytest.mark.parametrize(
    "seeds, fanouts, fragment",
    [
        (torch.empty(0, dtype=torch.long), [2], "no seed nodes"),
        (torch.zeros(MAX_SEEDS + 1, dtype=torch.long), [2], f"over the server's limit of {MAX_SEEDS}"),
        (torch.tensor([0]), [100_000], "exceed the limit"),
        (torch.tensor([0]), [2] * 20, "20 hops"),
        (torch.tensor([0]), [-7], "-7"),
    ],
)
def test_absurd_sampling_requests_are_refused(
    server: ServerProcess, graph: HeteroData, seeds: torch.Tensor, fanouts: list, fragment: str
) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        _sample(server, seeds, fanouts=fanouts)
    _still_serving(server, graph)


def test_unknown_edge_type_in_fanouts_is_not_found(server: ServerProcess, graph: HeteroData) -> None:
    fanouts = {et: [1] for et in graph.edge_types}
    fanouts[("paper", "likes", "paper")] = [1]
    with pytest.raises(NotFoundError, match="likes"):
        _sample(server, torch.tensor([0]), fanouts=fanouts)
    _still_serving(server, graph)


def test_bad_negative_sampling_is_invalid(server: ServerProcess, graph: HeteroData) -> None:
    request = graph_pb2.SampleFromEdgesRequest(
        options=options_to_proto([2], replace=False, disjoint=False, seed=1),
        input_id=ids_to_proto([0]), row=ids_to_proto([0]), col=ids_to_proto([1]),
        neg_sampling=graph_pb2.NegativeSamplingSpec(mode="triplet", amount=1.5),
    )
    request.input_type.src, request.input_type.rel, request.input_type.dst = "author", "writes", "paper"
    request.label.is_none = True
    with pytest.raises(InvalidRequestError, match="negative sampling"):
        Connection(server.address).call("GraphService", "SampleFromEdges", request)
    _still_serving(server, graph)


def test_errors_are_counted_in_stats(server: ServerProcess) -> None:
    _sample(server, torch.tensor([0]))  # one that succeeds, whichever tests ran before
    with pytest.raises(NotFoundError):
        _sample(server, torch.tensor([0]), node_type="venue")
    stats = server_stats(server.address)["/gnnstore.v1.GraphService/SampleFromNodes"]
    assert stats.errors >= 1 and stats.requests > stats.errors
    assert stats.bytes_sent > 0 and stats.latency_p99_ms >= stats.latency_p50_ms > 0


def test_health_reports_serving(server: ServerProcess) -> None:
    assert Connection(server.address).is_serving()


def test_unexpected_exceptions_become_internal_with_a_short_message() -> None:
    def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        with translate_errors(context, "Test.Boom"):
            raise RuntimeError("secret internal detail")

    def typed(request: bytes, context: grpc.ServicerContext) -> bytes:
        with translate_errors(context, "Test.Typed"):
            raise NotFoundError("node type 'venue' is not in the graph")

    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {
        "Boom": grpc.unary_unary_rpc_method_handler(handler),
        "Typed": grpc.unary_unary_rpc_method_handler(typed),
    })])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as boom:
                channel.unary_unary("/t.T/Boom")(b"", timeout=10)
            assert boom.value.code() == grpc.StatusCode.INTERNAL
            assert "Test.Boom failed on the server (RuntimeError)" in boom.value.details()
            assert "secret" not in boom.value.details()
            with pytest.raises(grpc.RpcError) as typed_error:
                channel.unary_unary("/t.T/Typed")(b"", timeout=10)
            assert typed_error.value.code() == grpc.StatusCode.NOT_FOUND
            assert ("gnnstore-error-class", "NotFoundError") in typed_error.value.trailing_metadata()
    finally:
        server.stop(None)


@pytest.mark.parametrize("retry_timeout", [0.0, 2.0])
def test_a_stopped_server_is_unavailable_within_the_deadline_and_the_retry_budget(
    graph: HeteroData, tmp_path: Path, retry_timeout: float
) -> None:
    data_dir = ingest(graph, tmp_path / "data")
    process = ServerProcess(data_dir, "--read-only", log=tmp_path / "server.log")
    fs, _ = connect(process.address, timeout=3.0, retry_timeout=retry_timeout)
    assert fs.get_tensor_size(group_name="paper", attr_name="x") is not None
    assert process.stop() == 0  # SIGTERM is a graceful stop
    assert "stopped serving" in (tmp_path / "server.log").read_text()
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError, match=process.address) as caught:
        fs.get_tensor(group_name="paper", attr_name="x", index=torch.tensor([0]))
    assert isinstance(caught.value, ConnectionError)
    assert ("retry_timeout" in str(caught.value)) == (retry_timeout > 0)
    assert (fs.connection.retries > 0) == (retry_timeout > 0)
    # within the budget and one more deadline, plus scheduling slack
    assert time.monotonic() - started < retry_timeout + 3.0 + 5.0


def _serve_exit(data_dir: Path) -> subprocess.CompletedProcess:
    return warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "serve", "--data-dir", str(data_dir), "--port", "0"],
        capture_output=True, text=True, timeout=300,
    )


def test_missing_data_dir_exits_with_what_to_do(tmp_path: Path) -> None:
    result = _serve_exit(tmp_path / "nowhere")
    assert result.returncode == 2  # bad usage, as an unknown option
    assert "does not exist" in result.stderr and "gnnstore ingest" in result.stderr
    assert not (tmp_path / "nowhere").exists()  # a read-write server never creates empty stores


def test_corrupt_data_dir_exits_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "data" / "features").mkdir(parents=True)
    (tmp_path / "data" / "idmap").mkdir()
    (tmp_path / "data" / "graph.lbug").write_bytes(b"not a database")
    result = _serve_exit(tmp_path / "data")
    assert result.returncode == 1
    assert "gnnstore ingest" in result.stderr
    assert "Traceback" not in result.stderr

