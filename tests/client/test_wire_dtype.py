"""Rows on the wire as 16-bit floats (``connect(wire_dtype=...)``): half the bytes, each value
rounded as ``Tensor.to`` rounds it, other dtypes exact, and a stranger's dtype refused."""
from __future__ import annotations

import pytest
import torch
from served import ServerProcess, serve_graph
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader

from gnnstore.client import Connection, EdgeFeatures, Prefetcher, RemoteNeighborSampler, connect
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import ids_to_proto
from gnnstore.proto.feature_request import feature_request_to_proto
from gnnstore.proto.sampling_options import options_to_proto

N, E = 300, 3000


@pytest.fixture(scope="module")
def graph() -> Data:
    g = torch.Generator().manual_seed(7)
    return Data(
        x=torch.randn(N, 16, generator=g),
        x64=torch.randn(N, 2, generator=g, dtype=torch.float64),
        y=torch.randint(0, 2**40, (N,), generator=g),
        edge_index=torch.randint(0, N, (2, E), generator=g),
        edge_attr=torch.randn(E, 3, generator=g),
    )


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(graph, tmp_path_factory.mktemp("wire-dtype")) as process:
        yield process


def _epoch(address: str, seeds: torch.Tensor, *, shared_memory: bool, **connect_args: object) -> tuple[list, object]:
    fs, gs = connect(address, shared_memory=shared_memory, **connect_args)
    sampler = RemoteNeighborSampler(fs, [4, 3], feature_store=fs, seed=3)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=30,
                        transform=EdgeFeatures(fs, ["edge_attr"]))
    return list(Prefetcher(loader, depth=2)), fs


@pytest.mark.parametrize("shared_memory", [False, True])
@pytest.mark.parametrize("wire", [torch.bfloat16, torch.float16])
def test_float_rows_travel_rounded_in_half_the_bytes_and_the_rest_exact(
    server: ServerProcess, graph: Data, wire: torch.dtype, shared_memory: bool
) -> None:
    seeds = torch.arange(0, N, 2)
    exact, exact_fs = _epoch(server.address, seeds, shared_memory=shared_memory)
    rounded, fs = _epoch(server.address, seeds, shared_memory=shared_memory, wire_dtype=str(wire)[6:])
    for a, b in zip(exact, rounded, strict=True):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.e_id, b.e_id)  # the same seeded samples
        assert b.x.dtype == torch.float32 and torch.equal(b.x, graph.x[b.n_id].to(wire).float())
        assert b.x64.dtype == torch.float64 and torch.equal(b.x64, graph.x64[b.n_id].to(wire).double())
        assert torch.equal(b.y, graph.y[b.n_id])  # integers travel as stored
        assert torch.equal(b.edge_attr, graph.edge_attr[b.e_id].to(wire).float())
        assert not torch.equal(b.x, a.x)  # rounding is real: the option is lossy
    # x: 16 floats of 4 bytes, x64: 2 of 8, y: one int64, edge_attr: 3 floats (a row per id sent)
    assert fs.exchange.delivered_rows == exact_fs.exchange.delivered_rows
    ratio = fs.exchange.delivered_bytes / exact_fs.exchange.delivered_bytes
    assert ratio == pytest.approx((16 * 2 + 2 * 2 + 8 + 3 * 2) / (16 * 4 + 2 * 8 + 8 + 3 * 4), rel=0.05)


def test_a_cache_keeps_the_rounded_rows_it_was_given(server: ServerProcess, graph: Data) -> None:
    fs, gs = connect(server.address, wire_dtype=torch.bfloat16)
    node_attrs = [s for s in fs.schema() if not s.is_edge]
    fs.exchange.cache = cache = FeatureCache(1 << 20, node_attrs, policy="lru")  # every row from a sample
    sampler = RemoteNeighborSampler(fs, [4, 3], feature_store=fs, seed=3)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=50)
    for _ in range(2):
        for batch in loader:
            assert torch.equal(batch.x, graph.x[batch.n_id].to(torch.bfloat16).float())
            assert torch.equal(batch.y, graph.y[batch.n_id])
    assert cache.total().hits > 0
    assert torch.equal(fs[None, "x", None], graph.x)  # a read apart stays exact


def test_a_wire_dtype_other_than_a_16_bit_float_is_refused(server: ServerProcess) -> None:
    for dtype in ("int8", torch.float64, "float32", "bf16"):
        with pytest.raises(InvalidRequestError, match=r"feature rows can travel as \['bfloat16', 'float16'\]"):
            connect(server.address, wire_dtype=dtype)
    request = graph_pb2.SampleFromNodesRequest(
        options=options_to_proto([3], replace=False, disjoint=False, seed=1), node=ids_to_proto(torch.arange(5)))
    request.input_type.homogeneous = True
    request.features.CopyFrom(feature_request_to_proto([(None, "x")], {}))
    for name in ("float64", "int8", "x" * 10_000):
        request.features.wire_dtype = name
        with pytest.raises(InvalidRequestError, match="feature rows can travel as") as refused:
            Connection(server.address).call("GraphService", "SampleFromNodes", request)
        assert len(str(refused.value)) < 300  # a stranger's string is not echoed whole
    request.features.CopyFrom(feature_request_to_proto([(None, "nope")], {}, wire_dtype=torch.float16))
    with pytest.raises(NotFoundError, match="nope"):
        Connection(server.address).call("GraphService", "SampleFromNodes", request)
