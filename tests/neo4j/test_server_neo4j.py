"""``gnnstore serve --graph-backend neo4j``: the graph in Neo4j, features and ids in the data dir."""
from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import torch
import warm_launcher
from served import ingest, ingest_into_neo4j, start_neo4j_server
from torch_geometric.loader import LinkNeighborLoader, NodeLoader

from gnnstore.client import RemoteNeighborSampler, connect, server_info
from gnnstore.common.errors import InvalidRequestError
from gnnstore.ingest.generator import generate_graph

pytestmark = pytest.mark.neo4j


@pytest.mark.parametrize("sampling", ["snapshot", "live"])
def test_loaders_over_a_neo4j_graph(neo4j_clean: tuple, tmp_path: Path, sampling: str) -> None:
    uri, auth = neo4j_clean
    graph = generate_graph(150, 4.0, 6, 3, seed=5)
    ingest_into_neo4j(graph, tmp_path / "data", uri, auth)
    with start_neo4j_server(tmp_path / "data", uri, auth, "--read-only", sampling=sampling) as server:
        assert f"neo4j {tmp_path / 'data'} | {sampling}" in server.startup_line
        info = server_info(server.address)
        assert info.graph_backend == "neo4j" and info.num_nodes == {None: 150}
        fs, gs = connect(server.address)
        sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(40), batch_size=20)
        for batch in loader:
            assert torch.equal(batch.x, graph.x[batch.n_id])
            assert torch.equal(batch.n_id[batch.edge_index], graph.edge_index[:, batch.e_id])
        links = LinkNeighborLoader((fs, gs), num_neighbors=[3, 2], neighbor_sampler=sampler,
                                   edge_label_index=(None, graph.edge_index[:, :30]), batch_size=15,
                                   neg_sampling="triplet")
        for batch in links:
            assert torch.equal(batch.x[batch.dst_neg_index], graph.x[batch.n_id[batch.dst_neg_index]])
        if sampling == "live":
            with pytest.raises(InvalidRequestError, match="without replacement"):
                next(iter(NodeLoader((fs, gs), node_sampler=RemoteNeighborSampler(fs, [2], replace=True),
                                     input_nodes=torch.arange(4), batch_size=4)))


def test_unreachable_neo4j_exits_with_what_to_do(tmp_path: Path) -> None:
    data_dir = ingest(generate_graph(20, 2.0, 2, 2, seed=0), tmp_path / "data")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    result = warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "serve", "--data-dir", str(data_dir), "--port", "0",
         "--graph-backend", "neo4j", "--neo4j-uri", f"bolt://127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""  # no start-up line: nothing was bound
    assert f"error: Neo4j at bolt://127.0.0.1:{port} (auth off) cannot be used" in result.stderr
    assert "GNNSTORE_NEO4J_URI" in result.stderr and "Traceback" not in result.stderr
