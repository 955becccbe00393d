"""Small requests that asked for absurd work: each is refused at once, by name, and the server
keeps serving the same samples (issue: one 400 KB request used to take a 24 GB server down)."""
from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
import torch
from served import ServerProcess, ingest
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import Connection, RemoteNeighborSampler
from gnnstore.client.sampler_wire import edge_input_to_proto, node_input_to_proto
from gnnstore.common.errors import InvalidRequestError, NotFoundError, ResourceExhaustedError
from gnnstore.ingest.generator import generate_graph
from gnnstore.proto import feature_pb2, graph_pb2, idmap_pb2
from gnnstore.proto.codec import attr_key_to_proto, ids_to_proto, node_type_to_proto
from gnnstore.proto.sampling_options import options_to_proto
from gnnstore.proto.tensor_codec import optional_tensor_to_proto, tensor_to_proto

NODES = 400
REPLY_LIMIT = 10_000  # bytes: 156 rows of x (16 float32)


@pytest.fixture(scope="module")
def graph() -> Data:
    return generate_graph(NODES, 6.0, 16, 3, seed=5)


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = ingest(graph, tmp_path_factory.mktemp("limits") / "data")
    process = ServerProcess(data_dir, "--max-reply-bytes", str(REPLY_LIMIT), "--max-put-rows", "100000",
                            log=data_dir.parent / "server.log")
    yield process
    process.stop()


@pytest.fixture
def connection(server: ServerProcess) -> Connection:
    return Connection(server.address, shared_memory=False)


def _canary(server: ServerProcess) -> torch.Tensor:
    sampler = RemoteNeighborSampler(server.address, [3, 2], seed=11)
    return sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.arange(8))).node


@pytest.fixture(autouse=True)
def still_serving_the_same(server: ServerProcess) -> Iterator[None]:
    before = _canary(server)
    yield
    assert server.proc.poll() is None, "the server died"
    assert torch.equal(_canary(server), before)


def _refused(error: type[Exception], match: str, call: object) -> str:
    started = time.monotonic()
    with pytest.raises(error, match=match) as refused:
        call()
    assert time.monotonic() - started < 10  # refused before any work, not after running out of memory
    return str(refused.value)


def _sample_request(seeds: torch.Tensor, fanouts: list[int], *, replace: bool = False,
                    disjoint: bool = False) -> graph_pb2.SampleFromNodesRequest:
    request = node_input_to_proto(NodeSamplerInput(input_id=None, node=seeds))
    request.options.CopyFrom(options_to_proto(fanouts, replace=replace, disjoint=disjoint, seed=1))
    return request


@pytest.mark.parametrize(
    "seeds, fanouts, replace, disjoint",
    [
        (50_000, [10_000], True, False),  # the 400 KB request
        (4096, [-1] * 8, False, True),  # every neighbour for eight hops, per seed
    ],
)
def test_a_sample_over_the_work_budget_is_refused_naming_the_limit(
    connection: Connection, seeds: int, fanouts: list[int], replace: bool, disjoint: bool
) -> None:
    request = _sample_request(torch.arange(seeds) % NODES, fanouts, replace=replace, disjoint=disjoint)
    text = _refused(ResourceExhaustedError, "could sample up to", lambda: connection.call(
        "GraphService", "SampleFromNodes", request))
    assert "--max-sample-edges" in text and "GNNSTORE_MAX_SAMPLE_EDGES" in text


def test_every_neighbour_of_a_few_seeds_stays_within_the_budget(connection: Connection) -> None:
    reply = connection.call("GraphService", "SampleFromNodes", _sample_request(torch.arange(4), [-1, -1])).message
    assert reply.node[0].ids.shape[0] >= 4


def test_sampled_rows_over_the_reply_limit_are_refused_before_they_are_gathered(
    connection: Connection,
) -> None:
    request = _sample_request(torch.arange(8), [2])
    request.features.attrs.append(attr_key_to_proto(None, "x"))  # at most 24 rows: under the limit
    assert connection.call("GraphService", "SampleFromNodes", request).message.features
    wide = _sample_request(torch.arange(NODES), [5, 5])  # every node: 400 rows of 64 bytes
    wide.features.attrs.append(attr_key_to_proto(None, "x"))
    text = _refused(ResourceExhaustedError, "feature rows are", lambda: connection.call(
        "GraphService", "SampleFromNodes", wide))
    assert f"{REPLY_LIMIT:,}" in text and "--max-reply-bytes" in text


def _multi_get(ids: torch.Tensor, names: list[str]) -> feature_pb2.MultiGetRequest:
    request = feature_pb2.MultiGetRequest()
    request.queries.add(group=node_type_to_proto(None), attr_names=names, index=ids_to_proto(ids))
    return request


def test_multi_get_refuses_repeated_names_and_replies_over_the_limit_before_reading(
    connection: Connection,
) -> None:
    _refused(InvalidRequestError, "names attribute 'x' more than once", lambda: connection.call(
        "FeatureService", "MultiGet", _multi_get(torch.arange(NODES).repeat(250), ["x"] * 200)))
    text = _refused(ResourceExhaustedError, "MultiGet reply would be", lambda: connection.call(
        "FeatureService", "MultiGet", _multi_get(torch.arange(NODES).repeat(250), ["x"])))
    assert "ask for fewer ids" in text
    assert len(connection.call("FeatureService", "MultiGet", _multi_get(torch.arange(10), ["x", "y"])).tensors) == 2


def _put(index: torch.Tensor | None, value: torch.Tensor) -> feature_pb2.PutRequest:
    request = feature_pb2.PutRequest(value=tensor_to_proto(value), all_rows=index is None)
    request.key.attr_name = "scratch"
    request.key.group.CopyFrom(node_type_to_proto(None))
    if index is not None:
        request.index.CopyFrom(ids_to_proto(index))
    return request


def test_puts_at_absurd_ids_or_of_absurd_shapes_are_refused_without_materialising_ranges(
    connection: Connection,
) -> None:
    for bad in (700_000_000, 2**63 - 1):
        _refused(InvalidRequestError, f"rows must stay dense; id {bad} leaves id 0 unset",
                 lambda bad=bad: connection.call("FeatureService", "Put", _put(torch.tensor([bad]), torch.ones(1, 2))))
    text = _refused(ResourceExhaustedError, "a Put of 268,435,456 rows", lambda: connection.call(
        "FeatureService", "Put", _put(None, torch.empty(2**28, 0))))
    assert "--max-put-rows" in text


def test_known_ids_out_of_range_are_invalid_not_internal(connection: Connection) -> None:
    for known in ([0, 2**62], [-(2**63), 2**63 - 1]):
        request = _sample_request(torch.arange(4), [2])
        request.features.attrs.append(attr_key_to_proto(None, "x"))
        request.features.known.add(node_type=node_type_to_proto(None), ids=ids_to_proto(torch.tensor(known)))
        _refused(InvalidRequestError, "known id .* is out of range", lambda r=request: connection.call(
            "GraphService", "SampleFromNodes", r))
    for start in (-(2**63), 2**62):  # the same ids as a bitmap
        request = _sample_request(torch.arange(4), [2])
        request.features.attrs.append(attr_key_to_proto(None, "x"))
        request.features.known.add(node_type=node_type_to_proto(None), bitmap=b"\xff", bitmap_start=start)
        _refused(InvalidRequestError, "known id .* is out of range", lambda r=request: connection.call(
            "GraphService", "SampleFromNodes", r))


def test_bad_link_requests_are_invalid_not_internal(connection: Connection, graph: Data) -> None:
    from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling

    links = EdgeSamplerInput(input_id=None, row=graph.edge_index[0, :4], col=graph.edge_index[1, :4])
    request = edge_input_to_proto(links, NegativeSampling("binary", 1))
    request.options.CopyFrom(options_to_proto([2], replace=False, disjoint=False, seed=1))
    request.neg_sampling.amount = float("inf")
    _refused(InvalidRequestError, "amount must be > 0 and finite", lambda: connection.call(
        "GraphService", "SampleFromEdges", request))
    request.neg_sampling.amount = 1.0
    request.label.CopyFrom(optional_tensor_to_proto(torch.tensor(1.0)))
    _refused(InvalidRequestError, "edge label has a scalar for 4 links", lambda: connection.call(
        "GraphService", "SampleFromEdges", request))


def test_bool_keys_and_negative_chunks_are_refused(connection: Connection) -> None:
    to_ids = idmap_pb2.ToIdsRequest(node_type=node_type_to_proto(None))
    to_ids.keys.ints.CopyFrom(tensor_to_proto(torch.tensor([True, False])))
    _refused(InvalidRequestError, "int keys must be 1-D integers", lambda: connection.call(
        "IdMapService", "ToIds", to_ids))
    chunks = feature_pb2.GetTensorRequest(chunk_bytes=-1)
    chunks.key.attr_name = "x"
    chunks.key.group.CopyFrom(node_type_to_proto(None))
    _refused(InvalidRequestError, "chunk_bytes must be >= 0", lambda: connection.stream_all(
        "FeatureService", "GetTensor", chunks))


def test_an_unparsable_body_is_invalid_and_says_so(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.address) as channel:
        call = channel.unary_unary("/gnnstore.v1.GraphService/SampleFromNodes")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"\xff\xff\xff\xff not a protobuf", timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "could not parse the SampleFromNodes request" in refused.value.details()


def test_seed_links_need_node_types_the_graph_has_not_an_edge_type(tmp_path_factory: pytest.TempPathFactory) -> None:
    from gnnstore.ingest.generator import generate_hetero_graph

    hetero = generate_hetero_graph(30, 20, 4, num_features=4, seed=1)
    data_dir = ingest(hetero, tmp_path_factory.mktemp("hetero-limits") / "data")
    with ServerProcess(data_dir, "--read-only", log=data_dir.parent / "server.log") as process:
        sampler = RemoteNeighborSampler(process.address, [2])
        from torch_geometric.sampler import EdgeSamplerInput

        def links(edge_type: tuple[str, str, str]) -> EdgeSamplerInput:
            return EdgeSamplerInput(input_id=None, row=torch.tensor([0]), col=torch.tensor([1]), input_type=edge_type)

        unknown = ("nobody", "funds", "paper")
        _refused(NotFoundError, "link source type 'nobody' of",
                 lambda: sampler.sample_from_edges(links(unknown)))
        # A relation without edges between node types the graph has: its links can still be
        # predicted, as in PyG; the seeds are their endpoints.
        absent = ("institution", "funds", "paper")
        assert absent not in hetero.edge_types
        out = sampler.sample_from_edges(links(absent))
        assert out.node["institution"][0] == 0 and out.node["paper"][0] == 1
