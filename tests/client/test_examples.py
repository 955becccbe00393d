"""The example scripts run as a user runs them, against a live server."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnstore.ingest.generator import generate_graph
from served import ServerProcess, ingest, start_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "script, args, last_line",
    [
        ("node_classification.py", ["--epochs", "1", "--batch-size", "64"], "test accuracy"),
        ("link_prediction.py", ["--epochs", "1", "--links", "600", "--batch-size", "128"], "validation AUC"),
    ],
)
def test_example_trains_against_the_server(
    homo_server: ServerProcess, script: str, args: list[str], last_line: str
) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--address", homo_server.address, *args],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("epoch 1: loss ")
    assert last_line in lines[-1]


def test_the_ddp_example_trains_every_seed_once_an_epoch_across_ranks(tmp_path: Path) -> None:
    graph = generate_graph(2000, 6.0, 16, 4, seed=0, train_ratio=0.6005)  # 1201 seeds: parts 601 and 600
    train = torch.nonzero(graph.train_mask).flatten()
    assert train.numel() % 2 == 1
    seeds_out = tmp_path / "seeds"
    seeds_out.mkdir()
    with start_server(ingest(graph, tmp_path / "data"), "--read-only") as server:
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "ddp_node_classification.py"), "--address", server.address,
             "--world-size", "2", "--epochs", "3", "--batch-size", "100",  # 7 batches on one rank, 6 on the other
             "--accumulate", "2", "--amp", "--seeds-out", str(seeds_out)],
            capture_output=True, text=True, timeout=600,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    losses = [float(line.split("loss ")[1].split(",")[0]) for line in lines if line.startswith("epoch")]
    assert len(losses) == 3 and losses[-1] < losses[0]  # the model trains
    assert json.loads(lines[-1])["val_accuracy"] > 0.5  # 4 classes: chance is about 0.25
    for epoch in (1, 2, 3):
        parts = [torch.load(seeds_out / f"epoch{epoch}-rank{rank}.pt") for rank in (0, 1)]
        assert {p.numel() for p in parts} == {600, 601}
        assert torch.equal(torch.cat(parts).sort().values, train)  # every seed once, across ranks
