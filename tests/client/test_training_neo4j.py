"""Cora trained through a Neo4j-backed server learns what it learns through an embedded one (LadybugDB).

Both servers sample a snapshot of the same edges in the same edge-id order, so with the same
seeds the two runs see the same batches. A ``live`` server answers batches whose edges exist.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from served import ServerProcess, ingest, ingest_into_neo4j, start_neo4j_server, start_server
from test_training import _train_and_test
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader

from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.ingest.planetoid import load_planetoid

pytestmark = pytest.mark.neo4j

LIVE_FANOUTS = [5, 3]


@pytest.fixture(scope="module")
def cora(cora_raw: Path) -> Data:
    """Cora with the public split, as PyG's Planetoid reads it."""
    return load_planetoid(cora_raw, "Cora")


@pytest.fixture(scope="module")
def neo4j_cora_dir(cora: Data, neo4j_server: tuple, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cora's edges in the session's Neo4j (emptied first), its features and ids in the folder."""
    return ingest_into_neo4j(cora, tmp_path_factory.mktemp("cora-neo4j") / "data", *neo4j_server)


def _train_through(server: ServerProcess, cora: Data) -> float:
    fs, gs = connect(server.address)
    return _train_and_test(
        (fs, gs), lambda fanouts: RemoteNeighborSampler(fs, fanouts, feature_store=fs, seed=0), cora
    )


def test_cora_through_neo4j_matches_the_embedded_database(
    cora: Data, neo4j_cora_dir: Path, neo4j_server: tuple, tmp_path: Path
) -> None:
    with start_neo4j_server(neo4j_cora_dir, *neo4j_server, "--read-only") as server:
        through_neo4j = _train_through(server, cora)
    with start_server(ingest(cora, tmp_path / "embedded"), "--read-only") as server:
        through_embedded = _train_through(server, cora)
    assert through_neo4j >= 0.78, f"GraphSAGE through Neo4j reached only {through_neo4j:.3f} on Cora"
    assert abs(through_neo4j - through_embedded) <= 0.02, f"Neo4j {through_neo4j:.3f} vs LadybugDB {through_embedded:.3f}"


def test_live_server_batches_hold_only_stored_edges(
    cora: Data, neo4j_cora_dir: Path, neo4j_server: tuple
) -> None:
    in_degree = torch.bincount(cora.edge_index[1], minlength=cora.num_nodes)
    seeds = torch.randperm(cora.num_nodes, generator=torch.Generator().manual_seed(0))[:300]
    with start_neo4j_server(neo4j_cora_dir, *neo4j_server, "--read-only", sampling="live") as server:
        assert "| live " in server.startup_line
        fs, gs = connect(server.address)
        sampler = RemoteNeighborSampler(fs, LIVE_FANOUTS, feature_store=fs)
        batches = list(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=100))
    assert len(batches) == 3
    for batch in batches:
        assert torch.equal(batch.n_id[batch.edge_index], cora.edge_index[:, batch.e_id])  # each edge exists
        assert batch.e_id.unique().numel() == batch.e_id.numel()  # without replacement
        assert torch.equal(batch.x, cora.x[batch.n_id])
        sampled_in = torch.bincount(batch.edge_index[1], minlength=batch.n_id.numel())
        size = batch.batch_size
        seed_in = torch.clamp(in_degree[batch.n_id[:size]], max=LIVE_FANOUTS[0])
        assert torch.equal(sampled_in[:size], seed_in)  # min(k, degree) per seed
        assert int(sampled_in[size:].max()) <= LIVE_FANOUTS[1]
