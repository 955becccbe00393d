"""The example scripts run as a user runs them, against a live server."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from served import ServerProcess

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
