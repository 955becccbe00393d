"""The main job: ``gnnstore demo`` generates, ingests, serves, trains and stops its server."""
from __future__ import annotations

from pathlib import Path

from gnnstore.demo import DemoSettings, run_demo


def test_demo_trains_a_generated_graph_well_above_chance(tmp_path: Path) -> None:
    lines: list[str] = []
    settings = DemoSettings(nodes=2000, avg_degree=8.0, features=32, classes=8, epochs=3, batch_size=256)
    result = run_demo(settings, tmp_path / "data", lines.append)
    assert result.test_accuracy > 3 / settings.classes, lines
    assert result.epochs[-1].loss < result.epochs[0].loss
    assert result.server_exit_code == 0
    assert any(line.startswith("gnnstore serving on 127.0.0.1:") for line in lines)
    epochs = [line for line in lines if line.startswith("epoch ") and "batches/s" in line]
    assert len(epochs) == 3 and all("stall " in line and "cache hit rate " in line for line in epochs)
    assert all(0.0 <= e.stall_fraction <= 1.0 and e.cache.hits > 0 for e in result.epochs)
    assert result.epochs[-1].cache.hit_rate > 0.2  # 20% of the rows, hottest first
