"""The main job: ``gnnstore demo`` generates, ingests, serves, trains and stops its server."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import warm_launcher
from PIL import Image

from gnnstore.demo import DemoSettings, run_demo


def test_demo_trains_a_generated_graph_well_above_chance_and_leaves_its_report(tmp_path: Path) -> None:
    lines: list[str] = []
    settings = DemoSettings(nodes=2000, avg_degree=8.0, features=32, classes=8, epochs=3, batch_size=256,
                            target_accuracy=0.3)
    result = run_demo(settings, tmp_path / "data", tmp_path / "report", lines.append)
    assert result.test_accuracy > 3 / settings.classes, lines
    assert result.epochs[-1].loss < result.epochs[0].loss
    assert result.server_exit_code == 0
    assert any(line.startswith("gnnstore serving on 127.0.0.1:") for line in lines)
    epochs = [line for line in lines if line.startswith("epoch ") and "batches/s" in line]
    assert len(epochs) == 3 and all("stall " in line and "cache hits " in line for line in epochs)
    assert "one-time kernel compilation" in epochs[0] and "compilation" not in epochs[1]
    assert all(0.0 <= e.stall_fraction <= 1.0 and e.cache_hit_rate > 0 for e in result.epochs)
    assert result.epochs[-1].cache_hit_rate > 0.2  # 20% of the rows, hottest first

    json_path, png_path = result.report_files
    assert json_path.parent == png_path.parent == tmp_path / "report"
    assert f"training report: {json_path} and {png_path}" in lines[-1]
    report = json.loads(json_path.read_text())
    assert [e["epoch"] for e in report["epochs"]] == [1, 2, 3]
    assert all(e["rss_bytes"] > 50 * 2**20 and e["val_accuracy"] is not None for e in report["epochs"])
    assert report["flops_per_batch"] > 0
    assert 0 < report["time_to_target_s"] <= report["epochs"][-1]["elapsed_s"]  # 0.3 with 8 classes
    with Image.open(png_path) as image:
        assert image.size[0] > 500 and image.size[1] > 300


@pytest.mark.parametrize("verbose", [False, True])
def test_the_demo_command_shows_gnnstores_logs_only_when_verbose(tmp_path: Path, verbose: bool) -> None:
    args = ["--nodes", "600", "--epochs", "1", "--batch-size", "200", "--report-dir", str(tmp_path)]
    result = warm_launcher.run([sys.executable, "-m", "gnnstore", "demo", *args, *(["-v"] * verbose)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert ("INFO gnnstore." in result.stderr) == verbose, result.stderr
    assert f"training report: {tmp_path / 'gnnstore-demo-report.json'}" in result.stdout
    assert (tmp_path / "gnnstore-demo-report.png").is_file()
