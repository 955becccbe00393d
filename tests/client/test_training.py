"""Cora trained through the remote backend learns what it learns in-process."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pyg_views import features_of, graph_of
from served import ServerProcess, ingest, start_server
from torch import Tensor
from torch_geometric.data import Data, FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.ingest.planetoid import load_planetoid
from gnnstore.stores.data_dir import open_stores

TRAIN_FANOUTS = [10, 5]
EVAL_FANOUTS = [-1, -1]
EPOCHS = 15


@pytest.fixture(scope="module")
def cora(cora_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Data:
    """Cora with the public split, as PyG's Planetoid reads it."""
    return load_planetoid(cora_raw, "Cora")


@pytest.fixture(scope="module")
def cora_dir(cora: Data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cora ingested into real LadybugDB + RocksDB stores."""
    return ingest(cora, tmp_path_factory.mktemp("cora") / "data")


@pytest.fixture(scope="module")
def cora_server(cora_dir: Path) -> Iterator[ServerProcess]:
    """A read-only server over Cora (in-process readers may open the same folder)."""
    server = start_server(cora_dir, "--read-only")
    yield server
    server.stop()


def _row_normalised(x: Tensor) -> Tensor:
    return x / x.sum(-1, keepdim=True).clamp(min=1.0)


def _train_and_test(
    data: tuple[FeatureStore, GraphStore],
    make_sampler: callable,
    cora: Data,
) -> float:
    """Train GraphSAGE on the public split; the test accuracy at the best validation accuracy."""
    torch.manual_seed(0)
    ids = torch.arange(cora.num_nodes)
    model = GraphSAGE(cora.num_features, 64, 2, 7, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train = NodeLoader(data, node_sampler=make_sampler(TRAIN_FANOUTS), input_nodes=ids[cora.train_mask],
                       batch_size=35, shuffle=True)
    evaluator = make_sampler(EVAL_FANOUTS)

    @torch.no_grad()
    def accuracy(mask: Tensor) -> float:
        model.eval()
        correct = 0
        for batch in NodeLoader(data, node_sampler=evaluator, input_nodes=ids[mask], batch_size=500):
            out = model(_row_normalised(batch.x), batch.edge_index)[: batch.batch_size]
            correct += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
        return correct / int(mask.sum())

    best_val, best_test = -1.0, 0.0
    for epoch in range(1, EPOCHS + 1):
        model.train()
        for batch in train:
            optimizer.zero_grad()
            out = model(_row_normalised(batch.x), batch.edge_index)[: batch.batch_size]
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            optimizer.step()
        if epoch % 5 == 0:
            val = accuracy(cora.val_mask)
            if val > best_val:
                best_val, best_test = val, accuracy(cora.test_mask)
    return best_test


def test_cora_remote_matches_in_process(cora: Data, cora_dir: Path, cora_server: ServerProcess, tmp_path: Path) -> None:
    fs, gs = connect(cora_server.address)
    remote = _train_and_test(
        (fs, gs), lambda fanouts: RemoteNeighborSampler(fs, fanouts, feature_store=fs), cora
    )
    with open_stores(cora_dir, read_only=True) as stores:
        snapshot = build_snapshot(stores.graph_store, tmp_path / "snapshots")
        local = _train_and_test(
            (features_of(stores), graph_of(stores)),
            lambda fanouts: SnapshotNeighborSampler(snapshot, fanouts),
            cora,
        )
    assert remote >= 0.78, f"remote GraphSAGE reached only {remote:.3f} on Cora"
    assert abs(remote - local) <= 0.02, f"remote {remote:.3f} vs in-process {local:.3f}"

