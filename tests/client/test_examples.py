"""The example scripts run as a user runs them, against a live server."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import warm_launcher
from served import ServerProcess, ingest, requests_made, start_server

from gnnstore.ingest.generator import generate_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    """A graph whose nodes carry integer times (``time``), for temporal sampling."""
    graph = generate_graph(2000, 8.0, 16, 4, seed=1)
    graph.time = torch.randint(0, 10_000, (graph.num_nodes,), generator=torch.Generator().manual_seed(1))
    with start_server(ingest(graph, tmp_path_factory.mktemp("temporal") / "data"), "--read-only") as server:
        yield server


@pytest.mark.parametrize(
    "server, script, args, final",
    [
        ("homo_server", "node_classification.py", ["--epochs", "2", "--batch-size", "64"], "test accuracy"),
        ("homo_server", "node_classification.py",
         ["--epochs", "2", "--batch-size", "64", "--amp", "--accumulate", "2"], "test accuracy"),
        ("homo_server", "node_classification.py",
         ["--epochs", "2", "--batch-size", "64", "--wire-dtype", "bfloat16"], "test accuracy"),
        ("homo_server", "link_prediction.py", ["--epochs", "2", "--links", "600", "--batch-size", "128"],
         "validation AUC"),
        ("homo_server", "link_prediction.py",
         ["--epochs", "2", "--links", "600", "--batch-size", "128", "--amp", "--accumulate", "2"], "validation AUC"),
        ("temporal_server", "link_prediction.py",
         ["--epochs", "2", "--links", "2000", "--batch-size", "128", "--time-attr", "time"], "validation AUC"),
    ],
)
def test_example_trains_against_the_server_and_saves_its_report(
    request: pytest.FixtureRequest, server: str, script: str, args: list[str], final: str, tmp_path: Path
) -> None:
    address = request.getfixturevalue(server).address
    result = warm_launcher.run(
        [sys.executable, str(EXAMPLES / script), "--address", address, *args,
         "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1", "epoch 2"]
    assert all("batches/s" in line and "RSS " in line for line in epochs)
    losses = [float(line.split("loss ")[1].split()[0]) for line in epochs]
    assert losses[1] < losses[0]  # it learns, in mixed precision too
    assert final in lines[-2] and lines[-1].startswith("training report: ")
    (report,) = tmp_path.glob("*.json")
    assert [e["epoch"] for e in json.loads(report.read_text())["epochs"]] == [1, 2]
    assert report.with_suffix(".png").is_file()


def test_the_ddp_example_trains_every_seed_once_an_epoch_across_ranks(tmp_path: Path) -> None:
    graph = generate_graph(2000, 6.0, 16, 4, seed=0, train_ratio=0.6005)  # 1201 seeds: parts 601 and 600
    train = torch.nonzero(graph.train_mask).flatten()
    assert train.numel() % 2 == 1
    seeds_out = tmp_path / "seeds"
    seeds_out.mkdir()
    data_dir = ingest(graph, tmp_path / "data")
    with start_server(data_dir) as one, start_server(data_dir, "--replica", name="two") as two:  # primary, replica
        result = warm_launcher.run(  # the ranks' calls go round robin over both servers
            [sys.executable, str(EXAMPLES / "ddp_node_classification.py"), "--address", one.address, two.address,
             "--world-size", "2", "--epochs", "3", "--batch-size", "100",  # 7 batches on one rank, 6 on the other
             "--accumulate", "2", "--amp", "--seeds-out", str(seeds_out)],
            capture_output=True, text=True, timeout=600,
        )
        answered = [requests_made(s.address, "/gnnstore.v1.GraphService/SampleFromNodes") for s in (one, two)]
    assert result.returncode == 0, result.stderr[-3000:]
    assert min(answered) > 0, f"sampling calls answered by each server: {answered}"
    lines = result.stdout.strip().splitlines()
    losses = [float(line.split("loss ")[1].split(",")[0]) for line in lines if line.startswith("epoch")]
    assert len(losses) == 3 and losses[-1] < losses[0]  # the model trains
    assert json.loads(lines[-1])["val_accuracy"] > 0.5  # 4 classes: chance is about 0.25
    for epoch in (1, 2, 3):
        parts = [torch.load(seeds_out / f"epoch{epoch}-rank{rank}.pt") for rank in (0, 1)]
        assert {p.numel() for p in parts} == {600, 601}
        assert torch.equal(torch.cat(parts).sort().values, train)  # every seed once, across ranks
