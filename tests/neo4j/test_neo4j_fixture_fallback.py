"""Without Docker or Java the Neo4j fixture skips locally and fails in CI, never skipping there."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PROBE = '''
from neo4j_server import neo4j_server

def test_needs_neo4j(neo4j_server):
    assert neo4j_server
'''


@pytest.mark.parametrize(("ci", "outcome"), [("true", "1 error"), ("", "1 skipped")])
def test_no_neo4j_fails_in_ci_and_skips_elsewhere(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "CI": ci, "PATH": str(tmp_path), "DOCKER_HOST": "unix:///nonexistent.sock",
           "PYTHONPATH": str(TESTS), "GNNSTORE_CACHE": str(tmp_path / "cache")}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert outcome in result.stdout, result.stdout[-2000:]
    if ci:
        assert "Neo4j is required in CI" in result.stdout and result.returncode != 0
    else:
        assert "java is not on PATH" in result.stdout and result.returncode == 0
